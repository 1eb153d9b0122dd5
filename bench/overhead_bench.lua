-- The whole-command overhead of the host flow on the real executor_runner against GNU time -v of the same
-- command, and where odp's extra time goes (median of N, the two commands interleaved so machine load
-- hits both alike).
--   build/odp run bench/overhead_bench.lua [N]     (ODP_REAL_RUNNER: a real executor_runner)
-- ODP_BENCH_HISTORY_RUNS=K: the histories hold K runs of each build before the timing (default: empty).
-- ODP_BEFORE_LUA=DIR also times the same command with the Lua modules of DIR (another checkout's lua/, e.g.
-- `git archive main lua | tar -x -C /tmp/main`), interleaved with the others: before/after in one run.
-- ODP_BEFORE=BIN does the same with another build's odp binary (and so its own lua/ and build/luac/), e.g.
-- `git archive main | tar -x -C /tmp/main && make -C /tmp/main all` then ODP_BEFORE=/tmp/main/build/odp.
local proc = require("odp.proc")
local sys = require("odp.sys")
local stats = require("odp.core.stats")

local N = tonumber(arg[1]) or 31
local root = require("odp.host").root
local odp = sys.realpath(require("odp.host").argv[0]) or require("odp.host").argv[0]
local runner = os.getenv("ODP_REAL_RUNNER")
if not runner or not sys.stat(runner) then print("skipped: set ODP_REAL_RUNNER to a real executor_runner") return end
local model = root .. "/tests/fixtures/pte/add_arduino.pte"
local tmp = os.tmpname()
os.remove(tmp)
assert(sys.mkdir_p(tmp))
local empty = tmp .. "/empty.lua"
assert(sys.write_file(empty, ""))
-- the runner as a user keeps it: a copy of its own. A shared one may have its inode changed all the time (other
-- sessions hard-linking it change its link count, so its ctime), and then every run hashes it again, rightly:
-- the sha256 cache is keyed by ctime too (odp.results.result.file_info)
do
  local copy = tmp .. "/executor_runner"
  assert(sys.write_file(copy, assert(sys.read_file(runner)), { mode = tonumber("755", 8) }))
  runner = copy
  sys.sleep(require("odp.results.result").RACY_S + 0.5) -- a file changed just now is hashed, not remembered
end

local before, before_bin = os.getenv("ODP_BEFORE_LUA"), os.getenv("ODP_BEFORE")

-- every odp run adds a row to the run history (odp.results.history) as a user's would, into a history of the
-- bench's own rather than the user's; the other build's into one of its own (a history's WAL is paid by
-- every writer of it, so a shared one would give one build's cost to the other)
local history_db = tmp .. "/history.db"
local function wall(argv, env)
  env = env or {}
  env.ODP_HISTORY = env.ODP_HISTORY or history_db
  local t0 = sys.now()
  local r = assert(proc.run { argv = argv, cwd = tmp, env = env }) -- the runner leaves model.etdump in its cwd
  assert(r.ok, table.concat(argv, " ") .. " failed: " .. r.stderr)
  return (sys.now() - t0) * 1000
end
local function median(f)
  local xs = {}
  for i = 1, N do xs[i] = f() end
  return stats.percentile(xs, 50)
end

local run = { runner, "--model_path", model, "--num_executions", "10" }
local flow = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", model, "-n", "10", "-q",
  "--runs-dir", tmp .. "/runs" }
local quiet = table.move(flow, 1, #flow, 1, {})
quiet[#quiet] = tmp .. "/runs-unrecorded" -- the runs whose records' timings are read below are the flow's alone
quiet[#quiet + 1] = "--no-history"
local other = table.move(flow, 1, #flow, 1, {})
other[#other] = tmp .. "/runs-other" -- the other tree's runs, and its own sha256 cache
local other_quiet = table.move(other, 1, #other, 1, {})
other_quiet[#other_quiet + 1] = "--no-history"
local other_history_db = tmp .. "/history-other.db"
-- ODP_BENCH_HISTORY_RUNS=K: each build first writes K runs into its history, as a user's history has them (a
-- history's cost grew with its WAL before it was bounded: src/l_sqlite.c on_wal_commit)
for _ = 1, tonumber(os.getenv("ODP_BENCH_HISTORY_RUNS") or "0") do
  wall(flow)
  if before then wall(other, { ODP_PATH = before, ODP_HISTORY = other_history_db }) end
  if before_bin then wall({ before_bin, table.unpack(other, 2) }, { ODP_HISTORY = other_history_db }) end
end
local gnu, mine, theirs, unrecorded, theirs_unrecorded = {}, {}, {}, {}, {}
for i = 1, N do
  gnu[i] = wall { "/usr/bin/time", "-v", table.unpack(run) }
  mine[i] = wall(flow)
  unrecorded[i] = wall(quiet)
  if before then -- ODP_PATH's modules come before lua/'s
    theirs[i] = wall(other, { ODP_PATH = before, ODP_HISTORY = other_history_db })
    theirs_unrecorded[i] = wall(other_quiet, { ODP_PATH = before })
  end
  if before_bin then
    theirs[i] = wall({ before_bin, table.unpack(other, 2) }, { ODP_HISTORY = other_history_db })
    theirs_unrecorded[i] = wall({ before_bin, table.unpack(other_quiet, 2) })
  end
end
local g, o = stats.percentile(gnu, 50), stats.percentile(mine, 50)
print(("whole command, -n 10 on add_arduino.pte: odp host flow %.1f ms, /usr/bin/time -v %.1f ms, ratio %.1fx")
  :format(o, g, o / g))
local u = stats.percentile(unrecorded, 50)
print(("  with --no-history (no row added to the run history): %.1f ms, ratio %.1fx"):format(u, u / g))
if before or before_bin then
  local b = stats.percentile(theirs, 50)
  print(("  with %s: %.1f ms, ratio %.1fx; this tree / that one %.2f"):format(before or before_bin, b, b / g, o / b))
  local bu = stats.percentile(theirs_unrecorded, 50)
  print(("    its --no-history: %.1f ms, ratio %.1fx; this tree / that one %.2f"):format(bu, bu / g, u / bu))
end

-- where it goes, as each run's record says (record.timings: odp's own time by part, from its main() to the
-- record's write; `-v -v` shows the record file, the history and the report after it)
local json = require("odp.core.json")
local by_part, order, inside, totals = {}, {}, {}, {}
for _, name in ipairs(sys.readdir(tmp .. "/runs") or {}) do
  local rec = json.decode(sys.read_file(tmp .. "/runs/" .. name .. "/result.json") or "")
  if rec and rec.timings then
    for _, p in ipairs(rec.timings.parts) do
      if not by_part[p.name] then by_part[p.name] = {}; order[#order + 1] = p.name end
      table.insert(by_part[p.name], p.ms)
    end
    totals[#totals + 1] = rec.timings.total_ms
    inside[#inside + 1] = (rec.timings.inside or {}).runner_processes
  end
end
print(("  the records' timings, median of %d runs (record.timings, odp's main() to the record's write):"):format(#totals))
for _, name in ipairs(order) do print(("    %-56s %6.2f ms"):format(name, stats.percentile(by_part[name], 50))) end
print(("    %-56s %6.2f ms"):format("whole, to the record's write", stats.percentile(totals, 50)))
if #inside > 0 then
  print(("    %-56s %6.2f ms"):format("of which the runner processes' own wall (inside run)", stats.percentile(inside, 50)))
end

local host = require("odp.target.host").new()
local parts = {
  { "odp start + an empty script", median(function() return wall { odp, "run", empty } end) },
  { "runner through odp-rusage (host exec)", median(function()
    local t0 = sys.now(); assert(host:exec(run, { cwd = tmp })); return (sys.now() - t0) * 1000 end) },
  { "runner bare (odp.proc.run)", median(function()
    local t0 = sys.now(); assert(proc.run { argv = run, cwd = tmp }); return (sys.now() - t0) * 1000 end) },
  { "sha256 of the runner uncached (a run reads the cache)", median(function()
    local t0 = sys.now(); sys.sha256_file(runner); return (sys.now() - t0) * 1000 end) },
  { "one fsync'd atomic write (result.json, samples.csv)", median(function()
    local t0 = sys.now(); sys.write_file(tmp .. "/x", "x"); return (sys.now() - t0) * 1000 end) },
}
local loads = tmp .. "/loads.lua"
assert(sys.write_file(loads, 'require("odp.flows.executorch") require("odp.parse.executorch") require("odp.results.report")'))
parts[#parts + 1] = { "loading the flow's Lua modules (dkjson, lpeg grammars)",
  median(function() return wall { odp, "run", loads } end) - parts[1][2] }
for _, p in ipairs(parts) do print(("  %-58s %6.2f ms"):format(p[1], p[2])) end
os.execute("rm -rf '" .. tmp .. "'")
