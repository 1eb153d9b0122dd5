-- `odp repl DEVICE` as a person uses it, in tmux: the board connected on first use, its verbs, Tab, Ctrl-C
-- during a call (the board stays usable), a result record printed as the report. Against the loopback sshd
-- (with the real runner), the QEMU twin and the adb device emulator.
local T = require("t")
local sshd = require("sshd")
local adbemu = require("adbemu") -- the adb device emulator (tests/adbemu) on a TCP port
local proc = require("odp.proc")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local tmp = T.tmpdir()
local sock, sessions = nil, 0
local q = sshd.quote

local function tmux(...)
  return assert(proc.run { argv = { "tmux", "-S", sock, ... }, timeout = 10 })
end
local function screen() return tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "odp").stdout end
local function wait_for(pattern, timeout)
  local deadline = sys.now() + (timeout or 10)
  repeat
    local s = screen()
    if s:find(pattern) then return s end
    sys.sleep(0.1)
  until sys.now() > deadline
  error(("%q not on the screen within %ss:\n%s"):format(pattern, timeout or 10, screen()), 0)
end
local function send(...) tmux("send-keys", "-t", "odp", ...) end
local function line(s) send("-l", s) send("Enter") end
local function start(args)
  sessions = sessions + 1
  sock = ("%s/tmux%d.sock"):format(tmp, sessions) -- a server per session: no race with the last one's end
  -- a test that fails before its stop() must not leave the terminal, the REPL and its board running
  local this = sock
  T.at_done(function() proc.run { argv = { "tmux", "-S", this, "kill-server" }, timeout = 10 } end)
  tmux("-f", "/dev/null", "new-session", "-d", "-s", "odp", "-x", "160", "-y", "50",
    ("HOME=%s %s repl %s; echo REPL-EXITED $?; sleep 60"):format(q(tmp), q(odp), args))
  wait_for("odp> ", 20)
end
local function stop() proc.run { argv = { "tmux", "-S", sock, "kill-server" }, timeout = 10 } end
local function prompts() return select(2, screen():gsub("odp> ", "")) end
-- Waits until a process with marker in its arguments runs: the exec typed into the REPL reached the board.
local function wait_running(marker)
  local deadline = sys.now() + 20
  repeat
    local r = proc.run { "sh", "-c", "ps -eo args | grep -F " .. marker .. " | grep -v grep", timeout = 10 }
    if r.stdout ~= "" then return end
    sys.sleep(0.05)
  until sys.now() > deadline
  error(marker .. " never ran on the board:\n" .. screen(), 0)
end

local srv = sshd.start()
local rdir = srv.remote_dir .. "/repl"
local ssh_args = ("devices/rpi5.lua --host %s@127.0.0.1 --port %d --identity %s --known-hosts %s --remote-dir %s")
  :format(srv.user, srv.port, q(srv.identity), q(srv.known_hosts), q(rdir))

T.test("ssh: exec, push, Tab completes verbs, Ctrl-C during a long exec, the board still usable", function()
  start(ssh_args)
  line('board:exec("echo hi-$((40+2))").stdout')
  wait_for('"hi%-42\\n"')
  T.write(tmp .. "/f", "payload")
  line(('board:exec("mkdir -p %s"); return board:push(%q, %q)'):format(rdir, tmp .. "/f", rdir .. "/f"))
  wait_for("skipped = false")
  T.eq(T.read(rdir .. "/f"), "payload")
  send("board:pro", "Tab")
  wait_for("odp> board:profile")
  send("C-u")
  local marker = "odp_repl_sleep_" .. sys.getpid()
  line(('board:exec("sleep 300; : %s")'):format(marker))
  wait_running(marker)
  local before = prompts()
  send("C-c")
  local deadline = sys.now() + 20
  while prompts() <= before and sys.now() < deadline do sys.sleep(0.1) end
  T.ok(prompts() > before, "back at the prompt:\n" .. screen())
  T.match(screen(), "%[interrupted in [%d.]+ s%]")
  -- the remote command is gone, and the same board answers
  local left = proc.run { "sh", "-c", "ps -eo args | grep " .. marker .. " | grep -v grep || true" }.stdout
  T.eq(left, "", "the remote sleep was killed")
  line('board:exec("echo still-$((1+1))").stdout')
  wait_for('"still%-2\\n"')
  stop()
end)

T.test("ssh: board:exec at the prompt shows its output as it arrives, then one status line", function()
  start(ssh_args)
  line('board:exec("echo first-$((1+1)); sleep 3; echo second-$((2+2))")')
  wait_for("first%-2")
  T.eq(screen():find("second-4", 1, true), nil, "the first line is shown before the command ends")
  local s = wait_for("%[exit 0 in [%d.]+ s%]")
  T.match(s, "second%-4")
  T.eq(s:find("stdout =", 1, true), nil, "a status line, not the result table")
  line('return board:exec("echo x").stdout') -- the fields are all still there
  wait_for('"x\\n"')
  stop()
end)

T.test("odp repl --boards: boards:exec runs on every board at once, output under each name; boards[name] is a Board", function()
  local lab = tmp .. "/lab.lua"
  local entry = '{ name = %q, device = "devices/rpi5.lua", host = "%s@127.0.0.1", port = %d, identity = %q, ' ..
    'known_hosts = %q, ssh_config = "none", remote_dir = %q }'
  T.write(lab, ("return { boards = { %s, %s } }\n"):format(
    entry:format("lab-a", srv.user, srv.port, srv.identity, srv.known_hosts, rdir .. "/a"),
    entry:format("lab-b", srv.user, srv.port, srv.identity, srv.known_hosts, rdir .. "/b")))
  start("--boards " .. q(lab))
  line('boards:exec("true")') -- connected, so that the next call's wall time is the commands'
  wait_for("== lab%-b\n%[exit 0", 30)
  line('t0 = odp.sys.now(); r = boards:exec("sleep 2; echo on-$((6*7))"); wall = odp.sys.now() - t0; return r')
  local s = wait_for("== lab%-b\non%-42\n%[exit 0", 30)
  T.match(s, "== lab%-a\non%-42\n%[exit 0")
  line("return wall < 3.5") -- one after the other: 4 s
  wait_for("\ntrue\n")
  line('boards["lab-b"]')
  wait_for("Board%(rpi5, ssh")
  stop()
end)

T.with_real_runner("ssh: board:profile with the real runner prints the report", function(runner)
  start(ssh_args)
  line(('board:profile{runner = %q, model = %q, n = 3, runs_dir = %q}'):format(runner,
    root .. "/tests/fixtures/pte/add_arduino.pte", tmp .. "/runs"))
  local s = wait_for("latency", 120)
  T.match(s, "rpi5")
  T.eq(s:find("schema =", 1, true), nil, "the report, not the table")
  stop()
end)

T.test("ssh: a board whose host refuses fails at the first call, one line, the prompt stays", function()
  start(ssh_args:gsub("%-%-port %d+", "--port 1"))
  line('board:exec("true")')
  wait_for("ENODEV: cannot connect to 127%.0%.0%.1 port 1", 30)
  line("1+1")
  wait_for("\n2\n")
  stop()
end)

srv:stop()

T.test("twin: attach, read32 of the RTT ID, reset, tail + Ctrl-C, flash with the twin's CRC, Ctrl-C during a flash, exit stops QEMU", function()
  local state = tmp .. "/twin"
  start(("devices/twin_m55.lua --twin-state %s --build-dir %s --runs-dir %s"):format(q(state), q(tmp .. "/b"),
    q(tmp .. "/runs")))
  local before = prompts()
  line("rtt = board:attach()")
  local deadline = sys.now() + 180
  while prompts() <= before and sys.now() < deadline do sys.sleep(0.2) end
  T.ok(prompts() > before, "attached:\n" .. screen())
  line("('%x'):format(board:read32(0x60000000))")
  wait_for('"47474553"') -- "SEGG", the RTT control block's ID
  line("board:reset()")
  wait_for("\ntrue\n")
  line("board:tail()")
  wait_for("odp%-twin done", 60)
  before = prompts()
  send("C-c")
  deadline = sys.now() + 10
  while prompts() <= before and sys.now() < deadline do sys.sleep(0.1) end
  T.ok(prompts() > before, "tail ended by Ctrl-C:\n" .. screen())
  T.write(tmp .. "/payload.bin", ("repl-flash "):rep(500))
  line(('r = board:flash(%q); return r.bytes, r.crc32 == r.expected_crc32, r.crc32'):format(tmp .. "/payload.bin"))
  local s = wait_for("\n%d+%s+true%s+\"%x+\"\n", 120) -- tmux shows the tabs as spaces
  local bytes, crc = s:match("\n(%d+)%s+true%s+\"(%x+)\"\n")
  bytes = tonumber(bytes)
  local data = T.read(tmp .. "/payload.bin")
  T.eq(crc, ("%08x"):format(sys.crc32(data .. ("\26"):rep(bytes - #data))))
  -- Ctrl-C during a flash (in the XMODEM transfer): one line, the prompt back, the board still flashes
  T.write(tmp .. "/big.bin", ("big-flash "):rep(400000))
  line(("board:flash(%q)"):format(tmp .. "/big.bin"))
  wait_for("xmodem big%.bin", 120)
  sys.sleep(0.5)
  before = prompts()
  send("C-c")
  deadline = sys.now() + 20
  while prompts() <= before and sys.now() < deadline do sys.sleep(0.1) end
  T.ok(prompts() > before, "the flash ended by Ctrl-C:\n" .. screen())
  local out = screen():match('board:flash%("[^"]*big%.bin"%)\n(.-)odp> ') or ""
  local said = {}
  for l in out:gmatch("[^\n]+") do if not l:match("^flash: app%-") then said[#said + 1] = l end end
  T.eq(#said, 1, "one line after the setools commands:\n" .. out)
  T.match(said[1] or "", "interrupted")
  T.ok(not out:find("traceback") and not out:find("%.lua:%d+"), "no traceback:\n" .. out)
  line(('r = board:flash(%q); return r.bytes, r.crc32 == r.expected_crc32'):format(tmp .. "/payload.bin"))
  wait_for("\n" .. bytes .. "%s+true\n.-odp> ", 120)
  line("board:write(0x10, 'x')")
  wait_for("EIO: twin_m55: board:write%(0x00000010, 1 bytes%): ")
  -- a bad address is one line (was the C binding's traceback); a hung reset names the board and the operation
  line("board:read32(-1)")
  wait_for("\nEUSAGE: board:read32: the address must be an integer 0..0xFFFFFFFF %(a 32%-bit target%), not %-1\nodp> ")
  local qemu = T.read(state .. "/pid"):match("%d+")
  proc.run { argv = { "kill", "-STOP", qemu }, timeout = 5 }
  line("board:reset()")
  local ok, hung = pcall(wait_for, "\nETIMEDOUT: twin_m55: reset %(halting the core%): [^\n]*\nodp> ", 60)
  proc.run { argv = { "kill", "-CONT", qemu }, timeout = 5 }
  T.ok(ok, tostring(hung))
  T.ok(not screen():find("stack traceback"), "no traceback:\n" .. screen())
  send("C-d")
  wait_for("REPL%-EXITED 0", 30)
  T.eq(sys.stat(state .. "/pid"), nil, "QEMU stopped when the REPL ended")
  stop()
end)

T.test("adb: exec, push, Ctrl-C during a long exec, then the device closed: waited for, one error, the prompt stays", function()
  local dev = adbemu.start()
  local sbx = dev.root
  start(("devices/vivo_x300_pro.lua --adb tcp:%s --reconnect-timeout 2"):format(dev.serial))
  line('board:exec("echo adb-$((3*3))").stdout')
  wait_for('"adb%-9\\n"', 20)
  T.write(tmp .. "/g", "to the phone")
  line(('board:exec("mkdir -p /data/local/tmp/odp"); return board:push(%q, "/data/local/tmp/odp/g")'):format(tmp .. "/g"))
  wait_for("skipped = false", 20)
  T.eq(T.read(sbx .. "/data/local/tmp/odp/g"), "to the phone")
  local adb_marker = "odp_repl_adb_sleep_" .. sys.getpid()
  line(('board:exec("sleep 300; : %s")'):format(adb_marker))
  wait_running(adb_marker)
  local before = prompts()
  send("C-c")
  local deadline = sys.now() + 20
  while prompts() <= before and sys.now() < deadline do sys.sleep(0.1) end
  T.ok(prompts() > before, "back at the prompt:\n" .. screen())
  line('board:exec("echo again").stdout')
  wait_for('"again\\n"', 20)
  dev:crash()
  line('board:exec("true")')
  -- the device is waited for --reconnect-timeout, then given up with the cause
  wait_for("\nECONNLOST: [^\n]*not back after 2 s[^\n]*\nodp> ", 30)
  line("6*7")
  wait_for("\n42\n")
  stop()
end)

T.test("a second Ctrl-C at an empty prompt leaves", function()
  start("devices/host.lua")
  send("C-c")
  wait_for("Ctrl%-C again")
  send("C-c")
  wait_for("REPL%-EXITED 0")
  stop()
end)

T.done()
