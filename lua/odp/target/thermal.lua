--- Temperatures a target exposes, in °C: Linux thermal zones (/sys/class/thermal/thermal_zone*/temp, in
-- millidegrees) on every target, and on Android also `dumpsys thermalservice` (the HAL's current
-- temperatures) and `dumpsys battery` (tenths of a degree). What a device prints is untrusted: values
-- outside -60..200 °C are dropped.
local sys = require("odp.sys")
local shell = require("odp.target.shell")

local M = { ROOT = "/sys/class/thermal" }

local function plausible(c) return c and c == c and c > -60 and c < 200 end

--- Thermal zones from their files' contents -> {{zone, type, temp_c}} in zone order. values: {path = text}
--- with `/sys/class/thermal/thermal_zoneN/temp` (millidegrees) and, where read, `.../thermal_zoneN/type`.
function M.zones(values)
  local zones = {}
  for path, text in pairs(values) do
    local dir, z = path:match("^(.-thermal_zone(%d+))/temp$")
    local c = z and #z <= 4 and tonumber(tostring(text):match("^%s*(%-?%d+)%s*$") or "")
    c = c and c / 1000
    if plausible(c) then
      local ztype = values[dir .. "/type"]
      zones[#zones + 1] = { zone = tonumber(z), type = ztype and ztype:match("^%s*(.-)%s*$") or nil, temp_c = c }
    end
  end
  table.sort(zones, function(a, b) return a.zone < b.zone end)
  return zones
end

--- Parses `PATH VALUE` lines (a zone's temp file and its millidegrees) -> {name = °C}.
function M.parse_zones(text)
  local values = {}
  for path, v in text:gmatch("([^\n]-thermal_zone[^/\n]*)/temp[ \t]+(-?%d+)") do values[path .. "/temp"] = v end
  local out = {}
  for _, z in ipairs(M.zones(values)) do out["thermal_zone" .. z.zone] = z.temp_c end
  return out
end

--- `dumpsys thermalservice` -> {status = Android's thermal status (0..6), temperatures = {{name, type, temp_c}}}
--- (the HAL's current values: the cached list after them repeats them, possibly stale), or nil when it says
--- neither. At most 256 temperatures.
function M.parse_thermalservice(text)
  local status = text:match("Thermal Status:%s*(%d+)")
  local out = { status = status and tonumber(status) }
  local hal = text:match("Current temperatures from HAL:\n(.-)\n%S") or text:match("Current temperatures from HAL:\n(.*)$")
  local temps = {}
  for value, ttype, name in (hal or ""):gmatch("Temperature{mValue=([%-%d%.]+), mType=(%-?%d+), mName=([^,}]+)") do
    local c = tonumber(value)
    if plausible(c) and #temps < 256 then temps[#temps + 1] = { name = name, type = tonumber(ttype), temp_c = c } end
  end
  if #temps > 0 then out.temperatures = temps end
  return (out.status or out.temperatures) and out or nil
end

--- `dumpsys battery`'s "temperature: 312" -> 31.2 (°C), or nil.
function M.parse_battery_temperature(text)
  local tenths = tonumber(("\n" .. text):match("\n%s*temperature: (%-?%d+)") or "")
  local c = tenths and tenths / 10
  return plausible(c) and c or nil
end

--- `dumpsys thermalservice` and `dumpsys battery` output together -> {name = °C}: "hal:NAME" for the HAL's
--- temperatures, "battery" for the battery's.
function M.parse_dumpsys(text)
  local out = {}
  for _, t in ipairs((M.parse_thermalservice(text) or {}).temperatures or {}) do out["hal:" .. t.name] = t.temp_c end
  out.battery = M.parse_battery_temperature(text)
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
  local q = shell.quote
  local out = target:run(("for f in %s/thermal_zone*/temp; do [ -r \"$f\" ] && echo \"$f $(cat \"$f\")\"; done; true")
    :format(q(root))) or ""
  local temps = M.parse_zones(out)
  if target.kind == "adb" then
    local ds = target:run("dumpsys thermalservice 2>/dev/null; dumpsys battery 2>/dev/null; true") or ""
    for k, v in pairs(M.parse_dumpsys(ds)) do temps[k] = v end
  end
  return temps
end

--- The hottest CPU-related temperature of a device-state snapshot (odp.target.device_state): its thermal
--- zones, else Android's HAL temperatures of type 0 (CPU); nil when it has none.
function M.hottest_cpu(zones, android_temperatures)
  local t
  for _, z in ipairs(zones or {}) do if z.temp_c and (not t or z.temp_c > t) then t = z.temp_c end end
  if t then return t end
  for _, z in ipairs(android_temperatures or {}) do
    if z.type == 0 and z.temp_c and (not t or z.temp_c > t) then t = z.temp_c end
  end
  return t
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
