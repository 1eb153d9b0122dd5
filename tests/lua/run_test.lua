-- odp.run: one module owns a run (options -> ctx -> board -> steps -> record saved once). A board is opened
-- once and reused by every run on it: counted from OpenSSH's own log (sshd on 127.0.0.1, LogLevel DEBUG1:
-- one "Accepted publickey" line per connection, one channel-open line per exec), not from odp's word.
local T = require("t")
local sshd = require("sshd")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sys = require("odp.sys")
local run = require("odp.run")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local fake = (os.getenv("ODP_BUILD_DIR") or (root .. "/build")) .. "/tests/fake_runner"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local tmp = T.tmpdir()
local quiet = require("odp.core.ui").new { quiet = true }

local failure = T.failure
local records = T.records

-- A flow of the test's own, to hold odp.run to its contract whatever the real flows do.
local function toy_flow(behaviour)
  return {
    name = "toy", options = { { "size", "a size", 1, "int" }, { "runs-dir", "runs", tmp .. "/runs", "string" } },
    validate = function(ctx) if ctx.opts.size < 0 then require("odp.core.errors").fail("EUSAGE", "size < 0", 2) end end,
    record = function(ctx)
      return require("odp.results.result").new { flow = "toy", device = ctx.board.device.name, params = { size = ctx.opts.size } }
    end,
    steps = function(ctx, rec)
      ctx.ui:warn("size %d", ctx.opts.size) -- kept by the run module, in this run's record only
      behaviour(ctx, rec)
    end,
  }
end

T.test("run.point on a board: records carry the board's name, this run's warnings only, result.json saved once", function()
  local b = run.open_board("devices/host.lua", { ui = require("odp.core.ui").new { quiet = true }, board = "bench-1" })
  local flow = toy_flow(function(ctx, rec) rec.latency_ms = { n = 1, p50 = ctx.opts.size } end)
  local r1 = run.point(b, flow, { size = 3 })
  local r2 = run.point(b, flow, { size = 4 })
  T.eq({ r1.ok, r1.board, r1.device, r1.params.size }, { true, "bench-1", "host", 3 })
  T.eq(r1.warnings, { "size 3" }); T.eq(r2.warnings, { "size 4" }, "not the first point's again")
  -- runs interleaved on one ui (the scheduler's boards share one): a run started inside another's steps keeps
  -- its warnings to itself, and the outer one gets none of them
  local inner
  local outer = run.point(b, toy_flow(function(ctx) inner = run.point(b, flow, { size = 6 }) ctx.ui:warn("after") end),
    { size = 5 })
  T.eq(inner.warnings, { "size 6" }); T.eq(outer.warnings, { "size 5", "after" })
  local saved = assert(json.decode(T.read(r2.artifacts.run_dir .. "/result.json")))
  T.eq({ saved.ok, saved.board, saved.latency_ms.p50 }, { true, "bench-1", 4 })
  -- a failure in a step: the failed record, saved; a bug: saved, then raised with its traceback
  local failed = run.point(b, toy_flow(function() require("odp.core.errors").fail("EIO", "board gone") end), {})
  T.eq({ failed.ok, failed.error.code, failed.error.exit }, { false, "EIO", 3 })
  T.eq(json.decode(T.read(failed.artifacts.run_dir .. "/result.json")).error.message, "board gone")
  local runs_before = #sys.readdir(tmp .. "/runs")
  local e = select(2, pcall(run.point, b, toy_flow(function() local x = nil; return x.y end), {}))
  T.match(tostring(e), "attempt to index"); T.match(tostring(e), "stack traceback")
  T.eq(#sys.readdir(tmp .. "/runs"), runs_before + 1, "its record was written too")
  -- validate runs before anything: a usage error raises, no run dir
  T.eq(failure(function() run.point(b, flow, { size = -1 }) end).exit, 2)
  T.eq(#sys.readdir(tmp .. "/runs"), runs_before + 1)
  run.close(b)
end)

T.test("run.artifact: a file of the run dir, named with its sha256 (oracle: sha256sum); read back, checked", function()
  local result = require("odp.results.result")
  local b = run.open_board("devices/host.lua", { ui = quiet })
  local named
  local rec = run.point(b, toy_flow(function(ctx, r)
    T.write(ctx.run_dir .. "/out.bin", "bytes of this run")
    named = run.artifact(ctx, r, "out", ctx.run_dir .. "/out.bin")
    T.write(ctx.run_dir .. "/log.txt", "a log")
    run.artifact(ctx, r, "log", "log.txt") -- a name relative to the run dir
    T.raises(function() run.artifact(ctx, r, "x", tmp .. "/elsewhere") end, "not inside the run directory")
    T.raises(function() run.artifact(ctx, r, "x", "../up") end, "not inside the run directory")
    T.raises(function() run.artifact(ctx, r, "x", "absent") end, "does not exist")
  end), {})
  run.close(b)
  local dir = rec.artifacts.run_dir
  T.eq(named, dir .. "/out.bin")
  local sum = assert(io.popen("sha256sum " .. dir .. "/out.bin")):read("*l"):match("^%x+")
  local saved = assert(json.decode(T.read(dir .. "/result.json")))
  T.eq(saved.artifacts.out, { file = "out.bin", sha256 = sum, bytes = 17 })
  T.eq(saved.artifacts.log.file, "log.txt")
  -- read back from the record's own directory, wherever the reader stands
  T.eq(result.artifact(saved, "out", dir), dir .. "/out.bin")
  T.write(dir .. "/out.bin", "another run's bytes")
  local path, why = result.artifact(saved, "out", dir)
  T.eq(path, nil); T.match(why, "out .*/out.bin has changed since the run")
  os.remove(dir .. "/out.bin")
  T.match(select(2, result.artifact(saved, "out", dir)), "out .*/out.bin is missing")
  T.match(select(2, result.artifact(saved, "nothing", dir)), "names no nothing")
  -- an older record: a plain path, read as given, else beside the record
  T.write(dir .. "/old.etdp", "x")
  T.eq(result.artifact({ artifacts = { etdump = "/gone/old.etdp" } }, "etdump", dir), dir .. "/old.etdp")
  T.eq(result.artifact({ artifacts = { etdump = dir .. "/old.etdp" } }, "etdump"), dir .. "/old.etdp")
end)

T.test("a point far over its stopping rule's time is flagged; stop.seconds is its wall time", function()
  local function rec(measured) return { stop = { rule = "min_time", seconds = measured }, warnings = {},
    steps = { { name = "stage", ms = 1000 }, { name = "run", ms = 33000 }, { name = "fetch", ms = 30500 } } } end
  -- the case seen: 64.5 s for a rule's 32.5 s; 1 s of it uploading: 31 s unexplained
  local hung = rec(32.5)
  run.flag_overrun(hung, 64.5)
  T.eq({ hung.stop.seconds, hung.stop.measured_seconds, hung.stop.overrun_seconds }, { 64.5, 32.5, 31.0 })
  T.eq(#hung.warnings, 1); T.match(hung.warnings[1], "took 64%.5 s, 31%.0 s more .*slowest step: run, 33%.0 s")
  -- 20 s beyond measuring and uploads is within the margin (25 s)
  local fine = rec(32.5)
  run.flag_overrun(fine, 53.5)
  T.eq({ fine.stop.seconds, fine.stop.overrun_seconds, #fine.warnings }, { 53.5, nil, 0 })
  -- a long measurement has half its own time as margin: 100 s of measuring, 40 s more is not flagged
  local long = rec(100)
  run.flag_overrun(long, 141)
  T.eq(long.stop.overrun_seconds, nil)
end)

T.test("a file of the run dir a step named by its plain path is saved with its sha256 (oracle: sha256sum)", function()
  local b = run.open_board("devices/host.lua", { ui = quiet })
  local rec = run.point(b, toy_flow(function(ctx, r)
    T.write(ctx.run_dir .. "/build.log", "a log a step kept")
    r.artifacts.build_log = ctx.run_dir .. "/build.log"  -- the Ethos-U flow's steps name their logs so
    r.artifacts.elsewhere = tmp .. "/not-this-run.txt"   -- not in the run dir: left as it is
  end), {})
  run.close(b)
  local dir = rec.artifacts.run_dir
  local sum = assert(io.popen("sha256sum " .. dir .. "/build.log")):read("*l"):match("^%x+")
  local saved = assert(json.decode(T.read(dir .. "/result.json")))
  T.eq(saved.artifacts.build_log, { file = "build.log", sha256 = sum, bytes = 17 })
  T.eq(saved.artifacts.elsewhere, tmp .. "/not-this-run.txt")
end)

T.test("the one .pte check: exit 2 with the file's name, from odp.run and from every flow", function()
  T.write(tmp .. "/bad.pte", ("x"):rep(64))
  local e = failure(function() run.check_model(tmp .. "/bad.pte") end)
  T.eq({ e.code, e.exit }, { "EUSAGE", 2 }); T.match(e.message, "expected 'ET12'")
  e = failure(function() run.check_model(tmp .. "/nosuch.pte") end)
  T.eq({ e.code, e.exit }, { "EUSAGE", 2 })
  T.eq(run.check_model(add).identifier, "ET12")
  local b = run.open_board("devices/host.lua", { ui = quiet })
  e = failure(function() b:profile { runner = fake, model = tmp .. "/bad.pte", runs_dir = tmp .. "/runs" } end)
  T.eq(e.exit, 2)
  b:close()
  T.eq(failure(function() run.flow("nosuch") end).exit, 2)
end)

T.test("host board: the second point stages nothing again (the board remembers the files and their hashes)", function()
  local b = run.open_board("devices/host.lua", { ui = quiet })
  local r1 = run.point(b, "executorch", { runner = fake, model = add, n = 2, runs_dir = tmp .. "/runs" })
  T.eq(r1.ok, true, r1.error and r1.error.message)
  local staged = b._staged[sys.realpath(fake)]
  T.eq(staged.sha256, sys.sha256_file(fake))
  local r2 = run.point(b, "executorch", { runner = fake, model = add, n = 3, runs_dir = tmp .. "/runs" })
  T.eq({ r2.ok, r2.latency_ms.n, r2.params.num_executions }, { true, 3, 3 })
  T.ok(rawequal(b._staged[sys.realpath(fake)], staged), "the same entry: not staged again")
  run.close(b)
end)

local srv = sshd.start { log_level = "DEBUG1" }
local CONNECTION = "Accepted publickey for " .. srv.user
local CHANNEL = "server_input_channel_open: ctype session"

local function rpi5_args(extra)
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua",
    "--host", srv.user .. "@127.0.0.1", "--port", tostring(srv.port), "--identity", srv.identity,
    "--known-hosts", srv.known_hosts, "--remote-dir", srv.remote_dir .. "/sweep", "--runner", fake, "--model", add,
    "--runs-dir", tmp .. "/runs", "-q" }
  table.move(extra, 1, #extra, #argv + 1, argv)
  argv.timeout = 120
  return argv
end

-- Connections and exec channels sshd logged while fn ran.
local function counted(fn)
  local c0, x0 = srv:count(CONNECTION), srv:count(CHANNEL)
  fn()
  return srv:count(CONNECTION) - c0, srv:count(CHANNEL) - x0
end

T.test("a 3-point SSH sweep opens one connection; points after the first repeat no preflight and no push", function()
  -- the first sweep puts the resident helper on the board (docs/helper-protocol.md); the next ones find it
  local first_c = counted(function()
    local r = proc.run(rpi5_args { "-p", "num_executions=1", "--out", tmp .. "/first.jsonl" })
    T.eq(r.status, 0, r.stderr)
  end)
  local one_c, one_x = counted(function()
    local r = proc.run(rpi5_args { "-p", "num_executions=1", "--out", tmp .. "/one.jsonl" })
    T.eq(r.status, 0, r.stderr)
  end)
  local three_c, three_x = counted(function()
    local r = proc.run(rpi5_args { "-p", "num_executions=1,2,3", "--out", tmp .. "/three.jsonl" })
    T.eq(r.status, 0, r.stderr)
  end)
  local recs = records(tmp .. "/three.jsonl")
  T.eq(#recs, 3)
  for i, rec in ipairs(recs) do
    T.eq({ rec.ok, rec.device, rec.params.num_executions }, { true, "rpi5", i }, rec.error and rec.error.message)
  end
  T.eq(first_c, 1, "the first sweep: one connection")
  T.eq(one_c, 1, "a 1-point sweep: one connection")
  T.eq(three_c, 1, "a 3-point sweep: one connection (main opened one per point)")
  -- a point is requests to the helper on its one channel: two more points cost no channel at all, and
  -- preflight and the hash checks of the runner and model are not repeated
  T.eq(three_x, one_x, ("channels: %d for 3 points, %d for 1"):format(three_x, one_x))
end)

T.test("a swept transport option (remote_dir) is another board: one connection per value, not per point", function()
  local a, b = srv.remote_dir .. "/dir_a", srv.remote_dir .. "/dir_b"
  local conns = counted(function()
    local r = proc.run(rpi5_args { "-p", "remote_dir=" .. a .. "," .. b, "-p", "num_executions=1,2",
      "--out", tmp .. "/dirs.jsonl" })
    T.eq(r.status, 0, r.stderr)
  end)
  T.eq(conns, 2)
  local recs = records(tmp .. "/dirs.jsonl")
  T.eq(#recs, 4)
  T.eq({ recs[1].params.remote_dir, recs[4].params.remote_dir }, { a, b })
  for _, d in ipairs({ a, b }) do T.eq(sys.sha256_file(d .. "/.odp/blobs/" .. sys.sha256_file(fake)), sys.sha256_file(fake), d) end
end)

T.test("run.open_board + run.point over SSH: one connection for three runs, then closed", function()
  local b = run.open_board("devices/rpi5.lua", { host = srv.user .. "@127.0.0.1", port = srv.port,
    identity = srv.identity, known_hosts = srv.known_hosts, remote_dir = srv.remote_dir .. "/api", ui = quiet,
    board = "pi5-a" })
  local stage = {}
  local conns = counted(function()
    for n = 1, 3 do
      local rec = run.point(b, "executorch", { runner = fake, model = add, n = n, runs_dir = tmp .. "/runs" })
      T.eq({ rec.ok, rec.board, rec.latency_ms.n }, { true, "pi5-a", n }, rec.error and rec.error.message)
      T.eq({ rec.steps[1].name, rec.steps[2].name, #rec.steps }, { "stage", "run", 2 })
      stage[n] = rec.steps[1].status
    end
  end)
  T.eq(conns, 1)
  T.eq(stage, { "ran", "skipped: unchanged", "skipped: unchanged" }, "pushed once, then the board had the files")
  T.eq(b.ui, quiet, "the board's ui is its own again after each run")
  T.eq(sys.sha256_file(srv.remote_dir .. "/api/.odp/blobs/" .. sys.sha256_file(fake)), sys.sha256_file(fake),
    "the runner on the board")
  -- a runner rebuilt between points (other bytes, same path) is pushed again: the board keys by sha256
  local copy = tmp .. "/runner_copy"
  T.write(copy, T.read(fake))
  assert(sys.chmod(copy, tonumber("755", 8)))
  -- the same bytes under another name: the board has them already (kept by sha256), nothing is uploaded
  local r1 = run.point(b, "executorch", { runner = copy, model = add, runs_dir = tmp .. "/runs" })
  T.eq(r1.steps[1].status, "skipped: unchanged")
  T.write(copy, T.read(fake) .. "\0rebuilt")
  local r2 = run.point(b, "executorch", { runner = copy, model = add, runs_dir = tmp .. "/runs" })
  T.eq({ r2.ok, r2.steps[1].status }, { true, "ran" }, r2.error and r2.error.message)
  T.eq(sys.sha256_file(srv.remote_dir .. "/api/.odp/blobs/" .. sys.sha256_file(copy)), sys.sha256_file(copy),
    "the new bytes on the board")
  run.close(b)
  T.eq(b._target, nil, "closed")
end)

T.test("what the transport says as it connects (an ssh_config warning) is in the record of the run that connected", function()
  local cfg = tmp .. "/ssh_config"
  T.write(cfg, "Match exec \"true\"\n  User nobody\n")
  local b = run.open_board("devices/rpi5.lua", { host = srv.user .. "@127.0.0.1", port = srv.port,
    identity = srv.identity, known_hosts = srv.known_hosts, remote_dir = srv.remote_dir .. "/api",
    ssh_config = cfg, ui = require("odp.core.ui").new { quiet = true } })
  local r1 = run.point(b, "executorch", { runner = fake, model = add, runs_dir = tmp .. "/runs" })
  local r2 = run.point(b, "executorch", { runner = fake, model = add, runs_dir = tmp .. "/runs" })
  T.eq(r1.ok, true, r1.error and r1.error.message)
  T.match(table.concat(r1.warnings, "\n"), "`Match exec` cannot be evaluated by odp")
  T.eq(table.concat(r2.warnings, "\n"):find("Match exec", 1, true), nil, "not the next run's (it did not connect)")
  run.close(b)
end)

srv:stop()
T.done()
