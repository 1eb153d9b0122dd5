--- The result record (docs/SCRIPTING.md, "The result record"): one per run, the same for every flow.
-- A failed run is a record too (ok = false, error = {code, message, exit}), never a half-filled success.
local json = require("odp.core.json")
local schema = require("odp.results.schema")
local sys = require("odp.sys")
local errors = require("odp.core.errors")
local host = require("odp.host")
local stats = require("odp.core.stats")

local M = { SCHEMA = schema.VERSION }

local function iso_now()
  local t = sys.time()
  return os.date("!%Y-%m-%dT%H:%M:%S", math.floor(t)) .. ("Z")
end
M.iso_now = iso_now

--- A new record with the fields every flow fills.
---@param fields {flow: string, device?: string, target?: string, params?: table}
function M.new(fields)
  local r = {
    schema = M.SCHEMA, ok = false, flow = fields.flow, device = fields.device, target = fields.target,
    started_at = iso_now(), odp_version = host.version,
    params = fields.params or {}, warnings = json.array(), artifacts = {},
    -- inside a LAVA job (docs/lava/README.md): which job measured it
    lava_job_id = os.getenv("LAVA_JOB_ID"),
  }
  return r
end

--- A file changed less than this many seconds ago is asked about (hashed) but not remembered: a write within
--- the same tick of the file system's clock (1-2 s on some) would leave its mtime and ctime as they were (git's
--- "racily clean" entries).
M.RACY_S = 2

--- A fact about a local file's bytes (named `name`: "sha256", or any the caller computes with `compute(path)`),
--- remembered in `cache` (a JSON file) as git's index remembers sha256s: by real path and the file's device,
--- inode, size, mtime and ctime (ctime: no utime() sets it, so a file made to look like another by size and mtime,
--- or put in its place, is asked about again), so that an unchanged runner of many MB is not read again on every
--- run (hashing a 7.5 MB runner was a quarter of a host run's overhead). A file's facts share one entry, which
--- a change of the file drops whole. -> the fact (nil: compute said nil, or there is no such file), the file's
--- stat.
---@param path string?
---@param cache string?
---@param name string
---@param compute fun(path: string): any
function M.file_fact(path, cache, name, compute)
  local st = path and sys.stat(path)
  if not st then return nil end
  local known = cache and json.decode(sys.read_file(cache) or "") or {}
  local key = sys.realpath(path) or path
  local entry = type(known[key]) == "table" and known[key]
  if not (entry and entry.bytes == st.size and entry.mtime == st.mtime and entry.ctime == st.ctime
      and entry.dev == st.dev and entry.ino == st.ino) then
    entry = { bytes = st.size, mtime = st.mtime, ctime = st.ctime, dev = st.dev, ino = st.ino }
  end
  if entry[name] ~= nil then return entry[name], st end
  local fact = compute(path)
  if cache and fact ~= nil and sys.time() - math.max(st.mtime, st.ctime) > M.RACY_S then
    entry[name] = fact
    known[key] = entry
    sys.mkdir_p(cache:match("^(.*)/[^/]*$") or ".") -- a new runs dir is made after the record starts
    sys.write_file(cache, json.encode(known) .. "\n")
  end
  return fact, st
end

--- {path, sha256, bytes} of a local file, or nil. cache: a JSON file that remembers the sha256 (file_fact).
---@param path string?
---@param cache string?
function M.file_info(path, cache)
  local sha, st = M.file_fact(path, cache, "sha256", sys.sha256_file)
  if not st then return nil end
  return { path = path, sha256 = sha, bytes = st.size }
end

--- One artifact of a record, as it names it: rec.artifacts[name] = {file, sha256, bytes} with file relative
--- to the record's own run directory (odp.run.artifact writes it); records before that held a plain path
--- (kept readable). dir: the directory of the record file (its run directory; else rec.artifacts.run_dir is
--- tried, as for the points of a sweep's .jsonl). -> path, entry | nil,
--- why: the file is missing, or its sha256 differs from the record's (it changed since the run).
--- Views read through this, so that no record shows another run's file.
---@param rec table
---@param name string
---@param dir string?
---@return string|nil path
---@return table|string entry, or why not
function M.artifact(rec, name, dir)
  local a = type(rec.artifacts) == "table" and rec.artifacts[name]
  if a == nil then return nil, ("the record names no %s"):format(name) end
  if type(a) == "string" then -- an older record: a path as given, else beside the record
    if sys.stat(a) then return a, { file = a } end
    local beside = dir and dir .. "/" .. a:match("[^/]+$")
    if beside and sys.stat(beside) then return beside, { file = a } end
    return nil, ("%s %s is missing"):format(name, a)
  end
  if type(a) ~= "table" or type(a.file) ~= "string" then return nil, ("artifacts.%s is not a file entry"):format(name) end
  -- the record file's directory, else the run directory as the record names it (a sweep's .jsonl sits apart
  -- from its points' run directories)
  local path = (dir or ".") .. "/" .. a.file
  local run_dir = rec.artifacts.run_dir
  if not sys.stat(path) and type(run_dir) == "string" and sys.stat(run_dir .. "/" .. a.file) then
    path = run_dir .. "/" .. a.file
  end
  if not sys.stat(path) then return nil, ("%s %s is missing"):format(name, path) end
  if type(a.sha256) == "string" and sys.sha256_file(path) ~= a.sha256 then
    return nil, ("%s %s has changed since the run (its sha256 differs from the record's)"):format(name, path)
  end
  return path, a
end

--- The latency block from samples in ms. total_ms is what the runner reported when known.
function M.latency(samples, source, total_ms)
  local s = stats.summary(samples)
  s.source = source
  local sum = 0
  for _, v in ipairs(samples) do sum = sum + v end
  s.total = total_ms or sum
  return s
end

--- Marks the record failed; error.exit is the code's status (odp.core.errors.exit_status).
function M.fail(record, code, message)
  record.ok = false
  record.error = { code = code, message = message, exit = errors.exit_status(code) }
  return record
end

--- Creates runs/<id>/ under base and returns its path and the id.
function M.run_dir(base, name)
  local id = ("%s-%s-%04d"):format(os.date("!%Y%m%dT%H%M%SZ"), name or "run", sys.getpid() % 10000)
  local dir = (base or "runs") .. "/" .. id
  local n = 1
  while sys.stat(dir) do
    n = n + 1
    dir = ("%s/%s.%d"):format(base or "runs", id, n)
  end
  errors.check(sys.mkdir_p(dir)) -- a --runs-dir that cannot be made: one line, exit 3
  return dir, id
end

-- Non-finite model outputs as strings (JSON has no NaN/Infinity), and back.
local TO_TEXT = { [1 / 0] = "Infinity", [-1 / 0] = "-Infinity" }
local FROM_TEXT = { NaN = 0 / 0, Infinity = 1 / 0, ["-Infinity"] = -1 / 0 }

-- A copy of record whose outputs[i].values map through f (the record itself is not changed).
local function map_outputs(record, f)
  if type(record) ~= "table" or type(record.outputs) ~= "table" then return record end
  local copy = setmetatable({}, getmetatable(record))
  for k, v in pairs(record) do copy[k] = v end
  local outputs = setmetatable({}, getmetatable(record.outputs))
  for i, o in ipairs(record.outputs) do
    if type(o) == "table" and type(o.values) == "table" then
      local oc = setmetatable({}, getmetatable(o))
      for k, v in pairs(o) do oc[k] = v end
      oc.values = setmetatable({}, getmetatable(o.values))
      for j = 1, #o.values do oc.values[j] = f(o.values[j]) end
      o = oc
    end
    outputs[i] = o
  end
  copy.outputs = outputs
  return copy
end

local function to_text(x)
  if type(x) ~= "number" then return x end
  if x ~= x then return "NaN" end
  return TO_TEXT[x] or x
end
local function from_text(x)
  local v = FROM_TEXT[x]
  if v then return v end
  return x
end

--- A record (or a list of records) as JSON text: fields in schema.KEY_ORDER; NaN/+-Inf in outputs[i].values
--- written as the strings "NaN", "Infinity", "-Infinity" (elsewhere JSON has no place for them: null).
--- opts.indent pretty-prints.
---@param record table
---@param opts {indent: boolean?}?
---@return string
function M.encode(record, opts)
  local v = record
  if json.is_array(record) then
    v = json.array()
    for i, r in ipairs(record) do v[i] = map_outputs(r, to_text) end
  else
    v = map_outputs(record, to_text)
  end
  return json.encode(v, { indent = opts and opts.indent, keyorder = schema.KEY_ORDER })
end

--- A record from JSON text (M.encode's inverse: the NaN/Infinity strings of outputs[i].values become
--- numbers again). -> record | nil, err
---@param text string
---@return table? record
---@return string? err
function M.decode(text)
  local v, err = json.decode(text)
  if v == nil then return nil, err end
  return map_outputs(v, from_text)
end

return M
