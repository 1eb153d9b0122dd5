-- odp.probe / odp.rtt / odp.xmodem against the twin board (see test_twin_probe.sh for the environment).
local T = require("t")
local probe, rtt, xmodem, sys = require("odp.probe"), require("odp.rtt"), require("odp.xmodem"), require("odp.sys")
local env = os.getenv

local function state(dir, f)
  local h = assert(io.open(dir .. "/" .. f)); local v = h:read("l"); h:close(); return v
end
local function qemu_probe(dir)
  return assert(probe.open{ backend = "qemu", shm = state(dir, "shm"), base = 0x60000000,
    qmp = "127.0.0.1:" .. state(dir, "qmp_port") })
end
local DDR = { { 0x60000000, 0x10000 } }

-- zlib's CRC-32 (what the twin's flasher prints)
local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do c = (c & 1) ~= 0 and (0xEDB88320 ~ (c >> 1)) or (c >> 1) end
  crc_table[i] = c
end
local function crc32(s)
  local c = 0xFFFFFFFF
  for i = 1, #s do c = crc_table[(c ~ s:byte(i)) & 0xFF] ~ (c >> 8) end
  return c ~ 0xFFFFFFFF
end
local function collect(r, ch, opts)
  local t = {}
  for l in r:lines(ch, opts) do t[#t + 1] = l end
  return t
end

local p = qemu_probe(env("RUNNER"))

T.test("qemu: attach by scanning ranges, channels as the twin declares them", function()
  local r = assert(rtt.attach(p, { ranges = DDR }, { timeout = 5 }))
  local ch = assert(r:channels())
  T.eq(ch.address, 0x60000000)
  T.eq(#ch.up, 2); T.eq(#ch.down, 1)
  T.eq(ch.up[1].size, 16384); T.eq(ch.up[1].flags, 2); T.eq(ch.up[2].size, 1024); T.eq(ch.down[1].size, 4096)
  T.eq(ch.up[1].name, nil, "names live in ITCM, outside the shared file")
  r:close()
end)

T.test("qemu: lines of up 0 (banner, Inference lines, done)", function()
  local r = assert(rtt.attach(p, { ranges = DDR }))
  local lines = collect(r, 0, { timeout = 10 })
  T.eq(lines[1], "odp-twin runner v1 boot 1")
  local n = 0
  for _, l in ipairs(lines) do if l:match("^Inference: [%d.]+ ms$") then n = n + 1 end end
  T.eq(n, 5, "Inference lines")
  T.eq(lines[#lines], "odp-twin done")
  T.eq(r:stats().bytes_up > 1000, true)
  r:close()
end)

T.test("qemu: reset -> the stale block is never read, the block is re-found", function()
  local r = assert(rtt.attach(p, { ranges = DDR }))
  collect(r, 0, { timeout = 0.3 }) -- drain whatever is left
  T.ok(p:reset())
  local lines = collect(r, 0, { count = 2, timeout = 5 })
  T.eq(lines[1], "odp-twin runner v1 boot 2", "first line after reset is the new boot")
  T.eq(r:stats().refinds, 1)
  r:close()
end)

T.test("qemu: attach by ELF symbol and by address", function()
  local r = assert(rtt.attach(p, { elf = env("FW") .. "/twin_runner.elf" }))
  T.eq(r:channels().address, 0x60000000); r:close()
  r = assert(rtt.attach(p, { address = 0x60000000 })); r:close()
  local x, err, code = rtt.attach(p, { elf = env("MODEL") })
  T.eq(code, "EPROTO"); T.match(err, "ELF")
end)

T.test("qemu: two IDs in the ranges is EPROTO; no ID is ETIMEDOUT; bad arguments raise", function()
  T.ok(p:write(0x60008000, "SEGGER RTT\0\0\0\0\0\0"))
  local r, err, code = rtt.attach(p, { ranges = DDR }, { timeout = 1 })
  T.eq(code, "EPROTO"); T.match(err, "two RTT control blocks")
  T.ok(p:write(0x60008000, string.rep("\0", 16)))
  r, err, code = rtt.attach(p, { ranges = { { 0x60010000, 0x1000 } } }, { timeout = 0.2 })
  T.eq(code, "ETIMEDOUT")
  T.raises(function() rtt.attach(p, { ranges = DDR, address = 1 }) end, "exactly one")
  T.raises(function() rtt.attach(p, { rangez = DDR }) end, "unknown")
  r, err, code = p:read(0x10000000, 4)
  T.eq(code, "EIO"); T.match(err, "outside the shared memory window")
end)

T.test("qemu: a corrupt descriptor is a clear error, not a hang", function()
  local r = assert(rtt.attach(p, { address = 0x60000000 }))
  T.ok(p:halt())
  local saved = p:read(0x60000000 + 24 + 8, 4) -- up0 SizeOfBuffer
  p:write(0x60000000 + 24 + 8, "\255\255\255\127")
  local t0 = sys.now()
  local s = r:channel(0)
  local data, err, code = s:read(10, { timeout = 2 })
  T.eq(code, "EPROTO"); T.match(err, "absurd size")
  T.ok(sys.now() - t0 < 1, "fails at once")
  p:write(0x60000000 + 24 + 8, saved)
  T.ok(p:go())
  r:close()
end)

T.test("gdb: gdbstub reads ITCM and DDR, resets through qRcmd, RTT works over it", function()
  local g = assert(probe.open{ backend = "gdb", address = "127.0.0.1:" .. state(env("RUNNER"), "gdb_port") })
  T.eq(g:kind(), "gdb")
  T.eq(#assert(g:read(0x10000000, 1000)), 1000)
  T.eq(g:read(0x60000000, 10), "SEGGER RTT")
  local r = assert(rtt.attach(g, { address = 0x60000000 }))
  T.eq(r:channels().up[1].name, "Terminal", "names readable through the stub")
  collect(r, 0, { timeout = 0.3 })
  T.ok(g:reset())
  local lines = collect(r, 0, { count = 1, timeout = 5 })
  T.match(lines[1], "^odp%-twin runner v1 boot %d$")
  r:close(); g:close()
  T.raises(function() g:read(0, 1) end, "closed")
end)

T.test("jlink: the DLL path (dlopen of a libjlinkarm.so) end to end", function()
  p:close() -- QEMU serves one QMP client at a time: the twin DLL needs it
  local j, err, code = probe.open{ backend = "jlink", lib = env("JLINK_LIB"), device = "AE822FA0E5597LS0_M55_HP",
    speed_khz = 4000 }
  T.ok(j, err)
  T.eq(j:kind(), "jlink")
  T.eq(j:read(0x60000000, 10), "SEGGER RTT")
  local r = assert(rtt.attach(j, { ranges = DDR }))
  collect(r, 0, { timeout = 0.3 })
  T.ok(j:reset())
  local lines = collect(r, 0, { count = 1, timeout = 5 })
  T.match(lines[1], "^odp%-twin runner v1 boot %d$")
  r:close(); j:close()
  local x, e2, c2 = probe.open{ backend = "jlink", lib = "/nonexistent/libjlinkarm.so" }
  T.eq(c2, "ENOTFOUND")
end)

T.test("xmodem-1K over RTT to the flasher: CRC32 and sha256 of what it received match", function()
  local fp = qemu_probe(env("FLASHER"))
  local r = assert(rtt.attach(fp, { ranges = DDR }))
  local ch = r:channel(0)
  T.ok(ch:expect("Starting xmodemReceive...\n", { timeout = 10, plain = true }))
  local model = env("MODEL")
  local size = sys.stat(model).size
  local events = 0
  local t0 = sys.now()
  local res, err = xmodem.send(ch, model, { mode = "1k", on_progress = function() events = events + 1 end })
  local dt = sys.now() - t0
  T.ok(res, err)
  T.eq(res.bytes, size); T.eq(res.retries, 0)
  local padded = math.ceil(size / 128) * 128 -- 1K blocks while more than 896 bytes remain, then 128-byte ones
  local data = io.open(model, "rb"):read("a")
  local want = data .. string.rep("\26", padded - size)
  local ok_line = assert(ch:expect("Success, %d+ bytes received.", { timeout = 10 }))
  T.eq(tonumber(ok_line:match("%d+")), padded, "bytes the flasher reports")
  local crc_line = assert(ch:expect("CRC32: %x+", { timeout = 10 }))
  T.eq(crc_line:match("%x+$"), string.format("%08x", crc32(want)), "flasher CRC32 vs the padded file")
  local got = assert(fp:read(0x60100000, #want))
  T.eq(sys.sha256(got), sys.sha256(want), "sha256 of the flasher's receive area")
  print(string.format("# xmodem-1K over RTT: %d bytes in %.3f s = %.0f KB/s, %d events", size, dt,
    size / dt / 1024, events))
  r:close(); fp:close()
end)

T.test("rtt stream throughput and loss (twin stream mode)", function()
  local sp = qemu_probe(env("STREAM"))
  local r = assert(rtt.attach(sp, { ranges = DDR }))
  local ch = r:channel(0)
  local _, _ = assert(ch:expect("stream: %d+ bytes\n", { timeout = 10 }))
  local seq, bad, bytes = 0, 0, 0
  local t0 = sys.now()
  local alpha = "abcdefghijklmnopqrstuv"
  for l in ch:lines({ timeout = 30 }) do
    if l == "odp-twin done" then break end
    bytes = bytes + #l + 1
    local n, s = l:match("^(%x+) (%a+)$")
    local k = seq % 22
    if not n or tonumber(n, 16) ~= seq or s ~= alpha:sub(k + 1) .. alpha:sub(1, k) then bad = bad + 1 end
    seq = seq + 1
  end
  local dt = sys.now() - t0
  T.eq(bad, 0, "lines lost or damaged")
  T.eq(bytes, 4194304)
  print(string.format("# RTT up-channel: %d bytes in %.3f s = %.2f MB/s, 0 lost", bytes, dt, bytes / dt / 1e6))
  r:close(); sp:close()
end)

T.test("telnet: banner check, channel config string, data", function()
  local s, err = rtt.telnet{ address = "127.0.0.1:" .. env("TELNET_PORT"), channel = 1, timeout = 3 }
  T.ok(s, err)
  T.eq(s:expect("hello\n", { timeout = 3, plain = true }), "hello\n")
  s:close()
  T.eq(io.open(env("TELNET_CFG")):read("a"), "$$SEGGER_TELNET_ConfigStr=RTTCh;1$$")
  local x, e2, c2 = rtt.telnet{ address = "127.0.0.1:" .. env("GUI_PORT"), timeout = 3 }
  T.eq(c2, "EBUSY")
end)

T.done()
