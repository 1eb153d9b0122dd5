--- A private OpenSSH server for tests: its own config, host keys, authorized_keys and port on 127.0.0.1,
-- all in a temp dir; started in the background and stopped by PID (never by name).
--   local sshd = require("sshd")
--   local srv = sshd.start()        -- srv.port, srv.user, srv.identity, srv.known_hosts, srv.dir
--   ... ssh.connect{host="127.0.0.1", port=srv.port, user=srv.user, identity=srv.identity,
--                   known_hosts=srv.known_hosts}
--   srv:stop()
local proc = require("odp.proc")
local sys = require("odp.sys")

local M = {}
local Server = {}
Server.__index = Server

local function sh(cmd)
  local r = assert(proc.run { "sh", "-c", cmd, timeout = 60 })
  if not r.ok then error("harness command failed: " .. cmd .. "\n" .. r.stderr .. r.stdout, 2) end
  return r.stdout
end
M.sh = sh

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.quote = q

--- Creates an ed25519 key pair (no passphrase unless given) at path; returns path.
function M.keygen(path, kind, passphrase)
  sh(string.format("rm -f %s %s.pub && ssh-keygen -q -t %s -N %s -f %s -C odp-test", q(path), q(path),
    kind or "ed25519", q(passphrase or ""), q(path)))
  return path
end

local function free_port()
  -- A random high port; start() retries when sshd cannot bind it.
  local t = sys.now and math.floor(sys.now() * 1000) or os.time()
  return 20000 + (t * 7 + sys.getpid() * 13) % 30000
end

--- Polls pred every 50 ms until it is true (-> true) or timeout seconds pass (-> false).
local function wait_for(pred, timeout)
  local deadline = sys.now() + timeout
  while sys.now() < deadline do
    if pred() then return true end
    sys.sleep(0.05)
  end
  return false
end
M.wait_for = wait_for

--- Runs fn(pid) while the shell command cmd runs in the background (its output to log, default /dev/null),
-- then stops cmd by its PID, also when fn fails (the failure is raised again).
function M.with_background(cmd, fn, log)
  local pid = tonumber(sh(("(exec %s) >%s 2>&1 & echo $!"):format(cmd, q(log or "/dev/null"))):match("%d+"))
  local ok, err = pcall(fn, pid)
  proc.run { "kill", tostring(pid) }
  if not ok then error(err, 0) end
end

--- The login account: a plain user with /bin/sh, like a board's (root's login files here may be slow).
-- A `useradd` account is locked under `UsePAM no` until its password field is '*' (docs/sources.md §7).
function M.ensure_user(name)
  if not proc.run { "id", name }.ok then
    sh(string.format("useradd -m -s /bin/sh %s && usermod -p '*' %s", name, name))
  end
  return name
end

--- opts: dir (temp dir), host_key_types ({"ed25519", "ecdsa"} default), user ("odptest", created if absent),
-- listen (address, default 127.0.0.1), netns (run sshd in that network namespace), config (extra sshd_config
-- lines, e.g. {"PermitOpen none"}), log_level (sshd's LogLevel, default VERBOSE: one "Accepted publickey" line per
-- connection; DEBUG1 adds one "server_input_channel_open: ctype session" line per exec channel), sftp (the sftp
-- subsystem, default /usr/lib/openssh/sftp-server; "internal-sftp" where a ChrootDirectory holds none),
-- mount_ns (shell text run first in a private mount namespace that sshd then runs in, e.g. a noexec tmpfs
-- mounted on its remote dir: the mount is seen by the board alone and goes away with the server).
function M.start(opts)
  opts = opts or {}
  local dir = opts.dir or (function()
    local p = io.popen("mktemp -d /tmp/odp-sshd.XXXXXX"); local d = p:read("l"); p:close(); return d
  end)()
  local self = setmetatable({ dir = dir, user = M.ensure_user(opts.user or "odptest"),
    host = opts.listen or "127.0.0.1" }, Server)
  self.owns_dir = not opts.dir
  -- whatever the test does, the suite's end stops the server and removes its directory (private keys in it);
  -- a bench (no T.done) calls srv:close() itself
  require("t").at_done(function() self:close() end)
  -- sshd reads authorized_keys as the user: the dir must be readable by it.
  sh("mkdir -p -m0755 /run/sshd && chmod 755 " .. q(dir))
  self.host_keys = {}
  for _, kind in ipairs(opts.host_key_types or { "ed25519", "ecdsa" }) do
    self.host_keys[kind] = M.keygen(dir .. "/host_" .. kind, kind)
  end
  self.identity = M.keygen(dir .. "/id_ed25519")
  sh(string.format("cp %s.pub %s/authorized_keys && chmod 644 %s/authorized_keys", q(self.identity), q(dir), q(dir)))
  -- A directory the login user owns, for uploads.
  self.remote_dir = dir .. "/remote"
  sh(string.format("mkdir -p %s && chown %s %s", q(self.remote_dir), self.user, q(self.remote_dir)))
  for attempt = 1, 5 do
    self.port = free_port() + attempt
    local cfg = { "ListenAddress " .. self.host .. ":" .. self.port, "UsePAM no", "StrictModes no",
      "PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
      "AuthorizedKeysFile " .. dir .. "/authorized_keys", "PidFile " .. dir .. "/sshd.pid",
      "Subsystem sftp " .. (opts.sftp or "/usr/lib/openssh/sftp-server"), "LogLevel " .. (opts.log_level or "VERBOSE"),
      "MaxSessions 50", "MaxStartups 50" }
    for _, kind in ipairs(opts.host_key_types or { "ed25519", "ecdsa" }) do
      cfg[#cfg + 1] = "HostKey " .. self.host_keys[kind]
    end
    for _, line in ipairs(opts.config or {}) do cfg[#cfg + 1] = line end
    self.config = dir .. "/sshd_config"
    local f = assert(io.open(self.config, "w")); f:write(table.concat(cfg, "\n"), "\n"); f:close()
    self.log = dir .. "/sshd.log"
    local netns = opts.netns and ("ip netns exec " .. q(opts.netns) .. " ") or ""
    local cmd = string.format("/usr/sbin/sshd -D -e -f %s", q(self.config))
    if opts.mount_ns then
      cmd = string.format("unshare -m --propagation private sh -c %s", q(opts.mount_ns .. " && exec " .. cmd))
    end
    local pid = sh(string.format("%s%s >%s 2>&1 & echo $!", netns, cmd, q(self.log)))
    self.pid = tonumber(pid:match("%d+"))
    local up = wait_for(function()
      local l = io.open(self.log):read("a")
      return l:find("Server listening") or l:find("Cannot bind") or l:find("Address already in use")
        or not self:alive()
    end, 10)
    local l = io.open(self.log):read("a")
    if up and l:find("Server listening") then break end
    self:stop()
    self.pid = nil
    if attempt == 5 then error("sshd did not start:\n" .. l) end
  end
  -- known_hosts with the server's ed25519 key under its [host]:port name, as OpenSSH writes it.
  self.known_hosts = dir .. "/known_hosts"
  self:write_known_hosts("ed25519")
  return self
end

--- Dropbear (Debian's dropbear-bin), the SSH server of many embedded boards, in place of OpenSSH: the same Server
-- (port, user, identity, known_hosts, remote_dir, count, stop, close, relay) with Dropbear's own ed25519 host key.
-- Dropbear has no AuthorizedKeysFile: it reads the login user's ~/.ssh/authorized_keys, so it gets a user of its
-- own (opts.user, default "odpdropbear", created if absent; OpenSSH's suites use another). This server's key is a
-- line added to that file while it runs and taken out by close, both under flock(1) on ~/.ssh: two servers at
-- once (a suite and a bench, two checkouts' suites) each keep their own key, and the last one out removes the file.
-- Its log (-E: stderr) has one "Pubkey auth succeeded" line per authenticated connection. opts.window: its receive
-- window in bytes (-W; Dropbear's default is 24576). Not restartable (Server:restart is sshd's).
function M.dropbear(opts)
  opts = opts or {}
  local p = io.popen("mktemp -d /tmp/odp-dropbear.XXXXXX"); local dir = p:read("l"); p:close()
  local self = setmetatable({ dir = dir, owns_dir = true, user = M.ensure_user(opts.user or "odpdropbear"),
    host = "127.0.0.1", dropbear = true }, Server)
  require("t").at_done(function() self:close() end)
  sh("chmod 755 " .. q(dir))
  local host_key = dir .. "/host_ed25519"
  local pub = sh("dropbearkey -t ed25519 -f " .. q(host_key) .. " 2>/dev/null"):match("(ssh%-ed25519 %S+)")
  assert(pub, "dropbearkey printed no public key")
  self.host_keys = { ed25519 = host_key }
  self.host_pub = { ed25519 = pub }
  self.identity = M.keygen(dir .. "/id_ed25519")
  local home = sh("getent passwd " .. q(self.user)):match("^[^:]*:[^:]*:[^:]*:[^:]*:[^:]*:([^:]*):")
  self.authorized_keys = home .. "/.ssh/authorized_keys"
  sh(("mkdir -p %s/.ssh && chown %s %s/.ssh && chmod 700 %s/.ssh && flock %s/.ssh sh -c %s"):format(q(home),
    q(self.user), q(home), q(home), q(home), q(("cat %s.pub >>%s && chown %s %s && chmod 600 %s"):format(
    q(self.identity), q(self.authorized_keys), q(self.user), q(self.authorized_keys), q(self.authorized_keys)))))
  self.remote_dir = dir .. "/remote"
  sh(("mkdir -p %s && chown %s %s"):format(q(self.remote_dir), q(self.user), q(self.remote_dir)))
  self.log = dir .. "/dropbear.log"
  for attempt = 1, 5 do
    self.port = free_port() + attempt
    -- -F: in the foreground (its PID is the listener's), -E: log to stderr, -s: no passwords, -P: its pid file
    -- in the temp dir (not /var/run), -r: this host key only
    local pid = sh(("dropbear -F -E -s -r %s -P %s/dropbear.pid -p %s:%d %s >%s 2>&1 & echo $!"):format(q(host_key),
      q(dir), self.host, self.port, opts.window and ("-W " .. math.tointeger(opts.window)) or "", q(self.log)))
    self.pid = tonumber(pid:match("%d+"))
    local up = wait_for(function()
      return proc.run { "sh", "-c", ("ss -Htln 'sport = :%d' | grep -q ."):format(self.port) }.ok or not self:alive()
    end, 10)
    if up and self:alive() then break end
    self:stop()
    self.pid = nil
    if attempt == 5 then error("dropbear did not start:\n" .. io.open(self.log):read("a")) end
  end
  self.known_hosts = dir .. "/known_hosts"
  self:write_known_hosts("ed25519")
  return self
end

--- Writes known_hosts holding the server's key of the given type (or the key file given as `pub`).
function Server:write_known_hosts(kind, path, pub)
  local key = pub and sh("cat " .. q(pub)):match("^(%S+ %S+)") or self:host_key_line(kind)
  local f = assert(io.open(path or self.known_hosts, "w"))
  f:write(string.format("[%s]:%d %s\n", self.host, self.port, key))
  f:close()
  return path or self.known_hosts
end

--- The server's public host key of a type, "TYPE BASE64" as known_hosts holds it.
function Server:host_key_line(kind)
  if self.host_pub then return self.host_pub[kind] end
  return sh("cat " .. q(self.host_keys[kind] .. ".pub")):match("^(%S+ %S+)")
end

--- How many lines of sshd's own log match a Lua pattern (connections, channels: see log_level).
function Server:count(pattern)
  local f = assert(io.open(self.log, "rb"))
  local n = 0
  for line in f:lines() do if line:find(pattern) then n = n + 1 end end
  f:close()
  return n
end

function Server:alive()
  return self.pid ~= nil and proc.run { "kill", "-0", tostring(self.pid) }.ok
end

--- Stops sshd by PID: the listener and every process under it (per-connection monitors, their privsep
-- children holding the sockets, sftp-server, commands), TERM first, then KILL.
function Server:stop(signal)
  if not self.pid then return end
  sh(string.format([[
desc() { local c; for c in $(pgrep -P "$1"); do desc "$c"; echo "$c"; done; }
all="$(desc %d) %d"
kill -%s $all 2>/dev/null
i=0; while kill -0 %d 2>/dev/null && [ $i -lt 40 ]; do sleep 0.05; i=$((i+1)); done
kill -KILL $all 2>/dev/null; true]], self.pid, self.pid, signal or "TERM", self.pid))
  self.pid = nil
end

--- Stops the server for good and removes the directory it made (its private keys): what a test suite's end
-- does by itself (T.done), and what a bench, which has no T.done, calls.
function Server:close()
  self:stop()
  if self.authorized_keys then -- Dropbear's: this server's line out, the file gone with the last one
    local ak = q(self.authorized_keys)
    sh(("flock %s sh -c %s"):format(q(self.authorized_keys:match("^(.*)/[^/]*$")), q(("grep -vxF -f %s.pub %s " ..
      ">%s.tmp; if [ -s %s.tmp ]; then chmod 600 %s.tmp && chown --reference=%s %s.tmp && mv %s.tmp %s; " ..
      "else rm -f %s %s.tmp; fi"):format(q(self.identity), ak, ak, ak, ak, ak, ak, ak, ak, ak, ak))))
    self.authorized_keys = nil
  end
  if self.owns_dir and self.dir then os.execute("rm -rf " .. q(self.dir)) end
  self.dir = nil
end

--- Kills the listener and every sshd session process under it at once (a dropped connection).
function Server:crash() self:stop("KILL") end

--- Starts the server again after stop/crash: the same config, port and host keys (a board back from a reboot).
function Server:restart()
  assert(not self.pid, "sshd:restart: still running")
  assert(not self.dropbear, "sshd:restart: a Dropbear server is not restarted (start another)")
  local mark = #(io.open(self.log):read("a"))
  for _ = 1, 50 do
    local pid = sh(string.format("/usr/sbin/sshd -D -e -f %s >>%s 2>&1 & echo $!", q(self.config), q(self.log)))
    self.pid = tonumber(pid:match("%d+"))
    local up = wait_for(function()
      local l = io.open(self.log):read("a"):sub(mark + 1)
      return l:find("Server listening") or not self:alive()
    end, 10)
    if up and self:alive() then return self end
    self.pid = nil
    sys.sleep(0.1) -- the port may linger a moment after a kill
  end
  error("sshd did not restart on port " .. self.port)
end

--- A link with a round-trip time in front of the server (tests/lib/relay.lua), with a known_hosts naming the
-- server's key under the relay's [host]:port. -> relay (relay.start's) with known_hosts.
function Server:relay(delay_ms, dir)
  local relay = require("relay").start(delay_ms, self.host, self.port, dir)
  relay.known_hosts = ("%s/relay-%d.known_hosts"):format(dir, relay.port)
  local key = self:host_key_line("ed25519")
  local f = assert(io.open(relay.known_hosts, "w"))
  f:write(("[%s]:%d %s\n"):format(self.host, relay.port, key))
  f:close()
  return relay
end

function Server:connect_opts(extra)
  local o = { host = self.host, port = self.port, user = self.user, identity = self.identity,
    known_hosts = self.known_hosts, timeout = 20, agent = false }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

return M
