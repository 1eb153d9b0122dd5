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
local function wait_until(what, timeout, f)
  local deadline = sys.now() + timeout
  repeat
    local v = f()
    if v then return v end
    sys.sleep(0.05)
  until sys.now() > deadline
  error(("%s: not within %ss"):format(what, timeout), 0)
end

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
  T.eq(rec.ok, false); T.eq(rec.error.code, "ECANCELED")
  T.eq(select(2, read(dir .. "/err"):gsub("\n", "")), 1, "one line on stderr: " .. read(dir .. "/err"))
end)

local srv = sshd.start()

-- The same over SSH: the board is this machine, the runner runs from the remote dir rd.
local function hanging_ssh_run(rd, dir)
  return background({ odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts,
    "--remote-dir", rd, "--runner", build .. "/tests/fake_runner", "--model", add, "--runs-dir", dir .. "/runs",
    "--", "--fake_mode=hang_tree" }, dir)
end

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
    T.eq(rec.error and rec.error.code, "ECANCELED")
  end)
end

T.test("SIGKILL of odp mid-run, here and over SSH: the runners' groups end with it (odp-rusage's parent-death signal)", function()
  local dir = T.tmpdir()
  local runner = own_runner(dir, "runner_kill_" .. sys.getpid())
  local job = hanging_host_run(runner, dir)
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
  T.eq(io.open(require("odp.run.sweep").lock_path(out)), nil, "the lock went with the interrupted sweep")
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
