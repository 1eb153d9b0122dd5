--- odp history: the runs of every series over time, their changes and regressions (docs/history.md).
-- lua/odp/results/history.lua keeps the runs, lua/odp/results/detect.lua finds the changes; this is the
-- command line.
local cli = require("odp.core.options")
local errors = require("odp.core.errors")
local history = require("odp.results.history")
local json = require("odp.core.json")
local report = require("odp.results.report")
local sys = require("odp.sys")
local schema = require("odp.results.schema")

local M = { summary = "Results over time: series with trends, one series' runs and changes, regressions, import" }

M.usage = "odp history [SERIES | --regressions [--fail] [--fail-undecided] | import PATH...] [--model M] [--board B] [--metric X] [--since T]"
M.description = "Every run odp makes is added to a history (--history URL, $ODP_HISTORY, else\n" ..
  "~/.local/share/odp/history.db). Without arguments: each series with its latest value, its change against\n" ..
  "its baseline (the first runs in range) and a sparkline. SERIES (an id from that list): its runs, their\n" ..
  "commits and medians with 95% CIs, the changes found, and an SVG trend (--svg). --regressions: the changes\n" ..
  "that made a series slower or larger, in every series; --fail exits 1 when one still stands. A series whose\n" ..
  "runs cannot tell (too few runs on a side of a change, last runs that moved) is listed as undecided, with why\n" ..
  "and what would decide: never as no change. --fail-undecided exits 1 on those too (without it they are\n" ..
  "listed, and a line on stderr says the exit 0 leaves them undecided).\n" ..
  "import PATH...: adds runs/ trees, result.json and sweep JSONL files that are not there yet."

M.options = {
  { "model", "Only series of this model (file name or sha256 prefix)", nil, "string" },
  { "board", "Only series of boards whose name or SoC contains this", nil, "string" },
  { "metric", "Only this metric (" .. table.concat(history.metric_names(), ", ") .. ")", nil, "string" },
  { "since", "Only runs since: 7d, 12h, 2w or a date (2026-12-01)", nil, "string", metavar = "T" },
  { "regressions", "Find the changes that made each series slower or larger", false, "bool" },
  { "fail", "With --regressions: exit 1 when a regression is found that no later change undid", false, "bool" },
  { "fail-undecided", "With --regressions: exit 1 also when a series is undecided (its runs cannot tell yet)", false, "bool" },
  { "last", "With --regressions and no --since: look at each series' last N runs", 50, "posint" },
  { "min-effect", "Smallest change reported, in percent", 2, "number", metavar = "PCT" },
  { "svg", "With SERIES: where the trend goes [default: history-SERIES.svg]", nil, "outfile", metavar = "FILE" },
  { "html", "With SERIES: also write its page (odp report's history view) to FILE", nil, "outfile", metavar = "FILE" },
}

local SPARKS = { "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█" }

--- A sparkline of values (▁ the smallest, █ the largest).
function M.sparkline(values)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(values) do lo, hi = math.min(lo, v), math.max(hi, v) end
  local out = {}
  for i, v in ipairs(values) do
    out[i] = SPARKS[hi > lo and math.floor((v - lo) / (hi - lo) * 7 + 0.5) + 1 or 4]
  end
  return table.concat(out)
end

local function pct(v) return v and ("%+.1f%%"):format(v * 100) or "-" end

local function value(v, unit)
  if v == nil then return "-" end
  if unit == "ms" then return report.duration(v) end
  return ("%s %s"):format(report.sig4(v), unit or "")
end

local function short(sha) return sha and sha:sub(1, 12) or "-" end

-- A series' parameters (canonical JSON in the history) as "k=v k=v", sorted: what tells apart series of one
-- model, board and metric (another -n, --threads, sweep value).
local function params_text(params)
  local t = type(params) == "string" and json.decode(params) or params
  if type(t) ~= "table" then return params or "-" end
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for i, k in ipairs(keys) do
    local v = t[k]
    out[i] = ("%s=%s"):format(k, type(v) == "table" and json.encode(v) or tostring(v))
  end
  return #out > 0 and table.concat(out, " ") or "-"
end

local function iso(t) return os.date("!%Y-%m-%d %H:%M:%S", math.floor(t)) end

-- Writes rows (a list of flat tables) in the format asked; human is given as text.
local function emit(opts, rows, human)
  local text
  if opts.format == "json" then text = json.encode(json.array(rows), { indent = true }) .. "\n"
  elseif opts.format == "jsonl" then
    local lines = {}
    for i, r in ipairs(rows) do lines[i] = json.encode(r) end
    text = table.concat(lines, "\n") .. (#lines > 0 and "\n" or "")
  elseif opts.format == "csv" then text = report.formats.csv(rows)
  else text = human() end
  if opts.out then errors.check(sys.write_file(opts.out, text)) else io.stdout:write(text) end
end

local function list(db, opts)
  local series = errors.check(db:series { model = opts.model, board = opts.board, metric = opts.metric,
    since = opts.since })
  local rows = {}
  for i, s in ipairs(series) do
    rows[i] = { id = s.id, name = s.name, metric = s.metric, unit = s.unit, model = s.model_name,
      model_sha256 = s.model_sha256, board = s.board, soc = s.soc, kernel = s.kernel, runner_sha256 = s.runner_sha256,
      runner_version = s.runner_version, params = s.params, runs = s.n, latest = s.latest, baseline = s.baseline,
      change = s.change, latest_at = s.latest_t and iso(s.latest_t), recent = json.array(s.recent) }
  end
  emit(opts, rows, function()
    if #rows == 0 then return ("no series in %s%s\n"):format(db.url, opts.since and (" since " .. opts.since) or "") end
    local t = {}
    for i, r in ipairs(rows) do
      t[i] = { id = r.id, model = r.model or "-", board = r.board or "-", params = params_text(r.params), metric = r.metric, runs = r.runs,
        latest = value(r.latest, r.unit), change = pct(r.change), trend = M.sparkline(r.recent),
        at = r.latest_at }
    end
    return report.table(t, { { key = "id", align = "r" }, { key = "model" }, { key = "board" }, { key = "params" }, { key = "metric" },
      { key = "runs", align = "r" }, { key = "latest", align = "r" }, { key = "change", title = "vs baseline", align = "r" },
      { key = "trend" }, { key = "at", title = "latest run (UTC)" } }) .. "\n"
  end)
  return 0
end

local function find_series(db, word)
  local id = math.tointeger(tonumber(word))
  if not id then errors.fail("EUSAGE", ("SERIES is a series id from `odp history`, got '%s'"):format(word)) end
  local s, err, code = db:get_series(id)
  if s == nil then errors.check(s, err, code) end
  if not s then errors.fail("EUSAGE", ("no series %d in %s (`odp history` lists them)"):format(id, db.url)) end
  return s
end

local function show(db, opts, word)
  local s = find_series(db, word)
  local points = errors.check(db:points(s.id, { since = opts.since }))
  local changes, verdict = history.detect(points, { min_effect = opts.min_effect / 100 })
  local at = {}
  for _, c in ipairs(changes) do at[c.index] = c end
  local rows = {}
  for i, p in ipairs(points) do
    local c = at[i]
    rows[i] = { run = i, time = iso(p.t), commit = p.commit_id, odp_version = p.odp_version, host = p.host,
      median = p.median, ci_lo = p.lo, ci_hi = p.hi, n = p.n, dirty = p.dirty, conditions = p.conditions,
      record = p.record_path, change = c and c.effect, change_ci_lo = c and c.ci[1], change_ci_hi = c and c.ci[2],
      change_p = c and c.p }
  end
  local svg_path = opts.svg or ("history-%d.svg"):format(s.id)
  local pts, marks = {}, {}
  for i, p in ipairs(points) do pts[i] = { x = i, y = p.median, lo = p.lo, hi = p.hi } end
  for _, c in ipairs(changes) do marks[#marks + 1] = { x = c.index - 0.5, label = pct(c.effect) } end
  local plot = require("odp.results.plot") -- lazy: start-up
  errors.check(sys.write_file(svg_path, plot.svg({ { name = "", points = pts } }, {
    title = s.name, xlabel = "run (oldest first)", ylabel = ("%s (%s), median with 95%% CI"):format(s.metric, s.unit or ""),
    marks = marks, note = ("model %s · runner %s · %s"):format(short(s.model_sha256), short(s.runner_sha256),
      s.kernel or "") })))
  if opts.html then
    local page_points, page_changes = {}, {}
    for i, p in ipairs(points) do
      page_points[i] = { t = iso(p.t), p50 = p.median, ci_lo = p.lo, ci_hi = p.hi, commit = p.commit_id }
    end
    for i, c in ipairs(changes) do
      page_changes[i] = { t = iso(points[c.index].t), before = c.before, after = c.after, pct = c.effect * 100,
        note = ("95%% CI [%s, %s], p = %.2g, %d run(s) after"):format(pct(c.ci[1]), pct(c.ci[2]), c.p, c.runs_after) }
    end
    -- lazy: start-up
    errors.check(sys.write_file(opts.html, require("odp.results.html").history { series = s.name, unit = s.unit,
      points = page_points, changes = page_changes, verdict = verdict, min_effect = opts.min_effect,
      about = { { "series", tostring(s.id) }, { "metric", ("%s (%s)"):format(s.metric or "?", s.unit or "") },
        { "model", ("%s (sha256 %s)"):format(s.model_name or "?", short(s.model_sha256)) },
        { "runner", ("sha256 %s%s"):format(short(s.runner_sha256), s.runner_version and (" version " .. s.runner_version) or "") },
        { "board", ("%s · %s · kernel %s"):format(s.board or "?", s.soc or "?", s.kernel or "?") },
        { "flow", s.flow or "?" }, { "parameters", params_text(s.params) } } }))
  end
  emit(opts, rows, function()
    local out = { ("series %d: %s"):format(s.id, s.name),
      ("model %s (sha256 %s) · runner sha256 %s%s"):format(s.model_name or "?", short(s.model_sha256),
        short(s.runner_sha256), s.runner_version and (" version " .. s.runner_version) or ""),
      ("board %s · %s · kernel %s · %s %s"):format(s.board or "?", s.soc or "?", s.kernel or "?", s.flow or "?", params_text(s.params)),
      "" }
    local t = {}
    for i, r in ipairs(rows) do
      t[i] = { run = r.run, time = r.time, commit = r.commit and r.commit:sub(1, 10) or "-", odp = r.odp_version or "-",
        median = value(r.median, s.unit),
        ci = r.ci_lo and ("[%s, %s]"):format(value(r.ci_lo, s.unit), value(r.ci_hi, s.unit)) or "-", n = r.n or "-",
        note = (r.dirty and ("dirty (" .. (r.conditions ~= "" and r.conditions or "throttled") .. ")") or "")
          .. (r.change and (" <- change %s"):format(pct(r.change)) or "") }
    end
    out[#out + 1] = report.table(t, { { key = "run", align = "r" }, { key = "time", title = "time (UTC)" },
      { key = "commit" }, { key = "odp" }, { key = "median", align = "r" }, { key = "ci", title = "95% CI", align = "r" },
      { key = "n", align = "r" }, { key = "note", title = "" } })
    out[#out + 1] = ""
    if verdict.state == "undecided" then
      out[#out + 1] = ("undecided: %s; %s"):format(verdict.why, verdict.need)
    elseif #changes == 0 then
      out[#out + 1] = ("no change of %g%% or more found"):format(opts.min_effect)
    end
    for _, c in ipairs(changes) do
      local p = points[c.index]
      out[#out + 1] = ("change at run %d (%s%s): %s, 95%% CI [%s, %s], p = %.2g, %s -> %s, %d run(s) after")
        :format(c.index, iso(p.t), p.commit_id and (", commit " .. p.commit_id:sub(1, 10)) or "", pct(c.effect),
          pct(c.ci[1]), pct(c.ci[2]), c.p, value(c.before, s.unit), value(c.after, s.unit), c.runs_after)
    end
    out[#out + 1] = "trend: " .. svg_path
    return table.concat(out, "\n") .. "\n"
  end)
  return 0
end

--- The regressions of every series matching opts: changes up (slower, larger) among each series' last
--- opts.last runs, or since opts.since; each marked fixed when a later change brought the series back within
--- min_effect of before. The detector sees a window of runs before them too, and loads samples only around
--- candidates, so a scan reads a few rows per series, not the whole history.
function M.regressions(db, opts)
  local detect = require("odp.results.detect") -- lazy: start-up
  local since = opts.since and assert(history.since(opts.since))
  local series = errors.check(db:series { model = opts.model, board = opts.board, metric = opts.metric, since = since })
  local found, undecided = {}, {}
  local dopts = { min_effect = opts.min_effect / 100 }
  dopts.load_samples = function(need) errors.check(db:load_samples(need)) end
  for _, s in ipairs(series) do
    local points = errors.check(db:points(s.id, since and { since = since, context = detect.DEFAULTS.window, samples = false }
      or { last = opts.last + detect.DEFAULTS.window, samples = false }))
    local first_new = since and 1 or math.max(1, #points - opts.last + 1)
    local changes, verdict = history.detect(points, dopts)
    if verdict.state == "undecided" then
      undecided[#undecided + 1] = { series = s.id, name = s.name, params = s.params, runs = #points, why = verdict.why,
        need = verdict.need }
    end
    -- a regression is a move the worse way: up for times and sizes, down for rates and agreement
    local higher = schema.higher_is_better(s.metric)
    local worse = higher and "down" or "up"
    for n, c in ipairs(changes) do
      local p = points[c.index]
      if c.direction == worse and (since and p.t >= since or not since and c.index >= first_new) then
        local fixed
        for m = n + 1, #changes do
          local back = changes[m].after
          if higher and back >= c.before * (1 - dopts.min_effect) or not higher and back <= c.before * (1 + dopts.min_effect)
          then fixed = points[changes[m].index] break end
        end
        found[#found + 1] = { series = s.id, name = s.name, metric = s.metric, unit = s.unit, board = s.board,
          model = s.model_name, run_id = p.run_id, time = iso(p.t), change = c.effect, ci_lo = c.ci[1], ci_hi = c.ci[2],
          p = c.p, before = c.before, after = c.after, runs_after = c.runs_after, fixed_at = fixed and iso(fixed.t) }
      end
    end
  end
  local ids = {}
  for i, f in ipairs(found) do ids[i] = f.run_id end
  local runs = errors.check(db:runs(ids))
  for _, f in ipairs(found) do
    local r = runs[f.run_id] or {}
    f.commit, f.record = r.commit_id, r.record_path
  end
  return found, undecided
end

local function regressions(db, opts)
  local found, undecided = M.regressions(db, opts)
  local standing = 0
  for _, r in ipairs(found) do if not r.fixed_at then standing = standing + 1 end end
  local rows = {}
  for i, r in ipairs(found) do rows[i] = r end
  for _, u in ipairs(undecided) do
    rows[#rows + 1] = { series = u.series, name = u.name, state = "undecided", why = u.why, need = u.need, runs = u.runs }
  end
  emit(opts, rows, function()
    local lines = {}
    for _, u in ipairs(undecided) do
      lines[#lines + 1] = ("series %d %s (%s): undecided: %s; %s\n"):format(u.series, u.name, params_text(u.params), u.why, u.need)
    end
    local tail = table.concat(lines)
    if #found == 0 then
      return ("no regression of %g%% or more%s in %s%s\n"):format(opts.min_effect,
        opts.since and (" since " .. opts.since) or "", db.url,
        #undecided > 0 and (" among the series that could tell; %d series undecided"):format(#undecided) or "") .. tail
    end
    local t = {}
    for i, r in ipairs(found) do
      t[i] = { series = r.series, name = r.name, time = r.time, commit = r.commit and r.commit:sub(1, 10) or "-",
        change = pct(r.change), ci = ("[%s, %s]"):format(pct(r.ci_lo), pct(r.ci_hi)),
        level = ("%s -> %s"):format(value(r.before, r.unit), value(r.after, r.unit)), after = r.runs_after,
        state = r.fixed_at and ("fixed " .. r.fixed_at) or "standing" }
    end
    return report.table(t, { { key = "series", align = "r" }, { key = "name" },
      { key = "time", title = "first run after (UTC)" }, { key = "commit" }, { key = "change", align = "r" },
      { key = "ci", title = "95% CI", align = "r" }, { key = "level" }, { key = "after", title = "runs after", align = "r" },
      { key = "state" } }) .. ("\n%d regression(s), %d standing%s\n"):format(#found, standing,
        #undecided > 0 and (", %d series undecided"):format(#undecided) or "") .. tail
  end)
  local code = 0
  if opts.fail and standing > 0 then
    io.stderr:write(("odp: %d regression(s) still standing (--fail)\n"):format(standing))
    code = 1
  end
  if #undecided > 0 and opts.fail_undecided then
    io.stderr:write(("odp: %d series undecided (--fail-undecided)\n"):format(#undecided))
    code = 1
  elseif #undecided > 0 and opts.fail then
    io.stderr:write(("odp: %d series undecided: their runs cannot tell yet (not counted by --fail; --fail-undecided counts them)\n")
      :format(#undecided))
  end
  return code
end

local function import(db, opts, paths)
  if #paths == 0 then errors.fail("EUSAGE", "odp history import takes runs/ directories, result.json or .jsonl files") end
  local res = db:import(paths)
  for _, w in ipairs(res.warnings) do io.stderr:write("odp: warning: ", w, "\n") end
  for _, f in ipairs(res.failed) do io.stderr:write("odp: ", f, "\n") end
  if not opts.quiet then
    io.stdout:write(("%d run(s) added, %d already there, %d failed; history %s\n")
      :format(res.added, res.skipped, #res.failed, db.url))
  end
  return #res.failed > 0 and 1 or 0
end

function M.main(args)
  local opts, rest = cli.parse_command(M, args)
  if not opts then return 0 end
  if not (opts.min_effect > 0 and opts.min_effect < 100) then
    errors.fail("EUSAGE", ("--min-effect must be a percentage between 0 and 100, got %s"):format(opts.min_effect))
  end
  if opts.since and not history.since(opts.since) then errors.fail("EUSAGE", "--since: " .. select(2, history.since(opts.since))) end
  if opts.fail and not opts.regressions then errors.fail("EUSAGE", "--fail goes with --regressions") end
  if opts.fail_undecided and not opts.regressions then errors.fail("EUSAGE", "--fail-undecided goes with --regressions") end
  local url = history.url(opts)
  if not url then errors.fail("EUSAGE", "no history: --no-history or ODP_HISTORY=off says none; give --history URL") end
  if rest[1] ~= "import" and not url:match("^postgres") and not url:match("^%a+=") and not sys.stat((url:gsub("^sqlite:", ""))) then
    errors.fail("EUSAGE", ("no history at %s yet: runs are added as they finish, or `odp history import runs/`"):format(url))
  end
  local db = errors.check(history.open(url))
  if rest[1] == "import" then return import(db, opts, table.move(rest, 2, #rest, 1, {})) end
  if #rest > 1 then errors.fail("EUSAGE", ("unexpected argument '%s' (odp history --help)"):format(rest[2])) end
  if opts.regressions then
    if rest[1] then errors.fail("EUSAGE", "--regressions looks at every series: give no SERIES (filter with --model, --board)") end
    return regressions(db, opts)
  end
  if rest[1] then return show(db, opts, rest[1]) end
  return list(db, opts)
end

return M
