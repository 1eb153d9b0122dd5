-- Two QEMU twins (devices/twin_m55.lua, tests/twin/) driven at once from one process: the probe (shared RAM +
-- QMP), RTT and XMODEM waits yield to the scheduler like SSH ones. Oracles: the twin flasher's own CRC-32 of
-- what it received against zlib's of the payload, and the wall clock against one twin alone.
local T = require("t")
local boards_mod = require("odp.run.boards")
local lab = require("odp.target.lab")
local proc = require("odp.proc")
local sys = require("odp.sys")

local tmp = T.tmpdir()
local function twin(name)
  return ("  { name = %q, device = \"devices/twin_m55.lua\", twin_state = %q, build_dir = %q, runs_dir = %q },\n")
    :format(name, tmp .. "/" .. name, tmp .. "/build", tmp .. "/runs")
end
T.write(tmp .. "/lab.lua", "return { boards = {\n" .. twin("twin-a") .. twin("twin-b") .. "} }\n")
local boards = boards_mod.open(lab.load(tmp .. "/lab.lua").boards, require("odp.core.ui").new { quiet = true })
-- the firmware is built once (the second board finds it unchanged), each twin started with it
assert(boards["twin-a"]:attach())
assert(boards["twin-b"]:attach())

local payload = tmp .. "/payload.bin"
T.write(payload, ("two-twins "):rep(40000))
local data = T.read(payload)

local function check(r, what)
  T.eq(r.crc32, r.expected_crc32, what .. ": the flasher's CRC")
  T.eq(r.crc32, ("%08x"):format(sys.crc32(data .. ("\26"):rep(r.bytes - #data))), what .. ": zlib's CRC of the payload")
end

T.test("two twins flashed at once: both right, the two transfers overlapping", function()
  local span = {}
  local res = boards:each(function(b, name)
    local t0 = sys.now()
    local r = b:flash(payload)
    span[name] = { t0, sys.now() }
    return r
  end, { timeout = 300 })
  check(res["twin-a"], "twin-a")
  check(res["twin-b"], "twin-b")
  -- one after the other, the second would start when the first ended
  local a, b = span["twin-a"], span["twin-b"]
  local overlap = math.min(a[2], b[2]) - math.max(a[1], b[1])
  T.ok(overlap > 0.5 * math.min(a[2] - a[1], b[2] - b[1]),
    ("flashes %.1f-%.1f s and %.1f-%.1f s overlap"):format(0, a[2] - a[1], b[1] - a[1], b[2] - a[1]))
end)

T.test("a twin killed mid-flash fails its own flash only", function()
  local big = tmp .. "/big.bin"
  T.write(big, ("big-flash "):rep(200000)) -- 2 MB: seconds of XMODEM
  local pidfile = tmp .. "/twin-b/pid"
  local res = boards:each(function(b, name)
    if name == "twin-b" then
      -- the flash step restarts the twin with the flasher firmware: kill that QEMU once the transfer runs
      proc.run { "sh", "-c", ("(old=$(cat %s); while :; do new=$(cat %s 2>/dev/null); " ..
        "[ -n \"$new\" ] && [ \"$new\" != \"$old\" ] && break; sleep 0.05; done; sleep 1.5; kill -9 $new) " ..
        ">/dev/null 2>&1 &"):format(pidfile, pidfile) }
    end
    return b:flash(big)
  end, { timeout = 300 })
  local want = T.read(big)
  local a = res["twin-a"]
  T.eq(a.crc32, a.expected_crc32, "twin-a: the flasher's CRC")
  T.eq(a.crc32, ("%08x"):format(sys.crc32(want .. ("\26"):rep(a.bytes - #want))), "twin-a: zlib's CRC")
  T.ok(res["twin-b"].error ~= nil, "twin-b's flash failed")
  print("# twin-b: " .. tostring(res["twin-b"].error and res["twin-b"].error.code .. ": " .. res["twin-b"].error.message))
end)

boards:close()
T.done()
