--- odp run SCRIPT [options] [-- args]
-- A script either returns a declaration {name, description, options, validate, run} (odp parses the options,
-- generates --help, validates, runs and reports), or does its work itself and returns nothing (a plain Lua
-- program with every odp module at hand; its arguments are `...` and `arg`).
local errors = require("odp.core.errors")
local search = require("odp.core.search")

local M = { summary = "Run a script: a device flow (scripts/*.lua), a sweep, or your own Lua",
  help_text = "usage: odp run SCRIPT [script options]\n\n" ..
    "SCRIPT is a Lua file: scripts/host.lua, scripts/rpi5.lua, ... or your own.\n" ..
    "`odp run SCRIPT --help` lists the script's options." }

-- The user's frames only: odp's own below the script are noise to someone debugging their script.
local function traceback(e)
  if errors.is_failure(e) then return e end
  return (debug.traceback(tostring(e), 2):gsub("\n%s*%[C%]: in function 'xpcall'.*$", ""))
end

--- Runs a declared script with its argument list; returns the exit code.
function M.run_declared(spec, argv, path)
  -- loaded here, not at the top: a plain script should not pay for the CLI and the reporters
  local cli = require("odp.core.options") -- lazy: start-up
  local report = require("odp.results.report") -- lazy: start-up
  local publish = require("odp.results.publish") -- lazy: start-up
  local options = spec.options or {}
  -- a flow script runs on the boards of a lab with --boards (docs/many-boards.md)
  local boards = spec.flow and require("odp.run.boards") -- lazy: start-up
  if boards then options = boards.script_options(options, boards.requested(argv)) end
  local opts, rest = cli.parse(argv, options, cli.global_options)
  if opts.help then
    print(cli.help(("odp run %s [options]%s"):format(path, spec.passes_args and " [-- runner args]" or ""),
      spec.description, options, cli.global_options))
    return 0
  end
  if #rest > 0 and not spec.passes_args then
    errors.fail("EUSAGE", ("unexpected argument '%s' (see --help)"):format(rest[1]))
  end
  if boards and opts.boards then return boards.main(spec, opts, rest) end
  local records = require("odp.run").declared(spec, opts, rest, path) -- lazy: start-up
  if records == nil then return 0 end
  publish.emit(records, { format = opts.format, out = opts.out, quiet = opts.quiet, report = opts.report })
  -- an interrupted run is reported (what it measured) and saved; then odp says why it stopped, in one line
  for _, r in ipairs(records) do
    if r.error and r.error.code == "ECANCELED" then errors.fail("ECANCELED", r.error.message) end
  end
  return report.exit_code(records)
end

function M.main(args)
  local path = args[1]
  if path == nil or path == "--help" or path == "-h" then
    print(M.help_text)
    return path == nil and 2 or 0
  end
  -- scripts/host.lua from any directory: the current one, ODP_PATH's, odp's own tree (odp.core.search)
  local file = search.find(path)
  local chunk, err = loadfile(file)
  if not chunk then
    if not io.open(file, "r") then
      errors.fail("EUSAGE", ("cannot read script '%s' (looked in the current directory, %s)"):format(path,
        table.concat(search.dirs(), ", ")))
    end
    errors.fail("EUSAGE", err)
  end
  local argv = table.move(args, 2, #args, 1, {})
  local argt = table.move(argv, 1, #argv, 1, { [0] = path })
  _G.arg = argt
  local ok, spec = xpcall(chunk, traceback, table.unpack(argv))
  if not ok then error(spec, 0) end
  if type(spec) == "table" and type(spec.run) == "function" then
    return M.run_declared(spec, argv, path)
  end
  return math.tointeger(spec) or 0
end

return M
