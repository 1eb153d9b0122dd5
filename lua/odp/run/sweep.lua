--- Sweeps: run a measurement over the cartesian product of parameter values, appending each point's result
-- record to a JSONL file (fsync'd) as it completes. Re-running the same sweep resumes: points whose
-- parameters already have a successful record in the file are skipped, so a sweep killed at any moment loses
-- no finished point.
--   local sweep = require("odp.run.sweep")
--   sweep.run { points = sweep.points { "num_executions=1,10,100", "cpu_threads=1,4" }, ["repeat"] = 3,
--     out = "sweep.jsonl", run_point = function(params, rep) return measure(params) end }
local errors = require("odp.core.errors")
local result = require("odp.results.result")
local sys = require("odp.sys")
local sched = require("odp.core.sched")
local run = require("odp.run")

local M = {}

--- Converts a value written on the command line: integers and numbers become numbers, true/false booleans.
function M.convert(s)
  if s == "true" then return true elseif s == "false" then return false end
  local n = tonumber(s)
  if n and s:match("^%s*[-+]?[%d.]") then return math.tointeger(n) or n end
  return s
end

--- Parses "name=v1,v2,..." -> name (dashes turned into underscores, like option keys), {values}.
function M.parse_spec(spec)
  local name, list = tostring(spec):match("^%s*([%w_%-%.]+)%s*=(.*)$")
  if not name then error(("parameter spec '%s' is not name=v1,v2,..."):format(tostring(spec)), 2) end
  local values = {}
  for v in (list .. ","):gmatch("([^,]*),") do
    v = v:match("^%s*(.-)%s*$")
    if v ~= "" then values[#values + 1] = M.convert(v) end
  end
  if #values == 0 then error(("parameter '%s' has no values"):format(name), 2) end
  return (name:gsub("-", "_")), values
end

--- The cartesian product of parameter specs, the first parameter varying slowest.
-- params: a list whose items are "name=v1,v2" strings or {name, {values}} pairs.
-- Returns a list of points, each {name = value, ...}; the names in order are in the list's field `names`.
function M.points(params)
  local dims = {}
  for _, p in ipairs(params or {}) do
    local name, values
    if type(p) == "table" then name, values = p[1], p[2] else name, values = M.parse_spec(p) end
    for _, d in ipairs(dims) do
      if d.name == name then error(("parameter '%s' given twice"):format(name), 2) end
    end
    dims[#dims + 1] = { name = name, values = values }
  end
  local points = { {} }
  for _, d in ipairs(dims) do
    local nextp = {}
    for _, base in ipairs(points) do
      for _, v in ipairs(d.values) do
        local p = {}
        for k, x in pairs(base) do p[k] = x end
        p[d.name] = v
        nextp[#nextp + 1] = p
      end
    end
    points = nextp
  end
  local names = {}
  for i, d in ipairs(dims) do names[i] = d.name end
  points.names = names
  return points
end

-- Canonical text of a parameter value: 10 and 10.0 (JSON round trip) are the same point.
local function canon(v)
  if type(v) == "number" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then return ("%d"):format(v) end
  if type(v) == "number" then return ("%.17g"):format(v) end
  return tostring(v)
end

--- The key a point is matched by: its parameters' names and values, sorted.
function M.key(params, names)
  local parts = {}
  for _, k in ipairs(names) do parts[#parts + 1] = k .. "=" .. canon(params[k]) end
  table.sort(parts)
  return table.concat(parts, "\0")
end

--- `--reference host` (scripts/sweep.lua): each point of an executorch sweep runs once on this machine with
-- o.runner, the same options and inputs, its outputs kept; that run's directory is the point's reference on
-- every board. o = {flow (the declared script), points, opts_for(params) -> the flow's options, args, runner,
-- ui}. -> {[M.key(params)] = run_dir}. A reference run that fails fails the sweep (exit 1): nothing could be
-- compared with it.
function M.host_references(o)
  if o.flow.flow ~= "executorch" then
    errors.fail("EUSAGE", "--reference host compares runners' outputs: sweep an executorch flow script")
  end
  if not o.runner then
    errors.fail("EUSAGE", "--reference host needs the runner for this machine: --reference-runner FILE")
  end
  local board = run.open_board({ name = "host", transport = "host", flow = "executorch" }, { ui = o.ui })
  local refs = {}
  local ok, err = pcall(function()
    for _, params in ipairs(o.points) do
      local po = o.opts_for(params)
      po.runner, po.reference, po.outputs = o.runner, nil, true
      po.max_abs_err, po.min_cosine, po.min_snr = nil, nil, nil
      local rec = run.point(board, "executorch", po, o.args)
      local key = M.key(params, o.points.names)
      if not rec.ok then
        errors.fail(rec.error and rec.error.code or "EFAIL", ("--reference host: the reference run on this machine " ..
          "failed (%s): %s"):format(key:gsub("%z", " "), rec.error and rec.error.message or "?"))
      end
      refs[key] = rec.artifacts.run_dir
      if o.ui then o.ui:info("reference (this machine, %s): %s", key:gsub("%z", " "), rec.artifacts.run_dir) end
    end
  end)
  run.close(board)
  if not ok then error(err, 0) end
  return refs
end

--- Reads a sweep's JSONL file -> list of records (a torn last line, from a kill mid-write, is ignored)
-- and whether the file ends in the middle of a line.
function M.load(path)
  local f = io.open(path, "rb")
  if not f then return {}, false end
  local s = f:read("a")
  f:close()
  local records = {}
  for line in s:gmatch("[^\n]+") do
    local r = result.decode(line)
    if type(r) == "table" then records[#records + 1] = r end
  end
  return records, #s > 0 and s:sub(-1) ~= "\n"
end

local function check_opts(opts, allowed)
  for k in pairs(opts) do
    if not allowed[k] then error(("unknown option '%s'"):format(tostring(k)), 3) end
  end
end

-- Takes --out for this sweep: its lock (a flock on the file itself, so every path and every user that
-- reaches it, and another NFS client, is the same writer: a second sweep fails with EBUSY, exit 2, naming
-- the pid when this machine sees it; a dead one's lock died with it), the count of successful records per
-- point key (per board and point key when by_board), and a torn last line mended. Returns the lock and the
-- counts (out nil: none).
local function open_out(out, names, by_board)
  if not out then return nil, {} end
  errors.check(sys.append_sync(out, "")) -- created as the writer's own file (its message if it cannot be)
  local lock, lerr, lcode, holder = sys.lock(out)
  if not lock then
    if lcode == "EBUSY" then
      local real = sys.realpath(out)
      errors.fail("EUSAGE", ("%s is being written by another sweep (%s)%s: wait for it to finish, "
        .. "or give this one another --out"):format(out, holder > 0 and ("pid " .. holder)
          or "a process this machine does not see: another NFS client?",
          real and real ~= out and (" as " .. real) or ""))
    end
    errors.check(lock, lerr, lcode) -- the file and why, once, exit 3
  end
  local old, torn = M.load(out)
  local done_count = {}
  for _, r in ipairs(old) do
    if r.ok ~= false and type(r.params) == "table" then
      local k = M.key(r.params, names)
      if by_board then k = tostring(r.board) .. "\0" .. k end
      done_count[k] = (done_count[k] or 0) + 1
    end
  end
  if torn then errors.check(sys.append_sync(out, "\n")) end
  return lock, done_count
end

-- The parameter names of points (points.names, else every key, sorted).
local function point_names(points)
  if points.names then return points.names end
  local seen, names = {}, {}
  for _, p in ipairs(points) do
    for k in pairs(p) do if not seen[k] then seen[k] = true names[#names + 1] = k end end
  end
  table.sort(names)
  return names
end

-- Whether e, raised by a point's run, is a failure it reports ({code, message}: the board, the measurement)
-- rather than a bug.
local function failure(e) return type(e) == "table" and e.code ~= nil end

-- A bug's message with its traceback (a failure as it is).
local function bug_traceback(e)
  if failure(e) or tostring(e):find("\nstack traceback:", 1, true) then return e end
  return debug.traceback(tostring(e), 2)
end

-- A failed record for a point whose run raised e.
local function failed_record(e)
  local code = type(e) == "table" and e.code or "EFAIL"
  return { schema = result.SCHEMA, ok = false,
    error = { code = code, message = type(e) == "table" and (e.message or tostring(e)) or tostring(e),
      exit = type(e) == "table" and e.exit or errors.exit_status(code) } }
end

-- M.run's points after the first `recorded`, two at once on one board: point n+1 starts (a task of odp.core.sched)
-- once point n's run request is sent (the task's on_run_sent, told by odp.target.shell's helper_exec: the point's
-- measured run, not its preflight's) and point n-1 is recorded, or once point n is recorded; may_overlap(params,
-- next_params) says whether it may start that early. Outcomes are recorded (record(n, item, ok, rec)) in point
-- order as they come; a record that raises (a bug, Ctrl-C) stops the sweep with that error once the point still
-- going has ended.
local function pipelined(todo, run_point, record, may_overlap, recorded)
  local s = sched.new()
  local outcome, sent, started = {}, {}, recorded
  local stop
  local start
  local function next_may_start()
    local n = started + 1
    if stop or n > #todo then return false end
    return recorded >= n - 1 or (sent[n - 1] and recorded >= n - 2 and may_overlap(todo[n - 1].params, todo[n].params))
  end
  local function advance()
    while next_may_start() do start(started + 1) end
  end
  function start(n)
    started = n
    local item = todo[n]
    s:spawn(function()
      sched.current().on_run_sent = function()
        sent[n] = true
        advance()
      end
      outcome[n] = table.pack(xpcall(run_point, bug_traceback, item.params, item.rep))
      sched.current().on_run_sent = nil
      while not stop and outcome[recorded + 1] do
        local k = recorded + 1
        local done, err = pcall(record, k, todo[k], table.unpack(outcome[k], 1, outcome[k].n))
        outcome[k] = nil
        recorded = k
        if not done then stop = err end
      end
      advance()
    end, { name = "point " .. n })
  end
  advance()
  local ok, err = pcall(s.run, s)
  if stop then error(stop, 0) end
  if not ok then error(err, 0) end
end

--- Runs every point `repeat` times. opts:
--   points     list from sweep.points (required)
--   repeat     records per point (default 1)
--   out        JSONL path (required): each record is appended and fsync'd as soon as it exists; the file
--              itself is flock'd meanwhile (a second sweep on it fails with EBUSY, exit 2, naming the pid)
--   run_point  function(params, rep) -> record (a table; its params get the point's values merged in).
--              A failure it raises ({code, message}: errors.fail) becomes a failed record {ok = false, error =
--              {code, message}} and the sweep goes on; failed records do not count as done, so a rerun
--              retries them. Any other error is a bug: the sweep stops and raises it with its traceback (the
--              records already written stay; a rerun resumes after them).
--   on_progress function(done, total, eta_s, params) after each record (ETA from the mean time per record)
--   ui         an odp.core.ui: draws a progress line with ETA
--   overlap    function(params, next_params) -> whether the next point may start while this one's run is going
--              (the same board: odp.target.helper queues its run behind this one's, docs/helper-protocol.md
--              "What a point costs on a link"). With it two points run at once as scheduler tasks (the first
--              alone: it starts the board's session): the next starts once this one's run request is sent;
--              records are still written in point order.
-- Returns {records = {...} (this run's), skipped = n (found in the file), failed = n, total = n}.
function M.run(opts)
  check_opts(opts, { points = true, ["repeat"] = true, out = true, run_point = true, on_progress = true, ui = true,
    overlap = true })
  local points = assert(opts.points, "sweep.run: points is required")
  local out = assert(opts.out, "sweep.run: out is required")
  local run_point = assert(opts.run_point, "sweep.run: run_point is required")
  local reps = opts["repeat"] or 1
  assert(math.type(reps) == "integer" and reps >= 1, "sweep.run: repeat must be a positive integer")
  local names = point_names(points)

  local lock <close>, done_count = open_out(out, names, false)
  local todo, skipped = {}, 0
  for i, p in ipairs(points) do
    local have = done_count[M.key(p, names)] or 0
    for rep = 1, reps do
      if rep <= have then skipped = skipped + 1 else todo[#todo + 1] = { params = p, rep = rep, index = i } end
    end
  end

  local total, started = #todo, sys.now()
  local bar = opts.ui and opts.ui:progress("sweep", total)
  if opts.ui and skipped > 0 then opts.ui:info("sweep: %d record(s) already in %s, skipped", skipped, out) end
  local records, failed = {}, 0
  -- point n's outcome (run_point's, through xpcall) becomes its record, written at once
  local function record(n, item, ok, rec)
    if not ok then
      if type(rec) == "table" and rec.code == "ECANCELED" then error(rec, 0) end
      -- a bug (in the user's run_point or in odp) stops the sweep with its traceback; the points already run
      -- are in the file, and a rerun resumes after them
      if not failure(rec) then
        if bar then bar:finish(("stopped by an error after %d of %d"):format(n - 1, total)) end
        error(rec, 0)
      end
      rec = failed_record(rec)
    end
    if type(rec) ~= "table" then
      rec = { schema = result.SCHEMA, ok = false,
        error = { code = "EFAIL", message = "run_point returned " .. type(rec) .. ", not a record" } }
    end
    rec.params = rec.params or {}
    for k, v in pairs(item.params) do rec.params[k] = v end
    rec.sweep = { point = item.index, rep = item.rep, reps = reps, of = #points }
    if rec.ok == false then failed = failed + 1 end
    errors.check(sys.append_sync(out, result.encode(rec) .. "\n")) -- an unwritable --out: one line, exit 3
    records[#records + 1] = rec
    local elapsed = sys.now() - started
    local eta = (total - n) * elapsed / n
    if bar then bar:update(n, (M.key(item.params, names):gsub("%z", " "))) end -- the bar draws the ETA
    if opts.on_progress then opts.on_progress(n, total, eta, item.params) end
    -- Ctrl-C, SIGHUP, SIGTERM: the finished points are in the file; the rest wait for a rerun
    if sys.cancel_requested() or sys.terminating() then
      if bar then bar:finish(("interrupted after %d of %d"):format(n, total)) end
      errors.fail("ECANCELED", ("sweep interrupted after %d of %d point runs; the same command resumes it")
        :format(n, total))
    end
  end
  -- the first point starts the board's session (connection, preflight, uploads) as an unpipelined sweep does
  -- (its Ctrl-C included): the points after it overlap
  local plain = opts.overlap and not sched.current() and 1 or total
  for n = 1, math.min(plain, total) do
    record(n, todo[n], xpcall(run_point, bug_traceback, todo[n].params, todo[n].rep))
  end
  if plain < total then pipelined(todo, run_point, record, opts.overlap, plain) end
  if bar then bar:finish(("%d run, %d skipped, %d failed"):format(total, skipped, failed)) end
  return { records = records, skipped = skipped, failed = failed, total = total }
end

-- Many boards -------------------------------------------------------------------------------------------------

-- Why a board is out after a point: an infrastructure failure (exit 3: unreachable, disconnected, timed out,
-- preflight refused, ...) or a usage one (2) ends its share of the sweep; a measurement that failed (exit 1:
-- the runner crashed or hung, its outputs disagree) does not.
local function out_reason(rec)
  local e = rec.ok == false and rec.error
  if e and (e.exit == 3 or e.exit == 2) then
    return ("%s: %s"):format(e.code, errors.text(e.message))
  end
end

--- Runs every point on many boards at once: one task per board (odp.core.sched), all in this process. opts:
--   points, repeat, out   as M.run (out may be nil: no file, no resume); records carry `board`
--   boards     list of {name = ...} (lab entries, odp.target.lab)
--   spread     "each" (every board runs every point; resume counts per board) or "pool" (the boards share
--              the points; a point whose board fails is retried once on another board)
--   open       function(entry) -> board, called in the board's task (connecting waits yield there)
--   run_point  function(board, params, rep, entry) -> record
--   close      function(board) (optional)
--   timeout    seconds a point may take on a board (nil: no limit); past it the board is out
--   ui         an odp.core.ui: one status line per board on a terminal
-- A board that is out (unreachable, timed out, disconnected, preflight refused) fails its own points only:
-- each gets a failed record naming the board and the reason. Ctrl-C stops every board (their remote process
-- groups are killed by the cores) and raises ECANCELED (exit 130).
-- Returns {records, skipped, failed, total, boards = {name = {done, failed, out = reason|nil}}}.
function M.run_boards(opts)
  check_opts(opts, { points = true, ["repeat"] = true, out = true, boards = true, spread = true, open = true,
    run_point = true, close = true, timeout = true, ui = true })
  local points = assert(opts.points, "sweep.run_boards: points is required")
  local out = opts.out
  local boards = assert(opts.boards, "sweep.run_boards: boards is required")
  local spread = opts.spread or "each"
  assert(spread == "each" or spread == "pool", "sweep.run_boards: spread must be each or pool")
  local reps = opts["repeat"] or 1
  local names = point_names(points)
  local each = spread == "each"

  local lock <close>, done_count = open_out(out, names, each)
  local queues, skipped, total = {}, 0, 0
  local function items(prefix)
    local list = {}
    for i, p in ipairs(points) do
      local have = done_count[prefix .. M.key(p, names)] or 0
      for rep = 1, reps do
        if rep <= have then skipped = skipped + 1 else list[#list + 1] = { params = p, rep = rep, index = i, tried = {} } end
      end
    end
    total = total + #list
    return list
  end
  local shared = not each and items("") or nil
  local status, board_names = {}, {}
  for _, b in ipairs(boards) do
    queues[b.name] = each and items(b.name .. "\0") or shared
    status[b.name] = { done = 0, failed = 0, total = each and #queues[b.name] or nil }
    board_names[#board_names + 1] = b.name
  end
  if opts.ui and skipped > 0 then opts.ui:info("sweep: %d record(s) already in %s, skipped", skipped, out) end
  local lines = opts.ui and opts.ui:lines(board_names)
  local records, failed = {}, 0

  local function show(name, note)
    if not lines then return end
    local st = status[name]
    local count = st.total and ("%d/%d"):format(st.done, st.total) or ("%d done"):format(st.done)
    lines:set(name, ("%s%s  %s"):format(count, st.failed > 0 and (", %d failed"):format(st.failed) or "",
      st.out and ("out: " .. st.out) or note or ""), st.out ~= nil)
  end

  local function write(entry, item, rec)
    rec.board = entry.name
    if entry.lava_job_id and rec.lava_job_id == nil then rec.lava_job_id = entry.lava_job_id end
    rec.params = rec.params or {}
    for k, v in pairs(item.params) do rec.params[k] = v end
    rec.sweep = { point = item.index, rep = item.rep, reps = reps, of = #points }
    local st = status[entry.name]
    st.done = st.done + 1
    if rec.ok == false then
      failed, st.failed = failed + 1, st.failed + 1
    end
    if out then errors.check(sys.append_sync(out, result.encode(rec) .. "\n")) end
    records[#records + 1] = rec
  end

  local s = sched.new()
  -- The pool: a board with nothing to take waits while points run elsewhere, since one may come back.
  local in_flight = 0
  local function take(entry)
    local q = queues[entry.name]
    while true do
      for i, item in ipairs(q) do
        if not item.tried[entry.name] then return table.remove(q, i) end
      end
      if each or in_flight == 0 or s.interrupted then return nil end
      sys.sleep(0.05)
    end
  end
  local function others_in(entry)
    for name, st in pairs(status) do
      if name ~= entry.name and not st.out and not st.finished then return true end
    end
    return false
  end

  local function board_task(entry)
    local task = sched.current()
    local st = status[entry.name]
    local ok, board = pcall(opts.open, entry)
    if not ok then st.out = out_reason(failed_record(board)) or tostring(board) end
    show(entry.name, "starting")
    while true do
      if st.out and not each then break end -- a pool board that is out takes no more points
      local item = take(entry)
      if not item then break end
      in_flight = in_flight + 1
      local rec
      if st.out then
        rec = failed_record { code = "ENODEV",
          message = ("board %s is out (%s); point not run"):format(entry.name, st.out) }
      else
        show(entry.name, (M.key(item.params, names):gsub("%z", " ")))
        task:limit(opts.timeout)
        local pok, r = xpcall(opts.run_point, bug_traceback, board, item.params, item.rep, entry)
        task:limit(nil)
        if s.interrupted then -- Ctrl-C, SIGTERM: a record the flow made of the cut point is kept, as with one board
          if pok and type(r) == "table" then write(entry, item, r) end
          break
        end
        if task.timed_out then
          rec = failed_record { code = "ETIMEDOUT",
            message = ("board %s: the point took longer than %g s"):format(entry.name, opts.timeout) }
        elseif not pok and not failure(r) then
          error(r, 0) -- a bug in run_point: the sweep stops with its traceback (the records written stay)
        elseif not pok then
          rec = failed_record(r)
        elseif type(r) ~= "table" then
          rec = failed_record { code = "EFAIL", message = "run_point returned " .. type(r) .. ", not a record" }
        else
          rec = r
        end
        if rec.error and rec.error.message and not tostring(rec.error.message):find(entry.name, 1, true) then
          rec.error.message = ("board %s: %s"):format(entry.name, rec.error.message)
        end
        st.out = out_reason(rec)
      end
      in_flight = in_flight - 1
      if st.out and not each and others_in(entry) and not item.retried then
        -- the pool: another board runs this point once more; this one leaves
        item.retried, item.tried[entry.name] = true, true
        table.insert(queues[entry.name], 1, item)
        if opts.ui then opts.ui:warn("board %s is out (%s); its point goes to another board", entry.name, st.out) end
      else
        write(entry, item, rec)
      end
      show(entry.name)
    end
    st.finished = true
    show(entry.name, st.out and "" or "finished")
    if board and opts.close then pcall(opts.close, board) end
  end
  for _, b in ipairs(boards) do
    s:spawn(board_task, { name = b.name }, b)
  end
  local ok, err = pcall(s.run, s)
  if lines then lines:finish() end
  if not ok then error(err, 0) end
  if s.interrupted then errors.fail("ECANCELED", "interrupted; every board's remote processes were stopped") end
  for _, t in ipairs(s.tasks) do
    if not t.ok then error(t.traceback or t.error, 0) end -- a bug in odp or in run_point, not a board's failure
  end
  -- the pool: a point retried after its board went out, when no board was left to take it
  for _, item in ipairs(shared or {}) do
    local by = next(item.tried)
    write({ name = by }, item, failed_record { code = "ENODEV",
      message = ("board %s is out (%s) and no other board was left to retry the point"):format(by, status[by].out) })
  end
  return { records = records, skipped = skipped, failed = failed, total = total, boards = status }
end

return M
