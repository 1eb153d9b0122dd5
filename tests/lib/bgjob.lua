--- A program started in the background by a test that signals it mid-way (tests/lua/signals_steps_test.lua):
-- its stdout, stderr and exit status land in files of its own directory, so the test can watch what it writes
-- while it runs, send it a signal at an event, and read how it ended.
local proc = require("odp.proc")
local sys = require("odp.sys")

local M = {}

--- A word for sh -c.
function M.quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local q = M.quote

--- sh -c cmd -> odp.proc.run's result (raises when sh cannot start).
function M.sh(cmd, timeout)
  return assert(proc.run { "sh", "-c", cmd, timeout = timeout or 30 })
end

--- Polls f() every 20 ms until it returns a true value (the event itself: a file, a line, a process); returns
--- it, or raises after timeout seconds naming what.
function M.wait_until(what, timeout, f)
  local deadline = sys.now() + timeout
  repeat
    local v = f()
    if v then return v end
    sys.sleep(0.02)
  until sys.now() > deadline
  error(("%s: not within %ss"):format(what, timeout), 0)
end

local Job = {}
Job.__index = Job

--- Starts argv (odp) in the background (env: extra variables) with dir/out, dir/err and, once it ended, dir/rc;
--- returns once it catches SIGINT (or has already ended). -> a Job {pid, dir}.
function M.start(argv, dir, env)
  local words, e = {}, {}
  for i, a in ipairs(argv) do words[i] = q(a) end
  for k, v in pairs(env or {}) do e[#e + 1] = k .. "=" .. q(v) end
  M.sh(("( ( %s exec %s >%s/out 2>%s/err ) & echo $! >%s/pid; wait $!; echo $? >%s/rc.tmp; mv %s/rc.tmp %s/rc ) " ..
    ">/dev/null 2>&1 &"):format(#e > 0 and ("export " .. table.concat(e, " ") .. ";") or "", table.concat(words, " "),
    q(dir), q(dir), q(dir), q(dir), q(dir), q(dir)))
  local pid = M.wait_until("the background program's pid", 10, function()
    return (sys.read_file(dir .. "/pid") or ""):match("%d+")
  end)
  -- a signal sent before odp catches SIGINT is lost (a background shell child ignores it, and odp inherits
  -- that until it sets its handler): its status's SigCgt has SIGINT's bit (1 << 1) once it is there
  M.wait_until("the background program to catch SIGINT", 10, function()
    local st = sys.read_file("/proc/" .. pid .. "/status")
    local caught = st and st:match("\nSigCgt:%s*%x*(%x)\n")
    return st == nil or (caught and tonumber(caught, 16) & 2 ~= 0)
  end)
  return setmetatable({ pid = pid, dir = dir }, Job)
end

--- Sends signal sig (a name: "INT", "TERM", ...) to the program alone.
function Job:kill(sig) M.sh(("kill -%s %s"):format(sig, self.pid)) end

--- The program's exit status once it ended (raises after timeout seconds).
function Job:status(timeout)
  return tonumber(M.wait_until("the background program to exit", timeout or 60, function()
    return (sys.read_file(self.dir .. "/rc") or ""):match("%d+")
  end))
end

function Job:stderr() return sys.read_file(self.dir .. "/err") or "" end
function Job:stdout() return sys.read_file(self.dir .. "/out") or "" end

return M
