--- Temperatures a target exposes, in °C: Linux thermal zones (/sys/class/thermal/thermal_zone*/temp, in
-- millidegrees) on every target, and on Android also `dumpsys thermalservice` (the HAL's current
-- temperatures) and `dumpsys battery` (tenths of a degree). What a device prints is untrusted: values
-- outside -60..200 °C are dropped.
local sys = require("odp.sys")

local M = { ROOT = "/sys/class/thermal" }

local function plausible(c) return c and c == c and c > -60 and c < 200 end

--- Parses `PATH VALUE` lines (a zone's temp file and its millidegrees) -> {name = °C}.
function M.parse_zones(text)
  local out = {}
  for path, v in text:gmatch("([^\n]-thermal_zone[^/\n]*)/temp[ \t]+(-?%d+)") do
    local c = tonumber(v) / 1000
    if plausible(c) then out[path:match("([^/]+)$")] = c end
  end
  return out
end

--- Parses `dumpsys thermalservice` (its "Current temperatures from HAL" Temperature{mValue=..., mName=...}
--- lines) and `dumpsys battery` ("temperature: 312" = 31.2 °C) output -> {name = °C}.
function M.parse_dumpsys(text)
  local out = {}
  local hal = text:match("Current temperatures from HAL:(.-)\n%S") or text:match("Current temperatures from HAL:(.*)$") or ""
  for value, name in hal:gmatch("Temperature{mValue=(-?[%d.]+), mType=[^,]*, mName=([^,}]+)") do
    local c = tonumber(value)
    if plausible(c) then out["hal:" .. name] = c end
  end
  local battery = text:match("\n%s*temperature: (%-?%d+)")
  if battery and plausible(tonumber(battery) / 10) then out.battery = tonumber(battery) / 10 end
  return out
end

--- The temperatures of a target now -> {name = °C} (empty when it exposes none). root: the thermal class
--- directory (default /sys/class/thermal).
function M.read(target, root)
  root = root or M.ROOT
  if target.kind == "host" then
    local text = {}
    for _, name in ipairs(sys.readdir(root) or {}) do
      local v = name:match("^thermal_zone") and sys.read_file(root .. "/" .. name .. "/temp")
      if v then text[#text + 1] = ("%s/%s/temp %s"):format(root, name, v:match("%-?%d+") or "") end
    end
    return M.parse_zones(table.concat(text, "\n"))
  end
  local q = require("odp.target.shell").quote
  local out = target:run(("for f in %s/thermal_zone*/temp; do [ -r \"$f\" ] && echo \"$f $(cat \"$f\")\"; done; true")
    :format(q(root))) or ""
  local temps = M.parse_zones(out)
  if target.kind == "adb" then
    local ds = target:run("dumpsys thermalservice 2>/dev/null; dumpsys battery 2>/dev/null; true") or ""
    for k, v in pairs(M.parse_dumpsys(ds)) do temps[k] = v end
  end
  return temps
end

--- The hottest of temps (°C) and its name, or nil when there are none.
function M.hottest(temps)
  local name, max
  for k, v in pairs(temps) do
    if not max or v > max then name, max = k, v end
  end
  return max, name
end

return M
