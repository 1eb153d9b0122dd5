-- Two QEMU twins (devices/twin_m55.lua, tests/twin/) driven at once from one process: the probe (shared RAM +
-- QMP), RTT and XMODEM waits yield to the scheduler like SSH ones. Oracles: the twin flasher's own CRC-32 of
-- what it received against zlib's of the payload, and the wall clock against one twin alone.
local T = require("t")
local boards_mod = require("odp.run.boards")
local lab = require("odp.target.lab")
local probe = require("odp.probe")
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

-- Flashes the payload to boards a and b at once; both right, and the two transfers overlapping (one after the
-- other, the second would start when the first ended).
local function flash_both(bs, a_name, b_name)
  local span = {}
  local res = bs:each(function(b, name)
    local t0 = sys.now()
    local r = b:flash(payload)
    span[name] = { t0, sys.now() }
    return r
  end, { timeout = 300 })
  check(res[a_name], a_name)
  check(res[b_name], b_name)
  local a, b = span[a_name], span[b_name]
  local overlap = math.min(a[2], b[2]) - math.max(a[1], b[1])
  T.ok(overlap > 0.5 * math.min(a[2] - a[1], b[2] - b[1]),
    ("flashes %.1f-%.1f s and %.1f-%.1f s overlap"):format(0, a[2] - a[1], b[1] - a[1], b[2] - a[1]))
end

T.test("two twins flashed at once: both right, the two transfers overlapping", function()
  flash_both(boards, "twin-a", "twin-b")
end)

-- The same two twins through the J-Link path: the test libjlinkarm.so (tests/twin/jlinkarm_twin.c), which finds
-- its twin in ODP_TWIN_STATE. Each J-Link is a helper process of its own (odp --jlink-helper) that the board's
-- probe gives its own twin's state dir; odp itself never maps the DLL.
local root = T.root()
local dll = tmp .. "/libjlinkarm.so"
assert(proc.run { argv = { "cc", "-std=c11", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-o", dll,
  root .. "/tests/twin/jlinkarm_twin.c" }, timeout = 60 }.ok)

-- odp's J-Link helpers now running: {pid = cmdline}
local function helpers()
  local out, me = {}, sys.getpid()
  for _, e in ipairs(sys.readdir("/proc")) do
    local f = e:match("^%d+$") and io.open("/proc/" .. e .. "/stat")
    local stat = f and f:read("a")
    if f then f:close() end
    local ppid = stat and stat:match("^%d+ %b() %S+ (%d+)")
    if ppid and tonumber(ppid) == me then
      local c = io.open("/proc/" .. e .. "/cmdline")
      local cmd = c and c:read("a") or ""
      if c then c:close() end
      if cmd:find("--jlink-helper", 1, true) then out[tonumber(e)] = cmd end
    end
  end
  return out
end
local function count(t) local n = 0 for _ in pairs(t) do n = n + 1 end return n end
local function dll_mapped()
  local f = assert(io.open("/proc/self/maps"))
  local maps = f:read("a")
  f:close()
  return maps:find("libjlinkarm", 1, true) ~= nil
end

local function jlink_twin(name)
  return ("  { name = %q, device = \"devices/twin_m55.lua\", twin_state = %q, build_dir = %q, runs_dir = %q, " ..
    "probe = \"jlink\", jlink_lib = %q },\n"):format(name .. "-jlink", tmp .. "/" .. name, tmp .. "/build", tmp .. "/runs", dll)
end
T.write(tmp .. "/lab-jlink.lua", "return { boards = {\n" .. jlink_twin("twin-a") .. jlink_twin("twin-b") .. "} }\n")

T.test("two twins flashed at once through two J-Link helpers: both right, overlapping, the DLL never in odp", function()
  local jboards = boards_mod.open(lab.load(tmp .. "/lab-jlink.lua").boards, require("odp.core.ui").new { quiet = true })
  flash_both(jboards, "twin-a-jlink", "twin-b-jlink")
  T.eq(count(helpers()), 0, "the flashes' probes closed: their helpers ended")
  -- both probes open at once: two helpers, each reading its own twin's RAM (the flasher's RTT block)
  local pa, pb = jboards["twin-a-jlink"]:probe(), jboards["twin-b-jlink"]:probe()
  T.eq({ pa:kind(), pb:kind() }, { "jlink", "jlink" })
  T.eq(count(helpers()), 2, "one helper process per J-Link")
  T.eq(jboards["twin-a-jlink"]:read(0x60000000, 10), "SEGGER RTT", "twin-a's RTT block through its helper")
  T.eq(jboards["twin-b-jlink"]:read(0x60000000, 10), "SEGGER RTT", "twin-b's RTT block through its helper")
  T.eq(dll_mapped(), false, "odp never mapped libjlinkarm.so")
  jboards:close()
  T.eq(count(helpers()), 0, "closing the boards ended both helpers")
end)

T.test("a J-Link DLL call that never returns: ETIMEDOUT at the deadline, helper killed, later calls say reopen", function()
  local p = assert(probe.open { backend = "jlink", lib = dll, env = { ODP_TWIN_STATE = tmp .. "/twin-a",
    ODP_TWIN_JLINK_FAULT = "hang_read" } })
  local before = helpers()
  T.eq(count(before), 1)
  local t0 = sys.now()
  local v, e, code = p:read(0x60000000, 4, { timeout = 1 })
  local took = sys.now() - t0
  T.eq({ v, code }, { nil, "ETIMEDOUT" })
  T.ok(took >= 0.9 and took < 3, ("failed after %.2f s"):format(took))
  T.match(e, "^ETIMEDOUT: J%-Link: read 0x60000000%+4: no reply before the deadline; its helper %(pid %d+%) was killed$")
  T.eq(count(helpers()), 0, "the helper is gone (killed and reaped)")
  local pid = next(before)
  T.eq(sys.stat("/proc/" .. pid), nil, "no zombie left")
  v, e, code = p:halt()
  T.eq({ v, code }, { nil, "EIO" })
  T.match(e, "its helper was stopped %(read 0x60000000%+4: no reply before the deadline%); reopen the probe$")
  p:close()
end)

T.test("a J-Link DLL that crashes its helper: one line with the signal; odp goes on", function()
  local p = assert(probe.open { backend = "jlink", lib = dll, env = { ODP_TWIN_STATE = tmp .. "/twin-a",
    ODP_TWIN_JLINK_FAULT = "crash_read" } })
  local v, e, code = p:read(0x60000000, 4)
  T.eq({ v, code }, { nil, "EIO" })
  T.match(e, "^EIO: J%-Link: read 0x60000000%+4: the helper ended in the middle of the call; its helper %(pid %d+%) " ..
    "was killed by signal 6 %(Aborted%)$")
  T.eq(count(helpers()), 0)
  p:close()
  -- a healthy one after it: the same twin through a new helper, then gone at close
  p = assert(probe.open { backend = "jlink", lib = dll, env = { ODP_TWIN_STATE = tmp .. "/twin-a" } })
  T.eq(p:read(0x60000000, 10), "SEGGER RTT")
  T.eq(count(helpers()), 1)
  p:close()
  T.eq(count(helpers()), 0, "close ended the helper")
end)

T.test("a hung J-Link call yields to the other boards' tasks; cancelling its task kills its helper", function()
  local sched = require("odp.core.sched")
  local s = sched.new()
  local hung = s:spawn(function()
    local p = assert(probe.open { backend = "jlink", lib = dll, env = { ODP_TWIN_STATE = tmp .. "/twin-a",
      ODP_TWIN_JLINK_FAULT = "hang_read" } })
    local v, e, code = p:read(0x60000000, 4, { timeout = 60 })
    p:close()
    return v, e, code
  end, { name = "hung", timeout = 1.5 })
  local reads = 0
  local busy = s:spawn(function()
    local p = assert(probe.open { backend = "jlink", lib = dll, env = { ODP_TWIN_STATE = tmp .. "/twin-a" } })
    local t0 = sys.now()
    while sys.now() - t0 < 1 do
      assert(p:read(0x60000000, 10) == "SEGGER RTT")
      reads = reads + 1
    end
    p:close()
    return reads
  end, { name = "busy", timeout = 30 })
  local t0 = sys.now()
  s:run()
  T.ok(sys.now() - t0 < 5, "the 60 s read was cut short by its task's deadline")
  T.eq(hung.canceled, true)
  T.eq({ hung.values[1], hung.values[3] }, { nil, "ECANCELED" })
  T.match(hung.values[2], "^ECANCELED: J%-Link: read 0x60000000%+4: cancelled; its helper %(pid %d+%) was killed$")
  T.eq(busy.ok, true)
  T.ok(reads > 100, reads .. " reads by the other task while the first one's DLL call hung")
  T.eq(count(helpers()), 0)
end)

T.test("a J-Link helper does not outlive odp, even one killed by SIGKILL while its DLL call hangs", function()
  -- the helper is inside a ReadMemEx that never returns, so only PR_SET_PDEATHSIG can end it (an idle helper
  -- would also see its input close)
  local script, pidfile = tmp .. "/dies.lua", tmp .. "/helper.pid"
  T.write(script, ([[
    local sys = require("odp.sys")
    local p = assert(require("odp.probe").open { backend = "jlink", lib = %q, env = { ODP_TWIN_STATE = %q,
      ODP_TWIN_JLINK_FAULT = "hang_read" } })
    local me = sys.getpid()
    for _, e in ipairs(sys.readdir("/proc")) do
      local f = e:match("^%%d+$") and io.open("/proc/" .. e .. "/stat")
      local st = f and f:read("a")
      if f then f:close() end
      if st and tonumber(st:match("^%%d+ %%b() %%S+ (%%d+)")) == me then sys.write_file(%q, e) end
    end
    os.execute(("(sleep 0.5; kill -KILL %%d) >/dev/null 2>&1 &"):format(me))
    p:read(0x60000000, 4, { timeout = 30 })
  ]]):format(dll, tmp .. "/twin-a", pidfile))
  local r = proc.run { argv = { os.getenv("ODP") or (root .. "/build/odp"), "run", script }, timeout = 30 }
  T.eq(r.signal, 9, "odp was killed")
  local pid = T.read(pidfile)
  T.ok(pid and pid:match("^%d+$"), "the helper's pid was seen")
  local gone = false
  for _ = 1, 50 do
    local f = io.open("/proc/" .. pid .. "/stat")
    local st = f and f:read("a")
    if f then f:close() end
    -- gone, or a zombie of this process (it reaps orphans as a subreaper, docs/signals.md)
    if not st or st:match("^%d+ %b() Z") then gone = true break end
    sys.sleep(0.1)
  end
  T.ok(gone, "the helper ended with odp (PR_SET_PDEATHSIG)")
end)

T.test("a twin killed mid-flash fails its own flash only, at once (not at the flash timeout)", function()
  local big = tmp .. "/big.bin"
  T.write(big, ("big-flash "):rep(200000)) -- 2 MB: seconds of XMODEM
  local pidfile = tmp .. "/twin-b/pid"
  local ended = {}
  local res = boards:each(function(b, name)
    if name == "twin-b" then
      -- the flash step restarts the twin with the flasher firmware: kill that QEMU once the transfer runs
      proc.run { "sh", "-c", ("(old=$(cat %s); while :; do new=$(cat %s 2>/dev/null); " ..
        "[ -n \"$new\" ] && [ \"$new\" != \"$old\" ] && break; sleep 0.05; done; sleep 1.5; kill -9 $new) " ..
        ">/dev/null 2>&1 &"):format(pidfile, pidfile) }
    end
    local t0 = sys.now()
    local ok, r = pcall(b.flash, b, big)
    ended[name] = sys.now() - t0
    if not ok then error(r, 0) end
    return r
  end, { timeout = 300 })
  local want = T.read(big)
  local a = res["twin-a"]
  T.eq(a.crc32, a.expected_crc32, "twin-a: the flasher's CRC")
  T.eq(a.crc32, ("%08x"):format(sys.crc32(want .. ("\26"):rep(a.bytes - #want))), "twin-a: zlib's CRC")
  local e = res["twin-b"].error
  T.ok(e ~= nil, "twin-b's flash failed")
  print("# twin-b: " .. tostring(e and e.code .. ": " .. e.message) .. (" after %.1f s"):format(ended["twin-b"] or -1))
  -- the shared RAM file outlives QEMU: without the probe noticing, the flash would wait out its 300 s timeout
  T.eq(e and e.code, "ENODEV", "the board is gone, not a timeout")
  T.match(e and e.message or "", "QEMU is gone")
  T.ok((ended["twin-b"] or 1e9) < 60, ("twin-b's flash ended %.1f s after it began"):format(ended["twin-b"] or -1))
end)

boards:close()
T.done()
