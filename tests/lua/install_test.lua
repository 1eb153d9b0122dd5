-- An installed odp (issue 28): `make install PREFIX=<temp>` and the installed binary run from another
-- directory, with no source tree in sight, finds scripts/host.lua and the shipped devices through its search
-- path (the current directory, ODP_PATH's, PREFIX/share/odp: odp.core.search), and an ODP_PATH directory is
-- searched before odp's own tree. Before, an installed odp could not find scripts/host.lua from elsewhere.
local T = require("t")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sys = require("odp.sys")

local root = T.root()
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local fake = build .. "/tests/fake_runner"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local tmp = T.tmpdir()
local prefix, elsewhere = tmp .. "/prefix", tmp .. "/elsewhere"
assert(sys.mkdir_p(elsewhere))

-- make in the project with the flags of the build this suite tests (tests/run.sh's ODP_BUILD and
-- ODP_MAKEFLAGS: `make asan`'s build must not be rebuilt with other flags)
local function make(...)
  local args = { ... }
  for i, a in ipairs(args) do args[i] = require("odp.target.shell").quote(a) end
  return assert(proc.run { "sh", "-c", 'eval "make -s -C \"$TOP\" ${ODP_MAKEFLAGS:-} BUILD=\"$BUILD\" $0"', table.concat(args, " "),
    env = { TOP = root, BUILD = build }, timeout = 600 })
end
local inst = make("install", "PREFIX=" .. prefix)
local odp = prefix .. "/bin/odp"
-- no ODP_PATH of the test harness's: the installed tree alone
local function installed(args, env)
  local argv = { odp }
  table.move(args, 1, #args, 2, argv)
  return assert(proc.run { argv = argv, cwd = elsewhere, env = env or { ODP_PATH = false }, timeout = 120 })
end

T.test("make install PREFIX=<temp> installs the binary, scripts, devices and the Lua library", function()
  T.eq(inst.status, 0, inst.stderr)
  for _, f in ipairs { "bin/odp", "share/odp/scripts/host.lua", "share/odp/devices/rpi5.lua", "share/odp/lua/odp/core/search.lua" } do
    T.ok(sys.stat(prefix .. "/" .. f), f)
  end
end)

T.test("from another directory: odp run scripts/host.lua runs (the installed tree's script), devices resolve", function()
  local r = installed { "run", "scripts/host.lua", "--runner", fake, "--model", add, "-n", "2", "--runs-dir", elsewhere .. "/runs",
    "--no-history", "--format", "json" }
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq({ rec.ok, rec.latency_ms.n }, { true, 2 })
  r = installed { "run", "scripts/rpi5.lua", "--help" }
  T.eq(r.status, 0, r.stderr)
  -- a device file named as the docs name it (devices/rpi5.lua), loaded by a script of the user's own
  T.write(elsewhere .. "/dev.lua", 'local d = require("odp.target.device").load("devices/rpi5.lua") print(d.name) return 0\n')
  r = installed { "run", "dev.lua" }
  T.eq(r.status, 0, r.stderr); T.eq(r.stdout, "rpi5\n")
end)

T.test("ODP_PATH: its directories are searched first; a name found nowhere is exit 2 naming where odp looked", function()
  local mine = tmp .. "/mine"
  assert(sys.mkdir_p(mine .. "/scripts"))
  T.write(mine .. "/scripts/host.lua", 'print("my host.lua") return 0\n')
  local r = installed({ "run", "scripts/host.lua" }, { ODP_PATH = mine })
  T.eq(r.status, 0, r.stderr); T.eq(r.stdout, "my host.lua\n")
  T.write(mine .. "/scripts/only_mine.lua", 'print("only mine") return 0\n')
  T.eq(installed({ "run", "scripts/only_mine.lua" }, { ODP_PATH = mine }).stdout, "only mine\n")
  r = installed { "run", "scripts/none.lua" }
  T.eq(r.status, 2)
  T.eq(r.stderr, ("odp: cannot read script 'scripts/none.lua' (looked in the current directory, %s/share/odp)\n")
    :format(sys.realpath(prefix)))
end)

T.test("the aarch64 helper: its cross compiler is a build dependency; a build without it says so", function()
  local group, listed = nil, {}
  for line in io.lines(root .. "/vendor/packages.txt") do
    group = line:match("^%[(.-)%]$") or group
    if group == "build" and line:match("^[%w%.%-+]+$") then listed[line] = true end
  end
  T.ok(listed["gcc-aarch64-linux-gnu"] and listed["libc6-dev-arm64-cross"], "in [build]: `make deps` and `make demo` install them")
  local r = make("helpers", "AARCH64_CC=odp-no-such-gcc")
  T.eq(r.status, 0, r.stderr)
  T.match(r.stderr, "odp: note: no odp%-no%-such%-gcc %(Debian's gcc%-aarch64%-linux%-gnu: make deps%), so no aarch64 odp%-rusage helper")
  r = make("helpers")
  if sys.stat("/usr/bin/aarch64-linux-gnu-gcc") then
    T.eq(r.stderr, "", "with the cross compiler: no note")
    T.ok(sys.stat(build .. "/odp-rusage-aarch64"), "and the helper")
  end
end)

T.done()
