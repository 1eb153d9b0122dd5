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

--- Scratch size of a bare Vela stream (bytes) -> n | nil, err, code.
M.vela_scratch_size = core.vela_scratch_size

--- Decodes bytes that are certainly a .pte (no path guessing): same results as read.
M.decode = core.decode

return M
