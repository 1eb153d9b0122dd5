--- A pipelined sweep, counted on the board's own clock (tests/lua/link_test.lua over SSH, tests/adb/pipeline.lua
-- over adb): the runner runs in a script that prints `board-clock start NS` and `board-clock end NS` on stderr
-- as it starts and ends, which the flow keeps in each run's runner.stderr.
local T = require("t")

local M = {}

--- Writes that runner script at path: program (on the board) with the runner's arguments, then `more_s` seconds
-- more, so a run outlasts what odp does with a point's answer and each next request is queued on the board before
-- the run before it ends. -> path
function M.runner(path, program, more_s)
  T.write(path, ("#!/bin/sh\necho \"board-clock start $(date +%%s%%N)\" >&2\n'%s' \"$@\"\nrc=$?\nsleep %g\n" ..
    "echo \"board-clock end $(date +%%s%%N)\" >&2\nexit \"$rc\"\n"):format(program, more_s))
  assert(os.execute("chmod 755 '" .. path .. "'"))
  return path
end

--- How many of a sweep's points started less than rtt_ms after the one before ended, on the board's clock: one
-- point at a time a run can start only a round trip after the one before ended (its end crosses the link, the
-- next request comes back); pipelined, the next request waits on the board already.
function M.unwaited(recs, rtt_ms)
  local n, last_end = 0, nil
  for _, rec in ipairs(recs) do
    local said = T.read(rec.artifacts.run_dir .. "/runner.stderr")
    local start, stop = said:match("board%-clock start (%d+)"), said:match("board%-clock end (%d+)")
    T.ok(start and stop, "the board's clock in the runner's stderr: " .. said)
    if last_end and (tonumber(start) - last_end) / 1e6 < rtt_ms then n = n + 1 end
    last_end = tonumber(stop)
  end
  return n
end

--- A sweep's points as its records say them, each checked ok: {point, num_executions, n} each, to compare two
-- sweeps of the same points.
function M.points(recs)
  local list = {}
  for i, rec in ipairs(recs) do
    T.ok(rec.ok, rec.error and rec.error.message)
    list[i] = { rec.sweep.point, rec.params.num_executions, rec.result and rec.result.n or rec.n }
  end
  return list
end

--- The check both pipelining tests make of a sweep run one point at a time (one) and the same sweep pipelined
-- (piped), on a link of rtt_ms: the same records, in order; one point at a time every point waited a round trip
-- on the link; pipelined none after the second did (the first starts the board's session alone and the second
-- starts once it is recorded, odp.run.sweep: from the third on, each point's request is queued on the board
-- before the one before it ends). what names the transport in the line printed.
function M.check(one, piped, rtt_ms, what)
  T.eq(M.points(piped), M.points(one), "the same points, in order, with the same parameters")
  local waited_one, waited_piped = M.unwaited(one, rtt_ms), M.unwaited(piped, rtt_ms)
  io.stderr:write(("%s, %d points at RTT %d ms: %d started within a round trip of the one before one at a time, " ..
    "%d pipelined\n"):format(what, #piped, rtt_ms, waited_one, waited_piped))
  T.eq(waited_one, 0, "one point at a time: every point waited a round trip on the link")
  T.eq(waited_piped, #piped - 2, "pipelined: no point after the second waited on the link")
end

return M
