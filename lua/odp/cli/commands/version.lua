--- odp version [-v]
local host = require("odp.host")
local lpeg = require("lpeg")

local M = { summary = "Print odp's version (-v: build and library details)",
  help_text = "usage: odp version [-v]" }

function M.main(args)
  print("odp " .. host.version)
  if args[1] == "-v" or args[1] == "--verbose" then
    print("lua      " .. host.lua_release)
    print("lpeg     " .. (lpeg.version and (type(lpeg.version) == "function" and lpeg.version() or lpeg.version) or "?"))
    print("root     " .. host.root)
    print("built    " .. host.built .. (host.compiler and (" with " .. host.compiler) or ""))
    -- the C modules; those that need a library beyond libc (ssh, adb, serial) are loaded here, so a missing
    -- library shows as "no" with the loader's reason
    for _, m in ipairs({ "proc", "ssh", "adb", "probe", "rtt", "xmodem", "serial", "etdumpcore", "ptecore", "elf" }) do
      local ok, mod = pcall(require, "odp." .. m) -- lazy: run-time name
      local info = ok and type(mod) == "table" and mod.backend_version and (" (" .. mod.backend_version() .. ")") or
        not ok and (" (" .. tostring(mod):match("^[^\n]*") .. ")") or ""
      print(("module   odp.%-10s %s%s"):format(m, ok and "yes" or "no", info))
    end
  end
  return 0
end

return M
