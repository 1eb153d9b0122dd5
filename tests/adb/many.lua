-- Many adb boards at once, run by test_many_adb.sh: dev1..dev3 behind the adb server (ANDROID_ADB_SERVER_PORT),
-- dev4 direct over TCP; ADBTEST_WORK/portN and devN.pid name them. Oracles: each device's own output (its model
-- and a file in its own sandbox), the wall clock against the sum of the commands, the JSONL read back.
local T = require("t")
local lab = require("odp.target.lab")
local boards_mod = require("odp.run.boards")
local sweep = require("odp.run.sweep")
local sys = require("odp.sys")

local work = assert(os.getenv("ADBTEST_WORK"))
local function port(i) return sys.read_file(("%s/port%d"):format(work, i)):match("%d+") end
local tmp = T.tmpdir()
local lines = {}
for i = 1, 3 do
  lines[#lines + 1] = ('  { name = "phone-%d", device = "devices/vivo_x300_pro.lua", serial = "127.0.0.1:%s", tags = { "server" } },\n')
    :format(i, port(i))
end
lines[4] = ('  { name = "phone-4", device = "devices/vivo_x300_pro.lua", adb = "tcp:127.0.0.1:%s", tags = { "direct" } },\n')
  :format(port(4))
T.write(tmp .. "/lab.lua", "return { boards = {\n" .. table.concat(lines) .. "} }\n")

local entries = lab.load(tmp .. "/lab.lua").boards
local boards = boards_mod.open(entries, require("odp.core.ui").new { quiet = true })

T.test("four adb boards (three through the adb server, one direct) run a command at once", function()
  boards:exec("true") -- connected
  local t0 = sys.now()
  local res = boards:each(function(b, name)
    return b:exec(("sleep 1; echo %s > /data/local/tmp/mark; cat /data/local/tmp/mark"):format(name))
  end)
  local wall = sys.now() - t0
  for i = 1, 4 do
    local name = "phone-" .. i
    local r = res[name]
    T.eq(r.error, nil, name .. ": " .. tostring(r.error and r.error.message))
    T.eq(r.stdout, name .. "\n")
    T.eq(sys.read_file(("%s/dev%d/data/local/tmp/mark"):format(work, i)), name .. "\n", name .. " is dev" .. i)
  end
  T.ok(wall < 3, ("four 1 s commands took %.2f s"):format(wall))
end)

T.test("a device that dies mid-sweep fails its own points only", function()
  local out = tmp .. "/adb.jsonl"
  local pid = sys.read_file(work .. "/dev2.pid"):match("%d+")
  local res = sweep.run_boards { points = sweep.points { "n=1,2,3" }, out = out, boards = entries,
    open = function(e) return boards[e.name] end,
    run_point = function(board, params, _, entry)
      if entry.name == "phone-2" and params.n == 2 then os.execute("kill -9 " .. pid) end
      local r = board:exec(("sleep 0.3; echo %s-%d"):format(entry.name, params.n), { timeout = 30 })
      return { schema = "odp.result/1", ok = r.ok, out = r.stdout }
    end }
  local by = {}
  for _, r in ipairs(sweep.load(out)) do
    by[r.board] = by[r.board] or {}
    by[r.board][r.params.n] = r
  end
  for _, name in ipairs { "phone-1", "phone-3", "phone-4" } do
    for n = 1, 3 do
      T.eq(by[name][n].ok, true, name .. " point " .. n)
      T.eq(by[name][n].out, ("%s-%d\n"):format(name, n))
    end
  end
  T.eq(by["phone-2"][1].ok, true)
  T.eq({ by["phone-2"][2].ok, by["phone-2"][3].ok }, { false, false })
  T.match(by["phone-2"][2].error.message, "board phone%-2")
  T.eq(res.failed, 2)
end)

boards:close()
T.done()
