--- odp's command line: `odp <command> ...`. Each command is a module odp.commands.<name> with
-- `summary` (one line for `odp help`) and `main(args) -> exit code`; adding a command is adding a file.
local errors = require("odp.errors")

local M = {}

local COMMANDS = { "run", "repl", "devices", "inspect", "plot", "version" }
M.COMMANDS = COMMANDS

-- What `odp --help` and the man page (lua/odp/man.lua) say beyond the commands: one declaration each.
M.EXIT_CODES = {
  { 0, "measured (or the command did what it was asked)" },
  { 1, "the flow ran and the measurement failed (the runner failed, no latency, a failed sweep point)" },
  { 2, "usage: a bad option, value, file or script" },
  { 3, "device or infrastructure: the board, probe or a tool is unreachable or failed" },
  { 130, "interrupted (Ctrl-C); the runner and everything it started are stopped" },
}
M.ENVIRONMENT = {
  { "ODP_PATH", "`:`-separated directories searched first for odp's Lua library, scripts and devices" },
  { "ODP_SSH_PASSPHRASE", "the passphrase of an encrypted SSH key (never on the command line)" },
  { "ODP_JLINK_LIB", "the SEGGER J-Link library (libjlinkarm.so) to load instead of searching for it" },
  { "ANDROID_SERIAL", "the adb device to use when several are attached (as for adb)" },
  { "ANDROID_ADB_SERVER_PORT", "the port of Google's adb server (default 5037), as for adb" },
  { "ADB_SERVER_SOCKET", "the adb server's socket (tcp:HOST:PORT or localabstract:NAME), as for adb" },
  { "ADB_VENDOR_KEYS", "further adb private keys, `:`-separated, as for adb" },
  { "SSH_AUTH_SOCK", "the ssh-agent socket tried for SSH keys" },
  { "XDG_STATE_HOME", "where odp repl keeps its history (default ~/.local/state)" },
}
M.FILES = {
  { "runs/<id>/", "each run's runner stdout, stderr and result.json (--runs-dir)" },
  { "~/.ssh/config", "ssh_config aliases for --host (--ssh-config FILE, or none)" },
  { "~/.ssh/known_hosts", "SSH host keys checked on every connection (--known-hosts)" },
  { "~/.android/adbkey", "the adb RSA key (created when absent), with adbkey.pub" },
  { "PREFIX/share/odp/", "the installed Lua library, scripts and device files" },
}

local function usage()
  local lines = { "usage: odp <command> [options]", "", "Commands:" }
  for _, name in ipairs(COMMANDS) do
    local ok, cmd = pcall(require, "odp.commands." .. name)
    if ok then lines[#lines + 1] = ("  %-9s %s"):format(name, cmd.summary) end
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Run `odp <command> --help` or `odp run SCRIPT --help` for details; `man odp` for all of it."
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Exit codes:"
  for _, e in ipairs(M.EXIT_CODES) do lines[#lines + 1] = ("  %-4d %s"):format(e[1], e[2]) end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Environment:"
  for _, e in ipairs(M.ENVIRONMENT) do lines[#lines + 1] = ("  %-24s %s"):format(e[1], e[2]) end
  return table.concat(lines, "\n")
end

--- Presents an error raised anywhere below: a structured failure is one line; anything else is a script
-- or odp bug, shown with its traceback. Returns the exit code.
function M.present(err)
  if errors.is_failure(err) then
    io.stderr:write("odp: ", err.message, "\n")
    return err.exit
  end
  io.stderr:write("odp: error: ", tostring(err), "\n")
  return 2
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
  local ok, cmd = pcall(require, "odp.commands." .. name)
  if not ok then
    if not tostring(cmd):find("module 'odp.commands." .. name .. "' not found", 1, true) then
      return M.present(cmd)
    end
    io.stderr:write(("odp: unknown command '%s'\n\n"):format(name), usage(), "\n")
    return 2
  end
  local rest = table.move(args, 2, #args, 1, {})
  local done, code = xpcall(cmd.main, traceback, rest)
  if not done then return M.present(code) end
  return code or 0
end

return M
