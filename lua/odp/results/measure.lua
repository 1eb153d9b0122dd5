--- How many runner processes a measurement takes, and what their samples say: the stopping rules
-- (--repeat, --min-time, --max-time, --min-samples, --target-ci), the latency block's statistics (ci95, cv,
-- first_ms, warm, drift) and runs/<id>/samples.csv. Used by the executorch flow's run loop; written against
-- plain lists of samples, so another flow can use it too (docs/SCRIPTING.md, "Stopping rules").
local errors = require("odp.core.errors")
local json = require("odp.core.json")
local stats = require("odp.core.stats")
local sys = require("odp.sys")
local result = require("odp.results.result")
local thermal = require("odp.target.thermal")

local M = {}

--- The options of the stopping rules (cli option entries).
M.options = {
  { "repeat", "Measured runner processes, exactly (the default, 1, when no other rule is given)", nil, "posint" },
  { "min-samples", "Keep starting runner processes until at least N iterations are measured", nil, "posint" },
  { "min-time", "Keep starting runner processes until at least S seconds of measuring", nil, "number",
    metavar = "S" },
  { "max-time", "Start no runner process after S seconds (default 120 with --target-ci)", nil, "number",
    metavar = "S" },
  { "target-ci", "Keep going until the 95% CI of the median latency is within +-PCT% of it", nil, "number",
    metavar = "PCT" },
  { "sustained", "Run back to back for MIN minutes; report p50/p90 per minute (throttling over time)", nil,
    "number", metavar = "MIN" },
  { "cooldown", "Pause S seconds between measured runner processes", nil, "number", metavar = "S" },
  { "cool-to", "Before each measured process, wait until every temperature the target exposes is <= C", nil,
    "number", metavar = "C" },
  { "cool-timeout", "Longest wait for --cool-to (then measure anyway, with a warning)", 300, "number",
    metavar = "S" },
}

--- The default cap of a --target-ci run without --max-time, in seconds.
M.DEFAULT_MAX_TIME = 120

local function usage(msg) errors.fail("EUSAGE", msg) end

--- Checks the options (usage errors exit 2). opts: the parsed options (keys with underscores).
function M.validate(o)
  if o.target_ci ~= nil and not (o.target_ci > 0 and o.target_ci < 100) then
    usage(("--target-ci must be a positive percentage below 100 (2 means +-2%% of the median), got %s")
      :format(o.target_ci))
  end
  if o.min_time ~= nil and o.min_time < 0 then usage("--min-time must be >= 0") end
  if o.max_time ~= nil and o.max_time <= 0 then usage("--max-time must be > 0") end
  if o.min_time and o.max_time and o.min_time > o.max_time then
    usage(("--min-time %s is larger than --max-time %s"):format(o.min_time, o.max_time))
  end
  local adaptive = o.min_time or o.max_time or o.min_samples or o.target_ci
  if o["repeat"] and adaptive then
    usage("--repeat runs exactly N processes: drop it to use --min-time/--max-time/--min-samples/--target-ci")
  end
  if o.sustained ~= nil then
    if not (o.sustained > 0) then usage("--sustained must be a positive number of minutes") end
    if o["repeat"] or adaptive then
      usage("--sustained runs for MIN minutes: drop --repeat/--min-time/--max-time/--min-samples/--target-ci")
    end
  end
  if o.cooldown ~= nil and not (o.cooldown >= 0) then usage("--cooldown must be >= 0 seconds") end
  if o.cool_timeout ~= nil and not (o.cool_timeout > 0) then usage("--cool-timeout must be > 0 seconds") end
end

--- Half-width of the median's 95% CI in % of the median (the larger side); nil when the CI cannot be had yet.
---@param samples number[]
---@return number|nil
function M.ci_pct(samples)
  local lo, hi = stats.median_ci(samples)
  if not lo then return nil end
  local med = stats.percentile(samples, 50)
  if med == 0 then return nil end
  return math.max(med - lo, hi - med) / math.abs(med) * 100
end

--- The number of measured processes when the options fix it (--repeat, or no rule: 1), else nil.
function M.fixed_count(o)
  if o.min_time or o.max_time or o.min_samples or o.target_ci or o.sustained then return nil end
  return o["repeat"] or 1
end

local Stopper = {}
Stopper.__index = Stopper

--- A stopping rule for options o. s:done(processes, samples) after each measured process says whether to
--- stop; then s.stop is the record's `stop` field and s.warning a line to warn with (or nil).
--- opts.clock: {now=, sleep=} in place of odp.sys's (tests check the rules on a clock they advance).
function M.stopper(o, opts)
  local clock = opts and opts.clock or sys
  local s = setmetatable({ o = o, clock = clock, t0 = clock.now(), first_true = {}, starts = {} }, Stopper)
  s.fixed = M.fixed_count(o) ~= nil
  s.max_time = o.max_time or (o.target_ci and M.DEFAULT_MAX_TIME) or nil
  return s
end

--- Notes that a measured process starts now (its offset from the first feeds the per-minute table).
function Stopper:begin()
  self.starts[#self.starts + 1] = self.clock.now() - self.t0
end

--- The number of processes when it is known up front (--repeat or no rule), else nil.
function Stopper:count()
  return M.fixed_count(self.o)
end

---@param k integer processes measured so far
---@param samples number[] every sample so far
---@return boolean stop
function Stopper:done(k, samples)
  local o, elapsed = self.o, self.clock.now() - self.t0
  local function finish(rule, met, ci_pct)
    self.stop = { rule = rule, met = met, processes = k, seconds = elapsed, samples = #samples,
      target_ci = o.target_ci, ci_pct = ci_pct }
    return true
  end
  if self.fixed then
    if k >= self:count() then return finish("repeat", true) end
    return false
  end
  if o.sustained then
    if elapsed >= o.sustained * 60 then return finish("sustained", true) end
    return false
  end
  local ci_pct = o.target_ci and M.ci_pct(samples)
  local conds = {
    min_samples = #samples >= (o.min_samples or 1),
    min_time = elapsed >= (o.min_time or 0),
    target_ci = not o.target_ci or (ci_pct ~= nil and ci_pct <= o.target_ci),
  }
  for name, ok in pairs(conds) do
    if ok and not self.first_true[name] then self.first_true[name] = k end
  end
  if conds.min_samples and conds.min_time and conds.target_ci then
    -- the rule named is the one met last (with --target-ci: that one)
    local rule = "target_ci"
    if not o.target_ci then
      local by_time = o.min_time and (not o.min_samples or self.first_true.min_time >= self.first_true.min_samples)
      rule = by_time and "min_time" or "min_samples"
    end
    return finish(rule, true, ci_pct)
  end
  if self.max_time and elapsed >= self.max_time then
    local missing = {}
    if not conds.min_samples then missing[#missing + 1] = ("%d of --min-samples %d iterations"):format(#samples, o.min_samples) end
    if not conds.target_ci then
      missing[#missing + 1] = ci_pct and ("95%% CI of the median +-%.2g%%, not the +-%g%% of --target-ci"):format(ci_pct, o.target_ci)
        or ("too few iterations (%d) for a 95%% CI of the median"):format(#samples)
    end
    self.warning = ("stopped at --max-time %gs after %d process(es): %s"):format(self.max_time, k, table.concat(missing, "; "))
    return finish("max_time", #missing == 0, ci_pct)
  end
  return false
end

--- A runner process ended by --timeout after measuring k iterations (its log's): they are the measurement, and
--- the rule stops there (stop.rule "timeout", not met). Returns the warning that says so.
---@param k integer processes measured so far, that one included
---@param samples number[] every sample so far, its iterations included
function Stopper:timed_out(k, samples, measured, asked, timeout_s)
  self.stop = { rule = "timeout", met = false, processes = k, seconds = self.clock.now() - self.t0,
    samples = #samples, target_ci = self.o.target_ci, ci_pct = self.o.target_ci and M.ci_pct(samples) or nil }
  return ("runner process %d was killed at --timeout %g s after %d of its %d iterations: the latency is of the " ..
    "%d iteration(s) measured (a smaller -n, or a larger --timeout, measures them all)"):format(k, timeout_s, measured,
    asked, #samples)
end

--- What a long measurement will take, said up front: a measured process that ran elapsed_s seconds and printed
--- k of its n iterations so far. -> one line (the estimate, from that pace, and the caps: --timeout per process,
--- the rule's count or --max-time), or nil when the process would take under M.LONG_S.
M.LONG_S = 10
local function long_duration(s)
  if s >= 3600 then return ("%.1f h"):format(s / 3600) end
  if s >= 60 then return ("%.1f min"):format(s / 60) end
  return ("%.0f s"):format(s)
end

function M.estimate(o, k, n, elapsed_s)
  if k < 1 or n <= k then return nil end
  local per_process = elapsed_s * n / k
  if per_process < M.LONG_S then return nil end
  local count = M.fixed_count(o)
  local rule
  if count then
    rule = count > 1 and ("; %d processes: about %s in all"):format(count,
      long_duration(math.min(per_process, o.timeout) * count)) or ""
  elseif o.sustained then
    rule = ("; --sustained starts processes for %g min"):format(o.sustained)
  else
    local cap = o.max_time or (o.target_ci and M.DEFAULT_MAX_TIME)
    rule = cap and ("; the stopping rule starts no process after --max-time %g s"):format(cap)
      or "; the stopping rule has no --max-time: processes go on until it is met"
  end
  local ends = per_process > o.timeout and ("--timeout %g s ends it after about %d iterations (the latency is of " ..
    "those)"):format(o.timeout, math.floor(o.timeout * k / elapsed_s)) or ("--timeout %g s"):format(o.timeout)
  return ("%d of %d iterations in %.1f s: a process would take about %s at this pace; %s%s"):format(k, n,
    elapsed_s, long_duration(per_process), ends, rule)
end

--- A watcher of a measured process's stderr (the chunks as they come) that says M.estimate's line once, through
--- say, when the process has run 2 s and printed an iteration (or printed 256 kB) and would take long. n: its
--- iterations. How long it has run is the runner's own clock where its lines carry one (ExecuTorch's log: the
--- time since its start, which no link, queue or outage adds to), else the time since its first output: the
--- pacer may be made long before the process starts (a pipelined sweep's next point waits behind the one
--- running, a run re-sent after an outage waits for the board). opts.clock: {now=} in place of odp.sys's (tests).
function M.pacer(o, n, say, opts)
  local clock = opts and opts.clock or sys
  local t0, text, done = nil, {}, false
  local size = 0
  return function(data)
    if done then return end
    t0 = t0 or clock.now()
    if size < 256 * 1024 then text[#text + 1] = data; size = size + #data end
    local elapsed, full = clock.now() - t0, size >= 256 * 1024
    if elapsed < 2 and not full then return end
    local parsed = require("odp.parse.executorch").parse(table.concat(text), "") -- lazy: start-up
    local k = #parsed.iterations_ms
    if k == 0 and not full then return end -- no iteration yet (a slow load): the next chunk may tell
    done = true
    local last = parsed.messages[#parsed.messages]
    local line = M.estimate(o, k, n, last and last.time_s or elapsed)
    if line then say(line) end
  end
end

--- Per-process samples from what the runner processes printed. runs[i].parsed is the parsed log of
--- process i (odp.parse.executorch); n the --num-executions asked. -> {groups = {{ms...} per process},
--- source = "log", total = ms the runners reported, per_iteration = true|false, warning = string?}, or nil
--- when the logs have no timing lines.
function M.log_groups(runs, n)
  local have_iter, have_total = true, true
  for _, x in ipairs(runs) do
    if #(x.parsed.iterations_ms or {}) == 0 then have_iter = false end
    if not x.parsed.total_ms then have_total = false end
  end
  local g = { groups = {}, source = "log", total = 0 }
  if have_iter then
    g.per_iteration = true
    for i, x in ipairs(runs) do
      g.groups[i] = table.move(x.parsed.iterations_ms, 1, #x.parsed.iterations_ms, 1, {})
      g.total = g.total + (x.parsed.total_ms or 0)
    end
    return g
  elseif have_total then
    -- only the total per process: each process contributes its mean
    g.per_iteration = false
    for i, x in ipairs(runs) do
      local k = x.parsed.num_executions or n
      g.groups[i] = k > 0 and { x.parsed.total_ms / k } or {}
      g.total = g.total + x.parsed.total_ms
    end
    g.warning = "the runner printed only its total time, not per-iteration lines: percentiles are over per-process means"
    return g
  end
end

--- Every sample of groups in time order.
function M.flatten(groups)
  local all = {}
  for _, g in ipairs(groups) do table.move(g, 1, #g, #all + 1, all) end
  return all
end

--- Drift between the first and the last third of samples (in time order): {pct = how much slower the last
--- third's median is, p = Mann-Whitney's two-sided p}; nil under 9 samples.
function M.drift(samples)
  local n = #samples
  if n < 9 then return nil end
  local third = n // 3
  local first = table.move(samples, 1, third, 1, {})
  local last = table.move(samples, n - third + 1, n, 1, {})
  local m1, m3 = stats.percentile(first, 50), stats.percentile(last, 50)
  if m1 == 0 then return nil end
  local _, p = stats.mann_whitney(first, last)
  return { pct = (m3 / m1 - 1) * 100, p = p }
end

-- The confidence, spread and drift fields of a latency block over samples (in time order).
local function add_confidence(block, samples)
  local lo, hi = stats.median_ci(samples)
  if lo then block.ci95 = json.array { lo, hi } end
  block.cv = stats.cv(samples)
  return block
end

--- The record's latency_ms from per-process groups: the summary over every sample (mean, p50, ... keep
--- their meaning: all iterations), its ci95 and cv; with per-iteration groups also first_ms (each process's
--- first iteration) and warm (the same over the rest); drift. warnings: a list warnings are added to.
---@param g {groups: number[][], source: string, total: number?, per_iteration: boolean?}
---@param warnings string[]
---@return table latency_ms
function M.latency(g, warnings)
  local all = M.flatten(g.groups)
  local block = result.latency(all, g.source, g.total)
  add_confidence(block, all)
  if g.per_iteration then
    local first, warm = json.array(), {}
    for _, grp in ipairs(g.groups) do
      if #grp > 0 then first[#first + 1] = grp[1] end
      table.move(grp, 2, #grp, #warm + 1, warm)
    end
    block.first_ms = first
    if #warm > 0 then block.warm = add_confidence(stats.summary(warm), warm) end
  end
  local drift = M.drift(all)
  if drift then
    block.drift = drift
    if drift.p < 0.01 and drift.pct > 5 then
      warnings[#warnings + 1] = ("drift: the last third of the iterations is %.1f%% slower than the first " ..
        "(Mann-Whitney p = %.2g): throttling or background load? (--cooldown, --cool-to)"):format(drift.pct, drift.p)
    end
  end
  return block
end

--- p50/p90 per minute of a sustained run: each process's samples count in the minute it started in
--- (starts: its offset in seconds). -> json array of {minute (from 1), processes, n, p10, p50, p90}
function M.per_minute(groups, starts)
  local minutes = {}
  for i, g in ipairs(groups) do
    local m = math.floor((starts[i] or 0) / 60) + 1
    minutes[m] = minutes[m] or { samples = {}, processes = 0 }
    minutes[m].processes = minutes[m].processes + 1
    table.move(g, 1, #g, #minutes[m].samples + 1, minutes[m].samples)
  end
  local out = json.array()
  for m = 1, #starts > 0 and math.floor(starts[#starts] / 60) + 1 or 0 do
    local x = minutes[m]
    if x and #x.samples > 0 then
      out[#out + 1] = { minute = m, processes = x.processes, n = #x.samples, p10 = stats.percentile(x.samples, 10),
        p50 = stats.percentile(x.samples, 50), p90 = stats.percentile(x.samples, 90) }
    end
  end
  return out
end

--- Writes the per-minute rows as JSONL, one record per minute ({ok, kind = "sustained_minute", params =
--- {minute}, latency_ms = {n, p10, p50, p90}}), so that `odp plot FILE --x minute --y latency_ms.p50` draws
--- them (p10..p90 bars).
function M.write_per_minute(path, rows)
  local lines = {}
  for i, row in ipairs(rows) do
    lines[i] = json.encode({ ok = true, kind = "sustained_minute", params = { minute = row.minute },
      latency_ms = { n = row.n, p10 = row.p10, p50 = row.p50, p90 = row.p90 } })
  end
  return sys.write_file(path, table.concat(lines, "\n") .. "\n")
end

local Cooler = {}
Cooler.__index = Cooler

--- The pause and the thermal wait before each measured process (--cooldown, --cool-to, --cool-timeout);
--- nil when neither is asked. opts.root: the thermal class directory, opts.clock: {now=, sleep=} (tests).
--- After the run, c.log is the record's `thermal` list ({process, waited_s, before_c, after_c}: the hottest
--- temperature before the process (after any wait) and after it) and c.warnings what to warn about.
function M.cooler(o, target, ui, opts)
  if not (o.cooldown or o.cool_to) then return nil end
  return setmetatable({ o = o, target = target, ui = ui, root = opts and opts.root,
    clock = opts and opts.clock or sys, log = json.array(), warnings = {} }, Cooler)
end

function Cooler:temperature()
  return thermal.hottest(thermal.read(self.target, self.root))
end

--- Before measured process k.
function Cooler:before(k)
  local o = self.o
  local entry = { process = k, waited_s = 0.0 }
  local now, sleep = self.clock.now, self.clock.sleep
  local t0 = now()
  if o.cooldown and k > 1 then errors.check(sleep(o.cooldown)) end
  if o.cool_to and not self.no_zones then
    local hot, name = self:temperature()
    if not hot then
      self.no_zones = true
      self.warnings[#self.warnings + 1] = ("--cool-to %g: no thermal zones on this target (%s): not waiting")
        :format(o.cool_to, self.target.uri or self.target.kind)
    else
      local deadline = now() + o.cool_timeout
      while hot > o.cool_to and now() < deadline do
        if self.ui and not self.ui.quiet then
          self.ui:info("cooling: %s at %.1f C, waiting for %g C", name, hot, o.cool_to)
        end
        errors.check(sleep(math.min(1, math.max(0.05, deadline - now()))))
        hot, name = self:temperature()
      end
      if hot and hot > o.cool_to then
        self.warnings[#self.warnings + 1] = ("process %d: %s still at %.1f C after --cool-timeout %gs: measured anyway")
          :format(k, name, hot, o.cool_timeout)
      end
      entry.before_c = hot
    end
  end
  entry.waited_s = now() - t0
  self.log[k] = entry
end

--- After measured process k.
function Cooler:after(k)
  if self.o.cool_to and not self.no_zones then self.log[k].after_c = self:temperature() end
end

--- Writes groups as CSV (process, iteration, ms: one row per sample, processes and iterations from 1), in a
--- run directory: batched (odp.sys.write_file), the run's record, written after it beside it, makes it durable.
function M.write_samples(path, groups)
  local out = { "process,iteration,ms" }
  for p, grp in ipairs(groups) do
    for i, v in ipairs(grp) do out[#out + 1] = ("%d,%d,%.17g"):format(p, i, v) end
  end
  return sys.write_file(path, table.concat(out, "\n") .. "\n", { batch = true })
end

--- Where a record's samples.csv is: the file artifacts.samples names (in the record's own run directory,
--- its sha256 as recorded; odp.results.result.artifact), else dir/samples.csv (dir: the directory of the record
--- file). -> path | nil, why (none there, or the named one is missing or changed).
function M.samples_path(rec, dir)
  if type(rec.artifacts) == "table" and rec.artifacts.samples ~= nil then
    local path, why = result.artifact(rec, "samples", dir)
    if path or type(rec.artifacts.samples) ~= "string" then return path, why end
  end
  if sys.stat(dir .. "/samples.csv") then return dir .. "/samples.csv" end
  return nil, "no samples.csv beside the record"
end

--- Reads a samples.csv back -> groups (per process that has samples, in order: a process with none, such as an
--- LLM runner whose pieces all reached stdout together, has no lines and no group) | nil, err.
function M.read_samples(path)
  local text, err = sys.read_file(path)
  if not text then return nil, err end
  local groups = {}
  local first, last = true, 0
  for line in text:gmatch("[^\n]+") do
    if first then
      first = false
      if line ~= "process,iteration,ms" then return nil, ("%s: not a samples.csv (header '%s')"):format(path, line) end
    else
      local p, _, ms = line:match("^(%d+),(%d+),([^,]+)$")
      local v = tonumber(ms)
      if not p or not v or v ~= v then return nil, ("%s: bad line '%s'"):format(path, line) end
      p = tonumber(p)
      if p < last then return nil, ("%s: process %d out of order"):format(path, p) end
      if p > last then groups[#groups + 1], last = {}, p end
      table.insert(groups[#groups], v)
    end
  end
  return groups
end

return M
