--- A link with a round-trip time for tests and benches: tests/c/delay_relay on 127.0.0.1 in front of HOST:PORT
-- (an sshd, the adb emulator), holding every byte delay_ms each way and counting the turnarounds on the wire.
--   local r = require("relay").start(20, "127.0.0.1", port, dir)  -- r.port; r:connections() after they close
--   r.close()                                                       -- also at the suite's end (T.done)
local proc = require("odp.proc")
local sys = require("odp.sys")

local M = {}

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local started = 0

--- Starts a relay; its files (port, counts: one line per connection) go in dir. -> relay {port, counts,
-- connections(n), close()}
function M.start(delay_ms, host, port, dir)
  local build = os.getenv("ODP_BUILD_DIR") or (require("odp.host").root .. "/build")
  started = started + 1
  local base = ("%s/relay%d-%d"):format(dir, started, delay_ms)
  local r = assert(proc.run { "sh", "-c", ("%s/tests/delay_relay %d %s %d %s.counts >%s.port 2>&1 & echo $!")
    :format(build, delay_ms, host, port, q(base), q(base)) })
  local pid = tonumber(r.stdout:match("%d+"))
  local relay = { counts = base .. ".counts" }
  function relay.close()
    if pid then proc.run { "kill", tostring(pid) } end
    pid = nil
  end
  require("t").at_done(relay.close)
  local deadline = sys.now() + 10
  while not relay.port and sys.now() < deadline do
    local f = io.open(base .. ".port")
    relay.port = f and tonumber(f:read("a"):match("^(%d+)\n"))
    if f then f:close() end
    if not relay.port then sys.sleep(0.05) end
  end
  if not relay.port then
    relay.close()
    error("delay_relay did not start: " .. tostring((io.open(base .. ".port") or io.tmpfile()):read("a")))
  end
  --- The closed connections' counts, in order ({round_trips, bytes_up, bytes_down} each), once there are at
  -- least n (waited for up to 10 s: the relay writes a connection's line once both ends closed).
  function relay.connections(n)
    local conns, until_ = {}, sys.now() + 10
    repeat
      conns = {}
      local f = io.open(relay.counts)
      for line in f and f:lines() or function() end do
        local rt, up, down = line:match("round_trips (%d+) bytes_up (%d+) bytes_down (%d+) closed")
        if rt then conns[#conns + 1] = { round_trips = tonumber(rt), bytes_up = tonumber(up), bytes_down = tonumber(down) } end
      end
      if f then f:close() end
      if #conns >= n then break end
      sys.sleep(0.05)
    until sys.now() > until_
    return conns
  end
  return relay
end

return M
