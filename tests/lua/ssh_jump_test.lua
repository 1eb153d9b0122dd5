-- ProxyJump and ProxyCommand against real sshds. The target ("board") listens on 127.0.0.1 inside a network
-- namespace of its own, where only hosts inside that namespace can reach it; the jump host "bastion" listens
-- on the namespace's veth address, reachable from here. A second jump host "gate" on this machine's loopback
-- makes a two-hop chain (gate -> bastion -> board); the sshd logs show who was logged in to on the way.
local T = require("t")
local sshd = require("sshd")
local proc = require("odp.proc")
local sys = require("odp.sys")
local target_ssh = require("odp.target.ssh")

local tmp = T.tmpdir()
local q = sshd.quote
local id = sys.getpid() % 250
local ns, veth = "odpjump" .. sys.getpid(), "odpj" .. sys.getpid()
local host_ip, ns_ip = ("10.231.%d.1"):format(id), ("10.231.%d.2"):format(id)
sshd.sh(table.concat({
  "ip netns add " .. ns,
  ("ip link add %sh type veth peer name %sn"):format(veth, veth),
  ("ip link set %sn netns %s"):format(veth, ns),
  ("ip addr add %s/30 dev %sh && ip link set %sh up"):format(host_ip, veth, veth),
  ("ip netns exec %s sh -c 'ip addr add %s/30 dev %sn && ip link set %sn up && ip link set lo up'"):format(ns, ns_ip,
    veth, veth),
}, " && "))

local servers = {}
local function finish()
  for _, s in ipairs(servers) do s:stop() end
  proc.run { "ip", "netns", "del", ns }
end
local started, why = pcall(function()
  servers[1] = sshd.start { netns = ns }
  servers[2] = sshd.start { netns = ns, listen = ns_ip }
  servers[3] = sshd.start()
  servers[4] = sshd.start { config = { "PermitOpen none" } } -- a jump host that forwards nothing
end)
if not started then finish(); error(why, 0) end -- the namespace never outlives the test
local board, bastion, gate, closed = table.unpack(servers)

-- One config for all of it; keys and known_hosts of each server.
local function host_block(name, srv, extra)
  return table.concat({ "Host " .. name, "  HostName " .. srv.host, "  Port " .. srv.port, "  User " .. srv.user,
    "  IdentityFile " .. srv.identity, "  IdentitiesOnly yes", "  UserKnownHostsFile " .. srv.known_hosts,
    extra or "", "" }, "\n")
end
local cfg = tmp .. "/config"
T.write(cfg, table.concat({
  host_block("board", board, "  ProxyJump bastion"),
  host_block("board2", board, "  ProxyJump gate,bastion"),
  host_block("board-w", board, "  ProxyCommand ssh -F " .. cfg .. " -W %h:%p bastion"),
  host_block("board-socat", board, ("  ProxyCommand ip netns exec %s socat - TCP:%%h:%%p"):format(ns)),
  host_block("board-dies", board, "  ProxyCommand sh -c 'echo no route to the lab >&2; exit 7'"),
  host_block("board-closed", board, "  ProxyJump closed"),
  host_block("board-silent", board, "  ProxyJump bastion-silent"),
  host_block("bastion", bastion),
  host_block("bastion-silent", bastion, "  ServerAliveInterval 1\n  ServerAliveCountMax 2"),
  host_block("gate", gate),
  host_block("closed", closed),
  "Host loop-a\n  ProxyJump loop-b\nHost loop-b\n  ProxyJump loop-a\n",
  "Host direct\n  HostName 127.0.0.1\n  Port " .. board.port .. "\n",
}, "\n"))

-- Logins a server has accepted so far.
local function logins(srv) return select(2, T.read(srv.log):gsub("Accepted publickey", "")) end

local function open(alias) return target_ssh.new { host = alias, ssh_config = cfg, remote_dir = board.remote_dir } end

T.test("the board is not reachable directly: only through the namespace", function()
  local t, err = target_ssh.new { host = "direct", ssh_config = cfg, timeout = 5 }
  T.eq(t, nil); T.match(err, "cannot connect to 127%.0%.0%.1 port " .. board.port)
end)

T.test("ProxyJump: the board through the bastion's direct-tcpip channel", function()
  local before = logins(bastion)
  local t = assert(open("board"))
  T.eq(logins(bastion), before + 1, "logged in to the bastion")
  T.eq(t.uri, ("ssh://%s@127.0.0.1:%d"):format(board.user, board.port))
  T.eq(t:run("echo via; echo $SSH_CONNECTION"):match("^via\n(%S+)"), "127.0.0.1", "the board sees the bastion")
  -- a transfer through the tunnel, both ways, byte-exact
  local f = tmp .. "/blob"
  sshd.sh("head -c 3000000 /dev/urandom > " .. f)
  T.ok(t:push(f, board.remote_dir .. "/blob")); T.ok(t:pull(board.remote_dir .. "/blob", f .. ".back"))
  T.eq(sys.sha256_file(f .. ".back"), sys.sha256_file(f))
  t:close()
end)

T.test("two hops: gate, then bastion, then the board", function()
  local g, b = logins(gate), logins(bastion)
  local t = assert(open("board2"))
  T.eq(t:run("echo two"), "two\n")
  T.eq({ logins(gate), logins(bastion) }, { g + 1, b + 1 }, "logged in to gate and bastion")
  t:close()
end)

T.test("ProxyCommand with OpenSSH's ssh -W and with socat; closing the session ends the command", function()
  local pattern = ("-W 127.0.0.1:%d bastion|socat - TCP:127.0.0.1:%d"):format(board.port, board.port)
  for _, alias in ipairs({ "board-w", "board-socat" }) do
    local t = assert(open(alias))
    T.eq(t:run("echo " .. alias), alias .. "\n", alias)
    T.ok(proc.run { "pgrep", "-f", "--", pattern }.stdout ~= "", "the ProxyCommand runs while the session is open")
    t:close()
  end
  T.eq(proc.run { "pgrep", "-f", "--", pattern }.stdout, "", "no ProxyCommand left running")
end)

T.test("a ProxyCommand that exits at once: its status and stderr in one line", function()
  local t, err, code = open("board-dies")
  T.eq(t, nil); T.eq(code, "EIO")
  T.match(err, "ProxyCommand `sh %-c 'echo no route to the lab >&2; exit 7'` exited with status 7 before the SSH " ..
    "handshake: no route to the lab$")
end)

T.test("a jump host that refuses forwarding, and a ProxyJump loop", function()
  local _, err, code = open("board-closed")
  T.eq(code, "ENODEV"); T.match(err, "jump host .* cannot reach 127%.0%.0%.1 port " .. board.port)
  _, err, code = target_ssh.new { host = "loop-a", ssh_config = cfg }
  T.eq(code, "ENODEV"); T.match(err, "ProxyJump loop: loop%-a %-> loop%-b %-> loop%-a")
end)

T.test("a jump host that goes silent is detected within ServerAliveInterval x CountMax", function()
  local t = assert(open("board-silent"))
  -- time spent elsewhere (not waiting on the connection) is not silence
  sys.sleep(3)
  T.eq(t:run("echo still"), "still\n")
  -- freeze the bastion's session processes: the TCP connection stays up, nothing answers
  local pids = sshd.sh(("pgrep -P %d"):format(bastion.pid)):gsub("%s+", " ")
  sshd.sh("kill -STOP " .. pids)
  local t0 = sys.now()
  local r, err = t.session:exec("sleep 30", { timeout = 60 })
  local took = sys.now() - t0
  sshd.sh("kill -CONT " .. pids)
  T.eq(r, nil); T.match(err, "no answer for %d s %(ServerAliveInterval 1 x ServerAliveCountMax 2%)")
  T.ok(took >= 1.9 and took < 10, ("detected after %.1f s"):format(took))
  t:close()
end)

T.test("Ctrl-C while the jump host hangs the handshake: exit 130 at once", function()
  sshd.sh("kill -STOP " .. bastion.pid) -- accepts TCP (the kernel does), never answers
  local t0 = sys.now()
  local r = proc.run { "timeout", "--preserve-status", "-s", "INT", "2", os.getenv("ODP") or "build/odp", "run",
    T.root() .. "/scripts/rpi5.lua", "--host", "board", "--ssh-config", cfg, "--runner", "/bin/true", "--model",
    T.root() .. "/tests/fixtures/pte/add_arduino.pte", timeout = 60 }
  local took = sys.now() - t0
  sshd.sh("kill -CONT " .. bastion.pid)
  T.eq(r.status, 130, r.stderr); T.ok(took < 6, ("ended after %.1f s"):format(took))
end)

T.test("odp run --host ALIAS through a jump: one-line exit 3 for a ProxyJump loop", function()
  local r = proc.run { os.getenv("ODP") or "build/odp", "run", T.root() .. "/scripts/rpi5.lua", "--host", "loop-a",
    "--ssh-config", cfg, "--runner", "/bin/true", "--model", T.root() .. "/tests/fixtures/pte/add_arduino.pte",
    timeout = 60 }
  T.eq(r.status, 3, r.stderr); T.eq(select(2, r.stderr:gsub("\n", "")), 1, r.stderr)
end)

finish()
T.done()
