-- The multi-operator test models (tests/lib/ptebuild.lua, committed in tests/fixtures/pte/): flatc rebuilds
-- them byte for byte from ExecuTorch's schema; odp reads back the ops and planned buffer they declare; the
-- real executor_runner (x86_64, and the aarch64 build under qemu-user) runs them on known inputs and writes
-- what numpy computes from the same input files, with every op in its ETDump taking >= 0.1 ms.
local T = require("t")
local pb = require("ptebuild")
local pte = require("odp.parse.pte")
local etdump = require("odp.parse.etdump")
local proc = require("odp.proc")

local root = T.root()
local odp = os.getenv("ODP") or ((os.getenv("ODP_BUILD_DIR") or (root .. "/build")) .. "/odp")
local dir = root .. "/tests/fixtures/pte/"
local tmp = T.tmpdir()

-- Each model: its operators as odp's pte parser lists them (distinct, first use) and its kernel calls as the
-- ETDump names them (instruction order).
local MODELS = {
  mlp = {
    operators = { "aten::mm.out", "aten::relu.out", "aten::add.out" },
    calls = { "native_call_mm.out", "native_call_relu.out", "native_call_add.out", "native_call_mm.out" },
  },
  convnet = {
    operators = { "aten::convolution.out", "aten::relu.out", "aten::avg_pool2d.out" },
    calls = { "native_call_convolution.out", "native_call_relu.out", "native_call_avg_pool2d.out",
      "native_call_convolution.out" },
  },
}
local NAMES = { "mlp", "convnet" }

T.test("the generator builds exactly the models this suite checks", function()
  local names = {}
  for name in pairs(pb.models) do names[#names + 1] = name end
  table.sort(names)
  T.eq(names, { "convnet", "mlp" })
end)

for _, name in ipairs(NAMES) do
  T.test(("flatc rebuilds %s.pte byte for byte from the generator and ExecuTorch's schema"):format(name), function()
    local built = assert(pb.build(name, tmp))
    local got, want = T.read(built), T.read(dir .. name .. ".pte")
    T.eq(#got, #want, "size")
    T.ok(got == want, ("bytes differ from tests/fixtures/pte/%s.pte: rebuild it (tests/fixtures/README.md)")
      :format(name))
    T.eq(T.read(tmp .. "/" .. name .. ".json"), T.read(dir .. name .. ".json"), "flatc's input, committed beside it")
  end)
end

T.test("the planned buffers by hand: float32 tensors, each 64-byte aligned, none reused", function()
  -- mlp: x, w1, w2, y 8K elements (32 KiB); b, h, r, a 1M (4 MiB)
  T.eq(pb.layout("mlp").planned, 4 * 32768 + 4 * 4194304)
  -- convnet: x 102400 el., w1 192, b1 48 (192 B), w2 864, b2 2 (8 B -> 64), c and r 1228800, p 307200, y 12800
  T.eq(pb.layout("convnet").planned, 409600 + 768 + 192 + 3456 + 64 + 2 * 4915200 + 1228800 + 51200)
end)

for _, name in ipairs(NAMES) do
  T.test(("%s.pte as odp reads it: ET12, its operators, the planned buffer the generator laid out"):format(name),
    function()
      local planned = pb.layout(name).planned
      local p = assert(pte.read(dir .. name .. ".pte"))
      T.eq(p.identifier, "ET12")
      T.eq(p.extended_header, nil)
      T.eq(#p.methods, 1)
      T.eq(p.methods[1].name, "forward")
      T.eq(p.methods[1].operators, MODELS[name].operators)
      T.eq(p.methods[1].non_const_buffer_sizes, { 0, planned })
      T.eq(#pte.delegates(p), 0)
      local r = proc.run { odp, "inspect", dir .. name .. ".pte", timeout = 60 }
      T.eq(r.status, 0, r.stderr)
      local ops = table.concat(MODELS[name].operators, ", ")
      T.ok(r.stdout:find(("method forward: 3 operators (%s)"):format(ops), 1, true), r.stdout)
      T.ok(r.stdout:find(("planned buffer 1: %d B"):format(planned), 1, true), r.stdout)
    end)
end

-- numpy (Debian python3-numpy) writes each model's inputs from a fixed seed, reads them back from the files
-- the runner reads, and writes the expected output, computed in float64 (convolution as a sum over the
-- kernel's taps of shifted inputs, average pooling as a reshaped mean: no ML framework involved).
local ORACLE = [=[
import sys
import numpy as np
d = sys.argv[1]
def inputs(prefix, seed, shapes):
    rng = np.random.default_rng(seed)
    for n, s in shapes.items():
        rng.standard_normal(s).astype(np.float32).tofile(f"{d}/{prefix}{n}.bin")
    return {n: np.fromfile(f"{d}/{prefix}{n}.bin", dtype=np.float32).reshape(s).astype(np.float64)
            for n, s in shapes.items()}
def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, o, ho, wo))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + ho, j:j + wo], w[:, :, i, j])
    return y + b.reshape(1, o, 1, 1)
t = inputs("mlp_", 29, {"x": (1024, 8), "w1": (8, 1024), "b": (1024, 1024), "w2": (1024, 8)})
y = (np.maximum(t["x"] @ t["w1"], 0) + t["b"]) @ t["w2"]
y.astype(np.float32).tofile(f"{d}/mlp_expected.bin")
t = inputs("convnet_", 30, {"x": (1, 4, 160, 160), "w1": (48, 4, 1, 1), "b1": (48,), "w2": (2, 48, 3, 3),
                            "b2": (2,)})
r = np.maximum(conv2d(t["x"], t["w1"], t["b1"], 0), 0)
p = r.reshape(1, 48, 80, 2, 80, 2).mean(axis=(3, 5))
y = conv2d(p, t["w2"], t["b2"], 1)
y.astype(np.float32).tofile(f"{d}/convnet_expected.bin")
]=]
local oracle = proc.run { "/usr/bin/python3", "-c", ORACLE, tmp, timeout = 120 }
-- the runner's --inputs, in the program's input order (tests/lib/ptebuild.lua)
local function inputs(name)
  local files = {}
  for i, v in ipairs(pb.models[name].inputs) do files[i] = ("%s/%s_%s.bin"):format(tmp, name, v) end
  return table.concat(files, ",")
end

T.test("the oracle ran (Debian python3-numpy)", function() T.ok(oracle.ok, oracle.stderr) end)

-- The largest |got - want| over two float32 files, and the largest |want|.
local function compare(got_path, want_path)
  local got, want = T.read(got_path), T.read(want_path)
  T.eq(#got, #want, "output bytes")
  local diff, scale = 0, 0
  for i = 1, #want, 4 do
    local g, w = string.unpack("<f", got, i), string.unpack("<f", want, i)
    diff, scale = math.max(diff, math.abs(g - w)), math.max(scale, math.abs(w))
  end
  return diff, scale
end

-- Runs a model 3 times; checks its output against numpy's and returns its ETDump's kernel-call rows.
-- float32 sums of up to 1024 products: numpy's float64 and the kernels' float32 differ in the last bits; a
-- wrong or missing op (no relu, no bias, another padding) moves outputs by whole units.
local function run_model(argv, name, tag)
  local out, dump = ("%s/%s_%s"):format(tmp, name, tag), ("%s/%s_%s.etdump"):format(tmp, name, tag)
  for _, a in ipairs { "--model_path", dir .. name .. ".pte", "--inputs", inputs(name), "--output_file", out,
    "--etdump_path", dump, "--num_executions", "3", "--print_output", "none" } do argv[#argv + 1] = a end
  argv.timeout = 300
  local r = proc.run(argv)
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout .. r.stderr, "Model executed successfully 3 time%(s%)")
  local diff, scale = compare(out .. "-0.bin", ("%s/%s_expected.bin"):format(tmp, name))
  T.ok(scale > 10, "the expected output is not trivially small")
  T.ok(diff <= 1e-5 * scale, ("max |runner - numpy| = %g (scale %g)"):format(diff, scale))
  local calls, rows = {}, {}
  for _, row in ipairs(etdump.ops(assert(etdump.read(dump)))) do
    if row.block == "Execute" and row.name:match("^native_call_") then
      calls[#calls + 1] = row.name
      rows[#rows + 1] = row
      T.eq(row.n, 3, row.name .. ": one sample a run")
    end
  end
  T.eq(calls, MODELS[name].calls)
  return rows
end

-- Each op's least time on this machine's x86_64 runner: every op of both models takes 0.1 ms or more (the conv
-- net's relu, the cheapest, runs on 48 x 160 x 160 elements: 0.13 ms quiet, 0.2 ms under load).
local FLOOR_MS = { mlp = 0.1, convnet = 0.1 }
for _, name in ipairs(NAMES) do
  T.with_real_runner(("the real runner: %s.pte's output is numpy's; every op in its ETDump, each >= %g ms")
    :format(name, FLOOR_MS[name]), function(runner)
      T.ok(oracle.ok, "no oracle")
      for _, row in ipairs(run_model({ runner }, name, "x86_64")) do
        T.ok(row.min >= FLOOR_MS[name], ("%s took %g ms, under %g ms"):format(row.name, row.min, FLOOR_MS[name]))
      end
    end)
  T.with_real_runner(("the aarch64 runner under qemu-user: %s.pte's output is numpy's, every op in its ETDump")
    :format(name), function(runner)
      T.ok(oracle.ok, "no oracle")
      run_model({ "qemu-aarch64-static", runner }, name, "aarch64")
    end, "aarch64")
end

T.done()
