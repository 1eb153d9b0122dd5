--- Multi-operator ExecuTorch programs for tests, built with flatc from ExecuTorch's own schema
-- (tests/fixtures/pte/schema/program.fbs at the runners' commit) so that the real executor_runner loads them:
-- portable out-variant kernels only, every activation memory-planned, no constants (weights are inputs, so
-- the files stay a few KB and the test feeds known values).
--   local pb = require("ptebuild")
--   pb.json("mlp")                  -- the flatc JSON of a model (deterministic text)
--   pb.build("mlp", dir)            -- writes dir/mlp.pte with flatc -b; returns its path, or nil, err
--   build/odp run tests/lib/ptebuild.lua DIR    -- rebuilds every model into DIR (tests/fixtures/pte/ for the
--                                                  committed copies; tests/lua/ptebuild_test.lua compares bytes)
-- Each model: tensors {name, sizes} (float32, planned in that order), scalars {name, kind, value}, inputs and
-- outputs (value names), ops {name, overload, args = value names, out = value name}; pb.layout(name) gives
-- the value indices, offsets and the planned buffer size (non_const_buffer_sizes[2]).
local json = require("odp.core.json")

local M = {}

local ALIGN = 64 -- ExecuTorch's memory planning aligns tensors to 16; 64 keeps each on its own cache line

-- mlp: y = (relu(x @ w1) + b) @ w2. Sizes chosen so that each of the four portable kernels takes >= 0.1 ms on
-- an x86_64 host (measured: tests/fixtures/README.md): relu and add run on 1M elements (~0.2 and ~0.6 ms),
-- each mm does 8M multiply-adds (~3-5 ms; the portable mm is a plain loop).
M.models = {
  mlp = {
    tensors = {
      { "x", { 1024, 8 } }, { "w1", { 8, 1024 } }, { "b", { 1024, 1024 } }, { "w2", { 1024, 8 } },
      { "h", { 1024, 1024 } }, { "r", { 1024, 1024 } }, { "a", { 1024, 1024 } }, { "y", { 1024, 8 } },
    },
    scalars = { { "alpha", "Int", 1 } },
    inputs = { "x", "w1", "b", "w2" },
    outputs = { "y" },
    ops = {
      { "aten::mm", "out", args = { "x", "w1" }, out = "h" },
      { "aten::relu", "out", args = { "h" }, out = "r" },
      { "aten::add", "out", args = { "r", "b", "alpha" }, out = "a" },
      { "aten::mm", "out", args = { "a", "w2" }, out = "y" },
    },
  },
  -- convnet: y = conv3x3(avg_pool2d(relu(conv1x1(x, w1, b1)), 2), w2, b2, padding 1), NCHW. relu runs on
  -- 1.2M elements (48 channels: 32 gave 0.09 ms on a quiet x86_64 host, under the 0.1 ms every op must take);
  -- the 1x1 convolution keeps the first layer's cost near the others'.
  convnet = {
    tensors = {
      { "x", { 1, 4, 160, 160 } }, { "w1", { 48, 4, 1, 1 } }, { "b1", { 48 } }, { "w2", { 2, 48, 3, 3 } },
      { "b2", { 2 } },
      { "c", { 1, 48, 160, 160 } }, { "r", { 1, 48, 160, 160 } }, { "p", { 1, 48, 80, 80 } },
      { "y", { 1, 2, 80, 80 } },
    },
    scalars = {
      { "ones", "IntList", { 1, 1 } }, { "zeros", "IntList", { 0, 0 } }, { "twos", "IntList", { 2, 2 } },
      { "false", "Bool", false }, { "true", "Bool", true }, { "groups", "Int", 1 }, { "none", "Null" },
    },
    inputs = { "x", "w1", "b1", "w2", "b2" },
    outputs = { "y" },
    ops = {
      -- convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
      { "aten::convolution", "out", out = "c",
        args = { "x", "w1", "b1", "ones", "zeros", "ones", "false", "zeros", "groups" } },
      { "aten::relu", "out", args = { "c" }, out = "r" },
      -- avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
      { "aten::avg_pool2d", "out", args = { "r", "twos", "twos", "zeros", "false", "true", "none" }, out = "p" },
      { "aten::convolution", "out", out = "y",
        args = { "p", "w2", "b2", "ones", "ones", "ones", "false", "zeros", "groups" } },
    },
  },
}

local function numel(sizes)
  local n = 1
  for _, s in ipairs(sizes) do n = n * s end
  return n
end

local function list(t) return json.array(t) end

--- Value indices, planned offsets (memory_id 1, each tensor its own ALIGN-aligned region, inputs first so
-- that the runner's copies of them survive every iteration) and the planned buffer size of a model.
-- Non-tensor values follow the tensors: Int, Bool, Null, and IntList, whose items are the indices of Int
-- values emitted just before it (as ExecuTorch's emitter lays out an int[] argument).
function M.layout(name)
  local m = assert(M.models[name], "no such model: " .. tostring(name))
  local index, offset, pos = {}, {}, 0
  for i, t in ipairs(m.tensors) do
    index[t[1]] = i - 1
    offset[t[1]] = pos
    pos = pos + ((numel(t[2]) * 4 + ALIGN - 1) // ALIGN) * ALIGN
  end
  local scalars = {}
  local function add(val_type, val)
    scalars[#scalars + 1] = { val_type = val_type, val = val }
    return #m.tensors + #scalars - 1
  end
  for _, s in ipairs(m.scalars) do
    local vname, kind, v = s[1], s[2], s[3]
    if kind == "Int" then index[vname] = add("Int", { int_val = v })
    elseif kind == "Bool" then index[vname] = add("Bool", { bool_val = v })
    elseif kind == "Null" then index[vname] = add("Null", {})
    elseif kind == "IntList" then
      local items = {}
      for i, x in ipairs(v) do items[i] = add("Int", { int_val = x }) end
      index[vname] = add("IntList", { items = list(items) })
    else error("unknown value kind " .. tostring(kind)) end
  end
  return { index = index, offset = offset, planned = pos, model = m, scalars = scalars }
end

--- The flatc JSON (Program, strict) of a model.
function M.json(name)
  local L = M.layout(name)
  local m, idx = L.model, L.index
  local values = {}
  for _, t in ipairs(m.tensors) do
    local order = {}
    for d = 1, #t[2] do order[d] = d - 1 end
    values[#values + 1] = { val_type = "Tensor", val = {
      scalar_type = "FLOAT", sizes = list(t[2]), dim_order = list(order),
      allocation_info = { memory_id = 1, memory_offset_low = L.offset[t[1]] } } }
  end
  for _, v in ipairs(L.scalars) do values[#values + 1] = v end
  local function ids(names)
    local out = {}
    for i, n in ipairs(names) do out[i] = assert(idx[n], "no value " .. n) end
    return list(out)
  end
  -- one operator entry per distinct (name, overload), in first-use order; a kernel call's args are the
  -- schema's arguments, then out, then the returned value (out again), as ExecuTorch's emitter writes them
  local operators, op_index, instructions = {}, {}, {}
  for _, op in ipairs(m.ops) do
    local key = op[1] .. "." .. op[2]
    if not op_index[key] then
      operators[#operators + 1] = { name = op[1], overload = op[2] }
      op_index[key] = #operators - 1
    end
    local args = {}
    for _, a in ipairs(op.args) do args[#args + 1] = a end
    args[#args + 1] = op.out
    args[#args + 1] = op.out
    instructions[#instructions + 1] = { instr_args_type = "KernelCall",
      instr_args = { op_index = op_index[key], args = ids(args) } }
  end
  local plan = {
    name = "forward", values = list(values), inputs = ids(m.inputs), outputs = ids(m.outputs),
    chains = list { { inputs = list {}, outputs = list {}, instructions = list(instructions) } },
    operators = list(operators), delegates = list {}, non_const_buffer_sizes = list { 0, L.planned },
  }
  return json.encode({ execution_plan = list { plan }, constant_buffer = list {},
    backend_delegate_data = list {}, segments = list {},
    -- offsets {0}: the placeholder entry alone, which the runtime reads as "no constants" (an absent
    -- constant_segment means the deprecated in-flatbuffer constant_buffer, which this runtime refuses)
    constant_segment = { segment_index = 0, offsets = list { 0 } } }, { indent = true }) .. "\n"
end

--- Writes dir/<name>.pte (and dir/<name>.json, flatc's input) with Debian's flatc; returns the .pte's path.
function M.build(name, dir)
  local proc = require("odp.proc")
  local schema = require("odp.host").root .. "/tests/fixtures/pte/schema/program.fbs"
  local src = dir .. "/" .. name .. ".json"
  local f = assert(io.open(src, "wb"))
  f:write(M.json(name))
  f:close()
  local r = proc.run { argv = { "flatc", "-b", "-o", dir, schema, src }, timeout = 60 }
  if not (r and r.ok) then
    return nil, ("flatc failed on %s: %s"):format(src, r and r.stderr or "could not start flatc")
  end
  return dir .. "/" .. name .. ".pte"
end

if arg and arg[0] and arg[0]:match("ptebuild%.lua$") then
  local dir = assert(arg[1], "usage: build/odp run tests/lib/ptebuild.lua DIR")
  for name in pairs(M.models) do print(assert(M.build(name, dir))) end
end

return M
