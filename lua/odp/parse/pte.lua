--- .pte: an ExecuTorch program, read without Python (C core src/pte, bounds-checked).
--   local pte = require("odp.parse.pte")
--   local p = assert(pte.read("model.pte"))
--   print(p.identifier, #p.methods, p.methods[1].name)
--   for _, d in ipairs(pte.delegates(p)) do print(d.backend, d.scratch_size) end
local core = require("odp.ptecore")
local sys = require("odp.sys")

local M = {}

--- Reads a .pte from a path or its bytes. Returns {identifier = "ET12", version, bytes, segments,
-- extended_header = {length, program_size, segment_base_offset, segment_data_size, expected_size} | nil,
-- methods = {{name, operators = {"aten::add.out", ...}, non_const_buffer_sizes = {...},
-- inputs = {io...}, outputs = {io...} (io = {kind = "tensor"|"int"|..., value, dtype?, scalar_type?, sizes?,
-- dynamism = "static"|"bound"|"unbound"}: the method's signature, see M.signature),
-- delegates = {{backend, location = "inline"|"segment", index, bytes, scratch_size?, vela_error?}}}}}
-- or nil, "EPROTO: ..." (not a .pte, truncated, corrupt) | "ENOTFOUND: ...", code.
---@param path_or_bytes string
function M.read(path_or_bytes)
  local bytes = path_or_bytes
  -- bytes: they carry the identifier, or a NUL no path can hold
  if not (#bytes >= 8 and (bytes:sub(5, 8) == "ET12" or bytes:find("\0", 1, true))) then
    local err, code
    bytes, err, code = sys.read_file(path_or_bytes)
    if not bytes then return nil, err, code end
  end
  return core.decode(bytes)
end

--- Every delegate of every method, flattened: {method, backend, location, index, bytes, scratch_size?}.
function M.delegates(p)
  local out = {}
  for _, m in ipairs(p.methods or {}) do
    for _, d in ipairs(m.delegates or {}) do
      local row = { method = m.name }
      for k, v in pairs(d) do row[k] = v end
      out[#out + 1] = row
    end
  end
  return out
end

--- The largest Vela scratch size over the program's Ethos-U delegates (what ACTIVATION_BUF_SZ must hold), or nil.
function M.scratch_size(p)
  local best
  for _, d in ipairs(M.delegates(p)) do
    if d.scratch_size and (not best or d.scratch_size > best) then best = d.scratch_size end
  end
  return best
end

--- Bytes per element of each dtype the reader names (odp.ptecore; complex* are two floats).
M.ELEMENT_BYTES = { uint8 = 1, int8 = 1, int16 = 2, int32 = 4, int64 = 8, float16 = 2, float32 = 4, float64 = 8,
  complex32 = 4, complex64 = 8, complex128 = 16, bool = 1, qint8 = 1, quint8 = 1, qint32 = 4, bfloat16 = 2 }

--- A method's signature: its inputs and outputs with what a file of their bytes holds. `method` is a name
-- (nil: the first method, as executor_runner picks). -> {method, inputs = {io...}, outputs = {io...}} | nil,
-- "ENOTFOUND: ...". An io is the reader's {kind, dtype?, scalar_type?, sizes?, dynamism?, value} plus, for a
-- tensor whose dtype is known, elem_bytes and numel, and bytes = their product when its shape is fixed
-- (static; a dynamic tensor's sizes are an upper bound, its bytes are not known before it runs).
function M.signature(p, method)
  local m
  for _, x in ipairs(p.methods or {}) do
    if method == nil or x.name == method then m = x break end
  end
  if not m then
    local names = {}
    for _, x in ipairs(p.methods or {}) do names[#names + 1] = x.name end
    return nil, ("ENOTFOUND: no method %s in the program (methods: %s)"):format(method and ("'" .. method .. "'")
      or "at all", #names > 0 and table.concat(names, ", ") or "none"), "ENOTFOUND"
  end
  local function ios(list)
    local out = {}
    for i, io in ipairs(list or {}) do
      local e = {}
      for k, v in pairs(io) do e[k] = v end
      e.index = i - 1
      if e.kind == "tensor" and M.ELEMENT_BYTES[e.dtype or ""] then
        e.elem_bytes = M.ELEMENT_BYTES[e.dtype]
        local n = 1
        for _, d in ipairs(e.sizes) do
          -- bounded: 16 int32 sizes multiply past any integer; no tensor a board holds has 2^48 elements
          if d > 0 and n > (1 << 48) // d then n = nil break end
          n = n * d
        end
        e.numel = n
        if n and e.dynamism == "static" then e.bytes = n * e.elem_bytes end
      end
      out[i] = e
    end
    return out
  end
  return { method = m.name, inputs = ios(m.inputs), outputs = ios(m.outputs) }
end

--- A shape as ExecuTorch prints it: "[1, 10]".
function M.shape(sizes) return "[" .. table.concat(sizes or {}, ", ") .. "]" end

--- Scratch size of a bare Vela stream (bytes) -> n | nil, err, code.
M.vela_scratch_size = core.vela_scratch_size

--- Decodes bytes that are certainly a .pte (no path guessing): same results as read.
M.decode = core.decode

return M
