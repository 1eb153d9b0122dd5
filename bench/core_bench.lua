-- Core benchmarks (not tests): odp's startup and spawn+rusage overhead against what users run today.
--   build/odp run bench/core_bench.lua [N]
local proc = require("odp.proc")
local sys = require("odp.sys")
local stats = require("odp.stats")

local N = tonumber(arg[1]) or 200
local odp = require("odp.host").argv[0]
local tmp = os.tmpname()
assert(sys.write_file(tmp, ""))

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

local lua_ms = median_wall({ "lua5.4", "-e", "" })
local odp_ms = median_wall({ odp, "run", tmp })
print(("startup   odp run <empty script> %7.3f ms   lua5.4 -e '' %7.3f ms   ratio %.2f  (goal: odp < 5 ms)")
  :format(odp_ms, lua_ms, odp_ms / lua_ms))

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
os.remove(tmp)
