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

local function connect(self, timeout)
  local t0 = sys.now()
  local dev, err, code = held(self, adb.connect, { transport = self.transport, serial = self.serial,
    timeout = timeout or self.timeout, auth_timeout = self.auth_timeout, on_auth_prompt = self.on_auth_prompt })
  if not dev then return nil, err, code end
  if dev:info().transport ~= "server" then self.conns = nil end -- auto found no server: direct
  self.dev = dev
  self.connects, self.connect_ms = (self.connects or 0) + 1, (self.connect_ms or 0) + (sys.now() - t0) * 1000
  return dev
end

local TRAFFIC = { "round_trips", "bytes_up", "bytes_down" }

--- What this board session's direct connections carried so far (odp.adb dev:traffic(): round trips waited on,
-- bytes both ways) with the time spent connecting, summed over reconnects; connects: how many connections. nil
-- through the adb server (its link to the device is not odp's to count).
function Target:traffic()
  local live = self.dev and self.dev:traffic()
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
    kind = "adb", ui = opts.ui, opts = opts, drops = 0,
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
  local dev, err, code = connect(self)
  if not dev then return nil, err, code end
  local info = dev:info()
  self.info = info
  self.uri = "adb://" .. info.serial
  return self
end

-- An operation that lost the device marks the target (drop): a direct connection broken, or, through the adb
-- server, the device no longer listed or offline there, or the server gone (ENODEV). The next operation waits
-- for the device to come back (adbd restarts on root:, usb:, reboot, a cable wiggle: docs/sources.md §3), with
-- backoff until --reconnect-timeout (odp.target.shell.reconnect), on every outage; a device that stays away
-- is given up: every later operation fails at once with ECONNLOST and the cause.
function Target:device()
  if self.dev then return self.dev end
  if self.gone then return nil, self.gone, "ECONNLOST" end
  if not self.dropped then return connect(self) end
  local ok, err, code = shell.reconnect(self, self.dropped, function() return connect(self) end)
  if not ok then
    -- Ctrl-C while waiting ends this wait, not the board: the next operation waits again
    if code ~= "ECANCELED" then self.gone, self.dropped = err, nil end
    return nil, err, code
  end
  self.dropped = nil
  return self.dev
end

-- Drops the connection (its helper channel with it), why: the cause: the next operation waits for it.
local function drop(self, why)
  if self.cache.helper_client then self.cache.helper_client:close() end
  if self.dev then
    self.traffic_before = self:traffic() -- kept: the connection goes
    self.dev:close()
    self.dev = nil
  end
  why = why or "the connection was left unusable"
  self.dropped, self.last_drop, self.drops = self.dropped or why, why, self.drops + 1
end

-- Whether a call that failed with code lost the device (see Target:device).
local function lost(dev, code)
  return dev:broken() or (code == "ENODEV" and dev:info().transport == "server")
end

-- dev[method](dev, ...) on the connected device; hold: take one of the server's connections for the call.
local function call_on(self, hold, method, ...)
  local dev, err, code = self:device()
  if not dev then return nil, err, code end
  local r, e, c
  if hold then r, e, c = held(self, dev[method], dev, ...) else r, e, c = dev[method](dev, ...) end
  -- a failed call, or one cut short by Ctrl-C, can leave the transport unusable: reconnect next time
  if dev:broken() or (r == nil and lost(dev, c)) then drop(self, e)
  elseif r ~= nil then self.last_ok, self.last_ok_at = method, sys.now() end
  return r, e, c
end

local function call(self, method, ...) return call_on(self, true, method, ...) end

-- Runs fn() (a request on the device: what names it) with the connection's health in mind, as
-- odp.target.ssh's Target:request: on a device given up, ECONNLOST at once; when the device was lost under it,
-- waits for it to come back (Target:device) and runs fn once more if replay (nothing on the device can have
-- started), else fails with ECONNLOST saying it is not run again. A failure under Ctrl-C is not waited for.
local function request(self, what, replay, fn)
  for try = 1, 2 do
    if self.gone then return nil, self.gone, "ECONNLOST" end
    local drops, h = self.drops, self.cache.helper_client
    local r, err, code = fn()
    if r == nil and code ~= "ECANCELED" and h and h.dead and self.drops == drops then
      -- the helper ended: killed on the device, or its channel went with the device (through the adb server its
      -- end can come before the server stops listing the device): ask the device
      call(self, "stat", "/")
    end
    -- a call Ctrl-C cut short may leave a direct connection unusable: that is no outage to wait for now
    if r ~= nil or code == "ECANCELED" or self.drops == drops or sys.cancel_requested() then return r, err, code end
    if not self.dev then -- not already back through a request inside fn
      local dev, derr, dcode = self:device()
      if not dev then return nil, derr, dcode end
    end
    if not replay or try == 2 then return nil, shell.not_run_again(self, what, self.last_drop), "ECONNLOST" end
  end
end

-- A resident channel holding one of the adb server's connections: it goes back when the channel closes.
local HeldChannel = {}
HeldChannel.__index = HeldChannel
function HeldChannel:read(n, opts) return self.stream:read(n, opts) end
function HeldChannel:write(bytes, opts) return self.stream:write(bytes, opts) end
function HeldChannel:stderr() return self.stream:stderr() end
function HeldChannel:close()
  self.stream:close()
  if self.conns then
    self.conns:release()
    self.conns = nil
  end
end
-- never closed (dropped by a script): its stream closes itself when collected
function HeldChannel:__gc()
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
  local ch, err, code = request(self, "opening a channel", true, function()
    return call_on(self, false, "open_channel", cmd, { timeout = 30 })
  end)
  if not conns then return ch, err, code end
  if not ch then
    conns:release()
    return nil, err, code
  end
  return setmetatable({ stream = ch, conns = conns }, HeldChannel)
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
    if canceled and not self.dev and not self.gone and connect(self, 3) then self.dropped = nil end
    if self.dev then call(self, "shell", "rm -f " .. q(tmp), { timeout = canceled and 3 or 10 }) end
    if canceled then sys.cancel_request() end
  end
  if not ok and pcode == "EIO" and self.dev then
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
  if not ok and self.dev then err, code = shell.pull_space_cause(self, src, dst, err, code) end
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
      local r, err, code = shell.helper_exec(h, argv, opts)
      -- a run cut short (Ctrl-C) or the device lost leave a direct connection unusable: drop it now, so adbd
      -- ends what ran
      if self.dev and self.dev:broken() then drop(self, err) end
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

-- Every request on the device goes through request(): what it is called in the line that says the device
-- dropped, and whether it is run again once the device is back (all but exec: a program may have started).
for name, replay in pairs { run = true, exec_command = true, mkdir = true, sha256 = true, libc_version = true,
  free_bytes = true, push = true, pull = true, state_text = true, exec = false } do
  local f = Target[name]
  Target[name] = function(self, first, ...)
    local rest = table.pack(...)
    return request(self, shell.request_name(name, first), replay, function()
      return f(self, first, table.unpack(rest, 1, rest.n))
    end)
  end
end

function Target:close()
  drop(self)
  self.dropped = nil -- closed, not lost: a later use connects afresh
end

return M
