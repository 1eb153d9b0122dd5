-- serial.open{port = "rfc2217://HOST:PORT"}: odp's RFC 2217 client (src/net/rfc2217.c) through a real
-- RFC 2217 server, Debian's ser2net, on loopback, in front of a socat pty whose other end is lrzsz (the rig of
-- tests/xmodem/test_lrzsz.sh: rx on pipes). XMODEM both ways with random data (0xFF bytes are Telnet's IAC:
-- escaped one way, unescaped the other), the server dropping mid-transfer, and a server that is not RFC 2217.
local T = require("t")
local proc = require("odp.proc")
local serial = require("odp.serial")
local sshd = require("sshd") -- its shell helpers
local sys = require("odp.sys")
local xmodem = require("odp.xmodem")

local dir = T.tmpdir()
local pids = {}

local sh, q, wait_for = sshd.sh, sshd.quote, sshd.wait_for
local function bg(cmd, log)
  local pid = tonumber(sh(("cd %s && (exec %s) >%s 2>&1 & echo $!"):format(q(dir), cmd, q(log or "/dev/null"))):match("%d+"))
  pids[#pids + 1] = pid
  return pid
end
local function alive(pid) return proc.run { "kill", "-0", tostring(pid) }.ok end

-- a pty (link) whose other end runs cmd, as socat gives it
local function pty(name, cmd, pipes)
  local link = dir .. "/" .. name
  local pid = bg(("socat pty,raw,echo=0,link=%s EXEC:%s,%s"):format(q(link), q(cmd),
    pipes and "pipes" or "pty,raw,echo=0"), dir .. "/" .. name .. ".socat.log")
  assert(wait_for(function() return sys.stat(link) ~= nil end, 10), "socat made no pty")
  return link, pid
end

-- ser2net serving link on a free loopback port; accepter "telnet(rfc2217)" or plain "tcp"
local function ser2net(link, accepter)
  for attempt = 1, 5 do
    local port = 20000 + (sys.getpid() * 31 + math.floor(sys.now() * 1000) + attempt * 7) % 30000
    local cfg = dir .. "/ser2net-" .. port .. ".yaml"
    T.write(cfg, ("connection: &con\n  accepter: %s,127.0.0.1,%d\n  connector: serialdev,%s,115200n81,local\n")
      :format(accepter or "telnet(rfc2217),tcp", port, link))
    local log = cfg .. ".log"
    local pid = bg(("ser2net -n -u -d -c %s"):format(q(cfg)), log)
    local up = wait_for(function()
      return sh("ss -ltn"):find("127%.0%.0%.1:" .. port .. " ") ~= nil or not alive(pid)
    end, 10)
    if up and alive(pid) then return port, pid end
    proc.run { "kill", tostring(pid) }
  end
  error("ser2net did not start")
end

-- random bytes with many 0xFF (Telnet's IAC), and what an XMODEM receiver keeps of them (0x1A padding)
local function random_file(path, n, seed)
  local rnd = T.lcg(seed)
  local t = {}
  for i = 1, n do t[i] = string.char(rnd(4) == 0 and 255 or rnd(256)) end
  local s = table.concat(t)
  T.write(path, s)
  return s .. ("\26"):rep((128 - n % 128) % 128)
end

T.test("odp sends XMODEM through ser2net's RFC 2217 port; lrzsz rx on the serial side gets every byte", function()
  local want = random_file(dir .. "/in.bin", 100000, 5)
  local link = pty("rx-pty", "rx -X -c rx.bin", true)
  local port = ser2net(link)
  local s, how = assert(serial.open { port = "rfc2217://127.0.0.1:" .. port, timeout = 5 })
  T.eq(how, "rfc2217")
  T.eq(s:kind(), "rfc2217")
  local r, err = xmodem.send(s, dir .. "/in.bin", { mode = "1k", timeout = 5, start_timeout = 30 })
  s:close()
  T.ok(r, "xmodem.send: " .. tostring(err))
  T.eq(r.bytes, 100000)
  T.eq(r.check, "crc")
  -- rx writes as blocks come; it has it all once the file is whole (socat's exit is not seen: a zombie)
  local whole = wait_for(function()
    local f = io.open(dir .. "/rx.bin", "rb")
    local got = f and f:read("a")
    if f then f:close() end
    return got == want
  end, 20)
  T.ok(whole, "rx.bin is the file, 0x1A-padded")
end)

T.test("lrzsz sx sends through ser2net; odp receives every byte (IAC IAC unescaped)", function()
  local want = random_file(dir .. "/sx.bin", 50000, 9)
  local link = pty("sx-pty", "sx -X -k sx.bin", false)
  local port = ser2net(link)
  local s = assert(serial.open { port = "rfc2217://127.0.0.1:" .. port, timeout = 5 })
  local r, err = xmodem.receive(s, dir .. "/got.bin", { timeout = 5, start_timeout = 30 })
  s:close()
  T.ok(r, "xmodem.receive: " .. tostring(err))
  T.eq(T.read(dir .. "/got.bin") == want, true, "got.bin is the file, 0x1A-padded")
end)

T.test("the server dropping mid-transfer: one line, no hang", function()
  random_file(dir .. "/big.bin", 1000000, 11)
  local link = pty("drop-pty", "rx -X -c dropped.bin", true)
  local port, pid = ser2net(link)
  local s = assert(serial.open { port = "rfc2217://127.0.0.1:" .. port, timeout = 5 })
  local t0 = sys.now()
  local r, err, code = xmodem.send(s, dir .. "/big.bin", { mode = "1k", timeout = 2, retries = 3, start_timeout = 30,
    on_progress = function(p) if p.blocks == 50 then proc.run { "kill", "-KILL", tostring(pid) } end end })
  s:close()
  T.eq(r, nil, "the transfer fails")
  T.ok(code == "EIO" or code == "ETIMEDOUT", "code " .. tostring(code) .. ": " .. tostring(err))
  T.ok(not tostring(err):find("\n"), "one line: " .. tostring(err))
  T.ok(sys.now() - t0 < 20, "bounded by the per-packet timeout and retries")
end)

T.test("a plain TCP port (not RFC 2217) is EPROTO within the timeout, naming what to fix", function()
  local link = pty("raw-pty", "sleep 30", true)
  local port = ser2net(link, "tcp")
  local t0 = sys.now()
  local s, err, code = serial.open { port = "rfc2217://127.0.0.1:" .. port, timeout = 1.5 }
  T.eq(s, nil)
  T.eq(code, "EPROTO")
  T.match(err, "did not answer the RFC 2217 baud rate: not an RFC 2217 server")
  T.ok(sys.now() - t0 < 5, "within the timeout")
  local _, err2, code2 = serial.open { port = "rfc2217://127.0.0.1:1", timeout = 2 }
  T.eq(code2, "ENODEV", "refused: " .. tostring(err2))
end)

for _, pid in ipairs(pids) do proc.run { "kill", tostring(pid) } end
T.done()
