--- The adb device emulator (tests/adbemu, itself checked against Debian's adb in tests/adbemu/test_adb_client.sh)
-- and Google's adb server (Debian's adb) for Lua suites: an emulated device on a TCP port of 127.0.0.1 that can
-- be crashed (a reboot: it and every command it runs killed) and started again on the same port and sandbox,
-- and a private adb server (its own port and HOME) holding devices after `adb connect`.
--   local adbemu = require("adbemu")
--   local dev = adbemu.start { logcat = true }   -- dev.port, dev.serial ("127.0.0.1:PORT"), dev.root (the sandbox)
--   local srv = adbemu.server()                  -- srv.port, srv.env (for odp run: ANDROID_ADB_SERVER_PORT, HOME)
--   srv:connect(dev); dev:crash(); dev:restart(); srv:disconnect(dev)
-- Everything started is stopped by PID at the suite's end (T.done), whatever the test did.
local T = require("t")
local proc = require("odp.proc")
local sys = require("odp.sys")

local M = {}
local root = T.root()

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function sh(cmd, env)
  local r = assert(proc.run { "sh", "-c", cmd, env = env, timeout = 60 })
  if not r.ok then error("harness command failed: " .. cmd .. "\n" .. r.stderr .. r.stdout, 2) end
  return r.stdout
end

local function wait_for(what, timeout, pred)
  local deadline = sys.now() + timeout
  while sys.now() < deadline do
    local v = pred()
    if v then return v end
    sys.sleep(0.05)
  end
  error(("%s: not within %g s"):format(what, timeout), 2)
end

local built
--- The emulator program, built into the build tree's tests/ once per suite.
function M.build()
  if not built then
    local out = (os.getenv("ODP_BUILD_DIR") or (root .. "/build")) .. "/tests"
    assert(proc.run { argv = { "make", "-s", "-C", root .. "/tests/adbemu", "OUT=" .. out }, timeout = 120 }.ok,
      "adbemu builds")
    built = out .. "/adbemu"
  end
  return built
end

-- Every process below pid (the emulator runs each command in a process group of its own).
local function below(pid)
  return (sh(("desc() { local c; for c in $(pgrep -P \"$1\"); do desc \"$c\"; echo \"$c\"; done; }; desc %d")
    :format(pid)):gsub("\n", " "))
end

local Emu = {}
Emu.__index = Emu

-- (a zombie is gone: odp, a subreaper, may hold its exit status unread)
function Emu:alive()
  local stat = self.pid and sys.read_file("/proc/" .. self.pid .. "/stat")
  return stat ~= nil and not stat:match("^%d+ %b() Z")
end

-- Starts the emulator on self.port (0: a free one, then kept for restarts).
function Emu:launch()
  local pf = self.dir .. "/port"
  os.remove(pf)
  local args = {}
  for i, a in ipairs(self.args) do args[i] = q(a) end
  self.pid = tonumber(sh(("%s --root %s --port %d --port-file %s %s >/dev/null 2>>%s & echo $!"):format(q(M.build()),
    q(self.root), self.port, q(pf), table.concat(args, " "), q(self.log))):match("%d+"))
  local port = wait_for("the adb emulator listening", 10, function() return (sys.read_file(pf) or ""):match("%d+") end)
  self.port = tonumber(port)
  self.serial = "127.0.0.1:" .. self.port
end

--- The device goes away as in a reboot or a pulled cable: the emulator (its connections first, as the device's
--- link goes before its programs are seen to end), then every command it ran, SIGKILL.
function Emu:crash()
  if not self:alive() then return end
  local rest = below(self.pid)
  sh(("kill -KILL %d; kill -KILL %s 2>/dev/null; true"):format(self.pid, rest))
  wait_for("the adb emulator gone", 10, function() return not self:alive() end)
  self.pid = nil
end

--- Back on the same port with the same sandbox (what was on the device is still there).
function Emu:restart()
  self:crash()
  self:launch()
end

Emu.stop = Emu.crash

--- opts: root (the sandbox dir, default a new temp dir), args (more emulator options, e.g. {"--model", "X"}),
--- logcat (install the logcat/log stand-ins: a device with logcat). -> the running emulator.
function M.start(opts)
  opts = opts or {}
  local dir = T.tmpdir()
  local self = setmetatable({ dir = dir, root = opts.root or (dir .. "/root"), port = 0, args = opts.args or {},
    log = dir .. "/adbemu.log" }, Emu)
  sys.mkdir_p(self.root .. "/system/bin")
  if opts.logcat then
    sh(("cp %s/tests/adbemu/system/bin/logcat %s/tests/adbemu/system/bin/log %s/system/bin/"):format(q(root), q(root),
      q(self.root)))
  end
  T.at_done(function() self:stop() end)
  self:launch()
  return self
end

--- The protocol violations the emulator logged (odp's mistakes as the device saw them), "" when none.
function Emu:violations()
  return ((sys.read_file(self.log) or ""):match("[^\n]*violation[^\n]*") or "")
end

local Server = {}
Server.__index = Server

--- Debian's adb against this server (its output, stderr merged).
function Server:adb(args)
  local r = assert(proc.run { argv = { "sh", "-c", "timeout 20 adb " .. args .. " 2>&1" }, env = self.env,
    timeout = 30 })
  return r.stdout
end

--- The state the server lists serial in ("device", "offline", ...), nil when it does not list it.
function Server:state(serial)
  for line in self:adb("devices"):gmatch("[^\n]+") do
    local s, st = line:match("^(%S+)%s+(%S+)")
    if s == serial then return st end
  end
end

--- `adb connect` the emulated device, and wait until the server lists it as a device.
function Server:connect(emu)
  self:adb("connect " .. emu.serial)
  wait_for(emu.serial .. " a device at the adb server", 20, function() return self:state(emu.serial) == "device" end)
end

--- `adb disconnect`: the device leaves the server (the server no longer lists it).
function Server:disconnect(emu)
  self:adb("disconnect " .. emu.serial)
  wait_for(emu.serial .. " gone from the adb server", 20, function() return self:state(emu.serial) == nil end)
end

function Server:stop()
  if self.stopped then return end
  self.stopped = true
  self:adb("kill-server")
end

--- A private adb server: its own HOME (its keys) and a free port; self.env is what an odp talking to it needs.
function M.server()
  local home = T.tmpdir()
  local self = setmetatable({ home = home }, Server)
  for attempt = 1, 5 do
    self.port = 20000 + (math.floor(sys.now() * 1000) * 7 + sys.getpid() * 13 + attempt * 101) % 30000
    self.env = { HOME = home, ANDROID_ADB_SERVER_PORT = tostring(self.port), ADB_SERVER_SOCKET = false,
      ANDROID_ADB_SERVER_ADDRESS = false, ANDROID_SERIAL = false }
    local r = assert(proc.run { argv = { "adb", "start-server" }, env = self.env, timeout = 30 })
    if r.ok then
      T.at_done(function() self:stop() end)
      return self
    end
  end
  error("adb start-server: no free port")
end

return M
