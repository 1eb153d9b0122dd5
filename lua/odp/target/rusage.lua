--- Parses the one line odp-rusage (tools/odp-rusage.c) prints:
--   ODP-RUSAGE status=0 signal=0 core=0 maxrss_kb=43600 utime_s=1.45 stime_s=0.02 wall_s=0.45 minflt=.. majflt=..
--   nvcsw=.. nivcsw=..
-- parse(text) -> record, rest | nil, rest. record = {status, signal, core, wall_s, rusage = {utime_s, stime_s,
-- maxrss_kb, minflt, majflt, nvcsw, nivcsw}} (the odp.proc.run rusage shape); rest is text without that line,
-- so the program's own stderr comes back untouched. The last such line wins (a program could print one too).
-- Device output is untrusted: unknown keys are ignored, numbers are bounded, a malformed line is not a record.
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

function M.parse(text)
  if type(text) ~= "string" then return nil, "" end
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
  return rec, text:sub(1, s - 1) .. text:sub(e + 1)
end

return M
