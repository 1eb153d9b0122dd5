--- Is B faster than A? Two sides, each a result file, a JSONL of records or a runs/<id>/ directory, compared
-- metric by metric over their raw samples: medians, the ratio B/A with a percentile-bootstrap 95% CI (seeded:
-- the same inputs give the same output; hierarchical over processes when a side has several, because
-- processes of the same binary differ more than iterations within one), the Mann-Whitney p, and a verdict
-- that needs the whole CI beyond a noise threshold. Used by `odp compare`
-- (lua/odp/cli/commands/compare.lua); docs/SCRIPTING.md, "odp compare".
local errors = require("odp.core.errors")
local json = require("odp.core.json")
local measure = require("odp.results.measure")
local result = require("odp.results.result")
local schema = require("odp.results.schema")
local stats = require("odp.core.stats")
local sys = require("odp.sys")
local etdump = require("odp.parse.etdump")

local tensors = require("odp.results.tensors")
-- --llm's per-process figures, compared as rows (each process one sample): name, unit, and which way is better.
local LLM_ROWS = {
  { key = "ttft_ms", metric = "time to first token", unit = "ms" },
  { key = "prefill_tokens_per_s", metric = "prefill tokens/s (pp)", unit = "tokens/s", kind = "rate" },
  { key = "decode_tokens_per_s", metric = "decode tokens/s (tg)", unit = "tokens/s", kind = "rate" },
}

local M = {}

--- Samples a side needs on each side for a CI and a verdict (fewer: medians and ratio only).
M.MIN_SAMPLES = 6
--- p below which a CI beyond 1 ± NOISE is called a difference.
M.ALPHA = 0.05
--- Default noise threshold (a fraction, `--noise` 2%): changes whose CI reaches inside 1 ± NOISE are "same".
M.NOISE = 0.02

local function bad(msg) errors.fail("EUSAGE", msg) end

local function dirname(p) return p:match("^(.*)/[^/]*$") or "." end

--- The records in path: a runs/<id>/ directory (its result.json), a JSON record (or list), or JSONL (a cut
--- last line is left out with a warning; any other bad line is a usage error), each read through
--- odp.results.schema (fields it does not know or of the wrong type: a warning each record, left out).
--- label names the input in messages. -> records, the directory a record's relative samples.csv may sit
--- in, warnings
function M.read_records(path, label)
  local st = sys.stat(path)
  if not st then bad(("%s: cannot read '%s'"):format(label, path)) end
  local warnings = {}
  if st.type == "dir" then
    if not sys.stat(path .. "/result.json") then
      bad(("%s: %s has no result.json (not a runs/<id>/ directory)"):format(label, path))
    end
    path = path .. "/result.json"
  end
  local text = assert(sys.read_file(path))
  local records = {}
  local function add(rec, where)
    local checked, notes = schema.read(rec)
    if not checked then bad(("%s: %s is not a record (%s)"):format(label, where, notes.invalid[1])) end
    local why = schema.describe(notes, where)
    if why then warnings[#warnings + 1] = ("%s: %s"):format(label, why) end
    records[#records + 1] = checked
  end
  local whole = result.decode(text)
  if type(whole) == "table" then
    local list = json.is_array(whole) and whole or { whole }
    for i, rec in ipairs(list) do add(rec, #list > 1 and ("%s record %d"):format(path, i) or path) end
    return records, dirname(path), warnings
  end
  local lineno, lines = 0, {}
  for line in text:gmatch("[^\n]+") do lines[#lines + 1] = line end
  for i, line in ipairs(lines) do
    lineno = i
    local rec, err = result.decode(line)
    if type(rec) ~= "table" then
      if i == #lines and text:sub(-1) ~= "\n" then
        warnings[#warnings + 1] = ("%s: the last line of %s is cut off (a killed sweep?): left out"):format(label, path)
      else
        bad(("%s: %s line %d is not a record (%s)"):format(label, path, lineno, err or "not an object"))
      end
    else
      add(rec, ("%s line %d"):format(path, i))
    end
  end
  if #records == 0 then bad(("%s: %s holds no record"):format(label, path)) end
  return records, dirname(path), warnings
end

--- samples.csv of a record: where the record says, else beside the record file (dir). -> groups (latency
--- samples per process), the file's path | nil when there is none; a file that is not a samples.csv is a
--- usage error (exit 2). -> nil, why when there is none (or the named one is missing or changed).
function M.samples_of(rec, dir)
  local p, why = measure.samples_path(rec, dir)
  if not p then return nil, why end
  local groups, err = measure.read_samples(p)
  if not groups then bad(err) end
  return groups, p
end

-- per-operator raw samples from the record's own ETDump (in its run directory, its sha256 as recorded), else
-- nil and why not (nil when the record names none)
local function op_samples(rec, dir)
  if type(rec.artifacts) ~= "table" or rec.artifacts.etdump == nil then return nil end
  if type(rec.latency_ms) == "table" and rec.latency_ms.modelled then
    return nil, "the QEMU twin's ETDump is canned, not this model's"
  end
  local path, why = result.artifact(rec, "etdump", dir)
  if not path then return nil, why end
  local doc, err = etdump.read(path)
  if not doc then return nil, ("ETDump %s: %s"):format(path, err) end
  local out, seen = {}, {}
  for _, row in ipairs(etdump.ops(doc, { samples = true })) do
    if not row.framework then
      local key = ("%s/%s"):format(row.block, row.name)
      seen[key] = (seen[key] or 0) + 1
      if seen[key] > 1 then key = key .. "#" .. seen[key] end
      out[#out + 1] = { key = key, samples = row.samples }
    end
  end
  return out
end

--- The boards with a successful record in path (`board`, from --boards runs), in first-seen order.
function M.boards(path)
  local seen, out = {}, {}
  for _, rec in ipairs((M.read_records(path, path))) do
    if rec.board ~= nil and rec.ok ~= false and not seen[rec.board] then
      seen[rec.board] = true
      out[#out + 1] = rec.board
    end
  end
  return out
end

--- Loads one side. label: "A" or "B" (for messages); board: only that board's records (from --boards runs). Failed records, files without samples and cut lines
--- are one-line usage errors (exit 2) or warnings, never compared. -> side {path, records, groups (latency
--- per process), rss, load, phases (memory phase name -> peaks), phase_order, ops = {{key, samples}}, model, device,
--- device_state, warnings, samples_files}
function M.load(path, label, board)
  local records, dir, warnings = M.read_records(path, label)
  if board then
    local mine = {}
    for _, rec in ipairs(records) do if rec.board == board then mine[#mine + 1] = rec end end
    if #mine == 0 then bad(("%s: %s has no record of board %s"):format(label, path, board)) end
    records, label = mine, ("%s (%s)"):format(label, board)
  end
  local side = { path = path, label = label, records = {}, groups = {}, rss = {}, load = {}, warnings = warnings,
    samples_files = {}, phases = {}, phase_order = {}, llm = {} }
  local failed = {}
  for i, rec in ipairs(records) do
    if rec.ok == false then
      failed[#failed + 1] = ("record %d (%s)"):format(i, rec.error and (tostring(rec.error.code) .. ": " .. tostring(rec.error.message)) or "failed")
    elseif type(rec.latency_ms) ~= "table" and type(rec.schema) ~= "string" then
      bad(("%s: %s record %d is not an odp result record"):format(label, path, i))
    else
      side.records[#side.records + 1] = rec
    end
  end
  if #side.records == 0 then
    bad(("%s: %s holds only failed runs (%s): nothing was measured"):format(label, path, failed[1]))
  elseif #failed > 0 then
    warnings[#warnings + 1] = ("%s: %d failed record(s) in %s left out, e.g. %s"):format(label, #failed, path, failed[1])
  end
  local ops_by_key, op_order, ops_complete, lost = {}, {}, true, nil
  for _, rec in ipairs(side.records) do
    local groups, file = M.samples_of(rec, dir)
    if not groups and type(rec.artifacts) == "table" and type(rec.artifacts.samples) == "table" then
      lost = ("%s: %s"):format(label, file)
      warnings[#warnings + 1] = lost .. ": its latency samples are left out"
    end
    if groups then
      side.samples_files[#side.samples_files + 1] = file
      for _, g in ipairs(groups) do side.groups[#side.groups + 1] = g end
    end
    if rec.peak_rss_kb then side.rss[#side.rss + 1] = rec.peak_rss_kb end
    -- each memory phase's peak (docs/memory.md), by phase name, in the order phases come
    for _, p in ipairs(type(rec.memory) == "table" and rec.memory.phases or {}) do
      if type(p.name) == "string" and math.type(p.peak_kb) then
        if not side.phases[p.name] then side.phases[p.name] = {}; side.phase_order[#side.phase_order + 1] = p.name end
        table.insert(side.phases[p.name], p.peak_kb)
      end
    end
    if rec.load_ms then side.load[#side.load + 1] = rec.load_ms end
    -- --llm: each process's time to first token and rates (docs/llm.md)
    for _, k in ipairs(LLM_ROWS) do
      local each = type(rec.llm) == "table" and rec.llm[k.key .. "_each"]
      for _, v in ipairs(type(each) == "table" and each or {}) do
        if type(v) == "number" and v == v then
          side.llm[k.key] = side.llm[k.key] or {}
          table.insert(side.llm[k.key], v)
        end
      end
    end
    local ops, why = op_samples(rec, dir)
    if why then warnings[#warnings + 1] = ("%s: %s: its operators are not compared"):format(label, why) end
    if ops then
      for _, op in ipairs(ops) do
        if not ops_by_key[op.key] then ops_by_key[op.key] = {}; op_order[#op_order + 1] = op.key end
        table.move(op.samples, 1, #op.samples, #ops_by_key[op.key] + 1, ops_by_key[op.key])
      end
    elseif rec.ops and #rec.ops > 0 then
      ops_complete = false
    end
  end
  if #side.groups == 0 and lost then bad(lost .. ": nothing left to compare") end
  if #side.groups == 0 then
    bad(("%s: %s has no latency samples (no samples.csv beside it or where artifacts.samples says): "
      .. "compare runs/<id>/ directories or records of odp runs that kept theirs"):format(label, path))
  end
  side.ops = {}
  for _, k in ipairs(op_order) do side.ops[#side.ops + 1] = { key = k, samples = ops_by_key[k] } end
  if not ops_complete and #side.ops == 0 then
    warnings[#warnings + 1] = ("%s: the operator table has no raw samples (its ETDump is gone): operators not compared"):format(label)
  end
  -- the outputs a run kept (--outputs): the first record that has them, its files beside its result.json
  for _, rec in ipairs(side.records) do
    for _, o in ipairs(type(rec.outputs) == "table" and rec.outputs or {}) do
      local d = type(o) == "table" and o.data
      if type(d) == "table" and d.file and d.dtype and not d.error then
        side.outputs = side.outputs or {}
        side.outputs[#side.outputs + 1] = { index = o.index, dtype = d.dtype, sizes = d.sizes, bytes = d.bytes,
          path = d.file:sub(1, 1) == "/" and d.file or (dir .. "/" .. d.file) }
      end
    end
    if side.outputs then break end
  end
  local first = side.records[1]
  side.model = first.model
  side.device = first.device or first.target
  side.target = first.target
  side.device_state = first.device_state
  for _, rec in ipairs(side.records) do
    if rec.model and first.model and rec.model.sha256 ~= first.model.sha256 then
      bad(("%s: %s mixes records of different models (%s, %s)"):format(label, path, first.model.path, rec.model.path))
    end
  end
  return side
end

-- What of a device_state says how the device was set up (not the moment's readings: before/after hold
-- temperatures and load, which differ on every run), with the CPU governors taken from `before`.
local function setup_of(state)
  local out = {}
  for k, v in pairs(state) do
    if k ~= "before" and k ~= "after" and k ~= "missing" then out[k] = v end
  end
  local govs = {}
  for _, c in ipairs(type(state.before) == "table" and state.before.cpus or {}) do
    if c.governor then govs[#govs + 1] = ("%s:%s"):format(tostring(c.cpu), c.governor) end
  end
  if #govs > 0 then out.governors = table.concat(govs, ",") end
  return out
end

-- The keys in which two tables differ (sorted): device_state setups, run parameters.
local function differing_keys(a, b)
  local keys, seen = {}, {}
  for _, t in ipairs { a, b } do
    for k in pairs(t) do
      if not seen[k] then
        seen[k] = true
        if json.encode(a[k]) ~= json.encode(b[k]) then keys[#keys + 1] = tostring(k) end
      end
    end
  end
  table.sort(keys)
  return keys
end

local function state_diff(a, b) return differing_keys(setup_of(a), setup_of(b)) end

-- A side's run parameters when all its records ran with the same ones (a sweep's JSONL does not).
local function params_of(side)
  local first = side.records[1].params or {}
  for _, rec in ipairs(side.records) do
    if json.encode(rec.params or {}) ~= json.encode(first) then return nil end
  end
  return first
end

--- One row: medians of a and b, ratio B/A, its bootstrap CI and the Mann-Whitney p, and the verdict
--- ("faster"|"slower"|"same"|"too few samples"; for kind "memory": "smaller"|"larger"). A difference needs
--- p < ALPHA and the whole CI beyond 1 ± opts.noise (a fraction, default NOISE). With opts.a_groups and
--- opts.b_groups (a and b by process) and a side of two processes or more, the CI is the hierarchical
--- bootstrap's (r.bootstrap = "hierarchical"), so process-to-process variation widens it.
function M.row(metric, unit, a, b, opts)
  opts = opts or {}
  local r = { metric = metric, unit = unit, a = { n = #a, median = stats.percentile(a, 50) },
    b = { n = #b, median = stats.percentile(b, 50) } }
  -- a side may have none of a metric (an operator only one side ran): no ratio, "too few samples"
  if r.a.median and r.b.median and r.a.median ~= 0 then r.ratio = r.b.median / r.a.median end
  if #a < M.MIN_SAMPLES or #b < M.MIN_SAMPLES or not r.ratio then
    r.verdict = "too few samples"
    return r
  end
  local boot = { resamples = opts.resamples, seed = opts.seed }
  local lo, hi
  if opts.a_groups and opts.b_groups and math.max(#opts.a_groups, #opts.b_groups) >= 2 then
    lo, hi = select(2, stats.bootstrap_ratio_groups(opts.a_groups, opts.b_groups, boot))
    r.bootstrap = "hierarchical"
  else
    lo, hi = select(2, stats.bootstrap_ratio(a, b, boot))
    r.bootstrap = "flat"
  end
  local _, p = stats.mann_whitney(a, b)
  r.ci95, r.p = json.array { lo, hi }, p
  local less, more = "faster", "slower"
  if opts.kind == "memory" then less, more = "smaller", "larger" end
  if opts.kind == "rate" then less, more = "slower", "faster" end -- tokens/s: more is faster
  local noise = opts.noise or M.NOISE
  if p < M.ALPHA and hi < 1 - noise then r.verdict = less
  elseif p < M.ALPHA and lo > 1 + noise then r.verdict = more
  else r.verdict = "same" end
  return r
end

--- Compares two loaded sides. opts: force (different models), resamples, seed, noise (a fraction, default
--- NOISE). -> {a, b, rows, notes}
function M.compare(A, B, opts)
  opts = opts or {}
  local notes = {}
  for _, w in ipairs(A.warnings) do notes[#notes + 1] = w end
  for _, w in ipairs(B.warnings) do notes[#notes + 1] = w end
  local ma, mb = A.model or {}, B.model or {}
  if ma.sha256 ~= mb.sha256 then
    local msg = ("A and B measured different models (%s sha256 %s, %s sha256 %s)"):format(tostring(ma.path),
      tostring(ma.sha256):sub(1, 12), tostring(mb.path), tostring(mb.sha256):sub(1, 12))
    if not opts.force then bad(msg .. ": --force to compare them anyway") end
    notes[#notes + 1] = msg
  end
  if A.device ~= B.device or A.target ~= B.target then
    notes[#notes + 1] = ("measured on different devices: A on %s (%s), B on %s (%s)"):format(tostring(A.device),
      tostring(A.target), tostring(B.device), tostring(B.target))
  end
  if type(A.device_state) == "table" and type(B.device_state) == "table" then
    local diff = state_diff(A.device_state, B.device_state)
    if #diff > 0 then notes[#notes + 1] = "device states differ in: " .. table.concat(diff, ", ") end
  elseif (A.device_state == nil) ~= (B.device_state == nil) then
    notes[#notes + 1] = "only one side recorded its device state: cannot tell whether they differ"
  end
  local pa, pb = params_of(A), params_of(B)
  if pa and pb then
    local diff = {}
    for _, k in ipairs(differing_keys(pa, pb)) do
      diff[#diff + 1] = ("%s %s vs %s"):format(k, json.encode(pa[k]), json.encode(pb[k]))
    end
    if #diff > 0 then notes[#notes + 1] = "A and B ran with different parameters: " .. table.concat(diff, ", ") end
  end
  for _, s in ipairs { A, B } do
    if #s.groups == 1 then
      notes[#notes + 1] = ("%s holds one process: its CIs cover only the noise within that process, not how "
        .. "processes differ (address layout, caches, clock): measure several processes per side (--repeat N, "
        .. "or --min-samples with a small -n)"):format(s.label)
    end
  end
  local rows = json.array()
  local o = { resamples = opts.resamples, seed = opts.seed, noise = opts.noise }
  local function with(extra)
    local t = {}
    for k, v in pairs(o) do t[k] = v end
    for k, v in pairs(extra) do t[k] = v end
    return t
  end
  local function add(r) if r.a.n > 0 and r.b.n > 0 then rows[#rows + 1] = r end end
  add(M.row("latency", "ms", measure.flatten(A.groups), measure.flatten(B.groups),
    with { a_groups = A.groups, b_groups = B.groups }))
  -- first iterations apart, and the warm ones still grouped by process
  local function split(groups)
    local first, warm = {}, {}
    for _, g in ipairs(groups) do
      if #g > 0 then first[#first + 1] = g[1] end
      if #g > 1 then warm[#warm + 1] = table.move(g, 2, #g, 1, {}) end
    end
    return first, warm
  end
  local fa, wa = split(A.groups)
  local fb, wb = split(B.groups)
  add(M.row("warm latency", "ms", measure.flatten(wa), measure.flatten(wb), with { a_groups = wa, b_groups = wb }))
  add(M.row("first iteration", "ms", fa, fb, o))
  add(M.row("model load", "ms", A.load, B.load, o))
  add(M.row("peak RSS", "kB", A.rss, B.rss, with { kind = "memory" }))
  for _, k in ipairs(LLM_ROWS) do
    if A.llm[k.key] and B.llm[k.key] then
      add(M.row(k.metric, k.unit, A.llm[k.key], B.llm[k.key], with { kind = k.kind }))
    end
  end
  for _, name in ipairs(A.phase_order) do
    if B.phases[name] then add(M.row("memory " .. name, "kB", A.phases[name], B.phases[name], with { kind = "memory" })) end
  end
  local bops = {}
  for _, op in ipairs(B.ops) do bops[op.key] = op.samples end
  for _, op in ipairs(A.ops) do
    if bops[op.key] then add(M.row("op " .. op.key, "ms", op.samples, bops[op.key], o)) end
  end
  local function side_info(s)
    return { path = s.path, records = #s.records, processes = #s.groups, model = s.model, device = s.device,
      target = s.target, samples = json.array(s.samples_files) }
  end
  local res = { a = side_info(A), b = side_info(B), rows = rows, notes = json.array(notes) }
  -- the outputs too, when both kept them and ran the same model: B against A, element by element
  if A.outputs and B.outputs and ma.sha256 == mb.sha256 then
    local in_a, entries = {}, json.array({})
    for _, o in ipairs(A.outputs) do in_a[o.index] = o end
    for _, o in ipairs(B.outputs) do
      local ref = in_a[o.index]
      if ref then
        local e, why = tensors.compare_files(o.path, ref.path, o)
        entries[#entries + 1] = e or { index = o.index, error = why }
      end
    end
    if #entries > 0 then res.outputs = { path = A.path, kind = "run", outputs = entries } end
    local function inputs_of(side)
      local shas = {}
      for _, f in ipairs(type(side.records[1].inputs) == "table" and side.records[1].inputs or {}) do
        shas[#shas + 1] = tostring(f.sha256)
      end
      return table.concat(shas, ",")
    end
    if inputs_of(A) ~= inputs_of(B) then
      notes[#notes + 1] = "outputs compared, but A and B had different inputs (their sha256s differ)"
    end
  elseif A.outputs and B.outputs then
    notes[#notes + 1] = "outputs not compared: A and B ran different models"
  end
  return res
end

local function pct(v) return ("%+.1f%%"):format((v - 1) * 100) end

--- Checks the --noise and --fail-if-slower percentages of a command line (usage errors exit 2).
function M.check_thresholds(opts)
  if opts.fail_if_slower and not (opts.fail_if_slower >= 0) then bad("--fail-if-slower must be a percentage >= 0") end
  if not (opts.noise >= 0 and opts.noise < math.huge) then
    bad(("--noise must be a percentage >= 0, got %s"):format(opts.noise))
  end
end

--- The CI gate (`--fail-if-slower PCT`): fails when B's latency is slower than A's by more than pct % with
--- the whole 95% CI beyond it. -> {pct, failed, text} (text: one line saying why), or nil when pct is nil.
function M.gate(res, fail_if_slower)
  if not fail_if_slower then return nil end
  local lat = res.rows[1]
  local limit = 1 + fail_if_slower / 100
  if lat and lat.ci95 and lat.ci95[1] > limit then
    return { pct = fail_if_slower, failed = true, text = ("FAIL: B is slower than A by %s (95%% CI %s .. %s), " ..
      "beyond --fail-if-slower %g%%"):format(pct(lat.ratio), pct(lat.ci95[1]), pct(lat.ci95[2]), fail_if_slower) }
  end
  return { pct = fail_if_slower, failed = false, text = lat and lat.ci95 and ("pass: the 95%% CI's low end %s is " ..
    "within --fail-if-slower %g%%"):format(pct(lat.ci95[1]), fail_if_slower) or
    ("pass: too few samples for a CI, so nothing is beyond --fail-if-slower %g%%"):format(fail_if_slower) }
end

--- The words a verdict is shown with.
M.VERDICT_TEXT = { same = "no difference within noise" }

return M
