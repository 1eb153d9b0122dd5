-- odp.run.board: one Board per device on every transport. The host board, the loopback sshd board (a real
-- OpenSSH server) and the QEMU twin (probe board), with the real ExecuTorch runner where one is needed.
local T = require("t")
local sshd = require("sshd")
local board = require("odp.run.board")
local sys = require("odp.sys")
local proc = require("odp.proc")

local root = T.root()
local tmp = T.tmpdir()
local model = root .. "/tests/fixtures/pte/add_arduino.pte"
local quiet = require("odp.core.ui").new { quiet = true }

local function failure(fn)
  local ok, e = pcall(fn)
  T.eq(ok, false, "raises")
  T.eq(type(e), "table", "a structured failure: " .. tostring(e))
  return e
end

T.test("host board: exec (argv or string), push/pull hash-skipped, info, help, ENOTSUP", function()
  local b <close> = board.open("devices/host.lua", { ui = quiet })
  T.eq(b:exec({ "sh", "-c", "echo $((6*7))" }).stdout, "42\n")
  local r = b:exec("echo out; echo err >&2; exit 3")
  T.eq({ r.status, r.stdout, r.stderr }, { 3, "out\n", "err\n" })
  T.write(tmp .. "/a", "hello")
  T.eq(b:push(tmp .. "/a", tmp .. "/b").skipped, false)
  T.eq(b:push(tmp .. "/a", tmp .. "/b").skipped, true)
  T.eq(b:pull(tmp .. "/b", tmp .. "/c"), true)
  T.eq(T.read(tmp .. "/c"), "hello")
  local info = b:info()
  T.eq(info.transport, "host")
  T.eq(info.arch, proc.run { "uname", "-m" }.stdout:match("%S+"))
  T.ok(info.cpus and info.cpus >= 1, "cpus")
  local help = tostring(b:help())
  T.match(help, "exec"); T.eq(help:find("read32", 1, true), nil, "no probe verbs on a host board")
  T.eq(help:find("flash", 1, true), nil, "no Ethos-U flow verbs on a host board")
  local e = failure(function() b:read32(0x60000000) end)
  T.eq(e.code, "ENOTSUP"); T.match(e.message, "host has no read32")
end)

T.test("a device table works too; a bad one is one usage error", function()
  local b = board.open({ name = "mine", transport = "host", flow = "executorch" })
  T.eq(b:exec("true").status, 0)
  b:close()
  local e = failure(function() board.open({ name = "x", transport = "serial", flow = "executorch" }) end)
  T.eq(e.exit, 2); T.match(e.message, "transport")
end)

T.with_real_runner("host board: profile runs the executorch flow -> a result record", function(runner)
  local b <close> = board.open("devices/host.lua", { ui = quiet })
  local rec = b:profile { runner = runner, model = model, n = 3, runs_dir = tmp .. "/runs" }
  T.eq(rec.ok, true, rec.error and rec.error.message)
  T.eq(rec.flow, "executorch"); T.eq(rec.device, "host")
  T.eq(rec.latency_ms.n, 3)
  T.eq(rec.latency_ms.modelled, nil, "a measurement")
  T.eq(require("odp.results.report").formats.human({ rec }):find("MODELLED", 1, true), nil)
  -- the same option defaults as odp run (--counters basic)
  T.ok(rec.counters and rec.counters.total and rec.counters.total.task_clock_ms, "counters as with odp run")
end)

T.test("Alif E8 board without MLEK/SETOOLS paths: info works, attach without J-Link software is one line", function()
  local b <close> = board.open("devices/alif_e8.lua", { ui = quiet, jlink_lib = tmp .. "/no-libjlinkarm.so" })
  local info = b:info()
  T.eq(info.backend, "jlink"); T.eq(info.rtt.ranges[1][1], 0x20000000)
  local e = failure(function() b:attach() end)
  T.ok(e.code == "ENOTFOUND" or e.code == "ENODEV", e.code); T.eq(e.exit, 3); T.eq(e.message:find("\n"), nil)
end)

local srv = sshd.start()
local function ssh_opts()
  return { host = srv.user .. "@127.0.0.1", port = srv.port, identity = srv.identity,
    known_hosts = srv.known_hosts, remote_dir = srv.remote_dir .. "/board", ui = quiet }
end

T.test("ssh board: connects on first use, exec, push, info, one session for all calls", function()
  local b <close> = board.open("devices/rpi5.lua", ssh_opts())
  T.eq(b._target, nil, "not connected before the first call")
  T.eq(b:exec({ "echo", "a b" }).stdout, "a b\n")
  local t = b._target
  T.write(tmp .. "/blob", ("x"):rep(100000))
  b:exec({ "mkdir", "-p", srv.remote_dir .. "/board" })
  T.eq(b:push(tmp .. "/blob", srv.remote_dir .. "/board/blob").skipped, false)
  T.eq(b:push(tmp .. "/blob", srv.remote_dir .. "/board/blob").skipped, true)
  T.eq(sys.sha256_file(srv.remote_dir .. "/board/blob"), sys.sha256_file(tmp .. "/blob"))
  T.match(b:info().uri, "^ssh://")
  T.ok(rawequal(b._target, t), "the same session")
  T.eq(failure(function() b:reset() end).code, "ENOTSUP")
end)

T.test("ssh board: a wrong host fails on first use with one line, exit 3", function()
  local o = ssh_opts()
  o.port = 1
  local b = board.open("devices/rpi5.lua", o)
  local e = failure(function() b:exec("true") end)
  T.eq(e.exit, 3); T.eq(e.message:find("\n"), nil)
  b:close()
end)

T.with_real_runner("ssh board: profile with the real runner, ETDump pulled", function(runner)
  local b <close> = board.open("devices/rpi5.lua", ssh_opts())
  local rec = b:profile { runner = runner, model = model, n = 2, etdump = tmp .. "/p.etdump", runs_dir = tmp .. "/runs" }
  T.eq(rec.ok, true, rec.error and rec.error.message)
  T.eq(rec.device, "rpi5"); T.eq(rec.latency_ms.n, 2)
  T.ok(sys.stat(tmp .. "/p.etdump"), "ETDump pulled")
end)

srv:stop()

-- The twin: the board builds the twin firmware (skipped when unchanged) and starts QEMU on first use.
local twin_state = tmp .. "/twin"
T.test("twin board: attach, read32 of the RTT ID, reset, tail, flash with the twin's CRC, close stops QEMU", function()
  local b <close> = board.open("devices/twin_m55.lua", { ui = quiet, twin_state = twin_state,
    build_dir = tmp .. "/build-twin", runs_dir = tmp .. "/runs" })
  local rtt = b:attach()
  T.ok(rtt, "attached")
  T.eq(b:read32(0x60000000), string.unpack("<I4", "SEGG"), "RTT block ID")
  T.eq(b:read(0x60000000, 10), "SEGGER RTT")
  T.ok(sys.stat(twin_state .. "/pid"), "QEMU running")
  b:reset()
  local n = b:tail(0, { timeout = 3 })
  T.ok(n >= 1, "tail printed the boot lines")
  local e = failure(function() b:read(0x10, 4) end)
  T.eq(e.exit, 3); T.eq(e.code, "EIO")
  local e2 = failure(function() b:exec("true") end)
  T.eq(e2.code, "ENOTSUP")
  local f = tmp .. "/payload.bin"
  T.write(f, ("odp-board-flash "):rep(300))
  T.match(tostring(b:help()), "\n  flash +flash%(file%)", "the flow's verbs in the twin board's help")
  local before = {}
  for _, n in ipairs(sys.readdir(tmp .. "/runs") or {}) do before[n] = true end
  local got = b:flash(f)
  T.eq(got.crc32, got.expected_crc32)
  T.eq(got.crc32, ("%08x"):format(sys.crc32(T.read(f) .. ("\26"):rep(got.bytes - #T.read(f)))))
  -- the flash is a run (odp.run.point): its own run directory under runs_dir with its record and flash.log
  local new = {}
  for _, n in ipairs(sys.readdir(tmp .. "/runs") or {}) do
    if not before[n] and sys.stat(tmp .. "/runs/" .. n .. "/result.json") then new[#new + 1] = n end
  end
  T.eq(#new, 1, "one new run directory")
  local rec = require("odp.core.json").decode(T.read(tmp .. "/runs/" .. new[1] .. "/result.json"))
  T.eq({ rec.ok, rec.params.steps, rec.flash.received.crc32, rec.artifacts.flash_log.file }, { true, "flash", got.crc32, "flash.log" })
  b:close()
  T.eq(sys.stat(twin_state .. "/pid"), nil, "close stopped the twin")
end)

T.test("twin board: profile runs the Ethos-U flow on the board; the record and report say the times are modelled", function()
  local b <close> = board.open("devices/twin_m55.lua", { ui = quiet, twin_state = twin_state,
    build_dir = tmp .. "/build-twin", runs_dir = tmp .. "/runs" })
  local rec = b:profile { n = 3 }
  T.eq(rec.ok, true, rec.error and rec.error.message)
  T.eq(rec.flow, "ethos_u"); T.eq(rec.latency_ms.n, 3)
  T.eq(rec.latency_ms.modelled, true)
  require("rttlog").check(rec) -- every latency and PMU value is the one the firmware printed in rtt.log
  T.match(require("odp.results.report").formats.human({ rec }), "MODELLED, not measured")
  T.eq(b:read(0x60000000, 10), "SEGGER RTT", "the board is usable after the flow")
  b:close()
  T.eq(sys.stat(twin_state .. "/pid"), nil, "close stopped the twin")
end)

T.done()
