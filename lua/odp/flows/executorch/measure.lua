--- The ExecuTorch flow, its measurements: latency from what the runner processes printed (or their ETDump, or
-- their wall time), peak memory and memory by phase, planned buffers and outputs, into the record.
local errors = require("odp.core.errors")
local json = require("odp.core.json")
local stats = require("odp.core.stats")
local sys = require("odp.sys")
local function etdump() return require("odp.parse.etdump") end -- lazy: start-up (no --etdump: none read)
local pte = require("odp.parse.pte")
local measuring = require("odp.results.measure")
local memory = require("odp.results.memory")
local run = require("odp.run")
local llm = require("odp.flows.executorch.llm")

local M = {}

local function basename(p) return (p:match("([^/]+)$")) end

-- The record's memory (odp.results.memory) from the last measured process: its phases, its timeline brought
-- into the run directory as memory.csv, the owners against the .pte's planned buffers.
local function memory_step(ctx, rec, last)
  local t = ctx.state_of
  if not t.memory then return end
  if not last.r.memory then
    rec.warnings[#rec.warnings + 1] = "memory: no memory by phase: the runner was not watched by odp's helper " ..
      "(none for this board, or it could not write its timeline: its reason is on the runner's stderr); the peak " ..
      "RSS alone"
    return
  end
  -- this process's timeline, already in the run dir (written here, or brought back on the helper's channel),
  -- becomes the run's memory.csv
  local here = ctx.run_dir .. "/memory.csv"
  local status = last.r.memory.timeline
  if status == "ok" then
    local moved, err = sys.rename(last.r.memory_csv, here)
    if not moved then rec.warnings[#rec.warnings + 1] = "memory: the timeline is missing: " .. tostring(err) end
  elseif status == "cut" then
    rec.warnings[#rec.warnings + 1] = ("memory: the timeline reached its bound (64 MiB, about 30 minutes at " ..
      "1 kHz) and was cut: %s holds its first part, the record has none"):format(basename(last.r.memory_csv))
  else
    rec.warnings[#rec.warnings + 1] = "memory: no timeline: " .. (last.r.timeline_error or
      ("the helper could not keep it (timeline=%s)"):format(tostring(status)))
  end
  local mem = memory.record(last.r, here, pte.read(ctx.opts.model), last.parsed.method)
  if mem.timeline then run.artifact(ctx, rec, "memory", here) end
  for _, w in ipairs(memory.warnings(mem, last.r.log and "logcat")) do
    rec.warnings[#rec.warnings + 1] = w
  end
  rec.memory = mem
end

--- Turns what the runs printed into the record's measurements; the samples go to runs/<id>/samples.csv.
--- Returns the per-process groups of samples (odp.results.measure), or nil.
function M.measure(ctx, rec, runs, t)
  local n = ctx.opts.num_executions
  -- --llm: every generated token's latency (its forward in the process's ETDump), one group per process
  local g = ctx.opts.llm and llm.groups(runs) or measuring.log_groups(runs, n)
  if g and g.warning then rec.warnings[#rec.warnings + 1] = g.warning end
  if not g and t.etdump and not ctx.opts.llm then
    local doc = etdump().read(t.etdump)
    local samples = doc and etdump().latency(doc) or {}
    -- the ETDump is the last process's: one group
    if #samples > 0 then g = { groups = { samples }, source = "etdump", per_iteration = false } end
  end
  if not g and n > 0 and not ctx.opts.llm then
    g = { groups = {}, source = "wall", per_iteration = false }
    for i, x in ipairs(runs) do g.groups[i] = { x.r.wall_s * 1000 / n } end
    rec.warnings[#rec.warnings + 1] = "the runner printed no timing lines (a Release build without " ..
      "EXECUTORCH_ENABLE_LOGGING?): latency is the wall time of the whole process divided by " ..
      "--num-executions, model load included"
  end
  if g and #measuring.flatten(g.groups) > 0 then
    rec.latency_ms = measuring.latency(g, rec.warnings)
    if g.source == "log" and not g.per_iteration then rec.latency_ms.n = n * #runs end
    local path = ctx.run_dir .. "/samples.csv"
    errors.check(measuring.write_samples(path, g.groups))
    run.artifact(ctx, rec, "samples", path)
  else
    rec.latency_ms = { n = 0, source = g and g.source }
  end
  local last = runs[#runs].parsed
  local loads = {}
  for _, x in ipairs(runs) do
    if x.parsed.load_ms then loads[#loads + 1] = x.parsed.load_ms end
    -- with memory by phase, ru_maxrss counts only from the last reset of the high-water mark (docs/memory.md):
    -- the process's peak is the largest phase peak
    local mem = x.r.memory and memory.record(x.r)
    local rss = mem and mem.peak_kb or (x.r.rusage and x.r.rusage.maxrss_kb)
    if rss and rss > 0 then rec.peak_rss_kb = math.max(rec.peak_rss_kb or 0, rss) end
  end
  memory_step(ctx, rec, runs[#runs])
  if #loads > 0 then rec.load_ms = stats.summary(loads).p50 end
  rec.planned_buffers = json.array(last.planned_buffers or {})
  rec.outputs = json.array(last.outputs or {})
  rec.threads = last.threads
  rec.method = last.method
  if ctx.opts.llm then llm.record(ctx, rec, runs) end
  return g
end

return M
