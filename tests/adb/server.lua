-- odp through Google's adb server (Debian's adb) to the adb device emulator. Run by test_adb_server.sh:
-- ANDROID_ADB_SERVER_PORT (the server, started, holding the emulator), ADBEMU_PORT/ADBEMU_ROOT (the emulated
-- device and its sandbox), ADBEMU (the emulator program), ADBTEST_WORK (a scratch directory; *.pid files in it
-- are killed at the end). The server is killed by the last tests.
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local sys = require("odp.sys")
local adb = require("odp.adb")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local fake = build .. "/tests/fake_runner"
local android_runner = root .. "/tests/adb/android_runner.sh"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local etd = root .. "/tests/fixtures/etdump/add_n10.etdump"
local sbx = assert(os.getenv("ADBEMU_ROOT"))
local serial = "127.0.0.1:" .. assert(os.getenv("ADBEMU_PORT"))
local server_port = tonumber(assert(os.getenv("ANDROID_ADB_SERVER_PORT")))
local emu = assert(os.getenv("ADBEMU"))
local work = assert(os.getenv("ADBTEST_WORK"))
local dir = T.tmpdir()

local function sh(cmd) return os.execute(cmd) end
local function adb_cli(args) -- Debian's adb against the same server
  local r = assert(proc.run { argv = { "sh", "-c", "timeout 20 adb " .. args .. " 2>&1" }, timeout = 30 })
  return r.stdout
end
local function state_of(s)
  for line in adb_cli("devices"):gmatch("[^\n]+") do
    local a, st = line:match("^(%S+)%s+(%S+)")
    if a == s then return st end
  end
end
local function wait_state(s, want)
  for _ = 1, 100 do
    if state_of(s) == want then return true end
    proc.run { argv = { "sleep", "0.1" } }
  end
  return false
end

-- Another emulated device (its own sandbox), `adb connect`ed to the server: its serial.
local function start_emu(name, args)
  local d = work .. "/" .. name
  sh(("mkdir -p '%s/root' && rm -f '%s/port'"):format(d, d))
  sh(("'%s' --root '%s/root' --port 0 --port-file '%s/port' %s >/dev/null 2>'%s/log' & echo $! >'%s/../%s.pid'")
    :format(emu, d, d, args or "", d, d, name))
  for _ = 1, 100 do
    local f = io.open(d .. "/port")
    local port = f and f:read("a")
    if f then f:close() end
    if port and port:match("%d") then return "127.0.0.1:" .. port:match("%d+") end
    proc.run { argv = { "sleep", "0.05" } }
  end
  error("emulator " .. name .. " did not start")
end
-- A listener that is not an adb server (socat): reply = what it says to every connection (nil: silent); then it
-- keeps the connection open until odp closes it (a close would race with odp's request).
local function listener(name, port, reply)
  local file = ("%s/%s.reply"):format(work, name)
  local f = assert(io.open(file, "wb"))
  f:write(reply or "")
  f:close()
  local what = ("SYSTEM:'cat %s; exec cat >/dev/null'"):format(file)
  sh(("setsid socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork %s >/dev/null 2>&1 & echo $! >'%s/%s.pid'")
    :format(port, what, work, name))
  for _ = 1, 100 do -- listening once ss shows the port
    if sh(("ss -ltn 2>/dev/null | grep -q '127.0.0.1:%d '"):format(port)) then return end
    proc.run { argv = { "sleep", "0.05" } }
  end
end

local function odp_run(args, env, timeout)
  local argv = { odp, "run", root .. "/scripts/x300pro.lua", "--runs-dir", dir .. "/runs" }
  table.move(args, 1, #args, #argv + 1, argv)
  return assert(proc.run { argv = argv, cwd = dir, env = env, timeout = timeout or 120 })
end
local function one_line_error(r)
  local lines = {}
  for l in r.stderr:gmatch("[^\n]+") do if l:match("^odp") or l:match("rror") then lines[#lines + 1] = l end end
  return #lines == 1, r.stderr
end

-- the device side of the flow: the test runner program and the ETDump it copies
sh(("mkdir -p '%s/data/local/tmp/bin' '%s/data/local/tmp/fixtures' && cp '%s' '%s/data/local/tmp/bin/' && cp '%s' '%s/data/local/tmp/fixtures/'")
  :format(sbx, sbx, fake, sbx, etd, sbx))

T.test("the server runs and lists the emulated device", function()
  T.eq(state_of(serial), "device")
end)

T.test("odp.adb through the server: shell v2 (exit status, stderr apart, stdin), push, stat, pull", function()
  local dev = assert(adb.connect {}) -- auto: the server answers, so it is used
  local info = dev:info()
  T.eq(info.transport, "server")
  T.eq(info.serial, serial)
  T.eq(info.server, "tcp:localhost:" .. server_port)
  T.eq(info.server_version, 41, "Debian's adb 29 speaks host protocol version 41")
  T.eq(info.model, "X300_Pro_Emu")
  T.ok(info.features.shell_v2, "features from host-serial:SERIAL:features")
  local r = assert(dev:shell("echo o; echo e >&2; exit 7"))
  T.eq({ r.status, r.stdout, r.stderr, r.separate_stderr }, { 7, "o\n", "e\n", true })
  T.eq(assert(dev:shell("cat", { stdin = "over the server\n" })).stdout, "over the server\n")
  local big = dir .. "/3mb"
  sh(("head -c 3000000 /dev/urandom >'%s'"):format(big))
  T.ok(dev:push(big, "/data/local/tmp/srv/3mb", { mode = 0640 }))
  T.eq(sys.sha256_file(sbx .. "/data/local/tmp/srv/3mb"), sys.sha256_file(big), "pushed bytes")
  local st = assert(dev:stat("/data/local/tmp/srv/3mb"))
  T.eq({ st.type, st.size, st.mode }, { "file", 3000000, 0640 })
  T.ok(dev:pull("/data/local/tmp/srv/3mb", dir .. "/3mb.back"))
  T.eq(sys.sha256_file(dir .. "/3mb.back"), sys.sha256_file(big), "pulled bytes")
  local nf, err, code = dev:pull("/data/local/tmp/none", dir .. "/none")
  T.eq({ nf, code }, { nil, "ENOTFOUND" }, err)
  T.eq(dev:broken(), false)
  dev:close()
end)

T.test("x300pro flow through the server: push, shell v2 with exit status, logcat, ETDump pulled", function()
  local r = odp_run { "--runner", android_runner, "--model", add, "-n", "10", "--etdump", dir .. "/p.etdump",
    "--format", "json" }
  T.eq(r.status, 0, "exit code; stderr: " .. r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq(rec.ok, true)
  T.eq(rec.target, "adb://" .. serial)
  T.eq(rec.latency_ms.source, "log")
  T.eq(rec.latency_ms.n, 10)
  T.eq(rec.outputs[1].values, { 2, 2, 2 })
  T.eq(T.read(dir .. "/p.etdump"), T.read(etd), "ETDump pulled")
  -- staged by its sha256 (docs/devices.md "A shared board")
  T.eq(sys.sha256_file(sbx .. "/data/local/tmp/odp/.odp/blobs/" .. sys.sha256_file(add)), sys.sha256_file(add),
    "model on the device")
  T.eq(state_of(serial), "device", "the server still serves `adb devices` afterwards")
  T.match(adb_cli("-s " .. serial .. " shell echo still-here"), "still%-here")
end)

T.with_real_runner("x300pro flow through the server with the real executor_runner (its log on stderr)", function(runner)
  local r = odp_run { "--runner", runner, "--model", add, "-n", "5", "--etdump", dir .. "/real.etdump",
    "--format", "json", "--adb", "server", "--serial", serial }
  T.eq(r.status, 0, "exit code; stderr: " .. r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq(rec.ok, true)
  T.eq(rec.latency_ms.n, 5)
  T.eq(rec.outputs[1].values, { 2, 2, 2 })
  local f = assert(io.open(dir .. "/real.etdump", "rb"))
  T.ok(#f:read("a") > 0, "the real runner's ETDump pulled through the server")
  f:close()
  T.eq(sys.sha256_file(sbx .. "/data/local/tmp/odp/.odp/blobs/" .. sys.sha256_file(runner)), sys.sha256_file(runner),
    "runner pushed")
end)

T.with_real_runner("the runner's ELF machine against the device's: the aarch64 runner refused on the x86_64 device (exit 3, " ..
  "naming both), measured with --allow-emulated and recorded as emulated", function(runner64)
  T.binfmt_aarch64() -- the kernel would run it through qemu-user (flag F: usable in the emulator's chroot)
  local name = runner64:match("[^/]+$")
  local args = { "--runner", runner64, "--model", add, "-n", "2", "--adb", "server", "--serial", serial,
    "--format", "json" }
  local r = odp_run(args)
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "runner [^\n]*" .. name:gsub("%p", "%%%0") .. " is built for aarch64, adb://" .. serial:gsub("%p", "%%%0")
    .. " is x86_64; it would run under qemu%-user emulation %(binfmt_misc qemu%-aarch64: [^)]+%); pass " ..
    "%-%-allow%-emulated")
  T.ok(one_line_error(r))
  T.eq(sys.stat(sbx .. "/data/local/tmp/odp/.odp/blobs/" .. sys.sha256_file(runner64)), nil,
    "refused before anything was uploaded")
  table.insert(args, "--allow-emulated")
  r = odp_run(args)
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq({ rec.ok, rec.emulated }, { true, "qemu-user" })
  T.eq(rec.outputs[1].values, { 2, 2, 2 })
end, "aarch64")

T.with_real_runner("the x86_64 runner on the x86_64 device passes the machine check, not emulated", function(runner)
  local r = odp_run { "--runner", runner, "--model", add, "-n", "2", "--adb", "server", "--serial", serial,
    "--format", "json" }
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq({ rec.ok, rec.emulated }, { true, nil })
end)

T.test("odp devices lists the server's devices and says a run goes through the server", function()
  local r = assert(proc.run { argv = { odp, "devices", "--json" }, timeout = 60 })
  T.eq(r.status, 0, r.stderr)
  local found
  for _, d in ipairs(assert(json.decode(r.stdout)).devices) do
    if d.kind == "adb" and d.id == serial then found = d end
  end
  T.ok(found, "listed: " .. r.stdout)
  T.eq({ found.transport, found.state, found.description }, { "server", "device", "X300_Pro_Emu" })
  T.match(found.hint, "odp run scripts/x300pro%.lua")
  local human = assert(proc.run { argv = { odp, "devices" }, timeout = 60 }).stdout
  T.match(human, "adb server at localhost:" .. server_port)
  T.match(human, "runs use the adb server")
end)

T.test("an unknown --serial or ANDROID_SERIAL: one line naming the devices there, exit 3", function()
  local r = odp_run { "--runner", fake, "--model", add, "--serial", "nope" }
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "has no device nope; it has " .. serial:gsub("%.", "%%.") .. " %(device%)")
  T.ok(one_line_error(r))
  r = odp_run({ "--runner", fake, "--model", add }, { ANDROID_SERIAL = "nope2" })
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "no device nope2")
  r = odp_run({ "--runner", android_runner, "--model", add, "-n", "1", "--serial", serial }, { ANDROID_SERIAL = "nope3" })
  T.eq(r.status, 0, "--serial wins over ANDROID_SERIAL: " .. r.stderr)
end)

-- a second device: one that refuses the shell service
local second = start_emu("second", "--refuse shell --model Second")
adb_cli("connect " .. second)

T.test("several devices: the list and --serial", function()
  T.ok(wait_state(second, "device"), "second device connected")
  local r = odp_run { "--runner", fake, "--model", add }
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "several devices at the adb server")
  T.match(r.stderr, serial:gsub("%.", "%%.") .. " %(device%)")
  T.match(r.stderr, second:gsub("%.", "%%.") .. " %(device%)")
  T.match(r.stderr, "%-%-serial")
  T.ok(one_line_error(r))
  local dev = assert(adb.connect { serial = second })
  T.eq(dev:info().model, "Second")
end)

T.test("FAIL replies: a refused service, a device gone between two requests", function()
  local dev = assert(adb.connect { serial = second })
  local ok, err, code = dev:shell("true")
  T.eq({ ok, code }, { nil, "ENOTFOUND" }, err)
  T.match(err, "refused the service 'shell")
  adb_cli("disconnect " .. second)
  ok, err, code = dev:stat("/")
  T.eq({ ok, code }, { nil, "ENODEV" }, err)
  T.match(err, "device '" .. second:gsub("%.", "%%.") .. "' not found")
end)

T.test("an unauthorized device: odp says what to do and gives up after --auth-timeout, exit 3", function()
  local never = start_emu("never", "--auth never")
  adb_cli("connect " .. never)
  T.ok(wait_state(never, "unauthorized"), "the server shows it unauthorized")
  local t0 = sys.now and sys.now() or os.time()
  local r = odp_run { "--runner", fake, "--model", add, "--serial", never, "--auth-timeout", "1" }
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "accept the USB debugging prompt on the phone")
  T.match(r.stderr, "unauthorized: unlock the phone")
  adb_cli("disconnect " .. never)
  T.ok((sys.now and sys.now() or os.time()) - t0 < 30)
end)

T.test("a device authorized while odp waits (the user taps Allow): the run goes on", function()
  local tap = work .. "/later.tap" -- the user taps Allow: the emulator accepts the key once this file exists
  local later = start_emu("later", "--auth accept-on:" .. tap)
  adb_cli("connect " .. later)
  local prompted = 0
  local tapped_before
  local dev, err = adb.connect { serial = later, auth_timeout = 30, on_auth_prompt = function()
    prompted = prompted + 1
    tapped_before = io.open(tap) ~= nil
    os.execute(("(sleep 0.5; touch '%s') >/dev/null 2>&1 &"):format(tap)) -- the user taps a moment later
  end }
  T.eq(tapped_before, false, "the prompt comes before the tap")
  T.ok(io.open(tap), "authorized only once the user tapped Allow")
  T.ok(dev, err)
  T.eq(prompted, 1, "the prompt event once")
  T.eq(assert(dev:shell("echo allowed")).stdout, "allowed\n")
  adb_cli("disconnect " .. later)
end)

T.test("an offline device (adbd silent): one line, exit 3", function()
  local port = server_port + 3
  listener("silent-device", port, nil)
  local s = "127.0.0.1:" .. port
  adb_cli("connect " .. s) -- returns when timeout(1) gives up; the server keeps trying
  T.ok(wait_state(s, "offline"), "the server shows it offline")
  local r = odp_run { "--runner", fake, "--model", add, "--serial", s }
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "is offline")
  T.ok(one_line_error(r))
  adb_cli("disconnect " .. s)
end)

-- Listeners that are not Google's adb server. A server speaking another host protocol version cannot be made
-- from the real one: socat answers host:version with 31 (0x001f) where odp needs 32.
T.test("a port where something else listens, a silent one, another protocol version: exit 3, no hang", function()
  local cases = {
    { "http", server_port + 4, "HTTP/1.0 400 Bad Request\r\n\r\n", "is not an adb server %(it answered 'HTTP'" },
    { "silent", server_port + 5, nil, "gave no adb server reply in time" },
    { "oldversion", server_port + 6, "OKAY0004001f", "speaks host protocol version 31; odp needs 32" },
    { "notversion", server_port + 7, "OKAY0002ok", "answered host:version with 'ok'" },
  }
  for _, c in ipairs(cases) do
    listener(c[1], c[2], c[3])
    for _, how in ipairs { "auto", "server" } do
      local r = odp_run({ "--runner", fake, "--model", add, "--adb", how }, { ANDROID_ADB_SERVER_PORT = tostring(c[2]) }, 60)
      T.eq(r.status, 3, c[1] .. " " .. how .. ": " .. r.stderr)
      T.match(r.stderr, c[4])
      T.ok(r.wall_s < 20, c[1] .. ": answered within the probe time, not hung")
      T.ok(one_line_error(r))
    end
  end
  local r = odp_run({ "--runner", fake, "--model", add }, { ADB_SERVER_SOCKET = "tcp:127.0.0.1:" .. (server_port + 6) })
  T.match(r.stderr, "version 31", "ADB_SERVER_SOCKET names the server")
  r = odp_run({ "--runner", fake, "--model", add }, { ADB_SERVER_SOCKET = "localfilesystem:/tmp/x" })
  T.eq(r.status, 3)
  T.match(r.stderr, "odp understands tcp:PORT and tcp:HOST:PORT")
end)

T.test("Ctrl-C through the server: exit 130, the command killed on the device, the server serves on", function()
  -- the runner as the device runs it, through its link in odp's own directory there (docs/devices.md "A shared
  -- board"); [r]: the pattern must not match the shell running pgrep, nor odp's own command line
  local marker = "[.]odp/runs/[^ ]*/fake_runne[r] .*fake_mode=hang_tree"
  local argv = { odp, "run", root .. "/scripts/x300pro.lua", "--runs-dir", dir .. "/runs", "--runner", fake,
    "--model", add, "--format", "json", "--", "--fake_mode=hang_tree" }
  local cmd = ("exec %s & p=$!; for i in $(seq 400); do pgrep -f '%s' >/dev/null && break; sleep 0.05; done; " ..
    "kill -INT $p; wait $p; echo \"exit=$?\" >&2"):format(table.concat(argv, " "), marker)
  local r = assert(proc.run { "sh", "-c", cmd, timeout = 60 })
  T.match(r.stderr, "exit=130")
  T.eq(assert(json.decode(r.stdout)).error.code, "ECANCELED")
  local left = true
  for _ = 1, 100 do
    if not sh(("pgrep -f '%s' >/dev/null"):format(marker)) then left = false break end
    proc.run { argv = { "sleep", "0.05" } }
  end
  T.ok(not left, "the runner was killed on the device")
  T.eq(state_of(serial), "device", "the server still serves the device")
end)

T.test("the server killed mid-run: waited for --reconnect-timeout, then one error naming it, exit 3, nothing left running", function()
  -- kill the server once the runner runs on the device (the test runner program hangs until killed)
  -- the runner as the device runs it, through its link in odp's own directory there (docs/devices.md "A shared
  -- board"); [r]: the pattern must not match the shell running pgrep, nor odp's own command line
  local marker = "[.]odp/runs/[^ ]*/fake_runne[r] .*fake_mode=hang_tree"
  sh(("(for i in $(seq 400); do pgrep -f '%s' >/dev/null && break; sleep 0.05; done; " ..
    "sleep 0.3; pkill -f 'adb -L tcp:%d fork-serve[r]') >/dev/null 2>&1 &"):format(marker, server_port))
  local r = odp_run({ "--runner", fake, "--model", add, "--timeout", "60", "--reconnect-timeout", "2", "--",
    "--fake_mode=hang_tree" }, nil, 90)
  T.eq(r.status, 3, "exit 3; stderr: " .. r.stderr)
  T.ok(r.wall_s < 45, "no hang")
  T.match(r.stderr, "waiting up to 2 s for it to come back")
  local errors = 0
  for _ in (r.stdout .. r.stderr):gmatch("error%s+[^\n]*adb server at [^\n]* is gone") do errors = errors + 1 end
  T.eq(errors, 1, "one error line: " .. r.stdout .. r.stderr)
  local left = true
  for _ = 1, 100 do
    if not sh(("pgrep -f '%s' >/dev/null"):format(marker)) then left = false break end
    proc.run { argv = { "sleep", "0.05" } }
  end
  T.ok(not left, "the runner was killed on the device: " ..
    assert(proc.run { argv = { "sh", "-c", "ps -eo pid,pgid,ppid,stat,cmd | grep fake_runne[r]" } }).stdout)
  T.ok(not sh(("pgrep -f 'tcp:%d fork-serve[r]' >/dev/null"):format(server_port)), "the server is gone")
  T.ok(not sh("pgrep -f 'x300pro.lu[a] --runs-dir " .. dir .. "' >/dev/null"), "no odp left")
end)

T.test("no server: --adb server says so; auto talks to USB directly; tcp: direct works", function()
  local r = odp_run { "--runner", fake, "--model", add, "--adb", "server" }
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "no adb server at localhost:" .. server_port)
  r = odp_run { "--runner", fake, "--model", add }
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "USB") -- the direct path: no adb device on this machine's USB
  r = odp_run { "--runner", android_runner, "--model", add, "-n", "2", "--adb", "tcp:" .. serial, "--format", "json" }
  T.eq(r.status, 0, "direct TCP once the server let go of the emulator: " .. r.stderr)
end)
T.done()
