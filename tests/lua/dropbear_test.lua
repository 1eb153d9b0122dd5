-- A board whose SSH server is Dropbear (Debian's dropbear-bin), as on many embedded Linux boards, instead of
-- OpenSSH: Dropbear on 127.0.0.1 behind tests/c/delay_relay (it counts the turnarounds on the wire), the real
-- runner. What odp's helper protocol asks of the server holds there too: one exec a session, the session's first
-- flight in its command line, a point one round trip, and `U` (this odp's directory removed) written with the
-- channel's end and the connection's close, waited for by nobody: Dropbear must pass it to the helper before it
-- ends the session. The oracles: the relay's count, the runner's own log, the board's file system and process
-- table, Dropbear's own log.
local T = require("t")
local sshd = require("sshd")
local sys = require("odp.sys")
local proc = require("odp.proc")

local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")
local odp = os.getenv("ODP") or (build .. "/odp")
local model = T.root() .. "/tests/fixtures/pte/add_arduino.pte"
local tmp = T.tmpdir()
local DELAY_MS = 20

local srv = sshd.dropbear()
local rel = srv:relay(DELAY_MS, tmp)
local used = 0

-- Checks that nothing of a session is left on the board within 5 s of its end: no directory under the remote dir's
-- .odp/runs (each session's own, removed by `U` as it ends) and no process of the board's user (the helper, which
-- ends when its stdin does, and the runners it KILLs then).
local function nothing_left(remote)
  local runs, procs
  T.ok(sshd.wait_for(function()
    runs, procs = sys.readdir(remote .. "/.odp/runs") or {}, proc.run { "pgrep", "-a", "-u", srv.user }.stdout
    return #runs == 0 and procs == ""
  end, 5), ("nothing of the session left: dirs %s, processes %q"):format(table.concat(runs, " "), procs))
end

-- Each record's iterations against the runner's own log (its `Iteration i of N` lines in the run dir).
local function check_against_log(rec, n, what)
  T.ok(rec.ok, what .. ": " .. tostring(rec.error and rec.error.message))
  T.eq(rec.latency_ms and rec.latency_ms.n, n, what .. ": its iterations")
  local log = T.read(rec.artifacts.run_dir .. "/" .. rec.artifacts.runner_stderr.file)
  local _, lines = log:gsub("Iteration %d+ of %d+: [%d.]+ ms", "")
  T.eq(lines, n, what .. ": the runner's own log has as many")
end

-- A sweep of points num_executions=1..points through the relay. -> records, the relay's count, stderr
local function sweep(remote, points, runner, extra)
  local n = {}
  for i = 1, points do n[i] = tostring(i) end
  local out = ("%s/sweep-%d.jsonl"):format(tmp, used + 1)
  local argv = { odp, "run", T.root() .. "/scripts/sweep.lua", "--flow", T.root() .. "/scripts/rpi5.lua",
    "--host", srv.user .. "@127.0.0.1", "--port", tostring(rel.port), "--identity", srv.identity,
    "--known-hosts", rel.known_hosts, "--remote-dir", remote, "--runner", runner, "--model", model,
    "-p", "num_executions=" .. table.concat(n, ","), "--out", out, "--runs-dir", tmp .. "/runs", "--no-history" }
  table.move(extra or {}, 1, #(extra or {}), #argv + 1, argv)
  local r = assert(proc.run { argv = argv, timeout = 600 })
  T.eq(r.status, 0, r.stderr)
  used = used + 1
  return T.records(out), rel.connections(used)[used], r.stderr
end

T.with_real_runner("Dropbear: a fresh board's sweep installs the helper in its one exec and uploads through it; "
  .. "each later point is one round trip; the session's directory goes with its end", function(runner)
  local remote = srv.remote_dir .. "/fresh"
  local recs, wire, stderr = sweep(remote, 3, runner, { "--no-pipeline" })
  T.eq(#recs, 3, "three records")
  -- why the upload took long, said once: Dropbear's 24 KB window, a round trip each (docs/helper-protocol.md)
  local _, hints = stderr:gsub("hint: uploading [^\n]+ on the link%) to [^\n]+ took [%d.]+ s in %d+ round trips, " ..
    "[^\n]+ each: the board's SSH server opens a small channel window %(Dropbear's default is 24576 bytes; " ..
    "`dropbear %-W 2097152` gives 2 MB, as OpenSSH's sshd does%)\n", "")
  T.eq(hints, 1, "the small window said once: " .. stderr)
  print("# " .. (stderr:match("hint: uploading [^\n]+") or ""))
  for i, rec in ipairs(recs) do
    check_against_log(rec, i, ("point %d"):format(i))
    if i > 1 then T.eq(rec.transport.round_trips, 1, ("point %d: one round trip through Dropbear"):format(i)) end
  end
  T.eq(recs[1].transport.connects, 1, "one connection, made by the first point")
  T.ok(sys.stat(remote .. "/.odp/odp-rusage"), "the helper installed on the board")
  print(("# Dropbear, fresh board: round trips by point %d,%d,%d; the relay %d"):format(recs[1].transport.round_trips,
    recs[2].transport.round_trips, recs[3].transport.round_trips, wire.round_trips))
  -- `U` and the channel's close were written as the session ended, the connection closed at once: Dropbear
  -- passed U to the helper (the directory is gone) and the helper then saw its stdin end (no process left)
  nothing_left(remote)
end)

T.with_real_runner("Dropbear: a repeat sweep is one exec and pipelined, one round trip a point on the wire, and "
  .. "leaves nothing behind", function(runner)
  local remote = srv.remote_dir .. "/repeat"
  sweep(remote, 1, runner) -- the helper, runner and model on the board
  local auths = srv:count("Pubkey auth succeeded")
  local recs, wire, stderr = sweep(remote, 5, runner)
  T.eq(stderr:find("hint: uploading", 1, true), nil, "nothing uploaded, nothing said")
  T.eq(#recs, 5, "five records, in order")
  local total = 0
  for i, rec in ipairs(recs) do
    check_against_log(rec, i, ("point %d"):format(i))
    T.eq(rec.params.num_executions, i, "in order")
    total = total + rec.transport.round_trips
  end
  T.eq(srv:count("Pubkey auth succeeded") - auths, 1, "one authentication for the sweep")
  -- the relay's count, independent of odp's: the records' sum (no uploads), within one packet crossing another
  -- and Dropbear's window adjusts: its 24 KB window is adjusted every 8 KB odp sends or so, each a turnaround one
  -- side may count and the other not (as sshd's for an upload: link_test)
  local up = 0
  for _, rec in ipairs(recs) do up = up + rec.transport.bytes_up end
  print(("# Dropbear, a repeat sweep of 5 points: the records %d round trips, the relay %d, %d bytes up"):format(total,
    wire.round_trips, up))
  T.ok(math.abs(wire.round_trips - total) <= 1 + up // 8192, ("the relay counted %d round trips, the records %d, " ..
    "with %d bytes up"):format(wire.round_trips, total, up))
  T.ok(wire.round_trips <= 9 + 4, ("the session's start (9) and a round trip per later point: %d"):format(
    wire.round_trips))
  nothing_left(remote)
end)

-- The number a file holds (a pid, an exit status the background shell wrote), or nil while it holds none.
local function number_in(path)
  local f = io.open(path)
  local n = f and tonumber(f:read("a"):match("%d+"))
  if f then f:close() end
  return n
end

-- odp run in the background on the board behind Dropbear (directly, no relay), its output and exit status in dir.
-- -> {pid, dir}
local function background(remote, runner, dir)
  local argv = { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1", "--port",
    tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--remote-dir", remote,
    "--runner", runner, "--model", model, "-n", "100000000", "--runs-dir", dir .. "/runs", "--no-history", "-q" }
  for i, a in ipairs(argv) do argv[i] = sshd.quote(a) end
  sshd.sh(("( %s >%s/out 2>%s/err & echo $! >%s/pid; wait $!; echo $? >%s/rc ) >/dev/null 2>&1 &"):format(
    table.concat(argv, " "), dir, dir, dir, dir))
  local pid
  T.ok(sshd.wait_for(function() pid = number_in(dir .. "/pid") return pid end, 10), "odp started")
  return { pid = pid, dir = dir }
end

T.with_real_runner("Dropbear: Ctrl-C or SIGKILL of odp mid-run ends the runner on the board; Ctrl-C also removes "
  .. "the session's directory", function(runner)
  for _, sig in ipairs({ { "INT", 130 }, { "KILL", 137 } }) do
    local dir = T.tmpdir()
    local remote = srv.remote_dir .. "/sig" .. sig[1]
    local job = background(remote, runner, dir)
    T.ok(sshd.wait_for(function()
      return proc.run { "pgrep", "-u", srv.user, "-f", "executor_runner" }.ok
    end, 60), "the runner runs on the board")
    sshd.sh("kill -" .. sig[1] .. " " .. job.pid)
    local rc
    T.ok(sshd.wait_for(function() rc = number_in(dir .. "/rc") return rc end, 30), "odp ended")
    T.eq(rc, sig[2], T.read(dir .. "/err"))
    if sig[1] == "INT" then
      local _, lines = T.read(dir .. "/err"):gsub("\n", "")
      T.eq(lines, 1, "one line: " .. T.read(dir .. "/err"))
    end
    -- the channel's end reached the helper through Dropbear: it KILLed the runner's group and ended
    local procs
    T.ok(sshd.wait_for(function()
      procs = proc.run { "pgrep", "-a", "-u", srv.user }.stdout
      return procs == ""
    end, 10), ("SIG%s: no process left on the board: %q"):format(sig[1], procs))
    if sig[1] == "INT" then
      T.eq(sys.readdir(remote .. "/.odp/runs"), {}, "Ctrl-C: the session's directory removed as it ended")
    end
  end
end)

T.test("Dropbear: another host key under the board's name is refused before anything is sent, exit 3", function()
  local kh = tmp .. "/wrong_known_hosts"
  local other = sshd.keygen(tmp .. "/other_host_key")
  srv:write_known_hosts("ed25519", kh, other .. ".pub")
  local auths = srv:count("Pubkey auth succeeded")
  local r = assert(proc.run { argv = { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host",
    srv.user .. "@127.0.0.1", "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", kh,
    "--remote-dir", srv.remote_dir .. "/refused", "--runner", build .. "/odp-rusage-x86_64",
    "--model", model, "--runs-dir", tmp .. "/runs", "--no-history" }, timeout = 60 })
  T.eq(r.status, 3, r.stderr)
  local _, lines = r.stderr:gsub("\n", "")
  T.match(r.stderr, "host key")
  T.ok(lines <= 2, "a short error: " .. r.stderr)
  T.eq(srv:count("Pubkey auth succeeded"), auths, "no authentication")
  T.eq(sys.stat(srv.remote_dir .. "/refused"), nil, "nothing made on the board")
end)

T.done()
