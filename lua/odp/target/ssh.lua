--- The ssh target: a Linux board reached over SSH (Raspberry Pi 5, AWS Graviton4, any aarch64/x86_64 Linux).
-- Same interface as the host target (docs/SCRIPTING.md, "Targets"). One odp.ssh session per run, reused for
-- every step; files are hash-skipped (sha256sum on the board); rusage comes from the odp-rusage helper, pushed
-- once per board into <remote_dir>/.odp/ (hash-skipped too), else from GNU `time -v` when the board has it.
local ssh = require("odp.ssh")
local errors = require("odp.core.errors")
local core_ui = require("odp.core.ui")
local lock = require("odp.core.lock")
local outage = require("odp.target.outage")
local shell = require("odp.target.shell")
local ssh_config = require("odp.target.ssh_config")
local ssh_master = require("odp.target.ssh_master")
local sys = require("odp.sys")

local M = { kind = "ssh" }

--- Options every SSH script has (cli option entries); the flow adds them to its own. Where an option is not
-- given, the board's ssh_config (docs/devices.md) decides, as for `ssh HOST`.
M.options = {
  { "host", "The board: [user@]host, or a Host alias of ~/.ssh/config", nil, "string", required = true,
    metavar = "[USER@]HOST" },
  { "port", "SSH port (default: ssh_config's Port, else 22)", nil, "posint" },
  { "identity", "Private key (an encrypted key's passphrase comes from ODP_SSH_PASSPHRASE or a prompt); " ..
    "default: ssh_config's IdentityFile", nil, "file", metavar = "FILE" },
  { "known-hosts", "known_hosts file to verify the board's host key against (default: ssh_config's " ..
    "UserKnownHostsFile, else ~/.ssh/known_hosts)", nil, "string", metavar = "FILE" },
  { "accept-new-host-key", "Add the board's host key to known_hosts if it is not there (a changed key is " ..
    "always refused); ssh_config's StrictHostKeyChecking accept-new does the same", false, "bool" },
  { "ssh-config", "ssh_config file to resolve --host with, or none (default ~/.ssh/config)", nil, "string",
    metavar = "FILE|none" },
  { "remote-dir", "Working directory on the board", "/tmp/odp", "string", metavar = "DIR" },
  shell.RECONNECT_OPTION,
}

local CONNECT_TIMEOUT = 30
-- Keepalives when ssh_config asks for none (OpenSSH sends none by default): odp waits on a board for minutes,
-- and a board that rebooted mid-run answers only the next packet (with a reset). Without one a run would
-- wait out its whole timeout (seen on the arm64 twin: tests/lua/arm64_twin_test.lua).
local ALIVE_INTERVAL = 10
local SMALL_TIMEOUT = 60 -- probes (uname, sha256sum, df): bounded even when the caller gives none

local Target = {}
Target.__index = Target
Target.arch, Target.mkdir, Target.sha256 = shell.arch, shell.mkdir, shell.sha256 -- on Target:run
Target.workdir, Target.stage, Target.fetch = shell.workdir, shell.stage, shell.fetch -- files go to remote_dir
Target.remove = shell.remove

local q = shell.quote
M.quote = q

local function split_host(host)
  local user, h = host:match("^([^@]+)@(.+)$")
  return user, h or host
end

-- Open sessions by uri: a script's validate (preflight) and run share one session.
local open_targets = {}

-- What -v shows: the settings a connection uses, one line.
local function describe(st)
  local parts = { ("%s@%s:%d"):format(st.user, st.hostname, st.port) }
  local function add(k, v) if v ~= nil and v ~= "" then parts[#parts + 1] = k .. "=" .. tostring(v) end end
  add("IdentityFile", table.concat(st.identity_files, ","))
  add("IdentitiesOnly", st.identities_only and "yes" or nil)
  add("IdentityAgent", st.identity_agent)
  add("ProxyJump", st.proxy_jump)
  add("ProxyCommand", st.proxy_command)
  add("UserKnownHostsFile", st.known_hosts_files[1])
  add("StrictHostKeyChecking", st.strict_host_key_checking)
  add("HostKeyAlias", st.host_key_alias)
  add("ConnectTimeout", st.connect_timeout)
  if st.server_alive_interval > 0 then
    add("ServerAlive", ("%ds*%d"):format(st.server_alive_interval, st.server_alive_count_max))
  end
  return table.concat(parts, " ")
end

local function refuse_blind(st)
  if st.strict_host_key_checking == "no" then
    return nil, ("EUSAGE: ssh_config sets StrictHostKeyChecking no for %s (%s): odp verifies every host key and " ..
      "will not connect blind; use accept-new (or --accept-new-host-key) to add a new board's key once")
      :format(st.alias, table.concat(st.files, ", ")), "EUSAGE"
  end
  return st
end

--- Resolves opts.host through ssh_config (opts.ssh_config: a file, "none", default ~/.ssh/config) with the
-- command line's user/port/identity/known_hosts on top (opts.device: a device file, its `user`). -> settings (odp.target.ssh_config.resolve) | nil, err, code
function M.resolve(opts)
  local user, alias = split_host(assert(opts.host, "ssh target: host is required"))
  -- a device file's user (devices/graviton4.lua: ubuntu) stands for the user@ --host lacks
  user = user or opts.user or (opts.device and opts.device.user)
  local st, err, code = ssh_config.resolve(alias, { file = opts.ssh_config, user = user,
    port = opts.port, identity = opts.identity, known_hosts = opts.known_hosts,
    connect_timeout = opts.connect_timeout })
  if not st then return nil, err, code end
  return refuse_blind(st)
end

-- Whether a private key file is passphrase-protected: PEM "ENCRYPTED" headers, or an OpenSSH-format key whose
-- cipher is not "none".
function M.key_encrypted(path)
  local f = io.open(path, "rb")
  if not f then return false end
  local text = f:read(65536) or ""
  f:close()
  if text:find("ENCRYPTED", 1, true) then return true end
  local b64 = text:match("%-%-%-%-%-BEGIN OPENSSH PRIVATE KEY%-%-%-%-%-(.-)%-%-%-%-%-END")
  local raw = b64 and sys.base64_decode((b64:gsub("%s", "")))
  if not raw or raw:sub(1, 15) ~= "openssh-key-v1\0" or #raw < 19 then return false end
  local n = string.unpack(">I4", raw, 16)
  return raw:sub(20, 19 + n) ~= "none"
end

-- An encrypted key without ODP_SSH_PASSPHRASE: on a terminal, ask for the passphrase without echo through the
-- ui (it stays in memory: never in argv, the environment of children or a log).
local function ask_passphrase(conn, asker)
  if os.getenv("ODP_SSH_PASSPHRASE") or not sys.isatty("stdin") then return end
  for _, k in ipairs(conn.identity and { conn.identity } or conn.keys or {}) do
    if M.key_encrypted(k) then
      conn.passphrase = (asker or core_ui.new()):ask_secret(("Enter passphrase for key %s (%s@%s): "):format(k,
        conn.user, conn.host))
      return
    end
  end
end

-- The ssh.connect options for settings st; timeout: seconds for this connection (default ConnectTimeout, 30).
local function connect_options(st, opts, timeout)
  -- new host keys go to the first UserKnownHostsFile; the others and the global files are read too
  local also = table.move(st.known_hosts_files, 2, #st.known_hosts_files, 1, {})
  table.move(st.global_known_hosts_files, 1, #st.global_known_hosts_files, #also + 1, also)
  local conn = { host = st.hostname, port = st.port, user = st.user, known_hosts = st.known_hosts_files[1],
    known_hosts_also = also,
    host_key_alias = st.host_key_alias, timeout = timeout or st.connect_timeout or CONNECT_TIMEOUT,
    accept_new = opts.accept_new_host_key or st.strict_host_key_checking == "accept-new",
    alive_interval = st.server_alive_interval > 0 and st.server_alive_interval or ALIVE_INTERVAL,
    alive_count_max = st.server_alive_count_max,
    proxy_command = st.proxy_command_line }
  if opts.identity then
    conn.identity = st.identity_files[1]
  elseif #st.identity_files > 0 then
    conn.keys = st.identity_files
  end
  if st.identities_only or st.identity_agent == "none" then
    conn.agent = false
  elseif st.identity_agent and st.identity_agent ~= "SSH_AUTH_SOCK" then
    conn.agent = st.identity_agent
  end
  ask_passphrase(conn, opts.ui)
  return conn
end

local MAX_HOPS = 8

-- Connects st, first through its ProxyJump hops as OpenSSH does: the first hop with its own config (its
-- ProxyJump too), each later one through the hop before it, each carried in a direct-tcpip channel of the
-- previous session. path: the aliases being connected (a loop is refused); timeout: seconds for each
-- connection (default ConnectTimeout). Returns the session.
local function connect_chain(st, opts, path, timeout)
  local via
  if st.proxy_jump then
    for i, hop in ipairs(ssh_config.jump_hops(st.proxy_jump)) do
      local name = hop.host:lower()
      for _, p in ipairs(path) do
        if p == name then
          return nil, ("ENODEV: ProxyJump loop: %s -> %s (%s)"):format(table.concat(path, " -> "), hop.host,
            #st.files > 0 and table.concat(st.files, ", ") or "no config"), "ENODEV"
        end
      end
      if #path >= MAX_HOPS then
        return nil, ("ENODEV: ProxyJump chain longer than %d hops: %s -> %s"):format(MAX_HOPS,
          table.concat(path, " -> "), hop.host), "ENODEV"
      end
      local hst, err, code = ssh_config.resolve(hop.host, { file = opts.ssh_config, user = hop.user,
        port = hop.port, known_hosts = opts.known_hosts })
      if hst then hst, err, code = refuse_blind(hst) end
      if not hst then return nil, err, code end
      local session
      if via then
        local conn = connect_options(hst, { accept_new_host_key = opts.accept_new_host_key }, timeout)
        conn.via, conn.proxy_command = via, nil
        session, err, code = ssh.connect(conn)
      else
        local hop_path = table.move(path, 1, #path, 1, {})
        hop_path[#hop_path + 1] = name
        session, err, code = connect_chain(hst, { ssh_config = opts.ssh_config, known_hosts = opts.known_hosts,
          accept_new_host_key = opts.accept_new_host_key }, hop_path, timeout)
      end
      if not session then
        if via then via:close() end
        return nil, err, code
      end
      via = session
    end
  end
  local conn = connect_options(st, opts, timeout)
  if via then conn.via, conn.proxy_command = via, nil end
  local session, err, code = ssh.connect(conn)
  if not session and via then via:close() end
  return session, err, code
end

-- Connects st: through its ControlMaster where ssh_config has one, else odp's own connection.
local function connect(st, opts, timeout, ui)
  local function direct() return connect_chain(st, opts, { st.alias:lower() }, timeout) end
  local ms, why, note = ssh_master.session(st, opts, { timeout = timeout or st.connect_timeout or CONNECT_TIMEOUT,
    alive_interval = ALIVE_INTERVAL, connect_direct = direct })
  if ms then
    if ui then
      ui:debug("ssh %s: through the ControlMaster at %s (pid %d%s)", st.alias, ms.mux:path(), ms.pid,
        ms.started and ", started by odp" or "")
    end
    return ms
  end
  if note and ui then ui:debug("ssh %s: %s", st.alias, note) end
  local session, err, code = direct()
  -- why the master is not used, where odp's own connection works (else its error says all)
  if session and why and ui then ui:warn("ssh %s: %s: odp connects itself", st.alias, why) end
  return session, err, code
end

--- Opens a session. opts: host ("[user@]host" or an ssh_config alias), user, port, identity, known_hosts,
-- accept_new_host_key, ssh_config, remote_dir, connect_timeout, ui (warnings; -v shows the settings).
-- Returns the target, or nil, err, code (EHOSTKEY, EAUTH, ENODEV, ETIMEDOUT, EUSAGE for a bad ssh_config...).
function M.new(opts)
  local st, err, code = M.resolve(opts)
  if not st then return nil, err, code end
  local ui = opts.ui
  if ui then
    for _, w in ipairs(st.warnings) do ui:warn("%s", w) end
    ui:debug("ssh %s: %s (config: %s)", st.alias, describe(st), #st.files > 0 and table.concat(st.files, ", ")
      or "none")
  end
  -- the route is part of the key: the same board through another jump is another connection
  local key = ("%s@%s:%d %s"):format(st.user, st.hostname, st.port, st.proxy_jump or st.proxy_command_line or "")
  local cached = open_targets[key]
  if cached and cached.session then return cached end
  local session, cerr, ccode = connect(st, opts, nil, ui)
  if not session then
    if ccode == "ENOTFOUND" and st.hostname == st.alias:lower() then
      cerr = cerr .. ("; %s is no Host alias in %s"):format(st.alias,
        #st.files > 0 and table.concat(st.files, ", ") or "any ssh_config (none was read)")
    end
    return nil, cerr, ccode
  end
  local t = setmetatable({ kind = "ssh", uri = "ssh://" .. session:uri(), remote_dir = opts.remote_dir or "/tmp/odp",
    session = session, key = key, settings = st, opts = opts, ui = ui, cache = {} }, Target)
  open_targets[key] = t
  return t
end

local TRAFFIC = { "round_trips", "bytes_up", "bytes_down", "connect_ms" }

--- What this board session's connections carried so far (odp.ssh session:traffic(): round trips waited on,
-- bytes both ways, the time spent connecting), summed over reconnects; connects: how many connections.
function Target:traffic()
  local before = self.traffic_before or {}
  local live = self.session and self.session ~= self.traffic_kept and self.session:traffic() or {}
  local sum = { connects = self.connects or 1 }
  for _, k in ipairs(TRAFFIC) do sum[k] = (before[k] or 0) + (live[k] or 0) end
  return sum
end

-- Keeps what the session carried before it goes (Target:traffic sums the board session's connections).
local function keep_traffic(self)
  if self.session and self.session ~= self.traffic_kept then
    self.traffic_before, self.traffic_kept = self:traffic(), self.session
  end
end

-- The target given up on: every request fails at once with this cause, and the next M.new connects afresh.
local function give_up(self, msg, code)
  self.gone, self.gone_code = msg, code -- ECONNLOST, or ECANCELED: Ctrl-C while waiting for the board
  keep_traffic(self)
  if self.session then pcall(self.session.close, self.session) end
  self.session = nil
  if open_targets[self.key] == self then open_targets[self.key] = nil end
  return nil, msg, code
end

-- What odp.target.outage asks of the transport: the connection is the odp.ssh session. One that dropped is left
-- to the garbage collector, not closed: another task may still hold it, and asking a closed session raises.
function Target:connection() return self.session end
function Target:lost_why(session) return session:lost() end
function Target:ask_lost(session)
  if ssh_master.is_session(session) then return session:lost() end -- the master answers locally
  session:exec("true", { timeout = 10 })
end
function Target:let_go() keep_traffic(self) end
Target.give_up = give_up

function Target:connect_again(timeout)
  local session, err, code = connect(self.settings, self.opts,
    math.max(1, math.min(timeout, self.settings.connect_timeout or CONNECT_TIMEOUT)), self.ui)
  if session then self.session, self.connects = session, (self.connects or 1) + 1 end
  return session, err, code
end

--- Runs fn() (a request on the board: what names it) with the connection's health in mind
-- (odp.target.outage.request). -> fn's results | nil, err, code
Target.request = outage.request

-- Two tasks may have runs in flight at once (odp.run.sweep's pipelined points: odp.target.helper queues the
-- second in the helper): a drop is reconnected once for both (odp.target.outage).
Target.pipelines = true

-- sshd passes on what odp wrote before its channel closed, then closes the helper's stdin, and does not kill a
-- command without a terminal: the helper does the last request odp left it (odp.target.shell.close_run_dir).
Target.helper_reads_to_eof = true

--- A channel running cmd, its stdin and stdout a byte stream (an odp.Stream): the resident helper's.
function Target:open_channel(cmd)
  return self:request("opening a channel", true, function()
    return self.session:open_channel(cmd, { timeout = SMALL_TIMEOUT })
  end)
end

--- A small command whose output is needed (probes): through the resident helper (no new session), else its
-- own exec channel. Returns stdout or nil, err, code.
Target.run = shell.run

--- A small command in its own exec channel (the path without the helper). -> stdout | nil, err, code
function Target:exec_command(cmd, timeout)
  local r, err, code = self.session:exec(cmd, { timeout = timeout or SMALL_TIMEOUT })
  if not r then return nil, err, code end
  if r.canceled then return nil, "ECANCELED: interrupted", "ECANCELED" end
  if not r.ok then
    local why = (r.stderr:match("[^\n]+") or (r.timed_out and "timed out") or ("status " .. r.status))
    return nil, ("EIO: `%s` on %s: %s"):format(cmd, self.uri, why), "EIO"
  end
  return r.stdout
end

Target.libc_version = shell.libc_version

--- Free bytes in the file system holding path (or its nearest existing parent): through the helper when it
-- already runs, else `df` (the preflight asks before anything, the helper too, is uploaded).
-- -> bytes | nil, err, code
function Target:free_bytes(path)
  local h = self.cache.helper_client
  if h and not h.dead then return h:free(path) end
  return shell.df_free(self, path)
end

--- Uploads unless the board already has the same bytes (sha256): through the resident helper, else over SFTP
-- (where the helper cannot run). opts: mode, on_progress, timeout, fresh, sha256 (odp.target.shell.push_skip),
-- link (through the helper: a path made a hard link of dst in the upload's flight; the result says linked).
-- -> {bytes=, skipped=, linked=} | nil, err, code
function Target:push(src, dst, opts)
  opts = opts or {}
  -- Boards of one host in one process (--boards) may stage the same file (the helper) at once: one upload per
  -- remote path at a time, so the second finds the first's bytes and skips.
  return lock.named("ssh push " .. self.uri .. dst, 1):with(function()
    local skipped, st, err, code = shell.push_skip(self, src, dst, opts)
    if skipped then return skipped end
    if not st then return nil, err, code end
    local r, herr, hcode = shell.helper_push(self, src, dst, opts, st)
    if r ~= false then return r, herr, hcode end
    local n, perr, pcode = self.session:put(src, dst, { mode = opts.mode, on_progress = opts.on_progress,
      timeout = opts.timeout })
    if not n and pcode == "EIO" and not self.session:lost() then
      perr, pcode = shell.space_cause(self, dst:match("^(.*)/[^/]*$") or ".", st.size, "uploading " ..
        src:match("[^/]*$"), perr, pcode)
    end
    if not n then return nil, perr, pcode end
    return { bytes = n, skipped = false }
  end)
end

--- Downloads to a temporary file next to dst, renamed when complete. -> true | nil, err, code
function Target:pull(src, dst, opts)
  opts = opts or {}
  local n, err, code = self.session:get(src, dst, { on_progress = opts.on_progress, timeout = opts.timeout })
  if not n and not self.session:lost() then err, code = shell.pull_space_cause(self, src, dst, err, code) end
  if not n then return nil, err, code end
  return true
end

M.local_helper = shell.local_helper
Target.space, Target.close_run_dir = shell.space, shell.close_run_dir
Target.finish_run, Target.wait_board = shell.finish_run, shell.wait_board -- a shared board (docs/devices.md)

--- How this board measures rusage: "odp-rusage" (helper pushed), "time" (/usr/bin/time -v) or false;
-- and the prefix that measures a command (odp.target.shell.rusage_method).
function Target:rusage_method()
  return shell.rusage_method(self)
end

--- Runs argv on the board: the odp.proc.run result table. rusage is filled through odp-rusage (or GNU time);
-- its report is taken out of stderr (on_stderr callbacks see it go by). opts: timeout, cwd, env, stdin,
-- on_stdout, on_stderr, capture_limit, rusage (false: run bare), state and finish (through the helper only:
-- odp.target.shell.helper_exec). A timeout kills the remote process group.
function Target:exec(argv, opts)
  opts = opts or {}
  local method, prefix = false, nil
  if opts.rusage ~= false then method, prefix = self:rusage_method() end
  if (method == "odp-rusage" or opts.rusage == false) and not opts.stdin then
    local h, herr, hcode = shell.helper(self)
    if herr then return nil, herr, hcode end
    if h then return shell.helper_exec(self, h, argv, opts) end
  end
  if opts.helper_args or opts.counters then
    local err, code
    prefix, err, code = shell.with_helper_args(method, prefix, opts.helper_args, opts.counters)
    if not prefix and err then return nil, err, code end
  end
  local cmd = shell.command(argv, { cwd = opts.cwd, env = opts.env, prefix = prefix, exec = true })
  local r, err, code = self.session:exec(cmd, { timeout = opts.timeout, stdin = opts.stdin,
    on_stdout = opts.on_stdout, on_stderr = opts.on_stderr, capture_limit = opts.capture_limit })
  if not r then return nil, err, code end
  return shell.apply_rusage(r, method)
end

--- The device-state snapshot's text through the helper (odp.target.device_state), nil without one.
Target.state_text = shell.state_text
Target.state_in_exec = shell.state_in_exec

-- Every request on the board goes through odp.target.outage.request.
outage.wrap(Target)

function Target:close()
  -- the session's close ends the helper's channel too, without waiting for the board's answer (odp_ssh_close):
  -- the helper ends as its stdin closes
  self.cache.helper_client = nil
  if self.session then
    self.session:close()
    self.session = nil
  end
  if open_targets[self.key] == self then open_targets[self.key] = nil end
end

--- Raises a structured failure when a target cannot be opened (for scripts).
function M.open(opts)
  local t, err, code = M.new(opts)
  errors.check(t, err, code or "ENODEV")
  return t
end

return M
