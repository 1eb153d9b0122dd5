-- odp.parse.pte against real programs (tests/fixtures/pte) and built ones (segments, corrupt Vela streams).
local T = require("t")
local pte = require("odp.parse.pte")
local fb = require("fbuild")

local dir = T.root() .. "/tests/fixtures/pte/"

T.test("add_arduino.pte: identifier, extended header, one method, no delegates", function()
  local p = assert(pte.read(dir .. "add_arduino.pte"))
  T.eq(p.identifier, "ET12")
  T.eq(p.bytes, 1156)
  T.eq(p.extended_header, { length = 32, program_size = 1040, segment_base_offset = 1152, segment_data_size = 4,
    expected_size = 1156 })
  T.eq(#p.methods, 1)
  T.eq(p.methods[1].name, "forward")
  T.eq(p.methods[1].operators, { "aten::add.out" })
  T.eq(p.methods[1].non_const_buffer_sizes, { 0, 32 })
  T.eq(#pte.delegates(p), 0)
  T.eq(pte.scratch_size(p), nil)
end)

T.test("datamap.pte: no extended header, two operators", function()
  local p = assert(pte.read(dir .. "datamap.pte"))
  T.eq(p.extended_header, nil)
  T.eq(p.methods[1].operators, { "aten::mul.out", "aten::add.out" })
end)

T.test("mnist_ethos_u55.pte: EthosUBackend delegate, Vela scratch_size decoded by hand = 0x196e0", function()
  local p = assert(pte.read(dir .. "mnist_ethos_u55.pte"))
  local d = pte.delegates(p)
  T.eq(#d, 1)
  T.eq(d[1].backend, "EthosUBackend")
  T.eq(d[1].location, "inline")
  T.eq(d[1].bytes, 111344)
  -- xxd at 0x1b270: "scratch_size" + header (size 4) + data e0 96 01 00
  T.eq(d[1].scratch_size, 0x196e0)
  T.eq(pte.scratch_size(p), 104160)
  -- the same through the bare Vela parser on the blob (starts at byte 0x70)
  local blob = T.read(dir .. "mnist_ethos_u55.pte"):sub(0x71, 0x70 + 111344)
  T.eq(pte.vela_scratch_size(blob), 104160)
end)

T.test("truncated_600B.pte: a clear error naming both sizes", function()
  local p, err, code = pte.read(dir .. "truncated_600B.pte")
  T.eq(p, nil)
  T.eq(code, "EPROTO")
  T.match(err, "truncated %.pte: the extended header expects 1156 bytes, the file has 600")
end)

T.test("wrong identifiers and missing files", function()
  local _, err, code = pte.read(T.root() .. "/tests/fixtures/etdump/add_n1.etdump")
  T.eq(code, "EPROTO")
  T.match(err, "expected 'ET12'")
  _, err, code = pte.read(("\0"):rep(4) .. "BP08" .. ("\0"):rep(32))
  T.eq(code, "EPROTO")
  T.match(err, "bundled program")
  _, _, code = pte.read(dir .. "missing.pte")
  T.eq(code, "ENOTFOUND")
end)

local function vela(blocks)
  local out = {}
  for _, b in ipairs(blocks) do
    local name, data = b[1], b[2]
    out[#out + 1] = name .. ("\0"):rep(16 - #name) .. string.pack("<i4", b.size or #data) .. ("\0"):rep(12)
      .. data .. ("\0"):rep(-#data % 16)
  end
  return table.concat(out)
end

-- A .pte with an extended header whose delegate blob lives in a segment after the program.
local function segment_pte(blob)
  local root = fb.table {
    [0] = { "u32", 0 },
    [1] = { "tables", { fb.table { [0] = { "str", "forward" }, [7] = { "tables", {
      fb.table { [0] = { "str", "EthosUBackend" }, [1] = { "table", fb.table { [0] = { "u8", 1 }, [1] = { "u32", 0 } } } },
    } } } } },
    [4] = { "tables", { fb.table { [0] = { "u64", 0 }, [1] = { "u64", #blob } } } },
  }
  -- two passes: the header holds the program size, which does not depend on the header's values
  local function build(program_size, base)
    return fb.finish(root, "ET12", { header = "eh00" .. string.pack("<I4I8I8I8", 32, program_size, base, #blob) })
  end
  local prog = build(0, 0)
  local base = #prog + (-#prog % 16)
  prog = build(#prog, base)
  return prog .. ("\0"):rep(base - #prog) .. blob
end

T.test("delegate data in a segment (extended header), and a truncated segment", function()
  local blob = vela { { "vela_bin_stream", "" }, { "cmd_data", ("\7"):rep(20) },
    { "scratch_size", string.pack("<I4", 123456) }, { "vela_end_stream", "" } }
  local bytes = segment_pte(blob)
  local p = assert(pte.read(bytes))
  local d = pte.delegates(p)[1]
  T.eq({ d.backend, d.location, d.index, d.bytes, d.scratch_size }, { "EthosUBackend", "segment", 0, #blob, 123456 })
  local _, err, code = pte.read(bytes:sub(1, #bytes - 10))
  T.eq(code, "EPROTO")
  T.match(err, "truncated")
end)

T.test("corrupt Vela streams: reported on the delegate, not a crash", function()
  local cases = {
    { vela { { "vela_bin_stream", "" }, { "scratch_size", "1234" } }, "without vela_end_stream" },
    { vela { { "vela_bin_stream", "" }, { "cmd_data", "", size = 1 << 30 } }, "past the stream's end" },
    { vela { { "vela_bin_stream", "" }, { "vela_end_stream", "" } }, "no scratch_size" },
    { vela { { "vela_bin_stream", "" }, { "scratch_size", "12" }, { "vela_end_stream", "" } }, "expected 4" },
  }
  for i, c in ipairs(cases) do
    local p = assert(pte.read(segment_pte(c[1])))
    local d = pte.delegates(p)[1]
    T.eq(d.scratch_size, nil, "case " .. i)
    T.match(d.vela_error, c[2], "case " .. i)
    local s, err = pte.vela_scratch_size(c[1])
    T.eq(s, nil)
    T.match(err, c[2])
  end
end)

T.done()

-- The method signature: the real runner is the oracle for the fixtures (it takes exactly 12 input bytes for
-- add_arduino.pte, "input size (8) and tensor size (12) mismatch!", and prints `tensor(sizes=[3], ...)`); the
-- MNIST model's input is the 28x28 image its Arm example feeds, its output 10 logits.
T.test("signature: add_arduino float32 [3] -> float32 [3]; mnist [1,1,28,28] -> [1,10]", function()
  local s = assert(pte.signature(assert(pte.read(dir .. "add_arduino.pte"))))
  T.eq(s.method, "forward")
  T.eq(#s.inputs, 1)
  T.eq(s.inputs[1], { index = 0, value = 1, kind = "tensor", dtype = "float32", scalar_type = 6, sizes = { 3 },
    dynamism = "static", elem_bytes = 4, numel = 3, bytes = 12 })
  T.eq(s.outputs[1].bytes, 12)
  T.eq(s.outputs[1].value, 2)
  s = assert(pte.signature(assert(pte.read(dir .. "mnist_ethos_u55.pte")), "forward"))
  T.eq(s.inputs[1].sizes, { 1, 1, 28, 28 })
  T.eq(s.inputs[1].bytes, 28 * 28 * 4)
  T.eq(s.outputs[1].sizes, { 1, 10 })
  local _, err, code = pte.signature(assert(pte.read(dir .. "add_arduino.pte")), "backward")
  T.eq(code, "ENOTFOUND")
  T.match(err, "no method 'backward' in the program %(methods: forward%)")
end)

T.test("signature of built programs: dtypes, dynamic shapes, non-tensor values", function()
  local bytes = fb.pte { inputs = { { scalar_type = 1, sizes = { 2, 5 } }, { scalar_type = 4, sizes = {} },
    { scalar_type = 11, sizes = { 7 }, dynamism = 1 }, { kind = 2 } },
    outputs = { { scalar_type = 5, sizes = { 1, 1000 } }, { scalar_type = 99, sizes = { 4 } } } }
  local s = assert(pte.signature(assert(pte.read(bytes))))
  T.eq(#s.inputs, 4)
  T.eq({ s.inputs[1].dtype, s.inputs[1].bytes }, { "int8", 10 })
  T.eq({ s.inputs[2].dtype, s.inputs[2].numel, s.inputs[2].bytes }, { "int64", 1, 8 }) -- a 0-dim tensor
  T.eq({ s.inputs[3].dtype, s.inputs[3].dynamism, s.inputs[3].numel, s.inputs[3].bytes }, { "bool", "bound", 7, nil })
  T.eq(s.inputs[4].kind, "int")
  T.eq(s.inputs[4].bytes, nil)
  T.eq({ s.outputs[1].dtype, s.outputs[1].bytes }, { "float16", 2000 })
  T.eq({ s.outputs[2].dtype, s.outputs[2].scalar_type, s.outputs[2].bytes }, { nil, 99, nil })
  -- huge shapes do not wrap around
  s = assert(pte.signature(assert(pte.read(fb.pte { inputs = { { sizes = { 0x7fffffff, 0x7fffffff, 0x7fffffff } } } }))))
  T.eq(s.inputs[1].numel, nil)
  T.eq(s.inputs[1].bytes, nil)
end)

T.test("signature: corrupt indices, negative sizes and too many dimensions are errors", function()
  local _, err, code = pte.read(fb.pte { inputs = { { value = 5 } } })
  T.eq(code, "EPROTO")
  T.match(err, "method inputs 0 is value 5 of 0")
  _, err = pte.read(fb.pte { outputs = { { sizes = { 2, -1 } } } })
  T.match(err, "method outputs 0 has a negative size %-1")
  local dims = {}
  for i = 1, 17 do dims[i] = 1 end
  _, err = pte.read(fb.pte { inputs = { { sizes = dims } } })
  T.match(err, "has 17 dimensions %(odp reads at most 16%)")
end)
