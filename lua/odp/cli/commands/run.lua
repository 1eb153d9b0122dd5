--- odp run SCRIPT [options] [-- args]
-- A script either returns a declaration {name, description, options, validate, run} (odp parses the options,
-- generates --help, validates, runs and reports), or does its work itself and returns nothing (a plain Lua
-- program with every odp module at hand; its arguments are `...` and `arg`).
local errors = require("odp.core.errors")
local search = require("odp.core.search")
local sys = require("odp.sys")
local host = require("odp.host")

local M = { summary = "Run a script: a device flow (scripts/*.lua), a sweep, or your own Lua",
  help_text = "usage: odp run SCRIPT [script options]\n\n" ..
    "SCRIPT is a Lua file: scripts/host.lua, scripts/rpi5.lua, ... or your own.\n" ..
    "`odp run SCRIPT --help` lists the script's options." }

-- The user's frames only: odp's own below the script are noise to someone debugging their script.
local function traceback(e)
  if errors.is_failure(e) then return e end
  return (debug.traceback(tostring(e), 2):gsub("\n%s*%[C%]: in function 'xpcall'.*$", ""))
end

--- Runs a declared script with its argument list; returns the exit code. marks: {entered, loaded}, the
--- odp.sys.now() times `odp run` began and the script was loaded: odp's own time from its main() is counted
--- from there on (odp.core.timings), and `-v -v` prints it after the report.
function M.run_declared(spec, argv, path, marks)
  -- loaded here, not at the top: a plain script should not pay for the CLI and the reporters
  local clock = require("odp.core.timings").new(host.started) -- lazy: start-up
  clock:lap("start-up", marks.entered) -- the Lua state, the CLI's modules
  clock:lap("script (the flow's modules)", marks.loaded)
  local cli = require("odp.core.options") -- lazy: start-up
  local report = require("odp.results.report") -- lazy: start-up
  local publish = require("odp.results.publish") -- lazy: start-up
  local options = spec.options or {}
  -- a flow script runs on the boards of a lab with --boards (docs/many-boards.md)
  local boards = spec.flow and require("odp.run.boards") -- lazy: start-up
  if boards then options = boards.script_options(options, boards.requested(argv)) end
  local opts, rest = cli.parse(argv, options, cli.global_options)
  clock:lap("options")
  if opts.help then
    print(cli.help(("odp run %s [options]%s"):format(path, spec.passes_args and " [-- runner args]" or ""),
      spec.description, options, cli.global_options))
    return 0
  end
  if #rest > 0 and not spec.passes_args then
    errors.fail("EUSAGE", ("unexpected argument '%s' (see --help)"):format(rest[1]))
  end
  if boards and opts.boards then return boards.main(spec, opts, rest) end
  local ok, records = pcall(require("odp.run").declared, spec, opts, rest, path, clock) -- lazy: start-up
  if not ok then
    -- a flow's run that never reached its board (exit 3) still leaves its failed record in --out, where a CI
    -- job looks for it; a usage error or Ctrl-C ran nothing to record; a script of its own (a sweep) owns
    -- its --out
    if spec.flow and opts.out and errors.is_failure(records) and records.exit == 3 then
      local result = require("odp.results.result") -- lazy: start-up
      local rec = result.fail(result.new { flow = spec.flow, device = spec.name }, records.code, records.message)
      -- the failure itself is the line odp prints; --out's own failure would only hide it
      publish.write_out({ rec }, { out = opts.out, format = opts.format })
    end
    error(records, 0)
  end
  if records == nil then return 0 end
  publish.emit(records, { format = opts.format, out = opts.out, quiet = opts.quiet, report = opts.report })
  clock:lap("report")
  if (opts.verbose or 0) >= 2 then io.stderr:write(table.concat(clock:lines(), "\n"), "\n") end
  -- an interrupted run is reported (what it measured) and saved; then odp says why it stopped, in one line
  for _, r in ipairs(records) do
    if r.error and r.error.code == "ECANCELED" then errors.fail("ECANCELED", r.error.message) end
  end
  return report.exit_code(records)
end

function M.main(args)
  local entered = sys.now()
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
    return M.run_declared(spec, argv, path, { entered = entered, loaded = sys.now() })
  end
  return math.tointeger(spec) or 0
end

return M
