-- The host flow end to end: odp run scripts/host.lua against the test runner program (tests/c/fake_runner.c),
-- real fixtures, and every failure the issue lists.
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local fake = (os.getenv("ODP_BUILD_DIR") or (root .. "/build")) .. "/tests/fake_runner"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local etd = root .. "/tests/fixtures/etdump/add_n10.etdump"
local dir = T.tmpdir()

local function odp_run(args, env, timeout)
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runs-dir", dir .. "/runs" }
  table.move(args, 1, #args, #argv + 1, argv)
  return assert(proc.run { argv = argv, cwd = dir, env = env or {}, timeout = timeout or 60 })
end

local function json_run(args, env)
  local r = odp_run(args, env)
  local rec, err = json.decode(r.stdout)
  if not rec then error(("not JSON (%s); stdout:\n%s\nstderr:\n%s"):format(err, r.stdout, r.stderr), 0) end
  return rec, r
end

local function only_line(s) return (s:gsub("\n$", "")):find("\n") == nil end

T.test("success: latency from per-iteration lines, RSS, buffers, outputs, ETDump, run dir", function()
  local rec, r = json_run({ "--runner", fake, "--model", add, "-n", "10", "--etdump", dir .. "/out.etdump",
    "--format", "json" }, { ODP_FAKE_ETDUMP = etd })
  T.eq(r.status, 0, "exit code")
  T.eq(rec.schema, "odp.result/1")
  T.eq(rec.ok, true)
  T.eq(rec.flow, "executorch")
  T.eq(rec.latency_ms.n, 10)
  T.eq(rec.latency_ms.source, "log")
  T.ok(rec.latency_ms.p50 >= 0.15 and rec.latency_ms.p50 < 50, "p50 near the runner's 0.2 ms busy loop")
  T.ok(rec.latency_ms.min <= rec.latency_ms.p50 and rec.latency_ms.p50 <= rec.latency_ms.max, "ordered")
  T.ok(rec.peak_rss_kb > 500, "peak RSS from wait4")
  T.eq(rec.planned_buffers, { 32 })
  T.eq(rec.outputs[1].sizes, { 3 })
  T.eq(rec.outputs[1].values, { 2, 2, 2 })
  T.eq(rec.model.sha256, sys.sha256_file(add))
  T.eq(rec.params.num_executions, 10)
  T.eq(T.read(dir .. "/out.etdump"), T.read(etd), "a copy of the ETDump landed where asked")
  -- the record names the run's own copy, in its run directory, with its sha256
  T.eq(rec.artifacts.etdump, { file = "etdump.etdp", sha256 = sys.sha256_file(etd), bytes = #T.read(etd) })
  T.eq(T.read(rec.artifacts.run_dir .. "/etdump.etdp"), T.read(etd))
  T.eq(rec.artifacts.runner_stderr.file, "runner.stderr")
  local saved = assert(json.decode(T.read(rec.artifacts.run_dir .. "/result.json")))
  T.eq(saved.latency_ms.n, 10, "result.json in the run dir")
  T.match(T.read(rec.artifacts.run_dir .. "/runner.stderr"), "Model executed successfully 10 time")
end)

T.with_real_runner("the real runner's ETDump: ops_summary in the record and the report", function(runner)
  local rec = json_run({ "--runner", runner, "--model", add, "-n", "5", "--etdump", dir .. "/real.etdump",
    "--format", "json" })
  T.eq(rec.ok, true)
  local s = rec.ops_summary
  T.eq({ s.n, s.delegated_ms, s.delegated_share }, { 5, 0, 0 }, "five inferences, no delegate in the add model")
  T.ok(s.kernels_ms > 0 and s.kernels_ms <= s.execute_ms, "the kernel's time is inside execute")
  for _, op in ipairs(rec.ops) do
    if op.name == "Method::execute" then T.eq(s.execute_ms, op.p50, "the op table's median") end
  end
  local r = odp_run({ "--runner", runner, "--model", add, "-n", "2", "--etdump", dir .. "/real2.etdump" })
  T.match(r.stdout, "time split%s+delegated 0 ms %(0%%%) · kernels [%d.]+ [^ ]*s · ")
end)

T.test("-v -v: odp's own time by part after the report; the record keeps the parts up to its write; both add up to no more than the whole", function()
  local t0 = sys.now()
  local r = odp_run({ "--runner", fake, "--model", add, "-n", "10", "-v", "-v", "--format", "json" },
    { ODP_HISTORY = dir .. "/timed.db" })
  local outside = (sys.now() - t0) * 1000
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  -- the terminal's table: every part of a host run, in order, then the whole
  local block = r.stderr:match("odp's own time, by part[^\n]*\n(.*)$")
  T.ok(block, "the table on stderr: " .. r.stderr)
  local names, sum, whole, inside = {}, 0, nil, {}
  for line in block:gmatch("[^\n]+") do
    local name, ms = line:match("^  (%S.-)%s%s+([%d.]+)")
    if name == "whole" then whole = tonumber(ms)
    elseif line:find("waited for", 1, true) then inside[name] = tonumber(ms)
    elseif name then names[#names + 1] = name; sum = sum + tonumber(ms) end
  end
  T.eq(names, { "start-up", "script (the flow's modules)", "options", "validate", "board", "preflight",
    "record (model and runner hashes)", "stage", "run", "measure (parse, statistics)", "finish (device state after)",
    "artifacts (hashes)", "record file", "history", "board (close)", "report" })
  T.ok(whole and sum <= whole + 0.01 * #names, ("the parts (%.2f ms) add up to the whole (%s ms)"):format(sum, whole))
  T.ok(whole <= outside, ("the whole (%s ms) is within the command's own wall time seen from outside (%.2f ms)")
    :format(whole, outside))
  T.ok(inside["runner processes"] > 0, "the runner processes' own time, inside the run step")
  -- the record: the same parts up to its own write (not the record file, the history, the report), in ms
  local parts, rsum = {}, 0
  for i, p in ipairs(rec.timings.parts) do parts[i] = p.name; rsum = rsum + p.ms end
  T.eq(parts, table.move(names, 1, 12, 1, {}))
  T.ok(rsum <= rec.timings.total_ms, ("the record's parts (%.2f ms) <= its total (%.2f ms)"):format(rsum, rec.timings.total_ms))
  T.ok(rec.timings.total_ms <= whole, "the record's total is a part of the command's")
  local run_ms
  for _, p in ipairs(rec.timings.parts) do if p.name == "run" then run_ms = p.ms end end
  T.ok(rec.timings.inside.runner_processes <= run_ms + 1, "the runner processes ran inside the run step")
  -- -v counts its uses ("count" options); absent it is false, --no-verbose too
  local options = require("odp.core.options")
  local function verbose(argv) return options.parse(argv, options.global_options).verbose end
  T.eq({ verbose({}), verbose({ "-v" }), verbose({ "-v", "--verbose", "-v" }), verbose({ "--no-verbose" }) },
    { false, 1, 3, false })
  T.raises(function() verbose({ "--verbose=2" }) end, "takes no value")
  -- one -v: no table
  r = odp_run({ "--runner", fake, "--model", add, "-n", "1", "-v" })
  T.eq(r.status, 0, r.stderr)
  T.ok(not r.stderr:find("odp's own time", 1, true), "one -v shows no timings")
end)

T.test("a run's files are flushed once: samples.csv written out and batched, the record fsync'd with its directory", function()
  local trace = dir .. "/fsync.trace"
  local r = assert(proc.run { argv = { "strace", "-f", "-e", "trace=fsync,fdatasync,sync_file_range,rename", "-o", trace,
    odp, "run", root .. "/scripts/host.lua", "--runs-dir", dir .. "/runs", "--runner", fake, "--model", add, "-n", "10",
    "--no-history", "--format", "json" }, cwd = dir, env = T.asan_env("detect_leaks=0"), timeout = 60 })
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  local text = T.read(trace)
  os.remove(trace)
  local count = { fsync = 0, fdatasync = 0, sync_file_range = 0 }
  for call in text:gmatch("%d+%s+([%w_]+)%(") do count[call] = (count[call] or 0) + 1 end
  -- two flushes: the record's fsync, then its directory's, around its rename (samples.csv's data only written
  -- out before them, its rename committed by the directory's fsync)
  T.eq({ count.fsync, count.fdatasync, count.sync_file_range }, { 2, 0, 1 }, text)
  T.match(text, 'sync_file_range%(.-rename%("[^"]*/samples%.csv%.tmp%.%d+", "[^"]*/samples%.csv"%)')
  T.match(text, 'fsync%(.-rename%("[^"]*/result%.json%.tmp%.%d+", "[^"]*/result%.json"%).-fsync%(')
  T.eq(sys.sha256_file(rec.artifacts.run_dir .. "/samples.csv"), rec.artifacts.samples.sha256, "samples.csv whole")
end)


-- Every module a host run loads is paid on every run (bench/README.md "Host flow overhead"): what only some runs
-- use is required where it is used. The run goes through a script that returns scripts/host.lua's declaration
-- with its run wrapped, so package.loaded is read after the run, report and history row included.
T.test("a plain host run loads no module only other runs use (--llm's parser, the OOM log, the board's helper client)", function()
  local wrapper = dir .. "/loaded_after.lua"
  T.write(wrapper, ([[
local spec = dofile(%q)
local run = spec.run
spec.run = function(ctx)
  local records = run(ctx)
  local out = {}
  for name in pairs(package.loaded) do out[#out + 1] = name end
  table.sort(out)
  io.stderr:write("LOADED ", table.concat(out, " "), "\n")
  return records
end
return spec
]]):format(root .. "/scripts/host.lua"))
  local r = assert(proc.run { argv = { odp, "run", wrapper, "--runs-dir", dir .. "/runs", "--runner", fake, "--model",
    add, "-n", "3", "-q" }, cwd = dir, timeout = 60 })
  T.eq(r.status, 0, r.stderr)
  local loaded = {}
  for name in (r.stderr:match("LOADED ([^\n]*)") or ""):gmatch("%S+") do loaded[name] = true end
  T.ok(loaded["odp.parse.executorch"] and loaded["odp.results.history"], "the list is the run's: " .. r.stderr)
  for _, name in ipairs { "odp.parse.llm", "odp.parse.oomkill", "odp.target.helper", "odp.parse.etdump",
    "odp.flows.executorch.fetch", "odp.target.probe", "odp.target.lab", "odp.core.stream", "odp.results.html" } do
    T.ok(not loaded[name], name .. " is not loaded by a plain host run")
  end
end)
T.test("an unchanged runner of many MB is not read again: its sha256 and whether it takes --etdump_path are remembered", function()
  -- the fake runner with 8 MiB after its ELF image (it still runs), old enough to be remembered (result.RACY_S)
  local big = dir .. "/big_runner"
  T.eq(sys.write_file(big, T.read(fake) .. ("\0"):rep(8 << 20), { mode = tonumber("755", 8) }), true)
  sys.sleep(require("odp.results.result").RACY_S + 0.2)
  -- bytes odp (and its children) read() from the runner, counted by strace from outside
  local function run_traced()
    local trace = dir .. "/read.trace"
    local r = assert(proc.run { argv = { "strace", "-f", "-y", "-e", "trace=read,pread64", "-o", trace, odp, "run",
      root .. "/scripts/host.lua", "--runs-dir", dir .. "/runs-big", "--runner", big, "--model", add, "-n", "2",
      "--no-history", "-v" }, cwd = dir, env = T.asan_env("detect_leaks=0"), timeout = 60 })
    T.eq(r.status, 0, r.stderr)
    local bytes = 0
    for call in T.read(trace):gmatch("[^\n]+") do
      if call:find("<" .. sys.realpath(big) .. ">", 1, true) then
        bytes = bytes + (tonumber(call:match("= (%d+)$")) or 0)
      end
    end
    os.remove(trace)
    T.match(r.stderr, "run: [^\n]*big_runner [^\n]*%-%-etdump_path ", "the runner gets its ETDump path")
    return bytes
  end
  local first = run_traced()
  T.ok(first >= 8 << 20, ("the first run hashes all of it (and looks for the flag): %d bytes read"):format(first))
  local again = run_traced()
  T.ok(again < 16 * 1024, ("the next run reads its ELF header only, not %d bytes"):format(again))
  os.remove(big)
end)

T.test("an older file at --etdump does not pass for this run's ETDump", function()
  T.write(dir .. "/stale.etdump", T.read(etd))
  local rec = json_run({ "--runner", fake, "--model", add, "--etdump", dir .. "/stale.etdump", "--format", "json" })
  T.eq(rec.ok, true)
  T.eq(rec.artifacts.etdump, nil)
  T.match(table.concat(rec.warnings, "\n"), "no ETDump was written")
end)

T.test("--repeat and --warmup aggregate only measured runs", function()
  local rec = json_run({ "--runner", fake, "--model", add, "-n", "4", "--repeat", "3", "--warmup", "2", "--format", "json" })
  T.eq(rec.ok, true)
  T.eq(rec.latency_ms.n, 12)
  T.eq(rec.params["repeat"], 3)
  T.eq(rec.params.warmup, 2)
end)

T.test("older runner without per-iteration lines: totals, a warning", function()
  local rec = json_run({ "--runner", fake, "--model", add, "-n", "5", "--format", "json", "--", "--fake_mode=old" })
  T.eq(rec.ok, true)
  T.eq(rec.latency_ms.source, "log")
  T.eq(rec.latency_ms.n, 5)
  T.match(table.concat(rec.warnings, "\n"), "only its total")
end)

T.test("Release runner with no log lines: wall time and a clear warning", function()
  local rec = json_run({ "--runner", fake, "--model", add, "-n", "5", "--format", "json" }, { ODP_FAKE_MODE = "silent" })
  T.eq(rec.ok, true)
  T.eq(rec.latency_ms.source, "wall")
  T.match(table.concat(rec.warnings, "\n"), "printed no timing lines")
  T.eq(rec.outputs[1].values, { 2, 2, 2 }, "the tensor on stdout is still read")
end)

T.test("human output lines up and names the numbers", function()
  local r = odp_run({ "--runner", fake, "--model", add, "-n", "3" })
  T.eq(r.status, 0)
  T.match(r.stdout, "latency %(from log%)")
  -- The fake runner busy-waits 200 µs of wall time per iteration, so a loaded (or sanitized) machine
  -- only makes the mean longer: assert the floor and the format, not a band an overloaded CI misses.
  local mean = r.stdout:match("\n%s+n%s+mean µs%s+min µs%s+p50 µs%s+p90 µs%s+p99 µs%s+max µs%s+std [^ ]*s\n%s+3%s+([%d.]+)%s")
  T.ok(mean, "the runner's ~200 µs iterations in µs: " .. r.stdout)
  T.ok(mean:match("^%d%d%d%.%d$") or mean:match("^%d%d%d%d$"), "four significant digits: " .. mean)
  T.ok(tonumber(mean) >= 200, "no faster than the runner's 200 µs busy wait: " .. mean)
  T.match(r.stdout, "planned buffers%s+%[0%] 32 B")
end)

T.test("csv and jsonl, --out infers the format from the extension", function()
  local r = odp_run({ "--runner", fake, "--model", add, "-n", "2", "--format", "csv" })
  local header, row = r.stdout:match("^([^\n]+)\n([^\n]+)\n$")
  T.ok(header and header:find("^schema,ok,flow,"), "csv header")
  T.ok(row:find("^odp.result/1,true,executorch,"), "csv row")
  r = odp_run({ "--runner", fake, "--model", add, "-n", "2", "--out", dir .. "/r.jsonl" })
  local line = T.read(dir .. "/r.jsonl")
  T.ok(only_line(line), "one JSONL line")
  T.eq(assert(json.decode(line)).ok, true)
  T.match(r.stdout, "latency", "stdout still gets the table")
end)

-- Bad input: one line, the right exit code, a failed record on disk where the runner ran.
local function failed_run(args, env, want_exit, pattern)
  local r = odp_run(args, env)
  T.eq(r.status, want_exit, "exit code; stderr: " .. r.stderr)
  return r
end

T.test("missing runner, missing model, not executable, bad -n, unknown option: exit 2, one line", function()
  local cases = {
    { { "--runner", dir .. "/nope", "--model", add }, "cannot read '.*/nope'" },
    { { "--runner", fake, "--model", dir .. "/nope.pte" }, "%-%-model: cannot read" },
    { { "--runner", add, "--model", add }, "is not executable %(chmod %+x" },
    { { "--runner", fake, "--model", add, "-n", "0" }, "must be a positive integer" },
    { { "--runner", fake, "--model", add, "-n", "ten" }, "expects an integer, got 'ten'" },
    { { "--runner", fake, "--model", add, "--frobnicate" }, "unknown option %-%-frobnicate" },
    { { "--model", add }, "%-%-runner is required" },
    { { "--runner", fake, "--model", root .. "/tests/fixtures/etdump/add_n1.etdump" }, "not a .pte.*expected 'ET12'" },
  }
  for _, c in ipairs(cases) do
    local r = failed_run(c[1], nil, 2)
    T.ok(only_line(r.stderr), "one line: " .. r.stderr)
    T.match(r.stderr, c[2])
    T.eq(r.stdout, "")
  end
end)

T.test("an --out that fails after measuring (a filesystem that filled meanwhile): the results shown all the "
  .. "same, one line says where the record is kept, exit 3", function()
  -- a 4 kB tmpfs: --out is writable when checked before the run, the record does not fit when written
  local small = T.tmpdir()
  local m = assert(proc.run { "mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", small, timeout = 30 })
  T.eq(m.status, 0, "mounting a 4 kB tmpfs (the test runs as root): " .. m.stderr)
  local ok, err = pcall(function()
    local r = odp_run { "--runner", fake, "--model", add, "--out", small .. "/r.json" }
    T.eq(r.status, 3, r.stderr)
    T.match(r.stdout, "^OK +executorch on [^\n]+\n", "the results table")
    T.match(r.stdout, "\n  latency %(from log%)\n")
    local kept = r.stderr:match("\nodp: cannot write [^\n]*/r%.json: No space left on device; the record is kept in " ..
      "(%S+/result%.json)\n$")
    T.ok(kept, "one line: " .. r.stderr)
    T.eq(assert(json.decode(T.read(kept))).ok, true, "the record is where the line says")
  end)
  proc.run { "umount", small, timeout = 30 }
  if not ok then error(err, 0) end
end)

T.test("runner crash (SIGABRT): exit 1, the runner's own reason, a failed record on disk", function()
  local r = failed_run({ "--runner", fake, "--model", add, "--format", "json" }, { ODP_FAKE_MODE = "abort" }, 1)
  local rec = assert(json.decode(r.stdout))
  T.eq(rec.ok, false)
  T.eq(rec.signal, 6)
  T.match(rec.error.message, "killed by SIGABRT")
  T.match(rec.error.message, "0x14")
  T.eq(rec.latency_ms, nil, "no half-filled success")
  T.eq(assert(json.decode(T.read(rec.artifacts.run_dir .. "/result.json"))).ok, false)
end)

T.test("runner SIGSEGV", function()
  local r = failed_run({ "--runner", fake, "--model", add, "--format", "json" }, { ODP_FAKE_MODE = "segv" }, 1)
  T.match(assert(json.decode(r.stdout)).error.message, "SIGSEGV")
end)

T.test("runner hang: killed at --timeout with its children, ERUNNER record, exit 1", function()
  local t0 = sys.now()
  local r = failed_run({ "--runner", fake, "--model", add, "--timeout", "0.5", "--format", "json" },
    { ODP_FAKE_MODE = "hang_tree" }, 1)
  T.ok(sys.now() - t0 < 10, "returned promptly")
  local rec = assert(json.decode(r.stdout))
  T.eq({ rec.error.code, rec.error.exit }, { "ERUNNER", 1 })
  T.match(rec.error.message, "runner did not finish before the timeout")
  T.eq(assert(proc.run { "pgrep", "-f", "fake_runner.*" .. add:gsub("%p", "%%%0") }).stdout, "", "nothing left running")
end)

T.test("runner printing garbage and exiting 0: a successful record timed by the wall clock, no crash", function()
  local r = odp_run({ "--runner", fake, "--model", add, "--format", "json" }, { ODP_FAKE_MODE = "garbage" })
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq({ rec.ok, rec.status }, { true, 0 })
  T.eq(rec.latency_ms.source, "wall")
  T.eq(rec.latency_ms.n, 1)
end)

T.test("the runner's own failure lines become the error (replayed real transcripts)", function()
  local tdir = root .. "/tests/fixtures/transcripts/"
  local r = failed_run({ "--runner", fake, "--model", add, "--format", "json" },
    { ODP_FAKE_REPLAY = tdir .. "24_missing_model_split" }, 1)
  local rec = assert(json.decode(r.stdout))
  T.eq(rec.signal, 6)
  T.match(rec.error.message, "FileDataLoader::from%(%) failed: 0x22")
  local ok = json_run({ "--runner", fake, "--model", add, "-n", "10", "--format", "json" },
    { ODP_FAKE_REPLAY = tdir .. "22_add_n10_split" })
  T.eq(ok.ok, true)
  T.eq(ok.latency_ms.n, 10)
  T.near(ok.latency_ms.total, tonumber(T.read(tdir .. "22_add_n10_split.stderr"):match("10 time%(s%) in ([%d.]+) ms")), 1e-9)
end)

T.with_real_runner("a failure names the runner's own cause and odp's explanation: the .pte's backend, --data",
  function(runner)
    local pte = root .. "/tests/fixtures/pte/"
    local r = failed_run({ "--runner", runner, "--model", pte .. "mnist_ethos_u55.pte", "--format", "json" }, nil, 1)
    local msg = assert(json.decode(r.stdout)).error.message
    T.match(msg, "^runner killed by SIGABRT: Backend EthosUBackend is not registered; .-status 0x20 %[NotFound%] "
      .. "%(the model delegates to EthosUBackend, which this runner does not register: use a runner built with "
      .. "that backend%)$")
    r = failed_run({ "--runner", runner, "--model", pte .. "datamap.pte", "--format", "json" }, nil, 1)
    msg = assert(json.decode(r.stdout)).error.message
    T.match(msg, "^runner killed by SIGABRT: external_data_map is null; .-status 0x2 %[InvalidState%] %(the model "
      .. "keeps its weights in an external data file: pass %-%-data " .. (pte .. "datamap.ptd"):gsub("%p", "%%%0") .. "%)$")
    T.ok(not msg:find("\n"), "one line")
    -- with --data it runs: the hint was the fix
    local ok = json_run({ "--runner", runner, "--model", pte .. "datamap.pte", "--data", pte .. "datamap.ptd",
      "--format", "json" })
    T.eq(ok.ok, true)
  end)

T.test("a runner that lacks a kernel: the failure names the operators it has no kernel for", function()
  -- ExecuTorch's own lines for a method whose operator has no registered kernel (runtime/executor/method.cpp's
  -- "Missing operator: [%zd] %s", then the runner's assert): no runner here lacks one, so the fake replays them
  local prefix = dir .. "/missing_kernel"
  T.write(prefix .. ".stdout", "")
  T.write(prefix .. ".stderr", table.concat({
    "I 00:00:00.001031 executorch:executor_runner.cpp:476] Model file m.pte is loaded.",
    "E 00:00:00.001185 executorch:method.cpp:795] Missing operator: [0] cortex_m::quantize_per_tensor.out",
    "F 00:00:00.001192 executorch:executor_runner.cpp:617] In function main(), assert failed (method.ok()): Loading "
      .. "of method forward failed with status 0x14", "" }, "\n"))
  T.write(prefix .. ".rc", "rc=134\n")
  local r = failed_run({ "--runner", fake, "--model", add, "--format", "json" }, { ODP_FAKE_REPLAY = prefix }, 1)
  T.match(assert(json.decode(r.stdout)).error.message, "^runner killed by SIGABRT: Missing operator: %[0%] "
    .. "cortex_m::quantize_per_tensor%.out; In function main%(%), .-status 0x14 %[OperatorMissing%] %(this runner has no "
    .. "kernel for cortex_m::quantize_per_tensor%.out: use a runner built with it%)$")
end)

T.test("a runner that fails without an ExecuTorch error line: its first own stderr line is the cause", function()
  -- what the dynamic loader prints for a runner built against a newer glibc, from a wrapper that exits as it does
  local wrapper = dir .. "/loader_fails"
  T.write(wrapper, "#!/bin/sh\necho 'I 00:00:00.000100 executorch:executor_runner.cpp:1] starting' >&2\n" ..
    "echo \"$0: /lib/x86_64-linux-gnu/libc.so.6: version \\`GLIBC_2.99' not found (required by $0)\" >&2\nexit 1\n")
  T.eq(proc.run { "chmod", "755", wrapper }.status, 0)
  local r = failed_run({ "--runner", wrapper, "--model", add, "--format", "json" }, nil, 1)
  T.eq(assert(json.decode(r.stdout)).error.message, ("runner exited with status 1: %s: /lib/x86_64-linux-gnu/libc.so.6: "
    .. "version `GLIBC_2.99' not found (required by %s)"):format(wrapper, wrapper))
end)

T.test("an event-tracer-less runner rejecting --etdump_path gets a hint", function()
  local r = failed_run({ "--runner", fake, "--model", add, "--etdump", dir .. "/x.etdump", "--format", "json",
    "--", "--etdump_path_is_unknown" }, nil, 1)
  T.match(assert(json.decode(r.stdout)).error.message, "status 1")
end)

T.test("Ctrl-C: the runner is killed, the record says ECANCELED, exit 130", function()
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runs-dir", dir .. "/runs", "--runner", fake,
    "--model", add, "--format", "json" }
  local cmd = ("ODP_FAKE_MODE=hang exec %s"):format(table.concat(argv, " "))
  -- Ctrl-C once the runner runs: wait for a fake_runner among odp's descendants (not any on the machine)
  local r = assert(proc.run { "sh", "-c", cmd .. [[ & p=$!
    desc() { for c in $(pgrep -P "$1"); do echo "$c"; desc "$c"; done; }
    i=0
    until desc $p | xargs -r ps -o comm= -p 2>/dev/null | grep -q fake_runner || [ $i -ge 2000 ]; do
      sleep 0.01; i=$((i + 1))
    done
    desc $p | xargs -r ps -o comm= -p 2>/dev/null | grep -q fake_runner && echo "runner started" >&2
    kill -INT $p; wait $p; echo "exit=$?" >&2]], timeout = 60 })
  T.match(r.stderr, "runner started")
  T.match(r.stderr, "exit=130")
  local rec = assert(json.decode(r.stdout))
  T.eq(rec.error.code, "ECANCELED")
end)

T.test("--help is generated from the declared options", function()
  local r = odp_run({ "--help" })
  T.eq(r.status, 0)
  T.match(r.stdout, "usage: odp run .*scripts/host.lua %[options%] %[%-%- runner args%]")
  T.match(r.stdout, "%-n, %-%-num%-executions N%s+Inferences per runner process")
  T.match(r.stdout, "%-%-format human|json|jsonl|csv")
  -- a table that lines up: every line of the options within 110 columns, a description's continuation under
  -- its first line's column (never at the left edge)
  local column = r.stdout:match("\n(%s+%-n, %-%-num%-executions N%s+)Inferences")
  T.ok(column, r.stdout)
  local options = r.stdout:match("\nOptions:\n(.*)$")
  for line in options:gmatch("[^\n]+") do
    T.ok(#line <= 110, "over 110 columns: " .. line)
    T.ok(line:match("^  ") or line:match("^%u[%w ]*:$"), "not indented: " .. line)
    if line:match("^%s+%S") and not line:match("^  %-") and not line:match("^      %-%-") then
      T.eq(#line:match("^%s*"), #column, "a continuation under the descriptions: " .. line)
    end
  end
end)

T.done()
