--- The ExecuTorch flow, its run step: the device state before, placement, then the warmup, sampling-overhead and
-- measured runner processes, each one exec on the target, under the stopping rule (odp.results.measure).
local errors = require("odp.core.errors")
local executorch = require("odp.parse.executorch")
local device = require("odp.target.device")
local device_state = require("odp.target.device_state")
local placement = require("odp.target.placement")
local measuring = require("odp.results.measure")
local run = require("odp.run")
local failure = require("odp.flows.executorch.failure")
local measure = require("odp.flows.executorch.measure")
local llm = require("odp.flows.executorch.llm")
local headtail = require("odp.core.headtail")

local M = {}

--- Bytes of a runner process's stdout (and of its stderr) the target keeps in memory (the rest streams to the
--- run dir's files), and the head and the tail odp keeps of each to read: odp's memory stays bounded
--- whatever the runner prints.
M.CAPTURE_BYTES = 1 << 20
M.KEEP_BYTES = 2 << 20

local function basename(p) return (p:match("([^/]+)$")) end

-- What a runner process printed beyond what odp keeps: rec.output_cut (the last such process's, per stream:
-- {bytes, kept, file}) and a warning naming the file that has all of it.
local function note_cut(rec, r, label)
  if not r.output_cut then return end
  rec.output_cut = r.output_cut
  for _, ext in ipairs({ "stdout", "stderr" }) do
    local c = r.output_cut[ext]
    if c then
      rec.warnings[#rec.warnings + 1] = ("%s: the runner printed %d bytes on %s; odp read its first and last %d " ..
        "and its timing lines (%d bytes were not read); all of it is in %s"):format(label, c.bytes, ext,
        M.KEEP_BYTES, c.bytes - c.kept, c.file)
    end
  end
end

-- Runs one runner process; returns the exec result and the parsed log. sampled: with --sample, this process is
-- sampled (the measured ones are; warmups are not). pace: sees its stderr as it comes (measure.pacer).
local function run_once(ctx, t, argv, label, files, sampled, pace)
  local ui = ctx.ui
  ui:debug("%s: %s", label, table.concat(argv, " "))
  -- the logs stream to the run dir as they come (plain writes: the record, written last, is the fsync'd atomic
  -- file), so a runner that floods its output is whole on disk while the target keeps a bounded part in memory
  -- odp keeps a bounded head and tail of each (KEEP_BYTES, the target a bounded head: CAPTURE_BYTES) and
  -- parses those, so a runner printing 100 MB still has its last timing lines read and odp stays small
  local sink, keep = {}, {}
  for _, ext in ipairs({ "stdout", "stderr" }) do
    local f = files and io.open(files .. "." .. ext, "wb")
    local k = headtail.new { head = M.KEEP_BYTES, tail = M.KEEP_BYTES, wanted = executorch.TIMING_LINE }
    keep[ext] = k
    sink[ext] = function(data)
      if f then f:write(data) end
      k:add(data)
    end
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
    on_stderr = pace and function(data) if sink.stderr then sink.stderr(data) end pace(data) end or sink.stderr,
    state = t.state_ask, finish = t.finish_in_run, capture_limit = M.CAPTURE_BYTES })
  if r and watch then r.memory_csv = watch.csv end
  -- the last process's end on the board (its files removed, the leases), when its answer brought it
  t.finished = r and r.finish
  if r and r.state_text then -- the device state came with the answer: before the first process, after the last
    t.state = t.state or device_state.from_text(r.state_text.before)
    t.state_after = device_state.from_text(r.state_text.after)
  end
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
  -- the process's own wall time (odp-rusage's), apart from what odp spent around it (record.timings)
  if r.wall_s then ctx.clock:inside("runner_processes", r.wall_s * 1000) end
  -- the sampler could not start (the kernel refused it): nothing ran; the helper's one line says why
  local refused = r.status == 125 and r.stderr:match("odp%-rusage: (sampling[^\n]*)")
  if refused then errors.fail("ENOTSUP", refused) end
  -- a stream the target cut: its kept head and tail are what is read, and what was cut is said
  for _, ext in ipairs({ "stdout", "stderr" }) do
    if r[ext .. "_dropped"] then
      local text, cut = keep[ext]:text()
      r[ext] = text
      if cut then
        r.output_cut = r.output_cut or {}
        r.output_cut[ext] = { bytes = cut.bytes, kept = cut.kept, file = files and (basename(files) .. "." .. ext) }
      end
    end
  end
  local parsed = executorch.parse(r.log and (r.stderr .. "\n" .. r.log) or r.stderr, r.stdout)
  if ctx.opts.llm then parsed.llm = llm.process(ctx, t, r, files) end
  return r, parsed
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
      local code, msg = failure.message(ctx, r, parsed, t.target)
      if code then errors.fail(code, label .. ": " .. msg) end
      local g = measuring.log_groups({ { r = r, parsed = parsed } }, o.num_executions)
      local list = groups[sampled]
      list[#list + 1] = g and g.groups[1] or {}
    end
  end
  return require("odp.results.cpu_profile").overhead(groups[false], groups[true]) -- lazy: start-up
end

-- The run step: the device state before, placement, the warmup and measured runner processes (t.runs).
function M.step(ctx, rec, t)
  local o, ui, dir, target, argv = ctx.opts, ctx.ui, ctx.run_dir, t.target, t.argv
  if o.sample then t.perf_harden = allow_sampling(ctx, rec, target) end
  -- the device state before and after comes back with the runner processes' answers where the board's helper
  -- runs (a point is one request); placement needs it before the first of them
  if not (o.cpus or o.cluster) and target.state_in_exec and target:state_in_exec() then
    t.state_ask = device_state.exec_request()
  else
    t.state = device_state.before(rec, target)
  end
  placement.apply(ctx, t, rec, argv)

  for i = 1, o.warmup do
    local r, parsed = run_once(ctx, t, argv, ("warmup %d/%d"):format(i, o.warmup))
    local code, msg = failure.message(ctx, r, parsed, t.target)
    if code then
      rec.status, rec.signal, t.failed = r.status, r.signal, r
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
    note_cut(rec, r, label)
    if cooler then cooler:after(i) end
    rec.status, rec.signal = r.status, r.signal
    local code, msg = failure.message(ctx, r, parsed, t.target)
    local measured = #(parsed.iterations_ms or {})
    if r.timed_out and measured > 0 then
      -- --timeout ended a long process: the iterations it measured are the measurement, said so
      runs[#runs + 1] = { r = r, parsed = parsed }
      table.move(parsed.iterations_ms, 1, measured, #samples + 1, samples)
      rec.warnings[#rec.warnings + 1] = stopper:timed_out(#runs, samples, measured, o.num_executions, o.timeout)
      break
    end
    if code then
      t.failed = r -- what a crash left is looked for after it (odp.flows.executorch: after_crash)
      runs[#runs + 1] = { r = r, parsed = parsed }
      if #runs > 1 then measure.measure(ctx, rec, { table.unpack(runs, 1, #runs - 1) }, t) end
      errors.fail(code, msg)
    end
    runs[#runs + 1] = { r = r, parsed = parsed }
    if o.num_executions > 0 and not parsed.total_ms and #parsed.messages > 0 and not o.llm then
      rec.warnings[#rec.warnings + 1] = ("%s: the runner exited 0 but never said 'Model executed successfully'"):format(label)
    end
    local g = o.llm and llm.groups({ runs[#runs] }) or measuring.log_groups({ runs[#runs] }, o.num_executions)
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

return M
