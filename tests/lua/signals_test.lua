-- How odp ends (docs/signals.md): SIGHUP (a closed terminal) and SIGTERM end it as cleanly as Ctrl-C, with
-- exit status 128+signal; SIGKILL leaves nothing it started running for long (the twin's lifeline). Peers:
-- the test runner on this machine and over the loopback sshd, the QEMU twin, a real terminal (tmux).
local T = require("t")
local sshd = require("sshd")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local q = sshd.quote

local function sh(cmd, timeout)
  return assert(proc.run { "sh", "-c", cmd, timeout = timeout or 30 })
end

-- Polls for a condition (the event itself: a file, a process), up to timeout seconds.
local wait_until = require("bgjob").wait_until

-- A file's text, or nil while it does not exist yet.
local function read(path) return (sys.read_file(path)) end

-- A zombie is gone too: a daemon's parent is the nearest subreaper (this test's odp), which reaps it only
-- when it next waits for a child.
local function alive(pid)
  local st = sh("ps -o stat= -p " .. pid .. " || true").stdout:match("%S+")
  return st ~= nil and not st:find("^Z")
end

-- Starts argv in the background with its own output files in dir; returns {pid = odp's pid, dir}. The
-- exit status lands in dir/rc when it ends (the shell that started it waits for it).
local function background(argv, dir, env)
  local words = {}
  for i, a in ipairs(argv) do words[i] = q(a) end
  local e = {}
  for k, v in pairs(env or {}) do e[#e + 1] = k .. "=" .. q(v) end
  sh(("( %s %s >%s/out 2>%s/err & echo $! >%s/pid; wait $!; echo $? >%s/rc.tmp; mv %s/rc.tmp %s/rc ) " ..
    ">/dev/null 2>&1 &"):format(table.concat(e, " "), table.concat(words, " "), q(dir), q(dir), q(dir), q(dir),
    q(dir), q(dir)))
  local pid = wait_until("the background odp's pid", 10, function()
    local s = read(dir .. "/pid")
    return s and s:match("%d+")
  end)
  return { pid = pid, dir = dir }
end

local function exit_status(job, timeout)
  return tonumber(wait_until("odp to exit", timeout or 30, function()
    local s = read(job.dir .. "/rc")
    return s and s:match("%d+")
  end))
end

-- The pid of the first process running the program at path (unique to the test): its argv[0] is path.
local function pid_of(path)
  local r = sh("pgrep -f -- " .. q("^" .. path .. " ") .. " | head -1")
  return r.stdout:match("%d+")
end

-- The pattern (for pid_of) of a runner odp staged in remote dir rd: it runs from odp's own directory there
-- (docs/devices.md "A shared board").
local function on_board(rd, name) return rd .. "/[.]odp/runs/[^/]*/" .. name end

-- What is left of a process group, zombies aside (their parent, this test's odp as the subreaper, reaps them
-- only when it next waits), or nil.
local function group_left(pgid)
  local left = sh(("ps -eo pgid=,stat=,pid=,args= | awk '$1 == %d && $2 !~ /^Z/'"):format(pgid)).stdout
  return left:match("%S") and left or nil
end

-- A copy of the test runner under a name unique to this test, so its processes can be found.
local function own_runner(dir, name)
  local path = dir .. "/" .. name
  sh(("cp %s %s && chmod 755 %s"):format(q(build .. "/tests/fake_runner"), q(path), q(path)))
  return path
end

local function one_record(runs_dir)
  local r = sh("ls " .. q(runs_dir) .. "/*/result.json")
  local path = r.stdout:match("[^\n]+")
  return path and assert(json.decode(read(path)))
end

-- odp running the test runner on this machine, hanging with a grandchild that ignores SIGTERM.
local function hanging_host_run(runner, dir)
  return background({ odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", add,
    "--runs-dir", dir .. "/runs" }, dir, { ODP_FAKE_MODE = "hang_tree" })
end

T.test("SIGTERM during a host run: the runner's group is killed, an ECANCELED record is saved, exit 143", function()
  local dir = T.tmpdir()
  local runner = own_runner(dir, "runner_term_" .. sys.getpid())
  local job = hanging_host_run(runner, dir)
  local rpid = wait_until("the runner to start", 20, function() return pid_of(runner) end)
  local pgid = sh("ps -o pgid= -p " .. rpid).stdout:match("%d+")
  T.ok(pgid, "the runner's process group")
  sh("kill -TERM " .. job.pid)
  T.eq(exit_status(job), 143, read(dir .. "/err"))
  T.eq(group_left(pgid), nil, "nothing of the runner's group is left")
  local rec = one_record(dir .. "/runs")
  T.eq(rec.ok, false); T.eq(rec.error.code, "ECANCELED"); T.eq(rec.error.exit, 143)
  -- the progress line, then odp's one line: the step it cut
  T.eq(read(dir .. "/err"), "run: add_arduino.pte x1\nodp: ECANCELED: run: interrupted; runner killed\n")
end)

------------------------------------------------------------------------------------------------ any moment

-- Case directories outside /tmp: each odp below runs in a mount namespace of its own whose /tmp is an empty
-- directory of the case, so what odp leaves in /tmp (the host helper's report, a compiler's cc*.s), whatever
-- ends it, is there to see, and other users' files in the machine's /tmp are not.
local cases = root .. "/tests/.tmp/signals-" .. sys.getpid()
T.at_done(function() sh("rm -rf " .. q(cases)) end)
local ncase = 0
local function case_dir()
  ncase = ncase + 1
  local d = cases .. "/" .. ncase
  sh("mkdir -p " .. q(d .. "/tmp"))
  return d
end
local function private_tmp(d, argv)
  local a = { "unshare", "-m", "--propagation", "private", "sh", "-c", 'mount --bind "$0" /tmp && exec "$@"',
    d .. "/tmp" }
  return table.move(argv, 1, #argv, #a + 1, a)
end

-- Drives `odp run ARGS`, interrupting it after K Lua instructions (a count hook), as a signal coming there would:
-- "flag" asks every wait to stop as a Ctrl-C does (odp.wait.interrupt, what odp's signal handler calls);
-- "raise" also cuts the Lua code where it is, as a second Ctrl-C does (odp's interrupt hook raises that
-- failure). The hook writes MARK when it fires. "count" runs ARGS and says how many instructions it took.
local DRIVER = [[
local k, mark, mode = tonumber(arg[1]), arg[2], arg[3]
local n, fired = 0, false
debug.sethook(function()
  n = n + 1000
  if mode == "count" or fired or n < k then return end
  fired = true
  local f = assert(io.open(mark, "w")) f:write("fired\n") f:close()
  require("odp.wait").interrupt()
  if mode == "raise" then require("odp.core.errors").fail("ECANCELED", "interrupted again") end
end, "", 1000)
local code = require("odp.cli.commands.run").main(table.move(arg, 4, #arg, 1, {}))
if mode == "count" then io.stderr:write("instructions ", n, "\n") end
return code
]]

local function cat(...)
  local out = {}
  for _, list in ipairs({ ... }) do table.move(list, 1, #list, #out + 1, out) end
  return out
end

-- What an interrupted `odp run ... -q` must leave: its exit status `want` (0 only when the signal never came,
-- came = "never", or came after the record was saved, came = "late"), one line on stderr (odp: ECANCELED: ...) and no traceback, a record that says ECANCELED
-- with the signal's exit (or a whole one, for a signal that came after it was saved), nothing in /tmp, no
-- runner of the case left. came = "maybe": the signal may have come before odp had its handlers (the shell
-- then says 128+signal, and odp nothing); "again": as a second Ctrl-C. Returns the record or nil.
local function judge(d, st, want, runner, came)
  local err = read(d .. "/err") or ""
  local what = ("case %s (exit %s): %s"):format(d:match("[^/]*$"), tostring(st), err)
  T.eq(pid_of(runner), nil, "no runner of this case left: " .. what)
  T.eq(sh("ls -A " .. q(d .. "/tmp")).stdout, "", "nothing left in /tmp: " .. what)
  local rec = one_record(d .. "/runs")
  if st == 0 then
    T.ok(came == "never" or came == "late", "exit 0 only when the signal never came, or came after the " ..
      "record was saved (odp may be past its last look): " .. what)
    T.eq(rec and rec.ok, true, "a whole record")
    return rec
  end
  T.eq(st, want, what)
  T.eq(err:find("traceback", 1, true), nil, "no traceback: " .. what)
  if err == "" and came == "maybe" and not rec then return nil end -- ended before odp's handlers existed
  T.eq(select(2, err:gsub("\n", "")), 1, "one line: " .. what)
  T.match(err, "^odp: ECANCELED: [^\n]+\n$", what)
  if rec and rec.ok then
    T.match(err, "as the command ended", "a whole record only for a signal that came after it: " .. what)
  elseif rec then
    T.eq({ rec.error.code, rec.error.exit }, { "ECANCELED", want }, "the record: " .. what)
    T.ok(err:find(rec.error.message, 1, true), "the line is the record's error: " .. what)
    -- (a second Ctrl-C may cut a parser where it is: what the record then holds of the run is its own)
    local lat = rec.latency_ms
    T.ok(came == "again" or lat == nil or lat.n % 3 == 0, ("latency from whole processes (3 iterations each, " ..
      "not %s): %s"):format(lat and lat.n, what))
  end
  return rec
end

-- The real runner under a name unique to the case (a hard link where it can), so its processes can be found.
local function own_real_runner(d, real)
  local path = d .. "/executor_runner_sig"
  sh(("ln %s %s 2>/dev/null || cp %s %s"):format(q(real), q(path), q(real), q(path)))
  return path
end

local function host_args(d, runner, repeats)
  return { root .. "/scripts/host.lua", "--runner", runner, "--model", root .. "/tests/fixtures/pte/mlp.pte",
    "-n", "3", "--repeat", tostring(repeats or 2), "--runs-dir", d .. "/runs", "-q" }
end

-- Whether the background job's odp still runs (not gone, no zombie): a signal sent now comes to it.
local function running(job)
  local st = sh("ps -o stat= -p " .. job.pid .. " || true").stdout:match("%S+")
  return st ~= nil and not st:find("^Z")
end

T.with_real_runner("a Ctrl-C at any moment of a host run (a hook at every 1000 Lua instructions, swept over the run): exit 130, one line, an ECANCELED record, nothing left", function(real)
  sh("mkdir -p " .. q(cases))
  local driver = cases .. "/driver.lua"
  T.write(driver, DRIVER)
  local d = case_dir()
  local r = proc.run { argv = cat({ odp, "run", driver, "0", "-", "count" }, host_args(d, own_real_runner(d, real))),
    timeout = 120 }
  T.eq(r.status, 0, r.stderr)
  local total = tonumber(r.stderr:match("instructions (%d+)"))
  T.ok(total and total > 10000, "the run's instruction count: " .. r.stderr)
  local where = {}
  for _, mode in ipairs({ { "flag", 10 }, { "raise", 4 } }) do
    for i = 1, mode[2] do
      local c = case_dir()
      local runner = own_real_runner(c, real)
      local k = total * i // (mode[2] + 1)
      local job = background(private_tmp(c, cat({ odp, "run", driver, tostring(k), c .. "/mark", mode[1] },
        host_args(c, runner))), c)
      local came = not read(c .. "/mark") and "never" or mode[1] == "raise" and "again" or nil
      local rec = judge(c, exit_status(job, 120), 130, runner, came)
      if rec and not rec.ok then where[rec.error.message:match("^([^:]+):")] = true end
    end
  end
  T.ok(where.run, "some interruptions cut the run step")
  T.ok(next(where, next(where)) ~= nil, "and some others cut the run elsewhere")
end)

T.with_real_runner("SIGINT, SIGTERM, SIGHUP to odp alone across a host run (a sweep of delays): 130/143/129, one line, the record, nothing left", function(real)
  local d = case_dir()
  local t0 = sys.now()
  local r = proc.run { argv = private_tmp(d, cat({ odp, "run" }, host_args(d, own_real_runner(d, real)))),
    timeout = 120 }
  local wall = sys.now() - t0
  T.eq(r.status, 0, r.stderr)
  for _, sig in ipairs({ { "INT", 130 }, { "TERM", 143 }, { "HUP", 129 } }) do
    for i = 0, 4 do
      local c = case_dir()
      local runner = own_real_runner(c, real)
      local job = background(private_tmp(c, cat({ odp, "run" }, host_args(c, runner))), c)
      sys.sleep(wall * i / 5)
      local came, sent = "never", nil
      if running(job) then
        came = i == 0 and "maybe" or nil
        sent = tonumber(sh(("date +%%s.%%N; kill -%s %s 2>/dev/null || true"):format(sig[1], job.pid)).stdout
          :match("^[%d.]+"))
      end
      local st = exit_status(job, 60)
      -- exit 0 after a signal: only if odp had saved its record before it (then it may be past its last look)
      local saved = st == 0 and sent and sh(("stat -c %%.9Y %s/runs/*/result.json 2>/dev/null || true"):format(q(c)))
        .stdout:match("^[%d.]+")
      if saved and tonumber(saved) <= sent then came = "late" end
      judge(c, st, sig[2], runner, came)
    end
  end
end)

T.with_real_runner("Ctrl-C while the second runner process runs: the record keeps the latency of those that finished", function(real)
  local d = case_dir()
  local runner = own_real_runner(d, real)
  local job = background(private_tmp(d, cat({ odp, "run" }, host_args(d, runner, 3))), d)
  -- the runners' pids as they come: the second one's start is the moment
  local first = wait_until("the first runner", 60, function() return pid_of(runner) end)
  wait_until("the second runner", 60, function()
    local p = pid_of(runner)
    return p and p ~= first
  end)
  sh("kill -INT " .. job.pid)
  local rec = judge(d, exit_status(job, 60), 130, runner)
  -- each process started wrote its runN.stdout; the one the signal cut ("runner killed") is not measured
  local started = select(2, sh("ls " .. q(rec.artifacts.run_dir)).stdout:gsub("run%d+%.stdout", ""))
  local finished = started - (rec.error.message:find("runner killed", 1, true) and 1 or 0)
  T.ok(finished >= 1 and finished < 3, ("one or two processes finished before the signal (%d)"):format(finished))
  T.eq(rec.latency_ms and rec.latency_ms.n, 3 * finished, "the finished processes' iterations, measured")
end)

T.with_real_runner("the same signal twice at once (as timeout(1) sends it: to odp, then to its group) counts once: the run step is cut as by one", function(real)
  for _, sig in ipairs({ { "INT", 130 }, { "TERM", 143 } }) do
    local d = case_dir()
    local runner = own_real_runner(d, real)
    local job = background(private_tmp(d, cat({ odp, "run" }, host_args(d, runner, 3))), d)
    wait_until("the first runner", 60, function() return pid_of(runner) end)
    sh(("kill -%s %s; kill -%s %s"):format(sig[1], job.pid, sig[1], job.pid))
    local rec = judge(d, exit_status(job, 60), sig[2], runner)
    T.eq(read(d .. "/err"), "odp: ECANCELED: run: interrupted; runner killed\n", "not taken for a second one")
    T.eq(rec and rec.error.code, "ECANCELED")
  end
end)

local srv = sshd.start()

-- The same over SSH: the board is this machine, the runner runs from the remote dir rd.
local function hanging_ssh_run(rd, dir)
  return background({ odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts,
    "--remote-dir", rd, "--runner", build .. "/tests/fake_runner", "--model", add, "--runs-dir", dir .. "/runs",
    "--", "--fake_mode=hang_tree" }, dir)
end

T.with_real_runner("a Ctrl-C at any moment of a run over SSH (the hook swept over its Lua instructions): exit 130, one line, the record, nothing left here or on the board", function(real)
  local driver = cases .. "/driver.lua"
  local function ssh_args(c, runner, rd)
    -- the key and known_hosts in the case dir: odp's /tmp is the case's own
    sh(("cp %s %s/id && cp %s %s/known_hosts && chmod 600 %s/id"):format(q(srv.identity), q(c), q(srv.known_hosts),
      q(c), q(c)))
    return { root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1", "--port", tostring(srv.port),
      "--identity", c .. "/id", "--known-hosts", c .. "/known_hosts", "--remote-dir", rd, "--runner", runner,
      "--model", root .. "/tests/fixtures/pte/mlp.pte", "-n", "3", "--repeat", "2", "--runs-dir", c .. "/runs", "-q" }
  end
  local d = case_dir()
  local rd0 = srv.remote_dir .. "/sweep-0-" .. sys.getpid()
  local r = proc.run { argv = cat({ odp, "run", driver, "0", "-", "count" }, ssh_args(d, own_real_runner(d, real), rd0)),
    timeout = 120 }
  T.eq(r.status, 0, r.stderr)
  local total = tonumber(r.stderr:match("instructions (%d+)"))
  T.ok(total and total > 10000, "the run's instruction count: " .. r.stderr)
  for _, mode in ipairs({ { "flag", 7 }, { "raise", 3 } }) do
    for i = 1, mode[2] do
      local c = case_dir()
      local rd = ("%s/sweep-%s-%d-%d"):format(srv.remote_dir, mode[1], i, sys.getpid())
      local k = total * i // (mode[2] + 1)
      local job = background(private_tmp(c, cat({ odp, "run", driver, tostring(k), c .. "/mark", mode[1] },
        ssh_args(c, own_real_runner(c, real), rd))), c)
      local came = not read(c .. "/mark") and "never" or mode[1] == "raise" and "again" or nil
      judge(c, exit_status(job, 120), 130, rd .. "/executor_runner_sig", came)
      -- on the board: no helper or runner of this odp's, no partial upload (it is removed as odp stops)
      -- ([/]: the pattern must not match the shell running pgrep)
      wait_until("the board's processes of the case to end", 10, function()
        return sh("pgrep -f -- " .. q("[/]" .. rd:sub(2)) .. " || true").stdout == ""
      end)
      T.eq(sh("ls -A " .. q(rd) .. " 2>/dev/null | grep -F .odp-part- || true").stdout, "", "no partial file")
    end
  end
end)

for _, sig in ipairs({ { "HUP", 129 }, { "TERM", 143 } }) do
  T.test(("SIG%s during a run over SSH: the runner's process group is gone on the board, exit %d"):format(sig[1], sig[2]), function()
    local dir = T.tmpdir()
    local rd = srv.remote_dir .. "/sig_" .. sig[1] .. "_" .. sys.getpid()
    local job = hanging_ssh_run(rd, dir)
    -- the board is this machine: the runner runs from the remote dir
    local rpid = wait_until("the runner to start on the board", 30,
      function() return pid_of(on_board(rd, "fake_runner")) end)
    local pgid = sh("ps -o pgid= -p " .. rpid).stdout:match("%d+")
    sh("kill -" .. sig[1] .. " " .. job.pid)
    T.eq(exit_status(job), sig[2], read(dir .. "/err"))
    T.eq(group_left(pgid), nil, "the runner's group on the board")
    T.eq(pid_of(on_board(rd, "fake_runner")), nil, "no runner of this run left on the board")
    local rec = one_record(dir .. "/runs")
    T.eq({ rec.error and rec.error.code, rec.error and rec.error.exit }, { "ECANCELED", sig[2] })
  end)
end

T.test("SIGKILL of odp mid-run, here and over SSH: the runners' groups end with it (odp-rusage's parent-death signal), nothing of odp's is left in /tmp", function()
  local dir = case_dir()
  local runner = own_runner(dir, "runner_kill_" .. sys.getpid())
  local job = background(private_tmp(dir, { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model",
    add, "--runs-dir", dir .. "/runs" }), dir, { ODP_FAKE_MODE = "hang_tree" })
  local rd = srv.remote_dir .. "/sig_KILL_" .. sys.getpid()
  local dir2 = T.tmpdir()
  local job2 = hanging_ssh_run(rd, dir2)
  local groups = {}
  for i, path in ipairs({ runner, on_board(rd, "fake_runner") }) do
    local rpid = wait_until("the runner to start", 30, function() return pid_of(path) end)
    groups[i] = sh("ps -o pgid= -p " .. rpid).stdout:match("%d+")
  end
  sh("kill -KILL " .. job.pid .. " " .. job2.pid)
  for i, where in ipairs({ "here", "on the board" }) do
    wait_until("the runner's group " .. where .. " to end", 10, function() return not group_left(groups[i]) end)
  end
  -- the host helper's report file (it was /tmp/lua_*, which no one removed after a SIGKILL) has no name
  T.eq(sh("ls -A " .. q(dir .. "/tmp")).stdout, "", "nothing left in odp's /tmp")
end)

T.test("a sweep interrupted by SIGHUP keeps its finished points, exits 129 and resumes like after Ctrl-C", function()
  local dir = T.tmpdir()
  local out = dir .. "/s.jsonl"
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/tests/flows/toy.lua",
    "-p", "size=1,2,3,4,5,6", "--delay", "0.5", "--out", out, "-q" }
  local job = background(argv, dir)
  wait_until("the first point in the file", 20, function() return (read(out) or ""):find("\n") end)
  sh("kill -HUP " .. job.pid)
  T.eq(exit_status(job), 129, read(dir .. "/err"))
  T.match(read(dir .. "/err"), "interrupted after %d+ of 6")
  local kept = select(2, read(out):gsub("\n", ""))
  T.ok(kept >= 1 and kept < 6, ("some points finished, not all (%d)"):format(kept))
  T.eq(T.flock_holder(out), nil, "the lock went with the interrupted sweep")
  argv.timeout = 60
  local r = proc.run(argv)
  T.eq(r.status, 0, r.stderr)
  local sizes = {}
  for l in read(out):gmatch("[^\n]+") do
    local rec = assert(json.decode(l))
    T.eq(sizes[rec.params.size], nil, "point " .. rec.params.size .. " ran once")
    sizes[rec.params.size] = true
  end
  for s = 1, 6 do T.ok(sizes[s], "point " .. s .. " is in the file") end
end)

------------------------------------------------------------------------------------------------ the twin

local tmp = T.tmpdir()
local sock = tmp .. "/tmux.sock"
local function tmux(...) return assert(proc.run { argv = { "tmux", "-S", sock, ... }, timeout = 10 }) end
-- a test that fails before its own kill-server must not leave the terminal, odp and its twin running
T.at_done(function() proc.run { argv = { "tmux", "-S", sock, "kill-server" }, timeout = 10 } end)
local function screen() return tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "odp").stdout end

-- The twin of a state dir: its QEMU pid and its shared DDR file.
local function twin_of(state)
  local pid = wait_until("the twin's pid file", 120, function() return (read(state .. "/pid") or ""):match("%d+") end)
  local shm = (read(state .. "/shm") or ""):match("%S+")
  T.ok(shm and sys.stat(shm), "the twin's DDR file exists: " .. tostring(shm))
  return pid, shm
end

local function twin_gone(pid, shm, timeout, what)
  wait_until(what, timeout, function() return not alive(pid) and not sys.stat(shm) end)
end

T.test("a closed terminal ends a REPL holding the twin: its QEMU and DDR file are gone within 5 s", function()
  local state = tmp .. "/twin-hup"
  tmux("-f", "/dev/null", "new-session", "-d", "-s", "odp", "-x", "160", "-y", "50",
    ("HOME=%s %s repl devices/twin_m55.lua --twin-state %s --build-dir %s --runs-dir %s"):format(q(tmp), q(odp),
      q(state), q(tmp .. "/b"), q(tmp .. "/runs")))
  wait_until("the prompt", 20, function() return screen():find("odp> ") end)
  tmux("send-keys", "-t", "odp", "-l", "('%x'):format(board:read32(0x60000000))")
  tmux("send-keys", "-t", "odp", "Enter")
  wait_until("the RTT ID read through the twin", 180, function() return screen():find('"47474553"') end)
  local pid, shm = twin_of(state)
  tmux("kill-server") -- the terminal goes away: the shell and odp get SIGHUP
  twin_gone(pid, shm, 5, "QEMU and its DDR file gone after the terminal closed")
end)

T.test("SIGKILL of odp holding the twin: QEMU exits within 10 s, its state dir removed or not; a stale DDR file goes at the next twin start", function()
  local dir = T.tmpdir()
  local state = dir .. "/twin-kill"
  local script = dir .. "/hold.lua"
  T.write(script, ([[
local board = require("odp.run.board").open("devices/twin_m55.lua", { twin_state = %q, build_dir = %q, runs_dir = %q })
board:read32(0x60000000)
io.stdout:write("holding\n") io.stdout:flush()
require("odp.sys").sleep(300)
]]):format(state, tmp .. "/b", dir .. "/runs"))
  local job = background({ odp, "run", script }, dir)
  wait_until("the twin to be up", 180, function() return (read(dir .. "/out") or ""):find("holding") end)
  local pid, shm = twin_of(state)
  -- its state directory removed first (as a test's temporary dir is, under a REPL it failed to stop): the
  -- watcher knows QEMU's pid and DDR file itself
  sh("rm -rf " .. q(state))
  sh("kill -KILL " .. job.pid)
  twin_gone(pid, shm, 10, "QEMU and its DDR file gone after odp's SIGKILL, its state directory gone before")

  -- A DDR file whose twin died with nobody to clean up (its owner and its watcher killed): no process maps it.
  local stale = ("/dev/shm/odp-twin-stale-%d"):format(sys.getpid())
  sh(("truncate -s 1M %s && touch -d '5 minutes ago' %s"):format(stale, stale))
  local dir2 = T.tmpdir()
  local job2 = background({ odp, "run", script }, dir2)
  wait_until("the second twin to be up", 180, function() return (read(dir2 .. "/out") or ""):find("holding") end)
  T.eq(sys.stat(stale), nil, "the next twin start removed the stale DDR file")
  local pid2, shm2 = twin_of(state)
  sh("kill -TERM " .. job2.pid)
  T.eq(exit_status(job2, 30), 143, read(dir2 .. "/err"))
  T.ok(not alive(pid2) and not sys.stat(shm2), "SIGTERM stopped the twin as odp ended")
end)

T.done()
