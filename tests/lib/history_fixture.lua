-- Records for the history tests (tests/lua/history_test.lua, bench/history_bench.lua and their writer
-- processes): what a flow writes, with samples.csv beside it.
local json = require("odp.core.json")
local sys = require("odp.sys")

local M = {}

local function write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

-- A record as a flow writes it: run i of a series, its samples in runs/<id>/samples.csv under dir.
function M.record(dir, i, o)
  o = o or {}
  local run_dir = ("%s/runs/r%05d-%s"):format(dir, i, o.tag or "x")
  assert(sys.mkdir_p(run_dir))
  local samples = o.samples or { 1.0, 1.01, 0.99, 1.02, 0.98 }
  local lines = { "process,iteration,ms" }
  for j, v in ipairs(samples) do lines[#lines + 1] = ("1,%d,%.17g"):format(j, v) end
  write(run_dir .. "/samples.csv", table.concat(lines, "\n") .. "\n")
  local sorted = table.move(samples, 1, #samples, 1, {})
  table.sort(sorted)
  local rec = { schema = "odp.result/1", ok = o.ok ~= false, flow = "executorch", device = "rpi5",
    target = "ssh://pi@board:22", started_at = os.date("!%Y-%m-%dT%H:%M:%SZ", (o.t0 or 1764547200) + i * 3600),
    odp_version = "test", model = { path = "/m/" .. (o.model or "mv2.pte"), sha256 = o.model_sha or ("a"):rep(64) },
    runner = { path = "/r/executor_runner", sha256 = ("b"):rep(64) }, params = o.params or { num_executions = 10 },
    latency_ms = { n = #samples, p50 = sorted[(#sorted + 1) // 2], ci95 = json.array { sorted[1], sorted[#sorted] } },
    peak_rss_kb = 4000 + i, artifacts = { run_dir = run_dir, samples = run_dir .. "/samples.csv" },
    device_state = { hostname = "pi-" .. (o.host or "1"), kernel = "6.6.31", board = "Raspberry Pi 5 Model B",
      clusters = { { core = "Cortex-A76", cpus = "0-3" } }, throttled = o.throttled,
      before = { cpus = { { cpu = 0, governor = o.governor or "performance", max_khz = 2400000 } } } } }
  if not rec.ok then rec.latency_ms, rec.error = nil, { code = "EIO", message = "runner crashed" } end
  return rec, run_dir .. "/result.json"
end

return M
