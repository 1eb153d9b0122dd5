-- Faults tell the truth and heal: a board that drops, hangs or fills up is waited for, cleaned up after and
-- named for what happened. Real faults on a real OpenSSH sshd on 127.0.0.1 (tests/lib/sshd.lua): its session
-- processes killed or stopped, the server down and restarted on the same port and host keys, a tmpfs that
-- fills, a slow link (tests/c/slow_relay.c as the ProxyCommand) and odp killed in the middle of an upload.
-- Each case checks the records (none lost or run twice), the cause printed, what is left on the board and how
-- long it took. A CI suite: each case is bounded to seconds; the long random soak is bench/soak.sh.
local T = require("t")
local sshd = require("sshd")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sys = require("odp.sys")
local run = require("odp.run")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local toy = root .. "/tests/flows/toy.lua"
local q = sshd.quote
local sh = sshd.sh

-- sshd.wait_for, failing with what was awaited; -> the condition's value.
local function wait_until(what, timeout, f)
  local v
  if not sshd.wait_for(function() v = f() return v end, timeout) then error(("%s: not within %ss"):format(what, timeout), 0) end
  return v
end

local function read(path) return (sys.read_file(path)) end

local function records(path)
  local out = {}
  for l in (read(path) or ""):gmatch("[^\n]+") do out[#out + 1] = assert(json.decode(l)) end
  return out
end

-- Starts argv in the background, its output in dir/out and dir/err; -> {pid, dir}; dir/rc when it ends.
local function background(argv, dir)
  local words = {}
  for i, a in ipairs(argv) do words[i] = q(a) end
  sh(("( %s >%s/out 2>%s/err & echo $! >%s/pid; wait $!; echo $? >%s/rc.tmp; mv %s/rc.tmp %s/rc ) " ..
    ">/dev/null 2>&1 &"):format(table.concat(words, " "), q(dir), q(dir), q(dir), q(dir), q(dir), q(dir)))
  return { pid = wait_until("the background odp's pid", 10, function() return (read(dir .. "/pid") or ""):match("%d+") end),
    dir = dir }
end

local function exit_status(job, timeout)
  return tonumber(wait_until("odp to exit", timeout or 60, function() return (read(job.dir .. "/rc") or ""):match("%d+") end))
end

-- Whether a remote dir (or its .odp/) holds partial uploads (of the file called name, when given).
local function parts(dir, name)
  return sh(("ls -a %s %s/.odp 2>/dev/null | grep -F %s || true"):format(q(dir), q(dir), q((name or "") ..
    ".odp-part-"))):match("%S") ~= nil
end

local function count(s, pattern) return select(2, s:gsub(pattern, "")) end

-- -p num_executions=... for n points that each take about half a second with the real runner and the tiny
-- add model (30000 executions), so a fault injected after a record lands in the middle of the sweep.
local function slow_points(n)
  local v = {}
  for i = 1, n do v[i] = tostring(30000 + i) end
  return "num_executions=" .. table.concat(v, ",")
end

local srv = sshd.start()

local function board_opts(extra)
  local o = { host = srv.user .. "@127.0.0.1", port = srv.port, identity = srv.identity,
    known_hosts = srv.known_hosts, ui = require("odp.core.ui").new { quiet = true } }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- Kills every sshd session process (the connections drop; the listener stays: the board answers again).
local function drop_sessions()
  sh(("desc() { local c; for c in $(pgrep -P \"$1\"); do desc \"$c\"; echo \"$c\"; done; }; " ..
    "kill -KILL $(desc %d) 2>/dev/null; true"):format(srv.pid))
end

local function sweep_argv(runner, dir, extra)
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua",
    "--host", srv.user .. "@127.0.0.1", "--port", tostring(srv.port), "--identity", srv.identity,
    "--known-hosts", srv.known_hosts, "--runner", runner, "--model", add, "--runs-dir", dir .. "/runs" }
  table.move(extra, 1, #extra, #argv + 1, argv)
  return argv
end

------------------------------------------------------------------------------------------------ preflight

T.with_real_runner("a session killed during preflight: waited for; a board that stays away is ECONNLOST, never a wrong architecture", function(runner)
  local remote = srv.remote_dir .. "/pre"
  -- the board answers again: the preflight goes through, with the true facts
  local b = run.open_board("devices/rpi5.lua", board_opts { remote_dir = remote, reconnect_timeout = 20 })
  b:target()
  drop_sessions()
  local facts = b:preflight { runner = runner, model = add }
  T.eq(facts.arch, "x86_64"); T.ok(facts.free_bytes > 0); T.match(facts.libc, "^%d+%.%d+")
  b:close()
  -- the board stays away: the cause, after --reconnect-timeout, and nothing guessed in its place
  b = run.open_board("devices/rpi5.lua", board_opts { remote_dir = remote, reconnect_timeout = 2 })
  b:target()
  srv:crash()
  local t0 = sys.now()
  local e = T.failure(function() b:preflight { runner = runner, model = add } end)
  local took = sys.now() - t0
  srv:restart()
  T.eq({ e.code, e.exit }, { "ECONNLOST", 3 })
  T.match(e.message, "dropped"); T.match(e.message, "not back after 2 s"); T.match(e.message, "refused")
  T.match(e.message, "last worked: ")
  for _, wrong in ipairs { "built for", "is nil", "glibc", "musl" } do
    T.eq(e.message:find(wrong, 1, true), nil, "no guessed fact: " .. e.message)
  end
  T.ok(took >= 2 and took < 8, ("it waited --reconnect-timeout, no longer: %.1f s"):format(took))
  -- every later request fails at once with the same cause, never a closed session's Lua error
  t0 = sys.now()
  local e2 = T.failure(function() b:exec({ "true" }) end)
  T.eq(e2.code, "ECONNLOST"); T.ok(sys.now() - t0 < 1, "at once")
  b:close()
end)

------------------------------------------------------------------------------------------------ outages

T.with_real_runner("sshd down mid-sweep twice (a reboot): waited for each time; every point once; the cause printed", function(runner)
  local dir = T.tmpdir()
  local out, remote = dir .. "/s.jsonl", srv.remote_dir .. "/outage"
  local n = 14
  local argv = sweep_argv(runner, dir, { "--remote-dir", remote, "-p", slow_points(n), "--out", out })
  local t0 = sys.now()
  local job = background(argv, dir)
  for _, after in ipairs { 3, 8 } do
    wait_until(after .. " records", 60, function() return #records(out) >= after end)
    srv:crash()
    sys.sleep(5)
    local r0 = sys.now()
    srv:restart()
    T.ok(sys.now() - r0 < 3, ("sshd restarted in %.1f s"):format(sys.now() - r0))
  end
  local rc = exit_status(job, 120)
  local took = sys.now() - t0
  local err = read(dir .. "/err")
  local recs = records(out)
  T.eq(#recs, n, "every point has its record: " .. err)
  local seen, failed = {}, 0
  for _, r in ipairs(recs) do
    local k = r.params.num_executions
    T.eq(seen[k], nil, "point " .. k .. " once"); seen[k] = true
    if r.ok == false then
      failed = failed + 1
      -- only a program the drop caught running fails, and it says so
      T.eq(r.error.code, "ECONNLOST"); T.match(r.error.message, "not run again")
    end
  end
  T.ok(failed <= 2, failed .. " points failed: at most the one in flight at each outage")
  T.eq(rc, failed > 0 and 1 or 0, err)
  T.eq(count(err, "dropped %("), 2, "one line per outage when the board drops: " .. err)
  T.eq(count(err, "is back after"), 2, "one line per outage when it is back: " .. err)
  T.ok(took < 90, ("took %.0f s"):format(took))
  -- resume runs only what failed
  argv.timeout = 120
  local again = proc.run(argv)
  T.eq(again.status, 0, again.stderr)
  T.eq(#records(out), n + failed, "the failed ones, and only they, ran again")
  T.eq(parts(remote), false, "no partial upload left on the board")
end)

T.with_real_runner("a board that stays away: its remaining points fail at once with the real cause", function(runner)
  local dir = T.tmpdir()
  local out = dir .. "/s.jsonl"
  local argv = sweep_argv(runner, dir, { "--remote-dir", srv.remote_dir .. "/away", "--reconnect-timeout", "3",
    "-p", slow_points(8), "--out", out })
  local job = background(argv, dir)
  wait_until("2 records", 60, function() return #records(out) >= 2 end)
  srv:crash()
  local t0 = sys.now()
  local rc = exit_status(job, 60)
  local took = sys.now() - t0
  srv:restart()
  local recs = records(out)
  T.eq(#recs, 8, "every point has its record")
  T.eq(rc, 1)
  local failed = 0
  for _, r in ipairs(recs) do
    if r.ok == false then
      failed = failed + 1
      T.eq(r.error.code, "ECONNLOST")
      T.ok(r.error.message:find("not back after 3 s", 1, true) or r.error.message:find("not run again", 1, true),
        r.error.message)
      T.eq(r.error.message:find("closed odp.ssh.Session", 1, true), nil)
    end
  end
  T.ok(failed >= 5, failed .. " failed")
  T.ok(took < 15, ("one wait of --reconnect-timeout, not one per point: %.1f s"):format(took))
end)

T.with_real_runner("an SSH session stopped (SIGSTOP) mid-point: keepalives find it, the board is reconnected", function(runner)
  local dir = T.tmpdir()
  local cfg = dir .. "/ssh_config"
  T.write(cfg, ("Host stopboard\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  ServerAliveInterval 1\n" ..
    "  ServerAliveCountMax 2\n"):format(srv.port, srv.user))
  local out = dir .. "/s.jsonl"
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua", "--host", "stopboard",
    "--ssh-config", cfg, "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--runner", runner,
    "--model", add, "--runs-dir", dir .. "/runs", "--remote-dir", srv.remote_dir .. "/stop",
    "-p", slow_points(6), "--out", out }
  local job = background(argv, dir)
  wait_until("2 records", 60, function() return #records(out) >= 2 end)
  -- stop the sshd processes of the connection (not the runner: it is a program of the board, not the link)
  local stopped = sh(("desc() { local c; for c in $(pgrep -P \"$1\"); do desc \"$c\"; echo \"$c\"; done; }; " ..
    "for p in $(desc %d); do case \"$(cat /proc/$p/comm)\" in sshd*) kill -STOP $p; echo $p;; esac; done")
    :format(srv.pid)):gsub("\n", " ")
  local t0 = sys.now()
  local rc = exit_status(job, 90)
  local took = sys.now() - t0
  sh("kill -KILL " .. stopped .. " 2>/dev/null; kill -CONT " .. stopped .. " 2>/dev/null; true")
  local err = read(dir .. "/err")
  local recs = records(out)
  T.eq(#recs, 6, "every point has its record: " .. err)
  local seen, failed = {}, 0
  for _, r in ipairs(recs) do
    T.eq(seen[r.params.num_executions], nil); seen[r.params.num_executions] = true
    if r.ok == false then failed = failed + 1 T.eq(r.error.code, "ECONNLOST") end
  end
  T.ok(failed <= 1, failed .. " failed")
  T.eq(rc, failed > 0 and 1 or 0, err)
  T.match(err, "no answer for %d+ s"); T.match(err, "is back after")
  T.ok(took < 40, ("took %.0f s"):format(took))
end)

------------------------------------------------------------------------------------------------ space

-- A tmpfs of size at dir (owned by the login user), unmounted after fn, also when it fails.
local function with_tmpfs(dir, size, fn)
  sh(("mkdir -p %s && mount -t tmpfs -o size=%s,uid=$(id -u %s) odp-faults %s"):format(q(dir), size, srv.user, q(dir)))
  local ok, e = pcall(fn)
  sh("umount " .. q(dir))
  if not ok then error(e, 0) end
end

T.with_real_runner("a full disk: the upload says \"no space left on BOARD:DIR\", the ETDump lost is named, nothing left", function(runner)
  local dir = T.tmpdir()
  local remote = srv.remote_dir .. "/full"
  with_tmpfs(remote, "4m", function()
    local b = run.open_board("devices/rpi5.lua", board_opts { remote_dir = remote })
    local e = T.failure(function() b:push(runner, remote .. "/executor_runner") end)
    T.eq(e.code, "ENOSPC")
    T.match(e.message, "^no space left on ssh://[^ ]+:" .. remote:gsub("%p", "%%%0") .. " %(uploading executor_runner")
    T.eq(parts(remote), false, "the partial upload removed")
    b:close()
  end)
  with_tmpfs(remote, "100m", function()
    local b = run.open_board("devices/rpi5.lua", board_opts { remote_dir = remote })
    local o = { runner = runner, model = add, n = 2, runs_dir = dir .. "/runs", etdump = dir .. "/p.etdump" }
    local r1 = run.point(b, "executorch", o)
    T.eq(r1.ok, true, r1.error and r1.error.message); T.ok(r1.ops and #r1.ops > 0, "ops from the ETDump")
    -- fill what is left, then run again: the runner's ETDump finds no room
    sh(("dd if=/dev/zero of=%s/fill bs=1M 2>/dev/null; true"):format(q(remote)))
    local r2 = run.point(b, "executorch", o)
    T.eq(r2.ok, true, "the measurement itself is fine")
    T.eq(r2.ops, nil, "no op table from a lost ETDump")
    local said = table.concat(r2.warnings, "\n")
    T.match(said, "ETDump lost: no space left on ssh://[^ ]+:" .. remote:gsub("%p", "%%%0"))
    T.eq(said:find("ED00", 1, true), nil, "not blamed on the format: " .. said)
    b:close()
  end)
end)

------------------------------------------------------------------------------------------------ debris

T.with_real_runner("odp killed (SIGKILL) or interrupted (SIGINT) during a slow upload: the resume removes the part", function(runner)
  for _, signal in ipairs { "KILL", "INT" } do
    local dir = T.tmpdir()
    local remote = srv.remote_dir .. "/slow-" .. signal
    local cfg = dir .. "/ssh_config"
    -- 2 MB/s: the 7.5 MB runner takes seconds to upload
    T.write(cfg, ("Host slowboard\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  ProxyCommand %s 2000000 %%h %%p\n")
      :format(srv.port, srv.user, build .. "/tests/slow_relay"))
    local out = dir .. "/s.jsonl"
    local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua", "--host",
      "slowboard", "--ssh-config", cfg, "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--runner",
      runner, "--model", add, "--runs-dir", dir .. "/runs", "--remote-dir", remote, "-p", "num_executions=1,2",
      "--out", out }
    local job = background(argv, dir)
    wait_until("the runner's upload under way", 60, function() return parts(remote, "executor_runner") end)
    sh("kill -" .. signal .. " " .. job.pid)
    local rc = exit_status(job, 30)
    T.eq(rc, signal == "KILL" and 137 or 130)
    -- Ctrl-C: odp removes its own part as it stops (the connection is up); SIGKILL leaves it for the next odp
    T.eq(parts(remote, "executor_runner"), signal == "KILL", "the part after SIG" .. signal)
    for _, r in ipairs(records(out)) do
      T.eq({ r.ok, r.error.code }, { false, "ECANCELED" }, "an interrupted point is saved as interrupted: " ..
        r.error.message)
    end
    -- resume, over the same slow link: what the killed odp left is removed and not counted against the space
    argv.timeout = 120
    local r = proc.run(argv)
    T.eq(r.status, 0, r.stderr)
    if signal == "KILL" then T.match(r.stderr, "removed 1 file%(s%) an earlier odp left") end
    local ok = 0
    for _, rec in ipairs(records(out)) do if rec.ok then ok = ok + 1 end end
    T.eq(ok, 2, "both points")
    T.eq(parts(remote), false, "nothing partial left on the board")
  end
end)

T.with_real_runner("a run's own files on the board (ETDump, samples, outputs) are removed once fetched; those of " ..
  "an odp no longer running at the next preflight, not those of one still running", function(runner)
  local dir = T.tmpdir()
  local remote = srv.remote_dir .. "/runfiles"
  -- left by a killed odp (a PID above any pid_max: never running) and by one still running (this test's own)
  local dead = remote .. "/old.odp-run-99999999.samples"
  local live = ("%s/other.odp-run-%d.etdump"):format(remote, sys.getpid())
  sh(("mkdir -p %s && printf x >%s && printf y >%s && chown -R %s %s"):format(q(remote), q(dead), q(live), srv.user,
    q(remote)))
  local r = proc.run { odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1", "--port",
    tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--runner", runner,
    "--model", add, "-n", "3", "--sample", "--inputs", "random:1", "--outputs", "--remote-dir", remote,
    "--runs-dir", dir .. "/runs", "--no-history", "--format", "json", cwd = dir, timeout = 120 }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stderr, "removed 1 file%(s%) an earlier odp left on [^\n]*old%.odp%-run%-99999999%.samples")
  local rec = assert(json.decode(r.stdout))
  -- what was removed from the board is in the run dir, whole
  T.ok(rec.artifacts.etdump and rec.artifacts.etdump.sha256, "the ETDump kept")
  T.ok(rec.cpu_profile and rec.cpu_profile.samples and rec.cpu_profile.samples.total > 0, "the samples joined")
  T.ok(rec.outputs and rec.outputs[1] and rec.outputs[1].data and rec.outputs[1].data.sha256, "the output kept")
  local left = sh(("ls -a %s"):format(q(remote)))
  T.eq(count(left, "%.odp%-run%-"), 1, "only the running odp's file is left: " .. left)
  T.ok(sys.stat(live), "a running odp's file is left alone")
end)

------------------------------------------------------------------------------------------------ one writer

T.test("a second sweep writing the same file through a symlinked --out is refused", function()
  local dir = T.tmpdir()
  local out, link = dir .. "/real.jsonl", dir .. "/link.jsonl"
  sh(("ln -s real.jsonl %s && : > %s"):format(q(link), q(out)))
  local job = background({ odp, "run", root .. "/scripts/sweep.lua", "--flow", toy, "-p", "size=1,2", "--delay", "1.5",
    "--out", out, "-q" }, dir)
  wait_until("the first sweep's lock", 20, function() return (read(out .. ".lock") or ""):match("%d") end)
  local r = proc.run { odp, "run", root .. "/scripts/sweep.lua", "--flow", toy, "-p", "size=1,2", "--out", link, "-q",
    timeout = 30 }
  T.eq(r.status, 2, r.stderr)
  T.match(r.stderr, "link%.jsonl is being written by another sweep %(pid " .. job.pid .. "%) as .*real%.jsonl")
  T.eq(exit_status(job, 30), 0)
  T.eq(#records(out), 2, "every point written once")
end)

srv:stop()
T.done()
