--- The result record (docs/SCRIPTING.md, "The result record"): one per run, the same for every flow.
-- A failed run is a record too (ok = false, error = {code, message, exit}), never a half-filled success.
local json = require("odp.json")
local sys = require("odp.sys")

local M = { SCHEMA = "odp.result/1" }

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
    started_at = iso_now(), odp_version = require("odp.host").version,
    params = fields.params or {}, warnings = json.array(), artifacts = {},
  }
  return r
end

--- {path, sha256, bytes} of a local file, or nil.
function M.file_info(path)
  local st = path and sys.stat(path)
  if not st then return nil end
  return { path = path, sha256 = (sys.sha256_file(path)), bytes = st.size }
end

--- The latency block from samples in ms. total_ms is what the runner reported when known.
function M.latency(samples, source, total_ms)
  local s = require("odp.stats").summary(samples)
  s.source = source
  local sum = 0
  for _, v in ipairs(samples) do sum = sum + v end
  s.total = total_ms or sum
  return s
end

--- Marks the record failed. exit: 1 the measurement failed (default), 3 device/infrastructure.
function M.fail(record, code, message, exit)
  record.ok = false
  record.error = { code = code, message = message, exit = exit or 1 }
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
  require("odp.errors").check(sys.mkdir_p(dir)) -- a --runs-dir that cannot be made: one line, exit 3
  return dir, id
end

--- Writes record as dir/result.json (atomically).
function M.save(record, dir)
  return sys.write_file(dir .. "/result.json", json.encode(record, { indent = "  " }) .. "\n")
end

return M
