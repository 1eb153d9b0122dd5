--- The adb target: an Android device over odp.adb, through Google's adb server when one runs (it keeps the
-- phone's USB interface, Android Studio keeps working), else directly over USB or TCP.
-- Same interface as lua/odp/target/host.lua (docs/SCRIPTING.md, "Targets"). Files are hash-skipped
-- (sha256sum on the device) and written under a temporary name, renamed when complete. The runner's log
-- comes from logcat when the device has it (ExecuTorch's Android build logs there, docs/sources.md §1);
-- a runner built with the POSIX log layer writes to stderr instead, and both are handed to the parser.
-- Peak memory: the odp-rusage helper for the device's `uname -m` when this machine has one, else
-- toybox/GNU `time -v`. Nothing on the device is deleted.
-- Through an adb server every call opens a connection of its own (the resident helper's channel keeps one):
-- all boards of one odp together keep at most --adb-connections open to one server (odp.core.lock, keyed by
-- the server's address); a board waiting for one yields to the others (docs/many-boards.md).
local adb = require("odp.adb")
local sys = require("odp.sys")
local lock = require("odp.core.lock")
local outage = require("odp.target.outage")
local shell = require("odp.target.shell")
local errors = require("odp.core.errors")
local ui_mod = require("odp.core.ui")

-- connections to one adb server at once, all boards together (docs/many-boards.md: why 16)
local SERVER_CONNECTIONS = 16

local M = {
  kind = "adb",
  options = {
    { "adb", "How to reach the device: auto (the adb server when one runs, else USB), server, usb, or " ..
      "tcp:HOST:PORT (adb tcpip, emulators; direct)", "auto", "string", metavar = "HOW" },
    { "serial", "The device to use when several are attached (see `odp devices`); default $ANDROID_SERIAL", nil,
      "string" },
    { "remote-dir", "Working directory on the device", "/data/local/tmp/odp", "string", metavar = "DIR" },
    { "auth-timeout", "Seconds to wait for the USB debugging prompt to be accepted on the phone", 120, "number" },
    { "adb-connections", "At most N connections open to one adb server at once, all boards of this odp together " ..
      "(the first board to reach a server sets it)", SERVER_CONNECTIONS, "posint" },
    shell.RECONNECT_OPTION,
  },
}
local Target = {}
Target.__index = Target
Target.arch, Target.mkdir, Target.sha256 = shell.arch, shell.mkdir, shell.sha256 -- on Target:run
Target.workdir, Target.stage, Target.fetch = shell.workdir, shell.stage, shell.fetch -- files go to remote_dir
Target.remove = shell.remove

local q = shell.quote

-- ExecuTorch's Android build logs to logcat (device files may say otherwise: `log`, docs/devices.md)
local DEFAULT_LOG = { clear = "logcat -c", dump = "logcat -d -s ExecuTorch:I" }
-- mksh's `time` is a keyword without -v: ask the binaries (device files: `time_commands`)
local TIME_COMMANDS = { "/system/bin/time -v", "toybox time -v", "/usr/bin/time -v" }

-- Runs fn(...) holding one of the adb server's connections (nothing to hold on a direct connection).
local function held(self, fn, ...)
  if not self.conns then return fn(...) end
  return self.conns:with(fn, ...)
end

-- A connection to the device (an odp.adb Device) or a channel on it: two tasks of a pipelined sweep use them at
-- once (one reads a run's answer on the helper's stream while the next writes its run, src/adb/conn.c), so each
-- call inside counts (`local _ <close> = enter(obj)`) and one given up is closed once the last call left: closing
-- frees what a call waiting inside still uses.
local function enter(obj)
  obj.users = obj.users + 1
  return obj
end
local function leave(obj)
  obj.users = obj.users - 1
  if obj.users == 0 and obj.closing then obj:close_now() end
end
local function close_when_unused(obj)
  obj.closing = true
  if obj.users == 0 then obj:close_now() end
end

local Conn = { __close = leave }
Conn.__index = Conn

function Conn:close_now()
  if not self.closed then
    self.closed = true
    self.dev:close()
  end
end

-- Why the connection is lost (see Target:device), or nil.
function Conn:lost_why()
  if not self.lost and not self.closed and self.dev:broken() then self.lost = "the connection was left unusable" end
  return self.lost
end

-- dev[method](dev, ...) on this connection; hold (the target): take one of its adb server's connections for it. A
-- failed call, or one cut short by Ctrl-C, can leave the transport unusable: the connection is then lost.
function Conn:call(hold, method, ...)
  if self.closed then return nil, "EIO: the adb connection was closed", "EIO" end
  local _ <close> = enter(self)
  local dev = self.dev
  local r, e, c
  if hold then r, e, c = held(hold, dev[method], dev, ...) else r, e, c = dev[method](dev, ...) end
  if not self.lost and (dev:broken() or (r == nil and c == "ENODEV" and dev:info().transport == "server")) then
    self.lost = e or "the connection was left unusable"
  end
  return r, e, c
end

local function connect(self, timeout)
  local t0 = sys.now()
  local dev, err, code = held(self, adb.connect, { transport = self.transport, serial = self.serial,
    timeout = timeout or self.timeout, auth_timeout = self.auth_timeout, on_auth_prompt = self.on_auth_prompt })
  if not dev then return nil, err, code end
  if dev:info().transport ~= "server" then self.conns = nil end -- auto found no server: direct
  if self.conn then self:let_go(self.conn) end
  self.conn = setmetatable({ dev = dev, users = 0 }, Conn)
  self.connects, self.connect_ms = (self.connects or 0) + 1, (self.connect_ms or 0) + (sys.now() - t0) * 1000
  return self.conn
end

local TRAFFIC = { "round_trips", "bytes_up", "bytes_down" }

--- What this board session's direct connections carried so far (odp.adb dev:traffic(): round trips waited on,
-- bytes both ways) with the time spent connecting, summed over reconnects; connects: how many connections. nil
-- through the adb server (its link to the device is not odp's to count).
function Target:traffic()
  local conn = self.conn
  local live = conn and conn ~= self.traffic_kept and not conn.closed and conn.dev:traffic()
  if not live and not self.traffic_before then return nil end
  local sum, before = { connects = self.connects or 0, connect_ms = self.connect_ms or 0 }, self.traffic_before or {}
  for _, k in ipairs(TRAFFIC) do sum[k] = (before[k] or 0) + ((live or {})[k] or 0) end
  return sum
end

--- opts: adb ("auto" | "server" | "usb" | "tcp:HOST:PORT"), serial (default $ANDROID_SERIAL), remote_dir, auth_timeout, timeout, device (devices/*.lua),
-- ui (for the "tap Allow" message).
function M.new(opts)
  opts = opts or {}
  local how = opts.adb or "auto"
  if not (how == "auto" or how == "server" or how == "usb" or how:match("^tcp:.+:%d+$")) then
    errors.fail("EUSAGE", ("--adb must be auto, server, usb or tcp:HOST:PORT, not '%s'"):format(how))
  end
  local self = setmetatable({
    kind = "adb", ui = opts.ui, opts = opts,
    transport = opts.adb or "auto",
    serial = opts.serial or (os.getenv("ANDROID_SERIAL") ~= "" and os.getenv("ANDROID_SERIAL") or nil),
    remote_dir = opts.remote_dir or "/data/local/tmp/odp",
    auth_timeout = opts.auth_timeout or 120,
    timeout = 10,
    cache = {},
    log = opts.device and opts.device.log or DEFAULT_LOG,
    time_commands = opts.device and opts.device.time_commands or TIME_COMMANDS,
  }, Target)
  if how == "auto" or how == "server" then
    -- an address odp cannot use fails in connect, with the reason
    local server = adb.server_address()
    if server then self.conns = lock.named("adb server " .. server, opts.adb_connections or SERVER_CONNECTIONS) end
  end
  local ui = opts.ui
  self.on_auth_prompt = function()
    local msg = "accept the USB debugging prompt on the phone (Allow) -- waiting up to " ..
      math.floor(self.auth_timeout) .. " s"
    -- through the run's ui like every message (quiet with -q); a script without one gets a plain ui
    ui = ui or ui_mod.new {}
    ui:info("%s", msg)
  end
  local conn, err, code = connect(self)
  if not conn then return nil, err, code end
  local info = conn.dev:info()
  self.info = info
  self.uri = "adb://" .. info.serial
  return self
end

-- An operation that lost the device marks its connection lost: a direct connection broken, or, through the adb
-- server, the device no longer listed or offline there, or the server gone (ENODEV). The next request waits for
-- the device to come back (adbd restarts on root:, usb:, reboot, a cable wiggle: docs/sources.md §3), with backoff
-- until --reconnect-timeout (odp.target.outage), on every outage, once for all the tasks that use it; a device
-- that stays away is given up: every later operation fails at once with ECONNLOST and the cause.
-- -> the connection in use | nil, err, code
function Target:device()
  if self.gone then return nil, self.gone, self.gone_code end
  local conn = self.conn
  if not conn then return connect(self) end -- closed, not lost: connected afresh
  local why = conn:lost_why()
  if not why then return conn end
  local ok, err, code = outage.reconnect(self, why, conn)
  if not ok then return nil, err, code end
  return self.conn
end

-- What odp.target.outage asks of the transport.
function Target:connection() return self.conn end
function Target:lost_why(conn) return conn:lost_why() end
function Target:connect_again(timeout) return connect(self, math.min(timeout, self.timeout)) end

-- The helper ended and the connection says nothing: ask the device (through the adb server the helper's end can
-- come before the server stops listing the device).
function Target:ask_lost(conn) conn:call(self, "stat", "/") end

-- The connection given up (its helper channel with it): closed once no call is inside it, so that adbd ends what
-- ran on it; its traffic is kept.
function Target:let_go(conn)
  if conn == self.conn and conn ~= self.traffic_kept then self.traffic_before, self.traffic_kept = self:traffic(), conn end
  local h = self.cache.helper_client
  if h and h.ch.conn == conn then h:close() end
  close_when_unused(conn)
end

-- Ctrl-C while waiting ends this wait, not the board: the next operation waits again.
function Target:give_up(err, code)
  if code ~= "ECANCELED" then self.gone, self.gone_code = err, code end
  return nil, err, code
end

--- Runs fn() (a request on the device: what names it) with the connection's health in mind
-- (odp.target.outage.request). -> fn's results | nil, err, code
Target.request = outage.request

-- Whether the connection in use can be asked something now (the best-effort cleanups after a failure).
local function usable(self)
  return self.conn ~= nil and not self.conn.closed and not self.conn:lost_why()
end

-- dev[method](dev, ...) on the device's connection; hold: take one of the server's connections for the call.
local function call_on(self, hold, method, ...)
  local conn, err, code = self:device()
  if not conn then return nil, err, code end
  return conn:call(hold and self, method, ...)
end

local function call(self, method, ...) return call_on(self, true, method, ...) end

-- The resident helper's channel: a stream on one connection, which it keeps in use while a call is inside it
-- (enter), and, through an adb server, one of the server's connections, given back when it closes.
local Channel = { __close = leave }
Channel.__index = Channel

-- A call on the stream; one that failed on a transport it broke marks the connection lost.
local function on_stream(self, method, ...)
  if self.closed then return nil, "EIO: the helper's channel on the device was closed", "EIO" end
  local _ <close> = enter(self)
  local _c <close> = enter(self.conn)
  local r, err, code = self.stream[method](self.stream, ...)
  if r == nil then self.conn:lost_why() end
  return r, err, code
end
function Channel:read(n, opts) return on_stream(self, "read", n, opts) end
function Channel:write(bytes, opts) return on_stream(self, "write", bytes, opts) end
function Channel:stderr() return self.stream:stderr() end
function Channel:close_now()
  if self.closed then return end
  self.closed = true
  self.stream:close()
  if self.conns then
    self.conns:release()
    self.conns = nil
  end
end
-- Another task may be reading or writing it: closed once it left.
function Channel:close() close_when_unused(self) end
-- never closed (dropped by a script): its stream closes itself when collected
function Channel:__gc()
  if self.conns then self.conns:release() end
end

--- A `shell,v2` command whose stdin/stdout are a byte stream (an odp.Stream): the resident helper's. A direct
--- connection found lost (a Ctrl-C in the middle of a read leaves it so) is made again, once. Through an adb
--- server the channel keeps one of the server's connections while it is open, and only takes one when another
--- stays free for the calls (else EBUSY, and the board runs one shell service per command): boards that each
--- hold a channel never wait on each other.
function Target:open_channel(cmd)
  local conns = self.conns
  if conns and not conns:try(1) then
    return nil, ("EBUSY: all but one of the %d connections to the adb server are in use (--adb-connections)")
      :format(conns.n), "EBUSY"
  end
  local conn
  local ch, err, code = self:request("opening a channel", true, function()
    local c, cerr, ccode = self:device()
    if not c then return nil, cerr, ccode end
    conn = c
    return c:call(false, "open_channel", cmd, { timeout = 30 })
  end)
  if not ch then
    if conns then conns:release() end
    return nil, err, code
  end
  return setmetatable({ stream = ch, conn = conn, conns = conns, users = 0 }, Channel)
end

--- One shell command line: through the resident helper (no new service), else its own shell service.
--- Returns stdout or nil, err, code.
Target.run = shell.run

--- One shell command line in its own shell service (the path without the helper). -> stdout | nil, err, code
function Target:exec_command(cmd, timeout)
  local r, err, code = call(self, "shell", cmd, { timeout = timeout or 30 })
  if not r then return nil, err, code end
  if r.timed_out then return nil, "ETIMEDOUT: " .. cmd, "ETIMEDOUT" end
  if r.canceled then return nil, "ECANCELED: interrupted", "ECANCELED" end
  if r.status ~= 0 then
    local why = (r.stderr ~= "" and r.stderr or r.stdout):gsub("%s+$", "")
    return nil, ("EIO: `%s` failed on the device (status %d): %s"):format(cmd, r.status, why), "EIO"
  end
  return r.stdout
end

Target.libc_version = shell.libc_version -- Android's bionic: none; an emulator or a glibc chroot: its own

--- Free bytes where path is (or its nearest existing parent): the helper when it runs, else `df` (the
-- preflight asks before the helper is pushed). -> bytes | nil, err, code
function Target:free_bytes(path)
  local h = self.cache.helper_client
  if h and not h.dead then return h:free(path) end
  return shell.df_free(self, path)
end

Target.space, Target.close_run_dir = shell.space, shell.close_run_dir
Target.finish_run, Target.wait_board = shell.finish_run, shell.wait_board -- a shared board (docs/devices.md)

--- -> {bytes, skipped} | nil, err, code. skipped when the device already has the same SHA-256.
function Target:push(src, dst, opts)
  opts = opts or {}
  local skipped, st, err, code = shell.push_skip(self, src, dst, opts)
  if skipped then return skipped end
  if not st then return nil, err, code end
  local tmp = dst .. ".odp-part-" .. sys.getpid() -- odp's one partial name (docs/signals.md)
  local popts = { mode = opts.mode, on_progress = opts.on_progress, timeout = opts.timeout }
  local ok, perr, pcode = call(self, "push", src, tmp, popts)
  if not ok then
    -- best effort while the device is there: the partial file has a name nobody mistakes for done, and the
    -- next odp removes what is left (odp.target.shell.space). Ctrl-C is lifted meanwhile and raised again; a
    -- direct connection it cut short is made once more for it.
    local canceled = pcode == "ECANCELED"
    if canceled then sys.cancel_clear() end
    if canceled and not usable(self) and not self.gone then connect(self, 3) end
    if usable(self) then call(self, "shell", "rm -f " .. q(tmp), { timeout = canceled and 3 or 10 }) end
    if canceled then sys.cancel_request() end
  end
  if not ok and pcode == "EIO" and usable(self) then
    perr, pcode = shell.space_cause(self, dst:match("^(.*)/[^/]*$") or ".", st.size, "uploading " ..
      src:match("[^/]*$"), perr, pcode)
  end
  if not ok then return nil, perr, pcode end
  local mv, merr, mcode = self:run("mv -f " .. q(tmp) .. " " .. q(dst))
  if not mv then return nil, merr, mcode end
  return { bytes = st.size, skipped = false }
end

--- The local file appears only when complete. -> true | nil, err, code
function Target:pull(src, dst, opts)
  opts = opts or {}
  local popts = { on_progress = opts.on_progress, timeout = opts.timeout }
  local ok, err, code = call(self, "pull", src, dst, popts)
  if not ok and usable(self) then err, code = shell.pull_space_cause(self, src, dst, err, code) end
  if not ok then return nil, err, code end
  return true
end

--- How this device measures rusage: "odp-rusage" (helper pushed), "time" (toybox or GNU time -v) or false;
-- and the prefix that measures a command (odp.target.shell.rusage_method).
function Target:rusage_method()
  return shell.rusage_method(self, self.time_commands)
end

--- Is there a logcat on this device? (emulators and stripped images may have none)
function Target:has_logcat()
  if self.cache.logcat == nil then
    local out = self:run("command -v logcat || true")
    self.cache.logcat = out ~= nil and out:match("%S") ~= nil
  end
  return self.cache.logcat
end

-- The command itself: through the resident helper when it runs, else its own shell service.
local function exec_measured(self, argv, opts, method, prefix)
  if (method == "odp-rusage" or opts.rusage == false) and not opts.stdin then
    local h, herr, hcode = shell.helper(self)
    if herr then return nil, herr, hcode end
    if h then
      local r, err, code = shell.helper_exec(self, h, argv, opts)
      -- a run cut short (Ctrl-C) or the device lost leave a direct connection unusable: let it go now, so adbd
      -- ends what ran (once no other task's call is inside it)
      local conn = h.ch.conn
      if conn and not conn.closed and conn:lost_why() then self:let_go(conn) end
      return r, err, code
    end
  end
  local helper_args = opts.helper_args
  if method == "odp-rusage" then
    -- -g: the runner stays in the shell's process group, which adbd kills when the stream closes (a timeout,
    -- Ctrl-C, the adb server or the connection gone): nothing of it outlives the command on the device
    helper_args = table.move(opts.helper_args or {}, 1, #(opts.helper_args or {}), 2, { "-g" })
  end
  if helper_args or opts.counters then
    local err, code
    prefix, err, code = shell.with_helper_args(method, prefix, helper_args, opts.counters)
    if not prefix and err then return nil, err, code end
  end
  local cmd = shell.command(argv, { cwd = opts.cwd, env = opts.env, prefix = prefix })
  local r, err, code = call(self, "shell", cmd, { timeout = opts.timeout, stdin = opts.stdin,
    capture_limit = opts.capture_limit, on_stdout = opts.on_stdout, on_stderr = opts.on_stderr })
  if not r then return nil, err, code end
  return shell.apply_rusage(r, method)
end

--- Runs argv on the device: the odp.proc.run result table (+ rusage when measurable, + log with runner_log).
-- opts: timeout, cwd, env, stdin, capture_limit, rusage (false: run bare), runner_log (clear logcat before,
-- read it after with the device's log.dump, `logcat -d -s ExecuTorch:I` by default, as r.log). A timeout closes the stream: adbd kills the command.
function Target:exec(argv, opts)
  opts = opts or {}
  local method, prefix = false, nil
  if opts.rusage ~= false then method, prefix = self:rusage_method() end
  local logcat = opts.runner_log and self:has_logcat()
  if logcat and self.log.clear then self:run(self.log.clear) end
  local r, err, code = exec_measured(self, argv, opts, method, prefix)
  if not r then return nil, err, code end
  if logcat and not r.timed_out then
    local out = self.log.dump and self:run(self.log.dump, 30)
    if out then r.log = out end
  end
  return r
end

--- The device-state snapshot's text through the helper (odp.target.device_state), nil without one.
Target.state_text = shell.state_text
Target.state_in_exec = shell.state_in_exec

-- Every request on the device goes through odp.target.outage.request.
outage.wrap(Target)

-- Two tasks may have runs in flight at once (odp.run.sweep's pipelined points: odp.target.helper queues the
-- second in the helper): one connection carries both (src/adb/conn.c), and a drop is waited for once for both
-- (odp.target.outage).
Target.pipelines = true

function Target:close()
  local conn = self.conn
  if conn then self:let_go(conn) end
  self.conn = nil -- closed, not lost: a later use connects afresh
end

return M
