--- The host target: this machine. Same interface as the ssh and adb targets (docs/SCRIPTING.md,
-- "Targets"), so the executorch flow is written once.
local errors = require("odp.core.errors")
local proc = require("odp.proc")
local sys = require("odp.sys")
local helper_core = require("odp.helper")
local shell = require("odp.target.shell")

local M = { kind = "host", options = {} }

--- The path of program prog on this machine (a path is checked as is; a name is searched in $PATH), or nil.
function M.which(prog)
  if prog:find("/") then
    local st = sys.stat(prog)
    return st and st.executable and prog or nil
  end
  for dir in (os.getenv("PATH") or "/usr/bin:/bin"):gmatch("[^:]+") do
    local st = sys.stat(dir .. "/" .. prog)
    if st and st.type == "file" and st.executable then return dir .. "/" .. prog end
  end
end

-- Removes path and what is under it, never following a link (remove(3) unlinks a link or a file, and rmdir's
-- an empty directory): a command's temporary directory.
local function remove_tree(path)
  if os.remove(path) then return end
  for _, name in ipairs(sys.readdir(path) or {}) do remove_tree(path .. "/" .. name) end
  os.remove(path)
end

--- Runs a command {name, argv, cwd?, env?, lifeline?} on this machine, its command line and output appended to
-- the log at log_path (what a user would paste, then what it printed, then "# exit N"), each output line given
-- to on_line. -> proc.run's result (r.ok, r.status, r.timed_out); a command that could not start raises EIO, and
-- one that Ctrl-C, SIGTERM or SIGHUP cut short raises ECANCELED naming it (its process group is killed). Its
-- temporary files (TMPDIR: a compiler's cc*.s) go into a directory beside the log, removed when it ends, so a
-- command killed mid-way leaves nothing in /tmp. The Ethos-U flow's build and SETOOLS commands run so.
function M.run_logged(c, log_path, timeout, on_line)
  local logf = assert(io.open(log_path, "a"))
  logf:write("$ ", shell.command_line(c), "\n")
  logf:flush()
  local pending = ""
  local function feed(chunk)
    logf:write(chunk)
    pending = pending .. chunk
    while true do
      local line, rest = pending:match("^([^\n]*)\n(.*)$")
      if not line then break end
      pending = rest
      if on_line then on_line(line) end
    end
    if #pending > 65536 then pending = pending:sub(-4096) end
  end
  local tmp = ("%s.tmp-%d"):format(log_path, sys.getpid())
  local env = { TMPDIR = tmp }
  for k, v in pairs(c.env or {}) do env[k] = v end
  local made, merr = sys.mkdir_p(tmp)
  local r, err
  if made then
    r, err = proc.run { argv = c.argv, cwd = c.cwd, env = env, timeout = timeout, lifeline = c.lifeline,
      on_stdout = feed, on_stderr = feed, capture_limit = 1 }
    remove_tree(tmp)
  else
    err = "a directory for its temporary files: " .. tostring(merr)
  end
  local canceled = r and r.canceled or sys.cancel_requested()
  local status = r and (r.signal_name and ("SIG" .. r.signal_name) or tostring(r.status)) or "?"
  logf:write(("\n# exit %s%s\n"):format(status, canceled and " (interrupted)" or
    r and r.timed_out and " (timed out)" or ""))
  logf:close()
  local prog = c.argv[1]:match("[^/]*$")
  if canceled then
    errors.fail("ECANCELED", ("%s interrupted; it and its process group were stopped"):format(prog))
  end
  if not r then errors.fail("EIO", ("%s: %s"):format(c.name, errors.text(err))) end
  return r
end

--- The last n lines of a log file ("" when it cannot be read): what a failure shows of run_logged's log.
function M.tail_lines(path, n)
  local f = io.open(path, "rb")
  if not f then return "" end
  local all = {}
  for line in f:lines() do
    all[#all + 1] = line
    if #all > n * 4 then table.move(all, #all - n + 1, #all, 1) for i = n + 1, #all do all[i] = nil end end
  end
  f:close()
  return table.concat(all, "\n", math.max(1, #all - n + 1), #all)
end

local Host = {}
Host.__index = Host

function M.new(opts)
  opts = opts or {}
  return setmetatable({ kind = "host", uri = "local://" .. sys.hostname(), remote_dir = opts.remote_dir }, Host)
end

local function first_line(argv)
  local r = proc.run { argv = argv, timeout = 10 }
  return r and r.ok and r.stdout:match("^%s*(.-)%s*\n") or nil
end

-- The odp-rusage helper of this machine's arch (odp.target.shell.local_helper), looked up once; false if none.
local helper
local function local_helper()
  if helper == nil then
    -- the kernel's own answer to `uname -m`, without starting uname (1 ms of every host run)
    local arch = (sys.read_file("/proc/sys/kernel/arch") or ""):match("%S+") or first_line({ "uname", "-m" })
    helper = arch and shell.local_helper(arch) or false
  end
  return helper
end

--- How this machine measures a command's rusage: "odp-rusage" (the static helper execs the command, so
--- its peak RSS is its own) or false (no helper built or installed: wait4 of a child odp spawned reports at
--- least odp's own peak RSS, because the kernel carries the parent's high-water mark over a vfork+exec;
--- exec then leaves rusage.maxrss_kb out rather than report that).
function Host:rusage_method()
  return local_helper() and "odp-rusage" or false
end

--- Runs argv here: the odp.proc.run result table. With opts.rusage ~= false the command runs through
--- odp-rusage (-g: in the group proc.run kills on timeout; -o: the report goes to a file, so a command's
--- own stderr, however long, cannot push it out), and rusage, status, signal and wall time are the
--- command's own. opts.helper_args (e.g. {"--cpus", "0"}: CPU placement), opts.counters ("basic"|"all":
--- perf counters, r.counters) and opts.memory (memory by phase, r.memory: odp.target.shell.memory_flags) are
--- passed to the helper. r.stdout_times: when each stdout chunk was read here, as the board's helper times them
--- (odp.target.helper), from odp's own read loop.
function Host:exec(argv, opts)
  opts = opts or {}
  local flags = shell.helper_flags(opts.helper_args, opts.counters)
  local spec = { argv = argv, cwd = opts.cwd, env = opts.env, stdin = opts.stdin, timeout = opts.timeout,
    on_stdout = opts.on_stdout, on_stderr = opts.on_stderr, capture_limit = opts.capture_limit,
    stdout_times = helper_core.STDOUT_TIMES_MAX }
  local method = opts.rusage ~= false and self:rusage_method()
  if not method then
    -- placement cannot be done without the helper; counters are simply absent, as on a remote board
    if opts.helper_args and #opts.helper_args > 0 then
      return nil, "ENOTSUP: CPU placement and sampling need odp's odp-rusage helper (make)", "ENOTSUP"
    end
    local r, err, code = proc.run(spec)
    if r then r.rusage.maxrss_kb = nil end
    return r, err, code
  end
  -- the helper's report goes into a file with no name in memory (sys.memfile) that it opens through odp's
  -- descriptor: whatever ends odp, a SIGKILL too, nothing is left in /tmp
  local report, terr = sys.memfile()
  if not report then return nil, "EIO: a temporary file for odp-rusage's report: " .. tostring(terr), "EIO" end
  local helper_argv = { local_helper(), "-g", "-o", sys.fd_path(report) }
  table.move(flags, 1, #flags, #helper_argv + 1, helper_argv)
  local mem = shell.memory_flags(opts.memory)
  table.move(mem, 1, #mem, #helper_argv + 1, helper_argv)
  helper_argv[#helper_argv + 1] = "--"
  spec.argv = table.move(argv, 1, #argv, #helper_argv + 1, helper_argv)
  local ran, r, err, code = pcall(proc.run, spec)
  local text = report:seek("set", 0) and report:read("a")
  report:close()
  if not ran then error(r, 0) end
  if not r then return nil, err, code end
  -- the helper could not exec the command: the same error proc.run gives for a program it cannot start
  local why = r.status == 127 and (text or "") == "" and r.stderr:match("odp%-rusage: cannot run [^\n]-: ([^\n]*)")
  if why then
    local ecode = why == "No such file or directory" and "ENOTFOUND" or "EIO"
    return nil, ("%s: cannot start %s: %s"):format(ecode, argv[1], why), ecode
  end
  return shell.apply_rusage(r, method, text)
end

local function copy(src, dst, opts)
  local a, b = sys.realpath(src), sys.realpath(dst)
  local st, err, code = sys.stat(src)
  if not st then return nil, err, code end
  if a and a == b then return { bytes = st.size, skipped = true } end
  if sys.stat(dst) and sys.sha256_file(src) == sys.sha256_file(dst) then
    return { bytes = st.size, skipped = true }
  end
  local input, ierr = io.open(src, "rb")
  if not input then return nil, "ENOTFOUND: " .. ierr, "ENOTFOUND" end
  -- a temporary name, renamed when complete: a partial copy never looks like the file
  local tmp = dst .. ".odp-part-" .. sys.getpid() -- odp's one partial name (docs/signals.md)
  local output, oerr = io.open(tmp, "wb")
  if not output then input:close() return nil, "EIO: " .. oerr, "EIO" end
  local done = 0
  while true do
    local chunk = input:read(1 << 20)
    if not chunk then break end
    local ok, werr = output:write(chunk)
    if not ok then
      input:close() output:close() os.remove(tmp)
      return nil, "EIO: " .. werr, "EIO"
    end
    done = done + #chunk
    if opts and opts.on_progress then opts.on_progress(done, st.size) end
  end
  input:close()
  output:close()
  local ok, rerr, rcode = sys.rename(tmp, dst)
  if not ok then os.remove(tmp) return nil, rerr, rcode end
  if opts and opts.mode then sys.chmod(dst, opts.mode) end
  return { bytes = done, skipped = false }
end

function Host:push(src, dst, opts) return copy(src, dst, opts) end
function Host:pull(src, dst, opts)
  local r, err, code = copy(src, dst, opts)
  if not r then return nil, err, code end
  return true
end
function Host:mkdir(path) return sys.mkdir_p(path) end

-- The flow's files on this machine: runners and models run in place (so they must be executable already:
-- M.runs_in_place), the runner writes into the run's directory.
M.runs_in_place = true
function Host:workdir(run_dir) return sys.realpath(run_dir) end
function Host:stage(path) return sys.realpath(path), false end
function Host:fetch(path, dst)
  if not sys.stat(path) then return nil, "ENOTFOUND: " .. path, "ENOTFOUND" end
  return sys.rename(path, dst)
end
function Host:sha256(path) return (sys.sha256_file(path)) end
--- Removes files of a run's (absent ones are no error). -> true | nil, err, code
function Host:remove(paths)
  for _, p in ipairs(paths) do
    local ok, err = os.remove(p)
    if not ok and sys.stat(p) then return nil, "EIO: " .. err, "EIO" end
  end
  return true
end

function Host:arch() return (sys.read_file("/proc/sys/kernel/arch") or ""):match("%S+") or first_line({ "uname", "-m" }) end
function Host:libc_version()
  local v = first_line({ "getconf", "GNU_LIBC_VERSION" })
  return v and v:match("([%d%.]+)$")
end
--- Free bytes in the file system holding path (or its nearest existing parent). -> bytes | nil, err, code
function Host:free_bytes(path)
  while not sys.stat(path) and path:match("./") do path = path:match("^(.*)/[^/]*$") end
  return sys.free_bytes(path)
end
--- The device-state snapshot's text, read in-process (src/helper/state.c, the board helper's own code): no
--- shell and no forks (odp.target.device_state.gather).
function Host:state_text(root, cpu_files, props)
  return helper_core.state(root, cpu_files, props)
end
function Host:close() end

return M
