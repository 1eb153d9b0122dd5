---@meta
-- LuaLS type stubs for odp's C modules (the Lua modules under lua/ carry their own annotations).
-- Editors: add `lua/` and `docs/luals/` to `workspace.library` (.luarc.json at the top does).
-- Every operational failure returns nil, "ECODE: message", "ECODE" (docs/SCRIPTING.md, Errors).

---@alias odp.ECode "ETIMEDOUT"|"EAUTH"|"EHOSTKEY"|"ENODEV"|"EBUSY"|"EPROTO"|"ECRC"|"ENOTFOUND"|"EIO"|"ECANCELED"

---@class odp.Rusage
---@field utime_s number
---@field stime_s number
---@field maxrss_kb integer peak resident set size of the process, kB
---@field minflt integer
---@field majflt integer
---@field nvcsw integer
---@field nivcsw integer

---@class odp.ExecResult
---@field ok boolean exited 0, no signal, no timeout, not canceled
---@field status integer exit status (0 when a signal ended it)
---@field signal? integer
---@field signal_name? string "ABRT", "SEGV", ...
---@field timed_out boolean
---@field canceled boolean
---@field aborted? boolean an output callback raised
---@field stdout string
---@field stderr string
---@field stdout_dropped? integer
---@field stderr_dropped? integer
---@field wall_s number
---@field rusage? odp.Rusage
---@field log? string the runner's log when it went elsewhere (Android logcat)

---@class odp.ExecOpts
---@field timeout? number seconds; then the process group is killed
---@field stdin? string
---@field capture_limit? integer bytes kept per stream (0 = all)
---@field on_stdout? fun(chunk: string)
---@field on_stderr? fun(chunk: string)

---@class odp.Stream
local Stream = {}
---@param n integer 1..16 MiB
---@param opts? {timeout?: number}
---@return string|nil data 1..n bytes, "" at end of stream
---@return string? err
---@return odp.ECode? code
function Stream:read(n, opts) end
---@param data string
---@param opts? {timeout?: number}
---@return true|nil ok, string? err, odp.ECode? code
function Stream:write(data, opts) end
---@param data string bytes handed back: the next read returns them first
function Stream:unread(data) end
---@return string kind "fd", "serial", "rtt", ...
function Stream:kind() end
function Stream:close() end
---@param pattern string a Lua pattern (or plain text with opts.plain)
---@param opts? {timeout?: number, plain?: boolean}
---@return string|nil match, string? before_or_err, odp.ECode? code
function Stream:expect(pattern, opts) end
---@param opts? {timeout?: number, count?: integer}
---@return fun(): string|nil
function Stream:lines(opts) end

---@class odp.proc
local proc = {}
---@param spec odp.ExecOpts|{argv?: string[], cwd?: string, env?: table<string, string|false>, kill_grace?: number, lifeline?: integer, [integer]: string}
---@return odp.ExecResult|nil result, string? err, odp.ECode? code
function proc.run(spec) end

---@class odp.sys
local sys = {}
---@return string|nil hex, string? err, odp.ECode? code  -- ENOTFOUND: libcrypto (opened on first use) is missing
function sys.sha256(data) end
---@param crc? integer continue from this CRC
---@return integer
function sys.crc32(data, crc) end
---@return string|nil hex, string? err, odp.ECode? code
function sys.sha256_file(path) end
function sys.base64_encode(data) end
---@return string|nil bytes, string? err, odp.ECode? code
function sys.base64_decode(text) end
---@return number seconds, monotonic
function sys.now() end
---@return number seconds since the epoch
function sys.time() end
---@return true|nil ok, string? err, odp.ECode? code ECANCELED on Ctrl-C
function sys.sleep(seconds) end
---@param fd "stdin"|"stdout"|"stderr"|integer
function sys.isatty(fd) end
function sys.term_width(fd) end
---@return string|nil line, string? err, odp.ECode? code
function sys.read_secret() end
---@param opts? {mode?: integer}
function sys.write_file(path, data, opts) end
function sys.append_sync(path, data) end
---@class odp.sys.Lock
local Lock = {}
--- Removes the lock file and gives the lock back (also __close, __gc).
function Lock:release() end
--- An exclusive lock on path (flock; the file holds this pid). EBUSY when another process holds it.
---@return odp.sys.Lock|nil lock, string? err, odp.ECode? code, integer? holder_pid
function sys.lock(path) end
function sys.mkdir_p(path, mode) end
function sys.rename(from, to) end
function sys.chmod(path, mode) end
---@return {type: "file"|"dir"|"other", size: integer, mode: integer, mtime: number, executable: boolean, readable: boolean}|nil
function sys.stat(path) end
---@return string|nil bytes, string? err, odp.ECode? code
function sys.read_file(path) end
function sys.realpath(path) end
---@return string[]|nil
function sys.readdir(path) end
function sys.getpid() end
function sys.hostname() end
function sys.cancel_requested() end
function sys.cancel_clear() end
---@return integer|nil signal SIGHUP (1) or SIGTERM (15) once odp has been asked to end
function sys.terminating() end

---@class odp.ssh.Session
local Session = {}
---@param command string[]|string argv (quoted for the remote shell) or a shell command line
---@param opts? odp.ExecOpts
---@return odp.ExecResult|nil result, string? err, odp.ECode? code
function Session:exec(command, opts) end
---@param opts? {mode?: integer, on_progress?: fun(done: integer, total: integer), timeout?: number}
function Session:put(local_path, remote_path, opts) end
---@param opts? {on_progress?: fun(done: integer, total: integer), timeout?: number}
function Session:get(remote_path, local_path, opts) end
function Session:uri() end
function Session:fingerprint() end
function Session:close() end

---@class odp.ssh
local ssh = {}
---@param opts {host: string, port?: integer, user?: string, identity?: string, keys?: string[], passphrase?: string, known_hosts?: string, known_hosts_also?: string[], host_key_alias?: string, accept_new?: boolean, agent?: boolean|string, timeout?: number, proxy_command?: string, via?: odp.ssh.Session, alive_interval?: integer, alive_count_max?: integer}
---@return odp.ssh.Session|nil session, string? err, odp.ECode? code
function ssh.connect(opts) end
---@return string version of the linked libssh2
function ssh.libssh2_version() end
---@return boolean rsa_sha2 the linked libssh2 signs RSA keys with rsa-sha2-256/512 (>= 1.11)
function ssh.rsa_sha2() end
---@return string line "libssh2 1.10.0, RSA keys SHA-1 only: ..." (odp version -v)
function ssh.backend_version() end

---@class odp.adb.Device
local Device = {}
---@param command string[]|string
---@param opts? odp.ExecOpts
---@return odp.ExecResult|nil result, string? err, odp.ECode? code
function Device:shell(command, opts) end
---@param opts? {mode?: integer, on_progress?: fun(done: integer, total: integer), timeout?: number}
function Device:push(local_path, remote_path, opts) end
---@param opts? {on_progress?: fun(done: integer, total: integer), timeout?: number}
function Device:pull(remote_path, local_path, opts) end
function Device:stat(path, opts) end
---@return {serial: string, transport: "server"|"usb"|string, state: string, model: string, product: string, device: string, features: table<string, boolean>, version?: integer, maxdata?: integer, server?: string, server_version?: integer}
function Device:info() end
---@return boolean broken a direct connection dropped (always false through the adb server)
function Device:broken() end
function Device:close() end

---@class odp.adb
local adb = {}
---@return {serial: string, state: string, model?: string, hint?: string}[]|nil
function adb.devices() end
---@param opts? {server?: string, timeout?: number}
---@return {address: string, version: integer, devices: {serial: string, state: string, model?: string, product?: string, device?: string, usb?: string, transport_id?: integer}[]}|nil server, string? err, odp.ECode? code
function adb.server(opts) end
---@param opts? {serial?: string, transport?: "auto"|"server"|"usb"|string, server?: string, timeout?: number, auth_timeout?: number, on_auth_prompt?: fun()}
---@return odp.adb.Device|nil device, string? err, odp.ECode? code
function adb.connect(opts) end

---@class odp.probe.Probe
local Probe = {}
---@return string|nil bytes
function Probe:read(addr, n) end
function Probe:write(addr, data) end
function Probe:halt() end
function Probe:go() end
--- SWD reset, then run (RTT blocks attached through odp.rtt are invalidated first)
function Probe:reset() end
function Probe:kind() end
function Probe:close() end

---@class odp.probe
local probe = {}
---@param opts {backend: "jlink"|"gdb"|"qemu", device?: string, speed_khz?: integer, serial?: string, ip?: string, lib?: string, address?: string, shm?: string, base?: integer, qmp?: string}
---@return odp.probe.Probe|nil probe, string? err, odp.ECode? code
function probe.open(opts) end
function probe.jlink_lib() end
---@param vid? integer
---@return {vid: integer, pid: integer, bus: integer, address: integer, access: boolean, serial?: string, product?: string, open_error?: string}[]|nil list, string? err, odp.ECode? code
function probe.usb_list(vid) end

---@class odp.usb
local usb = {}
---@param vid? integer
---@return {vid: integer, pid: integer, bus: integer, address: integer, access: boolean, serial?: string, product?: string, open_error?: string}[]|nil list, string? err, odp.ECode? code
function usb.list(vid) end

---@class odp.rtt.Rtt
local Rtt = {}
---@return {index: integer, direction: "up"|"down", name: string, size: integer, flags: integer}[]
function Rtt:channels() end
---@return odp.Stream
function Rtt:channel(i) end
---@param opts? {timeout?: number, count?: integer}
function Rtt:lines(i, opts) end
function Rtt:stats() end
function Rtt:close() end

---@class odp.rtt
local rtt = {}
---@param where {ranges?: integer[][], address?: integer, elf?: string}
---@param opts? {timeout?: number}
---@return odp.rtt.Rtt|nil rtt, string? err, odp.ECode? code
function rtt.attach(probe, where, opts) end
--- Zeroes every "SEGGER RTT" ID in `where` (as for attach) before a reset (halt the core first)
---@param probe odp.probe.Probe
---@param where {ranges?: integer[][], address?: integer, elf?: string}
---@param opts? {timeout?: number}
---@return integer|nil cleared, string? err, odp.ECode? code
function rtt.clear_ids(probe, where, opts) end
---@param opts {address: string, channel?: integer, timeout?: number}
---@return odp.Stream|nil
function rtt.telnet(opts) end

---@class odp.xmodem
local xmodem = {}
---@param opts? {mode?: "1k"|"128", timeout?: number, on_progress?: fun(done: integer, total: integer)}
---@return {bytes: integer, blocks: integer, retries: integer, check: string}|nil result, string? err, odp.ECode? code
function xmodem.send(stream, path, opts) end
---@return {bytes: integer, blocks: integer, retries: integer, check: string}|nil result, string? err, odp.ECode? code
function xmodem.receive(stream, path, opts) end

---@class odp.serial
local serial = {}
---@return {port: string, description: string, vid?: integer, pid?: integer, access: boolean}[]|nil
function serial.list() end
---@param opts {port: string, baud?: integer, timeout?: number}
---@return odp.Stream|nil stream, string? how_or_err
function serial.open(opts) end

---@class odp.elf
local elf = {}
---@return {class: integer, machine: string, endian: string, type: string, interpreter?: string, static: boolean, glibc_versions: string[], glibc_required?: string}|nil
function elf.read(path) end
function elf.version_cmp(a, b) end
