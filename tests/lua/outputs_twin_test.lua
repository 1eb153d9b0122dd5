-- The Ethos-U flow's output.bin (issue 31): the Cortex-M55 twin streams a file as `begin output.bin` over RTT
-- (TWIN_OUTPUT_PATH, tests/twin/README.md); odp keeps it as the method's output 0 (float32 [1, 10] for the MNIST
-- model), with its sha256, and compares it with a reference like a runner's outputs: identical bytes agree,
-- a perturbed reference fails the gate with numpy's numbers (tests/lib/numcmp_oracle.py).
-- --inputs: the build embeds them into the firmware (TWIN_INPUTS_PATH), the twin computes output.bin from them
-- (element j = the sum of the input bytes at positions i = j mod 10, README "Inputs"), computed here again from
-- the input file; random inputs are numpy's SplitMix64 bytes; other inputs rebuild the firmware; inputs of
-- the wrong size are exit 2 before anything is built or flashed.
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local script = root .. "/scripts/alif_e8.lua"
local mnist = root .. "/tests/fixtures/pte/mnist_ethos_u55.pte"
local dir = T.tmpdir()

-- ten logits, as the model's output 0 would hold them
local logits = string.pack("<ffffffffff", -3.5, 1.25, 0.5, 7.75, -1, 2, 0, 0.125, -0.25, 3)
T.write(dir .. "/out.bin", logits)
local dev = T.derived_device(root .. "/devices/twin_m55.lua", dir .. "/twin_out.lua", "twin_out",
  ("d.build.cmake.TWIN_OUTPUT_PATH = %q; d.build.cmake.TWIN_INFERENCES = 2"):format(dir .. "/out.bin"))

-- odp run of the twin (the device streaming out.bin, else the one given) -> its record, proc's result
local function odp_run(args, device, build_dir)
  local argv = { odp, "run", script, "--runs-dir", dir .. "/runs", "--format", "json", "--no-history", "--device",
    device or dev, "--model", mnist, "--inferences", "2", "--build-dir", build_dir or (dir .. "/build") }
  table.move(args, 1, #args, #argv + 1, argv)
  local r = assert(proc.run { argv = argv, cwd = dir, timeout = 600 })
  local rec = json.decode(r.stdout)
  if not rec then error(("not JSON; exit %s; stderr:\n%s"):format(r.status, r.stderr), 0) end
  return rec, r
end

T.test("--outputs: output.bin kept as output 0 with its sha256, dtype and shape from the .pte", function()
  local rec, r = odp_run({ "--outputs" })
  T.eq(r.status, 0, r.stderr)
  local d = rec.outputs[1].data
  T.eq({ rec.outputs[1].index, d.file, d.bytes, d.dtype, d.sizes }, { 0, "output.bin", 40, "float32", { 1, 10 } })
  T.eq(d.sha256, sys.sha256(logits))
end)

T.test("--reference: the same bytes agree; a perturbed reference fails --min-cosine with numpy's values", function()
  local same, other = dir .. "/ref-same", dir .. "/ref-other"
  sys.mkdir_p(same)
  sys.mkdir_p(other)
  T.write(same .. "/output-0.bin", logits)
  local v = { string.unpack("<ffffffffff", logits) }
  v[4] = -7.75 -- the top logit gone: cosine drops, top-1 moves
  T.write(other .. "/output-0.bin", string.pack("<ffffffffff", table.unpack(v, 1, 10)))
  local rec, r = odp_run({ "--reference", same, "--max-abs-err", "0", "--min-cosine", "1" })
  T.eq(r.status, 0, r.stderr)
  local e = rec.reference.outputs[1]
  T.eq({ e.identical, e.equal, e.top1, e.top5 }, { true, 10, true, 1 })
  rec, r = odp_run({ "--reference", other, "--min-cosine", "0.9" })
  T.eq(r.status, 1, r.stderr)
  T.eq({ rec.ok, rec.error.code, rec.reference.failed.metric }, { false, "EMISMATCH", "cosine" })
  local pr = assert(proc.run { "/usr/bin/python3", root .. "/tests/lib/numcmp_oracle.py", "compare", other .. "/output-0.bin",
    rec.artifacts.run_dir .. "/output.bin", "float32", "logits", timeout = 60 })
  local want = assert(json.decode(pr.stdout), pr.stderr)
  e = rec.reference.outputs[1]
  T.near(e.cosine, want.cosine, 1e-12)
  T.near(e.max_abs_err, want.max_abs_err, 1e-12)
  T.near(e.snr_db, want.snr_db, 1e-9)
  T.eq({ e.top1, e.top5, e.topk.ref, e.topk.got }, { want.top1, want.top5, want.topk_ref, want.topk_got })
end)

T.test("--outputs on firmware that streams no output.bin: exit 1, ERUNNER naming it, the latency kept", function()
  local argv = { odp, "run", script, "--runs-dir", dir .. "/runs", "--format", "json", "--no-history", "--device",
    root .. "/devices/twin_m55.lua", "--model", mnist, "--inferences", "2", "--build-dir", dir .. "/build-plain", "--outputs" }
  local r = assert(proc.run { argv = argv, cwd = dir, timeout = 600 })
  local rec = assert(json.decode(r.stdout), r.stderr)
  T.eq(r.status, 1, r.stderr)
  T.eq({ rec.ok, rec.error.code, rec.error.message }, { false, "ERUNNER", "output 0: the firmware sent no output.bin block" })
  T.eq(rec.latency_ms.n, 2)
end)

-- The twin's output for embedded inputs, computed here from the input bytes (README "Inputs").
local function twin_output(bytes)
  local sums = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }
  for i = 1, #bytes do
    local j = (i - 1) % 10 + 1
    sums[j] = sums[j] + bytes:byte(i)
  end
  return string.pack("<ffffffffff", table.unpack(sums, 1, 10))
end

local inputs_build = dir .. "/build-inputs"
local function inputs_run(args) return odp_run(args, root .. "/devices/twin_m55.lua", inputs_build) end

local random1_run
T.test("--inputs random:1: numpy's bytes embedded, output.bin computed from them, the inputs' sha256 kept", function()
  local rec, r = inputs_run({ "--inputs", "random:1", "--outputs" })
  T.eq(r.status, 0, r.stderr)
  T.eq({ #rec.inputs, rec.inputs[1].file, rec.inputs[1].bytes, rec.inputs[1].dtype, rec.params.inputs },
    { 1, "inputs/input-0.bin", 3136, "float32", "random:1" })
  local run_dir = rec.artifacts.run_dir
  local want = dir .. "/numpy-input-0.bin"
  assert(proc.run { "/usr/bin/python3", root .. "/tests/lib/numcmp_oracle.py", "generate", "3136", "float32", "1", "0",
    want, timeout = 60 }.ok)
  local bytes = T.read(want)
  T.eq(T.read(run_dir .. "/inputs/input-0.bin") == bytes, true, "odp's random:1 bytes are numpy's")
  T.eq(rec.inputs[1].sha256, sys.sha256(bytes))
  T.eq(T.read(inputs_build .. "/odp-inputs.bin") == bytes, true, "the build embedded them")
  -- the firmware says what it embedded: their size and zlib's CRC-32
  T.match(T.read(run_dir .. "/rtt.log"), ("inputs: 3136 bytes crc32 %08x"):format(sys.crc32(bytes)))
  local out = T.read(run_dir .. "/output.bin")
  T.eq(out == twin_output(bytes), true, "output.bin is the sums of the input bytes")
  T.eq(rec.outputs[1].data.sha256, sys.sha256(twin_output(bytes)))
  T.eq(rec.build.rebuilt, true)
  random1_run = run_dir
end)

T.test("--inputs FILE: other inputs rebuild the firmware (inputs.sha256) and change output.bin; --reference gates it", function()
  T.ok(random1_run, "the random:1 run came first")
  local mine = dir .. "/mine.bin"
  local b = {}
  for i = 1, 3136 do b[i] = string.char((i * 7) % 256) end
  T.write(mine, table.concat(b))
  local rec, r = inputs_run({ "--inputs", mine, "--reference", random1_run, "--max-abs-err", "0" })
  T.eq(r.status, 1, r.stderr)
  T.eq({ rec.ok, rec.error.code, rec.reference.failed.metric }, { false, "EMISMATCH", "max_abs_err" })
  T.eq({ rec.build.rebuilt, rec.build.reason }, { true, "inputs changed: inputs.sha256" })
  T.eq({ rec.inputs[1].file, rec.inputs[1].sha256 }, { mine, sys.sha256(T.read(mine)) })
  T.eq(T.read(rec.artifacts.run_dir .. "/output.bin") == twin_output(T.read(mine)), true)
  -- the max abs error against the random:1 run's output, computed here from both outputs
  local got = { string.unpack("<ffffffffff", twin_output(T.read(mine))) }
  local ref = { string.unpack("<ffffffffff", T.read(random1_run .. "/output.bin")) }
  local max = 0
  for i = 1, 10 do max = math.max(max, math.abs(got[i] - ref[i])) end
  T.eq(rec.reference.outputs[1].max_abs_err, max)
  -- random:1 again: rebuilt (the inputs changed back), and it agrees with the first run exactly
  rec, r = inputs_run({ "--inputs", "random:1", "--reference", random1_run, "--max-abs-err", "0", "--min-cosine", "1" })
  T.eq(r.status, 0, r.stderr)
  T.eq({ rec.build.rebuilt, rec.reference.outputs[1].identical }, { true, true })
  -- and once more: nothing changed, nothing rebuilt
  rec, r = inputs_run({ "--inputs", "random:1", "--outputs" })
  T.eq(r.status, 0, r.stderr)
  T.eq(rec.build.rebuilt, false)
end)

T.test("--inputs of the wrong size, or on a board whose build embeds none: exit 2, nothing built, flashed or recorded", function()
  local short = dir .. "/short.bin"
  T.write(short, ("x"):rep(3135))
  local fresh = dir .. "/build-never"
  local runs = dir .. "/runs-never"
  local argv = { odp, "run", script, "--runs-dir", runs, "--no-history", "--device", root .. "/devices/twin_m55.lua",
    "--model", mnist, "--build-dir", fresh, "--twin-state", dir .. "/twin-never", "--inputs", short }
  local r = assert(proc.run { argv = argv, cwd = dir, timeout = 120 })
  T.eq(r.status, 2, r.stderr)
  T.match(r.stderr, "%-%-inputs .*short%.bin: 3135 bytes; input 0 is float32 %[1, 1, 28, 28%] = 3136 bytes")
  argv[#argv] = short .. "," .. short
  r = assert(proc.run { argv = argv, cwd = dir, timeout = 120 })
  T.eq(r.status, 2, r.stderr)
  T.match(r.stderr, "%-%-inputs gives 2 files; method forward takes 1 input")
  -- a device whose build names no cmake variable for them (the Alif E8's MLEK build)
  local none = T.derived_device(root .. "/devices/twin_m55.lua", dir .. "/twin_noinputs.lua", "twin_noinputs",
    "d.build.vars = nil")
  argv[8], argv[#argv] = none, "random:1"
  r = assert(proc.run { argv = argv, cwd = dir, timeout = 120 })
  T.eq(r.status, 2, r.stderr)
  T.match(r.stderr, "twin_noinputs's firmware build embeds no inputs")
  -- --inputs without the build step: the firmware on the board has its own
  argv[8] = root .. "/devices/twin_m55.lua"
  table.move({ "--only", "run" }, 1, 2, #argv + 1, argv)
  r = assert(proc.run { argv = argv, cwd = dir, timeout = 120 })
  T.eq(r.status, 2, r.stderr)
  T.match(r.stderr, "need the build step")
  T.eq({ (sys.stat(fresh)), (sys.stat(runs)), (sys.stat(dir .. "/twin-never")) }, {})
end)

T.done()
