-- odp.parse.oomkill: the kills a board's log records when memory runs out (tests/fixtures/oomkill: a real memory
-- cgroup kill of llama_main, and the kernel's and lmkd's formats). Oracles: the figures in each fixture's line,
-- read by eye and written here.
local T = require("t")
local oomkill = require("odp.parse.oomkill")

local root = T.root()
local function fixture(name) return T.read(root .. "/tests/fixtures/oomkill/" .. name) end

T.test("the kernel's OOM kill lines: a memory cgroup's (real) and the whole system's", function()
  local kills = oomkill.kills(fixture("dmesg-memcg.txt"))
  T.eq(#kills, 1, "the report's other lines (the task table, oom-kill:) are no kill of their own")
  T.eq(kills[1], { by = "memcg", pid = 16920, name = "llama_main", uptime_s = 16396.834214, rss_kb = 128 + 1548,
    oom_score_adj = 0 })
  T.eq(oomkill.describe(kills[1], "/opt/et/llama_main"), "the kernel's OOM killer at its memory cgroup's limit " ..
    "killed llama_main: pid 16920, 1.6 MB resident")
  kills = oomkill.kills(fixture("dmesg-oom.txt"))
  T.eq(#kills, 1, "the reaper's line is no kill")
  T.eq(kills[1], { by = "kernel", pid = 3170, name = "llama_main", uptime_s = 8812.402377,
    rss_kb = 7640952 + 3184, oom_score_adj = 0 })
  -- found by the runner's name, as the kernel cuts it (15 bytes), and only when recent enough
  T.eq(oomkill.find(kills, "/data/local/tmp/llama_main").pid, 3170)
  T.eq(oomkill.find(oomkill.kills("[ 1.0] Out of memory: Killed process 7 (llama_main-linu) total-vm:1kB"),
    "llama_main-linux-aarch64").pid, 7)
  T.eq(oomkill.find(kills, "executor_runner"), nil)
  T.eq(oomkill.find(kills, "llama_main", nil, 8812.5), nil, "an older kill of the same program")
  T.eq(oomkill.find(kills, "llama_main", nil, 8800).pid, 3170)
end)

T.test("Android lmkd: its killinfo event, matched by the pid its main-log line names", function()
  local events, main = fixture("logcat-events.txt"), fixture("logcat-main.txt")
  local kills = oomkill.kills(events)
  T.eq(kills, { { by = "lmkd", pid = 23411, rss_kb = 1843212, oom_score_adj = -1000 } })
  T.eq(oomkill.find(kills, "llama_main"), nil, "a killinfo event names no program")
  T.eq(oomkill.find(kills, nil, 23411).pid, 23411)
  kills = oomkill.kills(events .. main)
  T.eq(#kills, 3)
  local k = oomkill.find(kills, "/data/local/tmp/llama_main")
  T.eq(k, { by = "lmkd", pid = 23411, name = "llama_main", rss_kb = 1843212, oom_score_adj = -1000 })
  T.eq(oomkill.describe(k), "Android's low-memory killer (lmkd) killed llama_main: pid 23411, 1800.0 MB resident")
  T.eq(oomkill.find(kills, "com.google.android.gms").pid, 4101)
end)

T.test("garbage: never raises, bounded, nothing made up", function()
  local real = fixture("dmesg-memcg.txt") .. fixture("dmesg-oom.txt") .. fixture("logcat-events.txt") ..
    fixture("logcat-main.txt")
  for _, text in ipairs({ "", "Killed process", ": Killed process x (y)", "Out of memory: Killed process (x)",
    "Out of memory: Killed process 99999999999999999999 (x)", "killinfo: [", "killinfo: [-5,1,2]",
    "Kill '' (", "Kill 'x' (-3)", ("Kill '"):rep(100000), ("killinfo: ["):rep(50000) .. "1",
    ("9"):rep(1000000), "Out of memory: Killed process 5 (" .. ("x"):rep(100000) }) do
    for _, k in ipairs(oomkill.kills(text)) do
      T.ok(math.type(k.pid) == "integer" and k.pid >= 0, "a pid is a whole number")
      T.ok(not k.name or #k.name <= 4096, "a bounded name")
    end
  end
  -- a flood of kills keeps the newest 64; a huge log is read from its end
  local flood = {}
  for i = 1, 1000 do flood[i] = ("[%d.0] Out of memory: Killed process %d (p) total-vm:1kB"):format(i, i) end
  local kills = oomkill.kills(table.concat(flood, "\n"))
  T.eq(#kills, 64)
  T.eq(kills[64].pid, 1000)
  kills = oomkill.kills(("x"):rep(10 * oomkill.MAX_TEXT) .. "\n" .. fixture("dmesg-oom.txt"))
  T.eq(kills[1].pid, 3170)
  local rnd = T.lcg(7)
  for _ = 1, 2000 do
    for _, k in ipairs(oomkill.kills(T.mutate(real, rnd, "[]()',: \n0123456789-kBKill"))) do
      T.ok(math.type(k.pid) == "integer" and k.pid >= 0 and k.pid < 2 ^ 53, "pid")
      T.ok(not k.rss_kb or (math.type(k.rss_kb) == "integer" and k.rss_kb >= 0), "rss")
      oomkill.describe(k, "llama_main")
    end
  end
end)

T.done()
