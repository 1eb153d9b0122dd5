-- odp.proc against real child programs; GNU time is the reference for peak RSS.
local T = require("t")
local proc = require("odp.proc")
local sys = require("odp.sys")

local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")
local fake = build .. "/tests/fake_runner"
local add_pte = T.root() .. "/tests/fixtures/pte/add_arduino.pte"

local function alive(pid) return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true end

T.test("exit status and separate stdout/stderr", function()
  local r = assert(proc.run { "sh", "-c", "echo out; echo err >&2; exit 3" })
  T.eq(r.ok, false)
  T.eq(r.status, 3)
  T.eq(r.stdout, "out\n")
  T.eq(r.stderr, "err\n")
  T.eq(r.signal, nil)
  T.ok(r.wall_s >= 0 and r.wall_s < 5, "wall_s")
end)

T.test("argv is not a shell: metacharacters arrive verbatim", function()
  local r = assert(proc.run { argv = { "printf", "%s|", "a b", "$HOME", "*", ";" } })
  T.eq(r.stdout, "a b|$HOME|*|;|")
  T.eq(r.ok, true)
end)

T.test("SIGABRT is a signal, not an exit status", function()
  local r = assert(proc.run { fake, "--model_path", "/nonexistent.pte" })
  T.eq(r.signal, 6)
  T.eq(r.signal_name, "ABRT")
  T.eq(r.status, 0)
  T.eq(r.ok, false)
  T.match(r.stderr, "FileDataLoader::from%(%) failed: 0x22")
end)

T.test("SIGSEGV", function()
  local r = assert(proc.run { fake, "--model_path", add_pte, "--fake_mode=segv" })
  T.eq(r.signal, 11)
end)

T.test("missing program is ENOTFOUND, not a crash", function()
  local r, err, code = proc.run { "/no/such/program" }
  T.eq(r, nil)
  T.eq(code, "ENOTFOUND")
  T.match(err, "^ENOTFOUND: cannot start /no/such/program")
end)

T.test("misuse raises: unknown option, empty argv, bad types", function()
  T.raises(function() proc.run { "true", tiemout = 1 } end, "unknown option 'tiemout'")
  T.raises(function() proc.run {} end, "argv must hold")
  T.raises(function() proc.run { "true", timeout = "soon" } end, "must be a number")
end)

T.test("stdin, cwd and env (set and unset)", function()
  local dir = T.tmpdir()
  local r = assert(proc.run { "sh", "-c", 'cat; pwd; echo "[$ODP_X][${HOME:-unset}]"', stdin = "hello\n", cwd = dir,
    env = { ODP_X = "42", HOME = false } })
  T.eq(r.stdout, "hello\n" .. sys.realpath(dir) .. "\n[42][unset]\n")
end)

T.test("peak RSS of a child touching 200 MB is within 2% of GNU time -v", function()
  local mine = assert(proc.run { fake, "--model_path", add_pte, "--fake_touch_mb=200" })
  T.eq(mine.ok, true)
  local ref = assert(proc.run { "/usr/bin/time", "-v", fake, "--model_path", add_pte, "--fake_touch_mb=200" })
  local gnu = tonumber(ref.stderr:match("Maximum resident set size %(kbytes%): (%d+)"))
  T.ok(gnu, "GNU time printed a peak RSS")
  T.ok(mine.rusage.maxrss_kb > 200 * 1024, "touched 200 MB: " .. mine.rusage.maxrss_kb)
  T.ok(math.abs(mine.rusage.maxrss_kb - gnu) / gnu < 0.02,
    ("odp %d kB vs GNU time %d kB"):format(mine.rusage.maxrss_kb, gnu))
end)

T.test("timeout kills the whole process group, grandchildren included", function()
  local dir = T.tmpdir()
  local pidfile = dir .. "/pids"
  local t0 = sys.now()
  -- the grandchild ignores SIGTERM: only the SIGKILL after the grace period ends it
  local r = assert(proc.run { "sh", "-c",
    ("sh -c 'trap \"\" TERM; echo $$ >> %s; while :; do sleep 1; done' & echo $$ >> %s; wait"):format(pidfile, pidfile),
    timeout = 0.5, kill_grace = 0.3 })
  T.eq(r.timed_out, true)
  T.eq(r.ok, false)
  T.ok(sys.now() - t0 < 5, "returned promptly")
  local pids = {}
  for line in io.lines(pidfile) do pids[#pids + 1] = line end
  T.eq(#pids, 2, "child and grandchild wrote their pids")
  for _, pid in ipairs(pids) do T.ok(not alive(pid), "pid " .. pid .. " is gone") end
end)

T.test("a hanging runner that leaves a grandchild is cleaned up", function()
  local r = assert(proc.run { fake, "--model_path", add_pte, "--fake_mode=hang_tree", timeout = 0.3, kill_grace = 0.2 })
  T.eq(r.timed_out, true)
  local ps = assert(proc.run { "pgrep", "-f", "fake_mode=hang_tree" })
  T.eq(ps.stdout, "", "no process left")
end)

T.test("100 MB on stdout and stderr at once does not deadlock", function()
  local r = assert(proc.run { "sh", "-c",
    "head -c 100000000 /dev/zero >&2 & head -c 100000000 /dev/zero; wait", timeout = 60 })
  T.eq(r.ok, true)
  T.eq(#r.stdout, 100000000)
  T.eq(#r.stderr, 100000000)
end)

T.test("on_stdout sees every byte; capture_limit keeps memory bounded", function()
  local seen = 0
  local r = assert(proc.run { "sh", "-c", "head -c 5000000 /dev/zero", capture_limit = 1000,
    on_stdout = function(chunk) seen = seen + #chunk end })
  T.eq(seen, 5000000)
  T.eq(#r.stdout, 1000)
  T.eq(r.stdout_dropped, 5000000 - 1000)
end)

T.test("stdout_times: when each stdout chunk was read, against the program's own sleeps; bounded", function()
  local r = assert(proc.run { argv = { "sh", "-c", "sleep 0.3; printf a; sleep 0.2; printf bc; echo x >&2" },
    stdout_times = 16, timeout = 10 })
  local st = r.stdout_times
  T.eq(st.ends, { 1, 3 }); T.eq(st.cut, 0); T.eq(#st.t_us, 2)
  -- the oracle: at least the sleeps asked, from the spawn; well under a second more on a busy machine
  T.ok(st.t_us[1] >= 300000 and st.t_us[1] < 1300000, "the first write after the spawn: " .. st.t_us[1])
  local gap = st.t_us[2] - st.t_us[1]
  T.ok(gap >= 200000 and gap < 1200000, "the pause between the writes: " .. gap .. " us")
  -- a flood of tiny writes: the first N chunks kept, the rest counted, the bytes all there
  r = assert(proc.run { argv = { "sh", "-c", "for i in 1 2 3 4 5; do printf x; sleep 0.05; done" },
    stdout_times = 2, timeout = 10 })
  T.eq(#r.stdout_times.t_us, 2); T.eq(r.stdout_times.ends, { 1, 2 }); T.eq(r.stdout_times.cut, 3)
  T.eq(r.stdout, "xxxxx")
  T.eq(assert(proc.run { argv = { "true" } }).stdout_times, nil, "only when asked")
  T.raises(function() proc.run { argv = { "true" }, stdout_times = -1 } end, "stdout_times")
end)

T.test("an error in a callback stops the child and is raised after cleanup", function()
  local t0 = sys.now()
  T.raises(function()
    proc.run { "sh", "-c", "echo go; sleep 30", kill_grace = 0.2,
      on_stdout = function() error("stop here") end }
  end, "stop here")
  T.ok(sys.now() - t0 < 5, "child did not run to completion")
end)

-- /proc/PID/stat's state and parent pid, or nil when there is no such process (reaped).
local function stat_of(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  local state, ppid = s:match("%) (%a) (%d+)")
  return state, tonumber(ppid)
end

T.test("an orphan odp adopted (a child subreaper) is reaped once it exits: no zombie past the next run", function()
  -- sh leaves a sleep behind: orphaned when sh exits, it becomes this odp's child, as the twin's QEMU does
  local r = proc.run { "sh", "-c", "sleep 0.3 >/dev/null 2>&1 & echo $!", timeout = 10 }
  local pid = assert(r.stdout:match("%d+"))
  local deadline = sys.now() + 10
  while stat_of(pid) ~= "Z" and stat_of(pid) and sys.now() < deadline do sys.sleep(0.02) end
  local state, ppid = stat_of(pid)
  T.eq(state, "Z", "the orphan exited and waits for its parent")
  T.eq(ppid, sys.getpid(), "its parent is this odp, the subreaper that adopted it")
  T.eq(proc.run { "true", timeout = 10 }.status, 0)
  T.eq(stat_of(pid), nil, "the next run reaped it")
end)

-- The host target's helper writes its report so (odp.target.host): a file in memory, named nowhere.
T.test("sys.memfile: a child writes it through fd_path, odp reads it back; it is no file of any directory", function()
  local f = assert(sys.memfile())
  local path = sys.fd_path(f)
  T.match(proc.run { "readlink", path, timeout = 10 }.stdout, "^/memfd:odp ", "in memory, its name no path")
  T.eq(proc.run { "sh", "-c", 'printf "report\\n" > "$0"', path, timeout = 10 }.status, 0)
  T.eq(f:seek("set", 0), 0)
  T.eq(f:read("a"), "report\n")
  T.eq(f:write("more"), f, "an io file: written as any other")
  T.eq(f:close(), true)
  T.eq(io.type(f), "closed file")
  T.eq(sys.stat(path), nil, "closed: gone")
end)

T.done()
