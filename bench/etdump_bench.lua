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
local PER_RUN = 100 -- 33 kernels x (native_call + OPERATOR_CALL) + 33 delegated (XNNPACK-like) + Method::execute
local runs = { { name = "Default", events = {
  { kind = "profile", name = "Method::init", chain_index = -1, instruction_id = 0, start_time = 1000, end_time = 60000 },
  { kind = "profile", name = "Program::load_method", chain_index = -1, instruction_id = 0, start_time = 900,
    end_time = 61000 } } } }
local OPS = { "convolution", "relu", "max_pool2d_with_indices", "addmm", "permute_copy", "add", "mul", "softmax" }
local t = 100000
for r = 1, math.max(1, EVENTS // PER_RUN) do
  local ev, start = {}, t
  for k = 0, 32 do
    local op = OPS[k % #OPS + 1]
    local d = 1000 + (k * 7919 + r * 104729) % 50000
    ev[#ev + 1] = { kind = "profile", name = "native_call_" .. op .. ".out", chain_index = 0, instruction_id = k,
      start_time = t + 100, end_time = t + 100 + d }
    ev[#ev + 1] = { kind = "profile", name = "OPERATOR_CALL", chain_index = 0, instruction_id = k,
      start_time = t, end_time = t + 300 + d }
    t = t + 400 + d
    ev[#ev + 1] = { kind = "profile", name = "conv #" .. k, chain_index = 0, instruction_id = 33,
      delegate_debug_id_int = k, start_time = t, end_time = t + 500 + (k * r) % 900 }
    t = t + 1500
  end
  ev[#ev + 1] = { kind = "profile", name = "Method::execute", chain_index = -1, instruction_id = 0,
    start_time = start, end_time = t }
  runs[#runs + 1] = { name = "Execute", events = ev }
  t = t + 1000
end
local bytes = fb.etdump { version = 0, run_data = runs }
local nevents = 2 + (#runs - 1) * PER_RUN
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
print(("ETDump: %d events in %d runs, %.2f MB (%s)"):format(nevents, #runs, mb, path))
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
