--- Intermediate outputs, op by op: an ETDump's debug events (ExecuTorch logs an operator's output tensor as
-- one: its dtype and shape in the ETDump, its bytes in the debug buffer the runtime wrote beside it, at the
-- tensor's offset) compared with a reference ETDump of the same model, to name the first operator whose output
-- falls below a cosine (docs/outputs.md, "Op by op").
--   local im = require("odp.results.intermediates")
--   local got = im.collect(etdump.read("run.etdump"), sys.read_file("run.bin"))
--   local ref = im.collect(etdump.read("ref.etdump"), sys.read_file("ref.bin"))
--   local res = im.compare(ref, got, { min_cosine = 0.99 })   -- res.rows, res.first_below
local numcmp = require("odp.numcmp")

local M = {}

-- ExecuTorch's ScalarType numbers -> odp.numcmp's dtype names (the ones it compares)
local DTYPE = { [0] = "uint8", [1] = "int8", [2] = "int16", [3] = "int32", [4] = "int64", [5] = "float16",
  [6] = "float32", [7] = "float64", [11] = "bool", [12] = "int8", [13] = "uint8", [14] = "int32", [15] = "bfloat16" }

-- A tensor's bytes in the debug buffer -> data, dtype, numel | nil, why. Device output: every size and offset
-- bounded.
local function slice(t, buffer)
  local dtype = DTYPE[t.scalar_type or -1]
  if not dtype then return nil, ("scalar type %s is not one odp compares"):format(tostring(t.scalar_type)) end
  local n = 1
  for _, d in ipairs(t.sizes or {}) do
    if math.type(d) ~= "integer" or d < 0 then return nil, "a negative size" end
    if d > 0 and n > (1 << 40) // d then return nil, "a shape larger than any buffer" end
    n = n * d
  end
  local bytes = n * numcmp.element_bytes(dtype)
  local off = t.offset
  if math.type(off) ~= "integer" then return nil, "no offset into the debug buffer" end
  if not buffer then return nil, "no debug buffer" end
  if off < 0 or off > #buffer or bytes > #buffer - off then
    return nil, ("%d bytes at offset %d are past the debug buffer's %d bytes"):format(bytes, off, #buffer)
  end
  return buffer:sub(off + 1, off + bytes), dtype, n
end

--- The intermediate outputs of a decoded ETDump (odp.parse.etdump.read) whose debug buffer is `buffer` (bytes,
-- or nil): the debug events of the first run that has any, in order, each {key, name, chain, instruction_id,
-- delegate, index (in a tensor list), dtype, sizes, numel, data | error, output (the method's output)}. key
-- is what identifies the same operator output in another ETDump of the model: chain, instruction, delegate
-- debug id, the list index and how many times that key came before.
function M.collect(doc, buffer)
  for _, run in ipairs(doc.run_data or {}) do
    local out, count = {}, {}
    for _, e in ipairs(run.events or {}) do
      local v = e.kind == "debug" and e.debug_entry
      local list = v and (v.tensor and { v.tensor } or v.tensor_list)
      for li, t in ipairs(list or {}) do
        local delegate = (e.delegate_debug_id_int and e.delegate_debug_id_int ~= -1) and e.delegate_debug_id_int
          or e.delegate_debug_id_str
        local base = ("%s:%s:%s:%d"):format(tostring(e.chain_index), tostring(e.instruction_id), tostring(delegate), li)
        count[base] = (count[base] or 0) + 1
        local row = { key = base .. "#" .. count[base], chain = e.chain_index, instruction_id = e.instruction_id,
          delegate = delegate, index = li - 1, output = v.output == true, sizes = t.sizes,
          name = e.name or (delegate and ("delegate " .. tostring(delegate))) or
            ("instruction %s"):format(tostring(e.instruction_id)) }
        local data, dtype_or_why, n = slice(t, buffer)
        if data then row.data, row.dtype, row.numel = data, dtype_or_why, n else row.error = dtype_or_why end
        out[#out + 1] = row
      end
    end
    if #out > 0 then return out end
  end
  return {}
end

local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

--- Compares each intermediate output of `got` with the same one of `ref` (by key) -> {rows = {{key, name,
-- instruction_id, delegate, index, dtype, sizes, n, equal, nonfinite, max_abs_err?, mean_abs_err, cosine,
-- snr_db?, error?}}, first_below = row | nil, compared = n}. first_below (with opts.min_cosine): the first
-- operator output, in execution order, whose cosine is below it or that has non-finite mismatches.
function M.compare(ref, got, opts)
  opts = opts or {}
  local by_key = {}
  for _, r in ipairs(ref) do by_key[r.key] = r end
  local rows, first, compared = {}, nil, 0
  for _, g in ipairs(got) do
    local row = { key = g.key, name = g.name, instruction_id = g.instruction_id, delegate = g.delegate,
      index = g.index, dtype = g.dtype, sizes = g.sizes, output = g.output }
    local r = by_key[g.key]
    if g.error then
      row.error = g.error
    elseif not r then
      row.error = "not in the reference ETDump"
    elseif r.error then
      row.error = "the reference's: " .. r.error
    elseif r.dtype ~= g.dtype or #r.data ~= #g.data then
      row.error = ("the reference's is %s of %d elements, this one %s of %d"):format(r.dtype, r.numel, g.dtype, g.numel)
    else
      local m = assert(numcmp.compare(r.data, g.data, g.dtype))
      compared = compared + 1
      row.n, row.equal, row.nonfinite, row.mean_abs_err, row.cosine = m.n, m.equal, m.nonfinite, m.mean_abs_err, m.cosine
      if finite(m.max_abs_err) then row.max_abs_err = m.max_abs_err end
      if finite(m.snr_db) then row.snr_db = m.snr_db end
      if not first and opts.min_cosine and (m.nonfinite > 0 or m.cosine < opts.min_cosine) then first = row end
    end
    rows[#rows + 1] = row
  end
  return { rows = rows, first_below = first, compared = compared }
end

return M
