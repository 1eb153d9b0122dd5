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

-- The ETDump names of the mlp model's kernel calls, in instruction order.
local MLP_OPS = { "native_call_mm.out", "native_call_relu.out", "native_call_add.out", "native_call_mm.out" }

T.test("flatc rebuilds mlp.pte byte for byte from the generator and ExecuTorch's schema", function()
  local built = assert(pb.build("mlp", tmp))
  local got, want = T.read(built), T.read(dir .. "mlp.pte")
  T.eq(#got, #want, "size")
  T.ok(got == want, "bytes differ from tests/fixtures/pte/mlp.pte: rebuild it (tests/fixtures/README.md)")
  T.eq(T.read(tmp .. "/mlp.json"), T.read(dir .. "mlp.json"), "flatc's input, committed beside it")
end)

T.test("mlp.pte as odp reads it: ET12, three operators, the planned buffer the generator laid out", function()
  local L = pb.layout("mlp")
  -- the layout by hand: 8 float32 tensors, 4 of 1M elements (4 MiB) and 4 of 8K (32 KiB), each 64-aligned
  T.eq(L.planned, 4 * 4194304 + 4 * 32768)
  local p = assert(pte.read(dir .. "mlp.pte"))
  T.eq(p.identifier, "ET12")
  T.eq(p.extended_header, nil)
  T.eq(#p.methods, 1)
  T.eq(p.methods[1].name, "forward")
  T.eq(p.methods[1].operators, { "aten::mm.out", "aten::relu.out", "aten::add.out" })
  T.eq(p.methods[1].non_const_buffer_sizes, { 0, L.planned })
  T.eq(#pte.delegates(p), 0)
  local r = proc.run { odp, "inspect", dir .. "mlp.pte", timeout = 60 }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "method forward: 3 operators %(aten::mm%.out, aten::relu%.out, aten::add%.out%)")
  T.match(r.stdout, "planned buffer 1: " .. L.planned .. " B")
end)

-- numpy (Debian python3-numpy) writes the inputs from a fixed seed, reads them back from the files the runner
-- reads, and writes the expected output: y = (relu(x @ w1) + b) @ w2.
local ORACLE = [=[
import sys
import numpy as np
d = sys.argv[1]
shapes = {"x": (1024, 8), "w1": (8, 1024), "b": (1024, 1024), "w2": (1024, 8)}
rng = np.random.default_rng(29)
for n, s in shapes.items():
    rng.standard_normal(s).astype(np.float32).tofile(f"{d}/{n}.bin")
t = {n: np.fromfile(f"{d}/{n}.bin", dtype=np.float32).reshape(s) for n, s in shapes.items()}
y = (np.maximum(t["x"] @ t["w1"], 0) + t["b"]) @ t["w2"]
y.astype(np.float32).tofile(f"{d}/expected.bin")
]=]
local oracle = proc.run { "/usr/bin/python3", "-c", ORACLE, tmp, timeout = 120 }
local INPUTS = ("%s/x.bin,%s/w1.bin,%s/b.bin,%s/w2.bin"):format(tmp, tmp, tmp, tmp)

T.test("the oracle ran (Debian python3-numpy)", function() T.ok(oracle.ok, oracle.stderr) end)

-- The largest |got - want| over the float32 output files, and the largest |want|.
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

local function run_model(argv, tag)
  local out, dump = tmp .. "/" .. tag, tmp .. "/" .. tag .. ".etdump"
  for _, a in ipairs { "--model_path", dir .. "mlp.pte", "--inputs", INPUTS, "--output_file", out,
    "--etdump_path", dump, "--num_executions", "3", "--print_output", "none" } do argv[#argv + 1] = a end
  argv.timeout = 300
  local r = proc.run(argv)
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout .. r.stderr, "Model executed successfully 3 time%(s%)")
  return out .. "-0.bin", dump
end

-- float32 sums of 1024 products: numpy's order and the kernel's differ in the last bits at most; a wrong or
-- missing op (no relu, b not added) moves outputs by whole units
local function check_output(out)
  local diff, scale = compare(out, tmp .. "/expected.bin")
  T.ok(scale > 10, "the expected output is not trivially small")
  T.ok(diff <= 1e-5 * scale, ("max |runner - numpy| = %g (scale %g)"):format(diff, scale))
end

T.with_real_runner("the real runner: mlp.pte's output is numpy's; every op in its ETDump, each >= 0.1 ms",
  function(runner)
    T.ok(oracle.ok, "no oracle")
    local out, dump = run_model({ runner }, "x86_64")
    check_output(out)
    local rows = etdump.ops(assert(etdump.read(dump)))
    local ops = {}
    for _, row in ipairs(rows) do
      if row.block == "Execute" and row.name:match("^native_call_") then
        ops[#ops + 1] = row.name
        T.eq(row.n, 3, row.name .. ": one sample a run")
        T.ok(row.min >= 0.1, ("%s took %g ms, under 0.1 ms"):format(row.name, row.min))
      end
    end
    T.eq(ops, MLP_OPS)
  end)

T.with_real_runner("the aarch64 runner under qemu-user: mlp.pte's output agrees with numpy, every op in its ETDump",
  function(runner)
    T.ok(oracle.ok, "no oracle")
    local out, dump = run_model({ "qemu-aarch64-static", runner }, "aarch64")
    check_output(out)
    local ops = {}
    for _, row in ipairs(etdump.ops(assert(etdump.read(dump)))) do
      if row.block == "Execute" and row.name:match("^native_call_") then ops[#ops + 1] = row.name end
    end
    T.eq(ops, MLP_OPS)
  end, "aarch64")

T.done()
