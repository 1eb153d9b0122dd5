--- The ExecuTorch flow: run `executor_runner` on a target (host, ssh, adb), read latency, peak memory,
-- planned buffers and outputs from what it prints and from rusage, pull the ETDump, report.
-- Written once against the target interface (lua/odp/target/*.lua).
local errors = require("odp.core.errors")
local result = require("odp.results.result")
local sys = require("odp.sys")
local json = require("odp.core.json")
local measuring = require("odp.results.measure")
local run = require("odp.run")

local M = { name = "executorch" }

--- Options every executorch script has (cli option entries, see odp.core.options).
M.options = {
  { "runner", "The executor_runner binary (a file on this machine)", nil, "file", required = true },
  { "model", "The .pte model", nil, "file", required = true },
  { "data", "A .ptd file with the model's external weights (--data_path)", nil, "file" },
  { "num-executions", "Inferences per runner process (--num_executions)", 1, "posint", short = "n" },
  { "etdump", "Where the ETDump lands on this machine (asks the runner for one)", nil, "string", metavar = "FILE" },
  { "warmup", "Extra runner processes before measuring, not counted", 0, "int" },
  { "timeout", "Seconds before a runner process is killed with everything it started", 600, "number" },
  { "runs-dir", "Where each run leaves runner logs and result.json", "runs", "string", metavar = "DIR" },
}
-- the model's inputs and outputs as files, compared with a reference (odp.results.tensors, docs/outputs.md)
for _, opt in ipairs(require("odp.results.tensors").options) do M.options[#M.options + 1] = opt end
-- how many measured processes: --repeat, --min-time, --max-time, --min-samples, --target-ci (odp.results.measure);
-- where and with what: --cpus, --cluster, --threads, --counters (odp.target.placement). Declared here once, so
-- `odp run` and board:profile{} (which takes these defaults) see the same options.
for _, list in ipairs({ measuring.options, require("odp.target.placement").options }) do
  for _, opt in ipairs(list) do M.options[#M.options + 1] = opt end
end

local function basename(p) return (p:match("([^/]+)$")) end

function M.validate(ctx)
  local o = ctx.opts
  if o.warmup < 0 then errors.fail("EUSAGE", "--warmup must be >= 0", 2) end
  if o.timeout <= 0 then errors.fail("EUSAGE", "--timeout must be > 0", 2) end
  measuring.validate(o)
  local st = sys.stat(o.runner)
  if st.type ~= "file" then errors.fail("EUSAGE", ("runner %s is not a file"):format(o.runner), 2) end
  if require("odp.target." .. ctx.target_kind).runs_in_place and not st.executable then
    errors.fail("EUSAGE", ("runner %s is not executable (chmod +x %s)"):format(o.runner, o.runner), 2)
  end
  run.check_model(o.model) -- a .pte this runner can load: ET12 identifier, not truncated, parseable
  -- the inputs against the method's signature, the reference against the model: exit 2 before any board
  ctx.io = require("odp.results.tensors").validate(o, ctx.args)
end

-- One line that says why a runner process failed, from its exit and its own error lines.
local function failure_message(r, parsed)
  local why
  for _, e in ipairs(parsed.errors or {}) do
    why = e.text .. (e.status_name and (" [" .. e.status_name .. "]") or "")
    if e.level == "F" then break end
  end
  if r.timed_out then
    return "ETIMEDOUT", "runner did not finish before the timeout; killed with its process group"
  elseif r.canceled then
    return "ECANCELED", "interrupted; runner killed"
  elseif r.signal then
    return "EIO", ("runner killed by SIG%s%s"):format(r.signal_name or r.signal, why and (": " .. why) or "")
  elseif r.status ~= 0 then
    if r.stderr:find("unknown command line flag 'etdump_path'", 1, true) then
      return "EIO", "this runner was built without the event tracer: it has no --etdump_path; drop --etdump"
    end
    return "EIO", ("runner exited with status %d%s"):format(r.status, why and (": " .. why) or "")
  end
end

-- Runs one runner process; returns the exec result and the parsed log.
local function run_once(ctx, t, argv, label, files)
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
  local r, err, code = t.target:exec(argv, { cwd = t.workdir, timeout = ctx.opts.timeout, runner_log = true,
    helper_args = t.helper_args, counters = ctx.opts.counters, on_stdout = sink.stdout, on_stderr = sink.stderr })
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
  if not r then errors.fail(code or "EIO", ("%s: %s"):format(label, err), 3) end
  local parse = require("odp.parse.executorch")
  local parsed = parse.parse(r.log and (r.stderr .. "\n" .. r.log) or r.stderr, r.stdout)
  return r, parsed
end

--- Turns what the runs printed into the record's measurements; the samples go to runs/<id>/samples.csv.
--- Returns the per-process groups of samples (odp.results.measure), or nil.
local function measure(ctx, rec, runs)
  local n = ctx.opts.num_executions
  local g = measuring.log_groups(runs, n)
  if g and g.warning then rec.warnings[#rec.warnings + 1] = g.warning end
  if not g and rec.artifacts.etdump then
    local etdump = require("odp.parse.etdump") -- loaded only when there is an ETDump
    local doc = etdump.read(rec.artifacts.etdump)
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
    local path = rec.artifacts.run_dir .. "/samples.csv"
    errors.check(measuring.write_samples(path, g.groups))
    rec.artifacts.samples = path
  else
    rec.latency_ms = { n = 0, source = g and g.source }
  end
  local last = runs[#runs].parsed
  local loads = {}
  for _, x in ipairs(runs) do
    if x.parsed.load_ms then loads[#loads + 1] = x.parsed.load_ms end
    local rss = x.r.rusage and x.r.rusage.maxrss_kb
    if rss and rss > 0 then rec.peak_rss_kb = math.max(rec.peak_rss_kb or 0, rss) end
  end
  if #loads > 0 then rec.load_ms = require("odp.core.stats").summary(loads).p50 end
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
      inputs = ctx.io and ctx.io.inputs and ctx.io.inputs.text or nil } }
  -- both hashes cached: even a 1 KB model's sha256 cost a sixth of a host run's instructions (libcrypto's
  -- loading and digest setup, bench/README.md "Precompiled Lua")
  local hashes = o.runs_dir .. "/.sha256-cache.json"
  rec.model = result.file_info(o.model, hashes)
  rec.runner = result.file_info(o.runner, hashes)
  rec.steps = json.array({})
  return rec
end

--- The files preflight checks against the board (odp.run, for scripts declared with preflight = true).
function M.preflight_files(ctx)
  return { runner = ctx.opts.runner, model = ctx.opts.model, data = ctx.opts.data }
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
  local data = o.data and stage(o.data)
  t.etdump_remote = o.etdump and (t.workdir .. "/odp-" .. basename(ctx.run_dir) .. ".etdump")
  local argv = { runner, "--model_path", model, "--num_executions", tostring(o.num_executions) }
  if t.etdump_remote then table.move({ "--etdump_path", t.etdump_remote }, 1, 2, #argv + 1, argv) end
  if data then table.move({ "--data_path", data }, 1, 2, #argv + 1, argv) end
  local io = ctx.io
  if io and io.inputs then
    local tensors = require("odp.results.tensors")
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
    t.output_base = t.workdir .. "/odp-" .. basename(ctx.run_dir) .. "-out"
    table.move({ "--output_file", t.output_base }, 1, 2, #argv + 1, argv)
  end
  table.move(ctx.args, 1, #ctx.args, #argv + 1, argv)
  t.argv = argv
  if remote and not pushed_any then return "unchanged" end
end

-- The run step: the device state before, placement, the warmup and measured runner processes (t.runs).
local function run_step(ctx, rec, t)
  local o, ui, dir, target, argv = ctx.opts, ctx.ui, ctx.run_dir, t.target, t.argv
  t.state = require("odp.target.device_state").before(rec, target)
  require("odp.target.placement").apply(ctx, t, rec, argv)

  for i = 1, o.warmup do
    local r, parsed = run_once(ctx, t, argv, ("warmup %d/%d"):format(i, o.warmup))
    local code, msg = failure_message(r, parsed)
    if code then
      rec.status, rec.signal = r.status, r.signal
      errors.fail(code, "warmup: " .. msg, code == "ECANCELED" and 130 or 1)
    end
  end
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
    local r, parsed = run_once(ctx, t, argv, label, dir .. "/" .. (count == 1 and "runner" or ("run" .. i)))
    if cooler then cooler:after(i) end
    rec.status, rec.signal = r.status, r.signal
    local code, msg = failure_message(r, parsed)
    if code then
      runs[#runs + 1] = { r = r, parsed = parsed }
      if #runs > 1 then measure(ctx, rec, { table.unpack(runs, 1, #runs - 1) }) end
      errors.fail(code, msg, code == "ECANCELED" and 130 or 1)
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
  -- judged by this run's file only: an older file at --etdump must not pass for a new one
  local got, perr, pcode = t.target:fetch(t.etdump_remote, o.etdump)
  -- no file on the board is the runner's doing (warned about below); anything else is a transfer failure
  if not got and pcode ~= "ENOTFOUND" then errors.check(got, perr, pcode) end
  if got then
    rec.artifacts.etdump = o.etdump
  else
    rec.warnings[#rec.warnings + 1] = "no ETDump was written (a runner built without the event tracer?)"
  end
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
  local tensors = require("odp.results.tensors")
  local kept
  if t.output_base then
    run.step(rec, "outputs", function()
      kept = tensors.fetch_outputs(ctx.io.sig, ctx.run_dir, function(i, dst)
        return t.target:fetch(("%s-%d.bin"):format(t.output_base, i), dst)
      end)
    end)
  end
  local runs, stopper, dir = t.runs, t.stopper, ctx.run_dir
  local g = measure(ctx, rec, runs)
  require("odp.target.rusage").record_counters(rec, runs)
  if o.sustained and g and #g.groups == #stopper.starts then
    rec.sustained = measuring.per_minute(g.groups, stopper.starts)
    rec.artifacts.sustained = dir .. "/sustained.jsonl"
    errors.check(measuring.write_per_minute(rec.artifacts.sustained, rec.sustained))
  end
  if rec.artifacts.etdump then
    local etdump = require("odp.parse.etdump")
    local doc, derr = etdump.read(rec.artifacts.etdump)
    if doc then
      rec.ops = json.array(etdump.ops(doc))
      rec.ops_summary = etdump.ops_summary(doc)
    else
      rec.warnings[#rec.warnings + 1] = "ETDump: " .. derr
    end
  end
  -- the kept outputs join the printed ones (the last measured process's), then the reference's gates judge them
  if kept then tensors.judge(ctx.io, rec, kept, ctx.run_dir) end
end

--- After the steps, whatever happened: the device state after the run (not after Ctrl-C: the user wants out).
function M.finish(ctx, rec, err)
  local t = ctx.state_of
  if t and t.state and not (type(err) == "table" and err.code == "ECANCELED") then
    require("odp.target.device_state").after(rec, t.state, t.target, { cpus_used = t.cpus_used })
  end
end

--- A script declaration for a target kind: `return require("odp.flows.executorch").script{...}`. odp.run
-- runs it (M.validate, then the board opened with the parsed options, preflight when asked, the steps).
---@param spec {name: string, description: string, target?: string, device?: string, preflight?: boolean} target defaults to the device's transport; preflight: check the runner and free space against the board before anything is uploaded (odp.target.preflight)
function M.script(spec)
  local device = spec.device and require("odp.target.device").load(spec.device) or nil
  local kind = spec.target or device.transport
  local options = {}
  for _, list in ipairs({ M.options, require("odp.target." .. kind).options or {} }) do
    for _, opt in ipairs(list) do
      -- the device's remote_dir is the --remote-dir default (devices/vivo_x300_pro.lua: /data/local/tmp/odp)
      if opt[1] == "remote-dir" and device and device.remote_dir then
        local copy = {}
        for k, v in pairs(opt) do copy[k] = v end
        copy[3], opt = device.remote_dir, copy
      end
      options[#options + 1] = opt
    end
  end
  local decl = { name = spec.name, description = spec.description, options = options, passes_args = true,
    flow = M.name, target = kind, device = device, preflight = spec.preflight }
  -- validate needs no network and no hardware: the board is opened by run, after it
  decl.validate = function(ctx)
    ctx.target_kind = kind
    M.validate(ctx)
    ctx.validated = true
  end
  decl.run = function(ctx) return require("odp.run").once(ctx, decl) end
  return decl
end

return M
