--- Where a run's own time goes: a lap clock (docs/architecture.md, "A run's own cost"). Each lap charges the
-- wall time since the previous one (or since the clock's start) to a named part, so the parts never overlap
-- and their sum is the clock's whole. `odp run` starts one at odp's main() (odp.host.started) and hands it to
-- the run; the run's record keeps the parts up to its own write (record.timings), and `-v -v` prints them all
-- after the report.
--   local timings = require("odp.core.timings")
--   local clock = timings.new()          -- from now; timings.new(t0) from another odp.sys.now() time
--   ... clock:lap("options") ...         -- the time since the last lap was spent on the options
--   for _, p in ipairs(clock.parts) do print(p.name, p.ms) end
local sys = require("odp.sys")

local M = {}
local Clock = {}
Clock.__index = Clock

--- A clock started at t0 (an odp.sys.now() time; default now).
---@param t0 number?
function M.new(t0)
  t0 = t0 or sys.now()
  return setmetatable({ t0 = t0, last = t0, parts = {}, within = {} }, Clock)
end

--- Charges the time since the previous lap to part `name` (a part named twice in a row grows), up to now or
--- to `at` (an odp.sys.now() time taken before the clock was made). -> its ms
---@param name string
---@param at number?
---@return number ms
function Clock:lap(name, at)
  local now = at or sys.now()
  local ms = (now - self.last) * 1000
  self.last = now
  local prev = self.parts[#self.parts]
  if prev and prev.name == name then
    prev.ms = prev.ms + ms
  else
    self.parts[#self.parts + 1] = { name = name, ms = ms }
  end
  return ms
end

--- Charges the time since the previous lap to several parts: `parts` ({name, ms} in order, each capped at
--- what is left: the traced steps of a run, whose own clocks said how long each took) and the rest to `rest`.
---@param parts {name: string, ms: number}[]
---@param rest string
function Clock:lap_parts(parts, rest)
  local left = self:lap(rest)
  local tail = table.remove(self.parts)
  for _, p in ipairs(parts) do
    local ms = math.max(0, math.min(p.ms, left))
    left = left - ms
    self.parts[#self.parts + 1] = { name = p.name, ms = ms }
  end
  tail.ms = left
  self.parts[#self.parts + 1] = tail
end

--- Notes that `ms` of the current lap were spent in `name` (a word: a record's key), processes odp waited
--- for (runner_processes: their own wall time, as odp-rusage measured it): shown beside the parts, not one.
---@param name string
---@param ms number
function Clock:inside(name, ms)
  self.within[name] = (self.within[name] or 0) + ms
end

-- down to 0.01 ms: the rounded parts then still add up to no more than the rounded whole
local function round(ms) return math.floor(ms * 100) / 100 end

--- The clock so far as a record keeps it: {parts = {{name, ms}...}, total_ms, inside = {name = ms}} (ms
--- rounded down to 0.01; total_ms from the clock's start to its last lap).
function Clock:snapshot()
  local parts, inside = {}, {}
  for i, p in ipairs(self.parts) do parts[i] = { name = p.name, ms = round(p.ms) } end
  for name, ms in pairs(self.within) do inside[name] = round(ms) end
  return { parts = parts, total_ms = round((self.last - self.t0) * 1000), inside = next(inside) and inside or nil }
end

--- The parts as text lines for the terminal (`-v -v`): each with its ms and share of the whole, then the whole.
function Clock:lines()
  local total = (self.last - self.t0) * 1000
  local out = { "odp's own time, by part (ms, share of the whole):" }
  for _, p in ipairs(self.parts) do
    out[#out + 1] = ("  %-34s %8.2f  %5.1f%%"):format(p.name, p.ms, total > 0 and p.ms * 100 / total or 0)
  end
  out[#out + 1] = ("  %-34s %8.2f"):format("whole", total)
  local names = {}
  for name in pairs(self.within) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    out[#out + 1] = ("  %-34s %8.2f  (waited for, inside the parts above)"):format(name:gsub("_", " "),
      self.within[name])
  end
  return out
end

return M
