--- Board sessions through OpenSSH's ControlMaster (docs/devices.md, "Through ssh's ControlMaster"): where the
-- board's ssh_config has a ControlPath, odp does what ssh does with it. A running master carries the session as
-- one more channel on its connection (odp.ssh's mux: OpenSSH's mux protocol), with no handshake of odp's own;
-- with ControlMaster auto|yes and ControlPersist odp starts the master as `ssh HOST` would. odp.target.ssh asks
-- here first and connects itself otherwise.
local ssh = require("odp.ssh")
local proc = require("odp.proc")
local sys = require("odp.sys")

local M = {}

-- ssh's own arguments for st's board: the config file and the command line's overrides odp was given.
local function ssh_args(st, opts, extra)
  local argv = { "ssh" }
  if opts.ssh_config then table.move({ "-F", opts.ssh_config }, 1, 2, #argv + 1, argv) end
  table.move({ "-l", st.user, "-p", tostring(st.port) }, 1, 4, #argv + 1, argv)
  table.move(extra, 1, #extra, #argv + 1, argv)
  argv[#argv + 1] = st.alias
  return argv
end

-- The ControlPath as ssh expands it (`ssh -G`: %C is ssh's hash, which its versions compute differently).
-- -> path | nil, why
local function control_path(st, opts)
  local r = proc.run { argv = ssh_args(st, opts, { "-G" }), timeout = 10 }
  if not r or r.status ~= 0 then
    return nil, ("`ssh -G %s` failed: %s"):format(st.alias, r and (r.stderr:match("[^\n]+") or r.status) or "not run")
  end
  local path = r.stdout:match("\ncontrolpath ([^\n]+)")
  if not path or path == "none" then return nil, "ssh -G names no controlpath" end
  return path
end

-- Starts ssh's master for st as `ssh HOST` would with this config (ControlMaster auto or yes, and ControlPersist:
-- it stays when odp ends): -fN returns once it has authenticated. BatchMode: it never prompts (a key that needs
-- its passphrase makes it fail, and odp connects itself). -> seconds it took | nil, why
local function start_master(st, opts, timeout, alive_interval)
  local extra = { "-o", "ControlMaster=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=" .. math.ceil(timeout),
    "-fN" }
  if opts.identity then table.move({ "-i", opts.identity, "-o", "IdentitiesOnly=yes" }, 1, 4, #extra + 1, extra) end
  if opts.known_hosts then extra[#extra + 1] = "-oUserKnownHostsFile=" .. opts.known_hosts end
  if opts.accept_new_host_key then extra[#extra + 1] = "-oStrictHostKeyChecking=accept-new" end
  -- odp's keepalives where ssh_config asks for none: the master's connection is the board's now
  if st.server_alive_interval == 0 then extra[#extra + 1] = "-oServerAliveInterval=" .. alive_interval end
  local err_file = os.tmpname()
  -- the master keeps no pipe of odp's open (odp.proc would wait for it to close)
  local argv = { "/bin/sh", "-c", 'e=$1; shift; exec "$@" </dev/null >/dev/null 2>"$e"', "sh", err_file }
  for _, a in ipairs(ssh_args(st, opts, extra)) do argv[#argv + 1] = a end
  local t0 = sys.now()
  local r = proc.run { argv = argv, timeout = timeout + 5 }
  local said = sys.read_file(err_file) or ""
  os.remove(err_file)
  if not r or r.status ~= 0 then
    -- ssh's last line says why (its first may be a banner of @s)
    local last
    for line in said:gmatch("[^\r\n]+") do last = line end
    return nil, ("ssh did not start a ControlMaster: %s"):format(last or (r and ("status " .. r.status) or "not run"))
  end
  return sys.now() - t0
end

-- A board session through a master (odp.ssh mux): the helper's channel and what needs no SFTP go through it;
-- exec, put and get (the paths without the helper) through a session of odp's own, connected when first needed.
local MuxSession = {}
MuxSession.__index = MuxSession

function MuxSession:open_channel(cmd, o)
  local stream, err, code = self.mux:open_channel(cmd, o)
  if stream then self.streams[stream] = true end
  return stream, err, code
end

function MuxSession:traffic()
  local t = self.mux:traffic()
  t.connect_ms = t.connect_ms + self.started_ms
  if self.direct then
    for k, v in pairs(self.direct:traffic()) do t[k] = t[k] + v end
  end
  return t
end

function MuxSession:lost()
  local pid, err = self.mux:alive { timeout = 5 }
  if pid then return self.direct and self.direct:lost() or nil end
  return ("the ControlMaster at %s is gone (%s)"):format(self.mux:path(), err)
end

function MuxSession:uri() return self.uri_text end

-- odp's own connection, for what the master does not carry here (SFTP, a command's exit status).
function MuxSession:own()
  if not self.direct then
    local session, err, code = self.connect_direct()
    if not session then return nil, err, code end
    self.direct = session
  end
  return self.direct
end

for _, verb in ipairs { "exec", "put", "get" } do
  MuxSession[verb] = function(self, ...)
    local s, err, code = self:own()
    if not s then return nil, err, code end
    return s[verb](s, ...)
  end
end

function MuxSession:close()
  -- each stream's close ends the session's stdin: the master passes on what was written before it (the helper
  -- does the last request odp left it, as over odp's own connection)
  for stream in pairs(self.streams) do pcall(stream.close, stream) end
  self.streams = {}
  self.mux:close()
  if self.direct then self.direct:close() end
end

--- The board session for st (odp.target.ssh_config's settings; opts: odp.target.ssh's) through its ControlMaster
-- when its ssh_config has one: running (`ssh -O check` would say so) or, with ControlMaster auto|yes and
-- ControlPersist, started (a killed master's socket removed first, as ssh does). Two odp processes never start
-- two: the second would find the first's socket and run on as a plain connection no one stops.
-- o: timeout (seconds), alive_interval (keepalives of a master started here where ssh_config sets none),
-- connect_direct (odp's own connection, for what the master does not carry: a function -> session | nil, err, code)
-- -> a session (as odp.ssh's: open_channel, exec, put, get, traffic, lost, uri, close) | nil (none: connect as
-- usual), and why for the ui when one was meant to be used and is not (a warning), or a note for -v when none
-- runs and odp is not to start one
function M.session(st, opts, o)
  local timeout, connect_direct = o.timeout, o.connect_direct
  if not st.control_path then return nil end
  local path, why = control_path(st, opts)
  if not path then return nil, why end
  local mux, answer = ssh.mux(path, { timeout = 5 }) -- answer: the master's pid, or why there is none
  local started = 0
  if not mux then
    if not ((st.control_master == "auto" or st.control_master == "yes") and st.control_persist ~= "no") then
      -- ssh would connect without a master too, or (ask, autoask) start one that asks ssh-askpass for each use
      return nil, nil, ("no ControlMaster at %s, and odp starts none with ControlMaster %s, ControlPersist %s"):format(
        path, st.control_master, st.control_persist)
    end
    local deadline, held = sys.now() + timeout, nil
    repeat
      held = sys.lock(path .. ".odp-lock")
      if not held then sys.sleep(0.05) end
    until held or sys.now() > deadline
    if not held then return nil, ("another odp holds %s.odp-lock"):format(path) end
    mux, answer = ssh.mux(path, { timeout = 5 }) -- the holder before may have started one
    if not mux then
      ssh.mux_clear_stale(path)
      if sys.stat(path) then
        held:release()
        return nil, answer -- there, and no master of this user's: another user's socket, a file, ...
      end
      started, why = start_master(st, opts, timeout, o.alive_interval)
      if started then mux, answer = ssh.mux(path, { timeout = 5 }) end
    end
    held:release()
    if not started and not mux then return nil, why end
    if not mux then return nil, ("the ControlMaster ssh started does not answer: %s"):format(answer) end
  end
  return setmetatable({ mux = mux, pid = answer, started_ms = started * 1000, streams = setmetatable({}, { __mode = "k" }),
    uri_text = ("%s@%s:%d"):format(st.user, st.hostname, st.port), connect_direct = connect_direct,
    started = started > 0 }, MuxSession)
end

--- Whether s is a session of M.session's.
function M.is_session(s) return getmetatable(s) == MuxSession end

return M
