-- Benchmark (run by bench/ssh_sweep.sh): a private sshd on 127.0.0.1 (tests/lib/sshd.lua).
-- 1. A 20-point sweep (a runner + model pushed, then run with --num_executions = point) three ways:
--    odp's ssh target (one session, hash-skip, odp-rusage) vs a shell loop of scp + ssh per point vs the
--    same loop with OpenSSH ControlMaster.  2. The same sweep through a ProxyJump hop (a second sshd): odp
--    (--host alias of an ssh_config whose Host has ProxyJump) vs OpenSSH's loop with ControlMaster and the same
--    config.  3. SFTP put/get of 256 MB: odp.ssh vs OpenSSH scp and sftp.
local sshd = require("sshd")
local sys = require("odp.sys")
local ssh = require("odp.ssh")
local target_ssh = require("odp.target.ssh")

local POINTS = tonumber(os.getenv("POINTS") or "20")
local MB = tonumber(os.getenv("MB") or "256")
local srv = sshd.start()
local dir = sshd.sh("mktemp -d /tmp/odp-bench.XXXXXX"):match("%S+")
local ok, err = pcall(function()
local rdir = srv.remote_dir
local sh = sshd.sh

-- stand-ins: a 1 MB "runner" script and a 4 MB "model"
sh(("printf '#!/bin/sh\\n: \"$@\"\\nexit 0\\n' > %s/runner && head -c 1000000 /dev/urandom >> %s/runner.pad && " ..
  "cat %s/runner.pad >> %s/runner; chmod 755 %s/runner; head -c 4000000 /dev/urandom > %s/model.pte")
  :format(dir, dir, dir, dir, dir, dir))
-- keep the script runnable: the padding is after an exit
local base = ("-o BatchMode=yes -o UserKnownHostsFile=%s -i %s -P %d"):format(srv.known_hosts, srv.identity, srv.port)
local sshbase = ("-o BatchMode=yes -o UserKnownHostsFile=%s -i %s -p %d"):format(srv.known_hosts, srv.identity, srv.port)
local dest = srv.user .. "@127.0.0.1"

local function time(fn) local t = sys.now(); fn(); return sys.now() - t end

local function odp_sweep(opts)
  local t = assert(target_ssh.new(opts or { host = dest, port = srv.port, identity = srv.identity,
    known_hosts = srv.known_hosts, remote_dir = rdir .. "/odp" }))
  assert(t:mkdir(t.remote_dir))
  for n = 1, POINTS do
    assert(t:push(dir .. "/runner", t.remote_dir .. "/runner", { mode = tonumber("755", 8) }))
    assert(t:push(dir .. "/model.pte", t.remote_dir .. "/model.pte"))
    local r = assert(t:exec({ t.remote_dir .. "/runner", "--model_path", t.remote_dir .. "/model.pte",
      "--num_executions", tostring(n) }))
    assert(r.ok and r.rusage, "runner failed: " .. r.status .. " " .. r.stderr)
  end
  t:close()
end

local function loop(extra)
  local d = rdir .. "/loop"
  sh(("ssh %s %s %s 'mkdir -p %s'"):format(sshbase, extra, dest, d))
  for n = 1, POINTS do
    sh(("scp -q %s %s %s/runner %s/model.pte %s:%s/"):format(base, extra, dir, dir, dest, d))
    sh(("ssh %s %s %s '/usr/bin/time -v %s/runner --model_path %s/model.pte --num_executions %d 2>/dev/null'")
      :format(sshbase, extra, dest, d, d, n))
  end
end

local cm = ("-o ControlMaster=auto -o ControlPath=%s/cm-%%C -o ControlPersist=60"):format(dir)
local res = {}
res.odp = time(odp_sweep)
res.plain = time(function() loop("") end)
res.cm = time(function() loop(cm) end)
sh(("ssh %s %s -O exit %s 2>/dev/null || true"):format(sshbase, cm, dest))

print(("sweep, %d points (push runner 1 MB + model 4 MB, run):"):format(POINTS))
print(("  odp (one session, hash-skip)    %7.2f s"):format(res.odp))
print(("  scp + ssh per point             %7.2f s   odp is %.1fx faster (goal >= 5x)"):format(res.plain, res.plain / res.odp))
print(("  same with ControlMaster         %7.2f s   odp is %.1fx faster (goal >= 1.5x)"):format(res.cm, res.cm / res.odp))

-- the same sweep through a jump host: one ssh_config for odp and OpenSSH
local jump = sshd.start()
local cfg = dir .. "/ssh_config"
local kh = dir .. "/known_hosts"
sh(("cat %s %s > %s"):format(srv.known_hosts, jump.known_hosts, kh))
local f = assert(io.open(cfg, "w"))
f:write(("Host board\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  ProxyJump bastion\n" ..
  "Host bastion\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n" ..
  "Host *\n  UserKnownHostsFile %s\n  IdentitiesOnly yes\n  BatchMode yes\n")
  :format(srv.port, srv.user, srv.identity, jump.port, jump.user, jump.identity, kh))
f:close()
res.odp_jump = time(function()
  odp_sweep { host = "board", ssh_config = cfg, remote_dir = rdir .. "/odpjump" }
end)
local jcm = ("-F %s -o ControlMaster=auto -o ControlPath=%s/jcm-%%C -o ControlPersist=60"):format(cfg, dir)
res.cm_jump = time(function()
  local d = rdir .. "/jloop"
  sh(("ssh %s board 'mkdir -p %s'"):format(jcm, d))
  for n = 1, POINTS do
    sh(("scp -q %s %s/runner %s/model.pte board:%s/"):format(jcm, dir, dir, d))
    sh(("ssh %s board '/usr/bin/time -v %s/runner --model_path %s/model.pte --num_executions %d 2>/dev/null'")
      :format(jcm, d, d, n))
  end
end)
sh(("ssh %s -O exit board 2>/dev/null || true"):format(jcm))
jump:close()
print(("through a ProxyJump hop, %d points:"):format(POINTS))
print(("  odp (--host alias, ProxyJump)   %7.2f s"):format(res.odp_jump))
print(("  OpenSSH loop, ControlMaster     %7.2f s   odp is %.1fx faster"):format(res.cm_jump,
  res.cm_jump / res.odp_jump))

-- transfers
local big = dir .. "/big.bin"
sh(("head -c %d /dev/urandom > %s"):format(MB * 1024 * 1024, big))
local s = assert(ssh.connect(srv:connect_opts()))
local rbig = rdir .. "/big.bin"
local function rate(t) return MB * 1.048576 / t end
local tput = time(function() assert(s:put(big, rbig, { timeout = 600 })) end)
sh("rm -f " .. rbig)
local tget
sh("cp " .. big .. " " .. rbig .. " && chown " .. srv.user .. " " .. rbig)
tget = time(function() assert(s:get(rbig, dir .. "/back.bin", { timeout = 600 })) end)
s:close()
sh("rm -f " .. dir .. "/back.bin")
local scp_put = time(function() sh(("scp -q %s %s %s:%s/scp.bin"):format(base, big, dest, rdir)) end)
local scp_get = time(function() sh(("scp -q %s %s:%s %s/scp_back.bin"):format(base, dest, rbig, dir)) end)
sh(("rm -f %s/scp.bin %s/scp_back.bin"):format(rdir, dir))
sh(("printf 'put %s %s/sftp.bin\\n' > %s/put.b; printf 'get %s %s/sftp_back.bin\\n' > %s/get.b")
  :format(big, rdir, dir, rbig, dir, dir))
local sftp_put = time(function() sh(("sftp -q %s -b %s/put.b %s >/dev/null"):format(base, dir, dest)) end)
local sftp_get = time(function() sh(("sftp -q %s -b %s/get.b %s >/dev/null"):format(base, dir, dest)) end)
print(("transfer %d MB (MB/s; ratio = odp / OpenSSH, goal >= 0.9):"):format(MB))
print(("  put: odp %6.0f   scp %6.0f (%.2fx)   sftp %6.0f (%.2fx)"):format(rate(tput), rate(scp_put),
  scp_put / tput, rate(sftp_put), sftp_put / tput))
print(("  get: odp %6.0f   scp %6.0f (%.2fx)   sftp %6.0f (%.2fx)"):format(rate(tget), rate(scp_get),
  scp_get / tget, rate(sftp_get), sftp_get / tget))
end)
srv:close()
sshd.sh("rm -rf " .. dir)
if not ok then error(err, 0) end
