--- The flow registry: a flow module (lua/odp/flows/*) by its name (odp.target.device's FLOWS). The flows
-- sit above the run layer and require it; this lookup by name is the one place the run layer reaches them
-- (tests/lua/layers_test.lua knows it). odp.run's run.flow(name) and a board's flow verbs (board:profile,
-- the Ethos-U board's build and flash: a flow's `board_verbs`) come through here.
local errors = require("odp.core.errors")
local device = require("odp.target.device")

local M = {}

--- The flow module called `name`; a module is returned as it is. An unknown name is a usage error (exit 2).
function M.get(name)
  if type(name) == "table" then return name end
  for _, known in ipairs(device.FLOWS) do
    if known == name then return require("odp.flows." .. name) end -- lazy: run-time name
  end
  errors.fail("EUSAGE", ("no flow '%s' (flows: %s)"):format(tostring(name), table.concat(device.FLOWS, ", ")))
end

return M
