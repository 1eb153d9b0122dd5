-- Many boards at once over SSH: four OpenSSH sshd on 127.0.0.1 (tests/lib/sshd.lua), a lab file naming them,
-- odp.target.lab and odp.run.sweep.run_boards on odp.core.sched. Oracles: the wall clock against the sum of the
-- boards' work, the JSONL file read back, the kernel (kill -0) for remote processes that must be gone.
local T = require("t")
local sshd = require("sshd")
local lab = require("odp.target.lab")
local sweep = require("odp.run.sweep")
local board_mod = require("odp.run.board")
local proc = require("odp.proc")
local sys = require("odp.sys")

local servers = {}
for i = 1, 4 do servers[i] = sshd.start() end
local tmp = T.tmpdir()
local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")

local function alive(pid) return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true end

local function board_line(name, srv, extra)
  return ("  { name = %q, device = \"devices/rpi5.lua\", host = %q, port = %d, identity = %q, known_hosts = %q,"
    .. " ssh_config = \"none\", remote_dir = %q, tags = { \"loop\" }%s },\n")
    :format(name, srv.user .. "@127.0.0.1", srv.port, srv.identity, srv.known_hosts, srv.remote_dir, extra or "")
end

local function write_lab(path, lines)
  local f = assert(io.open(path, "w"))
  f:write("return { boards = {\n", table.concat(lines), "} }\n")
  f:close()
  return path
end

local lab_path = write_lab(tmp .. "/lab.lua", {
  board_line("pi-1", servers[1]), board_line("pi-2", servers[2]), board_line("pi-3", servers[3]),
  board_line("pi-4", servers[4]),
})

-- A point: one command on the board, ~dur s, whose output names the board and the point. spans[board] is the
-- time from its first command's start to its last one's end.
local spans = {}
local function open(entry) return board_mod.open(entry.dev, lab.board_options(entry)) end
local function run_point(dur)
  return function(board, params, _, entry)
    local t0 = sys.now()
    local r = board:exec(("sleep %s; echo %s-%s"):format(dur, entry.name, params.n), { timeout = 60 })
    local span = spans[entry.name] or { t0 }
    span[2], spans[entry.name] = sys.now(), span
    return { schema = "odp.result/1", ok = r.ok, value = r.stdout:match("%S+") }
  end
end
-- Whether the boards' spans all share a moment: one after the other, they would not.
local function all_at_once(names)
  local last_start, first_end = -math.huge, math.huge
  for _, n in ipairs(names) do
    last_start, first_end = math.max(last_start, spans[n][1]), math.min(first_end, spans[n][2])
  end
  return last_start < first_end, ("the last board started %.2f s after the first ended"):format(last_start - first_end)
end

local function lines_of(path)
  local out = {}
  for _, r in ipairs(sweep.load(path)) do out[#out + 1] = r end
  return out
end

T.test("lab files: loaded like device files, checked key by key, selected by tag or names", function()
  local l = lab.load(lab_path)
  T.eq(#l.boards, 4)
  T.eq(l.boards[2].name, "pi-2")
  T.eq(l.boards[2].dev.name, "rpi5", "the device file is loaded")
  T.eq(#lab.load(lab_path .. ":loop").boards, 4, "a tag")
  local two = lab.load(lab_path .. ":pi-3,pi-1").boards
  T.eq({ two[1].name, two[2].name }, { "pi-3", "pi-1" }, "names, in the order given")
  T.raises(function() lab.load(lab_path .. ":nope") end, "no board is named or tagged 'nope'")
  T.raises(function() lab.load(lab_path .. ":pi-1,nope") end, "no board named 'nope'")
  local bad = write_lab(tmp .. "/bad.lua", { board_line("x", servers[1], ", serail = \"1\"") })
  T.raises(function() lab.load(bad) end, "key serail is not an option of ssh boards")
  local dup = write_lab(tmp .. "/dup.lua", { board_line("x", servers[1]), board_line("x", servers[2]) })
  T.raises(function() lab.load(dup) end, "board name 'x' used twice")
  local shared = write_lab(tmp .. "/shared.lua", { board_line("x", servers[1]), board_line("y", servers[1]) })
  T.raises(function() lab.load(shared) end, "boards x and y share host and remote_dir")
  local code = tmp .. "/code.lua"
  local f = assert(io.open(code, "w"))
  f:write("os.execute('true') return { boards = {} }")
  f:close()
  T.raises(function() lab.load(code) end, "data only, no code")
  local noname = write_lab(tmp .. "/noname.lua", { '  { device = "devices/rpi5.lua", host = "x" },\n' })
  T.raises(function() lab.load(noname) end, "key name: expected string, got missing")
  local nodev = write_lab(tmp .. "/nodev.lua", { '  { name = "a", device = "devices/nope.lua" },\n' })
  T.raises(function() lab.load(nodev) end, "device file devices/nope.lua")
end)

T.test("--boards lava and labgrid:FILE[:TARGET] go to their providers, whose boards are checked like a lab file's", function()
  -- the providers themselves (odp.target.lab_lava, lab_labgrid) are tested with LAVA and labgrid; here stand-ins
  -- check what the dispatcher passes them and does with their answer
  local saved = { package.loaded["odp.target.lab_lava"], package.loaded["odp.target.lab_labgrid"] }
  local got = {}
  package.loaded["odp.target.lab_lava"] = { boards = function(env)
    got.env = env
    return { boards = { { name = "lava-dut", device = "devices/rpi5.lua", host = "pi@10.0.0.9", lava_job_id = 42,
      tags = { "lava" } } } }
  end }
  package.loaded["odp.target.lab_labgrid"] = { boards = function(file, target)
    got.file, got.target = file, target
    if target == "missing" then return nil, "ENOTFOUND: no target missing in " .. file, "ENOTFOUND" end
    return { boards = { { name = "lg-1", device = "devices/rpi5.lua", host = "x", bogus = 1 } } }
  end }
  local ok, err = pcall(function()
    local l = lab.load("lava", { LAVA_JOB_ID = "42" })
    T.eq(got.env.LAVA_JOB_ID, "42")
    T.eq(l.boards[1].name, "lava-dut")
    T.eq(lab.board_options(l.boards[1]).host, "pi@10.0.0.9")
    T.eq(lab.board_options(l.boards[1]).lava_job_id, nil, "a provider's fact is not a transport option")
    T.raises(function() lab.load("labgrid:" .. lab_path .. ":main") end, "key bogus is not an option of ssh boards")
    T.eq({ got.file, got.target }, { lab_path, "main" })
    local f = T.failure(function() lab.load("labgrid:" .. lab_path .. ":missing") end)
    T.eq({ f.code, f.message }, { "ENOTFOUND", "--boards labgrid:" .. lab_path .. ": no target missing in " .. lab_path })
  end)
  package.loaded["odp.target.lab_lava"], package.loaded["odp.target.lab_labgrid"] = saved[1], saved[2]
  if not ok then error(err, 0) end
end)

T.test("each: four boards run every point at once; every record carries its board; resume per board", function()
  local boards = lab.load(lab_path).boards
  local out = tmp .. "/each.jsonl"
  local points = sweep.points { "n=1,2,3" }
  spans = {}
  local res = sweep.run_boards { points = points, out = out, boards = boards, open = open, run_point = run_point(0.5),
    close = function(b) b:close() end }
  T.eq(res.total, 12)
  T.eq(res.failed, 0)
  local seen = {}
  for _, r in ipairs(lines_of(out)) do seen[#seen + 1] = r.board .. ":" .. r.value end
  table.sort(seen)
  local want = {}
  for i = 1, 4 do for n = 1, 3 do want[#want + 1] = ("pi-%d:pi-%d-%d"):format(i, i, n) end end
  table.sort(want)
  T.eq(seen, want, "each record's board ran it")
  T.ok(all_at_once { "pi-1", "pi-2", "pi-3", "pi-4" })
  -- resume: drop pi-2's last record, rerun: only that one runs
  local kept = {}
  for _, r in ipairs(lines_of(out)) do
    if not (r.board == "pi-2" and r.params.n == 3) then kept[#kept + 1] = require("odp.results.result").encode(r) end
  end
  local f = assert(io.open(out, "w"))
  f:write(table.concat(kept, "\n") .. "\n")
  f:close()
  local again = sweep.run_boards { points = points, out = out, boards = boards, open = open, run_point = run_point(0),
    close = function(b) b:close() end }
  T.eq({ again.total, again.skipped }, { 1, 11 })
  T.eq(again.records[1].board, "pi-2")
  T.eq(again.records[1].params.n, 3)
end)

T.test("pool: the boards share the points", function()
  local boards = lab.load(lab_path).boards
  local out = tmp .. "/pool.jsonl"
  spans = {}
  local res = sweep.run_boards { points = sweep.points { "n=1,2,3,4,5,6,7,8" }, out = out, boards = boards,
    spread = "pool", open = open, run_point = run_point(0.5), close = function(b) b:close() end }
  T.eq({ res.total, res.failed }, { 8, 0 })
  local per = {}
  for _, r in ipairs(res.records) do per[r.board] = (per[r.board] or 0) + 1 end
  for i = 1, 4 do T.ok((per["pi-" .. i] or 0) >= 1, "pi-" .. i .. " ran some points") end
  T.ok(all_at_once { "pi-1", "pi-2", "pi-3", "pi-4" })
end)

T.test("failures stay with their board: unreachable, killed mid-sweep, timed out", function()
  local dead = sshd.start()
  local gone_port = dead.port
  dead:stop()
  local victim = sshd.start()
  local slow = sshd.start()
  local path = write_lab(tmp .. "/fail.lua", {
    board_line("ok-1", servers[1]), board_line("ok-2", servers[2]),
    board_line("refused", { user = servers[1].user, port = gone_port, identity = servers[1].identity,
      known_hosts = servers[1].known_hosts, remote_dir = servers[1].remote_dir }),
    board_line("killed", victim), board_line("hung", slow),
  })
  local boards = lab.load(path).boards
  local out = tmp .. "/fail.jsonl"
  local pidfile = slow.remote_dir .. "/hung.pid"
  local function point(board, params, rep, entry)
    if entry.name == "killed" and params.n == 2 then victim:crash() end
    if entry.name == "hung" then
      board:exec("echo $$ > " .. pidfile .. "; exec sleep 60", { timeout = 120 })
    end
    return run_point(0.2)(board, params, rep, entry)
  end
  local t0 = sys.now()
  local res = sweep.run_boards { points = sweep.points { "n=1,2,3" }, out = out, boards = boards, open = open,
    run_point = point, timeout = 3, close = function(b) b:close() end }
  local wall = sys.now() - t0
  local by = {}
  for _, r in ipairs(lines_of(out)) do
    by[r.board] = by[r.board] or {}
    by[r.board][#by[r.board] + 1] = r
  end
  for _, name in ipairs { "ok-1", "ok-2" } do
    T.eq(#by[name], 3, name .. " ran every point")
    for _, r in ipairs(by[name]) do T.eq(r.ok, true, name) end
  end
  T.eq(#by.refused, 3, "the unreachable board's points are failed records")
  for _, r in ipairs(by.refused) do
    T.eq(r.ok, false)
    T.match(r.error.message, "refused")
  end
  T.eq(by.killed[1].ok, true, "the point before the kill")
  for i = 2, 3 do
    T.eq(by.killed[i].ok, false, "after the kill")
    T.match(by.killed[i].error.message, "killed")
  end
  T.eq(#by.hung, 3)
  T.eq(by.hung[1].error.code, "ETIMEDOUT")
  T.match(by.hung[1].error.message, "board hung: the point took longer than 3 s")
  T.match(by.hung[2].error.message, "board hung is out %(ETIMEDOUT")
  T.eq(res.failed, 3 + 2 + 3)
  T.eq({ res.boards["ok-1"].out, res.boards.hung.out ~= nil, res.boards.refused.out ~= nil }, { nil, true, true })
  T.ok(wall < 30, ("one hung board (a 60 s command) did not stall the rest (%.1f s)"):format(wall))
  local pid = tonumber((sys.read_file(pidfile)))
  T.ok(pid and not alive(pid), "the hung board's remote command was killed")
  slow:stop()
end)

T.test("pool: a point whose board fails is retried once on another board", function()
  local victim = sshd.start()
  local path = write_lab(tmp .. "/poolfail.lua", { board_line("good", servers[3]), board_line("bad", victim) })
  local boards = lab.load(path).boards
  local out = tmp .. "/poolfail.jsonl"
  local res = sweep.run_boards { points = sweep.points { "n=1,2,3,4" }, out = out, boards = boards, spread = "pool",
    open = open, close = function(b) b:close() end,
    run_point = function(board, params, rep, entry)
      if entry.name == "bad" and params.n >= 2 then victim:crash() end
      return run_point(0.3)(board, params, rep, entry)
    end }
  for _, r in ipairs(res.records) do
    if not r.ok then print("# failed", r.board, r.params.n, r.error and r.error.message) end
  end
  T.eq(res.failed, 0, "every point ran, the failed one again on the good board")
  local ns = {}
  for _, r in ipairs(lines_of(out)) do ns[#ns + 1] = r.params.n end
  table.sort(ns)
  T.eq(ns, { 1, 2, 3, 4 })
  T.ok(res.boards.bad.out ~= nil, "the bad board is out")
end)

T.test("Ctrl-C stops every board: remote commands killed, ECANCELED (exit 130)", function()
  local boards = lab.load(lab_path .. ":pi-1,pi-2").boards
  local out = tmp .. "/int.jsonl"
  local dir = servers[1].remote_dir
  local ok, err = pcall(sweep.run_boards, { points = sweep.points { "n=1" }, out = out, boards = boards, open = open,
    close = function(b) b:close() end,
    run_point = function(board, _, _, entry)
      if entry.name == "pi-1" then -- Ctrl-C once both boards' commands run
        proc.run { "sh", "-c", ("(i=0; while [ $i -lt 600 ] && ! [ -s %s/pi-1.pid -a -s %s/pi-2.pid ]; do sleep 0.05; " ..
          "i=$((i+1)); done; sleep 0.3; kill -INT %d) >/dev/null 2>&1 &"):format(dir, dir, sys.getpid()) }
      end
      local r = board:exec("echo $$ > " .. dir .. "/" .. entry.name .. ".pid; exec sleep 60", { timeout = 120 })
      if r.canceled then require("odp.core.errors").fail("ECANCELED", "interrupted", 130) end
      return { schema = "odp.result/1", ok = true }
    end })
  sys.cancel_clear()
  T.eq(ok, false)
  T.eq(err.code, "ECANCELED")
  T.eq(err.exit, 130)
  T.eq(#lines_of(out), 0, "no record for points cut short (the point raised ECANCELED)")
  sys.sleep(0.3)
  for _, n in ipairs { "pi-1", "pi-2" } do
    local pid = tonumber((sys.read_file(dir .. "/" .. n .. ".pid")))
    T.ok(pid and not alive(pid), n .. "'s remote command was killed")
  end
end)

T.test("odp devices --boards: every board checked at once, one line each; hung boards cost one timeout", function()
  local silent_port = 40000 + sys.getpid() % 20000
  local listener = proc.run { "sh", "-c", ("socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork SYSTEM:'sleep 60' " ..
    ">/dev/null 2>&1 & echo $!"):format(silent_port) }.stdout:match("%d+")
  sys.sleep(0.3)
  local gone = sshd.start()
  local refused_port = gone.port
  gone:stop()
  local function at(name, port, srv)
    return board_line(name, { user = srv.user, port = port, identity = srv.identity, known_hosts = srv.known_hosts,
      remote_dir = srv.remote_dir .. "/" .. name })
  end
  local path = write_lab(tmp .. "/check.lua", {
    board_line("pi-1", servers[1]), board_line("pi-2", servers[2]),
    at("mute-1", silent_port, servers[1]), at("mute-2", silent_port, servers[2]), at("mute-3", silent_port, servers[3]),
    at("closed", refused_port, servers[3]),
  })
  local t0 = sys.now()
  local r = assert(proc.run { os.getenv("ODP") or (T.root() .. "/build/odp"), "devices", "--boards", path,
    "--timeout", "4", "--json", timeout = 60 })
  local wall = sys.now() - t0
  proc.run { "kill", listener }
  T.eq(r.status, 3, "a board failed the check")
  local rows = require("odp.core.json").decode(r.stdout).boards
  local state = {}
  for _, row in ipairs(rows) do state[row.board] = row end
  T.eq({ state["pi-1"].state, state["pi-2"].state, state["mute-1"].state, state["mute-2"].state,
    state["mute-3"].state, state.closed.state }, { "ok", "ok", "timeout", "timeout", "timeout", "error" })
  T.eq(state["pi-1"].os:match("^Linux"), "Linux", "uname of the board")
  T.match(state.closed.hint, "refused")
  T.ok(wall < 11, ("three boards that never speak cost one 4 s timeout, not three (%.1f s)"):format(wall))
end)

T.test("two boards of one host pushing the same file at once: one upload, the other finds its bytes", function()
  local sched = require("odp.core.sched")
  local target_ssh = require("odp.target.ssh")
  local src = tmp .. "/payload"
  local f = assert(io.open(src, "wb"))
  f:write(("0123456789abcdef"):rep(256 * 1024)) -- 4 MiB: long enough for the two to overlap
  f:close()
  local srv = servers[1]
  local dst = srv.remote_dir .. "/shared-payload"
  local s = sched.new()
  for i = 1, 2 do
    s:spawn(function()
      local t = assert(target_ssh.new { host = srv.user .. "@127.0.0.1", port = srv.port, identity = srv.identity,
        known_hosts = srv.known_hosts, ssh_config = "none", remote_dir = srv.remote_dir .. "/t" .. i })
      local r = assert(t:push(src, dst))
      t:close()
      return r.skipped
    end)
  end
  s:run()
  local skipped = { s.tasks[1].values[1], s.tasks[2].values[1] }
  table.sort(skipped, function(a, b) return tostring(a) < tostring(b) end)
  T.eq(skipped, { false, true })
  T.eq(sys.sha256_file(dst), sys.sha256_file(src))
end)

T.test("the commands: a sweep of the real flow on three boards, one dead; resume; plot and compare by board", function()
  local odp = os.getenv("ODP") or (T.root() .. "/build/odp")
  local root = T.root()
  local path = write_lab(tmp .. "/cli.lua", {
    board_line("pi-1", servers[1]), board_line("pi-2", servers[2]),
    board_line("dead", { user = servers[3].user, port = 1, identity = servers[3].identity,
      known_hosts = servers[3].known_hosts, remote_dir = servers[3].remote_dir }),
  })
  local out = tmp .. "/cli.jsonl"
  local function sweep_cmd(extra)
    local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua", "--boards", path,
      "--runner", build .. "/tests/fake_runner", "--model", root .. "/tests/fixtures/pte/add_arduino.pte",
      "--runs-dir", tmp .. "/runs", "-p", "num_executions=1,3", "--out", out }
    for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
    argv.timeout = 300
    return assert(proc.run(argv))
  end
  local r = sweep_cmd()
  T.eq(r.status, 1, "some points failed: exit 1")
  T.match(r.stderr, "2 of 6 point runs failed: dead %(2: ENODEV: board dead: cannot connect")
  local recs = lines_of(out)
  T.eq(#recs, 6)
  local ok_by = {}
  for _, rec in ipairs(recs) do
    if rec.board == "dead" then
      T.eq(rec.ok, false)
    else
      T.eq(rec.ok, true, rec.board)
      T.eq(rec.latency_ms.n, rec.params.num_executions, "the runner ran num_executions times on " .. rec.board)
      ok_by[rec.board] = (ok_by[rec.board] or 0) + 1
    end
  end
  T.eq(ok_by, { ["pi-1"] = 2, ["pi-2"] = 2 })
  T.match(r.stdout, "board%s+num_executions")
  -- the same command again: the live boards' points are done; the dead board's are tried again
  r = sweep_cmd()
  T.match(r.stdout, "2 record%(s%) this run, 4 already done, 2 failed")
  T.eq(r.status, 3, "every point of this run failed for its board's sake: exit 3, like one run")
  local plot = assert(proc.run { odp, "plot", out, "--out", tmp .. "/cli.svg" })
  T.eq(plot.status, 0)
  T.match(plot.stderr, "in 2 series, x = num_executions, group = board")
  T.match(T.read(tmp .. "/cli.svg"), "pi%-2")
  local cmp = assert(proc.run { odp, "compare", out, out, "--by", "board", "--format", "json" })
  T.eq(cmp.status, 0, cmp.stderr)
  local doc = require("odp.core.json").decode(cmp.stdout)
  T.ok(doc.boards["pi-1"] and doc.boards["pi-2"] and not doc.boards.dead, "one comparison per live board")
  -- odp run SCRIPT --boards: one run on each board, reported together
  local one = assert(proc.run { odp, "run", root .. "/scripts/rpi5.lua", "--boards", path .. ":pi-1,pi-2",
    "--runner", build .. "/tests/fake_runner", "--model", root .. "/tests/fixtures/pte/add_arduino.pte",
    "--runs-dir", tmp .. "/runs", "-n", "2", "--format", "jsonl", timeout = 300 })
  T.eq(one.status, 0, one.stderr)
  local names = {}
  for line in one.stdout:gmatch("[^\n]+") do names[#names + 1] = require("odp.core.json").decode(line).board end
  table.sort(names)
  T.eq(names, { "pi-1", "pi-2" })
end)

T.test("command-line transport options reach every board of --boards (over the lab file's); a labgrid target "
  .. "without odp_device is the script's device", function()
  local odp = os.getenv("ODP") or (T.root() .. "/build/odp")
  local root = T.root()
  local path = write_lab(tmp .. "/prec.lua", { board_line("pi-1", servers[1]) })
  -- a directory the boards' login user may write, named only on the command line
  local cli_dir = servers[1].remote_dir .. "/cli-remote"
  local common = { "--runner", build .. "/tests/fake_runner", "--model", root .. "/tests/fixtures/pte/add_arduino.pte",
    "--runs-dir", tmp .. "/runs", "--format", "jsonl", "--no-history" }
  local function odp_run(argv)
    local a = { odp, "run" }
    for _, x in ipairs(argv) do a[#a + 1] = x end
    for _, x in ipairs(common) do a[#a + 1] = x end
    a.timeout = 300
    return assert(proc.run(a))
  end
  local r = odp_run { root .. "/scripts/rpi5.lua", "--boards", path, "--remote-dir", cli_dir }
  T.eq(r.status, 0, r.stderr)
  local blob = cli_dir .. "/.odp/blobs/" .. sys.sha256_file(build .. "/tests/fake_runner")
  T.ok(sys.stat(blob), "the runner was staged in --remote-dir, not the lab file's remote_dir")
  -- the sweep takes them the same way
  os.remove(blob)
  r = odp_run { root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua", "--boards", path, "--remote-dir",
    cli_dir, "-p", "num_executions=1,2", "--out", tmp .. "/prec.jsonl" }
  T.eq(r.status, 0, r.stderr)
  T.ok(sys.stat(blob), "the sweep's boards staged in --remote-dir too")
  -- an option no board of the lab takes is refused, not dropped
  local adb_lab = write_lab(tmp .. "/adb.lua", { '  { name = "x300", device = "devices/vivo_x300_pro.lua", serial = "X" },\n' })
  r = odp_run { root .. "/scripts/rpi5.lua", "--boards", adb_lab, "--port", "2222" }
  T.eq(r.status, 2)
  T.eq(r.stderr, "odp: --port applies to every board of --boards, and board x300 (adb) takes no --port\n")
  -- labgrid: the NetworkService gives the address, port and user; the command line the key, known_hosts and
  -- remote dir; the script (scripts/rpi5.lua) the device, since the target names none
  local env = tmp .. "/lg-env.yaml"
  T.write(env, ("targets:\n  main:\n    resources:\n      NetworkService: {address: 127.0.0.1, port: %d, username: %s}\n")
    :format(servers[1].port, servers[1].user))
  os.remove(blob)
  r = odp_run { root .. "/scripts/rpi5.lua", "--boards", "labgrid:" .. env, "--remote-dir", cli_dir,
    "--identity", servers[1].identity, "--known-hosts", servers[1].known_hosts, "--ssh-config", "none" }
  T.eq(r.status, 0, r.stderr)
  local rec = require("odp.core.json").decode(r.stdout)
  T.eq({ rec.ok, rec.board, rec.device }, { true, "main", "rpi5" })
  T.ok(sys.stat(blob), "labgrid's board staged in --remote-dir")
end)

T.test("on a terminal: one status line per board while the sweep runs", function()
  local odp = os.getenv("ODP") or (T.root() .. "/build/odp")
  local root = T.root()
  local path = write_lab(tmp .. "/tty.lua", { board_line("pi-1", servers[1]), board_line("pi-2", servers[2]) })
  local sock = tmp .. "/tmux.sock"
  T.at_done(function() proc.run { "tmux", "-S", sock, "kill-server", timeout = 10 } end) -- also when it fails first
  local cmd = table.concat({ sshd.quote(odp), "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/rpi5.lua",
    "--boards", sshd.quote(path), "--runner", build .. "/tests/fake_runner", "--model",
    root .. "/tests/fixtures/pte/add_arduino.pte", "--runs-dir", sshd.quote(tmp .. "/runs"), "-p", "num_executions=1,2",
    "--out", sshd.quote(tmp .. "/tty.jsonl"), "--", "--fake_wait_us=1500000" }, " ")
  assert(proc.run { "tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "odp", "-x", "150", "-y", "40",
    cmd .. "; echo SWEEP-EXITED $?; sleep 60", timeout = 10 }.ok)
  local seen, screen = false, ""
  local deadline = sys.now() + 120
  while sys.now() < deadline and not screen:find("SWEEP%-EXITED") do
    screen = proc.run { "tmux", "-S", sock, "capture-pane", "-p", "-t", "odp", timeout = 10 }.stdout
    -- both boards' lines at once, each with its own count and the point it runs
    if screen:find("\npi%-1%s+%d/2%s+num_executions=%d") and screen:find("\npi%-2%s+%d/2%s+num_executions=%d") then
      seen = true
    end
    sys.sleep(0.2)
  end
  proc.run { "tmux", "-S", sock, "kill-server", timeout = 10 }
  T.ok(seen, "a line per board while running:\n" .. screen)
  T.match(screen, "SWEEP%-EXITED 0")
  T.match(screen, "\npi%-1%s+2/2%s+finished")
  T.match(screen, "\npi%-2%s+2/2%s+finished")
end)

for _, s in ipairs(servers) do s:stop() end
T.done()
