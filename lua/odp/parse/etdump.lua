--- ETDump: ExecuTorch's profiling dump, read without Python. The flatbuffer walk is C (src/etdump, every offset
-- bounds-checked); this module adds the op table the way ExecuTorch's Inspector builds it.
--   local etdump = require("odp.parse.etdump")
--   local doc = assert(etdump.read("model.etdump"))
--   for _, row in ipairs(etdump.ops(doc)) do print(row.block, row.name, row.n, row.p50) end
local core = require("odp.etdumpcore")
local stats = require("odp.core.stats") -- numpy-compatible percentiles, like the Inspector
local sys = require("odp.sys")

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

-- The decoded dump behind each document read from bytes (ops uses its columns instead of the tables).
local dump_of = setmetatable({}, { __mode = "k" })

-- A run's events are built on first access (or on pairs, e.g. json.encode): the op table never needs them
-- as tables, and 100,000 events as tables cost far more than decoding them.
local function lazy_run(dump, i, run)
  run.nevents = nil
  return setmetatable(run, {
    __index = function(t, k)
      if k ~= "events" then return nil end
      local ev = dump:events(i)
      rawset(t, "events", ev)
      return ev
    end,
    __pairs = function(t)
      local _ = t.events
      return next, t, nil
    end,
  })
end

--- Reads an ETDump from a file path or from its bytes.
-- Returns {version, size_prefixed, run_data = {{name, bundled_input_index, allocators = {{name}},
-- events = {...}}}} or nil, "ECODE: message", "ECODE". Events have kind = "profile" | "allocation" |
-- "debug" | "empty" and every field of the schema (absent strings are nil); profile events also carry
-- `duration` in ticks (survives a 32-bit wrap; nil when start > end cannot be a wrap). A run's `events`
-- list is decoded when first touched.
---@param path_or_bytes string
function M.read(path_or_bytes)
  local bytes = path_or_bytes
  if not looks_like_etdump(bytes) then
    local err, code
    bytes, err, code = sys.read_file(path_or_bytes)
    if not bytes then return nil, err, code end
  end
  local dump, err, code = core.open(bytes)
  if not dump then return nil, err, code end
  local doc = dump:header()
  for i, run in ipairs(doc.run_data) do lazy_run(dump, i, run) end
  dump_of[doc] = dump
  return doc
end

--- Wrap-safe duration in ticks (nil when start > end and it cannot be a 32-bit wrap).
M.duration = core.duration


local function check_opts(opts, allowed)
  for k in pairs(opts) do
    if not allowed[k] then error(("unknown option '%s'"):format(tostring(k)), 3) end
  end
end

local function delegate_of(did, dstr)
  if did ~= -1 then return did end
  if dstr and dstr ~= "" then return dstr end
  return nil
end

-- A run's profile and debug events as columns (see Dump:columns), from the C dump or from tables.
local function columns_of(doc, i, run)
  local dump = dump_of[doc]
  if dump and rawget(run, "events") == nil then return dump:columns(i) end
  local c = { kind = {}, name = {}, iid = {}, chain = {}, did = {}, dstr = {}, dur = {}, out = {} }
  local n = 0
  for _, e in ipairs(run.events or {}) do
    if e.kind == "profile" or e.kind == "debug" then
      n = n + 1
      c.kind[n] = e.kind == "profile" and 1 or 3
      c.name[n] = e.name or ""
      c.iid[n] = e.instruction_id or -1
      c.chain[n] = e.chain_index or 0
      c.did[n] = e.delegate_debug_id_int or -1
      c.dstr[n] = e.delegate_debug_id_str or false
      c.dur[n] = e.kind == "profile" and (e.duration or (e.start_time and e.end_time and
        core.duration(e.start_time, e.end_time))) or false
      c.out[n] = e.kind == "debug" and e.debug_entry ~= nil and e.debug_entry.output == true
    end
  end
  c.n = n
  return c
end

-- Interns a path of keys in a trie of tables -> the leaf table (created on the way).
local function trie(root, a, b, c, d)
  local t = root[a]
  if not t then t = {} root[a] = t end
  local u = t[b]
  if not u then u = {} t[b] = u end
  local v = u[c]
  if not v then v = {} u[c] = v end
  local w = v[d]
  if not w then w = {} v[d] = w end
  return w
end

local SIG_SPAN = 1 << 26 -- event signature key = profile signature id * SIG_SPAN + debug signature id

--- Groups runs like the Inspector's EventBlocks (devtools/inspector/_inspector.py): within a run, events are
-- collated per instruction (instruction id, chain, delegate ids) and split into one signature per profile
-- event (name, instruction id, delegate ids; -1 and "" meaning unset) plus the instruction's first debug
-- event; runs with the same name, the same signature sequence and the same bundled input merge into one
-- block, so N `Execute` runs give one block with N samples per event. A signature repeated within a run
-- keeps its first place and its last event, as the Inspector's dict does.
-- Returns a list of {name, bundled_input_index, runs = n, events = {{name, instruction_id, delegate_id,
-- profile = bool, samples = {ticks}}}} (samples in run order; ascending with opts.sorted). Documents read from bytes are merged in C (src/etdump/blocks.c);
-- documents whose events were touched or built by hand, or opts.lua = true, take this Lua path.
function M.blocks(doc, opts)
  if opts then check_opts(opts, { lua = true, sorted = true }) end
  local dump = dump_of[doc]
  if dump and not (opts and opts.lua) then
    local untouched = true
    for _, run in ipairs(doc.run_data) do if rawget(run, "events") ~= nil then untouched = false end end
    if untouched then return assert(dump:blocks(opts and opts.sorted)) end
  end
  local sig_trie, sig_info, nsigs = {}, {}, 0
  local function sig_id(name, iid, did, dstr)
    local leaf = trie(sig_trie, name, iid, did, dstr or false)
    local id = leaf.id
    if not id then
      nsigs = nsigs + 1
      id = nsigs
      leaf.id = id
      sig_info[id] = { name = name, instruction_id = iid, delegate_id = delegate_of(did, dstr) }
    end
    return id
  end
  local groups_trie, order = {}, {}
  for ri, run in ipairs(doc.run_data or {}) do
    local c = columns_of(doc, ri, run)
    if c.n > 0 then
      local kind, name, iid, chain, did, dstr, dur, out = c.kind, c.name, c.iid, c.chain, c.did, c.dstr, c.dur, c.out
      -- instructions in first-seen order: {profile event indices}, first debug event index
      local itrie, instrs = {}, {}
      for j = 1, c.n do
        -- a run-output debug event still places its instruction (as in the Inspector), but is no sample
        local leaf = trie(itrie, iid[j], chain[j], did[j], dstr[j])
        local ins = leaf.ins
        if not ins then
          ins = { profile = {} }
          leaf.ins = ins
          instrs[#instrs + 1] = ins
        end
        if kind[j] == 1 then ins.profile[#ins.profile + 1] = j elseif not ins.debug and not out[j] then ins.debug = j end
      end
      -- event signatures of this run, in order, each with its (last) profile event
      local keys, ev_of = {}, {}
      for _, ins in ipairs(instrs) do
        local d = ins.debug
        local dsig = d and sig_id(name[d], iid[d], did[d], dstr[d]) or 0
        if #ins.profile == 0 and dsig ~= 0 then
          local k = dsig
          if not ev_of[k] then keys[#keys + 1] = k end
          ev_of[k] = false
        elseif #ins.profile > 0 then
          for _, j in ipairs(ins.profile) do
            local k = sig_id(name[j], iid[j], did[j], dstr[j]) * SIG_SPAN + dsig
            if ev_of[k] == nil then keys[#keys + 1] = k end
            ev_of[k] = j
          end
        end
      end
      -- the block: same name, bundled input and signature sequence
      local node = trie(groups_trie, run.name or "", run.bundled_input_index or -1, #keys, true)
      for _, k in ipairs(keys) do
        local nxt = node[k]
        if not nxt then nxt = {} node[k] = nxt end
        node = nxt
      end
      local g = node.group
      if not g then
        g = { name = run.name or "", bundled_input_index = run.bundled_input_index, runs = 0, events = {} }
        for i, k in ipairs(keys) do
          local psig = k // SIG_SPAN
          local info = sig_info[psig ~= 0 and psig or k]
          g.events[i] = { name = info.name, instruction_id = info.instruction_id, delegate_id = info.delegate_id,
            profile = psig ~= 0, samples = {} }
        end
        node.group = g
        order[#order + 1] = g
      end
      g.runs = g.runs + 1
      for i, k in ipairs(keys) do
        local j = ev_of[k]
        if j and dur[j] then
          local smp = g.events[i].samples
          smp[#smp + 1] = dur[j]
        end
      end
    end
  end
  if opts and opts.sorted then
    for _, g in ipairs(order) do
      for _, ev in ipairs(g.events) do table.sort(ev.samples) end
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

--- The op table: one row per event of each block, in the block's order, with statistics over its samples.
-- opts.time_scale: the ticks' unit, "ns" (Linux runners, default) | "us" | "ms" | "s" | "cycles" (Arm
-- bare-metal); opts.clock_hz converts cycles to ms (without it the values stay in cycles).
-- Rows: {block, name, n, p10, p50, p90, avg, min, max, delegated, delegate_id, framework}; unit is the
-- second return value ("ms" or "cycles"). Delegated events are named by their delegate id, like the Inspector.
-- opts.samples = true adds each row's samples (sorted; odp compare bootstraps over them).
---@param doc table from etdump.read
---@param opts? {time_scale?: string, clock_hz?: number, samples?: boolean}
function M.ops(doc, opts)
  opts = opts or {}
  check_opts(opts, { time_scale = true, clock_hz = true, samples = true })
  local divisor, unit = scale_for(opts) -- ticks per output unit; divide like the Inspector does
  local rows = {}
  for _, b in ipairs(M.blocks(doc, { sorted = true })) do
    for _, ev in ipairs(b.events) do
      if ev.profile then
        local did = ev.delegate_id
        local name = did ~= nil and tostring(did) or ev.name
        local xs = {}
        for i, t in ipairs(ev.samples) do xs[i] = t / divisor end -- sorted ticks stay sorted
        rows[#rows + 1] = {
          block = b.name, name = name, n = #xs,
          p10 = stats.percentile(xs, 10), p50 = stats.percentile(xs, 50), p90 = stats.percentile(xs, 90),
          avg = stats.mean(xs), min = xs[1], max = xs[#xs],
          delegated = did ~= nil, delegate_id = did, framework = M.FRAMEWORK_EVENTS[name] == true,
          instruction_id = ev.instruction_id, samples = opts.samples and xs or nil,
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
  for ri, run in ipairs(doc.run_data or {}) do
    local c = columns_of(doc, ri, run)
    local kind, name, dur = c.kind, c.name, c.dur
    for j = 1, c.n do
      if kind[j] == 1 and name[j] == "Method::execute" and dur[j] then out[#out + 1] = dur[j] / divisor end
    end
  end
  return out
end

--- Where each inference's time went: delegates, kernels, or the method's own work between instructions.
-- ExecuTorch's runtime wraps every delegate instruction in a DELEGATE_CALL event and every kernel instruction
-- in an OPERATOR_CALL event (each includes the framework's overhead of the call); the delegate's own events
-- (those with a delegate debug id) are nested inside its DELEGATE_CALL and only count when a run has no
-- DELEGATE_CALL. An iteration closes at its `Method::execute` event: events are written as their scopes
-- end, so an inference's events precede its Method::execute. other = execute - delegated - kernels (>= 0).
-- Returns {n, execute_ms, delegated_ms, kernels_ms, other_ms, delegated_share, unit} with each value the
-- median over the n iterations (delegated_share: the median of the per-iteration shares, 0..1), or nil
-- when the dump has no Method::execute event. Values are in ms, or in cycles when unit = "cycles".
---@param doc table from etdump.read
---@param opts? {time_scale?: string, clock_hz?: number}
function M.ops_summary(doc, opts)
  opts = opts or {}
  check_opts(opts, { time_scale = true, clock_hz = true })
  local divisor, unit = scale_for(opts)
  local execute, delegated, kernels, other, share = {}, {}, {}, {}, {}
  for ri, run in ipairs(doc.run_data or {}) do
    local c = columns_of(doc, ri, run)
    local kind, name, did, dstr, dur = c.kind, c.name, c.did, c.dstr, c.dur
    local calls, own, ops, has_call = 0, 0, 0, false
    for j = 1, c.n do
      local d = dur[j]
      if kind[j] == 1 and d then
        local nm = name[j]
        if nm == "Method::execute" then
          local dl = has_call and calls or own
          local k = #execute + 1
          execute[k], delegated[k], kernels[k] = d / divisor, dl / divisor, ops / divisor
          other[k] = math.max(0, d - dl - ops) / divisor
          share[k] = d > 0 and math.min(1, dl / d) or 0
          calls, own, ops, has_call = 0, 0, 0, false
        elseif nm == "DELEGATE_CALL" then
          calls, has_call = calls + d, true
        elseif nm == "OPERATOR_CALL" then
          ops = ops + d
        elseif did[j] ~= -1 or (dstr[j] and dstr[j] ~= "") then
          own = own + d
        end
      end
    end
  end
  if #execute == 0 then return nil end
  local function med(xs) return stats.percentile(xs, 50) end
  return { n = #execute, execute_ms = med(execute), delegated_ms = med(delegated), kernels_ms = med(kernels),
    other_ms = med(other), delegated_share = med(share), unit = unit }
end

--- Block names of the merged blocks, in order (for `odp inspect --format json`).
function M.block_names(doc)
  local names = {}
  for i, b in ipairs(M.blocks(doc)) do names[i] = b.name end
  return names
end

--- Decodes bytes that are certainly a ETDump (no path guessing): same results as read.
M.decode = core.decode

return M
