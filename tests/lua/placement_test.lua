-- CPU placement: odp-rusage --cpus checked by the pinned program itself (tests/c/affinity_probe.c:
-- sched_getaffinity of its main thread and of a thread, /proc/self/status Cpus_allowed_list), cluster choice
-- on the recorded trees, the flow's --cpus/--cluster/--threads with the real runner, a sweep and its plot.
local T = require("t")
local ds = require("odp.target.device_state")
local placement = require("odp.target.placement")
local proc = require("odp.proc")
local json = require("odp.core.json")

local root = T.root()
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local odp = os.getenv("ODP") or (build .. "/odp")
local probe = build .. "/tests/affinity_probe"
local fx = root .. "/tests/fixtures/device_state/"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local host = require("odp.target.host").new()
local here = assert(ds.gather(host))

T.test("odp-rusage --cpus: the program and its threads see only that CPU, for each CPU here", function()
  T.ok(#here.online >= 1)
  for _, c in ipairs(here.online) do
    local r = assert(host:exec({ probe }, { helper_args = { "--cpus", tostring(c) } }))
    T.eq(r.status, 0, r.stderr)
    T.eq(r.stdout, ("affinity=%d thread=%d status=%d\n"):format(c, c, c), "pinned to " .. c)
    T.ok(r.rusage and r.rusage.maxrss_kb > 0, "the helper's rusage report parsed and removed")
    T.eq(r.stderr, "")
  end
  local all = ds.cpulist_format(here.online)
  local r = assert(host:exec({ probe }, { helper_args = { "--cpus", all } }))
  T.eq(r.stdout, ("affinity=%s thread=%s status=%s\n"):format(all, all, all))
  r = assert(host:exec({ probe }, { helper_args = { "--cpus", "1000" } }))
  T.eq(r.status, 125)
  T.match(r.stderr, "cannot pin to CPUs 1000: Invalid argument")
end)

local function failure(fn)
  local ok, e = pcall(fn)
  T.ok(not ok, "raised")
  return e
end

T.test("clusters and --cluster on the recorded trees", function()
  local pixel = assert(ds.gather(host, { root = fx .. "pixel8" }))
  T.eq(placement.select({ cluster = "big" }, pixel), { 8 })
  T.eq(placement.select({ cluster = "mid" }, pixel), { 4, 5, 6, 7 })
  T.eq(placement.select({ cluster = "little" }, pixel), { 0, 1, 2, 3 })
  T.eq(placement.select({ cluster = "all" }, pixel), { 0, 1, 2, 3, 4, 5, 6, 7, 8 })
  T.eq(placement.select({ cpus = "8,0-1" }, pixel), { 0, 1, 8 })
  T.eq(placement.select({}, pixel), nil, "nothing asked")
  local pi = assert(ds.gather(host, { root = fx .. "rpi5" }))
  local cpus, warning = placement.select({ cluster = "big" }, pi)
  T.eq(cpus, { 0, 1, 2, 3 })
  T.eq(warning, "--cluster big: all CPUs are one cluster (0-3): running on all of them")
  local e = failure(function() placement.select({ cpus = "2,9-12" }, pixel) end)
  T.eq({ e.code, e.exit, e.message }, { "EUSAGE", 2, "--cpus 2,9-12: CPUs 9-12 are not online on this device (online: 0-8)" })
  e = failure(function() placement.select({ cpus = "4-x" }, pixel) end)
  T.eq({ e.code, e.exit }, { "EUSAGE", 2 })
  T.match(e.message, "'4%-x' is not a CPU")
  e = failure(function() placement.select({ cpus = "1", cluster = "big" }, pixel) end)
  T.match(e.message, "give one of them")
  -- a phone with a CPU offline: it is not in the list, so not in any cluster
  local d = T.tmpdir()
  assert(os.execute(("cp -R '%s/.' '%s/'"):format(fx .. "pixel8", d)))
  T.write(d .. "/sys/devices/system/cpu/online", "0-7\n")
  local off = assert(ds.gather(host, { root = d }))
  T.eq(placement.select({ cluster = "big" }, off), { 4, 5, 6, 7 }, "cpu8 offline: two clusters left")
  e = failure(function() placement.select({ cluster = "mid" }, off) end)
  T.eq(e.message, "--cluster mid: this device has no mid cluster: little (0-3), big (4-7)")
  e = failure(function() placement.select({ cpus = "8" }, off) end)
  T.eq(e.message, "--cpus 8: CPU 8 is not online on this device (online: 0-7)")
end)

local dir = T.tmpdir()

local function odp_run(args, env)
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runs-dir", dir .. "/runs" }
  table.move(args, 1, #args, #argv + 1, argv)
  return assert(proc.run { argv = argv, cwd = dir, env = env or {}, timeout = 120 })
end

T.with_real_runner("the flow: --cpus pins the real runner (a wrapper reports its affinity), params and device_state say so",
  function(runner)
    -- the wrapper's own exec keeps the pinned process: what it prints is the runner's affinity
    local wrap = dir .. "/runner_wrapper.sh"
    T.write(wrap, ("#!/bin/sh\n%s >&2\necho \"args: $*\" >&2\nexec %s \"$@\"\n"):format(probe, runner))
    assert(os.execute("chmod +x " .. wrap))
    for _, c in ipairs(here.online) do
      local r = odp_run({ "--runner", wrap, "--model", add, "-n", "2", "--cpus", tostring(c), "--format", "json" })
      T.eq(r.status, 0, r.stderr)
      local rec = assert(json.decode(r.stdout))
      T.eq({ rec.params.cpus, rec.device_state.cpus_used }, { tostring(c), tostring(c) })
      T.match(T.read(rec.artifacts.run_dir .. "/runner.stderr"), ("affinity=%d thread=%d status=%d\n"):format(c, c, c))
      T.ok(rec.latency_ms.n == 2, "measured")
    end
    local r = odp_run({ "--runner", wrap, "--model", add, "-n", "1", "--threads", "2", "--format", "json" })
    T.eq(r.status, 0, r.stderr)
    local rec = assert(json.decode(r.stdout))
    T.eq(rec.params.threads, 2)
    T.match(T.read(rec.artifacts.run_dir .. "/runner.stderr"), "args: .*%-%-cpu_threads 2")
  end)

T.test("the flow's bad input: offline CPUs, --cpus with --cluster, --threads on a runner without --cpu_threads", function()
  -- the test runner program has no --cpu_threads (its --help is an unknown flag), which no real runner lacks
  local fake = build .. "/tests/fake_runner"
  local r = odp_run({ "--runner", fake, "--model", add, "--cpus", "0,4000" })
  T.eq(r.status, 2)
  T.match(r.stdout, ("error +EUSAGE: %%-%%-cpus 0,4000: CPU 4000 is not online on this device %%(online: %s%%)")
    :format(ds.cpulist_format(here.online):gsub("%-", "%%-")))
  r = odp_run({ "--runner", fake, "--model", add, "--threads", "4" })
  T.eq(r.status, 2)
  T.match(r.stdout, "%-%-threads 4: this runner has no %-%-cpu_threads flag")
  r = odp_run({ "--runner", fake, "--model", add, "--cluster", "huge" })
  T.eq(r.status, 2)
  T.match(r.stderr, "huge")
  if #ds.clusters(here) == 1 then
    r = odp_run({ "--runner", fake, "--model", add, "--cluster", "big", "--format", "json" },
      { ODP_FAKE_ETDUMP = root .. "/tests/fixtures/etdump/add_n10.etdump" })
    T.eq(r.status, 0, r.stderr)
    T.match(r.stderr, "warning: %-%-cluster big: all CPUs are one cluster")
  end
end)

T.with_real_runner("a sweep over -p cluster=big,little -p threads=1,2 and its plot: two lines of two points", function(runner)
  local out = dir .. "/sweep.jsonl"
  local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/host.lua",
    "-p", "cluster=big,little", "-p", "threads=1,2", "--out", out, "--runner", runner, "--model", add,
    "-n", "3", "--runs-dir", dir .. "/sweep-runs" }, cwd = dir, timeout = 300 })
  T.eq(r.status, 0, r.stderr .. r.stdout)
  local recs = {}
  for l in T.read(out):gmatch("[^\n]+") do recs[#recs + 1] = assert(json.decode(l)) end
  T.eq(#recs, 4)
  for _, rec in ipairs(recs) do
    T.eq(rec.ok, true)
    T.ok(rec.params.cluster and rec.params.threads and rec.device_state.cpus_used, "placement in every record")
  end
  r = assert(proc.run { odp, "plot", out, "--x", "threads", "--y", "latency_ms.p50", "--group", "cluster",
    "--out", dir .. "/sweep.svg", timeout = 30 })
  T.eq(r.status, 0, r.stderr)
  local svg = T.read(dir .. "/sweep.svg")
  local _, lines = svg:gsub('class="line"', "")
  T.eq(lines, 2, "one line per cluster")
  T.match(svg, ">cluster=big</text>")
  T.match(svg, ">cluster=little</text>")
end)

T.done()
