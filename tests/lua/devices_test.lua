-- odp devices: sources, hints, a failing source, JSON output.
local T = require("t")
local devices = require("odp.cli.commands.devices")
local json = require("odp.core.json")

T.test("built-in sources are serial, jlink and adb", function()
  T.eq(devices.sources[1].name, "serial"); T.eq(devices.sources[2].name, "jlink"); T.eq(devices.sources[3].name, "adb")
end)

T.test("an added source is listed; a failing one becomes a warning, the rest still list", function()
  local n = #devices.sources
  table.insert(devices.sources, { name = "fake", list = function(opts)
    assert(opts.timeout, "sources get the command's options")
    return { { kind = "fake", id = "f1", description = "a fake board", hint = "odp.fake.open{}" } } end })
  table.insert(devices.sources, { name = "broken", list = function() error("boom") end })
  table.insert(devices.sources, { name = "down", list = function() return nil, "ENODEV: no bus" end })
  local rows, warnings = devices.collect()
  local found
  for _, r in ipairs(rows) do if r.id == "f1" then found = r end end
  T.ok(found, "fake row"); T.eq(found.hint, "odp.fake.open{}")
  T.eq(#warnings, 2); T.match(warnings[1], "^broken: .*boom"); T.match(warnings[2], "^down: ENODEV")
  for i = #devices.sources, n + 1, -1 do table.remove(devices.sources, i) end
end)

T.test("every row has a kind, an id and a hint (at least the adb address given, where nothing listens)", function()
  local rows = devices.collect { adb = { "tcp:127.0.0.1:1" }, timeout = 3 }
  local given
  for _, r in ipairs(rows) do
    T.eq(type(r.kind), "string"); T.eq(type(r.id), "string"); T.eq(type(r.hint), "string")
    if r.transport == "tcp:127.0.0.1:1" then given = r end
  end
  T.ok(given, "a row for the address given")
  T.eq({ given.kind, given.state }, { "adb", "offline" })
  T.match(given.hint, "%S")
end)

T.test("probe.usb_list(0x1366) is this machine's USB list (odp.usb.list) filtered to SEGGER's vendor id", function()
  local all, err, code = require("odp.usb").list()
  local want = nil
  if all then
    want = {}
    for _, d in ipairs(all) do if d.vid == 0x1366 then want[#want + 1] = d end end
  end
  T.eq({ require("odp.probe").usb_list(0x1366) }, { want or nil, err, code })
end)

-- A mocked USB bus (umockdev, as in tests/usb): a SEGGER J-Link (1366:0105) and an Android phone (18d1:4ee7,
-- adb interface ff/42/01), each a sysfs record with its descriptors.
local function usb_record(path, dev, descriptors)
  return ("P: /devices/usb1/%s\nN: bus/usb/001/%03d\nE: SUBSYSTEM=usb\nE: DRIVER=usb\nE: BUSNUM=001\n" ..
    "E: DEVNUM=%03d\nE: DEVNAME=/dev/bus/usb/001/%03d\nE: DEVTYPE=usb_device\nA: bConfigurationValue=1\\n\n" ..
    "A: busnum=1\\n\nA: devnum=%d\\n\nA: speed=480\\n\nH: descriptors=%s\n"):format(path, dev, dev, dev, dev, descriptors)
end
local function on_mocked_usb(argv)
  local dir = T.tmpdir()
  T.write(dir .. "/jlink.umockdev", usb_record("1-1", 2, "120100020000004066130501000101020301" ..
    "0902200001010080FA" .. "0904000002FFFFFF00" .. "07058102000200" .. "07050102000200"))
  T.write(dir .. "/phone.umockdev", usb_record("1-2", 3, "1201000200000040d118e74e000101020301" ..
    "0902200001010080FA" .. "0904000002FF420100" .. "07058202000200" .. "07050202000200"))
  local cmd = { "umockdev-run", "-d", dir .. "/jlink.umockdev", "-d", dir .. "/phone.umockdev", "--" }
  table.move(argv, 1, #argv, #cmd + 1, cmd)
  cmd.timeout, cmd.cwd = 60, dir
  return assert(require("odp.proc").run(cmd))
end

T.test("on a mocked USB bus: usb.list has both devices, probe.usb_list(0x1366) the J-Link alone", function()
  local odp = os.getenv("ODP") or (T.root() .. "/build/odp")
  local script = T.tmpdir() .. "/list.lua"
  T.write(script, [[local json = require("odp.core.json")
print(json.encode(require("odp.usb").list())); print(json.encode(require("odp.probe").usb_list(0x1366)))]])
  local r = on_mocked_usb { odp, "run", script }
  T.eq(r.status, 0, r.stderr)
  local all, jlink = r.stdout:match("^([^\n]+)\n([^\n]+)\n$")
  local ids = {}
  for _, d in ipairs(json.decode(all)) do ids[#ids + 1] = ("%04x:%04x"):format(d.vid, d.pid) end
  table.sort(ids)
  T.eq(ids, { "1366:0105", "18d1:4ee7" }, "odp.usb.list")
  local j = json.decode(jlink)
  T.eq(#j, 1); T.eq({ j[1].vid, j[1].pid, j[1].bus, j[1].address }, { 0x1366, 0x0105, 1, 2 })
end)

T.test("on a mocked USB bus: odp devices lists the J-Link and the phone, each with a kind, an id and a hint", function()
  local r = on_mocked_usb { os.getenv("ODP") or (T.root() .. "/build/odp"), "devices", "--json" }
  T.eq(r.status, 0, r.stderr)
  local kinds = {}
  for _, d in ipairs(json.decode(r.stdout).devices) do
    T.eq(type(d.id), "string"); T.match(d.hint, "%S")
    kinds[#kinds + 1] = d.kind .. " " .. tostring(d.usb or d.transport)
  end
  table.sort(kinds)
  T.eq(kinds, { "adb usb", "jlink 1366:0105" })
end)

T.done()
