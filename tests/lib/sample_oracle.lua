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

--- Asserts (with T) that every op of cp (a record's cpu_profile) is in the ETDump at etdump_path, and that every
-- op with >= MIN_TIME_SHARE of execute's time there has a sample share within MAX_POINTS of it; prints each.
-- Returns how many ops were checked.
function M.check(T, cp, etdump_path, label)
  local want = M.etdump_shares(etdump_path)
  local checked = 0
  for _, op in ipairs(cp.ops) do
    local w = want[op.name .. "#" .. op.instruction_id]
    T.ok(w, "op " .. op.name .. " in the ETDump")
    if w and w >= M.MIN_TIME_SHARE then
      checked = checked + 1
      print(("# %s%s #%d: samples %.3f, ETDump time %.3f, hottest %s"):format(label and (label .. ": ") or "", op.name,
        op.instruction_id, op.share, w, op.top[1] and op.top[1].symbol or "-"))
      T.ok(math.abs(op.share - w) <= M.MAX_POINTS, ("%s #%d: %.3f vs %.3f"):format(op.name, op.instruction_id, op.share, w))
    end
  end
  return checked
end

return M
