--- Many open boards as one value (`boards` in `odp repl --boards LAB`): boards["pi-2"] is that Board, and a
-- verb called on the collection runs on every board at once (odp.core.sched), each result under its name:
--   local boards = require("odp.run.boards").open(require("odp.target.lab").load("lab.lua:pi5").boards)
--   local out = boards:exec("uname -r")   -- {["pi-1"] = result, ["pi-2"] = result | {error = ...}}
--   boards:each(function(board, name) return board:push("m.pte", "/tmp/m.pte") end, {timeout = 60})
--   boards:close()
local board_mod = require("odp.run.board")
local errors = require("odp.core.errors")
local json = require("odp.core.json")
local cli = require("odp.core.options")
local ui_mod = require("odp.core.ui")
-- the lab loader and the scheduler are required where they are used: every `odp run` of a flow script loads
-- this module for its --boards option, and a single-board run needs neither

local M = {}

local Boards = {}

local function ordered(self) return rawget(self, "_names") end

--- Opens every lab entry (nothing connects before the first use). ui: the boards' odp.core.ui.
function M.open(entries, ui)
  local self = { _names = {}, _by = {} }
  local lab = require("odp.target.lab") -- lazy: start-up
  for _, e in ipairs(entries) do
    local o = lab.board_options(e)
    o.ui = ui
    self._by[e.name] = board_mod.open(e.dev, o)
    self._names[#self._names + 1] = e.name
  end
  return setmetatable(self, Boards)
end

Boards.__index = function(self, k)
  local m = rawget(Boards, k)
  if m ~= nil then return m end
  return rawget(self, "_by")[k]
end

function Boards:__len() return #ordered(self) end

--- The names, in the lab's order.
function Boards:names() return { table.unpack(ordered(self)) } end

-- What a failed call leaves under its board's name.
local function failure(t)
  local e = t.error
  if t.timed_out then return { error = { code = "ETIMEDOUT", message = "no answer in time" } } end
  if type(e) == "table" and e.code then return { error = { code = e.code, message = e.message } } end
  return { error = { code = "EFAIL", message = tostring(e) } }
end

--- Runs fn(board, name) on every board at once; returns {name = fn's first value | {error = {code, message}}}.
-- opts.timeout: seconds each board may take.
function Boards:each(fn, opts)
  local s = require("odp.core.sched").new() -- lazy: start-up
  for _, name in ipairs(ordered(self)) do
    s:spawn(fn, { name = name, timeout = opts and opts.timeout }, self._by[name], name)
  end
  s:run()
  local out = {}
  for i, name in ipairs(ordered(self)) do
    local t = s.tasks[i]
    out[name] = t.ok and t.values[1] or failure(t)
  end
  if s.interrupted then errors.fail("ECANCELED", "interrupted") end
  return setmetatable(out, { __index = { _names = ordered(self) }, __tostring = M.show })
end

--- board:exec on every board at once (argv or a shell command, opts as Board:exec plus timeout).
function Boards:exec(argv, opts)
  local o = { echo = false }
  for k, v in pairs(opts or {}) do o[k] = v end
  return self:each(function(board) return board:exec(argv, o) end, opts)
end

--- Closes every board.
function Boards:close()
  for _, name in ipairs(ordered(self)) do self._by[name]:close() end
end

------------------------------------------------------------------------------------------------ flows

--- The options every declared flow script takes for many boards (`odp run SCRIPT`, scripts/sweep.lua).
M.OPTIONS = {
  { "boards", "Run on the boards of a lab: LAB.lua[:TAG|NAMES], lava or labgrid:FILE[:TARGET]; their\n" ..
    "transport options come from it (docs/many-boards.md)", nil, "string", metavar = "SPEC" },
  { "spread", "With --boards: each (every board runs every point) or pool (identical boards share the points)",
    "each", "choice", choices = { "each", "pool" } },
  { "board-timeout", "With --boards: seconds a point may take on a board; past it the board is out (default:\n" ..
    "no limit)", nil, "number", metavar = "S" },
}

--- Whether argv asks for many boards (--boards SPEC or --boards=SPEC, before any --): then the transport
-- options a script requires (--host, ...) come from the lab file instead.
function M.requested(argv)
  for _, a in ipairs(argv) do
    if a == "--" then return false end
    if a == "--boards" or a:match("^%-%-boards=") then return true end
  end
  return false
end

--- A flow script's option list plus M.OPTIONS; with relax (--boards given), its required options (the
-- transport's --host, ...) no longer required: the lab file gives them.
function M.script_options(options, relax)
  local out = {}
  for _, o in ipairs(options) do out[#out + 1] = relax and cli.optional(o) or o end
  for _, o in ipairs(M.OPTIONS) do out[#out + 1] = o end
  return out
end

--- Runs a declared flow script's points on the boards of a lab (odp.run.sweep.run_boards). o:
--   spec       the script's declaration (its flow, preflight)
--   boards     the --boards SPEC; spread, timeout: --spread, --board-timeout
--   opts_for   function(params) -> the flow's options for a point; the boards' transport options come from the
--              lab, so those keys are dropped from it
--   args       the runner's arguments
--   points     list of parameter tables (sweep.points); nil: one point with none
--   cli        the parsed command line (odp.core.options.parse's table): a transport option it gives
--              (--remote-dir, --host, --port, --identity, ...) applies to every board, over the lab file's
--              value, which is over the device file's; one no board of the lab takes is refused (exit 2)
--   out, repeat, ui   as odp.run.sweep.run_boards
-- Returns run_boards' result.
function M.run_flow(o)
  local run = require("odp.run") -- lazy: start-up
  local lab = require("odp.target.lab") -- lazy: start-up
  -- a labgrid target that names no odp device is a board of the script's device
  local entries = lab.load(o.boards, nil, o.spec.device and o.spec.device.path).boards
  local transport = {}
  for _, e in ipairs(entries) do
    for k in pairs(lab.transport_options(e.dev)) do transport[k] = true end
  end
  -- the script's own transport options the command line gave: every board takes them, or the run is refused
  local given = {}
  if o.cli then
    local dev = type(o.spec.device) == "table" and o.spec.device or o.spec.target and { transport = o.spec.target }
    local script_transport = dev and lab.transport_options(dev) or {}
    for k in pairs(cli.given(o.cli)) do
      if script_transport[k] or transport[k] then given[k] = o.cli[k] end
    end
    for k in pairs(given) do
      for _, e in ipairs(entries) do
        if not lab.transport_options(e.dev)[k] then
          errors.fail("EUSAGE", ("--%s applies to every board of --boards, and board %s "
            .. "(%s) takes no --%s"):format(k:gsub("_", "-"), e.name, e.dev.transport, k:gsub("_", "-")))
        end
      end
    end
  end
  local function point_opts(params)
    local po = o.opts_for(params)
    for k in pairs(transport) do po[k] = nil end
    return po
  end
  return require("odp.run.sweep").run_boards { -- lazy: start-up
    points = o.points or { {}, names = {} }, out = o.out, boards = entries, spread = o.spread,
    timeout = o.timeout, ui = o.ui, ["repeat"] = o["repeat"],
    open = function(entry)
      local bo = lab.board_options(entry)
      for k, v in pairs(given) do bo[k] = v end -- the command line over the lab file (over the device file)
      bo.ui = o.ui and o.ui:child(entry.name)
      return run.open_board(entry.dev, bo)
    end,
    run_point = function(board, params) return run.point(board, o.spec, point_opts(params), o.args) end,
    close = function(board) run.close(board) end,
  }
end

--- `odp run SCRIPT --boards SPEC`: the script's run on every board (--spread each) or on the first free one
-- (pool), reported like one run's records; exit as report.exit_code says (1 when some board failed, 3 when
-- none was reached), the summary naming them.
function M.main(spec, opts, args)
  local ui = ui_mod.new { quiet = opts.quiet, verbose = opts.verbose }
  local res = M.run_flow { spec = spec, boards = opts.boards, spread = opts.spread, timeout = opts.board_timeout,
    args = args, ui = ui, cli = opts, opts_for = function(params)
      local po = {}
      for k, v in pairs(opts) do po[k] = v end
      for _, own in ipairs(M.OPTIONS) do po[(own[1]:gsub("-", "_"))] = nil end
      po.out, po.format = nil, nil
      for k, v in pairs(params) do po[k] = v end
      return po
    end }
  local publish = require("odp.results.publish") -- lazy: start-up
  publish.emit(res.records, { format = opts.format, out = opts.out, quiet = opts.quiet, report = opts.report })
  local line = M.summary(res)
  if line then io.stderr:write("odp: ", line, "\n") end
  -- the one rule of a run, a sweep and many boards (docs/ci.md)
  return require("odp.results.report").exit_code(res.records) -- lazy: start-up
end

--- The summary line of a many-board run: how many points failed, on which boards, and why each board is out.
function M.summary(res)
  if res.failed == 0 then return nil end
  local parts = {}
  local names = {}
  for name in pairs(res.boards) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local st = res.boards[name]
    if st.failed > 0 then
      parts[#parts + 1] = ("%s (%d%s)"):format(name, st.failed, st.out and (": " .. st.out) or "")
    end
  end
  return ("%d of %d point runs failed: %s"):format(res.failed, #res.records, table.concat(parts, "; "))
end

--- Each board's result under its name: an exec's output and status, an error's one line, else the value.
function M.show(results)
  local parts = {}
  for _, name in ipairs(results._names) do
    local r = results[name]
    parts[#parts + 1] = ("== %s"):format(name)
    if type(r) == "table" and r.error then
      parts[#parts + 1] = ("%s: %s"):format(r.error.code, r.error.message)
    elseif type(r) == "table" and r.stdout then
      if r.stdout ~= "" then parts[#parts + 1] = (r.stdout:gsub("\n$", "")) end
      if r.stderr ~= "" then parts[#parts + 1] = (r.stderr:gsub("\n$", "")) end
      parts[#parts + 1] = board_mod.exec_status(r)
    elseif type(r) == "table" then
      parts[#parts + 1] = json.encode(r)
    else
      parts[#parts + 1] = tostring(r)
    end
  end
  return table.concat(parts, "\n")
end

return M
