-- The one declaration of every function odp's C modules register (src/l_*.c), luv's docs.lua being the
-- model: `build/odp run tools/apidoc.lua` writes docs/api.md (the reference) and docs/luals/odp_c.lua (the
-- LuaLS stubs) from it, and tests/lua/apidoc_test.lua fails when a registered C function has no declaration
-- here, when a declaration names a function that is not registered, or when either file is out of date.
--
-- A function is {"name(param: type, ...) -> type name, ...", "what it does"}: `?` marks what may be nil,
-- `opts?: {key?: type, ...}` an options table. A class's methods are declared like functions and called
-- obj:name(...). Operational failures return nil, "ECODE: message", "ECODE" (docs/SCRIPTING.md, Errors);
-- misuse raises. Prose and examples stay in docs/SCRIPTING.md; this is the reference.
local FAIL = "string? err, odp.ECode? code"
local PROGRESS = "fun(done: integer, total: integer)"
local USB_LIST = "{vid: integer, pid: integer, bus: integer, address: integer, access: boolean, serial?: string, " ..
  "product?: string, open_error?: string}[]|nil list, " .. FAIL
local XMODEM_RESULT = "{bytes: integer, blocks: integer, retries: integer, check: string}|nil result, " .. FAIL
local XMODEM_PROGRESS = "fun(p: {bytes: integer, total: integer, blocks: integer, retries: integer, check: string})"
local WHERE = "{ranges?: integer[][], address?: integer, elf?: string}"

return {
  aliases = {
    { "odp.ECode", '"ETIMEDOUT"|"EAUTH"|"EHOSTKEY"|"ENODEV"|"EBUSY"|"EPROTO"|"ECRC"|"ENOTFOUND"|"EIO"|"ECANCELED"|"EUSAGE"|"ENOTSUP"',
      "the short, fixed list of operational error codes" },
  },

  types = {
    { "odp.Rusage", "what the kernel counted for one process (wait4, or odp-rusage on a board)", {
      "utime_s: number", "stime_s: number", "maxrss_kb: integer peak resident set size of the process, kB",
      "minflt: integer", "majflt: integer", "nvcsw: integer", "nivcsw: integer" } },
    { "odp.ExecResult", "a process exit is data, not an error", {
      "ok: boolean exited 0, no signal, no timeout, not canceled",
      "status: integer exit status (0 when a signal ended it)", "signal?: integer",
      'signal_name?: string "ABRT", "SEGV", ...', "timed_out: boolean", "canceled: boolean",
      "aborted?: boolean an output callback raised", "stdout: string", "stderr: string",
      "stdout_dropped?: integer bytes past capture_limit", "stderr_dropped?: integer", "wall_s: number",
      "rusage?: odp.Rusage", "log?: string the runner's log when it went elsewhere (Android logcat)",
      "remote_pgid?: integer ssh: the remote process group the command led",
      "remote_killed?: boolean ssh: after a timeout or cancel, whether that group was killed",
      "separate_stderr?: boolean adb: stderr came apart from stdout (shell,v2)",
      "stdout_times?: odp.StdoutTimes proc.run with stdout_times, the host's exec, a board helper's run" } },
    { "odp.StdoutTimes", "when each stdout chunk was read, where the program ran (docs/llm.md)", {
      "t_us: integer[] CLOCK_MONOTONIC µs since the program's start", "ends: integer[] stdout bytes up to each chunk's end",
      "cut: integer chunks past the bound, counted, not kept" } },
    { "odp.ExecOpts", "options every exec takes", {
      "timeout?: number seconds; then the process group is killed", "stdin?: string",
      "capture_limit?: integer bytes kept per stream (0 = all)",
      "on_stdout?: fun(chunk: string)", "on_stderr?: fun(chunk: string)" } },
    { "odp.host", "package.loaded['odp.host']: facts about this binary (a table, not a function)", {
      "version: string", "root: string the directory holding lua/, scripts/, devices/",
      "lua_release: string", "built: string", "compiler?: string", "argv: string[] odp's own argv (0 = the program)",
      "started: number odp.sys.now() when odp's main() began (odp.core.timings)" } },
    { "odp.rtt.Channel", "one RTT channel as the control block describes it", {
      "index: integer", 'direction: "up"|"down"', "name?: string where it reads as text", "size: integer buffer bytes",
      "flags: integer", "buffer: integer the buffer's target address", "wr: integer write offset", "rd: integer read offset" } },
    { "odp.QueryResult", "a query's rows as columns, r[name][i] (nil for NULL); no column may be named n, columns or changes", {
      "n: integer rows", "columns: string[] the columns' names in order",
      "changes: integer rows changed by a statement that returns none" } },
  },

  modules = {
    { "odp.proc", "processes on this machine, without a shell, each leading its own process group", {
      { "run(spec: odp.ExecOpts|{argv?: string[], cwd?: string, env?: table<string, string|false>, kill_grace?: number, lifeline?: integer, stdout_times?: integer, [integer]: string}) -> odp.ExecResult|nil result, " .. FAIL,
        "runs argv[0] (PATH lookup) to its end; a timeout or Ctrl-C kills its whole group; lifeline: the child gets the read end of odp's lifeline pipe as that descriptor (docs/signals.md); stdout_times: keep when each of the first N stdout chunks was read" },
    } },

    { "odp.sys", "files, time, hashes, the terminal and Ctrl-C", {
      { "sha256(data: string) -> string hex", "SHA-256 of bytes, in plain C (for short texts: keys, build inputs)" },
      { "sha256_file(path: string) -> string|nil hex, " .. FAIL, "SHA-256 of a file, streamed: up to 1 MiB in plain C, larger files through libcrypto (opened on first use; ENOTFOUND when it is missing)" },
      { "crc32(data: string, crc?: integer) -> integer", "CRC-32 (zlib's, opened on first use), continuing from crc" },
      { "lz4_compress(data: string) -> string|nil block", "an LZ4 block of data (liblz4's, opened on first use); nil when it would not be shorter, or without liblz4.so.1: send data as it is (the helper's upload chunks)" },
      { "base64_encode(data: string) -> string", "standard alphabet, padded" },
      { "base64_decode(text: string) -> string|nil bytes, " .. FAIL, "whitespace ignored; anything else off the alphabet is EPROTO" },
      { "now() -> number seconds", "monotonic clock" },
      { "time() -> number seconds", "since the epoch, with fractions" },
      { "sleep(seconds: number) -> true|nil ok, " .. FAIL, "through the waiting point: ECANCELED on Ctrl-C" },
      { 'isatty(fd: "stdin"|"stdout"|"stderr"|integer) -> boolean', "whether fd is a terminal" },
      { 'term_width(fd?: "stdin"|"stdout"|"stderr"|integer) -> integer|nil columns', "the terminal's width" },
      { "read_secret() -> string|nil line, " .. FAIL, "one line from the terminal with echo off (restored afterwards and on Ctrl-C); the caller writes the prompt" },
      { "read_file(path: string) -> string|nil bytes, " .. FAIL, "the whole file" },
      { "file_contains(path: string, bytes: string) -> boolean|nil found, " .. FAIL,
        "whether the file holds those bytes (1 to 4096 of them), read in pieces: a many-MB file costs no memory" },
      { "write_file(path: string, data: string, opts?: {mode?: integer, batch?: boolean}) -> true|nil ok, " .. FAIL, "atomically: a temporary file, fsync, rename, fsync of the directory; batch: the data only written out and the directory not synced, made durable by the next write_file without batch in the same directory (one flush for a run's files: on ext4 and xfs a journal commit flushes the device's cache)" },
      { "append_sync(path: string, data: string) -> true|nil ok, " .. FAIL, "appends and fsyncs (JSONL records)" },
      { "mkdir_p(path: string, mode?: integer) -> true|nil ok, " .. FAIL, "with its parents" },
      { "rename(from: string, to: string) -> true|nil ok, " .. FAIL, "rename(2)" },
      { "chmod(path: string, mode: integer) -> true|nil ok, " .. FAIL, "chmod(2)" },
      { 'stat(path: string) -> {type: "file"|"dir"|"other", size: integer, mode: integer, mtime: number, ctime: number, executable: boolean, readable: boolean, dev: integer, ino: integer}|nil st, ' .. FAIL, "stat(2), following links; dev and ino name the file itself, whatever path reaches it; ctime (seconds, as mtime) is the inode's last change, which no utime() sets" },
      { "free_bytes(path: string) -> integer|nil bytes, " .. FAIL, "what this user may still write on path's file system (statvfs: f_bavail * f_frsize)" },
      { "realpath(path: string) -> string|nil path, " .. FAIL, "realpath(3)" },
      { "readdir(path: string) -> string[]|nil names, " .. FAIL, "in directory order, without . and .." },
      { "getpid() -> integer", "odp's pid" },
      { "fd_path(file: file*) -> string", "/proc/PID/fd/N: the path by which a child opens this open file, also one without a name (memfile()); the host target's helper writes its report so" },
      { "memfile() -> file*|nil file, " .. FAIL, "an io file with no name that lives in memory (memfd_create(2)): io.tmpfile() without a file system" },
      { "hostname() -> string", "gethostname(2)" },
      { "cancel_requested() -> boolean", "a Ctrl-C (or SIGHUP/SIGTERM) is pending: every wait returns ECANCELED until it is lifted" },
      { "cancel_clear()", "lifts it (the REPL does after each statement)" },
      { "cancel_request()", "raises it again, after a cleanup that lifted it to wait (stopping a run on a board: docs/helper-protocol.md); in a task of odp.core.sched, cancel_request, cancel_clear and cancel_requested act on that task's own flag (docs/many-boards.md)" },
      { "terminating() -> integer|nil signal", "SIGHUP (1) or SIGTERM (15) once odp has been asked to end (docs/signals.md)" },
      { "lock(path: string) -> odp.sys.Lock|nil lock, string? err, odp.ECode? code, integer? holder_pid", "an exclusive flock on the file at path itself (created if absent; opened for writing, so NFS excludes other clients too); EBUSY with the holder's pid, 0 when this machine does not see it" },
    } },

    { "odp.wait", "what the scheduler (odp.core.sched, docs/many-boards.md) needs from the one waiting point; also SENTINEL, the first value of every scheduler yield", {
      { "poll(waits: lightuserdata[], deadline?: number) -> integer[]|nil ready, " .. FAIL,
        "waits for every parked wait at once (in odp_wait: ECANCELED on Ctrl-C); deadline: an absolute sys.now() time; ready: the indices whose wait is over" },
      { 'wake(wait: lightuserdata, how: "ECANCELED"|"ETIMEDOUT"|"ready")', "the parked wait ends that way when its task is resumed; \"ready\": as if what it waits on were ready, so the core looks again (another task used the same connection)" },
      { "scheduling(on?: boolean) -> boolean? running", "a scheduler starts (true) or stops (false) running tasks; without on: whether one runs" },
      { "interrupted() -> boolean", "whether Ctrl-C (or SIGHUP/SIGTERM) asked the whole process to stop" },
      { "interrupt()", "asks it again (the scheduler lifts a Ctrl-C while its tasks stop, then raises it for the code around)" },
    } },
    { "odp.sys.Lock", "a held flock on a file (sys.lock)", {
      { "release()", "gives the lock back, the file stays (also __close, __gc)" },
    }, class = true },

    { "odp.streamcore", "the C half of odp.Stream (lua/odp/core/stream.lua adds expect and lines to its methods)", {},
      fields = { "methods: table the method table every odp.Stream shares" } },
    { "odp.Stream", "one byte stream: serial ports, RTT channels, sockets, pipes, a remote command's stdin/stdout", {
      { "read(n: integer, opts?: {timeout?: number}) -> string|nil data, " .. FAIL, "1..n bytes (n <= 16 MiB), \"\" at end of stream" },
      { "write(data: string, opts?: {timeout?: number}) -> true|nil ok, " .. FAIL, "all of data" },
      { "unread(data: string)", "hands bytes back: the next read returns them first" },
      { "kind() -> string", '"fd", "serial", "rtt", "ssh-channel", "adb-shell", ...' },
      { "stderr() -> string", "what the other end said on the side: a remote command's stderr (its first 4 KiB); \"\" for streams without one" },
      { "close()", "idempotent (also __close, __gc)" },
      { "expect(pattern: string, opts?: {timeout?: number, plain?: boolean, max?: integer}) -> string|nil match, string? before_or_err, odp.ECode? code", "reads until a Lua pattern (or plain text) matches (lua/odp/core/stream.lua)", lua = true },
      { "lines(opts?: {timeout?: number, count?: integer, max_line?: integer}) -> fun(): string|nil", "an iterator over lines (lua/odp/core/stream.lua); a line longer than max_line (64 KiB) comes in pieces", lua = true },
    }, class = true },

    { "odp.ssh", "SSH sessions (libssh2, loaded on first use); host keys always verified", {
      { "connect(opts: {host: string, port?: integer, user?: string, identity?: string, keys?: string[], passphrase?: string, known_hosts?: string, known_hosts_also?: string[], host_key_alias?: string, accept_new?: boolean, agent?: boolean|string, timeout?: number, proxy_command?: string, via?: odp.ssh.Session, alive_interval?: integer, alive_count_max?: integer}) -> odp.ssh.Session|nil session, " .. FAIL,
        "one TCP connection (or a ProxyCommand, or a direct-tcpip channel of via), host key checked against known_hosts, then public-key auth" },
      { "mux(control_path: string, opts?: {timeout?: number}) -> odp.ssh.Mux|nil mux, integer|string pid_or_err, odp.ECode? code", "the ControlMaster at control_path (a socket this user owns, a master answering): it and its pid; ENODEV with why otherwise" },
      { "mux_clear_stale(control_path: string) -> boolean", "removes control_path when it is a socket of this user's that nobody listens on (a killed master's), as ssh does before it becomes the master" },
      { "libssh2_version() -> string", "the linked libssh2's version" },
      { "rsa_sha2() -> boolean", "the linked libssh2 signs RSA keys with rsa-sha2-256/512 (>= 1.11)" },
      { "backend_version() -> string", "one line for `odp version -v`" },
    } },
    { "odp.ssh.Session", "an open SSH session", {
      { "exec(command: string[]|string, opts?: odp.ExecOpts) -> odp.ExecResult|nil result, " .. FAIL, "argv (quoted for the remote shell) or a command line; a timeout or Ctrl-C kills the remote process group" },
      { "put(local_path: string, remote_path: string, opts?: {mode?: integer, on_progress?: " .. PROGRESS .. ", timeout?: number}) -> true|nil ok, " .. FAIL, "SFTP upload to a temporary name, renamed when complete" },
      { "get(remote_path: string, local_path: string, opts?: {on_progress?: " .. PROGRESS .. ", timeout?: number}) -> true|nil ok, " .. FAIL, "SFTP download, renamed into place when complete" },
      { "uri() -> string", "ssh://user@host:port" },
      { "fingerprint() -> string", "the host key's SHA256 fingerprint" },
      { "lost() -> string|nil", "nil while the connection is up; once a call saw it drop (socket closed, keepalives unanswered) the cause, and \"closed\" after close(): a session never comes back, its owner reconnects" },
      { "traffic() -> {round_trips: integer, bytes_up: integer, bytes_down: integer, connect_ms: number}", "what the connection carried so far: round_trips the turnarounds odp waited on (bytes in after bytes out: a request and its answer, the handshake's steps), the bytes on the wire both ways, connect_ms how long connecting took (the record's transport, docs/helper-protocol.md)" },
      { "open_channel(command: string, opts?: {timeout?: number}) -> odp.Stream|nil stream, " .. FAIL, "a long-lived exec channel as a stream: its stdout read, its stdin written, its stderr in stream:stderr(); closing it sends EOF (the resident helper's channel, docs/helper-protocol.md)" },
      { "close()", "idempotent (also __close, __gc)" },
    }, class = true },
    { "odp.ssh.Mux", "a running OpenSSH ControlMaster (its control socket, OpenSSH's mux protocol 4): sessions on its connection, no handshake of odp's own", {
      { "open_channel(command: string, opts?: {timeout?: number}) -> odp.Stream|nil stream, " .. FAIL, "a session running command through the master as a stream: its stdout read, its stdin written, its stderr in stream:stderr(); closing it ends its stdin (the master passes on what was written first)" },
      { "alive(opts?: {timeout?: number}) -> integer|nil pid, " .. FAIL, "the master's pid while it runs (a local exchange, nothing on the link); ENODEV once it is gone" },
      { "traffic() -> {round_trips: integer, bytes_up: integer, bytes_down: integer, connect_ms: number}", "what its sessions carried, counted at their sockets: a session's open one round trip, its exec's answer another, then every read that brings bytes after odp wrote some; bytes are payload (the master adds SSH's framing on the wire); connect_ms the local exchange with the master" },
      { "path() -> string", "the control socket's path" },
      { "close()", "idempotent (also __close, __gc); open streams keep what they need" },
    }, class = true },

    { "odp.adb", "Android devices over adb: through Google's adb server when one runs, else directly (USB, TCP)", {
      { "devices() -> {serial: string, state: string, transport?: string, model?: string, usb_path?: string, hint?: string}[]|nil list, " .. FAIL, "what the server (or USB) sees, with a hint for unauthorized ones" },
      { "server(opts?: {server?: string, timeout?: number}) -> {address: string, version: integer, devices: {serial: string, state: string, model?: string, product?: string, device?: string, usb?: string, transport_id?: integer}[]}|nil server, " .. FAIL, "the adb server's answer; ENODEV when none runs" },
      { "server_address(opts?: {server?: string}) -> string|nil address, " .. FAIL, "\"tcp:HOST:PORT\": the adb server connect would use (opts.server, else the environment as Google's adb reads it); no I/O" },
      { 'connect(opts?: {serial?: string, transport?: "auto"|"server"|"usb"|string, server?: string, timeout?: number, auth_timeout?: number, on_auth_prompt?: fun()}) -> odp.adb.Device|nil device, ' .. FAIL, "one device; transport \"tcp:HOST:PORT\" connects directly" },
    } },
    { "odp.adb.Device", "a connected Android device", {
      { "shell(command: string[]|string, opts?: odp.ExecOpts) -> odp.ExecResult|nil result, " .. FAIL, "shell,v2 where the device has it (separate stderr, real status)" },
      { "push(local_path: string, remote_path: string, opts?: {mode?: integer, on_progress?: " .. PROGRESS .. ", timeout?: number}) -> true|nil ok, " .. FAIL, "sync SEND" },
      { "pull(remote_path: string, local_path: string, opts?: {on_progress?: " .. PROGRESS .. ", timeout?: number}) -> true|nil ok, " .. FAIL, "sync RECV, renamed into place when complete" },
      { 'stat(path: string, opts?: {timeout?: number}) -> {type: "file"|"directory"|"link"|"other", mode: integer, size: integer, mtime: integer}|nil st, ' .. FAIL, "sync STAT" },
      { 'info() -> {serial: string, transport: "server"|"usb"|string, state: string, model: string, product: string, device: string, features: table<string, boolean>, version?: integer, maxdata?: integer, server?: string, server_version?: integer}', "what the device said of itself" },
      { "broken() -> boolean", "a direct connection dropped (always false through the adb server)" },
      { "traffic() -> {round_trips: integer, bytes_up: integer, bytes_down: integer}|nil", "what a direct connection carried so far (adb messages, header and payload): round_trips the turnarounds odp waited on (a message in after messages out: a request and its answer, each WRTE's OKAY), the bytes both ways; nil through the adb server (the record's transport, docs/helper-protocol.md)" },
      { "open_channel(command: string, opts?: {timeout?: number}) -> odp.Stream|nil stream, " .. FAIL, "a long-lived shell,v2 command as a stream (EPROTO without shell_v2); closing it closes stdin, then the service (the resident helper's channel)" },
      { "close()", "idempotent (also __close, __gc)" },
    }, class = true },

    { "odp.usb", "USB devices (libusb, loaded on first use)", {
      { "list(vid?: integer) -> " .. USB_LIST, "one enumeration of the bus" },
    } },

    { "odp.probe", "debug probes: J-Link (its DLL, in a helper process per J-Link; env: extra environment for that process only), GDB remote protocol, QEMU shared RAM + QMP", {
      { 'open(opts: {backend: "jlink"|"gdb"|"qemu", device?: string, speed_khz?: integer, serial?: string, ip?: string, lib?: string, env?: table<string, string>, address?: string, shm?: string, base?: integer, qmp?: string, timeout?: number}) -> odp.probe.Probe|nil probe, ' .. FAIL, "one memory-access interface over the three" },
      { "jlink_lib(lib?: string) -> string|nil path, " .. FAIL, "where the J-Link DLL would be loaded from (lib: a path or name to try first, as probe.open's lib)" },
      { "usb_list(vid?: integer) -> " .. USB_LIST, "J-Links (or vid's devices) on USB" },
    } },
    { "odp.probe.Probe", "an open probe", {
      { "read(addr: integer, n: integer, opts?: {timeout?: number}) -> string|nil bytes, " .. FAIL, "target memory (timeout 10 s)" },
      { "write(addr: integer, data: string, opts?: {timeout?: number}) -> true|nil ok, " .. FAIL, "target memory (timeout 10 s)" },
      { "halt() -> true|nil ok, " .. FAIL, "stops the core" },
      { "go() -> true|nil ok, " .. FAIL, "runs the core" },
      { "reset() -> true|nil ok, " .. FAIL, "SWD reset, then run (RTT blocks attached through odp.rtt are invalidated first)" },
      { "kind() -> string", '"jlink", "gdb" or "qemu"' },
      { "close()", "idempotent (also __close, __gc)" },
    }, class = true },

    { "odp.rtt", "SEGGER RTT over a probe; channels as odp.Stream", {
      { "attach(probe: odp.probe.Probe, where: " .. WHERE .. ", opts?: {timeout?: number}) -> odp.rtt.Rtt|nil rtt, " .. FAIL, "finds and checks the control block" },
      { "clear_ids(probe: odp.probe.Probe, where: " .. WHERE .. ", opts?: {timeout?: number}) -> integer|nil cleared, " .. FAIL, "zeroes every \"SEGGER RTT\" ID in where before a reset (halt the core first)" },
      { "telnet(opts: {address?: string, channel?: integer, timeout?: number}) -> odp.Stream|nil stream, " .. FAIL, "J-Link's RTT telnet server as a stream" },
    } },
    { "odp.rtt.Rtt", "an attached RTT control block", {
      { 'channels() -> {up: odp.rtt.Channel[], down: odp.rtt.Channel[], address: integer}', "the block's channels, and the block's address" },
      { "channel(i: integer) -> odp.Stream", "up channel i to read, down channel i to write" },
      { "lines(i: integer, opts?: {timeout?: number, count?: integer, max_line?: integer}) -> fun(): string|nil iter, string? err, odp.ECode? code", "an iterator over channel i's lines (odp.Stream's lines)" },
      { "stats() -> {bytes_up: integer, bytes_down: integer, full_seen: integer, lost_on_reset: integer, refinds: integer, address: integer}", "traffic so far; full_seen counts reads that found the up buffer full, lost_on_reset the unread up bytes a reset discarded, refinds how often the block was found again" },
      { "close()", "idempotent (also __close, __gc)" },
    }, class = true },

    { "odp.xmodem", "XMODEM (CRC, checksum, 1K) over any odp.Stream", {
      { 'send(stream: odp.Stream, path: string, opts?: {mode?: "1k"|"128", timeout?: number, start_timeout?: number, retries?: integer, on_progress?: ' .. XMODEM_PROGRESS .. "}) -> " .. XMODEM_RESULT, "sends a file; an error in on_progress cancels the transfer and is re-raised" },
      { 'receive(stream: odp.Stream, path: string, opts?: {check?: "crc"|"checksum", timeout?: number, start_timeout?: number, retries?: integer, max_bytes?: integer, on_progress?: ' .. XMODEM_PROGRESS .. "}) -> " .. XMODEM_RESULT, "receives into path (complete or not written)" },
    } },

    { "odp.serial", "serial ports (libserialport, loaded on first use; termios for ptys)", {
      { "list() -> {port: string, description?: string, transport?: string, vid?: integer, pid?: integer, manufacturer?: string, product?: string, serial?: string, access: boolean}[]|nil ports, " .. FAIL, "the machine's serial ports" },
      { 'open(opts: {port: string, baud?: integer, timeout?: number}) -> odp.Stream|nil stream, "libserialport"|"termios"|"rfc2217"|nil how, string? err, odp.ECode? code', "8N1, raw; port \"rfc2217://HOST:PORT\" is a port served over RFC 2217" },
    } },

    { "odp.sqlite", "the history's embedded store (libsqlite3, loaded on first use); lua/odp/results/history.lua", {
      { "open(path: string, opts?: {timeout?: number, readonly?: boolean}) -> odp.sqlite.Db|nil db, " .. FAIL, "opens or creates; a lock held by another writer is waited for through the one waiting point up to timeout (30 s), then EBUSY" },
    } },
    { "odp.sqlite.Db", "an open SQLite database", {
      { "exec(sql: string) -> true|nil ok, " .. FAIL, "one or more statements without parameters" },
      { "query(sql: string, params?: any[]) -> odp.QueryResult|nil result, " .. FAIL, "one statement; $N is params[N] wherever it stands (as in PostgreSQL), nil entries are NULL (give params.n)" },
      { "close()", "idempotent (also __close, __gc)" },
    }, class = true },

    { "odp.pg", "a team's history in PostgreSQL (libpq, loaded on first use), waiting through the one waiting point", {
      { "connect(conninfo: string, opts?: {timeout?: number}) -> odp.pg.Conn|nil conn, " .. FAIL, "postgresql://... or \"host=... dbname=...\"; the server's notices are dropped" },
    } },
    { "odp.pg.Conn", "a PostgreSQL connection (non-blocking underneath)", {
      { "exec(sql: string) -> true|nil ok, " .. FAIL, "statements without parameters" },
      { "query(sql: string, params?: any[], opts?: {timeout?: number}) -> odp.QueryResult|nil result, " .. FAIL, "integers and floats come back as numbers, booleans as booleans, the rest as text; a lost connection is EIO" },
      { "close()", "idempotent (also __close, __gc)" },
    }, class = true },

    { "odp.elf", "ELF headers: machine, interpreter, the glibc versions a program needs", {
      { "read(path: string) -> {class: integer, machine: string, machine_id: integer, endian: string, type: string, osabi: integer, interpreter?: string, static: boolean, glibc_versions: string[], glibc_required?: string}|nil info, " .. FAIL, "bounds-checked; a truncated or hostile file is EPROTO" },
      { "version_cmp(a: string, b: string) -> integer", '-1, 0 or 1 for dotted versions ("2.9" < "2.34")' },
      { "symbols(path: string) -> odp.ElfSymbols|nil symbols, " .. FAIL, "function symbols by address (.symtab, else .dynsym), loadable segments, build-id, .eh_frame_hdr's function starts" },
    } },
    { "odp.ElfSymbols", "an ELF file's function symbols (elf.symbols)", {
      { "table() -> string", '"symtab", "dynsym" or "none" (stripped of both)' },
      { "count() -> integer", "function symbols read" },
      { "build_id() -> string|nil", "the GNU build-id in hex" },
      { "lookup(file_offset: integer) -> string|nil name, integer distance", "the function holding a mapping's file offset, and the offset's distance from its start" },
      { "function_start(file_offset: integer) -> integer|nil", "the file offset where the function holding it starts, from .eh_frame_hdr (no symbols needed)" },
      { "close()", "idempotent (also __close, __gc)" },
    }, class = true },

    { "odp.sample", "the sample stream of odp-rusage --sample: read, joined with ETDump intervals, folded (docs/cpu-profile.md)", {
      { "read(bytes: string) -> odp.SampleStream|nil stream, " .. FAIL, "bounded and fuzzed; a stream cut short is read as far as it is whole (info().complete false)" },
    } },
    { "odp.SampleStream", "a read sample stream", {
      { "info() -> table", "{event, freq_hz, clockid, ncpus, user_only, paranoid, pid, ring_bytes, start_time, end_time, complete, samples, kernel_samples, preempted_samples, switches, switch_records, lost, lost_records, records, unknown_records}" },
      { "lines() -> {time: integer, text: string}[]", "the runner's stderr lines (first 32 bytes) with the CLOCK_MONOTONIC time each was read" },
      { "counters() -> {time: integer, kind: string, index: integer, value: integer}[]", "CPU frequency (freq_khz) and temperature (temp_mc) readings" },
      { "mmaps() -> table[]", "{time, pid, start, len, pgoff, exec, file, build_id?} of each mapping the kernel reported" },
      { "comms() -> table[]", "{time, pid, tid, name, exec}" },
      { "tasks() -> table[]", "{time, pid, ppid, tid, kind = fork|exit}" },
      { "times() -> integer[]", "every sample's time (CLOCK_MONOTONIC ns)" },
      { "columns() -> {time: integer[], tid: integer[], leaf: integer[]}", "every sample's time, thread and leaf frame (-1 kernel, -2 preempted)" },
      { "mapping(addr: integer, pid?: integer, time?: integer) -> integer|nil", "index into mmaps() of the executable mapping holding addr" },
      { "join(opts: {ops: {start: integer[], stop: integer[], id: integer[]}, execs: {start: integer[], stop: integer[]}, offset?: integer}) -> table", "each sample in the innermost op interval holding it: {total, in_execute, attributed, between, outside, per_op = {[id] = n}, stacks = {{owner, count, frames}}}; in C" },
      { "close()", "idempotent (also __close, __gc)" },
    }, class = true },

    { "odp.etdumpcore", "the C half of odp.parse.etdump", {
      { "decode(bytes: string) -> {version: integer, size_prefixed: boolean, run_data: table[]}|nil doc, " .. FAIL, "the whole ETDump as plain tables" },
      { "open(bytes: string) -> odp.etdump.Dump|nil dump, " .. FAIL, "a lazily walked ETDump: what the op table needs without a table per event" },
      { "duration(start: integer, stop: integer) -> integer|nil ticks", "stop - start, across one 32-bit wrap" },
    } },
    { "odp.etdump.Dump", "an ETDump opened by etdumpcore.open", {
      { "header() -> {version: integer, size_prefixed: boolean, run_data: {name: string, bundled_input_index: integer, allocators: table, nevents: integer}[]}", "without events" },
      { "events(i: integer) -> table[]", "run i's events as decode gives them" },
      { "columns(i: integer) -> table", "run i's profile and debug events as parallel arrays (the op table's input)" },
      { "blocks(sorted?: boolean) -> table[]", "per block name: its runs and events, merged as ExecuTorch's Inspector does" },
      { "close()", "idempotent (also __close, __gc)" },
    }, class = true },

    { "odp.ptecore", "the C half of odp.parse.pte", {
      { "decode(bytes: string) -> {identifier: string, version: integer, bytes: integer, extended_header?: table, segments: table[], methods: table[]}|nil pte, " .. FAIL, "the program's header, methods and delegates" },
      { "vela_scratch_size(bytes: string) -> integer|nil n, " .. FAIL, "the scratch size a Vela command stream asks for" },
    } },

    { "odp.numcmp", "tensors as raw bytes: element-by-element agreement and deterministic inputs (src/numcmp; docs/outputs.md)", {
      { "compare(ref: string, got: string, dtype: string, opts?: {logits?: boolean}) -> {n: integer, equal: integer, finite: integer, nonfinite: integer, nan_ref: integer, nan_got: integer, inf_ref: integer, inf_got: integer, max_abs_err: number, max_abs_at?: integer, mean_abs_err: number, rmse: number, cosine: number, snr_db: number, histogram: integer[], logits?: {k: integer, top1_ref?: integer, top1_got?: integer, topk_overlap: integer, topk_ref: integer[], topk_got: integer[]}}|nil r, " .. FAIL, "ref and got read as dtype (float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64, bool); an unknown dtype raises; lengths that differ or are not whole elements are EPROTO" },
      { "compare_files(ref_path: string, got_path: string, dtype: string, opts?: {logits?: boolean}) -> table|nil r, " .. FAIL, "compare on two files, mapped rather than read (outputs of hundreds of MB); not regular files or sizes that differ are EPROTO" },
      { "generate(bytes: integer, dtype: string, seed: integer, index: integer) -> string", "input index's deterministic values for seed (SplitMix64, uniform in [-1, 1) for floats)" },
      { "element_bytes(dtype: string) -> integer|nil n, " .. FAIL, "ENOTFOUND for a dtype odp cannot compare" },
    }, fields = { "BINS: integer the histogram's bins" } },

    { "odp.scan", "the C scanner under odp.parse.executorch: `Iteration i of N: f ms` lines without a Lua string each", {
      { "iteration_list(...: string|nil) -> number[]", "an empty table with room for every \"Iteration \" in the texts" },
      { "find_iteration(text: string, pos: integer) -> integer", "the first iteration line at or after pos (#text + 1: none)" },
      { "iterations(text: string, pos: integer, times: number[], max?: integer) -> integer next_pos, integer count, integer bare, integer|number n", "appends the times of the run of iteration lines at pos (at most max); bare of them had no log prefix; n is the last one's N" },
    } },

    { "odp.helper", "the resident helper's frames (the codec the board's odp-rusage --serve shares) and the in-process device-state snapshot (docs/helper-protocol.md)", {
      { "encode(type: string, fields: (string|number)[]) -> string", "one frame; a type is one character; over 1 MiB raises" },
      { "decoder() -> odp.helper.Decoder", "a decoder of one byte stream's frames" },
      { "state(root: string, cpu_files: string, props: string) -> string", "the @v/@f/@c snapshot odp.target.device_state.parse reads, read here in-process (src/helper/state.c)" },
    }, fields = { "PROTO: integer the protocol version", "FRAME_MAX: integer payload bytes of one frame",
      "STDOUT_TIMES_MAX: integer stdout chunks of a run whose arrival times are kept (the helper's client and the host target)" } },
    { "odp.helper.Decoder", "frames out of a byte stream, every length checked", {
      { "feed(bytes: string) -> odp.helper.Decoder", "takes more of the stream" },
      { "next() -> string|nil type, string[]|string|nil fields, odp.ECode? code", "a whole frame's type and fields; nil alone when more bytes are needed; nil, \"EPROTO: ...\", \"EPROTO\" once malformed (for good)" },
      { "pending() -> integer", "bytes held that are not yet a whole frame" },
    }, class = true },

    { "odp.readline", "line editing and history for the REPL (libedit, loaded on first use)", {
      { 'readline(prompt: string) -> string|false|nil line, "interrupted"? why', "a line; nil at end of input; false, \"interrupted\" on Ctrl-C" },
      { "add_history(line: string)", "adds a history entry" },
      { "read_history(path: string)", "loads a history file (a missing one is no error)" },
      { "write_history(path: string) -> boolean", "saves the history" },
      { "set_completer(f: fun(text: string, line: string): string[])", "Tab asks f for candidates" },
      { "input_waiting() -> boolean", "terminal input is ready to be read at once (the rest of a paste); false when the input is not a terminal" },
      { "discard_typeahead() -> string typed, boolean eof", "reads and drops what was typed on the terminal since the last line (whole lines, then a half-typed one); eof: a Ctrl-D began a line among them. The REPL calls it after each statement. A no-op (\"\", false) when the input is not a terminal" },
    } },
  },
}
