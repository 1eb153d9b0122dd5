-- The ssh target reached by a Host alias of an ssh_config file, as users reach their boards (`ssh rpi5`):
-- HostName/User/Port/IdentityFile/UserKnownHostsFile/HostKeyAlias/StrictHostKeyChecking from the file, the
-- command line on top, against a private sshd on 127.0.0.1.
local T = require("t")
local sshd = require("sshd")
local proc = require("odp.proc")
local target_ssh = require("odp.target.ssh")

local srv = sshd.start()
local tmp = T.tmpdir()
local odp = os.getenv("ODP") or "build/odp"
os.execute("mkdir -p " .. tmp .. "/keys && cp " .. srv.identity .. " " .. tmp .. "/keys/127.0.0.1_odptest")

-- A config whose alias `board` names everything; extra lines go into its Host block.
local function config(name, extra)
  local path = tmp .. "/" .. name
  T.write(path, table.concat({
    "Host board board-*",
    "  HostName 127.0.0.1",
    "  User " .. srv.user,
    "  Port " .. srv.port,
    "  IdentityFile " .. tmp .. "/keys/%h_%r",
    "  IdentitiesOnly yes",
    extra or "",
    "  UserKnownHostsFile " .. srv.known_hosts,
    "" }, "\n"))
  return path
end

local cfg = config("config")

T.test("--host ALIAS: HostName, User, Port and IdentityFile (with %h %r) come from the config", function()
  local t = assert(target_ssh.new { host = "board", ssh_config = cfg, remote_dir = tmp })
  T.eq(t.uri, ("ssh://%s@127.0.0.1:%d"):format(srv.user, srv.port))
  T.eq(t.settings.identity_files, { tmp .. "/keys/127.0.0.1_odptest" })
  T.eq(t:run("echo hi"), "hi\n")
  t:close()
end)

T.test("the command line overrides the config (user, port)", function()
  local t, err, code = target_ssh.new { host = "board", ssh_config = cfg, port = 1 }
  T.eq(t, nil); T.eq(code, "ENODEV"); T.match(err, "127%.0%.0%.1 port 1")
  t, err, code = target_ssh.new { host = "root@board", ssh_config = cfg }
  T.eq(t, nil); T.eq(code, "EAUTH"); T.match(err, "^EAUTH: root@127%.0%.0%.1:%d+: no key accepted")
end)

T.test("HostKeyAlias: the host key is looked up (and added) under the alias", function()
  local kh = tmp .. "/kh_alias"
  local key = T.read(srv.known_hosts):match("%] ?:%d+ (.*)$")
  T.write(kh, ("[board-key]:%d %s"):format(srv.port, key))
  local c = config("config_alias", "  HostKeyAlias Board-Key\n  UserKnownHostsFile " .. kh)
  local t = assert(target_ssh.new { host = "board", ssh_config = c })
  t:close()
  -- without the alias the same known_hosts does not know the host
  c = config("config_noalias", "  UserKnownHostsFile " .. kh)
  local _, err, code = target_ssh.new { host = "board", ssh_config = c }
  T.eq(code, "EHOSTKEY"); T.match(err, "unknown host key")
end)

T.test("every UserKnownHostsFile and GlobalKnownHostsFile is read; a changed key in any is refused", function()
  local empty = tmp .. "/kh_empty_" -- absent files are fine
  local c = config("config_kh2", ("  UserKnownHostsFile %s1 %s"):format(empty, srv.known_hosts))
  local t = assert(target_ssh.new { host = "board", ssh_config = c })
  t:close()
  c = config("config_global", ("  UserKnownHostsFile %s2\n  GlobalKnownHostsFile %s"):format(empty, srv.known_hosts))
  t = assert(target_ssh.new { host = "board", ssh_config = c })
  t:close()
  local other = sshd.keygen(tmp .. "/other_host_key")
  local changed = srv:write_known_hosts(nil, tmp .. "/kh_changed", other .. ".pub")
  c = config("config_changed", ("  UserKnownHostsFile %s3\n  GlobalKnownHostsFile %s"):format(empty, changed))
  local _, err, code = target_ssh.new { host = "board", ssh_config = c }
  T.eq(code, "EHOSTKEY"); T.match(err, "CHANGED.*" .. changed:gsub("%p", "%%%0"))
end)

T.test("StrictHostKeyChecking accept-new adds the key; no is refused with the reason", function()
  local kh = tmp .. "/kh_new"
  local c = config("config_new", "  StrictHostKeyChecking accept-new\n  UserKnownHostsFile " .. kh)
  local t = assert(target_ssh.new { host = "board", ssh_config = c })
  t:close()
  T.match(T.read(kh), "^%[127%.0%.0%.1%]:" .. srv.port .. " %S+ AAAA")
  c = config("config_no", "  StrictHostKeyChecking no")
  local _, err, code = target_ssh.new { host = "board", ssh_config = c }
  T.eq(code, "EUSAGE"); T.match(err, "will not connect blind")
end)

T.test("an unknown alias says which config files were read", function()
  local _, err, code = target_ssh.new { host = "nosuch.invalid", ssh_config = cfg }
  T.eq(code, "ENOTFOUND"); T.match(err, "nosuch%.invalid is no Host alias in " .. cfg:gsub("%p", "%%%0"))
  _, err = target_ssh.new { host = "nosuch.invalid", ssh_config = "none" }
  T.match(err, "none was read")
end)

T.test("odp run --host ALIAS -v shows the resolved settings; a config syntax error exits 2 with the line", function()
  local args = { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", "board", "--ssh-config", cfg, "-v",
    "--runner", "/bin/true", "--model", T.root() .. "/tests/fixtures/pte/add_arduino.pte",
    "--remote-dir", srv.remote_dir .. "/alias", timeout = 60 }
  local r = proc.run(args)
  T.match(r.stderr, ("ssh board: %s@127%%.0%%.0%%.1:%d IdentityFile=[^ ]*/keys/127%%.0%%.0%%.1_odptest " ..
    "IdentitiesOnly=yes"):format(srv.user, srv.port))
  local bad = tmp .. "/bad_config"
  T.write(bad, "Host board\n  Port nope\n")
  args[7] = bad
  r = proc.run(args)
  T.eq(r.status, 2, r.stderr)
  T.eq(r.stderr, ("odp: %s line 2: Bad port 'nope'\n"):format(bad))
end)

T.test("ConnectTimeout bounds the connection to a port that never speaks SSH", function()
  local port = srv.port + 1000
  local pid = sshd.sh(("socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr SYSTEM:'exec cat >/dev/null' " ..
    ">/dev/null 2>&1 & echo $!"):format(port)):match("%d+")
  local ok, err = pcall(function()
    for _ = 1, 100 do
      if proc.run { "sh", "-c", ("ss -ltn | grep -q '127.0.0.1:%d '"):format(port) }.ok then break end
      require("odp.sys").sleep(0.05)
    end
    local path = tmp .. "/config_timeout"
    T.write(path, ("Host mute\n  HostName 127.0.0.1\n  Port %d\n  ConnectTimeout 1\n"):format(port))
    local t0 = require("odp.sys").now()
    local _, e, code = target_ssh.new { host = "mute", ssh_config = path }
    local took = require("odp.sys").now() - t0
    T.eq(code, "ETIMEDOUT", e); T.ok(took >= 0.9 and took < 10, ("gave up after %.1f s"):format(took))
  end)
  sshd.sh("kill " .. pid .. " 2>/dev/null; true")
  assert(ok, err)
end)

T.test("IdentityAgent names the agent's socket (OpenSSH's ssh-agent); IdentityAgent none keeps it out", function()
  local sock = tmp .. "/agent.sock"
  local out = sshd.sh(("ssh-agent -a %s"):format(sshd.quote(sock)))
  local agent_pid = assert(out:match("SSH_AGENT_PID=(%d+)"))
  local ok, err = pcall(function()
    sshd.sh(("SSH_AUTH_SOCK=%s ssh-add -q %s"):format(sshd.quote(sock), sshd.quote(srv.identity)))
    local function agent_config(name, agent)
      local path = tmp .. "/" .. name
      T.write(path, ("Host board\n  HostName 127.0.0.1\n  User %s\n  Port %d\n  IdentityFile %s/none\n" ..
        "  IdentityAgent %s\n  UserKnownHostsFile %s\n"):format(srv.user, srv.port, tmp, agent, srv.known_hosts))
      return path
    end
    -- the board is this machine: its remote dir (where t:run brings the helper up) is the server's, not /tmp/odp
    local t = assert(target_ssh.new { host = "board", ssh_config = agent_config("config_agent", sock),
      remote_dir = srv.remote_dir .. "/agent" })
    T.eq(t:run("echo agent"), "agent\n")
    t:close()
    local _, e, code = target_ssh.new { host = "board", ssh_config = agent_config("config_noagent", "none") }
    T.eq(code, "EAUTH", e)
  end)
  sshd.sh("kill " .. agent_pid)
  assert(ok, err)
end)

T.test("an encrypted key: the passphrase is asked on the terminal without echo (tmux), never shown", function()
  local enc = sshd.keygen(tmp .. "/enc_key", "ed25519", "tty s3cret")
  sshd.sh(("cat %s.pub >> %s/authorized_keys"):format(sshd.quote(enc), sshd.quote(srv.dir)))
  T.ok(target_ssh.key_encrypted(enc), "detected as encrypted")
  T.ok(not target_ssh.key_encrypted(srv.identity), "a plain key is not")
  local script = tmp .. "/prompt.lua"
  T.write(script, ([[
local t, err = require("odp.target.ssh").new { host = "board", ssh_config = %q, identity = %q }
print(t and "CONNECTED " .. t.uri or ("FAILED " .. err))]]):format(cfg, enc))
  local sock = tmp .. "/tmux.sock"
  local function tmux(...)
    local argv = { "tmux", "-S", sock, ... }
    argv.timeout = 10
    return proc.run(argv)
  end
  local function screen() return tmux("capture-pane", "-p", "-t", "odp").stdout end
  T.at_done(function() tmux("kill-server") end) -- also when the test fails first
  local function wait_for(text)
    for _ = 1, 100 do
      if screen():find(text, 1, true) then return true end
      require("odp.sys").sleep(0.1)
    end
    return false
  end
  tmux("-f", "/dev/null", "new-session", "-d", "-s", "odp", "-x", "150", "-y", "20",
    ("env -u ODP_SSH_PASSPHRASE %s run %s; sleep 30"):format(odp, script))
  local asked = wait_for("Enter passphrase for key " .. enc)
  tmux("send-keys", "-t", "odp", "tty s3cret", "Enter")
  local done = wait_for("CONNECTED ssh://")
  local text = screen()
  tmux("kill-server")
  T.ok(asked, "prompt shown: " .. text); T.ok(done, "connected: " .. text)
  T.ok(not text:find("s3cret", 1, true), "the passphrase never appears on the screen")
  -- without a terminal and without ODP_SSH_PASSPHRASE: the error says where the passphrase comes from
  local _, err, code = target_ssh.new { host = "board", ssh_config = cfg, identity = enc }
  T.eq(code, "EAUTH"); T.match(err, "needs its passphrase %(ODP_SSH_PASSPHRASE, or type it at the prompt")
end)

srv:stop()
T.done()
