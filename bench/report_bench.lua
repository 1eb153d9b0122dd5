-- Benchmark: `odp report` of a 1,000-point sweep and of a run whose ETDump holds 100,000 events (built with
-- tests/lib/fbuild.lua in the real layout): the command's wall time (goal < 1 s), the page's size (goal
-- < 2 MB) and Debian's chromium's time to the load event (goal < 1 s, tests/browser/check.js --render).
-- Against the commands a user runs without a report: `odp plot` of the same sweep (an SVG) and `odp inspect
-- --trace` of the same ETDump (the op table and the trace).
--   build/odp run bench/report_bench.lua
local host = require("odp.host")
package.path = host.root .. "/tests/lib/?.lua;" .. package.path
local etdump = require("odp.parse.etdump")
local fb = require("fbuild")
local history = require("odp.results.history")
local json = require("odp.core.json")
local measure = require("odp.results.measure")
local proc = require("odp.proc")
local result = require("odp.results.result")
local sys = require("odp.sys")

local odp = host.root .. "/build/odp"
local dir = io.popen("mktemp -d /tmp/odp-bench.XXXXXX"):read("l")

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

-- Median wall time and median CPU time (user + system: what a quiet machine's wall time comes to; this
-- one is shared) of a command.
local function wall(argv, n)
  local ws, cs = {}, {}
  for i = 1, n or 5 do
    local r = assert(proc.run { argv = argv, cwd = dir, timeout = 120 })
    assert(r.status == 0, table.concat(argv, " ") .. ": " .. r.stderr)
    ws[i], cs[i] = r.wall_s, r.rusage.utime_s + r.rusage.stime_s
  end
  return median(ws), median(cs)
end

local function render(page)
  if not sys.stat(host.root .. "/tests/browser/node_modules/puppeteer-core") then return nil end
  local ms = {}
  for i = 1, 3 do
    local r = assert(proc.run { argv = { "node", host.root .. "/tests/browser/check.js", "--render", page },
      timeout = 120, env = { HOME = dir } })
    assert(r.status == 0, r.stderr)
    local out = json.decode(r.stdout)
    assert(#out.requests == 1 and #out.console_errors == 0, r.stdout)
    ms[i] = out.nav_ms
  end
  return median(ms)
end

local function line(what, s, cpu, size, chrome, goal)
  print(("%-34s %7.1f ms (CPU %6.1f ms)  %5.2f MB  chromium %s  goals: %s"):format(what, s * 1e3, cpu * 1e3,
    size / 1e6, chrome and ("%6.0f ms"):format(chrome) or "  (none)", goal))
end

-- 1. a sweep of 1,000 points: 100 sizes x 10 thread counts
local lines = {}
for size = 1, 100 do
  for threads = 1, 10 do
    local p50 = 0.1 + size * 0.013 / threads
    lines[#lines + 1] = result.encode { schema = "odp.result/1", ok = true, flow = "executorch", device = "rpi5",
      params = { size = size, threads = threads }, latency_ms = { n = 100, p10 = p50 * 0.93, p50 = p50,
        p90 = p50 * 1.12, mean = p50 * 1.02, min = p50 * 0.9, max = p50 * 1.6, source = "log" },
      peak_rss_kb = 4000 + size }
  end
end
assert(sys.write_file(dir .. "/s.jsonl", table.concat(lines, "\n") .. "\n"))
local t, cpu = wall { odp, "report", "s.jsonl", "-q" }
local size = sys.stat(dir .. "/s.html").size
line("report of a 1,000-point sweep", t, cpu, size, render(dir .. "/s.html"), ("< 1000 ms %s, < 2 MB %s"):format(
  t < 1 and "met" or "MISSED", size < 2e6 and "met" or "MISSED"))
local tp, cp = wall { odp, "plot", "s.jsonl", "-q" }
print(("%-34s %7.1f ms (CPU %6.1f ms)  the SVG alone; ratio report/plot %.1fx (CPU %.1fx)"):format(
  "odp plot of the same sweep", tp * 1e3, cp * 1e3, t / tp, cpu / cp))

-- 2. a run whose ETDump holds 100,000 events (1,000 inferences), with its record and samples.csv
local bytes, nevents = fb.big_etdump(100000)
local run_dir = dir .. "/runs/big"
assert(sys.mkdir_p(run_dir))
assert(sys.write_file(run_dir .. "/model.etdump", bytes))
local doc = assert(etdump.read(bytes))
local samples = etdump.latency(doc)
assert(measure.write_samples(run_dir .. "/samples.csv", { samples }))
local ops = etdump.ops(doc)
local rec = { schema = "odp.result/1", ok = true, flow = "executorch", device = "host", target = "local://bench",
  started_at = "2026-12-03T00:00:00Z", model = { path = "big.pte", bytes = 1, sha256 = ("0"):rep(64) },
  params = { num_executions = #samples }, latency_ms = result.latency(samples, "etdump"), ops = ops,
  ops_summary = etdump.ops_summary(doc), peak_rss_kb = 123456, planned_buffers = { 1 << 20 },
  artifacts = { etdump = run_dir .. "/model.etdump", samples = run_dir .. "/samples.csv", run_dir = run_dir } }
assert(history.save(rec, run_dir))
t, cpu = wall { odp, "report", run_dir, "-q" }
size = sys.stat(run_dir .. "/report.html").size
local trace = sys.stat(run_dir .. "/report.trace.json").size
line(("report of a %d-event ETDump run"):format(nevents), t, cpu, size, render(run_dir .. "/report.html"),
  ("< 1000 ms %s, < 2 MB %s; the trace beside it %.1f MB"):format(t < 1 and "met" or "MISSED",
    size < 2e6 and "met" or "MISSED", trace / 1e6))
local tn, cn = wall { odp, "report", run_dir, "--no-trace", "-q" }
print(("%-34s %7.1f ms (CPU %6.1f ms)"):format("  the same with --no-trace", tn * 1e3, cn * 1e3))
local ti, ci = wall { odp, "inspect", run_dir .. "/model.etdump", "--trace", dir .. "/t.json", "-q" }
print(("%-34s %7.1f ms (CPU %6.1f ms)  op table + trace; ratio report/inspect %.1fx (CPU %.1fx)"):format(
  "odp inspect --trace, same ETDump", ti * 1e3, ci * 1e3, t / ti, cpu / ci))
if os.getenv("ODP_BENCH_KEEP") then print("kept " .. dir) else os.execute("rm -rf " .. dir) end
