-- The history (docs/history.md): writes, `odp history`, the regression scan, and the detector's false-positive
-- rate on the real runner's noise.
--   build/odp run bench/history_bench.lua [RECORDS] [SERIES] [RUNS] [PARTS]  (defaults 100000 1000 1000 123)
-- Times are wall and CPU (user + system, from the process's rusage): on a shared, loaded machine the CPU time
-- is what the command costs, the wall time what it took there.
-- 1. RECORDS records with 20 samples each added to a new SQLite history one by one (Db:add: one transaction
--    per record, as each run does), against the sqlite3 shell loading the same rows from one SQL script in
--    one transaction (what a user scripting it would do).
-- 2. A history of SERIES series x RUNS runs (made with SQL: the runs, points and 10 samples each), then the
--    commands a user types: `odp history` and `odp history --regressions`, median of 5 / 3, against the
--    sqlite3 shell answering the list's question (latest value per series) with one query.
-- 3. The detector on stationary series cut from one long real run (ODP_REAL_RUNNER, add_arduino.pte:
--    --repeat 400 processes x -n 20; each process is a run): how many changes it reports where there are none.
local history = require("odp.results.history")
local proc = require("odp.proc")
local sys = require("odp.sys")
local stats = require("odp.core.stats")

local RECORDS, SERIES, RUNS = tonumber(arg[1]) or 100000, tonumber(arg[2]) or 1000, tonumber(arg[3]) or 1000
local PARTS = arg[4] or "123"
local KEEP = os.getenv("ODP_BENCH_DB") -- keep the big history here (and reuse it when it is there)
local root = require("odp.host").root
local odp = require("odp.host").argv[0]
local tmp = os.tmpname()
os.remove(tmp)
assert(sys.mkdir_p(tmp))

-- Runs argv n times -> median wall seconds, median CPU seconds (user + system, its children included), last result.
local function timed(n, argv, stdin)
  local walls, cpus, r = {}, {}, nil
  for i = 1, n do
    local t0 = sys.now()
    r = proc.run { argv = argv, stdin = stdin, timeout = 3600 }
    walls[i] = sys.now() - t0
    assert(r.status == 0 or r.status == 1, r.stderr)
    cpus[i] = r.rusage.utime_s + r.rusage.stime_s
  end
  return stats.percentile(walls, 50), stats.percentile(cpus, 50), r
end

local function sh(cmd)
  local r = proc.run { argv = { "sh", "-c", cmd }, timeout = 3600 }
  assert(r.ok, r.stderr)
  return r
end

-- 1. writes -------------------------------------------------------------------------------------------------
if PARTS:find("1") then
  local db = assert(history.open(tmp .. "/writes.db"))
  local rnd = math.random
  math.randomseed(1)
  local recs = {}
  local N = 1000 -- distinct records, reused with new keys so that making them is not what is timed
  for i = 1, N do
    local s = {}
    for j = 1, 20 do s[j] = 1 + 0.02 * rnd() end
    recs[i] = { rec = { schema = "odp.result/1", ok = true, flow = "executorch", device = "rpi5",
      started_at = os.date("!%Y-%m-%dT%H:%M:%SZ", 1764547200 + i), odp_version = "bench",
      model = { path = "m" .. (i % 50) .. ".pte", sha256 = ("%064d"):format(i % 50) },
      runner = { path = "r", sha256 = ("b"):rep(64) }, params = { num_executions = 20 },
      latency_ms = { n = 20, p50 = stats.percentile(s, 50) }, peak_rss_kb = 4000,
      artifacts = {}, device_state = { kernel = "6.6", board = "Pi 5" } }, samples = s }
  end
  local t0, c0 = sys.now(), os.clock()
  local batch = {}
  for i = 1, RECORDS do
    local r = recs[(i - 1) % N + 1]
    local rec = setmetatable({ artifacts = { run_dir = "runs/" .. i } }, { __index = r.rec })
    batch[#batch + 1] = { rec, { samples = r.samples } }
    if #batch == 500 or i == RECORDS then
      assert(db:add_all(batch))
      batch = {}
    end
  end
  local odp_s, odp_cpu = sys.now() - t0, os.clock() - c0
  -- one run at a time: one transaction each, as every run and sweep point is saved
  local ONE = math.min(RECORDS, 10000)
  local t2 = sys.now()
  for i = 1, ONE do
    local r = recs[(i - 1) % N + 1]
    assert(db:add(setmetatable({ artifacts = { run_dir = "one/" .. i } }, { __index = r.rec }), { samples = r.samples }))
  end
  local one_s = sys.now() - t2
  db:close()
  -- the same rows as one SQL script for the sqlite3 shell (into the same schema)
  local sql = { "BEGIN;" }
  for i = 1, RECORDS do
    local r = recs[(i - 1) % N + 1]
    sql[#sql + 1] = ("INSERT INTO runs (run_key, started_at, t, ok) VALUES ('k%d', '%s', %d, 1);"):format(i, r.rec.started_at, i)
    sql[#sql + 1] = ("INSERT INTO points (run_id, series_id, t, value, n, samples) VALUES (last_insert_rowid(), %d, %d, %.7g, 20, '%s');")
      :format(i % 50 + 1, i, r.rec.latency_ms.p50, history.encode_samples(r.samples))
    sql[#sql + 1] = ("INSERT INTO points (run_id, series_id, t, value, n) VALUES ((SELECT max(id) FROM runs), %d, %d, 4000, 1);")
      :format(i % 50 + 51, i)
  end
  sql[#sql + 1] = "COMMIT;"
  local ref = tmp .. "/ref.db"
  assert(history.open(ref)):close()
  assert(sys.write_file(tmp .. "/ref.sql", table.concat(sql, "\n")))
  local ref_s, ref_cpu = timed(1, { "sqlite3", ref }, assert(sys.read_file(tmp .. "/ref.sql")))
  print(("writes: %d records (20 samples each, 2 points), Db:add_all (500 a transaction, as `odp history import`): " ..
    "odp %.1f s wall, %.1f s CPU (goal < 10 s); sqlite3 shell loading the same rows from SQL in one transaction: " ..
    "%.1f s wall, %.1f s CPU; ratio (CPU) %.2fx"):format(RECORDS, odp_s, odp_cpu, ref_s, ref_cpu, odp_cpu / ref_cpu))
  print(("writes, one run at a time (Db:add, a transaction each, as a run saves): %.0f us a record over %d"):format(
    one_s / ONE * 1e6, ONE))
end

-- 2. reading ------------------------------------------------------------------------------------------------
if PARTS:find("2") then
  local path = KEEP or (tmp .. "/big.db")
  local t0 = sys.now()
  if not sys.stat(path) then
  assert(history.open(path)):close()
  -- SERIES series; RUNS runs each a day apart; every 50th series has a +5% step 20 runs before its last
  sh(("sqlite3 %q <<'EOF'\n" ..
    "BEGIN;\n" ..
    "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d)\n" ..
    "INSERT INTO series (id, key, name, metric, unit, flow, model_name, model_sha256, board, params, runs, last_t)\n" ..
    "  SELECT i, 'k' || i, 'm' || i || '.pte · Pi 5 · latency_ms', 'latency_ms', 'ms', 'executorch', 'm' || i || '.pte', " ..
    "    printf('%%064d', i), 'Pi 5', '{}', %d, 1700000000 + %d * 86400 FROM s;\n" ..
    "WITH RECURSIVE r(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM r WHERE j < %d)\n" ..
    "INSERT INTO runs (id, run_key, started_at, t, ok, conditions, throttled)\n" ..
    "  SELECT j, 'r' || j, strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', 1700000000 + j * 86400, 'unixepoch'), 1700000000 + j * 86400, 1, '', 0 FROM r;\n" ..
    "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d),\n" ..
    "  r(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM r WHERE j < %d),\n" ..
    "  v AS (SELECT i, j, (1.0 + i / 1000.0) * (CASE WHEN i %% 50 = 0 AND j > %d THEN 1.05 ELSE 1.0 END) AS lvl FROM s, r)\n" ..
    "INSERT INTO points (run_id, series_id, t, value, lo, hi, n, cond, samples)\n" ..
    "  SELECT j, i, 1700000000 + j * 86400, lvl * (1 + (abs(random()) %% 1000) / 200000.0), lvl * 0.99, lvl * 1.01, 10, '',\n" ..
    "    printf('%%.7g %%.7g %%.7g %%.7g %%.7g %%.7g %%.7g %%.7g %%.7g %%.7g',\n" ..
    "      lvl * (1 + (abs(random()) %% 1000) / 50000.0), lvl * (1 + (abs(random()) %% 1000) / 50000.0),\n" ..
    "      lvl * (1 + (abs(random()) %% 1000) / 50000.0), lvl * (1 + (abs(random()) %% 1000) / 50000.0),\n" ..
    "      lvl * (1 + (abs(random()) %% 1000) / 50000.0), lvl * (1 + (abs(random()) %% 1000) / 50000.0),\n" ..
    "      lvl * (1 + (abs(random()) %% 1000) / 50000.0), lvl * (1 + (abs(random()) %% 1000) / 50000.0),\n" ..
    "      lvl * (1 + (abs(random()) %% 1000) / 50000.0), lvl * (1 + (abs(random()) %% 1000) / 50000.0))\n" ..
    "  FROM v;\n" ..
    "COMMIT;\nEOF"):format(path, SERIES, RUNS, RUNS, RUNS, SERIES, RUNS, RUNS - 20))
  print(("made %d series x %d runs (%d points with 10 samples each) in %.1f s"):format(SERIES, RUNS, SERIES * RUNS,
    sys.now() - t0))
  end
  local odp_history = { odp, "history", "--history", path }
  local function with(...)
    local argv = table.move(odp_history, 1, #odp_history, 1, {})
    return table.move({ ... }, 1, select("#", ...), #argv + 1, argv)
  end
  timed(1, odp_history) -- warm the page cache
  local list_s, list_cpu = timed(5, odp_history)
  local q = "SELECT s.id, s.name, (SELECT value FROM points p WHERE p.series_id = s.id ORDER BY t DESC LIMIT 1) " ..
    "FROM series s ORDER BY s.name"
  local ref_s, ref_cpu = timed(5, { "sqlite3", path, q })
  print(("odp history (%d series: latest, baseline, sparkline of 20): %.0f ms wall, %.0f ms CPU (goal < 200 ms); " ..
    "sqlite3 shell, latest per series only: %.0f ms wall, %.0f ms CPU; ratio (CPU) %.2fx"):format(SERIES, list_s * 1000,
    list_cpu * 1000, ref_s * 1000, ref_cpu * 1000, list_cpu / ref_cpu))
  local scan_s, scan_cpu, out = timed(3, with("--regressions", "--format", "json"))
  local found = require("odp.core.json").decode(out.stdout)
  local want = SERIES // 50
  local right = 0
  local step_at = os.date("!%Y-%m-%d %H:%M:%S", 1700000000 + (RUNS - 19) * 86400)
  for _, f in ipairs(found) do
    if f.series % 50 == 0 and f.time == step_at then right = right + 1 end
  end
  print(("odp history --regressions (each series' last 50 runs) over %d x %d: %.2f s wall, %.2f s CPU (goal < 2 s); " ..
    "%d regressions found, %d of the %d planted at their first run, %d elsewhere"):format(SERIES, RUNS, scan_s, scan_cpu,
    #found, right, want, #found - right))
  local since = os.date("!%Y-%m-%d", 1700000000 + (RUNS - 100) * 86400)
  local since_s, since_cpu = timed(3, with("--regressions", "--since", since))
  print(("odp history --regressions --since %s (each series' last 100 runs): %.2f s wall, %.2f s CPU"):format(since,
    since_s, since_cpu))
end

-- 3. false positives on the real runner's noise -------------------------------------------------------------
local runner = os.getenv("ODP_REAL_RUNNER")
if not PARTS:find("3") then
  print("false positives: not asked for")
elseif not runner or not sys.stat(runner) then
  print("false positives: skipped (set ODP_REAL_RUNNER to a real executor_runner)")
else
  local model = root .. "/tests/fixtures/pte/add_arduino.pte"
  local t0 = sys.now()
  local r = proc.run { argv = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", model, "-n", "20",
    "--repeat", "400", "--runs-dir", tmp .. "/runs", "--no-history", "--format", "json" }, timeout = 1800 }
  assert(r.ok, r.stderr)
  local rec = require("odp.core.json").decode(r.stdout)
  local groups = assert(require("odp.results.measure").read_samples(rec.artifacts.samples))
  local runs = {}
  for i, g in ipairs(groups) do runs[i] = { samples = g, median = stats.percentile(g, 50) } end
  local meds = {}
  for i, p in ipairs(runs) do meds[i] = p.median end
  local detect = require("odp.results.detect")
  -- in time order: windows of 40 consecutive runs (the runner's own drift included), then shuffled series
  local flagged, series_n = 0, 0
  for first = 1, #runs - 39, 10 do
    series_n = series_n + 1
    flagged = flagged + #detect.detect(table.move(runs, first, first + 39, 1, {}))
  end
  -- its own generator: the detector's bootstrap seeds math.random (odp.core.stats), which would make every
  -- series after the first change the same
  local seed = 12345
  local function draw(n)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % n + 1
  end
  local shuffled_flags, shuffled_n = 0, 1000
  for _ = 1, shuffled_n do
    local pick = {}
    for i = 1, 40 do pick[i] = runs[draw(#runs)] end
    shuffled_flags = shuffled_flags + #detect.detect(pick)
  end
  local dev, m = {}, stats.percentile(meds, 50)
  for i, v in ipairs(meds) do dev[i] = math.abs(v - m) end
  print(("false positives on the real runner (%d processes x 20 iterations in %.0f s; run medians: cv %.1f%%, " ..
    "robust cv (1.4826 MAD) %.1f%%, within a run cv %.1f%%): %d changes in %d time-ordered series of 40 runs (overlapping by 30; %.3f per series); %d in %d shuffled " ..
    "series of 40 (%.4f per series, %.5f per run)"):format(#runs, sys.now() - t0, stats.cv(meds) * 100,
    1.4826 * stats.percentile(dev, 50) / m * 100, stats.cv(groups[1]) * 100, flagged, series_n, flagged / series_n, shuffled_flags, shuffled_n,
    shuffled_flags / shuffled_n, shuffled_flags / (shuffled_n * 40)))
end
os.execute("rm -rf '" .. tmp .. "'")
