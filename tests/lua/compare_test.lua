-- odp compare: synthetic runs/<id>/ directories with known samples (SciPy is the oracle of the p-value),
-- bad inputs, and two real runs of the real executor_runner.
local T = require("t")
local json = require("odp.core.json")
local proc = require("odp.proc")
local history = require("odp.results.history")
local result = require("odp.results.result")
local measure = require("odp.results.measure")
local stats = require("odp.core.stats")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local add = root .. "/tests/fixtures/pte/add_arduino.pte"

-- a runs/<id>/ directory holding a record and its samples.csv: processes of n iterations around `ms`
local function run_dir(base, name, ms, opts)
  opts = opts or {}
  local dir = base .. "/" .. name
  os.execute("mkdir -p '" .. dir .. "'")
  math.randomseed(opts.seed or 1)
  local groups = {}
  for p = 1, opts.processes or 5 do
    local g = { ms * 3 }
    for i = 2, opts.n or 40 do g[i] = ms * (1 + (math.random() - 0.5) * 0.04) end
    groups[p] = g
  end
  assert(measure.write_samples(dir .. "/samples.csv", groups))
  local rec = result.new { flow = "executorch", device = opts.device or "host", target = opts.target or "local://x" }
  rec.ok = opts.ok ~= false
  if not rec.ok then result.fail(rec, "ERUNNER", "runner exited with status 1") end
  rec.model = { path = opts.model or "m.pte", sha256 = opts.sha or "aa11", bytes = 10 }
  rec.latency_ms = measure.latency({ groups = groups, source = "log", per_iteration = true }, {})
  rec.peak_rss_kb = opts.rss or 4000
  rec.device_state = opts.state
  rec.params = opts.params or { num_executions = 40 }
  rec.artifacts = { run_dir = dir, samples = dir .. "/samples.csv" }
  assert(history.save(rec, dir))
  return dir, groups
end

local function compare(args)
  local argv = { odp, "compare" }
  table.move(args, 1, #args, #argv + 1, argv)
  argv.timeout = 120
  return assert(proc.run(argv))
end

local base = T.tmpdir()
local A, ga = run_dir(base, "a", 10.0)
local B, gb = run_dir(base, "b", 11.0, { seed = 2 })
local A2 = run_dir(base, "a2", 10.0, { seed = 3 })

T.test("B 10% slower: ratio, CI around it, verdict slower; p is SciPy's; fixed seed, same output", function()
  local r = compare { A, B, "--format", "json" }
  T.eq(r.status, 0, r.stderr)
  local res = assert(json.decode(r.stdout))
  local lat = res.rows[1]
  T.eq(lat.metric, "latency"); T.eq(lat.verdict, "slower")
  T.eq(lat.a.n, 200); T.eq(lat.b.n, 200)
  local all_a, all_b = measure.flatten(ga), measure.flatten(gb)
  T.eq(lat.ratio, stats.percentile(all_b, 50) / stats.percentile(all_a, 50))
  T.ok(lat.ci95[1] < lat.ratio and lat.ratio < lat.ci95[2], "the ratio is inside its CI")
  T.ok(lat.ci95[1] > 1.08 and lat.ci95[2] < 1.12, ("CI [%g, %g] around 1.10"):format(lat.ci95[1], lat.ci95[2]))
  local py = assert(proc.run { "/usr/bin/python3", "-c", "import json,sys\nimport scipy.stats as st\nd=json.load(sys.stdin)\n"
    .. "print(json.dumps(st.mannwhitneyu(d[0], d[1], method='asymptotic').pvalue))",
    stdin = json.encode { all_a, all_b }, timeout = 60 })
  T.eq(py.status, 0, "SciPy is installed with the test packages (vendor/packages.txt): " .. py.stderr)
  local want = assert(json.decode(py.stdout))
  T.near(lat.p, want, math.max(want * 1e-6, 1e-300), "p against SciPy")
  T.eq(res.rows[3].metric, "first iteration"); T.eq(res.rows[3].a.n, 5)
  T.eq(compare { A, B, "--format", "json" }.stdout, r.stdout, "the same inputs give the same output")
  local other = compare { A, B, "--format", "json", "--seed", "9" }
  T.ok(other.stdout ~= r.stdout, "another seed, another resampling")
end)

T.test("A against A measured again: no difference within noise; human table lines up", function()
  local r = compare { A, A2 }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "latency .- no difference within noise")
  local rows = {}
  for line in r.stdout:gmatch("[^\n]+") do
    if line:match("^metric ") or line:match("^latency ") or line:match("^peak RSS ") then rows[#rows + 1] = line end
  end
  T.eq(#rows, 3)
  -- right-aligned columns end under their heading's last letter, the verdict starts under its heading
  local header, at = rows[1], 1
  for _, name in ipairs { "A median", "B median", "n A/B", "B/A", "change", "95% CI of change", " p ", "verdict" } do
    local s, e = header:find(name, at, true)
    T.ok(s, "heading " .. name)
    if name == " p " then s, e = s + 1, e - 1 end
    for i = 2, #rows do
      local row = rows[i]
      if name == "verdict" then
        T.eq(row:sub(s - 1, s), " " .. row:sub(s, s):match("%S"), ("%q: verdict starts at column %d"):format(row, s))
      else
        T.ok(row:sub(e, e) ~= " " and row:sub(e + 1, e + 1) == " ", ("%q: %s ends at column %d"):format(row, name, e))
      end
    end
    at = e + 1
  end
  T.match(r.stdout, "peak RSS .- too few samples")
end)

T.test("--fail-if-slower: exit 1 only when the whole CI is beyond PCT", function()
  local r = compare { A, B, "--fail-if-slower", "5" }
  T.eq(r.status, 1)
  T.match(r.stderr, "B is slower than A by %+%d+%.%d%% %(95%% CI %+%d+%.%d%% %.%. %+%d+%.%d%%%), beyond %-%-fail%-if%-slower 5%%")
  T.eq(compare { A, B, "--fail-if-slower", "15" }.status, 0)
  T.eq(compare { B, A, "--fail-if-slower", "0" }.status, 0, "B faster")
end)

T.test("--noise: a clear 1% change is 'same' within the default 2%, 'slower' with --noise 0.5 or 0", function()
  local B1 = run_dir(base, "b1", 10.1, { seed = 4 })
  local res = assert(json.decode(compare { A, B1, "--format", "json" }.stdout))
  local lat = res.rows[1]
  T.eq(lat.bootstrap, "hierarchical")
  T.ok(lat.p < 0.05 and lat.ci95[1] > 1, ("a real change: p %g, CI [%g, %g]"):format(lat.p, lat.ci95[1], lat.ci95[2]))
  T.ok(lat.ci95[2] < 1.02, "inside the noise")
  T.eq(lat.verdict, "same")
  for _, noise in ipairs { "0.5", "0" } do
    res = assert(json.decode(compare { A, B1, "--format", "json", "--noise", noise }.stdout))
    T.eq(res.rows[1].verdict, "slower", "--noise " .. noise)
  end
  T.eq(assert(json.decode(compare { B1, A, "--format", "json", "--noise", "0" }.stdout)).rows[1].verdict, "faster")
end)

T.test("--noise that is not a percentage >= 0: one line, exit 2", function()
  for _, bad in ipairs { "-1", "abc", "1e999" } do
    local r = compare { A, B, "--noise", bad }
    T.eq(r.status, 2, bad)
    T.eq(select(2, r.stderr:gsub("\n", "")), 1, r.stderr)
    T.match(r.stderr, "^odp: %-%-noise ")
    T.eq(r.stdout, "")
  end
end)

T.test("one process a side: the CI is the flat one and a note says it covers only within-process noise", function()
  local A1 = run_dir(base, "a1", 10.0, { processes = 1, n = 100 })
  local B1 = run_dir(base, "b1p", 10.0, { processes = 1, n = 100, seed = 5 })
  local r = compare { A1, B1, "--format", "json" }
  T.eq(r.status, 0, r.stderr)
  local res = assert(json.decode(r.stdout))
  T.eq(res.rows[1].bootstrap, "flat")
  local notes = table.concat(res.notes, "\n")
  T.match(notes, "A holds one process: its CIs cover only the noise within that process")
  T.match(notes, "B holds one process: .-%-%-repeat N")
  T.match(r.stderr, "odp: A holds one process") -- JSON on stdout: the terminal gets the notes
  T.ok(not table.concat(assert(json.decode(compare { A, B, "--format", "json" }.stdout)).notes, "\n")
    :find("holds one process"), "no note with five processes a side")
end)

-- processes whose levels differ by a few percent, each with little noise inside: the way real processes
-- of one binary behave (address layout, cache placement, clock)
local function clustered(seed, processes, n)
  math.randomseed(seed)
  local groups = {}
  for p = 1, processes do
    local level = 10 * (1 + (math.random() - 0.5) * 0.10)
    local g = {}
    for i = 1, n do g[i] = level * (1 + (math.random() - 0.5) * 0.01) end
    groups[p] = g
  end
  return groups
end

T.test("hierarchical bootstrap: seeded, wider than the flat one under between-process variance", function()
  local xg, yg = clustered(11, 6, 30), clustered(12, 6, 30)
  local x, y = measure.flatten(xg), measure.flatten(yg)
  local ratio, lo, hi = stats.bootstrap_ratio_groups(xg, yg, { seed = 3 })
  T.eq(ratio, stats.percentile(y, 50) / stats.percentile(x, 50))
  local r2, lo2, hi2 = stats.bootstrap_ratio_groups(xg, yg, { seed = 3 })
  T.eq({ r2, lo2, hi2 }, { ratio, lo, hi }, "the same seed, the same interval")
  local _, lo3 = stats.bootstrap_ratio_groups(xg, yg, { seed = 4 })
  T.ok(lo3 ~= lo, "another seed, another resampling")
  local _, flo, fhi = stats.bootstrap_ratio(x, y, { seed = 3 })
  T.ok(hi - lo > 1.5 * (fhi - flo), ("hierarchical [%g, %g] wider than flat [%g, %g]"):format(lo, hi, flo, fhi))
  -- the two sides are drawn alike: the flat CI misses 1 here (a false "slower"), the hierarchical one does not
  T.ok(flo > 1 and lo < 1, "only the flat CI excludes 1")
  T.ok(lo < ratio and ratio < hi, "the ratio is inside its CI")
end)

-- The oracle of the hierarchical CI is the truth of a simulation, not another implementation: K data sets drawn
-- from a population whose true ratio of medians is known (B's processes are A's scaled by 1.1, so the ratio of
-- the population medians is exactly 1.1). A 95% CI must cover 1.1 in about 95% of them; the flat bootstrap,
-- blind to the between-process variance, covers it in about a quarter (measured: 38 and 9 of 40 at these seeds).
T.test("hierarchical bootstrap: its 95% CI covers a known true ratio in about 95% of simulated runs", function()
  local K, truth, hier, flat = 40, 1.1, 0, 0
  local function scaled(seed, s)
    local gs = clustered(seed, 6, 30)
    for _, g in ipairs(gs) do for i = 1, #g do g[i] = g[i] * s end end
    return gs
  end
  for k = 1, K do
    local xg, yg = scaled(1000 + 2 * k, 1), scaled(1001 + 2 * k, truth)
    local _, lo, hi = stats.bootstrap_ratio_groups(xg, yg, { seed = k, resamples = 1000 })
    if lo <= truth and truth <= hi then hier = hier + 1 end
    local _, flo, fhi = stats.bootstrap_ratio(measure.flatten(xg), measure.flatten(yg), { seed = k, resamples = 1000 })
    if flo <= truth and truth <= fhi then flat = flat + 1 end
  end
  -- 34 of 40 is 85%: below it, a 95% interval is too narrow (P(X <= 33) is about 1% at a true 95%)
  T.ok(hier >= 34, ("hierarchical CI covers the true ratio in %d of %d runs"):format(hier, K))
  T.ok(flat <= 20, ("the flat CI covers it in %d of %d runs: the design has between-process variance"):format(flat, K))
end)

T.test("different run parameters are said, with both values", function()
  local P = run_dir(base, "p10", 10.0, { params = { num_executions = 10 } })
  local r = compare { A, P }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "note: A and B ran with different parameters: num_executions 40 vs 10")
  T.ok(not compare({ A, A2 }).stdout:find("different parameters"), "same parameters: no note")
end)

T.test("different models: refused with one line, exit 2; --force compares and says so", function()
  local C = run_dir(base, "c", 10.0, { sha = "bb22", model = "other.pte" })
  local r = compare { A, C }
  T.eq(r.status, 2); T.eq(select(2, r.stderr:gsub("\n", "")), 1, r.stderr)
  T.match(r.stderr, "A and B measured different models %(m%.pte sha256 aa11, other%.pte sha256 bb22%): %-%-force")
  r = compare { A, C, "--force" }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "note: A and B measured different models")
end)

T.test("different devices and device states are said; a missing device_state is handled", function()
  local function state(gov, temp)
    return { kernel = "6.6", cpus_used = "0-3", before = { cpus = { { cpu = 0, governor = gov } }, loadavg = temp },
      after = { thermal = { { zone = "cpu", temp_c = temp } } } }
  end
  local D = run_dir(base, "d", 10.0, { device = "rpi5", target = "ssh://pi@rpi5:22", state = state("powersave", 40) })
  local E = run_dir(base, "e", 10.0, { state = state("performance", 55) })
  local F = run_dir(base, "f2", 10.0, { state = state("powersave", 61) })
  local r = compare { A, D }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "note: measured on different devices: A on host %(local://x%), B on rpi5")
  T.match(r.stdout, "only one side recorded its device state")
  r = compare { D, E, "--format", "json" }
  local res = assert(json.decode(r.stdout))
  T.match(table.concat(res.notes, "\n"), "device states differ in: governors$")
  res = assert(json.decode(compare { D, F, "--format", "json" }.stdout))
  T.ok(not table.concat(res.notes, "\n"):find("device states differ"), "temperatures and load are readings, not setup")
end)

T.test("bad input: a failed record, no samples, a cut JSONL line, not a record, a missing file", function()
  local F = run_dir(base, "f", 10.0, { ok = false })
  local r = compare { A, F }
  T.eq(r.status, 2); T.match(r.stderr, "B: .- holds only failed runs %(record 1 %(ERUNNER: runner exited with status 1%)%): nothing was measured")
  -- a record whose samples.csv is gone
  local G = run_dir(base, "g", 10.0)
  os.remove(G .. "/samples.csv")
  r = compare { A, G .. "/result.json" }
  T.eq(r.status, 2); T.match(r.stderr, "B: .- has no latency samples")
  T.eq(select(2, r.stderr:gsub("\n", "")), 1, r.stderr)
  -- a sweep's JSONL killed mid-write: the cut last line is a warning, the rest is compared
  local rec_b = assert(result.decode(T.read(B .. "/result.json")))
  local jsonl = base .. "/sweep.jsonl"
  T.write(jsonl, result.encode(rec_b) .. "\n" .. result.encode(rec_b):sub(1, 40))
  r = compare { A, jsonl }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "note: B: the last line of .-sweep%.jsonl is cut off %(a killed sweep%?%): left out")
  T.write(base .. "/junk.jsonl", "{\"a\":1}\nnot json\n{\"b\":2}\n")
  r = compare { A, base .. "/junk.jsonl" }
  T.eq(r.status, 2); T.match(r.stderr, "line 2 is not a record")
  r = compare { A, base .. "/nothing" }
  T.eq(r.status, 2); T.match(r.stderr, "B: cannot read")
  r = compare { A }
  T.eq(r.status, 2); T.eq(r.stderr, "odp: compare takes two results, A and B, got 1 (odp compare --help)\n")
end)

T.with_real_runner("real runner: two host runs compared end to end, with operators from the ETDumps and an SVG", function(runner)
  local dir = T.tmpdir()
  local dirs = {}
  for i = 1, 2 do
    local r = assert(proc.run { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", add, "-n", "10",
      "--min-samples", "60", "--etdump", dir .. "/e" .. i .. ".etdump", "--runs-dir", dir .. "/runs" .. i,
      "--format", "json", timeout = 120 })
    T.eq(r.status, 0, r.stderr)
    dirs[i] = assert(json.decode(r.stdout)).artifacts.run_dir
  end
  local r = compare { dirs[1], dirs[2], "--format", "json", "--svg", dir .. "/c.svg" }
  T.eq(r.status, 0, r.stderr)
  local res = assert(json.decode(r.stdout))
  local names = {}
  for _, row in ipairs(res.rows) do names[row.metric] = row end
  T.ok(names.latency and names.latency.ci95, "latency with a CI")
  T.eq(names.latency.a.n, 60)
  T.ok(names["warm latency"] and names["first iteration"], "warm and first rows")
  T.ok(names["op Execute/native_call_add.out"], "an operator row from the ETDumps")
  local svg = T.read(dir .. "/c.svg")
  T.match(svg, 'class="errorbar"')
  local png = proc.run { "rsvg-convert", "-o", dir .. "/c.png", dir .. "/c.svg", timeout = 30 }
  T.eq(png.status, 0, png.stderr)
end)

-- issue 28: two runs given the same --etdump. Each record keeps its own copy (its run directory, its sha256), so
-- compare, inspect and report show each run's own operators: before, both sides read the file the second run
-- had overwritten (every op row 1.000, A's Method::init showing B's time).
T.with_real_runner("two runs with one --etdump: compare, inspect and report read each run's own ETDump, and say when it is gone", function(runner)
  local dir = T.tmpdir()
  local recs = {}
  for i = 1, 2 do
    local r = assert(proc.run { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", add, "-n", "10",
      "--etdump", dir .. "/same.etdump", "--runs-dir", dir .. "/runs", "--format", "json", timeout = 120 })
    T.eq(r.status, 0, r.stderr)
    recs[i] = assert(json.decode(r.stdout))
  end
  local a, b = recs[1].artifacts.run_dir, recs[2].artifacts.run_dir
  T.eq(T.read(dir .. "/same.etdump"), T.read(b .. "/etdump.etdp"), "--etdump holds a copy of the last run's")
  T.ok(T.read(a .. "/etdump.etdp") ~= T.read(b .. "/etdump.etdp"), "each run kept its own")
  local function own_p50(rec, name)
    for _, op in ipairs(rec.ops) do if op.name == name then return op.p50 end end
  end
  local r = compare { a, b, "--format", "json" }
  T.eq(r.status, 0, r.stderr)
  local rows = {}
  for _, row in ipairs(assert(json.decode(r.stdout)).rows) do rows[row.metric] = row end
  local init = rows["op Default/Method::init"]
  T.near(init.a.median, own_p50(recs[1], "Method::init"), 1e-9, "A's Method::init is A's own")
  T.near(init.b.median, own_p50(recs[2], "Method::init"), 1e-9, "B's is B's")
  -- inspect RUN: that run's ETDump (odp inspect FILE of the copy is the oracle)
  local ia = assert(proc.run { odp, "inspect", a, "--format", "json", timeout = 30 })
  local ib = assert(proc.run { odp, "inspect", a .. "/etdump.etdp", "--format", "json", timeout = 30 })
  T.eq(ia.status, 0, ia.stderr); T.eq(ia.stdout, ib.stdout)
  -- report A: A's trace
  local page = dir .. "/a.html"
  T.eq(assert(proc.run { odp, "report", a, "--out", page, "-q", timeout = 60 }).status, 0)
  local oracle = require("odp.results.trace").chrome(assert(require("odp.parse.etdump").read(a .. "/etdump.etdp")), { time_scale = "ns" })
  -- the ETDump's events (process 1; the memory track beside them is process 2)
  local etd_events = {}
  for _, e in ipairs(assert(json.decode(T.read(dir .. "/a.trace.json"))).traceEvents) do
    if e.pid == 1 then etd_events[#etd_events + 1] = e end
  end
  T.eq(etd_events, json.decode(require("odp.results.trace").encode(oracle)).traceEvents)
  -- A's copy changed since the run, then gone: each view says so, and shows nothing of it
  T.write(a .. "/etdump.etdp", T.read(b .. "/etdump.etdp"))
  r = compare { a, b, "--format", "json" }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stderr, "A: etdump .-/etdump.etdp has changed since the run %(its sha256 differs from the record's%): its operators are not compared")
  T.eq(assert(json.decode(r.stdout)).rows[1].metric:match("^op ") and "op row" or "no op rows", "no op rows")
  local i = assert(proc.run { odp, "inspect", a, timeout = 30 })
  T.eq(i.status, 2); T.match(i.stderr, "^odp: run .-: etdump .- has changed since the run")
  local rp = assert(proc.run { odp, "report", a, "--out", page, timeout = 60 })
  T.eq(rp.status, 0, rp.stderr); T.match(rp.stderr, "odp: no trace: etdump .- has changed since the run")
  os.remove(a .. "/etdump.etdp")
  r = compare { a, b }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "A: etdump .-/etdump.etdp is missing: its operators are not compared")
  i = assert(proc.run { odp, "inspect", a, timeout = 30 })
  T.eq(i.status, 2); T.match(i.stderr, "etdump .- is missing %(run it with %-%-etdump to keep one%)")
  os.remove(b .. "/samples.csv")
  r = compare { a, b }
  T.eq(r.status, 2); T.match(r.stderr, "B: samples .-/samples.csv is missing")
end)

-- A/A with the real runner: odp's own runs of one model, of several processes each. The runs of the two
-- sides alternate (ABBA, so neither side always runs right after the other), so a change in the machine's
-- load while the test runs (other jobs on a shared box) falls on both sides alike, as it should in any A/B
-- measurement. Processes of one binary still differ by
-- tens of percent here (which core, which clock, where the heap landed): the flat bootstrap over all
-- iterations called such A/A pairs faster or slower, the hierarchical one must not. A 95% CI still misses
-- 1 by chance about one time in twenty, so of five A/A pairs at most two may get a verdict on a row (three
-- would happen by chance less than once in a thousand runs).
T.with_real_runner("real runner A/A: interleaved runs of several processes get no faster/slower; A scaled 2x is slower", function(runner)
  local dir = T.tmpdir()
  local pairs_n, runs_n = 5, 8
  local sides = {}
  for k = 1, pairs_n do
    sides[k] = { a = {}, b = {} }
    for j = 1, runs_n do
      for _, s in ipairs(j % 2 == 1 and { "a", "b" } or { "b", "a" }) do
        local r = assert(proc.run { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", add, "-n", "10",
          "--repeat", "2", "--runs-dir", dir .. "/runs", "--format", "json", timeout = 120 })
        T.eq(r.status, 0, r.stderr)
        table.insert(sides[k][s], result.encode(assert(json.decode(r.stdout))))
      end
    end
  end
  local verdicts, seen = {}, {}
  for k, side in ipairs(sides) do
    for _, s in ipairs { "a", "b" } do T.write(("%s/%s%d.jsonl"):format(dir, s, k), table.concat(side[s], "\n") .. "\n") end
    local r = compare { ("%s/a%d.jsonl"):format(dir, k), ("%s/b%d.jsonl"):format(dir, k), "--format", "json" }
    T.eq(r.status, 0, r.stderr)
    local res = assert(json.decode(r.stdout))
    T.eq(res.a.processes, 2 * runs_n); T.eq(res.b.processes, 2 * runs_n)
    T.eq(res.rows[1].bootstrap, "hierarchical")
    for _, row in ipairs(res.rows) do
      if row.metric == "latency" or row.metric == "warm latency" or row.metric == "first iteration" then
        seen[row.metric] = true
        if row.verdict ~= "same" then
          verdicts[row.metric] = (verdicts[row.metric] or 0) + 1
          io.stderr:write(("A/A pair %d, %s: %s, B/A %g, CI [%g, %g], p %g\n"):format(k, row.metric, row.verdict,
            row.ratio, row.ci95[1], row.ci95[2], row.p))
        end
      end
    end
  end
  T.eq(seen, { latency = true, ["warm latency"] = true, ["first iteration"] = true })
  for metric, count in pairs(verdicts) do
    T.ok(count <= 2, ("%s got a verdict in %d of %d A/A pairs"):format(metric, count, pairs_n))
  end
  -- side A of the first pair with every sample twice as long: a clear slowdown is still called one. (Clear
  -- here means beyond the process-to-process spread: at 1.5x a resampling of slow processes against one of
  -- fast ones can come near 1.)
  local slow = {}
  for j, line in ipairs(sides[1].a) do
    local rec = assert(result.decode(line))
    local out = ("%s/slow%d"):format(dir, j)
    os.execute("mkdir -p '" .. out .. "'")
    local groups = assert(measure.read_samples((require("odp.results.result").artifact(rec, "samples"))))
    for _, g in ipairs(groups) do for i = 1, #g do g[i] = g[i] * 2 end end
    assert(measure.write_samples(out .. "/samples.csv", groups))
    rec.artifacts = { run_dir = out, samples = { file = "samples.csv" } }
    slow[j] = result.encode(rec)
  end
  T.write(dir .. "/slow.jsonl", table.concat(slow, "\n") .. "\n")
  local res = assert(json.decode(compare { dir .. "/a1.jsonl", dir .. "/slow.jsonl", "--format", "json" }.stdout))
  local lat = res.rows[1]
  T.eq(lat.metric, "latency"); T.near(lat.ratio, 2, 1e-9)
  T.eq(lat.verdict, "slower", ("CI [%g, %g]"):format(lat.ci95[1], lat.ci95[2]))
  res = assert(json.decode(compare { dir .. "/slow.jsonl", dir .. "/a1.jsonl", "--format", "json" }.stdout))
  T.eq(res.rows[1].verdict, "faster")
end)

T.done()
