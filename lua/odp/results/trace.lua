--- Chrome trace export (the JSON Perfetto and chrome://tracing load): every profile event of an ETDump as a
-- complete event (ph "X", microseconds), one track (tid) per block name (Default, Execute, ...).
--   local tr = require("odp.results.trace").chrome(doc)                 -- ns ticks (Linux runners)
--   local tr = require("odp.results.trace").chrome(doc, {time_scale = "cycles", clock_hz = 400e6})
--   require("odp.sys").write_file("trace.json", require("odp.core.json").encode(tr))
local json = require("odp.core.json")

local M = {}

-- Microseconds rounded to the nanosecond: no float noise in the file.
local function us3(x) return math.floor(x * 1000 + 0.5) / 1000 end

local US_PER_TICK = { ns = 1e-3, us = 1, ms = 1e3, s = 1e6 }

--- Returns the trace as a table: {traceEvents = {...}, displayTimeUnit = "ms", otherData = {...}}.
-- Cycles without clock_hz are drawn as 1 cycle = 1 µs and otherData.note says so.
---@param doc table from odp.parse.etdump.read
---@param opts? {time_scale?: string, clock_hz?: number, pid?: integer, process_name?: string}
function M.chrome(doc, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if not ({ time_scale = true, clock_hz = true, pid = true, process_name = true })[k] then
      error(("unknown option '%s'"):format(tostring(k)), 2)
    end
  end
  local ts = opts.time_scale or "ns"
  local us, note
  if ts == "cycles" then
    if opts.clock_hz then
      us = 1e6 / opts.clock_hz
    else
      us, note = 1, "times are CPU cycles drawn as 1 cycle = 1 us (give clock_hz to convert)"
    end
  else
    us = US_PER_TICK[ts] or error("time_scale must be ns|us|ms|s|cycles", 2)
  end
  local pid = opts.pid or 1
  local events, tids = {}, {}
  events[1] = { name = "process_name", ph = "M", pid = pid, tid = 0,
    args = { name = opts.process_name or "ExecuTorch" } }
  for ri, run in ipairs(doc.run_data or {}) do
    local block = run.name or "?"
    local tid = tids[block]
    if not tid then
      tid = #events -- stable and unique: the metadata event's index
      tids[block] = tid
      events[#events + 1] = { name = "thread_name", ph = "M", pid = pid, tid = tid, args = { name = block } }
      events[#events + 1] = { name = "thread_sort_index", ph = "M", pid = pid, tid = tid, args = { sort_index = tid } }
    end
    for _, e in ipairs(run.events or {}) do
      if e.kind == "profile" and e.duration then
        local args = { run = ri, instruction_id = e.instruction_id, chain_index = e.chain_index }
        if e.delegate_debug_id_int ~= -1 then args.delegate_debug_id = e.delegate_debug_id_int end
        if e.delegate_debug_id_str then args.delegate_debug_id = e.delegate_debug_id_str end
        events[#events + 1] = { name = e.name or "?", cat = block, ph = "X", pid = pid, tid = tid,
          ts = us3(e.start_time * us), dur = us3(e.duration * us), args = args }
      end
    end
  end
  return { traceEvents = json.array(events), displayTimeUnit = "ms",
    otherData = { source = "odp", time_scale = ts, clock_hz = opts.clock_hz, note = note } }
end

return M
