-- Benchmark: comparing two 100 MB float32 outputs (what --reference does for each output: read both files,
-- then every metric of docs/outputs.md in one C pass), against numpy computing the same metrics on the same
-- files (tests/lib/numcmp_oracle.py: what a user would otherwise write). Goal: under 1 s in odp.
--   build/odp run bench/outputs_bench.lua [MB]
local host = require("odp.host")
local numcmp = require("odp.numcmp")
local proc = require("odp.proc")
local sys = require("odp.sys")
local tensors = require("odp.results.tensors")

local MB = tonumber(arg and arg[1]) or 100
local bytes = MB * 1000 * 1000 // 4 * 4
local dir = io.popen("mktemp -d /tmp/odp-bench.XXXXXX"):read("l")
local a, b = dir .. "/ref.bin", dir .. "/got.bin"
-- the reference, and a copy with every 1000th element moved: near, far and equal elements all occur
local ref = numcmp.generate(bytes, "float32", 1, 0)
assert(sys.write_file(a, ref))
local noise = numcmp.generate(bytes, "float32", 2, 0)
local parts, step = {}, 4000
for off = 0, bytes - 1, step do
  parts[#parts + 1] = noise:sub(off + 1, off + 4) .. ref:sub(off + 5, math.min(off + step, bytes))
end
assert(sys.write_file(b, table.concat(parts)))
ref, noise, parts = nil, nil, nil
collectgarbage("collect")

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local io_ = { index = 0, dtype = "float32", sizes = { bytes // 4 }, bytes = bytes }
-- numpy doing the five headline metrics only (no classes of non-finite pairs, no histogram, no top-k): the
-- least a user would write; timed inside Python, its start and import left out
local MINIMAL = [[
import sys, time, numpy as np
t0 = time.perf_counter()
a = np.fromfile(sys.argv[1], "<f4").astype(np.float64); b = np.fromfile(sys.argv[2], "<f4").astype(np.float64)
e = b - a
m = (np.abs(e).max(), np.abs(e).mean(), np.sqrt(np.mean(e * e)), a.dot(b) / np.sqrt(a.dot(a) * b.dot(b)),
     10 * np.log10(a.dot(a) / e.dot(e)))
print(time.perf_counter() - t0)
]]
local t_odp, t_cmp, t_cli, t_np, t_min, c_odp = {}, {}, {}, {}, {}, {}
local e
for i = 1, 5 do
  collectgarbage("collect")
  local c0, t0 = os.clock(), sys.now()
  e = assert(tensors.compare_files(b, a, io_))
  t_odp[i], c_odp[i] = sys.now() - t0, os.clock() - c0
  local ra, rb = assert(sys.read_file(a)), assert(sys.read_file(b))
  t0 = sys.now()
  assert(numcmp.compare(ra, rb, "float32"))
  t_cmp[i] = sys.now() - t0
  ra, rb = nil, nil
  collectgarbage("collect")
  -- the whole commands, each with its interpreter's start
  t0 = sys.now()
  local r = assert(proc.run { argv = { host.root .. "/build/odp", "run", host.root .. "/bench/outputs_cmp.lua", a, b },
    timeout = 600 })
  t_cli[i] = sys.now() - t0
  assert(r.status == 0, r.stderr)
  t0 = sys.now()
  r = assert(proc.run { argv = { "/usr/bin/python3", host.root .. "/tests/lib/numcmp_oracle.py", "compare", a, b,
    "float32" }, timeout = 600 })
  t_np[i] = sys.now() - t0
  assert(r.status == 0, r.stderr)
  r = assert(proc.run { argv = { "/usr/bin/python3", "-c", MINIMAL, a, b }, timeout = 600 })
  assert(r.status == 0, r.stderr)
  t_min[i] = tonumber(r.stdout)
end
local odp_s, cmp_s, cli_s, np_s, min_s = median(t_odp), median(t_cmp), median(t_cli), median(t_np), median(t_min)
print(("two %d MB float32 outputs (%d elements, %d differ), median of 5"):format(MB, bytes // 4, bytes // 4 - e.equal))
print(("odp compare pass (C, bytes in memory) %8.1f ms"):format(cmp_s * 1e3))
print(("odp read both files + compare         %8.1f ms   goal < 1 s: %s"):format(odp_s * 1e3,
  odp_s < 1 and "met" or "MISSED"))
print(("odp run bench/outputs_cmp.lua A B     %8.1f ms"):format(cli_s * 1e3))
print(("odp read + compare, CPU time          %8.1f ms"):format(median(c_odp) * 1e3))
print(("python3 numcmp_oracle.py (numpy) A B  %8.1f ms   numpy / odp: %.1fx (the same metrics, histogram, classes)")
  :format(np_s * 1e3, np_s / cli_s))
print(("numpy, five metrics only, in Python   %8.1f ms   numpy / odp: %.1fx (read + compare, both in process)")
  :format(min_s * 1e3, min_s / odp_s))
os.execute("rm -rf '" .. dir .. "'")
