--- The Ethos-U flow, part 2: the plan made and checked before anything touches the build tree or the board
-- (validate.plan), and the dry run's commands (validate.describe).
local errors = require("odp.core.errors")
local sys = require("odp.sys")
local pte = require("odp.parse.pte")
local run = require("odp.run")
local probe_target = require("odp.target.probe")
local shell = require("odp.target.shell")
local tensors = require("odp.results.tensors")
local which = require("odp.target.host").which
local plan = require("odp.flows.ethos_u.plan")
local hex, shell_quote, cmd_line = plan.hex, shell.quote, shell.command_line

local M = {}

local function basename(p) return (p:match("([^/]+)$")) end

------------------------------------------------------------------------------------------------ validate

-- --inputs are compiled into the firmware: the build step embeds them, through the cmake variable the device's
-- build names (build.vars.inputs); checked against the .pte's signature like every flow's (exit 2).
local function check_io(ctx, p)
  local o = ctx.opts
  p.io = tensors.validate(o)
  if o.inputs == nil then return end
  if not p.inputs_var then
    errors.fail("EUSAGE", ("--inputs: %s's firmware build embeds no inputs (its build.vars.inputs names no cmake " ..
      "variable of its build.cmake): the firmware fills its inputs itself"):format(p.device.name))
  end
  if not p.steps.build then
    errors.fail("EUSAGE", "--inputs are compiled into the firmware: they need the build step (--steps build,flash,run)")
  end
end

--- Makes the plan for ctx.opts (odp.flows.ethos_u.plan) and checks it before anything touches the build tree or
-- the board: the model, sizes, --inputs/--outputs/--reference, the tools of the steps asked for. Errors exit 2
-- with one line; warnings go through ctx.ui (and into the record). -> the plan
function M.plan(ctx)
  local p = plan.make(ctx.opts)
  M.check(ctx, p)
  return p
end

--- The checks of M.plan on a plan already made (the model, sizes, inputs, tools); adds pte, scratch_size,
-- ethos_delegate and io to it.
function M.check(ctx, p)
  local o, ui = ctx.opts, ctx.ui
  -- a flash of a file alone (board:flash) needs no model: only the flasher, the probe and the file
  if o.flash_file then return M.check_tools(o, p) end
  -- the model: a .pte (odp.parse.pte checks the ET12 identifier), and its Ethos-U scratch must fit the activation buffer
  local info = run.check_model(o.model)
  local ethos = false
  for _, d in ipairs(pte.delegates(info)) do
    if d.backend == "EthosUBackend" then ethos = true end
  end
  p.scratch_size = pte.scratch_size(info)
  p.pte = info -- the planned arenas the record keeps (no RSS on bare metal: odp.results.memory.bare_metal)
  p.ethos_delegate = ethos
  if not ethos then
    ui:warn("model %s has no EthosUBackend delegate: it will run on the CPU alone (no NPU)", basename(o.model))
  elseif p.scratch_size and p.activation_buf_sz and p.scratch_size > p.activation_buf_sz then
    errors.fail("EUSAGE", ("the model's Vela scratch_size is %d bytes (%s) but --activation-buf-sz is %d bytes " ..
      "(%s): raise --activation-buf-sz to at least %s"):format(p.scratch_size, hex(p.scratch_size),
      p.activation_buf_sz, hex(p.activation_buf_sz), hex(p.scratch_size)))
  end
  if p.steps.build then
    if not p.activation_buf_sz then errors.fail("EUSAGE", "--activation-buf-sz is required (the device file has no default)") end
    ui:info("memory mode %s (it must be the mode the .pte was compiled for with Vela, or the device faults)%s",
      p.memory_mode, #p.dropped > 0 and ("; dropped " .. table.concat(p.dropped, ", ")) or "")
  end
  check_io(ctx, p)
  if o.dry_run then return end
  M.check_tools(o, p)
end

--- The tools and files of the steps asked for, listed together when missing (EUSAGE: what this machine was
-- given to run them with).
function M.check_tools(o, p)
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
    if o.flash_file then
      if not sys.stat(o.flash_file) then missing[#missing + 1] = o.flash_file end
    elseif not p.steps.build then
      for _, f2 in ipairs({ p.mram, p.ext_flash }) do
        if not sys.stat(f2) then missing[#missing + 1] = ("%s (run the build step first)"):format(f2) end
      end
    end
  end
  if (p.steps.flash or p.steps.run) then
    if p.probe_backend == "jlink" and not probe_target.jlink_lib(o) then
      missing[#missing + 1] = "the J-Link library libjlinkarm.so (--jlink-lib, ODP_JLINK_LIB, or install SEGGER's J-Link software)"
    end
    if p.twin and p.steps.flash then need("qemu-system-arm", "twin") end
  end
  if #missing > 0 then
    errors.fail("EUSAGE", "missing: " .. table.concat(missing, "; "))
  end
end

------------------------------------------------------------------------------------------------ dry run

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
    if p.inputs_blob then say("# the inputs (--inputs), concatenated -> %s", p.inputs_blob) end
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


return M
