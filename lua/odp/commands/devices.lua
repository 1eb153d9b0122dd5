--- odp devices [--adb tcp:HOST:PORT]... [--json]: the boards odp can reach. Today: Android devices over adb
-- (USB, plus any TCP addresses given), with their authorization state and what to do about it.
local adb = require("odp.adb")
local json = require("odp.json")

local M = { summary = "List adb devices on USB (serial, model, authorized or not; --adb tcp:HOST:PORT to probe one)" }

local USAGE = [[usage: odp devices [--adb tcp:HOST:PORT]... [--timeout S] [--json]
Lists Android devices on USB (and the adb TCP addresses given) with their state:
  device        authorized: odp can use it
  unauthorized  accept the "Allow USB debugging?" prompt on the phone (odp just offered its key)
  busy          another program holds it, usually Google's adb server: run `adb kill-server`
  no permissions  install the udev rule (docs/devices.md, Android)
  offline       it did not answer]]

-- Connects briefly to learn the model and whether this computer is authorized.
local function probe(entry, transport, serial, timeout)
  local dev, err, code = adb.connect { transport = transport, serial = serial, timeout = timeout,
    auth_timeout = 0.5 }
  if dev then
    local info = dev:info()
    dev:close()
    entry.state, entry.model, entry.product = "device", info.model, info.product
  elseif code == "EAUTH" and err:find("authorize", 1, true) then
    entry.state = "unauthorized"
    entry.hint = "unlock the phone and accept the USB debugging prompt (Allow), then run again"
  elseif code == "EBUSY" then
    entry.state, entry.hint = "busy", err:gsub("^EBUSY: ", "")
  else
    entry.state, entry.hint = "offline", err
  end
  return entry
end

function M.main(args)
  local tcp, as_json, timeout = {}, false, 3
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--adb" and args[i + 1] then
      local t = args[i + 1]
      if not t:match("^tcp:.+:%d+$") then io.stderr:write("odp devices: --adb wants tcp:HOST:PORT\n") return 2 end
      tcp[#tcp + 1] = t
      i = i + 1
    elseif a == "--timeout" and tonumber(args[i + 1] or "") then
      timeout = tonumber(args[i + 1])
      i = i + 1
    elseif a == "--json" then
      as_json = true
    elseif a == "-h" or a == "--help" then
      print(USAGE)
      return 0
    else
      io.stderr:write("odp devices: unknown argument '" .. a .. "'\n" .. USAGE .. "\n")
      return 2
    end
    i = i + 1
  end
  local list = {}
  local usb, err = adb.devices()
  if not usb then io.stderr:write("odp devices: " .. err .. "\n") usb = {} end
  for _, d in ipairs(usb) do
    local e = { serial = d.serial, transport = "usb", state = d.state, model = d.model, hint = d.hint }
    if d.state == "available" then probe(e, "usb", d.serial, timeout) end
    list[#list + 1] = e
  end
  for _, t in ipairs(tcp) do
    list[#list + 1] = probe({ serial = t:sub(5), transport = t }, t, nil, timeout)
  end
  if as_json then
    print(json.encode(json.array(list)))
    return 0
  end
  if #list == 0 then
    print("no adb devices on USB (USB debugging on? cable? see docs/devices.md, Android)")
    return 0
  end
  local rows = { { "SERIAL", "STATE", "MODEL", "TRANSPORT" } }
  for _, e in ipairs(list) do rows[#rows + 1] = { e.serial, e.state, e.model or "", e.transport } end
  local w = {}
  for _, r in ipairs(rows) do for c, v in ipairs(r) do w[c] = math.max(w[c] or 0, #v) end end
  for _, r in ipairs(rows) do
    local cells = {}
    for c, v in ipairs(r) do cells[c] = v .. string.rep(" ", w[c] - #v) end
    print((table.concat(cells, "  "):gsub("%s+$", "")))
  end
  for _, e in ipairs(list) do if e.hint then print(("%s: %s"):format(e.serial, e.hint)) end end
  return 0
end

return M
