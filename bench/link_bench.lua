-- Benchmark (bench/link_bench.sh, issue 38): what a sweep costs on a link with a round-trip time. A private
-- loopback sshd behind tests/c/delay_relay (every byte held D ms each way; netem is not available here), the real
-- runner, at one-way delays DELAYS (default 0,25,50 ms) and sweeps of POINTS (default 2,10) points:
--   odp fresh:  odp run scripts/sweep.lua --flow scripts/rpi5.lua ... on a new remote dir (helper, runner, model pushed)
--   odp again:  the same sweep on the board as that left it (a user's next sweep)
--   loop:       what it replaces: one OpenSSH ControlMaster connection, scp of runner and model once, then one
--               `ssh ... /usr/bin/time -v ./executor_runner --num_executions N` per point
-- Wall time = fixed + points x per-point. Fitted over the points at each delay, then over the delays: the slope of
-- each part over the round-trip time (2 D) is its cost in round trips beyond what the runner itself takes.
-- Also odp's own counted round trips (the records' transport). ROUNDS= (default 3) rounds per cell, medians.
-- And a single run, what a user types once: `odp run scripts/rpi5.lua -n 1` on the set-up board against one
-- `ssh host /usr/bin/time -v ./executor_runner ...` (its own connection), each in round trips of wall time
-- (the slope over the RTT).
-- Through ssh's ControlMaster (docs/devices.md): the same sweep ("odp master") and single run with an ssh_config
-- whose ControlMaster odp starts once per delay and then rides, against one `ssh ... time -v` through the same
-- master (what a user with ControlMaster types). The master's connection carries many sweeps, so their counts are
-- odp's own (the records'), not the relay's.
-- SERVER=dropbear: the board's server is Dropbear (tests/lib/sshd.lua's sshd.dropbear) instead of OpenSSH, its
-- receive window DROPBEAR_W bytes (-W; Dropbear's default 24576): what a fresh board's upload costs there, odp
-- and the scp loop alike (docs/helper-protocol.md).
-- Prints the table bench/README.md quotes.
local sshd = require("sshd")
local sys = require("odp.sys")
local proc = require("odp.proc")
local json = require("odp.core.json")

local function list(env, default)
  local out = {}
  for v in (os.getenv(env) or default):gmatch("[^,]+") do out[#out + 1] = tonumber(v) end
  return out
end
local DELAYS, POINTS = list("DELAYS", "0,25,50"), list("POINTS", "2,10")
local ROUNDS = tonumber(os.getenv("ROUNDS") or "3") -- each cell is the median of its rounds
local stats = require("odp.core.stats")
local root = require("odp.host").root
local odp = require("odp.host").argv[0]
local runner = os.getenv("ODP_REAL_RUNNER")
if not runner or not sys.stat(runner) then print("skipped: set ODP_REAL_RUNNER to a real executor_runner") return end
local model = root .. "/tests/fixtures/pte/add_arduino.pte"

local SERVER = os.getenv("SERVER") or "openssh"
assert(SERVER == "openssh" or SERVER == "dropbear", "SERVER: openssh or dropbear")
local srv = SERVER == "dropbear" and sshd.dropbear { window = tonumber(os.getenv("DROPBEAR_W") or "") } or sshd.start()
local dir = sshd.sh("mktemp -d /tmp/odp-bench.XXXXXX"):match("%S+")
local sh = sshd.sh
local dest = srv.user .. "@127.0.0.1"

-- least squares y = a + b x -> a, b
local function fit(xs, ys)
  local n, sx, sy, sxx, sxy = #xs, 0, 0, 0, 0
  for i = 1, n do sx, sy, sxx, sxy = sx + xs[i], sy + ys[i], sxx + xs[i] ^ 2, sxy + xs[i] * ys[i] end
  local b = (n * sxy - sx * sy) / (n * sxx - sx ^ 2)
  return (sy - b * sx) / n, b
end

local function timed(fn) local t = sys.now(); fn(); return sys.now() - t end
local runs = 0

-- The relay's count of the connection a sweep just closed (each sweep is one: odp's, or the loop's ControlMaster)
local served = {}
local function on_wire(relay)
  served[relay] = (served[relay] or 0) + 1
  local c = relay.connections(served[relay])[served[relay]]
  return c and c.round_trips
end

-- The ssh_config of the board behind relay, with a ControlMaster (ControlPersist: it outlives each odp). -> path
local function master_config(relay)
  local path = ("%s/config-%d"):format(dir, relay.port)
  local f = assert(io.open(path, "w"))
  f:write(("Host board\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n" ..
    "  UserKnownHostsFile %s\n  BatchMode yes\n  ControlMaster auto\n  ControlPath %s/odpcm-%%C\n" ..
    "  ControlPersist 300\n"):format(relay.port, srv.user, srv.identity, relay.known_hosts, dir))
  f:close()
  return path
end

-- the board's options for odp: directly, or through the ControlMaster of config
local function board_args(relay, config)
  if config then return { "--host", "board", "--ssh-config", config } end
  return { "--host", dest, "--port", tostring(relay.port), "--identity", srv.identity, "--known-hosts",
    relay.known_hosts }
end

local function odp_sweep(relay, rdir, points, config)
  runs = runs + 1
  local values = {}
  for n = 1, points do values[n] = tostring(n) end
  local out = ("%s/s%d.jsonl"):format(dir, runs)
  local s = timed(function()
    local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua",
      "--remote-dir", rdir, "--runner", runner, "--model", model, "-p", "num_executions=" .. table.concat(values, ","),
      "--out", out, "--runs-dir", dir .. "/runs", "-q" }
    for _, a in ipairs(board_args(relay, config)) do argv[#argv + 1] = a end
    local r = assert(proc.run { argv = argv, timeout = 900 })
    if not r.ok then -- the first failed point's record says why
      local first = io.open(out) and json.decode(io.open(out):read("l") or "null")
      error(("odp sweep failed: %s%s"):format(r.stderr, first and first.error and first.error.message or ""), 0)
    end
  end)
  local rt = 0
  for line in io.lines(out) do rt = rt + json.decode(line).transport.round_trips end
  if config then return s, rt, rt end -- the master's connection is not closed by the sweep
  return s, rt, on_wire(relay)
end

local function loop_sweep(relay, ldir, points)
  local cm = ("-o ControlMaster=auto -o ControlPath=%s/cm-%%C -o ControlPersist=120"):format(dir)
  local base = ("-o BatchMode=yes -o UserKnownHostsFile=%s -i %s %s"):format(relay.known_hosts, srv.identity, cm)
  local ssh, scp = ("ssh %s -p %d"):format(base, relay.port), ("scp %s -P %d"):format(base, relay.port)
  local s = timed(function()
    sh(("%s %s 'mkdir -p %s'"):format(ssh, dest, ldir))
    sh(("%s -q %s %s %s:%s/"):format(scp, runner, model, dest, ldir))
    for n = 1, points do
      sh(("%s %s 'cd %s && /usr/bin/time -v ./%s --model_path add_arduino.pte --num_executions %d >/dev/null 2>&1'")
        :format(ssh, dest, ldir, runner:match("[^/]+$"), n))
    end
  end)
  sh(("%s -O exit %s 2>/dev/null || true"):format(ssh, dest))
  return s, nil, on_wire(relay)
end

-- odp run -n 1 on a board set up by a sweep: its wall time
local function odp_single(relay, rdir, config)
  runs = runs + 1
  return timed(function()
    local argv = { odp, "run", root .. "/scripts/rpi5.lua", "--remote-dir", rdir, "--runner", runner, "--model", model,
      "-n", "1", "--out", ("%s/one%d.jsonl"):format(dir, runs), "--runs-dir", dir .. "/runs", "-q" }
    for _, a in ipairs(board_args(relay, config)) do argv[#argv + 1] = a end
    local r = assert(proc.run { argv = argv, timeout = 300 })
    assert(r.ok, "odp run failed: " .. r.stderr)
  end)
end

-- the same by hand: one ssh command into the directory a loop sweep left (its own connection, or through the
-- ControlMaster of config)
local function ssh_single(relay, ldir, config)
  local base = config and ("-F %s board"):format(config) or ("-o BatchMode=yes -o UserKnownHostsFile=%s -i %s -p %d %s")
    :format(relay.known_hosts, srv.identity, relay.port, dest)
  return timed(function()
    sh(("ssh %s 'cd %s && /usr/bin/time -v ./%s --model_path add_arduino.pte --num_executions 1 " ..
      ">/dev/null 2>&1'"):format(base, ldir, runner:match("[^/]+$")))
  end)
end

local ok, err = pcall(function()
  -- [delay] = median wall time of one run: odp's and ssh's own connections, and through a ControlMaster
  local single = { odp = {}, ssh = {}, odp_cm = {}, ssh_cm = {} }
  local kinds = { "odp fresh", "odp again", "odp master", "loop" }
  -- wall[kind][delay][points] (s); counted[kind][delay][points]: odp's round trips (its records); wire[...]: the
  -- relay's count of the sweep's connection (the last round's)
  local wall, counted, wire = {}, {}, {}
  for _, k in ipairs(kinds) do wall[k], counted[k], wire[k] = {}, {}, {} end
  for _, d in ipairs(DELAYS) do
    local relay = srv:relay(d, dir)
    local config = master_config(relay)
    for _, k in ipairs(kinds) do wall[k][d], counted[k][d], wire[k][d] = {}, {}, {} end
    for _, p in ipairs(POINTS) do
      local got = { ["odp fresh"] = {}, ["odp again"] = {}, ["odp master"] = {}, loop = {} }
      for round = 1, ROUNDS do -- interleaved, so a change in the machine's load weighs on all alike
        local rdir = ("%s/odp-%d-%d-%d"):format(srv.remote_dir, d, p, round)
        got["odp fresh"][round], counted["odp fresh"][d][p], wire["odp fresh"][d][p] = odp_sweep(relay, rdir, p)
        got["odp again"][round], counted["odp again"][d][p], wire["odp again"][d][p] = odp_sweep(relay, rdir, p)
        if round == 1 and p == POINTS[1] then odp_sweep(relay, rdir, 1, config) end -- odp starts the master
        got["odp master"][round], counted["odp master"][d][p], wire["odp master"][d][p] =
          odp_sweep(relay, rdir, p, config)
        local ls, _, lw = loop_sweep(relay, ("%s/loop-%d-%d-%d"):format(srv.remote_dir, d, p, round), p)
        got.loop[round], wire.loop[d][p] = ls, lw
      end
      for _, k in ipairs(kinds) do wall[k][d][p] = stats.percentile(got[k], 50) end
    end
    local one = { odp = {}, ssh = {}, odp_cm = {}, ssh_cm = {} }
    local rdir, ldir = ("%s/odp-%d-%d-1"):format(srv.remote_dir, d, POINTS[1]),
      ("%s/loop-%d-%d-1"):format(srv.remote_dir, d, POINTS[1])
    for round = 1, ROUNDS do
      one.odp[round] = odp_single(relay, rdir)
      one.ssh[round] = ssh_single(relay, ldir)
      one.odp_cm[round] = odp_single(relay, rdir, config)
      one.ssh_cm[round] = ssh_single(relay, ldir, config)
    end
    for k, v in pairs(one) do single[k][d] = stats.percentile(v, 50) end
    sh(("ssh -F %s -O exit board 2>/dev/null || true"):format(config))
    relay.close()
  end
  print(("SSH sweep over a delaying relay (%s), real runner; one-way delays %s ms, sweeps of %s points, medians of " ..
    "%d rounds"):format(SERVER == "dropbear" and ("Dropbear, window " .. (os.getenv("DROPBEAR_W") or "24576 (its default)"))
    or "OpenSSH", table.concat(DELAYS, "/"), table.concat(POINTS, "/"), ROUNDS))
  local rtt = {}
  for i, d in ipairs(DELAYS) do rtt[i] = 2 * d / 1000 end
  for _, k in ipairs(kinds) do
    local fixed, per = {}, {}
    for i, d in ipairs(DELAYS) do
      local xs, ys = {}, {}
      for j, p in ipairs(POINTS) do xs[j], ys[j] = p, wall[k][d][p] end
      fixed[i], per[i] = fit(xs, ys)
    end
    local _, fixed_rt = fit(rtt, fixed)
    local _, per_rt = fit(rtt, per)
    -- the same split from the relay's counts at the largest delay: not disturbed by this machine's load
    local last, xs, ys = DELAYS[#DELAYS], {}, {}
    for j, p in ipairs(POINTS) do xs[j], ys[j] = p, wire[k][last][p] end
    local wfixed, wper = fit(xs, ys)
    local cells, master = {}, k == "odp master"
    for _, d in ipairs(DELAYS) do
      for _, p in ipairs(POINTS) do
        cells[#cells + 1] = master and ("%g ms/%d pts %.2f s, %d rt counted by odp"):format(d, p, wall[k][d][p],
          counted[k][d][p]) or ("%g ms/%d pts %.2f s, %d rt on the wire%s"):format(d, p, wall[k][d][p], wire[k][d][p],
          counted[k][d][p] and (" (%d counted by odp)"):format(counted[k][d][p]) or "")
      end
    end
    print(("  %-10s %s: %5.1f round trips fixed, %4.2f per point; from wall times: %5.1f fixed, %5.2f " ..
      "per point\n      %s"):format(k, master and "counted by odp" or "on the wire", wfixed, wper, fixed_rt, per_rt,
      table.concat(cells, "; ")))
  end
  local slope = {}
  for k, per_delay in pairs(single) do
    local ys = {}
    for i, d in ipairs(DELAYS) do ys[i] = per_delay[d] end
    _, slope[k] = fit(rtt, ys)
  end
  local cells = {}
  for _, d in ipairs(DELAYS) do
    cells[#cells + 1] = ("%g ms: odp %.2f s, ssh %.2f s; through the master odp %.2f s, ssh %.2f s"):format(d,
      single.odp[d], single.ssh[d], single.odp_cm[d], single.ssh_cm[d])
  end
  print(("  a single run on the set-up board, in round trips of wall time: odp run -n 1 %.1f, one ssh + time -v " ..
    "%.1f; through a ControlMaster: odp %.1f, ssh %.1f\n      %s"):format(slope.odp, slope.ssh, slope.odp_cm,
    slope.ssh_cm, table.concat(cells, "; ")))
  local big, last = POINTS[#POINTS], DELAYS[#DELAYS]
  print(("  %d points at %g ms RTT: the loop takes %.2fx odp fresh, %.2fx odp again"):format(big, 2 * last,
    wall.loop[last][big] / wall["odp fresh"][last][big], wall.loop[last][big] / wall["odp again"][last][big]))
end)
srv:close()
sh(("rm -rf %s"):format(dir))
if not ok then error(err, 0) end
