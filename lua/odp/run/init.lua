--- A run, from start to finish, in one place (docs/architecture.md): options -> ctx -> board (opened or
-- reused) -> steps (preflight, stage, run, fetch) -> the record, saved once. `odp run`, board:profile{}, the
-- sweep, the REPL and the many-boards scheduler all go through here:
--   local run = require("odp.run")
--   local board = run.open_board("devices/rpi5.lua", {host = "pi@rpi5", board = "pi5-a"})
--   for _, n in ipairs {1, 10, 100} do
--     local rec = run.point(board, "executorch", {runner = "executor_runner", model = "m.pte", num_executions = n})
--   end
--   run.close(board)
-- A flow (lua/odp/flows/*) is a module {name, options, validate(ctx), record(ctx) -> rec | nil,
-- steps(ctx, rec), finish(ctx, rec, err)?, preflight_files(ctx)?}: it says what a run measures; this module
-- says when each part happens, keeps the board open between runs and writes the record.
local errors = require("odp.core.errors")
local options = require("odp.core.options")
local history = require("odp.results.history")
local result = require("odp.results.result")
local board_mod = require("odp.run.board")
local flows = require("odp.run.flows")
local device_mod = require("odp.target.device")
local sys = require("odp.sys")
local pte = require("odp.parse.pte")
local ui_mod = require("odp.core.ui")
local timings = require("odp.core.timings")

local M = {}

--- The flow module called `name` (device.FLOWS: "executorch", "ethos_u"); a module is returned as it is
-- (the flow registry, odp.run.flows).
M.flow = flows.get

--- The one .pte check, made on this machine before anything touches a board: the model given by the user must
-- be an ExecuTorch program (the ET12 identifier, not truncated, parseable). A bad model file is a usage error
-- (exit 2). Returns odp.parse.pte's table.
---@param path string
---@return table
function M.check_model(path)
  local info, err, code = pte.read(path)
  if not info then
    errors.fail("EUSAGE", ("model %s: %s"):format(path, errors.text(err)))
  end
  return info
end

------------------------------------------------------------------------------------------------ boards

-- The device a script declaration runs on: its --device option (Ethos-U scripts), its device file, else
-- the bare device of its target kind (scripts/host.lua: {name = "host", transport = "host"}).
local function script_device(spec, opts)
  if opts and opts.device then return opts.device end
  if spec.device then return spec.device end
  return { name = spec.target, transport = spec.target, flow = spec.flow }
end

--- Opens a board: `dev` is a device file path, a device table or a script declaration (scripts/rpi5.lua's
-- table: its device, or the bare device of its target kind). opts: the transport's options (host, port,
-- identity, ...; see odp.run.board.open), ui, and board = the lab file's name for it (records carry it).
-- Nothing connects before the first run needs it.
---@param dev string|table device file, device table or script declaration
---@param opts table? transport options, ui, board (name)
---@return table board an odp.run.board Board
function M.open_board(dev, opts)
  if type(dev) == "table" and type(dev.run) == "function" then dev = script_device(dev, opts) end
  return board_mod.open(dev, opts)
end

--- Closes a board (its connection; the twin it started). Idempotent.
---@param board table
function M.close(board) board:close() end

------------------------------------------------------------------------------------------------ ctx

--- The ctx of one run: {opts, args, ui, flow, board, spec, script, clock}. fields.opts are taken as given (a
-- parsed command line has every default); run.point fills defaults for tables a script wrote. clock: where
-- the run's own time goes (odp.core.timings; `odp run` passes odp's, started at its main()), else one from now.
function M.context(fields)
  local ctx = { opts = fields.opts or {}, args = fields.args or {}, ui = fields.ui, flow = fields.flow,
    board = fields.board, spec = fields.spec, script = fields.script, clock = fields.clock or timings.new() }
  ctx.ui = ctx.ui or (ctx.board and ctx.board.ui) or ui_mod.new {}
  return ctx
end

--- A point's options as a table: the flow's defaults and odp's, the transport's (executorch), the board's,
-- then opts (keys with dashes or underscores; n is num_executions or inferences, whichever the flow has).
function M.point_options(board, flow, opts)
  flow = M.flow(flow)
  local o = options.defaults(flow.options, options.global_options)
  if board.kind == "shell" then options.merge(o, options.defaults(device_mod.kind(board.transport).options or {})) end
  options.merge(o, board.opts)
  if board.kind == "probe" then o.device = board.device.path end
  o.ui, o.board = nil, nil
  options.merge(o, opts)
  if opts and opts.n then
    if o.inferences ~= nil then o.inferences = opts.n else o.num_executions = opts.n end
  end
  o.n, o.args = nil, nil
  return o
end

------------------------------------------------------------------------------------------------ artifacts

--- Names a file of this run in its record: rec.artifacts[name] = {file = its path relative to ctx.run_dir,
--- sha256, bytes}. Every file a record points to lives in its own run directory (a path outside it, or a
--- file that is not there, is a bug: it raises), so no later run can change what this record shows; views read
--- it back with odp.results.result.artifact, which checks the hash. file: a path inside ctx.run_dir, or a name
--- relative to it. Returns the file's path.
---@param ctx table the run's ctx (ctx.run_dir)
---@param rec table the record
---@param name string the artifact's name (etdump, samples, rtt_log, ...)
---@param file string
---@return string path
function M.artifact(ctx, rec, name, file)
  local dir = assert(ctx.run_dir, "run.artifact: the ctx has no run_dir yet")
  local rel = file
  if file:sub(1, #dir + 1) == dir .. "/" then rel = file:sub(#dir + 2) end
  if rel:sub(1, 1) == "/" or rel:find("%.%./") or rel:find("^%.%.$") then
    error(("run.artifact: %s is not inside the run directory %s"):format(file, dir), 2)
  end
  local path = dir .. "/" .. rel
  local info = result.file_info(path)
  if not info then error(("run.artifact: %s does not exist"):format(path), 2) end
  rec.artifacts[name] = { file = rel, sha256 = info.sha256, bytes = info.bytes }
  return path
end

-- Refuses a key of a point's options that nothing consumes (board:profile{num_executoins = 50} would measure
-- the default count): the flow's options, the script's, odp's, the board's transport's, the board's own, the
-- keys the board's verbs pass (flow.internal_options), n and args. EUSAGE, exit 2, with a did-you-mean.
local function check_keys(board, flow, spec, opts)
  local known = { n = true, args = true }
  for _, list in ipairs({ flow.options, spec and spec.options or {}, options.global_options }) do
    for _, o in ipairs(list) do known[(o[1]:gsub("-", "_"))] = true end
  end
  -- `odp run SCRIPT` parsed its options against the script's declaration and has no keys to check here
  local lab = require("odp.target.lab") -- lazy: start-up
  for k in pairs(lab.transport_options(board.device)) do known[k] = true end
  for k in pairs(board.opts) do known[(tostring(k):gsub("-", "_"))] = true end
  for _, k in ipairs(flow.internal_options or {}) do known[k] = true end
  local keys = {}
  for k in pairs(opts or {}) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  for _, k in ipairs(keys) do
    if not known[(k:gsub("-", "_"))] then
      options.unknown("key", k, known, ("an option of the %s flow"):format(flow.name),
        { list = "`odp run SCRIPT --help` lists a script's options" })
    end
  end
end

------------------------------------------------------------------------------------------------ the run

-- Errors inside a step: structured failures pass as they are, anything else gets its traceback once.
local function trace(e)
  if errors.is_failure(e) or tostring(e):find("\nstack traceback:", 1, true) then return e end
  return debug.traceback(tostring(e), 2)
end

-- An interruption names where it cut the run: "run: interrupted; runner killed". The innermost step names it
-- (e.step); other failures pass as they are.
local function interrupted_in(where, e)
  if errors.is_failure(e) and e.code ~= "ECANCELED" and sys.cancel_requested() then
    -- a signal that cut an operation short, which reported it as its own failure (a transfer's EIO when the
    -- signal ended its read, an adb connection lost as adb was stopped): the run was interrupted
    e = errors.failure("ECANCELED", "interrupted: " .. e.message)
  end
  if not errors.is_failure(e) or e.code ~= "ECANCELED" or e.step then return e end
  local said = e.message:sub(1, #where + 1) == where .. ":"
  local named = errors.failure("ECANCELED", said and e.message or (where .. ": " .. e.message))
  named.step = where
  return named
end

--- Runs one traced step and records it in rec.steps as {name, ms, status}: "ran", "skipped: unchanged" (fn
-- returned "unchanged": what the step does was already done, labgrid-style) or "failed" (the error goes on).
function M.step(rec, name, fn)
  local entry = { name = name, status = "ran" }
  rec.steps[#rec.steps + 1] = entry
  local t0 = sys.now()
  local ok, res = xpcall(fn, trace)
  entry.ms = math.floor((sys.now() - t0) * 1000 + 0.5)
  if not ok then
    entry.status = "failed"
    error(interrupted_in(name, res), 0)
  end
  if res == "unchanged" then entry.status = "skipped: unchanged" end
end

--- How much longer than measuring and staging a point may take before it is flagged as hung: OVERRUN_S
--- seconds, or half its measuring time if that is more (device state, fetching the ETDump take a moment).
M.OVERRUN_S = 25

--- The stopping rule's time against the point's real one: rec.stop.seconds becomes the point's wall time
--- (steps and finish), rec.stop.measured_seconds the rule's own; a point that took far longer than both its
--- measuring and its uploads (a board that hung: a stopped session waited out, a reboot) gets
--- rec.stop.overrun_seconds and a warning naming its slowest step.
function M.flag_overrun(rec, wall)
  local stop = rec.stop
  if type(stop) ~= "table" or not stop.seconds then return end
  local measured, staging, slowest = stop.seconds, 0, nil
  for _, st in ipairs(rec.steps or {}) do
    if st.name == "stage" then staging = (st.ms or 0) / 1000 end
    if not slowest or (st.ms or 0) > (slowest.ms or 0) then slowest = st end
  end
  stop.measured_seconds, stop.seconds = measured, wall
  local over = wall - measured - staging
  if over > math.max(M.OVERRUN_S, measured / 2) then
    stop.overrun_seconds = over
    rec.warnings[#rec.warnings + 1] = ("the point took %.1f s, %.1f s more than its measuring (%.1f s) and " ..
      "uploads need (slowest step: %s, %.1f s): the board hung or dropped meanwhile"):format(wall, over, measured,
      slowest and slowest.name or "?", slowest and (slowest.ms or 0) / 1000 or 0)
  end
end

-- Every file of the run directory the record still names by a plain path (a step that kept a log or a
-- firmware's artifact without run.artifact: the Ethos-U flow's build, flash and RTT files) is named as
-- run.artifact names it, with its sha256: a record never points at a file it cannot check.
local function name_files(ctx, rec)
  local names = {}
  for name, v in pairs(rec.artifacts) do
    if name ~= "run_dir" and type(v) == "string" and v:sub(1, #ctx.run_dir + 1) == ctx.run_dir .. "/" and sys.stat(v) then
      names[#names + 1] = name
    end
  end
  table.sort(names)
  for _, name in ipairs(names) do M.artifact(ctx, rec, name, rec.artifacts[name]) end
end

local function execute(ctx)
  local flow, board, clock = M.flow(ctx.flow), ctx.board, ctx.clock
  ctx.flow = flow
  ctx.target_kind = board.transport
  ctx.where = "validate"
  if not ctx.validated then flow.validate(ctx) clock:lap("validate") end
  if ctx.spec and ctx.spec.preflight and flow.preflight_files then
    ctx.where = "preflight"
    ctx.preflight = board:preflight(flow.preflight_files(ctx))
    clock:lap("preflight")
  end
  ctx.where = "start"
  local rec = flow.record(ctx)
  clock:lap("record (model and runner hashes)")
  if rec == nil then return nil end
  local dir = result.run_dir(ctx.opts.runs_dir, ctx.spec and ctx.spec.name or flow.name)
  ctx.run_dir = dir
  rec.artifacts.run_dir = dir
  rec.board = board.name
  local started = sys.now()
  ctx.where = flow.name .. " steps"
  local ok, err = xpcall(flow.steps, trace, ctx, rec)
  -- a Ctrl-C (SIGHUP, SIGTERM) that came where the steps did not wait (measuring what they fetched): the run
  -- was interrupted all the same, and its record says so, with all it measured
  if ok and sys.cancel_requested() then
    ok, err = false, errors.failure("ECANCELED", "interrupted; what the steps measured is kept")
  end
  if not ok then err = interrupted_in(ctx.where, err) end
  -- each traced step its own part; the rest of the flow's steps (reading the logs, statistics) one
  local steps = {}
  for i, st in ipairs(rec.steps or {}) do steps[i] = { name = st.name, ms = st.ms or 0 } end
  clock:lap_parts(steps, "measure (parse, statistics)")
  ctx.where = "finish"
  if flow.finish then flow.finish(ctx, rec, not ok and err or nil) clock:lap("finish (device state after)") end
  M.flag_overrun(rec, sys.now() - started)
  rec.transport = board:traffic_since()
  if rec.transport then
    local tr = rec.transport
    ctx.ui:debug("transport: %d round trips, %d B up, %d B down%s", tr.round_trips, tr.bytes_up, tr.bytes_down,
      tr.connects > 0 and (", connected in %.0f ms"):format(tr.connect_ms) or "")
  end
  if ok then
    rec.ok = true
  elseif errors.is_failure(err) then
    result.fail(rec, err.code, err.message)
  end
  for _, w in ipairs(ctx.ui.warnings) do rec.warnings[#rec.warnings + 1] = w end
  name_files(ctx, rec)
  clock:lap("artifacts (hashes)")
  rec.timings = clock:snapshot() -- the parts before the record's write; `-v -v` shows the rest
  ctx.where = "saving the record"
  -- the record file, then the history its options name; a second Ctrl-C that cuts the saving short (it stops
  -- the Lua code where it is) gets the record saved once more, as interrupted: a third one kills odp
  local done, saved, serr, scode = xpcall(history.save, trace, rec, dir, ctx.opts, clock)
  if not done then
    if not (errors.is_failure(saved) and saved.code == "ECANCELED") then error(saved, 0) end
    if ok or err.code ~= "ECANCELED" then ok, err = false, interrupted_in(ctx.where, saved) end
    result.fail(rec, err.code, err.message)
    saved, serr, scode = history.save(rec, dir, ctx.opts, clock)
  end
  if not ok and not errors.is_failure(err) then error(err, 0) end -- a bug: its traceback, the record kept
  errors.check(saved, serr, scode)
  return rec
end

--- Runs ctx (M.context, with ctx.board and ctx.flow) from validate to the saved record; returns the record,
-- or nil when the flow records nothing (a dry run). Failures of the board or the measurement become a
-- failed record (ok = false, error = {code, message, exit}); a failed preflight raises (nothing ran).
function M.execute(ctx)
  local board = ctx.board
  ctx.clock = ctx.clock or timings.new() -- a ctx made without M.context
  -- this run's warnings, whatever else shares the ui; what the board's transport says meanwhile (an ssh_config
  -- warning as it connects) is this run's too. Two runs of a pipelined sweep (odp.run.sweep) share the board:
  -- the transport speaks to the one started last while it goes, then to the one still going.
  ctx.ui = ui_mod.scope(ctx.ui)
  local going = board._runs_going or { shared = board.ui }
  board._runs_going = going
  going[#going + 1] = ctx.ui
  board.ui = ctx.ui
  local ok, rec = xpcall(execute, trace, ctx)
  for i = #going, 1, -1 do
    if going[i] == ctx.ui then table.remove(going, i) break end
  end
  board.ui = going[#going] or going.shared
  if #going == 0 then board._runs_going = nil end
  if not ok then error(interrupted_in(ctx.where or "start", rec), 0) end
  return rec
end

--- One run on an open board (reused: its connection, preflight and staged files stay for the next point).
-- flow: a flow name, module or script declaration (nil: the device's flow); opts: the flow's options as a
-- table (defaults filled; n = num_executions or inferences); args: the runner's extra arguments.
-- Returns the record (a failed run is a record with ok = false).
---@param board table from run.open_board
---@param flow string|table|nil flow name, flow module or script declaration; nil: the device's flow
---@param opts table? the flow's options (n = num_executions or inferences)
---@param args string[]? the runner's extra arguments
---@return table record the result record (docs/SCRIPTING.md, "The result record")
function M.point(board, flow, opts, args)
  local spec
  if type(flow) == "table" and type(flow.run) == "function" and flow.flow then spec, flow = flow, flow.flow end
  flow = M.flow(flow or board.device.flow)
  check_keys(board, flow, spec, opts)
  local ctx = M.context { opts = M.point_options(board, flow, opts), args = args or (opts and opts.args), board = board,
    flow = flow, spec = spec or { name = board.device.name } }
  return M.execute(ctx)
end

--- A declared flow script's run (scripts/host.lua, scripts/rpi5.lua: `run = function(ctx) ... end`): opens
-- the script's board with the parsed options, runs once, closes it.
function M.once(ctx, spec)
  ctx.spec = ctx.spec or spec
  ctx.clock = ctx.clock or timings.new() -- a ctx made without M.context
  ctx.flow = M.flow(spec.flow)
  local bopts = options.merge({}, ctx.opts)
  bopts.ui = ctx.ui
  local opened, board = xpcall(M.open_board, trace, spec, bopts)
  if not opened then error(interrupted_in("connect", board), 0) end
  ctx.board = board
  ctx.clock:lap("board")
  local ok, rec = pcall(M.execute, ctx)
  ctx.board:close()
  ctx.clock:lap("board (close)")
  if not ok then error(rec, 0) end
  return rec
end

--- `odp run SCRIPT` for a declared script, after its options are parsed: ctx, validate, run. Returns the
-- records to report (nil when the script reported itself).
function M.declared(spec, opts, args, path, clock)
  local ui = ui_mod.new { quiet = opts.quiet, verbose = opts.verbose }
  local ctx = M.context { opts = opts, args = args, script = path, ui = ui, spec = spec, clock = clock }
  if spec.validate then spec.validate(ctx) ctx.clock:lap("validate") end
  local out = spec.run(ctx)
  if out == nil then return nil end
  return out.schema and { out } or out
end

return M
