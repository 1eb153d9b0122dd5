-- Issue 17's count on the adb side, from the emulator's own log of opened services (adbemu -v: "OPEN svc"):
-- with the resident helper, profiling a board 10 times opens as many services as 3 times (one shell,v2 stream
-- for the helper, sync: for pushes), over one connection. Run by test_odp_adb.sh (ADBEMU_PORT, ADBEMU_ROOT,
-- ADBEMU_LOG = the emulator's stderr).
local T = require("t")
local board = require("odp.run.board")

local root = T.root()
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local fake = build .. "/tests/fake_runner"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local port = assert(os.getenv("ADBEMU_PORT"))
local log = assert(os.getenv("ADBEMU_LOG"))
local dir = T.tmpdir()
local quiet = require("odp.core.ui").new { quiet = true }

local function counts()
  local text = T.read(log)
  local _, opens = text:gsub("OPEN [^\n]*", "")
  local _, conns = text:gsub("CNXN", "")
  local _, shells = text:gsub("OPEN shell[^\n]*", "")
  return opens, conns, shells
end

local function profile(points, remote, memory)
  local o0, c0, s0 = counts()
  local b <close> = board.open("devices/vivo_x300_pro.lua", { adb = "tcp:127.0.0.1:" .. port,
    remote_dir = remote, ui = quiet })
  local sampled -- the last record whose process the helper sampled (one that ends before the helper's first
  -- look, on a loaded machine, has no timeline)
  for i = 1, points do
    local rec = b:profile { runner = fake, model = add, n = i, runs_dir = dir .. "/runs", memory = memory or false }
    T.eq(rec.ok, true, rec.error and rec.error.message)
    T.ok(rec.device_state and rec.device_state.before, "device state through the helper")
    T.ok(rec.peak_rss_kb and rec.peak_rss_kb > 0, "rusage through the helper")
    if rec.memory and (rec.memory.samples or 0) > 0 then sampled = rec end
  end
  b:close()
  local o1, c1, s1 = counts()
  return o1 - o0, c1 - c0, s1 - s0, sampled
end

T.test("adb: as many services opened for 10 profiles of a board as for 3, on one connection", function()
  local o3, c3 = profile(3, "/data/local/tmp/c3")
  local o10, c10 = profile(10, "/data/local/tmp/c10")
  T.ok(c3 <= 2 and c10 == c3, ("connections: %d for 3 points, %d for 10"):format(c3, c10))
  T.eq(o10, o3, "services opened do not grow with points")
  -- once the helper is on the device: its one shell stream, and sync for the pushes' hash-skip
  local o, _, shells = profile(10, "/data/local/tmp/c10")
  T.eq(shells, 1, "one shell service: the helper's")
  T.ok(o <= 2, ("%d services for 10 points on a device that has the helper"):format(o))
end)

-- Memory by phase (on by default) costs nothing more: each point's timeline comes back in the run's answer on
-- the helper's channel ('T' frames), so a point WITH memory is the same one round trip, and no sync: service pulls
-- anything (the --no-memory counts above are the bound).
T.test("adb: memory by phase costs no service of its own: as many for 10 points as for 3, one shell stream", function()
  local before = #T.read(log)
  local o3 = profile(3, "/data/local/tmp/m3", true)
  local fresh_syncs = select(2, T.read(log):sub(before + 1):gsub("OPEN sync:", ""))
  T.ok(fresh_syncs > 0, "the log names sync: services (the pushes to a fresh device): their count below can fail")
  local o10 = profile(10, "/data/local/tmp/m10", true)
  T.eq(o10, o3, ("services with memory by phase: %d for 3 points, %d for 10"):format(o3, o10))
  local opened = #T.read(log)
  local o, _, shells, rec = profile(10, "/data/local/tmp/m10", true)
  local syncs = select(2, T.read(log):sub(opened + 1):gsub("OPEN sync:", ""))
  T.eq(shells, 1, "one shell service: the helper's")
  T.eq(syncs, 0, "no sync: service (pull) for the timelines")
  T.ok(o <= 2, ("%d services for 10 points with memory on a device that has the helper"):format(o))
  -- each point's timeline did come back: the record's memory.csv, every sample the helper counted a line
  T.ok(rec, "a point whose process the helper sampled")
  T.eq(rec.memory.timeline, "memory.csv")
  local text = T.read(rec.artifacts.run_dir .. "/memory.csv")
  T.match(text, "^t_ms,rss_kb,anon_kb,file_kb\n[%d.]+,%d+,")
  T.eq(select(2, text:gsub("\n", "")) - 1, rec.memory.samples, "every sample the helper took is a line")
end)

-- Issue 38 on adb: the emulator behind tests/c/delay_relay (20 ms each way). odp counts the adb messages' turnarounds
-- (the record's transport); the relay counts them on the wire, independently.
-- A session's start with its first point: 5 measured since the first flight rides in the helper's command line
-- (7 before; once 8 at load 8: a message of the device's crossing one of odp's makes a turnaround of its own, as
-- the relay's SLACK below allows)
local SESSION_START_MAX = 6
T.test("adb over a link: each profile's round trips in its record; their sum is the relay's count", function()
  local rel = require("relay").start(20, "127.0.0.1", tonumber(port), dir)
  local function ten(remote)
    local b <close> = board.open("devices/vivo_x300_pro.lua", { adb = "tcp:127.0.0.1:" .. rel.port,
      remote_dir = remote, ui = quiet })
    local recs = {}
    for i = 1, 10 do
      recs[i] = b:profile { runner = fake, model = add, n = i, runs_dir = dir .. "/runs", memory = false }
      T.eq(recs[i].ok, true, recs[i].error and recs[i].error.message)
    end
    b:close()
    return recs
  end
  ten("/data/local/tmp/l10")
  local recs = ten("/data/local/tmp/l10") -- the helper, runner and model there
  local wire = rel.connections(2)[2]
  local total, per = 0, {}
  for i, rec in ipairs(recs) do
    T.ok(rec.transport, "the record has its transport")
    total = total + rec.transport.round_trips
    if i > 1 then per[#per + 1] = rec.transport.round_trips end
  end
  T.eq(recs[1].transport.connects, 1)
  -- adb acknowledges every WRTE with an OKAY before the next may leave: the request's OKAY comes with the
  -- answer, one WRTE, since the helper writes a run's last output and its end together (held up to 50 ms while
  -- the run goes; written apart they were two WRTEs, the second waiting for the first's OKAY: 2 a point,
  -- docs/helper-protocol.md); the end-of-run check of who else runs on the board rides in the run's answer
  -- (docs/devices.md "A shared board")
  table.sort(per)
  -- the session's start with its first point: the connection and the helper's stream, then one flight for this
  -- odp's directory and lease and the runner's and model's checks (docs/helper-protocol.md), then the point
  T.ok(recs[1].transport.round_trips <= SESSION_START_MAX, ("adb: %d round trips for the session's start with its " ..
    "first point"):format(recs[1].transport.round_trips))
  -- the relay saw 1-2 more than odp's count in three runs of this sweep
  local SLACK = 3
  T.eq({ per[1], per[#per] }, { 1, 1 }, ("adb: %d-%d round trips a point after the first"):format(per[1], per[#per]))
  -- after the last record: the helper's stream closing (CLSE both ways), one turnaround; within SLACK more:
  -- a message of the device's crossing odp's on the link, which the relay sees as a turnaround and odp's socket
  -- does not
  T.ok(wire and math.abs(wire.round_trips - (total + 1)) <= SLACK, ("the relay counted %s round trips, the records %d")
    :format(wire and wire.round_trips, total))
  io.stderr:write(("adb over a link: per point %d-%d, first %d, records %d, wire %s\n"):format(per[1], per[#per],
    recs[1].transport.round_trips, total, wire and wire.round_trips))
  rel.close()
end)

T.done()
