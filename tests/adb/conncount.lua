-- Counts the connections open to the adb server as the kernel sees them: the TCP connections to the server's
-- port whose client end is not closed yet (ESTABLISHED, or CLOSE-WAIT when the server closed first; a client
-- end leaves both states in close() itself), sampled every millisecond until the file ADBTEST_STOP appears;
-- then writes "MAX SAMPLES" to ADBTEST_CONNS. Run in the background by test_many_adb.sh around conns.lua (only
-- odp connects to that server meanwhile). The server's ends would lag: the FIN of a closed connection reaches
-- them through the loopback's softirq, which a loaded machine may run after the next connection's SYN.
local sys = require("odp.sys")

local port = assert(tonumber(os.getenv("ANDROID_ADB_SERVER_PORT")))
local stop, out = assert(os.getenv("ADBTEST_STOP")), assert(os.getenv("ADBTEST_CONNS"))

-- ss asks the kernel (sock_diag) for the matching connections only: one small dump made in one pass. Reading
-- /proc/net/tcp takes many read()s, between which a connection that closes and one that opens can both be
-- counted.
local cmd = ("ss -Htn state established state close-wait '( dport = :%d )'"):format(port)
local function established()
  local p = assert(io.popen(cmd))
  local n = 0
  for _ in p:lines() do n = n + 1 end
  p:close()
  return n
end

local max, samples = 0, 0
while not io.open(stop) do
  local n = established()
  if n > max then max = n end
  samples = samples + 1
  sys.sleep(0.001)
end
local f = assert(io.open(out .. ".partial", "w"))
f:write(("%d %d\n"):format(max, samples))
f:close()
assert(os.rename(out .. ".partial", out))
