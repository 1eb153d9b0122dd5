--- The record's `memory` (docs/memory.md): the phases of the measured runner process, the timeline it left
-- (memory.csv in the run directory) and the owners of its resident memory at the overall peak, with what
-- they do not explain left as such. Built from the helper's report (odp.parse.memory), the exit's ru_maxrss,
-- the timeline and the .pte's planned buffers.
local json = require("odp.core.json")
local parse = require("odp.parse.memory")

local M = {}

-- The phases whose peaks the history keeps as series (odp.results.schema: memory.<name>_kb).
local SERIES = { load = true, method = true, first = true, steady = true }

--- The timeline's rows: {{t_ms, rss_kb, anon_kb, file_kb}, ...} (a malformed row is skipped), or nil.
function M.timeline(path)
  local f = path and io.open(path, "rb")
  if not f then return nil end
  local rows = {}
  for line in f:lines() do
    local t, rss, anon, file = line:match("^([%d%.]+),(%d+),(%-?%d+),(%d+)$")
    if t then rows[#rows + 1] = { t_ms = tonumber(t), rss_kb = tonumber(rss), anon_kb = tonumber(anon),
      file_kb = tonumber(file) } end
  end
  f:close()
  return rows
end

--- The timeline's sample with the largest RSS: {t_ms, rss_kb, anon_kb, file_kb} or nil (no file, no rows).
-- The file is the helper's own (bounded by the run's length at 1 kHz); a malformed row is skipped.
function M.timeline_peak(path)
  local best
  for _, r in ipairs(M.timeline(path) or {}) do
    if not best or r.rss_kb > best.rss_kb then best = r end
  end
  return best
end

local function kib(bytes) return bytes and math.floor(bytes / 1024 + 0.5) end

--- The owners at the overall peak: planned arenas (the .pte's, for the method run), the constant data
-- (weights: the .pte's segment data) and whether it is mapped (resident bytes of the .pte's own mappings) or
-- copied into heap, other heap (anonymous minus planned minus copied weights), code and libraries (file-backed
-- minus the mapped .pte) and what that leaves of RSS, unexplained. Nothing is forced to add up: a part that
-- cannot be known is nil and named in `unknown`.
---@param at {rss_kb: integer, anon_kb: integer, file_kb: integer}  RSS and its split at the peak
---@param planned_bytes integer?   the method's planned buffers, summed
---@param weights_bytes integer?   the .pte's segment data
---@param model_resident_kb integer?  the .pte's mapped and resident bytes (helper), nil when not read
function M.owners(at, planned_bytes, weights_bytes, model_resident_kb)
  local o, unknown = {}, {}
  o.planned_kb = kib(planned_bytes)
  o.weights_kb = kib(weights_bytes)
  if model_resident_kb then o.weights_mapped = model_resident_kb > 0 end
  local copied = o.weights_mapped == false and o.weights_kb or 0
  if at and at.anon_kb then
    local heap = at.anon_kb - (o.planned_kb or 0) - copied
    if heap >= 0 then o.heap_other_kb = heap else unknown[#unknown + 1] = "heap_other_kb" end
  end
  if at and at.file_kb then o.file_kb = math.max(0, at.file_kb - (model_resident_kb or 0)) end
  if at and at.rss_kb then
    local known = (o.planned_kb or 0) + copied + (model_resident_kb or 0) + (o.heap_other_kb or 0) + (o.file_kb or 0)
    o.unexplained_kb = at.rss_kb - known
    o.rss_kb = at.rss_kb
  end
  if not o.planned_kb then unknown[#unknown + 1] = "planned_kb" end
  if not o.weights_kb then unknown[#unknown + 1] = "weights_kb" end
  if o.weights_mapped == nil then unknown[#unknown + 1] = "weights_mapped" end
  o.unknown = #unknown > 0 and json.array(unknown) or nil
  return o
end

--- The .pte's constant data in bytes: its segment data (the extended header's), or, when the program holds its
-- constants inline (no segments), the whole file: an upper bound, said so by owners.weights_source = "file".
function M.weights_bytes(pte)
  if pte.extended_header and pte.extended_header.segment_data_size then return pte.extended_header.segment_data_size end
  return pte.bytes
end

--- The record's memory from one runner process's exec result r (r.memory: the helper's report, r.rusage),
-- or nil, why when there is none. timeline: the local path of its memory.csv (nil: none). pte: what
-- odp.parse.pte read of the model (nil when unread), method: the method's name.
function M.record(r, timeline, pte, method)
  local rep = r.memory
  if not rep then return nil end
  local maxrss = r.rusage and r.rusage.maxrss_kb
  local phases, seen = parse.phases(rep, maxrss, r.wall_s and r.wall_s * 1000)
  local peak, exact, peak_phase = parse.overall(phases)
  local mem = { phases = json.array(phases), seen = json.array(seen), peak_kb = peak, exact = exact,
    peak_phase = peak_phase, clear_refs = rep.clear_refs, samples = rep.samples, sample_ms = rep.sample_ms,
    children = rep.children > 0 and rep.children or nil,
    rss_counters = rep.rss_counters == "batched" and "batched" or nil }
  for _, p in ipairs(phases) do
    -- a phase read late holds some of the next one's bytes: no point of its series (a false regression)
    if SERIES[p.name] and not p.late then mem[p.name .. "_kb"] = p.peak_kb end
  end
  mem.boundary_read_us = 0
  for _, m in ipairs(rep.marks) do mem.boundary_read_us = math.max(mem.boundary_read_us, m.read_us or 0) end
  local at = timeline and rep.timeline == "ok" and M.timeline_peak(timeline)
  if at then mem.timeline = "memory.csv" end
  -- the split at the peak: the timeline's peak sample (statm: anonymous, file+shmem), else the peak phase's
  -- smaps_rollup at its end
  -- the model's mapped bytes: any reading above 0 says mapped; 0 says not only when read once the program
  -- was loaded (a boundary read at or after its line), since a reading before that sees no mapping either way
  local model_kb, late = rep.model_kb and rep.model_kb > 0 and rep.model_kb or nil, {}
  for _, m in ipairs(rep.marks) do
    if m.model_kb and not m.late then model_kb = math.max(model_kb or 0, m.model_kb) end
    if m.late then late[#late + 1] = m.event .. " (" .. m.late .. ")" end
    if m.after and rep.rss_counters ~= "batched" then late[#late + 1] = m.event .. " (read)" end
  end
  mem.late = #late > 0 and json.array(late) or nil
  for _, p in ipairs(phases) do
    if not at and p.name == peak_phase and p.split then
      at = { rss_kb = p.split.rss_kb, anon_kb = p.split.anon_kb, file_kb = (p.split.file_kb or 0) + (p.split.shmem_kb or 0) }
    end
  end
  local planned, weights
  if pte then
    for _, m in ipairs(pte.methods or {}) do
      if m.name == (method or "forward") then
        planned = 0
        for _, b in ipairs(m.non_const_buffer_sizes or {}) do planned = planned + b end
      end
    end
    weights = M.weights_bytes(pte)
  end
  mem.owners = M.owners(at, planned, weights, model_kb)
  mem.owners.weights_source = weights and (pte.extended_header and "segments" or "file") or nil
  return mem
end

--- The memory of a bare-metal board (the Alif E8: no processes, no RSS): the planned arenas as the .pte declares
-- them (its first method's planned buffers, and the Ethos-U delegate's Vela scratch), no phases, and a note
-- that says so.
---@param pte table? odp.parse.pte's
---@param scratch_size integer? bytes
function M.bare_metal(pte, scratch_size)
  local planned
  local m = pte and pte.methods and pte.methods[1]
  if m then
    planned = 0
    for _, b in ipairs(m.non_const_buffer_sizes or {}) do planned = planned + b end
  end
  local owners = M.owners(nil, planned, pte and M.weights_bytes(pte), nil)
  owners.scratch_kb = kib(scratch_size)
  return { phases = json.array({}), seen = json.array({}), owners = owners,
    note = "bare metal: no RSS to measure; the planned arenas (and the NPU's scratch) are the .pte's" }
end

--- What a record's memory should make the user aware of: lines for rec.warnings. log_elsewhere: where the
-- runner logged instead of its stderr ("logcat": an Android runner), which the helper cannot watch.
function M.warnings(mem, log_elsewhere)
  local w = {}
  if #mem.seen == 0 and log_elsewhere then
    w[#w + 1] = ("memory: the runner logs to %s, which odp's helper does not see: no phase boundaries, one " ..
      "phase, the whole run"):format(log_elsewhere)
  elseif #mem.seen == 0 then
    w[#w + 1] = "memory: the runner printed none of the phase lines (program loaded, method loaded, iterations, " ..
      "executed): one phase, the whole run"
  end
  if mem.clear_refs ~= "ok" then
    w[#w + 1] = ("memory: the high-water mark could not be reset (/proc/PID/clear_refs %s): a phase whose peak " ..
      "was not above the earlier ones is sampled at %s ms, not exact"):format(mem.clear_refs, mem.sample_ms or "?")
  end
  if mem.rss_counters == "batched" then
    w[#w + 1] = ("memory: the board's kernel (before Linux 6.2) adds each thread's page faults to its RSS " ..
      "counters in batches of 64, so VmHWM and statm lag what is resident: the timeline walks the page tables " ..
      "(smaps_rollup) every %s ms and each phase's peak is the largest reading, not exact"):format(mem.sample_ms or "?")
  end
  if mem.late then
    w[#w + 1] = ("memory: the runner's line(s) for %s came too late to read at (ended: after the runner " ..
      "had ended; together: in one read with the next phase's line; read: after more of its output, so the " ..
      "reading holds some of the next phase): those phases are reported as one, or as not exact (read)"):format(
      table.concat(mem.late, ", "))
  end
  if mem.children then
    w[#w + 1] = ("memory: the runner started %d process(es); their memory is not counted in the phases"):format(mem.children)
  end
  return w
end

return M
