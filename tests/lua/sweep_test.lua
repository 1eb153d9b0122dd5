-- odp.run.sweep and scripts/sweep.lua: products, JSONL appends, resume after SIGKILL, failed points retried.
local T = require("t")
local json = require("odp.core.json")
local proc = require("odp.proc")
local sweep = require("odp.run.sweep")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local toy = root .. "/tests/flows/toy.lua"

local function lines(path)
  local out = {}
  local f = io.open(path, "rb")
  if not f then return out end
  for l in f:lines() do out[#out + 1] = assert(json.decode(l)) end
  f:close()
  return out
end

local function odp_sweep(args)
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", toy }
  table.move(args, 1, #args, #argv + 1, argv)
  argv.timeout = 60
  return proc.run(argv)
end

T.test("points: cartesian product, first parameter slowest, values typed", function()
  local pts = sweep.points { "a=1,2", "b-name=x,y,z" }
  T.eq(#pts, 6)
  T.eq(pts.names, { "a", "b_name" })
  T.eq(pts[1], { a = 1, b_name = "x" })
  T.eq(pts[4], { a = 2, b_name = "x" })
  T.eq(math.type(pts[1].a), "integer")
  T.eq(sweep.points { "r=0.5,true" }[1].r, 0.5)
  T.eq(sweep.points { "r=0.5,true" }[2].r, true)
  T.eq(#sweep.points {}, 1, "no parameters: one empty point")
  T.raises(function() sweep.points { "nonsense" } end, "not name=")
  T.raises(function() sweep.points { "a=1", "a=2" } end, "twice")
end)

T.test("run: appends a record per point and repeat, resumes by parameters, retries failures", function()
  local out = T.tmpdir() .. "/s.jsonl"
  local calls = 0
  local pts = sweep.points { "size=1,2,13" }
  local function run_point(p)
    calls = calls + 1
    if p.size == 13 then error({ code = "EIO", message = "boom" }) end
    return { ok = true, latency_ms = { p50 = p.size } }
  end
  local res = sweep.run { points = pts, ["repeat"] = 2, out = out, run_point = run_point }
  T.eq({ #res.records, res.skipped, res.failed, calls }, { 6, 0, 2, 6 })
  local recs = lines(out)
  T.eq(#recs, 6)
  T.eq(recs[1].params, { size = 1 })
  T.eq(recs[2].sweep, { point = 1, rep = 2, reps = 2, of = 3 })
  T.eq(recs[5].error, { code = "EIO", message = "boom", exit = 3 }, "the exit status is the code's")
  calls = 0
  local progress = {}
  res = sweep.run { points = pts, ["repeat"] = 2, out = out, run_point = run_point,
    on_progress = function(done, total, eta) progress[#progress + 1] = { done, total, eta >= 0 } end }
  T.eq({ res.skipped, calls }, { 4, 2 }, "finished points skipped, the failed one retried")
  T.eq(progress, { { 1, 2, true }, { 2, 2, true } })
  -- a third repeat runs the missing rep of each finished point, and all three of the failing one
  calls = 0
  res = sweep.run { points = pts, ["repeat"] = 3, out = out, run_point = run_point }
  T.eq({ calls, res.skipped }, { 5, 4 })
  T.raises(function() sweep.run { points = pts, out = out, run_point = run_point, retry = true } end, "unknown option")
end)

T.test("run: a torn last line (killed mid-write) is ignored and the next record starts on its own line", function()
  local out = T.tmpdir() .. "/t.jsonl"
  T.write(out, json.encode { ok = true, params = { size = 1 } } .. "\n" .. '{"ok":true,"params":{"si')
  local res = sweep.run { points = sweep.points { "size=1,2" }, out = out,
    run_point = function() return { ok = true } end }
  T.eq(res.skipped, 1)
  local f = assert(io.open(out))
  local n = 0
  for l in f:lines() do n = n + 1 if n == 3 then T.eq(json.decode(l).params, { size = 2 }) end end
  f:close()
  T.eq(n, 3)
end)

T.test("scripts/sweep.lua: killed with SIGKILL in the middle loses no finished point; the rerun skips them", function()
  local dir = T.tmpdir()
  local out = dir .. "/k.jsonl"
  local args = { "-p", "size=1,2,3,4,5,6", "-p", "mode=fast,slow", "--out", out, "-q" }
  local killed = odp_sweep { "-p", "size=1,2,3,4,5,6", "-p", "mode=fast,slow", "--out", out, "-q", "--die-at", "5" }
  T.eq(killed.signal_name, "KILL", "the sweep died by SIGKILL")
  T.match(T.read(sweep.lock_path(out)), "^%d+\n$", "the killed sweep left its lock file (its flock died with it)")
  local recs = lines(out)
  T.eq(#recs, 4, "the four finished points are in the file")
  T.eq(recs[4].params, { size = 2, mode = "slow" })
  local r = odp_sweep(args)
  T.eq(r.status, 0, r.stderr)
  recs = lines(out)
  T.eq(#recs, 12)
  local seen = {}
  for _, rec in ipairs(recs) do
    local k = rec.params.size .. "/" .. rec.params.mode
    T.ok(not seen[k], "point " .. k .. " ran once")
    seen[k] = true
    T.eq(rec.latency_ms.p50, rec.params.size * (rec.params.mode == "slow" and 2 or 1))
  end
  local again = odp_sweep(args)
  T.eq(again.status, 0)
  T.eq(#lines(out), 12, "a finished sweep reruns nothing")
end)

T.test("a second sweep on the same --out refuses with one line naming the first's pid; the lock goes with it", function()
  local dir = T.tmpdir()
  local out = dir .. "/l.jsonl"
  local first = assert(proc.run { "sh", "-c", ("%s run %s/scripts/sweep.lua --flow %s -p size=1,2 --delay 1.5 --out %s -q "
    .. ">/dev/null 2>&1 & echo $!"):format(odp, root, toy, out), timeout = 10 })
  local pid = first.stdout:match("%d+")
  local deadline = require("odp.sys").now() + 20
  local lock = function() return sweep.lock_path(out) and io.open(sweep.lock_path(out)) and T.read(sweep.lock_path(out)) end
  while not (lock() or ""):match("%d") and require("odp.sys").now() < deadline do
    require("odp.sys").sleep(0.05)
  end
  local r = odp_sweep { "-p", "size=1,2", "--out", out, "-q" }
  T.eq(r.status, 2, r.stderr)
  T.eq(select(2, r.stderr:gsub("\n", "")), 1, "one line: " .. r.stderr)
  T.match(r.stderr, "being written by another sweep %(pid " .. pid .. "%)")
  while lock() and require("odp.sys").now() < deadline do require("odp.sys").sleep(0.05) end
  T.eq(lock(), nil, "the first sweep removed its lock when done")
  T.eq(#lines(out), 2, "no point interleaved or lost")
end)

T.test("resume keeps NaN, Infinity and null model outputs in place", function()
  local out = T.tmpdir() .. "/nan.jsonl"
  local values = { 1.5, 0 / 0, json.null, 1 / 0, -1 / 0, 2.0 }
  local function run_point(p)
    return { ok = true, outputs = json.array { { index = 0, values = json.array { table.unpack(values) } } },
      latency_ms = { p50 = p.size } }
  end
  sweep.run { points = sweep.points { "size=1,2" }, out = out, run_point = run_point }
  local res = sweep.run { points = sweep.points { "size=1,2,3" }, out = out, run_point = run_point }
  T.eq(res.skipped, 2)
  local recs = sweep.load(out)
  T.eq(#recs, 3)
  for _, rec in ipairs(recs) do
    local v = rec.outputs[1].values
    T.eq(#v, 6)
    T.eq(v[1], 1.5); T.ok(v[2] ~= v[2], "NaN"); T.eq(v[3], json.null); T.eq(v[4], 1 / 0); T.eq(v[5], -1 / 0)
    T.eq(math.type(v[6]), "float")
  end
  T.match(T.read(out), '"values":%[1%.5,"NaN",null,"Infinity","%-Infinity",2%.0%]')
end)

T.test("scripts/sweep.lua: summary table, failed points exit 1, swept required option, bad values", function()
  local out = T.tmpdir() .. "/f.jsonl"
  local r = odp_sweep { "-p", "size=12,13", "--scale", "0.5", "--out", out }
  T.eq(r.status, 1)
  T.match(r.stderr, "1 of 2 point runs failed")
  T.match(r.stdout, "size%s+ok")
  local recs = lines(out)
  T.eq(recs[1].latency_ms.p50, 6.0, "--scale passed through to the flow")
  T.eq(recs[2].error.message, "unlucky size")
  r = odp_sweep { "-p", "size=1,x", "--out", out }
  T.eq(r.status, 2)
  T.match(r.stderr, "not an integer")
  r = odp_sweep { "--size", "1", "--out", out }
  T.eq(r.status, 2)
  T.match(r.stderr, "%-p NAME=V1,V2")
end)

T.test("a bug in a sweep's run_point stops it with its traceback, non-zero; the finished points stay", function()
  local out = T.tmpdir() .. "/bug.jsonl"
  local r = odp_sweep { "-p", "size=1,2,66,3", "--out", out }
  T.eq(r.status, 2, r.stderr)
  T.match(r.stderr, "toy%.lua:%d+: attempt to index a nil value")
  T.match(r.stderr, "stack traceback:")
  local recs = lines(out)
  T.eq(#recs, 2, "the two points before the bug, and nothing for it or after it")
  T.eq({ recs[1].params.size, recs[2].params.size }, { 1, 2 })
  -- the library: a failure ({code, message}) is a failed record, anything else is raised with its traceback
  local out2 = T.tmpdir() .. "/bug2.jsonl"
  local ok, err = pcall(sweep.run, { points = sweep.points { "size=1,2" }, out = out2, run_point = function(p)
    if p.size == 2 then local t = nil; return t.x end
    return { ok = true }
  end })
  T.eq(ok, false)
  T.match(tostring(err), "sweep_test%.lua:%d+: attempt to index a nil value.*stack traceback:")
  T.eq(#lines(out2), 1)
end)

T.test("scripts/sweep.lua over the real host flow (scripts/host.lua + the test runner): records with ops, resume", function()
  local dir = T.tmpdir()
  local fake = (os.getenv("ODP_BUILD_DIR") or (root .. "/build")) .. "/tests/fake_runner"
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/host.lua",
    "--runner", fake, "--model", root .. "/tests/fixtures/pte/add_arduino.pte", "-p", "num_executions=1,3",
    "--etdump", dir .. "/out.etdump", "--runs-dir", dir .. "/runs", "--out", dir .. "/h.jsonl", "-q",
    cwd = dir, timeout = 120, env = { ODP_FAKE_ETDUMP = root .. "/tests/fixtures/etdump/add_n10.etdump" } }
  local r = proc.run(argv)
  T.eq(r.status, 0, r.stderr)
  local recs = lines(dir .. "/h.jsonl")
  T.eq(#recs, 2)
  T.eq({ recs[1].flow, recs[1].params.num_executions, recs[2].params.num_executions }, { "executorch", 1, 3 })
  T.eq(recs[2].latency_ms.n, 3)
  T.ok(recs[2].ops and #recs[2].ops == 5, "op table from the ETDump through odp.parse.etdump")
  r = proc.run(argv)
  T.eq(r.status, 0, r.stderr)
  T.eq(#lines(dir .. "/h.jsonl"), 2, "rerun skipped both points")
end)

T.with_real_runner("scripts/sweep.lua --repeat 3 over the host flow: 3 runner processes per point, not 9", function(runner)
  -- A wrapper that counts its starts, then becomes the real runner: the count is what the sweep started.
  local dir = T.tmpdir()
  local wrapper, count = dir .. "/counting_runner", dir .. "/starts"
  T.write(wrapper, ('#!/bin/sh\necho "$*" >>%s\nexec %s "$@"\n'):format(count, runner))
  T.eq(proc.run { "chmod", "755", wrapper }.status, 0)
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/host.lua",
    "--runner", wrapper, "--model", root .. "/tests/fixtures/pte/add_arduino.pte", "-p", "num_executions=1,2",
    "--repeat", "3", "--runs-dir", dir .. "/runs", "--out", dir .. "/r.jsonl", "-q", cwd = dir, timeout = 120 }
  local r = proc.run(argv)
  T.eq(r.status, 0, r.stderr)
  local recs = lines(dir .. "/r.jsonl")
  T.eq(#recs, 6, "3 records per point")
  local per_point = {}
  for l in T.read(count):gmatch("[^\n]+") do
    local n = tonumber(l:match("%-%-num_executions[= ](%d+)"))
    per_point[n] = (per_point[n] or 0) + 1
  end
  T.eq(per_point, { 3, 3 }, "one runner process per record")
  local reps = {}
  for _, rec in ipairs(recs) do
    T.eq(rec.params["repeat"], 1, "the flow's own --repeat kept its default")
    T.eq(rec.latency_ms.n, rec.params.num_executions, "each record holds one process's iterations")
    T.eq(rec.sweep.reps, 3, "the record knows the sweep's --repeat")
    reps[#reps + 1] = ("%d/%d"):format(rec.sweep.rep, rec.sweep.reps)
  end
  T.eq(reps, { "1/3", "2/3", "3/3", "1/3", "2/3", "3/3" })
  -- the views: a rep column reads 1/3..3/3, and the flow's repeat (processes per record) is titled for what it is
  local summary = require("odp.results.report").summary(recs)
  local head = summary:match("^[^\n]+")
  T.match(head, "processes%s+warmup%s+rep%s+ok", "the columns: " .. head)
  T.ok(not head:find("repeat", 1, true), "no column titled repeat: " .. head)
  local col = 0
  for line in summary:gmatch("\n([^\n]+)") do
    col = col + 1
    T.match(line, "^%s*%d+%s+1%s+0%s+" .. reps[col] .. "%s+ok", "row " .. col .. ": " .. line)
  end
  T.eq(col, 6)
  T.eq(proc.run { odp, "report", dir .. "/r.jsonl", "-q", cwd = dir, timeout = 60 }.status, 0)
  local page = T.read(dir .. "/r.html")
  T.match(page, "<button type=\"button\">processes</button>")
  T.match(page, "<button type=\"button\">rep</button>")
  for _, rep in ipairs { "1/3", "2/3", "3/3" } do T.match(page, ('data%%-v="%s">%s</td>'):format(rep:sub(1, 1), rep)) end
  -- The flow's own --repeat is reachable as -p repeat=N: then one record aggregates N processes.
  os.remove(count)
  r = proc.run { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/host.lua",
    "--runner", wrapper, "--model", root .. "/tests/fixtures/pte/add_arduino.pte", "-p", "repeat=2",
    "--runs-dir", dir .. "/runs", "--out", dir .. "/p.jsonl", "-q", cwd = dir, timeout = 120 }
  T.eq(r.status, 0, r.stderr)
  recs = lines(dir .. "/p.jsonl")
  T.eq(#recs, 1)
  T.eq(recs[1].params["repeat"], 2)
  local starts = 0
  for _ in T.read(count):gmatch("[^\n]+") do starts = starts + 1 end
  T.eq(starts, 2, "two runner processes for the one record")
end)

T.done()
