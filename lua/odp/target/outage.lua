--- A remote board's connection shared by the tasks of a pipelined sweep (odp.run.sweep: two points in flight,
-- odp.target.helper queues the second run), for every transport that reconnects (odp.target.ssh, odp.target.adb):
-- each request runs with the connection's health in mind, a drop is waited for once for all the tasks that saw it,
-- and a run queued behind one the connection dropped under goes again. What differs between transports is given
-- by the target's methods:
--   t:connection()          the connection in use now (compared by identity: a task knows whether another one
--                           already replaced the connection it used)
--   t:lost_why(conn)        why conn is lost, or nil
--   t:ask_lost(conn)        called when the helper ended and conn says nothing: ask the board over conn
--   t:let_go(conn)          conn is given up (its traffic kept); it must not be closed under another task's call
--   t:connect_again(s)      a new connection, made the one in use, within s seconds -> truthy | nil, err, code
--   t:give_up(err, code)    the board stays away: every later request fails at once (t.gone, t.gone_code)
-- and the fields t.gone, t.gone_code (ECONNLOST), t.uri, t.cache.helper_client.
local lock = require("odp.core.lock")
local shell = require("odp.target.shell")
local sys = require("odp.sys")

local M = {}

--- Waits for a board whose connection dropped (why: the cause; lost: the connection that dropped) to come back
-- (odp.target.shell.reconnect: with backoff until --reconnect-timeout). Two tasks may both see it drop: the
-- second waits for the first's reconnection and takes its outcome. -> true | nil, err, code (the target given up,
-- or ECANCELED: Ctrl-C while waiting)
function M.reconnect(t, why, lost)
  t.reconnecting = t.reconnecting or lock.new(1, "reconnecting " .. t.uri)
  local held, lerr, lcode = t.reconnecting:acquire()
  if not held then return nil, lerr, lcode end
  if t.gone or (lost and t:connection() ~= lost) then
    t.reconnecting:release()
    if t.gone then return nil, t.gone, t.gone_code end
    return true
  end
  local h = t.cache.helper_client
  if h then pcall(h.close, h) end
  t.cache.helper_client = nil
  if lost then t:let_go(lost) end
  local ok, err, code = shell.reconnect(t, why, function(timeout) return t:connect_again(timeout) end)
  t.reconnecting:release()
  if not ok then return t:give_up(err, code) end
  return true
end

--- Runs fn() (a request on the board: what names it) on the connection in use: on a target given up, its cause at
-- once; when the connection dropped under it, waits for the board (M.reconnect) and runs fn once more if replay
-- (nothing on the board can have started) or if the helper says the run never started (EAGAIN: queued behind
-- one the connection dropped under), else fails with ECONNLOST saying it is not run again. A result is never
-- taken from a dropped connection; a request cut short by Ctrl-C is not waited for. -> fn's results | nil, err, code
function M.request(t, what, replay, fn)
  for try = 1, 2 do
    if t.gone then return nil, t.gone, t.gone_code end
    local conn = t:connection()
    local gone_before = conn and t:lost_why(conn)
    if gone_before then -- another task's request found it lost: back first, then this one
      local ok, err, code = M.reconnect(t, gone_before, conn)
      if not ok then return nil, err, code end
      conn = t:connection()
    end
    local r, err, code = fn()
    local queued = code == "EAGAIN"
    if queued then code = "EIO" end
    if t.gone then return nil, t.gone, t.gone_code end -- given up meanwhile
    if r ~= nil and err == nil then
      t.last_ok, t.last_ok_at = what, sys.now()
      return r, err, code
    end
    if code == "ECANCELED" or sys.cancel_requested() then return r, err, code end
    local why = conn and t:lost_why(conn)
    local h = t.cache.helper_client
    if not why and r == nil and conn and h and h.dead and conn == t:connection() then
      -- the helper ended: killed on the board, or its connection went (its end can come before the loss shows)
      t:ask_lost(conn)
      why = t:lost_why(conn)
    end
    if t.gone then return nil, t.gone, t.gone_code end -- a request inside fn gave up
    if not why then return r, err, code end
    if conn == t:connection() then -- not already back through a request inside fn (or another task)
      local ok, rerr, rcode = M.reconnect(t, why, conn)
      if not ok then return nil, rerr, rcode end
    end
    if (not replay and not queued) or try == 2 then return nil, shell.not_run_again(t, what, why), "ECONNLOST" end
  end
end

--- Puts every request method of a target class through M.request: what it is called in the line that says the
-- board dropped, and whether it is run again once the board is back (all but exec: a program may have started).
function M.wrap(Target)
  for name, replay in pairs { run = true, exec_command = true, mkdir = true, sha256 = true, libc_version = true,
    free_bytes = true, push = true, pull = true, state_text = true, exec = false } do
    local f = Target[name]
    Target[name] = function(self, first, ...)
      local rest = table.pack(...)
      return M.request(self, shell.request_name(name, first), replay, function()
        return f(self, first, table.unpack(rest, 1, rest.n))
      end)
    end
  end
end

return M
