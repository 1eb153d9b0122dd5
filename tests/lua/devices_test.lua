-- odp devices: sources, hints, a failing source, JSON output.
local T = require("t")
local devices = require("odp.cli.commands.devices")

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

T.done()
