--- The oracle of the Ethos-U flow's numbers: the firmware's own lines in a run's rtt.log (host timestamp, then
-- what the runner printed), read here with plain patterns and none of odp's parsers.
--   local rttlog = require("rttlog")
--   rttlog.check(rec)       -- rec.latency_ms and rec.pmu against rec.artifacts.rtt_log
local T = require("t")

local M = {}

--- {inferences_ms = {...}, cpu_cycles_total = n, npu_cycles = n, counters = {[0] = n, ...}} of one rtt.log.
function M.read(path)
  local got = { inferences_ms = {}, counters = {} }
  for line in io.lines(path) do
    local ms = line:match("Inference: (%d+%.%d+) ms$")
    if ms then got.inferences_ms[#got.inferences_ms + 1] = tonumber(ms) end
    local total = line:match("Inference runtime: (%d+) CPU cycles total")
    if total then got.cpu_cycles_total = tonumber(total) end
    local npu = line:match("ethosu_pmu_cycle_cntr : (%d+)$")
    if npu then got.npu_cycles = tonumber(npu) end
    local i, n = line:match("ethosu_pmu_cntr(%d+) : (%d+)$")
    if i then got.counters[tonumber(i)] = tonumber(n) end
  end
  return got
end

local function median(xs)
  local s = table.move(xs, 1, #xs, 1, {})
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

--- Asserts that the record's latency and PMU values are the ones the firmware printed in its rtt.log.
function M.check(rec)
  local log = assert(rec.artifacts and rec.artifacts.rtt_log, "the record names its rtt.log")
  -- a saved record names it in its run directory with its sha256 (checked); a capture's own table, by path
  if type(log) == "table" then
    log = assert(require("odp.results.result").artifact(rec, "rtt_log", rec.artifacts.run_dir))
  end
  local want = M.read(log)
  local lat, ms = rec.latency_ms, want.inferences_ms
  T.ok(#ms > 0, "Inference: lines in " .. log)
  T.eq(lat.n, #ms, "latency_ms.n: the Inference: lines")
  T.near(lat.p50, median(ms), 1e-12, "latency_ms.p50: the median of the Inference: lines")
  T.eq({ lat.min, lat.max }, { math.min(table.unpack(ms)), math.max(table.unpack(ms)) }, "latency_ms min, max")
  local sum = 0
  for _, v in ipairs(ms) do sum = sum + v end
  T.near(lat.total, sum, 1e-12, "latency_ms.total")
  T.eq(rec.pmu.cpu_cycles_total, want.cpu_cycles_total, "pmu.cpu_cycles_total: 'Inference runtime: N CPU cycles'")
  T.eq(rec.pmu.npu_cycles, want.npu_cycles, "pmu.npu_cycles: ethosu_pmu_cycle_cntr")
  T.ok(next(want.counters) ~= nil, "ethosu_pmu_cntrN lines in " .. log)
  local n = 0
  for i, v in pairs(want.counters) do
    n = n + 1
    local c = rec.pmu.counters[i + 1]
    T.eq({ c and c.index, c and c.count }, { i, v }, "pmu.counters: ethosu_pmu_cntr" .. i)
  end
  T.eq(#rec.pmu.counters, n, "one counter per ethosu_pmu_cntrN line")
end

return M
