--- Chrome trace export (the JSON Perfetto and chrome://tracing load): every profile event of an ETDump as a
-- complete event (ph "X", microseconds), one track (tid) per block name (Default, Execute, ...).
--   local tr = require("odp.results.trace").chrome(doc)                 -- ns ticks (Linux runners)
--   local tr = require("odp.results.trace").chrome(doc, {time_scale = "cycles", clock_hz = 400e6})
--   require("odp.sys").write_file("trace.json", require("odp.results.trace").encode(tr))
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

--- Adds the memory of a run (docs/memory.md) to a trace as a process of its own: a counter track ("RSS":
-- anonymous and file-backed kB, stacked) from the timeline's rows, and the phases as async slices with their peaks.
-- Its clock is the helper's (ms since the runner started), not the ETDump's: a process apart, never laid over
-- the operators as if the clocks were one.
---@param tr table M.chrome's (or {traceEvents = {}})
---@param rows {t_ms: number, rss_kb: integer, anon_kb: integer, file_kb: integer}[]
---@param phases table[]? the record's memory.phases
function M.add_memory(tr, rows, phases)
  local pid = 1
  for _, e in ipairs(tr.traceEvents) do if e.pid and e.pid >= pid then pid = e.pid + 1 end end
  local ev = tr.traceEvents
  ev[#ev + 1] = { name = "process_name", ph = "M", pid = pid, tid = 0,
    args = { name = "memory (ms since the runner started)" } }
  for _, r in ipairs(rows) do
    ev[#ev + 1] = { name = "RSS kB", ph = "C", pid = pid, tid = 0, ts = us3(r.t_ms * 1000),
      args = { anon = r.anon_kb, file = r.file_kb } }
  end
  -- the phases as async slices (b/e), not complete events: a trace's complete events are the ETDump's operators
  for i, p in ipairs(phases or {}) do
    if p.t_start_ms and p.t_end_ms then
      ev[#ev + 1] = { name = p.name, cat = "memory", ph = "b", id = i, pid = pid, tid = 1,
        ts = us3(p.t_start_ms * 1000), args = { peak_kb = p.peak_kb, exact = p.exact } }
      ev[#ev + 1] = { name = p.name, cat = "memory", ph = "e", id = i, pid = pid, tid = 1, ts = us3(p.t_end_ms * 1000) }
    end
  end
  return tr
end

-- ".001" .. ".999" for the nanoseconds of a time in µs, trailing zeros dropped (".0" for none).
local FRACTION = {}
for i = 0, 999 do FRACTION[i] = i == 0 and ".0" or ("." .. ("%03d"):format(i):gsub("0+$", "")) end

-- A number as odp.core.json writes it: integers as they are, floats exact in the fewest digits, with a '.'.
local function number(v)
  if math.type(v) == "integer" then return tostring(v) end
  local t
  for _, fmt in ipairs { "%.15g", "%.16g", "%.17g" } do
    t = fmt:format(v)
    if tonumber(t) == v then break end
  end
  return t:find("[.eEn]") and t or (t .. ".0")
end

--- The trace (from M.chrome) as JSON text. The complete events are written here, field by field: the
--- general encoder takes seconds for the 100,000 events of a large ETDump (bench/report_bench.lua).
function M.encode(tr)
  local strings = {}
  local function str(s)
    local v = strings[s]
    if not v then
      v = json.encode(s)
      strings[s] = v
    end
    return v
  end
  local out = { '{"displayTimeUnit":', str(tr.displayTimeUnit), ',"otherData":', json.encode(tr.otherData),
    ',"traceEvents":[' }
  local floor = math.floor
  for i, e in ipairs(tr.traceEvents) do
    local a = e.args
    if e.ph == "X" then
      local did = a.delegate_debug_id
      local head = ('%s{"args":{"chain_index":%d,%s"instruction_id":%d,"run":%d},"cat":%s,"dur":'):format(
        i > 1 and "," or "", a.chain_index,
        did ~= nil and ('"delegate_debug_id":%s,'):format(type(did) == "string" and str(did) or number(did)) or "",
        a.instruction_id, a.run, str(e.cat))
      local ts, dur = e.ts, e.dur
      local tns, dns = floor(ts * 1000 + 0.5), floor(dur * 1000 + 0.5)
      if tns / 1000 == ts and dns / 1000 == dur and tns >= 0 and dns >= 0 and tns < 1e15 then
        -- the usual case, whole nanoseconds: no float formatting at all
        out[#out + 1] = ('%s%d%s,"name":%s,"ph":"X","pid":%d,"tid":%d,"ts":%d%s}'):format(head, dns // 1000,
          FRACTION[dns % 1000], str(e.name), e.pid, e.tid, tns // 1000, FRACTION[tns % 1000])
      else
        out[#out + 1] = ('%s%s,"name":%s,"ph":"X","pid":%d,"tid":%d,"ts":%s}'):format(head, number(dur), str(e.name),
          e.pid, e.tid, number(ts))
      end
    else
      out[#out + 1] = (i > 1 and "," or "") .. json.encode(e)
    end
  end
  out[#out + 1] = "]}"
  return table.concat(out)
end

return M
