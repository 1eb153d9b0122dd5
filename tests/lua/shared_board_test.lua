-- A board is shared: two odps on one remote dir never run, read or remove each other's files, and say what they
-- found. Real odps against a real OpenSSH sshd on 127.0.0.1 (tests/lib/sshd.lua); runners told apart by what they
-- measure, not by name: copies of the test runner (tests/c/fake_runner.c) that carry their own per-execution time
-- in their file (a `ODP_FAKE_ITER_US=N` line appended), so a record holding the other runner's numbers shows it.
-- "Another machine" is an odp in its own PID namespace (`unshare -p -f --mount-proc`): it cannot see this
-- machine's pids, as another host cannot. A noexec remote dir is a tmpfs mounted noexec in the private mount
-- namespace sshd runs in (nothing leaks to this machine). Every case checks the records, the exit status, the
-- one line said, and what is left on the board and in odp's temporary directory.
local T = require("t")
local sshd = require("sshd")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sys = require("odp.sys")
local shell = require("odp.target.shell")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local etdump_fixture = root .. "/tests/fixtures/etdump/add_n10.etdump"
local q, sh = sshd.quote, sshd.sh

local function read(path) return (sys.read_file(path)) end

local records = T.records

local function count(s, pattern) return select(2, s:gsub(pattern, "")) end

local function wait_until(what, timeout, f)
  local v
  if not sshd.wait_for(function() v = f() return v end, timeout) then error(("%s: not within %ss"):format(what, timeout), 0) end
  return v
end

-- A copy of the test runner named executor_runner in a directory of its own, whose executions each take iter_us
-- microseconds (its own bytes say so; extra knobs too): -> its path.
local function runner_copy(iter_us, extra)
  local dir = T.tmpdir()
  local path = dir .. "/executor_runner"
  T.write(path, read(build .. "/tests/fake_runner") .. ("\nODP_FAKE_ITER_US=%d\n%s"):format(iter_us, extra or ""))
  sys.chmod(path, tonumber("755", 8))
  return path
end

local srv = sshd.start()

-- odp's argv for a sweep of points (a -p value) with runner on remote, its records in out.
local function sweep_argv(runner, remote, points, out, runs, extra)
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua",
    "--host", srv.user .. "@127.0.0.1", "--port", tostring(srv.port), "--identity", srv.identity,
    "--known-hosts", srv.known_hosts, "--runner", runner, "--model", add, "--remote-dir", remote,
    "--runs-dir", runs, "-p", points, "--out", out, "--no-history" }
  table.move(extra or {}, 1, #(extra or {}), #argv + 1, argv)
  return argv
end

-- Starts argv in the background, its output in dir/out and dir/err, its temporary files in dir/tmp ($TMPDIR);
-- prefix: words before odp (unshare). -> {pid, dir}; dir/rc when it ends.
local function background(argv, dir, prefix)
  local words = {}
  for i, a in ipairs(argv) do words[i] = q(a) end
  sh(("mkdir -p %s/tmp; ( env TMPDIR=%s/tmp %s %s >%s/out 2>%s/err & echo $! >%s/pid; wait $!; echo $? >%s/rc.tmp; " ..
    "mv %s/rc.tmp %s/rc ) >/dev/null 2>&1 &"):format(q(dir), q(dir), prefix or "", table.concat(words, " "), q(dir),
    q(dir), q(dir), q(dir), q(dir), q(dir)))
  return { pid = wait_until("the background odp's pid", 10, function() return (read(dir .. "/pid") or ""):match("%d+") end),
    dir = dir }
end

local function exit_status(job, timeout)
  return tonumber(wait_until("odp to exit", timeout or 120, function() return (read(job.dir .. "/rc") or ""):match("%d+") end))
end

-- Nothing of odp's left in a job's $TMPDIR (the sweep's lock is an flock on its --out: no file of its own).
local function no_local_debris(job)
  T.eq(sh(("ls -A %s/tmp"):format(q(job.dir))), "", "nothing left in odp's temporary directory")
end

-- What is on the board under remote, one path a line, sorted (find's view, relative).
local function board_files(remote)
  return sh(("cd %s && find . -mindepth 1 | sort"):format(q(remote)))
end

-- No odp directory left under the board's .odp/runs, no part and no runner file outside the blobs.
local function no_board_debris(remote)
  -- odp's own directory goes just after odp (odp.target.shell.close_run_dir)
  local left = board_files(remote)
  T.settles(function()
    left = board_files(remote)
    return not left:match("%./%.odp/runs/[^\n]+")
  end)
  T.eq(left:match("%./%.odp/runs/[^\n]+"), nil, "no odp directory left on the board:\n" .. left)
  T.eq(left:match("odp%-part"), nil, "no partial upload left:\n" .. left)
  T.eq(left:match("etdump"), nil, "no ETDump left:\n" .. left)
  return left
end

------------------------------------------------------------------------------------------------ staging

T.test("two odps on one remote dir with different runners of one name: each record's sha256 and numbers are its own", function()
  local remote = srv.remote_dir .. "/two"
  local fast, slow = runner_copy(100), runner_copy(8000)
  local jobs, outs = {}, {}
  local points = "num_executions=20,21,22,23,24,25"
  for i, runner in ipairs { fast, slow } do
    local dir = T.tmpdir()
    outs[i] = dir .. "/s.jsonl"
    jobs[i] = background(sweep_argv(runner, remote, points, outs[i], dir .. "/runs"), dir)
  end
  for i, job in ipairs(jobs) do
    local rc = exit_status(job)
    local err = read(job.dir .. "/err")
    T.eq(rc, 0, err)
    local recs = records(outs[i])
    T.eq(#recs, 6, "every point once: " .. err)
    local seen = {}
    local runner = i == 1 and fast or slow
    for _, r in ipairs(recs) do
      T.eq(seen[r.params.num_executions], nil, "point once"); seen[r.params.num_executions] = true
      T.eq(r.ok, true, r.error and r.error.message)
      T.eq(r.runner.sha256, sys.sha256_file(runner), "the record names its own runner")
      -- 100 us vs 8000 us per execution (the runner spins until that much wall time has passed, so the slow one
      -- can take no less): each median on its own side of 2.5 ms, with room for a loaded machine
      local p50 = r.latency_ms.p50
      if i == 1 then T.ok(p50 < 2.5, ("the fast runner's numbers: p50 %.3f ms"):format(p50))
      else T.ok(p50 > 7.9, ("the slow runner's numbers: p50 %.3f ms"):format(p50)) end
    end
    no_local_debris(job)
  end
  local left = no_board_debris(remote)
  -- the bytes stay, once each, under their sha256 for the next odp: both runners, the model
  for _, f in ipairs { fast, slow, add } do
    T.match(left, "%./%.odp/blobs/" .. sys.sha256_file(f), "the blob of " .. f)
  end
end)

T.test("a blob of the right name with other bytes is never trusted: checked by its sha256 and uploaded over", function()
  local remote = srv.remote_dir .. "/forged"
  local runner = runner_copy(100)
  local blob = remote .. "/.odp/blobs/" .. sys.sha256_file(runner)
  sh(("mkdir -p %s && cp %s %s && chown -R %s %s"):format(q(remote .. "/.odp/blobs"), q(runner_copy(8000)), q(blob),
    srv.user, q(remote)))
  local dir = T.tmpdir()
  local out = dir .. "/s.jsonl"
  local job = background(sweep_argv(runner, remote, "num_executions=20", out, dir .. "/runs"), dir)
  T.eq(exit_status(job), 0, read(dir .. "/err"))
  local r = records(out)[1]
  T.eq(r.runner.sha256, sys.sha256_file(runner))
  T.ok(r.latency_ms.p50 < 2.5, ("its own runner ran, not the 8 ms one: p50 %.3f ms"):format(r.latency_ms.p50))
  T.match(read(dir .. "/err"), "pushed executor_runner", "uploaded, not taken by name")
  T.eq(sys.sha256_file(blob), sys.sha256_file(runner), "the blob now holds the bytes its name says")
  no_board_debris(remote)
  no_local_debris(job)
end)

------------------------------------------------------------------------------------------------ cleanup

T.test("an odp of another machine (its own PID namespace) spares a live run's files; dead and expired ones go", function()
  local remote = srv.remote_dir .. "/other"
  -- a live odp whose points each take about a second, writing an ETDump each
  local slow = runner_copy(100000, "ODP_FAKE_ETDUMP=" .. etdump_fixture .. "\n")
  local adir = T.tmpdir()
  local aout = adir .. "/s.jsonl"
  local a = background(sweep_argv(slow, remote, "num_executions=10,11,12,13,14", aout, adir .. "/runs",
    { "--etdump", adir .. "/e.etdump" }), adir)
  local runs = remote .. "/.odp/runs"
  local adir_board = wait_until("the live odp's directory on the board", 60, function()
    local d = sh(("ls %s 2>/dev/null | grep '[.]%s$' || true"):format(q(runs), a.pid)):match("[^\n]+")
    return d and (runs .. "/" .. d)
  end)
  wait_until("its first record", 60, function() return #records(aout) >= 1 end)
  -- as if it were uploading now, and an expired odp of another host, a dead one of this machine and namespace
  local part = adir_board .. "/model.pte.odp-part-" .. a.pid
  local expired = runs .. "/elsewhere.0123abcd.4026531836.77"
  local mine = shell.owner():gsub("%d+$", "99999999")
  local dead = runs .. "/" .. mine
  sh(("printf x >%s && mkdir -p %s %s && printf y >%s/a.etdump && printf z >%s/b.etdump && touch -d '2 days ago' %s " ..
    "&& chown -R %s %s"):format(q(part), q(expired), q(dead), q(expired), q(dead), q(expired), srv.user, q(runs)))
  -- the other machine: its odp cannot see this one's pids
  local bdir = T.tmpdir()
  local bout = bdir .. "/s.jsonl"
  local b = background(sweep_argv(runner_copy(100), remote, "num_executions=3", bout, bdir .. "/runs"), bdir,
    "unshare -p -f --mount-proc")
  T.eq(exit_status(b), 0, read(bdir .. "/err"))
  local berr = read(bdir .. "/err")
  T.match(berr, "removed 1 file%(s%) an earlier odp left on [^\n]*elsewhere%.0123abcd[^\n]*/a%.etdump\n",
    "the expired one removed, said in one line")
  T.eq(berr:find(mine, 1, true), nil, "another machine's pid is never judged here: " .. berr)
  T.ok(sys.stat(part), "the live odp's upload spared")
  T.ok(sys.stat(dead), "the other namespace's dead odp is left for its own machine (or its lease)")
  T.eq(sys.stat(expired), nil, "the expired one is gone")
  T.eq(#records(bout), 1)
  -- the live odp went on: every point, each with its ETDump
  T.eq(exit_status(a), 0, read(adir .. "/err"))
  local recs = records(aout)
  T.eq(#recs, 5)
  for _, r in ipairs(recs) do
    T.eq(r.ok, true, r.error and r.error.message)
    T.ok(r.artifacts.etdump and r.artifacts.etdump.sha256, "its ETDump")
    T.eq(#r.warnings == 0 or not table.concat(r.warnings, " "):find("no ETDump"), true, "no ETDump lost")
  end
  -- an odp of this machine and namespace removes the dead one (its pid is gone) and nothing live
  local cdir = T.tmpdir()
  local c = background(sweep_argv(runner_copy(100), remote, "num_executions=3", cdir .. "/s.jsonl", cdir .. "/runs"),
    cdir)
  T.eq(exit_status(c), 0, read(cdir .. "/err"))
  T.match(read(cdir .. "/err"), "removed 1 file%(s%) an earlier odp left on [^\n]*99999999/b%.etdump\n")
  no_board_debris(remote)
  for _, job in ipairs { a, b, c } do no_local_debris(job) end
end)

------------------------------------------------------------------------------------------------ leases

-- The pids a record's shared_board names (a set), checking each entry is whole.
local function overlapped(r)
  local pids = {}
  for _, o in ipairs(r.shared_board or {}) do
    T.eq(o.host, sys.hostname()); T.match(o.since, "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$")
    T.eq(o.user, os.getenv("USER") or os.getenv("LOGNAME") or "uid0", "who")
    pids[o.pid] = true
  end
  local said = table.concat(r.warnings or {}, "\n"):find("measurements may interfere", 1, true) ~= nil
  T.eq(said, next(pids) ~= nil, "the warning exactly when shared_board is there")
  return pids
end

T.test("two odps overlapping on one board: both records say so; --exclusive waits for the board instead", function()
  local remote = srv.remote_dir .. "/lease"
  -- A: eight points of about 1.5 to 2.5 s; B comes after A's first record, with two points of about 2 s each, so A's
  -- points that end while B runs see it
  local adir, bdir = T.tmpdir(), T.tmpdir()
  local aout, bout = adir .. "/s.jsonl", bdir .. "/s.jsonl"
  local a = background(sweep_argv(runner_copy(150000), remote, "num_executions=10,11,12,13,14,15,16,17", aout,
    adir .. "/runs"), adir)
  wait_until("A's first record", 60, function() return #records(aout) >= 1 end)
  local b = background(sweep_argv(runner_copy(200000), remote, "num_executions=10,11", bout, bdir .. "/runs"), bdir)
  T.eq(exit_status(b), 0, read(bdir .. "/err"))
  -- C, --exclusive, comes while A still runs: it waits for A, and A's records do not count it
  wait_until("A still running", 5, function() return #records(aout) < 8 end)
  local cdir = T.tmpdir()
  local cout = cdir .. "/s.jsonl"
  local c = background(sweep_argv(runner_copy(100), remote, "num_executions=3,4", cout, cdir .. "/runs",
    { "--exclusive" }), cdir)
  wait_until("C says it waits", 60, function() return (read(cdir .. "/err") or ""):find("waiting for", 1, true) end)
  T.eq(exit_status(a), 0, read(adir .. "/err"))
  T.eq(#records(cout) <= 0 or records(cout)[1].shared_board == nil, true, "C ran nothing beside A")
  T.eq(exit_status(c), 0, read(cdir .. "/err"))
  local arecs, brecs, crecs = records(aout), records(bout), records(cout)
  T.eq({ #arecs, #brecs, #crecs }, { 8, 2, 2 })
  T.eq(overlapped(arecs[1])[tonumber(b.pid)], nil, "A's first point ran before B came")
  local a_saw_b = 0
  for _, r in ipairs(arecs) do
    T.eq(r.ok, true)
    local pids = overlapped(r)
    if pids[tonumber(b.pid)] then a_saw_b = a_saw_b + 1 end
    T.eq(pids[tonumber(c.pid)], nil, "C waiting is not C running")
  end
  T.ok(a_saw_b >= 1, "A's records name B")
  for _, r in ipairs(brecs) do T.ok(overlapped(r)[tonumber(a.pid)], "every one of B's records names A") end
  for _, r in ipairs(crecs) do
    T.eq(r.ok, true); T.eq(r.shared_board, nil, "C had the board to itself")
  end
  local cerr = read(cdir .. "/err")
  T.eq(count(cerr, "waiting for"), 1, "one line: " .. cerr)
  T.match(cerr, "waiting for ssh://[^\n]*%(%-%-exclusive%): another odp runs there: host [^\n]*, pid " .. a.pid)
  no_board_debris(remote)
  for _, job in ipairs { a, b, c } do no_local_debris(job) end
end)

------------------------------------------------------------------------------------------------ mounts

T.test("a remote dir on a noexec mount: exit 3 before any upload, naming the mount and a dir that allows exec", function()
  local mnt = T.tmpdir()
  local remote = mnt .. "/remote"
  local ns = sshd.start { mount_ns = ("mount -t tmpfs -o noexec,size=16m odptest %s && mkdir %s && chown %s %s")
    :format(q(mnt), q(remote), "odptest", q(remote)) }
  local dir = T.tmpdir()
  local r = proc.run { odp, "run", root .. "/scripts/rpi5.lua", "--host", ns.user .. "@127.0.0.1", "--port",
    tostring(ns.port), "--identity", ns.identity, "--known-hosts", ns.known_hosts, "--runner", runner_copy(100),
    "--model", add, "--remote-dir", remote, "--runs-dir", dir .. "/runs", "--no-history", "--format", "json",
    "--out", dir .. "/r.json", cwd = dir, timeout = 60, env = { TMPDIR = dir .. "/tmp" } }
  -- every file under the remote dir (the helper's probe may have made its empty .odp directory: no file)
  local board = sh(("nsenter -t %d -m find %s -type f; nsenter -t %d -m grep -c ' %s tmpfs ' /proc/mounts"):format(
    ns.pid, q(remote), ns.pid, mnt))
  ns:close()
  T.eq(r.status, 3, r.stderr)
  local lines = {}
  for l in r.stderr:gmatch("[^\n]+") do if l:match("noexec") then lines[#lines + 1] = l end end
  T.eq(#lines, 1, "one line: " .. r.stderr)
  T.match(lines[1], "is on a noexec mount: tmpfs at " .. mnt:gsub("%p", "%%%0") .. " %([^)]*noexec[^)]*%)")
  T.match(lines[1], "e%.g%. %-%-remote%-dir /%S+/odp")
  T.eq(board, "1\n", "nothing uploaded (the mount was there, empty)")
  T.eq(sh(("grep -c ' %s ' /proc/mounts || true"):format(mnt)), "0\n", "the mount never reached this machine")
end)

------------------------------------------------------------------------------------------------ runner defaults

T.with_real_runner("without --etdump the runner still gets odp's own ETDump path: no model.etdump on the board or in the run dir", function(runner)
  local remote = srv.remote_dir .. "/defaults"
  local dir = T.tmpdir()
  local r = proc.run { odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1", "--port",
    tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--runner", runner,
    "--model", add, "-n", "3", "--remote-dir", remote, "--runs-dir", dir .. "/runs", "--no-history", "--format",
    "json", cwd = dir, timeout = 120 }
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq(rec.artifacts.etdump, nil, "not asked for: not kept")
  -- the real runner's own word: it wrote the ETDump where odp said, in odp's directory on the board
  local log = sh(("cat %s/runs/*/runner.stderr"):format(q(dir)))
  T.match(log, "ETDump written to file '" .. (remote .. "/.odp/runs/"):gsub("%p", "%%%0"), log)
  no_board_debris(remote)
  T.eq(sh(("find %s -name '*etdump*'"):format(q(dir))), "", "none in the run dir or beside it")
  -- on this machine too: the run dir is the runner's working directory
  local h = proc.run { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", add, "-n", "3",
    "--runs-dir", dir .. "/hruns", "--no-history", "--format", "json", cwd = dir, timeout = 120 }
  T.eq(h.status, 0, h.stderr)
  T.eq(sh(("find %s -name '*etdump*'"):format(q(dir .. "/hruns"))), "", "none in the host run dir")
  T.match(sh(("cat %s/hruns/*/runner.stderr"):format(q(dir))), "ETDump written to file '/")
end)

T.done()
