--- The oracle of a sampled run's op attribution (issue 29, docs/cpu-profile.md), the one every suite uses (the
-- host's in tests/lua/sample_test.lua, the arm64 twin's in tests/lua/arm64_twin_test.lua): each op's share of
-- Method::execute's time, read straight from the run's ETDump, against the record's sample shares.
--   local oracle = require("sample_oracle")
--   local checked = oracle.check(T, rec.cpu_profile, etdump_path)   -- asserts; returns the ops checked
local etdump = require("odp.parse.etdump")

local M = {}

M.MIN_TIME_SHARE = 0.05 -- ops holding at least this share of execute's ETDump time are checked
M.MAX_POINTS = 0.05     -- ... and their sample share is within this of their time share

--- Each op's share of Method::execute's time from the ETDump's events: {["native_call_mm.out#0"] = 0.35, ...}.
function M.etdump_shares(path)
  local doc = assert(etdump.read(path))
  local per, exec = {}, 0
  for _, run in ipairs(doc.run_data) do
    for _, e in ipairs(run.events) do
      if e.kind == "profile" and e.name == "Method::execute" then exec = exec + (e.end_time - e.start_time)
      elseif e.kind == "profile" and e.name:match("^native_call_") then
        local k = e.name .. "#" .. e.instruction_id
        per[k] = (per[k] or 0) + (e.end_time - e.start_time)
      end
    end
  end
  for k, v in pairs(per) do per[k] = v / exec end
  return per
end

--- What count shares miss where samples come irregularly (the arm64 twin: the kernel throttles the event, the
-- host takes the vCPUs away while the guest's clock runs on): each on-CPU sample weighted by the time since its
-- thread's previous sample, then shared out like the record's counts. For the diagnosis only, never the oracle.
-- run_dir: a sampled run's directory; rec: its record. -> {["native_call_mm.out#0"] = share, ...}, gaps (ms, sorted)
function M.time_weighted(run_dir, rec)
  local sys = require("odp.sys")
  local bytes = assert(sys.read_file(run_dir .. "/" .. rec.artifacts.cpu_profile_samples.file))
  local st = assert(require("odp.sample").read(bytes))
  local doc = assert(etdump.read(run_dir .. "/" .. rec.artifacts.etdump.file))
  local iv = {}
  for _, run in ipairs(doc.run_data) do
    for _, e in ipairs(run.events) do
      if e.kind == "profile" and e.name:match("^native_call_") then
        iv[#iv + 1] = { s = e.start_time, e = e.end_time, k = e.name .. "#" .. e.instruction_id }
      end
    end
  end
  table.sort(iv, function(a, b) return a.s < b.s end)
  local function op_at(t)
    local lo, hi = 1, #iv
    while lo < hi do
      local m = (lo + hi + 1) // 2
      if iv[m].s <= t then lo = m else hi = m - 1 end
    end
    local x = iv[lo]
    return x and t >= x.s and t < x.e and x.k or nil
  end
  local c, off = st:columns(), rec.cpu_profile.clock.offset_ns
  local per, total, prev, gaps = {}, 0, {}, {}
  for i = 1, #c.time do
    local tid, t = c.tid[i], c.time[i]
    local p = prev[tid]
    prev[tid] = t
    local k = c.leaf[i] ~= -2 and p and op_at(t - off)
    if k then
      per[k] = (per[k] or 0) + (t - p)
      total = total + (t - p)
      gaps[#gaps + 1] = (t - p) / 1e6
    end
  end
  for k, v in pairs(per) do per[k] = v / total end
  table.sort(gaps)
  return per, gaps
end

--- Asserts (with T) that every op of cp (a record's cpu_profile) is in the ETDump at etdump_path, and that every
-- op with >= MIN_TIME_SHARE of execute's time there has a sample share within MAX_POINTS of it; prints each, with
-- its time-weighted share from weighted (M.time_weighted's) when given.
-- Returns how many ops were checked.
function M.check(T, cp, etdump_path, label, weighted)
  local want = M.etdump_shares(etdump_path)
  local checked = 0
  for _, op in ipairs(cp.ops) do
    local w = want[op.name .. "#" .. op.instruction_id]
    T.ok(w, "op " .. op.name .. " in the ETDump")
    if w and w >= M.MIN_TIME_SHARE then
      checked = checked + 1
      local tw = weighted and weighted[op.name .. "#" .. op.instruction_id]
      local also = tw and (", time-weighted %.3f"):format(tw) or ""
      print(("# %s%s #%d: samples %.3f, ETDump time %.3f%s, hottest %s"):format(label and (label .. ": ") or "",
        op.name, op.instruction_id, op.share, w, also, op.top[1] and op.top[1].symbol or "-"))
      T.ok(math.abs(op.share - w) <= M.MAX_POINTS,
        ("%s #%d: %.3f vs %.3f%s"):format(op.name, op.instruction_id, op.share, w, also))
    end
  end
  return checked
end

return M
