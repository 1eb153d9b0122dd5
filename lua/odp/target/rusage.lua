--- Parses the one line odp-rusage (tools/odp-rusage.c) prints:
--   ODP-RUSAGE status=0 signal=0 core=0 maxrss_kb=43600 utime_s=1.45 stime_s=0.02 wall_s=0.45 minflt=.. majflt=..
--   nvcsw=.. nivcsw=..
-- parse(text) -> record, rest | nil, rest. record = {status, signal, core, wall_s, rusage = {utime_s, stime_s,
-- maxrss_kb, minflt, majflt, nvcsw, nivcsw}} (the odp.proc.run rusage shape); rest is text without that line,
-- so the program's own stderr comes back untouched. The last such line wins (a program could print one too).
-- Device output is untrusted: unknown keys are ignored, numbers are bounded, a malformed line is not a record.
-- With --counters, an ODP-COUNTERS line precedes it (parse_counters); record.counters holds it, and it is
-- taken out of rest too.
local json = require("odp.core.json")
local M = {}

local INTEGER = { status = true, signal = true, core = true, maxrss_kb = true, minflt = true, majflt = true,
  nvcsw = true, nivcsw = true }
local FLOAT = { utime_s = true, stime_s = true, wall_s = true }
local RUSAGE = { "utime_s", "stime_s", "maxrss_kb", "minflt", "majflt", "nvcsw", "nivcsw" }

local function parse_line(line)
  local v = {}
  for k, val in line:gmatch("([%w_]+)=(%S+)") do
    if INTEGER[k] then
      if not val:match("^%d+$") or #val > 15 then return nil end
      v[k] = math.tointeger(tonumber(val))
    elseif FLOAT[k] then
      local x = val:match("^%d+%.?%d*$") and tonumber(val)
      if not x or x > 1e9 then return nil end
      v[k] = x
    end
  end
  for _, k in ipairs { "status", "signal", "maxrss_kb", "utime_s", "stime_s", "wall_s" } do
    if v[k] == nil then return nil end
  end
  local rec = { status = v.status, signal = v.signal, core = v.core == 1, wall_s = v.wall_s, rusage = {} }
  for _, k in ipairs(RUSAGE) do rec.rusage[k] = v[k] or 0 end
  return rec
end

-- The counters odp-rusage --counters can report (its names), and the record's names for them.
local COUNTER_NAMES = { ["task-clock"] = "task_clock_ms", ["context-switches"] = "context_switches",
  ["cpu-migrations"] = "cpu_migrations", ["page-faults"] = "page_faults", cycles = "cycles",
  instructions = "instructions", branches = "branches", ["branch-misses"] = "branch_misses",
  ["cache-references"] = "cache_references", ["cache-misses"] = "cache_misses" }
M.COUNTERS = { "task_clock_ms", "context_switches", "cpu_migrations", "page_faults", "cycles", "instructions",
  "branches", "branch_misses", "cache_references", "cache_misses" }

local function u64(s)
  if not s:match("^%d+$") or #s > 20 then return nil end
  return math.tointeger(tonumber(s)) or tonumber(s)
end

--- One ODP-COUNTERS line -> {name = value, ..., ipc?, scaled = {names}?, unavailable = {name = why}?,
-- paranoid?, user_only?} or nil when malformed. A counter that ran part of the time (multiplexed:
-- running < enabled) is scaled by enabled/running, like perf stat, and named in `scaled`; one that never ran
-- is unavailable ("not counted"). task-clock is reported in ms.
function M.parse_counters(line)
  local c, scaled, unavailable = {}, {}, {}
  local any = false
  for k, val in line:gmatch("([%w%-_]+)=(%S+)") do
    local name = COUNTER_NAMES[k]
    if k == "paranoid" then
      c.paranoid = val:match("^%-?%d%d?$") and tonumber(val)
    elseif k == "user_only" then
      c.user_only = val == "1" or nil
    elseif name then
      any = true
      local v, e, r = val:match("^(%d+),(%d+),(%d+)$")
      v, e, r = v and u64(v), e and u64(e), r and u64(r)
      if v and e and r then
        if r == 0 then
          unavailable[name] = "not counted"
        else
          if r < e then
            v = math.floor(v * (e / r) + 0.5)
            scaled[#scaled + 1] = name
          end
          c[name] = name == "task_clock_ms" and v / 1e6 or v
        end
      elseif val == "unsupported" or val == "denied" or val == "unreadable" then
        unavailable[name] = val
      else
        return nil
      end
    end
  end
  if not any then return nil end
  if c.cycles and c.instructions and c.cycles > 0 then c.ipc = c.instructions / c.cycles end
  if #scaled > 0 then c.scaled = scaled end
  if next(unavailable) then c.unavailable = unavailable end
  return c
end

--- Counters of several processes (parse_counters results) -> the record's `counters`: {processes = {...},
-- total = {name = sum, ..., ipc}, scaled?, unavailable?, paranoid?, user_only?} or nil when there are none.
function M.total_counters(list)
  if #list == 0 then return nil end
  local total, scaled, unavailable, seen = {}, {}, {}, {}
  for _, c in ipairs(list) do
    for _, k in ipairs(M.COUNTERS) do if c[k] then total[k] = (total[k] or 0) + c[k] end end
    for _, k in ipairs(c.scaled or {}) do if not seen[k] then seen[k] = true scaled[#scaled + 1] = k end end
    for k, why in pairs(c.unavailable or {}) do unavailable[k] = why end
  end
  if total.cycles and total.instructions and total.cycles > 0 then total.ipc = total.instructions / total.cycles end
  return { processes = json.array(list), total = total, scaled = #scaled > 0 and scaled or nil,
    unavailable = next(unavailable) and unavailable or nil, paranoid = list[1].paranoid, user_only = list[1].user_only }
end

--- The one warning counters deserve: some were refused by kernel.perf_event_paranoid. nil otherwise.
function M.counters_warning(counters)
  local denied = {}
  for _, k in ipairs(M.COUNTERS) do
    if counters and counters.unavailable and counters.unavailable[k] == "denied" then denied[#denied + 1] = k end
  end
  if #denied == 0 then return nil end
  return ("perf counters %s refused by kernel.perf_event_paranoid%s: `sysctl -w kernel.perf_event_paranoid=1` " ..
    "(or running as root) lets odp count them"):format(table.concat(denied, ", "),
    counters.paranoid and (" = " .. counters.paranoid) or "")
end

--- For a flow: rec.counters from the measured runs ({r = exec result} each) and the paranoid warning.
function M.record_counters(rec, runs)
  local list = {}
  for _, x in ipairs(runs) do if x.r.counters then list[#list + 1] = x.r.counters end end
  rec.counters = M.total_counters(list)
  local w = M.counters_warning(rec.counters)
  if w then rec.warnings[#rec.warnings + 1] = w end
end

-- Removes every line starting with `tag` (at a line start); returns the text without them and the last one.
local function take_lines(text, tag)
  local last, out, pos = nil, {}, 1
  while true do
    local a, b = text:find(tag, pos, true)
    while a and a > 1 and text:sub(a - 1, a - 1) ~= "\n" do a, b = text:find(tag, b + 1, true) end
    if not a then break end
    local e = text:find("\n", b + 1, true) or #text
    out[#out + 1] = text:sub(pos, a - 1)
    last = text:sub(a, e)
    pos = e + 1
  end
  out[#out + 1] = text:sub(pos)
  return table.concat(out), last
end

function M.parse(text)
  if type(text) ~= "string" then return nil, "" end
  local counters
  if text:find("ODP-COUNTERS ", 1, true) then
    local rest, line = take_lines(text, "ODP-COUNTERS ")
    counters = line and M.parse_counters(line)
    if counters then text = rest end
  end
  local rec, s, e
  local pos = 1
  while true do
    local a, b = text:find("ODP%-RUSAGE [^\n]*\n?", pos)
    if not a then break end
    if a == 1 or text:sub(a - 1, a - 1) == "\n" then
      local r = parse_line(text:sub(a, b))
      if r then rec, s, e = r, a, b end
    end
    pos = b + 1
  end
  if not rec then return nil, text end
  rec.counters = counters
  return rec, text:sub(1, s - 1) .. text:sub(e + 1)
end

return M
