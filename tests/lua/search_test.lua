-- One project-path resolver, one precedence (docs/SCRIPTING.md, "Finding files"): a path a user names, and a
-- path inside a device file (the Ethos-U plan's source_dir and SETOOLS dir, the twin's launch script), is
-- found as given (absolute; relative to the current directory), else in ODP_PATH's directories, else in odp's
-- own tree: odp.core.search.find. Before, the plan looked in odp's tree before the current directory (and never
-- in ODP_PATH), and the twin's scripts only in odp's tree: the cases below marked so failed there.
local T = require("t")
local proc = require("odp.proc")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local tmp = T.tmpdir()
local here, mine = tmp .. "/here", tmp .. "/mine"
for _, d in ipairs { here .. "/devices", here .. "/bin", mine .. "/devices", mine .. "/bin" } do assert(sys.mkdir_p(d)) end
T.write(here .. "/devices/host.lua", "return {}\n")   -- shadows odp's devices/host.lua from the current directory
T.write(mine .. "/devices/rpi5.lua", "return {}\n")   -- shadows odp's devices/rpi5.lua from ODP_PATH
T.write(mine .. "/devices/host.lua", "return {}\n")   -- loses to the current directory's
for dir, who in pairs { [here] = "here", [mine] = "mine" } do
  T.write(dir .. "/bin/launch.sh", ('#!/bin/sh\necho %s > "$2.launched"\n'):format(who))
  assert(proc.run { "chmod", "+x", dir .. "/bin/launch.sh" }.ok)
end
-- what each resolver says, from a script run in `here` with ODP_PATH=mine; the twin's launch script started
-- the plan's: the source_dir of twin_m55.lua's copy naming p (a dry run of its validate step)
local twin_device = T.read(root .. "/devices/twin_m55.lua")
T.write(here .. "/resolve.lua", ([[
local search = require("odp.core.search")
local plan = require("odp.flows.ethos_u.plan")
local sys = require("odp.sys")
local twin_device = %q
for i, p in ipairs { "devices/host.lua", "devices/rpi5.lua", "scripts/host.lua", "nowhere.txt", "/abs/none" } do
  local file = ("dev%%d.lua"):format(i)
  assert(sys.write_file(file, (twin_device:gsub('source_dir = "tests/twin"', ("source_dir = %%q"):format(p)))))
  print(p, search.find(p), plan.make { device = file, dry_run = true, only = { "validate" } }.source_dir)
end
]]):format(twin_device) .. [[
if arg[1] then require("odp.target.twin").launch({ launch = "bin/launch.sh" }, "image.elf", arg[1]) end
return 0
]])

local function resolve(state)
  local r = assert(proc.run { odp, "run", "resolve.lua", state or nil, cwd = here, env = { ODP_PATH = mine }, timeout = 60 })
  T.eq(r.status, 0, r.stderr)
  local got = {}
  for p, a, b in r.stdout:gmatch("([^\t\n]+)\t([^\t\n]+)\t([^\t\n]+)\n") do got[p] = { a, b } end
  return got
end

T.test("one precedence: as given (the current directory), ODP_PATH, odp's tree; the plan's paths the same", function()
  local got = resolve()
  T.eq(got["devices/host.lua"], { "devices/host.lua", "devices/host.lua" }, "the current directory first (the plan's was odp's tree)")
  T.eq(got["devices/rpi5.lua"], { mine .. "/devices/rpi5.lua", mine .. "/devices/rpi5.lua" }, "ODP_PATH before odp's tree")
  T.eq(got["scripts/host.lua"], { root .. "/scripts/host.lua", root .. "/scripts/host.lua" }, "then odp's tree")
  T.eq(got["nowhere.txt"], { "nowhere.txt", "nowhere.txt" }, "found nowhere: as given, for the caller's error")
  T.eq(got["/abs/none"], { "/abs/none", "/abs/none" })
end)

T.test("the twin's launch script: the current directory's, else ODP_PATH's (it was odp's tree only)", function()
  resolve(tmp .. "/s2")
  T.eq(T.read(tmp .. "/s2.launched"), "here\n")
  assert(os.remove(here .. "/bin/launch.sh"))
  resolve(tmp .. "/s3")
  T.eq(T.read(tmp .. "/s3.launched"), "mine\n")
end)

T.done()
