--- The Ethos-U flow, part 1: its options and the plan: options + the device file -> every command, path and
-- size the steps use. Pure apart from reading the device file and stat (no tool needs to exist: the dry run
-- uses it). validate (odp.flows.ethos_u.validate) makes the plan and completes it; build, flash and capture
-- each take it; none of them extends this module.
--
-- The plan (`p`), as the steps read it:
--   device, twin             the device table (devices/*.lua), its `twin` table (nil on a real board)
--   steps                    {build = true, flash = true, run = true}: the steps asked for
--   model                    the .pte's absolute path (nil for a flash of a file alone: board:flash)
--   memory_mode, activation_buf_sz, tmp_mem_size, inferences, jobs, timeout
--   source_dir, build_dir    the firmware's source tree and build directory
--   vars                     the <name> placeholders' values (model, mlek, build_dir, inputs, ...)
--   cmake_defs               {"-DNAME=value", ...}, sorted; dropped: names the memory mode removed
--   configure, build         commands {name, argv, cwd?, env?}; build_env the build's environment
--   state                    commands whose output the stale-build guard hashes (the device's build.state)
--   inputs_blob              where the build writes the inputs it embeds (nil without --inputs)
--   mram, ext_flash, flasher the build's images and the flasher image
--   setools_bin, setools_dir, setools_copy, gen_toc_flasher, write_mram_flasher, gen_toc_app, write_mram_app,
--   flasher_image, app_image the flash step's SETOOLS commands and where its images go (with steps.flash)
--   probe_backend, rtt_address, rtt_ranges, flasher_ranges, rtt_channel, lines, xmodem_mode, max_line, max_log
--                            the probe and RTT (odp.target.probe reads these), the firmware's lines, the
--                            longest line and the raw RTT logs' cap (bytes)
--   silent_every             seconds of a silent board (flasher, capture) between progress lines
-- validate adds: pte (odp.parse.pte's table), scratch_size, ethos_delegate, io (odp.results.tensors.validate:
-- --inputs, --outputs, --reference). During a run: twin_state (the twin's state directory), flashed, reset_at
-- (sys.now() of the run step's reset: an Inference: value longer than the run since is refused).
local errors = require("odp.core.errors")
local sys = require("odp.sys")
local proc = require("odp.proc")
local tensors = require("odp.results.tensors")
local device = require("odp.target.device")
local host_mod = require("odp.host")
local options = require("odp.core.options")

local M = { name = "ethos_u" }

M.STEPS = { "build", "flash", "run" } -- validate runs first and report last, whatever --steps says
M.MEMORY_MODES = { "Dedicated_Sram", "Shared_Sram", "Sram_Only" }
M.MAX_LINE = 128 * 1024 * 1024 -- an RTT line longer than this is cut (a base64 artifact is one line)
-- The largest values a firmware holds when its device file has no build.limits: an Ethos-U board is a 32-bit
-- Cortex-M (sizes within its address space) counting inferences in a C int.
M.LIMITS = { activation_buf_sz = 0xFFFFFFFF, tmp_mem_size = 0xFFFFFFFF, inferences = 0x7FFFFFFF }
M.SILENT_EVERY = 10 -- seconds of a silent board before a progress line says what is awaited
M.MAX_LOG = 128 * 1024 * 1024 -- bytes of RTT lines a raw log keeps (the largest artifact's base64 fits: ~86 MiB)

--- Options of every Ethos-U script (cli option entries, see odp.core.options).
M.options = {
  { "device", "Device file (data: probe, RTT, build, SETOOLS, commands)", "devices/alif_e8.lua", "string", metavar = "FILE" },
  { "model", "The .pte model (compiled into the firmware)", nil, "file", required = true },
  { "mlek", "The MLEK source tree (nota-github/mlek_experimental, submodules and patch applied)", nil, "string", metavar = "DIR" },
  { "setools", "The Alif SETOOLS directory (app-gen-toc, app-write-mram, build/config/*.json)", nil, "string", metavar = "DIR" },
  { "flasher", "The flasher image for the HE core (default: from --flasher-dir or the device's build)", nil, "string", metavar = "FILE" },
  { "flasher-dir", "alifsemi/alif_usb-to-ospi-flasher checkout (its out/flasher/E8-HE/debug/flasher.bin)", nil, "string", metavar = "DIR" },
  { "build-dir", "Build directory (default: the device's, e.g. <mlek>/build_benchmark)", nil, "string", metavar = "DIR" },
  { "memory-mode", "NPU memory mode; must match the one the .pte was compiled (Vela) for", nil, "choice",
    choices = M.MEMORY_MODES },
  { "activation-buf-sz", "Activation (tensor arena) buffer size, bytes (0x.. or K/M suffix)", nil, "size" },
  { "tmp-mem-size", "ML framework temporary memory size, bytes", nil, "size" },
  { "inferences", "Inference: lines to read before the run is complete", 10, "posint", short = "n" },
  { "steps", "Steps to run, in order: build,flash,run (validate and report always run)", nil, "list" },
  { "only", "Run just these steps (same as --steps)", nil, "list" },
  { "dry-run", "Print every command the steps would run; check the model and sizes only", false, "bool" },
  { "jobs", "make -j (default: half the cores)", nil, "posint", short = "j" },
  { "timeout", "Seconds to wait for the run's RTT output", 60, "number" },
  { "settle", "Seconds of RTT silence after the last Inference: line that end the capture", 2, "number" },
  { "build-timeout", "Seconds before the build is killed", 3600, "number" },
  { "flash-timeout", "Seconds for each flash command, the flasher's answer and the XMODEM transfer", 300, "number" },
  { "probe", "Probe backend (default: the device's): jlink | gdb | qemu", nil, "choice", choices = { "jlink", "gdb", "qemu" } },
  { "jlink-lib", "Path of libjlinkarm.so (else ODP_JLINK_LIB or the usual install dirs)", nil, "string", metavar = "FILE" },
  { "gdb-address", "host:port of a GDB server (gdb backend)", nil, "string" },
  { "rtt-address", "Address of the RTT control block (_SEGGER_RTT in the map file)", nil, "size", metavar = "ADDR" },
  { "rtt-ranges", "RTT search ranges START:SIZE[,START:SIZE]", nil, "string" },
  { "no-reset", "Run step alone: attach without an SWD reset (the firmware keeps running)", false, "bool" },
  { "twin-state", "Twin only: its state directory (default: $ODP_TWIN_STATE or runs/<id>/twin)", nil, "string", metavar = "DIR" },
  { "keep-twin", "Twin only: leave QEMU running at the end (for a later --only run)", false, "bool" },
  { "runs-dir", "Where each run leaves build.log, rtt.log, artifacts and result.json", "runs", "string", metavar = "DIR" },
}
-- --inputs (embedded into the firmware by the build, where the device's build takes them: build.vars.inputs),
-- --outputs and --reference (output.bin, the firmware's output over RTT, kept and compared like a runner's)
-- An option entry with field i set to v (the entries are shared: never changed in place).
local function with(opt, i, v)
  local copy = {}
  for k, x in pairs(opt) do copy[k] = x end
  copy[i] = v
  return copy
end

for _, opt in ipairs(tensors.options) do
  if opt[1] == "inputs" then
    opt = with(opt, 2, "The model's inputs: FILE[,FILE...] of raw bytes, one per input, or random[:SEED] (from\n" ..
      "the .pte's signature); the build embeds them into the firmware (docs/alif_e8.md, \"Inputs\")")
  end
  M.options[#M.options + 1] = opt
end

--- The options of a script for `device` (its --device default; nil: devices/alif_e8.lua).
function M.script_options(device)
  local out = {}
  for i, opt in ipairs(M.options) do
    out[i] = (opt[1] == "device" and device) and with(opt, 3, device) or opt
  end
  return out
end

-- Commands when the device file has none (devices/alif_e8.lua spells the same ones out).
M.default_commands = {
  configure = { argv = { "cmake", "-S", "<source_dir>", "-B", "<build_dir>", "<cmake_defs>" }, env = "build" },
  build = { argv = { "make", "-C", "<build_dir>", "-j<jobs>", "<target>" }, env = "build" },
  gen_toc = { argv = { "<setools_bin>/app-gen-toc", "-f", "<cfg>" }, cwd = "<setools_dir>" },
  write_mram = { argv = { "<setools_bin>/app-write-mram", "-p" }, cwd = "<setools_dir>" },
}

-- Options -> cmake cache names; set when the device's cmake table has the name (MLEK spellings; the twin
-- accepts them as aliases). A device overrides with build.vars (false removes one).
M.default_vars = {
  model = "executorch_inference_runner_MODEL_PATH",
  activation_buf_sz = "executorch_inference_runner_ACTIVATION_BUF_SZ",
  memory_mode = "ETHOS_U_NPU_MEMORY_MODE",
  tmp_mem_size = "ML_FWK_TMP_MEM_SIZE",
  inferences = "TWIN_INFERENCES",
}

local function root() return host_mod.root end
local function is_abs(p) return p:sub(1, 1) == "/" end

-- A path from a device file (build.source_dir, a toolchain file, setools.dir): found as every path odp is given
-- (odp.core.search: absolute; else the current directory, ODP_PATH, odp's own tree such as tests/twin/...).
local project_path = require("odp.core.search").find

--- A size (odp.core.options's "size" type: 0x600000, 6291456, 6M) from an option, a device file or a range; nil stays nil.
function M.parse_size(s, what)
  if s == nil then return nil end
  local n = options.size(s)
  if not n then errors.fail("EUSAGE", ("--%s: '%s' is not a size (0x600000, 6291456, 6M)"):format(what, s)) end
  return n
end

--- A size or address as the device files and the firmware print it: 0x00600000.
function M.hex(n) return ("0x%08X"):format(n) end
local hex = M.hex

--- Loads a device file: a path (relative to the cwd, else to the project).
function M.load_device(path)
  local dev = device.load(path)
  if dev.flow ~= "ethos_u" or type(dev.build) ~= "table" then
    errors.fail("EUSAGE", ("device file %s does not describe an Ethos-U board (flow = \"ethos_u\" and a build table)")
      :format(path))
  end
  return dev
end

-- Fills <name> placeholders from vars; a missing value is an error naming the option (a dry run shows the
-- placeholder instead, so it needs neither the tools nor their directories).
local OPTION_OF = { mlek = "--mlek", setools = "--setools", flasher = "--flasher", source_dir = "--mlek",
  build_dir = "--build-dir", activation_buf_sz = "--activation-buf-sz", tmp_mem_size = "--tmp-mem-size" }
local function fill_with(s, vars, where, lenient)
  return (tostring(s):gsub("<([%w_]+)>", function(k)
    local v = vars[k]
    if v == nil and lenient then return "<" .. k .. ">" end
    if v == nil then
      errors.fail("EUSAGE", ("%s needs %s (no value for <%s>)"):format(where, OPTION_OF[k] or ("<" .. k .. ">"), k))
    end
    return tostring(v)
  end))
end

local function fill_argv_with(argv, vars, where, defs, lenient)
  local out = {}
  for _, a in ipairs(argv) do
    if a == "<cmake_defs>" then
      for _, d in ipairs(defs) do out[#out + 1] = d end
    else
      out[#out + 1] = fill_with(a, vars, where, lenient)
    end
  end
  return out
end

local function parse_ranges(s)
  local out = {}
  for item in s:gmatch("[^,]+") do
    local a, n = item:match("^%s*(%w+):(%w+)%s*$")
    local start, size = a and M.parse_size(a, "rtt-ranges"), n and M.parse_size(n, "rtt-ranges")
    if not start or not size then errors.fail("EUSAGE", "--rtt-ranges: expected START:SIZE[,START:SIZE]") end
    out[#out + 1] = { start, size }
  end
  return out
end

--- Half the cores (docs/sources.md §8: the vendor guide's make -j$(($(nproc)/2))), at least 1.
function M.default_jobs()
  local r = proc.run { argv = { "nproc" }, timeout = 5 }
  local n = r and r.ok and tonumber(r.stdout:match("%d+")) or 2
  return math.max(1, n // 2)
end

-- Sizes and counts the firmware cannot hold (a 32-bit address, an int counter) are refused before the build: a
-- 6G activation buffer reached the firmware as 0x80000000, --inferences 2147483648 failed compiling it.
local function check_limits(p)
  local limits = p.device.build.limits or {}
  for _, k in ipairs({ "activation_buf_sz", "tmp_mem_size", "inferences" }) do
    local v, max = p[k], limits[k] or M.LIMITS[k]
    if v and (v < 0 or v > max) then
      local show = k == "inferences" and tostring or hex
      errors.fail("EUSAGE", ("--%s %s is more than %s's firmware holds: at most %s (%s)"):format(k:gsub("_", "-"),
        show(v), p.device.name, show(max), limits[k] and ("its device file's build.limits." .. k)
        or "a 32-bit Cortex-M's sizes and int counters"))
    end
  end
end

--- Turns options (a run's ctx.opts) and the device into the plan (its shape: at the top of this file).
-- A dry run leaves the <placeholders> it has no value for (it needs neither the tools nor their directories).
function M.make(o)
  local lenient = o.dry_run and true or false
  local function fill(s, vars, where) return fill_with(s, vars, where, lenient) end
  local dev = M.load_device(o.device)
  local b = dev.build
  local defaults = b.defaults or {}
  local steps = o.only or o.steps or M.STEPS
  local want = {}
  for _, s in ipairs(steps) do
    local known = false
    for _, k in ipairs(M.STEPS) do if k == s then known = true end end
    if s == "validate" or s == "report" then known = true end
    if not known then errors.fail("EUSAGE", ("unknown step '%s' (steps: build, flash, run)"):format(s)) end
    want[s] = true
  end
  -- the build's commands need every value only when the build runs (a flash of a file alone has no model)
  local lax_build = lenient or not want.build
  local p = {
    device = dev, steps = want, twin = dev.twin,
    memory_mode = o.memory_mode or defaults.memory_mode or "Dedicated_Sram",
    activation_buf_sz = M.parse_size(o.activation_buf_sz, "activation-buf-sz") or M.parse_size(defaults.activation_buf_sz, "activation-buf-sz"),
    tmp_mem_size = M.parse_size(o.tmp_mem_size, "tmp-mem-size") or M.parse_size(defaults.tmp_mem_size, "tmp-mem-size"),
    inferences = o.inferences,
    jobs = o.jobs or M.default_jobs(),
    model = o.model and (sys.realpath(o.model) or o.model),
    timeout = o.timeout,
    max_line = M.MAX_LINE,
    max_log = M.MAX_LOG,
    silent_every = M.SILENT_EVERY,
  }
  check_limits(p)
  local vars = {
    model = p.model, memory_mode = p.memory_mode, inferences = p.inferences, jobs = p.jobs,
    activation_buf_sz = p.activation_buf_sz and hex(p.activation_buf_sz),
    tmp_mem_size = p.tmp_mem_size and hex(p.tmp_mem_size),
    mlek = o.mlek and (sys.realpath(o.mlek) or o.mlek),
    setools = o.setools and (sys.realpath(o.setools) or o.setools),
    root = root(), target = b.target,
  }
  p.vars = vars
  -- source and build directories
  local where = dev.name
  p.source_dir = project_path(fill(b.source_dir or "<mlek>", vars, where .. ": build.source_dir"))
  vars.source_dir = p.source_dir
  local bdir = o.build_dir or (b.dir and fill(b.dir, vars, where .. ": build.dir")) or ("build/ethos_u-" .. dev.name)
  p.build_dir = (is_abs(bdir) or bdir:sub(1, 1) == "<") and bdir or ((sys.realpath(".") or ".") .. "/" .. bdir)
  vars.build_dir = p.build_dir
  -- --inputs: the build writes them, concatenated in the method's input order, into one file of the build
  -- directory (the same path every run: a new seed changes its bytes, not the cmake command)
  if o.inputs ~= nil then
    p.inputs_blob = p.build_dir .. "/odp-inputs.bin"
    vars.inputs = p.inputs_blob
  end
  if b.toolchain_file then
    local tf = fill(b.toolchain_file, vars, where)
    if not is_abs(tf) then
      local in_src = p.source_dir .. "/" .. tf
      tf = sys.stat(in_src) and in_src or project_path(tf)
    end
    vars.toolchain_file = tf
  end
  -- cmake definitions: the device's table, option-driven names overridden, memory-mode drops applied
  local cache = {}
  for k, v in pairs(b.cmake or {}) do cache[k] = v end
  if vars.toolchain_file and cache.CMAKE_TOOLCHAIN_FILE == nil then cache.CMAKE_TOOLCHAIN_FILE = "<toolchain_file>" end
  local vmap = {}
  for k, v in pairs(M.default_vars) do vmap[k] = v end
  for k, v in pairs(b.vars or {}) do vmap[k] = v end
  p.inputs_var = vmap.inputs and cache[vmap.inputs] ~= nil and vmap.inputs or nil
  for opt, name in pairs(vmap) do
    if name and cache[name] ~= nil and vars[opt] ~= nil then cache[name] = "<" .. opt .. ">" end
  end
  local modes = b.memory_modes or {}
  local mode_info = modes[p.memory_mode]
  if next(modes) and not mode_info then
    errors.fail("EUSAGE", ("memory mode %s is not supported by %s (%s)"):format(p.memory_mode, dev.name,
      table.concat((function() local t = {} for k in pairs(modes) do t[#t + 1] = k end table.sort(t) return t end)(), ", ")))
  end
  p.dropped = {}
  for _, name in ipairs(mode_info and mode_info.drop or {}) do
    if cache[name] ~= nil then cache[name] = nil p.dropped[#p.dropped + 1] = name end
  end
  local names = {}
  for k in pairs(cache) do names[#names + 1] = k end
  table.sort(names)
  p.cmake_defs = {}
  for _, k in ipairs(names) do
    local v = fill_with(cache[k], vars, where .. ": build.cmake." .. k, lax_build)
    -- a relative path in a device file names a project file (devices/twin_m55.lua: tests/fixtures/...)
    if v:match("^[%w_.%-]+/") and not is_abs(v) and sys.stat(root() .. "/" .. v) then v = root() .. "/" .. v end
    p.cmake_defs[#p.cmake_defs + 1] = ("-D%s=%s"):format(k, v)
  end
  -- commands
  local cmds = {}
  for k, v in pairs(M.default_commands) do cmds[k] = v end
  for k, v in pairs(dev.commands or {}) do cmds[k] = v end
  p.commands = cmds
  local benv = {}
  for k, v in pairs(b.env or {}) do benv[k] = fill_with(v, vars, where .. " build.env", lax_build) end
  p.build_env = benv
  local function cmd(name, extra, lax)
    local c = cmds[name]
    local v = setmetatable(extra or {}, { __index = vars })
    return { name = name, argv = fill_argv_with(c.argv, v, where .. " commands." .. name, p.cmake_defs, lenient or lax),
      cwd = c.cwd and fill_with(c.cwd, v, where .. " commands." .. name, lenient or lax),
      env = c.env == "build" and benv or nil }
  end
  p.configure = cmd("configure", nil, lax_build)
  p.build = cmd("build", nil, lax_build)
  p.state = {}
  for i, argv in ipairs(b.state or {}) do
    p.state[i] = { name = "state", argv = fill_argv_with(argv, vars, where .. " build.state", {}, lax_build) }
  end
  -- build outputs
  local outs = b.outputs or {}
  p.mram = p.build_dir .. "/" .. (outs.mram or "bin/sectors/executorch_inference_runner/mram.bin")
  p.ext_flash = p.build_dir .. "/" .. (outs.ext_flash or "bin/sectors/executorch_inference_runner/ext_flash.bin")
  -- flasher image: --flasher, --flasher-dir + the device's path, or the device's build output (the twin)
  local st = dev.setools or {}
  if o.flasher then p.flasher = o.flasher
  elseif o.flasher_dir then p.flasher = o.flasher_dir .. "/" .. (st.flasher_build or "out/flasher/E8-HE/debug/flasher.bin")
  elseif outs.flasher then p.flasher = p.build_dir .. "/" .. outs.flasher end
  -- SETOOLS: run in place (the real tools), or from a scratch copy of the stand-ins' configs (the twin)
  if want.flash then
    local sdir = st.dir and fill(st.dir, vars, where .. ": setools.dir")
    if sdir then
      sdir = project_path(sdir)
      p.setools_bin = sys.realpath(sdir) or sdir
      p.setools_dir = p.setools_bin
      p.setools_copy = dev.twin ~= nil
    end
    local sv = { setools_bin = p.setools_bin or "<setools>", setools_dir = p.setools_dir or "<setools>" }
    if p.setools_copy then sv.setools_dir = "<run_dir>/setools" end
    sv.cfg = st.flasher_cfg or "build/config/flasher-cfg.json"
    p.gen_toc_flasher = cmd("gen_toc", sv)
    p.write_mram_flasher = cmd("write_mram", sv)
    local sv2 = { cfg = st.app_cfg or "build/config/asr.json", setools_bin = sv.setools_bin, setools_dir = sv.setools_dir }
    p.gen_toc_app = cmd("gen_toc", sv2)
    p.write_mram_app = cmd("write_mram", sv2)
    p.flasher_image = st.flasher_image or "build/images/flasher_he.bin"
    p.app_image = st.app_image or "build/images/mram.bin"
  end
  -- probe and RTT
  local pr, rt = dev.probe or {}, dev.rtt or {}
  p.probe_backend = o.probe or pr.backend or "jlink"
  p.rtt_address = o.rtt_address and M.parse_size(o.rtt_address, "rtt-address") or rt.address
  p.rtt_ranges = o.rtt_ranges and parse_ranges(o.rtt_ranges) or rt.ranges
  p.flasher_ranges = o.rtt_ranges and p.rtt_ranges or rt.flasher_ranges or p.rtt_ranges
  p.rtt_channel = rt.channel or 0
  p.lines = setmetatable(dev.lines or {}, { __index = {
    inference = "^Inference: (%S+) ms", flasher_start = "Starting xmodemReceive...",
    flasher_ok = "^Success, (%d+) bytes received%.$", flasher_crc = "^CRC32: (%x+)$",
    flasher_fail = "^Failed = (%-?%d+)$" } })
  p.xmodem_mode = (dev.xmodem or {}).mode or "1k"
  return p
end

return M
