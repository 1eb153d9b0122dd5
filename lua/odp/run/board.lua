--- Boards: one live object per device, whatever the transport (docs/SCRIPTING.md, "Boards").
--   local board <close> = odp.run.board.open("devices/rpi5.lua", {host = "pi@rpi5.local"})
--   board:exec("uname -a"); board:profile{runner = "executor_runner", model = "m.pte", n = 10}
-- A Board wraps what the flows use: a target (lua/odp/target/*: host, ssh, adb) or a probe with its RTT
-- (odp.probe, odp.rtt: lua/odp/target/probe.lua) and, on the twin, the QEMU it started. It connects on first
-- use, so opening one never blocks; a verb the transport does not have fails with ENOTSUP. It is opened once
-- and reused by every run on it (odp.run): the connection, the preflight facts and the files staged on it.
-- Runs (profile, and the verbs a flow adds: the Ethos-U flow's build and flash) are the board's flow's verbs (its
-- board_verbs, through odp.run.flows); a run goes through odp.run.point there.
local errors = require("odp.core.errors")
local device = require("odp.target.device")
local flows = require("odp.run.flows")
local options = require("odp.core.options")
local sys = require("odp.sys")
local preflight = require("odp.target.preflight")
local ui = require("odp.core.ui")

local M = {}

-- A probe board's modules (odp.target.probe with odp.probe, odp.rtt and the stream core; odp.target.twin),
-- loaded by the first probe board: a host, SSH or adb run never needs them (0.5 M instructions of its start)
local function probe_mod() return require("odp.target.probe") end -- lazy: start-up
local function twin() return require("odp.target.twin") end -- lazy: start-up

-- Two kinds of board: a shell board (host, ssh, adb: a target, odp.target.*, that runs commands) and a probe
-- board (J-Link, GDB, the twin: a core reached through a probe, with its RTT). Board holds what every board
-- has; each kind's class adds its own verbs, and a verb of the other kind fails with ENOTSUP.
local Board = {}
local ShellBoard = {}
local ProbeBoard = {}
M.KINDS = { host = "shell", ssh = "shell", adb = "shell", probe = "probe" }
local CLASS = { shell = ShellBoard, probe = ProbeBoard }

-- The board's own verbs -> {the kind of board that has it (all, shell, probe), one line of help}; the order is
-- board:help()'s, then the verbs the board's flow adds (its board_verb_help).
M.VERBS = {
  { "info", "all", "what the board is: transport, uri, arch, OS, CPU (probe: backend, RTT block)" },
  { "exec", "shell", "exec(argv_or_string, {timeout=, cwd=, env=}) -> {status, stdout, stderr, wall_s, rusage}" },
  { "push", "shell", "push(local, remote) -> {bytes, skipped}: skipped when the board has the same bytes" },
  { "pull", "shell", "pull(remote, local) -> true" },
  { "profile", "all", "profile{model=, ...} -> result record: the board's flow (executorch: runner=, n=, etdump=; ethos_u: inferences=)" },
  { "attach", "probe", "attach() -> rtt: finds the RTT control block (after a reset, the new one)" },
  { "reset", "probe", "reset{halt=false}: SWD reset (stale RTT IDs cleared first); halt=true stops the core after it" },
  { "halt", "probe", "halt(): stops the core" },
  { "go", "probe", "go(): runs the core" },
  { "read", "probe", "read(addr, n) -> bytes" },
  { "write", "probe", "write(addr, bytes)" },
  { "read32", "probe", "read32(addr) -> integer (little-endian)" },
  { "write32", "probe", "write32(addr, v)" },
  { "rtt", "probe", "rtt() -> the attached odp.rtt.Rtt (rtt:channel(i) is a stream)" },
  { "tail", "probe", "tail(ch=0, {timeout=}): prints RTT lines as they come, until Ctrl-C (or timeout) -> lines" },
  { "close", "all", "close(): disconnects (the twin's QEMU is stopped unless keep=true)" },
  { "help", "all", "help(): this list" },
}

local function applies(self, which)
  return which == "all" or which == self.kind
end

local function enotsup(self, verb)
  errors.fail("ENOTSUP", ("%s has no %s (a %s board; board:help() lists its verbs)")
    :format(self.device.name, verb, self.transport))
end

-- A verb a flow adds to its boards (profile; the Ethos-U flow's build, flash and the plan the probe verbs
-- read): the flow's board_verbs, found through the flow registry. Runs go through odp.run.point there.
local function flow_verb(self, verb, ...)
  local f = (flows.get(self.device.flow).board_verbs or {})[verb]
  if not f then enotsup(self, verb) end
  return f(self, ...)
end

-- The verbs the board's flow adds ({name, help}: its board_verb_help), callable as board:name(...).
local function flow_verb_help(self)
  return self.device.flow and flows.get(self.device.flow).board_verb_help or {}
end

local open_boards = setmetatable({}, { __mode = "k" })

--- Opens a board: dev is a device file path or a device table; opts are the transport's options (ssh: host,
-- port, identity, known_hosts, accept_new_host_key; adb: adb, serial; probe: probe, jlink_lib, gdb_address,
-- rtt_address, rtt_ranges, twin_state, image, keep), ui (odp.core.ui; default a quiet-less one) and board
-- (the lab file's name for it: board.name, carried by its records).
function M.open(dev, opts)
  dev = device.get(dev)
  opts = opts or {}
  local kind = M.KINDS[dev.transport]
  local self = setmetatable({ device = dev, transport = dev.transport, kind = kind, opts = opts, name = opts.board,
    ui = opts.ui or ui.new {}, keep = opts.keep, _staged = {}, _preflight = {} }, CLASS[kind])
  for _, v in ipairs(flow_verb_help(self)) do
    local verb = v[1]
    self[verb] = function(b, ...) return flow_verb(b, verb, ...) end
  end
  open_boards[self] = true
  return self
end

function Board:__tostring()
  return ("Board(%s, %s%s)"):format(self.device.name, self.transport, self.uri and (", " .. self.uri) or "")
end
Board.__close = function(self) self:close() end
Board.__gc = function(self) self:close() end

--- Whether two runs may be in flight on this board at once (a pipelined sweep, odp.run.sweep): its target shares
-- its connection and its reconnection between tasks (the `pipelines` of odp.target.ssh and odp.target.adb).
function Board:pipelines()
  return self._target ~= nil and self._target.pipelines == true
end

------------------------------------------------------------------------------------------------ shell boards

--- The target (host, ssh, adb), connected on first use.
function ShellBoard:target()
  if not self._target then
    local mod = device.kind(self.transport)
    local o = options.merge(options.defaults(mod.options or {}), self.opts)
    if self.device.remote_dir and not self.opts.remote_dir then o.remote_dir = self.device.remote_dir end
    o.device, o.ui = self.device, self.ui
    local t, err, code = mod.new(o)
    -- the code's exit status (errors.CODES): 3, 2 for a bad ssh_config (EUSAGE), 130 for Ctrl-C (ECANCELED)
    if not t then errors.fail(code or "ENODEV", errors.text(err)) end
    self._target, self.uri = t, t.uri
  end
  return self._target
end

------------------------------------------------------------------------------------------------ every board

function Board:help()
  local lines = { ("%s (%s, %s): board:VERB(...)"):format(self.device.name, self.transport, self.device.flow) }
  for _, v in ipairs(M.VERBS) do
    if applies(self, v[2]) then lines[#lines + 1] = ("  %-8s %s"):format(v[1], v[3]) end
  end
  for _, v in ipairs(flow_verb_help(self)) do lines[#lines + 1] = ("  %-8s %s"):format(v[1], v[2]) end
  local s = table.concat(lines, "\n")
  return setmetatable({}, { __tostring = function() return s end, __name = "help", text = s })
end

--- The verbs this board has (REPL completion).
function Board:verbs()
  local out = {}
  for _, v in ipairs(M.VERBS) do if applies(self, v[2]) then out[#out + 1] = v[1] end end
  for _, v in ipairs(flow_verb_help(self)) do out[#out + 1] = v[1] end
  return out
end

function Board:_info()
  local d = self.device
  return { name = d.name, description = d.description, transport = self.transport, flow = d.flow }
end

function ShellBoard:info()
  local info = self:_info()
  local t = self:target()
  info.uri = t.uri
  info.arch = t:arch()
  info.libc = t:libc_version()
  local r = self:exec({ "uname", "-srm" }, { timeout = 30, rusage = false })
  info.os = r.ok and r.stdout:match("^%s*(.-)%s*$") or nil
  local cpu = self:exec({ "sh", "-c", "grep -m1 -i -E '^(model name|hardware|cpu model)' /proc/cpuinfo; " ..
    "grep -c ^processor /proc/cpuinfo" }, { timeout = 30, rusage = false })
  if cpu.ok then
    info.cpu = cpu.stdout:match(":%s*([^\n]+)")
    info.cpus = math.tointeger(tonumber(cpu.stdout:match("(%d+)%s*$")))
  end
  return info
end

--- One line saying how an exec ended: "[exit 0 in 0.12 s]", "[killed by KILL in ...]", "[timed out in ...]".
function M.exec_status(r)
  local how = r.timed_out and "timed out" or r.canceled and "interrupted" or
    (r.signal_name and ("killed by " .. r.signal_name)) or ("exit " .. tostring(r.status))
  return ("[%s in %.2f s]"):format(how, r.wall_s or 0)
end

local function echo_output(stream)
  return function(s) stream:write(s) stream:flush() end
end

-- board.echo = true (the REPL's boards): exec shows the command's output as it arrives, and its result prints
-- as the one status line (its fields are all still there). opts.echo overrides it for one call.
function ShellBoard:exec(argv, opts)
  if type(argv) == "string" then argv = { "sh", "-c", argv } end
  local echo = self.echo
  if opts and opts.echo ~= nil then echo = opts.echo end
  if echo then
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    o.on_stdout = o.on_stdout or echo_output(io.stdout)
    o.on_stderr = o.on_stderr or echo_output(io.stderr)
    if o.rusage == nil then o.rusage = false end -- the helper's report line would show among the output
    opts = o
  end
  local r, err, code = self:target():exec(argv, opts)
  if not r then errors.fail(code or "EIO", errors.text(err)) end
  if echo then setmetatable(r, { __tostring = M.exec_status }) end
  return r
end

function ShellBoard:push(src, dst, opts)
  return (errors.check(self:target():push(src, dst, opts)))
end

function ShellBoard:pull(src, dst, opts)
  return (errors.check(self:target():pull(src, dst, opts)))
end

--- What the link to the board carried since the last call (the target's traffic(): round trips, bytes, the
-- time spent connecting; odp.results.schema's `transport`), so each run's record has its own share and the
-- records of a board session add up to all of it. nil for a target with no link (the host), one odp does not
-- count (adb through the adb server) or not opened.
function ShellBoard:traffic_since()
  local t = self._target
  if not (t and t.traffic) then return nil end
  local now, last, d = t:traffic(), self._traffic_mark or {}, {}
  if not now then return nil end -- a link odp does not count (adb through the adb server)
  for k, v in pairs(now) do d[k] = v - (last[k] or 0) end
  self._traffic_mark = now
  d.connect_ms = math.floor(d.connect_ms * 1000 + 0.5) / 1000
  return d
end

--- Makes a local file available on the board for a run (the target's stage: in place on the host, pushed
-- into the remote dir elsewhere, hash-skipped) -> the path on the board, pushed?. opts: mode, ui, sha256 (the
-- local file's). The board remembers what it staged: the same bytes (sha256) staged again on this board are
-- not checked on the board again, so a sweep's later points cost no round trip for their files.
function ShellBoard:stage(path, opts)
  opts = opts or {}
  local key = sys.realpath(path) or path
  local known = self._staged[key]
  if known and opts.sha256 and known.sha256 == opts.sha256 and known.mode == opts.mode then
    return known.where, false
  end
  local where, pushed = errors.check(self:target():stage(path, { mode = opts.mode, ui = opts.ui,
    sha256 = opts.sha256 }))
  self._staged[key] = { where = where, sha256 = opts.sha256, mode = opts.mode }
  return where, pushed
end

--- Where a run's files go on the board (the target's workdir: the run dir itself on the host, the remote dir
-- elsewhere, made once per board). run_dir: the run's directory on this machine; files: what the run is about to
-- stage ({path, mode?, sha256} each), checked on a remote board in the same flight (odp.target.shell.workdir).
function ShellBoard:workdir(run_dir, files)
  local t = self:target()
  if device.kind(self.transport).runs_in_place then return (errors.check(t:workdir(run_dir))) end
  self._workdir = self._workdir or errors.check(t:workdir(run_dir, files))
  return self._workdir
end

--- The preflight checks (odp.target.preflight: ELF machine, glibc, free space) for files = {runner=, model=,
-- data=, allow_emulated=, stage= (a function: what the run stages, ShellBoard:workdir's files, which a remote
-- board checks in the preflight's own flight)}, made once per board and set of files (same paths, sizes and
-- mtimes) -> the facts.
function ShellBoard:preflight(files)
  local parts = {}
  for _, k in ipairs({ "runner", "model", "data" }) do
    local st = files[k] and sys.stat(files[k])
    parts[#parts + 1] = files[k] and ("%s:%s:%s"):format(files[k], st and st.size, st and st.mtime) or ""
  end
  local key = table.concat(parts, "\0") .. (files.allow_emulated and "\0emulated" or "")
  if not self._preflight[key] then
    local t = self:target()
    self._preflight[key] = preflight.check(t, { runner = files.runner, model = files.model,
      data = files.data, device = self.device, remote_dir = t.remote_dir, allow_emulated = files.allow_emulated,
      stage = files.stage and not device.kind(self.transport).runs_in_place and files.stage() or nil })
    local removed = self._preflight[key].removed_partials
    if removed then
      self.ui:info("removed %d file(s) an earlier odp left on %s (partial uploads, unfetched run files): %s",
        #removed, t.uri, table.concat(removed, " "))
    end
  end
  return self._preflight[key]
end

--- Runs the board's flow once (odp.run.point): executorch takes runner=, model=, n= (num_executions), args=
-- and every option of `odp run scripts/host.lua`; ethos_u takes model=, n= (inferences), ...
function Board:profile(opts) return flow_verb(self, "profile", opts or {}) end

function Board:close()
  if self._rtt then pcall(self._rtt.close, self._rtt) self._rtt = nil end
  if self._probe then pcall(probe_mod().close, self._probe) self._probe = nil end
  if self._target then
    -- its own directory on a remote board goes with it (its lease: no other odp sees it running any more)
    -- (made by a preflight that then failed, too: odp.target.shell.close_run_dir knows)
    if self._target.close_run_dir then pcall(self._target.close_run_dir, self._target) end
    self._target:close()
    self._target = nil
  end
  self._traffic_mark = nil -- a new target counts from zero
  self._staged, self._preflight, self._workdir = {}, {}, nil -- a new connection checks again
  if self._twin_started and not self.keep then
    twin().stop(self.device.twin, self.twin_state)
    self._twin_started = nil
  end
  open_boards[self] = nil
end

--- Closes every open board (odp's exit).
function M.close_all()
  for b in pairs(open_boards) do b:close() end
end

------------------------------------------------------------------------------------------------ probe boards

-- The Ethos-U flow's plan for this board (probe, RTT, lines), without the build and flash commands.
--- A probe's link (J-Link, the twin's QEMU) has no round trips odp counts: nil (ShellBoard:traffic_since).
function ProbeBoard:traffic_since() return nil end

function ProbeBoard:_plan()
  if not self._p then
    self._p = flow_verb(self, "plan")
    self._p.twin_state = self.twin_state
  end
  return self._p
end

-- Before a run of the board's flow opens the probe itself (and a flash relaunches the twin): the board lets go
-- of its own probe, RTT and plan (made again on the next probe verb).
function ProbeBoard:_release_probe()
  if self._rtt then self._rtt:close() self._rtt = nil end
  if self._probe then probe_mod().close(self._probe) self._probe = nil end
  self._p = nil
end

-- The twin: a running one (its state directory), else one started here from opts.image or the firmware
-- build of the twin's project (skipped when unchanged).
function ProbeBoard:_twin()
  local tw = self.device.twin
  if not tw or self.twin_state then return end
  local state = twin().state_dir(tw, self.opts)
  if not twin().alive(state) then
    state = state or ((os.getenv("TMPDIR") or "/tmp") .. "/odp-board-" .. sys.getpid() .. "-" .. self.device.name)
    local image = self.opts.image
    if not image then
      local rec = flow_verb(self, "build", {}) -- the flow builds the twin's firmware
      if not rec.ok then errors.fail(rec.error.code, "twin firmware build: " .. rec.error.message) end
      image = rec.images.mram.path
    end
    -- a board that is not kept takes its twin with it when odp ends, however it ends (launch.sh -l)
    twin().launch(tw, image, state, not self.keep)
    self._twin_started = true
  end
  self.twin_state = state
  if self._p then self._p.twin_state = state end
end

function ProbeBoard:info()
  local info = self:_info()
  local p = self:_plan()
  info.backend = p.probe_backend
  info.uri = self.uri
  info.rtt = { address = p.rtt_address, ranges = p.rtt_ranges, channel = p.rtt_channel }
  if self._rtt then info.rtt.attached = self._rtt:channels().address end
  info.twin_state = self.twin_state
  return info
end

function ProbeBoard:probe()
  if not self._probe then
    self:_twin()
    local p = self:_plan()
    self._probe = probe_mod().open(p, "app", self.opts)
    self.uri = p.probe_backend .. (self.twin_state and (":" .. self.twin_state) or "")
  end
  return self._probe
end

local function probe_verb(name, f) ProbeBoard[name] = f end

probe_verb("attach", function(self, opts)
  local p = self:_plan()
  if self._rtt then self._rtt:close() self._rtt = nil end
  self._rtt = probe_mod().attach(self:probe(), p, p.rtt_ranges, (opts and opts.timeout) or 10, "attach")
  return self._rtt
end)

probe_verb("rtt", function(self)
  return self._rtt or self:attach()
end)

probe_verb("reset", function(self, opts)
  local probe, p = self:probe(), self:_plan()
  if self._rtt then self._rtt:close() self._rtt = nil end
  probe_mod().fresh_reset(probe, p, p.rtt_ranges, self.ui)
  if opts and opts.halt then errors.check(probe:halt()) end
  return true
end)

-- A probe verb's failure names the board and the call; a bad argument typed at the prompt is one line
-- (EUSAGE), not the C binding's traceback: the target's addresses and words are 32-bit.
local function checked(self, call, ok, err, code)
  return errors.check(ok, err, code, ("%s: board:%s"):format(self.device.name, call))
end
local function u32(verb, what, v)
  if math.type(v) ~= "integer" or v < 0 or v > 0xFFFFFFFF then
    errors.fail("EUSAGE", ("board:%s: the %s must be an integer 0..0xFFFFFFFF (a 32-bit target), not %s")
      :format(verb, what, type(v) == "string" and ("%q"):format(v) or tostring(v)))
  end
  return v
end

probe_verb("halt", function(self) return (checked(self, "halt()", self:probe():halt())) end)
probe_verb("go", function(self) return (checked(self, "go()", self:probe():go())) end)

probe_verb("read", function(self, addr, n)
  u32("read", "address", addr)
  if math.type(n) ~= "integer" or n < 0 or n > 64 * 1024 * 1024 then
    errors.fail("EUSAGE", ("board:read: the byte count must be an integer 0..64 MiB, not %s"):format(tostring(n)))
  end
  return (checked(self, ("read(0x%08X, %d)"):format(addr, n), self:probe():read(addr, n)))
end)
probe_verb("write", function(self, addr, bytes)
  u32("write", "address", addr)
  if type(bytes) ~= "string" then errors.fail("EUSAGE", "board:write: the data must be a string of bytes") end
  return (checked(self, ("write(0x%08X, %d bytes)"):format(addr, #bytes), self:probe():write(addr, bytes)))
end)
probe_verb("read32", function(self, addr)
  return (string.unpack("<I4", self:read(u32("read32", "address", addr), 4)))
end)
probe_verb("write32", function(self, addr, v)
  u32("write32", "address", addr)
  return self:write(addr, string.pack("<I4", u32("write32", "value", v)))
end)

probe_verb("tail", function(self, ch, opts)
  local p = self:_plan()
  local stream = self:rtt():channel(ch or p.rtt_channel)
  local deadline = opts and opts.timeout and (sys.now() + opts.timeout)
  local n = 0
  while true do
    local left = deadline and (deadline - sys.now()) or 3600
    if left <= 0 then break end
    local ok, err = pcall(function()
      for line in stream:lines { timeout = math.min(left, 1) } do
        io.stdout:write(line, "\n")
        io.stdout:flush()
        n = n + 1
      end
    end)
    if not ok then
      if tostring(err):match("ECANCELED") or sys.cancel_requested() then break end
      error(err, 0)
    end
    if sys.cancel_requested() then break end
  end
  return n
end)


-- Each kind: its own verbs, then every board's; a verb only the other kind has (and its accessor: target,
-- probe) fails with ENOTSUP naming this board.
for _, class in pairs(CLASS) do
  for k, v in pairs(Board) do if class[k] == nil then class[k] = v end end
  for _, other in pairs(CLASS) do
    for k, v in pairs(other) do
      if class[k] == nil and type(v) == "function" and not k:match("^_") then
        class[k] = function(self) enotsup(self, k) end
      end
    end
  end
  class.__index = class
end

return M
