-- What memory by phase (docs/memory.md) costs the run it measures: the runner's median per-iteration latency
-- with the 1 kHz timeline and the boundary reads (`--memory`, the default) against without (`--no-memory`),
-- processes interleaved so machine load hits both alike; and what one boundary read costs (VmHWM, the
-- clear_refs reset, smaps_rollup, the model's mappings: the helper's own read_us).
--   build/odp run bench/memory_bench.lua [N]     (N processes per side, default 15)
-- The runner is the real executor_runner (ODP_REAL_RUNNER) on the multi-operator MLP
-- (tests/fixtures/pte/mlp.pte, ~45 ms of fixed work per inference, CPU-bound: the helper's wake-ups compete with
-- it for a CPU), 20 inferences per process. (tests/c/fake_runner.c is no use here: it busy-waits until 200 µs
-- of wall time have passed, so a CPU taken from it does not lengthen an iteration.)
local proc = require("odp.proc")
local sys = require("odp.sys")
local json = require("odp.core.json")
local stats = require("odp.core.stats")

local N = tonumber(arg[1]) or 15
local root = require("odp.host").root
local odp = sys.realpath(require("odp.host").argv[0]) or require("odp.host").argv[0]
local model = root .. "/tests/fixtures/pte/mlp.pte"
local tmp = os.tmpname()
os.remove(tmp)
assert(sys.mkdir_p(tmp))

local function record(runner, n, memory)
  local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", model,
    "-n", tostring(n), "--runs-dir", tmp .. "/runs", "--no-history", "--format", "json",
    memory and "--memory" or "--no-memory" }, cwd = tmp, env = { ODP_HISTORY = tmp .. "/h.db" } })
  assert(r.ok, r.stderr)
  return json.decode(r.stdout)
end

local function compare(label, runner, n)
  local on, off, reads, samples, spans = {}, {}, {}, {}, {}
  for i = 1, N do
    local a = record(runner, n, true)
    local b = record(runner, n, false)
    on[i], off[i] = a.latency_ms.p50, b.latency_ms.p50
    reads[#reads + 1] = a.memory.boundary_read_us
    samples[#samples + 1] = a.memory.samples
    local last = a.memory.phases[#a.memory.phases]
    spans[#spans + 1] = last.t_end_ms or 0
  end
  local m_on, m_off = stats.percentile(on, 50), stats.percentile(off, 50)
  print(("%s: median per-iteration latency with memory by phase %.4f ms, without %.4f ms: ratio %.4f (%+.2f%%)")
    :format(label, m_on, m_off, m_on / m_off, (m_on / m_off - 1) * 100))
  print(("  boundary read (the slowest of a process's): median %.0f µs, max %.0f µs; timeline %d samples over %.0f ms " ..
    "(median of processes)"):format(stats.percentile(reads, 50), math.max(table.unpack(reads)),
    stats.percentile(samples, 50), stats.percentile(spans, 50)))
end

local real = os.getenv("ODP_REAL_RUNNER")
if real and sys.stat(real) then
  compare("real executor_runner, mlp.pte x20", real, 20)
else
  print("skipped: set ODP_REAL_RUNNER to a real executor_runner")
end
os.execute("rm -rf '" .. tmp .. "'")
