-- The sampling CPU profile (odp run --sample, docs/cpu-profile.md), not a test:
--   build/odp run bench/sample_bench.lua [ROUNDS]
-- 1. the join: 1,000,000 samples against a 100,000-event ETDump (tests/lib/fbuild.lua's real layout), read,
--    joined and folded (odp.results.cpu_profile.profile) and the C join alone; goal under 1 s
-- 2. the sampler's throughput: samples per second taken from the test runner at rising rates, and how many lost
-- 3. overhead: the real runner on mlp.pte, per-iteration latency medians with and without --sample at the
--    default rate, processes interleaved (ROUNDS each, default 8); goal within 3%
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
local function iterations(stderr, into)
  for ms in stderr:gmatch("Iteration %d+ of %d+: ([%d%.]+) ms") do into[#into + 1] = tonumber(ms) end
end
local plain, sampled = {}, {}
for _ = 1, ROUNDS do
  for _, with in ipairs { false, true } do
    local argv = { helper }
    if with then table.move({ "--sample", "4000", "--sample-out", tmp .. "/o.smp" }, 1, 4, 2, argv) end
    table.move({ "--", runner, "--model_path", mlp, "--num_executions", "20" }, 1, 6, #argv + 1, argv)
    local r = assert(proc.run { argv = argv, cwd = tmp, timeout = 120 })
    assert(r.ok, r.stderr)
    iterations(r.stderr, with and sampled or plain)
  end
end
local p0, p1 = stats.summary(plain).p50, stats.summary(sampled).p50
print(("overhead  mlp.pte, %d iterations each, interleaved: median %.3f ms unprofiled, %.3f ms at 4000 Hz: %+.1f%%")
  :format(#plain, p0, p1, (p1 / p0 - 1) * 100))

-- 4. against perf record + perf script -------------------------------------------------------------------------
local odp = os.getenv("ODP") or (build .. "/odp")
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
