--- The arm64 board twins for tests (tests/board_twin/README.md): Debian's arm64 kernel under
-- qemu-system-aarch64 -M virt, SSH (dropbear) forwarded from a free port on 127.0.0.1.
--   local twin = require("board_twin")
--   local b = twin.start("rpi5")      -- or "graviton"; builds the guest once (cached in build/board_twin)
--   b.port, b.user, b.identity, b.known_hosts, b.dir     -- what odp --host/--port/--identity/--known-hosts take
--   b:odp_args()                      -- {"--host", "pi@127.0.0.1", "--port", ..., "--known-hosts", ...}
--   b:sh("cat /proc/cpuinfo")         -- a command on the guest through OpenSSH's ssh (not odp's client)
--   b:reset()                         -- QEMU's system_reset: the board reboots; b:wait_ready() waits for it
--   b:stop()
local proc = require("odp.proc")
local sys = require("odp.sys")

local M = {}
local Twin = {}
Twin.__index = Twin

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function root()
  return os.getenv("ODP_TOP") or require("odp.host").root
end

local function build_dir()
  return (os.getenv("ODP_BUILD_DIR") or (root() .. "/build")) .. "/board_twin"
end

local function read(path) return (sys.read_file(path)) end

--- Builds the guest (tests/board_twin/build.sh; nothing to do when cached). Returns the build dir.
function M.build()
  local dir = build_dir()
  local r = assert(proc.run { root() .. "/tests/board_twin/build.sh", dir, timeout = 900 })
  if not r.ok then error("board twin build failed:\n" .. r.stderr .. r.stdout, 2) end
  return dir
end

--- Boots a twin: kind "rpi5" (Cortex-A76) or "graviton" (Neoverse-N1). opts.dir: the state dir (by default a
-- fresh temp dir, removed by stop()). Raises when it does not come up.
function M.start(kind, opts)
  opts = opts or {}
  local build = M.build()
  local dir = opts.dir or (function()
    local p = io.popen("mktemp -d /tmp/odp-twin.XXXXXX"); local d = p:read("l"); p:close(); return d
  end)()
  local t0 = sys.now()
  local r = assert(proc.run { root() .. "/tests/board_twin/start.sh", kind, dir, build, timeout = 180,
    env = { ODP_TWIN_OWNER_PID = tostring(sys.getpid()) } })
  if not r.ok then error("the " .. kind .. " twin did not start:\n" .. r.stderr .. r.stdout, 2) end
  local self = setmetatable({ kind = kind, dir = dir, own_dir = not opts.dir, host = "127.0.0.1", boot_s = sys.now() - t0,
    port = tonumber(read(dir .. "/port")), user = read(dir .. "/user"):match("%S+"),
    identity = dir .. "/identity", known_hosts = dir .. "/known_hosts", monitor = dir .. "/monitor",
    pid = tonumber(read(dir .. "/pid")) }, Twin)
  self.boots = self:ready_count()
  return self
end

--- The odp ssh target options for this twin (scripts/rpi5.lua, scripts/graviton4.lua).
function Twin:odp_args()
  return { "--host", self.user .. "@" .. self.host, "--port", tostring(self.port), "--identity", self.identity,
    "--known-hosts", self.known_hosts }
end

--- ssh.connect / odp.target.ssh options.
function Twin:connect_opts()
  return { host = self.user .. "@" .. self.host, port = self.port, identity = self.identity,
    known_hosts = self.known_hosts }
end

--- The OpenSSH client command line for a command on the guest (a shell string), host key verified.
function Twin:ssh_command(cmd)
  return ("ssh -q -p %d -i %s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o BatchMode=yes " ..
    "-o ConnectTimeout=10 %s@%s %s"):format(self.port, q(self.identity), q(self.known_hosts), self.user, self.host,
    q(cmd))
end

--- Runs cmd on the guest through OpenSSH's client: stdout, or raises with its stderr.
function Twin:sh(cmd, timeout)
  local r = assert(proc.run { "sh", "-c", self:ssh_command(cmd), timeout = timeout or 60 })
  if not r.ok then error(("on the %s twin: %s: status %s: %s"):format(self.kind, cmd, tostring(r.status), r.stderr), 2) end
  return r.stdout
end

--- How many times the guest has said it is ready (once per boot) on its console.
function Twin:ready_count()
  local n = 0
  for _ in ("\n" .. (read(self.dir .. "/console.log") or "")):gmatch("\nodp%-twin: ready") do n = n + 1 end
  return n
end

--- QEMU's monitor command `system_reset`: the board reboots at once, as on a power glitch.
function Twin:reset()
  local r = assert(proc.run { "sh", "-c", ("printf 'system_reset\\n' | socat -t 1 - UNIX-CONNECT:%s >/dev/null")
    :format(q(self.monitor)), timeout = 10 })
  if not r.ok then error("system_reset failed: " .. r.stderr, 2) end
end

--- Waits (bounded) until the guest has booted again after reset(): true, or false on timeout.
function Twin:wait_ready(timeout)
  local deadline = sys.now() + (timeout or 120)
  while sys.now() < deadline do
    if self:ready_count() > self.boots then self.boots = self:ready_count() return true end
    sys.sleep(0.1)
  end
  return false
end

function Twin:stop()
  if not self.pid then return end
  proc.run { root() .. "/tests/board_twin/stop.sh", self.dir, timeout = 30 }
  self.pid = nil
  -- a state dir start() made is removed with the twin (ODP_KEEP_TMP keeps it, as tests/lib/t.lua does)
  if self.own_dir and not os.getenv("ODP_KEEP_TMP") then proc.run { "rm", "-rf", self.dir } end
end

return M
