--- The ExecuTorch flow: run `executor_runner` on a target (host, ssh, adb), read latency, peak memory,
-- planned buffers and outputs from what it prints and from rusage, pull the ETDump, report.
-- Written once against the target interface (lua/odp/target/*.lua).
-- The parts live in lua/odp/flows/executorch/: stage (files onto the board, the runner's argv), runs (the run
-- step: warmups, sampling overhead, measured processes), failure (why a runner process failed, in one line),
-- measure (what they printed -> the record), fetch (the ETDump and samples; the CPU profile). This module holds
-- the options, the record, the steps in their order, and the script declaration.
local errors = require("odp.core.errors")
local result = require("odp.results.result")
local sys = require("odp.sys")
local json = require("odp.core.json")
local device = require("odp.target.device")
local measuring = require("odp.results.measure")
local run = require("odp.run")
local tensors = require("odp.results.tensors")
local device_state = require("odp.target.device_state")
local function etdump() return require("odp.parse.etdump") end -- lazy: start-up (no --etdump: none read)
local rusage = require("odp.target.rusage")
local shell = require("odp.target.shell")
local stage = require("odp.flows.executorch.stage")
local runs_part = require("odp.flows.executorch.runs")
local measure = require("odp.flows.executorch.measure")
local llm = require("odp.flows.executorch.llm")

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
  { "keep-core", "A core the runner dumps when it crashes is fetched into the run dir (without: removed from " ..
    "the board, and the record says so)", false, "bool" },
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
  { "exclusive", "Wait until no other odp runs on the board (its lease, docs/devices.md \"A shared board\") " ..
    "before the first run;\nwithout it a run that overlapped another odp says so (shared_board)", false, "bool" },
  { "allow-emulated", "Measure a runner built for another machine that the board runs under emulation\n" ..
    "(qemu-user through binfmt_misc); the record says emulated (refused without it)", false, "bool" },
}
-- the model's inputs and outputs as files, compared with a reference (odp.results.tensors, docs/outputs.md)
for _, opt in ipairs(tensors.options) do M.options[#M.options + 1] = opt end
-- how many measured processes: --repeat, --min-time, --max-time, --min-samples, --target-ci (odp.results.measure);
-- where and with what: --cpus, --cluster, --threads, --counters (odp.target.placement). Declared here once, so
-- `odp run` and board:profile{} (which takes these defaults) see the same options.
for _, list in ipairs({ measuring.options, require("odp.target.placement").options, llm.options }) do
  for _, opt in ipairs(list) do M.options[#M.options + 1] = opt end
end


function M.validate(ctx)
  local o = ctx.opts
  if o.warmup < 0 then errors.fail("EUSAGE", "--warmup must be >= 0") end
  if o.timeout <= 0 then errors.fail("EUSAGE", "--timeout must be > 0") end
  llm.validate(o) -- before the stopping rule's checks: with --llm, -n counts processes
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

-- The flow's file cache (odp.results.result.file_fact) under the runs dir of o (none without one: a script's
-- own options).
local function file_cache(o) return o.runs_dir and (o.runs_dir .. "/.sha256-cache.json") end

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
  ctx.file_cache = file_cache(o) -- and what the stage step asks of the runner's bytes
  rec.model = result.file_info(o.model, ctx.file_cache)
  rec.runner = result.file_info(o.runner, ctx.file_cache)
  if o.llm then
    llm.params(o, rec.params)
    rec.tokenizer = result.file_info(o.tokenizer, ctx.file_cache)
  end
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
  local o = ctx.opts
  return { runner = o.runner, model = o.model, data = o.data, allow_emulated = o.allow_emulated,
    stage = function()
      -- the cache only where it is already: a preflight that fails makes no runs dir
      local cache = file_cache(o)
      cache = cache and sys.stat(cache) and cache
      return stage.files(o, result.file_info(o.runner, cache), result.file_info(o.model, cache))
    end }
end

-- The fetch step's module: a host run without --etdump, --sample or a crash never fetches
local function fetch() return require("odp.flows.executorch.fetch") end -- lazy: start-up

-- The ops of the run's ETDump (t.etdump) into rec. A file cut short (its runner died writing it, or a full
-- disk stopped it) is read as far as it goes: rec.etdump_partial says how much, a warning says why. -> the
-- read ETDump, or nil.
local function read_etdump(rec, t)
  local doc, derr = etdump().read(t.etdump)
  local why
  if not doc or doc.partial then
    -- a runner stopped by a full disk leaves a short file: say that, not that the format is wrong
    why = shell.space_cause(t.target, t.etdump_remote:match("^(.*)/[^/]*$"), 1024 * 1024, "the runner's ETDump", nil)
    if why then rec.warnings[#rec.warnings + 1] = ("ETDump lost: %s"):format(errors.text(why)) end
  end
  if not doc then
    if not why then rec.warnings[#rec.warnings + 1] = "ETDump: " .. derr end
    return nil
  end
  rec.ops = json.array(etdump().ops(doc))
  rec.ops_summary = etdump().ops_summary(doc)
  local p = doc.partial
  if p then
    rec.etdump_partial = { bytes = p.bytes, expected_bytes = p.declared_bytes + 4, events_lost = p.events_lost,
      runs_lost = p.runs_lost }
    rec.warnings[#rec.warnings + 1] = ("ETDump cut short: %d of its %d bytes were written; its ops are what lies " ..
      "whole before the cut (%d event(s) and %d run(s) past it lost)"):format(p.bytes, p.declared_bytes + 4,
      p.events_lost, p.runs_lost)
  end
  return doc
end

-- A runner killed by a signal (t.failed) leaves what it wrote: its ETDump, fetched and read as far as it
-- goes, and the core it dumped, named and removed (fetched with --keep-core). Both are looked for after the
-- crash and before its failure is raised; what they find goes into the failed record.
local function after_crash(ctx, rec, t)
  if t.etdump_remote and not ctx.opts.llm then
    local fetched, ferr = pcall(run.step, rec, "fetch", function() return fetch().step(ctx, rec, t) end)
    if fetched and t.etdump then read_etdump(rec, t) end
    if not fetched then rec.warnings[#rec.warnings + 1] = "the crashed runner's ETDump: " .. tostring(ferr) end
  end
  if t.failed.core_dumped then fetch().core(ctx, rec, t) end
end

--- The steps, each traced in rec.steps: stage, run, fetch (with --etdump); then the measurements. Raises a
-- structured failure; odp.run turns it into the failed record.
function M.steps(ctx, rec)
  local o = ctx.opts
  local t = { target = ctx.board:target() }
  ctx.state_of = t
  run.step(rec, "stage", function() return stage.step(ctx, rec, t) end)
  local ran, rerr = pcall(run.step, rec, "run", function() return runs_part.step(ctx, rec, t) end)
  if not ran then
    if t.failed and t.failed.signal then after_crash(ctx, rec, t) end
    error(rerr, 0)
  end
  -- --llm fetched each process's ETDump after it (odp.flows.executorch.llm): the last is the run's
  if t.fetch_etdump and not o.llm then run.step(rec, "fetch", function() return fetch().step(ctx, rec, t) end) end
  local kept
  if t.output_base then
    run.step(rec, "outputs", function()
      kept = tensors.fetch_outputs(ctx.io.sig, ctx.run_dir, function(i, dst)
        return t.target:fetch(("%s-%d.bin"):format(t.output_base, i), dst)
      end)
    end)
  end
  local runs, stopper, dir = t.runs, t.stopper, ctx.run_dir
  local g = measure.measure(ctx, rec, runs, t)
  if o.llm then t.etdump = llm.keep_etdump(ctx, rec, runs) end
  rusage.record_counters(rec, runs)
  if o.sustained and g and #g.groups == #stopper.starts then
    rec.sustained = measuring.per_minute(g.groups, stopper.starts)
    errors.check(measuring.write_per_minute(dir .. "/sustained.jsonl", rec.sustained))
    run.artifact(ctx, rec, "sustained", dir .. "/sustained.jsonl")
  end
  local doc = t.etdump and read_etdump(rec, t)
  if t.samples then fetch().profile(ctx, rec, t, doc) end
  -- the kept outputs join the printed ones (the last measured process's), then the reference's gates judge them
  if kept then tensors.judge(ctx.io, rec, kept, ctx.run_dir) end
end

--- The other odps a run overlapped on its board (odp.target.shell.others: those running when it began, before,
--- and when it ended, after; one waiting for the board with --exclusive runs nothing yet): rec.shared_board and
--- a warning that says measurements may interfere.
function M.overlap(rec, before, after)
  local seen, list, texts = {}, json.array({}), {}
  for _, group in ipairs { before, after } do
    for _, o in ipairs(group) do
      if not o.waiting and not seen[o.name] then
        seen[o.name] = true
        list[#list + 1] = { host = o.host, user = o.user, pid = o.pid,
          since = os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(o.since)) }
        texts[#texts + 1] = shell.other_text(o)
      end
    end
  end
  if #list == 0 then return end
  rec.shared_board = list
  rec.warnings[#rec.warnings + 1] = ("%s on this board during this run (%s): measurements may interfere")
    :format(#list == 1 and "another odp ran" or (#list .. " other odps ran"), table.concat(texts, "; "))
end

--- After the steps, whatever happened: the device state after the run (not after Ctrl-C: the user wants out).
function M.finish(ctx, rec, err)
  local t = ctx.state_of
  if not t or (type(err) == "table" and err.code == "ECANCELED") then return end
  -- the run's own files on the board (its copies are in the run dir by now, or lost with the failure that
  -- stopped it): left there, one set a run would fill the board's remote_dir over a lab's weeks
  local files = {}
  for _, f in pairs(t.board_files or {}) do files[#files + 1] = f end
  local done = t.finished
  if done and done.removed then
    -- the last runner process's answer removed them and said who else runs on the board (a point is one request)
    for _, u in ipairs(done.unremoved) do
      rec.warnings[#rec.warnings + 1] = ("this run's files are left on the board: %s"):format(u)
    end
    M.overlap(rec, t.target.cache.others or {}, done.others)
    t.target.cache.others = done.others
  elseif t.target.finish_run then
    -- in the same command: the other odps on the board now; with those there when this run began, who it
    -- overlapped (one that came and went within the run is not seen)
    local before = t.target.cache.others or {}
    local after, rerr = t.target:finish_run(files)
    if not after then
      rec.warnings[#rec.warnings + 1] = ("this run's files are left on the board: %s"):format(errors.text(rerr))
    else
      t.target.cache.others = after
      M.overlap(rec, before, after)
    end
  elseif #files > 0 then
    local ok, rerr = t.target:remove(files)
    if not ok then
      rec.warnings[#rec.warnings + 1] = ("this run's files are left on the board: %s"):format(errors.text(rerr))
    end
  end
  -- asked with the runner processes but none brought it back (the run failed before its answer): asked now
  if t.state_ask and not t.state then t.state = device_state.before(rec, t.target) end
  if t.state then device_state.after(rec, t.state, t.target, { cpus_used = t.cpus_used, after = t.state_after }) end
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
