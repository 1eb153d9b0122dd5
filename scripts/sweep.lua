-- Sweep any flow script over parameter values, one JSONL record per point (resumable):
--   odp run scripts/sweep.lua --flow scripts/host.lua --runner ./executor_runner --model m.pte \
--       -p num_executions=1,10,100 -p threads=1,4 --repeat 3 --out sweep.jsonl
-- Every option of the flow is accepted here too (its --help is merged into this one); -p NAME=V1,V2,...
-- overrides the flow option NAME (dashes or underscores) for each point. Re-running the same command skips
-- the points already in the JSONL file. The sweep's own options (--flow, -p, --repeat, --out, --format) never
-- reach the flow: --repeat here is records per point, each one flow run; a flow's own --repeat (runner
-- processes aggregated into one record) keeps its default unless set with -p repeat=N.
-- --boards LAB.lua[:TAG|NAMES] runs the sweep on many boards at once (--spread each|pool, --board-timeout S);
-- every record carries its board, and a board that fails fails only its own points (docs/many-boards.md).
local cli = require("odp.core.options")
local errors = require("odp.core.errors")
local publish = require("odp.results.publish")
local report = require("odp.results.report")
local boards = require("odp.run.boards")
local run = require("odp.run")
local sweep = require("odp.run.sweep")

local argv = { ... }

local OWN = {
  -- a string, found as `odp run` finds a script (odp.core.search: here, ODP_PATH, odp's own tree)
  { "flow", "The flow script to sweep (scripts/host.lua, scripts/rpi5.lua, your own)", nil, "string",
    required = true, metavar = "SCRIPT" },
  { "param", "A swept parameter: NAME=V1,V2,... (repeatable; the product of all is run)", nil, "string",
    short = "p", ["repeat"] = true, metavar = "NAME=V1,V2" },
  { "repeat", "Records per point, each a separate run of the flow (the flow's own --repeat, if it has one, is\n" ..
    "set with -p repeat=N)", 1, "posint" },
  { "no-pipeline", "Run each point only once the one before it is recorded (default on an SSH or adb board: the\n" ..
    "next point's run is sent while the one before it runs, so the board does not wait on the link;\n" ..
    "docs/helper-protocol.md)", false, "bool" },
  { "reference-runner", "With --reference host: the executor_runner that runs on this machine for each point's\n" ..
    "reference (default: --runner, when it runs here; docs/outputs.md)", nil, "file", metavar = "FILE" },
}
for _, o in ipairs(boards.OPTIONS) do OWN[#OWN + 1] = o end -- --boards, --spread, --board-timeout

-- What the command line says before it is parsed: the flow script, the swept names, whether --boards is given.
local flow_path, swept, many = nil, {}, boards.requested(argv)
for i, a in ipairs(argv) do
  if a == "--" then break end
  local v = a:match("^%-%-flow=(.*)$") or (a == "--flow" and argv[i + 1])
  if v then flow_path = v end
  local p = a:match("^%-%-param=(.*)$") or a:match("^%-p(.+)$") or ((a == "-p" or a == "--param") and argv[i + 1])
  if p then
    local name = p:match("^%s*([%w_%-%.]+)%s*=")
    if name then swept[(name:gsub("-", "_"))] = true end
  end
end

local flow
if flow_path then
  local chunk, err = loadfile(require("odp.core.search").find(flow_path))
  if not chunk then errors.fail("EUSAGE", "--flow: " .. err) end -- Lua's message names the file
  flow = chunk()
  if type(flow) ~= "table" or type(flow.run) ~= "function" then
    errors.fail("EUSAGE", ("--flow %s is not a declared script (it must return {options, validate, run})")
      :format(flow_path))
  end
end

-- Our options, then the flow's (minus names we or odp already use); a swept option is no longer required.
local options, taken, own_names = {}, {}, {}
for _, list in ipairs({ OWN, cli.global_options }) do
  for _, o in ipairs(list) do taken[o[1]] = true end
end
for _, o in ipairs(OWN) do own_names[o[1]] = true end
for _, o in ipairs(OWN) do options[#options + 1] = o end
local flow_types, shadowed = {}, {}
for _, o in ipairs(flow and flow.options or {}) do
  local key = o[1]:gsub("-", "_")
  flow_types[key] = o[4]
  if own_names[o[1]] then shadowed[key] = o[3] end
  if not taken[o[1]] then
    -- a swept option, or with --boards a transport option the lab file gives, is no longer required
    if swept[key] or many then o = cli.optional(o) end
    options[#options + 1] = o
  end
end

-- A swept value typed like the flow option it replaces.
local function typed(name, v)
  local t = flow_types[name]
  if (t == "int" or t == "posint") and math.type(v) ~= "integer" then
    errors.fail("EUSAGE", ("-p %s: '%s' is not an integer"):format(name, tostring(v)))
  elseif t == "number" and type(v) ~= "number" then
    errors.fail("EUSAGE", ("-p %s: '%s' is not a number"):format(name, tostring(v)))
  elseif (t == "string" or t == "file" or t == "outfile" or t == "choice") and type(v) ~= "string" then
    return tostring(v)
  end
  return v
end

return {
  name = "sweep",
  description = "Run a flow over the cartesian product of -p values; one JSONL record per point in --out,\n" ..
    "fsync'd as it completes. Re-running the same command skips finished points. Options the sweep does not\n" ..
    "declare go to the flow (e.g. --runner, --model); --flow SCRIPT --help lists them. odp plot OUT draws it." ..
    (flow and ("\n\nFlow %s: %s"):format(flow_path, flow.description or "") or ""),
  options = options,
  passes_args = flow and flow.passes_args,
  validate = function(ctx)
    if not ctx.opts.out then errors.fail("EUSAGE", "--out FILE.jsonl is required: records are appended there") end
    if not ctx.opts.param or #ctx.opts.param == 0 then errors.fail("EUSAGE", "give at least one -p NAME=V1,V2") end
  end,
  run = function(ctx)
    local ok, points = pcall(sweep.points, ctx.opts.param)
    if not ok then errors.fail("EUSAGE", (tostring(points):gsub("^.-:%d+: ", ""))) end
    -- a swept name must be one the flow consumes: a typo (or a runner flag) would change nothing
    if flow.options then
      local known = {}
      for k in pairs(flow_types) do known[k] = true end
      if flow.flow then known.device = true end -- a swept device opens a board per value
      for _, name in ipairs(points.names) do
        if not known[name] then
          cli.unknown("-p", name, known, "an option of " .. flow_path, { list = ("`odp run %s --help` lists them")
            :format(flow_path), note = ("a runner flag goes after --: -- --%s=V"):format(name) })
        end
      end
    end
    for _, p in ipairs(points) do
      for k, v in pairs(p) do p[k] = typed(k, v) end
    end
    -- The flow sees its own options and odp's, never the sweep's: a name both declare gets the flow's
    -- default unless -p sets it.
    local function flow_opts(params)
      local o = {}
      for k, v in pairs(ctx.opts) do o[k] = v end
      for name in pairs(own_names) do o[(name:gsub("-", "_"))] = nil end
      o.out, o.format = nil, nil
      for k, v in pairs(shadowed) do o[k] = v end
      for k, v in pairs(params) do o[k] = v end
      return o
    end
    -- --reference host: each point runs on this machine first, with the same inputs; its outputs are the
    -- reference of that point on every board (docs/outputs.md, "Across boards")
    local host_refs
    if ctx.opts.reference == "host" then
      host_refs = sweep.host_references { flow = flow, points = points, opts_for = flow_opts, args = ctx.args,
        runner = ctx.opts.reference_runner or ctx.opts.runner, ui = ctx.ui }
      local plain = flow_opts
      flow_opts = function(params)
        local o = plain(params)
        o.reference = host_refs[sweep.key(params, points.names)]
        return o
      end
    elseif ctx.opts.reference_runner then
      errors.fail("EUSAGE", "--reference-runner is the runner of --reference host: give --reference host")
    end
    -- A declared flow script runs through odp.run on one board, opened at the first point and kept open for
    -- every other: one connection, one preflight, files staged once. Only a swept parameter that says which
    -- board or how to reach it (a transport option such as host, or device) opens another one. A script of
    -- the user's own runs as it is.
    local board, board_key
    local flow_own = {}
    for _, o in ipairs(flow.flow and run.flow(flow.flow).options or {}) do flow_own[(o[1]:gsub("-", "_"))] = true end
    flow_own.device = nil
    local function key_of(params)
      local parts = {}
      for _, name in ipairs(points.names) do
        if not flow_own[name] then parts[#parts + 1] = name .. "=" .. tostring(params[name]) end
      end
      return table.concat(parts, " ")
    end
    local function run_point(params)
      if flow.flow then
        if board and board_key ~= key_of(params) then run.close(board) board = nil end
        if not board then
          local bo = flow_opts(params)
          bo.ui = ctx.ui
          board, board_key = run.open_board(flow, bo), key_of(params)
        end
        return run.point(board, flow, flow_opts(params), ctx.args)
      end
      local fctx = run.context { opts = flow_opts(params), args = ctx.args, script = flow_path, ui = ctx.ui, spec = flow }
      if flow.validate then flow.validate(fctx) end
      local rec = flow.run(fctx)
      if type(rec) == "table" and not rec.schema and rec[1] then rec = rec[1] end
      return rec
    end
    local ok, res
    if ctx.opts.boards then
      -- many boards at once: the lab's boards, each with its own transport options (docs/many-boards.md)
      if not flow.flow then
        errors.fail("EUSAGE", ("--boards runs declared flow scripts (scripts/rpi5.lua, ...); %s runs itself")
          :format(flow_path))
      end
      ok, res = pcall(boards.run_flow, { spec = flow, boards = ctx.opts.boards, spread = ctx.opts.spread,
        timeout = ctx.opts.board_timeout, cli = ctx.opts, opts_for = flow_opts, args = ctx.args, points = points,
        out = ctx.opts.out, ["repeat"] = ctx.opts["repeat"], ui = ctx.ui })
    else
      -- points on the same board overlap: the next one's run is queued behind this one's on the board
      local overlap = flow.flow and not ctx.opts.no_pipeline and function(a, b)
        return key_of(a) == key_of(b) and board ~= nil and board:pipelines()
      end
      ok, res = pcall(sweep.run, { points = points, ["repeat"] = ctx.opts["repeat"], out = ctx.opts.out,
        ui = ctx.ui, run_point = run_point, overlap = overlap or nil })
    end
    if board then run.close(board) end
    if not ok then error(res, 0) end
    local all = sweep.load(ctx.opts.out)
    if not ctx.opts.quiet then
      io.stdout:write(report.summary(all), "\n")
      local agreement = report.agreement_table(all)
      if agreement then io.stdout:write("\n", agreement, "\n") end
      io.stdout:write(("%d record(s) this run, %d already done, %d failed; all in %s\n")
        :format(#res.records, res.skipped, res.failed, ctx.opts.out))
    end
    errors.check(publish.deliver(all, ctx.opts)) -- --report lava|junit, $GITHUB_STEP_SUMMARY
    local status = report.exit_code(res.records)
    if status ~= 0 then
      -- the records' own code when they all failed for one reason (exit 3 for a board never reached)
      local first = status ~= 1 and res.records[1].error
      errors.fail(first and first.code or "EFAIL", ("%s (their records in %s say why)"):format(res.boards and
        boards.summary(res) or ("%d of %d point runs failed"):format(res.failed, #res.records), ctx.opts.out))
    end
    return nil
  end,
}
