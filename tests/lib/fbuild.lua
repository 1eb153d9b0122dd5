--- A small FlatBuffers builder for tests and benchmarks: writes ETDumps and .pte files with the real layout
-- (vtables before their tables, children after their parents, scalars aligned) so odp's readers can be
-- tested on what the fixtures lack (debug and allocation events, delegates, segments) and at scale.
--   local fb = require("fbuild")
--   local bytes = fb.finish(fb.table{ [0] = {"u32", 0}, [1] = {"tables", {...}} }, "ED00", {size_prefixed = true})
-- Field kinds: u8 bool i32 u32 i64 u64 f32 f64 (scalars), str, bytes, table, tables, i32s, i64s (vectors).
local M = {}

local SIZE = { u8 = 1, bool = 1, i32 = 4, u32 = 4, f32 = 4, i64 = 8, u64 = 8, f64 = 8,
  str = 4, bytes = 4, table = 4, tables = 4, i32s = 4, i64s = 4 }
local FMT = { u8 = "<I1", bool = "<I1", i32 = "<i4", u32 = "<I4", f32 = "<f", i64 = "<i8", u64 = "<I8", f64 = "<d" }

function M.table(fields) return { kind = "table", fields = fields } end

local Builder = {}
Builder.__index = Builder

function Builder:pad_to(mod, rem)
  local p = (rem - self.pos) % mod
  if p > 0 then
    self.chunks[#self.chunks + 1] = ("\0"):rep(p)
    self.pos = self.pos + p
  end
end

function Builder:put(s)
  self.chunks[#self.chunks + 1] = s
  self.pos = self.pos + #s
end

function Builder:slot(n)
  self.chunks[#self.chunks + 1] = false
  local idx = #self.chunks
  self.pos = self.pos + n
  return idx
end

function Builder:emit_blob(s, nul)
  self:pad_to(4, 0)
  local pos = self.pos
  self:put(string.pack("<I4", #s) .. s .. (nul and "\0" or ""))
  return pos
end

-- A vector of integers of `width` bytes (4 or 8): its elements aligned to their size after the count.
function Builder:emit_ints(list, width)
  self:pad_to(width, width == 8 and 4 or 0)
  local pos = self.pos
  local parts = { string.pack("<I4", #list) }
  for i, v in ipairs(list) do parts[i + 1] = string.pack("<i" .. width, v) end
  self:put(table.concat(parts))
  return pos
end

function Builder:emit_tables(list)
  self:pad_to(4, 0)
  local pos = self.pos
  local idx = self:slot(4 + 4 * #list)
  local offs = { string.pack("<I4", #list) }
  for i, child in ipairs(list) do
    local cpos = self:emit(child)
    offs[i + 1] = string.pack("<I4", cpos - (pos + 4 * i))
  end
  self.chunks[idx] = table.concat(offs)
  return pos
end

function Builder:emit(node)
  local fields, maxid = node.fields, -1
  for id in pairs(fields) do if id > maxid then maxid = id end end
  -- inline layout: 8-byte fields first (aligned because the table starts at 4 mod 8), then 4, then 1
  local order = {}
  for id = 0, maxid do if fields[id] then order[#order + 1] = id end end
  table.sort(order, function(a, b)
    local sa, sb = SIZE[fields[a][1]], SIZE[fields[b][1]]
    if sa ~= sb then return sa > sb end
    return a < b
  end)
  local off, field_off = 4, {}
  for _, id in ipairs(order) do
    local sz = SIZE[fields[id][1]] or error("unknown field kind " .. tostring(fields[id][1]))
    off = off + (-off % sz)
    field_off[id] = off
    off = off + sz
  end
  local tlen = off + (-off % 4)
  local vlen = 4 + 2 * (maxid + 1)
  local vpad = vlen + (-vlen % 4)
  self:pad_to(8, (4 - vpad) % 8)
  local vt_pos = self.pos
  local idx = self:slot(vpad + tlen)
  local tpos = vt_pos + vpad
  local refs = {}
  for _, id in ipairs(order) do
    local kind, v = fields[id][1], fields[id][2]
    local cpos
    if kind == "str" then cpos = self:emit_blob(v, true)
    elseif kind == "bytes" then cpos = self:emit_blob(v, false)
    elseif kind == "i64s" then cpos = self:emit_ints(v, 8)
    elseif kind == "i32s" then cpos = self:emit_ints(v, 4)
    elseif kind == "tables" then cpos = self:emit_tables(v)
    elseif kind == "table" then cpos = self:emit(v)
    end
    if cpos then refs[id] = cpos - (tpos + field_off[id]) end
  end
  local vt = { string.pack("<I2I2", vlen, tlen) }
  for id = 0, maxid do vt[#vt + 1] = string.pack("<I2", field_off[id] or 0) end
  local body = { table.concat(vt), ("\0"):rep(vpad - vlen), string.pack("<i4", tpos - vt_pos) }
  local cur = 4
  for _, id in ipairs(order) do
    local kind, v = fields[id][1], fields[id][2]
    body[#body + 1] = ("\0"):rep(field_off[id] - cur)
    local s = refs[id] and string.pack("<I4", refs[id]) or string.pack(FMT[kind], kind == "bool" and (v and 1 or 0) or v)
    body[#body + 1] = s
    cur = field_off[id] + #s
  end
  body[#body + 1] = ("\0"):rep(tlen - cur)
  self.chunks[idx] = table.concat(body)
  return tpos
end

--- Serializes root with the 4-byte identifier. opts.size_prefixed (ETDump), opts.header (bytes placed after
-- the identifier, e.g. a .pte extended header; the root follows it).
function M.finish(root, ident, opts)
  opts = opts or {}
  local b = setmetatable({ chunks = {}, pos = 0 }, Builder)
  local rootslot = b:slot(4)
  b:put(ident)
  if opts.header then b:put(opts.header) end
  local rpos = b:emit(root)
  b.chunks[rootslot] = string.pack("<I4", rpos)
  b:pad_to(8, 0)
  local out = table.concat(b.chunks)
  if opts.size_prefixed then out = string.pack("<I4", #out) .. out end
  return out
end

--- A .pte whose one method ("forward") has the given inputs and outputs, and nothing to run: the method
-- signature's layout (ExecutionPlan.values/inputs/outputs, EValue's union, Tensor's scalar_type, sizes and
-- shape_dynamism) for the reader's tests. spec = {inputs = {io...}, outputs = {io...}}, an io = {scalar_type=,
-- sizes=, dynamism=} (a tensor), {kind = N} (another KernelTypes tag, no table) or {value = i} (an index as is).
function M.pte(spec)
  local values, function_io = {}, {}
  for _, which in ipairs({ "inputs", "outputs" }) do
    local idx = {}
    for i, io in ipairs(spec[which] or {}) do
      if io.value then
        idx[i] = io.value
      else
        local ev
        if io.kind then
          ev = M.table { [0] = { "u8", io.kind } }
        else
          ev = M.table { [0] = { "u8", 5 }, [1] = { "table", M.table { [0] = { "u8", io.scalar_type or 6 },
            [2] = { "i32s", io.sizes or {} }, [8] = { "u8", io.dynamism or 0 } } } }
        end
        values[#values + 1] = ev
        idx[i] = #values - 1
      end
    end
    function_io[which] = idx
  end
  local plan = M.table { [0] = { "str", "forward" }, [2] = { "tables", values },
    [3] = { "i32s", function_io.inputs }, [4] = { "i32s", function_io.outputs } }
  return M.finish(M.table { [0] = { "u32", 0 }, [1] = { "tables", { plan } } }, "ET12")
end

--- ETDump helpers: events as plain tables, like odp.parse.etdump.read returns them.
local function value_node(v)
  local f = { [0] = { "u8", ({ Null = 0, Int = 1, Bool = 2, Float = 3, Double = 4, Tensor = 5, TensorList = 6,
    String = 7 })[v.val] or 0 } }
  local function tensor(t)
    return M.table { [0] = { "u8", t.scalar_type or 6 }, [1] = { "i64s", t.sizes or {} },
      [2] = { "i64s", t.strides or {} }, [3] = t.offset and { "i64", t.offset } or nil }
  end
  if v.tensor then f[1] = { "table", tensor(v.tensor) } end
  if v.tensor_list then
    local ts = {}
    for i, t in ipairs(v.tensor_list) do ts[i] = tensor(t) end
    f[2] = { "table", M.table { [0] = { "tables", ts } } }
  end
  if v.int_value then f[3] = { "table", M.table { [0] = { "i64", v.int_value } } } end
  if v.float_value then f[4] = { "table", M.table { [0] = { "f32", v.float_value } } } end
  if v.double_value then f[5] = { "table", M.table { [0] = { "f64", v.double_value } } } end
  if v.bool_value ~= nil then f[6] = { "table", M.table { [0] = { "bool", v.bool_value } } } end
  if v.output ~= nil then f[7] = { "table", M.table { [0] = { "bool", v.output } } } end
  return M.table(f)
end

local function event_node(e)
  if e.kind == "profile" then
    return M.table { [0] = { "table", M.table {
      [0] = e.name and { "str", e.name } or nil, [1] = { "i32", e.chain_index or 0 },
      [2] = { "i32", e.instruction_id or -1 }, [3] = { "i32", e.delegate_debug_id_int or -1 },
      [4] = e.delegate_debug_id_str and { "str", e.delegate_debug_id_str } or nil,
      [5] = e.delegate_debug_metadata and { "bytes", e.delegate_debug_metadata } or nil,
      [6] = { "u64", e.start_time }, [7] = { "u64", e.end_time } } } }
  elseif e.kind == "allocation" then
    return M.table { [1] = { "table", M.table { [0] = { "i32", e.allocator_id }, [1] = { "u64", e.allocation_size } } } }
  else
    return M.table { [2] = { "table", M.table {
      [0] = { "u64", e.chain_index or 0 }, [1] = { "i32", e.instruction_id or -1 },
      [2] = e.debug_entry and { "table", value_node(e.debug_entry) } or nil,
      [3] = { "i32", e.delegate_debug_id_int or -1 },
      [4] = e.delegate_debug_id_str and { "str", e.delegate_debug_id_str } or nil,
      [5] = e.name and { "str", e.name } or nil } } }
  end
end

--- ETDump bytes (size-prefixed, "ED00") from {version=, run_data={{name, bundled_input_index, allocators, events}}}.
function M.etdump(doc)
  local runs = {}
  for i, r in ipairs(doc.run_data) do
    local evs, allocs = {}, {}
    for j, e in ipairs(r.events or {}) do evs[j] = event_node(e) end
    for j, a in ipairs(r.allocators or {}) do allocs[j] = M.table { [0] = { "str", a.name } } end
    runs[i] = M.table { [0] = { "str", r.name }, [1] = { "i32", r.bundled_input_index or -1 },
      [2] = #allocs > 0 and { "tables", allocs } or nil, [3] = { "tables", evs } }
  end
  return M.finish(M.table { [0] = { "u32", doc.version or 0 }, [1] = { "tables", runs } }, "ED00",
    { size_prefixed = true })
end

--- A large ETDump in the real layout, for benches: about `events` profile events, 100 per inference (33
--- portable kernels with their OPERATOR_CALL, 33 delegated events, Method::execute). -> bytes, events, runs
function M.big_etdump(events)
  local PER_RUN = 100
  local runs = { { name = "Default", events = {
    { kind = "profile", name = "Method::init", chain_index = -1, instruction_id = 0, start_time = 1000, end_time = 60000 },
    { kind = "profile", name = "Program::load_method", chain_index = -1, instruction_id = 0, start_time = 900,
      end_time = 61000 } } } }
  local OPS = { "convolution", "relu", "max_pool2d_with_indices", "addmm", "permute_copy", "add", "mul", "softmax" }
  local t = 100000
  for r = 1, math.max(1, events // PER_RUN) do
    local ev, start = {}, t
    for k = 0, 32 do
      local op = OPS[k % #OPS + 1]
      local d = 1000 + (k * 7919 + r * 104729) % 50000
      ev[#ev + 1] = { kind = "profile", name = "native_call_" .. op .. ".out", chain_index = 0, instruction_id = k,
        start_time = t + 100, end_time = t + 100 + d }
      ev[#ev + 1] = { kind = "profile", name = "OPERATOR_CALL", chain_index = 0, instruction_id = k,
        start_time = t, end_time = t + 300 + d }
      t = t + 400 + d
      ev[#ev + 1] = { kind = "profile", name = "conv #" .. k, chain_index = 0, instruction_id = 33,
        delegate_debug_id_int = k, start_time = t, end_time = t + 500 + (k * r) % 900 }
      t = t + 1500
    end
    ev[#ev + 1] = { kind = "profile", name = "Method::execute", chain_index = -1, instruction_id = 0,
      start_time = start, end_time = t }
    runs[#runs + 1] = { name = "Execute", events = ev }
    t = t + 1000
  end
  return M.etdump { version = 0, run_data = runs }, 2 + (#runs - 1) * PER_RUN, #runs
end

return M
