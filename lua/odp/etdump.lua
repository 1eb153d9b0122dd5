--- ETDump: ExecuTorch's profiling dump, read without Python. The flatbuffer walk is C (src/etdump, every offset
-- bounds-checked); this module adds the op table the way ExecuTorch's Inspector builds it.
--   local etdump = require("odp.etdump")
--   local doc = assert(etdump.read("model.etdump"))
--   for _, row in ipairs(etdump.ops(doc)) do print(row.block, row.name, row.n, row.p50) end
local core = require("odp.etdumpcore")

local M = {}

-- Rows the Inspector leaves out of printed tables: the time of the previous operator plus the framework's
-- overhead of calling it (devtools/inspector/_inspector_utils.py, EXCLUDED_EVENTS_WHEN_PRINTING).
M.FRAMEWORK_EVENTS = { OPERATOR_CALL = true }

-- Ticks per second of each source time scale (the Inspector's TIME_SCALE_DICT).
local TICKS_PER_S = { ns = 1e9, us = 1e6, ms = 1e3, s = 1 }

local function looks_like_etdump(s)
  -- bytes carry the identifier, or a NUL that no path can hold
  return #s >= 8 and (s:sub(9, 12) == "ED00" or s:sub(5, 8) == "ED00" or s:find("\0", 1, true) ~= nil)
end

--- Reads an ETDump from a file path or from its bytes.
-- Returns {version, size_prefixed, run_data = {{name, bundled_input_index, allocators = {{name}},
-- events = {...}}}} or nil, "ECODE: message", "ECODE". Events have kind = "profile" | "allocation" |
-- "debug" | "empty" and every field of the schema (absent strings are nil); profile events also carry
-- `duration` in ticks (survives a 32-bit wrap; nil when start > end cannot be a wrap).
---@param path_or_bytes string
function M.read(path_or_bytes)
  local bytes = path_or_bytes
  if not looks_like_etdump(bytes) then
    local f, err = io.open(path_or_bytes, "rb")
    if not f then
      local code = err:find("No such file") and "ENOTFOUND" or "EIO"
      return nil, code .. ": " .. err, code
    end
    bytes = f:read("a")
    f:close()
  end
  return core.decode(bytes)
end

--- Wrap-safe duration in ticks (nil when start > end and it cannot be a 32-bit wrap).
M.duration = core.duration

--- numpy.percentile's default (linear interpolation between closest ranks) on a sorted list.
-- TODO(stats): replace with require("odp.stats").percentile once lua/odp/stats.lua lands on main.
local function percentile_sorted(xs, p)
  local n = #xs
  if n == 0 then return nil end
  local h = (n - 1) * p / 100
  local lo = math.floor(h)
  local frac = h - lo
  if lo + 1 >= n then return xs[n] end
  return xs[lo + 1] + frac * (xs[lo + 2] - xs[lo + 1])
end
M._percentile_sorted = percentile_sorted

local function opt(v) return v ~= nil and tostring(v) or "\1" end

-- The Inspector's signatures, flattened to string keys. Unset ids (-1, "") count as absent.
local function delegate_of(e)
  if e.delegate_debug_id_int and e.delegate_debug_id_int ~= -1 then return e.delegate_debug_id_int end
  if e.delegate_debug_id_str and e.delegate_debug_id_str ~= "" then return e.delegate_debug_id_str end
  return nil
end

local function event_key(e)
  local iid = e.instruction_id ~= -1 and e.instruction_id or nil
  local did = e.delegate_debug_id_int ~= -1 and e.delegate_debug_id_int or nil
  local dstr = (e.delegate_debug_id_str ~= "" and e.delegate_debug_id_str) or nil
  return table.concat({ e.name or "", opt(iid), opt(did), opt(dstr) }, "\0")
end

local function is_run_output(e)
  return e.kind == "debug" and e.debug_entry and e.debug_entry.output == true
end

-- One run -> its ordered event signatures, each with the run's profile event (or nil for debug-only ones).
-- Mirrors InstructionEvent.gen_from_events + EventSignature.gen_from_instruction_event: events are collated
-- per instruction (id, chain, delegate ids), then split into one signature per profile event.
local function run_signatures(run)
  local instr, order = {}, {}
  for _, e in ipairs(run.events) do
    if e.kind == "profile" or (e.kind == "debug" and not is_run_output(e)) then
      local k = table.concat({ e.instruction_id, e.chain_index, opt(e.delegate_debug_id_int),
        opt(e.delegate_debug_id_str) }, "\0")
      local ie = instr[k]
      if not ie then
        ie = { profile = {}, debug = {}, instruction_id = e.instruction_id }
        instr[k] = ie
        order[#order + 1] = ie
      end
      table.insert(e.kind == "profile" and ie.profile or ie.debug, e)
    end
  end
  local sigs, by_key = {}, {}
  local function add(key, value)
    if by_key[key] == nil then sigs[#sigs + 1] = key end
    by_key[key] = value -- a repeated signature keeps its first place and its last event (a dict in Python)
  end
  for _, ie in ipairs(order) do
    local dsig = ie.debug[1] and ("D" .. event_key(ie.debug[1])) or "-"
    if #ie.profile == 0 then
      add(ie.instruction_id .. "\0" .. dsig, { debug = ie.debug[1] })
    else
      for _, pe in ipairs(ie.profile) do
        add(ie.instruction_id .. "\0P" .. event_key(pe) .. "\0" .. dsig, { profile = pe, debug = ie.debug[1] })
      end
    end
  end
  local list = {}
  for i, k in ipairs(sigs) do list[i] = { key = k, ev = by_key[k] } end
  return list
end

--- Groups runs like the Inspector's EventBlocks: runs with the same name, the same event signatures and the
-- same bundled input merge into one block (N `Execute` runs -> one block with N samples per event).
-- Returns a list of {name, bundled_input_index, runs = n, events = {{profile=, debug=, samples = {ticks}}}}.
function M.blocks(doc)
  local groups, order = {}, {}
  for _, run in ipairs(doc.run_data or {}) do
    if run.events and #run.events > 0 then
      local sigs = run_signatures(run)
      local keys = {}
      for i, s in ipairs(sigs) do keys[i] = s.key end
      local gk = table.concat({ run.name or "", tostring(run.bundled_input_index), table.concat(keys, "\0\0") },
        "\0\0\0")
      local g = groups[gk]
      if not g then
        g = { name = run.name or "", bundled_input_index = run.bundled_input_index, runs = 0, events = {} }
        for i, s in ipairs(sigs) do g.events[i] = { profile = s.ev.profile, debug = s.ev.debug, samples = {} } end
        groups[gk] = g
        order[#order + 1] = g
      end
      g.runs = g.runs + 1
      for i, s in ipairs(sigs) do
        local pe = s.ev.profile
        if pe and pe.duration then table.insert(g.events[i].samples, pe.duration) end
      end
    end
  end
  return order
end

local function scale_for(opts)
  local ts = opts.time_scale or "ns"
  if ts == "cycles" then
    if opts.clock_hz then
      assert(type(opts.clock_hz) == "number" and opts.clock_hz > 0, "clock_hz must be a positive number")
      return opts.clock_hz / 1e3, "ms"
    end
    return 1, "cycles"
  end
  local tps = TICKS_PER_S[ts]
  if not tps then error(("time_scale must be ns|us|ms|s|cycles, got %s"):format(tostring(ts)), 3) end
  return tps / 1e3, "ms"
end

local function check_opts(opts, allowed)
  for k in pairs(opts) do
    if not allowed[k] then error(("unknown option '%s'"):format(tostring(k)), 3) end
  end
end

--- The op table: one row per event of each block, in the block's order, with statistics over its samples.
-- opts.time_scale: the ticks' unit, "ns" (Linux runners, default) | "us" | "ms" | "s" | "cycles" (Arm
-- bare-metal); opts.clock_hz converts cycles to ms (without it the values stay in cycles).
-- Rows: {block, name, n, p10, p50, p90, avg, min, max, delegated, delegate_id, framework}; unit is the
-- second return value ("ms" or "cycles"). Delegated events are named by their delegate id, like the Inspector.
---@param doc table from etdump.read
---@param opts? {time_scale?: string, clock_hz?: number}
function M.ops(doc, opts)
  opts = opts or {}
  check_opts(opts, { time_scale = true, clock_hz = true })
  local divisor, unit = scale_for(opts) -- ticks per output unit; divide like the Inspector does
  local rows = {}
  for _, b in ipairs(M.blocks(doc)) do
    for _, ev in ipairs(b.events) do
      local src = ev.profile or ev.debug
      local did = delegate_of(src)
      local name = did ~= nil and tostring(did) or (src.name or "")
      if ev.profile then
        local xs = {}
        for i, t in ipairs(ev.samples) do xs[i] = t / divisor end
        table.sort(xs)
        local sum = 0
        for _, x in ipairs(xs) do sum = sum + x end
        rows[#rows + 1] = {
          block = b.name, name = name, n = #xs,
          p10 = percentile_sorted(xs, 10), p50 = percentile_sorted(xs, 50), p90 = percentile_sorted(xs, 90),
          avg = #xs > 0 and sum / #xs or nil, min = xs[1], max = xs[#xs],
          delegated = did ~= nil, delegate_id = did, framework = M.FRAMEWORK_EVENTS[name] == true,
          instruction_id = src.instruction_id,
        }
      end
    end
  end
  return rows, unit
end

--- Per-inference latency samples: the duration of every `Method::execute` event, in ms (or cycles when
-- time_scale = "cycles" and no clock_hz), in file order.
function M.latency(doc, opts)
  opts = opts or {}
  check_opts(opts, { time_scale = true, clock_hz = true })
  local divisor = scale_for(opts)
  local out = {}
  for _, run in ipairs(doc.run_data or {}) do
    for _, e in ipairs(run.events or {}) do
      if e.kind == "profile" and e.name == "Method::execute" and e.duration then
        out[#out + 1] = e.duration / divisor
      end
    end
  end
  return out
end

--- Block names of the merged blocks, in order (for `odp inspect --format json`).
function M.block_names(doc)
  local names = {}
  for i, b in ipairs(M.blocks(doc)) do names[i] = b.name end
  return names
end

return M
