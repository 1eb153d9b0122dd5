-- Peak RSS is the measured program's own: a static program that touches N MB prints its own VmHWM
-- (/proc/self/status) before exiting; odp's figure for it must be within max(2%, 256 kB) on the host
-- target (odp-rusage -g) and the ssh target (odp-rusage pushed to the loopback sshd "board"). The adb
-- target's check is in tests/adb/flow.lua (it needs the device emulator). And for the real runner, odp's
-- peak_rss_kb never exceeds GNU time -v's figure by more than max(2%, 256 kB).
local T = require("t")
local sshd = require("sshd")
local proc = require("odp.proc")
local json = require("odp.core.json")
local host = require("odp.target.host")

local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")
local touch = build .. "/tests/rss_touch"
local odp = os.getenv("ODP") or (build .. "/odp")
local SIZES_MB = { 0.5, 4, 50, 200 }

-- exec's maxrss_kb for `rss_touch mb` against the program's own VmHWM
local function check(target, program, mb)
  local r = assert(target:exec({ program, tostring(mb) }, { timeout = 60 }))
  T.eq(r.status, 0, "rss_touch status; stderr: " .. r.stderr)
  local own = tonumber(r.stdout:match("VmHWM_kb=(%d+)"))
  T.ok(own and own > mb * 1024, ("VmHWM %s for %s MB"):format(own, mb))
  local got = r.rusage and r.rusage.maxrss_kb
  local tol = math.max(own * 0.02, 256)
  T.ok(got and math.abs(got - own) <= tol, ("%s MB: odp says %s kB, the program's own VmHWM is %d kB (+-%.0f)")
    :format(mb, got, own, tol))
end

T.test("host: peak RSS of 0.5/4/50/200 MB programs is their own VmHWM (odp-rusage)", function()
  local t = host.new()
  T.eq(t:rusage_method(), "odp-rusage")
  for _, mb in ipairs(SIZES_MB) do check(t, touch, mb) end
end)

T.test("host: through odp-rusage the command's status, signal, stderr and timeout are its own", function()
  local t = host.new()
  local r = assert(t:exec({ "sh", "-c", "echo out; echo err >&2; exit 3" }))
  T.eq(r.status, 3); T.eq(r.ok, false); T.eq(r.stdout, "out\n"); T.eq(r.stderr, "err\n")
  r = assert(t:exec({ "sh", "-c", "kill -SEGV $$" }))
  T.eq(r.signal, 11); T.eq(r.signal_name, "SEGV"); T.eq(r.ok, false)
  -- the helper stays in the runner's group, which proc.run kills: nothing is left behind
  local pidfile = T.tmpdir() .. "/pid"
  r = assert(t:exec({ "sh", "-c", "sleep 30 & echo $! > " .. pidfile .. "; wait" }, { timeout = 0.3 }))
  T.eq(r.timed_out, true); T.eq(r.ok, false)
  local alive = assert(proc.run { "kill", "-0", T.read(pidfile):match("%d+") })
  T.ok(alive.status ~= 0, "the command's child was killed with it")
  local none, err, code = t:exec({ "/no/such/program" })
  T.eq(none, nil); T.eq(code, "ENOTFOUND"); T.match(err, "cannot start /no/such/program")
  -- bare exec (rusage = false) says nothing about peak RSS rather than odp's own
  T.eq(assert(t:exec({ "true" }, { rusage = false })).rusage.maxrss_kb, nil)
end)

T.test("ssh: peak RSS of 0.5/4/50/200 MB programs is their own VmHWM (odp-rusage on the board)", function()
  local srv = sshd.start()
  local t = assert(require("odp.target.ssh").new { host = srv.user .. "@127.0.0.1", port = srv.port,
    identity = srv.identity, known_hosts = srv.known_hosts, remote_dir = srv.remote_dir .. "/rss" })
  T.eq(t:rusage_method(), "odp-rusage")
  for _, mb in ipairs(SIZES_MB) do check(t, touch, mb) end
  t:close()
end)

-- The runner's own peak varies by a few % from process to process (4490..4704 kB here, the same for both
-- measurers), so odp's figure and time -v's are each the median of five runs, interleaved. (The highest of five
-- time -v runs as the ceiling failed once in CI: five low ones, 4624 kB, against odp's median 4692.) Before
-- odp-rusage, odp reported at least odp's own peak (~3 MB more). The bound is this file's max(2%, 256 kB): odp's run
-- also writes an ETDump, which the bare time -v run does not (medians 4732 against 4612 kB, 2.6%, in one CI run).
T.with_real_runner("real runner: peak_rss_kb never above GNU time -v's figure + max(2%, 256 kB) (medians of five)",
  function(runner)
  local model = T.root() .. "/tests/fixtures/pte/add_arduino.pte"
  local dir = T.tmpdir()
  local gnu, mine = {}, {}
  for _ = 1, 5 do
    local ref = assert(proc.run { argv = { "/usr/bin/time", "-v", runner, "--model_path", model,
      "--num_executions", "10" }, cwd = dir, timeout = 60 })
    gnu[#gnu + 1] = assert(tonumber(ref.stderr:match("Maximum resident set size %(kbytes%): (%d+)")))
    local r = assert(proc.run { argv = { odp, "run", T.root() .. "/scripts/host.lua", "--runner", runner, "--model",
      model, "-n", "10", "--runs-dir", dir .. "/runs", "--format", "json" }, timeout = 60 })
    T.eq(r.status, 0, r.stderr)
    mine[#mine + 1] = assert(json.decode(r.stdout)).peak_rss_kb
  end
  table.sort(mine)
  table.sort(gnu)
  local median, ref = mine[3], gnu[3]
  T.ok(median <= ref + math.max(ref * 0.02, 256), ("odp %s kB vs time -v %d kB (medians; odp's %s, time -v's %s)"):format(median, ref,
    table.concat(mine, " "), table.concat(gnu, " ")))
  T.ok(median > ref * 0.8, ("odp %s kB is the runner's, not a fraction (time -v %d kB)"):format(median, ref))
end)

T.done()
