-- Stopping rules and the latency block's statistics (lua/odp/results/measure.lua), alone and end to end through
-- the host flow with the real executor_runner: the runner's own log lines are the oracle of samples.csv.
local T = require("t")
local measure = require("odp.results.measure")
local stats = require("odp.core.stats")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local add = root .. "/tests/fixtures/pte/add_arduino.pte"

local function steady(n, v) local t = {} for i = 1, n do t[i] = v + (i % 3) * 0.001 end return t end

-- A clock the test advances (measure's opts.clock): the rules are checked on it, not on this machine's speed.
-- on_sleep(t) runs after each sleep with the time since the clock was made.
local function test_clock(on_sleep)
  local c = { t = 1000.0 }
  function c.now() return c.t end
  function c.sleep(s) c.t = c.t + s; if on_sleep then on_sleep(c.t - 1000.0) end; return true end
  return c
end

T.test("no rule: one process; --repeat R: exactly R", function()
  local s = measure.stopper {}
  T.eq(s:count(), 1)
  T.eq(s:done(1, steady(10, 1)), true)
  T.eq(s.stop.rule, "repeat"); T.eq(s.stop.met, true); T.eq(s.stop.processes, 1)
  s = measure.stopper { ["repeat"] = 3 }
  T.eq({ s:done(1, {}), s:done(2, {}), s:done(3, {}) }, { false, false, true })
  T.eq(s.stop.processes, 3)
end)

T.test("--min-samples and --min-time: the rule named is the one met last", function()
  local s = measure.stopper { min_samples = 25 }
  T.eq(s:count(), nil)
  T.eq(s:done(1, steady(10, 1)), false)
  T.eq(s:done(2, steady(20, 1)), false)
  T.eq(s:done(3, steady(30, 1)), true)
  T.eq(s.stop.rule, "min_samples"); T.eq(s.stop.samples, 30)
  local clock = test_clock()
  s = measure.stopper({ min_samples = 5, min_time = 0.15 }, { clock = clock })
  clock.sleep(0.1)
  T.eq(s:done(1, steady(10, 1)), false, "enough samples, not enough time")
  clock.sleep(0.1)
  T.eq(s:done(2, steady(20, 1)), true)
  T.eq(s.stop.rule, "min_time"); T.near(s.stop.seconds, 0.2, 1e-9, "seconds")
end)

T.test("--target-ci: stops when the median's 95% CI is within +-PCT; --max-time caps it with a warning", function()
  local s = measure.stopper { target_ci = 1 }
  T.eq(s:done(1, { 1, 2 }), false, "too few samples for a CI")
  T.eq(s:done(2, steady(40, 10)), true)
  T.eq(s.stop.rule, "target_ci"); T.eq(s.stop.met, true); T.ok(s.stop.ci_pct <= 1, "ci_pct")
  T.eq(s.warning, nil)
  -- a spread no CI can shrink in time
  local wild = {}
  for i = 1, 20 do wild[i] = (i % 2 == 0) and 1 or 100 end
  local clock = test_clock()
  s = measure.stopper({ target_ci = 0.5, max_time = 0.05 }, { clock = clock })
  clock.sleep(0.04)
  T.eq(s:done(1, wild), false, "before --max-time")
  clock.sleep(0.04)
  T.eq(s:done(2, wild), true)
  T.near(s.stop.seconds, 0.08, 1e-9, "seconds")
  T.eq(s.stop.rule, "max_time"); T.eq(s.stop.met, false)
  T.match(s.warning, "stopped at %-%-max%-time 0%.05s after 2 process%(es%): 95%% CI of the median")
  T.eq(measure.stopper { target_ci = 2 }.max_time, measure.DEFAULT_MAX_TIME)
end)

T.test("latency: ci95, cv, first_ms, warm, drift; samples.csv round trip", function()
  local groups = { { 5, 1, 1.1, 0.9 }, { 6, 1.2, 1.0, 1.05 }, { 4, 0.95, 1.0, 1.1 } }
  local warnings = {}
  local l = measure.latency({ groups = groups, source = "log", total = 23.3, per_iteration = true }, warnings)
  local all = measure.flatten(groups)
  T.eq(l.n, 12); T.eq(l.p50, stats.percentile(all, 50))
  T.eq(l.ci95, { stats.median_ci(all) }); T.near(l.cv, stats.std(all) / stats.mean(all), 1e-15)
  T.eq(l.first_ms, { 5, 6, 4 })
  T.eq(l.warm.n, 9); T.eq(l.warm.p50, stats.percentile({ 1, 1.1, 0.9, 1.2, 1.0, 1.05, 0.95, 1.0, 1.1 }, 50))
  T.ok(l.drift and l.drift.p > 0.01, "no drift")
  local path = T.tmpdir() .. "/samples.csv"
  assert(measure.write_samples(path, groups))
  T.eq(T.read(path):match("^[^\n]*"), "process,iteration,ms")
  T.eq(assert(measure.read_samples(path)), groups)
  T.write(path, "process,iteration,ms\n1,1,x\n")
  T.match(select(2, measure.read_samples(path)), "bad line")
  -- a process with no samples (an LLM runner whose pieces all reached stdout together) writes no lines: read
  -- back, the processes that have samples, in order
  assert(measure.write_samples(path, { { 1, 2 }, {}, { 3 } }))
  T.eq(assert(measure.read_samples(path)), { { 1, 2 }, { 3 } })
  T.write(path, "process,iteration,ms\n2,1,1\n1,1,1\n")
  T.match(select(2, measure.read_samples(path)), "process 1 out of order")
end)

T.test("drift: a last third 20% slower is a warning with pct and p", function()
  local g = {}
  for i = 1, 60 do g[i] = (i > 40 and 1.2 or 1.0) + (i % 5) * 0.001 end
  local warnings = {}
  local l = measure.latency({ groups = { g }, source = "log", per_iteration = false }, warnings)
  T.ok(l.drift.pct > 19 and l.drift.pct < 21, "pct " .. l.drift.pct)
  T.ok(l.drift.p < 0.01, "p")
  T.match(warnings[1], "^drift: the last third of the iterations is 20%.%d%% slower")
end)

T.test("thermal: zones in millidegrees, dumpsys HAL and battery temperatures; implausible values dropped", function()
  local thermal = require("odp.target.thermal")
  T.eq(thermal.parse_zones("/sys/class/thermal/thermal_zone0/temp 45000\n/sys/class/thermal/thermal_zone1/temp -5\n"
    .. "/sys/class/thermal/thermal_zone2/temp 999999\n/x/thermal_zone3/temp junk\n"),
    { thermal_zone0 = 45.0, thermal_zone1 = -0.005 })
  local ds = "IsStatusOverride: false\nCurrent temperatures from HAL:\n\tTemperature{mValue=38.5, mType=0, "
    .. "mName=CPU0, mStatus=0}\n\tTemperature{mValue=900.0, mType=0, mName=bogus, mStatus=0}\n"
    .. "Current cooling devices from HAL:\n\tCoolingDevice{mValue=0}\nCurrent Battery State:\n  AC powered: false\n"
    .. "  temperature: 312\n"
  T.eq(thermal.parse_dumpsys(ds), { ["hal:CPU0"] = 38.5, battery = 31.2 })
  T.eq({ thermal.hottest { a = 1, b = 3 } }, { 3, "b" })
  T.eq(thermal.hottest {}, nil)
end)

T.test("--cool-to waits until every zone is at or below C; --cool-timeout measures anyway with a warning", function()
  local root = T.tmpdir()
  os.execute(("mkdir -p '%s/thermal_zone0' '%s/cooling_device0'"):format(root, root))
  T.write(root .. "/thermal_zone0/temp", "70000\n")
  local host = require("odp.target.host").new()
  -- a zone that cools down to 45 C 2.5 s into the wait: the cooler reads it after each 1 s sleep
  local clock = test_clock(function(t) if t >= 2.5 then T.write(root .. "/thermal_zone0/temp", "45000\n") end end)
  local c = measure.cooler({ cool_to = 50, cool_timeout = 10 }, host, nil, { root = root, clock = clock })
  c:before(1); c:after(1)
  T.near(c.log[1].waited_s, 3.0, 1e-9, "waited")
  T.eq(c.log[1].before_c, 45.0); T.eq(c.log[1].after_c, 45.0)
  T.eq(#c.warnings, 0)
  T.write(root .. "/thermal_zone0/temp", "70000\n")
  c = measure.cooler({ cool_to = 50, cool_timeout = 0.2, cooldown = 0.1 }, host, nil, { root = root, clock = test_clock() })
  c:before(1); c:before(2)
  T.near(c.log[1].waited_s, 0.2, 1e-9, "the timeout alone")
  T.near(c.log[2].waited_s, 0.3, 1e-9, "cooldown + timeout")
  T.match(c.warnings[1], "process 1: thermal_zone0 still at 70%.0 C after %-%-cool%-timeout 0%.2s: measured anyway")
  c = measure.cooler({ cool_to = 50, cool_timeout = 1 }, host, nil, { root = T.tmpdir() })
  c:before(1); c:before(2)
  T.eq(#c.warnings, 1)
  T.match(c.warnings[1], "^%-%-cool%-to 50: no thermal zones on this target")
  T.eq(measure.cooler({}, host), nil, "nothing asked, nothing done")
end)

T.test("per minute: each process's samples in the minute it started", function()
  local rows = measure.per_minute({ { 1, 2 }, { 3 }, { 10, 20, 30 } }, { 0, 59.9, 61 })
  T.eq(#rows, 2)
  T.eq({ rows[1].minute, rows[1].processes, rows[1].n, rows[1].p50 }, { 1, 2, 3, 2.0 })
  T.eq({ rows[2].minute, rows[2].n, rows[2].p50, rows[2].p90 }, { 2, 3, 20.0, 28.0 })
end)

local function host(args)
  local dir = T.tmpdir()
  local argv = { odp, "run", root .. "/scripts/host.lua", "--model", add, "--runs-dir", dir .. "/runs", "--format", "json" }
  table.move(args, 1, #args, #argv + 1, argv)
  local r = assert(proc.run { argv = argv, cwd = dir, timeout = 120 })
  return r, r.status == 0 and json.decode(r.stdout) or nil
end

T.test("bad input: one line, exit 2, before anything runs", function()
  local fake = (os.getenv("ODP_BUILD_DIR") or (root .. "/build")) .. "/tests/fake_runner"
  for _, c in ipairs {
    { { "--target-ci", "0" }, "%-%-target%-ci must be a positive percentage" },
    { { "--target-ci", "-3" }, "%-%-target%-ci must be a positive percentage" },
    { { "--target-ci", "100" }, "%-%-target%-ci must be a positive percentage" },
    { { "--target-ci", "abc" }, "%-%-target%-ci expects a number" },
    { { "--min-time", "10", "--max-time", "5" }, "%-%-min%-time 10 is larger than %-%-max%-time 5" },
    { { "--repeat", "3", "--target-ci", "2" }, "%-%-repeat runs exactly N processes" },
    { { "--min-samples", "0" }, "%-%-min%-samples must be a positive integer" },
    { { "--sustained", "0" }, "%-%-sustained must be a positive number of minutes" },
    { { "--sustained", "1", "--repeat", "2" }, "%-%-sustained runs for MIN minutes: drop" },
    { { "--cooldown", "-1" }, "%-%-cooldown must be >= 0" },
    { { "--cool-timeout", "0" }, "%-%-cool%-timeout must be > 0" },
  } do
    local args = { "--runner", fake }
    table.move(c[1], 1, #c[1], #args + 1, args)
    local r = host(args)
    T.eq(r.status, 2, table.concat(c[1], " ") .. ": " .. r.stderr)
    T.match(r.stderr, c[2])
    T.eq(select(2, r.stderr:gsub("\n", "")), 1, "one line: " .. r.stderr)
  end
end)

-- the iteration lines of the runner's own stderr, per process: what samples.csv must hold
local function logged(dir, k)
  local groups = {}
  for i = 1, k do
    local g = {}
    local text = T.read(("%s/run%d.stderr"):format(dir, i))
    for ms in text:gmatch("Iteration %d+ of %d+: ([%d.]+) ms") do g[#g + 1] = tonumber(ms) end
    groups[i] = g
  end
  return groups
end

T.with_real_runner("real runner: --target-ci 5 stops on its CI; samples.csv is the runner's own iteration lines", function(runner)
  local r, rec = host { "--runner", runner, "-n", "10", "--target-ci", "5", "--max-time", "60" }
  T.eq(r.status, 0, r.stderr)
  T.eq(rec.stop.rule, "target_ci"); T.eq(rec.stop.met, true)
  local l = rec.latency_ms
  T.ok(l.ci95[1] <= l.p50 and l.p50 <= l.ci95[2], "the median is inside its CI")
  T.ok(math.max(l.p50 - l.ci95[1], l.ci95[2] - l.p50) <= 0.05 * l.p50 + 1e-12, "within +-5%")
  T.eq(#l.first_ms, rec.stop.processes)
  T.eq(l.warm.n, l.n - rec.stop.processes)
  T.eq(l.n, 10 * rec.stop.processes)
  local dir = rec.artifacts.run_dir
  T.eq(rec.artifacts.samples.file, "samples.csv", "in the run's own directory")
  local csv = assert(measure.read_samples(dir .. "/samples.csv"))
  local want = logged(dir, rec.stop.processes)
  T.eq(#want[1], 10, "the runner printed its iterations")
  T.eq(csv, want, "samples.csv holds exactly the runner's iteration lines")
  for i, g in ipairs(want) do T.eq(l.first_ms[i], g[1]) end
  T.eq(assert(json.decode(T.read(dir .. "/result.json"))).artifacts.samples.sha256, sys.sha256_file(dir .. "/samples.csv"))
end)

T.with_real_runner("real runner: --min-samples 35 with -n 10 takes 4 processes; an unreachable rule stops at --max-time, exit 0", function(runner)
  local r, rec = host { "--runner", runner, "-n", "10", "--min-samples", "35" }
  T.eq(r.status, 0, r.stderr)
  T.eq(rec.stop.rule, "min_samples"); T.eq(rec.stop.processes, 4); T.eq(rec.latency_ms.n, 40)
  r, rec = host { "--runner", runner, "-n", "2", "--min-samples", "1000000", "--max-time", "0.3" }
  T.eq(r.status, 0, r.stderr)
  T.eq(rec.ok, true)
  T.eq(rec.stop.rule, "max_time"); T.eq(rec.stop.met, false)
  T.match(table.concat(rec.warnings, "\n"), "stopped at %-%-max%-time 0%.3s after %d+ process%(es%): %d+ of %-%-min%-samples 1000000 iterations")
  T.ok(rec.stop.seconds >= 0.3, "ran until the cap")
end)

T.test("a long measurement says up front what it will take: its pace, --timeout, the rule's cap", function()
  local o = { timeout = 600, target_ci = 2 }
  T.eq(measure.estimate(o, 100, 1000, 0.5), nil, "5 s a process: not long, nothing said")
  T.eq(measure.estimate(o, 0, 1000, 2), nil, "no iteration yet: nothing to tell")
  T.eq(measure.estimate(o, 200, 1000000, 2), "200 of 1000000 iterations in 2.0 s: a process would take about "
    .. "2.8 h at this pace; --timeout 600 s ends it after about 60000 iterations (the latency is of those); the "
    .. "stopping rule starts no process after --max-time 120 s")
  T.eq(measure.estimate({ timeout = 600, ["repeat"] = 3 }, 100, 1000, 2), "100 of 1000 iterations in 2.0 s: a "
    .. "process would take about 20 s at this pace; --timeout 600 s; 3 processes: about 1.0 min in all")
  T.eq(measure.estimate({ timeout = 600, min_samples = 10 }, 100, 1000, 2), "100 of 1000 iterations in 2.0 s: a "
    .. "process would take about 20 s at this pace; --timeout 600 s; the stopping rule has no --max-time: processes "
    .. "go on until it is met")
end)

T.test("the pace is the runner's own: not the wait before it started (a pipelined point, a run re-sent after an "
  .. "outage)", function()
  local now = 1000
  local clock = { now = function() return now end }
  local o = { timeout = 600, ["repeat"] = 1 }
  local function lines(from, to, at_s)
    local out = {}
    for i = from, to do
      out[#out + 1] = ("I 00:00:%09.6f executorch:executor_runner.cpp:779] Iteration %d of 1000: 10.000000 ms\n")
        :format(at_s, i)
    end
    return table.concat(out)
  end
  local said = {}
  local pace = measure.pacer(o, 1000, function(l) said[#said + 1] = l end, { clock = clock })
  now = now + 300 -- made, then 5 min behind the point before it (or an outage) before its first output
  pace("I 00:00:00.000512 executorch:executor_runner.cpp:476] Model file m.pte is loaded.\n")
  T.eq(#said, 0, "its first output starts the wait for a pace, not the pacer's making")
  now = now + 1
  pace(lines(1, 100, 1.0))
  T.eq(#said, 0, "1 s after its first output: too early to tell")
  now = now + 1.5
  pace(lines(101, 250, 2.5))
  T.eq(said, { "250 of 1000 iterations in 2.5 s: a process would take about 10 s at this pace; --timeout 600 s" },
    "the runner's clock says 2.5 s for 250 iterations: 10 s a process, not the 300 s it waited")
  pace(lines(251, 300, 3.0))
  T.eq(#said, 1, "said once")
  -- a runner whose lines carry no time: the time since its first output
  said = {}
  pace = measure.pacer(o, 100, function(l) said[#said + 1] = l end, { clock = clock })
  now = now + 300
  pace("Iteration 1 of 100: 100.0 ms\n")
  now = now + 2
  pace("Iteration 2 of 100: 100.0 ms\nIteration 3 of 100: 100.0 ms\n")
  T.eq(said, { "3 of 100 iterations in 2.0 s: a process would take about 1.1 min at this pace; --timeout 600 s" })
end)

T.with_real_runner("real runner: a process --timeout ends keeps the iterations it measured (said up front and after), "
  .. "each warning once", function(runner)
  local r, rec = host { "--runner", runner, "-n", "10000000", "--target-ci", "2", "--timeout", "4", "--etdump",
    T.tmpdir() .. "/killed.etdump" }
  T.eq(r.status, 0, r.stderr)
  T.eq({ rec.stop.rule, rec.stop.met, rec.stop.processes }, { "timeout", false, 1 })
  -- the oracle: the runner's own iteration lines in the log it left
  local measured = #logged(rec.artifacts.run_dir, 1)[1]
  T.ok(measured > 0, "iterations before the timeout")
  if rec.latency_ms.n ~= measured then
    -- a fast machine prints more timing lines than odp keeps in memory (32 MiB of them, docs/SCRIPTING.md
    -- output_cut): the latency is of those kept, and the record and a warning say the rest is in the log
    T.ok(rec.output_cut and rec.output_cut.stderr, "the record says the output was cut")
    T.ok(rec.latency_ms.n > 0 and rec.latency_ms.n < measured, ("%d of %d iterations kept"):format(rec.latency_ms.n,
      measured))
    T.ok(table.concat(rec.warnings, "\n"):find("were not read", 1, true), "the cut is said")
  end
  local _, said = r.stderr:gsub("run 1: %d+ of 10000000 iterations in [%d.]+ s: a process would take about [^\n]+ at "
    .. "this pace; %-%-timeout 4 s ends it after about %d+ iterations %(the latency is of those%); the stopping rule "
    .. "starts no process after %-%-max%-time 120 s\n", "")
  T.eq(said, 1, "the estimate, once, up front: " .. r.stderr)
  local seen = {}
  for _, w in ipairs(rec.warnings) do
    T.eq(seen[w], nil, "said once: " .. w)
    seen[w] = true
  end
  -- the iterations odp read (all of them, unless the output was cut: then those it kept)
  T.ok(seen[("runner process 1 was killed at --timeout 4 s after %d of its 10000000 iterations: the latency is of "
    .. "the %d iteration(s) measured (a smaller -n, or a larger --timeout, measures them all)"):format(
    rec.latency_ms.n, rec.latency_ms.n)], table.concat(rec.warnings, "\n"))
  T.ok(seen["no ETDump was written: --timeout killed the runner before its end"], "why no ETDump")
end)

T.with_real_runner("real runner: --sustained runs back to back for MIN minutes, p50/p90 per minute, plottable", function(runner)
  local r, rec = host { "--runner", runner, "-n", "5", "--sustained", "0.01", "--cooldown", "0.01", "--cool-to", "90" }
  T.eq(r.status, 0, r.stderr)
  T.eq(rec.stop.rule, "sustained"); T.ok(rec.stop.seconds >= 0.6, "ran 0.6 s")
  T.eq(#rec.sustained, 1); T.eq(rec.sustained[1].n, rec.latency_ms.n); T.eq(rec.sustained[1].processes, rec.stop.processes)
  T.eq(#rec.thermal, rec.stop.processes)
  T.ok(rec.thermal[2].waited_s >= 0.01, "cooldown between processes")
  -- the oracle: this machine's zones read here, now (a VM may list zones whose temp cannot be read)
  local hottest
  for _, z in ipairs(sys.readdir("/sys/class/thermal") or {}) do
    local v = tonumber((sys.read_file("/sys/class/thermal/" .. z .. "/temp") or ""):match("%-?%d+") or "")
    if v and z:match("^thermal_zone") then hottest = math.max(hottest or -math.huge, v / 1000) end
  end
  print("# thermal zones readable here: " .. (hottest and ("yes, hottest " .. hottest .. " C") or "none"))
  if hottest then
    T.ok(rec.thermal[1].before_c and math.abs(rec.thermal[1].before_c - hottest) < 10,
      ("before_c %s against %g C read here"):format(rec.thermal[1].before_c, hottest))
  else
    T.eq(rec.thermal[1].before_c, nil, "no temperature where none can be read")
    T.match(table.concat(rec.warnings, "\n"), "no thermal zones on this target")
  end
  local svg = T.tmpdir() .. "/s.svg"
  local p = assert(proc.run { odp, "plot", (require("odp.results.result").artifact(rec, "sustained")), "--x", "minute", "--y", "latency_ms.p50", "--out", svg, timeout = 30 })
  T.eq(p.status, 0, p.stderr)
  T.match(T.read(svg), 'class="point"')
end)

T.done()
