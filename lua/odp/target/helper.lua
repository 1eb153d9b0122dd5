--- odp's side of the resident helper (docs/helper-protocol.md): `odp-rusage --serve` started once per board
-- session on one channel (an SSH exec channel, an adb shell,v2 stream), answering framed requests, so that a
-- sweep point costs one request instead of a session per command. The frames are C (odp.helper, the codec the
-- helper itself uses); this module is the request/answer logic over any channel with
-- `read(n, {timeout=})`, `write(bytes, {timeout=})`, `stderr()` and `close()`.
--   local h = assert(helper.open(channel, { uri = target.uri }))
--   local r = h:run({ "./executor_runner", "--num_executions", "10" }, { cwd = dir, timeout = 600 })
--   local text = h:state(root, cpu_files, props); h:sha256(path); h:free(path); h:close()
-- Any transport failure or malformed answer leaves the client dead (h.dead says why): the caller starts a new
-- helper for its next request. Runs of two scheduler tasks may be in flight at once (protocol 6: the helper
-- queues the second; "Turns" below): a pipelined sweep's points.
local codec = require("odp.helper")
local sys = require("odp.sys")
local wait = require("odp.wait")
local sched = require("odp.core.sched")

local M = { PROTO = codec.PROTO }

local READ_CHUNK = 1 << 16
M.HELLO_TIMEOUT = 15
local REQUEST_TIMEOUT = 60
local STOP_GRACE = 5          -- after TERM: the helper sends KILL at 2 s; its answer must come by then
M.CAPTURE_MAX = 64 << 20      -- bytes of a run's stdout (and of its stderr) kept; the rest is counted, not kept
M.TIMELINE_MAX = 64 << 20     -- bytes of a run's memory timeline asked for (the helper's own bound too)
M.STDOUT_TIMES_MAX = codec.STDOUT_TIMES_MAX -- stdout chunks of a run whose arrival times are kept (the host's bound too)

M.QUEUED_RUNS_MAX = 4 -- runs the helper queues behind the one going (protocol 6; tools/serve.c's bound)

local Client = {}
Client.__index = Client

-- Turns (protocol 6): runs may be sent while others are in flight, each a ticket (its number in sending
-- order); the helper answers strictly in order, so only the oldest unanswered ticket reads the channel. Any
-- other request waits until no run is in flight and has the channel to itself. Inside a scheduler task a wait
-- for one's turn yields (as odp.core.lock's); outside one nothing else can hold a turn, so none is waited for.
local Line = {}
Line.__index = Line

-- The scheduler drops a canceled task's place in line (odp.core.sched's lock waits).
function Line:drop(place)
  for i, q in ipairs(self) do
    if q == place then table.remove(self, i) return end
  end
end

-- Waits until ready(self) holds: nil, "ECANCELED: ..." when the task is canceled meanwhile.
function Client:wait_until(ready)
  while not ready(self) and not self.dead do
    if not (wait.scheduling() and coroutine.isyieldable()) then
      return nil, "EBUSY: the helper on " .. self.uri .. " is busy (outside a scheduled task nothing would free it)",
        "EBUSY"
    end
    local place = { lock = self.line }
    self.line[#self.line + 1] = place
    coroutine.yield(wait.SENTINEL, "lock", place)
    if not place.granted then return nil, "ECANCELED: interrupted while waiting for the helper on " .. self.uri,
      "ECANCELED" end
  end
  return true
end

-- Something changed (a run sent or answered, the channel free): every task in line looks again.
function Client:wake_line()
  local line = self.line
  self.line = setmetatable({}, Line)
  for _, place in ipairs(line) do
    place.granted = true
    place.wake()
  end
end

-- What a run may be sent on: no other request is out, nobody is sending, the helper's queue has room.
local function may_send_run(self)
  return not self.exclusive and not self.sending and self.sent - self.answered <= M.QUEUED_RUNS_MAX
end

-- What any other request needs: the channel to itself.
local function may_use_alone(self)
  return not self.exclusive and not self.sending and self.sent == self.answered
end

-- Runs fn(...) with the channel to itself (no run in flight): the small requests.
function Client:alone(fn, ...)
  local ok, err, code = self:wait_until(may_use_alone)
  if not ok then return nil, err, code end
  if self.dead then return nil, self.dead, "EIO" end
  self.exclusive = true
  local res = table.pack(pcall(fn, self, ...))
  self.exclusive = false
  self:wake_line()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

local function fail(code, fmt, ...)
  return nil, ("%s: " .. fmt):format(code, ...), code
end

-- Marks the client dead with err and closes its channel: nothing runs on the board without it.
function Client:lose(err, code)
  if not self.dead then
    self.dead = err
    self.ch:close()
    self:wake_line()
  end
  return nil, err, code
end

-- The next frame, reading the channel until it is there: type, fields | nil, err, code (the client is lost).
function Client:frame(deadline)
  if self.dead then return nil, self.dead, "EIO" end
  while true do
    local t, f, code = self.dec:next()
    if t then return t, f end
    if f then return self:lose(("%s (from %s)"):format(f, self.uri), code) end
    local left = deadline - sys.now()
    if left <= 0 then return nil, "ETIMEDOUT: no answer from the helper on " .. self.uri, "ETIMEDOUT" end
    local chunk, err, ecode = self.ch:read(READ_CHUNK, { timeout = left })
    if not chunk then
      if ecode == "ETIMEDOUT" or ecode == "ECANCELED" then return nil, err, ecode end
      return self:lose(err, ecode)
    end
    if chunk == "" then
      local why = (self.ch:stderr() or ""):match("[^\n]*[%w][^\n]*")
      return self:lose(("EIO: the helper on %s ended%s"):format(self.uri, why and (": " .. why)
        or " (killed, or the connection or the adb server went away)"), "EIO")
    end
    self.dec:feed(chunk)
  end
end

-- Requests ({type, fields} each) in one write: one message on adb, where each write waits for the device's OKAY
-- before the next may leave (a flight of requests written one by one would cost a round trip each there). One
-- write at a time on the channel: a run's Z and the next run's R may be written by two tasks.
function Client:send_all(reqs)
  local ok, err, code = self:wait_until(function(c) return not c.writing end)
  if not ok then return nil, err, code end
  if self.dead then return nil, self.dead, "EIO" end
  local frames = {}
  for i, r in ipairs(reqs) do frames[i] = codec.encode(r[1], r[2]) end
  self.writing = true
  ok, err, code = self.ch:write(table.concat(frames), { timeout = REQUEST_TIMEOUT })
  self.writing = false
  if not ok then return self:lose(err, code) end
  if #self.line > 0 then self:wake_line() end
  return true
end

function Client:send(t, fields) return self:send_all({ { t, fields } }) end

-- A run's 'R' fields (docs/helper-protocol.md) for argv and Client:run's opts; the timeline's bound with memory.
local function run_fields(argv, opts)
  local fields = {}
  if opts.cwd then fields[#fields + 1] = "cwd=" .. opts.cwd end
  local names = {}
  for k in pairs(opts.env or {}) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    local v = opts.env[k]
    fields[#fields + 1] = v == false and ("unset=" .. k) or ("env=" .. k .. "=" .. tostring(v))
  end
  if opts.cpus then fields[#fields + 1] = "cpus=" .. opts.cpus end
  if opts.counters and opts.counters ~= "none" then fields[#fields + 1] = "counters=" .. opts.counters end
  local timeline_max
  if opts.memory then
    timeline_max = math.min(opts.memory.timeline_max or M.TIMELINE_MAX, M.TIMELINE_MAX)
    fields[#fields + 1] = "memory=" .. timeline_max
    for _, m in ipairs(opts.memory.marks or {}) do fields[#fields + 1] = "mark=" .. m end
    if opts.memory.model then fields[#fields + 1] = "memory_file=" .. opts.memory.model end
  end
  if opts.sample then fields[#fields + 1] = "sample=" .. opts.sample end
  if opts.board then
    for _, p in ipairs(opts.board.rm or {}) do fields[#fields + 1] = "rm=" .. p end
    if opts.board.leases then fields[#fields + 1] = "leases=" .. opts.board.leases end
  end
  if opts.state then
    for i, k in ipairs { "state_root=", "state_cpu=", "state_props=" } do fields[#fields + 1] = k .. opts.state[i] end
  end
  fields[#fields + 1] = "--"
  for _, a in ipairs(argv) do fields[#fields + 1] = tostring(a) end
  return fields, timeline_max
end

--- A run's whole flight as bytes, as Client:run would write it (its opts.ahead requests, then its 'R'): a board
-- session's first, which odp.target.shell puts in the helper's command line (`--serve FIRST`, its hex) to leave
-- with the exec request; M.open's opts.first.
function M.run_flight(argv, opts)
  local frames = {}
  for i, r in ipairs(opts.ahead or {}) do frames[i] = codec.encode(r[1], r[2]) end
  frames[#frames + 1] = codec.encode("R", (run_fields(argv, opts)))
  return table.concat(frames)
end

--- Starts a client on a channel whose command is `odp-rusage --serve`: waits for its hello.
-- -> client | nil, err, code, "version" (the helper speaks another protocol: push odp's own and start again)
-- opts.absent: a line the channel's command prints instead of starting the helper, followed by a line naming the
-- board's arch (a bring-up that found no helper, or another build): with opts.install(arch) -> bytes, those bytes
-- are written to the command's stdin (it installs them as the helper and starts it) and the hello is waited
-- for; without (or when install returns nil) nil, "ENOTFOUND: ...", "ENOTFOUND", "absent", and what the command
-- printed after that line (4 KiB at most).
-- opts.first = {flight = M.run_flight(argv, run_opts), opts = run_opts}: a run the channel's command already holds
-- (the helper's `--serve FIRST`), answered behind the hello; where the command installs the helper instead, the
-- flight is written once the installed helper greets (not behind its bytes: a `head -c` that reads its pipe in
-- blocks, as busybox's may, would swallow it). The caller then runs it (client:run(argv, run_opts), that same
-- table) before any other request.
function M.open(channel, opts)
  opts = opts or {}
  local self = setmetatable({ ch = channel, dec = codec.decoder(), uri = opts.uri or "the board",
    line = setmetatable({}, Line), sent = 0, answered = 0, abandoned = {} }, Client)
  local deadline, installed = sys.now() + (opts.timeout or M.HELLO_TIMEOUT), false
  if opts.absent then
    local head = ""
    local function more()
      local chunk = channel:read(4096, { timeout = math.max(0, deadline - sys.now()) })
      if not chunk or chunk == "" then return false end
      head = head .. chunk
      return true
    end
    while #head < 2 and more() do end
    if head:sub(1, #opts.absent + 1) == opts.absent .. "\n" then
      -- the arch line; the command then waits for the helper's bytes, or has ended
      while #head < 4096 and not head:find("\n", #opts.absent + 2, true) and more() do end
      local rest = head:sub(#opts.absent + 2, 4096)
      local bytes = opts.install and head:find("\n", #opts.absent + 2, true) and opts.install(rest:match("^%s*(%S+)"))
      if not bytes then
        while #head < 4096 and more() do end
        self:lose("absent")
        return nil, ("ENOTFOUND: no helper on %s"):format(self.uri), "ENOTFOUND", "absent",
          head:sub(#opts.absent + 2, 4096)
      end
      local ok, err, code = channel:write(bytes, { timeout = REQUEST_TIMEOUT })
      if not ok then
        self:lose(err, code)
        return nil, err, code
      end
      head = head:sub(head:find("\n", #opts.absent + 2, true) + 1)
      installed = true
      deadline = sys.now() + (opts.timeout or M.HELLO_TIMEOUT) -- the board checks the bytes, then starts them
    end
    self.dec:feed(head)
  end
  local t, f, code = self:frame(deadline)
  if not t then
    self:lose(f, code)
    return nil, f, code
  end
  if t ~= "H" or f[1] ~= "odp-helper" then
    self:lose("not odp's helper")
    return fail("EPROTO", "%s: the helper did not greet as odp's helper", self.uri)
  end
  if f[2] ~= tostring(codec.PROTO) then
    self:lose("another protocol")
    return nil, ("EPROTO: the helper on %s speaks protocol %s; odp speaks %d"):format(self.uri,
      tostring(f[2]):sub(1, 16), codec.PROTO), "EPROTO", "version"
  end
  self.arch = f[3]
  self.self_sha256 = f[4] and f[4]:match("^%x+$") -- its own file's, as its 'X' would answer (protocol 4)
  if opts.first then
    if installed then
      local ok, err, code = channel:write(opts.first.flight, { timeout = REQUEST_TIMEOUT })
      if not ok then
        self:lose(err, code)
        return nil, err, code
      end
    end
    self.sent, self.first = 1, opts.first.opts -- in flight: Client:run reads it
  end
  return self
end

-- The answer to the oldest request sent and not yet answered: its fields | nil, err, code (an error answer
-- leaves the client usable).
function Client:answer(timeout)
  local at, f, fcode = self:frame(sys.now() + (timeout or REQUEST_TIMEOUT))
  if not at then
    -- an answer that may still come would be taken for the next one's: the stream is out of step
    if fcode == "ETIMEDOUT" or fcode == "ECANCELED" then self:lose(f, fcode) end
    return nil, f, fcode
  end
  if at == "A" then return f end
  if at == "!" then
    local ecode = tostring(f[1] or "EIO"):match("^E%u+$") or "EIO"
    return nil, ("%s: %s"):format(ecode, tostring(f[2] or "")), ecode
  end
  return self:lose(("EPROTO: unexpected answer '%s' from the helper on %s"):format(at:byte() < 32 and "?" or at,
    self.uri), "EPROTO")
end

--- One small request: the answer's fields | nil, err, code. An error answer leaves the client usable.
function Client:request(t, fields, timeout)
  return self:alone(function()
    local ok, err, code = self:send(t, fields)
    if not ok then return nil, err, code end
    return self:answer(timeout)
  end)
end

-- The answers to the k oldest requests sent: a list with {fields} or {nil, err, code} each | nil, err, code
-- (the channel failed: the client is lost).
function Client:answers(k, timeout)
  local out = {}
  for i = 1, k do
    local f, err, code = self:answer(timeout)
    if not f and self.dead then return nil, err, code end
    out[i] = f and { f } or { nil, err, code }
  end
  return out
end

--- Small requests ({type, fields} each) written together, then their answers read: one round trip for all of
-- them (the helper answers in order). -> Client:answers' list | nil, err, code
function Client:pipeline(reqs, timeout)
  return self:alone(function()
    local ok, err, code = self:send_all(reqs)
    if not ok then return nil, err, code end
    return self:answers(#reqs, timeout)
  end)
end

--- The device-state snapshot's text (odp.target.device_state.parse).
function Client:state(root, cpu_files, props, timeout)
  local f, err, code = self:request("S", { root, cpu_files, props }, timeout)
  if not f then return nil, err, code end
  return f[1] or ""
end

--- sha256 (hex) of a regular file on the board; nil when there is none. mode (an integer): the file also gets
-- that mode (when it has another) in the same request.
function Client:sha256(path, mode)
  local f, err, code = self:request("X", { path, mode and ("%o"):format(mode) or nil })
  if not f then return nil, err, code end
  local hex = f[1]
  if hex and not hex:match("^%x+$") then return fail("EPROTO", "the helper's sha256 of %s is not hex", path) end
  return hex
end

--- Free bytes of the file system holding path (or its nearest existing parent).
function Client:free(path)
  local f, err, code = self:request("F", { path })
  if not f then return nil, err, code end
  return math.tointeger(tonumber(f[1] or "")) or fail("EPROTO", "the helper's free space is not a number")
end

--- The first max bytes of a file on the board (max <= ~1 MiB).
function Client:read(path, max)
  local f, err, code = self:request("G", { path, tostring(max) })
  if not f then return nil, err, code end
  return f[1] or ""
end

--- Bytes of a file per 'P' frame: the frame's bound (1 MiB) less room for the other fields (a path is at most
-- PATH_MAX_BYTES).
M.CHUNK = (1 << 20) - 8192
local PATH_MAX_BYTES = 4096

--- Uploads the local file src to path on the board in 'P' chunks sent one after the other (the helper answers
-- only the last), followed in the same flight by opts.after ({type, fields}
-- requests, e.g. a link of the file): a file costs a round trip or so, not one a chunk. The board checks the
-- whole file's sha256 before it appears under path (docs/helper-protocol.md). opts: mode (an integer, default
-- 0644), sha256 (src's, when known), on_progress(done, total) as chunks go. -> true, the answers to opts.after
-- (as Client:pipeline's) | nil, err, code (ENOSPC, ECRC: the bytes arrived changed, or src changed meanwhile)
local function upload(self, src, path, opts)
  opts = opts or {}
  if #path > PATH_MAX_BYTES then return fail("EUSAGE", "a path on the board longer than %d bytes", PATH_MAX_BYTES) end
  local f, ferr = io.open(src, "rb")
  if not f then return fail("EIO", "cannot read %s", tostring(ferr)) end
  local size = f:seek("end")
  f:seek("set")
  local sha = opts.sha256 or sys.sha256_file(src)
  local mode = ("%o"):format(opts.mode or tonumber("644", 8))
  local sent, last = 0, false
  repeat
    local data = f:read(M.CHUNK) or ""
    last = #data < M.CHUNK or sent + #data >= size -- a file cut short meanwhile ends here (its hash then differs)
    -- an LZ4 block where that is shorter (a runner's code: ~1/3), decoded by the helper (protocol 8): fewer bytes
    -- on a slow link, fewer of the server's channel windows (Dropbear's are 24 KB) each a round trip
    local block = sys.lz4_compress(data)
    local ok, err, code = self:send("P", { path, mode, tostring(sent), last and sha or "", block and tostring(#data)
      or "", block or data })
    if not ok then f:close() return nil, err, code end
    sent = sent + #data
    if opts.on_progress then opts.on_progress(sent, size) end
  until last
  f:close()
  for _, r in ipairs(opts.after or {}) do
    local ok, err, code = self:send(r[1], r[2])
    if not ok then return nil, err, code end
  end
  -- an upload is answered once, at its last chunk (with the first failure of any)
  local got, err, code = self:answers(1 + #(opts.after or {}))
  if not got then return nil, err, code end
  if got[1][2] then return nil, got[1][2], got[1][3] end
  return true, table.move(got, 2, #got, 1, {})
end

function Client:put(src, path, opts)
  return self:alone(upload, src, path, opts)
end

function Client:mkdir(path)
  local f, err, code = self:request("M", { path })
  if not f then return nil, err, code end
  return true
end

function Client:chmod(path, mode)
  local f, err, code = self:request("C", { path, ("%o"):format(mode) })
  if not f then return nil, err, code end
  return true
end

--- Sends a signal to a process group on the board.
function Client:kill(pgid, signal)
  local f, err, code = self:request("K", { tostring(pgid), tostring(signal or 15) })
  if not f then return nil, err, code end
  return true
end

local TERM = 15

-- Keeps a run's output: at most CAPTURE_MAX (or capture_limit) bytes per stream, the rest counted.
local function sink(r, which, limit, cb)
  local parts, kept = {}, 0
  return function(data)
    if cb then cb(data) end
    local room = limit - kept
    if room < #data then
      r[which .. "_dropped"] = (r[which .. "_dropped"] or 0) + #data - math.max(room, 0)
      data = data:sub(1, math.max(room, 0))
    end
    if #data > 0 then
      parts[#parts + 1] = data
      kept = kept + #data
    end
  end, function() return table.concat(parts) end
end

--- Where a run's memory timeline goes as its 'T' frames arrive: path (on this machine) under a partial name,
-- renamed when the run's answer is whole. The helper was asked for at most max bytes: more is a broken helper.
-- -> sink with add(bytes) -> nil | why more is refused, finish() -> nil | why path could not be written (it
-- is then absent), abandon() (the run was lost: nothing is left).
function M.timeline_sink(path, max)
  local part = path and (path .. ".odp-part-" .. sys.getpid())
  local sink = { max = max, bytes = 0 }
  local f, err
  function sink:add(data)
    self.bytes = self.bytes + #data
    if self.bytes > max then return ("sent more of the memory timeline than the %d bytes asked"):format(max) end
    if not part or err then return nil end
    if not f then
      f, err = io.open(part, "wb")
      if not f then return nil end
    end
    local ok, werr = f:write(data)
    if not ok then err = werr end
  end
  function sink:abandon()
    if f then f:close() end
    f = nil
    if part then os.remove(part) end
  end
  function sink:finish()
    if not part then return nil end
    if f then
      local ok, cerr = f:close()
      f = nil
      if not ok then err = err or cerr end
    elseif not err and self.bytes == 0 then
      return nil -- the helper kept none (it says why in its report: timeline=failed|none)
    end
    if not err then
      local ok, rerr = sys.rename(part, path)
      if not ok then err = rerr end
    end
    if err then os.remove(part) return ("EIO: the memory timeline %s: %s"):format(path, tostring(err)) end
  end
  return sink
end

-- When each stdout chunk of a run was read on the board ('O''s second field: CLOCK_MONOTONIC µs since the program's
-- start), as odp.proc.run's stdout_times: {t_us, ends (the stdout bytes up to each chunk's end), cut (chunks past
-- M.STDOUT_TIMES_MAX, counted only)}. -> the table, and add(data, us) -> nil | why the field is not a time.
local function stdout_times()
  local c, bytes, last = { t_us = {}, ends = {}, cut = 0 }, 0, 0
  return c, function(data, us)
    local t = type(us) == "string" and #us <= 15 and us:match("^%d+$") and math.tointeger(us)
    if not t then return "sent an output chunk without the time it was read" end
    if t < last then return "sent output chunk times that go back" end
    last, bytes = t, bytes + #data
    if #c.t_us >= M.STDOUT_TIMES_MAX then
      c.cut = c.cut + 1
    else
      c.t_us[#c.t_us + 1], c.ends[#c.ends + 1] = t, bytes
    end
  end
end

--- Runs argv on the board through the helper, measured like `odp-rusage [--cpus] [--counters] [--memory]
-- [--sample] -- argv`. opts: cwd, env ({K = V | false}), timeout, cpus ("0-3"), counters ("basic"|"all"), memory
-- ({csv, marks, model, timeline_max}: memory by phase, docs/memory.md; the timeline comes back in the helper's
-- 'T' frames, at most timeline_max bytes (default and most M.TIMELINE_MAX), into csv, a file on THIS machine,
-- which appears only whole), sample ("HZ,FILE": the sample stream written to FILE on the board,
-- tools/sample.h), state ({root, cpu_files, props}: the device state, as Client:state, read just before the
-- program starts and just after it ended), board ({rm = {paths directly in cwd, 16 at most}, leases = the
-- remote dir}: once the program ended, its files removed (when it exited: not after a signal) and the leases on the
-- board read, the point's end in its own answer), capture_limit, on_stdout, on_stderr, on_sent (called once the
-- request is sent: other runs may be sent behind it, protocol 6). -> the odp.proc.run result
-- shape before the report is applied: {ok, status, stdout, stderr, wall_s, timed_out, canceled, stdout_dropped?,
-- stderr_dropped?, stdout_times (when each stdout chunk was read, on the board's clock: as
-- odp.proc.run's), timeline_error? (csv could not be written here: why), state_text? ({before, after}: with
-- state, when the program ran), board_text? (with board, when the program ran: the leases' lines as
-- odp.target.shell reads them, then "unremoved PATH: WHY" lines)}, report (the ODP-RUSAGE lines, "" when the program
-- never ran) | nil, err, code (the helper or the channel failed: the client is dead).
-- opts.ahead: small requests ({type, fields} each) written in the run's own flight before it, one round trip for
-- them and the run (the helper answers them before it starts the program); their answers, as Client:answers', are
-- the result's `ahead`.
function Client:run(argv, opts)
  opts = opts or {}
  local fields, timeline_max = run_fields(argv, opts)
  local timeline = timeline_max and M.timeline_sink(opts.memory.csv, timeline_max)
  local ahead = opts.ahead
  local first = self.first == opts
  self.first = nil
  while true do
    local ticket, err, code
    if first then
      ticket, first = 1, false -- sent with the helper's start (M.open's opts.first)
      if opts.on_sent then opts.on_sent() end
    else
      ticket, err, code = self:send_run(fields, opts.on_sent, ahead)
    end
    if not ticket then return nil, err, code end
    local r, report, rcode = self:read_run(ticket, opts, timeline, ahead)
    if r ~= "again" then return r, report, rcode end
    ahead = nil -- answered before the run was dropped
  end
end

-- Sends a run once it may go (may_send_run; with requests ahead of it in its flight, may_use_alone, so that their
-- answers come next): its ticket | nil, err, code. on_sent (odp.run.sweep's next point) is told: from here on the
-- board need not wait for the link.
function Client:send_run(fields, on_sent, ahead)
  local ok, err, code = self:wait_until(ahead and may_use_alone or may_send_run)
  if not ok then return nil, err, code end
  -- lost while this run waited for its turn to be sent: nothing of it reached the board, so it goes again as a
  -- queued one does (EAGAIN), never failed as one that may have started
  if self.dead then return nil, self.dead, "EAGAIN" end
  self.sending = true
  local ticket = self.sent + 1
  self.sent = ticket
  local reqs = table.move(ahead or {}, 1, #(ahead or {}), 1, {})
  reqs[#reqs + 1] = { "R", fields }
  ok, err, code = self:send_all(reqs)
  self.sending = false
  if not ok then return nil, err, code end -- the client is lost (and the line woken)
  -- the reader, parked on the same connection, looks again: the write may have taken in what it waits for
  local reader, task = self.reader, sched.current()
  if reader and reader ~= task then reader.scheduler:nudge(reader) end
  self:wake_line()
  if on_sent then on_sent() end
  return ticket
end

-- A ticket's terminal frame is read (or the client lost): the next one's turn. One whose task gave up waiting
-- for it (canceled) is read to its end here, its run stopped, so the stream stays in step for those after it.
function Client:settle(ticket)
  self.answered, self.reader = ticket, nil
  while self.abandoned[self.answered + 1] and not self.dead do
    local t = self.answered + 1
    self.abandoned[t] = nil
    local deadline, stopping = sys.now() + 2 * STOP_GRACE, false
    while true do
      local at, _, fcode = self:frame(deadline)
      if at == "D" or at == "!" then break end
      if not at then
        self:lose(("ETIMEDOUT: the helper on %s did not end a run nobody waits for"):format(self.uri), fcode)
        break
      end
      if not stopping then stopping = self:send("Z", { tostring(TERM), tostring(t) }) end
    end
    self.answered = t
  end
  self:wake_line()
end

-- Reads ticket's run, once its turn came: Client:run's results | "again" (the helper dropped it, a Z to the run
-- before it: it goes again).
function Client:read_run(ticket, opts, timeline, ahead)
  local ok, err, code = self:wait_until(function(c) return c.answered == ticket - 1 end)
  if not ok or self.dead then
    -- queued behind a run the channel was lost under: never started, or started as that one ended and killed
    -- with the helper (its stdin closed): nothing of it was measured, and the transports run it again
    -- (odp.target.outage's request: EAGAIN, never shown)
    if self.dead then return nil, self.dead, "EAGAIN" end
    self.abandoned[ticket] = true
    return nil, err, code
  end
  self.reader = sched.current()
  local res = table.pack(pcall(self.read_frames, self, ticket, opts, timeline, ahead))
  self:settle(ticket)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- The frames of the run being read, to its end: Client:run's results, or read_run's "again".
function Client:read_frames(ticket, opts, timeline, ahead)
  local r = { timed_out = false, canceled = false }
  local function lost(...)
    if timeline then timeline:abandon() end
    return ...
  end
  if ahead then
    local err, code
    r.ahead, err, code = self:answers(#ahead)
    if not r.ahead then return lost(nil, err, code) end
  end
  local t0 = sys.now() -- the run starts on the board about now: the one before it (or its flight's requests) ended
  local limit = math.min(opts.capture_limit and opts.capture_limit > 0 and opts.capture_limit or M.CAPTURE_MAX,
    M.CAPTURE_MAX)
  local put_out, got_out = sink(r, "stdout", limit, opts.on_stdout)
  local put_err, got_err = sink(r, "stderr", limit, opts.on_stderr)
  local add_time
  r.stdout_times, add_time = stdout_times()
  local deadline = opts.timeout and t0 + opts.timeout or math.huge
  local stopping
  while true do
    local t, f, fcode = self:frame(stopping or deadline)
    if t == "O" then
      local terr = #f ~= 2 and ("sent an output chunk of %d fields, not 2 (its bytes, when it was read)"):format(#f)
        or add_time(f[1], f[2])
      if terr then return lost(self:lose(("EPROTO: the helper on %s %s"):format(self.uri, terr), "EPROTO")) end
      put_out(f[1])
    elseif t == "E" then
      put_err(f[1] or "")
    elseif t == "T" then
      if not timeline then
        return self:lose(("EPROTO: a memory timeline from the helper on %s for a run without memory by phase"):format(
          self.uri), "EPROTO")
      end
      local terr = timeline:add(f[1] or "")
      if terr then return lost(self:lose(("EPROTO: the helper on %s %s"):format(self.uri, terr), "EPROTO")) end
    elseif t == "D" then
      if timeline then r.timeline_error = timeline:finish() end
      r.status = math.tointeger(tonumber(f[1] or "")) or 255
      r.stdout, r.stderr, r.wall_s = got_out(), got_err(), sys.now() - t0
      r.ok = r.status == 0 and not r.timed_out and not r.canceled
      r.signal_name = f[3] and f[3]:match("^%u[%u%d]*$")
      if opts.state and f[5] then r.state_text = { before = f[4], after = f[5] } end
      if opts.board then r.board_text = f[6] end
      if r.canceled then sys.cancel_request() end -- lifted to stop the program; odp still ends with 130
      return r, f[2] or ""
    elseif t == "!" and f[1] == "EAGAIN" and not r.canceled and not r.timed_out then
      return "again" -- dropped, never run: a Z stopped the run before it
    elseif t then
      local what = ("unexpected frame '%s' from the helper on %s during a run"):format(t:byte() < 32 and "?" or t,
        self.uri)
      if r.canceled then
        -- stopping after a Ctrl-C: the helper is given up (it ends with its channel), the run stays interrupted
        self:lose("EPROTO: " .. what, "EPROTO")
        sys.cancel_request()
        return lost(nil, ("ECANCELED: interrupted; %s as it was stopped, %s given up"):format(what, self.uri),
          "ECANCELED")
      end
      return lost(self:lose("EPROTO: " .. what, "EPROTO"))
    elseif (fcode == "ETIMEDOUT" or fcode == "ECANCELED") and not stopping then
      -- stop the program's whole group on the board (TERM, the helper KILLs 2 s later), then take its answer
      if fcode == "ECANCELED" then r.canceled = true sys.cancel_clear() else r.timed_out = true end
      stopping = sys.now() + STOP_GRACE
      -- the Z names its run: one that crosses this run's answer must not stop the next run, started meanwhile
      local sent, serr, scode = self:send("Z", { tostring(TERM), tostring(ticket) })
      if not sent then
        if r.canceled then sys.cancel_request() end
        return lost(nil, serr, scode)
      end
    else
      if stopping and self.dead == nil then
        -- no answer within the grace: the channel goes, and with it the helper (its stdin closes: it KILLs)
        self:lose(("ETIMEDOUT: the helper on %s did not end the program after TERM and KILL"):format(self.uri))
      end
      if r.canceled then sys.cancel_request() end
      return lost(nil, f, fcode)
    end
  end
end

--- Closes the channel: the helper sees its stdin end and exits.
function Client:close()
  if not self.dead then
    self.dead = "closed"
    self.ch:close()
  end
end

return M
