--- The Ethos-U flow (Alif E8 and its QEMU twin): the model is compiled into firmware, so a run is
--   validate -> build (cmake + make, stale-build guard) -> flash (SETOOLS + XMODEM over RTT + SWD reset)
--   -> run (RTT capture, base64 artifacts) -> report (the result record).
-- Everything board-specific is data in the device file (devices/alif_e8.lua, devices/twin_m55.lua),
-- commands included; docs/alif_e8.md walks through it. The parts live in lua/odp/flows/ethos_u/ (plan,
-- validate, build, flash, capture) and share one table; this module runs them as steps and makes the record.
local errors = require("odp.core.errors")
local result = require("odp.results.result")
local sys = require("odp.sys")
local proc = require("odp.proc")
local M = require("odp.flows.ethos_u.plan")
for _, part in ipairs({ "validate", "build", "flash", "capture" }) do require("odp.flows.ethos_u." .. part) end
local project_path, hex = M.project_path, M.hex

-- Errors inside a step: structured failures pass as they are, anything else gets its traceback once.
local function trace(e)
  if errors.is_failure(e) or tostring(e):find("\nstack traceback:", 1, true) then return e end
  return debug.traceback(tostring(e), 2)
end

--- Runs one step and records it in rec.steps as {name, ms, status}: "ran", "skipped: unchanged" (fn returned
-- "unchanged": what the step does was already done, labgrid-style) or "failed" (the error goes on).
function M.step(rec, name, fn)
  local entry = { name = name, status = "ran" }
  rec.steps[#rec.steps + 1] = entry
  local t0 = sys.now()
  local ok, res = xpcall(fn, trace)
  entry.ms = math.floor((sys.now() - t0) * 1000 + 0.5)
  if not ok then
    entry.status = "failed"
    error(res, 0)
  end
  if res == "unchanged" then entry.status = "skipped: unchanged" end
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
  rec.device_state = require("odp.target.device_state").bare_metal(dev, p)
  local run_dir = result.run_dir(o.runs_dir, ctx.spec and ctx.spec.name or M.name)
  rec.artifacts.run_dir = run_dir
  if p.twin then
    p.twin_state = o.twin_state or os.getenv(p.twin.state_env or "ODP_TWIN_STATE") or (sys.realpath(run_dir) .. "/twin")
    rec.twin_state = p.twin_state
  end
  rec.steps = require("odp.core.json").array({})
  local ok, err = xpcall(function()
    for _, name in ipairs(M.STEPS) do
      if p.steps[name] then M.step(rec, name, function() return M[name .. "_step"](ctx, p, rec, run_dir) end) end
    end
    rec.ok = true
  end, trace)
  if p.twin and p.steps.flash and not o.keep_twin then stop_twin(p) end
  if not ok then
    if not errors.is_failure(err) then
      result.save(rec, run_dir, o)
      error(err, 0)
    end
    result.fail(rec, err.code, err.message, err.exit)
    if not ui.quiet then io.stderr:write("odp: ", err.code, ": ", err.message, "\n") end
  end
  for _, w in ipairs(ui.warnings) do rec.warnings[#rec.warnings + 1] = w end
  result.save(rec, run_dir, o)
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
