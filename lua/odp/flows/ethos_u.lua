--- The Ethos-U flow (Alif E8 and its QEMU twin): the model is compiled into firmware, so a run is
--   validate -> build (cmake + make, stale-build guard) -> flash (SETOOLS + XMODEM over RTT + SWD reset)
--   -> run (RTT capture, base64 artifacts) -> report (the result record).
-- Everything board-specific is data in the device file (devices/alif_e8.lua, devices/twin_m55.lua),
-- commands included; docs/alif_e8.md walks through it.
local errors = require("odp.errors")
local result = require("odp.result")
local sys = require("odp.sys")
local proc = require("odp.proc")
local json = require("odp.json")
local artifacts = require("odp.parse.artifacts")

local M = { name = "ethos_u" }

M.STEPS = { "build", "flash", "run" } -- validate runs first and report last, whatever --steps says
M.MEMORY_MODES = { "Dedicated_Sram", "Shared_Sram", "Sram_Only" }
M.MAX_LINE = 128 * 1024 * 1024 -- an RTT line longer than this is cut (a base64 artifact is one line)

--- Options of every Ethos-U script (cli option entries, see odp.cli).
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
  { "activation-buf-sz", "Activation (tensor arena) buffer size, bytes (0x.. or K/M suffix)", nil, "string", metavar = "SIZE" },
  { "tmp-mem-size", "ML framework temporary memory size, bytes", nil, "string", metavar = "SIZE" },
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
  { "rtt-address", "Address of the RTT control block (_SEGGER_RTT in the map file)", nil, "string" },
  { "rtt-ranges", "RTT search ranges START:SIZE[,START:SIZE]", nil, "string" },
  { "no-reset", "Run step alone: attach without an SWD reset (the firmware keeps running)", false, "bool" },
  { "twin-state", "Twin only: its state directory (default: $ODP_TWIN_STATE or runs/<id>/twin)", nil, "string", metavar = "DIR" },
  { "keep-twin", "Twin only: leave QEMU running at the end (for a later --only run)", false, "bool" },
  { "runs-dir", "Where each run leaves build.log, rtt.log, artifacts and result.json", "runs", "string", metavar = "DIR" },
}

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

local function root() return require("odp.host").root end
local function is_abs(p) return p:sub(1, 1) == "/" end
local function basename(p) return (p:match("([^/]+)$")) end

-- A path from a device file: absolute, or relative to the project (tests/twin/...), else to the cwd.
local function project_path(p)
  if is_abs(p) then return p end
  local r = root() .. "/" .. p
  if sys.stat(r) then return r end
  return p
end

local function shell_quote(s)
  s = tostring(s)
  if s:match("^[%w%./_:=,+@%-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end
M.shell_quote = shell_quote

--- Parses a size: 0x600000, 6291456, 6M, 256K.
function M.parse_size(s, what)
  if s == nil then return nil end
  if type(s) == "number" then return math.tointeger(s) end
  local t = tostring(s):gsub("_", "")
  local n
  if t:match("^0[xX]%x+$") then n = tonumber(t:sub(3), 16)
  elseif t:match("^%d+$") then n = tonumber(t)
  else
    local d, u = t:match("^(%d+)([kKmM])i?[bB]?$")
    if d then n = tonumber(d) * (u:lower() == "k" and 1024 or 1024 * 1024) end
  end
  if not n then errors.fail("EUSAGE", ("--%s: '%s' is not a size (0x600000, 6291456, 6M)"):format(what, s), 2) end
  return math.tointeger(n)
end

local function hex(n) return ("0x%08X"):format(n) end

--- Loads a device file: a path (relative to the cwd, else to the project).
function M.load_device(path)
  local p = path
  if not sys.stat(p) and not is_abs(p) then p = root() .. "/" .. path end
  if not sys.stat(p) then errors.fail("EUSAGE", ("device file %s not found"):format(path), 2) end
  local ok, dev = pcall(dofile, p)
  if not ok then errors.fail("EUSAGE", ("device file %s: %s"):format(path, tostring(dev)), 2) end
  if type(dev) ~= "table" or type(dev.build) ~= "table" then
    errors.fail("EUSAGE", ("device file %s does not describe an Ethos-U board (no build table)"):format(path), 2)
  end
  dev.path = p
  return dev
end

-- Fills <name> placeholders from vars; a missing value is an error naming the option (a dry run shows the
-- placeholder instead, so it needs neither the tools nor their directories).
local OPTION_OF = { mlek = "--mlek", setools = "--setools", flasher = "--flasher", source_dir = "--mlek",
  build_dir = "--build-dir", activation_buf_sz = "--activation-buf-sz", tmp_mem_size = "--tmp-mem-size" }
local lenient = false
local function fill(s, vars, where)
  return (tostring(s):gsub("<([%w_]+)>", function(k)
    local v = vars[k]
    if v == nil and lenient then return "<" .. k .. ">" end
    if v == nil then
      errors.fail("EUSAGE", ("%s needs %s (no value for <%s>)"):format(where, OPTION_OF[k] or ("<" .. k .. ">"), k), 2)
    end
    return tostring(v)
  end))
end

local function fill_argv(argv, vars, where, defs)
  local out = {}
  for _, a in ipairs(argv) do
    if a == "<cmake_defs>" then
      for _, d in ipairs(defs) do out[#out + 1] = d end
    else
      out[#out + 1] = fill(a, vars, where)
    end
  end
  return out
end

local function parse_ranges(s)
  local out = {}
  for item in s:gmatch("[^,]+") do
    local a, n = item:match("^%s*(%w+):(%w+)%s*$")
    local start, size = a and M.parse_size(a, "rtt-ranges"), n and M.parse_size(n, "rtt-ranges")
    if not start or not size then errors.fail("EUSAGE", "--rtt-ranges: expected START:SIZE[,START:SIZE]", 2) end
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

--- Turns options + device into everything the steps need: sizes, cmake definitions, commands, paths.
-- Pure apart from reading the device file and stat: no tool needs to exist (dry-run uses it).
function M.plan(ctx)
  local o = ctx.opts
  lenient = o.dry_run and true or false
  local dev = ctx.device or M.load_device(o.device)
  local b = dev.build
  local defaults = b.defaults or {}
  local steps = o.only or o.steps or M.STEPS
  local want = {}
  for _, s in ipairs(steps) do
    local known = false
    for _, k in ipairs(M.STEPS) do if k == s then known = true end end
    if s == "validate" or s == "report" then known = true end
    if not known then errors.fail("EUSAGE", ("unknown step '%s' (steps: build, flash, run)"):format(s), 2) end
    want[s] = true
  end
  local p = {
    device = dev, steps = want, twin = dev.twin,
    memory_mode = o.memory_mode or defaults.memory_mode or "Dedicated_Sram",
    activation_buf_sz = M.parse_size(o.activation_buf_sz, "activation-buf-sz") or M.parse_size(defaults.activation_buf_sz, "activation-buf-sz"),
    tmp_mem_size = M.parse_size(o.tmp_mem_size, "tmp-mem-size") or M.parse_size(defaults.tmp_mem_size, "tmp-mem-size"),
    inferences = o.inferences,
    jobs = o.jobs or M.default_jobs(),
    model = sys.realpath(o.model) or o.model,
    timeout = o.timeout,
  }
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
  for opt, name in pairs(vmap) do
    if name and cache[name] ~= nil and vars[opt] ~= nil then cache[name] = "<" .. opt .. ">" end
  end
  local modes = b.memory_modes or {}
  local mode_info = modes[p.memory_mode]
  if next(modes) and not mode_info then
    errors.fail("EUSAGE", ("memory mode %s is not supported by %s (%s)"):format(p.memory_mode, dev.name,
      table.concat((function() local t = {} for k in pairs(modes) do t[#t + 1] = k end table.sort(t) return t end)(), ", ")), 2)
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
    local v = fill(cache[k], vars, where .. ": build.cmake." .. k)
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
  for k, v in pairs(b.env or {}) do benv[k] = fill(v, vars, where .. " build.env") end
  p.build_env = benv
  local function cmd(name, extra)
    local c = cmds[name]
    local v = setmetatable(extra or {}, { __index = vars })
    return { name = name, argv = fill_argv(c.argv, v, where .. " commands." .. name, p.cmake_defs),
      cwd = c.cwd and fill(c.cwd, v, where .. " commands." .. name),
      env = c.env == "build" and benv or nil }
  end
  p.configure = cmd("configure")
  p.build = cmd("build")
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
    inference = "^Inference: ([%d.]+) ms", flasher_start = "Starting xmodemReceive...",
    flasher_ok = "^Success, (%d+) bytes received%.$", flasher_crc = "^CRC32: (%x+)$",
    flasher_fail = "^Failed = (%-?%d+)$" } })
  p.xmodem_mode = (dev.xmodem or {}).mode or "1k"
  return p
end

------------------------------------------------------------------------------------------------ validate

local function which(prog)
  if prog:find("/") then
    local st = sys.stat(prog)
    return st and st.executable and prog or nil
  end
  for dir in (os.getenv("PATH") or "/usr/bin:/bin"):gmatch("[^:]+") do
    local st = sys.stat(dir .. "/" .. prog)
    if st and st.type == "file" and st.executable then return dir .. "/" .. prog end
  end
end
M.which = which

M.JLINK_DIRS = { "/opt/SEGGER/JLink", "/usr/lib", "/usr/local/lib", "/opt/SEGGER/JLink_Linux" }

function M.jlink_lib(opts)
  local cands = { opts.jlink_lib, os.getenv("ODP_JLINK_LIB") }
  for _, d in ipairs(M.JLINK_DIRS) do cands[#cands + 1] = d .. "/libjlinkarm.so" end
  for i = 1, #M.JLINK_DIRS + 2 do
    local c = cands[i]
    if c and sys.stat(c) then return c end
  end
end

--- Checks before anything touches the build tree or the board. Errors exit 2 (usage) with one line.
-- Warnings go through ctx.ui (and into the record).
function M.validate(ctx, p)
  local o, ui = ctx.opts, ctx.ui
  -- the model: ET12, and its Ethos-U scratch must fit the activation buffer
  local ok_pte, pte = pcall(require, "odp.pte")
  local f = io.open(o.model, "rb")
  local head = f and f:read(8) or ""
  if f then f:close() end
  if head:sub(5, 8) ~= "ET12" then
    errors.fail("EUSAGE", ("model %s is not an ExecuTorch program (identifier '%s', expected 'ET12')")
      :format(o.model, (head:sub(5, 8):gsub("[^%g]", "?"))), 2)
  end
  p.scratch_size = nil
  if ok_pte then
    local info, err = pte.read(o.model)
    if not info then errors.fail("EUSAGE", ("model %s: %s"):format(o.model, (err:gsub("^E%u+: ", ""))), 2) end
    local ethos = false
    for _, d in ipairs(pte.delegates(info)) do
      if d.backend == "EthosUBackend" then ethos = true end
    end
    p.scratch_size = pte.scratch_size(info)
    p.ethos_delegate = ethos
    if not ethos then
      ui:warn("model %s has no EthosUBackend delegate: it will run on the CPU alone (no NPU)", basename(o.model))
    elseif p.scratch_size and p.activation_buf_sz and p.scratch_size > p.activation_buf_sz then
      errors.fail("EUSAGE", ("the model's Vela scratch_size is %d bytes (%s) but --activation-buf-sz is %d bytes " ..
        "(%s): raise --activation-buf-sz to at least %s"):format(p.scratch_size, hex(p.scratch_size),
        p.activation_buf_sz, hex(p.activation_buf_sz), hex(p.scratch_size)), 2)
    end
  else
    ui:warn("odp.pte is not available: the activation buffer was not checked against the model's scratch size")
  end
  if p.steps.build then
    if not p.activation_buf_sz then errors.fail("EUSAGE", "--activation-buf-sz is required (the device file has no default)", 2) end
    ui:info("memory mode %s (it must be the mode the .pte was compiled for with Vela, or the device faults)%s",
      p.memory_mode, #p.dropped > 0 and ("; dropped " .. table.concat(p.dropped, ", ")) or "")
  end
  if o.dry_run then return end
  -- tools, only for the steps asked for
  local missing = {}
  local function need(prog, why)
    if not which(prog) then missing[#missing + 1] = ("%s (%s)"):format(prog, why) end
  end
  if p.steps.build then
    need(p.configure.argv[1], "build: configure")
    need(p.build.argv[1], "build")
    need(p.device.build.compiler or "arm-none-eabi-gcc", "build: compiler")
    local st = sys.stat(p.source_dir)
    if not st or st.type ~= "dir" then
      missing[#missing + 1] = ("the source tree %s (--mlek)"):format(p.source_dir)
    end
  end
  if p.steps.flash then
    for _, c in ipairs({ p.gen_toc_flasher, p.write_mram_flasher }) do need(c.argv[1], "flash: SETOOLS (--setools)") end
    if not p.flasher or not sys.stat(p.flasher) then
      if not p.steps.build or not (p.device.build.outputs or {}).flasher then
        missing[#missing + 1] = ("the flasher image %s (--flasher or --flasher-dir)"):format(p.flasher or "?")
      end
    end
    if not p.steps.build then
      for _, f2 in ipairs({ p.mram, p.ext_flash }) do
        if not sys.stat(f2) then missing[#missing + 1] = ("%s (run the build step first)"):format(f2) end
      end
    end
  end
  if (p.steps.flash or p.steps.run) then
    if p.probe_backend == "jlink" and not M.jlink_lib(o) then
      missing[#missing + 1] = "the J-Link library libjlinkarm.so (--jlink-lib, ODP_JLINK_LIB, or install SEGGER's J-Link software)"
    end
    if p.twin and p.steps.flash then need("qemu-system-arm", "twin") end
  end
  if #missing > 0 then
    errors.fail("ENOTFOUND", "missing: " .. table.concat(missing, "; "), 2)
  end
end

------------------------------------------------------------------------------------------------ dry run

local function cmd_line(c)
  local parts = {}
  if c.cwd then parts[#parts + 1] = "cd " .. shell_quote(c.cwd) .. " &&" end
  if c.env then
    local ks = {}
    for k in pairs(c.env) do ks[#ks + 1] = k end
    table.sort(ks)
    for _, k in ipairs(ks) do parts[#parts + 1] = k .. "=" .. shell_quote(c.env[k]) end
  end
  for _, a in ipairs(c.argv) do parts[#parts + 1] = shell_quote(a) end
  return table.concat(parts, " ")
end
M.cmd_line = cmd_line

--- The commands and actions of the selected steps, as lines (what --dry-run prints).
function M.describe(p)
  local out = {}
  local function say(fmt, ...) out[#out + 1] = fmt:format(...) end
  local probe_desc = p.probe_backend == "jlink" and
    ("J-Link %s, %s %d kHz"):format((p.device.probe or {}).jlink_device or "?", (p.device.probe or {}).interface or "swd",
      (p.device.probe or {}).speed_khz or 4000) or p.probe_backend
  local function ranges(r)
    if not r then return "?" end
    local t = {}
    for _, x in ipairs(r) do t[#t + 1] = ("%s+%s"):format(hex(x[1]), hex(x[2])) end
    return table.concat(t, ",")
  end
  if p.steps.build then
    say("# build (stale-build guard: inputs hashed into %s/odp-build-inputs.txt; wiped and reconfigured on change)", p.build_dir)
    say("%s", cmd_line(p.configure))
    say("%s", cmd_line(p.build))
    say("#   -> %s", p.mram)
    say("#   -> %s", p.ext_flash)
  end
  if p.steps.flash then
    say("# flash")
    if p.setools_copy then say("cp -R %s/build <run_dir>/setools/", shell_quote(p.setools_bin or "?")) end
    local sd = p.gen_toc_flasher.cwd or "."
    say("cp %s %s", shell_quote(p.flasher or "<flasher.bin>"), shell_quote(sd .. "/" .. p.flasher_image))
    say("%s", cmd_line(p.gen_toc_flasher))
    say("%s", cmd_line(p.write_mram_flasher))
    say("# probe %s (%s): halt, clear the stale RTT ID, SWD reset, attach RTT %s, wait for '%s'", p.probe_backend,
      (p.device.probe or {}).flasher_jlink_device or probe_desc, ranges(p.flasher_ranges), p.lines.flasher_start)
    say("# xmodem-%s send %s over RTT channel %d; expect '%s'", p.xmodem_mode, shell_quote(p.ext_flash), p.rtt_channel,
      p.lines.flasher_ok)
    say("cp %s %s", shell_quote(p.mram), shell_quote(sd .. "/" .. p.app_image))
    say("%s", cmd_line(p.gen_toc_app))
    say("%s", cmd_line(p.write_mram_app))
    say("# probe %s: halt, clear the stale RTT ID, SWD reset (boots the firmware)", probe_desc)
  end
  if p.steps.run then
    say("# run: attach RTT (%s), read channel %d until %d Inference: lines (timeout %ss), decode base64 blocks",
      p.rtt_address and hex(p.rtt_address) or ranges(p.rtt_ranges), p.rtt_channel, p.inferences, tostring(p.timeout or "?"))
  end
  say("# report: result record (latency from Inference: lines, PMU counters, ETDump op table in cycles)")
  return out
end

------------------------------------------------------------------------------------------------ build

-- The inputs the build depends on, as sorted "key=value" lines (hashed by the stale-build guard).
function M.build_inputs(ctx, p)
  local lines = {}
  local function add(k, v) lines[#lines + 1] = k .. "=" .. tostring(v) end
  add("device", p.device.name)
  add("source_dir", p.source_dir)
  add("model.sha256", (sys.sha256_file(p.model)))
  for _, d in ipairs(p.cmake_defs) do
    local k, v = d:match("^%-D([^=]+)=(.*)$")
    add("cmake." .. (k or d), v or "")
  end
  add("configure", table.concat(p.configure.argv, " "))
  if p.vars.toolchain_file and sys.stat(p.vars.toolchain_file) then
    add("toolchain.sha256", (sys.sha256_file(p.vars.toolchain_file)))
  end
  for i, argv in ipairs(p.device.build.state or {}) do
    local filled = fill_argv(argv, p.vars, "device build.state", {})
    local r = proc.run { argv = filled, timeout = 60, capture_limit = 64 * 1024 * 1024 }
    local text = r and (("%s\nstatus %s\n"):format(r.stdout, tostring(r.status))) or "not run"
    add(("state.%d"):format(i), table.concat(filled, " ") .. " -> sha256:" .. sys.sha256(text))
  end
  return table.concat(lines, "\n") .. "\n"
end

local STAMP = "odp-build-inputs.txt"

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local d = f:read("a")
  f:close()
  return d
end
M.read_file = read_file

local function rm_rf(dir)
  local r = proc.run { argv = { "rm", "-rf", "--", dir }, timeout = 120 }
  if not r or not r.ok then errors.fail("EIO", ("could not remove %s"):format(dir), 3) end
end

-- What changed between two input texts, for the log line.
local function diff_keys(old, new)
  local a, b, changed = {}, {}, {}
  for k, v in old:gmatch("([^=\n]+)=([^\n]*)") do a[k] = v end
  for k, v in new:gmatch("([^=\n]+)=([^\n]*)") do b[k] = v end
  for k, v in pairs(b) do if a[k] ~= v then changed[#changed + 1] = k end end
  for k in pairs(a) do if b[k] == nil then changed[#changed + 1] = k end end
  table.sort(changed)
  return changed
end

-- Runs one command, its output appended to the build log and fed to on_line; returns the proc result.
local function run_logged(c, log_path, timeout, on_line)
  local logf = assert(io.open(log_path, "a"))
  logf:write("$ ", cmd_line(c), "\n")
  logf:flush()
  local pending = ""
  local function feed(chunk)
    logf:write(chunk)
    pending = pending .. chunk
    while true do
      local line, rest = pending:match("^([^\n]*)\n(.*)$")
      if not line then break end
      pending = rest
      if on_line then on_line(line) end
    end
    if #pending > 65536 then pending = pending:sub(-4096) end
  end
  local r, err = proc.run { argv = c.argv, cwd = c.cwd, env = c.env, timeout = timeout,
    on_stdout = feed, on_stderr = feed, capture_limit = 1 }
  logf:write(("\n# exit %s%s\n"):format(r and tostring(r.status) or "?", r and r.timed_out and " (timed out)" or ""))
  logf:close()
  if not r then errors.fail("EIO", ("%s: %s"):format(c.name, err), 3) end
  return r
end

local function tail_lines(path, n)
  local f = io.open(path, "rb")
  if not f then return "" end
  local all = {}
  for line in f:lines() do
    all[#all + 1] = line
    if #all > n * 4 then table.move(all, #all - n + 1, #all, 1) for i = n + 1, #all do all[i] = nil end end
  end
  f:close()
  return table.concat(all, "\n", math.max(1, #all - n + 1), #all)
end
M.tail_lines = tail_lines

function M.build_step(ctx, p, rec, run_dir)
  local ui, o = ctx.ui, ctx.opts
  local log = run_dir .. "/build.log"
  rec.artifacts.build_log = log
  local inputs = M.build_inputs(ctx, p)
  local hash = sys.sha256(inputs)
  local stamp_path = p.build_dir .. "/" .. STAMP
  local old = read_file(stamp_path)
  local st = sys.stat(p.build_dir)
  local reconfigure, reason = false, nil
  if not st then
    reconfigure, reason = true, "new build directory"
  elseif not old then
    local has_cache = sys.stat(p.build_dir .. "/CMakeCache.txt")
    local entries = sys.readdir(p.build_dir) or {}
    if not has_cache and #entries > 0 then
      errors.fail("EUSAGE", ("build directory %s exists but is neither empty nor a cmake build: refusing to wipe it " ..
        "(pass --build-dir)"):format(p.build_dir), 2)
    end
    reconfigure, reason = true, has_cache and "a build odp did not configure (no input record): wiped" or "empty build directory"
  elseif old:match("^sha256 (%x+)") ~= hash then
    local changed = diff_keys(old:gsub("^[^\n]*\n", ""), inputs)
    reconfigure, reason = true, "inputs changed: " .. table.concat(changed, ", ")
  end
  rec.build = { dir = p.build_dir, inputs_sha256 = hash, rebuilt = reconfigure, reason = reason or "up to date" }
  local t0 = sys.now()
  if reconfigure then
    ui:info("build: %s -> wiping %s and reconfiguring", reason, p.build_dir)
    if st then rm_rf(p.build_dir) end
    assert(sys.mkdir_p(p.build_dir))
    local r = run_logged(p.configure, log, o.build_timeout)
    if not r.ok then
      local tail = tail_lines(log, 30)
      ui:info("last 30 lines of %s:\n%s", log, tail)
      rec.build.log_tail = tail
      errors.fail("EIO", ("build failed at configure (%s); the last 30 lines are above, all of it in %s"):format(r.timed_out and "timed out" or
        ("exit " .. tostring(r.status)), log), 1)
    end
    assert(sys.write_file(stamp_path, "sha256 " .. hash .. "\n" .. inputs))
  else
    ui:info("build: inputs unchanged (%s): incremental", hash:sub(1, 12))
  end
  local bar = ui:progress("build", 100)
  local r = run_logged(p.build, log, o.build_timeout, function(line)
    local pct = line:match("^%[%s*(%d+)%%%]")
    if pct then bar:update(tonumber(pct), line:match("%]%s*(.-)%s*$"):sub(1, 40)) end
  end)
  bar:finish()
  rec.build.wall_s = sys.now() - t0
  if not r.ok then
    local tail = tail_lines(log, 30)
    ui:info("last 30 lines of %s:\n%s", log, tail)
    rec.build.log_tail = tail
    errors.fail("EIO", ("build failed (%s); the last 30 lines are above, all of it in %s"):format(r.timed_out and
      "timed out" or ("exit " .. tostring(r.status)), log), 1)
  end
  for _, out in ipairs({ p.mram, p.ext_flash }) do
    if not sys.stat(out) then errors.fail("ENOTFOUND", ("the build succeeded but %s is missing"):format(out), 1) end
  end
  rec.images = { mram = result.file_info(p.mram), ext_flash = result.file_info(p.ext_flash) }
  ui:info("build: done in %.1f s", rec.build.wall_s)
end


------------------------------------------------------------------------------------------------ probe, RTT

local function need_module(name)
  local ok, m = pcall(require, name)
  if not ok then errors.fail("ENOTFOUND", ("this odp has no %s module (%s)"):format(name, tostring(m):match("^[^\n]*")), 3) end
  return m
end

local function twin_file(p, name)
  local v = read_file(p.twin_state .. "/" .. name)
  if not v then
    errors.fail("ENODEV", ("no twin running in %s (no %s file): run the flash step first, or pass --twin-state")
      :format(p.twin_state, name), 3)
  end
  return (v:gsub("%s+$", ""))
end

--- Opens the probe for the flasher ("flasher") or the application core ("app").
function M.open_probe(ctx, p, which)
  local probe_mod = need_module("odp.probe")
  local pr, o = p.device.probe or {}, ctx.opts
  local args
  if p.probe_backend == "qemu" then
    args = { backend = "qemu", shm = twin_file(p, "shm"), base = pr.base or 0x60000000,
      qmp = "127.0.0.1:" .. twin_file(p, "qmp_port") }
  elseif p.probe_backend == "gdb" then
    args = { backend = "gdb", address = o.gdb_address or ("127.0.0.1:" .. twin_file(p, "gdb_port")) }
  else
    args = { backend = "jlink", device = which == "flasher" and pr.flasher_jlink_device or pr.jlink_device,
      speed_khz = pr.speed_khz or 4000, lib = M.jlink_lib(o) }
  end
  local probe, err, code = probe_mod.open(args)
  if not probe then errors.fail(code or "ENODEV", ("probe (%s): %s"):format(p.probe_backend, (tostring(err):gsub("^E%u+: ", ""))), 3) end
  return probe
end

-- RAM survives a reset: zero every RTT ID the probe can see (halted) so the next attach finds only the block
-- the restarted firmware writes, never a stale one.
local ID = "SEGGER RTT"
function M.clear_stale_id(probe, address, ranges)
  local cleared = 0
  local function wipe(addr)
    local ok = probe:write(addr, ("\0"):rep(16))
    if ok then cleared = cleared + 1 end
  end
  if address then
    local d = probe:read(address, 16)
    if d and d:sub(1, #ID) == ID then wipe(address) end
    return cleared
  end
  for _, r in ipairs(ranges or {}) do
    local start, size = r[1], r[2]
    local step = 0x10000
    for off = 0, size - 1, step do
      local n = math.min(step + 16, size - off)
      local d = probe:read(start + off, n)
      if d then
        local i = 1
        while true do
          local s = d:find(ID, i, true)
          if not s then break end
          if s <= step then wipe(start + off + s - 1) end
          i = s + 1
        end
      end
    end
  end
  return cleared
end

--- SWD reset with stale-block protection: halt, clear old IDs, reset and run.
function M.fresh_reset(ctx, probe, p, ranges)
  probe:halt()
  local n = M.clear_stale_id(probe, p.rtt_address, ranges)
  ctx.ui:debug("reset: cleared %d stale RTT id(s)", n)
  errors.check(probe:reset())
end

function M.attach(ctx, probe, p, ranges, timeout, what)
  local rtt_mod = need_module("odp.rtt")
  local where = p.rtt_address and { address = p.rtt_address } or { ranges = ranges }
  local rtt, err, code = rtt_mod.attach(probe, where, { timeout = timeout })
  if not rtt then
    local desc = p.rtt_address and hex(p.rtt_address) or (function()
      local t = {}
      for _, x in ipairs(ranges or {}) do t[#t + 1] = hex(x[1]) .. "+" .. hex(x[2]) end
      return table.concat(t, ",")
    end)()
    errors.fail(code == "ETIMEDOUT" and "ETIMEDOUT" or (code or "ENOTFOUND"),
      ("%s: no RTT control block within %.0f s after the SWD reset (searched %s): the image did not boot, " ..
       "or its RTT block is elsewhere (--rtt-address / --rtt-ranges) [%s]"):format(what, timeout, desc,
       (tostring(err):gsub("^E%u+: ", ""))), 3)
  end
  return rtt
end

--- A line reader over an RTT channel that keeps the raw log with host timestamps.
local Reader = {}
Reader.__index = Reader

function M.reader(stream, log_path)
  local logf = log_path and assert(io.open(log_path, "ab"))
  return setmetatable({ stream = stream, buf = "", log = logf, bytes = 0, lines = 0, last_data = sys.now() }, Reader)
end

function Reader:_log_line(line)
  if self.log then
    local t = sys.time()
    self.log:write(("%s.%06dZ %s\n"):format(os.date("!%Y-%m-%dT%H:%M:%S", math.floor(t)),
      math.floor((t % 1) * 1e6), line))
  end
end

--- Next line (without newline) or nil, "timeout" after timeout seconds without a whole line.
function Reader:line(timeout)
  local deadline = sys.now() + timeout
  while true do
    local nl = self.buf:find("\n", 1, true)
    if nl then
      local line = self.buf:sub(1, nl - 1):gsub("\r$", "")
      self.buf = self.buf:sub(nl + 1)
      self.lines = self.lines + 1
      self:_log_line(line)
      return line
    end
    if #self.buf > M.MAX_LINE then
      local line = self.buf
      self.buf = ""
      self:_log_line(line:sub(1, 200) .. " ...[cut]")
      return line
    end
    local left = deadline - sys.now()
    if left <= 0 then return nil, "timeout" end
    local data, err, code = self.stream:read(65536, { timeout = math.min(left, 0.25) })
    if data and #data > 0 then
      self.buf = self.buf .. data
      self.bytes = self.bytes + #data
      self.last_data = sys.now()
    elseif data == nil and code ~= "ETIMEDOUT" then
      errors.fail(code or "EIO", "RTT read: " .. tostring(err):gsub("^E%u+: ", ""), 3)
    end
  end
end

--- Hands bytes read past the last line back to the stream (XMODEM must see the flasher's 'C').
function Reader:give_back()
  if #self.buf > 0 then self.stream:unread(self.buf) self.buf = "" end
end

function Reader:close()
  if #self.buf > 0 then self:_log_line(self.buf .. " [no newline]") self.buf = "" end
  if self.log then self.log:close() self.log = nil end
end

------------------------------------------------------------------------------------------------ flash

local CRC_TABLE
--- zlib's CRC-32 (what the twin flasher prints).
function M.crc32(s, crc)
  if not CRC_TABLE then
    CRC_TABLE = {}
    for i = 0, 255 do
      local c = i
      for _ = 1, 8 do c = (c & 1 == 1) and (0xEDB88320 ~ (c >> 1)) or (c >> 1) end
      CRC_TABLE[i] = c
    end
  end
  crc = (crc or 0) ~ 0xFFFFFFFF
  for i = 1, #s do crc = CRC_TABLE[(crc ~ s:byte(i)) & 0xFF] ~ (crc >> 8) end
  return crc ~ 0xFFFFFFFF
end

local function copy_file(src, dst)
  local data = read_file(src)
  if not data then errors.fail("ENOTFOUND", ("cannot read %s"):format(src), 3) end
  local ok, err = sys.write_file(dst, data)
  if not ok then errors.fail("EIO", ("cannot write %s: %s"):format(dst, tostring(err)), 3) end
end

local function setools_cmd(ctx, p, c, log)
  local env = {}
  if p.twin then env[(p.twin.state_env or "ODP_TWIN_STATE")] = p.twin_state end
  c = { name = c.name, argv = c.argv, cwd = c.cwd, env = env }
  ctx.ui:info("flash: %s", table.concat(c.argv, " "):gsub("^%S*/", ""))
  local r = run_logged(c, log, ctx.opts.flash_timeout)
  if not r.ok then
    errors.fail("EIO", ("flash: %s failed (%s); output in %s:\n%s"):format(basename(c.argv[1]),
      r.timed_out and "timed out" or ("exit " .. tostring(r.status)), log, tail_lines(log, 10)), 3)
  end
end

-- Sends ext_flash.bin to the flasher over RTT and checks its answer.
local function xmodem_ext_flash(ctx, p, rec, rtt, rlog)
  local o, ui = ctx.opts, ctx.ui
  local xmodem = need_module("odp.xmodem")
  local ch = rtt:channel(p.rtt_channel)
  local rd = M.reader(ch, rlog)
  local deadline = sys.now() + o.flash_timeout
  local started = false
  while sys.now() < deadline do
    local line = rd:line(math.min(1, deadline - sys.now()))
    if line and line:find(p.lines.flasher_start, 1, true) then started = true break end
    if line and line:find(p.lines.flasher_fail) then
      rd:close()
      errors.fail("EPROTO", ("flash: the flasher failed before the transfer: %s"):format(line), 3)
    end
  end
  if not started then
    rd:close()
    errors.fail("ETIMEDOUT", ("flash: the flasher never said '%s' nor sent 'C' within %.0f s: check the flasher " ..
      "image (--flasher) and the RTT ranges (--rtt-ranges); raw RTT log in %s"):format(p.lines.flasher_start,
      o.flash_timeout, rlog), 3)
  end
  rd:give_back()
  local size = sys.stat(p.ext_flash).size
  local bar = ui:progress("xmodem " .. basename(p.ext_flash), size, "bytes")
  local t0 = sys.now()
  local r, err, code = xmodem.send(ch, p.ext_flash, { mode = p.xmodem_mode, timeout = o.flash_timeout,
    on_progress = function(done) bar:update(done) end })
  bar:finish()
  rec.flash.xmodem = r and { bytes = r.bytes, blocks = r.blocks, retries = r.retries, wall_s = sys.now() - t0 } or nil
  -- whatever the flasher says next (Success/CRC32 or Failed = n)
  local ok_n, crc, fail_line
  local answer_deadline = sys.now() + math.min(o.flash_timeout, 10)
  while sys.now() < answer_deadline and not fail_line and not (ok_n and crc) do
    local line = rd:line(math.max(0.05, answer_deadline - sys.now()))
    if not line then break end
    ok_n = ok_n or line:match(p.lines.flasher_ok)
    crc = crc or line:match(p.lines.flasher_crc)
    if line:find(p.lines.flasher_fail) then fail_line = line end
    if ok_n and not p.device.twin and not crc then
      -- Alif's flasher prints no CRC: give it a moment, then go on with the byte count alone
      local l2 = rd:line(0.5)
      crc = l2 and l2:match(p.lines.flasher_crc)
      break
    end
  end
  rd:close()
  if not r then
    errors.fail(code == "ETIMEDOUT" and "ETIMEDOUT" or "EPROTO", ("flash: XMODEM transfer of %s aborted: %s%s; raw RTT " ..
      "log in %s"):format(basename(p.ext_flash), (tostring(err):gsub("^E%u+: ", "")),
      fail_line and (" (flasher: " .. fail_line .. ")") or "", rlog), 3)
  end
  if fail_line then errors.fail("EPROTO", ("flash: the flasher reported '%s' after the transfer"):format(fail_line), 3) end
  if not ok_n then
    errors.fail("EPROTO", ("flash: the flasher never confirmed the transfer ('%s'); raw RTT log in %s")
      :format(p.lines.flasher_ok, rlog), 3)
  end
  local n = tonumber(ok_n)
  if n < size or n >= size + 1024 then
    errors.fail("EPROTO", ("flash: the flasher received %d bytes for a %d-byte file"):format(n, size), 3)
  end
  local data = read_file(p.ext_flash) .. ("\26"):rep(n - size)
  local want = ("%08x"):format(M.crc32(data))
  rec.flash.received = { bytes = n, crc32 = crc and crc:lower(), expected_crc32 = want }
  if crc then
    if crc:lower() ~= want then
      errors.fail("ECRC", ("flash: the flasher's CRC32 %s differs from %s's %s (with padding to %d bytes)")
        :format(crc:lower(), basename(p.ext_flash), want, n), 3)
    end
    ui:info("flash: %s received, %d bytes, CRC32 %s ok", basename(p.ext_flash), n, want)
  else
    ui:warn("the flasher printed no CRC32: only the byte count (%d) was checked", n)
  end
end

function M.flash_step(ctx, p, rec, run_dir)
  local o = ctx.opts
  local log = run_dir .. "/flash.log"
  rec.flash = {}
  rec.artifacts.flash_log = log
  -- SETOOLS directory: the stand-ins run from a scratch copy of their configs
  if p.setools_copy then
    local dst = run_dir .. "/setools"
    assert(sys.mkdir_p(dst .. "/build/images"))
    local r = proc.run { argv = { "cp", "-R", p.setools_bin .. "/build/config", dst .. "/build/" }, timeout = 30 }
    if not r or not r.ok then errors.fail("EIO", "cannot copy the SETOOLS configs to " .. dst, 3) end
  end
  local sdir = p.gen_toc_flasher.cwd
  for _, c in ipairs({ p.gen_toc_flasher, p.write_mram_flasher, p.gen_toc_app, p.write_mram_app }) do
    if c.cwd then c.cwd = c.cwd:gsub("<run_dir>", run_dir) end
    for i, a in ipairs(c.argv) do c.argv[i] = a:gsub("<run_dir>", run_dir) end
  end
  sdir = p.gen_toc_flasher.cwd or "."
  -- (1) the flasher
  if not p.flasher or not sys.stat(p.flasher) then
    errors.fail("ENOTFOUND", ("flash: the flasher image %s does not exist (--flasher)"):format(p.flasher or "?"), 3)
  end
  copy_file(p.flasher, sdir .. "/" .. p.flasher_image)
  setools_cmd(ctx, p, p.gen_toc_flasher, log)
  setools_cmd(ctx, p, p.write_mram_flasher, log)
  -- (2) ext_flash.bin over XMODEM to the flasher, through RTT
  local probe = M.open_probe(ctx, p, "flasher")
  local ok, err = pcall(function()
    M.fresh_reset(ctx, probe, p, p.flasher_ranges)
    local rtt = M.attach(ctx, probe, p, p.flasher_ranges, math.min(o.flash_timeout, 30), "flash (flasher)")
    local ok2, e2 = pcall(xmodem_ext_flash, ctx, p, rec, rtt, run_dir .. "/flasher_rtt.log")
    rtt:close()
    if not ok2 then error(e2, 0) end
  end)
  probe:close()
  rec.artifacts.flasher_rtt_log = run_dir .. "/flasher_rtt.log"
  if not ok then error(err, 0) end
  -- (3) the firmware
  copy_file(p.mram, sdir .. "/" .. p.app_image)
  setools_cmd(ctx, p, p.gen_toc_app, log)
  setools_cmd(ctx, p, p.write_mram_app, log)
  p.flashed = true -- (4) the SWD reset happens at the start of the run step, right before attaching
end

------------------------------------------------------------------------------------------------ run

--- Reads RTT lines from `stream` (anything with read(n, {timeout=}) and unread) until p.inferences
-- `Inference:` lines and opts.settle seconds of quiet, the device's done line, or opts.timeout. Decodes artifact
-- blocks on the way. Returns {samples, lines, decoded = {artifacts, errors}, bytes}.
function M.capture(stream, p, opts, log_path, ui)
  local rd = M.reader(stream, log_path)
  local lines, samples = {}, {}
  local dec = artifacts.decoder { forms = p.device.artifact_forms }
  local deadline = sys.now() + opts.timeout
  local last_line = sys.now()
  local done_pat = p.lines.done
  local ok, err = pcall(function()
    while true do
      local now = sys.now()
      if now >= deadline then break end
      if #samples >= p.inferences and not dec.block and now - last_line >= opts.settle then break end
      local line = rd:line(math.min(0.25, deadline - now))
      if line then
        last_line = sys.now()
        lines[#lines + 1] = #line <= 4096 and line or line:sub(1, 4096)
        dec:line(line)
        local ms = line:match(p.lines.inference)
        if ms then
          samples[#samples + 1] = tonumber(ms)
          if #samples == p.inferences and ui then ui:info("run: %d Inference: lines", #samples) end
        end
        if done_pat and line:find(done_pat) then break end
      end
    end
  end)
  rd:close()
  if not ok then error(err, 0) end
  return { samples = samples, lines = lines, decoded = dec:finish(), bytes = rd.bytes }
end

--- The latency block (odp.result.latency when odp.stats is there; the same fields otherwise).
function M.latency(samples)
  if pcall(require, "odp.stats") then return result.latency(samples, "rtt") end
  local xs = table.move(samples, 1, #samples, 1, {})
  table.sort(xs)
  local function pct(q)
    local pos = (#xs - 1) * q / 100 + 1
    local lo = math.floor(pos)
    local hi = math.min(lo + 1, #xs)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
  end
  local sum = 0
  for _, v in ipairs(xs) do sum = sum + v end
  return { n = #xs, min = xs[1], max = xs[#xs], avg = sum / #xs, p10 = pct(10), p50 = pct(50), p90 = pct(90),
    total = sum, source = "rtt" }
end

--- Fills the record from a capture; raises the failure (after filling) when the capture is incomplete.
function M.measure(rec, p, cap, run_dir, opts, ui)
  local rlog = rec.artifacts.rtt_log or "rtt.log"
  rec.rtt = { lines = #cap.lines, bytes = cap.bytes, log = rec.artifacts.rtt_log }
  for _, a in ipairs(cap.decoded.artifacts) do
    local name = artifacts.safe_name(a.name)
    local path = run_dir .. "/" .. name
    assert(sys.write_file(path, a.data))
    rec.artifacts[(name:gsub("%.bin$", ""):gsub("[^%w_]", "_"))] = path
    if ui then ui:info("run: %s (%d bytes)", path, a.bytes) end
  end
  local samples = cap.samples
  rec.latency_ms = #samples > 0 and M.latency(samples) or { n = 0, source = "rtt" }
  rec.pmu = require("odp.parse.executorch").parse(table.concat(cap.lines, "\n")).pmu
  if rec.artifacts.etdump then
    local have, etdump = pcall(require, "odp.etdump")
    if have then
      local doc, derr = etdump.read(rec.artifacts.etdump)
      if doc then
        local rows, unit = etdump.ops(doc, { time_scale = "cycles" })
        rec.ops = json.array(rows)
        rec.ops_unit = unit
        rec.ops_summary = etdump.ops_summary(doc, { time_scale = "cycles" })
      elseif ui then
        ui:warn("ETDump %s: %s", rec.artifacts.etdump, tostring(derr))
      end
    end
  end
  -- failures after the measurements are in the record
  if #cap.decoded.errors > 0 then
    local e = cap.decoded.errors[1]
    errors.fail("EPROTO", ("run: artifact %s (%s block): %s; raw RTT log in %s"):format(e.name, e.form, e.message, rlog), 1)
  end
  if #samples < p.inferences then
    local silent = #samples == 0 and cap.bytes == 0
    errors.fail(silent and "ETIMEDOUT" or "EPROTO",
      ("run: %d of %d Inference: lines within %.0f s (%d RTT bytes)%s; raw RTT log in %s")
        :format(#samples, p.inferences, opts.timeout, cap.bytes,
          silent and ": the firmware printed nothing (no SWD reset? RTT in cached RAM?)" or "", rlog), silent and 3 or 1)
  end
end

function M.run_step(ctx, p, rec, run_dir)
  local o = ctx.opts
  local rlog = run_dir .. "/rtt.log"
  rec.artifacts.rtt_log = rlog
  local probe = M.open_probe(ctx, p, "app")
  local cap
  local ok, err = pcall(function()
    if not o.no_reset or p.flashed then M.fresh_reset(ctx, probe, p, p.rtt_ranges) end
    local rtt = M.attach(ctx, probe, p, p.rtt_ranges, math.min(o.timeout, 30), "run")
    local ok2, e2 = pcall(function() cap = M.capture(rtt:channel(p.rtt_channel), p, o, rlog, ctx.ui) end)
    rtt:close()
    if not ok2 then error(e2, 0) end
  end)
  probe:close()
  if not ok then error(err, 0) end
  M.measure(rec, p, cap, run_dir, o, ctx.ui)
end

------------------------------------------------------------------------------------------------ the flow

local function stop_twin(p)
  if p.twin and p.twin_state and sys.stat(p.twin_state .. "/pid") then
    proc.run { argv = { project_path(p.twin.stop or "tests/twin/stop.sh"), p.twin_state }, timeout = 20 }
  end
end

--- Runs validate and the selected steps; returns the result record (ok=false on failure, never raises a
-- Failure for measurement/device problems).
function M.run(ctx)
  local o, ui = ctx.opts, ctx.ui
  local p = M.plan(ctx)
  M.validate(ctx, p)
  if o.dry_run then
    for _, l in ipairs(M.describe(p)) do io.stdout:write(l, "\n") end
    return nil
  end
  local dev = p.device
  local rec = result.new { flow = M.name, device = dev.name, target = p.probe_backend,
    params = { inferences = p.inferences, memory_mode = p.memory_mode,
      activation_buf_sz = p.activation_buf_sz and hex(p.activation_buf_sz),
      tmp_mem_size = p.tmp_mem_size and hex(p.tmp_mem_size),
      steps = table.concat((function() local t = {} for _, s in ipairs(M.STEPS) do if p.steps[s] then t[#t + 1] = s end end return t end)(), ",") } }
  rec.model = result.file_info(o.model)
  rec.model.scratch_size = p.scratch_size
  rec.device_state = require("odp.device_state").bare_metal(dev, p)
  local run_dir = result.run_dir(o.runs_dir, ctx.spec and ctx.spec.name or M.name)
  rec.artifacts.run_dir = run_dir
  if p.twin then
    p.twin_state = o.twin_state or os.getenv(p.twin.state_env or "ODP_TWIN_STATE") or (sys.realpath(run_dir) .. "/twin")
    rec.twin_state = p.twin_state
  end
  local ok, err = xpcall(function()
    if p.steps.build then M.build_step(ctx, p, rec, run_dir) end
    if p.steps.flash then M.flash_step(ctx, p, rec, run_dir) end
    if p.steps.run then M.run_step(ctx, p, rec, run_dir) end
    rec.ok = true
  end, function(e)
    if errors.is_failure(e) then return e end
    return debug.traceback(tostring(e), 2)
  end)
  if p.twin and p.steps.flash and not o.keep_twin then stop_twin(p) end
  if not ok then
    if not errors.is_failure(err) then
      result.save(rec, run_dir)
      error(err, 0)
    end
    result.fail(rec, err.code, err.message, err.exit)
    if not ui.quiet then io.stderr:write("odp: ", err.code, ": ", err.message, "\n") end
  end
  for _, w in ipairs(ui.warnings) do rec.warnings[#rec.warnings + 1] = w end
  result.save(rec, run_dir)
  return rec
end

--- A script declaration: `return require("odp.flows.ethos_u").script{name=, description=, device=}`.
function M.script(spec)
  local options = {}
  for _, opt in ipairs(M.options) do
    local copy = table.move(opt, 1, #opt, 1, {})
    for k, v in pairs(opt) do copy[k] = v end
    if copy[1] == "device" and spec.device then copy[3] = spec.device end
    options[#options + 1] = copy
  end
  return {
    name = spec.name, description = spec.description, options = options,
    run = function(ctx) return M.run(ctx) end,
  }
end

return M
