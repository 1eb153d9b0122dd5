-- The Android flow end to end: odp run scripts/x300pro.lua --adb tcp:... against the adb device emulator,
-- with the test runner program (tests/c/fake_runner.c) on the emulated device. Run by test_odp_adb.sh
-- (ADBEMU_PORT, ADBEMU_ROOT = the emulator's sandbox, its logcat stand-in installed).
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local fake = build .. "/tests/fake_runner"
local android_runner = root .. "/tests/adb/android_runner.sh"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local etd = root .. "/tests/fixtures/etdump/add_n10.etdump"
local sbx = assert(os.getenv("ADBEMU_ROOT"))
-- Where odp keeps a file it staged on the device: its bytes by sha256 (docs/devices.md "A shared board").
local function staged(path) return sbx .. "/data/local/tmp/odp/.odp/blobs/" .. sys.sha256_file(path) end
local port = assert(os.getenv("ADBEMU_PORT"))
local dir = T.tmpdir()

-- the device side: the runner program and the ETDump it copies
os.execute(("mkdir -p '%s/data/local/tmp/bin' '%s/data/local/tmp/fixtures' && cp '%s' '%s/data/local/tmp/bin/' && cp '%s' '%s/data/local/tmp/fixtures/'")
  :format(sbx, sbx, fake, sbx, etd, sbx))

local function odp_run(args, timeout)
  local argv = { odp, "run", root .. "/scripts/x300pro.lua", "--adb", "tcp:127.0.0.1:" .. port,
    "--runs-dir", dir .. "/runs" }
  table.move(args, 1, #args, #argv + 1, argv)
  return assert(proc.run { argv = argv, cwd = dir, timeout = timeout or 120 })
end
local function json_run(args)
  local r = odp_run(args)
  local rec, err = json.decode(r.stdout)
  if not rec then error(("not JSON (%s); stdout:\n%s\nstderr:\n%s"):format(err, r.stdout, r.stderr), 0) end
  return rec, r
end

T.test("logcat runner: pushed, run, log read from logcat, rusage, ETDump pulled", function()
  local rec, r = json_run({ "--runner", android_runner, "--model", add, "-n", "10", "--etdump", dir .. "/p.etdump",
    "--format", "json" })
  T.eq(r.status, 0, "exit code; stderr: " .. r.stderr)
  -- its log went to logcat: the helper saw no phase line, and the record says why
  T.eq(rec.memory.phases[1].name, "run")
  T.match(table.concat(rec.warnings, "\n"), "the runner logs to logcat, which odp's helper does not see")
  T.eq(rec.ok, true)
  T.eq(rec.device, "vivo_x300_pro")
  T.eq(rec.target, "adb://127.0.0.1:" .. port)
  T.eq(rec.latency_ms.source, "log")
  T.eq(rec.latency_ms.n, 10)
  T.ok(rec.peak_rss_kb and rec.peak_rss_kb > 500, "peak RSS from time -v on the device")
  T.eq(rec.planned_buffers, { 32 })
  T.eq(rec.outputs[1].values, { 2, 2, 2 })
  T.eq(T.read(dir .. "/p.etdump"), T.read(etd), "ETDump pulled")
  T.eq(sys.sha256_file(staged(add)), sys.sha256_file(add), "model on the device")
  local st = assert(sys.stat(staged(android_runner)))
  T.ok(st.executable, "runner pushed with mode 0755")
  T.eq(T.read(rec.artifacts.run_dir .. "/runner.stderr"), "", "nothing on stderr: the log went to logcat")
end)

T.test("second run: runner and model unchanged, not pushed again", function()
  local before = assert(sys.stat(staged(add))).mtime
  local rec, r = json_run({ "--runner", android_runner, "--model", add, "-n", "3", "--format", "json" })
  T.eq(rec.ok, true)
  T.match(r.stderr, "unchanged add_arduino.pte")
  T.eq(assert(sys.stat(staged(add))).mtime, before)
  T.eq(rec.latency_ms.n, 3)
end)

T.test("POSIX-log runner on a device without logcat: log lines from stderr", function()
  os.rename(sbx .. "/system/bin/logcat", sbx .. "/system/bin/logcat.off")
  local rec, r = json_run({ "--runner", fake, "--model", add, "-n", "5", "--format", "json" })
  os.rename(sbx .. "/system/bin/logcat.off", sbx .. "/system/bin/logcat")
  T.eq(r.status, 0, "exit code; stderr: " .. r.stderr)
  T.eq(rec.ok, true)
  T.eq(rec.latency_ms.source, "log")
  T.eq(rec.latency_ms.n, 5)
  T.match(T.read(rec.artifacts.run_dir .. "/runner.stderr"), "Model executed successfully 5 time")
end)

T.test("a runner that aborts: a failed record, exit 1, the model stays on the device", function()
  local rec, r = json_run({ "--runner", fake, "--model", add, "-n", "2", "--format", "json", "--", "--fake_mode=abort" })
  T.eq(r.status, 1)
  T.eq(rec.ok, false)
  T.ok(rec.error and rec.error.code == "ERUNNER", "error code ERUNNER (the runner failed, not the transport)")
  T.ok(sys.stat(staged(add)), "nothing deleted")
end)

T.test("peak RSS through odp-rusage on the device: the program's own VmHWM for 0.5/4/50/200 MB", function()
  local t = assert(require("odp.target.adb").new { adb = "tcp:127.0.0.1:" .. port })
  os.execute(("cp '%s/tests/rss_touch' '%s/data/local/tmp/bin/'"):format(build, sbx))
  T.eq(t:rusage_method(), "odp-rusage")
  for _, mb in ipairs { 0.5, 4, 50, 200 } do
    local r = assert(t:exec({ "/data/local/tmp/bin/rss_touch", tostring(mb) }, { timeout = 60 }))
    T.eq(r.status, 0, "rss_touch status; stderr: " .. r.stderr)
    local own = assert(tonumber(r.stdout:match("VmHWM_kb=(%d+)")), r.stdout)
    local got, tol = r.rusage and r.rusage.maxrss_kb, math.max(own * 0.02, 256)
    T.ok(got and math.abs(got - own) <= tol, ("%s MB: odp says %s kB, the program's own VmHWM is %d kB"):format(mb, got, own))
  end
  t:close()
end)

T.test("memory by phase through the helper on the device: each phase's peak is mem_phases' known allocation", function()
  local memparse = require("odp.parse.memory")
  local t = assert(require("odp.target.adb").new { adb = "tcp:127.0.0.1:" .. port })
  os.execute(("cp '%s/tests/mem_phases' '%s/data/local/tmp/bin/'"):format(build, sbx))
  local csv = dir .. "/mem.csv" -- on this machine: the timeline comes back in the helper's answer
  local r = assert(t:exec({ "/data/local/tmp/bin/mem_phases", "4" }, { timeout = 120,
    memory = { csv = csv, marks = memparse.mark_specs(memparse.EXECUTORCH_MARKS) } }))
  T.eq(r.status, 0, "stderr: " .. r.stderr)
  T.ok(r.memory, "the helper's memory report")
  T.eq(r.memory.clear_refs, "ok", "the shell user resets its own runner's mark")
  local phases = memparse.phases(r.memory, r.rusage.maxrss_kb, r.wall_s * 1000)
  local b = assert(tonumber(r.stdout:match("baseline_kb=(%d+)")))
  local want = { load = 8, method = 32, first = 48, steady = 20, teardown = 20 }
  T.eq(#phases, 5)
  for _, p in ipairs(phases) do
    T.ok(math.abs(p.peak_kb - (b + want[p.name] * 1024)) <= 1024, ("%s: %d kB, known %d kB"):format(p.name, p.peak_kb,
      b + want[p.name] * 1024))
  end
  T.eq(r.memory.timeline, "ok")
  local text = T.read(csv)
  T.match(text, "^t_ms,rss_kb,anon_kb,file_kb\n")
  T.eq(select(2, text:gsub("\n", "")) - 1, r.memory.samples, "every sample the helper took is a line")
  local find = io.popen("find '" .. sbx .. "/data/local/tmp' -name '*.csv'")
  T.eq(find:read("a"), "", "no timeline file on the device")
  find:close()
  t:close()
end)

T.with_real_runner("real runner on the device: --target-ci 5 stops on its CI, samples.csv, first_ms per process", function(runner)
  local rec, r = json_run({ "--runner", runner, "--model", add, "-n", "10", "--target-ci", "5", "--max-time", "60",
    "--format", "json" })
  T.eq(r.status, 0, "exit code; stderr: " .. r.stderr)
  T.eq(rec.stop.rule, "target_ci"); T.eq(rec.stop.met, true)
  T.eq(#rec.latency_ms.first_ms, rec.stop.processes)
  T.eq(#assert(require("odp.results.measure").read_samples((require("odp.results.result").artifact(rec, "samples")))), rec.stop.processes)
end)

T.test("--cool-to on the device: thermal zones and dumpsys battery read, before/after in the record; a hot zone times out", function()
  os.execute(("mkdir -p '%s/sys/class/thermal/thermal_zone0' && echo 30000 > '%s/sys/class/thermal/thermal_zone0/temp'")
    :format(sbx, sbx))
  local dumpsys = sbx .. "/system/bin/dumpsys"
  T.write(dumpsys, "#!/bin/sh\n[ \"$1\" = battery ] && printf 'Current Battery State:\\n  temperature: 312\\n'\nexit 0\n")
  os.execute("chmod 755 '" .. dumpsys .. "'")
  local rec, r = json_run({ "--runner", fake, "--model", add, "-n", "2", "--repeat", "2", "--cool-to", "45", "--format", "json" })
  T.eq(r.status, 0, "exit code; stderr: " .. r.stderr)
  T.eq(#rec.thermal, 2)
  T.eq(rec.thermal[1].before_c, 31.2, "the battery is the hottest"); T.eq(rec.thermal[2].after_c, 31.2)
  os.execute(("echo 80000 > '%s/sys/class/thermal/thermal_zone0/temp'"):format(sbx))
  rec, r = json_run({ "--runner", fake, "--model", add, "-n", "2", "--cool-to", "45", "--cool-timeout", "0.5", "--format", "json" })
  T.eq(r.status, 0, "exit code; stderr: " .. r.stderr)
  T.eq(rec.thermal[1].before_c, 80.0)
  T.match(table.concat(rec.warnings, "\n"), "thermal_zone0 still at 80%.0 C after %-%-cool%-timeout 0%.5s")
  os.execute(("rm -rf '%s/sys' '%s'"):format(sbx, dumpsys))
end)

T.with_real_runner("--sample over adb: the pushed helper samples the real runner; security.perf_harden turned off " ..
  "and said so", function(runner)
  -- getprop/setprop stand-ins in the emulated device's /system/bin: perf_harden starts at 1; setprop is logged
  -- (the stand-ins run on the device: they name its paths, /data/local/tmp here)
  local getprop, setprop, log = sbx .. "/system/bin/getprop", sbx .. "/system/bin/setprop", sbx .. "/data/local/tmp/setprop.log"
  T.write(getprop, "#!/bin/sh\n[ \"$1\" = security.perf_harden ] && { cat /data/local/tmp/harden 2>/dev/null || echo 1; }\nexit 0\n")
  T.write(setprop, "#!/bin/sh\necho \"$@\" >> /data/local/tmp/setprop.log\necho \"$2\" > /data/local/tmp/harden\n")
  os.execute(("chmod 755 '%s' '%s'"):format(getprop, setprop))
  local mlp = root .. "/tests/fixtures/pte/mlp.pte"
  local rec, r = json_run({ "--runner", runner, "--model", mlp, "-n", "30", "--sample", "--sample-overhead=3",
    "--format", "json" })
  local set = io.open(log) and T.read(log)
  os.execute(("rm -f '%s' '%s' '%s' '%s/data/local/tmp/harden'"):format(getprop, setprop, log, sbx))
  T.eq(set, "security.perf_harden 0\n", "setprop called once, as simpleperf's tooling does")
  T.eq(r.status, 0, "exit code; stderr: " .. r.stderr)
  local cp = rec.cpu_profile
  T.ok(cp and cp.samples.in_execute > 100, "samples in execute")
  T.ok(cp.attributed >= 0.95, ("attributed %.3f"):format(cp.attributed))
  T.match(table.concat(rec.warnings, "\n"), "%-%-sample: security%.perf_harden was 1: set to 0 %(as simpleperf's")
  T.match(cp.perf_harden, "^was 1: set to 0", "the record says what was done to security.perf_harden")
  -- the sampler's cost on the device: 3 processes a side, each one's 30 iterations
  T.eq({ cp.overhead.processes, cp.overhead.iterations.sampled, cp.overhead.iterations.unsampled }, { 3, 90, 90 })
  T.ok(cp.overhead.state == "measured" or cp.overhead.state == "undecided", "overhead: " .. cp.overhead.state)
  T.eq(rec.artifacts.cpu_profile_folded.file, "cpu_profile.folded", "cpu_profile.folded in the run directory")
  T.ok(sys.stat(rec.artifacts.run_dir .. "/cpu_profile.folded"), "and there")
end)

T.test("--sample over adb, the kernel still refusing (security.perf_harden already 0): exit 3, one line naming " ..
  "kernel.perf_event_paranoid and security.perf_harden", function()
  -- a second emulated device whose programs get EACCES from perf_event_open (odp-rusage's ODP_RUSAGE_PERF_DENY,
  -- inherited from the emulator: the kernels here let everyone sample their own programs, so a paranoid 3
  -- kernel's refusal is made by the helper itself); getprop says perf_harden is 0 already
  local emu = assert(os.getenv("ADBEMU_BIN"), "test_odp_adb.sh passes the emulator as ADBEMU_BIN")
  local sbx2, pf = dir .. "/deny-device", dir .. "/deny-port"
  os.execute(("mkdir -p '%s/system/bin' '%s/data/local/tmp/bin'"):format(sbx2, sbx2))
  T.write(sbx2 .. "/system/bin/getprop", "#!/bin/sh\n[ \"$1\" = security.perf_harden ] && echo 0\nexit 0\n")
  os.execute(("chmod 755 '%s/system/bin/getprop' && cp '%s' '%s/data/local/tmp/bin/'"):format(sbx2, fake, sbx2))
  local sshd = require("sshd") -- its with_background: a process for the length of a function, stopped by PID
  sshd.with_background(("env ODP_RUSAGE_PERF_DENY=1 '%s' --root '%s' --port 0 --port-file '%s'"):format(emu, sbx2, pf),
    function()
      T.ok(sshd.wait_for(function() return (io.open(pf) or { read = function() end }):read("a") end, 30),
        "the second emulator is up")
      local deny_port = T.read(pf):match("%d+")
      local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/x300pro.lua", "--adb", "tcp:127.0.0.1:" ..
        deny_port, "--runs-dir", dir .. "/deny-runs", "--runner", fake, "--model", add, "-n", "2", "--sample",
        "--format", "json" }, cwd = dir, timeout = 120 })
      T.eq(r.status, 3, "exit 3; stderr: " .. r.stderr)
      local rec = assert(json.decode(r.stdout))
      T.eq(rec.ok, false)
      -- the failure's one line (the terminal report's FAIL line, the record's error)
      T.match(rec.error.message, "^sampling refused by the kernel: kernel%.perf_event_paranoid is %-?%d+ " ..
        "%(/proc/sys/kernel/perf_event_paranoid; [^\n]*setprop security%.perf_harden 0`%)$")
      T.match(table.concat(rec.warnings, "\n"), "%-%-sample: security%.perf_harden was 0 already: left alone")
      T.eq(rec.error.code, "ENOTSUP")
      T.eq(rec.cpu_profile, nil, "no profile made up")
    end)
end)

T.with_real_llm("--llm on the device: every token's time from stdout, read and timed by the helper there", function(p)
  -- the aarch64 llama_main under qemu-user on the emulated device: ~25 ms a token, a phone's pace (the x86 one's
  -- 1 ms tokens are read two at a time by a helper that shares 2 busy CPUs)
  T.binfmt_aarch64() -- not left to another suite's registration
  local rec, r = json_run({ "--llm", "--runner", p.runner, "--allow-emulated", "--model", p.model,
    "--tokenizer", p.tokenizer, "--prompt", "Once upon a time", "--max-new-tokens", "12", "-n", "4",
    "--token-times", "stdout", "--format", "json" })
  T.eq(r.status, 0, r.stderr)
  T.eq(rec.ok, true)
  T.match(rec.target, "^adb://")
  T.eq(rec.llm.generated_tokens, 11)
  local dumps = {}
  for i = 1, 4 do dumps[i] = ("%s/run%d.etdump"):format(rec.artifacts.run_dir, i) end
  require("llm_oracle").check_record(T, rec, 4, dumps, "adb", true)
end, "aarch64")

T.test("no device at that address: exit 3, one line naming the address once", function()
  local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/x300pro.lua", "--adb", "tcp:127.0.0.1:1",
    "--runner", fake, "--model", add, "--runs-dir", dir .. "/runs", "--format", "json" }, cwd = dir, timeout = 60 })
  T.eq(r.status, 3)
  T.eq(r.stderr, "odp: cannot connect to 127.0.0.1 port 1: Connection refused\n")
end)

T.test("a bad --adb: one line, exit 2", function()
  local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/x300pro.lua", "--adb", "usb:1", "--runner", fake,
    "--model", add, "--runs-dir", dir .. "/runs" }, timeout = 30 })
  T.eq(r.status, 2)
  T.eq(r.stderr, "odp: --adb must be auto, server, usb or tcp:HOST:PORT, not 'usb:1'\n")
end)

T.with_real_runner("device state over adb: the recorded Pixel 8 tree, getprop and dumpsys, in the record", function(runner)
  os.execute(("rm -rf '%s/data/local/tmp/state' && mkdir -p '%s/data/local/tmp/state' && cp -R '%s/tests/fixtures/device_state/pixel8' '%s/data/local/tmp/state/'")
    :format(sbx, sbx, root, sbx))
  local argv = { odp, "run", root .. "/scripts/x300pro.lua", "--adb", "tcp:127.0.0.1:" .. port, "--runs-dir",
    dir .. "/runs", "--runner", runner, "--model", add, "-n", "2", "--format", "json" }
  local r = assert(proc.run { argv = argv, cwd = dir, timeout = 120,
    env = { ODP_STATE_ROOT = "/data/local/tmp/state/pixel8" } })
  T.eq(r.status, 0, r.stderr)
  local d = assert(json.decode(r.stdout)).device_state
  T.eq({ d.android.product_model, d.android.build_version_sdk, d.cpus_online }, { "Pixel 8", "34", 9 })
  T.eq(d.cluster_basis, "cpuinfo_max_freq")
  local names = {}
  for i, c in ipairs(d.clusters) do names[i] = c.name .. " " .. c.cpus .. " " .. c.core end
  T.eq(names, { "little 0-3 Cortex-A510", "mid 4-7 Cortex-A715", "big 8 Cortex-X3" })
  T.eq({ d.before.thermal_status, d.after.thermal_status, d.before.battery.level_pct }, { 0, 0, 84 })
  T.ok(d.missing and #d.missing > 0, "ro.soc.model and thermal zones are not in the recording")
  -- placement through the pushed helper on the (emulated) device's real CPUs
  argv[#argv + 1] = "--cpus"
  argv[#argv + 1] = "0"
  r = assert(proc.run { argv = argv, cwd = dir, timeout = 120 })
  T.eq(r.status, 0, r.stderr .. r.stdout)
  local rec = assert(json.decode(r.stdout))
  T.eq({ rec.params.cpus, rec.device_state.cpus_used, rec.ok }, { "0", "0", true })
end)

T.test("--help lists the adb options", function()
  local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/x300pro.lua", "--help" }, timeout = 30 })
  for _, o in ipairs { "--adb", "--serial", "--remote%-dir", "--auth%-timeout" } do T.match(r.stdout, o) end
end)
-- Same inputs, outputs compared (issue 31): the real executor_runner on the emulated device (it runs programs of
-- this machine) gets odp's random inputs, pushed hash-skipped like the model, writes its outputs there, odp
-- pulls them and compares them with this machine's run of the same inputs.
T.with_real_runner("--inputs random:1 --outputs over adb: inputs pushed once, outputs pulled, equal to this machine's", function(runner)
  os.execute(("cp '%s' '%s/data/local/tmp/bin/executor_runner'"):format(runner, sbx))
  local wrapper = dir .. "/real_runner.sh"
  T.write(wrapper, '#!/bin/sh\nexec /data/local/tmp/bin/executor_runner "$@"\n')
  sys.chmod(wrapper, tonumber("755", 8))
  local h = assert(proc.run { argv = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", add,
    "--inputs", "random:1", "--outputs", "--runs-dir", dir .. "/host-runs", "--format", "json", "--no-history" },
    cwd = dir, timeout = 120 })
  T.eq(h.status, 0, h.stderr)
  local href = json.decode(h.stdout).artifacts.run_dir
  local args = { "--runner", wrapper, "--model", add, "--inputs", "random:1", "--reference", href, "--max-abs-err", "0",
    "--format", "json" }
  local rec, r = json_run(args)
  T.eq(r.status, 0, r.stderr)
  T.match(r.stderr, "pushed input%-0%.bin")
  T.eq(sys.sha256_file(sbx .. "/data/local/tmp/odp/.odp/blobs/" .. rec.inputs[1].sha256), rec.inputs[1].sha256,
    "odp's input on the device")
  local e = rec.reference.outputs[1]
  T.eq({ e.identical, e.equal, e.n }, { true, 3, 3 })
  T.eq(rec.outputs[1].data.sha256, sys.sha256_file(href .. "/outputs/output-0.bin"))
  local _, r2 = json_run(args)
  T.match(r2.stderr, "unchanged input%-0%.bin", "the same input bytes are not pushed again")
end)

T.with_real_llm("--llm over adb: llama_main on the device, tokens and every token's latency, its ETDump per process",
  function(p)
    local rec, r = json_run({ "--llm", "--runner", p.runner, "--model", p.model, "--tokenizer", p.tokenizer,
      "--prompt", "Once upon a time", "--max-new-tokens", "5", "-n", "2", "--format", "json" })
    T.eq(r.status, 0, r.stderr)
    T.eq(rec.ok, true)
    T.match(rec.target, "^adb")
    T.eq(rec.llm.generated_tokens, 4)
    T.eq(rec.latency_ms.n, 2 * 4)
    local doc = assert(require("odp.parse.etdump").read(rec.artifacts.run_dir .. "/" .. rec.artifacts.etdump.file))
    T.eq(#require("odp.parse.llm").forwards(doc), rec.llm.prompt_tokens + rec.llm.generated_tokens)
    T.eq(sys.sha256_file(staged(p.tokenizer)), sys.sha256_file(p.tokenizer), "tokenizer staged")
    -- a runner killed by SIGKILL on the device: the device's log read through adb (this emulator's logcat stand-in
    -- has no event buffer and no lmkd: the line says what it found, never a killer it did not see)
    T.write(dir .. "/killed.sh", "#!/bin/sh\nkill -KILL $$\n")
    assert(sys.chmod(dir .. "/killed.sh", tonumber("755", 8)))
    rec = json_run({ "--llm", "--runner", dir .. "/killed.sh", "--model", p.model, "--tokenizer", p.tokenizer,
      "--prompt", "hi", "--max-new-tokens", "4", "--format", "json" })
    T.eq(rec.ok, false)
    T.match(rec.error.message, "^runner killed by SIGKILL %(not odp's timeout; the board's (%a+) ")
  end)

-- Ctrl-C at many moments of an adb run (issue 39: an interrupted adb exec was EIO, the connection given up): the
-- delays are spread from odp's start to the runner's on the device, then one with the runner running. Each
-- ends with 130, one line naming the step, a record (once there is one) that says ECANCELED, no runner left.
T.test("SIGINT at many moments of an adb run (preflight, stage, run): exit 130, one line, ECANCELED, no runner left", function()
  local bg = require("bgjob")
  local name = "runner_sig_" .. sys.getpid()
  local runner = dir .. "/" .. name
  assert(proc.run { argv = { "cp", fake, runner }, timeout = 10 }.ok)
  -- the runner as the device runs it (the bracket keeps pgrep's own shell, and odp's arguments, out of it)
  local function running() return bg.sh("pgrep -f " .. bg.quote("^[/]data/local/tmp/odp/[.]odp/runs/[^/]*/" .. name .. " ")).stdout:match("%d+") end
  local n = 0
  local function start()
    n = n + 1
    local jd = dir .. "/sig" .. n
    assert(sys.mkdir_p(jd))
    local job = bg.start({ odp, "run", root .. "/scripts/x300pro.lua", "--adb", "tcp:127.0.0.1:" .. port,
      "--runner", runner, "--model", add, "--runs-dir", jd .. "/runs", "-q", "--", "--fake_mode=hang" }, jd)
    job.runs = jd .. "/runs"
    return job
  end
  local function check(job, what)
    local status, err = job:status(60), job:stderr()
    T.eq(status, 130, what .. ": exit; stderr:\n" .. err)
    T.match(err, "^odp: ECANCELED: %a+: [^\n]*interrupted[^\n]*\n$", what .. ": one line naming the step")
    -- the run's directory (the runs dir also holds odp's .sha256-cache.json)
    local runs = {}
    for _, d in ipairs(sys.readdir(job.runs) or {}) do
      if sys.stat(job.runs .. "/" .. d .. "/result.json") then runs[#runs + 1] = d end
    end
    if runs[1] then
      local rec = assert(json.decode(T.read(job.runs .. "/" .. runs[1] .. "/result.json")))
      T.eq({ rec.ok, rec.error.code, rec.error.exit }, { false, "ECANCELED", 130 }, what .. ": the record")
    end
    bg.wait_until(what .. ": no runner left on the device", 10, function() return not running() end)
    return err
  end
  -- how long the run takes to start the runner on the device
  local t0, job = sys.now(), start()
  bg.wait_until("the runner on the device", 60, running)
  local until_run = sys.now() - t0
  job:kill("INT")
  T.match(check(job, "runner running"), "^odp: ECANCELED: run: interrupted; runner killed\n$")
  for i = 0, 7 do
    local delay = until_run * i / 8
    job = start()
    sys.sleep(delay)
    job:kill("INT")
    check(job, ("after %.2f s"):format(delay))
  end
end)

T.done()
