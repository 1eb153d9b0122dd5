-- Memory by phase (docs/memory.md). The oracle is tests/c/mem_phases.c: it prints executor_runner's lines around
-- allocations of known sizes (load 8 MiB kept, method 24 MiB transient, first iteration 40 MiB transient, 4 MiB
-- kept per later iteration) and its own resident size before them; each phase's peak must be the known value
-- plus that baseline within 1 MiB, and the overall peak GNU time's (`/usr/bin/time -v`, a run of its own: GNU
-- time's figure of a process whose mark odp resets would be the last phase's alone). Then the real runner, the
-- bad inputs (no phase lines, an exit during loading, a clear_refs the kernel refuses, a runner that forks), the
-- ssh board (the resident helper) and the flow's record and table.
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local host = require("odp.target.host")
local memparse = require("odp.parse.memory")
local memory = require("odp.results.memory")
local gnutime = require("odp.parse.gnutime")

local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")
local phases_prog = build .. "/tests/mem_phases"
local helper = build .. "/odp-rusage-x86_64"
local odp = os.getenv("ODP") or (build .. "/odp")
local MIB = 1024
local MARKS = memparse.mark_specs(memparse.EXECUTORCH_MARKS)

local function gnu_peak_kb(argv)
  local full = { "/usr/bin/time", "-v" }
  table.move(argv, 1, #argv, 3, full)
  local r = assert(proc.run { argv = full, timeout = 120 })
  return assert(gnutime.parse(r.stderr), "GNU time's report").max_rss_kb
end

-- Runs argv on the host target with memory by phase; -> exec result, its phases, the timeline's path.
local function watched(argv, dir)
  local csv = dir .. "/memory.csv"
  local r = assert(host.new():exec(argv, { timeout = 120, memory = { csv = csv, marks = MARKS } }))
  T.ok(r.memory, "a memory report; stderr: " .. r.stderr)
  local phases, seen = memparse.phases(r.memory, r.rusage.maxrss_kb, r.wall_s * 1000)
  return r, phases, seen, csv
end

local function by_name(phases)
  local t = {}
  for _, p in ipairs(phases) do t[p.name] = p end
  return t
end

local function baseline(r) return tonumber(r.stdout:match("baseline_kb=(%d+)")) end

local function near_mib(got, want, what)
  T.ok(got and math.abs(got - want) <= MIB, ("%s: %s kB, known %d kB (+-1 MiB)"):format(what, got, want))
end

T.test("host: each phase's peak is the known allocation plus the baseline; the overall peak is GNU time's", function()
  local n = 6
  local r, phases, seen, csv = watched({ phases_prog, tostring(n) }, T.tmpdir())
  T.eq(r.status, 0)
  T.eq(seen, { "program", "method", "first", "executed" })
  local b = baseline(r)
  local p = by_name(phases)
  T.eq(#phases, 5)
  near_mib(p.load.peak_kb, b + 8 * MIB, "load")
  near_mib(p.method.peak_kb, b + 32 * MIB, "method")
  near_mib(p.first.peak_kb, b + 48 * MIB, "first")
  near_mib(p.steady.peak_kb, b + (8 + 4 * (n - 1)) * MIB, "steady")
  near_mib(p.teardown.peak_kb, b + (8 + 4 * (n - 1)) * MIB, "teardown")
  for _, ph in ipairs(phases) do T.ok(ph.exact, ph.name .. " exact") end
  T.eq(p.teardown.source, "ru_maxrss")
  -- the reset is real: the exit's ru_maxrss is the last phase's, far below the run's peak
  T.ok(r.rusage.maxrss_kb < p.first.peak_kb - 16 * MIB, "ru_maxrss counts from the last reset: " .. r.rusage.maxrss_kb)
  local peak, exact, name = memparse.overall(phases)
  T.eq(name, "first"); T.eq(exact, true)
  local gnu = gnu_peak_kb({ phases_prog, tostring(n) })
  T.ok(math.abs(peak - gnu) <= gnu * 0.01, ("overall %d kB, GNU time %d kB"):format(peak, gnu))
  -- the phases follow one another in time
  for i = 2, #phases do T.eq(phases[i].t_start_ms, phases[i - 1].t_end_ms) end
  -- the timeline: ~1 kHz, its peak the first iteration's, its anonymous part the allocations
  local top = memory.timeline_peak(csv)
  -- (statm and VmHWM read the same per-CPU counters, each summed at its own moment: a few pages apart)
  T.ok(top and math.abs(top.rss_kb - peak) <= MIB, ("timeline peak %s kB, phases' %d kB"):format(top and top.rss_kb, peak))
  T.ok(top.anon_kb > 40 * MIB and top.t_ms > p.first.t_start_ms and top.t_ms < p.first.t_end_ms, "the peak sample is in the first iteration")
  local rows = select(2, T.read(csv):gsub("\n", "")) - 1
  local span = phases[#phases - 1].t_end_ms
  -- never above 1 kHz; below it when the helper waits for a CPU (this machine's 2 are shared)
  T.ok(rows >= span * 0.1 and rows <= span * 1.05 + 5, ("%d samples in %.0f ms"):format(rows, span))
  T.eq(r.memory.samples, rows)
  T.match(T.read(csv), "^t_ms,rss_kb,anon_kb,file_kb\n")
end)

T.test("host: with no gap between a line and the next allocation, a late read only moves bytes into the earlier phase", function()
  local r, phases = watched({ phases_prog, "--gap", "0", "3" }, T.tmpdir())
  local b, p = baseline(r), by_name(phases)
  -- never below the known value: the error only goes one way
  T.ok(p.load.peak_kb >= b + 8 * MIB - MIB, "load " .. p.load.peak_kb)
  T.ok(p.first.peak_kb >= b + 48 * MIB - MIB or p.method.peak_kb >= b + 48 * MIB - MIB, "the 40 MiB is seen")
  local peak = memparse.overall(phases)
  near_mib(peak, b + 48 * MIB, "overall")
end)

T.test("no phase lines: one phase, the whole run, exact; said so", function()
  local r, phases, seen = watched({ phases_prog, "--no-lines", "3" }, T.tmpdir())
  T.eq(seen, {}); T.eq(#phases, 1); T.eq(phases[1].name, "run"); T.eq(phases[1].exact, true)
  near_mib(phases[1].peak_kb, baseline(r) + 48 * MIB, "run")
  local mem = memory.record(r, nil, nil, nil)
  T.match(table.concat(memory.warnings(mem), "\n"), "printed none of the phase lines")
end)

T.test("an exit during loading: the phase it was in, exact, from ru_maxrss", function()
  local r, phases = watched({ phases_prog, "--exit-in", "load", "3" }, T.tmpdir())
  T.eq(r.status, 1); T.eq(#phases, 1); T.eq(phases[1].name, "run")
  near_mib(phases[1].peak_kb, baseline(r) + 8 * MIB, "run")
  r, phases = watched({ phases_prog, "--exit-in", "method", "3" }, T.tmpdir())
  T.eq(r.status, 1)
  T.eq(#phases, 2); T.eq(phases[1].name, "load"); T.eq(phases[2].name, "method"); T.eq(phases[2].ended, "exit")
  near_mib(phases[1].peak_kb, baseline(r) + 8 * MIB, "load")
  near_mib(phases[2].peak_kb, baseline(r) + 32 * MIB, "method, cut short")
  T.eq(phases[2].exact, true)
end)

-- The helper as another user (nobody), the runner undumpable: its /proc files are root's, the kernel refuses
-- the clear_refs write (a real refusal, as for a setuid runner), while status and statm stay readable.
local function as_nobody(dir, extra, env)
  proc.run { "chmod", "777", dir }
  local csv, report = dir .. "/memory.csv", dir .. "/report"
  local argv = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", helper, "-o", report,
    "--memory", csv }
  for _, m in ipairs(MARKS) do table.move({ "--mark", m }, 1, 2, #argv + 1, argv) end
  table.move({ "--", phases_prog }, 1, 2, #argv + 1, argv)
  table.move(extra, 1, #extra, #argv + 1, argv)
  local r = assert(proc.run { argv = argv, timeout = 120, env = env })
  local text = T.read(report)
  local ru = require("odp.target.rusage").parse(text)
  r.memory, r.rusage, r.wall_s = memparse.report(text), ru.rusage, ru.wall_s
  return r
end

T.test("a clear_refs the kernel refuses: peaks that rose stay exact, the others are sampled and said so", function()
  if not proc.run({ "setpriv", "--version" }) then return end
  -- the control: the same user may reset its own dumpable child
  local ok = as_nobody(T.tmpdir(), { "5" })
  T.eq(ok.memory.clear_refs, "ok", "nobody resets its own child")
  local r = as_nobody(T.tmpdir(), { "--undumpable", "5" })
  T.eq(r.status, 0, r.stderr)
  T.eq(r.memory.clear_refs, "denied")
  local phases = memparse.phases(r.memory, r.rusage.maxrss_kb, r.wall_s * 1000)
  local b, p = baseline(r), by_name(phases)
  -- load, method and first each rose above everything before: their marks are their own peaks
  for _, name in ipairs { "load", "method", "first" } do T.eq(p[name].exact, true, name) end
  near_mib(p.method.peak_kb, b + 32 * MIB, "method")
  near_mib(p.first.peak_kb, b + 48 * MIB, "first")
  -- steady stayed below the first iteration's mark: only the samples know it
  T.eq(p.steady.exact, false); T.eq(p.steady.source, "sampled")
  near_mib(p.steady.peak_kb, b + (8 + 16) * MIB, "steady, sampled")
  local peak, exact = memparse.overall(phases)
  near_mib(peak, b + 48 * MIB, "overall"); T.eq(exact, true)
  local mem = memory.record(r, nil, nil, nil)
  T.match(table.concat(memory.warnings(mem), "\n"), "could not be reset %(/proc/PID/clear_refs denied%)")
end)

T.test("a runner that exits between a boundary's VmHWM read and its reset: the run's end, not a refused clear_refs",
  function()
  -- a task that began to exit has no memory map, and the kernel gives its /proc files to root: as another user
  -- than root (the arm64 twin's pi), the helper's write was refused and the whole run said clear_refs=denied.
  -- The helper is held 600 ms before the last boundary's reset; the runner exits 200 ms after that line
  local r = as_nobody(T.tmpdir(), { "--gap", "200", "2" }, { ODP_RUSAGE_RESET_STALL = "executed:600" })
  T.eq(r.status, 0, r.stderr)
  T.eq(r.memory.clear_refs, "ok")
  local marks = r.memory.marks
  T.eq({ marks[#marks].event, marks[#marks].reset }, { "executed", false }, "the last reset came too late")
  local phases = memparse.phases(r.memory, r.rusage.maxrss_kb, r.wall_s * 1000)
  local p = by_name(phases)
  -- (the teardown had no reset of its own: ru_maxrss also holds steady's peak, so teardown's is not exact)
  for _, name in ipairs { "load", "method", "first", "steady" } do T.eq(p[name].exact, true, name) end
  local peak, exact = memparse.overall(phases)
  near_mib(peak, baseline(r) + 48 * MIB, "overall"); T.eq(exact, true)
  local mem = memory.record(r, nil, nil, nil)
  T.eq(table.concat(memory.warnings(mem), "\n"):find("clear_refs", 1, true), nil, "no refusal claimed")
end)

T.test("a runner that forks: its child is seen, not counted, and said so", function()
  local r, phases = watched({ phases_prog, "--fork", "64", "4" }, T.tmpdir())
  T.eq(r.status, 0)
  T.ok(r.memory.children >= 1, "children seen: " .. r.memory.children)
  local p = by_name(phases)
  near_mib(p.steady.peak_kb, baseline(r) + (8 + 12) * MIB, "steady: the runner's own")
  -- wait4's ru_maxrss holds the waited child's 64 MiB: the last phase is not taken from it
  T.ok(r.rusage.maxrss_kb >= 64 * MIB, "ru_maxrss includes the child: " .. r.rusage.maxrss_kb)
  T.eq(p.teardown.source, "sampled")
  local mem = memory.record(r, nil, nil, nil)
  T.match(table.concat(memory.warnings(mem), "\n"), "started %d+ process%(es%); their memory is not counted")
end)

T.test("bare metal (the Alif E8): no RSS, no phases; the planned arenas and the NPU scratch from the .pte, said so", function()
  local pte = require("odp.parse.pte")
  local info = assert(pte.read(T.root() .. "/tests/fixtures/pte/mnist_ethos_u55.pte"))
  local mem = memory.bare_metal(info, pte.scratch_size(info))
  T.eq(#mem.phases, 0)
  local planned = 0
  for _, b in ipairs(info.methods[1].non_const_buffer_sizes) do planned = planned + b end
  T.eq(mem.owners.planned_kb, math.floor(planned / 1024 + 0.5))
  T.eq(mem.owners.scratch_kb, math.floor(pte.scratch_size(info) / 1024 + 0.5))
  T.ok(mem.owners.scratch_kb > 0, "the Vela scratch")
  T.match(mem.note, "no RSS")
  local out = {}
  require("odp.results.report").memory_lines(mem, out)
  T.match(table.concat(out, "\n"), "memory: bare metal: no RSS.-planned arenas %d+ kB · NPU scratch %d+ kB")
end)

T.test("a timeline that cannot be written: the run goes on unwatched, and says why on its stderr", function()
  local r = assert(host.new():exec({ phases_prog, "2" }, { timeout = 120,
    memory = { csv = "/nonexistent/dir/memory.csv", marks = MARKS } }))
  T.eq(r.status, 0)
  T.eq(r.memory, nil)
  T.match(r.stderr, "odp%-rusage: cannot write /nonexistent/dir/memory.csv: No such file or directory")
  T.match(r.stdout, "OutputX 0", "the runner's output is whole")
end)

T.test("bad marks are refused at once by the helper (exit 125, one line)", function()
  local r = assert(proc.run { helper, "--memory", "/dev/null", "--mark", "Bad Event=x", "--", "true" })
  T.eq(r.status, 125); T.match(r.stderr, "%-%-mark Bad Event=x: EVENT=GLOB")
  r = assert(proc.run { helper, "--mark", "a=b", "--", "true" })
  T.eq(r.status, 125, "a mark without --memory")
end)

T.test("a kernel that batches RSS counts (before 6.2): a lagging VmHWM (4 kB) never stands as a phase's peak; " ..
  "no phase is exact, the warning says why", function()
  -- the helper's report of issue 40's Pi twin run: VmHWM 4 kB at the program line, page tables 2124 kB
  local text = "ODP-MEMORY-MARK event=program t_ms=306.6 hwm_kb=4 reset=1 sampled_max_kb=1728 rss_kb=2124 " ..
    "anon_kb=104 file_kb=4 shmem_kb=2016 model_kb=-1 read_us=48.0\n" ..
    "ODP-MEMORY-MARK event=method t_ms=358.2 hwm_kb=2128 reset=1 sampled_max_kb=2100 rss_kb=2132 anon_kb=112 " ..
    "file_kb=4 shmem_kb=2016 model_kb=-1 read_us=40.0\n" ..
    "ODP-MEMORY samples=29 sample_ms=1.000 sampled_max_kb=2204 tail_sampled_max_kb=2210 dropped_marks=0 " ..
    "clear_refs=ok children=0 timeline=ok model_kb=-1 rss_counters=batched\n"
  local rep = memparse.report(text)
  T.eq(rep.rss_counters, "batched")
  local phases = memparse.phases(rep, 2204, 473.4)
  T.eq({ phases[1].name, phases[1].peak_kb, phases[1].exact }, { "load", 2124, false }, "the page tables' 2124 kB")
  T.eq({ phases[2].name, phases[2].peak_kb, phases[2].exact }, { "method", 2132, false })
  T.eq({ phases[3].name, phases[3].peak_kb, phases[3].exact }, { "inference", 2210, false }, "the samples over ru_maxrss")
  local mem = memory.record({ memory = rep, rusage = { maxrss_kb = 2204 }, wall_s = 0.4734 })
  T.eq({ mem.rss_counters, mem.exact, mem.peak_kb }, { "batched", false, 2210 })
  local w = table.concat(memory.warnings(mem), "\n")
  T.match(w, "before Linux 6%.2")
  -- the same report from a kernel with exact counters (6.2 on, and older helpers: no field) keeps its exact marks
  rep = memparse.report((text:gsub(" rss_counters=batched", "")))
  T.eq(rep.rss_counters, "exact")
  phases = memparse.phases(rep, 2204, 473.4)
  T.eq({ phases[1].peak_kb, phases[1].exact }, { 4, true })
  T.eq(memory.record({ memory = rep, rusage = { maxrss_kb = 2204 }, wall_s = 0.4734 }).rss_counters, nil)
end)

T.test("a line read with more of the runner's output after it: the runner had gone on, the phase is not exact", function()
  -- one write holds the load line and the next one (a runner the helper was too slow for); the method line
  -- comes alone, later
  local script = "printf 'I 0 r.cpp:1] Model file m.pte is loaded.\\nI 0 r.cpp:2] Using method forward\\n' >&2; " ..
    "sleep 0.2; printf 'I 0 r.cpp:3] Model loaded in 1.0 ms.\\n' >&2; sleep 0.1"
  local r, phases = watched({ "/bin/sh", "-c", script }, T.tmpdir())
  T.eq(r.status, 0)
  T.eq(#r.memory.marks, 2, r.stderr)
  T.eq({ r.memory.marks[1].after, r.memory.marks[2].after }, { true, nil }, "the helper counts what came after")
  local p = by_name(phases)
  T.eq({ p.load.exact, p.load.late, p.load.source, p.load.bound_kb }, { false, "read", "hwm", p.load.peak_kb })
  T.eq(p.method.late, nil)
  local mem = memory.record(r, nil, nil, "forward")
  T.eq(mem.late, { "program (read)" })
  T.eq(mem.load_kb, nil, "a phase read late is no history point")
  T.match(table.concat(memory.warnings(mem), "\n"), "program %(read%)")
  -- the phase after it: its reading starts at a reset made inside it, so it is exact only above the late one
  local function rep(method_hwm)
    return memparse.report(("ODP-MEMORY-MARK event=program t_ms=5 hwm_kb=7712 reset=1 sampled_max_kb=3900 after=177\n" ..
      "ODP-MEMORY-MARK event=method t_ms=90 hwm_kb=%d reset=1 sampled_max_kb=6000 after=0\n" ..
      "ODP-MEMORY samples=90 clear_refs=ok children=0 timeline=ok tail_sampled_max_kb=9000\n"):format(method_hwm))
  end
  local ph = by_name(memparse.phases(rep(20452), 9100, 100))
  T.eq({ ph.load.peak_kb, ph.load.exact, ph.method.peak_kb, ph.method.exact }, { 7712, false, 20452, true })
  T.eq({ memparse.overall(memparse.phases(rep(20452), 9100, 100)) }, { 20452, true, "method" })
  ph = by_name(memparse.phases(rep(6100), 6200, 100))
  T.eq({ ph.method.peak_kb, ph.method.exact, ph.method.source, ph.method.bound_kb }, { 6100, false, "hwm", 7712 })
  -- and so is the exit's ru_maxrss after a late last boundary (steady read with the teardown's first line)
  ph = memparse.phases(memparse.report("ODP-MEMORY-MARK event=executed t_ms=5 hwm_kb=25368 reset=1 after=66\n" ..
    "ODP-MEMORY samples=9 clear_refs=ok children=0 timeline=ok tail_sampled_max_kb=25432\n"), 25368, 10)
  T.eq({ ph[2].peak_kb, ph[2].exact, ph[2].source, ph[2].bound_kb }, { 25368, false, "ru_maxrss", 25368 })
  T.eq({ memparse.overall(ph) }, { 25368, true, "inference" })
  -- the load's reading is the run's peak: a real high-water mark of the runner, so the overall peak is exact
  T.eq({ memparse.overall(memparse.phases(rep(6100), 6200, 100)) }, { 7712, true, "load" })
end)

T.test("the helper's report is untrusted: malformed lines are left out, sizes bounded", function()
  T.eq(memparse.report("nothing"), nil)
  local rep = memparse.report("ODP-MEMORY-MARK event=x;rm t_ms=1 hwm_kb=5\nODP-MEMORY-MARK event=a t_ms=2 hwm_kb=9999999999999999\n" ..
    "ODP-MEMORY samples=3 clear_refs=ok children=0 timeline=ok\n")
  T.eq(#rep.marks, 0)
  local many = {}
  for i = 1, 100 do many[i] = ("ODP-MEMORY-MARK event=first t_ms=%d hwm_kb=10 reset=1"):format(i) end
  many[#many + 1] = "ODP-MEMORY samples=1 clear_refs=ok children=0 timeline=ok"
  T.eq(#memparse.report(table.concat(many, "\n")).marks, 64)
end)

T.with_real_runner("the real runner: its phases are found, the overall peak is GNU time's, the planned arena the .pte's", function(runner)
  -- the multi-operator MLP (tests/fixtures/pte/mlp.pte: a 16.9 MB planned arena, ~45 ms per inference)
  local model = T.root() .. "/tests/fixtures/pte/mlp.pte"
  local argv = { "setarch", "-R", runner, "--model_path", model, "--num_executions", "3" }
  -- a process's own peak moves between runs (add_arduino's by 128 kB, 32 pages, at its end: GNU time sees it
  -- as much as odp), so the oracle is a distribution: runs interleaved, the largest of each side within 1%
  local gnu, ours, r, phases, seen = {}, {}, nil, nil, nil
  for i = 1, 4 do
    gnu[i] = gnu_peak_kb(argv)
    r, phases, seen = watched(argv, T.tmpdir())
    T.eq(r.status, 0)
    T.eq(seen, { "program", "method", "first", "executed" }, "the phase lines, in order")
    local peak, exact = memparse.overall(phases)
    T.eq(exact, true, "the overall peak is exact: " .. require("odp.core.json").encode(phases))
    ours[i] = peak
  end
  table.sort(gnu)
  table.sort(ours)
  T.ok(gnu[4] <= gnu[1] * 1.05, "GNU time agrees with itself within 5%: " .. table.concat(gnu, " "))
  T.ok(math.abs(ours[4] - gnu[4]) <= gnu[4] * 0.01,
    ("overall %s kB, GNU time %s kB (+-1%%)"):format(table.concat(ours, " "), table.concat(gnu, " ")))
  -- the planned arena: what the runner set up is what the .pte plans
  local pte = assert(require("odp.parse.pte").read(model))
  local mem = memory.record(r, nil, pte, "forward")
  local log = require("odp.parse.executorch").parse(r.stderr, r.stdout)
  local planned = 0
  for _, b in ipairs(log.planned_buffers) do planned = planned + b end
  local from_pte = 0
  for _, b in ipairs(pte.methods[1].non_const_buffer_sizes) do from_pte = from_pte + b end
  T.eq(planned, from_pte, "the runner's planned buffers are the .pte's")
  T.ok(planned > 16e6, "the MLP's arena: " .. planned)
  T.eq(mem.owners.planned_kb, math.floor(from_pte / 1024 + 0.5))
  -- with a model this size the phases stand apart, and the method's peak holds the planned arena
  local p = by_name(phases)
  T.ok(p.method and p.method.peak_kb >= planned / 1024, ("method %s kB holds the %d kB arena"):format(
    p.method and p.method.peak_kb, planned // 1024))
  if p.load.late == "read" then
    -- on a loaded machine the helper may read the load line only after the runner has gone on into the method
    -- (its next lines came in the same read) and begun to set up the arena: the reading holds part of it, and
    -- odp must say the load phase is not exact, its peak at most that reading, and name the boundary
    T.eq({ p.load.exact, p.load.source, p.load.bound_kb }, { false, "hwm", p.load.peak_kb }, "a load read late")
    T.ok(mem.late and table.concat(mem.late, ","):find("program (read)", 1, true), "memory.late names it")
    T.eq(mem.load_kb, nil, "no history point from a load phase read late")
  else
    T.eq(p.load.exact, true)
    T.ok(p.method.peak_kb - p.load.peak_kb >= planned / 1024 * 0.9,
      ("method %s kB vs load %s kB: the arena is set up in the method phase"):format(p.method.peak_kb, p.load.peak_kb))
  end
  T.eq(mem.owners.weights_mapped, nil, "the model file was not named: mapped or not is unknown")
end)

T.with_real_runner("odp run on the host: the record's memory, memory.csv, the phase table", function(runner)
  local dir = T.tmpdir()
  local r = assert(proc.run { argv = { odp, "run", T.root() .. "/scripts/host.lua", "--runner", runner, "--model",
    T.root() .. "/tests/fixtures/pte/mlp.pte", "-n", "5", "--runs-dir", dir, "--no-history", "--format", "json" },
    timeout = 120 })
  T.eq(r.status, 0, r.stderr)
  local rec = json.decode(r.stdout)
  local names = {}
  for i, p in ipairs(rec.memory.phases) do names[i] = p.name end
  -- (phases whose lines come together, or after the runner ended, are one, named together)
  T.eq(table.concat(names, "+"), "load+method+first+steady+teardown")
  T.eq(rec.memory.seen, { "program", "method", "first", "executed" })
  T.eq(rec.memory.timeline, "memory.csv")
  T.eq(rec.memory.peak_kb, rec.peak_rss_kb)
  T.eq(rec.memory.owners.weights_mapped, false, "the portable runner reads the .pte into memory (FileDataLoader)")
  T.ok(rec.memory.owners.file_kb > 0 and rec.memory.owners.heap_other_kb >= 0, "owners")
  T.eq(rec.artifacts.memory.file, "memory.csv", "the timeline is an artifact of the run directory")
  T.match(T.read(rec.artifacts.run_dir .. "/memory.csv"), "^t_ms,rss_kb,anon_kb,file_kb\n[%d.]+,%d+,")
  -- the terminal table, with a relative --runs-dir (the helper opens the timeline in the runner's directory)
  r = assert(proc.run { argv = { odp, "run", T.root() .. "/scripts/host.lua", "--runner", runner, "--model",
    T.root() .. "/tests/fixtures/pte/mlp.pte", "-n", "3", "--runs-dir", "runs", "--no-history" }, cwd = dir,
    timeout = 120 })
  local made = {}
  for _, name in ipairs(require("odp.sys").readdir(dir .. "/runs")) do
    if name:sub(1, 1) ~= "." then made[#made + 1] = name end -- the runs dir's hash cache aside
  end
  T.eq(#made, 1)
  T.ok(require("odp.sys").stat(dir .. "/runs/" .. made[1] .. "/memory.csv"), "the timeline, in the run dir")
  T.match(r.stdout, "memory by phase %(%* the peak%)\n%s+phase%s+peak kB%s+how%s+from ms%s+to ms\n%s+load%s")
  T.match(r.stdout, "at the largest sample: planned 16512 kB · weights %d+ kB %(copied%)")
  -- --no-memory: the peak alone, from ru_maxrss
  r = assert(proc.run { argv = { odp, "run", T.root() .. "/scripts/host.lua", "--runner", runner, "--model",
    T.root() .. "/tests/fixtures/pte/mlp.pte", "--no-memory", "--runs-dir", dir, "--no-history", "--format",
    "json" }, timeout = 120 })
  rec = json.decode(r.stdout)
  T.eq(rec.memory, nil); T.ok(rec.peak_rss_kb > 0, "peak RSS")
end)

-- Two runs of mem_phases through the flow: N = 3 and N = 8 (steady grows 4 MiB per iteration: +20 MiB).
local function flow_runs()
  local dir = T.tmpdir()
  local function one(n, gap)
    local r = assert(proc.run { argv = { odp, "run", T.root() .. "/scripts/host.lua", "--runner", phases_prog, "--model",
      T.root() .. "/tests/fixtures/pte/add_arduino.pte", "-n", tostring(n), "--runs-dir", dir, "--no-history", "--format",
      -- 100 ms between its lines (not 20): on a loaded machine the helper then still reads each phase's line
      -- apart, so no phase is merged into the one before (steady must stand alone to be compared)
      "json", "--", "--gap", gap or "100" }, timeout = 300 })
    T.eq(r.status, 0, r.stderr)
    local rec = json.decode(r.stdout)
    return rec, rec.artifacts.run_dir
  end
  return dir, one
end

T.test("views: the HTML timeline with phase bands and the peak, the trace's memory track, compare per phase", function()
  local dir, one = flow_runs()
  local a, a_dir = one(3)
  local b, b_dir = one(8)
  T.eq(a.memory.steady_kb ~= nil and b.memory.steady_kb - a.memory.steady_kb > 19 * MIB, true,
    ("steady %s -> %s kB"):format(a.memory.steady_kb, b.memory.steady_kb))
  local page = dir .. "/r.html"
  local r = assert(proc.run { odp, "report", a_dir, "--out", page })
  T.eq(r.status, 0, r.stderr)
  local html = T.read(page)
  T.match(html, 'id="memory%-timeline"')
  local bands = select(2, html:gsub('<g class="band">', ""))
  T.eq(bands, #a.memory.phases, "one band per phase")
  T.match(html, ("peak %d kB %%(exact%%)"):format(a.memory.peak_kb))
  local tr = json.decode(T.read(dir .. "/r.trace.json"))
  local counters, slices = 0, {}
  for _, e in ipairs(tr.traceEvents) do
    if e.ph == "C" and e.name == "RSS kB" then counters = counters + 1 end
    if e.ph == "b" and e.cat == "memory" then slices[#slices + 1] = e.name end
    T.ok(e.ph ~= "X", "complete events are the ETDump's operators alone")
  end
  T.eq(counters, a.memory.samples, "one counter event per sample")
  T.eq(#slices, #a.memory.phases)
  -- compare: each phase's peaks side by side; steady grew, first did not
  r = assert(proc.run { odp, "compare", a_dir, b_dir, "--format", "json" })
  local res = json.decode(r.stdout)
  local rows = {}
  for _, row in ipairs(res.rows) do rows[row.metric] = row end
  T.ok(rows["memory steady"] and rows["memory first"], "memory rows: " .. r.stdout:sub(1, 300))
  T.ok(rows["memory steady"].b.median > rows["memory steady"].a.median + 19 * MIB, "steady larger in B")
  T.ok(math.abs(rows["memory first"].b.median - rows["memory first"].a.median) <= MIB, "first the same")
end)

T.test("views: a timeline longer than a chart holds (2000 points) is thinned, not a failed report", function()
  -- 700 ms after each of mem_phases' lines: some 4 s of 1 kHz samples, as a short run on a loaded machine has
  local dir, one = flow_runs()
  local rec, run_dir = one(2, "700")
  T.ok(rec.memory.samples > 2000, "samples: " .. rec.memory.samples)
  local r = assert(proc.run { odp, "report", run_dir, "--out", dir .. "/long.html" })
  T.eq(r.status, 0, r.stderr)
  local svg = T.read(dir .. "/long.html"):match('id="memory%-timeline".-</svg>')
  T.ok(svg, "the memory chart")
end)

T.test("history: each phase's peak is a series; a 10% growth of one phase is flagged", function()
  local history = require("odp.results.history")
  local fixture = require("history_fixture")
  local dir = T.tmpdir()
  local db = assert(history.open("sqlite:" .. dir .. "/h.db"))
  local base = 50000
  for i = 1, 16 do
    local rec, path = fixture.record(dir, i, { tag = "m" })
    -- steady grows by 10% from run 9 on (as between two ExecuTorch releases); the other phases stay
    local steady = (i >= 9 and base * 1.10 or base) + (i % 3) * 8
    rec.memory = { phases = json.array({}), load_kb = 9000 + i % 2, method_kb = 33000 + i % 2, first_kb = 49000,
      steady_kb = math.floor(steady) }
    assert(db:add(rec, { record_path = path }))
  end
  local function series(metric)
    local s = assert(db:series { metric = metric })
    T.eq(#s, 1, metric .. " is a series")
    return assert(db:points(s[1].id))
  end
  local changes = history.detect(series("memory_steady_kb"), { min_effect = 0.05 })
  T.eq(#changes, 1, "the steady phase's change")
  T.eq(changes[1].direction, "up")
  T.ok(math.abs(changes[1].effect - 0.10) < 0.01, "effect " .. changes[1].effect)
  T.eq(#history.detect(series("memory_load_kb"), { min_effect = 0.05 }), 0, "load did not change")
  T.eq(#history.detect(series("memory_first_kb"), { min_effect = 0.05 }), 0)
  db:close()
end)

T.test("ssh: the resident helper watches the phases on the board, the timeline comes back on its channel", function()
  local sshd = require("sshd")
  local srv = sshd.start()
  local ok, err = pcall(function()
    local t = assert(require("odp.target.ssh").new { host = srv.user .. "@127.0.0.1", port = srv.port,
      identity = srv.identity, known_hosts = srv.known_hosts, remote_dir = srv.remote_dir .. "/mem" })
    -- the timeline's path is on this machine: the helper sends it back in its 'T' frames, no file on the board
    local here = T.tmpdir() .. "/memory.csv"
    local r = assert(t:exec({ phases_prog, "4" }, { timeout = 120, memory = { csv = here, marks = MARKS } }))
    T.eq(r.status, 0, r.stderr)
    T.ok(r.memory, "the helper's memory report")
    T.eq(r.memory.timeline, "ok")
    local phases = memparse.phases(r.memory, r.rusage.maxrss_kb, r.wall_s * 1000)
    local b, p = baseline(r), by_name(phases)
    near_mib(p.first.peak_kb, b + 48 * MIB, "first")
    near_mib(p.steady.peak_kb, b + 20 * MIB, "steady")
    local text = T.read(here)
    T.eq(r.memory.samples, select(2, text:gsub("\n", "")) - 1, "every sample the helper counted is a line")
    T.match(text, "^t_ms,rss_kb,anon_kb,file_kb\n")
    T.eq(sshd.sh("find " .. srv.remote_dir .. "/mem -name '*.csv'"), "", "no timeline file on the board")
    -- the timeline's peak agrees with the helper's own count of its samples' largest (sampled_max_kb)
    T.eq(memory.timeline_peak(here).rss_kb, r.memory.sampled_max_kb)
    -- a bound odp asks for: the helper keeps whole lines within it and says the timeline was cut
    local cut = T.tmpdir() .. "/cut.csv"
    r = assert(t:exec({ phases_prog, "4" }, { timeout = 120, memory = { csv = cut, marks = MARKS,
      timeline_max = 300 } }))
    T.eq(r.status, 0, r.stderr)
    T.eq(r.memory.timeline, "cut")
    text = T.read(cut)
    T.ok(#text <= 300 and #text > 28, ("%d bytes of timeline for a bound of 300"):format(#text))
    T.match(text, "^t_ms,rss_kb,anon_kb,file_kb\n[%d.]+,%d+,%-?%d+,%d+\n")
    T.eq(text:sub(-1), "\n", "whole lines only")
    T.ok(r.memory.samples > select(2, text:gsub("\n", "")) - 1, "samples beyond the bound were taken, not sent")
    -- a timeline that cannot be written here: the run and its phases stand, the timeline is failed and says why
    r = assert(t:exec({ phases_prog, "2" }, { timeout = 120, memory = { csv = "/nonexistent/dir/m.csv", marks = MARKS } }))
    T.eq(r.status, 0, r.stderr)
    T.eq(r.memory.timeline, "failed")
    T.match(r.timeline_error, "^EIO: the memory timeline /nonexistent/dir/m.csv: .*No such file or directory")
    T.ok(#r.memory.marks > 0, "the phases' readings are still there")
    t:close()
    -- the flow over SSH: the record's memory, its timeline fetched into the run directory
    local tmp = T.tmpdir()
    local fr = assert(proc.run { argv = { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
      "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts,
      "--remote-dir", srv.remote_dir .. "/flow", "--runner", phases_prog, "--model",
      T.root() .. "/tests/fixtures/pte/add_arduino.pte", "-n", "3", "--runs-dir", tmp .. "/runs", "--no-history",
      "--format", "json" }, cwd = tmp, timeout = 300 })
    T.eq(fr.status, 0, fr.stderr)
    local rec = json.decode(fr.stdout)
    local names = {}
    for i, ph in ipairs(rec.memory.phases) do names[i] = ph.name end
    T.eq(table.concat(names, "+"), "load+method+first+steady+teardown")
    T.eq(rec.memory.peak_phase, "first")
    T.eq(rec.peak_rss_kb, rec.memory.peak_kb)
    T.eq(rec.artifacts.memory.file, "memory.csv", "the timeline is in the run directory")
    T.match(T.read(rec.artifacts.run_dir .. "/memory.csv"), "^t_ms,rss_kb,anon_kb,file_kb\n[%d.]+,%d+,")
  end)
  srv:stop()
  if not ok then error(err, 0) end
end)

T.done()
