-- perf counters through odp-rusage --counters (perf_event_open on the runner, inherited, enable_on_exec):
-- against `perf stat` counting the same run; the degrade path where this machine's VM has no PMU; the hardware
-- path (cycles, instructions, ipc, multiplexing) from recorded perf results; the parser on mutated lines; the
-- flow's record and report.
local T = require("t")
local proc = require("odp.proc")
local rusage = require("odp.target.rusage")
local json = require("odp.core.json")

local root = T.root()
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local odp = os.getenv("ODP") or (build .. "/odp")
local helper = build .. "/odp-rusage-x86_64"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"

-- forks, sleeps and touches memory: context switches, page faults and CPU time in the hundreds at least
local WORKLOAD = { "sh", "-c", "i=0; while [ $i -lt 150 ]; do i=$((i+1)); sleep 0.001; done; " ..
  "head -c 20000000 /dev/zero | od >/dev/null" }

-- `perf stat -x,` lines: value,unit,event,run_time,percent,... -> {event = value}, {event = "<not supported>"...}
local function perf_stat(events, argv)
  local cmd = { "perf", "stat", "-x,", "-e", events, "--" }
  table.move(argv, 1, #argv, #cmd + 1, cmd)
  local r = assert(proc.run { argv = cmd, timeout = 120 })
  local out = {}
  for line in r.stderr:gmatch("[^\n]+") do
    local v, _, ev = line:match("^([^,]*),([^,]*),([^,]+)")
    if ev then out[ev] = tonumber(v) or v end
  end
  return out, r
end

T.test("software counters agree with perf stat counting the same run (within 5%)", function()
  local argv = { helper, "--counters", "basic", "--" }
  table.move(WORKLOAD, 1, #WORKLOAD, #argv + 1, argv)
  local want, r = perf_stat("task-clock,context-switches,cpu-migrations,page-faults", argv)
  local got = assert(rusage.parse(r.stderr), "an ODP-RUSAGE line").counters
  T.ok(got, "an ODP-COUNTERS line")
  -- perf stat also counts odp-rusage itself (a fork and a wait: ~50 page faults, a switch or two, < 1 ms)
  local function close(name, ours, theirs, floor)
    T.ok(type(theirs) == "number", name .. " from perf stat: " .. tostring(theirs))
    local tol = math.max(0.05 * theirs, floor)
    if math.abs(ours - theirs) > tol then
      error(("%s: odp %s, perf stat %s (tolerance %s)"):format(name, ours, theirs, tol), 0)
    end
    print(("# %s: odp %s, perf stat %s"):format(name, ours, theirs))
  end
  close("task-clock (ms)", got.task_clock_ms, want["task-clock"], 1.0)
  close("context-switches", got.context_switches, want["context-switches"], 5)
  close("cpu-migrations", got.cpu_migrations, want["cpu-migrations"], 5)
  close("page-faults", got.page_faults, want["page-faults"], 100)
  T.ok(got.page_faults > 1000 and got.context_switches > 100, "the workload was counted, children included")
end)

T.test("hardware counters: what perf stat finds here, odp finds (no PMU in this VM: the degrade path)", function()
  local hw = "cycles,instructions,branches,branch-misses,cache-references,cache-misses"
  local want = perf_stat(hw, { "true" })
  local r = assert(proc.run { argv = { helper, "--counters", "all", "true" }, timeout = 30 })
  local got = assert(rusage.parse(r.stderr)).counters
  local pmu = false
  for ev in hw:gmatch("[^,]+") do
    local k = ev:gsub("%-", "_")
    if want[ev] == "<not supported>" then
      T.eq(got.unavailable and got.unavailable[k], "unsupported", ev)
      T.eq(got[k], nil, ev .. ": nothing invented")
    else
      pmu = true
      T.ok(type(got[k]) == "number" and got[k] > 0, ev .. " counted")
    end
  end
  print(pmu and "# this machine has a PMU: the hardware path ran here"
    or "# this machine has no hardware PMU: the degrade path ran here (cycles etc. unsupported, like perf stat)")
  T.eq(got.ipc ~= nil, pmu, "ipc only with cycles and instructions")
end)

T.test("an unprivileged user under perf_event_paranoid >= 2: user-space counting, said so", function()
  local paranoid = tonumber(T.read("/proc/sys/kernel/perf_event_paranoid"))
  local r = assert(proc.run { argv = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", helper,
    "--counters", "basic", "true" }, timeout = 30 })
  local got = assert(rusage.parse(r.stderr), r.stderr).counters
  T.eq(got.paranoid, paranoid)
  if paranoid >= 3 then
    T.eq(got.unavailable.task_clock_ms, "denied")
    T.match(rusage.counters_warning(rusage.total_counters({ got })), "kernel%.perf_event_paranoid")
  elseif paranoid >= 2 then
    T.eq(got.user_only, true, "kernel-side counting dropped, and recorded")
    T.ok(got.page_faults and got.page_faults > 0)
  else
    T.eq(got.user_only, nil, "kernel and user space counted: nothing to record")
    T.ok(got.page_faults and got.page_faults > 0)
  end
  print(("# perf_event_paranoid is %d here: the %s branch ran"):format(paranoid,
    paranoid >= 3 and "denied" or paranoid >= 2 and "user-space-only" or "full counting"))
end)

-- The hardware path, from perf results recorded on real Arm hardware: `perf stat -e instructions,cycles
-- ./stride` on a Khadas Edge2 (Cortex-A76), Arm's "Top-down performance analysis" learning path
-- (learn.arm.com/learning-paths/servers-and-cloud-computing/top-down-n1/analysis-1): 10,002,762,164
-- instructions:u, 45,157,063,927 cycles:u, "0.22 insn per cycle", 20.172522129 s elapsed, counted all along.
local EDGE2 = "ODP-COUNTERS paranoid=2 user_only=1 task-clock=20171704000,20172522129,20172522129 " ..
  "context-switches=25,20172522129,20172522129 cpu-migrations=0,20172522129,20172522129 " ..
  "page-faults=1062,20172522129,20172522129 cycles=45157063927,20172522129,20172522129 " ..
  "instructions=10002762164,20172522129,20172522129"

T.test("hardware path (recorded): cycles, instructions and perf's IPC", function()
  local c = assert(rusage.parse_counters(EDGE2))
  T.eq({ c.cycles, c.instructions, c.user_only, c.paranoid }, { 45157063927, 10002762164, true, 2 })
  T.eq(("%.2f"):format(c.ipc), "0.22", "perf stat's insn per cycle")
  T.eq(c.scaled, nil, "counted all the time: not scaled")
  T.near(c.task_clock_ms, 20171.704, 1e-12)
end)

T.test("multiplexed counters are scaled like perf stat (value * enabled / running) and marked", function()
  -- the same cycles counted a quarter of the time; branch-misses never scheduled; cache-misses refused
  local line = "ODP-COUNTERS paranoid=3 cycles=11289265981,20172522129,5043130532 " ..
    "instructions=10002762164,20172522129,20172522129 branch-misses=0,20172522129,0 cache-misses=denied"
  local c = assert(rusage.parse_counters(line))
  T.eq(c.cycles, math.floor(11289265981 * (20172522129 / 5043130532) + 0.5))
  T.near(c.cycles, 45157063924, 1e-9, "a quarter of the time, scaled back to the whole")
  T.eq(c.scaled, { "cycles" })
  T.eq(c.unavailable, { branch_misses = "not counted", cache_misses = "denied" })
  local total = rusage.total_counters({ c, assert(rusage.parse_counters(EDGE2)) })
  T.eq(total.total.instructions, 2 * 10002762164)
  T.near(total.total.ipc, 2 * 10002762164 / (c.cycles + 45157063927), 1e-12)
  T.eq(#total.processes, 2)
  T.match(rusage.counters_warning(total),
    "^perf counters cache_misses refused by kernel%.perf_event_paranoid = 3: `sysctl %-w kernel%.perf_event_paranoid=1`")
  T.eq(rusage.counters_warning(rusage.total_counters({ assert(rusage.parse_counters(EDGE2)) })), nil)
end)

T.test("parser fuzz: 3000 mutated lines, never an error, numbers or nothing", function()
  local base = EDGE2 .. "\nODP-RUSAGE status=0 signal=0 core=0 maxrss_kb=1 utime_s=0 stime_s=0 wall_s=0\n"
  local rnd = T.lcg(7)
  local alphabet = "0123456789,=-_ abcdeunsportd\n"
  for i = 1, 3000 do
    local t = base
    for _ = 1, 1 + rnd(6) do
      local p = 1 + rnd(#t)
      if rnd(2) == 0 then t = t:sub(1, p - 1) .. t:sub(p + 1 + rnd(8))
      else local k = 1 + rnd(#alphabet) t = t:sub(1, p - 1) .. alphabet:sub(k, k):rep(1 + rnd(30)) .. t:sub(p) end
    end
    local ok, rec = pcall(rusage.parse, t)
    if not ok then error(("mutation %d raised: %s"):format(i, rec), 0) end
    local c = rec and rec.counters
    for k, v in pairs(c or {}) do
      if k ~= "scaled" and k ~= "unavailable" and k ~= "user_only" then
        T.ok(type(v) == "number" and v == v and v >= -9, ("mutation %d: %s is a number"):format(i, k))
      end
    end
  end
  T.eq(rusage.parse_counters("ODP-COUNTERS cycles=" .. ("9"):rep(21) .. ",1,1"), nil, "too long: not a value")
end)

T.with_real_runner("the flow: counters per process and totalled in the record, the report's line, --counters none",
  function(runner)
    local dir = T.tmpdir()
    local function run(extra)
      local argv = { odp, "run", root .. "/scripts/host.lua", "--runs-dir", dir .. "/runs", "--runner", runner,
        "--model", add, "-n", "5", "--repeat", "2" }
      table.move(extra, 1, #extra, #argv + 1, argv)
      return assert(proc.run { argv = argv, cwd = dir, timeout = 120 })
    end
    local r = run({ "--format", "json" })
    T.eq(r.status, 0, r.stderr)
    local rec = assert(json.decode(r.stdout))
    local c = rec.counters
    T.eq(#c.processes, 2, "one per runner process")
    T.eq(c.total.page_faults, c.processes[1].page_faults + c.processes[2].page_faults)
    T.near(c.total.task_clock_ms, c.processes[1].task_clock_ms + c.processes[2].task_clock_ms, 1e-9)
    T.ok(c.total.task_clock_ms > 0 and c.total.page_faults > 50, "the runner was counted")
    r = run({ "--counters", "none", "--format", "json" })
    T.eq(assert(json.decode(r.stdout)).counters, nil)
    r = run({ "--counters", "all" })
    T.match(r.stdout, "counters +[%d.]+ [^ ]*s task%-clock · %d+ context%-switches · %d+ cpu%-migrations · %d+ page%-faults")
  end)

T.done()
