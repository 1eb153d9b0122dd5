--- Parser for the kills a board's log records when memory runs out: what names the killer of a runner that died
-- of SIGKILL odp did not send.
-- - the kernel's OOM killer (mm/oom_kill.c `__oom_kill_process`), in `dmesg` or the kernel log:
--   `<message>: Killed process PID (COMM) total-vm:NkB, anon-rss:NkB, file-rss:NkB, shmem-rss:NkB, UID:N
--   pgtables:NkB oom_score_adj:N`, where message is "Out of memory" (the whole system) or "Memory cgroup out of
--   memory" (a cgroup's limit: mm/memcontrol.c); older kernels end the line earlier; COMM is the task's name cut
--   to 15 bytes (TASK_COMM_LEN);
-- - Android's lmkd: its `killinfo` event (`logcat -b events`, tag 10195355 in lmkd's event.logtags:
--   `[Pid,Uid,OomAdj,MinOomScore,TaskSize,KillReason,MemFree,...]`, TaskSize in kB), and its line in the main
--   log (tag lowmemorykiller): `Kill 'NAME' (PID), uid N, oom_score_adj N to free NkB rss, NkB swap; reason: ...`.
-- Pure functions over untrusted text: never raise on content, bound what they read and keep.
local M = {}

-- A log is read from its end (the newest kills); more than this of it is not read.
M.MAX_TEXT = 256 * 1024
-- A kernel line is at most 1024 bytes (printk), a logcat one about 4 KiB: the rest of a longer one is not read.
local MAX_LINE = 4096
-- Kills kept: a log of nothing but kills is a flood, and the newest are the ones asked about.
local MAX_KILLS = 64
-- A pid or a kB figure beyond this is garbage.
local MAX_NUMBER = 2 ^ 53
-- The kernel's task name: TASK_COMM_LEN 16, less its NUL.
local COMM_LEN = 15

local function number(s)
  local v = s and math.tointeger(tonumber(s))
  if v and v >= 0 and v < MAX_NUMBER then return v end
end

-- One line -> a kill {by, pid, name?, rss_kb?, oom_score_adj?}, or nil. Only plain searches and patterns anchored
-- on a literal run over it, so a long line costs its length.
local function kill_of(line)
  local at = line:find(": Killed process ", 1, true)
  if at then
    local head = line:sub(math.max(1, at - 40), at - 1)
    local by = head:find("Memory cgroup out of memory", 1, true) and "memcg" or
      head:find("Out of memory", 1, true) and "kernel"
    local pid, comm = line:match("^(%d+) %(([^)]*)%)", at + #": Killed process ")
    if not (by and number(pid)) then return nil end
    local anon, file = number(line:match("anon%-rss:(%d+)kB")), number(line:match("file%-rss:(%d+)kB"))
    return { by = by, pid = number(pid), name = comm:sub(1, COMM_LEN), rss_kb = anon and file and anon + file or anon,
      uptime_s = tonumber(line:match("^%[%s*(%d+%.%d+)%]")),
      oom_score_adj = math.tointeger(tonumber(line:match("oom_score_adj:(%-?%d+)"))) }
  end
  local info = line:match("killinfo: %[([%d,%-]+)")
  if info then
    local f = {}
    for x in info:gmatch("[^,]+") do
      f[#f + 1] = x
      if #f == 5 then break end
    end
    local pid = number(f[1])
    return pid and { by = "lmkd", pid = pid, rss_kb = number(f[5]), oom_score_adj = math.tointeger(tonumber(f[3])) }
  end
  local name, pid = line:match("Kill '([^']*)' %((%d+)%)")
  if name and number(pid) then
    return { by = "lmkd", pid = number(pid), name = name, rss_kb = number(line:match("to free (%d+)kB rss")),
      oom_score_adj = math.tointeger(tonumber(line:match("oom_score_adj (%-?%d+)"))) }
  end
end

--- The kills in a log's text (dmesg, `logcat -b events`, `logcat -b main`, any mix), oldest first, at most the
--- newest 64 of the text's last 256 KiB. -> list of {by = "kernel" | "memcg" | "lmkd", pid, name (the kernel's
--- 15-byte task name; absent in a killinfo event), rss_kb, oom_score_adj, uptime_s (a kernel line's time)}.
function M.kills(text)
  text = text or ""
  if #text > M.MAX_TEXT then text = text:sub(-M.MAX_TEXT) end
  local out = {}
  for line in text:gmatch("[^\n]+") do
    local k = kill_of(line:sub(1, MAX_LINE))
    if k then
      out[#out + 1] = k
      if #out > MAX_KILLS then table.remove(out, 1) end
    end
  end
  return out
end

--- The newest kill of the program `name` (its path's last part, compared as the kernel cuts it) or of `pid`,
--- from M.kills; a killinfo event (no name) counts when another line of the same kill names its pid. since: the
--- kernel's uptime in s before which a kernel kill is an older one (the log keeps them). -> kill or nil.
function M.find(kills, name, pid, since)
  local comm = name and name:match("[^/]*$"):sub(1, COMM_LEN)
  local recent, named = {}, {}
  for _, k in ipairs(kills) do
    if not (since and k.uptime_s and k.uptime_s < since) then
      recent[#recent + 1] = k
      if k.name and comm and k.name:sub(1, COMM_LEN) == comm then named[k.pid] = true end
    end
  end
  for i = #recent, 1, -1 do
    local k = recent[i]
    if (pid and k.pid == pid) or named[k.pid] then return k end
  end
end

--- What killed it, as the failure's line says it: "Android's low-memory killer (lmkd) killed llama_main: pid 4242,
--- 1200.0 MB resident".
function M.describe(k, name)
  local who = ({ kernel = "the kernel's OOM killer (the board ran out of memory)",
    memcg = "the kernel's OOM killer at its memory cgroup's limit",
    lmkd = "Android's low-memory killer (lmkd)" })[k.by]
  local size = k.rss_kb and (", %.1f MB resident"):format(k.rss_kb / 1024) or ""
  return ("%s killed %s: pid %d%s"):format(who, k.name or (name and name:match("[^/]*$")) or "it", k.pid, size)
end

return M
