-- `odp devices` against the emulator (ADBEMU_PORT; ADB_MODE says whether it authorizes) and this machine's USB.
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local odp = os.getenv("ODP") or (T.root() .. "/build/odp")
local addr = "tcp:127.0.0.1:" .. assert(os.getenv("ADBEMU_PORT"))
local mode = os.getenv("ADB_MODE")

local function run(args)
  local argv = { odp, "devices" }
  table.move(args, 1, #args, 3, argv)
  return assert(proc.run { argv = argv, timeout = 30 })
end

if mode == "devices" then
  T.test("odp devices --adb: state device and the model, human and JSON", function()
    local r = run { "--adb", addr }
    T.eq(r.status, 0, "exit status; stderr: " .. r.stderr)
    T.match(r.stdout, "127%.0%.0%.1:%d+%s+device%s+X300_Pro_Emu")
    local list = assert(json.decode(run({ "--adb", addr, "--json" }).stdout)).devices
    local last = list[#list]
    T.eq(last.kind, "adb"); T.eq(last.state, "device"); T.eq(last.description, "X300_Pro_Emu")
    T.eq(last.transport, addr)
  end)
  T.test("odp devices without adb devices says so and exits 0", function()
    local r = run {}
    T.eq(r.status, 0)
    T.match(r.stdout, "no adb devices %(")
    T.match(r.stdout, "no adb server at localhost:1 %(nothing listens there%): runs talk to adb devices directly")
  end)
  T.test("odp devices: bad arguments are usage errors", function()
    T.eq(run({ "--adb", "usb:1" }).status, 2)
    T.eq(run({ "--frob" }).status, 2)
  end)
else -- devices-unauthorized
  T.test("odp devices --adb: an unauthorized device says so, with what to do", function()
    local r = run { "--adb", addr }
    T.eq(r.status, 0, "exit status; stderr: " .. r.stderr)
    T.match(r.stdout, "unauthorized")
    T.match(r.stdout, "USB debugging prompt")
  end)
end
T.done()
