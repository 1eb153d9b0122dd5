-- scripts/alif_e8.lua without a board: validate, dry-run, and the build step with its stale-build guard,
-- building the twin's real cmake firmware project (tests/twin) in place of the MLEK.
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local script = root .. "/scripts/alif_e8.lua"
local mnist = root .. "/tests/fixtures/pte/mnist_ethos_u55.pte"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local twin = root .. "/devices/twin_m55.lua"
local dir = T.tmpdir()

local function odp_run(args, env, timeout)
  local argv = { odp, "run", script, "--runs-dir", dir .. "/runs" }
  table.move(args, 1, #args, #argv + 1, argv)
  return assert(proc.run { argv = argv, cwd = dir, env = env or {}, timeout = timeout or 120 })
end

local function json_of(r)
  local rec, err = json.decode(r.stdout)
  if not rec then error(("not JSON (%s); stdout:\n%s\nstderr:\n%s"):format(err, r.stdout, r.stderr), 0) end
  return rec
end

-- A device file derived from the twin's (a user's copy with changes: device files have no dofile).
local function derived_device(name, body)
  return T.derived_device(twin, dir .. "/" .. name .. ".lua", name, body)
end

-- a file the record names in its run directory ({file, sha256, bytes}), checked against its sha256
local function art(rec, name)
  local a = rec.artifacts[name]
  if a == nil then return nil end
  return assert(require("odp.results.result").artifact(rec, name, rec.artifacts.run_dir))
end

T.test("dry-run prints the vendor guide's commands without tools, sources or board", function()
  local r = odp_run({ "--model", mnist, "--mlek", "/nonexistent/mlek", "--setools", "/nonexistent/se",
    "--flasher-dir", "/nonexistent/fl", "--dry-run" }, { PATH = "/nonexistent" })
  T.eq(r.status, 0, "exit (stderr: " .. r.stderr .. ")")
  local out = r.stdout
  for _, want in ipairs({ "PYTHONPATH=/nonexistent/mlek/dependencies/executorch cmake", "-DTARGET_PLATFORM=alif",
    "-DTARGET_SUBSYSTEM=RTSS-HP", "-DTARGET_BOARD=DevKit-e8", "-DETHOS_U_NPU_ID=U85", "-DETHOS_U_NPU_CONFIG_ID=Z256",
    "-DETHOS_U_NPU_MEMORY_MODE=Dedicated_Sram", "-DETHOS_U_NPU_CACHE_SIZE=0x00060000", "-DML_FWK_TMP_MEM_SIZE=0x00040000",
    "-Dexecutorch_inference_runner_ACTIVATION_BUF_SZ=0x00600000", "-DEXECUTORCH_ENABLE_EVENT_TRACER=ON",
    "-DOSPI_RAM_SUPPORT=ON", "-DOSPI_RAM_TEST=ON", "-Dexecutorch_inference_runner_MODEL_PATH=" .. mnist,
    "make -C /nonexistent/mlek/build_benchmark", "mlek_executorch_inference_runner",
    "cp /nonexistent/fl/out/flasher/E8-HE/debug/flasher.bin /nonexistent/se/build/images/flasher_he.bin",
    "cd /nonexistent/se && /nonexistent/se/app-gen-toc -f build/config/flasher-cfg.json",
    "/nonexistent/se/app-write-mram -p", "app-gen-toc -f build/config/asr.json", "AE822FA0E5597LS0_M55_HE",
    "AE822FA0E5597LS0_M55_HP", "xmodem-1k send", "bin/sectors/executorch_inference_runner/ext_flash.bin",
    "SWD reset", "until 10 Inference: lines" }) do
    T.ok(out:find(want, 1, true), "dry-run output has " .. want)
  end
  T.ok(not sys.stat(dir .. "/runs"), "no run directory for a dry run")
end)

T.test("dry-run without --mlek shows the placeholder; a real run names the missing option", function()
  local r = odp_run({ "--model", mnist, "--dry-run", "--only", "build" })
  T.eq(r.status, 0)
  T.ok(r.stdout:find("cmake -S '<mlek>'", 1, true), "placeholder shown")
  local r2 = odp_run({ "--model", mnist, "--only", "build" })
  T.eq(r2.status, 2)
  T.match(r2.stderr, "needs %-%-mlek")
end)

T.test("Shared_Sram drops the NPU cache size and OSPI RAM test flags and says the mode must match", function()
  local r = odp_run({ "--model", mnist, "--mlek", "/m", "--memory-mode", "Shared_Sram", "--activation-buf-sz", "256K",
    "--dry-run", "--only", "build" })
  T.eq(r.status, 0, r.stderr)
  T.ok(r.stdout:find("-DETHOS_U_NPU_MEMORY_MODE=Shared_Sram", 1, true))
  T.ok(not r.stdout:find("ETHOS_U_NPU_CACHE_SIZE", 1, true), "no cache size")
  T.ok(not r.stdout:find("OSPI_RAM_TEST", 1, true), "no OSPI RAM test")
  T.ok(r.stdout:find("-DOSPI_RAM_SUPPORT=ON", 1, true), "OSPI RAM support stays")
  T.ok(r.stdout:find("ACTIVATION_BUF_SZ=0x00040000", 1, true), "256K")
  T.match(r.stderr, "must be the mode the %.pte was compiled for")
  T.match(r.stderr, "dropped ETHOS_U_NPU_CACHE_SIZE, OSPI_RAM_TEST")
end)

T.test("a wrong memory mode stops before anything runs", function()
  local r = odp_run({ "--device", twin, "--model", mnist, "--memory-mode", "Dedicated" })
  T.eq(r.status, 2)
  T.match(r.stderr, "Dedicated_Sram|Shared_Sram|Sram_Only")
  -- a device that supports fewer modes
  local dev = derived_device("twin_dedicated", "d.build.memory_modes = { Dedicated_Sram = { drop = {} } }")
  local r2 = odp_run({ "--device", dev, "--model", mnist, "--memory-mode", "Shared_Sram",
    "--twin-state", dir .. "/never" })
  T.eq(r2.status, 2)
  T.match(r2.stderr, "memory mode Shared_Sram is not supported by twin_dedicated")
  T.ok(not sys.stat(dir .. "/never"), "no twin launched")
  T.ok(not sys.stat(dir .. "/runs"), "no run directory")
end)

T.test("an activation buffer smaller than the Vela scratch stops validate, naming both sizes, before flashing", function()
  local state = dir .. "/state-small"
  local r = odp_run({ "--device", twin, "--model", mnist, "--activation-buf-sz", "0x10000", "--twin-state", state,
    "--build-dir", dir .. "/b-small" })
  T.eq(r.status, 2)
  T.match(r.stderr, "scratch_size is 104160 bytes %(0x000196E0%)")
  T.match(r.stderr, "%-%-activation%-buf%-sz is 65536 bytes %(0x00010000%)")
  T.ok(not sys.stat(state), "the twin was never launched")
  T.ok(not sys.stat(dir .. "/b-small"), "nothing was built")
end)

T.test("a model without an Ethos-U delegate: a CPU-only warning; a non-ET12 file: an error", function()
  local r = odp_run({ "--model", add, "--mlek", "/m", "--dry-run" })
  T.eq(r.status, 0)
  T.match(r.stderr, "no EthosUBackend delegate: it will run on the CPU alone")
  T.write(dir .. "/bad.pte", ("x"):rep(64))
  local r2 = odp_run({ "--model", dir .. "/bad.pte", "--mlek", "/m", "--dry-run" })
  T.eq(r2.status, 2)
  T.match(r2.stderr, "expected 'ET12'")
end)

T.test("missing tools are listed together before anything runs", function()
  local r = odp_run({ "--model", mnist, "--mlek", dir, "--setools", dir, "--flasher", mnist,
    "--jlink-lib", dir .. "/nope.so" }, { PATH = "/nonexistent", ODP_JLINK_LIB = false })
  T.eq(r.status, 2)
  for _, want in ipairs({ "cmake", "make", "arm%-none%-eabi%-gcc", "app%-gen%-toc", "libjlinkarm.so" }) do
    T.match(r.stderr, want)
  end
end)

T.test("sizes: hex, decimal, K/M; garbage is a usage error", function()
  local E = require("odp.flows.ethos_u.plan")
  T.eq(E.parse_size("0x600000"), 0x600000)
  T.eq(E.parse_size("6291456"), 6291456)
  T.eq(E.parse_size("6M"), 6291456)
  T.eq(E.parse_size("256K"), 262144)
  T.raises(function() E.parse_size("six", "activation-buf-sz") end, "not a size")
  T.eq(sys.crc32("123456789"), 0xCBF43926) -- the CRC-32 check value
  T.eq(sys.crc32("6789", sys.crc32("12345")), 0xCBF43926, "continued")
  -- the "size" option type parses the same spellings on the command line
  local cli = require("odp.core.options")
  local decl = { { "buf", "", nil, "size" } }
  T.eq(cli.parse({ "--buf", "0x600000" }, decl).buf, 6291456)
  T.eq(cli.parse({ "--buf", "6M" }, decl).buf, 6291456)
  T.eq(cli.parse({ "--buf", "1G" }, decl).buf, 1 << 30)
  T.eq(cli.size("1_024"), 1024); T.eq(cli.size("6MiB"), 6291456); T.eq(cli.size("6X"), nil); T.eq(cli.size("0x"), nil)
  T.raises(function() cli.parse({ "--buf", "lots" }, decl) end, "not a size")
  local r = odp_run({ "--model", mnist, "--activation-buf-sz", "six", "--dry-run" })
  T.eq(r.status, 2); T.match(r.stderr, "activation%-buf%-sz: 'six' is not a size")
end)

T.test("sizes and counts past what the firmware holds: exit 2 with the limit, before anything is built (issue 42)", function()
  local cli = require("odp.core.options")
  -- no wrap: a size a signed 64-bit integer does not hold is not a size
  for _, v in ipairs({ "0x10000000000600000", "0xFFFFFFFFFFFFFFFF", "0x8000000000000000", "8589934592G",
    "99999999999999999999" }) do
    T.eq(cli.size(v), nil, v)
  end
  T.eq({ cli.size("0x7FFFFFFFFFFFFFFF"), cli.size("0x0000000000600000"), cli.size("0x0") },
    { math.maxinteger, 0x600000, 0 })
  local cases = {
    { { "--activation-buf-sz", "0x10000000000600000" }, "activation%-buf%-sz: '0x10000000000600000' is not a size" },
    { { "--activation-buf-sz", "6G" }, "%-%-activation%-buf%-sz 0x180000000 is more than alif_e8's firmware holds: " ..
      "at most 0xFFFFFFFF %(its device file's build.limits.activation_buf_sz%)" },
    { { "--tmp-mem-size", "4G" }, "%-%-tmp%-mem%-size 0x100000000 is more than alif_e8's firmware holds: at most 0xFFFFFFFF" },
    { { "--inferences", "2147483648" }, "%-%-inferences 2147483648 is more than alif_e8's firmware holds: at most 2147483647" },
    { { "--device", twin, "--activation-buf-sz", "0x10000001" }, "twin_m55's firmware holds: at most 0x10000000" },
  }
  for _, c in ipairs(cases) do
    -- no --dry-run: the limit is checked before the build (which would need --mlek here)
    local args = { "--model", mnist, "--build-dir", dir .. "/never-built" }
    table.move(c[1], 1, #c[1], #args + 1, args)
    local r = odp_run(args)
    T.eq(r.status, 2, table.concat(c[1], " ") .. ": " .. r.stderr)
    T.match(r.stderr, c[2])
    T.eq(select(2, r.stderr:gsub("\n", "")), 1, "one line")
  end
  T.ok(not sys.stat(dir .. "/never-built"), "nothing built")
  -- at the limit: accepted (the dry run prints the cmake value the firmware gets)
  local r = odp_run({ "--model", mnist, "--mlek", "/m", "--activation-buf-sz", "0xFFFFFFFF", "--inferences",
    "2147483647", "--dry-run" })
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "ACTIVATION_BUF_SZ=0xFFFFFFFF")
end)

-- The build step on the twin's real cmake project.
local bdir = dir .. "/build-twin"
local function build(extra, env)
  local args = { "--device", twin, "--model", mnist, "--only", "build", "--build-dir", bdir, "--format", "json" }
  table.move(extra or {}, 1, #(extra or {}), #args + 1, args)
  local r = odp_run(args, env)
  return json_of(r), r
end

T.test("build: configures, builds mram.bin + ext_flash.bin, logs to runs/<id>/build.log", function()
  local rec, r = build()
  T.eq(r.status, 0, "exit; stderr: " .. r.stderr)
  T.eq(rec.ok, true)
  T.eq(rec.build.rebuilt, true)
  T.eq(rec.build.reason, "new build directory")
  T.eq(rec.images.ext_flash.sha256, rec.model.sha256, "ext_flash.bin is the model (twin)")
  T.ok(rec.images.mram.bytes > 1000)
  local log = T.read(art(rec, "build_log"))
  T.ok(log:find("$ cmake -S", 1, true) and log:find("$ make -C", 1, true), "both commands logged")
  T.ok(sys.stat(bdir .. "/odp-build-inputs.txt"), "input record in the build dir")
end)

T.test("stale-build guard: unchanged inputs build incrementally; a changed flag wipes and reconfigures", function()
  T.write(bdir .. "/sentinel", "x")
  local rec = build()
  T.eq(rec.build.rebuilt, false)
  T.eq(rec.build.reason, "up to date")
  T.ok(sys.stat(bdir .. "/sentinel"), "not wiped")
  T.ok(not T.read(art(rec, "build_log")):find("$ cmake", 1, true), "not reconfigured")
  local rec2 = build({ "--activation-buf-sz", "0x00200000" })
  T.eq(rec2.ok, true)
  T.eq(rec2.build.rebuilt, true)
  T.match(rec2.build.reason, "inputs changed: cmake%.executorch_inference_runner_ACTIVATION_BUF_SZ, configure")
  T.ok(not sys.stat(bdir .. "/sentinel"), "wiped")
  T.ok(T.read(bdir .. "/CMakeCache.txt"):find("ACTIVATION_BUF_SZ:UNINITIALIZED=0x00200000", 1, true)
    or T.read(bdir .. "/CMakeCache.txt"):find("0x00200000", 1, true), "new value configured")
end)

T.test("stale-build guard: a changed source revision / patch state or model rebuilds (own commands)", function()
  local rev = dir .. "/rev"
  T.write(rev, "cff6f4dd32e6\n")
  -- the user's own (quick) build commands from the device file: the guard does not depend on cmake
  local dev = derived_device("twin_rev", ("d.build.state = { { 'cat', %q } }\n"):format(rev) .. [[
local out = "<build_dir>/bin/sectors/executorch_inference_runner"
d.commands = {
  configure = { argv = { "sh", "-c", "echo configured > <build_dir>/CMakeCache.txt" } },
  build = { argv = { "sh", "-c", "mkdir -p " .. out .. " && cp <model> " .. out .. "/mram.bin && cp <model> " .. out .. "/ext_flash.bin" } },
}]])
  local sb = dir .. "/build-rev"
  local function b(model)
    local r = odp_run({ "--device", dev, "--model", model or mnist, "--only", "build", "--build-dir", sb, "--format", "json" })
    return json_of(r)
  end
  local m2 = dir .. "/m2.pte"
  T.write(m2, T.read(mnist))
  local first = b(m2)
  T.eq(first.build.rebuilt, true)
  T.eq(#first.steps, 1); T.eq(first.steps[1].name, "build"); T.eq(first.steps[1].status, "ran")
  T.ok(math.type(first.steps[1].ms) == "integer" and first.steps[1].ms >= 0, "ms")
  local again = b(m2)
  T.eq(again.build.rebuilt, false)
  T.eq(again.steps[1].status, "skipped: unchanged", "nothing changed: the step says so")
  T.match(require("odp.results.report").formats.human({ again }), "steps%s+build [%d.]+ %a+ %(skipped: unchanged%)")
  T.write(rev, "cff6f4dd32e6\n+ executorch_fpic.patch applied\n")
  local rec = b(m2)
  T.eq(rec.build.rebuilt, true)
  T.match(rec.build.reason, "state%.1")
  T.eq(b(m2).build.rebuilt, false)
  local bytes = T.read(mnist)
  T.write(m2, bytes .. ("\0"):rep(16))
  local rec3 = b(m2)
  T.eq(rec3.build.rebuilt, true)
  T.match(rec3.build.reason, "model%.sha256")
end)

T.test("stale-build guard never wipes a directory that is not a build directory", function()
  local other = dir .. "/precious"
  sys.mkdir_p(other)
  T.write(other .. "/thesis.tex", "x")
  local r = odp_run({ "--device", twin, "--model", mnist, "--only", "build", "--build-dir", other })
  T.eq(r.status, 2)
  T.match(r.stderr, "refusing to wipe")
  T.ok(sys.stat(other .. "/thesis.tex"))
end)

T.test("build failure: exit 1, ok=false, the last 30 lines of build.log shown, the log kept", function()
  local dev = derived_device("twin_broken",
    "d.build.vars = { inferences = false }; d.build.cmake.TWIN_INFERENCES = 'ten'")
  local r = odp_run({ "--device", dev, "--model", mnist, "--only", "build", "--build-dir", dir .. "/b-broken",
    "--format", "json" })
  T.eq(r.status, 1)
  local rec = json_of(r)
  T.eq(rec.ok, false)
  T.eq({ rec.error.code, rec.error.exit }, { "EBUILD", 1 })
  T.match(rec.error.message, "build failed")
  T.match(r.stderr, "last 30 lines of .*build%.log")
  T.match(r.stderr, "TWIN_INFERENCES must be a decimal number")
  T.ok(T.read(art(rec, "build_log")):find("TWIN_INFERENCES must be a decimal number", 1, true), "log kept")
  T.match(rec.build.log_tail, "TWIN_INFERENCES")
  T.eq(rec.steps[1].status, "failed", "the failed step is recorded")
end)

T.done()
