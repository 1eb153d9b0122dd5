-- Core benchmark (not a test): odp's spawn+rusage overhead against what users run today. Startup is
-- bench/startup_bench.sh (hyperfine, callgrind).
--   build/odp run bench/core_bench.lua [N]
local proc = require("odp.proc")
local sys = require("odp.sys")
local stats = require("odp.core.stats")

local N = tonumber(arg[1]) or 200

local function median_wall(argv)
  local samples = {}
  for i = 1, N do
    local t0 = sys.now()
    local r = assert(proc.run { argv = argv })
    assert(r.ok, table.concat(argv, " ") .. " failed: " .. r.stderr)
    samples[i] = (sys.now() - t0) * 1000
  end
  return stats.summary(samples).p50
end

local inproc = {}
for i = 1, N do
  local t0 = sys.now()
  assert(proc.run { "true" })
  inproc[i] = (sys.now() - t0) * 1000
end
local spawn_ms = stats.summary(inproc).p50
local gnu_ms = median_wall({ "/usr/bin/time", "-v", "true" })
print(("spawn     odp.proc.run{'true'} %7.3f ms   /usr/bin/time -v true %7.3f ms   ratio %.2f")
  :format(spawn_ms, gnu_ms, gnu_ms / spawn_ms))
