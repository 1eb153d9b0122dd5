-- Faults tell the truth and heal: a board that drops, hangs or fills up is waited for, cleaned up after and
-- named for what happened. Real faults on a real OpenSSH sshd on 127.0.0.1 (tests/lib/sshd.lua): its session
-- processes killed or stopped, the server down and restarted on the same port and host keys, a tmpfs that
-- fills, a slow link (tests/c/slow_relay.c as the ProxyCommand) and odp killed in the middle of an upload.
-- And on adb boards (tests/lib/adbemu.lua: the project's adb device emulator, directly over TCP and behind
-- Debian's adb server): the device crashed and started again on the same port, gone from the adb server
-- (`adb disconnect`) and back, a connection dropped in the middle of an upload, a tmpfs that fills.
-- The sweeps pipeline on both (two points in flight: docs/helper-protocol.md), so an outage also catches a run queued
-- behind the one going. Each case checks the records (none lost or run twice), the cause printed, what is left on
-- the board and how long it took. A CI suite: each case is bounded to seconds; the long random soak is bench/soak.sh.
local T = require("t")
local sshd = require("sshd")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sys = require("odp.sys")
local run = require("odp.run")
local adbemu = require("adbemu")

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

local records = T.records

-- Starts argv in the background (env: variables set, false: unset), its output in dir/out and dir/err;
-- -> {pid, dir}; dir/rc when it ends.
local function background(argv, dir, env)
  local words = {}
  for i, a in ipairs(argv) do words[i] = q(a) end
  local vars = {}
  for k, v in pairs(env or {}) do
    if v then vars[#vars + 1] = q(k .. "=" .. v) else table.insert(vars, 1, "-u " .. q(k)) end
  end
  sh(("( env %s %s >%s/out 2>%s/err & echo $! >%s/pid; wait $!; echo $? >%s/rc.tmp; mv %s/rc.tmp %s/rc ) " ..
    ">/dev/null 2>&1 &"):format(table.concat(vars, " "), table.concat(words, " "), q(dir), q(dir), q(dir), q(dir),
    q(dir), q(dir)))
  return { pid = wait_until("the background odp's pid", 10, function() return (read(dir .. "/pid") or ""):match("%d+") end),
    dir = dir }
end

local function exit_status(job, timeout)
  return tonumber(wait_until("odp to exit", timeout or 60, function() return (read(job.dir .. "/rc") or ""):match("%d+") end))
end

-- Whether a remote dir (or anything under it: .odp/, an odp's own directory) holds partial uploads (of the file
-- called name, when given).
local function parts(dir, name)
  return sh(("find %s -name %s 2>/dev/null || true"):format(q(dir), q((name or "") .. "*.odp-part-*")))
    :match("%S") ~= nil
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

-- Every point of a sweep once, only those the outage caught running failed (ECONNLOST, not run again) and at
-- most one per outage; -> how many failed.
local function once_each(recs, n, outages, err)
  T.eq(#recs, n, "every point has its record: " .. err)
  local seen, failed = {}, 0
  for _, r in ipairs(recs) do
    local k = r.params.num_executions
    T.eq(seen[k], nil, "point " .. k .. " once"); seen[k] = true
    if r.ok == false then
      failed = failed + 1
      -- only a program the drop caught running fails, and it says so
      T.eq(r.error.code, "ECONNLOST", r.error.message); T.match(r.error.message, "not run again")
    end
  end
  local which = {}
  for _, r in ipairs(recs) do
    if r.ok == false then which[#which + 1] = r.params.num_executions .. ": " .. r.error.message end
  end
  T.ok(failed <= outages, failed .. " points failed: at most the one in flight at each outage; " ..
    table.concat(which, " | ") .. "; stderr: " .. err)
  return failed
end

-- Runs the sweep argv (env: its environment) of n points in the background with an outage (outage(i)) after each
-- count of records in afters; checks every point's record (once_each), one line per outage when the board
-- drops and one when it is back, and the time. -> its stderr, how many points failed
local function through_outages(argv, env, dir, out, n, afters, outage)
  local t0 = sys.now()
  local job = background(argv, dir, env)
  for i, after in ipairs(afters) do
    wait_until(after .. " records", 60, function() return #records(out) >= after end)
    outage(i)
  end
  local rc = exit_status(job, 120)
  local took = sys.now() - t0
  local err = read(dir .. "/err")
  local failed = once_each(records(out), n, #afters, err)
  T.eq(rc, failed > 0 and 1 or 0, err)
  T.eq(count(err, "dropped %("), #afters, "one line per outage when the board drops: " .. err)
  T.eq(count(err, "is back after"), #afters, "one line per outage when it is back: " .. err)
  T.ok(took < 90, ("took %.0f s"):format(took))
  return err, failed
end


T.with_real_runner("sshd down mid-sweep twice (a reboot): waited for each time; every point once; the cause printed", function(runner)
  local dir = T.tmpdir()
  local out, remote = dir .. "/s.jsonl", srv.remote_dir .. "/outage"
  local n = 14
  local argv = sweep_argv(runner, dir, { "--remote-dir", remote, "-p", slow_points(n), "--out", out })
  local _, failed = through_outages(argv, nil, dir, out, n, { 3, 8 }, function()
    srv:crash()
    sys.sleep(5)
    local r0 = sys.now()
    srv:restart()
    T.ok(sys.now() - r0 < 3, ("sshd restarted in %.1f s"):format(sys.now() - r0))
  end)
  -- resume runs only what failed
  argv.timeout = 120
  local again = proc.run(argv)
  T.eq(again.status, 0, again.stderr)
  T.eq(#records(out), n + failed, "the failed ones, and only they, ran again")
  T.eq(parts(remote), false, "no partial upload left on the board")
end)

-- A sweep of 8 points (argv, env) whose board goes away after 2 records (leave()) and stays away: every point has
-- its record, the remaining ones fail at once with ECONNLOST and the cause (cause: a pattern every failure
-- matches), after one wait of --reconnect-timeout 3 (argv has it), not one per point.
local function stays_away(argv, env, out, dir, leave, cause)
  local job = background(argv, dir, env)
  wait_until("2 records", 60, function() return #records(out) >= 2 end)
  leave()
  local t0 = sys.now()
  local rc = exit_status(job, 60)
  local took = sys.now() - t0
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
      T.match(r.error.message, cause)
    end
  end
  T.ok(failed >= 5, failed .. " failed")
  T.ok(took < 15, ("one wait of --reconnect-timeout, not one per point: %.1f s"):format(took))
end

T.with_real_runner("a board that stays away: its remaining points fail at once with the real cause", function(runner)
  local dir = T.tmpdir()
  local out = dir .. "/s.jsonl"
  local argv = sweep_argv(runner, dir, { "--remote-dir", srv.remote_dir .. "/away", "--reconnect-timeout", "3",
    "-p", slow_points(8), "--out", out })
  -- the cause, never a closed session's Lua error
  local ok, e = pcall(stays_away, argv, nil, out, dir, function() srv:crash() end, "^[^\n]*refused")
  srv:restart()
  if not ok then error(e, 0) end
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

-- Unmounts a test's tmpfs, waiting up to 5 s for what still runs in it (a board's helper exits after its channel
-- closes); then detaches it lazily, so no mount outlives the suite, and fails: something held it.
local function unmount(dir)
  for _ = 1, 50 do
    if os.execute("umount " .. q(dir) .. " 2>/dev/null") then return end
    sys.sleep(0.1)
  end
  os.execute("umount -l " .. q(dir))
  error("a test's tmpfs at " .. dir .. " was still in use 5 s after its test", 0)
end

-- A tmpfs of size at dir (owned by the login user), unmounted after fn, also when it fails.
local function with_tmpfs(dir, size, fn)
  sh(("mkdir -p %s && mount -t tmpfs -o size=%s,uid=$(id -u %s) odp-faults %s"):format(q(dir), size, srv.user, q(dir)))
  local ok, e = pcall(fn)
  local unmounted, uerr = pcall(unmount, dir)
  if not ok then error(e, 0) end
  if not unmounted then error(uerr, 0) end
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

------------------------------------------------------------------------------------------------ adb boards

local ADB_DIR = "/data/local/tmp/odp" -- the adb boards' remote dir (scripts/x300pro.lua's default)

-- Whether the emulated device's remote dir (or its .odp/) holds partial uploads (of the file called name, when
-- given).
local function adb_parts(dev, name)
  return parts(dev.root .. ADB_DIR, name)
end

local function adb_sweep_argv(runner, dir, extra)
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/x300pro.lua", "--runner", runner,
    "--model", add, "--runs-dir", dir .. "/runs" }
  table.move(extra, 1, #extra, #argv + 1, argv)
  return argv
end

-- The direct connection (--adb tcp:) of a board without an adb server: no server is asked.
local NO_SERVER = { ANDROID_ADB_SERVER_PORT = "1", ADB_SERVER_SOCKET = false, ANDROID_SERIAL = false }

T.with_real_runner("adb: the device crashes mid-sweep twice and comes back on the same port: waited for each time", function(runner)
  local dev = adbemu.start()
  local dir = T.tmpdir()
  local out, n = dir .. "/s.jsonl", 10
  local argv = adb_sweep_argv(runner, dir, { "--adb", "tcp:" .. dev.serial, "--reconnect-timeout", "30",
    "-p", slow_points(n), "--out", out })
  local err = through_outages(argv, NO_SERVER, dir, out, n, { 3, 7 }, function()
    dev:crash()
    sys.sleep(3)
    dev:restart()
  end)
  T.match(err, "waiting up to 30 s", "--reconnect-timeout reaches the adb board")
  T.eq(adb_parts(dev), false, "no partial upload left on the device")
  T.eq(dev:violations(), "", "no protocol violation by odp")
end)

T.with_real_runner("adb server: the device leaves the server (adb disconnect) and later crashes: waited for both", function(runner)
  local dev = adbemu.start()
  local srv = adbemu.server()
  srv:connect(dev)
  local dir = T.tmpdir()
  local out, n = dir .. "/s.jsonl", 10
  local argv = adb_sweep_argv(runner, dir, { "--adb", "server", "--serial", dev.serial, "--reconnect-timeout", "30",
    "-p", slow_points(n), "--out", out })
  local err = through_outages(argv, srv.env, dir, out, n, { 3, 7 }, function(i)
    if i == 1 then srv:disconnect(dev) else dev:crash() end
    sys.sleep(3)
    -- the second time the server finds it again by itself (its reconnect of a device it held over TCP)
    if i == 1 then srv:connect(dev) else dev:restart() end
  end)
  -- the first outage: the server no longer lists it; the second: it lists it offline, or not at all, until its
  -- own reconnect finds the device again
  T.match(err, "dropped %(the adb server: device '" .. dev.serial:gsub("%p", "%%%0") .. "' not found%)")
  T.eq(count(err, "dropped %(the adb server: device "), 2, "both outages named by the server: " .. err)
  T.eq(adb_parts(dev), false, "no partial upload left on the device")
  T.eq(srv:state(dev.serial), "device", "the server still holds the device")
end)

T.with_real_runner("adb server: a device that stays away fails its remaining points at once with the real cause", function(runner)
  local dev = adbemu.start()
  local srv = adbemu.server()
  srv:connect(dev)
  local dir = T.tmpdir()
  local out = dir .. "/s.jsonl"
  local argv = adb_sweep_argv(runner, dir, { "--adb", "server", "--serial", dev.serial, "--reconnect-timeout", "3",
    "-p", slow_points(8), "--out", out })
  stays_away(argv, srv.env, out, dir, function() srv:disconnect(dev) end, "the adb server: device '[^']+' not found")
end)

T.with_real_runner("adb: a connection dropped in the middle of the runner's upload: waited for, the upload made again, no part left", function(runner)
  -- the emulator drops the TCP connection once a pushed file reaches 1 MB (the first push only)
  local dev = adbemu.start { args = { "--drop-push", "1000000" } }
  local b = run.open_board("devices/vivo_x300_pro.lua", { adb = "tcp:" .. dev.serial, reconnect_timeout = 20,
    ui = require("odp.core.ui").new { quiet = true } })
  local t0 = sys.now()
  local r = b:push(runner, ADB_DIR .. "/executor_runner")
  T.eq(r.skipped, false)
  T.ok(sys.now() - t0 < 20, ("took %.1f s"):format(sys.now() - t0))
  T.eq(sys.sha256_file(dev.root .. ADB_DIR .. "/executor_runner"), sys.sha256_file(runner), "the whole runner there")
  T.eq(adb_parts(dev), false, "no partial upload left on the device")
  b:close()
end)

-- A tmpfs of size at the emulated device's remote dir, the device started on it (its mount namespace copies the
-- mounts there when it starts); the tmpfs unmounted after fn(dev), also when it fails.
local function with_adb_tmpfs(size, fn)
  local sbx = T.tmpdir()
  local dir = sbx .. ADB_DIR
  sh(("mkdir -p %s && mount -t tmpfs -o size=%s odp-faults %s"):format(q(dir), size, q(dir)))
  local ok, e = pcall(function()
    local dev = adbemu.start { root = sbx }
    local okf, ef = pcall(fn, dev)
    dev:stop()
    if not okf then error(ef, 0) end
  end)
  local unmounted, uerr = pcall(unmount, dir)
  if not ok then error(e, 0) end
  if not unmounted then error(uerr, 0) end
end

T.with_real_runner("adb: a full disk: the upload says \"no space left on BOARD:DIR\", the ETDump lost is named, nothing left", function(runner)
  local dir = T.tmpdir()
  local function board(dev)
    return run.open_board("devices/vivo_x300_pro.lua", { adb = "tcp:" .. dev.serial,
      ui = require("odp.core.ui").new { quiet = true } })
  end
  with_adb_tmpfs("4m", function(dev)
    local b = board(dev)
    local e = T.failure(function() b:push(runner, ADB_DIR .. "/executor_runner") end)
    T.eq(e.code, "ENOSPC")
    T.match(e.message, "^no space left on adb://" .. dev.serial:gsub("%p", "%%%0") .. ":" ..
      ADB_DIR:gsub("%p", "%%%0") .. " %(uploading executor_runner")
    T.eq(adb_parts(dev), false, "the partial upload removed")
    b:close()
  end)
  with_adb_tmpfs("100m", function(dev)
    local b = board(dev)
    local o = { runner = runner, model = add, n = 2, runs_dir = dir .. "/runs", etdump = dir .. "/p.etdump" }
    local r1 = run.point(b, "executorch", o)
    T.eq(r1.ok, true, r1.error and r1.error.message); T.ok(r1.ops and #r1.ops > 0, "ops from the ETDump")
    -- fill what is left, then run again: the runner's ETDump finds no room
    sh(("dd if=/dev/zero of=%s/fill bs=1M 2>/dev/null; true"):format(q(dev.root .. ADB_DIR)))
    local r2 = run.point(b, "executorch", o)
    T.eq(r2.ok, true, "the measurement itself is fine")
    T.eq(r2.ops, nil, "no op table from a lost ETDump")
    local said = table.concat(r2.warnings, "\n")
    T.match(said, "ETDump lost: no space left on adb://" .. dev.serial:gsub("%p", "%%%0") .. ":" ..
      ADB_DIR:gsub("%p", "%%%0"))
    T.eq(said:find("ED00", 1, true), nil, "not blamed on the format: " .. said)
    T.eq(adb_parts(dev), false, "no partial upload left on the device")
    b:close()
  end)
end)

-- A full disk on this machine: b's pull of its remote file (3 MB) into a full 1 MB tmpfs fails naming it in odp's
-- words, and leaves no partial file here.
local function pull_into_full_disk(b, remote, uri)
  local here = T.tmpdir()
  sh(("mount -t tmpfs -o size=1m odp-faults %s && dd if=/dev/zero of=%s/fill bs=64k 2>/dev/null; true"):format(q(here),
    q(here)))
  local ok, e = pcall(T.failure, function() b:pull(remote, here .. "/big") end)
  local left = sys.readdir(here)
  local unmounted, uerr = pcall(unmount, here)
  if not ok then error(e, 0) end
  if not unmounted then error(uerr, 0) end
  T.eq(e.code, "ENOSPC")
  T.match(e.message, "^no space left on local://[^:]+:" .. here:gsub("%p", "%%%0") .. " %(pulling big from " ..
    uri:gsub("%p", "%%%0") .. ": %d+ bytes free, 3000000 needed%)$")
  T.eq(left, { "fill" }, "no partial file left here")
end

T.test("a pull that fills this machine's disk says \"no space left on local://HOST:DIR\" (SSH and adb boards)", function()
  local remote = srv.remote_dir .. "/pull"
  sh(("mkdir -p %s && head -c 3000000 /dev/urandom >%s/big && chmod -R a+rX %s"):format(q(remote), q(remote), q(remote)))
  local b = run.open_board("devices/rpi5.lua", board_opts { remote_dir = remote })
  pull_into_full_disk(b, remote .. "/big", b:target().uri)
  b:close()
  local dev = adbemu.start()
  sh(("mkdir -p %s && head -c 3000000 /dev/urandom >%s/big"):format(q(dev.root .. ADB_DIR), q(dev.root .. ADB_DIR)))
  b = run.open_board("devices/vivo_x300_pro.lua", { adb = "tcp:" .. dev.serial,
    ui = require("odp.core.ui").new { quiet = true } })
  pull_into_full_disk(b, ADB_DIR .. "/big", "adb://" .. dev.serial)
  b:close()
end)

------------------------------------------------------------------------------------------------ debris

T.with_real_runner("odp killed (SIGKILL) or interrupted (SIGINT) during a slow upload: the helper removes the part", function(runner)
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
    -- the upload goes through the helper: its channel closes with odp (killed: the connection drops; Ctrl-C: odp
    -- closes it as it stops) and the helper removes the part it was writing
    T.eq(wait_until("the part removed by the helper after SIG" .. signal, 10, function()
      return not parts(remote, "executor_runner")
    end), true)
    for _, r in ipairs(records(out)) do
      T.eq({ r.ok, r.error.code }, { false, "ECANCELED" }, "an interrupted point is saved as interrupted: " ..
        r.error.message)
    end
    -- resume, over the same slow link: what the killed odp left is removed and not counted against the space
    argv.timeout = 120
    local r = proc.run(argv)
    T.eq(r.status, 0, r.stderr)
    local ok = 0
    for _, rec in ipairs(records(out)) do if rec.ok then ok = ok + 1 end end
    T.eq(ok, 2, "both points")
    T.eq(parts(remote), false, "nothing partial left on the board")
  end
end)

-- A slow link to an emulated device: socat on a port of 127.0.0.1 relays each connection through
-- tests/c/slow_relay, at most rate bytes/s towards the device; -> "tcp:127.0.0.1:PORT" for --adb. The listener
-- is stopped at the suite's end.
local function slow_adb_link(dev, rate)
  for attempt = 1, 5 do
    local port = 20000 + (math.floor(sys.now() * 1000) * 7 + attempt * 131) % 30000
    local pid = sh(("socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork %s >/dev/null 2>&1 & echo $!"):format(port,
      q(("EXEC:%s %d 127.0.0.1 %d"):format(build .. "/tests/slow_relay", rate, dev.port)))):match("%d+")
    T.at_done(function() sh("kill " .. pid .. " 2>/dev/null; true") end)
    if sshd.wait_for(function()
      return sh(("ss -ltn 2>/dev/null | grep -F '127.0.0.1:%d ' || true"):format(port)):match("%S") ~= nil
    end, 5) then
      return "tcp:127.0.0.1:" .. port
    end
  end
  error("socat: no free port for the slow link")
end

T.with_real_runner("adb: odp killed (SIGKILL) or interrupted (SIGINT) during a slow upload: the part removed at once, or by the resume", function(runner)
  local dev = adbemu.start()
  local link = slow_adb_link(dev, 2000000) -- 2 MB/s: the 7.5 MB runner takes seconds to upload
  for _, signal in ipairs { "KILL", "INT" } do
    local dir = T.tmpdir()
    local out = dir .. "/s.jsonl"
    local argv = adb_sweep_argv(runner, dir, { "--adb", link, "-p", "num_executions=1,2", "--out", out })
    local job = background(argv, dir, NO_SERVER)
    wait_until("the runner's upload under way", 60, function() return adb_parts(dev, "executor_runner") end)
    local t0 = sys.now()
    sh("kill -" .. signal .. " " .. job.pid)
    local rc = exit_status(job, 30)
    T.ok(sys.now() - t0 < 10, ("stopped in %.1f s"):format(sys.now() - t0))
    T.eq(rc, signal == "KILL" and 137 or 130)
    -- Ctrl-C: odp removes its own part as it stops; SIGKILL leaves it for the next odp
    T.eq(adb_parts(dev, "executor_runner"), signal == "KILL", "the part after SIG" .. signal)
    for _, r in ipairs(records(out)) do
      T.eq({ r.ok, r.error.code }, { false, "ECANCELED" }, "an interrupted point is saved as interrupted: " ..
        r.error.message)
    end
    argv.timeout, argv.env = 120, NO_SERVER
    local r = proc.run(argv)
    T.eq(r.status, 0, r.stderr)
    if signal == "KILL" then T.match(r.stderr, "removed 1 file%(s%) an earlier odp left on adb://[^\n]*executor_runner%.odp%-part%-") end
    local ok = 0
    for _, rec in ipairs(records(out)) do if rec.ok then ok = ok + 1 end end
    T.eq(ok, 2, "both points")
    T.eq(adb_parts(dev), false, "nothing partial left on the device")
    sh("rm -rf " .. q(dev.root .. ADB_DIR .. "/.odp/blobs")) -- the next round uploads it again
  end
end)

T.with_real_runner("a run's own files on the board (ETDump, samples, outputs) are removed once fetched, and " ..
  "odp's directory there when it ends (what another odp left: tests/lua/shared_board_test.lua)", function(runner)
  local dir = T.tmpdir()
  local remote = srv.remote_dir .. "/runfiles"
  local r = proc.run { odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1", "--port",
    tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--runner", runner,
    "--model", add, "-n", "3", "--sample", "--inputs", "random:1", "--outputs", "--remote-dir", remote,
    "--runs-dir", dir .. "/runs", "--no-history", "--format", "json", cwd = dir, timeout = 120 }
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  -- what was removed from the board is in the run dir, whole
  T.ok(rec.artifacts.etdump and rec.artifacts.etdump.sha256, "the ETDump kept")
  T.ok(rec.cpu_profile and rec.cpu_profile.samples and rec.cpu_profile.samples.total > 0, "the samples joined")
  T.ok(rec.outputs and rec.outputs[1] and rec.outputs[1].data and rec.outputs[1].data.sha256, "the output kept")
  local left
  T.settles(function() -- odp's own directory goes just after odp (odp.target.shell.close_run_dir)
    left = sh(("cd %s && find . -mindepth 1 | sort"):format(q(remote)))
    return not left:match("%./%.odp/runs/[^\n]+")
  end)
  T.eq(left:match("%./%.odp/runs/[^\n]+"), nil, "no odp directory left: " .. left)
  T.eq(left:match("etdump") or left:match("samples") or left:match("%.bin"), nil, "no run file left: " .. left)
end)

------------------------------------------------------------------------------------------------ one writer

-- A sweep writing out through alias (a symlink or a hard link to it) while another writes out: refused at once.
local function second_writer_refused(alias, shown)
  local dir = T.tmpdir()
  local out, other = dir .. "/real.jsonl", dir .. "/other.jsonl"
  sh(("cd %s && " .. alias):format(q(dir)))
  local job = background({ odp, "run", root .. "/scripts/sweep.lua", "--flow", toy, "-p", "size=1,2", "--delay", "1.5",
    "--out", out, "-q" }, dir)
  wait_until("the first sweep's lock", 20, function() return T.flock_holder(out) == tonumber(job.pid) end)
  local t0 = sys.now()
  local r = proc.run { odp, "run", root .. "/scripts/sweep.lua", "--flow", toy, "-p", "size=1,2", "--out", other, "-q",
    timeout = 30 }
  T.eq(r.status, 2, r.stderr)
  T.ok(sys.now() - t0 < 5, "at once")
  T.match(r.stderr, "other%.jsonl is being written by another sweep %(pid " .. job.pid .. "%)" .. shown)
  T.eq(exit_status(job, 30), 0)
  T.eq(#records(out), 2, "every point written once")
  T.eq(T.flock_holder(out), nil, "the lock went with the sweep")
end

T.test("a second sweep writing the same file through a symlinked --out is refused", function()
  second_writer_refused("ln -s real.jsonl other.jsonl && : > real.jsonl", " as .*real%.jsonl")
end)

T.test("a second sweep writing the same file through a hard link is refused (the lock is the file's device+inode)",
  function()
  second_writer_refused(": > real.jsonl && ln real.jsonl other.jsonl", ":")
end)

srv:stop()
T.done()
