-- One adb server's connections bounded (issue 18): three adb device emulators behind Debian's adb server run
-- a sweep of real profiles (fake runner: odp's helper, preflight, device-state snapshots, pushes through
-- sync:) at once with adb_connections = ADBTEST_LIMIT. Oracles: every point's record, the records' own
-- outputs, and the connections open to the server at once, counted by the kernel: conncount.lua,
-- running beside this (ADBTEST_STOP ends it, ADBTEST_CONNS holds its "MAX SAMPLES").
local T = require("t")
local lab = require("odp.target.lab")
local lock = require("odp.core.lock")
local boards_mod = require("odp.run.boards")
local sweep = require("odp.run.sweep")
local sys = require("odp.sys")

local work = assert(os.getenv("ADBTEST_WORK"))
local limit = assert(tonumber(os.getenv("ADBTEST_LIMIT")))
local root = T.root()
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local fake = build .. "/tests/fake_runner"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local tmp = T.tmpdir()

local lines = {}
for i = 1, 3 do
  local port = sys.read_file(("%s/port%d"):format(work, i)):match("%d+")
  lines[i] = ('  { name = "phone-%d", device = "devices/vivo_x300_pro.lua", serial = "127.0.0.1:%s", ' ..
    'remote_dir = "/data/local/tmp/conns%d", adb_connections = %d },\n'):format(i, port, limit, limit)
end
T.write(tmp .. "/lab.lua", "return { boards = {\n" .. table.concat(lines) .. "} }\n")
local entries = lab.load(tmp .. "/lab.lua").boards

-- the sampler's answer once this process stops it
local function server_count()
  T.write(os.getenv("ADBTEST_STOP"), "")
  local path = os.getenv("ADBTEST_CONNS")
  for _ = 1, 500 do
    local f = io.open(path)
    if f then
      local max, samples = f:read("n", "n")
      f:close()
      return max, samples
    end
    sys.sleep(0.01)
  end
  error("conncount.lua wrote nothing to " .. path)
end

T.test(("three adb boards behind one server, at most %d connection(s) to it: every point done"):format(limit),
  function()
    local boards = boards_mod.open(entries, require("odp.core.ui").new { quiet = true })
    local out = tmp .. "/s.jsonl"
    local res = sweep.run_boards { points = sweep.points { "n=1,2,3" }, out = out, boards = entries,
      open = function(e) return boards[e.name] end,
      run_point = function(board, params)
        return board:profile { runner = fake, model = add, n = params.n, runs_dir = tmp .. "/runs" }
      end }
    local by = {}
    for _, r in ipairs(sweep.load(out)) do by[r.board .. " " .. r.params.n] = r end
    for i = 1, 3 do
      for n = 1, 3 do
        local r = by[("phone-%d %d"):format(i, n)]
        T.ok(r and r.ok, ("phone-%d point %d: %s"):format(i, n, r and r.error and r.error.message or "no record"))
        T.ok(r and r.peak_rss_kb and r.peak_rss_kb > 0, "rusage measured")
        T.ok(r and r.device_state and r.device_state.before, "device state read")
      end
    end
    T.eq(res.failed, 0)
    local server = assert(require("odp.adb").server_address())
    local conns = lock.named("adb server " .. server, limit)
    T.eq(conns.n, limit, "the lab file's adb_connections")
    boards:close()
    T.eq(conns.count, conns.n, "every connection given back")
    local max, samples = server_count()
    T.ok(samples >= 20, ("the connections were counted %d times"):format(samples))
    print(("# at most %d allowed: %d open to the server at once in %d samples"):format(limit, max, samples))
    T.ok(max >= 1 and max <= limit, ("at most %d open to the server at once, saw %d"):format(limit, max))
  end)

T.done()
