-- The Raspberry Pi 5 and Graviton flows against a real arm64 Linux kernel: the board twins of
-- tests/board_twin (Debian's arm64 kernel under qemu-system-aarch64 -M virt, -cpu cortex-a76 / neoverse-n1,
-- emulated PMUv3, dropbear on a forwarded loopback port). One Pi twin serves every Pi test; the Graviton twin
-- boots after it is stopped. The oracles are the guest's own: OpenSSH's ssh client into it (not odp's), its
-- /proc, getconf, sha256sum, perf stat (Debian's linux-perf:arm64) and the measured program's own VmHWM.
local T = require("t")
local twin = require("board_twin")
local proc = require("odp.proc")
local sys = require("odp.sys")
local json = require("odp.core.json")
local craft = require("elfcraft")

local odp = os.getenv("ODP") or "build/odp"
local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")
local pte = T.root() .. "/tests/fixtures/pte/add_arduino.pte"
local RUNNER_NAME = "executor_runner-linux-aarch64"
local tmp = T.tmpdir()

local pi = twin.start("rpi5")
print(("# the Pi 5 twin booted in %.1f s (port %d)"):format(pi.boot_s, pi.port))
local t = assert(require("odp.target.ssh").new(pi:connect_opts()))
assert(t:mkdir("/tmp/odp"))
assert(t:workdir()) -- this odp's own directory on the guest, where t:stage links what it stages (as a flow's board does)

-- Where odp keeps a file it staged on the guest (its bytes by sha256: docs/devices.md "A shared board").
local function staged(path) return "/tmp/odp/.odp/blobs/" .. sys.sha256_file(path) end
local function has(list, x) for _, v in ipairs(list or {}) do if v == x then return true end end return false end
local function says(text, what) T.ok(text:find(what, 1, true), ("%q in %q"):format(what, text)) end

-- `odp run SCRIPT` against twin b with args; returns the proc.run result. opts.env, opts.timeout.
local function flow(b, script, args, opts)
  opts = opts or {}
  local argv = { odp, "run", T.root() .. "/scripts/" .. script }
  table.move(b:odp_args(), 1, #b:odp_args(), #argv + 1, argv)
  table.move(args, 1, #args, #argv + 1, argv)
  argv.cwd, argv.timeout, argv.env = tmp, opts.timeout or 180, opts.env
  return assert(proc.run(argv))
end

-- A shell command that runs `odp run SCRIPT ...` in the background, waits (inside the guest, one
-- connection) until the runner is running there, does `act`, then waits for odp; odp's exit status is
-- printed as "exit=N" on stderr.
local function during_run(b, script, args, act)
  local argv = { odp, "run", T.root() .. "/scripts/" .. script }
  table.move(b:odp_args(), 1, #b:odp_args(), #argv + 1, argv)
  table.move(args, 1, #args, #argv + 1, argv)
  for i, a in ipairs(argv) do argv[i] = "'" .. a:gsub("'", "'\\''") .. "'" end
  local wait_runner = b:ssh_command(("i=0; until grep -h Cpus_allowed_list /proc/$(pidof %s || echo none)/status " ..
    "2>/dev/null; do i=$((i+1)); [ $i -gt 300 ] && exit 1; sleep 0.1; done"):format(RUNNER_NAME))
  return ("%s & p=$!; %s >&2 || echo 'runner never seen' >&2; %s; wait $p; echo \"exit=$?\" >&2")
    :format(table.concat(argv, " "), wait_runner, act)
end

T.test("the Pi 5 twin: Debian's arm64 kernel on Cortex-A76 cores, reached with OpenSSH # rig", function()
  T.eq(pi:sh("uname -m"), "aarch64\n")
  T.match(pi:sh("grep -m1 'CPU part' /proc/cpuinfo"), "0xd0b") -- the Cortex-A76's part number
  T.eq(pi:sh("hostname"), "raspberrypi\n")
end)

T.test("the twin's host key is verified: another key under its name is refused, exit 3", function()
  -- another key under the twin's name is refused: the known_hosts line is what verifies it
  local kh = tmp .. "/wrong_kh"
  local other = require("sshd").keygen(tmp .. "/other_host")
  T.write(kh, ("[127.0.0.1]:%d %s\n"):format(pi.port, T.read(other .. ".pub"):match("^(%S+ %S+)")))
  local r = assert(proc.run { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", "pi@127.0.0.1", "--port",
    tostring(pi.port), "--identity", pi.identity, "--known-hosts", kh, "--runner", build .. "/tests/rss_touch-aarch64",
    "--model", pte, cwd = tmp, timeout = 120 })
  T.eq(r.status, 3, r.stderr); T.match(r.stderr, "host key of %[127%.0%.0%.1%]:%d+ has CHANGED")
end)

T.test("device_state from the real kernel: identity and CPUs as the guest reports them; no cpufreq or " ..
  "thermal zones, named in missing; emulated, from the device tree", function()
  local ds = require("odp.target.device_state")
  local s = assert(ds.gather(t))
  T.eq(s.hostname, pi:sh("hostname"):match("%S+"))
  T.eq(s.kernel, pi:sh("uname -r"):match("%S+"))
  T.eq(#s.online, tonumber(pi:sh("nproc")))
  for _, c in ipairs(s.cpus) do T.eq(c.core, "Cortex-A76", "cpu" .. c.cpu) end
  T.eq(s.os, pi:sh(". /etc/os-release; echo \"$PRETTY_NAME\""):match("[^\n]+"))
  -- what the virt machine lacks, checked on the guest itself, and named rather than invented
  T.eq(pi:sh("ls -d /sys/devices/system/cpu/cpu0/cpufreq /sys/class/thermal/thermal_zone0 2>/dev/null; true"), "")
  T.ok(has(s.missing, "cpufreq"), "cpufreq missing: " .. json.encode(s.missing))
  T.ok(has(s.missing, "thermal_zones"), "thermal zones missing")
  T.eq(has(s.missing, "cpu_capacity"), false, "the guest has cpu_capacity: " .. pi:sh("cat /sys/devices/system/cpu/cpu0/cpu_capacity"))
  for _, c in ipairs(s.cpus) do T.eq({ c.cur_khz, c.max_khz, c.governor }, {}, "no frequency invented") end
  T.eq(s.compatible, { pi:sh("tr '\\0' '\\n' </proc/device-tree/compatible"):match("[^\n]+") })
  T.eq(s.compatible, { "linux,dummy-virt" })
  T.match(s.emulated, "QEMU virt")
end)

T.test("preflight on the guest: aarch64, its glibc (from getconf there); a runner needing a newer glibc " ..
  "is refused in one line, one the guest's glibc can load runs", function()
  T.eq(t:arch(), "aarch64")
  T.eq(t:libc_version(), pi:sh("getconf GNU_LIBC_VERSION"):match("glibc ([%d%.]+)"))
  local preflight = require("odp.target.preflight")
  local dir = tmp .. "/elf"
  os.execute("mkdir -p " .. dir)
  local ok, e = pcall(preflight.check, t, { runner = craft.needs_glibc(dir, "9.99", "aarch64-linux-gnu-gcc"), model = pte })
  T.eq(ok, false)
  T.eq(e.code, "ENODEV"); T.match(e.message, "GLIBC_9%.99"); T.match(e.message, t:libc_version())
  T.ok(not e.message:find("\n"), "one line")
  -- a dynamic aarch64 program built against Debian's glibc passes, and the guest's loader runs it
  local hello = craft.aarch64(dir)
  local facts = preflight.check(t, { runner = hello, model = pte })
  T.eq(facts.arch, "aarch64")
  local where = assert(t:stage(hello, { mode = tonumber("755", 8) }))
  T.eq(assert(t:exec({ where })).status, 0)
  -- an x86_64 runner: refused before any upload
  local r = flow(pi, "rpi5.lua", { "--runner", build .. "/tests/fake_runner", "--model", pte,
    "--remote-dir", "/tmp/odp-x86" })
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "x86_64"); T.match(r.stderr, "aarch64")
  T.eq(pi:sh("ls /tmp/odp-x86 2>/dev/null; true"), "", "nothing uploaded")
end)

T.test("odp-rusage aarch64 on the guest: peak RSS of 4/50 MB programs is their own VmHWM", function()
  local touch = build .. "/tests/rss_touch-aarch64"
  local where = assert(t:stage(touch, { mode = tonumber("755", 8) }))
  for _, mb in ipairs({ 4, 50 }) do
    local r = assert(t:exec({ where, tostring(mb) }, { timeout = 60 }))
    T.eq(r.status, 0, r.stderr)
    local own = tonumber(r.stdout:match("VmHWM_kb=(%d+)"))
    T.ok(own and own > mb * 1024, ("VmHWM %s for %d MB"):format(own, mb))
    local got, tol = r.rusage and r.rusage.maxrss_kb, math.max(own * 0.02, 256)
    T.ok(got and math.abs(got - own) <= tol, ("%d MB: odp says %s kB, the guest's VmHWM is %d kB"):format(mb, got, own))
  end
  T.eq(t:rusage_method(), "odp-rusage")
  T.eq(pi:sh("sha256sum /tmp/odp/.odp/odp-rusage"):match("%x+"), sys.sha256_file(build .. "/odp-rusage-aarch64"))
end)

-- The guest's kernel is Debian 12's 6.1: before 6.2 a thread's page faults reach its process's RSS counters
-- (statm, VmHWM, clear_refs' reset) only every 64 faults, so those lag what is resident.
local function kernel_batches_rss()
  local major, minor = pi:sh("uname -r"):match("^(%d+)%.(%d+)")
  return tonumber(major) < 6 or (tonumber(major) == 6 and tonumber(minor) < 2)
end

T.test("memory by phase on the guest (odp-rusage aarch64, the resident helper): each phase's peak is known", function()
  local memparse = require("odp.parse.memory")
  T.ok(kernel_batches_rss(), "the twin's kernel batches RSS counts: " .. pi:sh("uname -r"))
  local where = assert(t:stage(build .. "/tests/mem_phases-aarch64", { mode = tonumber("755", 8) }))
  local r = assert(t:exec({ where, "4" }, { timeout = 180,
    memory = { csv = T.tmpdir() .. "/mem.csv", marks = memparse.mark_specs(memparse.EXECUTORCH_MARKS) } }))
  T.eq(r.status, 0, r.stderr)
  T.ok(r.memory, "the helper's memory report")
  T.eq(r.memory.timeline, "ok", "the timeline came back on the helper's channel")
  T.eq(r.memory.clear_refs, "ok")
  T.eq(r.memory.rss_counters, "batched", "the helper saw the kernel's batched RSS counters")
  local phases = memparse.phases(r.memory, r.rusage.maxrss_kb, r.wall_s * 1000)
  local b = assert(tonumber(r.stdout:match("baseline_kb=(%d+)")))
  local want = { load = 8, method = 32, first = 48, steady = 20, teardown = 20 }
  T.eq(#phases, 5)
  for _, p in ipairs(phases) do
    -- the largest reading, not called exact: the kernel's marks lag
    T.ok(not p.exact and math.abs(p.peak_kb - (b + want[p.name] * 1024)) <= 1024,
      ("%s: %d kB (%s), known %d kB (the guest's kernel)"):format(p.name, p.peak_kb, p.exact and "exact" or "sampled",
        b + want[p.name] * 1024))
  end
end)

T.test("counters through the emulated PMUv3: cycles agree with the guest's own perf stat on the same " ..
  "process; instructions, which QEMU does not count, are named unsupported by both", function()
  -- perf stat counts odp-rusage and its child; odp-rusage counts the child only. The child is a busybox
  -- shell loop in user space: TCG's cycles track time spent at EL0, so a workload that mostly waits in the
  -- kernel (page faults) would leave odp-rusage's own share large and noisy
  local out = pi:sh("perf stat -x, -e cycles:u,instructions:u -o /tmp/perf.csv -- /tmp/odp/.odp/odp-rusage " ..
    "-o /tmp/rusage.txt --counters basic -- busybox sh -c 'i=0; while [ $i -lt 8000 ]; do i=$((i+1)); done' && " ..
    "cat /tmp/perf.csv && echo @@ && cat /tmp/rusage.txt", 120)
  local perf_text, rusage_text = out:match("^(.*)\n@@\n(.*)$")
  local perf_cycles = tonumber(perf_text:match("\n(%d+),,cycles:u"))
  T.ok(perf_cycles and perf_cycles > 1e6, "perf stat counted cycles: " .. perf_text)
  T.match(perf_text, "<not supported>,,instructions:u", "perf says instructions are not supported")
  local parsed = assert(require("odp.target.rusage").parse(rusage_text))
  local c = assert(parsed.counters, "odp-rusage counters: " .. rusage_text)
  T.ok(c.cycles <= perf_cycles and c.cycles >= 0.9 * perf_cycles,
    ("odp-rusage %d cycles, perf stat %d (odp-rusage + child)"):format(c.cycles, perf_cycles))
  T.eq(c.unavailable and c.unavailable.instructions, "unsupported")
  T.eq({ c.paranoid, c.user_only }, { 2, true }, "user space only, as perf's :u")
end)

T.with_real_runner("scripts/rpi5.lua with the real runner: pushed, then hash-skipped; measured, emulated, " ..
  "cycles counted", function(runner)
  local args = { "--runner", runner, "--model", pte, "-n", "10", "--counters", "basic", "--runs-dir", tmp .. "/runs",
    "--format", "json" }
  local r = flow(pi, "rpi5.lua", args)
  T.eq(r.status, 0, r.stderr)
  says(r.stderr, "pushed " .. RUNNER_NAME)
  T.eq(pi:sh("sha256sum " .. staged(runner)):match("%x+"), sys.sha256_file(runner), "the guest's copy")
  local rec = assert(json.decode(r.stdout))
  T.eq(rec.ok, true); T.eq(rec.latency_ms.n, 10); T.eq(rec.outputs[1].values, { 2, 2, 2 })
  T.eq(rec.latency_ms.emulated, true, "TCG timings are labelled")
  T.match(rec.device_state.emulated, "linux,dummy%-virt")
  T.eq(rec.device_state.clusters[1].core, "Cortex-A76")
  T.ok(rec.counters.total.cycles > 0, "cycles through the PMU")
  T.eq(rec.counters.unavailable, { instructions = "unsupported" })
  -- peak RSS against GNU time -v on the guest (Debian's time:arm64)
  local tv = pi:sh(("cd /tmp/odp && /usr/bin/time -v %s --model_path %s --num_executions 10 " ..
    "2>&1 >/dev/null | grep 'Maximum resident'"):format(staged(runner), staged(pte)))
  local oracle = tonumber(tv:match("(%d+)%s*$"))
  T.ok(math.abs(rec.peak_rss_kb - oracle) <= math.max(oracle * 0.03, 256),
    ("odp %d kB, GNU time -v %d kB"):format(rec.peak_rss_kb, oracle))
  -- again: nothing uploaded; the human report says EMULATED
  table.remove(args); table.remove(args)
  r = flow(pi, "rpi5.lua", args)
  T.eq(r.status, 0, r.stderr)
  says(r.stderr, "unchanged " .. RUNNER_NAME); T.match(r.stderr, "unchanged add_arduino.pte")
  T.match(r.stdout, "device%s+raspberrypi · Cortex%-A76 x%d · EMULATED")
  T.match(r.stdout, "EMULATED, not a board's timings")
end, "aarch64")

T.with_real_llm("--llm on the guest (the static aarch64 llama_main): its tokens and rates as the guest's own run " ..
  "of the runner reports them, every forward in its ETDump, peak RSS against GNU time there", function(p)
  local r = flow(pi, "rpi5.lua", { "--llm", "--runner", p.runner, "--model", p.model, "--tokenizer", p.tokenizer,
    "--prompt", "Once upon a time", "--max-new-tokens", "8", "-n", "2", "--runs-dir", tmp .. "/llm-runs",
    "--format", "json" }, { timeout = 300 })
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq(rec.ok, true)
  T.eq(rec.latency_ms.emulated, true, "TCG timings are labelled")
  -- the guest's own run of the same generation: its PyTorchObserver line is the oracle for the counts
  local out = pi:sh("cd /tmp/odp && " .. staged(p.runner) .. " --model_path " .. staged(p.model) .. " --tokenizer_path " ..
    staged(p.tokenizer) .. " " ..
    "--prompt 'Once upon a time' --temperature 0 --max_new_tokens 8 --etdump_path /tmp/g.etdump 2>/dev/null; " ..
    "rm -f /tmp/g.etdump", 180)
  local llm = require("odp.parse.llm")
  local obs = assert(llm.observer(out))
  T.eq(rec.llm.prompt_tokens, obs.prompt_tokens)
  T.eq(rec.llm.generated_tokens, obs.generated_tokens)
  local doc = assert(require("odp.parse.etdump").read(rec.artifacts.run_dir .. "/" .. rec.artifacts.etdump.file))
  T.eq(#llm.forwards(doc), obs.prompt_tokens + obs.generated_tokens, "one forward per token")
  T.eq(rec.latency_ms.n, 2 * obs.generated_tokens)
  local tv = pi:sh("cd /tmp/odp && /usr/bin/time -v " .. staged(p.runner) .. " --model_path " .. staged(p.model) ..
    " --tokenizer_path " .. staged(p.tokenizer) .. " --prompt 'Once upon a time' --temperature 0 --max_new_tokens 8 " ..
    "--etdump_path /tmp/g.etdump 2>&1 >/dev/null | grep 'Maximum resident'; rm -f /tmp/g.etdump", 180)
  local oracle = tonumber(tv:match("(%d+)%s*$"))
  T.ok(math.abs(rec.peak_rss_kb - oracle) <= math.max(oracle * 0.05, 512),
    ("odp %d kB, GNU time -v %d kB"):format(rec.peak_rss_kb, oracle))
end, "aarch64")

-- The multi-operator MLP (tests/fixtures/pte/mlp.pte: mm -> relu -> add -> mm, ~250 ms an inference under TCG)
local mlp = T.root() .. "/tests/fixtures/pte/mlp.pte"

T.with_real_runner("--sample on the guest (the real runner, mlp.pte): the event is the one the guest's own perf " ..
  "may sample; >= 95% of execute's samples attributed, each op with >= 5% of its ETDump time within 5 points; " ..
  "a rate above the kernel's limit is sampled at the limit, said in a warning", function(runner)
  local t0 = sys.now()
  -- what the guest's kernel allows an unprivileged user, asked of its own perf: cycles sampled in user space
  -- (the emulated PMUv3), and whether kernel samples are refused (perf_event_paranoid 2)
  local perf = pi:sh("perf record -q -e cycles:u -F 1000 -o /tmp/perf-u.data -- true >/dev/null 2>&1; echo u=$?; " ..
    "perf record -q -e cycles:k -F 1000 -o /tmp/perf-k.data -- true >/dev/null 2>&1; echo k=$?; " ..
    "rm -f /tmp/perf-u.data /tmp/perf-k.data; cat /proc/sys/kernel/perf_event_max_sample_rate")
  local want_event = perf:match("u=0\n") and "cycles" or "cpu-clock"
  local max_rate = tonumber(perf:match("k=%d+\n(%d+)"))
  -- 20 inferences (~5 s of execute): the guest's samples come irregularly (the kernel throttles them, the host
  -- takes its vCPUs away; tests/board_twin/README.md), an error that averages out over inferences
  local r = flow(pi, "rpi5.lua", { "--runner", runner, "--model", mlp, "-n", "20", "--sample", "--runs-dir",
    tmp .. "/sample", "--format", "json", "--no-history" })
  T.eq(r.status, 0, r.stderr:sub(-500))
  local rec = assert(json.decode(r.stdout))
  local cp = rec.cpu_profile
  print(("# on the twin: %s at %d Hz (the guest's limit %d), %d samples, %d in execute, attributed %.3f"):format(
    cp.event, cp.rate_hz, max_rate, cp.samples.total, cp.samples.in_execute, cp.attributed))
  T.eq(cp.event, want_event, "the guest's perf: " .. perf)
  T.eq(cp.user_only, not perf:match("k=0\n") or nil, "kernel samples refused by the guest's perf_event_paranoid")
  T.eq(cp.rate_hz, math.min(4000, max_rate), "4 kHz, or the guest kernel's perf_event_max_sample_rate")
  T.ok(cp.samples.in_execute > 500, "samples in execute: " .. cp.samples.in_execute)
  T.ok(cp.attributed >= 0.95, ("attributed %.3f"):format(cp.attributed))
  local oracle = require("sample_oracle")
  local weighted, gaps = oracle.time_weighted(rec.artifacts.run_dir, rec)
  local n = #gaps
  print(("# the guest's samples: %.2f ms apart at the median, %.2f at p90, %.1f at most (%.2f at %d Hz, regular)")
    :format(gaps[n // 2], gaps[n * 9 // 10], gaps[n], 1000 / cp.rate_hz, cp.rate_hz))
  local checked = oracle.check(T, cp, rec.artifacts.run_dir .. "/" .. rec.artifacts.etdump.file, "twin", weighted)
  T.eq(checked, 4, "mm, relu, add and the second mm each hold >= 5% of execute")
  -- a kernel whose sampling interrupts take long (TCG's do) lowers its perf_event_max_sample_rate, and refuses
  -- perf_event_open above it (EINVAL): odp asked for more failed there ("perf_event_open: Invalid argument")
  -- until the helper sampled at the limit, as perf record does
  max_rate = tonumber(pi:sh("cat /proc/sys/kernel/perf_event_max_sample_rate"))
  T.ok(max_rate < 100000, "the guest's kernel lowered perf_event_max_sample_rate after a sampled run: " .. max_rate)
  local ask = math.min(100000, 2 * max_rate)
  print(("# the guest's limit after it: %d Hz; asking for %d"):format(max_rate, ask))
  r = flow(pi, "rpi5.lua", { "--runner", runner, "--model", pte, "--sample=" .. ask, "--runs-dir", tmp .. "/sample",
    "--format", "json", "--no-history" })
  T.eq(r.status, 0, r.stderr:sub(-500))
  rec = assert(json.decode(r.stdout))
  T.eq(rec.cpu_profile.rate_hz, max_rate, "sampled at the guest's limit")
  T.ok(has(rec.warnings, ("cpu profile: sampled at %d Hz, not %d: the board's kernel.perf_event_max_sample_rate " ..
    "(the kernel lowers it when its sampling interrupts take too long)"):format(max_rate, ask)),
    json.encode(rec.warnings))
  print(("# the sampling case took %.0f s"):format(sys.now() - t0))
end, "aarch64")

T.with_real_runner("memory by phase on the guest (the real runner, mlp.pte): the phases found, the overall peak " ..
  "is the guest's GNU time -v within 1%, the planned arena the .pte's", function(runner)
  local t0 = sys.now()
  local r = flow(pi, "rpi5.lua", { "--runner", runner, "--model", mlp, "-n", "3", "--runs-dir", tmp .. "/memory",
    "--format", "json", "--no-history" })
  T.eq(r.status, 0, r.stderr:sub(-500))
  local rec = assert(json.decode(r.stdout))
  local mem = rec.memory
  local names = {}
  for i, p in ipairs(mem.phases) do names[i] = p.name end
  T.eq(mem.seen, { "program", "method", "first", "executed" }, "the runner's phase lines, as the guest printed them")
  T.eq(table.concat(names, "+"), "load+method+first+steady+teardown")
  T.eq(mem.clear_refs, "ok", "the guest's kernel took clear_refs")
  T.eq(mem.rss_counters, "batched", "the guest's 6.1 kernel lags its RSS counters: no peak is exact")
  T.eq(mem.exact, false)
  -- the same command under the guest's GNU time (Debian's time:arm64), twice: a process's peak moves by a few
  -- pages between runs
  local gnu = 0
  for _ = 1, 2 do
    local tv = pi:sh(("cd /tmp/odp && /usr/bin/time -f 'max_kb=%%M' %s --model_path %s --num_executions 3 " ..
      "2>&1 >/dev/null | tail -1"):format(staged(runner), staged(mlp)), 120)
    gnu = math.max(gnu, (assert(tonumber(tv:match("max_kb=(%d+)")), tv)))
  end
  print(("# on the twin: overall peak %d kB (%s), GNU time -v %d kB"):format(mem.peak_kb, mem.peak_phase, gnu))
  T.ok(math.abs(mem.peak_kb - gnu) <= gnu * 0.01, ("odp %d kB, GNU time %d kB (+-1%%)"):format(mem.peak_kb, gnu))
  T.eq(rec.peak_rss_kb, mem.peak_kb)
  -- the planned arena: flatc's own JSON of the model (tests/fixtures/pte/mlp.json) against what the runner set
  -- up on the guest (its log) and what the record owns
  local plan = assert(json.decode(T.read(T.root() .. "/tests/fixtures/pte/mlp.json"))).execution_plan[1]
  local from_pte, from_log = 0, 0
  for _, b in ipairs(plan.non_const_buffer_sizes) do from_pte = from_pte + b end
  for _, b in ipairs(rec.planned_buffers) do from_log = from_log + b end
  T.eq(from_log, from_pte, "the runner's planned buffers on the guest are the .pte's")
  T.eq(mem.owners.planned_kb, math.floor(from_pte / 1024 + 0.5))
  local p = {}
  for _, ph in ipairs(mem.phases) do p[ph.name] = ph end
  T.ok(p.method.peak_kb - p.load.peak_kb >= from_pte / 1024 * 0.9,
    ("method %d kB vs load %d kB: the arena is set up in the method phase"):format(p.method.peak_kb, p.load.peak_kb))
  print(("# the memory case took %.0f s"):format(sys.now() - t0))
end, "aarch64")

T.with_real_runner("memory on the guest's batching kernel (the real runner, add_arduino.pte: 66 page faults in " ..
  "all): no phase reads the 4 kB of the lagging counters, none is called exact; the peak is the guest's GNU time -v",
  function(runner)
  T.ok(kernel_batches_rss(), "the twin's kernel batches RSS counts")
  local r = flow(pi, "rpi5.lua", { "--runner", runner, "--model", pte, "-n", "10", "--runs-dir", tmp .. "/tiny",
    "--format", "json", "--no-history" })
  T.eq(r.status, 0, r.stderr:sub(-500))
  local rec = assert(json.decode(r.stdout))
  local mem = rec.memory
  T.eq(mem.rss_counters, "batched")
  T.eq(mem.exact, false)
  local tv = pi:sh(("cd /tmp/odp && /usr/bin/time -f 'max_kb=%%M' %s --model_path %s " ..
    "--num_executions 10 2>&1 >/dev/null | tail -1"):format(staged(runner), staged(pte)), 120)
  local gnu = assert(tonumber(tv:match("max_kb=(%d+)")), tv)
  print(("# tiny runner on the twin: phases %s; GNU time -v %d kB"):format(json.encode(mem.phases), gnu))
  T.ok(math.abs(mem.peak_kb - gnu) <= gnu * 0.05, ("odp %d kB, GNU time %d kB (+-5%%)"):format(mem.peak_kb, gnu))
  for _, p in ipairs(mem.phases) do
    T.eq(p.exact, false, p.name .. " is not called exact")
    -- the runner is resident (its static text and the model) from its first line on: at least half its peak
    T.ok(p.peak_kb >= gnu / 2 and p.peak_kb <= gnu * 1.05, ("%s: %d kB, GNU time's peak %d kB"):format(p.name,
      p.peak_kb, gnu))
  end
  -- the timeline walks the page tables: every sample after the first phase line is the resident runner
  local rows = require("odp.results.memory").timeline(rec.artifacts.run_dir .. "/memory.csv")
  T.ok(rows and #rows > 0, "a timeline")
  local t_load = mem.phases[1].t_end_ms
  for _, row in ipairs(rows) do
    if row.t_ms >= t_load then
      T.ok(row.rss_kb >= gnu / 2, ("sample at %.1f ms: %d kB, GNU time's peak %d kB"):format(row.t_ms, row.rss_kb, gnu))
    end
  end
  T.ok(table.concat(rec.warnings, "\n"):find("batches of 64", 1, true), "the warning says why not exact")
end, "aarch64")

local OUTPUTS_CASE = "outputs across architectures: the guest's aarch64 runner against the host's x86_64 one on " ..
  "the same random inputs agrees (--reference), and numpy agrees with odp's metrics"
local x86, why_x86 = T.real_runner()
if not x86 then T.skip(OUTPUTS_CASE, why_x86) else T.with_real_runner(OUTPUTS_CASE, function(runner)
  local t0 = sys.now()
  for _, model in ipairs { pte, mlp } do
    local ref = assert(proc.run { odp, "run", T.root() .. "/scripts/host.lua", "--runner", x86, "--model", model,
      "--inputs", "random:5", "--outputs", "--runs-dir", tmp .. "/outputs", "--format", "json", "--no-history",
      cwd = tmp, timeout = 120 })
    T.eq(ref.status, 0, ref.stderr)
    local host = assert(json.decode(ref.stdout))
    local r = flow(pi, "rpi5.lua", { "--runner", runner, "--model", model, "--inputs", "random:5", "--reference",
      host.artifacts.run_dir, "--min-cosine", "0.9999", "--max-abs-err", "1e-3", "--runs-dir", tmp .. "/outputs",
      "--format", "json", "--no-history" })
    T.eq(r.status, 0, r.stderr:sub(-500))
    local rec = assert(json.decode(r.stdout))
    T.eq(rec.ok, true)
    T.eq(#rec.inputs, #host.inputs)
    for i, inp in ipairs(rec.inputs) do
      T.eq(inp.sha256, host.inputs[i].sha256, "the same input bytes on both")
      -- what the guest was given, hashed by the guest
      T.eq(pi:sh("sha256sum /tmp/odp/.odp/blobs/" .. inp.sha256):match("%x+"), inp.sha256, "the guest's copy")
    end
    T.eq(#rec.reference.outputs, #host.outputs)
    for _, e in ipairs(rec.reference.outputs) do
      print(("# %s output %d on the twin vs the host: max abs err %g, cosine %.12f, %d of %d equal"):format(
        model:match("[^/]+$"), e.index, e.max_abs_err, e.cosine, e.equal, e.n))
    end
    require("outputs_oracle").check(T, rec.reference, host.artifacts.run_dir, rec.artifacts.run_dir)
  end
  print(("# the outputs case took %.0f s"):format(sys.now() - t0))
end, "aarch64") end

T.with_real_runner("placement: --cpus 1 is the runner's own Cpus_allowed_list on the guest", function(runner)
  local r = assert(proc.run { "sh", "-c", during_run(pi, "rpi5.lua", { "--runner", runner, "--model", pte,
    -- long enough under TCG that the guest's own pidof loop, started at the same time, sees it
    "-n", "20000", "--cpus", "1", "--runs-dir", tmp .. "/runs", "--format", "json" }, ":"), timeout = 180 })
  T.match(r.stderr, "exit=0")
  T.match(r.stderr, "Cpus_allowed_list:%s+1\n", "the running runner's own /proc/<pid>/status")
  local rec = assert(json.decode(r.stdout))
  T.eq(rec.device_state.cpus_used, "1")
end, "aarch64")

T.with_real_runner("Ctrl-C mid-run: exit 130 at once, ECANCELED in the record, the runner gone from the guest",
  function(runner)
  local r = assert(proc.run { "sh", "-c", during_run(pi, "rpi5.lua", { "--runner", runner, "--model", pte,
    "-n", "5000", "--runs-dir", tmp .. "/int" }, "kill -INT $p"), timeout = 180 })
  T.match(r.stderr, "exit=130")
  local dirs = proc.run { "sh", "-c", "ls -d " .. tmp .. "/int/*/" }.stdout
  local rec = assert(json.decode(T.read(dirs:match("[^\n]+") .. "result.json")))
  T.eq({ rec.ok, rec.error.code }, { false, "ECANCELED" })
  local left = pi:sh(("i=0; while pidof %s; do i=$((i+1)); [ $i -gt 50 ] && break; sleep 0.1; done; true")
    :format(RUNNER_NAME))
  T.eq(left, "", "no runner left on the guest")
end, "aarch64")

T.with_real_runner("the board reboots mid-run (QEMU system_reset): one clear line, exit 3 within the " ..
  "keepalive, the failed record kept; the next run re-pushes and measures", function(runner)
  -- keepalives every 2 s instead of odp's default 10 (the same code path, 20 s less of CI time)
  T.write(tmp .. "/alive_config", "Host 127.0.0.1\n  ServerAliveInterval 2\n  ServerAliveCountMax 3\n")
  local t0 = sys.now()
  local r = assert(proc.run { "sh", "-c", during_run(pi, "rpi5.lua", { "--runner", runner, "--model", pte,
    "-n", "5000", "--runs-dir", tmp .. "/reboot", "--ssh-config", tmp .. "/alive_config" }, ("printf 'system_reset\\n' | socat -t 1 - UNIX-CONNECT:%s >/dev/null")
    :format(pi.monitor)), timeout = 240 })
  local took = sys.now() - t0
  T.match(r.stderr, "exit=3")
  T.ok(took < 40, ("odp gave up %.0f s after the run began"):format(took))
  local fails = {}
  for line in r.stdout:gmatch("[^\n]+") do if line:find("^FAIL") then fails[#fails + 1] = line end end
  T.eq(#fails, 1, r.stdout)
  -- the guest's reset is hidden behind QEMU's user networking, which keeps the host's side of the TCP
  -- connection open: the keepalives find the silence (a real board's fresh kernel answers with a reset)
  T.match(fails[1], "pi@127%.0%.0%.1:%d+: no answer for %d+ s %(ServerAliveInterval 2 x ServerAliveCountMax 3%): connection lost")
  local dirs = proc.run { "sh", "-c", "ls -d " .. tmp .. "/reboot/*/" }.stdout
  local rec = assert(json.decode(T.read(dirs:match("[^\n]+") .. "result.json")))
  -- the connection dropped under a runner that may have started: not run again (ECONNLOST, issue 33)
  T.eq({ rec.ok, rec.error.code, rec.error.exit }, { false, "ECONNLOST", 3 })
  T.ok(pi:wait_ready(120), "the guest came back")
  -- the rebooted board lost /tmp: the hash check sees it and uploads again
  r = flow(pi, "rpi5.lua", { "--runner", runner, "--model", pte, "-n", "5", "--runs-dir", tmp .. "/reboot",
    "--format", "json" })
  T.eq(r.status, 0, r.stderr)
  says(r.stderr, "pushed " .. RUNNER_NAME)
  T.eq(assert(json.decode(r.stdout)).latency_ms.n, 5)
  T.eq(json.decode(T.read(dirs:match("[^\n]+") .. "result.json")).error.code, "ECONNLOST", "the failed record is kept")
end, "aarch64")

t:close()
pi:stop()

T.with_real_runner("scripts/graviton4.lua on the Graviton twin (Neoverse-N1, user ubuntu)", function(runner)
  local g = twin.start("graviton")
  print(("# the Graviton twin booted in %.1f s"):format(g.boot_s))
  local ok, err = pcall(function()
    T.match(g:sh("grep -m1 'CPU part' /proc/cpuinfo"), "0xd0c") -- Neoverse-N1
    local r = flow(g, "graviton4.lua", { "--runner", runner, "--model", pte, "-n", "10", "--counters", "basic",
      "--runs-dir", tmp .. "/runs", "--format", "json" })
    T.eq(r.status, 0, r.stderr)
    local rec = assert(json.decode(r.stdout))
    T.eq(rec.device, "graviton4"); T.match(rec.target, "^ssh://ubuntu@127%.0%.0%.1:")
    T.eq(rec.device_state.clusters[1].core, "Neoverse-N1")
    T.eq(rec.device_state.hostname, g:sh("hostname"):match("%S+"))
    T.eq(rec.latency_ms.emulated, true)
    T.ok(rec.counters.total.cycles > 0, "cycles")
  end)
  g:stop()
  if not ok then error(err, 0) end
end, "aarch64")

T.done()
