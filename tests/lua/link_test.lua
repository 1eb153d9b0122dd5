-- A sweep over a link with a round-trip time (issue 38): OpenSSH's sshd on 127.0.0.1 behind tests/c/delay_relay
-- (every byte held DELAY ms each way; it counts the turnarounds on the wire), the real runner. odp's own count
-- (the record's `transport`, odp_ssh_traffic) is checked against the relay's, an independent count, and the
-- requests against sshd's own DEBUG3 log.
local T = require("t")
local sshd = require("sshd")
local sys = require("odp.sys")
local proc = require("odp.proc")
local clock = require("board_clock")

local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")
local odp = os.getenv("ODP") or (build .. "/odp")
local tmp = T.tmpdir()
local DELAY_MS = 20 -- each way: a round trip is 40 ms, far above this machine's own jitter between the two ends
-- The round trips of a board session's start with its first point (docs/helper-protocol.md, "What a point costs
-- on a link"): SSH's own handshake and authentication 6, the helper's channel 2 (its open, then its exec, whose
-- command line carries the session's first flight: the preflight, this odp's directory and lease and the runner
-- and model each linked to its blob and hash-checked, answered behind the helper's hello), the point (its lease
-- check rides in its answer: docs/helper-protocol.md)
local SESSION_START_MAX = 9
-- A fresh board's 10-point sweep on the wire (the relay's count): the session start, the helper installed in its
-- one exec, the runner and model uploaded through it (8.6 MB in a few round trips of sshd's 2 MB window; over
-- SFTP they cost ~55, the sweep 94), the points; the relay too counts some window adjusts as turnarounds, more
-- of them as the machine is busier (41 to 51 seen, the 51 in a CI run; 24 since the chunks are LZ4 blocks):
-- well under the SFTP path's 94
local FRESH_SWEEP_MAX = 64

local srv = sshd.start { log_level = "DEBUG3" }
local HOSTNAME = sshd.sh("hostname"):match("%S+")

-- The relay in front of srv (sshd.lua's Server:relay). -> the relay, its known_hosts
local function relay()
  local r = srv:relay(DELAY_MS, tmp)
  return r, r.known_hosts
end

local records = T.records

local sweeps, used = 0, {} -- used: the connections each relay served so far
-- A sweep of points (num_executions=1..points, or base+1..base+points) through the relay, one point at a time
-- unless pipelined. -> its records, the relay's count for its connection, the exec/subsystem requests sshd
-- logged for it
local function sweep(rel, kh, remote, points, runner, user, verbose, pipelined, base)
  sweeps = sweeps + 1
  local n = {}
  for i = 1, points do n[i] = tostring((base or 0) + i) end
  local before = srv:count("server_input_channel_req: channel %d+ request exec") +
    srv:count("server_input_channel_req: channel %d+ request subsystem")
  local out = ("%s/sweep%d.jsonl"):format(tmp, sweeps)
  local r = proc.run { argv = { odp, "run", T.root() .. "/scripts/sweep.lua", "--flow", T.root() .. "/scripts/rpi5.lua",
    "--host", (user or srv.user) .. "@127.0.0.1", "--port", tostring(rel.port), "--identity", srv.identity, "--known-hosts", kh,
    "--remote-dir", remote, "--runner", runner, "--model", T.root() .. "/tests/fixtures/pte/add_arduino.pte",
    "-p", "num_executions=" .. table.concat(n, ","), "--out", out, "--runs-dir", tmp .. "/runs", verbose and "-v" or "-q", not pipelined and "--no-pipeline" or nil },
    timeout = 600 }
  T.eq(r.status, 0, r.stderr)
  used[rel] = (used[rel] or 0) + 1
  local conns = rel.connections(used[rel])
  sys.sleep(0.3) -- sshd logs a moment after the client has gone
  local requests = srv:count("server_input_channel_req: channel %d+ request exec") +
    srv:count("server_input_channel_req: channel %d+ request subsystem") - before
  return records(out), conns[used[rel]], requests, r.stdout .. r.stderr
end

-- What the link carries after a sweep's last record: the removal of odp's directory on the board and the
-- helper's channel closing, written as the session ends and waited for by nobody (odp.target.shell.close_run_dir,
-- odp_ssh_close): no turnaround on the wire.
local AFTER_LAST_RECORD = 0

-- Checks a sweep's records against the wire. -> the first point's round trips (the session start with its run)
local function check_sweep(recs, wire, what, uploads)
  local total, each = 0, {}
  for i, rec in ipairs(recs) do each[i] = rec.transport and rec.transport.round_trips or "?" end
  print(("# %s: round trips by point %s; the relay %d"):format(what, table.concat(each, ","), wire.round_trips))
  for i, rec in ipairs(recs) do
    T.ok(rec.ok, rec.error and rec.error.message)
    T.ok(rec.transport, what .. ": the record has its transport")
    T.ok(rec.device_state and rec.device_state.before and rec.device_state.after,
      what .. ": the device state before and after came back with the run")
    T.eq(rec.device_state.hostname, HOSTNAME, what .. ": the board's hostname in its state")
    total = total + rec.transport.round_trips
    if i > 1 then
      -- the run: its device state, the removal of its own files and who else runs on the board (a shared
      -- board's leases: docs/devices.md "A shared board") all in its one answer
      T.eq(rec.transport.round_trips, 1, ("%s: point %d is one round trip"):format(what, i))
      T.eq(rec.transport.connects, 0, what .. ": no new connection")
    end
  end
  T.eq(recs[1].transport.connects, 1, what .. ": one connection, made by the first point")
  T.ok(recs[1].transport.connect_ms >= 4 * 2 * DELAY_MS, what .. ": connecting took at least 4 round trips' time")
  -- odp counts turnarounds at its socket, the relay DELAY ms away. A sweep without uploads (requests and answers
  -- in turn): the two agree within one (a packet of the board's crossing odp's on the link). An upload streams
  -- into the helper's channel while sshd sends a window adjust every ~100 KB it passes on: libssh2 reads each as
  -- it comes, between the packets it sends, and odp counts each (how many depends on the moment each arrives:
  -- 11 to 26 more than the wire in runs of this test); the relay sees them arrive in bursts. A slow odp (ASan)
  -- reads several at once between its packets, and then counts fewer than the relay (44 against 48). Each adjust
  -- is one turnaround at most that one side counts and the other does not: the two differ by no more than the
  -- adjusts (sshd's ~100 KB each); FRESH_SWEEP_MAX bounds the wire's count.
  if uploads then
    local up = 0
    for _, rec in ipairs(recs) do up = up + rec.transport.bytes_up end
    T.ok(math.abs(wire.round_trips - (total + AFTER_LAST_RECORD)) <= 1 + up // (100 * 1000), ("%s: the relay " ..
      "counted %d round trips, the records %d and the close %d, with %d bytes up"):format(what, wire.round_trips,
      total, AFTER_LAST_RECORD, up))
  else
    T.ok(math.abs(wire.round_trips - (total + AFTER_LAST_RECORD)) <= 1, ("%s: the relay counted %d round trips, " ..
      "the records %d and the close %d"):format(what, wire.round_trips, total, AFTER_LAST_RECORD))
  end
  local up, down = 0, 0
  for _, rec in ipairs(recs) do up, down = up + rec.transport.bytes_up, down + rec.transport.bytes_down end
  -- the bytes after the last record: the directory's removal and the channel's close, a few hundred
  T.ok(wire.bytes_up >= up and wire.bytes_up - up < 1024, ("%s: bytes up %d on the wire, %d in the records"):format(
    what, wire.bytes_up, up))
  T.ok(wire.bytes_down >= down and wire.bytes_down - down < 1024, ("%s: bytes down %d on the wire, %d in the records")
    :format(what, wire.bytes_down, down))
  return recs[1].transport.round_trips
end

T.with_real_runner("round trips: odp's count of each point equals the relay's on the wire; a point is one", function(runner)
  local rel, kh = relay()
  local remote = srv.remote_dir .. "/link"
  local recs, wire, requests, out = sweep(rel, kh, remote, 10, runner, nil, true)
  check_sweep(recs, wire, "a fresh board", true)
  -- sshd's 2 MB window: the upload is a few round trips, and nothing is hinted about it (dropbear_test: it is)
  T.eq(out:find("hint: uploading", 1, true), nil, "no small-window hint through OpenSSH")
  -- the chunks go as LZ4 blocks (protocol 8): the real runner's 7.5 MB are ~2.6 MB on the link, helper included
  local up, files = 0, sys.stat(runner).size + sys.stat(T.root() .. "/tests/fixtures/pte/add_arduino.pte").size
  for _, rec in ipairs(recs) do up = up + rec.transport.bytes_up end
  T.ok(up < files * 0.6, ("a fresh board: %d bytes up for %d bytes of runner and model"):format(up, files))
  T.ok(wire.round_trips <= FRESH_SWEEP_MAX, ("a fresh board: %d round trips on the wire for 10 points"):format(
    wire.round_trips))
  io.stderr:write(("a fresh board, 10 points: %d round trips on the wire\n"):format(wire.round_trips))
  -- one exec: it installs the helper (its bytes on the exec's stdin, checked by their sha256) and starts it;
  -- the preflight, the uploads and the points go through it (no SFTP subsystem)
  T.eq(requests, 1, "a fresh board: one exec request in sshd's log, the helper installed in it")
  recs, wire, requests = sweep(rel, kh, remote, 10, runner)
  local start = check_sweep(recs, wire, "a board with the helper")
  T.eq(requests, 1, "a board with the helper: one exec request in sshd's log for the whole sweep")
  -- the session start (connection, preflight, the helper's start, the hash checks) and the first point's run
  T.ok(start <= SESSION_START_MAX, ("session start and first point: %d round trips"):format(start))
  io.stderr:write(("session start and first point: %d round trips\n"):format(start))
end)

T.with_real_runner("a single run (odp run scripts/rpi5.lua -n 1) on a set-up board costs a session's start", function(runner)
  local rel, kh = relay()
  local remote = srv.remote_dir .. "/single"
  sweep(rel, kh, remote, 1, runner) -- the helper, the runner and the model onto the board
  local out = tmp .. "/single.jsonl"
  local r = proc.run { argv = { odp, "run", T.root() .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(rel.port), "--identity", srv.identity, "--known-hosts", kh, "--remote-dir", remote,
    "--runner", runner, "--model", T.root() .. "/tests/fixtures/pte/add_arduino.pte", "-n", "1", "--out", out,
    "--runs-dir", tmp .. "/runs", "-q" }, timeout = 600 }
  T.eq(r.status, 0, r.stderr)
  local rec = records(out)[1]
  T.ok(rec and rec.ok and rec.transport, "its record, with its transport")
  T.ok(rec.transport.round_trips <= SESSION_START_MAX, ("a single run: %d round trips"):format(
    rec.transport.round_trips))
  io.stderr:write(("a single run: %d round trips\n"):format(rec.transport.round_trips))
end)

T.with_real_runner("a pipelined sweep: the same records as one point at a time, the board not waiting on the link " ..
  "between points (counted on the board's clock)", function(runner)
  -- a relay of its own with a round trip far above this machine's jitter between a run's end and the next
  -- one's start, and the runner in a script that prints the board's clock (ns) on stderr as it starts and ends
  local PIPE_DELAY_MS, N = 100, 8
  local rel = srv:relay(PIPE_DELAY_MS, tmp)
  -- the run lasts 0.3 s more than the runner: longer than what odp does with a point's answer, even on a loaded
  -- machine
  local timed = clock.runner(tmp .. "/timed_runner.sh", runner, 0.3)
  local remote = srv.remote_dir .. "/pipe"
  sweep(rel, rel.known_hosts, remote, 1, timed) -- the board gets the helper, the runner and the model: both start warm
  local one = sweep(rel, rel.known_hosts, remote, N, timed, nil, nil, false)
  local piped = sweep(rel, rel.known_hosts, remote, N, timed, nil, nil, true)
  -- The relay's turnarounds cannot tell the two apart: it counts one whenever the board's bytes follow odp's, and
  -- a request that leaves while the run before it goes makes its own. The board's clock can (board_clock.lua).
  clock.check(one, piped, 2 * PIPE_DELAY_MS, "ssh")
  rel.close()
end)

T.with_real_runner("-v prints each point's transport: the numbers its record has", function(runner)
  local rel, kh = relay()
  local recs, _, _, said = sweep(rel, kh, srv.remote_dir .. "/verbose", 3, runner, nil, true)
  local lines = {}
  for rt, up, down in said:gmatch("transport: (%d+) round trips, (%d+) B up, (%d+) B down") do
    lines[#lines + 1] = { tonumber(rt), tonumber(up), tonumber(down) }
  end
  T.eq(#lines, 3, "one line a point")
  for i, rec in ipairs(recs) do
    T.eq(lines[i], { rec.transport.round_trips, rec.transport.bytes_up, rec.transport.bytes_down })
  end
  T.match(said, "connected in %d+ ms", "the first point's says how long connecting took")
end)

T.with_real_runner("a login shell that takes 0.3 s (~/.bashrc): a 10-point sweep pays it once", function(runner)
  -- bash reads ~/.bashrc for the commands sshd runs (Debian builds it so); a pyenv or conda init there costs
  -- ~0.45 s each: odp's one exec per board session pays it once
  local user = sshd.ensure_user("odpslowrc")
  local home = sshd.sh("getent passwd " .. user):match("^[^:]*:[^:]*:[^:]*:[^:]*:[^:]*:([^:]*):")
  sshd.sh(("usermod -s /bin/bash %s && printf 'echo x >> %s/bashrc.count\\nsleep 0.3\\n' > %s/.bashrc && " ..
    "rm -f %s/bashrc.count && chown %s %s/.bashrc"):format(user, home, home, home, user, home))
  local remote = srv.remote_dir .. "/slowrc"
  sshd.sh(("mkdir -p %s && chown %s %s"):format(remote, user, remote))
  local rel, kh = relay()
  local function shells() return #(sshd.sh(("cat %s/bashrc.count 2>/dev/null || true"):format(home)):gsub("[^\n]", "")) end
  local _, _, requests = sweep(rel, kh, remote, 10, runner, user)
  local fresh = shells()
  T.ok(fresh >= 1, "the account's ~/.bashrc ran (bash read it for sshd's commands): the counts below can fail")
  T.eq(requests, 1, "a fresh board: one exec request")
  T.eq(fresh, 1, "a fresh board: the sweep, the helper's install included, ran ~/.bashrc once")
  local recs
  recs, _, requests = sweep(rel, kh, remote, 10, runner, user)
  T.eq(#recs, 10)
  T.eq(shells() - fresh, 1, "a board with the helper: the 10-point sweep ran ~/.bashrc once")
  T.eq(requests, 1)
end)

T.done()
