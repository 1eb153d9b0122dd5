-- Across architectures (issue 31): the real x86_64 executor_runner and the real static aarch64 one, run here
-- by the kernel through qemu-aarch64-static (binfmt_misc, registered by tests/lib/aarch64_user.sh as root and
-- unregistered after when this suite registered it), get the same random inputs; their outputs agree, and
-- odp's metrics are numpy's on the same files (tests/lib/numcmp_oracle.py).
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local dir = T.tmpdir()
-- add_arduino (one add) and the multi-operator models of tests/lib/ptebuild.lua (an MLP; a conv net)
local models = { root .. "/tests/fixtures/pte/add_arduino.pte", root .. "/tests/fixtures/pte/mlp.pte",
  root .. "/tests/fixtures/pte/convnet.pte" }

local x86, why_x86 = T.real_runner()
local arm, why_arm = T.real_runner("aarch64")
local binfmt = (x86 and arm) and proc.run { "sh", root .. "/tests/lib/aarch64_user.sh", "binfmt", timeout = 60 }

local function odp_run(args)
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runs-dir", dir .. "/runs", "--no-history",
    "--format", "json" }
  table.move(args, 1, #args, #argv + 1, argv)
  local r = assert(proc.run { argv = argv, cwd = dir, timeout = 300 })
  return json.decode(r.stdout), r
end

local function run_dir(rec)
  local d = rec.artifacts.run_dir
  return d:sub(1, 1) == "/" and d or (dir .. "/" .. d)
end

local function case(name, fn)
  if not x86 then return T.skip(name, why_x86) end
  if not arm then return T.skip(name, why_arm) end
  -- the rig registers qemu-aarch64 itself (tests/lib/aarch64_user.sh, as root): a failure there is a failure
  T.test(name, function()
    T.eq(binfmt.status, 0, "qemu-aarch64 binfmt_misc: " .. binfmt.stderr:gsub("\n", " "))
    fn()
  end)
end

for _, model in ipairs(models) do
  local mname = model:match("([^/]+)$")
  case(mname .. ": x86_64 and aarch64 (qemu-user) runners agree on random:1 and random:7; numpy agrees", function()
    for _, seed in ipairs({ "random:1", "random:7" }) do
      local ref, r = odp_run({ "--runner", x86, "--model", model, "--inputs", seed, "--outputs" })
      T.eq(r.status, 0, r.stderr)
      -- emulated on purpose: what is compared is what it computes, not how fast
      local rec, r2 = odp_run({ "--runner", arm, "--allow-emulated", "--model", model, "--inputs", seed,
        "--reference", run_dir(ref), "--min-cosine", "0.9999", "--max-abs-err", "1e-3" })
      T.eq(r2.status, 0, r2.stderr)
      T.eq(rec.inputs[1].sha256, ref.inputs[1].sha256, "the same input bytes on both")
      T.ok(rec.runner.sha256 ~= ref.runner.sha256, "two different runners")
      require("outputs_oracle").check(T, rec.reference, run_dir(ref), run_dir(rec))
    end
  end)
end

-- a registration this suite made is the machine's state: it goes again (one that was there stays)
if binfmt and binfmt.status == 0 and binfmt.stdout:match("^registered:") then
  local f = io.open("/proc/sys/fs/binfmt_misc/qemu-aarch64", "w")
  if f then f:write("-1") f:close() end
end
T.done()
