-- The history (lua/odp/results/history.lua) against real servers: Debian's SQLite library, and PostgreSQL 15
-- started here on a unix socket in a temp dir (initdb/pg_ctl as the unprivileged user nobody). The same
-- store tests run on both; then 4 odp processes x 500 records at once; a PostgreSQL backend killed under a
-- writer; the default path; the CLI (odp history, SERIES, --regressions --fail, import, json/csv).
local T = require("t")
local json = require("odp.core.json")
local proc = require("odp.proc")
local history = require("odp.results.history")
local result = require("odp.results.result")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local tmp = T.tmpdir()

local make_record = require("history_fixture").record

local function store_tests(label, url)
  T.test(label .. ": a record adds one run and a point per metric; adding it again adds nothing", function()
    local db = assert(history.open(url))
    local dir = T.tmpdir()
    local rec, path = make_record(dir, 1, { tag = label })
    local id, added = assert(db:add(rec, { record_path = path }))
    T.eq(added, true)
    local id2, again = db:add(rec, { record_path = path })
    T.eq(id2, id, "the same run")
    T.eq(again, false)
    local series = assert(db:series { metric = "latency_ms", model = "mv2.pte" })
    T.eq(#series, 1)
    T.eq(series[1].n, 1)
    T.eq(series[1].board, "Raspberry Pi 5 Model B")
    T.eq(series[1].soc, "Cortex-A76 x4")
    T.eq(series[1].kernel, "6.6.31")
    T.eq(series[1].latest, 1.0)
    local pts = assert(db:points(series[1].id))
    T.eq(#pts, 1)
    T.eq(pts[1].samples, { 1.0, 1.01, 0.99, 1.02, 0.98 }, "the samples.csv beside the record, kept")
    T.eq(pts[1].lo, 0.98)
    T.eq(pts[1].hi, 1.02)
    T.eq(pts[1].record_path, path)
    T.eq(#assert(db:series { model = "mv2.pte" }), 2, "latency_ms, peak_rss_kb and no load_ms (the record has none)")
    db:close()
  end)

  T.test(label .. ": series keys: another model, parameters or kernel is another series; a failed run adds no point", function()
    local db = assert(history.open(url))
    local dir = T.tmpdir()
    local base = #assert(db:series { metric = "latency_ms" })
    assert(db:add((make_record(dir, 2, { tag = "k1", model = "other.pte", model_sha = ("c"):rep(64) }))))
    assert(db:add((make_record(dir, 3, { tag = "k2", params = { num_executions = 100 } }))))
    local r = make_record(dir, 4, { tag = "k3" })
    r.device_state.kernel = "6.12.0"
    assert(db:add(r))
    local before = #assert(db:series {})
    assert(db:add((make_record(dir, 5, { tag = "k4", ok = false }))))
    T.eq(#assert(db:series {}), before, "no point, no series")
    T.eq(#assert(db:series { metric = "latency_ms" }), base + 3)
    T.eq(#assert(db:series { model = ("c"):rep(8) }), 2, "a sha256 prefix finds a model")
    T.eq(#assert(db:series { board = "pi 5" }), before, "every board here is a Pi 5")
    T.eq(#assert(db:series { board = "jetson" }), 0)
    db:close()
  end)

  T.test(label .. ": points under another governor or throttled are dirty; since filters by time", function()
    local db = assert(history.open(url))
    local dir = T.tmpdir()
    local params = { num_executions = 7 }
    for i = 1, 6 do
      assert(db:add((make_record(dir, 100 + i, { tag = "d", params = params,
        governor = i == 3 and "powersave" or nil, throttled = i == 5 or nil }))))
    end
    local s = assert(db:series { metric = "latency_ms" })
    local id
    for _, x in ipairs(s) do if x.params == '{"num_executions":7}' then id = x.id end end
    local pts = assert(db:points(id))
    T.eq(#pts, 6)
    local dirty = {}
    for i, p in ipairs(pts) do dirty[i] = p.dirty end
    T.eq(dirty, { false, false, true, false, true, false })
    local t4 = pts[4].t
    T.eq(#assert(db:points(id, { since = t4 })), 3)
    T.eq(#assert(db:points(id, { since = t4, context = 2 })), 5, "two points of context before since")
    db:close()
  end)

  T.test(label .. ": the schema is versioned; a newer database than odp knows is refused in one line", function()
    local db = assert(history.open(url))
    T.eq(db.version, #history.MIGRATIONS)
    assert(db.conn:query("INSERT INTO odp_schema (version) VALUES ($1)", { 99 }))
    db:close()
    local none, err, code = history.open(url)
    T.eq(none, nil)
    T.eq(code, "ENOTSUP")
    T.match(err, ("schema version 99, newer than this odp's %d: upgrade odp"):format(#history.MIGRATIONS))
    db = assert(history.open(url, { timeout = 5 }) or true)
  end)
end

-- reset the refused version for the next tests (the test above leaves it at 99)
local function unrefuse(url)
  local kind = url:match("^postgres") and "pg" or "sqlite"
  local conn
  if kind == "pg" then conn = assert(require("odp.pg").connect(url)) else conn = assert(require("odp.sqlite").open(url)) end
  assert(conn:query("DELETE FROM odp_schema WHERE version = $1", { 99 }))
  conn:close()
end

-- 4 odp processes x 500 records into one history at once, each record its own transaction (history.save's
-- path: history.record). Nothing lost, no "locked" on any stderr.
local function concurrent_writers(label, url, count)
  T.test(("%s: 4 processes x %d records at once: all there, no lock error"):format(label, count), function()
    local dir = T.tmpdir()
    local script = dir .. "/writer.lua"
    T.write(script, ([[
local history = require("odp.results.history")
local make = require("history_fixture").record
local w, url, count = tonumber(arg[1]), arg[2], tonumber(arg[3])
for i = 1, count do
  local rec, path = make(%q, w * 100000 + i, { tag = "w" .. w, host = tostring(w) })
  local ok, why = history.record(rec, path, { history = url })
  if not ok then io.stderr:write(why, "\n") end
end
]]):format(dir))
    local sh = {}
    for w = 1, 4 do sh[w] = ("%q run %q %d %q %d 2>%q/err%d &"):format(odp, script, w, url, count, dir, w) end
    local r = proc.run { argv = { "sh", "-c", table.concat(sh, " ") .. " wait" }, timeout = 300 }
    T.ok(r.ok, r.stderr)
    for w = 1, 4 do
      local err = T.read(("%s/err%d"):format(dir, w))
      T.eq(err, "", "writer " .. w .. " stderr")
    end
    local db = assert(history.open(url))
    local n = assert(db.conn:query("SELECT count(*) AS k FROM runs WHERE run_key LIKE $1", { "%-w_|%" })).k[1]
    T.eq(n, 4 * count)
    local pts = assert(db.conn:query("SELECT count(*) AS k FROM points p JOIN runs r ON r.id = p.run_id " ..
      "WHERE r.run_key LIKE $1", { "%-w_|%" })).k[1]
    T.eq(pts, 4 * count * 2, "latency_ms and peak_rss_kb of each")
    db:close()
  end)
end

-- SQLite ------------------------------------------------------------------------------------------------
local sqlite_url = tmp .. "/sub/dir/history.db"
store_tests("sqlite", sqlite_url)
unrefuse(sqlite_url)
T.test("sqlite: the file is in WAL mode, made with its directories", function()
  local db = assert(history.open(sqlite_url))
  T.eq(assert(db.conn:query("PRAGMA journal_mode")).journal_mode[1], "wal")
  db:close()
end)


-- Each run is one connection that closes without a checkpoint, and the next one rebuilds the WAL's index from
-- all of it: a WAL that only grew made every run's row slower (src/l_sqlite.c on_wal_commit).
T.test("sqlite: runs one connection each keep the WAL bounded (truncated every ~128 frames), every row kept", function()
  local dir = T.tmpdir()
  local url = dir .. "/wal.db"
  local largest, emptied = 0, false
  for i = 1, 60 do
    local db = assert(history.open(url))
    assert(db:add((make_record(dir, i, { tag = "wal" }))))
    db:close()
    local st = sys.stat(url .. "-wal")
    local size = st and st.size or 0
    largest = math.max(largest, size)
    if size == 0 then emptied = true end
  end
  T.ok(emptied, "the WAL was truncated at least once")
  T.ok(largest <= (128 + 32) * (4096 + 24), "the WAL stayed under ~160 frames: " .. largest .. " bytes")
  local db = assert(history.open(url))
  T.eq(assert(db.conn:query("SELECT count(*) AS k FROM runs")).k[1], 60)
  T.eq(assert(db.conn:query("PRAGMA integrity_check")).integrity_check[1], "ok")
  db:close()
end)
T.test("sqlite: a history of schema 1 migrates: run counts, latest times and conditions filled in from its rows", function()
  local dir = T.tmpdir()
  local url = dir .. "/old.db"
  local all = history.MIGRATIONS
  history.MIGRATIONS = { all[1] }
  local db = assert(history.open(url))
  T.eq(db.version, 1)
  -- what odp with schema 1 wrote: no cond, no counters
  for i = 1, 4 do
    local rec = make_record(dir, i, { tag = "old", governor = i == 2 and "powersave" or nil })
    local ok = assert(db.conn:query("INSERT INTO runs (run_key, started_at, t, ok, conditions, throttled) " ..
      "VALUES ($1, $2, $3, 1, $4, 0) RETURNING id", { "old" .. i, rec.started_at, history.epoch(rec.started_at),
      history.board_of(rec) and select(2, history.board_of(rec)).text }))
    local s = history.series_of(rec, "latency_ms", "ms")
    local sid = db.conn:query("SELECT id FROM series WHERE key = $1", { s.key }).id[1] or
      assert(db.conn:query("INSERT INTO series (key, name, metric, params) VALUES ($1, $2, $3, $4) RETURNING id",
        { s.key, s.name, "latency_ms", s.params })).id[1]
    assert(db.conn:query("INSERT INTO points (run_id, series_id, t, value) VALUES ($1, $2, $3, $4)",
      { ok.id[1], sid, history.epoch(rec.started_at), i }))
  end
  db:close()
  history.MIGRATIONS = all
  db = assert(history.open(url))
  T.eq(db.version, #all)
  local series = assert(db:series {})
  T.eq(#series, 1)
  T.eq(series[1].n, 4)
  T.eq(series[1].latest, 4.0)
  local dirty = {}
  for i, p in ipairs(assert(db:points(series[1].id))) do dirty[i] = p.dirty end
  T.eq(dirty, { false, true, false, false }, "the powersave run")
  db:close()
end)

concurrent_writers("sqlite", tmp .. "/concurrent.db", 500)

-- Where runs go ------------------------------------------------------------------------------------------
T.test("default: ~/.local/share/odp/history.db under HOME; ODP_HISTORY, --history and --no-history change it", function()
  local home = T.tmpdir()
  local dir = T.tmpdir()
  local script = dir .. "/save.lua"
  T.write(script, [[
local history = require("odp.results.history")
local rec, path = require("history_fixture").record(arg[1], tonumber(arg[2]), { tag = "save" })
local opts = {}
for i = 3, #arg do local k, v = arg[i]:match("^(.-)=(.*)$") opts[k] = v == "true" or v end
assert(history.save(rec, path:match("^(.*)/"), opts))
]])
  local function save(i, env, ...)
    local e = { HOME = home, ODP_HISTORY = false, XDG_DATA_HOME = false, GIT_COMMIT = false, CI_COMMIT_SHA = false,
      GITHUB_SHA = false }
    for k, v in pairs(env) do e[k] = v end
    local r = proc.run { argv = { odp, "run", script, dir, tostring(i), ... }, env = e, timeout = 60 }
    T.ok(r.ok, r.stderr)
    T.eq(r.stderr, "")
    local rec = assert(result.decode(T.read(("%s/runs/r%05d-save/result.json"):format(dir, i))))
    return rec
  end
  local rec = save(1, { GITHUB_SHA = "feedface" })
  T.eq(rec.commit, "feedface", "the commit from CI's variable, kept in the record")
  local default = home .. "/.local/share/odp/history.db"
  T.ok(sys.stat(default), "the default file")
  local function runs(path)
    local db = assert(require("odp.sqlite").open(path))
    local n = db:query("SELECT count(*) AS k, max(commit_id) AS c FROM runs")
    db:close()
    return n.k[1], n.c[1]
  end
  T.eq({ runs(default) }, { 1, "feedface" })
  save(2, { ODP_HISTORY = dir .. "/env.db", GIT_COMMIT = "c0ffee" }, "commit=beef")
  T.eq({ runs(dir .. "/env.db") }, { 1, "beef" }, "--commit wins over the environment")
  save(3, { ODP_HISTORY = dir .. "/env.db" }, "history=" .. dir .. "/opt.db")
  T.eq(runs(dir .. "/opt.db"), 1, "--history wins over ODP_HISTORY")
  save(4, {}, "no_history=true")
  save(5, { ODP_HISTORY = "off" })
  T.eq(runs(default), 1, "--no-history and ODP_HISTORY=off add nothing")
  T.eq(runs(dir .. "/env.db"), 1)
end)

-- history.save in an odp process of its own, into the history at url(dir): the run's record is saved and
-- stderr is one warning line matching pattern. -> the record as saved, the test's dir
local function saved_with_one_warning(tag, url, pattern)
  local dir = T.tmpdir()
  T.write(dir .. "/notadir", "x")
  T.write(dir .. "/save.lua", ([[
local history = require("odp.results.history")
local rec, path = require("history_fixture").record(arg[1], 1, { tag = %q })
assert(history.save(rec, path:match("^(.*)/"), { history = arg[2] }))
]]):format(tag))
  local r = proc.run { argv = { odp, "run", dir .. "/save.lua", dir, url(dir) }, timeout = 60 }
  T.ok(r.ok, r.stderr)
  local lines = {}
  for l in r.stderr:gmatch("[^\n]+") do lines[#lines + 1] = l end
  T.eq(#lines, 1, r.stderr)
  T.match(lines[1], pattern)
  local saved = ("%s/runs/r00001-%s/result.json"):format(dir, tag)
  T.ok(sys.stat(saved), "the record")
  return require("odp.core.json").decode(T.read(saved)), dir
end

T.test("a history that cannot be written costs the run nothing: its record is saved and says so, one line says why; import adds it", function()
  local rec, dir = saved_with_one_warning("bad", function(dir) return dir .. "/notadir/h.db" end,
    "^odp: warning: history .*notadir/h%.db: .*the run is in .*r00001%-bad/result%.json; `odp history import` adds it later")
  T.eq(rec.history.written, false); T.match(rec.history.error, "notadir/h%.db")
  local db = assert(require("odp.results.history").open(dir .. "/later.db"))
  local res = db:import({ dir .. "/runs" })
  T.eq({ res.added, res.skipped, #res.failed }, { 1, 0, 0 }, "the row the run could not write")
  db:close()
end)



-- Real runs ----------------------------------------------------------------------------------------------
T.with_real_runner("a host run and every sweep point land in the history, with the run's samples and commit", function(runner)
  local dir = T.tmpdir()
  local url = dir .. "/real.db"
  local model = root .. "/tests/fixtures/pte/add_arduino.pte"
  local r = proc.run { argv = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", model, "-n", "20",
    "--runs-dir", dir .. "/runs", "--history", url, "--commit", "deadbeef", "-q" }, cwd = dir, timeout = 120 }
  T.ok(r.ok, r.stderr)
  r = proc.run { argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/host.lua", "--runner", runner,
    "--model", model, "-p", "num_executions=3,7", "--out", dir .. "/s.jsonl", "--runs-dir", dir .. "/runs", "-q" },
    env = { ODP_HISTORY = url }, cwd = dir, timeout = 120 }
  T.ok(r.ok, r.stderr)
  local db = assert(history.open(url))
  local series = assert(db:series { metric = "latency_ms" })
  T.eq(#series, 3, "one series per num_executions")
  local by = {}
  for _, s in ipairs(series) do by[json.decode(s.params).num_executions] = s end
  local pts = assert(db:points(by[20].id))
  T.eq(#pts, 1)
  T.eq(#pts[1].samples, 20, "every iteration's time")
  T.eq(pts[1].commit_id, "deadbeef")
  local rec = assert(result.decode(T.read(pts[1].record_path)))
  T.eq(rec.commit, "deadbeef", "the record says it too")
  T.near(pts[1].median, rec.latency_ms.p50, 1e-12, "the point is the record's median")
  local csv = T.read((require("odp.results.result").artifact(rec, "samples")))
  local n = select(2, csv:gsub("\n", "")) - 1
  T.eq(n, 20)
  T.eq(#assert(db:points(by[7].id))[1].samples, 7)
  -- importing the sweep's JSONL (and the run dirs) again adds nothing: the runs are known by their keys
  local res = db:import({ dir .. "/s.jsonl", dir .. "/runs" })
  T.eq({ res.added, res.skipped, #res.failed }, { 0, 5, 0 })
  T.eq(res.warnings, {})
  db:close()
  -- a run whose samples.csv changed since it ran: imported into a new history, its point has no samples and
  -- the import says why (the history reads the run's own copy, checked against the record's sha256)
  local changed = pts[1].record_path:match("^(.*)/")
  T.write(changed .. "/samples.csv", "process,iteration,ms\n1,1,5\n")
  db = assert(history.open(dir .. "/second.db"))
  res = db:import({ changed })
  T.eq(res.added, 1)
  T.match(table.concat(res.warnings, "\n"), "result%.json: samples .-/samples%.csv has changed since the run %(its sha256 differs from the record's%): its point is kept without samples")
  local s2 = assert(db:series { metric = "latency_ms" })
  T.eq(assert(db:points(s2[1].id))[1].samples, nil, "no samples from another file")
  db:close()
end)

T.with_real_runner("what changes a measurement is a parameter: sampled (two rates), with its overhead, without the "
  .. "memory watcher, with --inputs: each its own series; compare names the difference", function(runner)
  local dir = T.tmpdir()
  local url = dir .. "/p.db"
  local model = root .. "/tests/fixtures/pte/mlp.pte"
  local kinds = { {}, { "--sample" }, { "--sample=1000" }, { "--sample=1000", "--sample-overhead=2" },
    { "--no-memory" }, { "--inputs", "random:1" } }
  local run_dirs = {}
  for i, extra in ipairs(kinds) do
    local argv = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", model, "-n", "5",
      "--runs-dir", dir .. "/runs", "--history", url, "--format", "json" }
    table.move(extra, 1, #extra, #argv + 1, argv)
    local r = proc.run { argv = argv, cwd = dir, timeout = 300 }
    T.eq(r.status, 0, r.stderr)
    run_dirs[i] = assert(json.decode(r.stdout)).artifacts.run_dir
  end
  local db = assert(history.open(url))
  local series = assert(db:series { metric = "latency_ms" })
  db:close()
  local params = {}
  for _, s in ipairs(series) do
    local p = json.decode(s.params)
    params[#params + 1] = ("sample=%s sample_overhead=%s memory=%s inputs=%s"):format(tostring(p.sample),
      tostring(p.sample_overhead), tostring(p.memory), tostring(p.inputs))
  end
  table.sort(params)
  T.eq(params, {
    "sample=1000 sample_overhead=2 memory=nil inputs=nil",
    "sample=1000 sample_overhead=nil memory=nil inputs=nil",
    "sample=4000 sample_overhead=nil memory=nil inputs=nil",
    "sample=nil sample_overhead=nil memory=false inputs=nil",
    "sample=nil sample_overhead=nil memory=nil inputs=nil",
    "sample=nil sample_overhead=nil memory=nil inputs=random:1",
  }, "one series per kind of run, named by its parameters")
  local r = proc.run { argv = { odp, "compare", run_dirs[1], run_dirs[2] }, timeout = 60 }
  T.match(r.stdout .. r.stderr, "A and B ran with different parameters: sample null vs 4000")
end)

T.test("a writer killed (SIGKILL) in the middle of many writes leaves whole runs only", function()
  local dir = T.tmpdir()
  local url = dir .. "/crash.db"
  T.write(dir .. "/w.lua", ([[
local history = require("odp.results.history")
local make = require("history_fixture").record
local db = assert(history.open(%q))
io.stdout:write("open\n") io.stdout:flush()
for i = 1, 100000 do assert(db:add(make(%q, i, { tag = "k" }))) end
]]):format(url, dir))
  local r = proc.run { argv = { "sh", "-c", ("%q run %q & sleep 1.5; kill -9 $!; wait"):format(odp, dir .. "/w.lua") }, timeout = 60 }
  T.ok(r.ok or r.status ~= 0)
  local db = assert(require("odp.sqlite").open(url))
  T.eq(assert(db:query("PRAGMA integrity_check")).integrity_check[1], "ok")
  local runs = assert(db:query("SELECT count(*) AS k FROM runs")).k[1]
  T.ok(runs > 10, "it wrote for a while: " .. runs)
  local half = assert(db:query("SELECT count(*) AS k FROM runs r WHERE (SELECT count(*) FROM points p WHERE p.run_id = r.id) <> 2")).k[1]
  T.eq(half, 0, "every run has both its points")
  db:close()
end)


T.test("import: garbage, torn and mistyped records fail one line each, never raise, never half-add (300 mutations)", function()
  local dir = T.tmpdir()
  local db = assert(history.open(dir .. "/fuzz.db"))
  local rec = make_record(dir, 1, { tag = "seed" })
  local text = result.encode(rec)
  local rnd = T.lcg(11)
  local lines = {}
  local fields = { "started_at", "params", "latency_ms", "device_state", "model", "runner", "artifacts", "ok", "error",
    "commit", "peak_rss_kb" }
  local values = { "5", '"x"', "[]", "{}", "null", "true", "1e999", '{"p50":"fast","ci95":"wide","n":1.5}',
    '{"before":{"cpus":[7,{"max_khz":"x","governor":[]}]},"clusters":[5,{"cpus":9}],"android":{"product_model":3}}',
    '{"p50":1,"ci95":["a",null]}', '"' .. ("y"):rep(5000) .. '"' }
  local function mistype(m, f, v) return (m:gsub('"' .. f .. '":', '"' .. f .. '":' .. v .. ',"was_' .. f .. '":', 1)) end
  for _, f in ipairs(fields) do -- every field with every wrong type
    for _, v in ipairs(values) do lines[#lines + 1] = mistype(text, f, v) end
  end
  while #lines < 300 do
    local m = text
    if rnd(2) == 0 then m = m:sub(1, rnd(#m)) -- torn
    else -- bytes flipped
      for _ = 1, 1 + rnd(8) do
        local at = 1 + rnd(#m)
        m = m:sub(1, at - 1) .. string.char(rnd(256)) .. m:sub(at + 1)
      end
    end
    lines[#lines + 1] = m
  end
  for i, m in ipairs(lines) do lines[i] = m:gsub('"r00001%-seed', ('"m%05d'):format(i)):gsub("\n", " ") end
  T.write(dir .. "/fuzz.jsonl", table.concat(lines, "\n") .. "\n")
  local ok, res = pcall(db.import, db, { dir .. "/fuzz.jsonl" })
  T.ok(ok, tostring(res))
  T.eq(res.added + res.skipped + #res.failed, 300, "every line accounted for")
  T.ok(#res.failed > 0 and res.added > 0, ("some fail (%d), some are added (%d)"):format(#res.failed, res.added))
  for _, f in ipairs(res.failed) do T.ok(not f:find("\n") and #f < 600, "one line: " .. f:sub(1, 200)) end
  -- what was added reads back: the list, every point, the detector
  for _, sr in ipairs(assert(db:series {})) do history.detect(assert(db:points(sr.id))) end
  T.eq(assert(db.conn:query("PRAGMA integrity_check")).integrity_check[1], "ok")
  db:close()
end)

-- The command line ----------------------------------------------------------------------------------------
-- Gaussian noise from a seeded LCG (Box-Muller): the same series on every machine.
local function gaussian(seed)
  local g = seed
  return function()
    g = (g * 1103515245 + 12345) % 2147483648
    local u1 = (g + 1) / 2147483649
    g = (g * 1103515245 + 12345) % 2147483648
    return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * g / 2147483648)
  end
end

-- The commands over a history at url holding a series with a 6% regression from its run 21 (of 30); the
-- model is the test's own, so other tests' series in the same database do not count.
local function cli_tests(label, url)
T.test(label .. ": odp history: list, SERIES with an SVG trend, --regressions --fail (exit 1), json/csv, import", function()
  local dir = T.tmpdir()
  local gauss = gaussian(7)
  local db = assert(history.open(url))
  for i = 1, 30 do
    local lvl = i <= 20 and 1.0 or 1.06 -- a 6% regression from run 21
    local s = {}
    for j = 1, 15 do s[j] = lvl * (1 + 0.01 * gauss()) end
    local rec, path = make_record(dir, i, { tag = "cli", samples = s, model = "cli.pte", model_sha = ("e"):rep(64) })
    rec.commit = ("c%02d"):format(i)
    history.save(rec, path:match("^(.*)/"), { no_history = true })
    assert(db:add(rec, { record_path = path }))
  end
  db:close()
  local function run(...)
    return proc.run { argv = { odp, "history", "--history", url, "--model", "cli.pte", ... }, cwd = dir, timeout = 60 }
  end
  local r = run()
  T.ok(r.ok, r.stderr)
  T.match(r.stdout, "cli%.pte%s+Raspberry Pi 5 Model B%s+num_executions=10%s+latency_ms%s+30%s+1%.0%d%d ms%s+%+[56]%.%d%%")
  local list = json.decode(run("--format", "json", "--metric", "latency_ms").stdout)
  T.eq(#list, 1)
  T.eq(list[1].runs, 30)
  local id = list[1].id
  r = run(tostring(id))
  T.ok(r.ok, r.stderr)
  T.match(r.stdout, "change at run 21 %(.-, commit c21%): %+[56]%.%d%%, 95%% CI")
  T.match(r.stdout, "trend: history%-" .. id .. "%.svg")
  r = run(tostring(id), "--html", dir .. "/h.html")
  T.ok(r.ok, r.stderr)
  local page = T.read(dir .. "/h.html")
  T.match(page, "History of cli%.pte")
  T.match(page, "Detected changes")
  T.match(page, "%+[56]%.%d%%")
  -- the page names what the series is, as the terminal does: its parameters, model, board
  T.match(page, '<th scope="row">parameters</th><td>num_executions=10</td>')
  T.match(page, "cli%.pte %(sha256 eeeeeeeeeeee%)")
  T.match(page, "1 change%(s%) found, marked")
  local svg = T.read(dir .. "/history-" .. id .. ".svg")
  T.match(svg, 'class="mark"')
  T.eq(select(2, svg:gsub('class="errorbar"', "")), 30, "each run's CI")
  -- runs are counted: every x tick is a whole run
  local xticks = svg:match('<g class="xticks".-</g>')
  for label in xticks:gmatch("<text[^>]*>([^<]*)</text>") do T.match(label, "^%d+$", "x tick " .. label) end
  -- three runs cannot tell: the page says undecided, with the terminal's words, not "0 changes"
  local few = T.tmpdir()
  local fdb = assert(history.open(few .. "/few.db"))
  for i = 1, 3 do
    local rec, path = make_record(few, i, { tag = "few", model = "cli.pte", model_sha = ("e"):rep(64) })
    assert(fdb:add(rec, { record_path = path }))
  end
  fdb:close()
  local fl = json.decode(assert(proc.run { argv = { odp, "history", "--history", few .. "/few.db",
    "--metric", "latency_ms", "--format", "json" }, cwd = few, timeout = 60 }).stdout)
  local fr = assert(proc.run { argv = { odp, "history", "--history", few .. "/few.db", tostring(fl[1].id),
    "--html", few .. "/few.html" }, cwd = few, timeout = 60 })
  T.ok(fr.ok, fr.stderr)
  local said = fr.stdout:match("\n(undecided: [^\n]+)")
  T.ok(said, "the terminal says undecided: " .. fr.stdout)
  local fpage = T.read(few .. "/few.html")
  T.ok(fpage:find(require("odp.results.html").escape(said), 1, true), "the page says it too: " .. said)
  T.ok(not fpage:find("0 detected change", 1, true) and not fpage:find("no change", 1, true), "never no change")
  svg = T.read(few .. "/history-" .. fl[1].id .. ".svg")
  xticks = svg:match('<g class="xticks".-</g>')
  local n = 0
  for label in xticks:gmatch("<text[^>]*>([^<]*)</text>") do T.match(label, "^%d+$", "x tick " .. label) n = n + 1 end
  T.ok(n >= 3, "a tick per run: " .. n)
  r = run("--regressions", "--fail")
  T.eq(r.status, 1, r.stderr)
  T.match(r.stderr, "1 regression%(s%) still standing")
  T.match(r.stdout, "c21")
  local rows = json.decode(run("--regressions", "--format", "json").stdout)
  T.eq(#rows, 1)
  T.eq(rows[1].commit, "c21", "the first run after the change")
  T.ok(rows[1].ci_lo > 0.03 and rows[1].ci_hi < 0.09, "the CI of a 6% change")
  T.eq(run("--regressions", "--fail", "--since", "2030-01-01").status, 0, "nothing since then")
  T.eq(run("--regressions", "--fail", "--min-effect", "10").status, 0, "nothing as large as 10%")
  T.eq(run("--regressions", "--fail", "--last", "5").status, 0, "not among the last 5 runs")
  T.eq(run("--regressions", "--fail", "--last", "10").status, 1, "among the last 10")
  local csv = run("--regressions", "--format", "csv").stdout
  T.match(csv, "^[^\n]*change[^\n]*\n[^\n]*c21")
  T.eq(run("--since", "yesterdayish").status, 2)
  T.eq(run("999").status, 2)
  -- import: the records written beside; into this history they are all known already, into a new one they
  -- are added once
  r = proc.run { argv = { odp, "history", "--history", url, "import", dir .. "/runs" }, timeout = 60 }
  T.match(r.stdout, "^0 run%(s%) added, 30 already there, 0 failed")
  local url2 = dir .. "/imported.db"
  r = proc.run { argv = { odp, "history", "--history", url2, "import", dir .. "/runs" }, timeout = 60 }
  T.ok(r.ok, r.stderr)
  T.match(r.stdout, "^30 run%(s%) added, 0 already there, 0 failed")
  r = proc.run { argv = { odp, "history", "--history", url2, "import", dir .. "/runs" }, timeout = 60 }
  T.match(r.stdout, "^0 run%(s%) added, 30 already there")
  rows = json.decode(proc.run { argv = { odp, "history", "--history", url2, "--regressions", "--format", "json" },
    timeout = 60 }.stdout)
  T.eq(rows[1].commit, "c21", "the imported history finds the same change, from the samples.csv files")
end)
end

cli_tests("sqlite", tmp .. "/cli.db")

T.test("--regressions: a rate (--llm's decode tokens/s) regresses when it falls, not when it rises", function()
  local dir = T.tmpdir()
  local url = dir .. "/rates.db"
  local gauss = gaussian(11)
  local db = assert(history.open(url))
  for _, case in ipairs({ { model = "falls.pte", to = 0.94 }, { model = "rises.pte", to = 1.06 } }) do
    for i = 1, 30 do
      local rec, path = make_record(dir, i, { tag = case.model, model = case.model,
        model_sha = (case.model == "falls.pte" and "f" or "d"):rep(64) })
      rec.llm = { decode_tokens_per_s = 100 * (i <= 20 and 1 or case.to) * (1 + 0.005 * gauss()) }
      rec.commit = ("c%02d"):format(i)
      history.save(rec, path:match("^(.*)/"), { no_history = true })
      assert(db:add(rec, { record_path = path }))
    end
  end
  db:close()
  local function regressions(model)
    local r = proc.run { argv = { odp, "history", "--history", url, "--model", model, "--metric",
      "decode_token_per_sec", "--regressions", "--format", "json" }, cwd = dir, timeout = 60 }
    T.ok(r.ok, r.stderr)
    return json.decode(r.stdout)
  end
  local fell = regressions("falls.pte")
  T.eq(#fell, 1, "a 6% drop in tokens/s is a regression")
  T.eq(fell[1].commit, "c21")
  T.eq(#regressions("rises.pte"), 0, "a 6% rise is an improvement")
end)

-- issue 28: 4 runs at 10 ms then 4 at 12 ms, 200 samples each, disjoint CIs: `--regressions --fail` said "no
-- change of 2% or more found" and exited 0 (the detector needed 6 runs before a change). Now it is a
-- regression (exit 1); a series of 5 runs is undecided, says why, and --fail-undecided makes that exit 1.
T.test("--regressions at small n: 4+4 decisive runs are a regression (exit 1); 5 runs are undecided, never 'no change'; the list shows parameters", function()
  local dir, url = T.tmpdir(), T.tmpdir() .. "/small.db"
  local gauss = gaussian(11)
  local db = assert(history.open(url))
  local function add(i, ms, threads)
    local s = {}
    for j = 1, 200 do s[j] = ms * (1 + 0.01 * gauss()) end
    local rec, path = make_record(dir, i, { tag = "t" .. threads, samples = s, model = "small.pte", model_sha = ("d"):rep(64),
      params = { num_executions = 200, threads = threads } })
    history.save(rec, path:match("^(.*)/"), { no_history = true })
    assert(db:add(rec, { record_path = path }))
  end
  for i = 1, 8 do add(i, i <= 4 and 10 or 12, 4) end
  db:close()
  local function run(...)
    return proc.run { argv = { odp, "history", "--history", url, ... }, cwd = dir, timeout = 60 }
  end
  local r = run("--regressions", "--fail")
  T.eq(r.status, 1, r.stdout .. r.stderr)
  T.match(r.stdout, "small%.pte.-%+%d+%.%d%%")
  T.match(r.stdout, "1 regression%(s%), 1 standing")
  -- a second series (other parameters) of 5 runs: undecided, listed with why and what would decide
  db = assert(history.open(url))
  for i = 9, 13 do add(i, 10, 1) end
  db:close()
  r = run("--regressions")
  T.eq(r.status, 0)
  T.match(r.stdout, "series %d+ [^\n]*%(num_executions=200 threads=1%): undecided: 5 clean run%(s%); need >=3 runs on each side of a change: 1 more run%(s%)")
  T.ok(not r.stdout:find("no change"), r.stdout)
  r = run("--regressions", "--fail", "--metric", "latency_ms")
  T.eq(r.status, 1, "the regression still stands")
  T.match(r.stderr, "odp: 1 series undecided: their runs cannot tell yet %(not counted by %-%-fail; %-%-fail%-undecided counts them%)")
  r = run("--regressions", "--fail", "--metric", "peak_rss_kb")
  T.eq(r.status, 0, "only undecided series (the 5 runs' RSS): --fail alone exits 0, and says so")
  T.match(r.stderr, "odp: 1 series undecided")
  r = run("--regressions", "--fail-undecided", "--metric", "latency_ms")
  T.eq(r.status, 1); T.match(r.stderr, "odp: 1 series undecided %(%-%-fail%-undecided%)")
  T.eq(run("--fail-undecided").status, 2, "--fail-undecided goes with --regressions")
  local one = json.decode(run("--format", "json", "--metric", "latency_ms").stdout)
  local shown = run("--metric", "latency_ms").stdout
  T.eq(#one, 2)
  T.match(shown, "num_executions=200 threads=4"); T.match(shown, "num_executions=200 threads=1")
  r = run(tostring(one[1].runs == 5 and one[1].id or one[2].id))
  T.match(r.stdout, "undecided: 5 clean run%(s%); need >=3 runs on each side of a change")
  T.ok(not r.stdout:find("no change of"), "never 'no change' when it cannot tell")
end)

T.test("odp history before any run: one line says where runs will go; no file is made by looking", function()
  local dir = T.tmpdir()
  local r = proc.run { argv = { odp, "history", "--history", dir .. "/none.db" }, timeout = 60 }
  T.eq(r.status, 2)
  T.match(r.stderr, "^odp: no history at .*none%.db yet: runs are added as they finish, or `odp history import runs/`\n$")
  T.eq(sys.stat(dir .. "/none.db"), nil)
  r = proc.run { argv = { odp, "history", "--no-history" }, timeout = 60 }
  T.eq(r.status, 2)
  T.match(r.stderr, "no history: %-%-no%-history")
end)

-- PostgreSQL 15 ------------------------------------------------------------------------------------------
-- initdb refuses root: the cluster belongs to nobody, in a temp dir of its own; the socket is there too.
local PG = "/usr/lib/postgresql/15/bin/"
local pgdir = T.tmpdir()
local function sh(cmd, timeout)
  return proc.run { argv = { "sh", "-c", cmd }, timeout = timeout or 60 }
end
local r = sh(("chown nobody %q && chmod 700 %q && runuser -u nobody -- %sinitdb -D %q/data --auth=trust -U odp >/dev/null && " ..
  "runuser -u nobody -- %spg_ctl -D %q/data -o \"-k %s -c listen_addresses=''\" -l %q/log -w start")
  :format(pgdir, pgdir, PG, pgdir, PG, pgdir, pgdir, pgdir), 120)
local pg_url = ("postgresql://odp@/postgres?host=%s"):format(pgdir)
T.test("postgresql: Debian's server starts on a unix socket as nobody", function()
  T.ok(r.ok, r.stdout .. r.stderr)
end)
local function stop_pg() sh(("runuser -u nobody -- %spg_ctl -D %q/data -m fast -w stop"):format(PG, pgdir)) end

if r.ok then
  store_tests("postgresql", pg_url)
  unrefuse(pg_url)
  concurrent_writers("postgresql", pg_url, 500)
  cli_tests("postgresql", pg_url)

  T.test("postgresql: a connection dropped mid-write (pg_terminate_backend): retried on a new one, the run lands once", function()
    local dir = T.tmpdir()
    T.write(dir .. "/save.lua", [[
local history = require("odp.results.history")
local rec, path = require("history_fixture").record(arg[1], 1, { tag = "drop" })
assert(history.save(rec, path:match("^(.*)/"), { history = arg[2] }))
]])
    local pg = require("odp.pg")
    local b = assert(pg.connect(pg_url))
    assert(history.open(pg_url)):close() -- the schema exists before the lock is taken
    assert(b:exec("BEGIN; LOCK TABLE runs IN EXCLUSIVE MODE"))
    sh(("(%q run %q %q %q >%q/out 2>%q/err; echo $? >%q/rc) &"):format(odp, dir .. "/save.lua", dir, pg_url, dir, dir, dir))
    local pid
    for _ = 1, 200 do
      local w = assert(b:query("SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"))
      pid = w.pid[1]
      if pid then break end
      sys.sleep(0.05)
    end
    T.ok(pid, "the writer waits on the lock, inside its transaction")
    T.eq(assert(b:query("SELECT pg_terminate_backend($1) AS killed", { pid })).killed[1], true)
    assert(b:exec("COMMIT"))
    for _ = 1, 400 do
      if sys.stat(dir .. "/rc") and T.read(dir .. "/rc") ~= "" then break end
      sys.sleep(0.05)
    end
    T.eq(T.read(dir .. "/rc"), "0\n")
    T.eq(T.read(dir .. "/err"), "", "retried, nothing to report")
    T.ok(sys.stat(dir .. "/runs/r00001-drop/result.json"), "the record")
    local n = assert(b:query("SELECT count(*) AS k FROM runs WHERE run_key LIKE $1", { "r00001-drop|%" })).k[1]
    T.eq(n, 1)
    b:close()
  end)

  T.test("postgresql: a server that is gone is reported in one line; the run's record is saved", function()
    stop_pg()
    saved_with_one_warning("gone", function() return pg_url end,
      "^odp: warning: history postgresql://.*cannot connect.*the run is in .*r00001%-gone/result%.json")
  end)

end
stop_pg()

T.done()
