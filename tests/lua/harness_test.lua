-- tests/run.sh itself: it reads each suite's stdout as one TAP stream and refuses a suite that is missing,
-- silent, unplanned, short of its plan or misnumbered; "# rig" checks are counted apart; tests/lib/tap.sh
-- renumbers a shell suite's Lua parts into its own stream. Run against small suites written here.
local T = require("t")
local proc = require("odp.proc")

local root = T.root()
local dir = T.tmpdir()

local suites = {
  silent = "exit 0",
  unplanned = "echo 'ok 1 - a'",
  short = "echo '1..3'; echo 'ok 1 - a'",
  misnumbered = "echo 'ok 1 - a'; echo 'ok 3 - b'; echo '1..2'",
  stderr = "echo 'ok 1 - a'; echo 'ok 2 - from a child, on stderr' >&2; echo 'ok 3 - another' >&2; echo '1..1'",
  rig = "echo 'ok 1 - the emulator answers # rig'; echo 'ok 2 - odp does'; echo 'ok 3 - later # SKIP no runner'; echo '1..3'",
  crashed = "echo 'ok 1 - a'; echo '1..1'; exit 3",
  -- a shell suite with a Lua part (a stand-in printing TAP as t.lua does) through tests/lib/tap.sh
  child = (". %s/tests/lib/tap.sh\ntap_ok first\ntap_run sh -c \"echo 'ok 1 - c1'; echo 'ok 2 - c2'; echo '1..2'\"\n" ..
    "tap_run sh -c \"echo 'ok 1 - d1'; echo '1..2'\"\ntap_done"):format(root),
}
local paths = {}
for name, body in pairs(suites) do
  paths[name] = ("%s/test_%s.sh"):format(dir, name)
  T.write(paths[name], body .. "\n")
end

local argv = { root .. "/tests/run.sh" }
for _, name in ipairs { "silent", "unplanned", "short", "misnumbered", "stderr", "rig", "crashed", "child" } do
  argv[#argv + 1] = paths[name]
end
argv[#argv + 1] = dir .. "/test_missing.sh"
argv.env = { ODP_SKIP_DEPS = "1" }
argv.timeout = 600
local r = assert(proc.run(argv))
local lines = {}
for l in r.stdout:gmatch("[^\n]+") do lines[#lines + 1] = l end

-- the per-suite line of a suite: passed, failed, skipped, rig
local function counts(name)
  for _, l in ipairs(lines) do
    local p, f, k, g = l:match("^%S*test_" .. name .. "%.sh%s+(%d+) passed%s+(%d+) failed%s+(%d+) skipped%s+(%d+) rig checks")
    if p then return { tonumber(p), tonumber(f), tonumber(k), tonumber(g) } end
  end
end
local function log_path(name)
  return ("%s/tests/.tmp/logs/%s.log"):format(root, (paths[name] or (dir .. "/test_" .. name .. ".sh")):gsub("/", "_"))
end
local function log(name) return T.read(log_path(name)) end

T.test("a suite that prints nothing fails", function()
  T.eq(counts("silent"), { 0, 1, 0, 0 }); T.match(log("silent"), "printed no TAP")
end)

T.test("a suite without a plan, or short of its plan, fails", function()
  T.eq(counts("unplanned"), { 1, 1, 0, 0 }); T.match(log("unplanned"), "printed no plan")
  T.eq(counts("short"), { 1, 1, 0, 0 }); T.match(log("short"), "planned 3 tests and ran 1")
end)

T.test("tests numbered out of order fail", function()
  T.eq(counts("misnumbered"), { 2, 1, 0, 0 }); T.match(log("misnumbered"), "test 2 is numbered 3")
end)

T.test("only the suite's stdout counts: ok lines on stderr are not its tests", function()
  T.eq(counts("stderr"), { 1, 0, 0, 0 })
end)

T.test("rig checks and skips are counted apart from the tests of odp", function()
  T.eq(counts("rig"), { 1, 0, 1, 1 })
end)

T.test("a suite that exits non-zero after passing tests fails", function()
  T.eq(counts("crashed"), { 1, 1, 0, 0 }); T.match(log("crashed"), "exited with status 3")
end)

T.test("tap.sh: a Lua part's tests are renumbered into the suite's; a part short of its plan fails", function()
  T.eq(counts("child"), { 4, 1, 0, 0 })
  T.match(log("child"), "ok 1 %- first\nok 2 %- c1\nok 3 %- c2\nok 4 %- d1\nnot ok 5 %- sh .- planned 2 tests and ran 1\n1%.%.5\n")
end)

T.test("a suite named but missing fails", function()
  T.eq(counts("missing"), { 0, 1, 0, 0 }); T.match(log("missing"), "does not exist")
end)

T.test("the closing line is N passed, N failed, N skipped, alone; rig checks on the line before; exit 1", function()
  T.eq(lines[#lines], "11 passed, 7 failed, 1 skipped")
  T.eq(lines[#lines - 1], "1 rig checks (the test rigs checking themselves; not counted below)")
  T.eq(r.status, 1)
end)

for _, name in ipairs { "silent", "unplanned", "short", "misnumbered", "stderr", "rig", "crashed", "child", "missing" } do
  os.remove(log_path(name)); os.remove(log_path(name) .. ".stderr")
end
T.test("a suite that starts an sshd and never stops it leaves no listener and no key directory", function()
  local suite = dir .. "/leaky_test.lua"
  T.write(suite, 'local T = require("t")\nlocal srv = require("sshd").start()\n' ..
    'print("# " .. srv.pid .. " " .. srv.dir)\nT.test("starts", function() T.ok(srv:alive()) end)\nT.done()\n')
  local r = proc.run { os.getenv("ODP") or (root .. "/build/odp"), "run", suite, timeout = 60 }
  T.eq(r.status, 0, r.stderr)
  local pid, sdir = r.stdout:match("# (%d+) (%S+)")
  T.ok(pid and sdir:match("^/tmp/odp%-sshd%."), r.stdout)
  -- gone, or a zombie not yet reaped (odp, a child subreaper, may have inherited it): not running
  local stat = require("odp.sys").read_file("/proc/" .. pid .. "/stat")
  T.ok(not stat or stat:match("^%d+ %b() Z"), "sshd " .. pid .. " is stopped: " .. tostring(stat))
  T.eq(require("odp.sys").stat(sdir), nil, sdir .. " is removed")
end)

T.test("a suite that fails outside any test, with an sshd and a temp dir: both go as it exits", function()
  local suite = dir .. "/broken_test.lua"
  T.write(suite, 'local T = require("t")\nlocal srv = require("sshd").start()\nlocal d = T.tmpdir()\n' ..
    'print("# " .. srv.pid .. " " .. srv.dir .. " " .. d)\nio.stdout:flush()\nerror("the suite breaks here")\n')
  local r = proc.run { os.getenv("ODP") or (root .. "/build/odp"), "run", suite, timeout = 60 }
  T.ok(r.status ~= 0, "it fails")
  T.match(r.stderr, "the suite breaks here")
  local pid, sdir, tdir = r.stdout:match("# (%d+) (%S+) (%S+)")
  T.ok(pid, r.stdout)
  local stat = require("odp.sys").read_file("/proc/" .. pid .. "/stat")
  T.ok(not stat or stat:match("^%d+ %b() Z"), "sshd " .. pid .. " is stopped: " .. tostring(stat))
  T.eq(require("odp.sys").stat(sdir), nil, sdir .. " is removed")
  T.eq(require("odp.sys").stat(tdir), nil, tdir .. " is removed")
end)

T.done()
