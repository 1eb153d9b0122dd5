--- odp.core.sched: many tasks (boards) in one process, as coroutines over the one waiting point.
--
-- nmap's NSE is the model. A task is a coroutine. A C function that may wait (ssh exec, proc.run, a stream
-- read, sys.sleep: every binding registered with odp_waiting) runs, inside a task, on its own C stack; where it
-- would block in odp_wait it yields the task instead (lua_yieldk), with `odp.wait.SENTINEL`, the parked wait
-- and the number of the call. The scheduler polls every parked wait at once (odp.wait.poll, itself in
-- odp_wait: Ctrl-C still ends it) and resumes the tasks whose wait is over. Outside a task the same functions
-- block as they always did, so scripts and the REPL are unchanged.
--
-- A user coroutine inside a task still works: coroutine.resume and coroutine.wrap pass a sentinel yield on to
-- the scheduler and resume the inner coroutine with what comes back (NSE does the same). Each task has its own
-- deadline and its own cancellation: a canceled task's C call ends with ECANCELED (the ssh core then kills the
-- remote process group); its cleanup inside that call may still wait, bounded by CLEANUP_S; its later calls
-- end with ECANCELED at their first wait. Counted locks (odp.core.lock) share what cannot be used freely; a
-- task waiting for one yields ("lock", ticket) and is resumed when the ticket is granted.
local wait = require("odp.wait")
local sys = require("odp.sys")

local SENTINEL = wait.SENTINEL
-- How long a canceled task's cleanup (the call that was waiting when it was canceled) may still wait.
local CLEANUP_S = 10

local sched = {}

-- User coroutines inside a task pass the scheduler's yields on through coroutine.resume/wrap, which
-- odp.core.coroutines installed when odp started (odp.cli.main), not here: a global must not change partway.
local raw = require("odp.core.coroutines").raw
local raw_resume, raw_yield, raw_create, raw_close = raw.resume, raw.yield, raw.create, raw.close

-- ---- tasks -------------------------------------------------------------------------------------------------

---@class odp.Task
---@field name string
---@field status "ready"|"waiting"|"locked"|"done"
---@field ok boolean|nil        true when the function returned, false when it raised (set once done)
---@field values table|nil      its return values, packed (when ok)
---@field error any             what it raised (when not ok)
---@field traceback string|nil
---@field canceled boolean|nil  canceled (Ctrl-C, sched:cancel, or its deadline)
---@field timed_out boolean|nil its deadline passed
---@field deadline number|nil   absolute odp.sys.now() time
local Task = {}
Task.__index = Task

---@class odp.Scheduler
local Scheduler = {}
Scheduler.__index = Scheduler

local current -- the task running now

---A scheduler with no tasks.
---@return odp.Scheduler
function sched.new()
  return setmetatable({ tasks = {}, runq = {}, interrupted = false }, Scheduler)
end

---The task running now, or nil outside a scheduler.
---@return odp.Task|nil
function sched.current()
  return current
end

---Adds a task; it starts at the next run().
---@param fn function called with the extra arguments
---@param opts? {name?: string, timeout?: number} timeout: seconds from run() (nil: none)
---@return odp.Task
function Scheduler:spawn(fn, opts, ...)
  opts = opts or {}
  local t = setmetatable({
    name = opts.name or ("task " .. (#self.tasks + 1)),
    timeout = opts.timeout,
    co = raw_create(fn),
    args = table.pack(...),
    status = "ready",
    scheduler = self,
  }, Task)
  self.tasks[#self.tasks + 1] = t
  self.runq[#self.runq + 1] = t
  return t
end

---Gives the task a deadline `seconds` from now (nil: none); when it passes the task is canceled and marked
---timed_out. A task may set its own (a limit per sweep point).
---@param seconds number|nil
function Task:limit(seconds)
  self.timeout = seconds
  self.deadline = seconds and sys.now() + seconds or nil
end

local function finish(t, ok, ...)
  t.status = "done"
  t.ok = ok
  if ok then
    t.values = table.pack(...)
  else
    t.error = ...
    t.traceback = debug.traceback(t.co, tostring((...)))
  end
  raw_close(t.co)
end

-- What a task yielded: a parked C wait, a lock wait, a plain yield (sched.yield) or anything else (an error).
local function park(self, t, ok, first, what, call, ...)
  if not ok then
    return finish(t, false, first)
  end
  if coroutine.status(t.co) == "dead" then
    return finish(t, true, first, what, call, ...)
  end
  if first ~= SENTINEL then
    return finish(t, false, "a task yielded outside the scheduler (use coroutine.wrap/resume inside tasks)")
  end
  if type(what) == "userdata" then -- a parked C wait
    t.status, t.wait, t.call = "waiting", what, call
    if t.canceled and (call ~= t.cancel_call or sys.now() >= t.cancel_at + CLEANUP_S) then
      t.cancel_call = call
      wait.wake(what, "ECANCELED")
      t.status = "ready"
      self.runq[#self.runq + 1] = t
    end
  elseif what == "lock" then -- odp.core.lock: the ticket is granted (or dropped when the task is canceled)
    t.status, t.ticket = "locked", call
    call.wake = function()
      t.status, t.ticket = "ready", nil
      self.runq[#self.runq + 1] = t
    end
  else -- sched.yield()
    self.runq[#self.runq + 1] = t
  end
end

local function step(self, t)
  current = t
  local args = t.args
  t.args = nil
  t.status = "running"
  if args then
    park(self, t, raw_resume(t.co, table.unpack(args, 1, args.n)))
  else
    park(self, t, raw_resume(t.co))
  end
  current = nil
end

---Cancels a task: its waiting C call ends with ECANCELED (a lock wait returns nil, "ECANCELED: ...").
---@param t odp.Task
---@param why? string
function Scheduler:cancel(t, why)
  if t.status == "done" or t.canceled then return end
  t.canceled, t.cancel_at, t.cancel_why = true, sys.now(), why
  if t.status == "waiting" then
    t.cancel_call = t.call
    wait.wake(t.wait, "ECANCELED")
    t.status = "ready"
    self.runq[#self.runq + 1] = t
  elseif t.status == "locked" then
    t.ticket.lock:drop(t.ticket)
    t.status, t.ticket = "ready", nil
    self.runq[#self.runq + 1] = t
  end
end

---Makes a task waiting in a C call look again at what it waits on (odp.wait.wake's "ready"): another task used
---the same connection meanwhile (odp.target.helper's runs sent while one is read) and may have taken in what it
---waits for. Does nothing to a task not waiting in C.
---@param t odp.Task
function Scheduler:nudge(t)
  if t.status ~= "waiting" then return end
  wait.wake(t.wait, "ready")
  t.status = "ready"
  self.runq[#self.runq + 1] = t
end

local function live(self)
  for _, t in ipairs(self.tasks) do
    if t.status ~= "done" then return true end
  end
  return false
end

local function loop(self)
  local started = sys.now()
  for _, t in ipairs(self.tasks) do
    if t.timeout and not t.deadline then t.deadline = started + t.timeout end
  end
  while live(self) do
    -- Round robin: every task ready now runs once, in the order it became ready.
    local runq = self.runq
    self.runq = {}
    for _, t in ipairs(runq) do
      if t.status ~= "done" then step(self, t) end
    end
    local waits, owners, soonest = {}, {}, nil
    for _, t in ipairs(self.tasks) do
      if t.status == "waiting" then
        waits[#waits + 1], owners[#owners + 1] = t.wait, t
      end
      if t.deadline and not t.timed_out and t.status ~= "done" and (not soonest or t.deadline < soonest) then
        soonest = t.deadline
      end
    end
    if #self.runq > 0 then soonest = 0 end
    if #waits > 0 or soonest then
      local ready, err = wait.poll(waits, soonest)
      if not ready then -- Ctrl-C: every task is canceled; the interrupt is raised again once they are done
        self.interrupted = true
        sys.cancel_clear()
        for _, t in ipairs(self.tasks) do self:cancel(t, err) end
      else
        for _, i in ipairs(ready) do
          owners[i].status = "ready"
          self.runq[#self.runq + 1] = owners[i]
        end
      end
    elseif #self.runq == 0 and live(self) then
      -- Only lock waits are left and nothing will release them.
      for _, t in ipairs(self.tasks) do
        if t.status == "locked" then self:cancel(t, "deadlock: every task waits on a lock") end
      end
    end
    local now = sys.now()
    for _, t in ipairs(self.tasks) do
      if t.deadline and not t.timed_out and t.status ~= "done" and now >= t.deadline then
        t.timed_out = true
        self:cancel(t, string.format("ETIMEDOUT: %s did not finish within %g s", t.name, t.timeout))
      end
    end
  end
end

---Runs every task to its end (Ctrl-C cancels them all; odp then exits 130 as without a scheduler).
---Returns the tasks.
---@return odp.Task[]
function Scheduler:run()
  if current then error("sched: run() inside a task", 2) end
  wait.scheduling(true)
  local ok, err = pcall(loop, self)
  wait.scheduling(false)
  current = nil
  if not ok then error(err, 0) end
  if self.interrupted then wait.interrupt() end
  return self.tasks
end

---Lets the other ready tasks run (outside a task: does nothing).
function sched.yield()
  if current and coroutine.isyieldable() then raw_yield(SENTINEL, "yield") end
end

return sched
