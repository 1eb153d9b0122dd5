--- The cost of one device-state snapshot: odp.target.device_state.gather (ONE shell command reading every file with the
-- shell's own `read`) against reading the same files the usual way, one command per file (`cat FILE`,
-- `getprop`, `dumpsys thermalservice`, `dumpsys battery`: what a script over `adb shell`/`ssh` does), on the
-- recorded Pixel 8 tree (tests/fixtures/device_state/pixel8: 9 CPUs) and on this machine. Locally both pay
-- process creation only; over adb or SSH every command is also a round trip (10-50 ms), so the ratio of
-- commands is the ratio that matters there. Not a test: record the numbers in bench/README.md.
--   build/odp run bench/device_state_bench.lua [N]
local ds = require("odp.target.device_state")
local proc = require("odp.proc")
local sys = require("odp.sys")
local stats = require("odp.core.stats")

local n = tonumber(arg[1]) or 20
local root = require("odp.host").root .. "/tests/fixtures/device_state/pixel8"
local host = require("odp.target.host").new()

-- the files the gather script reads that exist in the tree, and the commands
local function per_file_commands(base)
  local cmds = {}
  local r = assert(proc.run { argv = { "sh", "-c", ds.SCRIPT, "odp-state", base } })
  local raw = ds.parse(r.stdout)
  for path in pairs(raw.values) do cmds[#cmds + 1] = { "cat", base .. path } end
  for path in pairs(raw.files) do cmds[#cmds + 1] = { "cat", base .. path } end
  for name in pairs(raw.commands) do
    cmds[#cmds + 1] = name == "getprop" and { base .. "/bin/getprop" } or { base .. "/bin/dumpsys", name }
  end
  return cmds
end

local function median_ms(fn)
  local xs = {}
  for i = 1, n do
    local t0 = sys.now()
    fn()
    xs[i] = (sys.now() - t0) * 1000
  end
  return stats.percentile(xs, 50)
end

for _, case in ipairs({ { "Pixel 8 tree", root }, { "this machine", "" } }) do
  local name, base = case[1], case[2]
  local cmds = per_file_commands(base)
  local one = median_ms(function() assert(ds.gather(host, { root = base })) end)
  local each = median_ms(function() for _, c in ipairs(cmds) do proc.run { argv = c } end end)
  print(("%-13s gather: 1 command %6.1f ms | one command per item: %3d commands %6.1f ms | %.1fx"):format(
    name, one, #cmds, each, each / one))
end
