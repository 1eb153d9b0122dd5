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

--- Runs every point `repeat` times. opts:
--   points     list from sweep.points (required)
--   repeat     records per point (default 1)
--   out        JSONL path (required): each record is appended and fsync'd as soon as it exists; OUT.lock is
--              held meanwhile (a second sweep on the same file fails with EBUSY, exit 2, naming the pid)
--   run_point  function(params, rep) -> record (a table; its params get the point's values merged in).
--              An error becomes a failed record {ok = false, error = {code, message}} and the sweep goes on;
--              failed records do not count as done, so a rerun retries them.
--   on_progress function(done, total, eta_s, params) after each record (ETA from the mean time per record)
--   ui         an odp.core.ui: draws a progress line with ETA
-- Returns {records = {...} (this run's), skipped = n (found in the file), failed = n, total = n}.
function M.run(opts)
  check_opts(opts, { points = true, ["repeat"] = true, out = true, run_point = true, on_progress = true, ui = true })
  local points = assert(opts.points, "sweep.run: points is required")
  local out = assert(opts.out, "sweep.run: out is required")
  local run_point = assert(opts.run_point, "sweep.run: run_point is required")
  local reps = opts["repeat"] or 1
  assert(math.type(reps) == "integer" and reps >= 1, "sweep.run: repeat must be a positive integer")
  local names = points.names
  if not names then
    local seen = {}
    names = {}
    for _, p in ipairs(points) do
      for k in pairs(p) do if not seen[k] then seen[k] = true names[#names + 1] = k end end
    end
    table.sort(names)
  end

  -- one writer per file: a second sweep on the same --out would interleave points (a dead one's lock is free)
  local lock <close>, lerr, lcode, holder = sys.lock(out .. ".lock")
  if not lock then
    if lcode == "EBUSY" then
      errors.fail("EBUSY", ("%s is being written by another sweep (pid %d): wait for it to finish, "
        .. "or give this one another --out"):format(out, holder), 2)
    end
    errors.check(lock, lerr, lcode) -- the lock file's path and why, once, exit 3
  end
  local old, torn = M.load(out)
  local done_count = {}
  for _, r in ipairs(old) do
    if r.ok ~= false and type(r.params) == "table" then
      local k = M.key(r.params, names)
      done_count[k] = (done_count[k] or 0) + 1
    end
  end
  if torn then errors.check(sys.append_sync(out, "\n")) end

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
  for n, item in ipairs(todo) do
    local ok, rec = pcall(run_point, item.params, item.rep)
    if not ok then
      local e = rec
      if type(e) == "table" and e.code == "ECANCELED" then error(e, 0) end
      rec = { schema = "odp.result/1", ok = false,
        error = { code = type(e) == "table" and e.code or "EFAIL",
          message = type(e) == "table" and (e.message or tostring(e)) or tostring(e) } }
    end
    if type(rec) ~= "table" then
      rec = { schema = "odp.result/1", ok = false,
        error = { code = "EFAIL", message = "run_point returned " .. type(rec) .. ", not a record" } }
    end
    rec.params = rec.params or {}
    for k, v in pairs(item.params) do rec.params[k] = v end
    rec.sweep = { point = item.index, rep = item.rep, of = #points }
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
        :format(n, total), 130)
    end
  end
  if bar then bar:finish(("%d run, %d skipped, %d failed"):format(total, skipped, failed)) end
  return { records = records, skipped = skipped, failed = failed, total = total }
end

return M
