-- Benchmark: read + op table of a 100,000-event ETDump (the real layout, built with tests/lib/fbuild.lua),
-- against `flatc --json` decoding the same file (what a user without ExecuTorch's Python would reach for).
--   build/odp run bench/etdump_bench.lua [EVENTS]
local host = require("odp.host")
package.path = host.root .. "/tests/lib/?.lua;" .. package.path
local fb = require("fbuild")
local etdump = require("odp.parse.etdump")
local proc = require("odp.proc")
local sys = require("odp.sys")

local EVENTS = tonumber(arg and arg[1]) or 100000
local bytes, nevents, nruns = fb.big_etdump(EVENTS)
local dir = io.popen("mktemp -d /tmp/odp-bench.XXXXXX"):read("l")
local path = dir .. "/big.etdump"
assert(sys.write_file(path, bytes))

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local t_read, t_ops, t_total, c_total = {}, {}, {}, {}
local rows
for i = 1, 7 do
  collectgarbage("collect")
  local c0, t0 = os.clock(), sys.now()
  local doc = assert(etdump.read(path))
  local t1 = sys.now()
  rows = etdump.ops(doc)
  local t2 = sys.now()
  t_read[i], t_ops[i], t_total[i], c_total[i] = t1 - t0, t2 - t1, t2 - t0, os.clock() - c0
end
local mb = #bytes / 1e6
local read_s, ops_s, total_s, cpu_s = median(t_read), median(t_ops), median(t_total), median(c_total)
print(("ETDump: %d events in %d runs, %.2f MB (%s)"):format(nevents, nruns, mb, path))
print(("odp read      %7.1f ms  %7.1f MB/s"):format(read_s * 1e3, mb / read_s))
print(("odp ops       %7.1f ms  (%d rows, %d samples each)"):format(ops_s * 1e3, #rows, rows[#rows].n))
print(("odp read+ops  %7.1f ms  %7.1f MB/s   goal < 100 ms: %s"):format(total_s * 1e3, mb / total_s,
  total_s < 0.1 and "met" or "MISSED"))
print(("odp CPU time  %7.1f ms  (read+ops; less sensitive than wall time to other load on the machine)")
  :format(cpu_s * 1e3))

local flatc = io.popen("command -v flatc"):read("l")
if flatc then
  local walls = {}
  for i = 1, 3 do
    local r = proc.run { flatc, "--json", "--strict-json", "--size-prefixed", "--raw-binary", "-o", dir,
      host.root .. "/bench/etdump.fbs", "--", path, timeout = 300 }
    if r.status ~= 0 then
      print("flatc failed: " .. (r.stderr:match("error:%s*([^\n]+)") or r.stderr:sub(1, 200)))
      break
    end
    walls[#walls + 1] = r.wall_s
    os.remove(dir .. "/big.json")
  end
  local fw = #walls > 0 and median(walls) or nil
  if fw then
    print(("flatc --json  %7.1f ms  %7.1f MB/s   (decode only, no op table)"):format(fw * 1e3, mb / fw))
    print(("ratio         odp read+ops is %.1fx faster than flatc's decode alone"):format(fw / total_s))
  end
else
  print("flatc not installed (Debian flatbuffers-compiler): no comparison")
end
if os.getenv("ODP_BENCH_KEEP") then print("kept " .. path) else os.execute("rm -rf " .. dir) end
