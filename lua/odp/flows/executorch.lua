--- The ExecuTorch flow: run `executor_runner` on a target (host, ssh, adb), read latency, peak memory,
-- planned buffers and outputs from what it prints and from rusage, pull the ETDump, report.
-- Written once against the target interface (lua/odp/target/*.lua).
local errors = require("odp.core.errors")
local result = require("odp.results.result")
local sys = require("odp.sys")
local shell = require("odp.target.shell")
local json = require("odp.core.json")
local device = require("odp.target.device")
local measuring = require("odp.results.measure")
local run = require("odp.run")
local tensors = require("odp.results.tensors")
local device_state = require("odp.target.device_state")
local etdump = require("odp.parse.etdump")
local executorch = require("odp.parse.executorch")
local placement = require("odp.target.placement")
local rusage = require("odp.target.rusage")
local stats = require("odp.core.stats")
local pte = require("odp.parse.pte")
local memory = require("odp.results.memory")
local memparse = require("odp.parse.memory")

local M = { name = "executorch" }

--- Options every executorch script has (cli option entries, see odp.core.options).
M.options = {
  { "runner", "The executor_runner binary (a file on this machine)", nil, "file", required = true },
  { "model", "The .pte model", nil, "file", required = true },
  { "data", "A .ptd file with the model's external weights (--data_path)", nil, "file" },
  { "num-executions", "Inferences per runner process (--num_executions)", 1, "posint", short = "n" },
  { "etdump", "Where the ETDump lands on this machine (asks the runner for one)", nil, "outfile", metavar = "FILE" },
  { "warmup", "Extra runner processes before measuring, not counted", 0, "int" },
  { "timeout", "Seconds before a runner process is killed with everything it started", 600, "number" },
  { "runs-dir", "Where each run leaves runner logs and result.json", "runs", "string", metavar = "DIR" },
  { "memory", "Memory by phase (exact peaks of load, method, first and steady inference), a 1 kHz timeline " ..
    "(memory.csv) and what holds the bytes (docs/memory.md); --no-memory: the peak RSS alone", true, "bool" },
  { "sample", "Sample the runner's CPU (HZ per second, default 4000) and join the samples with its ETDump:\n" ..
    "each op's hottest functions, cpu_profile.folded (docs/cpu-profile.md)", nil, "posint", implicit = 4000,
    metavar = "HZ" },
  { "sample-overhead", "With --sample: also run K runner processes without the sampler, interleaved with K " ..
    "sampled ones,\nand record the sampler's cost (cpu_profile.overhead; docs/cpu-profile.md)", nil, "posint",
    implicit = 5, metavar = "K" },
  { "symbols", "An unstripped copy of the runner, used for --sample's names when its build-id is the runner's",
    nil, "file" },
  { "allow-emulated", "Measure a runner built for another machine that the board runs under emulation\n" ..
    "(qemu-user through binfmt_misc); the record says emulated (refused without it)", false, "bool" },
}
-- the model's inputs and outputs as files, compared with a reference (odp.results.tensors, docs/outputs.md)
for _, opt in ipairs(tensors.options) do M.options[#M.options + 1] = opt end
-- how many measured processes: --repeat, --min-time, --max-time, --min-samples, --target-ci (odp.results.measure);
-- where and with what: --cpus, --cluster, --threads, --counters (odp.target.placement). Declared here once, so
-- `odp run` and board:profile{} (which takes these defaults) see the same options.
for _, list in ipairs({ measuring.options, require("odp.target.placement").options }) do
  for _, opt in ipairs(list) do M.options[#M.options + 1] = opt end
end

local function basename(p) return (p:match("([^/]+)$")) end

function M.validate(ctx)
  local o = ctx.opts
  if o.warmup < 0 then errors.fail("EUSAGE", "--warmup must be >= 0") end
  if o.timeout <= 0 then errors.fail("EUSAGE", "--timeout must be > 0") end
  measuring.validate(o)
  if o.sample_overhead and not o.sample then
    errors.fail("EUSAGE", "--sample-overhead measures --sample's cost: give --sample[=HZ] too")
  end
  local st = sys.stat(o.runner)
  if st.type ~= "file" then errors.fail("EUSAGE", ("runner %s is not a file"):format(o.runner)) end
  if device.kind(ctx.target_kind).runs_in_place and not st.executable then
    errors.fail("EUSAGE", ("runner %s is not executable (chmod +x %s)"):format(o.runner, o.runner))
  end
  run.check_model(o.model) -- a .pte this runner can load: ET12 identifier, not truncated, parseable
  -- the inputs against the method's signature, the reference against the model: exit 2 before any board
  ctx.io = tensors.validate(o, ctx.args)
end

-- The runner's own cause in a failure's line: its first error lines (the F line, the assert that ended it,
-- last), each bounded, so the line stays one line.
local MAX_CAUSES, MAX_CAUSE = 2, 160

local function cut(text, n) return #text > n and (text:sub(1, n - 3) .. "...") or text end

-- What odp knows that explains a runner's failure, from its lines and the model's .pte; nil when nothing.
local function explain(ctx, parsed)
  local o = ctx.opts
  local texts = {}
  for _, e in ipairs(parsed.errors or {}) do texts[#texts + 1] = e.text end
  local all = table.concat(texts, "\n")
  local info = pte.read(o.model) -- checked before the run (validate): read again only here
  local backends = {}
  for _, d in ipairs(info and pte.delegates(info) or {}) do
    if not backends[d.backend] then backends[#backends + 1], backends[d.backend] = d.backend, true end
  end
  local backend = all:match("Backend (%S+) is not registered")
  if backend and backends[backend] then
    return ("the model delegates to %s, which this runner does not register: use a runner built with that backend")
      :format(backend)
  elseif backend then
    return ("this runner does not register the backend %s"):format(backend)
  end
  if all:find("external_data_map is null", 1, true) and not o.data then
    local ptd = o.model:gsub("%.pte$", "") .. ".ptd"
    return ("the model keeps its weights in an external data file: pass --data %s"):format(sys.stat(ptd) and ptd
      or "FILE.ptd")
  end
  local missing = parsed.missing_operators or {}
  if #missing > 0 then
    return ("this runner has no kernel for %s%s: use a runner built with %s"):format(
      table.concat(missing, ", ", 1, math.min(#missing, 3)), #missing > 3 and (" and %d more"):format(#missing - 3) or "",
      #missing > 1 and "them" or "it")
  end
  for _, e in ipairs(parsed.errors or {}) do
    if e.status_name == "NotFound" and #backends > 0 then
      return ("the model delegates to %s: is it registered in this runner?"):format(table.concat(backends, ", "))
    end
  end
end

-- One line that says why a runner process failed, from its exit, its own error lines and odp's explanation.
local function failure_message(ctx, r, parsed)
  local causes, final = {}, nil
  for _, e in ipairs(parsed.errors or {}) do
    local text = e.text:gsub("%.$", "") .. (e.status_name and (" [" .. e.status_name .. "]") or "")
    if e.level == "F" then final = text break end
    if #causes < MAX_CAUSES then causes[#causes + 1] = cut(text, MAX_CAUSE) end
  end
  if final then causes[#causes + 1] = cut(final, MAX_CAUSE) end
  if #causes == 0 then
    -- no ExecuTorch error line: the first line of its own that is no info log line (the dynamic loader's
    -- "version `GLIBC_2.38' not found", the shell's "Exec format error", ...)
    for line in (r.stderr or ""):gmatch("[^\r\n]+") do
      if not line:match("^[DIW] %d%d:%d%d:") and line:match("%S") then causes[1] = cut(line, MAX_CAUSE) break end
    end
  end
  local why = #causes > 0 and table.concat(causes, "; ") or nil
  local function with_why(head)
    if not why then return head end
    local note = explain(ctx, parsed)
    return head .. ": " .. why .. (note and (" (" .. note .. ")") or "")
  end
  if r.timed_out then
    return "ERUNNER", "runner did not finish before the timeout; killed with its process group"
  elseif r.canceled then
    return "ECANCELED", "interrupted; runner killed"
  elseif r.signal then
    return "ERUNNER", with_why(("runner killed by SIG%s"):format(r.signal_name or r.signal))
  elseif r.status ~= 0 then
    if r.stderr:find("unknown command line flag 'etdump_path'", 1, true) then
      return "ERUNNER", "this runner was built without the event tracer: it has no --etdump_path; drop --etdump"
    end
    return "ERUNNER", with_why(("runner exited with status %d"):format(r.status))
  end
end

-- Runs one runner process; returns the exec result and the parsed log. sampled: with --sample, this process is
-- sampled (the measured ones are; warmups are not). pace: sees its stderr as it comes (measure.pacer).
local function run_once(ctx, t, argv, label, files, sampled, pace)
  local ui = ctx.ui
  ui:debug("%s: %s", label, table.concat(argv, " "))
  -- the logs stream to the run dir as they come (plain writes: the record, written last, is the fsync'd atomic
  -- file), so a runner that floods its output is whole on disk while the target keeps a bounded part in memory
  local sink = {}
  for _, ext in ipairs(files and { "stdout", "stderr" } or {}) do
    local f = io.open(files .. "." .. ext, "wb")
    sink[ext] = f and function(data) f:write(data) end
    sink[ext .. "_file"] = f
  end
  -- runner_log: a target whose runner logs elsewhere (Android's logcat) returns that text as r.log
  -- memory by phase for the measured processes (files: their logs' prefix), each its own timeline
  local watch = t.memory and files and { csv = t.memory.prefix .. basename(files) .. ".memory.csv",
    marks = t.memory.marks, model = t.memory.model }
  local helper_args = t.helper_args
  if sampled and t.sample_remote then
    helper_args = table.move(t.helper_args or {}, 1, #(t.helper_args or {}), 1, {})
    table.move({ "--sample", tostring(ctx.opts.sample), "--sample-out", t.sample_remote }, 1, 4, #helper_args + 1,
      helper_args)
  end
  local r, err, code = t.target:exec(argv, { cwd = t.workdir, timeout = ctx.opts.timeout, runner_log = true,
    helper_args = helper_args, counters = ctx.opts.counters, memory = watch, on_stdout = sink.stdout,
    on_stderr = pace and function(data) if sink.stderr then sink.stderr(data) end pace(data) end or sink.stderr })
  if r and watch then r.memory_csv = watch.csv end
  for _, ext in ipairs({ "stdout", "stderr" }) do
    local f = sink[ext .. "_file"]
    if f then
      f:close()
      -- all of it was kept: the file gets the text as the target returns it (a measuring report taken out)
      if r and not r[ext .. "_dropped"] then
        f = io.open(files .. "." .. ext, "wb")
        if f then f:write(r[ext]) f:close() end
      end
    end
  end
  if not r then errors.fail(code or "EIO", ("%s: %s"):format(label, err)) end
  -- the sampler could not start (the kernel refused it): nothing ran; the helper's one line says why
  local refused = r.status == 125 and r.stderr:match("odp%-rusage: (sampling[^\n]*)")
  if refused then errors.fail("ENOTSUP", refused) end
  local parse = executorch
  local parsed = parse.parse(r.log and (r.stderr .. "\n" .. r.log) or r.stderr, r.stdout)
  return r, parsed
end

-- The record's memory (odp.results.memory) from the last measured process: its phases, its timeline brought
-- into the run directory as memory.csv, the owners against the .pte's planned buffers.
local function memory_step(ctx, rec, last)
  local t = ctx.state_of
  if not t.memory then return end
  if not last.r.memory then
    rec.warnings[#rec.warnings + 1] = "memory: no memory by phase: the runner was not watched by odp's helper " ..
      "(none for this board, or it could not write its timeline: its reason is on the runner's stderr); the peak " ..
      "RSS alone"
    return
  end
  -- this process's timeline, already in the run dir (written here, or brought back on the helper's channel),
  -- becomes the run's memory.csv
  local here = ctx.run_dir .. "/memory.csv"
  local status = last.r.memory.timeline
  if status == "ok" then
    local moved, err = sys.rename(last.r.memory_csv, here)
    if not moved then rec.warnings[#rec.warnings + 1] = "memory: the timeline is missing: " .. tostring(err) end
  elseif status == "cut" then
    rec.warnings[#rec.warnings + 1] = ("memory: the timeline reached its bound (64 MiB, about 30 minutes at " ..
      "1 kHz) and was cut: %s holds its first part, the record has none"):format(basename(last.r.memory_csv))
  else
    rec.warnings[#rec.warnings + 1] = "memory: no timeline: " .. (last.r.timeline_error or
      ("the helper could not keep it (timeline=%s)"):format(tostring(status)))
  end
  local mem = memory.record(last.r, here, pte.read(ctx.opts.model), last.parsed.method)
  if mem.timeline then run.artifact(ctx, rec, "memory", here) end
  for _, w in ipairs(memory.warnings(mem, last.r.log and "logcat")) do
    rec.warnings[#rec.warnings + 1] = w
  end
  rec.memory = mem
end

--- Turns what the runs printed into the record's measurements; the samples go to runs/<id>/samples.csv.
--- Returns the per-process groups of samples (odp.results.measure), or nil.
local function measure(ctx, rec, runs, t)
  local n = ctx.opts.num_executions
  local g = measuring.log_groups(runs, n)
  if g and g.warning then rec.warnings[#rec.warnings + 1] = g.warning end
  if not g and t.etdump then
    local doc = etdump.read(t.etdump)
    local samples = doc and etdump.latency(doc) or {}
    -- the ETDump is the last process's: one group
    if #samples > 0 then g = { groups = { samples }, source = "etdump", per_iteration = false } end
  end
  if not g and n > 0 then
    g = { groups = {}, source = "wall", per_iteration = false }
    for i, x in ipairs(runs) do g.groups[i] = { x.r.wall_s * 1000 / n } end
    rec.warnings[#rec.warnings + 1] = "the runner printed no timing lines (a Release build without " ..
      "EXECUTORCH_ENABLE_LOGGING?): latency is the wall time of the whole process divided by " ..
      "--num-executions, model load included"
  end
  if g and #measuring.flatten(g.groups) > 0 then
    rec.latency_ms = measuring.latency(g, rec.warnings)
    if g.source == "log" and not g.per_iteration then rec.latency_ms.n = n * #runs end
    local path = ctx.run_dir .. "/samples.csv"
    errors.check(measuring.write_samples(path, g.groups))
    run.artifact(ctx, rec, "samples", path)
  else
    rec.latency_ms = { n = 0, source = g and g.source }
  end
  local last = runs[#runs].parsed
  local loads = {}
  for _, x in ipairs(runs) do
    if x.parsed.load_ms then loads[#loads + 1] = x.parsed.load_ms end
    -- with memory by phase, ru_maxrss counts only from the last reset of the high-water mark (docs/memory.md):
    -- the process's peak is the largest phase peak
    local mem = x.r.memory and memory.record(x.r)
    local rss = mem and mem.peak_kb or (x.r.rusage and x.r.rusage.maxrss_kb)
    if rss and rss > 0 then rec.peak_rss_kb = math.max(rec.peak_rss_kb or 0, rss) end
  end
  memory_step(ctx, rec, runs[#runs])
  if #loads > 0 then rec.load_ms = stats.summary(loads).p50 end
  rec.planned_buffers = json.array(last.planned_buffers or {})
  rec.outputs = json.array(last.outputs or {})
  rec.threads = last.threads
  rec.method = last.method
  return g
end

--- The record, with what is known before anything runs (odp.run calls record, then steps, then finish).
function M.record(ctx)
  local o, board = ctx.opts, ctx.board
  local rec = result.new { flow = M.name, device = board.device.name, target = board:target().uri,
    params = { num_executions = o.num_executions, warmup = o.warmup, ["repeat"] = measuring.fixed_count(o), min_time = o.min_time,
      max_time = o.max_time, min_samples = o.min_samples, target_ci = o.target_ci, sustained = o.sustained,
      cooldown = o.cooldown, cool_to = o.cool_to, args = #ctx.args > 0 and table.concat(ctx.args, " ") or nil,
      inputs = ctx.io and ctx.io.inputs and ctx.io.inputs.text or nil,
      -- what changes the numbers measured (the sampler costs ~12%): a series and a compare of their own
      sample = o.sample, sample_overhead = o.sample_overhead } }
  if o.memory == false then rec.params.memory = false end -- no watcher beside the runner (said only when off)
  -- both hashes cached: even a 1 KB model's sha256 cost a sixth of a host run's instructions (libcrypto's
  -- loading and digest setup, bench/README.md "Precompiled Lua")
  local hashes = o.runs_dir .. "/.sha256-cache.json"
  rec.model = result.file_info(o.model, hashes)
  rec.runner = result.file_info(o.runner, hashes)
  rec.steps = json.array({})
  local emulated = ctx.preflight and ctx.preflight.emulated
  if emulated then -- --allow-emulated: measured, but not the board's own speed
    rec.emulated = emulated
    rec.warnings[#rec.warnings + 1] = ("the runner (%s) ran under %s emulation (%s), not natively: its times "
      .. "and memory are the emulator's"):format(ctx.preflight.runner.machine, emulated,
      ctx.preflight.emulator)
  end
  return rec
end

--- The files preflight checks against the board (odp.run, for scripts declared with preflight = true).
function M.preflight_files(ctx)
  return { runner = ctx.opts.runner, model = ctx.opts.model, data = ctx.opts.data,
    allow_emulated = ctx.opts.allow_emulated }
end

-- The stage step: where the files are is the target's business (the host runs them in place; a remote target
-- pushes them into its remote dir, hash-skipped; the board remembers what it staged). -> the runner's argv,
-- and "unchanged" when a remote board had every file already.
local function stage_step(ctx, rec, t)
  local o, ui, board = ctx.opts, ctx.ui, ctx.board
  t.workdir = board:workdir(ctx.run_dir)
  local pushed_any, remote = false, false
  local function stage(path, mode, info)
    local where, pushed = board:stage(path, { mode = mode, ui = ui, sha256 = info and info.sha256 })
    if where ~= sys.realpath(path) then
      remote, pushed_any = true, pushed_any or pushed
      ui:info("%s %s", pushed and "pushed" or "unchanged", basename(path))
    end
    return where
  end
  local runner, model = stage(o.runner, tonumber("755", 8), rec.runner), stage(o.model, nil, rec.model)
  if o.memory then
    -- each measured process's timeline goes into the run dir (written there on this machine; from a board it
    -- comes back on the helper's channel with the run's answer), the record's becomes memory.csv (memory_step);
    -- absolute: this machine's helper opens it in the runner's working directory
    t.memory = { marks = memparse.mark_specs(memparse.EXECUTORCH_MARKS), model = model,
      prefix = sys.realpath(ctx.run_dir) .. "/" }
  end
  local data = o.data and stage(o.data)
  -- What the runner writes on the board for this run alone is named by it (shell.board_file_prefix: removed once
  -- fetched, by an odp that dies first at the next free-space check). --sample needs the ETDump to place its
  -- samples: one is asked for without --etdump too (the run dir keeps it).
  local prefix = t.workdir .. "/" .. shell.board_file_prefix(basename(ctx.run_dir))
  t.etdump_remote = (o.etdump or o.sample) and (prefix .. ".etdump")
  t.sample_remote = o.sample and (prefix .. ".samples")
  t.board_files = { t.etdump_remote, t.sample_remote }
  t.runner_remote = runner
  local argv = { runner, "--model_path", model, "--num_executions", tostring(o.num_executions) }
  if t.etdump_remote then table.move({ "--etdump_path", t.etdump_remote }, 1, 2, #argv + 1, argv) end
  if data then table.move({ "--data_path", data }, 1, 2, #argv + 1, argv) end
  local io = ctx.io
  if io and io.inputs then
    local files, staged = tensors.write_inputs(io.sig, io.inputs, ctx.run_dir .. "/inputs"), {}
    rec.inputs = json.array({})
    for i, f in ipairs(files) do
      rec.inputs[i] = tensors.file_entry(f, io.sig.inputs[i], ctx.run_dir)
      staged[i] = stage(f, nil, rec.inputs[i])
    end
    table.move({ "--inputs", table.concat(staged, ",") }, 1, 2, #argv + 1, argv)
  end
  if io and io.outputs then
    -- the runner writes output i to BASE-i.bin (executor_runner's --output_file), every process over the last
    t.output_base = prefix .. ".out"
    for _, out in ipairs(io.sig.outputs) do
      if out.kind == "tensor" then t.board_files[#t.board_files + 1] = ("%s-%d.bin"):format(t.output_base, out.index) end
    end
    table.move({ "--output_file", t.output_base }, 1, 2, #argv + 1, argv)
  end
  table.move(ctx.args, 1, #ctx.args, #argv + 1, argv)
  t.argv = argv
  if remote and not pushed_any then return "unchanged" end
end

-- Android's shell user may sample only with security.perf_harden off: odp turns it off the way simpleperf's
-- app_profiler.py does, and says what it found and did, in the warnings (a refusal later names
-- kernel.perf_event_paranoid) and in cpu_profile.perf_harden. -> that text, or nil off Android.
local function allow_sampling(ctx, rec, target)
  if ctx.target_kind ~= "adb" then return end
  local v = target:run("getprop security.perf_harden", 10)
  local now = v and v:match("^%s*(%S*)%s*$")
  local did
  if now == "1" then
    local ok, err = target:run("setprop security.perf_harden 0", 10)
    did = ok and "was 1: set to 0 (as simpleperf's app_profiler.py does) so that the shell user may sample; a " ..
      "reboot sets it back" or ("was 1: could not set it to 0: %s"):format(err)
  elseif now == "" then
    did = "not set on this device: left alone (the kernel's kernel.perf_event_paranoid decides)"
  elseif now then
    did = ("was %s already: left alone"):format(now)
  else
    did = "could not be read (getprop failed): left alone"
  end
  rec.warnings[#rec.warnings + 1] = "--sample: security.perf_harden " .. did
  return did
end

-- --sample-overhead=K: K runner processes without the sampler and K with it, in ABBA order (unsampled first in odd
-- pairs, sampled first in even ones, so a drift of the board over the pairs weighs on both sides alike), before
-- the measured processes (whose ETDump and samples are the ones kept). Each is the measured command, with the
-- same helper, memory watch and ETDump: only the sampler differs. Their logs stay in the run directory
-- (overhead-<i>-<un>sampled.stderr). -> the record's cpu_profile.overhead.
local function overhead_runs(ctx, rec, t)
  local o, ui, groups = ctx.opts, ctx.ui, { [false] = {}, [true] = {} }
  for i = 1, o.sample_overhead do
    for _, sampled in ipairs(i % 2 == 1 and { false, true } or { true, false }) do
      local name = ("overhead-%d-%s"):format(i, sampled and "sampled" or "unsampled")
      local label = ("sampling overhead %d/%d, %s"):format(i, o.sample_overhead, sampled and "sampled" or "unsampled")
      if not ui.quiet then ui:info("%s: %s x%d", label, basename(o.model), o.num_executions) end
      local r, parsed = run_once(ctx, t, t.argv, label, ctx.run_dir .. "/" .. name, sampled)
      for _, ext in ipairs { "stdout", "stderr" } do
        run.artifact(ctx, rec, name:gsub("-", "_") .. "_" .. ext, name .. "." .. ext)
      end
      -- its memory timeline was the cost both sides paid alike, not a result: not kept beside the run's
      if r.memory_csv and device.kind(ctx.target_kind).runs_in_place then os.remove(r.memory_csv) end
      local code, msg = failure_message(ctx, r, parsed)
      if code then errors.fail(code, label .. ": " .. msg) end
      local g = measuring.log_groups({ { r = r, parsed = parsed } }, o.num_executions)
      local list = groups[sampled]
      list[#list + 1] = g and g.groups[1] or {}
    end
  end
  return require("odp.results.cpu_profile").overhead(groups[false], groups[true]) -- lazy: start-up
end

-- The run step: the device state before, placement, the warmup and measured runner processes (t.runs).
local function run_step(ctx, rec, t)
  local o, ui, dir, target, argv = ctx.opts, ctx.ui, ctx.run_dir, t.target, t.argv
  if o.sample then t.perf_harden = allow_sampling(ctx, rec, target) end
  t.state = device_state.before(rec, target)
  placement.apply(ctx, t, rec, argv)

  for i = 1, o.warmup do
    local r, parsed = run_once(ctx, t, argv, ("warmup %d/%d"):format(i, o.warmup))
    local code, msg = failure_message(ctx, r, parsed)
    if code then
      rec.status, rec.signal = r.status, r.signal
      errors.fail(code, "warmup: " .. msg)
    end
  end
  if o.sample_overhead then t.overhead = overhead_runs(ctx, rec, t) end
  local runs = {}
  local cooler = measuring.cooler(o, target, ui)
  local stopper = measuring.stopper(o)
  local count = stopper:count()
  local samples = {} -- every iteration so far, for the stopping rule
  repeat
    local i = #runs + 1
    local label = count == 1 and "run" or count and ("run %d/%d"):format(i, count) or ("run %d"):format(i)
    if not ui.quiet then ui:info("%s: %s x%d", label, basename(o.model), o.num_executions) end
    if cooler then cooler:before(i) end
    stopper:begin()
    local logs = count == 1 and "runner" or ("run" .. i)
    -- the first process says up front what a long measurement will take
    local pace = i == 1 and not ui.quiet and measuring.pacer(o, o.num_executions, function(line)
      ui:info("%s: %s", label, line)
    end) or nil
    local r, parsed = run_once(ctx, t, argv, label, dir .. "/" .. logs, true, pace)
    for _, ext in ipairs { "stdout", "stderr" } do run.artifact(ctx, rec, logs .. "_" .. ext, logs .. "." .. ext) end
    if cooler then cooler:after(i) end
    rec.status, rec.signal = r.status, r.signal
    local code, msg = failure_message(ctx, r, parsed)
    local measured = #(parsed.iterations_ms or {})
    if r.timed_out and measured > 0 then
      -- --timeout ended a long process: the iterations it measured are the measurement, said so
      runs[#runs + 1] = { r = r, parsed = parsed }
      table.move(parsed.iterations_ms, 1, measured, #samples + 1, samples)
      rec.warnings[#rec.warnings + 1] = stopper:timed_out(#runs, samples, measured, o.num_executions, o.timeout)
      break
    end
    if code then
      runs[#runs + 1] = { r = r, parsed = parsed }
      if #runs > 1 then measure(ctx, rec, { table.unpack(runs, 1, #runs - 1) }, t) end
      errors.fail(code, msg)
    end
    runs[#runs + 1] = { r = r, parsed = parsed }
    if o.num_executions > 0 and not parsed.total_ms and #parsed.messages > 0 then
      rec.warnings[#rec.warnings + 1] = ("%s: the runner exited 0 but never said 'Model executed successfully'"):format(label)
    end
    local g = measuring.log_groups({ runs[#runs] }, o.num_executions)
    if g then table.move(g.groups[1], 1, #g.groups[1], #samples + 1, samples) end
  until stopper:done(#runs, samples)
  rec.stop = stopper.stop
  if stopper.warning then rec.warnings[#rec.warnings + 1] = stopper.warning end
  if cooler then
    rec.thermal = cooler.log
    for _, w in ipairs(cooler.warnings) do rec.warnings[#rec.warnings + 1] = w end
  end
  t.runs, t.stopper = runs, stopper
end

-- The fetch step: the ETDump the runner wrote on the board, brought here.
local function fetch_step(ctx, rec, t)
  local o = ctx.opts
  -- The run's own copy, in its run directory (named in the record with its sha256): a later run writing the
  -- same --etdump cannot change what this record shows; --etdump gets a copy of it. Judged by this run's file
  -- only: an older file at --etdump must not pass for a new one.
  local own = ctx.run_dir .. "/etdump.etdp"
  local got, perr, pcode = t.target:fetch(t.etdump_remote, own)
  -- no file on the board is the runner's doing (warned about below); anything else is a transfer failure
  if not got and pcode ~= "ENOTFOUND" then errors.check(got, perr, pcode) end
  local size = got and (sys.stat(own) or {}).size
  if got and size == 0 then
    -- a full disk lets the runner create the file and write nothing (it does not fail for it)
    local dir = t.etdump_remote:match("^(.*)/[^/]*$")
    local why = shell.space_cause(t.target, dir, 1024 * 1024, "the runner's ETDump",
      "the runner wrote an empty file")
    rec.warnings[#rec.warnings + 1] = ("ETDump lost: %s"):format(errors.text(why))
  elseif got then
    t.etdump = run.artifact(ctx, rec, "etdump", own)
    if o.etdump and o.etdump ~= own then errors.check(sys.write_file(o.etdump, errors.check(sys.read_file(own)))) end
  else
    local killed = t.stopper and t.stopper.stop and t.stopper.stop.rule == "timeout"
    rec.warnings[#rec.warnings + 1] = killed and "no ETDump was written: --timeout killed the runner before its end"
      or "no ETDump was written (a runner built without the event tracer?)"
  end
  if t.sample_remote then
    local path = ctx.run_dir .. "/cpu_profile.samples"
    errors.check(t.target:fetch(t.sample_remote, path))
    t.samples = run.artifact(ctx, rec, "cpu_profile_samples", path)
  end
end

-- The last measured process's samples joined with its ETDump: rec.cpu_profile, cpu_profile.folded.
local function profile_step(ctx, rec, t, doc)
  local prof = require("odp.results.cpu_profile") -- lazy: start-up
  local o = ctx.opts
  local bytes = errors.check(sys.read_file(t.samples))
  local p, err, code = prof.profile(bytes, doc, { runner = o.runner, runner_remote = t.runner_remote,
    symbols = o.symbols, local_modules = device.kind(ctx.target_kind).runs_in_place })
  if not p then
    rec.warnings[#rec.warnings + 1] = "cpu profile: " .. err
    return
  end
  rec.cpu_profile = p.record
  p.record.overhead = t.overhead or prof.overhead_not_measured()
  p.record.perf_harden = t.perf_harden
  for _, w in ipairs(p.warnings) do rec.warnings[#rec.warnings + 1] = w end
  if p.record.rate_hz and p.record.rate_hz < o.sample then
    rec.warnings[#rec.warnings + 1] = ("cpu profile: sampled at %d Hz, not %d: the board's " ..
      "kernel.perf_event_max_sample_rate (the kernel lowers it when its sampling interrupts take too long)")
      :format(p.record.rate_hz, o.sample)
  end
  local folded = ctx.run_dir .. "/cpu_profile.folded"
  errors.check(prof.write_folded(folded, p.folded))
  run.artifact(ctx, rec, "cpu_profile_folded", folded)
end

--- The steps, each traced in rec.steps: stage, run, fetch (with --etdump); then the measurements. Raises a
-- structured failure; odp.run turns it into the failed record.
function M.steps(ctx, rec)
  local o = ctx.opts
  local t = { target = ctx.board:target() }
  ctx.state_of = t
  run.step(rec, "stage", function() return stage_step(ctx, rec, t) end)
  run.step(rec, "run", function() return run_step(ctx, rec, t) end)
  if t.etdump_remote then run.step(rec, "fetch", function() return fetch_step(ctx, rec, t) end) end
  local kept
  if t.output_base then
    run.step(rec, "outputs", function()
      kept = tensors.fetch_outputs(ctx.io.sig, ctx.run_dir, function(i, dst)
        return t.target:fetch(("%s-%d.bin"):format(t.output_base, i), dst)
      end)
    end)
  end
  local runs, stopper, dir = t.runs, t.stopper, ctx.run_dir
  local g = measure(ctx, rec, runs, t)
  rusage.record_counters(rec, runs)
  if o.sustained and g and #g.groups == #stopper.starts then
    rec.sustained = measuring.per_minute(g.groups, stopper.starts)
    errors.check(measuring.write_per_minute(dir .. "/sustained.jsonl", rec.sustained))
    run.artifact(ctx, rec, "sustained", dir .. "/sustained.jsonl")
  end
  local doc
  if t.etdump then
    local derr
    doc, derr = etdump.read(t.etdump)
    if doc then
      rec.ops = json.array(etdump.ops(doc))
      rec.ops_summary = etdump.ops_summary(doc)
    else
      -- a runner stopped by a full disk leaves a short file: say that, not that the format is wrong
      local why = shell.space_cause(t.target, t.etdump_remote:match("^(.*)/[^/]*$"), 1024 * 1024,
        "the runner's ETDump", nil)
      rec.warnings[#rec.warnings + 1] = why and ("ETDump lost: %s"):format(errors.text(why))
        or ("ETDump: " .. derr)
    end
  end
  if t.samples then profile_step(ctx, rec, t, doc) end
  -- the kept outputs join the printed ones (the last measured process's), then the reference's gates judge them
  if kept then tensors.judge(ctx.io, rec, kept, ctx.run_dir) end
end

--- After the steps, whatever happened: the device state after the run (not after Ctrl-C: the user wants out).
function M.finish(ctx, rec, err)
  local t = ctx.state_of
  if not t or (type(err) == "table" and err.code == "ECANCELED") then return end
  -- the run's own files on the board (its copies are in the run dir by now, or lost with the failure that
  -- stopped it): left there, one set a run would fill the board's remote_dir over a lab's weeks
  local files = {}
  for _, f in pairs(t.board_files or {}) do files[#files + 1] = f end
  if #files > 0 then
    local ok, rerr = t.target:remove(files)
    if not ok then
      rec.warnings[#rec.warnings + 1] = ("this run's files are left on the board: %s"):format(errors.text(rerr))
    end
  end
  if t.state then device_state.after(rec, t.state, t.target, { cpus_used = t.cpus_used }) end
end

--- A script declaration for a target kind: `return require("odp.flows.executorch").script{...}`. odp.run
-- runs it (M.validate, then the board opened with the parsed options, preflight when asked, the steps).
---@param spec {name: string, description: string, target?: string, device?: string, preflight?: boolean} target defaults to the device's transport; preflight: check the runner and free space against the board before anything is uploaded (odp.target.preflight)
function M.script(spec)
  local dev = spec.device and device.load(spec.device) or nil
  local kind = spec.target or dev.transport
  local options = {}
  for _, list in ipairs({ M.options, device.kind(kind).options or {} }) do
    for _, opt in ipairs(list) do
      -- the device's remote_dir is the --remote-dir default (devices/vivo_x300_pro.lua: /data/local/tmp/odp)
      if opt[1] == "remote-dir" and dev and dev.remote_dir then
        local copy = {}
        for k, v in pairs(opt) do copy[k] = v end
        copy[3], opt = dev.remote_dir, copy
      end
      options[#options + 1] = opt
    end
  end
  local decl = { name = spec.name, description = spec.description, options = options, passes_args = true,
    flow = M.name, target = kind, device = dev, preflight = spec.preflight }
  -- validate needs no network and no hardware: the board is opened by run, after it
  decl.validate = function(ctx)
    ctx.target_kind = kind
    M.validate(ctx)
    ctx.validated = true
  end
  decl.run = function(ctx) return run.once(ctx, decl) end
  return decl
end


--- The verbs this flow adds to its boards (odp.run.board finds them through the flow registry):
-- board:profile{runner=, model=, n=, args=, ...} runs once through odp.run.point.
M.board_verbs = {
  profile = function(board, opts)
    for _, k in ipairs({ "runner", "model" }) do
      if not opts[k] then errors.fail("EUSAGE", ("board:profile{%s = FILE, ...}: %s is required"):format(k, k)) end
    end
    return run.point(board, nil, opts, opts.args)
  end,
}

return M
