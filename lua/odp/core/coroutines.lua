--- Coroutines that pass the scheduler's yields through, installed once when odp starts (odp.cli.main) so that
-- `coroutine.resume` and `coroutine.wrap` are the same functions for the whole life of the process.
--
-- odp.core.sched runs each board as a task; a C call that would block yields the task with odp.wait.SENTINEL
-- (nmap's NSE does the same). A user's own coroutine inside a task would catch that yield as if it were its
-- own: resume and wrap here hand it on to the scheduler and resume the inner coroutine with what comes back.
-- Outside a task no SENTINEL is ever yielded, and they behave exactly as Lua's.
local SENTINEL = require("odp.wait").SENTINEL

local M = {}

local raw_resume, raw_yield, raw_create, raw_close = coroutine.resume, coroutine.yield, coroutine.create,
  coroutine.close
-- Lua's own, for the scheduler, which resumes and yields its tasks without passing anything through
M.raw = { resume = raw_resume, yield = raw_yield, create = raw_create, close = raw_close }

local function pass_on(co, ok, first, ...)
  if ok and first == SENTINEL then
    return pass_on(co, raw_resume(co, raw_yield(first, ...)))
  end
  return ok, first, ...
end

---coroutine.resume that passes the scheduler's yields through (the task yields them on, the inner coroutine
---gets what the scheduler resumed the task with).
---@param co thread
---@return boolean ok
---@return any ...
local function resume(co, ...)
  return pass_on(co, raw_resume(co, ...))
end

---coroutine.wrap on top of the resume above; errors propagate (with the caller's position) as in Lua's.
---@param f function
---@return function
local function wrap(f)
  local co = raw_create(f)
  return function(...)
    local res = table.pack(resume(co, ...))
    if not res[1] then
      raw_close(co)
      error(res[2], type(res[2]) == "string" and 2 or 0)
    end
    return table.unpack(res, 2, res.n)
  end
end

--- Installs both into the coroutine library; called once, at start-up.
function M.install()
  coroutine.resume, coroutine.wrap = resume, wrap
end

return M
