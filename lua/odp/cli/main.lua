--- odp's command line: `odp <command> ...`. Each command is a module odp.cli.commands.<name> with
-- `summary` (one line for `odp help`) and `main(args) -> exit code`; adding a command is adding a file.
local errors = require("odp.core.errors")
local sys = require("odp.sys")
-- coroutine.resume/wrap that let a task's own coroutines wait through the scheduler, for the whole process
require("odp.core.coroutines").install()

local M = {}

local COMMANDS = { "run", "repl", "devices", "inspect", "plot", "compare", "history", "report", "version" }
M.COMMANDS = COMMANDS

--- The module of a command by its name (the commands' registry; odp.cli.man reads them too).
function M.command(name)
  return require("odp.cli.commands." .. name) -- lazy: run-time name
end

local function usage()
  local lines = { "usage: odp <command> [options]", "", "Commands:" }
  for _, name in ipairs(COMMANDS) do
    lines[#lines + 1] = ("  %-9s %s"):format(name, M.command(name).summary)
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Run `odp <command> --help` or `odp run SCRIPT --help` for details; `man odp` for all of it."
  local cli = require("odp.core.options") -- lazy: start-up
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Exit codes:"
  for _, e in ipairs(cli.EXIT_CODES) do lines[#lines + 1] = ("  %-4d %s"):format(e[1], e[2]) end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Environment:"
  for _, e in ipairs(cli.ENVIRONMENT) do lines[#lines + 1] = ("  %-24s %s"):format(e[1], e[2]) end
  return table.concat(lines, "\n")
end

--- Presents an error raised anywhere below: a structured failure is one line, and the exit code its code's
-- status (odp.core.errors.CODES; the failure carries it as err.exit); anything else is a script or odp bug,
-- shown with its traceback. Returns the exit code.
function M.present(err)
  if errors.is_failure(err) then
    -- an interruption says so by its code: whatever step it cut, one line a log or a wrapper can grep
    io.stderr:write("odp: ", err.code == "ECANCELED" and "ECANCELED: " or "", err.message, "\n")
    return err.exit
  end
  io.stderr:write("odp: error: ", tostring(err), "\n")
  return 2
end

-- The signal that asked odp to stop, by name.
local function signame()
  local sig = sys.terminating()
  return sig == 1 and "SIGHUP" or sig == 15 and "SIGTERM" or "SIGINT"
end

local function traceback(e)
  if errors.is_failure(e) or tostring(e):find("\nstack traceback:", 1, true) then return e end
  return debug.traceback(tostring(e), 2)
end

function M.main(args)
  local name = args[1]
  if name == nil or name == "help" or name == "--help" or name == "-h" then
    print(usage())
    return name == nil and 2 or 0
  end
  if name == "--version" then name = "version" end
  local ok, cmd = pcall(require, "odp.cli.commands." .. name) -- lazy: run-time name
  if not ok then
    if not tostring(cmd):find("module 'odp.cli.commands." .. name .. "' not found", 1, true) then
      return M.present(cmd)
    end
    io.stderr:write(("odp: unknown command '%s'\n\n"):format(name), usage(), "\n")
    return 2
  end
  local rest = table.move(args, 2, #args, 1, {})
  local done, code = xpcall(cmd.main, traceback, rest)
  -- boards left open (a script's, the REPL's) are closed here: sessions ended, the twin's QEMU stopped. A
  -- Ctrl-C or signal that ended the command is lifted first, or it would cancel the closing too.
  local stopped = sys.cancel_requested() or sys.terminating()
  sys.cancel_clear()
  if package.loaded["odp.run.board"] then pcall(package.loaded["odp.run.board"].close_all) end
  -- a signal that came where nothing waited (the last lines of a command, a step that reads no device, the
  -- closing), or that cut an operation short and was reported as that operation's failure (a pipe's EIO):
  -- odp was asked to stop, and it says so
  if stopped or sys.cancel_requested() then
    if done then
      done, code = false, errors.failure("ECANCELED",
        ("interrupted by %s as the command ended; what it had finished is kept"):format(signame()))
    elseif errors.is_failure(code) and code.code ~= "ECANCELED" then
      done, code = false, errors.failure("ECANCELED", "interrupted: " .. code.message)
    end
  end
  if not done then code = M.present(code) end
  -- SIGHUP/SIGTERM: whatever the command made of its interrupted run, odp ends as the signal says
  local sig = sys.terminating()
  if sig then return 128 + sig end
  return code or 0
end

return M
