--- odp repl [DEVICE]: an interactive Lua prompt with odp's modules (and a device description) loaded.
local errors = require("odp.errors")
local repl = require("odp.repl")

local M = { summary = "Interactive Lua prompt with every odp module loaded (optionally a device file)",
  help_text = "usage: odp repl [DEVICE.lua]\n\n" ..
    "Globals: odp.<module> (odp.proc, odp.ssh, odp.probe, odp.rtt, ...), device (the DEVICE file's table).\n" ..
    "Tab completes names and members; an incomplete statement continues on the next line (>>);\n" ..
    "an expression's value is printed. History: $XDG_STATE_HOME/odp/repl_history." }

function M.main(args)
  if args[1] == "--help" or args[1] == "-h" then
    print(M.help_text)
    return 0
  end
  local env = setmetatable({ odp = repl.odp_namespace() }, { __index = _G })
  if args[1] then
    local chunk, err = loadfile(args[1], "t", {})
    if not chunk then errors.fail("EUSAGE", ("cannot load device file: %s"):format(err), 2) end
    env.device = chunk()
    io.stderr:write(("device: %s (%s)\n"):format(env.device and env.device.name or args[1], args[1]))
  end
  repl.loop(env)
  return 0
end

return M
