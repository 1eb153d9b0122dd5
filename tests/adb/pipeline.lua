-- Issue 38's pipelined sweep on adb: the emulator behind tests/c/delay_relay (100 ms each way), the same sweep one
-- point at a time (--no-pipeline) and pipelined. The records are the same points in the same order; and the board's
-- own clock (board_clock.runner's script prints it as each run starts and ends) counts the points it did not wait on
-- the link for: one point at a time, a run can start only a round trip after the one before ended (its end
-- crosses the link, the next request comes back); pipelined, the next request waits on the board already. Run by
-- test_odp_adb.sh (ADBEMU_PORT, ADBEMU_ROOT).
local T = require("t")
local proc = require("odp.proc")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local port = assert(os.getenv("ADBEMU_PORT"))
local sbx = assert(os.getenv("ADBEMU_ROOT"))
local dir = T.tmpdir()

local DELAY_MS = 100
local POINTS = 8

os.execute(("mkdir -p '%s/data/local/tmp/bin' && cp '%s/tests/fake_runner' '%s/data/local/tmp/bin/'"):format(sbx, build,
  sbx))

local rel = require("relay").start(DELAY_MS, "127.0.0.1", tonumber(port), dir)
local clock = require("board_clock")
-- the test runner program on the emulated device, kept going 0.8 s more (a slower run than link_test's: adb's
-- answer takes odp longer to handle)
local timed = clock.runner(dir .. "/timed_runner.sh", "/data/local/tmp/bin/fake_runner", 0.8)

-- The sweep of points 1..n (num_executions), pipelined unless pipeline is false. -> its records
local function sweep(n, out, pipeline)
  local v = {}
  for i = 1, n do v[i] = tostring(i) end
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/x300pro.lua",
    "--adb", "tcp:127.0.0.1:" .. rel.port, "--runner", timed,
    "--model", root .. "/tests/fixtures/pte/add_arduino.pte", "--runs-dir", dir .. "/runs", "--no-memory",
    "-p", "num_executions=" .. table.concat(v, ","), "--out", out, "-q", timeout = 120 }
  if pipeline == false then argv[#argv + 1] = "--no-pipeline" end
  local r = assert(proc.run(argv))
  T.eq(r.status, 0, r.stderr)
  return T.records(out)
end

T.test("adb: a pipelined sweep has the same records as one point at a time, and the board waits on the link " ..
  "between none of its points after the second", function()
  sweep(1, dir .. "/warm.jsonl") -- the helper, the runner and the model on the device: both sweeps start warm
  local one = sweep(POINTS, dir .. "/one.jsonl", false)
  local piped = sweep(POINTS, dir .. "/piped.jsonl")
  clock.check(one, piped, 2 * DELAY_MS, "adb")
end)

T.done()
