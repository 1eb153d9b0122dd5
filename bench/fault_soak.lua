-- Fault soak: one long SSH sweep on a private loopback sshd (tests/lib/sshd.lua) while faults strike at random
-- (seeded): the connections killed, sshd down for 1-8 s and restarted on the same port and host keys, the
-- session processes stopped (SIGSTOP) for 3 s. Then the same command again (resume) until every point has
-- its record. Prints what was injected and what the records say: points lost or run twice (must be 0), points
-- failed per fault, the causes, partial uploads left on the board, the time. The CI-sized cases are
-- tests/lua/faults_test.lua; this is the long run.
--   ODP_REAL_RUNNER=.../executor_runner sh bench/fault_soak.sh [POINTS] [SEED]
local sshd = require("sshd")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sys = require("odp.sys")

local root = require("odp.host").root
local odp = root .. "/build/odp"
local points = tonumber(arg and arg[1]) or 300
local seed = tonumber(arg and arg[2]) or 1
local runner = os.getenv("ODP_REAL_RUNNER")
assert(runner and sys.stat(runner), "no real executor_runner: set ODP_REAL_RUNNER")
local add = root .. "/tests/fixtures/pte/add_arduino.pte"

local state = seed
local function rnd() -- an LCG: the same seed, the same faults at the same moments
  state = (state * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
  return (state >> 11) / (1 << 52)
end

local dir = sshd.sh("mktemp -d /tmp/odp-soak.XXXXXX"):match("%S+")
local srv = sshd.start()
local cfg = dir .. "/ssh_config"
local f = assert(io.open(cfg, "w"))
f:write(("Host soakboard\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  ServerAliveInterval 1\n  ServerAliveCountMax 2\n")
  :format(srv.port, srv.user))
f:close()
local values = {}
for i = 1, points do values[i] = tostring(1000 + i) end
local out = dir .. "/soak.jsonl"
local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua", "--host", "soakboard",
  "--ssh-config", cfg, "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--runner", runner, "--model",
  add, "--runs-dir", dir .. "/runs", "--remote-dir", srv.remote_dir .. "/soak", "--reconnect-timeout", "30",
  "-p", "num_executions=" .. table.concat(values, ","), "--out", out, "--no-history" }

local function q(s) return sshd.quote(s) end
local function records()
  local t = {}
  local fh = io.open(out)
  if not fh then return t end
  for l in fh:lines() do t[#t + 1] = json.decode(l) end
  fh:close()
  return t
end

local function sessions(filter)
  return sshd.sh(("desc() { local c; for c in $(pgrep -P \"$1\"); do desc \"$c\"; echo \"$c\"; done; }; " ..
    "for p in $(desc %d); do case \"$(cat /proc/$p/comm 2>/dev/null)\" in %s) echo $p;; esac; done; true")
    :format(srv.pid, filter)):gsub("\n", " ")
end

local injected = { drop = 0, reboot = 0, stop = 0 }
local t0 = sys.now()
local runs = 0
local done = false
local stderr_all = {}
while not done do
  runs = runs + 1
  local words = {}
  for i, a in ipairs(argv) do words[i] = q(a) end
  local rc_file, err_file = dir .. "/rc", dir .. "/err" .. runs
  os.remove(rc_file)
  sshd.sh(("( %s >/dev/null 2>%s; echo $? >%s.tmp; mv %s.tmp %s ) >/dev/null 2>&1 &"):format(table.concat(words, " "),
    q(err_file), q(rc_file), q(rc_file), q(rc_file)))
  -- faults until this run ends, only in the first run (the resumes finish the job)
  while not sys.stat(rc_file) do
    sys.sleep(0.5 + rnd() * 3)
    if runs == 1 and not sys.stat(rc_file) and #records() > 0 then
      local which = rnd()
      if which < 0.4 then
        injected.drop = injected.drop + 1
        local ps = sessions("sshd*")
        if ps:match("%d") then sshd.sh("kill -KILL " .. ps .. " 2>/dev/null; true") end
      elseif which < 0.7 then
        injected.reboot = injected.reboot + 1
        srv:crash()
        sys.sleep(1 + rnd() * 7)
        srv:restart()
      else
        injected.stop = injected.stop + 1
        local ps = sessions("sshd*")
        if ps:match("%d") then
          sshd.sh("kill -STOP " .. ps .. " 2>/dev/null; true")
          sys.sleep(3)
          sshd.sh("kill -KILL " .. ps .. " 2>/dev/null; kill -CONT " .. ps .. " 2>/dev/null; true")
        end
      end
    end
  end
  stderr_all[#stderr_all + 1] = io.open(err_file):read("a")
  local ok = 0
  for _, r in ipairs(records()) do if r.ok then ok = ok + 1 end end
  done = ok >= points or runs >= 10
end
local took = sys.now() - t0

local seen, dup, failed, causes = {}, 0, 0, {}
for _, r in ipairs(records()) do
  local k = r.params.num_executions
  if r.ok then
    if seen[k] then dup = dup + 1 end
    seen[k] = true
  else
    failed = failed + 1
    local c = r.error.code .. ": " .. (r.error.message:match("not run again") and "not run again (in flight)" or
      r.error.message:match("not back after") and "not back in time" or r.error.message:sub(1, 60))
    causes[c] = (causes[c] or 0) + 1
  end
end
local lost = 0
for i = 1, points do if not seen[1000 + i] then lost = lost + 1 end end
local left = sshd.sh(("ls -a %s %s/.odp 2>/dev/null | grep -c -F .odp-part- || true"):format(q(srv.remote_dir .. "/soak"),
  q(srv.remote_dir .. "/soak"))):match("%d+")
local text = table.concat(stderr_all)
print(("points %d, seed %d: %d odp runs (1 + resumes), %.0f s"):format(points, seed, runs, took))
print(("faults injected: %d connections killed, %d sshd down 1-8 s, %d sessions stopped 3 s"):format(injected.drop,
  injected.reboot, injected.stop))
print(("records: %d ok points, %d lost, %d run twice, %d failed records (resumed)"):format(points - lost, lost, dup,
  failed))
for c, n in pairs(causes) do print(("  failed: %d x %s"):format(n, c)) end
print(("'dropped' lines %d, 'is back' lines %d, Lua errors %d; partial uploads left on the board: %s"):format(
  select(2, text:gsub("dropped %(", "")), select(2, text:gsub("is back after", "")),
  select(2, text:gsub("stack traceback", "")) + select(2, text:gsub("closed odp%.ssh%.Session", "")), left))
srv:close()
sshd.sh("rm -rf " .. q(dir))
