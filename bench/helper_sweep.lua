-- Benchmark (bench/helper_sweep.sh): a 10-point sweep with the real ExecuTorch runner over a private loopback
-- sshd (tests/lib/sshd.lua), the command a user types against the loop a user would otherwise write:
--   odp:  odp run scripts/sweep.lua --flow scripts/rpi5.lua --host ... -p num_executions=1,...,10 --out s.jsonl
--   loop: scp the runner and model once, then one `ssh ... /usr/bin/time -v ./executor_runner
--         --num_executions N` per point, all through one OpenSSH ControlMaster connection
-- Rounds alternate the two (odp first, then the loop; ROUNDS=, POINTS= override) on fresh remote dirs, so both
-- push once per round; each round also runs odp's sweep a second time on the board as its first sweep left it
-- (the helper, runner and model already there: a user's next sweep), while the loop copies every time. Prints the medians, the ratio, and odp's overhead per point beyond the runner's own
-- wall time (the runner alone under odp-rusage, the same points, right after odp's sweep).
local sshd = require("sshd")
local sys = require("odp.sys")
local proc = require("odp.proc")
local stats = require("odp.core.stats")

local ROUNDS = tonumber(os.getenv("ROUNDS") or "5")
local POINTS = tonumber(os.getenv("POINTS") or "10")
local root = require("odp.host").root
local odp = require("odp.host").argv[0]
local runner = os.getenv("ODP_REAL_RUNNER")
if not runner or not sys.stat(runner) then print("skipped: set ODP_REAL_RUNNER to a real executor_runner") return end
local model = root .. "/tests/fixtures/pte/add_arduino.pte"

local srv = sshd.start()
local dir = sshd.sh("mktemp -d /tmp/odp-bench.XXXXXX"):match("%S+")
local sh = sshd.sh
local dest = srv.user .. "@127.0.0.1"
local cm = ("-o ControlMaster=auto -o ControlPath=%s/cm-%%C -o ControlPersist=120"):format(dir)
local sshbase = ("-o BatchMode=yes -o UserKnownHostsFile=%s -i %s -p %d %s"):format(srv.known_hosts, srv.identity,
  srv.port, cm)
local scpbase = ("-o BatchMode=yes -o UserKnownHostsFile=%s -i %s -P %d %s"):format(srv.known_hosts, srv.identity,
  srv.port, cm)
local values = {}
for n = 1, POINTS do values[n] = tostring(n) end

local ok, err = pcall(function()
  local function timed(fn) local t = sys.now(); fn(); return sys.now() - t end
  local odp_s, warm_s, loop_s, overhead = {}, {}, {}, {}
  local function odp_sweep(rdir, out)
    return timed(function()
      local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua",
        "--host", dest, "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts,
        "--remote-dir", rdir, "--runner", runner, "--model", model, "-p", "num_executions=" .. table.concat(values, ","),
        "--out", out, "--runs-dir", dir .. "/runs", "-q" }, timeout = 600 })
      assert(r.ok, "odp sweep failed: " .. r.stderr)
    end)
  end
  for round = 1, ROUNDS do
    local rdir = ("%s/odp%d"):format(srv.remote_dir, round)
    local out = ("%s/s%d.jsonl"):format(dir, round)
    odp_s[round] = odp_sweep(rdir, out)
    -- the same sweep again on the board as the first left it (helper, runner and model there): a user's next sweep
    warm_s[round] = odp_sweep(rdir, ("%s/w%d.jsonl"):format(dir, round))
    -- the runner's own wall time for the same points, as odp-rusage measures it (the loopback board is this
    -- machine): what a point cannot cost less than
    local runner_s = 0
    for n = 1, POINTS do
      local r = assert(proc.run { argv = { root .. "/build/odp-rusage-x86_64", runner, "--model_path", model,
        "--num_executions", tostring(n) }, cwd = dir })
      runner_s = runner_s + assert(require("odp.target.rusage").parse(r.stderr)).wall_s
    end
    overhead[round] = (odp_s[round] - runner_s) / POINTS
    local ldir = ("%s/loop%d"):format(srv.remote_dir, round)
    loop_s[round] = timed(function()
      sh(("ssh %s %s 'mkdir -p %s'"):format(sshbase, dest, ldir))
      sh(("scp -q %s %s %s %s:%s/"):format(scpbase, runner, model, dest, ldir))
      for n = 1, POINTS do
        sh(("ssh %s %s 'cd %s && /usr/bin/time -v ./%s --model_path add_arduino.pte --num_executions %d >/dev/null 2>&1'")
          :format(sshbase, dest, ldir, runner:match("[^/]+$"), n))
      end
    end)
    sh(("ssh %s -O exit %s 2>/dev/null || true"):format(sshbase, dest))
  end
  local o, w, l = stats.percentile(odp_s, 50), stats.percentile(warm_s, 50), stats.percentile(loop_s, 50)
  print(("SSH sweep, %d points, real runner, median of %d rounds (first connection and pushes included):")
    :format(POINTS, ROUNDS))
  print(("  odp run scripts/sweep.lua --flow scripts/rpi5.lua, a fresh board    %6.2f s"):format(o))
  print(("  the same again, the board as that left it (helper, files there)   %6.2f s"):format(w))
  print(("  scp + ssh loop through ControlMaster                              %6.2f s   odp is %.1fx faster " ..
    "on a fresh board, %.1fx on a set-up one (goal >= 3x)"):format(l, l / o, l / w))
  print(("  odp's wall time per point beyond the runner's own: %.0f ms (median of rounds; connection, pushes, " ..
    "two device-state snapshots, records included)")
    :format(stats.percentile(overhead, 50) * 1000))
  local function list(xs) local t = {} for i, x in ipairs(xs) do t[i] = ("%.2f"):format(x) end return table.concat(t, " ") end
  print(("  rounds: odp fresh %s s; odp set-up %s s; loop %s s"):format(list(odp_s), list(warm_s), list(loop_s)))
end)
srv:close()
sh(("rm -rf %s"):format(dir))
if not ok then error(err, 0) end
