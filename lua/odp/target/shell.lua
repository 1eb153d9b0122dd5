--- What the targets reached through a remote POSIX shell share (ssh.lua, adb.lua; a new board reached
-- the same way uses it too, docs/SCRIPTING.md "Writing a target for another shell-reachable board"):
-- quoting and the command line of an exec, and rusage: the static odp-rusage helper for the board's
-- `uname -m` pushed into <remote_dir>/.odp/ (hash-skipped), else a `time -v` the board has, and the
-- merging of either report into the exec result.
local errors = require("odp.core.errors")
local ui = require("odp.core.ui")
local sys = require("odp.sys")
local function gnutime() return require("odp.parse.gnutime") end -- lazy: start-up (boards without odp-rusage)
local memparse = require("odp.parse.memory")
local function sched() return require("odp.core.sched") end -- lazy: start-up (a pipelined sweep's tasks: boards with a resident helper)
local function helper_mod() return require("odp.target.helper") end -- lazy: start-up (boards with a resident helper)
local host = require("odp.host")
local rusage = require("odp.target.rusage")

local M = {}

--- Quotes one word for a POSIX shell: as it is when it holds only characters no shell treats specially (so
-- printed commands read like typed ones), else in single quotes (a quote inside becomes '\''). odp's one
-- shell quoting: targets, the Ethos-U flow's printed commands.
---@param s any
---@return string
function M.quote(s)
  s = tostring(s)
  if s:match("^[%w%./_:=,+@%-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end
local q = M.quote

--- A command {argv, cwd?, env?} as one line a user can paste into a shell: "cd DIR && K=V argv..." (quoted).
function M.command_line(c)
  local parts = {}
  if c.cwd then parts[#parts + 1] = "cd " .. q(c.cwd) .. " &&" end
  if c.env then
    local ks = {}
    for k in pairs(c.env) do ks[#ks + 1] = k end
    table.sort(ks)
    for _, k in ipairs(ks) do parts[#parts + 1] = k .. "=" .. q(c.env[k]) end
  end
  for _, a in ipairs(c.argv) do parts[#parts + 1] = q(a) end
  return table.concat(parts, " ")
end

--- What this module asks of a target: `run(cmd)` -> stdout | nil, err, code (a non-zero status is a
--- failure), the interface's arch, mkdir, sha256, push (the first three can be this module's), and a
--- `cache` table it keeps answers in (cache.arch; cache.rusage, cache.helper, cache.rusage_cmd).
---@class odp.target.shell.Target
---@field remote_dir string
---@field cache table
---@field run fun(self, cmd: string, timeout: number?): string?, string?, string?
---@field arch fun(self): string?
---@field mkdir fun(self, path: string): true?, string?, string?
---@field sha256 fun(self, path: string): string?
---@field push fun(self, src: string, dst: string, opts: table?): table?, string?, string?

---@class odp.target.shell.CommandOpts
---@field cwd string?                      `cd DIR &&` first
---@field env table<string, string|number|false>?  `env K=V ...`; false unsets K (`env -u K`)
---@field prefix string?                   shell text put before argv (a rusage wrapper), not quoted
---@field exec boolean?                    `exec` the command (the shell does not stay in between)

--- The shell command line that runs argv: `[cd DIR &&] [exec] [env [-u K] 'K=V'...] [prefix] 'arg'...`.
-- env names are sorted, so the line is the same on every run.
---@param argv string[]
---@param opts odp.target.shell.CommandOpts?
---@return string
function M.command(argv, opts)
  opts = opts or {}
  local parts = {}
  if opts.cwd then parts[#parts + 1] = "cd " .. q(opts.cwd) .. " &&" end
  if opts.exec then parts[#parts + 1] = "exec" end
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
  if opts.prefix then parts[#parts + 1] = opts.prefix end
  for _, a in ipairs(argv) do parts[#parts + 1] = q(a) end
  return table.concat(parts, " ")
end

-- Target methods written on `target:run(cmd)` alone (see odp.target.shell.Target), for a target module
-- to take as its own: `Target.arch = shell.arch`.

--- `uname -m` of the board, asked once ("aarch64", "x86_64", ...); nil, err, code when it cannot be asked
--- (the cause: a failed query is never an answer).
---@param target odp.target.shell.Target
---@return string?, string?, string?
function M.arch(target)
  if not target.cache.arch then M.helper(target) end -- the resident helper's hello names it
  if not target.cache.arch then
    local out, err, code = target:run("uname -m")
    if not out then return nil, err, code end
    target.cache.arch = out:match("^%s*(%S+)")
    if not target.cache.arch then
      return nil, ("EPROTO: `uname -m` on %s printed nothing"):format(target.uri), "EPROTO"
    end
  end
  return target.cache.arch
end

--- glibc version of the board ("2.36"), nil when it has none (musl, Android's bionic), nil, err, code when it
--- could not be asked (a failed query is no answer: it is not cached). Asked, never assumed from the transport:
--- an adb device can be a Linux with glibc (an emulator, a glibc chroot), and a runner built against glibc
--- starts only where there is one. A method: Target.libc_version = shell.libc_version.
---@param target odp.target.shell.Target
---@return string?, string?, string?
local LIBC_QUERY = "getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>&1 | head -n 1; true"

-- The glibc version in what LIBC_QUERY printed, or false.
local function libc_from(out)
  return out:match("glibc%s+([%d%.]+)") or out:match("GLIBC[^\n]-([%d]+%.[%d]+)%s*\n?$")
    or out:match("GNU libc[^\n]-([%d]+%.[%d]+)") or false
end

function M.libc_version(target)
  if target.cache.libc == nil then
    local out, err, code = target:run(LIBC_QUERY)
    if not out then return nil, err, code end
    target.cache.libc = libc_from(out)
  end
  return target.cache.libc or nil
end

--- How long a transport waits for a board whose connection dropped (--reconnect-timeout's default, seconds).
M.RECONNECT_TIMEOUT = 60

-- What a lost connection waits for: the first retry after BACKOFF_FIRST s, each next one twice as late, at
-- most BACKOFF_MAX s apart, until --reconnect-timeout has passed since the drop.
local BACKOFF_FIRST, BACKOFF_MAX = 0.25, 4

-- What worked last on the board (target.last_ok, target.last_ok_at), for the line that says it dropped.
local function last_ok(target)
  if not target.last_ok then return "nothing since connecting" end
  return ("%s, %.1f s before"):format(target.last_ok, sys.now() - target.last_ok_at)
end

--- Waits for a board whose connection dropped (why: the cause) to come back: connect_once(seconds) (-> truthy
--- | nil, err, code) is tried with backoff until target.opts.reconnect_timeout (default M.RECONNECT_TIMEOUT;
--- 0: not at all) has passed. A key or host key refused, a bad config and Ctrl-C end the wait at once (the
--- host key is checked as on the first connection). One line on target.ui when it dropped, one when it is
--- back. The waits are sys.sleep: the one waiting point, so other boards' tasks run meanwhile.
--- -> true | nil, "ECONNLOST: BOARD dropped (cause); last worked: ...; ...", "ECONNLOST" (or ECANCELED)
function M.reconnect(target, why, connect_once)
  local limit = (target.opts or {}).reconnect_timeout or M.RECONNECT_TIMEOUT
  local dropped = ("%s dropped (%s); last worked: %s"):format(target.uri, errors.text(why),
    last_ok(target))
  if limit <= 0 then
    return nil, ("ECONNLOST: %s (--reconnect-timeout 0: not waited for)"):format(dropped), "ECONNLOST"
  end
  if target.ui then target.ui:warn("%s: waiting up to %g s for it to come back", dropped, limit) end
  local start, delay = sys.now(), BACKOFF_FIRST
  while true do
    local ok, err, code = connect_once(math.max(1, limit - (sys.now() - start)))
    if ok then
      if target.ui then target.ui:info("%s is back after %.1f s", target.uri, sys.now() - start) end
      return true
    end
    if code == "EHOSTKEY" or code == "EAUTH" or code == "ECANCELED" or code == "EUSAGE" then
      return nil, ("%s: %s, and it answered again, but %s"):format(code == "ECANCELED" and "ECANCELED" or
        "ECONNLOST", dropped, errors.text(err)), code == "ECANCELED" and code or "ECONNLOST"
    end
    local left = limit - (sys.now() - start)
    if left <= 0 then
      return nil, ("ECONNLOST: %s, and it was not back after %g s (--reconnect-timeout): %s"):format(dropped, limit,
        errors.text(err)), "ECONNLOST"
    end
    local slept, serr, scode = sys.sleep(math.min(delay, left))
    if not slept then return nil, serr, scode end
    delay = math.min(delay * 2, BACKOFF_MAX)
  end
end

--- What a request on the board is called in the lines that say it dropped: "running PROGRAM" for exec, the
--- method and its first argument (a path, a command) for the others.
function M.request_name(method, first)
  if method == "exec" then return "running " .. tostring(type(first) == "table" and first[1] or first) end
  return type(first) == "string" and ("%s %s"):format(method, first) or method
end

--- The failure of a request (what) the connection dropped under (why) that is not run again once the board is
--- back: a program may have started, and a half-run is not re-run silently.
function M.not_run_again(target, what, why)
  return ("ECONNLOST: %s dropped during %s (%s); it is back, and %s is not run again: it may have started")
    :format(target.uri, what, errors.text(why), what)
end

--- The --reconnect-timeout option entry every remote transport has.
M.RECONNECT_OPTION = { "reconnect-timeout", "Seconds to wait for a board whose connection dropped to come back " ..
  "(retried with backoff, on every outage; 0: fail at once)", M.RECONNECT_TIMEOUT, "number", metavar = "S" }

--- Who this odp is, for the files it keeps on a board: `HOST.BOOT.PIDNS.PID` (this machine's host name, the
--- first 8 hex digits of its boot id, the inode of odp's PID namespace, odp's pid). A pid means something only
--- on one machine, one boot and one PID namespace (a container has its own): all four are needed to tell a
--- dead odp from one living elsewhere.
---@return string
function M.owner()
  if not M._owner then
    local boot = (sys.read_file("/proc/sys/kernel/random/boot_id") or ""):gsub("%-", ""):sub(1, 8)
    local ns = (sys.stat("/proc/self/ns/pid") or {}).ino or 0
    local host = (sys.hostname() or "host"):gsub("[^%w%-_]", "_")
    M._owner = ("%s.%s.%d.%d"):format(host, boot ~= "" and boot or "0", ns, sys.getpid())
  end
  return M._owner
end

--- This odp's own directory on the board, where everything it writes there for its runs lives (uploads in
--- progress, the links to the staged files the runner reads, what the runner writes):
--- <remote_dir>/.odp/runs/<M.owner()>. It is also the board's lease: who is running here (docs/devices.md).
function M.run_dir(target) return ("%s/.odp/runs/%s"):format(target.remote_dir, M.owner()) end

--- Where a staged file's bytes are kept on the board for every odp: <remote_dir>/.odp/blobs/<sha256>.
function M.blob_path(target, sha) return ("%s/.odp/blobs/%s"):format(target.remote_dir, sha) end

-- How long an odp's directory on the board counts as alive when nothing says otherwise (another machine's odp,
-- whose pid cannot be asked): it was last changed (a runner wrote or odp removed a file there) this long ago.
M.LEASE_S = 24 * 3600
-- A staged file's bytes no run links any more are removed once nobody read them for this long.
M.BLOB_UNUSED_S = 7 * 24 * 3600

--- Removes files on the board (rm -f: one command, through the resident helper when it runs). A method:
--- Target.remove = shell.remove. -> true | nil, err, code
---@param paths string[]
function M.remove(target, paths)
  local words = {}
  for i, p in ipairs(paths) do words[i] = q(p) end
  local ok, err, code = target:run("rm -f -- " .. table.concat(words, " "))
  if not ok then return nil, err, code end
  return true
end

-- The shell text printing `df` of path's file system (path or its nearest existing parent).
local function df_text(path)
  return ("p=%s; while [ ! -e \"$p\" ]; do p=$(dirname \"$p\"); done; df -Pk \"$p\" 2>/dev/null || df -k \"$p\"")
    :format(q(path))
end

local function df_parse(target, out)
  local kb = out:match("\n%S+%s+%d+%s+%d+%s+(%d+)")
  if not kb then
    return nil, ("EPROTO: `df` on %s printed no free space: %s"):format(target.uri, (out:gsub("%s+", " "))), "EPROTO"
  end
  return tonumber(kb) * 1024
end

--- Free bytes in the file system holding path (or its nearest existing parent), asked with `df` in its own
--- exec (no helper). -> bytes | nil, err, code
function M.df_free(target, path)
  local out, err, code = target:exec_command(df_text(path))
  if not out then return nil, err, code end
  return df_parse(target, out)
end

--- The cause of a failed write of need bytes into dir on the board (an upload, a file the runner wrote): when
--- dir's file system has less than that free, "ENOSPC: no space left on URI:DIR (...)", else err, code as
--- they were (SFTP and adb name a full disk only "failure"). doing: what was written, for the message.
function M.space_cause(target, dir, need, doing, err, code)
  local free = target:free_bytes(dir)
  if free and free < need then
    return ("ENOSPC: no space left on %s:%s (%s: %d bytes free, %d needed)"):format(target.uri, dir, doing, free,
      need), "ENOSPC"
  end
  return err, code
end

--- The cause of a failed pull of the board's src into dst on this machine: when dst's file system here has less
--- free than src's size, "ENOSPC: no space left on local://HOST:DIR (pulling NAME from URI: ...)", else err,
--- code as they were (the transports name a full disk here only by the system's words, as EIO).
function M.pull_space_cause(target, src, dst, err, code)
  if code ~= "EIO" then return err, code end
  local dir = dst:match("^(.*)/[^/]*$") or "."
  local free = sys.free_bytes(dir)
  local out = free and target:run("wc -c < " .. q(src))
  local size = out and math.tointeger(tonumber(out:match("%d+")))
  if size and free < size then
    return ("ENOSPC: no space left on local://%s:%s (pulling %s from %s: %d bytes free, %d needed)")
      :format(sys.hostname(), dir, src:match("[^/]*$"), target.uri, free, size), "ENOSPC"
  end
  return err, code
end

-- The shell text listing the leases under .odp/runs of remote_dir: "now SECONDS", then per odp directory
-- "lease MTIME NAME host=H user=U pid=P since=S" (and " waiting" while it waits for the board, --exclusive).
local function leases_text(remote_dir)
  return ("echo \"now $(date +%%s)\"; for d in %s/.odp/runs/*/; do [ -f \"$d/lease\" ] && echo \"lease " ..
    "$(stat -c %%Y \"$d\") $(basename \"$d\") $(head -c 256 \"$d/lease\" | head -n 1)$([ -f \"$d/waiting\" ] && " ..
    "echo ' waiting')\"; done | head -n 256"):format(q(remote_dir))
end

-- The shell text making this odp's directory on the board and the blobs' (M.run_dir, M.blob_path), writing its
-- lease there and printing it. since: the board's clock, the one every odp there compares (two machines' clocks
-- may disagree).
local function lease_text(target)
  local dir = M.run_dir(target)
  local function word(v) return (tostring(v or "?"):gsub("[^%w%.%-_@]", "_")) end
  return ("mkdir -p %s %s && printf 'host=%s user=%s pid=%d since=%%s\\n' \"$(date +%%s)\" >%s/lease && cat %s/lease")
    :format(q(dir), q(target.remote_dir .. "/.odp/blobs"), word(sys.hostname()), word(os.getenv("USER") or
    os.getenv("LOGNAME") or ("uid" .. ((sys.read_file("/proc/self/status") or ""):match("\nUid:%s*(%d+)") or "?"))),
    sys.getpid(), q(dir), q(dir))
end

-- This odp's directory made, as the lease it printed says (lease_text's output): kept for the target session.
-- -> the directory | nil (no lease printed)
local function made_workdir(target, out)
  local since = tonumber(out:match("since=(%d+)"))
  if not since then return nil end
  target.cache.since, target.cache.workdir, target.cache.run_dir = since, M.run_dir(target), true
  return target.cache.workdir
end

-- The two requests that stage a file through the helper (M.stage): its link in this odp's directory made to its
-- blob, and the link's hash checked (and its mode set).
local function check_requests(blob, link, mode)
  return { "L", { blob, link } }, { "X", { link, mode and ("%o"):format(mode) } }
end

-- What the session's first flight sends ahead of the lease's command (M.workdir, M.space) for files ({path, mode?,
-- sha256} each: what it is about to stage): this odp's directory made, then each file's check_requests. Their
-- answers are kept in target.cache.checks for M.stage, which then asks nothing more of a file the board has.
-- -> M.run's ahead
local function stage_ahead(target, files)
  local dir = M.run_dir(target)
  local reqs, links = { { "M", { dir } } }, {}
  for _, f in ipairs(files) do
    if f.sha256 then
      local c = { blob = M.blob_path(target, f.sha256), link = dir .. "/" .. f.path:match("([^/]+)$"), mode = f.mode }
      reqs[#reqs + 1], reqs[#reqs + 2] = check_requests(c.blob, c.link, c.mode)
      links[#links + 1] = c
    end
  end
  target.cache.run_dir = true -- made from here on, whatever comes: M.close_run_dir removes it
  return { requests = reqs, keep = function(got)
    if got[1][2] then return end -- no directory: the links are not there either (M.stage makes them)
    target.cache.checks = target.cache.checks or {}
    for i, c in ipairs(links) do
      c.got = { got[2 * i], got[2 * i + 1] }
      target.cache.checks[c.link] = c
    end
  end }
end

-- The shell text surveying dir for M.space: the board's clock, the odp directories under .odp/runs (their
-- mtime, their files), the staged blobs (links, atime, size), parts of the helper's own upload in .odp/, the
-- mount table and the real path of dir (or its nearest existing parent), the candidates for another dir, then
-- after a line `df` the free space. Every list is bounded: it is device output.
local function survey_text(dir)
  return ("echo \"now $(date +%%s)\"; if cd %s 2>/dev/null; then for d in .odp/runs/*/; do [ -d \"$d\" ] || " ..
    "continue; echo \"run $(stat -c %%Y \"$d\") ${d%%/}\"; for f in \"$d\"*; do [ -f \"$f\" ] && echo \"file " ..
    "$(stat -c '%%h %%s' \"$f\") $f\"; done; done | head -n 4096; %s; for b in .odp/blobs/*; do " ..
    "[ -f \"$b\" ] && echo \"blob $(stat -c '%%h %%X %%s' \"$b\") $b\"; done | head -n 4096; " ..
    "for f in .odp/*.odp-part-*; do [ -f \"$f\" ] && echo \"part $(stat -c '%%Y %%s' \"$f\") $f\"; done | " ..
    "head -n 256; cd - >/dev/null; fi; " ..
    "p=%s; while [ ! -e \"$p\" ]; do p=$(dirname \"$p\"); done; echo \"real $(cd \"$p\" && pwd -P)\"; " ..
    "for c in \"$HOME\" /var/tmp /data/local/tmp; do [ -n \"$c\" ] && [ -d \"$c\" ] && echo \"cand $(cd \"$c\" && " ..
    "pwd -P)\"; done; head -c 65536 /proc/self/mounts | sed 's/^/mount /'; echo df; %s || true")
    :format(q(dir), leases_text("."), q(dir), df_text(dir))
end

-- The mount (its point and options) holding the real path p, from /proc/self/mounts lines ("mount DEV POINT
-- TYPE OPTS ..."): the longest point that is p or a parent of it, the later of two on one point.
local function mount_of(mounts, p)
  local best
  for _, m in ipairs(mounts) do
    local point = m.point
    if (p == point or point == "/" or p:sub(1, #point + 1) == point .. "/") and (not best or #point >= #best.point) then
      best = m
    end
  end
  return best
end

local function noexec(m) return m and (("," .. m.opts .. ","):find(",noexec,", 1, true)) ~= nil end

-- An odp directory on the board (M.owner's name) that is provably dead: this machine, boot and PID namespace
-- with no such pid; or, whoever it was, unchanged for M.LEASE_S (its lease expired). Another machine's odp
-- that still writes there is never dead.
local function dead_owner(name, age)
  if name == M.owner() then return false end
  local me = { M.owner():match("^(.*)%.(%x+)%.(%d+)%.(%d+)$") }
  local host, boot, ns, pid = name:match("^(.*)%.(%x+)%.(%d+)%.(%d+)$")
  if host and host == me[1] and boot == me[2] and ns == me[3] then return not sys.stat("/proc/" .. pid) end
  return age > M.LEASE_S
end

-- The other odps on the board from leases_text's output, those not provably dead (dead_owner), oldest first:
-- {name, host, user, pid, since (the board's seconds), waiting}.
local function others_of(out)
  local now, list = tonumber(out:match("now (%d+)")) or 0, {}
  for mtime, name, rest in out:gmatch("\nlease (%d+) (%S+) ([^\n]*)") do
    if name ~= M.owner() and not dead_owner(name, now - tonumber(mtime)) then
      list[#list + 1] = { name = name, host = rest:match("host=(%S+)"), user = rest:match("user=(%S+)"),
        pid = math.tointeger(tonumber(rest:match("pid=(%d+)"))), since = tonumber(rest:match("since=(%d+)")) or 0,
        waiting = rest:match(" waiting$") ~= nil }
    end
  end
  table.sort(list, function(a, b) if a.since ~= b.since then return a.since < b.since end return a.name < b.name end)
  return list
end

--- The board's remote dir surveyed before the runner and the model are uploaded, in one request, and cleaned of
--- what is provably dead (docs/devices.md "A shared board"): the directories of odps no longer running
--- (M.run_dir: this machine's, boot's and PID namespace's odp whose pid is gone, or anyone's unchanged for
--- M.LEASE_S), with their half-uploads and unfetched files; staged blobs no run links (link count 1) and nobody
--- read for M.BLOB_UNUSED_S; half-uploads of the helper in .odp/ older than M.LEASE_S. What is removed does not
--- count against the free space. The odps running there are kept in target.cache.others (M.others).
--- -> free bytes (false: the board's `df` gave no answer, e.g. busybox without a mount table: ask
--- target:free_bytes once the helper runs), the paths removed | nil, err, code: the board could not be asked,
--- or (ENODEV) dir is on a noexec mount, where no runner could start. files: what the session is about to stage
--- ({path, mode?, sha256} each): where the helper runs and dir is the remote dir, this odp's directory there is
--- made (M.workdir) and each file checked (M.stage) in the survey's own flight. A method: Target.space = shell.space.
function M.space(target, dir, files)
  -- through the helper, in one round trip, and so is the glibc version asked with it (libc_version's own query,
  -- after a line of its own): no exec of its own (a login shell). Where the helper is not running yet, this
  -- flight goes in the command that starts it (M.helper's first).
  local h = target.cache.helper_client
  local helped = (h and not h.dead) or (target.open_channel and not target.cache.helper_off)
  local run = helped and M.run or target.exec_command
  local cmd, ahead = survey_text(dir) .. "; echo ODP-LIBC; " .. LIBC_QUERY
  if helped and files and dir == target.remote_dir and not target.cache.workdir then
    -- the lease's own failure is not the survey's: M.workdir makes it again and says why
    cmd = cmd .. "; echo ODP-LEASE; { " .. lease_text(target) .. "; } 2>/dev/null || true"
    ahead = stage_ahead(target, files)
  end
  local out, err, code = run(target, cmd, nil, ahead)
  if not out then return nil, err, code end
  local libc_out, lease
  out, libc_out = out:match("^(.-)ODP%-LIBC\n(.*)$")
  if ahead and out then libc_out, lease = libc_out:match("^(.-)ODP%-LEASE\n(.*)$") end
  if not libc_out then
    return nil, ("EPROTO: the free-space query on %s printed no end"):format(target.uri), "EPROTO"
  end
  if lease then made_workdir(target, lease) end
  if target.cache.libc == nil then target.cache.libc = libc_from(libc_out) end
  local head, dfout = out:match("^(.-)\ndf\n(.*)$")
  head, dfout = head or out, dfout or ""
  local free = df_parse(target, "\n" .. dfout) or false
  local mounts, cands, real = {}, {}, nil
  for point, fs, opts in head:gmatch("\nmount %S+ (%S+) (%S+) (%S+)") do
    mounts[#mounts + 1] = { point = point:gsub("\\(%d%d%d)", function(o) return string.char(tonumber(o, 8)) end),
      fs = fs, opts = opts }
  end
  for c in head:gmatch("\ncand ([^\n]+)") do cands[#cands + 1] = c end
  real = head:match("\nreal ([^\n]+)")
  local m = real and mount_of(mounts, real)
  if noexec(m) then
    local other
    for _, c in ipairs(cands) do
      if not noexec(mount_of(mounts, c)) then other = c .. "/odp" break end
    end
    return nil, ("ENODEV: %s on %s is on a noexec mount: %s at %s (%s): no runner can start there; pick a " ..
      "--remote-dir that allows exec%s"):format(dir, target.uri, m.fs, m.point, m.opts,
      other and (", e.g. --remote-dir " .. other) or ""), "ENODEV"
  end
  local now = tonumber(head:match("^now (%d+)")) or 0
  local removed, words = {}, {}
  local dead = {}
  for mtime, rel in head:gmatch("\nrun (%d+) ([^\n]+)") do
    if dead_owner(rel:match("[^/]+$"), now - tonumber(mtime)) then
      dead[rel] = true
      words[#words + 1] = q(dir .. "/" .. rel)
    end
  end
  -- said and counted: what goes with a dead directory, not its lease nor its links to blobs that stay
  for links, bytes, rel in head:gmatch("\nfile (%d+) (%d+) ([^\n]+)") do
    if dead[rel:match("^(.*)/[^/]*$")] and links == "1" and not rel:match("/lease$") then
      removed[#removed + 1] = dir .. "/" .. rel
      if free then free = free + tonumber(bytes) end
    end
  end
  for links, atime, bytes, rel in head:gmatch("\nblob (%d+) (%d+) (%d+) ([^\n]+)") do
    if links == "1" and now - tonumber(atime) > M.BLOB_UNUSED_S then
      removed[#removed + 1], words[#words + 1] = dir .. "/" .. rel, q(dir .. "/" .. rel)
      if free then free = free + tonumber(bytes) end
    end
  end
  for mtime, bytes, rel in head:gmatch("\npart (%d+) (%d+) ([^\n]+)") do
    if now - tonumber(mtime) > M.LEASE_S then
      removed[#removed + 1], words[#words + 1] = dir .. "/" .. rel, q(dir .. "/" .. rel)
      if free then free = free + tonumber(bytes) end
    end
  end
  target.cache.others = others_of(head)
  if #words > 0 then
    local ok, rerr, rcode = run(target, "rm -rf -- " .. table.concat(words, " "))
    if not ok then return nil, rerr, rcode end
  end
  return free, removed
end

--- mkdir -p on the board. -> true | nil, err, code
---@param target odp.target.shell.Target
---@param path string
---@return true?, string?, string?
function M.mkdir(target, path)
  local h = M.helper(target)
  if h then return h:mkdir(path) end
  local out, err, code = target:run("mkdir -p " .. q(path))
  if not out then return nil, err, code end
  return true
end

--- sha256 of a file on the board (hex), nil when it does not exist (or is not a regular file); mode (an integer):
--- the file also gets it, in the same request.
---@param target odp.target.shell.Target
---@param path string
---@return string?
function M.sha256(target, path, mode)
  local h = M.helper(target)
  if h then return (h:sha256(path, mode)) end
  local chmod = mode and (" && chmod %o %s"):format(mode, q(path)) or ""
  local out = target:run(("[ -f %s ] && sha256sum %s%s || true"):format(q(path), q(path), chmod))
  return out and out:match("^(%x+)%s") or nil
end

--- Where a flow's files go on a remote board: this odp's own directory there (M.run_dir, created), holding its
--- lease: `host=H user=U pid=P since=UNIX-TIME` (who is running here), made once per target session (in the
--- preflight's flight where it ran: M.space). files: what the session is about to stage ({path, mode?, sha256}
--- each), checked in the same flight where the helper runs (M.stage). A method: Target.workdir = shell.workdir
--- (its second argument is the host target's: the run's directory on this machine).
function M.workdir(target, _, files)
  if target.cache.workdir then return target.cache.workdir end
  local out, err, code = target:run(lease_text(target), nil, files and stage_ahead(target, files))
  if not out then return nil, err, code end
  return made_workdir(target, out) or M.run_dir(target)
end

--- The other odps running on the board now (their leases: docs/devices.md "A shared board"), oldest first:
--- {name, host, user, pid, since, waiting} each. -> list | nil, err, code
function M.others(target)
  local out, err, code = target:run(leases_text(target.remote_dir))
  if not out then return nil, err, code end
  return others_of(out)
end

--- Removes a run's files on the board (rm -f) and, in the same command, lists the other odps running there
--- (M.others): who a run overlapped. Where the helper runs the run's own answer did this already (M.helper_exec's
--- opts.finish); this is the path without it. A method: Target.finish_run = shell.finish_run.
--- -> list | nil, err, code
---@param paths string[]
function M.finish_run(target, paths)
  local words = {}
  for i, p in ipairs(paths) do words[i] = q(p) end
  local out, err, code = target:run((#words > 0 and ("rm -f -- %s; "):format(table.concat(words, " ")) or "") ..
    leases_text(target.remote_dir))
  if not out then return nil, err, code end
  return others_of(out)
end

--- One line naming another odp on the board (an entry of M.others).
function M.other_text(o)
  return ("host %s, user %s, pid %s, since %s"):format(o.host or "?", o.user or "?", o.pid or "?",
    os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(o.since or 0)))
end

--- --exclusive: waits until no odp that came to the board before this one (its lease older, or as old with a
--- smaller name: first come, first served, so two waiting odps never wait for each other) still runs there;
--- meanwhile this odp's lease says `waiting`, and other odps do not count it as running beside them. Once per
--- target session; one line on ui while it waits. -> true | nil, err, code (ECANCELED: Ctrl-C)
function M.wait_board(target, ui)
  if target.cache.board_waited then return true end
  local dir = M.run_dir(target)
  local _, err, code = target:run(("touch %s/waiting"):format(q(dir)))
  if err then return nil, err, code end
  local said
  while true do
    local list, lerr, lcode = M.others(target)
    if not list then return nil, lerr, lcode end
    local first
    for _, o in ipairs(list) do
      if o.since < (target.cache.since or 0) or (o.since == target.cache.since and o.name < M.owner()) then
        first = o
        break
      end
    end
    if not first then
      target.cache.others = list -- who came after it: they run beside its runs
      break
    end
    if not said and ui then ui:info("waiting for %s (--exclusive): another odp runs there: %s", target.uri,
      M.other_text(first)) end
    said = true
    local slept, serr, scode = sys.sleep(1)
    if not slept then return nil, serr, scode end
  end
  _, err, code = target:run(("rm -f %s/waiting"):format(q(dir)))
  if err then return nil, err, code end
  target.cache.board_waited = true
  return true
end

--- Removes this odp's own directory on the board (M.run_dir) as its board closes: the links to the staged files
--- go with it (the blobs stay for the next odp), and with them the lease. Nothing to do when this target session
--- made none (a preflight that failed before it). Through the helper where it runs ('U'), and where the target
--- says its helper reads its stdin to the end after odp closed the channel (target.helper_reads_to_eof: SSH's
--- does, adbd KILLs it with its stream), without waiting for the answer: the board's session ends in no round
--- trip. A removal that failed unseen leaves a directory whose owner is gone, which the next odp's survey
--- removes (M.space). -> true | nil, err, code
function M.close_run_dir(target)
  if not target.cache.run_dir then return true end
  local dir = M.run_dir(target)
  local h = target.cache.helper_client
  if h and not h.dead then
    if target.helper_reads_to_eof then return h:alone(function() return h:send("U", { dir }) end) end
    return h:request("U", { dir })
  end
  local _, err, code = target:run("rm -rf -- " .. q(dir))
  if err then return nil, err, code end
  return true
end

-- The answers to link's check_requests sent in the session's first flight (stage_ahead), taken once: a later
-- stage of the file asks again. nil when none were sent for this blob and mode.
local function checked(target, link, blob, mode)
  local c = target.cache.checks and target.cache.checks[link]
  if not c then return nil end
  target.cache.checks[link] = nil
  if c.blob == blob and c.mode == mode then return c.got end
end

-- M.stage through the helper h: the link to the blob made and its hash checked in one flight (two requests
-- sent together; in the session's first flight for the files it named: stage_ahead); when the board lacks the
-- bytes, target:push uploads them and a link makes the upload the blob (on SSH in the upload's own flight).
-- -> link, pushed? | nil, err, code
local function stage_through(target, h, path, sha, blob, link, opts)
  local got, err, code = checked(target, link, blob, opts.mode)
  if not got then got, err, code = h:pipeline({ check_requests(blob, link, opts.mode) }) end
  if not got then return nil, err, code end
  -- the link fails when there is no blob yet (ENOTFOUND): the upload below makes it
  if got[1][2] and got[1][3] ~= "ENOTFOUND" then return nil, got[1][2], got[1][3] end
  if got[2][2] then return nil, got[2][2], got[2][3] end
  local size = sys.stat(path).size
  local bar = opts.ui and opts.ui:progress("push " .. path:match("([^/]+)$"), size, "bytes")
  local function progress(d) if bar then bar:update(d) end end
  local pushed = got[2][1][1] ~= sha
  local r, perr, pcode = true, nil, nil
  if pushed then
    r, perr, pcode = target:push(path, link, { mode = opts.mode, sha256 = sha, fresh = true, on_progress = progress,
      link = blob })
  else
    progress(size)
  end
  if bar then bar:finish() end
  if not r then return nil, perr, pcode end
  if pushed and not r.linked then
    h, err, code = M.helper(target)
    if not h then return nil, err or "EIO: the helper is gone", code or "EIO" end
    local ok, lerr, lcode = h:request("L", { link, blob })
    if not ok then return nil, lerr, lcode end
  end
  return link, pushed
end

--- Makes a local file available on the board, content-addressed: its bytes are kept once in the board's
--- <remote_dir>/.odp/blobs/<sha256> (M.blob_path), and the run reads them through a hard link of its own,
--- <M.run_dir>/<name>. The link is checked by its sha256, never trusted by name: a blob another odp left with
--- other bytes is uploaded over (into this odp's directory, then linked as the blob). Two odps staging files of
--- one name never see each other's. -> path on the board, pushed? | nil, err, code. opts: mode, ui (a progress
--- bar), sha256 (the local file's, when known). A method: Target.stage = shell.stage.
function M.stage(target, path, opts)
  opts = opts or {}
  local name = path:match("([^/]+)$")
  local sha = opts.sha256 or sys.sha256_file(path)
  if not sha then return nil, ("EIO: cannot read %s"):format(path), "EIO" end
  local blob, link = M.blob_path(target, sha), M.run_dir(target) .. "/" .. name
  if M.helper(target) then
    local function through_helper()
      local h, herr, hcode = M.helper(target)
      if not h then return nil, herr or "EIO: the helper is gone", hcode or "EIO" end
      return stage_through(target, h, path, sha, blob, link, opts)
    end
    if target.request then return target:request("staging " .. name, true, through_helper) end
    return through_helper()
  end
  -- ln fails when there is no blob yet: the push below uploads it
  local _, err, code = target:run(("ln -f %s %s 2>/dev/null || true"):format(q(blob), q(link)))
  if err then return nil, err, code end
  local bar = opts.ui and opts.ui:progress("push " .. name, sys.stat(path).size, "bytes")
  local r, perr, pcode = target:push(path, link, { mode = opts.mode,
    on_progress = bar and function(d) bar:update(d) end })
  if bar then bar:finish() end
  if not r then return nil, perr, pcode end
  if not r.skipped then
    _, err, code = target:run(("ln -f %s %s"):format(q(link), q(blob)))
    if err then return nil, err, code end
  end
  return link, not r.skipped
end

--- Brings a file the runner wrote on the board here. -> true | nil, err, code (ENOTFOUND: no such file).
-- A method: Target.fetch = shell.fetch.
function M.fetch(target, remote, dst)
  return target:pull(remote, dst)
end

--- The hash-skip of a push: when the board already has src's bytes at dst (sha256), sets opts.mode on it,
--- reports the whole size to opts.on_progress and returns the push result {bytes=, skipped=true}.
--- Otherwise nil and the stat of src with its sha256 (the caller uploads), or nil, nil, err, code when src
--- cannot be read.
---@param target odp.target.shell.Target
---@param src string  local file
---@param dst string  path on the board
---@param opts {mode: integer?, on_progress: fun(done: integer, total: integer)?, fresh: boolean?, sha256: string?} fresh: dst is known to be absent (no hash check); sha256: src's, when known
---@return {bytes: integer, skipped: true}? skipped
---@return table? stat
---@return string? err
---@return string? code
function M.push_skip(target, src, dst, opts)
  local st, err, code = sys.stat(src)
  if not st then return nil, nil, err, code end
  st.sha256 = opts.sha256 or sys.sha256_file(src)
  if opts.fresh then return nil, st end -- the caller knows dst is not there
  if st.sha256 and st.sha256 == target:sha256(dst, opts.mode) then -- the mode set in the same request
    if opts.on_progress then opts.on_progress(st.size, st.size) end
    return { bytes = st.size, skipped = true }
  end
  return nil, st
end

-- An upload that took long in many round trips of little each says why, once per board: the board's SSH server
-- opened the channel with a small window (Dropbear's default is 24 KB, its -W; OpenSSH's 2 MB), and each window's
-- worth waits a round trip for the next adjust (docs/helper-protocol.md). before: the session's traffic before it.
M.SMALL_WINDOW = { seconds = 2, round_trips = 100, bytes = 64 * 1024 }
local function say_small_window(target, name, bytes, before, seconds)
  if target.cache.small_window_said or not before then return end
  local now = target.session:traffic()
  local rts, sent = now.round_trips - before.round_trips, now.bytes_up - before.bytes_up -- sent: compressed
  local w = M.SMALL_WINDOW
  if seconds < w.seconds or rts < w.round_trips or sent / rts > w.bytes then return end
  target.cache.small_window_said = true
  local shown = target.ui or ui.new()
  shown:info("hint: uploading %s (%s, %s on the link) to %s took %.1f s in %d round trips, %s each: the board's " ..
    "SSH server opens a small channel window (Dropbear's default is 24576 bytes; `dropbear -W 2097152` gives 2 MB, " ..
    "as OpenSSH's sshd does)", name, ui.human_bytes(bytes), ui.human_bytes(sent), target.uri, seconds, rts,
    ui.human_bytes(sent // rts))
end

--- Uploads src to dst through the board's resident helper (its 'P' frames, sent without waiting: no SFTP
--- subsystem, which costs a login shell and a round trip per few chunks), once M.push_skip found the board
--- lacks it (st: M.push_skip's stat, with src's sha256, which the board checks). opts: mode, on_progress, link
--- (a path made a hard link of dst once it is up, in the same flight: the result then says linked). The
--- SSH target's; adb keeps its sync: service, whose chunks stream without waiting already (and adbd KILLs the
--- helper with its stream, which would leave a part an interrupted upload made).
--- -> the push result | false: no helper runs (the caller uploads its own way) | nil, err, code
function M.helper_push(target, src, dst, opts, st)
  local h, herr, hcode = M.helper(target)
  if herr then return nil, herr, hcode end
  if not h then return false end
  local before, t0 = target.session and target.session.traffic and target.session:traffic(), sys.now()
  local ok, err, code = h:put(src, dst, { mode = opts.mode, sha256 = st.sha256, on_progress = opts.on_progress,
    after = opts.link and { { "L", { dst, opts.link } } } })
  if ok and opts.link and err[1][2] then return nil, err[1][2], err[1][3] end
  if code == "ENOSPC" then
    err, code = M.space_cause(target, dst:match("^(.*)/[^/]*$") or ".", st.size, "uploading " .. src:match("[^/]*$"),
      err, code)
  end
  if not ok then return nil, err, code end
  say_small_window(target, src:match("[^/]*$"), st.size, before, sys.now() - t0)
  return { bytes = st.size, skipped = false, linked = opts.link and true or nil }
end

-- Where odp's helpers are on this machine, in order: $ODP_BUILD_DIR, the build tree, an install's helpers/.
local function helper_dirs()
  local dirs = { host.root .. "/build", host.root .. "/helpers" }
  if os.getenv("ODP_BUILD_DIR") then table.insert(dirs, 1, os.getenv("ODP_BUILD_DIR")) end
  return dirs
end

--- Where the odp-rusage helper for an architecture lives on this machine: $ODP_BUILD_DIR, the build
-- tree, or an install's helpers/ directory. nil when there is none for that arch.
---@param arch string  `uname -m` of the board ("aarch64", "x86_64", ...)
---@return string?
function M.local_helper(arch)
  for _, dir in ipairs(helper_dirs()) do
    local p = dir .. "/odp-rusage-" .. arch
    if sys.stat(p) then return p end
  end
end

--- `time -v` commands tried, in order, when there is no helper (a Linux board: GNU time).
M.TIME_COMMANDS = { "/usr/bin/time -v" }

-- the output of `time -v true` of a usable time (GNU, toybox)
local function reports_rss(out)
  return out:find("Maximum resident", 1, true) or out:find("Max RSS", 1, true) or out:find("maxrss", 1, true)
end

--- Where the helper lives on a board: <remote_dir>/.odp/odp-rusage.
function M.helper_path(target)
  return target.remote_dir .. "/.odp/odp-rusage"
end

-- Says once per target, on its ui (else a ui of its own), why it runs one command per exec.
local function say_fallback(target, why)
  if target.cache.fallback_said then return end
  target.cache.fallback_said = true
  local msg = ("odp's helper cannot run on %s (%s): one command per exec from here on"):format(target.uri, why)
  local shown = target.ui or ui.new()
  shown:warn("%s", msg)
end

local ABSENT = "ODP-NO-HELPER"
local FIRST_MAX = 16384 -- bytes of a first flight in the helper's command line (tools/serve.c's FIRST_MAX)

-- The helpers this odp has (M.local_helper), by `uname -m`: {path, sha256, size}; read once.
local own
local function own_helpers()
  if not own then
    own = {}
    for _, dir in ipairs(helper_dirs()) do
      for _, name in ipairs(sys.readdir(dir) or {}) do
        local arch = name:match("^odp%-rusage%-([%w_]+)$")
        local path = arch and not own[arch] and M.local_helper(arch)
        local st = path and sys.stat(path)
        if st then own[arch] = { path = path, sha256 = sys.sha256_file(path), size = st.size } end
      end
    end
  end
  return own
end

--- The one command a board session starts with (docs/helper-protocol.md, "Bring-up"): the helper at path starts
--- when its sha256 is that of odp's build for the board's `uname -m`; otherwise the command says ABSENT and the
--- arch, and, when odp has a build for it, reads that many bytes from its stdin into a partial file, checks
--- their sha256 and that it starts there (a noexec mount: then nothing is left), and only then renames it into
--- place and starts it. A stale or half-written helper never runs, and the board's login shell is paid once.
--- first_hex: the session's first requests (odp.target.helper's run_flight, in hex) for the helper's command line
--- (`--serve FIRST`): they leave with the exec request and are answered behind the hello.
function M.start_command(path, first_hex)
  local cases, arches = {}, {}
  for arch in pairs(own_helpers()) do arches[#arches + 1] = arch end
  table.sort(arches)
  for _, arch in ipairs(arches) do
    cases[#cases + 1] = ("%s) s=%s n=%d;;"):format(arch, own[arch].sha256, own[arch].size)
  end
  return ("command -v sha256sum >/dev/null 2>&1 || { echo 'odp: no sha256sum on the board: its helper cannot be " ..
    "checked, so it is not started' >&2; exit 1; }; " ..
    "mkdir -p %s 2>/dev/null; h=%s; s=; case $(uname -m) in %s esac; x=$(sha256sum <\"$h\" 2>/dev/null); " ..
    "[ -n \"$s\" ] && [ \"${x%%%% *}\" = \"$s\" ] && exec \"$h\" --serve%s; " ..
    "echo %s; uname -m; [ -n \"$s\" ] || exit 0; " ..
    "p=\"$h.odp-part-$$\"; head -c \"$n\" >\"$p\"; x=$(sha256sum <\"$p\"); if [ \"${x%%%% *}\" != \"$s\" ]; then " ..
    "rm -f \"$p\"; echo \"odp: the helper did not arrive whole in $p\" >&2; exit 1; fi; chmod 755 \"$p\"; " ..
    "if ! \"$p\" --serve </dev/null >/dev/null 2>&1; then rm -f \"$p\"; echo \"odp: the helper cannot start from $h " ..
    "(a file system mounted without exec?)\" >&2; exit 1; fi; mv -f \"$p\" \"$h\" && exec \"$h\" --serve"):format(
    q(path:match("^(.*)/[^/]*$")),
    q(path), table.concat(cases, " "), first_hex and (" " .. first_hex) or "", ABSENT)
end

-- Whether a started helper is this odp's own build for its arch (the sha256 of its file: its hello says it).
local function current(client)
  local mine = client.arch and own_helpers()[client.arch]
  return mine ~= nil and client.self_sha256 == mine.sha256
end

--- The board's resident helper (odp.target.helper; docs/helper-protocol.md), started once per target session
--- over target:open_channel and kept in target.cache.helper_client; a dead one (killed, its channel lost) is
--- replaced by a new one on the next call. One command (start_command) starts the helper on the board when it
--- is this odp's own build and otherwise installs odp's build for the board's arch and starts that. nil where
--- it cannot run (no helper for the arch, no exec permission, a noexec remote dir), said once: the caller takes
--- the one-exec-per-command path; nil, unsaid, for this call only when the transport has no connection to spare
--- for a channel (EBUSY: odp.target.adb's --adb-connections). nil, err, code when not even a channel opens (the
--- connection is lost).
--- first ({argv, opts}, a run as the client's run takes it): when this call starts the helper, it goes in the
--- helper's command line (start_command) and costs no round trip of its own; the caller then runs it
--- (client:run(argv, opts), the same opts table) before anything else.
---@param target odp.target.shell.Target
---@param first table?
---@return table? client
---@return string? err
---@return string? code
function M.helper(target, first)
  local c = target.cache
  if c.helper_client and not c.helper_client.dead then return c.helper_client end
  if c.helper_off or not target.open_channel then return nil end
  local task = sched().current()
  if c.helper_starting then
    -- the start's own requests go without it; another task (a pipelined sweep's other point, both sent again
    -- after a reconnect) waits for that start's outcome: going around the helper would run its program beside
    -- the one the helper runs
    if not task or c.helper_starting == task then return nil end
    local held, err, code = c.helper_started:acquire()
    if not held then return nil, err, code end
    c.helper_started:release()
    return M.helper(target, first)
  end
  c.helper_starting = task or true
  -- lazy: start-up (boards with a resident helper)
  c.helper_started = c.helper_started or require("odp.core.lock").new(1, "the helper's start on " .. target.uri)
  assert(c.helper_started:acquire()) -- free: only a start holds it, and none is under way
  local path = M.helper_path(target)
  local flight = first and helper_mod().run_flight(first[1], first[2])
  if flight and #flight > FIRST_MAX then flight = nil end -- sent on its own once the helper greets
  local ch, err, code, client, why, arch, installed
  local ok, raised = pcall(function()
    ch, err, code = target:open_channel(M.start_command(path, flight and
      (flight:gsub(".", function(b) return ("%02x"):format(b:byte()) end))))
    if ch then
      client, err, code, why, arch = helper_mod().open(ch, { uri = target.uri, absent = ABSENT, install = function(a)
        local mine = own_helpers()[a]
        installed = mine and a
        return mine and sys.read_file(mine.path)
      end, first = flight and { flight = flight, opts = first[2] } })
    end
  end)
  c.helper_starting = nil
  c.helper_started:release()
  if not ok then error(raised, 0) end
  if not ch and code == "EBUSY" then
    return nil -- no connection to spare for it now (odp.target.adb's limit): this call goes without, the next tries
  elseif not ch and code ~= "EPROTO" and code ~= "ENOTFOUND" then
    return nil, err, code -- the connection is gone: that is no reason to give up the helper
  end
  arch = arch and arch:match("^%s*(%S+)")
  if why == "absent" and arch then c.arch = arch end
  if client and not current(client) then
    client:close()
    client, err = nil, ("the helper started on %s is not odp's build for %s"):format(target.uri, tostring(client.arch))
  end
  if not client then
    c.helper_off = true -- the transport has no such channel (adb without shell_v2), or the helper cannot run
    say_fallback(target, why == "absent" and ("no odp-rusage helper built for %s"):format(arch or
      "its architecture") or errors.text(err or "?"))
    return nil
  end
  if installed and target.ui then target.ui:debug("odp's helper for %s installed on %s", installed, target.uri) end
  c.helper_client = client
  c.rusage, c.helper = "odp-rusage", path
  c.arch = c.arch or client.arch -- its hello said `uname -m`
  return client
end

--- How a board measures rusage, asked once and kept in target.cache:
--- "odp-rusage" (the helper, pushed to <remote_dir>/.odp/odp-rusage, running as the resident helper where it
--- can: M.helper), "time" (a `time -v` from time_commands, default M.TIME_COMMANDS, that prints a peak RSS)
--- or false. The second value is the prefix to put before argv (M.command's `prefix`).
---@param target odp.target.shell.Target
---@param time_commands string[]?
---@return "odp-rusage"|"time"|false method
---@return string? prefix
function M.rusage_method(target, time_commands)
  local cache = target.cache
  if cache.rusage == nil and not M.helper(target) then
    local arch = target:arch()
    local helper = arch and M.local_helper(arch)
    local dir = target.remote_dir .. "/.odp"
    if helper and not cache.helper_off and target:mkdir(dir)
      and target:push(helper, dir .. "/odp-rusage", { mode = tonumber("755", 8) }) then
      cache.rusage, cache.helper = "odp-rusage", dir .. "/odp-rusage"
    else
      cache.rusage = false
      for _, cmd in ipairs(time_commands or M.TIME_COMMANDS) do
        local out = target:run(cmd .. " true 2>&1")
        if out and reports_rss(out) then
          cache.rusage, cache.rusage_cmd = "time", cmd
          break
        end
      end
    end
  end
  if cache.rusage == "odp-rusage" then return "odp-rusage", q(cache.helper) .. " --" end
  if cache.rusage then return cache.rusage, cache.rusage_cmd or M.TIME_COMMANDS[1] end
  return false
end

--- Runs argv through the board's helper (M.helper): the exec result of Target:exec, rusage and counters
--- applied (unless opts.rusage == false), with r.state_text when opts.state asked for the device state around
--- it (odp.target.helper's Client:run). opts as Target:exec (cwd, env, timeout, capture_limit, on_stdout,
--- on_stderr, helper_args: {"--cpus", LIST}, counters, memory: {csv = the timeline's path on THIS machine, marks,
--- model}: it comes back on the helper's channel), finish: the run's files on the board (16 at most, in its cwd):
--- once the program ended the helper removes them and reads the leases of the board's remote dir, so the end of
--- a point on a shared board (M.finish_run) rides in its answer: r.finish = {others (as M.others), removed (false:
--- a signal ended the program and its files are left for what looks at a crash), unremoved = {"PATH: WHY", ...}}.
--- nil, err, code when the helper or its channel failed.
function M.helper_exec(target, client, argv, opts)
  local cpus, hz, out
  local args = opts.helper_args or {}
  for i = 1, #args do
    if args[i] == "--cpus" then cpus = args[i + 1] end
    if args[i] == "--sample" then hz = args[i + 1] end
    if args[i] == "--sample-out" then out = args[i + 1] end
  end
  local r, report, code = client:run(argv, { cwd = opts.cwd, env = opts.env, timeout = opts.timeout, cpus = cpus,
    counters = opts.counters, memory = opts.memory, sample = hz and out and (hz .. "," .. out),
    capture_limit = opts.capture_limit, on_stdout = opts.on_stdout, on_stderr = opts.on_stderr, state = opts.state,
    on_sent = sched().current() and sched().current().on_run_sent, -- a pipelined sweep's next point (odp.run.sweep)
    board = opts.finish and { rm = opts.finish, leases = target.remote_dir } })
  if not r then return nil, report, code end
  if r.board_text then
    local unremoved = {}
    for line in r.board_text:gmatch("\nunremoved ([^\n]+)") do unremoved[#unremoved + 1] = line end
    r.finish = { others = others_of(r.board_text), removed = r.signal_name == nil, unremoved = unremoved }
    r.board_text = nil
  end
  if opts.rusage == false then return r end
  M.apply_rusage(r, "odp-rusage", report ~= "" and report or nil)
  -- the helper sent its timeline whole, but it could not be written here: not the run's timeline
  if r.timeline_error and r.memory then r.memory.timeline = "failed" end
  return r
end

--- Target:run(cmd) through the helper when it runs (`sh -c cmd`, no new session), else target:exec_command.
--- ahead (through the helper only): {requests = small requests written before cmd in its flight, keep =
--- function given their answers once they came} (odp.target.helper's Client:run).
--- -> stdout | nil, err, code (a non-zero status is a failure).
function M.run(target, cmd, timeout, ahead)
  local argv, opts = { "sh", "-c", cmd }, { timeout = timeout or 60, ahead = ahead and ahead.requests }
  local h, herr, hcode = M.helper(target, { argv, opts }) -- a helper started here gets it with its start
  if herr then return nil, herr, hcode end
  if not h then return target:exec_command(cmd, timeout) end
  local r, err, code = h:run(argv, opts)
  if not r then return nil, err, code end
  if ahead then ahead.keep(r.ahead) end
  if r.canceled then return nil, "ECANCELED: interrupted", "ECANCELED" end
  if not r.ok then
    local why = r.stderr:match("[^\n]+") or (r.timed_out and "timed out") or ("status " .. r.status)
    return nil, ("EIO: `%s` on %s: %s"):format(cmd, target.uri, why), "EIO"
  end
  return r.stdout
end

--- Whether target:exec can bring the device state back with a program's answer (its `state` option: the
-- resident helper runs; odp.target.device_state.exec_request). A method: Target.state_in_exec = shell.state_in_exec.
function M.state_in_exec(target)
  return M.helper(target) ~= nil
end

--- The device-state snapshot's text read by the board's helper (odp.target.device_state.gather), or nil
--- without a helper (the caller runs the shell script), or nil, err, code when the helper failed.
function M.state_text(target, root, cpu_files, props, timeout)
  local h, herr, hcode = M.helper(target)
  if not h then return nil, herr, hcode end
  return h:state(root, cpu_files, props, timeout)
end

--- The helper's own flags for an exec: helper_args (odp-rusage --cpus LIST: CPU placement) and, when counters
--- is given and not "none", --counters LEVEL.
---@param helper_args string[]?
---@param counters string?
---@return string[]
function M.helper_flags(helper_args, counters)
  local args = table.move(helper_args or {}, 1, #(helper_args or {}), 1, {})
  if counters and counters ~= "none" then table.move({ "--counters", counters }, 1, 2, #args + 1, args) end
  return args
end

--- The one-shot helper's flags for memory by phase (docs/memory.md): memory = {csv = path of the timeline (the
--- helper runs here: the host target), marks = {"EVENT=GLOB", ...}, model = the model file as the program sees it
--- (its mapped bytes)}, or nil.
---@param memory {csv: string, marks: string[], model: string?}?
---@return string[]
function M.memory_flags(memory)
  if not memory then return {} end
  local args = { "--memory", memory.csv }
  for _, m in ipairs(memory.marks or {}) do table.move({ "--mark", m }, 1, 2, #args + 1, args) end
  if memory.model then table.move({ "--memory-file", memory.model }, 1, 2, #args + 1, args) end
  return args
end

--- The prefix of M.rusage_method with the helper's own flags added (M.helper_flags), or nil, err, code when
--- placement is asked of a board that measures with `time -v` or not at all (only odp's helper pins).
--- Counters alone are dropped there: such a board has none to give.
---@param method "odp-rusage"|"time"|false
---@param prefix string?
---@param helper_args string[]?
---@param counters string?
---@return string? prefix
---@return string? err
---@return string? code
function M.with_helper_args(method, prefix, helper_args, counters)
  if method ~= "odp-rusage" then
    if helper_args and #helper_args > 0 then
      return nil, "ENOTSUP: CPU placement needs odp's odp-rusage helper on the board, and there is none for its " ..
        "architecture", "ENOTSUP"
    end
    return prefix
  end
  local parts = { (prefix:gsub(" %-%-$", "")) }
  for _, a in ipairs(M.helper_flags(helper_args, counters)) do parts[#parts + 1] = q(a) end
  parts[#parts + 1] = "--"
  return table.concat(parts, " ")
end

--- stderr without the `time -v` report that ends it (trailing lines with a label of `labels`, and
--- GNU time's "Command exited with non-zero status" / "Command terminated by signal" lines).
---@param text string
---@param labels table<string, any>  odp.parse.gnutime.labels
---@return string
function M.strip_time_report(text, labels)
  local lines = {}
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do lines[#lines + 1] = line end
  local keep = #lines
  while keep > 0 do
    local line = lines[keep]
    local label = line:match("^%s*(%a.-):%s+.-%s*$")
    if (label and labels[label]) or line:match("^%s*Command terminated by signal")
      or line:match("^%s*Command exited with non%-zero status") then
      keep = keep - 1
    else
      break
    end
  end
  if keep == #lines then return text end
  return keep == 0 and "" or table.concat(lines, "\n", 1, keep) .. "\n"
end

--- Merges the rusage report of an exec run with M.rusage_method's method into its result r (the
--- odp.proc.run table): r.rusage filled, the report taken out of r.stderr; with odp-rusage also the
--- command's own status, signal, wall time and ok. A missing report leaves r as it is.
--- report: the text odp-rusage wrote with -o FILE (the host target), read instead of r.stderr.
---@param r table    the exec result
---@param method "odp-rusage"|"time"|false|nil
---@param report string?
---@return table r
function M.apply_rusage(r, method, report)
  if method == "odp-rusage" then
    local rec, rest = rusage.parse(report or r.stderr)
    if rec then
      if not report then r.stderr = rest end
      r.rusage, r.wall_s, r.status, r.counters = rec.rusage, rec.wall_s, rec.status, rec.counters
      r.memory = memparse.report(report or "")
      if rec.signal > 0 then r.signal, r.core_dumped = rec.signal, rec.core end
      r.ok = rec.status == 0 and rec.signal == 0 and not r.timed_out and not r.canceled
    end
  elseif method then
    local t = gnutime().parse(r.stderr)
    if t then
      r.rusage = { maxrss_kb = t.max_rss_kb, utime_s = t.user_s, stime_s = t.system_s, minflt = t.minor_faults,
        majflt = t.major_faults, nvcsw = t.voluntary_switches, nivcsw = t.involuntary_switches }
      if t.terminated_by_signal and t.terminated_by_signal > 0 then r.signal = t.terminated_by_signal end
      r.stderr = M.strip_time_report(r.stderr, gnutime().labels)
    end
  end
  return r
end

return M
