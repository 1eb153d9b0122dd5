-- Many boards at once (issue 18), timed as a user types the commands (bench/README.md, "Many boards"):
-- 1. `odp devices --boards LAB` on 100 boards: 40 answer (10 per sshd on 4 loopback sshd), 30 accept the TCP
--    connection and never speak (one socat listener), 30 refuse (a closed port). Goal: done within one
--    --timeout, not the sum of them. Reference: OpenSSH's `ssh` to the same 100, in parallel (xargs -P 100,
--    each under `timeout`), which is what a shell user would write.
-- 2. `odp run scripts/sweep.lua --flow scripts/rpi5.lua --boards LAB ...` on 1, 2 and 4 SSH boards, the runner
--    sleeping WAIT_MS per execution (device time that costs this machine no CPU): wall time against one
--    board's (goal: 4 boards within 1.2x), and odp's own CPU per point (user + sys of the odp process).
-- 3. Two QEMU twins flashed at once against one alone (goal: within 1.3x).
-- BOARDS_ONLY=check|sweep|twins runs one part.
local sshd = require("sshd")
local proc = require("odp.proc")
local sys = require("odp.sys")

local root = os.getenv("ODP_TOP") or "."
local odp = root .. "/build/odp"
local only = os.getenv("BOARDS_ONLY")
local tmp = sshd.sh("mktemp -d /tmp/odp-bench-boards.XXXXXX"):match("%S+")
local servers = {}
for i = 1, 4 do servers[i] = sshd.start() end

local function entry(name, srv, port, extra)
  return ("  { name = %q, device = \"devices/rpi5.lua\", host = %q, port = %d, identity = %q, known_hosts = %q, " ..
    "ssh_config = \"none\", remote_dir = %q%s },\n"):format(name, srv.user .. "@127.0.0.1", port or srv.port,
    srv.identity, srv.known_hosts, srv.remote_dir .. "/" .. name, extra or "")
end
local function write(path, s)
  local f = assert(io.open(path, "w"))
  f:write(s)
  f:close()
  return path
end

-- user + sys seconds of a finished child, from proc.run's rusage
local function cpu(r) return r.rusage.utime_s + r.rusage.stime_s end

local function check_bench()
  local TIMEOUT = tonumber(os.getenv("TIMEOUT") or "10")
  local silent_port = 40000 + sys.getpid() % 20000
  local silent = assert(proc.run { "sh", "-c", ("socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork SYSTEM:'sleep 600' " ..
    ">/dev/null 2>&1 & echo $!"):format(silent_port) })
  local silent_pid = silent.stdout:match("%d+")
  sys.sleep(0.3)
  local refused_port = silent_port + 1 -- nothing listens there (checked below)
  local lines, hosts = {}, {}
  for i = 1, 40 do
    local srv = servers[(i - 1) % 4 + 1]
    lines[#lines + 1] = entry(("ok-%02d"):format(i), srv)
    hosts[#hosts + 1] = { srv.port, srv }
  end
  for i = 1, 30 do
    lines[#lines + 1] = entry(("silent-%02d"):format(i), servers[1], silent_port)
    hosts[#hosts + 1] = { silent_port, servers[1] }
  end
  for i = 1, 30 do
    lines[#lines + 1] = entry(("refused-%02d"):format(i), servers[1], refused_port)
    hosts[#hosts + 1] = { refused_port, servers[1] }
  end
  local lab = write(tmp .. "/lab100.lua", "return { boards = {\n" .. table.concat(lines) .. "} }\n")
  local t0 = sys.now()
  local r = assert(proc.run { odp, "devices", "--boards", lab, "--timeout", tostring(TIMEOUT), timeout = 600 })
  local wall = sys.now() - t0
  local states = {}
  for st in r.stdout:gmatch("\n%S+%s+rpi5%s+(%S+)") do states[st] = (states[st] or 0) + 1 end
  -- OpenSSH, 100 in parallel, each bounded like odp's
  local args = {}
  for _, h in ipairs(hosts) do
    args[#args + 1] = ("%d %s %s %s"):format(h[1], h[2].identity, h[2].known_hosts, h[2].user)
  end
  write(tmp .. "/hosts", table.concat(args, "\n") .. "\n")
  local t1 = sys.now()
  assert(proc.run { "sh", "-c", ("xargs -P 100 -L 1 sh -c 'timeout %d ssh -o BatchMode=yes -o ConnectTimeout=%d " ..
    "-o UserKnownHostsFile=$2 -i $1 -p $0 $3@127.0.0.1 uname -srm >/dev/null 2>&1; true' < %s"):format(TIMEOUT,
    TIMEOUT, tmp .. "/hosts"), timeout = 600 })
  local ref = sys.now() - t1
  proc.run { "kill", silent_pid }
  print(("100-board check, --timeout %g: odp devices --boards %.2f s (exit %d; %s), odp CPU %.2f s; " ..
    "OpenSSH xargs -P 100: %.2f s; odp/timeout = %.2f"):format(TIMEOUT, wall, r.status,
    (function() local t = {} for k, v in pairs(states) do t[#t + 1] = k .. " " .. v end table.sort(t)
      return table.concat(t, ", ") end)(), cpu(r), ref, wall / TIMEOUT))
end

local function sweep_bench()
  local WAIT_MS = tonumber(os.getenv("WAIT_MS") or "1000")
  local POINTS = tonumber(os.getenv("POINTS") or "6")
  local runner = root .. "/build/tests/fake_runner"
  local model = root .. "/tests/fixtures/pte/add_arduino.pte"
  local lines = {}
  for i = 1, 4 do lines[#lines + 1] = entry("pi-" .. i, servers[i], nil, ", tags = { \"pi\" }") end
  local lab = write(tmp .. "/lab4.lua", "return { boards = {\n" .. table.concat(lines) .. "} }\n")
  local function sweep(boards, tag)
    local out = ("%s/%s.jsonl"):format(tmp, tag)
    local t0 = sys.now()
    local r = assert(proc.run { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua",
      "--boards", lab .. ":" .. boards, "--runner", runner, "--model", model, "--runs-dir", tmp .. "/runs",
      "-p", "num_executions=1", "--repeat", tostring(POINTS), "--out", out, "-q", "--",
      "--fake_wait_us=" .. (WAIT_MS * 1000), timeout = 900 })
    local wall = sys.now() - t0
    local n = 0
    for _ in io.lines(out) do n = n + 1 end
    if r.status ~= 0 then io.stderr:write(r.stderr) end
    return wall, cpu(r), n, r.status
  end
  local w1, c1, n1 = sweep("pi-1", "one")
  local w2, c2, n2 = sweep("pi-1,pi-2", "two")
  local w4, c4, n4 = sweep("pi-1,pi-2,pi-3,pi-4", "four")
  print(("sweep of %d points, runner %d ms/point: 1 board %.2f s (%d records, odp CPU %.1f ms/point); " ..
    "2 boards %.2f s = %.2fx (%d, %.1f ms/point); 4 boards %.2f s = %.2fx (%d, %.1f ms/point)"):format(POINTS, WAIT_MS,
    w1, n1, c1 / n1 * 1000, w2, w2 / w1, n2, c2 / n2 * 1000, w4, w4 / w1, n4, c4 / n4 * 1000))
end

-- 3. Two QEMU twins flashed at once (a 2 MB XMODEM transfer each) against one twin alone, from one odp
--    process (`boards:each`, what `odp repl --boards` and the scheduler do), best of 3.
local function twins_bench()
  local lab_mod, boards_mod = require("odp.target.lab"), require("odp.run.boards")
  local function twin(name)
    return ("  { name = %q, device = \"devices/twin_m55.lua\", twin_state = %q, build_dir = %q, runs_dir = %q },\n")
      :format(name, tmp .. "/" .. name, tmp .. "/twin-build", tmp .. "/runs")
  end
  local lab = write(tmp .. "/twins.lua", "return { boards = {\n" .. twin("twin-a") .. twin("twin-b") .. "} }\n")
  local boards = boards_mod.open(lab_mod.load(lab).boards, require("odp.core.ui").new { quiet = true })
  assert(boards["twin-a"]:attach())
  assert(boards["twin-b"]:attach())
  local payload = write(tmp .. "/payload.bin", ("bench-twin "):rep(190000))
  local one, both = math.huge, math.huge
  for _ = 1, 3 do
    local t0 = sys.now()
    assert(boards["twin-a"]:flash(payload).crc32)
    one = math.min(one, sys.now() - t0)
    t0 = sys.now()
    local res = boards:each(function(b) return b:flash(payload) end)
    assert(res["twin-a"].crc32 and res["twin-b"].crc32, "both flashed")
    both = math.min(both, sys.now() - t0)
  end
  boards:close()
  print(("2 twins flashed at once: one twin %.2f s, both %.2f s = %.2fx"):format(one, both, both / one))
end

local ok, err = pcall(function()
  if only == nil or only == "check" then check_bench() end
  if only == nil or only == "sweep" then sweep_bench() end
  if only == nil or only == "twins" then twins_bench() end
end)
for _, s in ipairs(servers) do s:close() end
sshd.sh("rm -rf " .. sshd.quote(tmp))
if not ok then error(err, 0) end
