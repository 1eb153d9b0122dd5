-- --report junit FILE and $GITHUB_STEP_SUMMARY: the JUnit XML is validated by xmllint (libxml2) against
-- tests/fixtures/junit/junit.xsd (the shape Jenkins and GitLab read), its counts checked with XPath; the
-- testcases are board x point x metric gates, failures for failed runs and for --fail-if-slower verdicts.
local T = require("t")
local json = require("odp.core.json")
local proc = require("odp.proc")
local history = require("odp.results.history")
local result = require("odp.results.result")
local measure = require("odp.results.measure")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local xsd = root .. "/tests/fixtures/junit/junit.xsd"
local dir = T.tmpdir()

local function xmllint(file)
  return assert(proc.run { "xmllint", "--noout", "--schema", xsd, file, timeout = 60 })
end

local function xpath(file, expr)
  local r = assert(proc.run { "xmllint", "--xpath", expr, file, timeout = 60 })
  return (r.stdout:gsub("\n$", ""))
end

-- canned records: two boards, a failed run whose message is hostile device output
local records = {
  { schema = "odp.result/1", ok = true, board = "pi-1", device = "rpi5", target = "ssh://pi@10.0.0.11:22",
    started_at = "2026-12-03T10:00:00Z", model = { path = "/m/add.pte" }, params = { num_executions = 10 },
    latency_ms = { n = 10, p50 = 0.0201, mean = 0.021, min = 0.019, max = 0.03, p90 = 0.025, p99 = 0.029 },
    load_ms = 0.2, peak_rss_kb = 4592, steps = { { name = "run", ms = 1500, status = "ran" } } },
  { schema = "odp.result/1", ok = true, board = "pi-2", device = "rpi5", model = { path = "/m/add.pte" },
    params = { num_executions = 10 }, latency_ms = { n = 10, p50 = 0.0203 }, peak_rss_kb = 4600 },
  { schema = "odp.result/1", ok = false, board = "pi-2", device = "rpi5", model = { path = "/m/add.pte" },
    params = { num_executions = 100 },
    error = { code = "ERUNNER", message = "runner said <oops> & \"quit\"\1\2 \255\254 then died\n]]> end" } },
}
local script = dir .. "/records.lua"
T.write(script, ([[
local json = require("odp.core.json")
return { name = "records", description = "returns canned records", options = {},
  run = function() return json.decode(%q) end }
]]):format(json.encode(records)))

T.test("--report junit FILE: valid against the XSD; one testcase per board x point x metric; a failed run fails", function()
  local file = dir .. "/runs.xml"
  local r = assert(proc.run { odp, "run", script, "--report", "junit", file, "-q", "--format", "json", timeout = 60 })
  T.eq(r.status, 1, "a failed record: exit 1 " .. r.stderr)
  local v = xmllint(file)
  T.eq(v.status, 0, "xmllint --schema: " .. v.stderr)
  T.eq(xpath(file, "count(//testcase)"), "11", "8 metrics of pi-1, 2 of pi-2, 1 failed run")
  T.eq(xpath(file, "string(/testsuites/@tests)"), "11")
  T.eq(xpath(file, "string(/testsuites/@failures)"), "1")
  T.eq(xpath(file, "count(/testsuites/testsuite)"), "2", "a suite per board and model")
  T.eq(xpath(file, "string(//testsuite[@name='pi-2.add']/@failures)"), "1")
  T.eq(xpath(file, "string(//testcase[failure]/@name)"), "num_executions-100.run")
  T.eq(xpath(file, "string(//testcase[failure]/failure/@type)"), "ERUNNER")
  T.match(xpath(file, "string(//testcase[failure]/failure/@message)"), '^runner said <oops> & "quit"%?%? %?%? then died')
  T.eq(xpath(file, "string(//testcase[@name='num_executions-10.latency_p50' and @classname='odp.pi-1.add']/system-out)"),
    "latency_p50 = 0.0201 ms")
  T.eq(xpath(file, "string(//testsuite[@name='pi-1.add']/@time)"), "1.500", "the run's steps")
  -- the schema bites: the same file with <failure> after <system-out>, or a count that is not a number, fails
  local bad = dir .. "/bad.xml"
  T.write(bad, (T.read(file):gsub('<testcase ([^>]*)>\n      <system%-out>([^<]*)</system%-out>',
    '<testcase %1>\n      <system-out>%2</system-out><failure message="x"/>', 1)))
  T.ok(xmllint(bad).status ~= 0, "failure after system-out is refused")
  T.write(bad, (T.read(file):gsub('tests="11"', 'tests="eleven"', 1)))
  T.ok(xmllint(bad).status ~= 0, "a count that is not an integer is refused")
  T.eq(xpath(file, "string(//testsuite[@name='pi-1.add']/properties/property[@name='target']/@value)"),
    "ssh://pi@10.0.0.11:22")
end)

T.with_real_runner("docs/ci.md's job step: the host flow with the real runner and --report junit", function(runner)
  local file = dir .. "/odp-junit.xml"
  local r = assert(proc.run { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model",
    root .. "/tests/fixtures/pte/add_arduino.pte", "-n", "50", "--runs-dir", dir .. "/runs", "--report", "junit", file,
    "--format", "json", "-q", timeout = 120 })
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq(xmllint(file).status, 0)
  T.eq(xpath(file, "string(/testsuites/@failures)"), "0")
  T.eq(xpath(file, "string(//testcase[contains(@name, '.latency_p50')]/system-out)"),
    ("latency_p50 = %s ms"):format(require("odp.results.report").number(rec.latency_ms.p50)), "the record's p50")
  T.eq(xpath(file, "string(//testcase[contains(@name, '.peak_rss_kb')]/system-out)"),
    ("peak_rss_kb = %d kB"):format(rec.peak_rss_kb))
end)

T.test("an unwritable FILE is one line, exit 3, found before anything runs", function()
  local r = assert(proc.run { odp, "run", script, "--report", "junit", dir .. "/no/such/dir/x.xml", "--format", "json",
    timeout = 60 })
  T.eq(r.status, 3)
  T.eq(r.stdout, "", "nothing measured, no records")
  T.match(r.stderr, "^odp: cannot write [^\n]*no/such/dir/x%.xml: No such file or directory\n$")
end)

-- runs/<id>/ directories with samples.csv, as odp compare reads them (tests/lua/compare_test.lua's method)
local function run_dir(name, ms, seed)
  local d = dir .. "/" .. name
  os.execute("mkdir -p '" .. d .. "'")
  math.randomseed(seed)
  local groups = {}
  for p = 1, 5 do
    local g = {}
    for i = 1, 40 do g[i] = ms * (1 + (math.random() - 0.5) * 0.04) end
    groups[p] = g
  end
  assert(measure.write_samples(d .. "/samples.csv", groups))
  local rec = result.new { flow = "executorch", device = "host", target = "local://x" }
  rec.ok = true
  rec.model = { path = "m.pte", sha256 = "aa11", bytes = 10 }
  rec.latency_ms = measure.latency({ groups = groups, source = "log", per_iteration = true }, {})
  rec.peak_rss_kb = 4000
  rec.params = { num_executions = 40 }
  rec.artifacts = { run_dir = d, samples = d .. "/samples.csv" }
  assert(history.save(rec, d))
  return d
end

T.test("odp compare --fail-if-slower --report junit: the latency gate fails as the exit status does", function()
  local A, B = run_dir("a", 10.0, 1), run_dir("b", 12.0, 2)
  local file = dir .. "/gate.xml"
  local r = assert(proc.run { odp, "compare", A, B, "--fail-if-slower", "5", "--report", "junit", file, timeout = 120 })
  T.eq(r.status, 1, "B 20% slower than A: exit 1")
  T.eq(xmllint(file).status, 0)
  T.eq(xpath(file, "string(//testcase[1]/@name)"), "latency")
  T.eq(xpath(file, "string(//testcase[1]/failure/@type)"), "slower")
  T.match(xpath(file, "string(//testcase[1]/failure/@message)"), "^B is slower than A by %+%d+%.%d%% .*beyond %-%-fail%-if%-slower 5%%$")
  T.eq(xpath(file, "string(/testsuites/@failures)"), "1")
  r = assert(proc.run { odp, "compare", A, B, "--fail-if-slower", "50", "--report", "junit", file, timeout = 120 })
  T.eq(r.status, 0, "within 50%")
  T.eq(xmllint(file).status, 0)
  T.eq(xpath(file, "string(/testsuites/@failures)"), "0")
  r = assert(proc.run { odp, "compare", A, B, "--report", "lava", timeout = 120 })
  T.eq(r.status, 2)
  T.match(r.stderr, "odp compare reports %-%-report junit FILE only")
end)

T.test("a sweep with --report junit: one testcase per point and metric, the failed point failing", function()
  -- tests/flows/toy.lua: latency = size * scale, size 13 fails ("unlucky size")
  local file, out = dir .. "/sweep.xml", dir .. "/sweep.jsonl"
  local r = assert(proc.run { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/tests/flows/toy.lua",
    "-p", "size=12,13", "--out", out, "--report", "junit", file, "-q", timeout = 60 })
  T.eq(r.status, 1, "one failed point")
  T.eq(xmllint(file).status, 0)
  T.eq(xpath(file, "string(/testsuites/@failures)"), "1")
  T.match(xpath(file, "string(//testcase[failure]/@name)"), "size%-13%.run$")
  T.ok(tonumber(xpath(file, "count(//testcase[contains(@name, 'size-12.latency_')])")) >= 1, "size 12's metrics")
end)

T.test("$GITHUB_STEP_SUMMARY: a Markdown table appended, one row per record; earlier content kept", function()
  local summary = dir .. "/summary.md"
  T.write(summary, "earlier step\n")
  local r = assert(proc.run { odp, "run", script, "-q", "--format", "json", env = { GITHUB_STEP_SUMMARY = summary },
    timeout = 60 })
  T.eq(r.status, 1)
  local md = T.read(summary)
  T.match(md, "^earlier step\n### odp: 3 run%(s%), 1 failed\n\n| board | model | point | result | p50 | p90 | peak RSS |\n")
  T.match(md, "\n| pi%-1 | add | num_executions%-10 | ok | 20%.10 µs | 25%.00 µs | 4592 kB |\n")
  T.match(md, "\n| pi%-2 | add | num_executions%-100 | %*%*FAIL%*%* ERUNNER runner said <oops> & \"quit\"[^\n]* end |")
  local rows = 0
  for _ in md:gmatch("\n| pi%-") do rows = rows + 1 end
  T.eq(rows, 3)
end)

T.done()
