--- Where a run ran: the device's identity, its CPUs (cluster, capacity, frequencies, governor), thermal zones,
-- Android's thermal status and battery, load and free memory. One snapshot is ONE request to the board's
-- resident helper (or, on the host, one call into odp): src/helper/state.c reads every value it can, each
-- bounded, in a line format that M.parse reads back (a pure function, fuzzed). Where no helper runs, the same
-- lines come from ONE command: a POSIX shell script (M.SCRIPT, for dash, bash, busybox and Android's
-- mksh/toybox). Nothing is
-- guessed: what the target does not expose stays absent and is named in `missing`.
--   local ds = require("odp.target.device_state")
--   local before = assert(ds.gather(target))      -- before the measured processes
--   local after = ds.gather(target)               -- after them
--   rec.device_state, warnings = ds.record(before, after, { cpus_used = {0, 1} })
local thermal = require("odp.target.thermal")
local json = require("odp.core.json")

local M = {}

-- What the script reads. Single-line files are read with the shell's `read` (no process per file, so a
-- nine-CPU phone costs a handful of processes, not a hundred); longer ones through `head -c`.
local CPU_FILES = { "online", "cpu_capacity", "topology/cluster_id", "topology/physical_package_id",
  "cpufreq/cpuinfo_min_freq", "cpufreq/cpuinfo_max_freq", "cpufreq/scaling_min_freq", "cpufreq/scaling_max_freq",
  "cpufreq/scaling_cur_freq", "cpufreq/scaling_governor" }
local PROPS = { "ro.product.model", "ro.product.manufacturer", "ro.soc.model", "ro.soc.manufacturer",
  "ro.build.fingerprint", "ro.build.version.sdk", "ro.build.version.release", "ro.serialno", "ro.board.platform" }

-- $1: a directory standing in for / (tests serve recorded trees of real boards through the SSH and adb
-- peers; commands then come from $1/bin/). Empty on a real target.
M.SCRIPT = ([=[
R=$1
v() { [ -r "$R$1" ] || return 0; x=; IFS= read -r x <"$R$1" 2>/dev/null; [ -n "$x" ] && printf '@v %s %.256s\n' "$1" "$x"; return 0; }
f() { [ -r "$R$1" ] || return 0; printf '@f %s\n' "$1"; head -c "$2" "$R$1" 2>/dev/null; printf '\n@e\n'; }
has() { if [ -n "$R" ]; then [ -x "$R/bin/$1" ]; else command -v "$1" >/dev/null 2>&1; fi; }
if [ -n "$R" ]; then B="$R/bin/"; else B=; fi
v /proc/sys/kernel/hostname
v /proc/sys/kernel/osrelease
v /proc/loadavg
v /sys/devices/system/cpu/online
f /etc/os-release 4096
f /proc/meminfo 1024
f /proc/device-tree/compatible 512
if [ -r "$R/proc/cpuinfo" ]; then printf '@f /proc/cpuinfo\n'
  grep -E '^(processor|model name|CPU implementer|CPU part|Hardware|Model)[[:space:]]*:' "$R/proc/cpuinfo" 2>/dev/null | head -c 65536
  printf '\n@e\n'; fi
for d in "$R"/sys/devices/system/cpu/cpu[0-9]*; do
  [ -d "$d" ] || continue; p=${d#"$R"}
  for x in @CPU_FILES@; do v "$p/$x"; done
done
for d in "$R"/sys/class/thermal/thermal_zone[0-9]*; do
  [ -d "$d" ] || continue; p=${d#"$R"}; v "$p/type"; v "$p/temp"
done
if has getprop; then printf '@c getprop\n'
  "${B}getprop" 2>/dev/null | grep -E '^\[(@PROPS@)\]:' | head -c 8192; printf '\n@e\n'; fi
if has dumpsys; then
  printf '@c thermalservice\n'; "${B}dumpsys" thermalservice 2>/dev/null | head -c 65536; printf '\n@e\n'
  printf '@c battery\n'; "${B}dumpsys" battery 2>/dev/null | head -c 16384; printf '\n@e\n'
fi
exit 0
]=]):gsub("@CPU_FILES@", table.concat(CPU_FILES, " ")):gsub("@PROPS@", (table.concat(PROPS, "|"):gsub("%.", "\\%0")))

-- Bounds on what is read back: the script bounds each item; these bound the whole.
M.MAX_TEXT = 1 << 20
local MAX_ITEMS = 8192
local MAX_CPU = 4095

--- "0-3,5,7-8" -> {0, 1, 2, 3, 5, 7, 8} (sorted, unique); nil, why for anything else (ids above 4095 too).
---@param s string
---@return integer[]?, string?
function M.cpulist(s)
  if type(s) ~= "string" or #s > 4096 then return nil, "not a CPU list" end
  local seen, out = {}, {}
  s = s:gsub("%s+", "")
  if s == "" then return {} end
  for part in (s .. ","):gmatch("([^,]*),") do
    local a, b = part:match("^(%d+)%-(%d+)$")
    if not a then a = part:match("^(%d+)$") b = a end
    if not a or #a > 4 or #b > 4 then return nil, ("'%s' is not a CPU number or range"):format(part) end
    a, b = tonumber(a), tonumber(b)
    if a > b or b > MAX_CPU then return nil, ("'%s' is not a CPU range"):format(part) end
    for c = a, b do
      if not seen[c] then seen[c] = true out[#out + 1] = c end
    end
  end
  table.sort(out)
  return out
end

--- {0, 1, 2, 3, 5} -> "0-3,5"
---@param cpus integer[]
function M.cpulist_format(cpus)
  local sorted = table.move(cpus, 1, #cpus, 1, {})
  table.sort(sorted)
  local parts, i = {}, 1
  while i <= #sorted do
    local j = i
    while j < #sorted and sorted[j + 1] == sorted[j] + 1 do j = j + 1 end
    parts[#parts + 1] = j > i and (sorted[i] .. "-" .. sorted[j]) or tostring(sorted[i])
    i = j + 1
  end
  return table.concat(parts, ",")
end

--- The script's output -> {values = {path = line}, files = {path = text}, commands = {name = text}}.
-- Untrusted input: the text is cut at MAX_TEXT, at most MAX_ITEMS items are kept, a block without its end
-- marker ends at the end of the text, unknown lines are skipped.
---@param text string
function M.parse(text)
  local raw = { values = {}, files = {}, commands = {} }
  if type(text) ~= "string" then return raw end
  if #text > M.MAX_TEXT then text = text:sub(1, M.MAX_TEXT) end
  local pos, n, len = 1, 0, #text
  while pos <= len and n < MAX_ITEMS do
    local eol = text:find("\n", pos, true) or (len + 1)
    local line = text:sub(pos, eol - 1)
    pos = eol + 1
    local kind, rest = line:match("^@([vfc]) (.*)$")
    if kind == "v" then
      local path, val = rest:match("^(/%S+) (.*)$")
      if path then raw.values[path] = val n = n + 1 end
    elseif kind == "f" or kind == "c" then
      -- a block: up to "\n@e\n" (the script prints a newline before the marker)
      local e = text:find("\n@e\n", pos - 1, true) or text:find("\n@e$", pos - 1) or (len + 1)
      local body = e >= pos and text:sub(pos, e - 1) or ""
      if kind == "f" then raw.files[rest] = body else raw.commands[rest] = body end
      n = n + 1
      pos = e + 4
    end
  end
  return raw
end

-- ARM's CPU part numbers (implementer 0x41) as util-linux's lscpu names them (sys-utils/lscpu-arm.c).
local ARM_PARTS = {
  ["0xd03"] = "Cortex-A53", ["0xd04"] = "Cortex-A35", ["0xd05"] = "Cortex-A55", ["0xd07"] = "Cortex-A57",
  ["0xd08"] = "Cortex-A72", ["0xd09"] = "Cortex-A73", ["0xd0a"] = "Cortex-A75", ["0xd0b"] = "Cortex-A76",
  ["0xd0c"] = "Neoverse-N1", ["0xd0d"] = "Cortex-A77", ["0xd40"] = "Neoverse-V1", ["0xd41"] = "Cortex-A78",
  ["0xd44"] = "Cortex-X1", ["0xd46"] = "Cortex-A510", ["0xd47"] = "Cortex-A710", ["0xd48"] = "Cortex-X2",
  ["0xd49"] = "Neoverse-N2", ["0xd4d"] = "Cortex-A715", ["0xd4e"] = "Cortex-X3", ["0xd4f"] = "Neoverse-V2",
  ["0xd80"] = "Cortex-A520", ["0xd81"] = "Cortex-A720", ["0xd82"] = "Cortex-X4", ["0xd84"] = "Neoverse-V3",
  ["0xd85"] = "Cortex-X925", ["0xd87"] = "Cortex-A725", ["0xd8e"] = "Neoverse-N3",
}

-- /proc/cpuinfo (the script's grep of it) -> per-CPU core names {[cpu] = name} and the board line.
local function parse_cpuinfo(text)
  local cores, board, cpu, impl = {}, nil, nil, nil
  for line in text:gmatch("[^\n]+") do
    local k, val = line:match("^([%a ]-)%s*:%s*(.-)%s*$")
    if k == "processor" then cpu = tonumber(val) impl = nil
    elseif k == "model name" and cpu then cores[cpu] = val
    elseif k == "CPU implementer" then impl = val
    elseif k == "CPU part" and cpu and not cores[cpu] then
      cores[cpu] = (impl == "0x41" and ARM_PARTS[val:lower()]) or ("part " .. val .. (impl and (" of " .. impl) or ""))
    elseif k == "Model" or (k == "Hardware" and not board) then board = val
    end
  end
  return cores, board
end

local function os_pretty(text)
  local v = text:match('\nPRETTY_NAME="?([^"\n]*)"?') or text:match('^PRETTY_NAME="?([^"\n]*)"?')
  return v
end

local function num(s)
  local v = s and s:match("^%s*(%-?%d+%.?%d*)%s*$")
  return v and tonumber(v) or nil
end

local function parse_battery(text)
  local function field(k) return text:match("\n%s*" .. k .. ":%s*([^\n]-)%s*\n") end
  text = "\n" .. text .. "\n"
  local level, scale = num(field("level")), num(field("scale"))
  if not level then return nil end
  local charging = false
  for _, k in ipairs({ "AC powered", "USB powered", "Wireless powered", "Dock powered" }) do
    if field(k) == "true" then charging = true end
  end
  return { level_pct = scale and scale > 0 and level * 100 / scale or level,
    temperature_c = thermal.parse_battery_temperature(text), charging = charging, status = num(field("status")) }
end

--- The parsed script output (M.parse) -> one snapshot:
-- {hostname, kernel, os, board, online = {cpu...}, cpus = {{cpu, online, core, capacity, cluster_id, package,
-- min_khz, max_khz, scaling_min_khz, scaling_max_khz, cur_khz, governor}}, thermal = {{zone, type, temp_c}},
-- android = {model, manufacturer, soc, ...}, thermal_status, android_temperatures, battery, loadavg,
-- mem_available_kb, mem_total_kb, compatible = {device tree names}, emulated = why (a QEMU virt machine),
-- missing = {names}}.
---@param raw table from M.parse
function M.snapshot(raw)
  local v, files, cmds = raw.values, raw.files, raw.commands
  local s, missing = {}, {}
  local function need(name, value) if value == nil then missing[#missing + 1] = name end return value end
  s.hostname = need("hostname", v["/proc/sys/kernel/hostname"])
  s.kernel = need("kernel", v["/proc/sys/kernel/osrelease"])
  s.os = need("os_release", files["/etc/os-release"] and os_pretty(files["/etc/os-release"]))
  local la = v["/proc/loadavg"]
  local l1, l5, l15 = (la or ""):match("^(%d+%.%d+) (%d+%.%d+) (%d+%.%d+)")
  s.loadavg = need("loadavg", l1 and { tonumber(l1), tonumber(l5), tonumber(l15) })
  local mem = files["/proc/meminfo"] or ""
  s.mem_available_kb = need("mem_available", num(mem:match("MemAvailable:%s*(%d+)")))
  s.mem_total_kb = num(mem:match("MemTotal:%s*(%d+)"))
  local cores, board = parse_cpuinfo(need("cpuinfo", files["/proc/cpuinfo"]) or "")
  s.board = board
  -- /proc/cpuinfo lists the online processors: the fallback where /sys is not readable
  local listed = {}
  for c in pairs(cores) do if c <= MAX_CPU then listed[#listed + 1] = c end end
  table.sort(listed)
  s.cpuinfo_cpus = #listed > 0 and listed or nil
  -- The device tree's compatible list (NUL-separated; none on x86 or ACPI machines). QEMU's `virt` machine
  -- calls itself linux,dummy-virt: its CPUs are emulated (TCG) or virtualized, so its times are no board's.
  local dt = files["/proc/device-tree/compatible"]
  if dt then
    local compatible = {}
    for name in dt:gmatch("[%w%-%.,_+/]+") do
      if #compatible < 16 then compatible[#compatible + 1] = name end
    end
    s.compatible = #compatible > 0 and compatible or nil
    if compatible[1] == "linux,dummy-virt" then s.emulated = "QEMU virt machine (device tree: linux,dummy-virt)" end
  end
  s.online = need("cpus_online", v["/sys/devices/system/cpu/online"] and M.cpulist(v["/sys/devices/system/cpu/online"]))
  local online = {}
  for _, c in ipairs(s.online or {}) do online[c] = true end
  local by_cpu = {}
  for path, val in pairs(v) do
    local c, file = path:match("^/sys/devices/system/cpu/cpu(%d+)/(.+)$")
    c = c and #c <= 4 and tonumber(c)
    if c and c <= MAX_CPU then
      by_cpu[c] = by_cpu[c] or {}
      by_cpu[c][file] = val
    end
  end
  for c in pairs(cores) do if c <= MAX_CPU then by_cpu[c] = by_cpu[c] or {} end end
  for c in pairs(online) do by_cpu[c] = by_cpu[c] or {} end
  local ids = {}
  for c in pairs(by_cpu) do ids[#ids + 1] = c end
  table.sort(ids)
  local cpus, have = {}, {}
  for _, c in ipairs(ids) do
    local f = by_cpu[c]
    local e = { cpu = c, core = cores[c], capacity = num(f.cpu_capacity), cluster_id = num(f["topology/cluster_id"]),
      package = num(f["topology/physical_package_id"]),
      min_khz = num(f["cpufreq/cpuinfo_min_freq"]), max_khz = num(f["cpufreq/cpuinfo_max_freq"]),
      scaling_min_khz = num(f["cpufreq/scaling_min_freq"]), scaling_max_khz = num(f["cpufreq/scaling_max_freq"]),
      cur_khz = num(f["cpufreq/scaling_cur_freq"]), governor = f["cpufreq/scaling_governor"] }
    -- cpu0 often has no `online` file (it cannot go offline): the online list decides
    if s.online then e.online = online[c] == true else e.online = f.online ~= "0" end
    if e.capacity then have.capacity = true end
    if e.max_khz or e.cur_khz then have.cpufreq = true end
    cpus[#cpus + 1] = e
  end
  s.cpus = cpus
  if not have.capacity then missing[#missing + 1] = "cpu_capacity" end
  if not have.cpufreq then missing[#missing + 1] = "cpufreq" end
  local zones = thermal.zones(v)
  s.thermal = need("thermal_zones", #zones > 0 and zones or nil)
  if cmds.getprop then
    local props = {}
    for k, val in cmds.getprop:gmatch("%[([%w%._]+)%]: %[([^%]\n]*)%]") do props[k] = val end
    local a = {}
    for _, k in ipairs(PROPS) do
      local short = k:gsub("^ro%.", ""):gsub("%.", "_")
      a[short] = props[k] ~= "" and props[k] or nil
      if a[short] == nil then missing[#missing + 1] = k end
    end
    s.android = a
    local th = cmds.thermalservice and thermal.parse_thermalservice(cmds.thermalservice)
    if th then
      s.thermal_status, s.android_temperatures = th.status, th.temperatures
    else
      missing[#missing + 1] = "dumpsys thermalservice"
    end
    s.battery = need("dumpsys battery", cmds.battery and parse_battery(cmds.battery))
  end
  s.missing = missing
  return s
end

--- Clusters of a snapshot's online CPUs: CPUs with the same cpu_capacity, else the same cpuinfo_max_freq,
-- else one cluster. Ascending by capacity/frequency and named little, mid..., big (one cluster: "all";
-- two: little, big). -> {{name, cpus = {ids}, capacity?, max_khz?, core?}}, basis ("cpu_capacity" |
-- "cpuinfo_max_freq" | "none")
function M.clusters(snap)
  local online = {}
  for _, c in ipairs(snap.cpus or {}) do if c.online then online[#online + 1] = c end end
  local basis
  for _, key in ipairs({ "capacity", "max_khz" }) do
    local all = #online > 0
    for _, c in ipairs(online) do if not c[key] then all = false end end
    if all then basis = key break end
  end
  local groups, order = {}, {}
  for _, c in ipairs(online) do
    local k = basis and c[basis] or 0
    if not groups[k] then groups[k] = { cpus = {} } order[#order + 1] = k end
    local g = groups[k]
    g.cpus[#g.cpus + 1] = c.cpu
    g.capacity, g.core = c.capacity, g.core or c.core
    g.max_khz = math.max(g.max_khz or 0, c.max_khz or 0)
    if g.max_khz == 0 then g.max_khz = nil end
  end
  table.sort(order)
  local out = {}
  for i, k in ipairs(order) do
    local g = groups[k]
    g.name = #order == 1 and "all" or (i == 1 and "little") or (i == #order and "big") or "mid"
    out[i] = g
  end
  return out, basis == "capacity" and "cpu_capacity" or basis == "max_khz" and "cpuinfo_max_freq" or "none"
end

local function ghz(khz) return ("%.3g GHz"):format(khz / 1e6) end

-- The per-CPU and thermal part of a snapshot, as kept before and after the run.
local function moment(s)
  local cpus = {}
  for i, c in ipairs(s.cpus or {}) do
    cpus[i] = { cpu = c.cpu, online = c.online, cur_khz = c.cur_khz, min_khz = c.min_khz, max_khz = c.max_khz,
      scaling_min_khz = c.scaling_min_khz, scaling_max_khz = c.scaling_max_khz, governor = c.governor }
  end
  return { cpus = json.array(cpus), thermal = s.thermal, thermal_status = s.thermal_status,
    android_temperatures = s.android_temperatures, battery = s.battery, loadavg = s.loadavg,
    mem_available_kb = s.mem_available_kb }
end

local function hottest(m) return thermal.hottest_cpu(m.thermal, m.android_temperatures) end

--- How far the hottest CPU may warm during a run, in °C, before the record says it heated.
M.HEATED_C = 5

--- The record's `device_state` from the snapshots before and after the measured processes (after may be nil
-- when the second snapshot failed) and the warnings it raises: the current frequency of a CPU used fell, or
-- Android's thermal status rose. opts.cpus_used: the CPU ids the runner was allowed on (default: online).
---@param before table snapshot
---@param after table? snapshot
---@param opts? {cpus_used?: integer[]}
---@return table device_state, string[] warnings
function M.record(before, after, opts)
  opts = opts or {}
  local clusters, basis = M.clusters(before)
  local cores = {}
  for i, g in ipairs(clusters) do
    cores[i] = { name = g.name, cpus = M.cpulist_format(g.cpus), core = g.core, capacity = g.capacity,
      max_khz = g.max_khz }
  end
  local used = opts.cpus_used or before.online or {}
  local ds = { hostname = before.hostname, kernel = before.kernel, os = before.os, board = before.board,
    android = before.android, cpus_online = before.online and #before.online, online = before.online and
    M.cpulist_format(before.online), cpus_used = M.cpulist_format(used), clusters = json.array(cores),
    cluster_basis = basis, mem_total_kb = before.mem_total_kb, compatible = before.compatible,
    emulated = before.emulated, before = moment(before),
    after = after and moment(after) or nil, missing = json.array(before.missing or {}) }
  for i, c in ipairs(before.cpus or {}) do
    ds.before.cpus[i].core, ds.before.cpus[i].capacity, ds.before.cpus[i].cluster_id = c.core, c.capacity, c.cluster_id
  end
  local warnings = {}
  if after then
    local now = {}
    for _, c in ipairs(after.cpus or {}) do now[c.cpu] = c end
    local usedset = {}
    for _, c in ipairs(used) do usedset[c] = true end
    local fell, compared = {}, false
    for _, c in ipairs(before.cpus or {}) do
      local a = now[c.cpu]
      if usedset[c.cpu] and c.cur_khz and a and a.cur_khz then
        compared = true
        if a.cur_khz < c.cur_khz then fell[#fell + 1] = ("cpu%d %s -> %s"):format(c.cpu, ghz(c.cur_khz), ghz(a.cur_khz)) end
      end
    end
    local status_rose = before.thermal_status and after.thermal_status and after.thermal_status > before.thermal_status
    if compared or (before.thermal_status and after.thermal_status) then ds.throttled = #fell > 0 or status_rose == true end
    if #fell > 0 then
      warnings[#warnings + 1] = ("throttled: the current frequency of CPUs used fell during the run (%s%s)")
        :format(table.concat(fell, ", ", 1, math.min(#fell, 4)), #fell > 4 and ", ..." or "")
    end
    if status_rose then
      warnings[#warnings + 1] = ("throttled: Android's thermal status rose from %g to %g during the run")
        :format(before.thermal_status, after.thermal_status)
    end
    -- a long run (an LLM's generation) heats a phone before its clocks fall: said while it is still a warning
    local t0, t1 = hottest(ds.before), hottest(ds.after)
    if t0 and t1 and t1 - t0 >= M.HEATED_C then
      warnings[#warnings + 1] = ("heated: the hottest CPU temperature rose from %.1f to %.1f °C during the run: " ..
        "later processes may run slower (--cooldown or --cool-to wait between them)"):format(t0, t1)
    end
  end
  for _, w in ipairs(M.setup_warnings(ds)) do warnings[#warnings + 1] = w end
  return ds, warnings
end

--- What a board's setup before the run does to its numbers, from a record's device_state (ds): a CPU governor
--- other than performance, other load (the 1-minute load average from 0.5: half a CPU busy on average). They go
--- in the record's warnings (M.record); a view of an older record that lacks them adds them from here.
---@param ds table a record's device_state
---@return string[]
function M.setup_warnings(ds)
  local out, govs, seen = {}, {}, {}
  local before = type(ds) == "table" and type(ds.before) == "table" and ds.before or {}
  for _, c in ipairs(type(before.cpus) == "table" and before.cpus or {}) do
    local g = type(c) == "table" and c.governor
    if type(g) == "string" and g ~= "performance" and not seen[g] then
      seen[g] = true
      govs[#govs + 1] = g
    end
  end
  if #govs > 0 then
    out[#out + 1] = ("CPU governor %s, not performance: frequencies may change under the run (set the governor " ..
      "to performance for stable numbers)"):format(table.concat(govs, ", "))
  end
  local l1 = type(before.loadavg) == "table" and before.loadavg[1]
  if type(l1) == "number" and l1 >= 0.5 then
    out[#out + 1] = ("other load: the 1-minute load average was %.2f before the run%s"):format(l1,
      math.type(ds.cpus_online) == "integer" and (" (%d CPUs online)"):format(ds.cpus_online) or "")
  end
  return out
end

--- One line for the human report: "raspberrypi · Cortex-A76 x4 · 2.4 GHz ondemand · 58.4 °C -> 61 °C".
---@param ds table a record's device_state
function M.summary(ds)
  local parts = {}
  local a = ds.android
  parts[1] = a and a.product_model and ((a.product_manufacturer and (a.product_manufacturer .. " ") or "") .. a.product_model)
    or ds.hostname or ds.board or "?"
  if ds.npu then parts[#parts + 1] = ds.npu end
  if ds.memory_mode then parts[#parts + 1] = ds.memory_mode end
  if ds.cpu_hz then parts[#parts + 1] = "CPU " .. ghz(ds.cpu_hz / 1e3) end
  if ds.npu_hz then parts[#parts + 1] = "NPU " .. ghz(ds.npu_hz / 1e3) end
  local cl = {}
  for _, g in ipairs(ds.clusters or {}) do
    cl[#cl + 1] = ("%s x%d"):format(g.core or "CPU", #(M.cpulist(g.cpus) or {}))
  end
  if #cl > 0 then parts[#parts + 1] = table.concat(cl, " + ") end
  local maxk, gov
  for _, c in ipairs(ds.before and ds.before.cpus or {}) do
    if c.max_khz and (not maxk or c.max_khz > maxk) then maxk = c.max_khz end
    gov = gov or c.governor
  end
  if maxk or gov then parts[#parts + 1] = ((maxk and ghz(maxk) or "") .. (gov and (" " .. gov) or "")):gsub("^ ", "") end
  local t0, t1 = ds.before and hottest(ds.before), ds.after and hottest(ds.after)
  if t0 then parts[#parts + 1] = ("%.1f °C"):format(t0) .. (t1 and (" -> %.1f °C"):format(t1) or "") end
  local s0, s1 = ds.before and ds.before.thermal_status, ds.after and ds.after.thermal_status
  if s0 then parts[#parts + 1] = ("thermal status %g"):format(s0) .. (s1 and s1 ~= s0 and (" -> %g"):format(s1) or "") end
  local b = ds.before and ds.before.battery
  if b then parts[#parts + 1] = ("battery %.0f%%%s"):format(b.level_pct, b.charging and " charging" or "") end
  if ds.throttled then parts[#parts + 1] = "THROTTLED" end
  if ds.emulated then parts[#parts + 1] = "EMULATED" end
  return table.concat(parts, " · ")
end

--- One snapshot of target (odp.target.* object with exec): {snapshot} | nil, err, code. opts.root, else
-- $ODP_STATE_ROOT (a test hook), names a directory on the target that stands in for its / (recorded trees
-- of real boards, commands from <root>/bin/).
---@param opts? {root?: string, timeout?: number}
function M.gather(target, opts)
  opts = opts or {}
  local root = opts.root or os.getenv("ODP_STATE_ROOT") or ""
  -- read in-process by the board's helper or odp itself (src/helper/state.c): no shell, no forks
  if target.state_text then
    local text, err, code = target:state_text(root, table.concat(CPU_FILES, " "), table.concat(PROPS, "|"),
      opts.timeout or 30)
    if text then return M.snapshot(M.parse(text)) end
    if err then return nil, err, code end
  end
  local r, err, code = target:exec({ "sh", "-c", M.SCRIPT, "odp-state", root },
    { rusage = false, timeout = opts.timeout or 30, capture_limit = M.MAX_TEXT })
  if not r then return nil, err, code end
  if r.timed_out then return nil, "ETIMEDOUT: the device-state script did not finish", "ETIMEDOUT" end
  if r.status ~= 0 then
    return nil, ("EIO: the device-state script exited with status %s: %s"):format(tostring(r.status),
      (r.stderr or ""):match("[^\n]*")), "EIO"
  end
  return M.snapshot(M.parse(r.stdout))
end

--- A bare-metal board's device_state (the Ethos-U flow: no shell to ask): what its device file declares
-- (the NPU and its configuration, the NPU cache size the build uses, the core the probe attaches to, and
-- `clocks = {cpu_hz, npu_hz}` when the file gives them) and the memory mode of the run. p: the flow's plan
-- ({memory_mode, dropped = {cache names dropped for the mode}}).
function M.bare_metal(dev, p)
  local c = dev.build and dev.build.cmake or {}
  local dropped = {}
  for _, name in ipairs(p.dropped or {}) do dropped[name] = true end
  local clocks = dev.clocks or {}
  local ds = { board = dev.name, description = dev.description, core = dev.probe and dev.probe.jlink_device,
    npu = c.ETHOS_U_NPU_ID and (c.ETHOS_U_NPU_ID .. (c.ETHOS_U_NPU_CONFIG_ID and (" " .. c.ETHOS_U_NPU_CONFIG_ID) or "")),
    npu_cache_size = not dropped.ETHOS_U_NPU_CACHE_SIZE and c.ETHOS_U_NPU_CACHE_SIZE or nil,
    memory_mode = p.memory_mode, cpu_hz = clocks.cpu_hz, npu_hz = clocks.npu_hz }
  local missing = {}
  for _, k in ipairs({ "npu", "cpu_hz", "npu_hz" }) do if ds[k] == nil then missing[#missing + 1] = k end end
  ds.missing = json.array(missing)
  return ds
end

--- For a flow: the snapshot before the measured processes, or nil with rec.device_state = {error} (a
-- target whose state cannot be read still measures).
function M.before(rec, target, opts)
  local snap, err = M.gather(target, opts)
  if not snap then rec.device_state = { error = err } end
  return snap
end

--- For a flow: the snapshot after the measured processes, the record's device_state and its warnings.
-- opts.cpus_used as in M.record.
function M.after(rec, before, target, opts)
  local after, err = M.gather(target)
  if not after then rec.warnings[#rec.warnings + 1] = "device state after the run: " .. tostring(err) end
  local state, warnings = M.record(before, after, opts)
  rec.device_state = state
  -- an emulated board's times are the emulator's: the record says so, as the Ethos-U twin's say `modelled`
  if state.emulated and rec.latency_ms then rec.latency_ms.emulated = true end
  for _, w in ipairs(warnings) do rec.warnings[#rec.warnings + 1] = w end
end

return M
