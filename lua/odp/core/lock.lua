--- odp.core.lock: counted locks, for what many boards in one process cannot use freely (one host's staging
-- directory, one adb server's connections). lock:acquire() takes a unit; when none is free, a task of the
-- scheduler (odp.core.sched) waits in line, first come first served, while the other tasks run; outside a
-- task nothing could release it, so it fails at once (EBUSY).
--   local lock = require("odp.core.lock")
--   local staging = lock.named("stage " .. uri .. path, 1)
--   staging:with(function() upload() end)
local wait = require("odp.wait")

local M = {}

local Lock = {}
Lock.__index = Lock

---A counted lock: at most n holders at once.
---@param n integer
---@param name? string for messages
---@return odp.Lock
function M.new(n, name)
  assert(math.type(n) == "integer" and n >= 1, "lock.new: n must be an integer >= 1")
  return setmetatable({ n = n, count = n, queue = {}, name = name or "lock" }, Lock)
end

local named = setmetatable({}, { __mode = "v" })

---The lock called key (made with n units the first time; the same lock while anyone holds a reference).
function M.named(key, n)
  local l = named[key]
  if not l then
    l = M.new(n, key)
    named[key] = l
  end
  return l
end

---Takes one unit, waiting in line in a scheduled task while none is free.
---@return true|nil ok, string? err, string? code  nil, "ECANCELED: ..." when the task is canceled meanwhile
function Lock:acquire()
  if self.count > 0 and #self.queue == 0 then
    self.count = self.count - 1
    return true
  end
  if not wait.scheduling() or not coroutine.isyieldable() then
    return nil, "EBUSY: " .. self.name .. " is held (outside a scheduled task nothing would release it)", "EBUSY"
  end
  local ticket = { lock = self }
  self.queue[#self.queue + 1] = ticket
  coroutine.yield(wait.SENTINEL, "lock", ticket) -- the scheduler sets ticket.wake; release grants it
  if not ticket.granted then
    return nil, "ECANCELED: interrupted while waiting for " .. self.name, "ECANCELED"
  end
  return true
end

---Takes one unit now if more than keep units are free and nobody waits in line (keep of them stay free for
---others); never waits. For what may go without: odp.target.adb's resident channel, which runs the board's
---commands over one held connection, leaves at least one unit for the connections each call needs.
---@param keep? integer default 0
---@return boolean
function Lock:try(keep)
  if #self.queue > 0 or self.count <= (keep or 0) then return false end
  self.count = self.count - 1
  return true
end

---Gives one unit back; the first in line gets it.
function Lock:release()
  local ticket = table.remove(self.queue, 1)
  if ticket then
    ticket.granted = true
    ticket.wake()
  else
    self.count = self.count + 1
  end
end

---Takes a waiting ticket out of the line (its task was canceled).
function Lock:drop(ticket)
  for i, q in ipairs(self.queue) do
    if q == ticket then
      table.remove(self.queue, i)
      return
    end
  end
end

---Runs fn(...) holding one unit; the unit is given back however fn ends.
---@return any ... fn's results, or nil, err, code when the lock could not be taken
function Lock:with(fn, ...)
  local ok, err, code = self:acquire()
  if not ok then return nil, err, code end
  local res = table.pack(pcall(fn, ...))
  self:release()
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

return M
