--- A runner's memory by phase (docs/memory.md): the marks odp gives its helper (executor_runner's phase lines,
-- as data: the helper matches globs and knows no runner), the helper's report lines, and the phases made of
-- them. Pure: text and tables in, tables out.
--   ODP-MEMORY-MARK event=program t_ms=3.8 hwm_kb=8896 reset=1 sampled_max_kb=8696 rss_kb=.. anon_kb=..
--                   file_kb=.. shmem_kb=.. model_kb=.. read_us=.. after=.. [late=ended|together (hwm_kb=-1)]
--   ODP-MEMORY samples=534 sample_ms=1.000 sampled_max_kb=.. tail_sampled_max_kb=.. dropped_marks=0
--              clear_refs=ok|denied|failed children=0 timeline=ok|failed model_kb=0 rss_counters=exact|batched
local M = {}

--- executor_runner's phase boundaries (FACTS: the lines it writes to stderr, one write each, as it goes), as
-- {event, glob} (fnmatch(3) globs on the whole line; the timestamp and source location vary). Each line is
-- printed when its phase is over: the program loaded, the method loaded (its planned buffers set up), the
-- first iteration done, all of them done. Older runners say "Method loaded." and print no iterations.
M.EXECUTORCH_MARKS = {
  { "program", "*] Model file * is loaded." },
  { "method", "*] Model loaded in * ms." },
  { "method", "*] Method loaded." },
  { "first", "*] Iteration 1 of *" },
  { "executed", "*] Model executed successfully*" },
}

--- The marks as the helper takes them: {"EVENT=GLOB", ...}.
function M.mark_specs(marks)
  local out = {}
  for i, m in ipairs(marks) do out[i] = m[1] .. "=" .. m[2] end
  return out
end

local MAX_MARKS = 64
local NUM = { t_ms = true, read_us = true, sample_ms = true }

local function fields(line)
  local v = {}
  for k, val in line:gmatch("([%w_]+)=(%S+)") do
    if k == "event" or k == "clear_refs" or k == "timeline" or k == "late" or k == "rss_counters" then
      if #val <= 32 and val:match("^[%w_]+$") then v[k] = val end
    elseif NUM[k] then
      local x = val:match("^%-?%d+%.?%d*$") and tonumber(val)
      if x and math.abs(x) < 1e12 then v[k] = x end
    elseif val:match("^%-?%d+$") and #val <= 15 then
      v[k] = math.tointeger(tonumber(val))
    end
  end
  return v
end

local function kb(x) return x and x >= 0 and x or nil end

--- The helper's report text -> {marks = {...}, samples, sample_ms, sampled_max_kb, tail_sampled_max_kb,
-- dropped_marks, clear_refs, children, timeline, rss_counters} or nil when it has no ODP-MEMORY line (not watched). The
-- report is the board's: bounded, and a malformed line is left out.
function M.report(text)
  if type(text) ~= "string" then return nil end
  local rep, marks = nil, {}
  for line in text:gmatch("[^\n]+") do
    if line:sub(1, 16) == "ODP-MEMORY-MARK " and #marks < MAX_MARKS then
      local v = fields(line)
      if v.event and v.t_ms and v.hwm_kb and v.hwm_kb >= -1 then
        -- hwm_kb -1: no reading, no reset (late = "ended": the line was read after the program had ended;
        -- "together": it came in one read with a later boundary's line)
        marks[#marks + 1] = { event = v.event, t_ms = v.t_ms, hwm_kb = kb(v.hwm_kb),
          late = v.hwm_kb < 0 and (v.late or "ended") or nil,
          reset = v.reset == 1,
          -- output of the runner after its line in the read that held it: it had gone on past the boundary
          -- before the helper read it (an older helper says nothing: 0)
          after = v.hwm_kb >= 0 and (v.after or 0) > 0 or nil,
          sampled_max_kb = kb(v.sampled_max_kb), rss_kb = kb(v.rss_kb), anon_kb = kb(v.anon_kb),
          file_kb = kb(v.file_kb), shmem_kb = kb(v.shmem_kb), model_kb = kb(v.model_kb), read_us = v.read_us }
      end
    elseif line:sub(1, 11) == "ODP-MEMORY " then
      local v = fields(line)
      rep = { samples = v.samples or 0, sample_ms = v.sample_ms, sampled_max_kb = kb(v.sampled_max_kb),
        tail_sampled_max_kb = kb(v.tail_sampled_max_kb), dropped_marks = v.dropped_marks or 0,
        clear_refs = v.clear_refs or "failed", children = v.children or 0, timeline = v.timeline or "failed",
        model_kb = kb(v.model_kb), rss_counters = v.rss_counters == "batched" and "batched" or "exact" }
    end
  end
  if rep then rep.marks = marks end
  return rep
end

-- The phase a segment ending at a mark of this event was, given what came before.
local ENDS = { program = "load", method = "method", first = "first" }
-- The phase a run was in after its last mark (an exit there cut it short, or it was the last).
local AFTER = { program = "method", method = "inference", first = "steady", executed = "teardown" }

--- The phases of one runner process from its report and the exit's ru_maxrss (KiB): a list of
-- {name, peak_kb, exact, source ("hwm"|"ru_maxrss"|"sampled"), t_start_ms, t_end_ms, ended ("line"|"exit")},
-- and the events seen in order. A phase's peak is exact when the high-water mark was reset at its start (its
-- VmHWM is its own), or, without the reset, when the mark rose above every earlier phase since the last reset
-- (the peak was in it); else it is the largest statm sample, not exact (bound_kb: the mark it stayed under). The
-- phase after the last mark is ru_maxrss (the kernel's mark since the last reset) unless children were seen
-- (wait4 counts a waited child's peak in it). A boundary without a reading of its own (its line was read after
-- the program ended, or in one read with the next boundary's line: the program had passed both) makes its
-- phase and the next one, named "first+steady" and so on.
-- A boundary whose line the helper read only after the runner had gone on past it (more of its output came in
-- the same read: m.after, a loaded machine) has a reading that holds the next phase's first bytes too: its
-- phase is not exact (late = "read", peak_kb that reading, bound_kb the same: its peak is at most that), and
-- the next phase's reading, from a reset made inside it, is exact only when it rose above that one.
-- Where the board's kernel counts RSS in batches (rep.rss_counters "batched": Linux before 6.2, which adds a
-- thread's page faults to its process's counters every 64 faults), VmHWM and ru_maxrss lag what is resident,
-- and no phase is exact: each peak is the largest of the mark, the samples (page-table walks, then) and the
-- resident size read at its boundary, all lower bounds of the truth.
---@param rep table  M.report's
---@param maxrss_kb integer?  the exit's ru_maxrss
---@param wall_ms number?  the process's wall time
function M.phases(rep, maxrss_kb, wall_ms)
  local phases, seen = {}, {}
  -- late_reset: the last reset was made after the runner had gone on past its boundary (inside the next phase)
  local t_prev, reset_prev, since_reset, late_reset = 0, true, 0, false
  local first_seen, pending = false, {}
  local batched = rep.rss_counters == "batched"
  for _, m in ipairs(rep.marks) do
    local name = ENDS[m.event] or (m.event == "executed" and (first_seen and "steady" or "inference")) or m.event
    if m.event == "first" then first_seen = true end
    seen[#seen + 1] = m.event
    pending[#pending + 1] = name
    if not m.late then
      local p = { name = table.concat(pending, "+"), t_start_ms = t_prev, t_end_ms = m.t_ms, ended = "line" }
      if batched then
        p.peak_kb = math.max(m.hwm_kb, m.sampled_max_kb or 0, m.rss_kb or 0)
        p.exact, p.source = false, "sampled"
      elseif m.after and (reset_prev or m.hwm_kb > since_reset) then
        p.peak_kb, p.exact, p.source, p.bound_kb, p.late = m.hwm_kb, false, "hwm", m.hwm_kb, "read"
      elseif reset_prev or m.hwm_kb > since_reset then
        p.peak_kb, p.exact, p.source = m.hwm_kb, true, "hwm"
      elseif late_reset then
        -- its own reading (from the reset inside it) is a peak it reached; the late reading bounds the rest
        p.peak_kb, p.exact, p.source, p.bound_kb = m.hwm_kb, false, "hwm", math.max(m.hwm_kb, since_reset)
        p.late = m.after and "read" or nil
      else
        -- the mark since the last reset bounds it from above
        p.peak_kb, p.exact, p.source = m.sampled_max_kb or m.hwm_kb, false, "sampled"
        p.bound_kb, p.late = m.hwm_kb, m.after and "read" or nil
      end
      p.split = m.rss_kb and { rss_kb = m.rss_kb, anon_kb = m.anon_kb, file_kb = m.file_kb, shmem_kb = m.shmem_kb }
      phases[#phases + 1] = p
      -- a reset made after the runner had gone on: the next reading starts inside the next phase, and what the
      -- next phase held before the reset is under this reading
      since_reset = m.reset and not m.after and 0 or math.max(since_reset, m.hwm_kb)
      reset_prev, late_reset, t_prev, pending = m.reset and not m.after, m.reset and m.after or false, m.t_ms, {}
    end
  end
  local last = rep.marks[#rep.marks]
  pending[#pending + 1] = last and (AFTER[last.event] or "teardown") or "run"
  local p = { name = table.concat(pending, "+"), t_start_ms = t_prev, t_end_ms = wall_ms, ended = "exit" }
  if batched then
    p.peak_kb, p.exact, p.source = math.max(maxrss_kb or 0, rep.tail_sampled_max_kb or 0), false, "sampled"
  elseif maxrss_kb and rep.children == 0 and (reset_prev or maxrss_kb > since_reset) then
    p.peak_kb, p.exact, p.source = maxrss_kb, true, "ru_maxrss"
  elseif maxrss_kb and rep.children == 0 and late_reset then
    p.peak_kb, p.exact, p.source, p.bound_kb = maxrss_kb, false, "ru_maxrss", since_reset
  else
    p.peak_kb, p.exact, p.source, p.bound_kb = rep.tail_sampled_max_kb or 0, false, "sampled", maxrss_kb
  end
  phases[#phases + 1] = p
  return phases, seen
end

--- The largest phase peak, whether it is exact, and its phase's name: exact when that phase's is and no
-- sampled phase could have gone above it (its bound, the high-water mark it was read under, is not above).
-- A phase whose line was read late (late = "read") has a reading that is the runner's own high-water mark,
-- only not all of it in that phase: as the run's peak it is exact.
function M.overall(phases)
  local best
  for _, p in ipairs(phases) do
    if not best or p.peak_kb > best.peak_kb then best = p end
  end
  if not best then return nil end
  local exact = best.exact or (best.late == "read" and best.source == "hwm")
  for _, p in ipairs(phases) do
    if not p.exact and p ~= best then exact = exact and (p.bound_kb or math.huge) <= best.peak_kb end
  end
  return best.peak_kb, exact, best.name
end

return M
