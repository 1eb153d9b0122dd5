-- Test helper: one XMODEM transfer over a serial/pty port, result on one line.
--   odp run xfer.lua send|receive PORT PATH [mode=1k|128] [check=crc|checksum] [timeout=S] [retries=N]
local serial, xmodem, sys = require("odp.serial"), require("odp.xmodem"), require("odp.sys")
local dir, port, path = arg[1], arg[2], arg[3]
local kv = {}
for i = 4, #arg do local k, v = arg[i]:match("^(%w+)=(.*)$"); kv[k] = v end
local s = assert(serial.open{ port = port })
local events = 0
local opts = { timeout = tonumber(kv.timeout or 5), retries = tonumber(kv.retries or 10),
  start_timeout = tonumber(kv.start or 60), on_progress = function() events = events + 1 end }
local t0 = sys.now()
local r, err
if dir == "send" then
  opts.mode = kv.mode or "1k"
  r, err = xmodem.send(s, path, opts)
else
  opts.check = kv.check
  r, err = xmodem.receive(s, path, opts)
end
local dt = sys.now() - t0
s:close()
if r then
  print(string.format("ok bytes=%d blocks=%d retries=%d check=%s events=%d seconds=%.3f",
    r.bytes, r.blocks, r.retries, r.check, events, dt))
else
  print("fail " .. tostring(err))
  os.exit(1)
end
