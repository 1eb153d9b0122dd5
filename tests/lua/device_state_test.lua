-- odp.target.device_state: the gather script on this machine's real /proc and /sys (no cpufreq or thermal zones
-- here: the absence path), on recorded trees of real boards (tests/fixtures/device_state, README there), the
-- parser on malformed and mutated input, clusters, throttling and the report line.
local T = require("t")
local ds = require("odp.target.device_state")
local proc = require("odp.proc")
local sys = require("odp.sys")

local fx = T.root() .. "/tests/fixtures/device_state/"
local host = require("odp.target.host").new()

local function gather(root) return assert(ds.gather(host, { root = root })) end
local function has(list, x) for _, v in ipairs(list) do if v == x then return true end end return false end
local function first_line(argv) return (assert(proc.run(argv)).stdout:match("^[^\n]*")) end

T.test("this machine: identity, CPUs and memory agree with the kernel's own answers", function()
  local s = gather()
  T.eq(s.hostname, sys.hostname(), "hostname")
  T.eq(s.kernel, first_line({ "uname", "-r" }), "uname -r")
  T.eq(#s.online, tonumber(first_line({ "nproc", "--all" })), "nproc --all")
  local meminfo = T.read("/proc/meminfo")
  local avail = tonumber(meminfo:match("MemAvailable:%s*(%d+)"))
  T.ok(math.abs(s.mem_available_kb - avail) < 0.2 * avail, "MemAvailable near /proc/meminfo's")
  T.eq(s.mem_total_kb, tonumber(meminfo:match("MemTotal:%s*(%d+)")), "MemTotal")
  local l1 = tonumber(T.read("/proc/loadavg"):match("^(%S+)"))
  T.ok(math.abs(s.loadavg[1] - l1) < 2, "load average")
  local model = T.read("/proc/cpuinfo"):match("model name%s*:%s*([^\n]+)")
  if model then T.eq(s.cpus[1].core, model, "cpu0's model name") end
  T.eq(s.os, T.read("/etc/os-release"):match('PRETTY_NAME="([^"]+)"'), "os-release")
end)

T.test("this machine: what it lacks is listed in missing, never invented", function()
  local s = gather()
  local freq = sys.stat("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")
  local zone = sys.stat("/sys/class/thermal/thermal_zone0/temp")
  T.eq(has(s.missing, "cpufreq"), not freq, "cpufreq listed missing exactly when absent")
  T.eq(has(s.missing, "thermal_zones"), not zone, "thermal zones listed missing exactly when absent")
  if not freq then
    for _, c in ipairs(s.cpus) do T.eq({ c.cur_khz, c.max_khz, c.governor }, {}, "no frequency invented") end
    print("# this machine has no cpufreq: the absence path")
  end
  if not zone then T.eq(s.thermal, nil, "no temperature invented") end
  T.eq(s.android, nil, "not Android: no getprop section")
end)

T.test("Pixel 8 (three clusters by cpuinfo_max_freq, getprop, dumpsys)", function()
  local s = gather(fx .. "pixel8")
  T.eq(s.online, { 0, 1, 2, 3, 4, 5, 6, 7, 8 })
  local cl, basis = ds.clusters(s)
  T.eq(basis, "cpuinfo_max_freq", "no cpu_capacity in the recording")
  T.eq(#cl, 3)
  T.eq({ cl[1].name, cl[1].cpus, cl[1].core, cl[1].max_khz }, { "little", { 0, 1, 2, 3 }, "Cortex-A510", 1704000 })
  T.eq({ cl[2].name, cl[2].cpus, cl[2].core, cl[2].max_khz }, { "mid", { 4, 5, 6, 7 }, "Cortex-A715", 2367000 })
  T.eq({ cl[3].name, cl[3].cpus, cl[3].core, cl[3].max_khz }, { "big", { 8 }, "Cortex-X3", 2914000 })
  T.eq({ s.cpus[9].cur_khz, s.cpus[9].governor, s.cpus[1].cur_khz }, { 500000, "sched_pixel", 1197000 })
  T.eq({ s.android.product_model, s.android.product_manufacturer, s.android.build_version_sdk },
    { "Pixel 8", "Google", "34" })
  T.eq(s.android.build_fingerprint, "google/shiba/shiba:14/UQ1A.240105.004/11206848:userdebug/dev-keys")
  for _, m in ipairs({ "ro.soc.model", "cpu_capacity", "thermal_zones" }) do T.ok(has(s.missing, m), m .. " missing") end
  T.eq(s.thermal_status, 0)
  T.eq(#s.android_temperatures, 9, "the HAL's current list, not the cached one too")
  T.eq(s.android_temperatures[1], { name = "AP", type = 0, temp_c = 25.6 })
  T.eq(s.battery, { level_pct = 84, temperature_c = 32.6, charging = true, status = 2 })
  local rec = ds.record(s, s)
  T.eq(ds.summary(rec), "Google Pixel 8 · Cortex-A510 x4 + Cortex-A715 x4 + Cortex-X3 x1 · 2.91 GHz sched_pixel · "
    .. "25.6 °C -> 25.6 °C · thermal status 0 · battery 84% charging")
  T.eq(rec.throttled, false, "same frequencies, same status")
end)

T.test("Raspberry Pi 5 (one cluster, cpufreq, a thermal zone, os-release)", function()
  local s = gather(fx .. "rpi5")
  local cl, basis = ds.clusters(s)
  T.eq({ #cl, cl[1].name, cl[1].core, basis }, { 1, "all", "Cortex-A76", "cpuinfo_max_freq" })
  T.eq(s.board, "Raspberry Pi 5 Model B Rev 1.0")
  T.eq({ s.hostname, s.kernel, s.os }, { "raspberrypi", "6.12.25+rpt-rpi-2712", "Debian GNU/Linux 12 (bookworm)" })
  T.eq(s.thermal, { { zone = 0, type = "cpu-thermal", temp_c = 58.4 } })
  T.eq(s.mem_available_kb, 6126208)
  local rec = ds.record(s, s)
  T.eq(rec.clusters[1].cpus, "0-3")
  T.eq(ds.summary(rec), "raspberrypi · Cortex-A76 x4 · 2.4 GHz ondemand · 58.4 °C -> 58.4 °C")
end)

T.test("AWS Graviton3 (no cpufreq, no thermal zones: the common cloud case)", function()
  local s = gather(fx .. "graviton3")
  local cl, basis = ds.clusters(s)
  T.eq({ #cl, cl[1].core, #cl[1].cpus, basis }, { 1, "Neoverse-V1", 4, "none" })
  for _, m in ipairs({ "cpufreq", "thermal_zones", "cpu_capacity", "os_release", "hostname" }) do
    T.ok(has(s.missing, m), m .. " missing")
  end
  local rec = ds.record(s, s)
  T.eq(rec.throttled, nil, "nothing to compare: neither throttled nor not")
  T.eq(ds.summary(rec), "? · Neoverse-V1 x4")
end)

local function copy_tree(src)
  local d = T.tmpdir()
  assert(os.execute(("cp -R '%s/.' '%s/'"):format(src, d)))
  return d
end

T.test("throttled: a used CPU's frequency fell, Android's thermal status rose", function()
  local d = copy_tree(fx .. "pixel8")
  local before = gather(d)
  T.write(d .. "/sys/devices/system/cpu/cpu8/cpufreq/scaling_cur_freq", "400000\n")
  T.write(d .. "/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "1704000\n")
  T.write(d .. "/dumpsys_thermalservice.txt", (T.read(d .. "/dumpsys_thermalservice.txt"):gsub("Thermal Status: 0",
    "Thermal Status: 2")))
  local after = gather(d)
  local rec, w = ds.record(before, after, { cpus_used = { 8 } })
  T.eq(rec.throttled, true)
  T.eq(rec.cpus_used, "8")
  T.eq(#w, 3)
  T.match(w[1], "cpu8 0%.5 GHz %-> 0%.4 GHz")
  T.match(w[2], "thermal status rose from 0 to 2")
  -- the setup's warnings are in the record too (the HTML page showed them, the record did not: issue 28)
  T.eq(w[3], "CPU governor sched_pixel, not performance: frequencies may change under the run (set the governor " ..
    "to performance for stable numbers)")
  T.match(ds.summary(rec), "thermal status 0 %-> 2 · battery 84%% charging · THROTTLED$")
  rec, w = ds.record(before, after, { cpus_used = { 0 } })
  T.eq(#w, 2, "cpu0 went up: only the thermal status (and the governor)")
  T.eq(rec.after.cpus[1].cur_khz, 1704000)
end)

T.test("heated: the hottest CPU zone warmed by HEATED_C or more during the run (a long generation), said once", function()
  local d = copy_tree(fx .. "rpi5")
  local before = gather(d)
  local t0 = tonumber(T.read(d .. "/sys/class/thermal/thermal_zone0/temp")) / 1000
  T.write(d .. "/sys/class/thermal/thermal_zone0/temp", ("%d\n"):format((t0 + ds.HEATED_C - 1) * 1000))
  local _, w = ds.record(before, gather(d))
  for _, x in ipairs(w) do T.ok(not x:find("heated", 1, true), "under the threshold: " .. x) end
  T.write(d .. "/sys/class/thermal/thermal_zone0/temp", ("%d\n"):format((t0 + ds.HEATED_C + 3) * 1000))
  local rec
  rec, w = ds.record(before, gather(d))
  local heated = {}
  for _, x in ipairs(w) do if x:find("^heated") then heated[#heated + 1] = x end end
  T.eq(#heated, 1)
  T.match(heated[1], ("rose from %.1f to %.1f °C"):format(t0, t0 + ds.HEATED_C + 3))
  T.match(ds.summary(rec), ("%.1f °C %%-> %.1f °C"):format(t0, t0 + ds.HEATED_C + 3))
end)

T.test("setup warnings: a governor other than performance, a 1-minute load from 0.5; none on a quiet, performance board", function()
  local function state(gov, load, cpus)
    return { cpus_online = cpus, before = { cpus = { { cpu = 0, governor = gov }, { cpu = 1, governor = gov } }, loadavg = { load, 0.1, 0.1 } } }
  end
  T.eq(ds.setup_warnings(state("performance", 0.49, 4)), {})
  T.eq(ds.setup_warnings(state("performance", 0.5, 4)), { "other load: the 1-minute load average was 0.50 before the run (4 CPUs online)" })
  T.eq(#ds.setup_warnings(state("schedutil", 2, nil)), 2)
  T.eq(ds.setup_warnings({}), {}); T.eq(ds.setup_warnings(nil), {})
  T.eq(ds.setup_warnings({ before = { cpus = { "x", { governor = 3 } }, loadavg = { "high" } } }), {}, "odd shapes: nothing, no error")
end)

T.test("unreadable and malformed sysfs: absent fields, no crash", function()
  local d = copy_tree(fx .. "rpi5")
  T.write(d .. "/sys/devices/system/cpu/online", "zero-three\n")
  T.write(d .. "/sys/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq", "fast\n")
  T.write(d .. "/sys/devices/system/cpu/cpu2/cpufreq/cpuinfo_max_freq", "")
  T.write(d .. "/sys/class/thermal/thermal_zone0/temp", "99999999999999999999999999\n")
  T.write(d .. "/proc/loadavg", "\0\0\0")
  T.write(d .. "/proc/cpuinfo", ("x"):rep(200000))
  local s = gather(d)
  T.eq(s.online, nil)
  T.ok(has(s.missing, "cpus_online") and has(s.missing, "loadavg"))
  T.eq(s.cpus[2].cur_khz, nil)
  T.eq(s.cpus[3].max_khz, nil)
  local _, basis = ds.clusters(s)
  T.eq(basis, "none", "no online list: no cluster")
  T.ok(ds.summary(ds.record(s, s)), "a line all the same")
  -- odp.target.thermal reads every temperature: an implausible zone is dropped here as in the stopping rule's
  T.eq(s.thermal, nil, "99999999999999999999999999 millidegrees is no temperature")
  T.write(d .. "/sys/class/thermal/thermal_zone0/temp", "250000\n")
  T.eq(gather(d).thermal, nil, "250 °C is outside -60..200 °C")
  T.write(d .. "/sys/class/thermal/thermal_zone0/temp", "61500\n")
  T.eq(gather(d).thermal, { { zone = 0, type = "cpu-thermal", temp_c = 61.5 } })
end)

T.test("cpulist: ranges, sorting, bad input", function()
  T.eq(ds.cpulist("4-7,0,2"), { 0, 2, 4, 5, 6, 7 })
  T.eq(ds.cpulist(" 1 , 1 "), { 1 })
  T.eq(ds.cpulist(""), {})
  for _, bad in ipairs({ "a", "3-1", "1-", "-1", "99999", "1,,2", "0-5000" }) do
    T.eq(ds.cpulist(bad), nil, bad)
  end
  T.eq(ds.cpulist_format({ 7, 0, 1, 2, 5 }), "0-2,5,7")
end)

T.test("the device tree's compatible names: QEMU's virt machine is emulated, a Pi 5 is not", function()
  -- as the script prints /proc/device-tree/compatible: NUL-separated names (the arm64 twin's, a Pi 5's as its
  -- upstream device tree bcm2712-rpi-5-b.dts declares them)
  local function snap(dt) return ds.snapshot(ds.parse("@f /proc/device-tree/compatible\n" .. dt .. "\n@e\n")) end
  local virt = snap("linux,dummy-virt\0")
  T.eq(virt.compatible, { "linux,dummy-virt" }); T.match(virt.emulated, "QEMU virt")
  local rec = ds.record(virt, virt)
  T.eq(rec.emulated, virt.emulated); T.match(ds.summary(rec), "EMULATED$")
  local pi5 = snap("raspberrypi,5-model-b\0brcm,bcm2712\0")
  T.eq(pi5.compatible, { "raspberrypi,5-model-b", "brcm,bcm2712" }); T.eq(pi5.emulated, nil)
  T.eq(snap(("x\0"):rep(100)).compatible, (function() local t = {} for i = 1, 16 do t[i] = "x" end return t end)(),
    "at most 16 names")
  -- linux,dummy-virt further down the list is some other machine's claim, not QEMU's root node
  T.eq(snap("vendor,board\0linux,dummy-virt\0").emulated, nil)
  if not sys.stat("/proc/device-tree/compatible") then T.eq(gather().compatible, nil, "no device tree here") end
end)

T.test("parser fuzz: 3000 mutations of real outputs, bounded sizes, never an error", function()
  local texts = {}
  for _, name in ipairs({ "pixel8", "rpi5", "graviton3" }) do
    local r = assert(proc.run { argv = { "sh", "-c", ds.SCRIPT, "odp-state", fx .. name } })
    texts[#texts + 1] = r.stdout
  end
  -- and a device tree's compatible list (NUL-separated), as the arm64 twin's kernel gives it
  texts[#texts + 1] = texts[2] .. "@f /proc/device-tree/compatible\nlinux,dummy-virt\0\n@e\n"
  local rnd = T.lcg(11)
  local alphabet = "@vfce \n/:[]{}=,-.0123456789abcxyz\0"
  for i = 1, 3000 do
    local t = texts[i % #texts + 1]
    for _ = 1, 1 + rnd(8) do
      local p = 1 + rnd(#t)
      local op = rnd(4)
      if op == 0 then t = t:sub(1, p - 1) .. t:sub(p + 1 + rnd(64))
      elseif op == 1 then local k = 1 + rnd(#alphabet) t = t:sub(1, p - 1) .. alphabet:sub(k, k) .. t:sub(p)
      elseif op == 2 then t = t:sub(1, p)
      else local q = 1 + rnd(#t) t = t:sub(1, p) .. t:sub(q, q + rnd(200)) .. t:sub(p + 1) end
    end
    local ok, err = pcall(function()
      local s = ds.snapshot(ds.parse(t))
      ds.summary((ds.record(s, s)))
    end)
    if not ok then error(("mutation %d: %s"):format(i, err), 0) end
  end
  -- size bounds: a flood is cut, not held
  local flood = ("@v /sys/devices/system/cpu/cpu1/online 1\n"):rep(100000)
  local raw = ds.parse(flood)
  local n = 0
  for _ in pairs(raw.values) do n = n + 1 end
  T.eq(n, 1, "one key")
  raw = ds.parse(("@f /x\n" .. ("y"):rep(3 << 20)))
  T.ok(#raw.files["/x"] <= ds.MAX_TEXT, "a block is cut at MAX_TEXT")
  local many = {}
  for i = 1, 20000 do many[i] = ("@v /sys/devices/system/cpu/cpu%d/online 1"):format(i) end
  local s = ds.snapshot(ds.parse(table.concat(many, "\n")))
  T.ok(#s.cpus <= 4096, "CPU ids above 4095 are dropped")
end)

T.done()
