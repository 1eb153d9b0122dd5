--- odp devices: what is attached to this machine and how to reach it. Each kind of device comes from a
--- "source": {name=, list=function() -> rows | nil, err}. Rows: {kind=, id=, description=, hint=}.
--- Other modules add sources with `table.insert(require("odp.commands.devices").sources, src)`.
local report = require("odp.report")

local M = { summary = "List serial ports and debug probes (J-Link) with an access hint each" }

local DOCS = "docs/devices.md"

local function hex4(v) return v and string.format("%04x", v) or nil end

local serial_source = {
  name = "serial",
  list = function()
    local serial = require("odp.serial")
    local ports, err = serial.list()
    if not ports then return nil, err end
    local rows = {}
    for _, p in ipairs(ports) do
      local usb = p.vid and (hex4(p.vid) .. ":" .. hex4(p.pid)) or nil
      local desc = p.description ~= "" and p.description or p.product
      local hint
      if not p.access then
        hint = ("no permission: add yourself to group dialout (sudo usermod -aG dialout $USER), see %s"):format(DOCS)
      else
        hint = ('odp.serial.open{port="%s", baud=115200}'):format(p.port)
      end
      rows[#rows + 1] = { kind = "serial", id = p.port, usb = usb, description = desc, hint = hint }
    end
    return rows
  end,
}

local jlink_source = {
  name = "jlink",
  list = function()
    local probe = require("odp.probe")
    local devs, err = probe.usb_list(0x1366)
    if not devs then return nil, err end
    local lib = probe.jlink_lib()
    local rows = {}
    for _, d in ipairs(devs) do
      local hint
      if not d.access then
        hint = ("no permission (%s): install SEGGER's udev rules (99-jlink.rules), see %s"):format(
          d.open_error or "access denied", DOCS)
      elseif not lib then
        hint = "install the J-Link Software (libjlinkarm.so) or set ODP_JLINK_LIB, see " .. DOCS
      else
        hint = ('odp.probe.open{backend="jlink", device="AE822FA0E5597LS0_M55_HP"%s}'):format(
          d.serial and (', serial="' .. d.serial .. '"') or "")
      end
      rows[#rows + 1] = { kind = "jlink", id = d.serial or string.format("usb %d:%d", d.bus, d.address),
        usb = hex4(d.vid) .. ":" .. hex4(d.pid), description = d.product or "SEGGER J-Link", hint = hint }
    end
    return rows
  end,
}

M.sources = { serial_source, jlink_source }

--- Runs every source; a failing source becomes a warning, the others still list.
function M.collect()
  local rows, warnings = {}, {}
  for _, src in ipairs(M.sources) do
    local ok, list, err = pcall(src.list)
    if not ok then warnings[#warnings + 1] = src.name .. ": " .. tostring(list)
    elseif not list then warnings[#warnings + 1] = src.name .. ": " .. tostring(err)
    else for _, r in ipairs(list) do rows[#rows + 1] = r end end
  end
  return rows, warnings
end

function M.main(args)
  local format = "human"
  for _, a in ipairs(args) do
    if a == "--json" or a == "--format=json" then format = "json"
    elseif a == "-h" or a == "--help" then
      print("usage: odp devices [--json]\n\nLists serial ports (USB VID:PID) and J-Link probes (USB VID 1366)\n" ..
        "with one hint each: how to open it, or what to fix first. Sources: serial, jlink (+ added ones).")
      return 0
    else
      io.stderr:write(("odp devices: unknown argument '%s'\n"):format(a)); return 2
    end
  end
  local rows, warnings = M.collect()
  if format == "json" then
    print(require("odp.json").encode({ devices = require("odp.json").array(rows), warnings = require("odp.json").array(warnings) }))
  else
    if #rows == 0 then
      print("no serial ports or J-Link probes found (ptys are not listed; see " .. DOCS .. ")")
    else
      print(report.table(rows, { { key = "kind" }, { key = "id" }, { key = "usb" }, { key = "description" },
        { key = "hint" } }))
    end
  end
  for _, w in ipairs(warnings) do io.stderr:write("warning: " .. w .. "\n") end
  return 0
end

return M
