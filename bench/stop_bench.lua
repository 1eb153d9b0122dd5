-- --target-ci against fixed run counts (TFLite's benchmark_model runs a fixed --num_runs, 50 by default):
-- how many iterations odp's --target-ci 1 takes to reach a 95% CI of the median within +-1%, and how wide
-- the CI of a fixed count is, on the real executor_runner (add_arduino.pte, -n 10 per process).
--   build/odp run bench/stop_bench.lua [REPEATS]     (ODP_REAL_RUNNER: a real executor_runner)
local proc = require("odp.proc")
local sys = require("odp.sys")
local json = require("odp.core.json")
local measure = require("odp.results.measure")
local stats = require("odp.core.stats")

local REPEATS = tonumber(arg[1]) or 5
local root = require("odp.host").root
local odp = require("odp.host").argv[0]
local runner = os.getenv("ODP_REAL_RUNNER")
if not runner or not sys.stat(runner) then print("skipped: set ODP_REAL_RUNNER to a real executor_runner") return end
local model = root .. "/tests/fixtures/pte/add_arduino.pte"
local tmp = os.tmpname()
os.remove(tmp)

local function host(args)
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", model, "-n", "10",
    "--runs-dir", tmp, "--format", "json" }
  table.move(args, 1, #args, #argv + 1, argv)
  local r = assert(proc.run { argv = argv, timeout = 600 })
  assert(r.status == 0, r.stderr)
  return assert(json.decode(r.stdout))
end

print("--target-ci 1 (odp): iterations, processes, seconds, CI half-width reached")
local its = {}
for i = 1, REPEATS do
  local rec = host { "--target-ci", "1", "--max-time", "120" }
  its[i] = rec.stop.samples
  print(("  run %d: %5d iterations  %3d processes  %6.2f s  +-%.2f%%  (%s)"):format(i, rec.stop.samples,
    rec.stop.processes, rec.stop.seconds, rec.stop.ci_pct or 0 / 0, rec.stop.met and "met" or "not met"))
end
print(("  median %d iterations"):format(stats.percentile(its, 50)))

print("fixed counts (one run of 100 processes x 10 = 1000 iterations; CI of the first N iterations)")
local rec = host { "--repeat", "100" }
local all = measure.flatten(assert(measure.read_samples(rec.artifacts.samples)))
local first_ok
for n = 10, #all, 10 do
  local prefix = table.move(all, 1, n, 1, {})
  local pct = measure.ci_pct(prefix)
  if pct and pct <= 1 and not first_ok then first_ok = n end
  if n == 50 or n == 100 or n == 200 or n == 500 or n == 1000 then
    print(("  N = %4d%s: 95%% CI of the median +-%.2f%%"):format(n, n == 50 and " (benchmark_model's default --num_runs)" or "",
      pct or 0 / 0))
  end
end
print(("  first fixed N with +-1%%: %s iterations"):format(first_ok or "> 1000"))
os.execute("rm -rf '" .. tmp .. "'")
