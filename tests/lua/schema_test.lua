-- The record schema (lua/odp/results/schema.lua): a field declared in that one place shows in the terminal
-- report, the HTML page, JSON, CSV and the history; the one reader checks types (finite numbers), keeps
-- false and zero, and names the fields a record of another odp version has that this one does not know.
local T = require("t")
local history = require("odp.results.history")
local html = require("odp.results.html")
local json = require("odp.core.json")
local report = require("odp.results.report")
local result = require("odp.results.result")
local schema = require("odp.results.schema")
local sys = require("odp.sys")

local root = T.root()
local dir = T.tmpdir()

local function record(over)
  local r = { schema = schema.VERSION, ok = true, flow = "executorch", device = "host", target = "local:",
    started_at = "2026-12-03T10:00:00Z", model = { path = "/m/add.pte", sha256 = ("a"):rep(64), bytes = 1156 },
    params = { num_executions = 10 }, latency_ms = { n = 10, p50 = 0.0201, mean = 0.021, min = 0.019, max = 0.03,
      p90 = 0.025, p99 = 0.029, ci95 = { 0.02, 0.0205 }, source = "log" },
    load_ms = 0.178, peak_rss_kb = 4592, warnings = json.array(), artifacts = {} }
  for k, v in pairs(over or {}) do r[k] = v end
  return r
end

T.test("a field declared once shows in the terminal report, the HTML page, JSON, CSV and the history", function()
  -- the field a new feature would add: one entry, nothing else changed
  schema.add({ "energy_mj", "number", unit = "mJ", metric = "energy_mj", label = "energy", format = "%.3f",
    history = true }, { after = "peak_rss_kb" })
  local ok, err = pcall(function()
    local a, b = record { energy_mj = 1.25 }, record { energy_mj = 2.5, started_at = "2026-12-03T10:05:00Z" }
    T.eq(select(2, schema.read(a)).unknown, {}, "the reader knows it")

    local human = report.formats.human({ a })
    T.match(human, "\n  energy +1%.250 mJ\n", "terminal report: label, value in its format, unit")
    T.ok(human:find("peak RSS", 1, true) < human:find("energy", 1, true), "after peak RSS, where it was declared")

    local page = html.run(a)
    T.match(page, '<section id="sec%-measurements">.-<th scope="row">energy</th><td>1%.250 mJ</td>',
      "HTML: in the Measurements section")

    local back = json.decode(report.formats.json({ a }))
    T.eq(back.energy_mj, 1.25, "JSON")
    local rows = {}
    for line in report.formats.csv({ a, b }):gmatch("[^\n]+") do
      local cells = {}
      for c in (line .. ","):gmatch("([^,]*),") do cells[#cells + 1] = c end
      rows[#rows + 1] = cells
    end
    local col
    for i, name in ipairs(rows[1]) do if name == "energy_mj" then col = i end end
    T.ok(col, "CSV: an energy_mj column")
    local function cell(row) return row[col] end
    T.eq({ cell(rows[2]), cell(rows[3]) }, { "1.25", "2.5" }, "CSV: each record's value")

    local metrics = {}
    for _, m in ipairs(schema.metrics(a)) do metrics[m.key] = m end
    T.eq(metrics.energy_mj and metrics.energy_mj.units, "mJ", "lab engines' metrics (LAVA, JUnit)")

    local db = assert(history.open(dir .. "/h.db"))
    assert(db:add(a))
    assert(db:add(b))
    local s = assert(db:series { metric = "energy_mj" })
    T.eq(#s, 1, "history: one series")
    T.eq(s[1].unit, "mJ")
    local pts = assert(db:points(s[1].id))
    T.eq({ pts[1].median, pts[2].median }, { 1.25, 2.5 }, "history: a point per run, in order")
    T.eq(#assert(db:series { metric = "load_ms" }), 1, "the history's existing metric names stay")
    db:close()
  end)
  schema.remove("energy_mj")
  if not ok then error(err, 0) end
  T.eq(schema.field("energy_mj"), nil, "taken out again")
  T.ok(not report.formats.human({ record { energy_mj = 1.25 } }):find("energy", 1, true),
    "an undeclared field is not shown")
end)

T.test("the reader: types checked, numbers finite, false and 0 kept, unknown fields named", function()
  local r = record { load_ms = 1 / 0, peak_rss_kb = "big", status = 0, future_field = { x = 1 },
    latency_ms = { n = 10, p50 = -1 / 0, mean = 0 / 0, min = 0.019, modelled = false, first_ms = { 1, "x", 2 } },
    ops = { { name = "add", p50 = 0.01, delegated = false, new_op_field = 1 }, "not an op" } }
  r.model.later = "y"
  local c, notes = schema.read(r)
  T.eq(c.load_ms, nil, "+inf is no measurement")
  T.eq(c.latency_ms.p50, nil, "-inf neither")
  T.eq(c.latency_ms.mean, nil, "nor NaN")
  T.eq(c.peak_rss_kb, nil, "a string where an integer goes")
  T.eq(c.status, 0, "0 kept")
  T.eq(c.latency_ms.modelled, false, "false kept")
  T.eq(c.latency_ms.first_ms, { 1, 2 }, "a bad list item left out")
  T.eq(#c.ops, 1)
  T.eq(c.ops[1].delegated, false)
  T.eq(c.future_field, nil)
  local unknown = table.move(notes.unknown, 1, #notes.unknown, 1, {})
  table.sort(unknown)
  T.eq(unknown, { "future_field", "model.later", "ops[].new_op_field" }, "unknown fields by path")
  local line = schema.describe(notes, "r.json")
  T.match(line, "^r%.json: fields this odp does not know %(another odp version%?%), left out: future_field, " ..
    "model%.later, ops%[%]%.new_op_field; values of the wrong type, left out: ")
  T.match(line, "load_ms: inf, not number")
  T.match(line, "peak_rss_kb: string, not integer")
  T.eq(select(2, schema.read(record { schema = "odp.result/2" })).version, "odp.result/2", "another version: said")
  T.eq(schema.read(42), nil, "not a record")
  T.eq(schema.describe(select(2, schema.read(record()))), nil, "a record of this odp: nothing to say")
end)

T.test("the history keeps no point for an infinite value (its reader accepted +-inf before the schema)", function()
  local db = assert(history.open(dir .. "/inf.db"))
  assert(db:add(record { load_ms = 1 / 0, peak_rss_kb = -1 / 0 }))
  T.eq(#assert(db:series { metric = "load_ms" }), 0, "no load_ms point")
  T.eq(#assert(db:series { metric = "peak_rss_kb" }), 0, "no peak_rss_kb point")
  T.eq(#assert(db:series { metric = "latency_ms" }), 1, "the finite metric is kept")
  db:close()
end)

T.test("records odp writes read without a note: the real runs in tests/fixtures/records", function()
  for _, name in ipairs { "run_host.json", "run_ethos_u.json" } do
    local rec = assert(result.decode(assert(sys.read_file(root .. "/tests/fixtures/records/" .. name))))
    T.eq(schema.describe(select(2, schema.read(rec))), nil, name)
  end
end)

T.test("a record of another odp version: odp compare/report and odp history import say what they left out, and go on", function()
  local file = dir .. "/future.json"
  local rec = record { future_field = 1 }
  T.write(file, result.encode(rec))
  local records, _, warnings = require("odp.results.compare").read_records(file, "A")
  T.eq(#records, 1)
  T.eq(records[1].future_field, nil)
  T.eq(records[1].load_ms, rec.load_ms, "the rest is read")
  T.eq(warnings, { "A: " .. file .. ": fields this odp does not know (another odp version?), left out: future_field" })
  local db = assert(history.open(dir .. "/import.db"))
  local res = db:import({ file })
  T.eq({ res.added, #res.failed }, { 1, 0 }, "imported")
  T.eq(res.warnings, { file .. ": fields this odp does not know (another odp version?), left out: future_field" })
  db:close()
end)

T.test("docs/SCRIPTING.md's record table lists every top-level field the schema declares, and no other", function()
  local text = assert(sys.read_file(root .. "/docs/SCRIPTING.md"))
  local section = assert(text:match("\n## The result record\n(.-)\n## "), "the section is there")
  local documented, declared = {}, {}
  for first in section:gmatch("\n| ([^|]+) |") do
    for name in first:gmatch("`([%w_]+)`") do documented[#documented + 1] = name end
  end
  for _, f in ipairs(schema.FIELDS) do
    if not f[1]:find("[.%[]") then declared[#declared + 1] = f[1] end
  end
  table.sort(documented)
  table.sort(declared)
  T.eq(documented, declared)
end)

T.test("odp's own fields are well formed (no run checks them again)", function()
  T.ok(#schema.FIELDS > 300, "the whole declaration")
  for _, f in ipairs(schema.FIELDS) do
    local ok, err = pcall(schema.check_entry, f)
    T.ok(ok, err)
  end
  -- the check itself: a bad entry slipped into the declaration is named
  T.raises(function() schema.check_entry({ "latency_ms.p50", "number", unti = "ms" }) end, "unknown attribute 'unti'")
end)

T.test("declaring: misuse raises, one line", function()
  T.raises(function() schema.add({ "x", "float" }) end, "type one of")
  T.raises(function() schema.add({ "x", "number", lable = "x" }) end, "unknown attribute 'lable'")
  T.raises(function() schema.add({ "load_ms", "number" }) end, "declared already")
  T.raises(function() schema.add({ "nowhere.x", "number" }) end, "before its parent")
  T.raises(function() schema.add({ "xs", "list" }) end, "needs of =")
  T.eq(schema.field("x"), nil, "nothing was added")
end)

T.done()
