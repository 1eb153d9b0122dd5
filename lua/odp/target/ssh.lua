--- The ssh target: a Linux board reached over SSH (Raspberry Pi 5, AWS Graviton4, any aarch64/x86_64 Linux).
-- Same interface as the host target (docs/SCRIPTING.md, "Targets"). One odp.ssh session per run, reused for
-- every step; files are hash-skipped (sha256sum on the board); rusage comes from the odp-rusage helper, pushed
-- once per board into <remote_dir>/.odp/ (hash-skipped too), else from GNU `time -v` when the board has it.
local ssh = require("odp.ssh")
local sys = require("odp.sys")
local errors = require("odp.errors")

local M = { kind = "ssh" }

--- Options every SSH script has (cli option entries); the flow adds them to its own.
M.options = {
  { "host", "The board: [user@]host", nil, "string", required = true, metavar = "[USER@]HOST" },
  { "port", "SSH port", 22, "posint" },
  { "identity", "Private key (ed25519 or ecdsa; an encrypted key's passphrase comes from ODP_SSH_PASSPHRASE)",
    nil, "file", metavar = "FILE" },
  { "known-hosts", "known_hosts file to verify the board's host key against (default ~/.ssh/known_hosts)", nil,
    "string", metavar = "FILE" },
  { "accept-new-host-key", "Add the board's host key to known_hosts if it is not there (a changed key is " ..
    "always refused)", false, "bool" },
  { "remote-dir", "Working directory on the board", "/tmp/odp", "string", metavar = "DIR" },
}

local CONNECT_TIMEOUT = 30
local SMALL_TIMEOUT = 60 -- probes (uname, sha256sum, df): bounded even when the caller gives none

local Target = {}
Target.__index = Target

--- Quotes one word for a POSIX shell.
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.quote = q

local function split_host(host)
  local user, h = host:match("^([^@]+)@(.+)$")
  return user, h or host
end

-- Open sessions by uri: a script's validate (preflight) and run share one session.
local open_targets = {}

--- Opens a session. opts: host ("[user@]host"), user, port, identity, known_hosts, accept_new_host_key,
-- remote_dir, connect_timeout. Returns the target, or nil, err, code (EHOSTKEY, EAUTH, ENODEV, ETIMEDOUT...).
function M.new(opts)
  local user, host = split_host(assert(opts.host, "ssh target: host is required"))
  user = user or opts.user
  local port = opts.port or 22
  local key = ("%s@%s:%d"):format(user or "", host, port)
  local cached = open_targets[key]
  if cached and cached.session then return cached end
  local conn = { host = host, port = port, user = user, identity = opts.identity, known_hosts = opts.known_hosts,
    accept_new = opts.accept_new_host_key or false, timeout = opts.connect_timeout or CONNECT_TIMEOUT }
  local session, err, code = ssh.connect(conn)
  if not session then return nil, err, code end
  local t = setmetatable({ kind = "ssh", uri = "ssh://" .. session:uri(), remote_dir = opts.remote_dir or "/tmp/odp",
    session = session, key = key, cache = {} }, Target)
  open_targets[key] = t
  return t
end

--- A small command whose output is needed (probes). Returns stdout or nil, err, code.
function Target:run(cmd, timeout)
  local r, err, code = self.session:exec(cmd, { timeout = timeout or SMALL_TIMEOUT })
  if not r then return nil, err, code end
  if not r.ok then
    local why = (r.stderr:match("[^\n]+") or (r.timed_out and "timed out") or ("status " .. r.status))
    return nil, ("EIO: `%s` on %s: %s"):format(cmd, self.uri, why), "EIO"
  end
  return r.stdout
end

function Target:arch()
  if not self.cache.arch then
    local out = self:run("uname -m")
    self.cache.arch = out and out:match("^%s*(%S+)")
  end
  return self.cache.arch
end

--- glibc version of the board ("2.36"), nil when it has none (musl, Android) or it cannot be told.
function Target:libc_version()
  if self.cache.libc == nil then
    local out = self:run("getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1 | head -n 1; true") or ""
    self.cache.libc = out:match("glibc%s+([%d%.]+)") or out:match("GLIBC[^\n]-([%d]+%.[%d]+)%s*\n?$")
      or out:match("GNU libc[^\n]-([%d]+%.[%d]+)") or false
  end
  return self.cache.libc or nil
end

--- Free bytes in the file system holding path (or its nearest existing parent).
function Target:free_bytes(path)
  local out = self:run(("p=%s; while [ ! -e \"$p\" ]; do p=$(dirname \"$p\"); done; df -Pk \"$p\""):format(q(path)))
  local kb = out and out:match("\n%S+%s+%d+%s+%d+%s+(%d+)")
  return kb and tonumber(kb) * 1024
end

function Target:mkdir(path)
  local out, err, code = self:run("mkdir -p " .. q(path))
  if not out then return nil, err, code end
  return true
end

--- sha256 of a remote file (hex), nil when it does not exist.
function Target:sha256(path)
  local out = self:run(("[ -f %s ] && sha256sum %s || true"):format(q(path), q(path)))
  return out and out:match("^(%x+)%s") or nil
end

--- Uploads unless the board already has the same bytes (sha256). -> {bytes=, skipped=} | nil, err, code
function Target:push(src, dst, opts)
  opts = opts or {}
  local st, err, code = sys.stat(src)
  if not st then return nil, err, code end
  local here = sys.sha256_file(src)
  if here and here == self:sha256(dst) then
    if opts.mode then self:run(("chmod %o %s"):format(opts.mode, q(dst))) end
    if opts.on_progress then opts.on_progress(st.size, st.size) end
    return { bytes = st.size, skipped = true }
  end
  local n, perr, pcode = self.session:put(src, dst, { mode = opts.mode, on_progress = opts.on_progress,
    timeout = opts.timeout })
  if not n then return nil, perr, pcode end
  return { bytes = n, skipped = false }
end

--- Downloads to a temporary file next to dst, renamed when complete. -> true | nil, err, code
function Target:pull(src, dst, opts)
  opts = opts or {}
  local n, err, code = self.session:get(src, dst, { on_progress = opts.on_progress, timeout = opts.timeout })
  if not n then return nil, err, code end
  return true
end

-- Where the odp-rusage helper for an architecture lives on this machine (build tree or install).
local function local_helper(arch)
  local root = require("odp.host").root
  local dirs = { root .. "/build", root .. "/helpers" }
  if os.getenv("ODP_BUILD_DIR") then table.insert(dirs, 1, os.getenv("ODP_BUILD_DIR")) end
  for _, dir in ipairs(dirs) do
    local p = dir .. "/odp-rusage-" .. arch
    if sys.stat(p) then return p end
  end
end
M.local_helper = local_helper

--- How this board measures rusage: "odp-rusage" (helper pushed), "gnutime" (/usr/bin/time -v) or false.
function Target:rusage_method()
  if self.cache.rusage ~= nil then return self.cache.rusage, self.cache.helper end
  local arch = self:arch()
  local helper = arch and local_helper(arch)
  if helper then
    local dir = self.remote_dir .. "/.odp"
    local remote = dir .. "/odp-rusage"
    local ok = self:mkdir(dir) and self:push(helper, remote, { mode = tonumber("755", 8) })
    if ok then
      self.cache.rusage, self.cache.helper = "odp-rusage", remote
      return "odp-rusage", remote
    end
  end
  local out = self:run("[ -x /usr/bin/time ] && /usr/bin/time -v true 2>&1 | grep -c 'Maximum resident' || true")
  self.cache.rusage = (out and tonumber(out:match("%d+") or "0") > 0) and "gnutime" or false
  return self.cache.rusage
end

--- Runs argv on the board: the odp.proc.run result table. rusage is filled through odp-rusage (or GNU time);
-- its report line is taken out of stderr (on_stderr callbacks see it go by). opts: timeout, cwd, env, stdin,
-- on_stdout, on_stderr, capture_limit, rusage (false: run bare). A timeout kills the remote process group.
function Target:exec(argv, opts)
  opts = opts or {}
  local parts = {}
  if opts.cwd then parts[#parts + 1] = "cd " .. q(opts.cwd) .. " &&" end
  parts[#parts + 1] = "exec"
  if opts.env then
    local names = {}
    for k in pairs(opts.env) do names[#names + 1] = k end
    table.sort(names)
    parts[#parts + 1] = "env"
    for _, k in ipairs(names) do
      local v = opts.env[k]
      if v == false then parts[#parts + 1] = "-u " .. q(k) else parts[#parts + 1] = q(k .. "=" .. tostring(v)) end
    end
  end
  local method, helper = false, nil
  if opts.rusage ~= false then method, helper = self:rusage_method() end
  if method == "odp-rusage" then
    parts[#parts + 1] = q(helper) .. " --"
  elseif method == "gnutime" then
    parts[#parts + 1] = "/usr/bin/time -v"
  end
  for _, a in ipairs(argv) do parts[#parts + 1] = q(a) end
  local r, err, code = self.session:exec(table.concat(parts, " "), { timeout = opts.timeout, stdin = opts.stdin,
    on_stdout = opts.on_stdout, on_stderr = opts.on_stderr, capture_limit = opts.capture_limit })
  if not r then return nil, err, code end
  if method == "odp-rusage" then
    local rec, rest = require("odp.target.rusage").parse(r.stderr)
    if rec then
      r.stderr, r.rusage = rest, rec.rusage
      r.wall_s = rec.wall_s
      r.status = rec.status
      if rec.signal > 0 then r.signal = rec.signal end
      r.ok = rec.status == 0 and rec.signal == 0 and not r.timed_out and not r.canceled
    end
  elseif method == "gnutime" then
    local t = require("odp.parse.gnutime").parse(r.stderr)
    if t then
      r.rusage = { maxrss_kb = t.max_rss_kb, utime_s = t.user_s, stime_s = t.system_s, minflt = t.minor_faults,
        majflt = t.major_faults, nvcsw = t.voluntary_switches, nivcsw = t.involuntary_switches }
      -- the report is the tail of stderr, from its "Command being timed" line (or "Command terminated by")
      local cut
      for _, p in ipairs { "Command exited with non%-zero status", "Command terminated by signal",
        "Command being timed:" } do
        local at = r.stderr:find("\n?[ \t]*" .. p)
        if at and (not cut or at < cut) then cut = at end
      end
      if cut then r.stderr = r.stderr:sub(1, cut - 1) .. (cut > 1 and "\n" or "") end
    end
  end
  return r
end

function Target:close()
  if self.session then
    self.session:close()
    self.session = nil
  end
  if open_targets[self.key] == self then open_targets[self.key] = nil end
end

--- Raises a structured failure when a target cannot be opened (for scripts).
function M.open(opts)
  local t, err, code = M.new(opts)
  if not t then errors.fail(code or "ENODEV", err, 3) end
  return t
end

return M
