-- Every field odp writes is declared (lua/odp/results/schema.lua): a record of every kind odp writes here, with
-- the real runner, is read back through the one reader with nothing left out (no "fields this odp does not
-- know" note, no value of the wrong type). Kinds: the host flow (plain, --print_output all, --etdump), the CPU
-- sampler with its overhead, inputs/outputs against a reference, failed runs (the runner's and the output
-- gate's), a sweep's JSONL, an SSH board (the loopback sshd), an adb board (the device emulator) and the
-- Ethos-U flow on the QEMU twin.
local T = require("t")
local adbemu = require("adbemu")
local proc = require("odp.proc")
local result = require("odp.results.result")
local schema = require("odp.results.schema")
local sshd = require("sshd")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or ((os.getenv("ODP_BUILD_DIR") or (root .. "/build")) .. "/odp")
local mlp = root .. "/tests/fixtures/pte/mlp.pte"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local tmp = T.tmpdir()

-- odp run SCRIPT args... -> the exit status and the records it wrote (the run directories' result.json, and
-- the --out file's lines for a sweep), each read back through the schema
local function run(script, args, want_status)
  local argv = { odp, "run", root .. "/scripts/" .. script, "--runs-dir", tmp .. "/runs", "--no-history" }
  table.move(args, 1, #args, #argv + 1, argv)
  local r = assert(proc.run { argv = argv, cwd = tmp, timeout = 600 })
  T.eq(r.status, want_status or 0, table.concat(args, " ") .. "\n" .. r.stderr:sub(-1500))
  return r
end

local checked = {}
-- every record file under the runs dir not checked yet, read back with nothing left out
local function check_new(kind)
  local n, notes, recs = 0, {}, {}
  for _, id in ipairs(sys.readdir(tmp .. "/runs") or {}) do
    local file = tmp .. "/runs/" .. id .. "/result.json"
    if not checked[file] and sys.stat(file) then
      checked[file] = true
      local rec = assert(result.decode(assert(sys.read_file(file))))
      notes[#notes + 1] = schema.describe(select(2, schema.read(rec)), file)
      n = n + 1
      recs[n] = rec
    end
  end
  T.ok(n > 0, kind .. ": a record was written")
  T.eq(notes, {}, kind)
  return recs
end

-- whether some record of recs has what pred looks for (the kind really was written)
local function some(recs, pred, what)
  for _, r in ipairs(recs) do if pred(r) then return end end
  T.ok(false, "no record " .. what)
end

local function check_lines(file, kind)
  local n, notes, recs = 0, {}, {}
  for line in assert(sys.read_file(file)):gmatch("[^\n]+") do
    local rec = assert(result.decode(line))
    notes[#notes + 1] = schema.describe(select(2, schema.read(rec)), file)
    n = n + 1
    recs[n] = rec
  end
  T.ok(n > 0, kind .. ": lines written")
  T.eq(notes, {}, kind)
  return recs
end

T.with_real_runner("host runs: plain, --print_output all, --etdump with its op table, --no-memory", function(runner)
  run("host.lua", { "--runner", runner, "--model", mlp, "-n", "3", "--etdump", tmp .. "/m.etdump" })
  run("host.lua", { "--runner", runner, "--model", add, "-n", "2", "--no-memory", "--", "--print_output", "all" })
  local recs = check_new("host")
  some(recs, function(r) return r.ops and #r.ops > 0 end, "with an op table")
  some(recs, function(r) return r.outputs[1] and r.outputs[1].flat end, "with --print_output all's outputs")
end)

T.with_real_runner("the CPU sampler and its overhead (--sample --sample-overhead)", function(runner)
  run("host.lua", { "--runner", runner, "--model", mlp, "-n", "20", "--sample=2000", "--sample-overhead=2" })
  some(check_new("sampled"), function(r) return r.cpu_profile and r.cpu_profile.overhead end, "with cpu_profile.overhead")
end)

T.with_real_runner("inputs, outputs and a reference; an output gate that fails; a runner that fails", function(runner)
  local r = run("host.lua", { "--runner", runner, "--model", mlp, "--inputs", "random:3", "--outputs",
    "--format", "json" })
  local ref = assert(result.decode(r.stdout)).artifacts.run_dir
  run("host.lua", { "--runner", runner, "--model", mlp, "--inputs", "random:3", "--reference", ref,
    "--max-abs-err", "0" })
  -- other inputs than the reference's: the gate fails the run (exit 1), a record all the same
  run("host.lua", { "--runner", runner, "--model", mlp, "--inputs", "random:4", "--reference", ref,
    "--max-abs-err", "0" }, 1)
  -- a model whose weights are in a .ptd not given: the runner aborts (exit 1), a failed record
  run("host.lua", { "--runner", runner, "--model", root .. "/tests/fixtures/pte/datamap.pte" }, 1)
  local recs = check_new("outputs and failed runs")
  some(recs, function(r) return r.ok and r.reference and r.inputs end, "with inputs and a reference")
  some(recs, function(r) return not r.ok and r.reference and r.reference.failed end, "failed by the output gate")
  some(recs, function(r) return not r.ok and r.error and r.error.code == "ERUNNER" end, "of a failed runner")
end)

T.with_real_runner("a sweep's records (JSONL) and its points' run directories", function(runner)
  run("sweep.lua", { "--flow", root .. "/scripts/host.lua", "--runner", runner, "--model", add,
    "-p", "num_executions=1,2", "--out", tmp .. "/s.jsonl" })
  some(check_lines(tmp .. "/s.jsonl", "sweep"), function(r) return r.sweep end, "of a sweep point")
  check_new("sweep points")
end)

T.with_real_runner("an SSH board (the loopback sshd, the resident helper) with --sample", function(runner)
  local srv = sshd.start()
  local ok, err = pcall(function()
    run("rpi5.lua", { "--host", srv.user .. "@127.0.0.1", "--port", tostring(srv.port), "--identity", srv.identity,
      "--known-hosts", srv.known_hosts, "--remote-dir", srv.remote_dir .. "/kinds", "--runner", runner, "--model",
      mlp, "-n", "5", "--sample=1000", "--etdump", tmp .. "/ssh.etdump" })
    some(check_new("ssh"), function(r) return r.target:match("^ssh://") and r.cpu_profile end, "sampled over SSH")
  end)
  srv:stop()
  if not ok then error(err, 0) end
end)

T.with_real_runner("an adb board (the device emulator, direct connection)", function(runner)
  local dev = adbemu.start { logcat = true }
  run("x300pro.lua", { "--adb", "tcp:" .. dev.serial, "--runner", runner, "--model", add, "-n", "2" })
  some(check_new("adb"), function(r) return r.target:match("^adb://") end, "over adb")
end)

T.test("the Ethos-U flow on the QEMU twin (devices/twin_m55.lua): build, flash, RTT capture", function()
  run("alif_e8.lua", { "--device", root .. "/devices/twin_m55.lua", "--model",
    root .. "/tests/fixtures/pte/mnist_ethos_u55.pte", "--inferences", "5" })
  some(check_new("twin"), function(r) return r.flow == "ethos_u" and r.pmu and r.rtt end, "of the twin")
end)

T.done()
