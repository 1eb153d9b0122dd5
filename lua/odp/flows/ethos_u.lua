--- The Ethos-U flow (Alif E8 and its QEMU twin): the model is compiled into firmware, so a run is
--   validate -> build (cmake + make, stale-build guard) -> flash (SETOOLS + XMODEM over RTT + SWD reset)
--   -> run (RTT capture, base64 artifacts) -> report (the result record).
-- Everything board-specific is data in the device file (devices/alif_e8.lua, devices/twin_m55.lua),
-- commands included; docs/alif_e8.md walks through it. The parts live in lua/odp/flows/ethos_u/: plan (the
-- options; options + device -> the plan, whose shape plan.lua documents), validate (makes and checks the
-- plan; the dry run), build, flash and capture (each a step that takes the plan). Each loads alone; this
-- module gives odp.run the record and the steps, and adds its verbs to the boards.
local errors = require("odp.core.errors")
local host = require("odp.host")
local json = require("odp.core.json")
local options = require("odp.core.options")
local device_state = require("odp.target.device_state")
local result = require("odp.results.result")
local memory = require("odp.results.memory")
local sys = require("odp.sys")
local run = require("odp.run")
local twin = require("odp.target.twin")
local tensors = require("odp.results.tensors")
local plan = require("odp.flows.ethos_u.plan")
local validate = require("odp.flows.ethos_u.validate")
local build = require("odp.flows.ethos_u.build")
local flash = require("odp.flows.ethos_u.flash")
local capture = require("odp.flows.ethos_u.capture")
local hex = plan.hex

local M = { name = "ethos_u", options = plan.options }

-- The steps in their order (plan.STEPS), each a part's step(ctx, p, rec, run_dir).
local STEP = { build = build.step, flash = flash.step, run = capture.step }

------------------------------------------------------------------------------------------------ the flow

--- Checks everything before the build tree or the board is touched (exit 2): the plan, made and checked
-- here, is ctx.plan.
function M.validate(ctx)
  ctx.plan = validate.plan(ctx)
end

--- The record (odp.run calls record, then steps, then finish); a dry run prints the commands and records nothing.
function M.record(ctx)
  local o, p = ctx.opts, ctx.plan
  if o.dry_run then
    for _, l in ipairs(validate.describe(p)) do ctx.ui:output(l) end
    return nil
  end
  local steps = {}
  for _, s in ipairs(plan.STEPS) do if p.steps[s] then steps[#steps + 1] = s end end
  local rec = result.new { flow = M.name, device = p.device.name, target = p.probe_backend,
    params = { inferences = p.inferences, memory_mode = p.memory_mode,
      activation_buf_sz = p.activation_buf_sz and hex(p.activation_buf_sz),
      tmp_mem_size = p.tmp_mem_size and hex(p.tmp_mem_size), steps = table.concat(steps, ","),
      inputs = p.io and p.io.inputs and p.io.inputs.text or nil } }
  if p.pte then -- a flash of a file alone (board:flash) has no model
    rec.model = result.file_info(o.model)
    rec.model.scratch_size = p.scratch_size
    rec.memory = memory.bare_metal(p.pte, p.scratch_size)
  end
  rec.device_state = device_state.bare_metal(p.device, p)
  rec.steps = json.array({})
  return rec
end

--- The selected steps (build, flash, run), each traced in rec.steps.
function M.steps(ctx, rec)
  local o, p, run_dir = ctx.opts, ctx.plan, ctx.run_dir
  if p.twin then
    p.twin_state = o.twin_state or os.getenv(p.twin.state_env or "ODP_TWIN_STATE") or (sys.realpath(run_dir) .. "/twin")
    rec.twin_state = p.twin_state
  end
  for _, name in ipairs(plan.STEPS) do
    if p.steps[name] then run.step(rec, name, function() return STEP[name](ctx, p, rec, run_dir) end) end
  end
  -- the firmware's output.bin is the method's output 0 (the one it streams), checked and compared as a runner's
  if p.io and p.io.outputs and p.steps.run then
    local io = p.io.sig.outputs[1]
    if not io or io.kind ~= "tensor" then
      rec.warnings[#rec.warnings + 1] = "--outputs: the .pte's method has no tensor output to read output.bin as"
      return
    end
    local path = run_dir .. "/output.bin"
    local err = "output 0: the firmware sent no output.bin block"
    if sys.stat(path) then err = tensors.check_output(path, io) end
    tensors.judge(p.io, rec, { { io = io, path = path, error = err } }, run_dir)
  end
end

--- After the steps: the twin this run started is stopped (unless --keep-twin). A failure of `odp run` (ctx.script)
-- is said on stderr too (with --format json the record alone would say it); a board verb's caller gets the
-- record or, from board:flash, the failure raised.
function M.finish(ctx, rec, err)
  local p = ctx.plan
  if p.twin and p.steps.flash and not ctx.opts.keep_twin then twin.stop(p.twin, p.twin_state) end
  if ctx.script and type(err) == "table" and err.code then ctx.ui:info("odp: %s: %s", err.code, err.message) end
end

------------------------------------------------------------------------------------------------ board verbs

-- The flow on a board, through odp.run.point (a run directory, a record, its artifacts, like every run):
-- build only (build{}), a flash of a file alone (flash(file)) or the whole run (profile{}).
local function on_board(board, opts, extra)
  -- the board stops its twin at close (keep_twin); one a flash relaunches ends with odp unless the board is kept
  extra = options.merge({ keep_twin = true, twin_lifeline = not board.keep, model = board.opts.model }, extra)
  if board.device.twin and not (extra.only and extra.only[1] == "build") then
    board:_twin()
    extra.twin_state = board.twin_state
  end
  if not (opts and opts.model) and not extra.model and board.device.twin and not extra.flash_file then
    extra.model = host.root .. "/tests/fixtures/pte/mnist_ethos_u55.pte" -- the twin's demo model
  end
  local o = options.merge(extra, opts)
  if not o.model and not o.flash_file then
    errors.fail("EUSAGE", "board:profile{model = FILE.pte, ...}: model is required")
  end
  -- the flow opens the probe itself (and a flash relaunches the twin): the board lets go of its own
  board:_release_probe()
  return run.point(board, M.name, o)
end

-- Keys the board's verbs pass that no user gives (odp.run checks a point's keys against the options and these):
-- twin_lifeline (whether a twin a flash relaunches ends with odp), flash_file (board:flash(file)).
M.internal_options = { "twin_lifeline", "flash_file" }

--- The verbs this flow adds to its boards (odp.run.board finds them through the flow registry): profile,
-- build and flash run through odp.run.point; plan is the probe verbs' plan (probe, RTT, lines), no run.
-- board_verb_help: the ones a user calls (board:build{}, board:flash(file)), as board:help() lists them.
M.board_verbs = {
  profile = function(board, opts) return on_board(board, opts, {}) end,
  build = function(board, opts) return on_board(board, opts, { only = { "build" } }) end,
  plan = function(board)
    -- lenient (dry_run): the board needs no MLEK or SETOOLS paths to reach the probe
    return plan.make(run.point_options(board, M.name, { only = { "run" }, model = board.opts.model,
      dry_run = true }))
  end,
  --- flash(file) -> {bytes, crc32, expected_crc32}: the flasher's answer (a failed flash raises its failure;
  -- its record is in the run directory either way)
  flash = function(board, file, opts)
    if not sys.stat(file or "") then
      errors.fail("EUSAGE", ("board:flash(file): %s does not exist"):format(tostring(file)))
    end
    local rec = on_board(board, opts, { only = { "flash" }, flash_file = file })
    if not rec.ok then errors.fail(rec.error.code, rec.error.message) end
    return rec.flash.received
  end,
}

M.board_verb_help = {
  { "flash", "flash(file) -> {bytes, crc32, expected_crc32}: the flasher image, then file over XMODEM through RTT (a run: its record in runs/)" },
  { "build", "build{model=, ...} -> result record: the firmware build step (skipped when unchanged)" },
}

--- A script declaration: `return require("odp.flows.ethos_u").script{name=, description=, device=}`.
function M.script(spec)
  local decl = { name = spec.name, description = spec.description, options = plan.script_options(spec.device),
    flow = M.name }
  decl.run = function(ctx) return run.once(ctx, decl) end
  return decl
end

return M
