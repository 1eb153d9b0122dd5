-- Instant start: odp links only Lua and libc; libssh2, libusb, libserialport, libedit and libcrypto are loaded
-- by the modules that need them (Makefile LAZY, src/main.c package.cpath), checked in /proc/self/maps.
local T = require("t")
local proc = require("odp.proc")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local HEAVY = { "libssh2", "libusb", "libserialport", "libedit", "libcrypto" }

-- The heavy libraries mapped into a fresh odp after running the Lua chunk `code`.
local function mapped_after(code)
  local dir = T.tmpdir()
  T.write(dir .. "/s.lua", code .. [[

local seen = {}
for line in io.lines("/proc/self/maps") do
  for _, lib in ipairs({ "libssh2", "libusb", "libserialport", "libedit", "libcrypto" }) do
    if line:find("/" .. lib, 1, true) then seen[lib] = true end
  end
end
local out = {}
for lib in pairs(seen) do out[#out + 1] = lib end
table.sort(out)
io.write(table.concat(out, " "))]])
  local r = proc.run { odp, "run", dir .. "/s.lua", timeout = 30 }
  T.eq(r.status, 0, r.stderr)
  return r.stdout
end

T.test("the odp binary needs none of the heavy libraries (ldd)", function()
  local r = proc.run { "ldd", odp, timeout = 30 }
  T.eq(r.status, 0, r.stderr)
  for _, lib in ipairs(HEAVY) do T.ok(not r.stdout:find(lib, 1, true), lib .. " is not linked: " .. r.stdout) end
end)

-- What every odp process loads before a script's first line: the Lua modules the lazy requires marked
-- `-- lazy: start-up` keep out (tests/lua/layers_test.lua holds the comment rule; bench/README.md "Startup"
-- measures the cost). A module that joins this set is paid by every run, `odp run empty.lua` included.
T.test("a plain script starts with only odp's start-up modules loaded", function()
  local dir = T.tmpdir()
  T.write(dir .. "/s.lua", 'local t = {} for k in pairs(package.loaded) do if k:match("^odp") then t[#t + 1] = k end end ' ..
    'table.sort(t) io.write(table.concat(t, " "))')
  local r = proc.run { odp, "run", dir .. "/s.lua", timeout = 30 }
  T.eq(r.status, 0, r.stderr)
  T.eq(r.stdout, "odp.cli.commands.run odp.cli.main odp.core.coroutines odp.core.errors odp.core.search odp.host odp.sys odp.wait")
end)

T.test("a script that uses none of them maps none of them", function()
  T.eq(mapped_after("local x = require('odp.core.json').encode({ 1 })"), "")
end)

T.test("each module loads its library on first require, from build/lib/odp/*.so", function()
  T.eq(mapped_after("require('odp.readline')"), "libedit")
  T.eq(mapped_after("require('odp.serial')"), "libserialport")
  T.eq(mapped_after("require('odp.usb')"), "libusb")
  T.match(mapped_after("require('odp.ssh')"), "libcrypto libssh2")
  T.match(mapped_after("require('odp.adb')"), "libcrypto libusb")
end)

T.test("sys.sha256 and sys.sha256_file up to 1 MiB map no library, a larger file opens libcrypto; all agree with sha256sum", function()
  T.eq(mapped_after("assert(require('odp.sys').sha256('abc'))"), "", "a text's hash: plain C")
  T.eq(mapped_after("assert(require('odp.sys').sha256_file('/etc/hostname'))"), "", "a small file's hash: plain C")
  local big = T.tmpdir() .. "/big"
  T.write(big, ("b"):rep((1 << 20) + 1))
  T.eq(mapped_after(("assert(require('odp.sys').sha256_file(%q))"):format(big)), "libcrypto")
  local sys = require("odp.sys")
  T.eq(sys.sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  local f = root .. "/tests/fixtures/pte/add_arduino.pte"
  local r = proc.run { "sha256sum", f, timeout = 30 }
  T.eq(sys.sha256_file(f), r.stdout:match("^(%x+)"))
  -- the two implementations on the lengths around SHA-256's 64-byte blocks and its 55/56-byte padding edge
  local tmp = T.tmpdir()
  -- (a file over 1 MiB goes through libcrypto, one up to it through the plain C code, as a text does)
  for _, n in ipairs({ 0, 1, 55, 56, 63, 64, 65, 119, 120, 1000, 100003, 1 << 20, (1 << 20) + 1, (1 << 20) + 65 }) do
    local s = ("%d:"):format(n):rep(n):sub(1, n)
    T.write(tmp .. "/s", s)
    T.eq(sys.sha256(s), sys.sha256_file(tmp .. "/s"), n .. " bytes: plain C = sha256_file")
    T.eq(sys.sha256(s), proc.run { "sha256sum", tmp .. "/s", timeout = 30 }.stdout:match("^(%x+)"), n .. " bytes = sha256sum")
  end
  for _, s in ipairs({ "", "f", "fo", "foo", "foob", "fooba", "foobar", ("\255\0\1"):rep(1000) }) do
    local b = proc.run { argv = { "base64", "-w0" }, stdin = s, timeout = 30 }
    T.eq(sys.base64_encode(s), b.stdout, "base64 of " .. #s .. " bytes, as coreutils' base64 (RFC 4648)")
    T.eq(sys.base64_decode(sys.base64_encode(s)), s)
  end
end)

T.test("probe.usb_list answers what odp.usb.list answers, and maps libusb only when called", function()
  T.eq(mapped_after("require('odp.probe')"), "", "requiring odp.probe maps no libusb")
  T.eq(mapped_after("require('odp.probe').usb_list(0x1366)"), "libusb")
  local probe, usb = require("odp.probe"), require("odp.usb")
  T.eq({ probe.usb_list(0x1366) }, { usb.list(0x1366) }, "J-Link vendor 0x1366")
  T.eq({ probe.usb_list() }, { usb.list() }, "every vendor")
end)

T.done()
