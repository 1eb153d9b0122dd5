-- The sampling CPU profile (odp run --sample, docs/cpu-profile.md), not a test:
--   build/odp run bench/sample_bench.lua [ROUNDS]
-- 1. the join: 1,000,000 samples against a 100,000-event ETDump (tests/lib/fbuild.lua's real layout), read,
--    joined and folded (odp.results.cpu_profile.profile) and the C join alone; goal under 1 s
-- 2. the sampler's throughput: samples per second taken from the test runner at rising rates, and how many lost
-- 3. overhead: (a) `odp run --sample --sample-overhead=ROUNDS` on mlp.pte, the record's line; (b) at 1k, 2k
--    and 4k Hz, odp's sampler against `perf record -F HZ` with and without -g, same run, processes interleaved
--    (ROUNDS each, default 8): the runner's iteration median and CPU time, and each sampler's own CPU time;
--    goal within 3% at the default rate
-- 4. against Linux perf: `odp run ... --sample` against `perf record -F 4000 -g` + `perf script` of the same
--    runner and model (what a user types either way), median wall time of ROUNDS
-- Needs $ODP_REAL_RUNNER (tests/run.sh's default: the copy beside the project) for 3 and 4.
package.path = "tests/lib/?.lua;" .. package.path
local proc = require("odp.proc")
local sys = require("odp.sys")
local stats = require("odp.core.stats")
local sample = require("odp.sample")
local prof = require("odp.results.cpu_profile")
local etdump = require("odp.parse.etdump")
local fb = require("fbuild")

local ROUNDS = tonumber(arg[1]) or 8
local build = os.getenv("ODP_BUILD_DIR") or "build"
local helper = sys.realpath(build .. "/odp-rusage-x86_64")
-- the real runner (bench/run.sh sets ODP_REAL_RUNNER, as tests/run.sh does)
local runner = sys.realpath(os.getenv("ODP_REAL_RUNNER") or "") or error("set ODP_REAL_RUNNER to a real executor_runner")
local mlp = sys.realpath("tests/fixtures/pte/mlp.pte")
local tmp = os.tmpname()
os.remove(tmp)
sys.mkdir_p(tmp)

-- 1. the join ------------------------------------------------------------------------------------------------
local dump = fb.big_etdump(100000)
local doc = assert(etdump.read(dump))
local t_end = 0
for _, run in ipairs(doc.run_data) do
  for _, e in ipairs(run.events) do if e.end_time and e.end_time > t_end then t_end = e.end_time end end
end
local parts = { string.pack("<c8I4I4I4I4I8I4I4i4I4I4I4I8", "ODPSMPL1", 64, 2, 4000, 1, 0x27, 1, 2, 2, 1, 65536, 0, 0) }
-- a log line read at time 0 that says 0: the two clocks are the same
parts[#parts + 1] = string.pack("<I4I2I2I8c32", 0x4001, 0, 48, 0, ("I 00:00:00.000000 bench"):rep(1):sub(1, 32) ..
  ("\0"):rep(32 - math.min(32, #"I 00:00:00.000000 bench")))
local N = 1000000
local step = t_end // N
for i = 1, N do
  -- two frames: the IP and a caller, four functions' worth of addresses
  parts[#parts + 1] = string.pack("<I4I2I2I8I4I4I8I8I8I8", 9, 2, 56, 0x1000 + (i % 4) * 0x100, 1, 1, i * step, 2,
    0x1000 + (i % 4) * 0x100, 0x2000)
end
parts[#parts + 1] = string.pack("<I4I2I2I8I8I8", 0x4003, 0, 32, N + 1, 0, 0)
local bytes = table.concat(parts)
parts = nil
local function median_s(fn, n)
  local xs = {}
  for i = 1, n do
    local t0 = sys.now()
    fn()
    xs[i] = sys.now() - t0
  end
  return stats.summary(xs).p50
end
local st = assert(sample.read(bytes))
local iv = prof.intervals(doc)
local join_s = median_s(function() st:join { ops = iv.ops, execs = iv.execs, offset = 0 } end, 5)
local read_s = median_s(function() assert(sample.read(bytes)):close() end, 5)
local all_s = median_s(function() assert(prof.profile(bytes, doc, {})) end, 3)
print(("join      1,000,000 samples x 100,000 ETDump events (%d op intervals): join %.3f s, read %.3f s, " ..
  "read + intervals + join + fold %.3f s"):format(#iv.ops.start, join_s, read_s, all_s))
bytes, st = nil, nil
collectgarbage()

-- 2. the sampler's throughput ------------------------------------------------------------------------------
local sampler_runner = build .. "/tests/sample_runner"
for _, hz in ipairs { 1000, 4000, 10000, 20000, 50000 } do
  local out = tmp .. "/t.smp"
  local t0 = sys.now()
  local r = assert(proc.run { argv = { helper, "--sample", tostring(hz), "--sample-out", out, "--", sampler_runner,
    "--num_executions", "100", "--ms", "10" }, timeout = 120 })
  local wall = sys.now() - t0
  assert(r.ok, r.stderr)
  local s2 = assert(sample.read(assert(sys.read_file(out))))
  local info = s2:info()
  print(("sampler   %6d Hz asked: %7.0f samples/s on CPU taken, %d lost, %d preempted samples made (%.2f s)")
    :format(hz, (info.samples - info.preempted_samples) / wall, info.lost, info.preempted_samples, wall))
  s2:close()
end

-- 3. overhead ----------------------------------------------------------------------------------------------
if not io.open(runner) then
  print("overhead  skipped: no real runner at " .. runner .. " ($ODP_REAL_RUNNER)")
  os.exit(0)
end
local odp = os.getenv("ODP") or (build .. "/odp")
-- 3a. what a user types: odp run --sample --sample-overhead=ROUNDS, its record's line
do
  local r = assert(proc.run { argv = { odp, "run", "scripts/host.lua", "--runner", runner, "--model", mlp, "-n", "50",
    "--sample", "--sample-overhead=" .. ROUNDS, "--runs-dir", tmp .. "/runs", "--no-history", "--format", "json" },
    timeout = 600 })
  assert(r.status == 0, r.stderr)
  local ov = require("odp.core.json").decode(r.stdout).cpu_profile.overhead
  print(("overhead  odp run --sample --sample-overhead=%d, mlp.pte -n 50: %s [%s]"):format(ROUNDS,
    prof.overhead_line(ov), ov.state))
end
-- 3b. by rate, odp's sampler against perf record's, same run: ROUNDS rounds, the variants' order rotated each
--     round; every variant is the runner under odp-rusage (its rusage: the runner's own CPU time), all of it
--     under `perf stat -e task-clock` (the whole tree's CPU time): the tree's minus the runner's is the
--     sampler's own (odp's helper and drainer thread; perf record, its start and its writing of perf.data)
local function iterations(stderr, into)
  for ms in stderr:gmatch("Iteration %d+ of %d+: ([%d%.]+) ms") do into[#into + 1] = tonumber(ms) end
end
local RATES = { 1000, 2000, 4000 }
local variants = { { name = "unprofiled", argv = {} } }
for _, hz in ipairs(RATES) do
  local h = tostring(hz)
  variants[#variants + 1] = { name = "odp " .. h, hz = hz, helper = { "--sample", h, "--sample-out", tmp .. "/o.smp" } }
  variants[#variants + 1] = { name = "perf -g " .. h, hz = hz, argv = { "perf", "record", "-q", "-F", h, "-g", "-o",
    tmp .. "/p.data", "--" } }
  variants[#variants + 1] = { name = "perf " .. h, hz = hz, argv = { "perf", "record", "-q", "-F", h, "-o",
    tmp .. "/p.data", "--" } }
end
for _, v in ipairs(variants) do v.lat, v.cpu, v.own = {}, {}, {} end
for round = 1, ROUNDS do
  for j = 1, #variants do
    local v = variants[(round + j) % #variants + 1]
    local argv = { "perf", "stat", "-x,", "-e", "task-clock", "-o", tmp .. "/stat.csv", "--" }
    table.move(v.argv or {}, 1, #(v.argv or {}), #argv + 1, argv)
    argv[#argv + 1] = helper
    table.move(v.helper or {}, 1, #(v.helper or {}), #argv + 1, argv)
    table.move({ "--", runner, "--model_path", mlp, "--num_executions", "50" }, 1, 6, #argv + 1, argv)
    local r = assert(proc.run { argv = argv, cwd = tmp, timeout = 300 })
    assert(r.ok, r.stderr)
    iterations(r.stderr, v.lat)
    local ru = assert(r.stderr:match("ODP%-RUSAGE [^\n]*"), "the runner's rusage")
    local runner_ms = (tonumber(ru:match("utime_s=([%d.]+)")) + tonumber(ru:match("stime_s=([%d.]+)"))) * 1000
    local tree_ms = tonumber(assert(sys.read_file(tmp .. "/stat.csv")):match("\n([%d.]+),msec,task%-clock"))
    v.cpu[#v.cpu + 1], v.own[#v.own + 1] = runner_ms, tree_ms - runner_ms
  end
end
local base = variants[1]
local b_lat, b_cpu = stats.summary(base.lat).p50, stats.summary(base.cpu).p50
print(("overhead  mlp.pte -n 50, %d processes each, interleaved; runner's CPU and the sampler's own a process " ..
  "(medians)"):format(ROUNDS))
for _, v in ipairs(variants) do
  local lat, cpu, own = stats.summary(v.lat).p50, stats.summary(v.cpu).p50, stats.summary(v.own).p50
  print(("  %-14s iteration %.3f ms (%+5.1f%%)  runner CPU %6.0f ms (%+5.1f%%)  sampler's own CPU %5.0f ms")
    :format(v.name, lat, (lat / b_lat - 1) * 100, cpu, (cpu / b_cpu - 1) * 100, own))
end
-- odp against perf -g at each rate, as ratios of the same run's medians
for _, hz in ipairs(RATES) do
  local o, p
  for _, v in ipairs(variants) do
    if v.name == "odp " .. hz then o = v elseif v.name == "perf -g " .. hz then p = v end
  end
  local lo, hi = stats.summary(o.lat).p50, stats.summary(p.lat).p50
  print(("  %5d Hz: odp / perf -g iteration %.3f, runner CPU %.3f, sampler's own CPU %.2f"):format(hz, lo / hi,
    stats.summary(o.cpu).p50 / stats.summary(p.cpu).p50, stats.summary(o.own).p50 / stats.summary(p.own).p50))
end

-- 4. against perf record + perf script -------------------------------------------------------------------------
local odp_s = median_s(function()
  local r = assert(proc.run { argv = { odp, "run", "scripts/host.lua", "--runner", runner, "--model", mlp, "-n", "50",
    "--sample", "--runs-dir", tmp .. "/runs", "--no-history", "-q" }, timeout = 300 })
  assert(r.ok, r.stderr)
end, ROUNDS)
local perf_s = median_s(function()
  local r = assert(proc.run { argv = { "sh", "-c", ("perf record -q -F 4000 -g -o %s/p.data -- %s --model_path %s " ..
    "--num_executions 50 >/dev/null 2>&1 && perf script -i %s/p.data > %s/p.txt 2>/dev/null"):format(tmp, runner, mlp,
      tmp, tmp) }, cwd = tmp, timeout = 300 })
  assert(r.ok, r.stderr)
end, ROUNDS)
print(("vs perf   odp run --sample (run, join, fold, record) %.2f s; perf record -g + perf script %.2f s: " ..
  "ratio %.2f (perf / odp)"):format(odp_s, perf_s, perf_s / odp_s))
os.execute("rm -rf '" .. tmp .. "'")
