-- The Ethos-U flow's output.bin (issue 31): the Cortex-M55 twin streams a file as `begin output.bin` over RTT
-- (TWIN_OUTPUT_PATH, tests/twin/README.md); odp keeps it as the method's output 0 (float32 [1, 10] for the MNIST
-- model), with its sha256, and compares it with a reference like a runner's outputs: identical bytes agree,
-- a perturbed reference fails the gate with numpy's numbers (tests/lib/numcmp_oracle.py).
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

local function odp_run(args)
  local argv = { odp, "run", script, "--runs-dir", dir .. "/runs", "--format", "json", "--no-history", "--device", dev,
    "--model", mnist, "--inferences", "2", "--build-dir", dir .. "/build" }
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

T.done()
