-- The ssh target (lua/odp/target/ssh.lua) and preflight against a private sshd on 127.0.0.1: the loopback
-- "board" is x86_64 with this machine's glibc.
local T = require("t")
local sshd = require("sshd")
local craft = require("elfcraft")
local sys = require("odp.sys")
local proc = require("odp.proc")
local errors = require("odp.core.errors")
local target_ssh = require("odp.target.ssh")
local preflight = require("odp.target.preflight")

local srv = sshd.start()
local tmp = T.tmpdir()
local rdir = srv.remote_dir .. "/work"

local function opts(extra)
  local o = { host = srv.user .. "@127.0.0.1", port = srv.port, identity = srv.identity,
    known_hosts = srv.known_hosts, remote_dir = rdir }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

local t = assert(target_ssh.new(opts()))

T.test("one session per run: opening the same board again returns the open target", function()
  T.eq(t.kind, "ssh"); T.match(t.uri, "^ssh://odptest@127%.0%.0%.1:%d+$")
  T.ok(rawequal(assert(target_ssh.new(opts())), t), "same target")
end)

T.test("arch, libc_version and free_bytes describe the board", function()
  T.eq(t:arch(), sshd.sh("uname -m"):match("%S+"))
  T.eq(t:libc_version(), sshd.sh("getconf GNU_LIBC_VERSION"):match("([%d%.]+)%s*$"))
  local free = t:free_bytes(rdir .. "/not/yet/there")
  T.ok(free and free > 0, "free bytes")
  T.ok(t:mkdir(rdir)); T.eq(sys.stat(rdir).type, "dir", "mkdir")
end)

T.test("push hash-skips unchanged files; pull is atomic", function()
  local f = tmp .. "/blob"
  sshd.sh("head -c 3000000 /dev/urandom > " .. f)
  local r = assert(t:push(f, rdir .. "/blob", { mode = tonumber("755", 8) }))
  T.eq(r, { bytes = 3000000, skipped = false })
  T.eq(t:sha256(rdir .. "/blob"), sys.sha256_file(f))
  local seen
  r = assert(t:push(f, rdir .. "/blob", { on_progress = function(d, n) seen = { d, n } end }))
  T.eq(r.skipped, true); T.eq(seen, { 3000000, 3000000 })
  sshd.sh("printf x >> " .. f)
  T.eq(assert(t:push(f, rdir .. "/blob")).skipped, false)
  T.eq(t:sha256(rdir .. "/nothing"), nil)
  T.eq(assert(t:pull(rdir .. "/blob", tmp .. "/back")), true)
  T.eq(sys.sha256_file(tmp .. "/back"), sys.sha256_file(f))
  local ok, _, code = t:pull(rdir .. "/nothing", tmp .. "/nothing")
  T.eq(ok, nil); T.eq(code, "ENOTFOUND"); T.eq(sys.stat(tmp .. "/nothing"), nil)
end)

T.test("exec measures rusage through odp-rusage, pushed once into <remote_dir>/.odp", function()
  local r = assert(t:exec({ "sh", "-c", "head -c 40000000 /dev/zero | tail -c 1 >/dev/null; echo out; echo err >&2" }))
  T.eq(r.ok, true); T.eq(r.stdout, "out\n"); T.eq(r.stderr, "err\n")
  T.ok(r.rusage and r.rusage.maxrss_kb > 0, "maxrss"); T.ok(r.wall_s > 0, "wall")
  T.eq(t:rusage_method(), "odp-rusage")
  T.eq(sys.sha256_file(rdir .. "/.odp/odp-rusage"), sys.sha256_file(target_ssh.local_helper(t:arch())))
  r = assert(t:exec({ "sh", "-c", "kill -ABRT $$" }))
  T.eq(r.signal, 6); T.eq(r.signal_name, "ABRT"); T.eq(r.status, 0); T.eq(r.ok, false)
  r = assert(t:exec({ "sh", "-c", "exit 4" }))
  T.eq(r.status, 4)
  r = assert(t:exec({ "pwd" }, { cwd = rdir, env = { ODP_X = "a b" } }))
  T.eq(r.stdout, rdir .. "\n")
  T.eq(assert(t:exec({ "sh", "-c", "echo $ODP_X" }, { env = { ODP_X = "a b" } })).stdout, "a b\n")
end)

T.test("a runner hanging under odp-rusage is gone from the board after the timeout", function()
  local marker = "odp_target_hang_" .. sys.getpid()
  -- sleep lengths of this run only: another suite running at the same time must not look like a leftover
  local d = 200000 + sys.getpid() % 100000 * 2
  local r = assert(t:exec({ "sh", "-c", ("sleep %d & sleep %d; : %s"):format(d, d + 1, marker) }, { timeout = 1 }))
  T.eq(r.timed_out, true); T.eq(r.ok, false)
  -- the group gets TERM, then KILL after a grace period: wait for that (a loaded machine is slow), bounded
  local left
  for _ = 1, 100 do
    left = sshd.sh(("ps -eo stat,args | grep -e %s -e 'sleep %d' -e 'sleep %d' | grep -v grep | grep -v '^Z' || true")
      :format(marker, d, d + 1))
    if left == "" then break end
    sys.sleep(0.1)
  end
  T.eq(left, "", "nothing of the command left on the board")
end)

T.test("without a helper for the board, rusage comes from GNU time -v (odp.parse.gnutime)", function()
  local saved_method, saved_helper = t.cache.rusage, t.cache.helper
  t.cache.rusage, t.cache.helper = "gnutime", nil
  local r = assert(t:exec({ "sh", "-c", "head -c 30000000 /dev/zero | tail -c 1 >/dev/null; echo err >&2; exit 2" }))
  t.cache.rusage, t.cache.helper = saved_method, saved_helper
  T.eq(r.status, 2); T.eq(r.stderr, "err\n")
  T.ok(r.rusage and r.rusage.maxrss_kb > 0, "maxrss from time -v")
end)

T.test("the full scripts/rpi5.lua flow against the loopback board with the test runner", function()
  local odp = os.getenv("ODP") or "build/odp"
  local fake = (os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")) .. "/tests/fake_runner"
  local pte = T.root() .. "/tests/fixtures/pte/add_arduino.pte"
  local rd = srv.remote_dir .. "/flow"
  local args = { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts,
    "--remote-dir", rd, "--runner", fake, "--model", pte, "-n", "10", "--repeat", "2",
    "--etdump", tmp .. "/p.etdump", "--runs-dir", tmp .. "/runs", "--format", "json",
    "--", "--fake_etdump=" .. T.root() .. "/tests/fixtures/etdump/add_n10.etdump", cwd = tmp, timeout = 120 }
  local r = proc.run(args)
  T.eq(r.status, 0, r.stderr .. r.stdout)
  local rec = assert(require("odp.core.json").decode(r.stdout))
  T.eq(rec.ok, true); T.match(rec.target, "^ssh://odptest@127%.0%.0%.1")
  T.eq(rec.latency_ms.n, 20); T.ok(rec.peak_rss_kb > 0, "peak RSS from odp-rusage on the board")
  T.eq(sys.sha256_file(tmp .. "/p.etdump"), sys.sha256_file(T.root() .. "/tests/fixtures/etdump/add_n10.etdump"),
    "ETDump pulled back")
  -- kept by its bytes' sha256 for the next odp (docs/devices.md "A shared board"), and holding them
  T.eq(sys.sha256_file(rd .. "/.odp/blobs/" .. sys.sha256_file(fake)), sys.sha256_file(fake))
  T.ok(sys.stat(rd .. "/.odp/odp-rusage"), "helper pushed")
  -- a second run uploads nothing: everything hash-skipped
  r = proc.run(args)
  T.eq(r.status, 0, r.stderr); T.match(r.stderr, "unchanged fake_runner")
  -- a runner that writes no ETDump: a warning, as on the host, not a failed pull
  args[#args] = nil
  r = proc.run(args)
  T.eq(r.status, 0, r.stderr)
  rec = assert(require("odp.core.json").decode(r.stdout))
  T.match(table.concat(rec.warnings, "\n"), "no ETDump was written")
end)

T.with_real_runner("scripts/rpi5.lua with the real runner: --min-samples 25 -n 10 takes 3 processes; samples.csv, stop", function(runner)
  local odp = os.getenv("ODP") or "build/odp"
  local r = proc.run { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts,
    "--remote-dir", srv.remote_dir .. "/real", "--runner", runner, "--model", T.root() .. "/tests/fixtures/pte/add_arduino.pte",
    "-n", "10", "--min-samples", "25", "--runs-dir", tmp .. "/runs", "--format", "json", cwd = tmp, timeout = 120 }
  T.eq(r.status, 0, r.stderr)
  local rec = assert(require("odp.core.json").decode(r.stdout))
  T.eq(rec.stop.rule, "min_samples"); T.eq(rec.stop.processes, 3); T.eq(rec.latency_ms.n, 30)
  T.eq(#rec.latency_ms.first_ms, 3); T.ok(rec.latency_ms.ci95, "ci95")
  local groups = assert(require("odp.results.measure").read_samples((require("odp.results.result").artifact(rec, "samples"))))
  T.eq(#groups, 3); T.eq(#groups[3], 10)
end)

T.test("exec with helper_args: the pushed odp-rusage pins the program (--cpus), as it reports itself", function()
  local probe = (os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")) .. "/tests/affinity_probe"
  local r = assert(t:exec({ probe }, { helper_args = { "--cpus", "0" } }))
  T.eq(r.stdout, "affinity=0 thread=0 status=0\n")
  T.ok(r.rusage and r.rusage.maxrss_kb > 0)
  r = assert(t:exec({ probe }, { helper_args = { "--cpus", "1000" } }))
  T.eq(r.status, 125)
  T.match(r.stderr, "cannot pin to CPUs 1000")
  -- counters through the pushed helper, as the board's unprivileged user
  r = assert(t:exec({ probe }, { counters = "basic" }))
  T.ok(r.counters and r.counters.page_faults > 0, "counted on the board")
  if r.counters.paranoid and r.counters.paranoid >= 2 then T.eq(r.counters.user_only, true, "user space only") end
  local shell = require("odp.target.shell")
  T.eq(shell.with_helper_args("time", "/usr/bin/time -v", nil, "basic"), "/usr/bin/time -v",
    "counters alone are dropped where there is no helper")
  local p, err, code = shell.with_helper_args("time", "/usr/bin/time -v", { "--cpus", "0" })
  T.eq({ p, code }, { nil, "ENOTSUP" })
  T.match(err, "needs odp's odp%-rusage helper")
  T.eq(shell.with_helper_args("odp-rusage", "'/r/.odp/odp-rusage' --", { "--cpus", "0-3" }),
    "'/r/.odp/odp-rusage' --cpus 0-3 --")
end)

T.test("device state over SSH: one command, the same snapshot as read here, of the recorded Pi 5 tree", function()
  local ds = require("odp.target.device_state")
  local tree = T.root() .. "/tests/fixtures/device_state/rpi5"
  local remote = assert(ds.gather(t, { root = tree }))
  T.eq(remote, assert(ds.gather(require("odp.target.host").new(), { root = tree })))
  T.eq(remote.board, "Raspberry Pi 5 Model B Rev 1.0")
  local live = assert(ds.gather(t))
  T.eq(live.hostname, sys.hostname(), "the loopback board is this machine")
end)

T.with_real_runner("scripts/rpi5.lua with the real runner: device_state in the record and the report", function(runner)
  local odp = os.getenv("ODP") or "build/odp"
  local pte = T.root() .. "/tests/fixtures/pte/add_arduino.pte"
  local args = { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts,
    "--remote-dir", srv.remote_dir .. "/state", "--runner", runner, "--model", pte, "-n", "2",
    "--runs-dir", tmp .. "/runs", "--format", "json", cwd = tmp, timeout = 120,
    env = { ODP_STATE_ROOT = T.root() .. "/tests/fixtures/device_state/rpi5" } }
  local r = proc.run(args)
  T.eq(r.status, 0, r.stderr .. r.stdout)
  local rec = assert(require("odp.core.json").decode(r.stdout))
  local d = rec.device_state
  T.eq({ d.hostname, d.board, d.cpus_online, d.cpus_used }, { "raspberrypi", "Raspberry Pi 5 Model B Rev 1.0", 4, "0-3" })
  T.eq(d.clusters, { { name = "all", cpus = "0-3", core = "Cortex-A76", max_khz = 2400000 } })
  T.eq({ d.before.thermal[1].temp_c, d.after.thermal[1].temp_c }, { 58.4, 58.4 })
  T.eq(d.throttled, false)
  table.remove(args) -- without "--format", "json": the human report
  table.remove(args)
  r = proc.run(args)
  T.match(r.stdout, "device%s+raspberrypi · Cortex%-A76 x4 · 2%.4 GHz ondemand · 58%.4 °C %-> 58%.4 °C")
end)

-- Preflight raises structured failures (exit 3); returns {code, message, exit}.
local function preflight_failure(o)
  local ok, e = pcall(preflight.check, t, o)
  T.ok(not ok, "preflight should fail")
  T.ok(errors.is_failure(e), tostring(e))
  T.eq(e.exit, 3); T.ok(not e.message:find("\n"), "one line")
  return e
end

local model = T.root() .. "/tests/fixtures/pte/add_arduino.pte" -- a real .pte: odp.parse.pte checks all of it

T.test("preflight passes for a matching runner and model", function()
  local facts = preflight.check(t, { runner = "/bin/true", model = model })
  T.eq(facts.arch, t:arch()); T.ok(facts.free_bytes > 0, "free")
end)

T.test("preflight: an aarch64 runner against the x86_64 board", function()
  local e = preflight_failure { runner = craft.aarch64(tmp), model = model }
  T.eq(e.code, "ENODEV"); T.match(e.message, "built for aarch64"); T.match(e.message, "x86_64")
end)

T.test("preflight: a runner needing GLIBC_9.99, with the Graviton4 advice", function()
  local device = require("odp.target.device").load(T.root() .. "/devices/graviton4.lua")
  local e = preflight_failure { runner = craft.needs_glibc(tmp), model = model, device = device }
  T.eq(e.code, "ENODEV"); T.match(e.message, "GLIBC_9%.99"); T.match(e.message, t:libc_version(), "board glibc")
  T.match(e.message, "Ubuntu 26%.04")
end)

T.test("a model without ET12 is the one model check's (exit 2, before the board); preflight: too little free space", function()
  T.write(tmp .. "/bad.pte", "\0\0\0\0ET11xxxxxxxx")
  local ok, e = pcall(require("odp.run").check_model, tmp .. "/bad.pte")
  T.eq(ok, false); T.ok(errors.is_failure(e), tostring(e))
  T.eq({ e.code, e.exit }, { "EUSAGE", 2 }); T.match(e.message, "'ET11'")
  -- preflight leaves the model to it: a bad model passes preflight (only its size counts)
  T.eq(preflight.check(t, { runner = "/bin/true", model = tmp .. "/bad.pte" }).arch, t:arch())
  e = preflight_failure { runner = "/bin/true", model = model, need_bytes = 1 << 60 }
  T.eq(e.code, "ENOSPC"); T.match(e.message, "free in")
end)

T.test("scripts/rpi5.lua: a preflight failure is one line, exit 3, before any upload", function()
  local odp = os.getenv("ODP") or "build/odp"
  local model = T.root() .. "/tests/fixtures/pte/add_arduino.pte" -- a real .pte: the flow parses it first
  local rd = srv.remote_dir .. "/script"
  local r = proc.run { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts,
    "--remote-dir", rd, "--runner", craft.aarch64(tmp), "--model", model, timeout = 60 }
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "built for aarch64")
  T.eq(select(2, r.stderr:gsub("\n", "")), 1, "one line: " .. r.stderr)
  T.eq(sys.stat(rd .. "/hello_aarch64"), nil, "nothing uploaded")
  -- this odp's directory and lease, made in the preflight's own flight, went with it: nobody sees it running
  T.eq(T.settles(function() return #sys.readdir(rd .. "/.odp/runs") == 0 and sys.readdir(rd .. "/.odp/runs") end),
    {}, "no lease left") -- removed just after odp (odp.target.shell.close_run_dir)
  -- an unknown host key stops it too, with the hint
  r = proc.run { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", tmp .. "/empty_kh",
    "--remote-dir", rd, "--runner", "/bin/true", "--model", model, timeout = 60 }
  T.eq(r.status, 3); T.match(r.stderr, "%-%-accept%-new%-host%-key")
end)

T.test("scripts/rpi5.lua: validate needs no network; preflight is the step after it", function()
  local script = dofile(T.root() .. "/scripts/rpi5.lua")
  local model = T.root() .. "/tests/fixtures/pte/add_arduino.pte"
  local ctx = { opts = { host = "odp@127.0.0.1", port = 1, runner = "/bin/true", model = model, warmup = 0,
    timeout = 10, remote_dir = "/tmp/odp" }, args = {}, ui = require("odp.core.ui").new { quiet = true } }
  local t0 = sys.now()
  script.validate(ctx) -- port 1 refuses: validate must not have tried
  T.eq(ctx.preflight, nil, "no preflight in validate")
  T.ok(sys.now() - t0 < 5, "no connection attempt")
  local ok, e = pcall(script.run, ctx)
  T.eq(ok, false); T.eq(e.exit, 3, "the run's preflight step connects and fails: " .. tostring(e.message))
end)

t:close()
T.raises(function() t.session:exec("true") end)
srv:stop()
T.done()
