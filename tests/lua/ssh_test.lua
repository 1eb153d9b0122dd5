-- odp.ssh against a real OpenSSH sshd on 127.0.0.1 (tests/lib/sshd.lua).
local T = require("t")
local sshd = require("sshd")
local ssh = require("odp.ssh")
local sys = require("odp.sys")
local proc = require("odp.proc")

local srv = sshd.start()
local tmp = T.tmpdir()

local function connect(extra) return ssh.connect(srv:connect_opts(extra)) end

local function make_file(path, mb)
  sshd.sh(string.format("head -c %d /dev/urandom > %s", mb * 1024 * 1024, sshd.quote(path)))
  return path
end

local function exists(p) return sys.stat(p) ~= nil end

T.test("connect verifies the host key and authenticates with the identity file", function()
  local s = assert(connect())
  T.match(tostring(s), "odp.ssh.Session %(odptest@127.0.0.1:%d+%)")
  T.match(s:fingerprint(), "^SHA256:[%w+/]+$")
  s:close()
  T.raises(function() s:exec("true") end, "closed")
  s:close() -- idempotent
end)

local s = assert(connect())

T.test("exit status, and a signal checked before the status", function()
  local r = assert(s:exec({ "sh", "-c", "exit 7" }))
  T.eq(r.status, 7); T.eq(r.ok, false); T.eq(r.signal, nil)
  r = assert(s:exec({ "sh", "-c", "kill -SEGV $$" }))
  T.eq(r.signal_name, "SEGV"); T.eq(r.signal, 11); T.eq(r.status, 0); T.eq(r.ok, false)
  r = assert(s:exec("true"))
  T.eq(r.ok, true); T.eq(r.status, 0)
end)

T.test("stdout and stderr are kept apart, large outputs do not stall", function()
  local r = assert(s:exec({ "sh", "-c", "echo out; echo err >&2; echo out2" }))
  T.eq(r.stdout, "out\nout2\n"); T.eq(r.stderr, "err\n")
  r = assert(s:exec("head -c 4000000 /dev/zero; head -c 3000000 /dev/zero >&2", { timeout = 60 }))
  T.eq(#r.stdout, 4000000); T.eq(#r.stderr, 3000000)
end)

T.test("argv is shell-quoted for the remote side; stdin and callbacks work", function()
  local weird = "a b'c\"$HOME;`x`"
  local r = assert(s:exec({ "printf", "%s", weird }))
  T.eq(r.stdout, weird)
  local seen = {}
  r = assert(s:exec("cat; echo e >&2", { stdin = "hello\n", on_stdout = function(d) seen[#seen + 1] = d end,
    on_stderr = function(d) seen[#seen + 1] = "E:" .. d end }))
  T.eq(r.stdout, "hello\n"); T.eq(table.concat(seen), "hello\nE:e\n")
  T.raises(function() s:exec("true", { bogus = 1 }) end, "unknown option 'bogus'")
end)

T.test("a hanging remote command hit by the timeout is gone from the remote process table", function()
  local marker = "odp_hang_" .. sys.getpid()
  local t0 = sys.now()
  -- a shell with a child: the whole group must go, not just the shell
  local r = assert(s:exec(string.format("sh -c 'sleep 300; : %s' & sleep 301; : %s", marker, marker), { timeout = 1 }))
  T.eq(r.timed_out, true); T.eq(r.ok, false); T.eq(r.remote_killed, true)
  T.ok(sys.now() - t0 < 8, "returned soon after the timeout")
  local left = sshd.sh("ps -eo pid,stat,args | grep " .. marker .. " | grep -v grep || true")
  T.eq(left, "", "remote processes left")
  -- the session is still usable afterwards
  T.eq(assert(s:exec("echo still")).stdout, "still\n")
end)

T.test("64 MB put and get are byte-identical; put applies the mode", function()
  local src = make_file(tmp .. "/big.bin", 64)
  local want = sys.sha256_file(src)
  local remote = srv.remote_dir .. "/big.bin"
  local events, last = 0, nil
  local n = assert(s:put(src, remote, { mode = tonumber("750", 8), timeout = 120,
    on_progress = function(done, total) events = events + 1; last = { done, total } end }))
  T.eq(n, 64 * 1024 * 1024)
  T.eq(last, { n, n }); T.ok(events >= 64, "progress events")
  T.eq(sys.sha256_file(remote), want)
  T.eq(sshd.sh("stat -c %a " .. remote), "750\n")
  T.eq(sshd.sh("ls " .. srv.remote_dir), "big.bin\n", "no temporary file left")
  -- overwrite an existing file
  T.eq(assert(s:put(src, remote, { timeout = 120 })), n)
  local back = tmp .. "/back.bin"
  T.eq(assert(s:get(remote, back, { timeout = 120 })), n)
  T.eq(sys.sha256_file(back), want)
  os.remove(back); os.remove(remote)
end)

T.test("transfer failures are errors with codes", function()
  local _, err, code = s:get(srv.remote_dir .. "/nope", tmp .. "/nope")
  T.eq(code, "ENOTFOUND"); T.match(err, "nope")
  T.eq(exists(tmp .. "/nope"), false)
  _, err, code = s:put(tmp .. "/missing", srv.remote_dir .. "/x")
  T.eq(code, "ENOTFOUND")
  T.write(tmp .. "/small", "x")
  _, err, code = s:put(tmp .. "/small", "/root/forbidden/x")
  T.ok(code == "EAUTH" or code == "ENOTFOUND", "permission or missing dir: " .. tostring(err))
end)

T.test("unknown host key: refused with its fingerprint, accepted with accept_new, then known", function()
  local kh = tmp .. "/kh_new"
  local _, err, code = connect { known_hosts = kh }
  T.eq(code, "EHOSTKEY")
  local fp = sshd.sh("ssh-keygen -l -E sha256 -f " .. srv.host_keys.ecdsa .. ".pub"):match("(SHA256:%S+)")
  T.ok(err:find(fp, 1, true), "message has the fingerprint " .. fp .. ": " .. err)
  T.match(err, "%-%-accept%-new%-host%-key")
  T.eq(exists(kh), false)
  local s2 = assert(connect { known_hosts = kh, accept_new = true })
  s2:close()
  T.match(T.read(kh), "^%[127%.0%.0%.1%]:" .. srv.port .. " ecdsa%-sha2%-nistp256 ")
  s2 = assert(connect { known_hosts = kh })
  s2:close()
end)

T.test("host-key preference follows known_hosts: an ed25519-only or ecdsa-only entry works", function()
  for _, kind in ipairs { "ed25519", "ecdsa" } do
    local kh = srv:write_known_hosts(kind, tmp .. "/kh_" .. kind)
    local s2, err = connect { known_hosts = kh }
    T.ok(s2, kind .. ": " .. tostring(err))
    s2:close()
  end
end)

T.test("a plain host entry does not match another port; a changed key is always refused", function()
  local key = sshd.sh("cat " .. srv.host_keys.ed25519 .. ".pub"):match("^(%S+ %S+)")
  local kh = tmp .. "/kh_plain"
  T.write(kh, "127.0.0.1 " .. key .. "\n")
  local _, err, code = connect { known_hosts = kh }
  T.eq(code, "EHOSTKEY"); T.match(err, "unknown host key")
  local other = sshd.keygen(tmp .. "/other_host")
  kh = srv:write_known_hosts(nil, tmp .. "/kh_changed", other .. ".pub")
  _, err, code = connect { known_hosts = kh, accept_new = true }
  T.eq(code, "EHOSTKEY"); T.match(err, "CHANGED")
  T.eq(select(2, T.read(kh):gsub("\n", "")), 1, "known_hosts untouched")
end)

-- Which RSA path this machine's libssh2 takes is decided at run time; the test name says which one ran.
local rsa_path = ssh.rsa_sha2() and "used (rsa-sha2-256/512)" or "refused with the SHA-1 explanation"
T.test(("a wrong key gives EAUTH; an RSA key is %s: linked libssh2 %s"):format(rsa_path, ssh.libssh2_version()),
  function()
  local wrong = sshd.keygen(tmp .. "/wrong")
  local _, err, code = connect { identity = wrong }
  T.eq(code, "EAUTH"); T.match(err, "refused key")
  local rsa = sshd.keygen(tmp .. "/rsa", "rsa")
  sshd.sh(string.format("cat %s.pub >> %s/authorized_keys", rsa, srv.dir))
  local s
  s, err, code = connect { identity = rsa }
  if ssh.rsa_sha2() then
    T.ok(s, err); s:close()
  else
    T.eq(code, "EAUTH"); T.match(err, "libssh2 " .. ssh.libssh2_version():gsub("%p", "%%%0") .. " signs RSA keys only with SHA%-1")
    T.match(err, "ed25519")
    -- the board named once, as the user would type it (it once read odptest@odptest@127.0.0.1:PORT)
    T.match(err, "^EAUTH: " .. srv.user .. "@127%.0%.0%.1:" .. srv.port .. " refused RSA key ")
    T.eq(select(2, err:gsub(srv.user .. "@", "")), 1, "the user once: " .. err)
  end
  _, err = connect { identity = wrong }
  T.eq(select(2, err:gsub(srv.user, "")), 1, "the user once: " .. err)
  _, err, code = connect { identity = tmp .. "/no_such_key" }
  T.eq(code, "EAUTH")
end)

T.test("an encrypted key is unlocked by ODP_SSH_PASSPHRASE (environment only)", function()
  local enc = sshd.keygen(tmp .. "/enc", "ed25519", "s3cret phrase")
  sshd.sh(string.format("cat %s.pub >> %s/authorized_keys", enc, srv.dir))
  local script = tmp .. "/pp.lua"
  T.write(script, string.format([[
local ssh = require("odp.ssh")
local s, err = ssh.connect{host="127.0.0.1", port=%d, user=%q, identity=%q, known_hosts=%q, agent=false}
io.write(s and "OK" or err)]], srv.port, srv.user, enc, srv.known_hosts))
  local odp = os.getenv("ODP") or "build/odp"
  local r = proc.run { odp, "run", script, env = { ODP_SSH_PASSPHRASE = "s3cret phrase" }, timeout = 30 }
  T.eq(r.stdout, "OK")
  r = proc.run { odp, "run", script, env = { ODP_SSH_PASSPHRASE = false }, timeout = 30 }
  T.match(r.stdout, "^EAUTH")
end)

T.test("connect timeout and refused port", function()
  local _, err, code = ssh.connect { host = "127.0.0.1", port = 1, user = "x", known_hosts = tmp .. "/kh", timeout = 5 }
  T.eq(code, "ENODEV"); T.match(err, "port 1")
  T.raises(function() ssh.connect { host = "127.0.0.1", bogus = true } end, "unknown option")
  -- a listener that never speaks SSH: the handshake times out at the deadline
  local lp = srv.port + 1000
  local pid = tonumber(sshd.sh(string.format("socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr SYSTEM:'sleep 20' >/dev/null 2>&1 & echo $!", lp)))
  for _ = 1, 200 do -- listening once ss shows the port
    if proc.run { "sh", "-c", ("ss -Hltn 'sport = :%d' | grep -q ."):format(lp), timeout = 10 }.status == 0 then break end
    sys.sleep(0.05)
  end
  local t0 = sys.now()
  _, err, code = ssh.connect { host = "127.0.0.1", port = lp, user = "x", known_hosts = tmp .. "/kh", timeout = 1 }
  T.eq(code, "ETIMEDOUT"); T.ok(sys.now() - t0 < 3, "bounded by the timeout")
  proc.run { "kill", tostring(pid) }
  -- a listener that answers something else and closes (a web server, say): no SSH banner; the message names
  -- the host and the port it came from
  local wp = srv.port + 1001
  pid = tonumber(sshd.sh(string.format("socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr SYSTEM:'echo HTTP/1.0 400' " ..
    ">/dev/null 2>&1 & echo $!", wp)))
  for _ = 1, 200 do
    if proc.run { "sh", "-c", ("ss -Hltn 'sport = :%d' | grep -q ."):format(wp), timeout = 10 }.status == 0 then break end
    sys.sleep(0.05)
  end
  _, err, code = ssh.connect { host = "127.0.0.1", port = wp, user = "x", known_hosts = tmp .. "/kh", timeout = 5 }
  T.eq(code, "EIO", err)
  T.match(err, ("^EIO: SSH handshake with 127%%.0%%.0%%.1 port %d failed %%(is an SSH server listening there%%?%%): " ..
    ".*banner"):format(wp))
  proc.run { "kill", tostring(pid) }
end)

s:close()

T.test("sshd killed mid-upload: error, and no complete-looking file at the destination", function()
  local src = make_file(tmp .. "/up.bin", 64)
  local s2 = assert(connect())
  local remote = srv.remote_dir .. "/up.bin"
  local killed = false
  local n, err, code = s2:put(src, remote, { timeout = 60, on_progress = function(done)
    if done >= 8 * 1024 * 1024 and not killed then killed = true; srv:crash() end
  end })
  T.eq(n, nil); T.ok(killed, "crashed mid-transfer"); T.eq(code, "EIO", tostring(err))
  T.eq(exists(remote), false, "destination exists")
  s2:close()
end)

T.test("sshd killed mid-download: error, and no local file", function()
  srv = sshd.start()
  local src = make_file(srv.remote_dir .. "/down.bin", 64)
  sshd.sh("chown " .. srv.user .. " " .. src)
  local s2 = assert(connect())
  local dest = tmp .. "/down.bin"
  local killed = false
  local n, err, code = s2:get(src, dest, { timeout = 60, on_progress = function(done)
    if done >= 8 * 1024 * 1024 and not killed then killed = true; srv:crash() end
  end })
  T.eq(n, nil); T.ok(killed); T.eq(code, "EIO", tostring(err))
  T.eq(exists(dest), false)
  T.eq(sshd.sh("ls " .. tmp .. " | grep down || true"), "", "no temporary file left")
  s2:close()
end)

srv:stop()
T.done()
