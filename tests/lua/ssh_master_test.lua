-- Board sessions through OpenSSH's ControlMaster (docs/devices.md, "Through ssh's ControlMaster"): Debian's ssh as
-- the master, OpenSSH's sshd behind tests/c/delay_relay (it counts the turnarounds and the connections on the
-- wire), the real runner. The oracles: the relay's connections and round trips, sshd's DEBUG3 log (exec requests,
-- authentications), `ssh -O check` (OpenSSH's own answer to whether a master runs).
local T = require("t")
local sshd = require("sshd")
local sys = require("odp.sys")
local proc = require("odp.proc")
local ssh_config = require("odp.target.ssh_config")

local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")
local odp = os.getenv("ODP") or (build .. "/odp")
local model = T.root() .. "/tests/fixtures/pte/add_arduino.pte"
local tmp = T.tmpdir()
local DELAY_MS = 20

local srv = sshd.start { log_level = "DEBUG3" }
local rel = srv:relay(DELAY_MS, tmp)
local remote = srv.remote_dir .. "/cm"

-- An ssh_config for the board behind the relay, with these Control* lines. -> its path
local configs = 0
local function config(control)
  configs = configs + 1
  local path = ("%s/config%d"):format(tmp, configs)
  T.write(path, ("Host board\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n" ..
    "  UserKnownHostsFile %s\n%s"):format(rel.port, srv.user, srv.identity, rel.known_hosts, control))
  -- whatever a case leaves running, the suite stops: no ssh process outlives it
  T.at_done(function() proc.run { argv = { "ssh", "-F", path, "-O", "exit", "board" }, timeout = 10 } end)
  return path
end

local function ssh_o(cfg, what)
  return assert(proc.run { argv = { "ssh", "-F", cfg, "-O", what, "board" }, timeout = 20 })
end

local function execs()
  return srv:count("server_input_channel_req: channel %d+ request exec")
end

local function auths() return srv:count("Accepted publickey") end

-- odp run through cfg: -> the record, stderr (-v)
local function run(cfg, runner, extra)
  local argv = { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", "board", "--ssh-config", cfg, "--runner", runner,
    "--model", model, "--remote-dir", remote, "-n", "1", "--format", "json", "--runs-dir", tmp .. "/runs", "-v",
    "--no-history" }
  for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
  local r = assert(proc.run { argv = argv, timeout = 120 })
  local rec = require("odp.core.json").decode(r.stdout)
  T.ok(rec, "a record: " .. r.stderr)
  return rec or {}, r.stderr, r.status
end

local conns_seen = 0
local function next_connection()
  conns_seen = conns_seen + 1
  return rel.connections(conns_seen)[conns_seen]
end

T.test("ssh_config's Control* keywords: values as ssh takes them, a bad one refused with its line", function()
  local path = tmp .. "/kw"
  T.write(path, "Host a\n  ControlMaster autoask\n  ControlPath ~/.ssh/cm-%C\n  ControlPersist 5m\n" ..
    "Host b\n  ControlMaster no\n  ControlPath none\n  ControlPersist yes\n")
  local a = assert(ssh_config.resolve("a", { file = path }))
  T.eq({ a.control_master, a.control_path, a.control_persist }, { "autoask", "~/.ssh/cm-%C", 300 })
  local b = assert(ssh_config.resolve("b", { file = path }))
  T.eq({ b.control_master, b.control_path, b.control_persist }, { "no", nil, "yes" })
  -- ssh's own reading of the same file: the values odp keeps are the ones `ssh -G` prints
  local g = assert(proc.run { argv = { "ssh", "-F", path, "-G", "a" }, timeout = 10 }).stdout
  T.match(g, "\ncontrolmaster autoask\n")
  T.match(g, "\ncontrolpersist 300\n")
  local bad = tmp .. "/kw-bad"
  T.write(bad, "Host c\n  ControlPersist 1x\nHost d\n  ControlMaster maybe\n")
  local c, err, code = ssh_config.resolve("d", { file = bad })
  T.eq({ c, code }, { nil, "EUSAGE" })
  T.match(err, "kw%-bad line 2: invalid time value")
  T.ok(not assert(proc.run { argv = { "ssh", "-F", bad, "-G", "d" }, timeout = 10 }).ok, "ssh refuses it too")
end)

T.with_real_runner("ControlMaster auto with ControlPersist: the first run starts ssh's master, the next ones go " ..
  "through it: no new connection or login on the link, one exec each, 3 round trips to the first point's answer",
  function(runner)
    -- the board gets odp's helper, the runner and the model over a connection of odp's own first: the runs below
    -- then upload nothing, and their turnarounds are requests and answers only
    local warm = assert(proc.run { argv = { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host",
      srv.user .. "@127.0.0.1", "--port", tostring(rel.port), "--identity", srv.identity, "--known-hosts",
      rel.known_hosts, "--runner", runner, "--model", model, "--remote-dir", remote, "-n", "1", "-q", "--runs-dir",
      tmp .. "/runs", "--no-history" }, timeout = 120 })
    T.eq(warm.status, 0, warm.stderr)
    next_connection()
    -- what a master alone costs on the wire (ssh's handshake, authentication, its exit): the oracle's baseline
    local bare = config("  ControlMaster auto\n  ControlPath " .. tmp .. "/bare-%C\n  ControlPersist 60\n")
    T.eq(assert(proc.run { argv = { "ssh", "-F", bare, "-fN", "board" }, timeout = 30 }).status, 0)
    ssh_o(bare, "exit")
    local master_alone = next_connection().round_trips
    local cfg = config("  ControlMaster auto\n  ControlPath " .. tmp .. "/cm-%C\n  ControlPersist 60\n")
    T.ok(ssh_o(cfg, "check").status ~= 0, "no master before the first run")
    local rec, said = run(cfg, runner)
    T.eq(rec.ok, true, said)
    T.match(said, "through the ControlMaster at " .. tmp:gsub("%p", "%%%0") .. "/cm%-%x+ %(pid %d+, started by odp%)")
    T.match(ssh_o(cfg, "check").stderr, "^Master running", "ssh -O check: the master odp started runs")
    local total = rec.transport.round_trips
    for i = 1, 2 do
      local e0, a0 = execs(), auths()
      local r2, said2 = run(cfg, runner)
      T.eq(r2.ok, true, said2)
      T.ok(not said2:find("started by odp", 1, true), "the master is used, not started again")
      T.eq(r2.transport.round_trips, 3, ("run %d: the channel's open, its exec with the first flight, the point"):format(i))
      T.ok(r2.transport.connect_ms < 2 * DELAY_MS, "connected locally, not over the link: " .. r2.transport.connect_ms)
      sys.sleep(0.3) -- sshd logs a moment after the channel has gone
      T.eq(execs() - e0, 1, "sshd: one exec for the run (one login shell)")
      T.eq(auths() - a0, 0, "sshd: no new authentication")
      total = total + r2.transport.round_trips
    end
    -- ControlMaster no still uses a running master, as ssh does
    local no = config("  ControlMaster no\n  ControlPath " .. tmp .. "/cm-%C\n")
    local r3, said3 = run(no, runner)
    T.eq(r3.ok, true, said3)
    T.match(said3, "through the ControlMaster")
    total = total + r3.transport.round_trips
    ssh_o(cfg, "exit")
    local wire = next_connection()
    -- one connection carried the four runs; on it, beyond what a master alone costs, what odp counted (the
    -- first run's channel and point, not the master's handshake: that is ssh's), within one either way per run
    T.ok(math.abs(wire.round_trips - master_alone - total) <= 4, ("the relay counted %d round trips on the " ..
      "master's connection, %d for a master alone; the records %d"):format(wire.round_trips, master_alone, total))
    T.settles(function()
      local left = sys.readdir(remote .. "/.odp/runs") or {}
      local dirs = {}
      for _, n in ipairs(left) do if n ~= "." and n ~= ".." then dirs[#dirs + 1] = n end end
      return #dirs == 0, "run dirs left on the board: " .. table.concat(dirs, " ")
    end, 10)
  end)

T.with_real_runner("the master killed mid-sweep: the point it carried fails with one line, the sweep goes on " ..
  "through a new master, nothing else lost", function(runner)
  local cfg = config("  ControlMaster auto\n  ControlPath " .. tmp .. "/kill-%C\n  ControlPersist 60\n")
  T.eq(assert(proc.run { argv = { "ssh", "-F", cfg, "-fN", "board" }, timeout = 30 }).status, 0)
  local pid = ssh_o(cfg, "check").stderr:match("pid=(%d+)")
  T.ok(pid, "the master's pid")
  -- point 2's runner leaves a mark on the board (this machine) and waits; the master is killed as the mark
  -- appears, by a watcher of this suite's (the board's user may not signal it)
  local mark = remote .. "/point2-started"
  os.remove(mark)
  local wrapper = tmp .. "/killing_runner.sh"
  T.write(wrapper, ('#!/bin/sh\ncase " $* " in *" --num_executions 2 "*) : > %s; sleep 2;; esac\nexec %s "$@"\n')
    :format(mark, runner))
  sys.chmod(wrapper, tonumber("755", 8))
  assert(proc.run { argv = { "sh", "-c", ('(i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); ' ..
    'done; kill -9 %s) >/dev/null 2>&1 &'):format(mark, pid) }, timeout = 10 })
  local out = tmp .. "/killed.jsonl"
  local r = assert(proc.run { argv = { odp, "run", T.root() .. "/scripts/sweep.lua", "--flow",
    T.root() .. "/scripts/rpi5.lua", "--host", "board", "--ssh-config", cfg, "--runner", wrapper, "--model", model,
    "--remote-dir", remote, "-p", "num_executions=1,2,3,4", "--out", out, "--runs-dir", tmp .. "/runs", "-q",
    "--no-pipeline" }, timeout = 300 })
  local recs = T.records(out)
  T.eq(#recs, 4, "every point has its record: " .. r.stderr)
  local oks = {}
  for i, rec in ipairs(recs) do oks[i] = rec.ok end
  T.eq(oks, { true, false, true, true }, r.stderr)
  T.eq(recs[2].error and recs[2].error.code, "ECONNLOST")
  T.ok(not recs[2].error.message:find("\n"), "one line: " .. recs[2].error.message)
  T.match(ssh_o(cfg, "check").stderr, "^Master running", "a new master runs")
  T.ok(ssh_o(cfg, "check").stderr:match("pid=(%d+)") ~= pid, "not the killed one")
end)

T.with_real_runner("a ControlPath that is no socket of this user's: never used or replaced, one warning, odp " ..
  "connects itself", function(runner)
  local cfg = config("  ControlMaster auto\n  ControlPath " .. tmp .. "/file-%C\n  ControlPersist 60\n")
  local path = assert(proc.run { argv = { "ssh", "-F", cfg, "-G", "board" }, timeout = 10 }).stdout
    :match("\ncontrolpath (%S+)")
  T.write(path, "not a socket\n")
  local a0 = auths()
  local rec, said = run(cfg, runner)
  T.eq(rec.ok, true, said)
  T.match(said, "ControlPath " .. path:gsub("%p", "%%%0") .. " is not a socket: odp connects itself")
  T.eq(T.read(path), "not a socket\n", "the file is left as it was")
  T.ok(ssh_o(cfg, "check").status ~= 0, "no master started over it")
  T.eq(rec.transport.connects, 1)
  sys.sleep(0.3)
  T.eq(auths() - a0, 1, "odp's own connection authenticated")
end)

T.with_real_runner("ControlMaster autoask and no master running: odp starts none, and -v says why", function(runner)
  local cfg = config("  ControlMaster autoask\n  ControlPath " .. tmp .. "/ask-%C\n  ControlPersist 60\n")
  local rec, said = run(cfg, runner)
  T.eq(rec.ok, true, said)
  T.match(said, "no ControlMaster at [^\n]*/ask%-%x+, and odp starts none with ControlMaster autoask, ControlPersist 60")
  T.ok(ssh_o(cfg, "check").status ~= 0, "no master")
  T.eq(rec.transport.connects, 1, "odp's own connection")
end)

T.with_real_runner("a master ssh cannot start (the board's host key is not the one known): odp's own connection " ..
  "refuses the key too, one error line", function(runner)
  local wrong = tmp .. "/wrong_known_hosts"
  local f = assert(io.open(wrong, "w"))
  f:write(("[127.0.0.1]:%d %s\n"):format(rel.port, T.read(srv.identity .. ".pub"):match("^(%S+ %S+)")))
  f:close()
  local cfg = config("  ControlMaster auto\n  ControlPath " .. tmp .. "/hk-%C\n  ControlPersist 60\n")
  local r = assert(proc.run { argv = { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", "board", "--ssh-config",
    cfg, "--runner", runner, "--model", model, "--remote-dir", remote, "--known-hosts", wrong, "--runs-dir",
    tmp .. "/runs", "--no-history" }, timeout = 120 })
  T.eq(r.status, 3, r.stderr)
  T.match(r.stderr, "^odp: host key of %[127%.0%.0%.1%]:%d+ has CHANGED [^\n]*\n$", "odp's own error, one line")
  T.ok(ssh_o(cfg, "check").status ~= 0, "no master")
end)

T.done()
