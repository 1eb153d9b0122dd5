--- odp report: one self-contained HTML page for a run, a sweep or a comparison (docs/report.md).
-- This file reads the inputs and writes the files; lua/odp/results/html.lua draws the page.
local cli = require("odp.core.options")
local compare = require("odp.results.compare")
local errors = require("odp.core.errors")
local html = require("odp.results.html")
local json = require("odp.core.json")
local sys = require("odp.sys")
local result = require("odp.results.result")

local M = { summary = "Write one self-contained HTML report of a run, a sweep (JSONL) or a comparison (A B)" }

M.usage = "odp report RUN_DIR|RECORD|SWEEP.jsonl [B] [--out FILE.html] [--x PARAM] [--group PARAM] [--fail-if-slower PCT]"
M.description = "One HTML file that opens from disk with no server and no network, and reads without JavaScript.\n" ..
  "  odp report runs/<id>/          a run: latency distribution and time series, operators, memory, steps\n" ..
  "  odp report s.jsonl             a sweep: p50 with a p10-p90 band over the swept parameter, points, failures\n" ..
  "  odp report A B                 a comparison (as odp compare A B): verdict, both distributions, operator deltas\n" ..
  "Written to runs/<id>/report.html, s.html beside a file, or compare.html (--out to choose); the path is printed.\n" ..
  "A run whose ETDump is still there also gets FILE.trace.json beside the page (Chrome/Perfetto), linked from it."

M.options = {
  { "x", "Sweep: the parameter on the x axis (default: the swept parameter)", nil, "string", metavar = "PARAM" },
  { "group", "Sweep: the parameter that splits the points into lines (default: a second swept one, else the board)",
    nil, "string", metavar = "PARAM" },
  { "fail-if-slower", "Comparison: show the gate's decision for this threshold (as odp compare)", nil, "number",
    metavar = "PCT" },
  { "noise", "Comparison: the noise threshold of a verdict (as odp compare)", math.tointeger(compare.NOISE * 100),
    "number", metavar = "PCT" },
  { "force", "Comparison: compare records of different models", false, "bool" },
  { "no-trace", "Run: write no Chrome trace beside the page", false, "bool" },
}

local function usage(msg) errors.fail("EUSAGE", msg) end

local function dirname(p) return p:match("^(.*)/[^/]*$") or "." end

-- The path of target relative to the directory from_dir (both made absolute first): what an <a href> in a
-- page in from_dir needs.
local function relative(from_dir, target)
  local a = sys.realpath(from_dir) or from_dir
  local b = sys.realpath(target) or target
  local pa, pb = {}, {}
  for part in a:gmatch("[^/]+") do pa[#pa + 1] = part end
  for part in b:gmatch("[^/]+") do pb[#pb + 1] = part end
  local i = 1
  while pa[i] and pb[i] and pa[i] == pb[i] do i = i + 1 end
  local out = {}
  for _ = i, #pa do out[#out + 1] = ".." end
  for j = i, #pb do out[#out + 1] = pb[j] end
  return (table.concat(out, "/"):gsub("[^%w%-%._~/]", function(c) return ("%%%02X"):format(c:byte()) end))
end

-- The run directory's files (sorted), linked relative to the page's directory; the page and its trace are
-- not listed (a second report of the same run gives the same bytes).
local function run_files(dir, page_dir, out)
  local own = { [sys.realpath(out) or out] = true, [sys.realpath(out:gsub("%.html?$", "") .. ".trace.json") or ""] = true }
  local names = sys.readdir(dir) or {}
  table.sort(names)
  local out = {}
  for _, name in ipairs(names) do
    local st = sys.stat(dir .. "/" .. name)
    if name ~= "." and name ~= ".." and st and st.type == "file" and not own[sys.realpath(dir .. "/" .. name)] then
      out[#out + 1] = { name = name, href = relative(page_dir, dir .. "/" .. name), bytes = st.size }
    end
  end
  return out
end

-- The record's memory timeline (memory.csv in its directory) as rows, or nil.
local function memory_rows(rec, record_dir)
  if not (type(rec.memory) == "table" and rec.memory.timeline) then return nil end
  local rows = require("odp.results.memory").timeline(record_dir .. "/memory.csv") -- lazy: start-up
  return rows and #rows > 0 and rows or nil
end

-- The record's ETDump (and memory timeline) as a Chrome trace beside the page: {href, events} | nil (neither
-- left, or unreadable: the page says nothing of a trace then; a note on stderr says why).
local function write_trace(rec, record_dir, out, quiet)
  local trace = require("odp.results.trace") -- lazy: start-up
  local tr
  local modelled = type(rec.latency_ms) == "table" and rec.latency_ms.modelled
  if type(rec.artifacts) == "table" and rec.artifacts.etdump ~= nil then
    -- the run's own copy: a later run's file is never drawn as this one's; the twin's canned file is no model's
    local path, why = result.artifact(rec, "etdump", record_dir)
    if modelled then
      if not quiet then io.stderr:write("odp: no trace: the QEMU twin's ETDump is canned, not this model's\n") end
    elseif not path then
      if not quiet then io.stderr:write(("odp: no trace: %s\n"):format(why)) end
    else
      local doc, err = require("odp.parse.etdump").read(path) -- lazy: start-up
      if doc then
        local cycles = rec.ops_unit == "cycles"
        local ds = type(rec.device_state) == "table" and rec.device_state or {}
        tr = trace.chrome(doc, { time_scale = cycles and "cycles" or "ns", clock_hz = cycles and ds.cpu_hz or nil })
      elseif not quiet then
        io.stderr:write(("odp: no trace: %s: %s\n"):format(path, err))
      end
    end
  end
  -- odp run --sample: the samples and the helper's frequency and temperature readings on the same clock
  local samples = tr and rec.cpu_profile and sys.read_file(record_dir .. "/cpu_profile.samples")
  if samples then
    local runner = type(rec.runner) == "table" and rec.runner.path or nil
    -- lazy: start-up
    local more = require("odp.results.cpu_profile").trace_events(samples, { runner = runner, runner_remote = runner,
      local_modules = type(rec.target) == "string" and rec.target:match("^local:") ~= nil })
    if more then table.move(more, 1, #more, #tr.traceEvents + 1, tr.traceEvents) end
  end
  -- the phases are drawn without a timeline too: a runner that exits within a millisecond or two of a loaded
  -- machine can leave the 1 kHz sampler no row, while its phases were read at their boundaries
  local rows = memory_rows(rec, record_dir)
  local phases = type(rec.memory) == "table" and type(rec.memory.phases) == "table" and rec.memory.phases or nil
  if rows or (phases and #phases > 0) then
    tr = tr or { traceEvents = json.array({}), displayTimeUnit = "ms", otherData = { source = "odp" } }
    trace.add_memory(tr, rows or {}, phases)
  end
  if not tr then return nil end
  -- what a trace viewer draws: every event but the metadata that names processes and threads
  local events = 0
  for _, e in ipairs(tr.traceEvents) do if e.ph ~= "M" then events = events + 1 end end
  if events == 0 then
    if not quiet then io.stderr:write("odp: no trace: the run left nothing to draw in one\n") end
    return nil
  end
  local file = out:gsub("%.html?$", "") .. ".trace.json"
  errors.check(sys.write_file(file, trace.encode(tr) .. "\n"))
  return { href = relative(dirname(out), file), events = events, path = file }
end

local function report_run(rec, record_dir, run_dir, out, opts, source)
  local groups = compare.samples_of(rec, record_dir)
  local page_dir = dirname(out)
  local trace = not opts.no_trace and write_trace(rec, record_dir, out, opts.quiet) or nil
  -- the samples' call stacks (odp run --sample): the page's flame graphs
  -- lazy: start-up
  local folded = rec.cpu_profile and require("odp.results.cpu_profile").read_folded(record_dir .. "/cpu_profile.folded")
  return html.run(rec, { samples = groups, files = run_dir and run_files(run_dir, page_dir, out) or nil, trace = trace,
    source = source, memory_rows = memory_rows(rec, record_dir), folded = folded or nil }), trace
end

function M.main(args)
  local opts, rest = cli.parse_command(M, args)
  if not opts then return 0 end
  if #rest < 1 or #rest > 2 then
    usage(("report takes a run, a sweep, or two results A B; got %d argument(s) (odp report --help)"):format(#rest))
  end
  if opts.format and opts.format ~= "human" then usage("odp report writes HTML: drop --format") end
  local out, page, kind, extra
  if #rest == 2 then
    compare.check_thresholds(opts)
    local A = compare.load(rest[1], "A")
    local B = compare.load(rest[2], "B")
    local res = compare.compare(A, B, { force = opts.force, noise = opts.noise / 100 })
    out = opts.out or "compare.html"
    page, kind = html.comparison(res, A, B, compare.gate(res, opts.fail_if_slower)), "comparison"
    if not opts.quiet then
      for _, n in ipairs(res.notes) do io.stderr:write("odp: ", n, "\n") end
    end
  else
    local path = rest[1]:gsub("(.)/+$", "%1")
    local st = sys.stat(path)
    if not st then usage(("cannot read '%s'"):format(path)) end
    local records, record_dir, warnings = compare.read_records(path, "input")
    if not opts.quiet then
      for _, w in ipairs(warnings) do io.stderr:write("odp: ", w, "\n") end
    end
    if #records == 1 then
      local run_dir = st.type == "dir" and path or nil
      out = opts.out or (run_dir and (run_dir .. "/report.html") or (path:gsub("%.jsonl?$", "") .. ".html"))
      page, extra = report_run(records[1], record_dir, run_dir or (type(records[1].artifacts) == "table" and
        type(records[1].artifacts.run_dir) == "string" and sys.stat(records[1].artifacts.run_dir) and
        records[1].artifacts.run_dir) or nil, out, opts, path)
      kind = "run"
    else
      out = opts.out or (path:gsub("%.jsonl?$", "") .. ".html")
      page, kind = html.sweep(records, { x = opts.x, group = opts.group, source = path }), "sweep"
    end
  end
  errors.check(sys.write_file(out, page))
  io.stdout:write(out, "\n")
  io.stdout:flush()
  if not opts.quiet then
    io.stderr:write(("odp: %s report, %d bytes%s\n"):format(kind, #page,
      extra and (", trace %s (%d events)"):format(extra.path, extra.events) or ""))
  end
  return 0
end

return M
