-- odp report (issue 21): HTML pages of real runs (the real executor_runner; the Ethos-U flow on the QEMU
-- twin), a real sweep, a comparison and a history, each opened in Debian's chromium, headless, from file://
-- (tests/browser/check.js over the DevTools protocol): no request but the page, no console error, charts
-- with the right number of points, tables that sort on a click and filter; checked by xmllint as HTML and as
-- XML; the same input gives the same bytes. Screenshots stay in tests/.tmp/report/.
local T = require("t")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sys = require("odp.sys")
local html = require("odp.results.html")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local fixtures = root .. "/tests/fixtures"
local model = fixtures .. "/pte/add_arduino.pte"
local shots = root .. "/tests/.tmp/report"
sys.mkdir_p(shots)
local dir = T.tmpdir()

local function run(argv, opts)
  opts = opts or {}
  return assert(proc.run { argv = argv, cwd = opts.cwd or dir, env = opts.env or {}, timeout = opts.timeout or 180 })
end

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

-- HTML5 and SVG element names libxml2's HTML 4 parser does not know: "Tag X invalid" for these is not an
-- error in the page; every other message of xmllint --html is.
local HTML5_SVG = {}
for name in ("main section figure figcaption details summary output svg g path line rect circle text title " ..
  "polyline polygon"):gmatch("%S+") do HTML5_SVG[name] = true end

local function validate(path)
  local r = run { "xmllint", "--html", "--noout", path }
  local errors = {}
  for line in r.stderr:gmatch("[^\n]+") do
    local tag = line:match("HTML parser error : Tag (%w+) invalid")
    if line:find("error", 1, true) and not (tag and HTML5_SVG[tag]) then errors[#errors + 1] = line end
  end
  T.eq(errors, {}, "xmllint --html errors in " .. path)
  -- and well-formed XML (polyglot markup): an unclosed or misnested element cannot hide
  local x = run { "xmllint", "--noout", path }
  T.eq(x.status, 0, "xmllint (XML) " .. path .. ":\n" .. x.stderr)
end

-- Nothing external: no element that fetches (src, link, CSS url()/@import) and no link out of the disk.
local function self_contained(page)
  T.ok(not page:find("%ssrc%s*="), "no src attribute")
  T.ok(not page:find("<link", 1, true), "no <link>")
  T.ok(not page:find("url%(") and not page:find("@import", 1, true), "no CSS url() or @import")
  for href in page:gmatch('href="([^"]*)"') do
    T.ok(not href:find("^%a[%w+.-]*:"), "href without a scheme (a file beside the page): " .. href)
  end
end

local node_modules = root .. "/tests/browser/node_modules/puppeteer-core"

-- Opens the page in chromium; returns check.js's findings after the common checks.
local function browse(page_path, shot, filter_text)
  T.ok(sys.stat(node_modules), "puppeteer-core is installed under tests/browser (vendor/install-deps.sh test)")
  local r = run({ "node", root .. "/tests/browser/check.js", page_path, shots .. "/" .. shot, filter_text },
    { timeout = 240, env = { HOME = dir } })
  T.eq(r.status, 0, "check.js: " .. r.stderr)
  local out = assert(json.decode(r.stdout), r.stdout)
  T.eq(out.requests, { out.url }, "the page made no request but its own")
  T.eq(out.console_errors, {}, "console errors")
  T.eq(out.page_errors, {}, "page errors")
  for _, c in ipairs(out.charts) do
    T.eq(c.points + c.bars, c.data_points, c.id .. ": drawn points = what the page says it drew")
    T.ok(c.width > 100 and c.height > 100, c.id .. " is rendered")
    T.eq(c.label, c.id .. "-cap", c.id .. " is labelled by its caption")
  end
  -- without JavaScript: the same tables, rows, charts and captions (page.evaluate runs even when the page's
  -- own scripts may not)
  T.eq(out.contents_without_js, out.contents, "what a reader without JavaScript gets")
  T.ok(out.contents.tables > 0 and out.contents.rows > 0, "real tables")
  local png = T.read(shots .. "/" .. shot)
  T.eq(png:sub(1, 8), "\137PNG\r\n\26\n", "screenshot " .. shot)
  local points = 0
  for _, c in ipairs(out.charts) do points = points + c.points end
  if points > 0 then
    T.ok(out.hovered_title ~= nil, "a drawn point was hovered")
    T.eq(out.readout, out.hovered_title, "hover readout shows the point's values")
  end
  return out
end

local function chart(out, id)
  for _, c in ipairs(out.charts) do if c.id == id then return c end end
  error("no chart " .. id)
end

-- Every header of every sortable table sorts its column: ascending on the first click, descending on the
-- second (numbers as numbers, text as text).
local function sorts(out)
  local n = 0
  for id, cols in pairs(out.tables) do
    for _, col in ipairs(cols) do
      T.eq({ col.asc.sort, col.desc.sort }, { "ascending", "descending" }, id .. " " .. col.title .. " aria-sort")
      local function ordered(keys, desc)
        for i = 2, #keys do
          local a, b = keys[i - 1], keys[i]
          if type(a) == type(b) and (desc and a < b or not desc and a > b) then return false end
        end
        return true
      end
      T.ok(ordered(col.asc.keys, false), id .. " " .. col.title .. " ascending: " .. json.encode(col.asc.keys))
      T.ok(ordered(col.desc.keys, true), id .. " " .. col.title .. " descending: " .. json.encode(col.desc.keys))
      n = n + 1
    end
  end
  return n
end

-- samples.csv read here, not by odp: the number of samples, of processes, and the samples sorted
local function samples_csv(path)
  local n, per, xs = 0, {}, {}
  for line in T.read(path):gmatch("[^\n]+") do
    local p, v = line:match("^(%d+),%d+,(.+)$")
    if p then
      n = n + 1
      per[tonumber(p)] = true
      xs[#xs + 1] = tonumber(v)
    end
  end
  local procs = 0
  for _ in pairs(per) do procs = procs + 1 end
  table.sort(xs)
  return n, procs, xs
end

-- The p-th percentile by linear interpolation between closest ranks (NumPy's default)
local function percentile(sorted, p)
  local h = (#sorted - 1) * p / 100 + 1
  local lo = math.floor(h)
  return sorted[lo] + (h - lo) * ((sorted[lo + 1] or sorted[lo]) - sorted[lo])
end

local MS_PER = { ns = 1e-6, ["µs"] = 1e-3, ms = 1, s = 1e3 }

local function host_run(runner, name, args)
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", model, "--runs-dir",
    dir .. "/runs-" .. name, "--etdump", dir .. "/" .. name .. ".etdump", "--format", "json" }
  table.move(args, 1, #args, #argv + 1, argv)
  local r = run(argv)
  T.eq(r.status, 0, "odp run: " .. r.stderr)
  local rec = assert(json.decode(r.stdout))
  return rec, rec.artifacts.run_dir
end

T.with_real_runner("a run: header, latency charts with every sample, operators that sort and filter, trace, files",
  function(runner)
    local rec, run_dir = host_run(runner, "a", { "-n", "10", "--repeat", "3" })
    local r = run { odp, "report", run_dir }
    T.eq(r.status, 0, r.stderr)
    local page_path = run_dir .. "/report.html"
    T.eq(r.stdout, page_path .. "\n", "the page's path on stdout")
    local page = T.read(page_path)
    validate(page_path)
    self_contained(page)
    T.ok(#page < 2e6, "under 2 MB")
    -- the same input, the same bytes (the page and its trace are not listed among the run's files)
    T.eq(run({ odp, "report", run_dir, "-q" }).status, 0)
    T.ok(T.read(page_path) == page, "a second report of the same run is byte-identical")
    -- oracle: samples.csv as written by the run
    local n, procs, sorted = samples_csv(run_dir .. "/samples.csv")
    T.eq(n, 30)
    -- the histogram holds every sample once; the percentiles under the ECDF are samples.csv's
    local hist = page:match('<figure id="latency%-hist".-</figure>')
    local binned = 0
    for c in hist:gmatch('<rect class="bar".-<title>[^<]*: (%d+)</title>') do binned = binned + tonumber(c) end
    T.eq(binned, n, "histogram counts")
    local ecdf = page:match('<figure id="latency%-ecdf".-</figure>')
    local unit = ecdf:match('<th scope="col" class="n">([^<]+)</th>')
    for _, p in ipairs { 10, 50, 90, 99 } do
      local v = tonumber(ecdf:match(('<tr><td>p%d</td><td class="n" data%%-v="([^"]+)"'):format(p)))
      T.near(v * MS_PER[unit], percentile(sorted, p), 1e-6, ("p%d"):format(p))
    end
    local out = browse(page_path, "run.png", "add")
    T.eq(chart(out, "latency-ecdf").points, n, "ECDF: one point per sample")
    T.eq(chart(out, "series").points, n + procs, "time series: every iteration, plus each process's first marked")
    T.eq(out.data.kind, "run")
    T.eq(out.data.record.latency_ms.p50, rec.latency_ms.p50)
    -- operators: the record's rows without the framework's OPERATOR_CALL; the filter keeps those naming "add"
    local ops, with_add = 0, 0
    for _, op in ipairs(rec.ops) do
      if not op.framework then
        ops = ops + 1
        if (op.block .. " " .. op.name):lower():find("add", 1, true) then with_add = with_add + 1 end
      end
    end
    T.eq(#out.tables.ops[1].asc.keys, ops, "operator rows")
    T.eq(out.filtered.ops.shown, with_add, "rows the filter 'add' leaves")
    T.eq(out.filtered.ops.output, ("%d of %d shown"):format(with_add, ops))
    T.ok(sorts(out) >= 10, "every column of the operator table sorts")
    -- the trace beside the page: Chrome's JSON with one complete event per profiled event of the ETDump, and the
    -- memory timeline's samples and phases; the link counts what a viewer draws (all but the naming metadata)
    local trace = assert(json.decode(T.read(run_dir .. "/report.trace.json")))
    local xs, drawn = 0, 0
    for _, e in ipairs(trace.traceEvents) do
      if e.ph == "X" then xs = xs + 1 end
      if e.ph ~= "M" then drawn = drawn + 1 end
    end
    local events = 0
    for _, op in ipairs(rec.ops) do events = events + op.n end
    T.eq(xs, events, "trace events = the op table's samples")
    local mem_rows = #require("odp.results.memory").timeline(run_dir .. "/memory.csv")
    local slices = 0 -- a phase with both ends is a begin and an end event
    for _, p in ipairs(rec.memory.phases) do if p.t_start_ms and p.t_end_ms then slices = slices + 2 end end
    T.eq(drawn, xs + mem_rows + slices, "and the memory timeline's samples and phases")
    T.match(page, '<a href="report.trace.json" download="">Chrome/Perfetto trace</a> %(' .. drawn .. " events%)")
    T.match(page, '<a href="samples.csv">samples.csv</a>')
    T.ok(not page:find('href="report.html"', 1, true), "the page does not list itself")
    -- numbers: the latency table's p50 is the record's, and the peak RSS
    T.match(page, ('data%%-v="%s"'):format(("%.9g"):format(rec.latency_ms.p50):gsub("%p", "%%%0")))
    T.match(page, ("%d kB"):format(rec.peak_rss_kb))
    -- a run too short for the 1 kHz sampler to leave a row (seen on a loaded machine): its phases, read at their
    -- boundaries, are still drawn
    local bare = dir .. "/a-no-timeline"
    T.eq(run({ "cp", "-R", run_dir, bare }).status, 0)
    os.remove(bare .. "/memory.csv")
    local stored = assert(json.decode(T.read(bare .. "/result.json")))
    stored.memory.timeline = nil
    T.write(bare .. "/result.json", json.encode(stored))
    T.eq(run({ odp, "report", bare, "-q" }).status, 0)
    local bare_drawn = 0
    for _, e in ipairs(assert(json.decode(T.read(bare .. "/report.trace.json"))).traceEvents) do
      if e.ph ~= "M" then bare_drawn = bare_drawn + 1 end
    end
    T.ok(slices > 0, "the run has timed phases")
    T.eq(bare_drawn, xs + slices, "no timeline: the operators and the phases")
  end)

T.with_real_runner("a run that failed only its output check (--max-abs-err): its page shows its latency and memory " ..
  "as the terminal does, and the agreement that failed", function(runner)
  local _, ref = host_run(runner, "ref", { "--inputs", "random:1", "--outputs" })
  -- other inputs: outputs that differ from the reference's, a max abs error above 0
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", model, "--runs-dir",
    dir .. "/runs-mismatch", "--inputs", "random:2", "--reference", ref, "--max-abs-err", "0", "-n", "5",
    "--format", "json", "--no-history" }
  local r = run(argv)
  T.eq(r.status, 1, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq({ rec.ok, rec.error.code }, { false, "EMISMATCH" })
  T.ok(rec.latency_ms and rec.latency_ms.n == 5 and rec.memory, "the record has latency and memory")
  local run_dir = rec.artifacts.run_dir
  r = run { odp, "report", run_dir }
  T.eq(r.status, 0, r.stderr)
  local page = T.read(run_dir .. "/report.html")
  for _, id in ipairs { "agreement", "latency", "memory" } do T.match(page, '<section id="sec%-' .. id .. '">') end
  T.match(page, ('data%%-v="%s"'):format(("%.9g"):format(rec.latency_ms.p50):gsub("%p", "%%%0")))
  T.match(page, ("%d kB"):format(rec.peak_rss_kb))
  -- no ETDump: the trace holds the memory timeline alone, and the link counts its events
  local trace = assert(json.decode(T.read(run_dir .. "/report.trace.json")))
  local drawn = 0
  for _, e in ipairs(trace.traceEvents) do if e.ph ~= "M" then drawn = drawn + 1 end end
  T.ok(drawn > 0, "the memory timeline in the trace")
  T.match(page, "Chrome/Perfetto trace</a> %(" .. drawn .. " events%)")
  local out = browse(run_dir .. "/report.html", "mismatch.png")
  T.eq(chart(out, "series").points, 5 + 1, "every iteration drawn, the process's first marked")
end)

T.with_real_runner("a page written beside the run links its files relative to itself", function(runner)
  local _, run_dir = host_run(runner, "rel", { "-n", "3" })
  sys.mkdir_p(dir .. "/pages")
  local r = run { odp, "report", run_dir .. "/result.json", "--out", dir .. "/pages/r.html" }
  T.eq(r.status, 0, r.stderr)
  local page = T.read(dir .. "/pages/r.html")
  local rel = "../" .. run_dir:sub(#dir + 2) .. "/samples.csv"
  T.match(page, ('href="%s"'):format(rel:gsub("%p", "%%%0")))
  T.match(page, 'href="r.trace.json"')
  validate(dir .. "/pages/r.html")
end)

T.with_real_runner("a sweep: p50 line and p10-p90 band per group, every record a row, failed points listed",
  function(runner)
    local r = run { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/host.lua", "-p",
      "num_executions=1,5,20", "-p", "repeat=1,2", "--out", dir .. "/s.jsonl", "--runner", runner, "--model", model,
      "--runs-dir", dir .. "/runs-sweep", "-q" }
    T.eq(r.status, 0, r.stderr)
    -- a failed point as a sweep writes it (a record with ok = false), then a boards copy: the same records
    -- as a scheduler spreads them over two boards (the record's `board` field)
    local lines = {}
    for line in T.read(dir .. "/s.jsonl"):gmatch("[^\n]+") do lines[#lines + 1] = line end
    local failed = json.encode { schema = "odp.result/1", ok = false, flow = "executorch",
      params = { num_executions = 100, ["repeat"] = 1 }, error = { code = "ETIMEDOUT", message = "runner killed after 600 s" } }
    T.write(dir .. "/s.jsonl", table.concat(lines, "\n") .. "\n" .. failed .. "\n")
    r = run { odp, "report", dir .. "/s.jsonl" }
    T.eq(r.status, 0, r.stderr)
    T.eq(r.stdout, dir .. "/s.html\n")
    local page = T.read(dir .. "/s.html")
    T.eq(run({ odp, "report", dir .. "/s.jsonl", "-q" }).status, 0)
    T.ok(T.read(dir .. "/s.html") == page, "the same sweep, the same bytes")
    validate(dir .. "/s.html")
    self_contained(page)
    local out = browse(dir .. "/s.html", "sweep.png", "FAIL")
    local c = chart(out, "sweep")
    -- x num_executions has 4 values (100 only in the failed record), repeat 2: 3 x 2 points drawn
    T.eq({ c.points, c.lines, c.bands }, { 6, 2, 2 }, "points, p50 lines, p10-p90 bands")
    T.eq(#out.tables.points[1].asc.keys, #lines + 1, "every record is a row")
    T.eq(out.filtered.points.shown, 1, "the filter 'FAIL' leaves the failed point")
    T.match(page, "Failed points %(1%)")
    T.match(page, "runner killed after 600 s")
    T.eq({ out.data.x, out.data.group, out.data.failed }, { "num_executions", "repeat", 1 })
    sorts(out)
    -- boards: one line per board
    local boards = {}
    for i, line in ipairs(lines) do
      local rec = json.decode(line)
      if rec.params["repeat"] == 1 then
        rec.board = i % 2 == 0 and "pi-a" or "pi-b"
        local copy = json.decode(line)
        copy.board = i % 2 == 0 and "pi-b" or "pi-a"
        boards[#boards + 1] = json.encode(rec)
        boards[#boards + 1] = json.encode(copy)
      end
    end
    T.write(dir .. "/b.jsonl", table.concat(boards, "\n") .. "\n")
    r = run { odp, "report", dir .. "/b.jsonl", "--x", "num_executions" }
    T.eq(r.status, 0, r.stderr)
    local bout = browse(dir .. "/b.html", "sweep-boards.png")
    T.eq(bout.data.group, "board")
    T.eq({ chart(bout, "sweep").points, chart(bout, "sweep").lines }, { 6, 2 }, "3 points on each of two boards")
    T.match(T.read(dir .. "/b.html"), ">board=pi%-a</text>")
  end)

T.with_real_runner("a comparison: verdict and gate as odp compare says, both distributions, operator deltas by impact",
  function(runner)
    local _, a = host_run(runner, "ca", { "-n", "10", "--repeat", "3" })
    local _, b = host_run(runner, "cb", { "-n", "10", "--repeat", "3" })
    local cj = run { odp, "compare", a, b, "--format", "json", "-q" }
    T.eq(cj.status, 0, cj.stderr)
    local res = assert(json.decode(cj.stdout))
    local r = run { odp, "compare", a, b, "--html", dir .. "/c1.html", "--fail-if-slower", "50", "-q" }
    T.eq(r.status, 0, r.stderr)
    r = run { odp, "report", a, b, "--fail-if-slower", "50", "--out", dir .. "/c2.html", "-q" }
    T.eq(r.status, 0, r.stderr)
    T.ok(T.read(dir .. "/c1.html") == T.read(dir .. "/c2.html"), "odp compare --html and odp report A B: the same page")
    local page = T.read(dir .. "/c2.html")
    validate(dir .. "/c2.html")
    self_contained(page)
    local lat = res.rows[1]
    T.eq(lat.metric, "latency")
    T.match(page, ("B/A = %.3f"):format(lat.ratio))
    T.match(page, lat.verdict == "same" and "no difference within noise" or ("B is " .. lat.verdict))
    local gate_failed = lat.ci95 and lat.ci95[1] > 1.5
    T.match(page, "Gate: " .. (gate_failed and "FAIL" or "pass"))
    local out = browse(dir .. "/c2.html", "compare.png", "native")
    T.eq(out.data.verdict, lat.verdict)
    local ecdf = chart(out, "dist-ecdf")
    T.eq(ecdf.points, lat.a.n + lat.b.n, "ECDF: every sample of A and of B")
    T.eq(ecdf.lines, 2)
    T.eq(chart(out, "dist-hist").bars % 2, 0, "A and B on the same bins")
    -- operators: as many as compare found, sorted by |B - A| (the data-v of the delta column), largest first
    local nops = 0
    for _, row in ipairs(res.rows) do if row.metric:match("^op ") then nops = nops + 1 end end
    T.ok(nops >= 3, "operators compared")
    local deltas = {}
    for v in page:match('<table id="op%-deltas".-</table>'):gmatch('<tr><td>[^<]*</td><td class="n" data%-v="[^"]*">[^<]*</td>' ..
      '<td class="n" data%-v="[^"]*">[^<]*</td><td class="n" data%-v="([^"]*)"') do
      deltas[#deltas + 1] = math.abs(tonumber(v))
    end
    T.eq(#deltas, nops, "one row per operator")
    for i = 2, #deltas do T.ok(deltas[i - 1] >= deltas[i], "sorted by impact") end
    sorts(out)
    -- a gate that fails: the page says FAIL and odp compare exits 1 (B against itself cannot be slower, so
    -- compare A with a slower copy: the same run with its samples scaled)
    local slow = dir .. "/slow"
    sys.mkdir_p(slow)
    local csv = T.read(b .. "/samples.csv"):gsub("(%d+,%d+,)([^\n]+)", function(k, v) return k .. ("%.17g"):format(tonumber(v) * 3) end)
    T.write(slow .. "/samples.csv", csv)
    local rec = json.decode(T.read(b .. "/result.json"))
    rec.artifacts.samples, rec.artifacts.etdump = nil, nil
    T.write(slow .. "/result.json", json.encode(rec))
    r = run { odp, "compare", a, slow, "--html", dir .. "/c3.html", "--fail-if-slower", "10", "-q" }
    T.eq(r.status, 1, "the gate fails: " .. r.stderr)
    T.match(T.read(dir .. "/c3.html"), 'class="banner slower fail"')
    T.match(T.read(dir .. "/c3.html"), "Gate: FAIL: B is slower than A by")
  end)

T.test("the Ethos-U flow on the QEMU twin: PMU counters, NPU and CPU cycles, steps, modelled times", function()
  local rdir = dir .. "/alif"
  local r = run({ odp, "run", root .. "/scripts/alif_e8.lua", "--device", root .. "/devices/twin_m55.lua", "--model",
    fixtures .. "/pte/mnist_ethos_u55.pte", "--inferences", "5", "--runs-dir", rdir .. "/runs", "--format", "json" },
    { cwd = dir, timeout = 300 })
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  r = run { odp, "report", rec.artifacts.run_dir }
  T.eq(r.status, 0, r.stderr)
  local path = rec.artifacts.run_dir .. "/report.html"
  local page = T.read(path)
  validate(path)
  self_contained(page)
  T.match(page, "modelled, not measured")
  -- nothing of the twin's canned ETDump (another CNN's conv/relu/maxpool, nothing delegated) on the page of this
  -- Ethos-U-delegated MNIST (issue 28)
  T.match(page, "the QEMU twin&#39;s ETDump is canned, not this model&#39;s")
  T.ok(not page:find("native_call_convolution", 1, true) and not page:find('id="sec-split"', 1, true), "no canned operators")
  T.match(page, ('<th scope="row">NPU cycles</th><td>%d</td>'):format(rec.pmu.npu_cycles))
  T.match(page, "Ethos%-U: NPU and CPU")
  for _, c in ipairs(rec.pmu.counters) do T.match(page, ("<td>%s</td><td class=\"n\" data%%-v=\"%d\">"):format(c.event, c.count)) end
  T.eq(count(page:match('<section id="sec%-steps">.-</section>'), "<tr>") - 1, #rec.steps, "one row per step")
  -- memory on bare metal: no phases (no empty phase table), the planned arenas and the NPU scratch the terminal
  -- shows, from the .pte (the Vela stream's scratch_size)
  local o = rec.memory.owners
  T.ok(o.scratch_kb and o.scratch_kb > 0, "the record has the NPU scratch")
  local msec = assert(page:match('<section id="sec%-memory">.-</section>'), "a memory section")
  T.ok(not msec:find("<thead>", 1, true), "no phase table: " .. msec)
  T.match(msec, ("<th scope=\"row\">NPU scratch %%(the Vela stream&#39;s%%)</th><td>%d kB</td>"):format(o.scratch_kb))
  T.match(msec, ("<th scope=\"row\">planned arenas</th><td>%d kB</td>"):format(o.planned_kb))
  T.match(msec, "bare metal: no RSS to measure")
  local out = browse(path, "ethos_u.png")
  T.eq(out.data.record.flow, "ethos_u")
  T.ok(not sys.stat(rec.artifacts.run_dir .. "/report.trace.json"), "no trace drawn from the canned ETDump")
end)

T.test("a history from a plain table: the trend with its CI band and the detected changes marked", function()
  local h = { series = "add_arduino.pte on pi-a: latency p50", unit = "ms", points = {}, changes = {
    { t = "2026-12-06", before = 1.0, after = 1.2, pct = 20, note = "model change" } } }
  for d = 1, 10 do
    local p50 = d >= 6 and 1.2 or 1.0
    h.points[d] = { t = ("2026-12-%02d"):format(d), p50 = p50, ci_lo = p50 - 0.02, ci_hi = p50 + 0.03 }
  end
  local page = html.history(h)
  T.write(dir .. "/h.html", page)
  validate(dir .. "/h.html")
  self_contained(page)
  T.ok(html.history(h) == page, "deterministic")
  local out = browse(dir .. "/h.html", "history.png")
  T.eq({ chart(out, "history").points, chart(out, "history").bands }, { 11, 1 }, "10 runs and 1 change marked")
  T.match(page, "model change")
end)

T.test("chart geometry in chromium: the memory timeline's phase and peak labels inside the plot area (not left " ..
  "of the y axis, not under the legend); 726 iterations drawn as small dots, not joined", function()
  -- the Pi twin's record of issue 40: its first phase starts at 0 ms, its first sample at 51 ms, the peak at the end
  local phases = { { name = "load", peak_kb = 1740, exact = false, t_start_ms = 0, t_end_ms = 306.6 },
    { name = "method+first+steady", peak_kb = 2128, exact = false, t_start_ms = 306.6, t_end_ms = 358.2 },
    { name = "teardown", peak_kb = 2204, exact = false, t_start_ms = 358.2, t_end_ms = 473.4 } }
  local rows = {}
  for i = 0, 28 do
    local t = 51 + i * 14.6
    rows[#rows + 1] = { t_ms = t, rss_kb = t < 306 and 1728 or 2128, anon_kb = 104, file_kb = t < 306 and 1624 or 2024 }
  end
  local samples = {}
  for i = 1, 726 do samples[i] = 0.02 + ((i * 7919) % 100) / 1000 end
  local rec = { schema = "odp.result/1", ok = true, flow = "executorch", target = "ssh://pi@127.0.0.1:2222",
    latency_ms = { n = 726, mean = 0.07, min = 0.02, p10 = 0.03, p50 = 0.07, p90 = 0.11, p99 = 0.12, max = 0.12,
      std = 0.03, source = "log" }, peak_rss_kb = 2204,
    memory = { phases = phases, peak_phase = "teardown", peak_kb = 2204, exact = false, sample_ms = 1.0,
      seen = { "program", "method", "first", "executed" }, timeline = "memory.csv" } }
  local page = html.run(rec, { samples = { samples }, memory_rows = rows })
  T.write(dir .. "/geometry.html", page)
  local out = browse(dir .. "/geometry.html", "geometry.png")
  local mem = chart(out, "memory-timeline")
  T.eq(#mem.labels, 4, "three phase labels and the peak's")
  for _, l in ipairs(mem.labels) do
    T.ok(l.x >= mem.plot.left, ("%q starts at x %.1f, the y axis is at %.1f"):format(l.text, l.x, mem.plot.left))
    T.ok(l.right <= mem.plot.right, ("%q ends at x %.1f, the plot area (and the legend beyond it) at %.1f"):format(
      l.text, l.right, mem.plot.right))
  end
  -- labels of neighbouring phases do not overlap
  for i = 2, #mem.labels do
    for j = 1, i - 1 do
      local a, b = mem.labels[i], mem.labels[j]
      local apart = a.right <= b.x or b.right <= a.x or a.bottom <= b.y or b.bottom <= a.y
      T.ok(apart, ("%q and %q overlap"):format(a.text, b.text))
    end
  end
  local series = chart(out, "series")
  T.eq(series.points, 726 + 1, "every iteration and the process's first")
  T.eq(series.lines, 0, "726 iterations are not joined by a line")
  -- the dots: 3 px across, no outline (as drawn); the process's first is the one larger marker
  T.eq(series.wide_points, 1, "only the first-of-a-process marker is wider than 3.5 px")
end)

T.test("one unit per column in every view: the terminal's latency table and the page's agree; cycles are integers; the setup's warnings are the record's", function()
  local report, html = require("odp.results.report"), require("odp.results.html")
  -- the latencies of tests/cli/units.t's replay (p10 and p50 under 1 µs, p90 118 µs): the terminal chose µs from
  -- all its statistics, the page ns from p10-p90
  local rec = { schema = "odp.result/1", ok = true, flow = "executorch", target = "local://x", latency_ms = { n = 10,
    mean = 0.091797, min = 0.000752, p10 = 0.00076, p50 = 0.000877, p90 = 0.118274, p99 = 0.795981, max = 0.871282,
    std = 0.274086, source = "log" }, ops_unit = "cycles", ops = { { block = "Execute", name = "native_call_relu.out",
    n = 1, p10 = 971, p50 = 971, p90 = 971, avg = 971, min = 971, max = 971 } },
    device_state = { before = { cpus = { { cpu = 0, governor = "ondemand" } }, loadavg = { 1.5 } }, cpus_online = 4 },
    warnings = { "other load: the 1-minute load average was 1.50 before the run (4 CPUs online)" } }
  local term = report.formats.human { rec }
  local unit = term:match("\n%s+n%s+mean (%S+)%s+min")
  T.eq(unit, "ns")
  local page = html.run(rec)
  T.match(page, ">p50 " .. unit .. "<", "the page's latency table in the terminal's unit")
  T.ok(not page:find("971.0", 1, true) and not term:find("971.0", 1, true), "cycles as integers")
  T.match(page, ">971<")
  -- the load warning once (the record's), the governor's added for a record that lacks it
  T.eq(select(2, page:gsub("other load: the 1%-minute load average", "")), 1)
  T.match(page, "CPU governor ondemand, not performance")
end)

T.test("thinning: a long series keeps each bucket's lowest and highest, in order; ECDF quantiles", function()
  local pts = {}
  for i = 1, 100000 do pts[i] = { x = i, y = (i * 7919) % 1000 } end
  pts[54321].y = 1e6
  local t = html.thin(pts, 2000)
  T.ok(#t <= 2000, "at most 2000 points: " .. #t)
  local has_outlier = false
  for i, p in ipairs(t) do
    if p.y == 1e6 then has_outlier = true end
    if i > 1 then T.ok(t[i - 1].x < p.x, "in order") end
  end
  T.ok(has_outlier, "the outlier survives")
  local s = {}
  for i = 1, 1000 do s[i] = 1001 - i end
  local e = html.ecdf(s)
  T.eq(#e, html.MAX_ECDF_POINTS)
  T.eq({ e[1].x, e[#e].x, e[#e].y }, { 3, 1000, 1.0 }, "from low to the maximum, reaching 1")
  local bins, log = html.histogram({ 1, 2, 3, 4, 1000 })
  local total = 0
  for _, b in ipairs(bins) do total = total + b.y end
  T.eq({ total, log }, { 5, true }, "every sample in a bin; log-spaced over a 1000x span")
end)

T.test("records from a device are data: mutated fields never break the page, markup in them is escaped", function()
  -- the Ethos-U twin's record and a host record as the seeds (fields of every section), from the fixtures' runs
  local seeds = {}
  for _, f in ipairs { "run_host.json", "run_ethos_u.json" } do
    seeds[#seeds + 1] = assert(json.decode(T.read(fixtures .. "/records/" .. f)))
  end
  local rnd = T.lcg(21)
  local values = { function() return "<b>x</b>" end, function() return -1 end, function() return 0 / 0 end,
    function() return 1.5 end, function() return 1e300 end, function() return {} end, function() return { 1, "a" } end,
    function() return nil end, function() return true end, function() return ("y"):rep(5000) end,
    function() return { n = "x", p50 = {} } end, function() return math.mininteger end }
  -- every path to a value in the record, so any field can be hit
  local function paths(t, prefix, out)
    for k, v in pairs(t) do
      local p = { table.unpack(prefix) }
      p[#p + 1] = k
      out[#out + 1] = p
      if type(v) == "table" then paths(v, p, out) end
    end
    return out
  end
  local function copy(v)
    if type(v) ~= "table" then return v end
    local c = {}
    for k, x in pairs(v) do c[k] = copy(x) end
    return setmetatable(c, getmetatable(v))
  end
  for i = 1, 400 do
    local rec = copy(seeds[i % #seeds + 1])
    local all = paths(rec, {}, {})
    table.sort(all, function(a, b) return table.concat(a, ".", 1, #a) < table.concat(b, ".", 1, #b) end)
    for _ = 1, 1 + rnd(3) do
      local p = all[rnd(#all) + 1]
      local t = rec
      for j = 1, #p - 1 do t = type(t) == "table" and t[p[j]] or nil end
      if type(t) == "table" then t[p[#p]] = values[rnd(#values) + 1]() end
    end
    local samples = i % 3 == 0 and { {} } or i % 3 == 1 and { { 0.5, 0.25, 0.75 } } or nil
    local ok, page = pcall(html.run, rec, { samples = samples })
    T.ok(ok, ("mutation %d: %s"):format(i, tostring(page)))
    T.ok(not page:find("<b>x</b>", 1, true), ("mutation %d: markup from the record is escaped"):format(i))
  end
  local rec = copy(seeds[1])
  rec.model.path = "</script><script>alert(1)</script>"
  rec.warnings = { '<img src=x onerror="alert(2)">' }
  local page = html.run(rec, {})
  T.ok(not page:find("<script>alert", 1, true) and not page:find("<img", 1, true), "no markup injected")
  T.match(page, "&lt;/script&gt;&lt;script&gt;alert%(1%)")
end)

T.test("bad input: one line, exit 2, no page written", function()
  local r = run { odp, "report", dir .. "/nothing-here" }
  T.eq(r.status, 2)
  T.match(r.stderr, "^odp: cannot read '[^\n]*nothing%-here'\n$")
  T.write(dir .. "/junk.json", "this is not JSON\n")
  r = run { odp, "report", dir .. "/junk.json" }
  T.eq(r.status, 2)
  T.match(r.stderr, "^odp: input: [^\n]*junk.json line 1 is not a record")
  T.ok(not sys.stat(dir .. "/junk.html"), "no page")
  r = run { odp, "report", "a", "b", "c" }
  T.eq(r.status, 2)
  T.match(r.stderr, "got 3 argument")
  -- a killed sweep's cut last line: left out with a warning, the rest drawn
  local rec = T.read(fixtures .. "/records/run_host.json"):gsub("\n%s*", "")
  T.write(dir .. "/cut.jsonl", rec .. "\n" .. rec .. "\n" .. rec:sub(1, 100))
  r = run { odp, "report", dir .. "/cut.jsonl" }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stderr, "the last line of [^\n]*cut.jsonl is cut off")
  T.match(T.read(dir .. "/cut.html"), "2 %(2 ok, 0 failed%)")
  -- a failed run is a page too: its error, boxed
  T.write(dir .. "/failed.json", json.encode { schema = "odp.result/1", ok = false, flow = "executorch",
    error = { code = "ETIMEDOUT", message = "the runner did not finish in 600 s" } })
  r = run { odp, "report", dir .. "/failed.json" }
  T.eq(r.status, 0, r.stderr)
  local page = T.read(dir .. "/failed.html")
  T.match(page, "the run failed: ETIMEDOUT: the runner did not finish in 600 s")
  T.match(page, "FAILED run")
  validate(dir .. "/failed.html")
  -- with nothing to draw in a trace: no trace file, no link (a link to 0 events is a dead end)
  T.ok(not sys.stat(dir .. "/failed.trace.json"), "no trace")
  T.ok(not page:find("Chrome/Perfetto", 1, true), "no trace link")
end)

T.done()
