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

local srv = sshd.start()
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

local function odp_sweep(relay, rdir, points)
  runs = runs + 1
  local values = {}
  for n = 1, points do values[n] = tostring(n) end
  local out = ("%s/s%d.jsonl"):format(dir, runs)
  local s = timed(function()
    local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua",
      "--host", dest, "--port", tostring(relay.port), "--identity", srv.identity, "--known-hosts", relay.known_hosts,
      "--remote-dir", rdir, "--runner", runner, "--model", model, "-p", "num_executions=" .. table.concat(values, ","),
      "--out", out, "--runs-dir", dir .. "/runs", "-q" }, timeout = 900 })
    assert(r.ok, "odp sweep failed: " .. r.stderr)
  end)
  local rt = 0
  for line in io.lines(out) do rt = rt + json.decode(line).transport.round_trips end
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
local function odp_single(relay, rdir)
  runs = runs + 1
  return timed(function()
    local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/rpi5.lua", "--host", dest, "--port",
      tostring(relay.port), "--identity", srv.identity, "--known-hosts", relay.known_hosts, "--remote-dir", rdir,
      "--runner", runner, "--model", model, "-n", "1", "--out", ("%s/one%d.jsonl"):format(dir, runs), "--runs-dir",
      dir .. "/runs", "-q" }, timeout = 300 })
    assert(r.ok, "odp run failed: " .. r.stderr)
  end)
end

-- the same by hand: one ssh command (no ControlMaster) into the directory a loop sweep left
local function ssh_single(relay, ldir)
  local base = ("-o BatchMode=yes -o UserKnownHostsFile=%s -i %s"):format(relay.known_hosts, srv.identity)
  return timed(function()
    sh(("ssh %s -p %d %s 'cd %s && /usr/bin/time -v ./%s --model_path add_arduino.pte --num_executions 1 " ..
      ">/dev/null 2>&1'"):format(base, relay.port, dest, ldir, runner:match("[^/]+$")))
  end)
end

local ok, err = pcall(function()
  local single = { odp = {}, ssh = {} } -- [delay] = median wall time of one run
  local kinds = { "odp fresh", "odp again", "loop" }
  -- wall[kind][delay][points] (s); counted[kind][delay][points]: odp's round trips (its records); wire[...]: the
  -- relay's count of the sweep's connection (the last round's)
  local wall, counted, wire = {}, {}, {}
  for _, k in ipairs(kinds) do wall[k], counted[k], wire[k] = {}, {}, {} end
  for _, d in ipairs(DELAYS) do
    local relay = srv:relay(d, dir)
    for _, k in ipairs(kinds) do wall[k][d], counted[k][d], wire[k][d] = {}, {}, {} end
    for _, p in ipairs(POINTS) do
      local got = { ["odp fresh"] = {}, ["odp again"] = {}, loop = {} }
      for round = 1, ROUNDS do -- interleaved, so a change in the machine's load weighs on all three alike
        local rdir = ("%s/odp-%d-%d-%d"):format(srv.remote_dir, d, p, round)
        got["odp fresh"][round], counted["odp fresh"][d][p], wire["odp fresh"][d][p] = odp_sweep(relay, rdir, p)
        got["odp again"][round], counted["odp again"][d][p], wire["odp again"][d][p] = odp_sweep(relay, rdir, p)
        local ls, _, lw = loop_sweep(relay, ("%s/loop-%d-%d-%d"):format(srv.remote_dir, d, p, round), p)
        got.loop[round], wire.loop[d][p] = ls, lw
      end
      for _, k in ipairs(kinds) do wall[k][d][p] = stats.percentile(got[k], 50) end
    end
    local one = { odp = {}, ssh = {} }
    for round = 1, ROUNDS do
      one.odp[round] = odp_single(relay, ("%s/odp-%d-%d-1"):format(srv.remote_dir, d, POINTS[1]))
      one.ssh[round] = ssh_single(relay, ("%s/loop-%d-%d-1"):format(srv.remote_dir, d, POINTS[1]))
    end
    single.odp[d], single.ssh[d] = stats.percentile(one.odp, 50), stats.percentile(one.ssh, 50)
    relay.close()
  end
  print(("SSH sweep over a delaying relay, real runner; one-way delays %s ms, sweeps of %s points, medians of " ..
    "%d rounds"):format(table.concat(DELAYS, "/"), table.concat(POINTS, "/"), ROUNDS))
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
    local cells = {}
    for _, d in ipairs(DELAYS) do
      for _, p in ipairs(POINTS) do
        cells[#cells + 1] = ("%g ms/%d pts %.2f s, %d rt on the wire%s"):format(d, p, wall[k][d][p], wire[k][d][p],
          counted[k][d][p] and (" (%d counted by odp)"):format(counted[k][d][p]) or "")
      end
    end
    print(("  %-10s on the wire: %5.1f round trips fixed, %4.2f per point; from wall times: %5.1f fixed, %5.2f " ..
      "per point\n      %s"):format(k, wfixed, wper, fixed_rt, per_rt, table.concat(cells, "; ")))
  end
  local xs, os_, ss = {}, {}, {}
  for i, d in ipairs(DELAYS) do xs[i], os_[i], ss[i] = rtt[i], single.odp[d], single.ssh[d] end
  local _, odp_rt = fit(xs, os_)
  local _, ssh_rt = fit(xs, ss)
  local cells = {}
  for _, d in ipairs(DELAYS) do
    cells[#cells + 1] = ("%g ms: odp %.2f s, ssh %.2f s"):format(d, single.odp[d], single.ssh[d])
  end
  print(("  a single run on the set-up board: odp run -n 1 %.1f round trips of wall time, one ssh + time -v " ..
    "%.1f\n      %s"):format(odp_rt, ssh_rt, table.concat(cells, "; ")))
  local big, last = POINTS[#POINTS], DELAYS[#DELAYS]
  print(("  %d points at %g ms RTT: the loop takes %.2fx odp fresh, %.2fx odp again"):format(big, 2 * last,
    wall.loop[last][big] / wall["odp fresh"][last][big], wall.loop[last][big] / wall["odp again"][last][big]))
end)
srv:close()
sh(("rm -rf %s"):format(dir))
if not ok then error(err, 0) end
