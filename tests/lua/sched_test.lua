-- odp.core.sched: coroutines over the one waiting point. Real waits throughout (child processes, sleeps,
-- pipes); the oracle for "in parallel" is the wall clock against the sum of the waits, and for "killed" the
-- kernel (kill -0 on the child's pid).
local T = require("t")
-- what odp installed at start-up, before anything here loads the scheduler
local resume_at_start, wrap_at_start = coroutine.resume, coroutine.wrap
local sched = require("odp.core.sched")
local lock_mod = require("odp.core.lock")
local wait = require("odp.wait")
local proc = require("odp.proc")
local sys = require("odp.sys")

local function alive(pid) return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true end

T.test("waiting calls of different tasks overlap; results and errors stay with their task", function()
  local s = sched.new()
  local spans = {}
  for i = 1, 4 do
    s:spawn(function(n)
      local t0 = sys.now()
      local r = assert(proc.run { "sh", "-c", "sleep 0.4; echo task" .. n })
      assert(sys.sleep(0.2))
      spans[n] = { t0, sys.now() }
      return r.stdout
    end, { name = "t" .. i }, i)
  end
  local bad = s:spawn(function() proc.run { "true", tiemout = 1 } end, { name = "misuse" })
  s:run()
  for i = 1, 4 do
    T.eq(s.tasks[i].ok, true, "task " .. i)
    T.eq(s.tasks[i].values[1], "task" .. i .. "\n")
  end
  T.eq(bad.ok, false)
  T.match(tostring(bad.error), "unknown option 'tiemout'")
  -- one after the other, the last would start after the first ended
  local last_start, first_end = -math.huge, math.huge
  for i = 1, 4 do last_start, first_end = math.max(last_start, spans[i][1]), math.min(first_end, spans[i][2]) end
  T.ok(last_start < first_end, "the four tasks' waits overlap")
end)

T.test("a misuse raised on a fiber is caught by the task, and the next call works", function()
  local s = sched.new()
  local t = s:spawn(function()
    local ok, err = pcall(proc.run, {})
    local r = assert(proc.run { "echo", "after" })
    return ok, err, r.stdout
  end)
  s:run()
  T.eq(t.ok, true)
  T.eq(t.values[1], false)
  T.match(t.values[2], "argv must hold")
  T.eq(t.values[3], "after\n")
end)

T.test("fairness: ready tasks take turns", function()
  local s = sched.new()
  local progress, spread = { 0, 0, 0 }, 0
  for i = 1, 3 do
    s:spawn(function()
      for _ = 1, 50 do
        assert(sys.sleep(0))
        progress[i] = progress[i] + 1
        local lo, hi = math.min(table.unpack(progress)), math.max(table.unpack(progress))
        spread = math.max(spread, hi - lo)
      end
    end)
  end
  s:run()
  T.eq(progress, { 50, 50, 50 })
  T.ok(spread <= 1, "no task ran ahead by more than one turn (spread " .. spread .. ")")
end)

T.test("coroutine.resume and wrap are odp's from start-up: loading the scheduler changes no global", function()
  local raw = require("odp.core.coroutines").raw
  T.ok(resume_at_start ~= raw.resume, "start-up installed the pass-through resume")
  T.ok(coroutine.resume == resume_at_start and coroutine.wrap == wrap_at_start,
    "coroutine.resume and wrap are the same before and after require('odp.core.sched')")
end)

T.test("nested user coroutines: resume and wrap pass the scheduler's yields through", function()
  local s = sched.new()
  local order = {}
  local a = s:spawn(function()
    local gen = coroutine.wrap(function()
      for i = 1, 3 do
        local r = assert(proc.run { "sh", "-c", "sleep 0.1; echo " .. i })
        coroutine.yield(tonumber(r.stdout))
      end
    end)
    local got = {}
    for _ = 1, 3 do got[#got + 1] = gen() end
    -- two levels deep, with coroutine.resume
    local outer = coroutine.create(function()
      local inner = coroutine.create(function()
        assert(sys.sleep(0.05))
        coroutine.yield("inner")
        return "inner done"
      end)
      local _, v1 = coroutine.resume(inner)
      local _, v2 = coroutine.resume(inner)
      coroutine.yield(v1 .. "/" .. v2)
    end)
    local ok, v = coroutine.resume(outer)
    order[#order + 1] = "a"
    return got, ok, v
  end)
  s:spawn(function() assert(sys.sleep(0.05)) order[#order + 1] = "b" end)
  s:run()
  T.eq(a.ok, true, tostring(a.error))
  T.eq(a.values[1], { 1, 2, 3 })
  T.eq(a.values[2], true)
  T.eq(a.values[3], "inner/inner done")
  T.eq(order, { "b", "a" }, "b ran while a's generator waited")
end)

T.test("outside a scheduler, waiting calls block as before, also inside a plain coroutine", function()
  local co = coroutine.wrap(function()
    local r = assert(proc.run { "echo", "plain" })
    coroutine.yield(r.stdout)
    return assert(sys.sleep(0.01))
  end)
  T.eq(co(), "plain\n")
  T.eq(co(), true)
end)

T.test("deadlines: a task past its deadline is canceled, its child killed; the others finish", function()
  local s = sched.new()
  local pidfile = T.tmpdir() .. "/pid"
  local slow = s:spawn(function()
    return proc.run { "sh", "-c", "echo $$ > " .. pidfile .. "; exec sleep 30" }
  end, { name = "slow", timeout = 0.5 })
  local quick = s:spawn(function()
    assert(sys.sleep(1.0))
    return "finished"
  end, { name = "quick", timeout = 5 })
  local t0 = sys.now()
  s:run()
  local wall = sys.now() - t0
  T.eq(slow.timed_out, true)
  T.eq(slow.canceled, true)
  T.eq(slow.values[1].canceled, true, "proc.run says canceled")
  T.eq(quick.ok, true)
  T.eq(quick.values[1], "finished")
  T.eq(quick.timed_out, nil)
  local pid = assert(io.open(pidfile)):read("n")
  T.ok(not alive(pid), "the slow child is gone")
  T.ok(wall < 10, "the deadline stopped the 30 s child (" .. wall .. " s)")
  -- a call's own timeout is still its own: ETIMEDOUT-style result, task not canceled
  local s2 = sched.new()
  local t = s2:spawn(function() return proc.run { "sleep", "5", timeout = 0.2 } end)
  s2:run()
  T.eq(t.values[1].timed_out, true)
  T.eq(t.canceled, nil)
end)

T.test("cancel: one task's waiting call ends with ECANCELED, later calls too; the others go on", function()
  local s = sched.new()
  local victim = s:spawn(function()
    local r = proc.run { "sleep", "30" }
    local ok, err, code = sys.sleep(5)
    return r.canceled, ok, code
  end, { name = "victim" })
  local other = s:spawn(function()
    assert(sys.sleep(0.2))
    s:cancel(victim, "test")
    assert(sys.sleep(0.3))
    return "other done"
  end)
  local t0 = sys.now()
  s:run()
  T.eq(victim.values[1], true)
  T.eq(victim.values[2], nil)
  T.eq(victim.values[3], "ECANCELED")
  T.eq(other.values[1], "other done")
  T.ok(sys.now() - t0 < 4.5, "the victim's 30 s and 5 s waits were cut short")
end)

T.test("Ctrl-C cancels every task, kills their children, and is raised again for the code around", function()
  local s = sched.new()
  local dir = T.tmpdir()
  for i = 1, 3 do
    s:spawn(function()
      return proc.run { "sh", "-c", "echo $$ > " .. dir .. "/" .. i .. "; exec sleep 30" }
    end)
  end
  s:spawn(function()
    assert(sys.sleep(0.3))
    proc.run { "kill", "-INT", tostring(sys.getpid()) }
  end)
  local t0 = sys.now()
  s:run()
  T.eq(s.interrupted, true)
  T.eq(wait.interrupted(), true, "the interrupt is pending again after run()")
  sys.cancel_clear()
  for i = 1, 3 do
    T.eq(s.tasks[i].values[1].canceled, true)
    T.ok(not alive(assert(io.open(dir .. "/" .. i)):read("n")), "child " .. i .. " killed")
  end
  T.ok(sys.now() - t0 < 10, "stopped at once")
end)

T.test("a cancel raised from Lua in a task is that task's own: the other tasks go on, nothing is interrupted", function()
  local s = sched.new()
  local raiser = s:spawn(function()
    sys.cancel_request() -- as a board's cleanup does after lifting its cancel
    local mine = sys.cancel_requested()
    assert(sys.sleep(0.1))
    sys.cancel_clear()
    return mine, sys.cancel_requested()
  end)
  local other = s:spawn(function()
    local seen = sys.cancel_requested()
    local ok = sys.sleep(0.3)
    return seen, ok
  end)
  s:run()
  T.eq({ raiser.values[1], raiser.values[2] }, { true, false })
  T.eq({ other.values[1], other.values[2] }, { false, true }, "the other task neither saw it nor was cut short")
  T.eq(s.interrupted, false)
  T.eq(wait.interrupted(), false)
end)

T.test("counted locks: at most n holders, first come first served, released on error", function()
  local s = sched.new()
  local lock = lock_mod.new(2, "test lock")
  local holders, most, order = 0, 0, {}
  for i = 1, 5 do
    s:spawn(function()
      lock:with(function()
        holders = holders + 1
        most = math.max(most, holders)
        order[#order + 1] = i
        assert(sys.sleep(0.1))
        holders = holders - 1
        if i == 2 then error("fails holding the lock") end
      end)
    end)
  end
  s:run()
  T.eq(most, 2)
  T.eq(order, { 1, 2, 3, 4, 5 })
  T.eq(s.tasks[2].ok, false)
  T.eq(lock.count, 2, "every unit came back")
  -- outside a scheduler an exhausted lock is EBUSY, not a hang
  local one = lock_mod.new(1)
  assert(one:acquire())
  local ok, _, code = one:acquire()
  T.eq(ok, nil)
  T.eq(code, "EBUSY")
end)

T.test("lock:try(keep) takes a unit only while more than keep stay free and nobody waits", function()
  local lock = lock_mod.new(3)
  T.eq(lock:try(1), true)
  T.eq(lock:try(1), true)
  T.eq(lock:try(1), false, "the last unit is kept for others")
  T.eq(lock.count, 1)
  T.ok(lock:acquire(), "a plain acquire still gets the kept unit")
  T.eq(lock:try(), false, "none free")
  lock:release()
  local s = sched.new()
  local order = {}
  s:spawn(function() -- takes the free unit, so the next one must wait in line
    T.ok(lock:acquire())
    sched.yield()
    order[#order + 1] = "a"
    lock:release()
  end)
  s:spawn(function()
    T.ok(lock:acquire()) -- waits in line
    order[#order + 1] = "b"
    lock:release()
  end)
  s:spawn(function()
    order[#order + 1] = lock:try() and "try took one" or "try refused"
  end)
  s:run()
  T.eq(order, { "try refused", "a", "b" }, "try does not overtake a waiting task")
  lock:release()
  lock:release()
  T.eq(lock.count, 3)
end)

T.test("a canceled lock wait returns ECANCELED", function()
  local s = sched.new()
  local lock = lock_mod.new(1)
  local waiter
  s:spawn(function() lock:with(function() assert(sys.sleep(0.3)) end) end)
  waiter = s:spawn(function() return lock:acquire() end)
  s:spawn(function() assert(sys.sleep(0.1)) s:cancel(waiter) end)
  s:run()
  T.eq(waiter.values[1], nil)
  T.eq(waiter.values[3], "ECANCELED")
  T.eq(lock.count, 1)
end)

T.done()
