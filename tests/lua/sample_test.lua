-- The sampling CPU profile (odp-rusage --sample, odp.sample, odp.results.cpu_profile): a runner with symbols
-- whose time is known (tests/c/sample_runner.c) sampled by odp and by Linux perf on the same run; the clock
-- alignment against the runner's own origin; the join against its op windows written as a real ETDump; a runner
-- that forks, one that exits mid-run, a full ring buffer, a refused perf_event_open; the parser on mutations.
local T = require("t")
local proc = require("odp.proc")
local sample = require("odp.sample")
local prof = require("odp.results.cpu_profile")
local etdump = require("odp.parse.etdump")
local fb = require("fbuild")
local sys = require("odp.sys")

local root = T.root()
local build = os.getenv("ODP_BUILD_DIR") or (root .. "/build")
local helper = build .. "/odp-rusage-x86_64"
local runner = build .. "/tests/sample_runner"
local tmp = T.tmpdir()

-- sample_runner's stdout -> its clock origin, an ETDump of its op windows (the real layout: each execute an
-- "Execute" run whose op events precede its Method::execute), each op's share of execute's wall time (what the
-- ETDump says) and of the CPU time the ops had (what cpu-clock samples measure: the two part on a loaded machine)
local function windows(stdout)
  local t0 = math.tointeger(tonumber(stdout:match("T0 (%d+)")))
  local runs, ev = {}, {}
  local wall, cpu, exec_total, cpu_total = {}, {}, 0, 0
  for line in stdout:gmatch("[^\n]+") do
    local name, a, b, c = line:match("^OP (%S+) (%d+) (%d+) (%d+)$")
    if name then
      local s, e = math.tointeger(tonumber(a)), math.tointeger(tonumber(b))
      ev[#ev + 1] = { kind = "profile", name = name, chain_index = 0, instruction_id = #ev, start_time = s, end_time = e }
      wall[name] = (wall[name] or 0) + (e - s)
      cpu[name] = (cpu[name] or 0) + tonumber(c)
      cpu_total = cpu_total + tonumber(c)
    end
    a, b = line:match("^EXECUTE (%d+) (%d+)$")
    if a then
      local s, e = math.tointeger(tonumber(a)), math.tointeger(tonumber(b))
      ev[#ev + 1] = { kind = "profile", name = "Method::execute", chain_index = -1, instruction_id = 0,
        start_time = s, end_time = e }
      exec_total = exec_total + (e - s)
      runs[#runs + 1] = { name = "Execute", events = ev }
      ev = {}
    end
  end
  local wall_shares, cpu_shares = {}, {}
  for k, v in pairs(wall) do wall_shares[k] = v / exec_total end
  for k, v in pairs(cpu) do cpu_shares[k] = v / cpu_total end
  return t0, fb.etdump { version = 0, run_data = runs }, wall_shares, cpu_shares
end

local function sampled(args, opts)
  opts = opts or {}
  local out = tmp .. "/" .. (opts.name or "s") .. ".smp"
  local argv = { helper, "--sample", tostring(opts.hz or 4000), "--sample-out", out }
  if opts.ring then table.move({ "--sample-ring", tostring(opts.ring) }, 1, 2, #argv + 1, argv) end
  argv[#argv + 1] = "--"
  argv[#argv + 1] = runner
  table.move(args, 1, #args, #argv + 1, argv)
  if opts.prefix then table.move(argv, 1, #argv, #opts.prefix + 1, opts.prefix) argv = opts.prefix end
  local r = assert(proc.run { argv = argv, timeout = 120, env = opts.env })
  local f = io.open(out, "rb")
  local bytes = f and f:read("a")
  if f then f:close() end
  return r, bytes
end

-- `perf script -F comm,sym` lines -> {sym = count} of the runner's process
local function perf_shares(data)
  local r = assert(proc.run { argv = { "perf", "script", "-i", data, "-F", "comm,ip,sym" }, timeout = 120 })
  T.ok(r.ok, "perf script: " .. r.stderr:sub(1, 300))
  local counts, total = {}, 0
  for line in r.stdout:gmatch("[^\n]+") do
    local comm, sym = line:match("^%s*(%S+)%s+%x+%s+(%S+)")
    if comm == "sample_runner" then
      counts[sym] = (counts[sym] or 0) + 1
      total = total + 1
    end
  end
  return counts, total
end

T.test("odp's samples against Linux perf's on the same run: the top functions' shares within 5 points; " ..
  "the clocks aligned; >= 95% of execute attributed, each op's share within 5 points of its time", function()
  local data = tmp .. "/perf.data"
  local r, bytes = sampled({ "--num_executions", "100", "--ms", "10" }, {
    prefix = { "perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-o", data, "--" } })
  T.ok(r.ok, "sampled run: " .. r.stderr:sub(-400))
  T.ok(bytes, "a sample stream")
  local t0, dump, time_shares, cpu_shares = windows(r.stdout)
  local doc = assert(etdump.read(dump))
  local p = assert(prof.profile(bytes, doc, { runner = runner, runner_remote = runner, local_modules = true }))
  local rec = p.record
  print(("# event %s, %d samples, %d in execute, %d attributed, %d lost; clock offset - T0 = %d ns over %d lines")
    :format(rec.event, rec.samples.total, rec.samples.in_execute, rec.samples.attributed, rec.samples.lost,
      rec.clock.offset_ns - t0, rec.clock.lines))
  -- the origin estimate is an upper bound (a line is read after it is written) within the fastest delivery
  local err_ns = rec.clock.offset_ns - t0
  T.ok(err_ns >= -1000 and err_ns < 2000000, ("clock origin within [-1 us, 2 ms): %d ns"):format(err_ns))
  -- a loaded machine gives the runner less CPU: 500 on-CPU samples still put a 35% share within 2.2 points (1 sigma)
  T.ok(rec.samples.total - rec.samples.preempted > 500, "on-CPU samples: " .. (rec.samples.total - rec.samples.preempted))
  -- on-CPU samples (the ones perf takes too) per root frame; [preempted] ones are time the runner waited for a CPU,
  -- and the ETDump's windows count it (on a loaded machine: a lot, and partly between its windows)
  local on_cpu, per_root, attributed_on_cpu = 0, {}, 0
  for _, line in ipairs(p.folded) do
    local stack, n = line:match("^(.*) (%d+)$")
    n = tonumber(n)
    if not stack:match(";%[preempted%]$") then
      local r0 = stack:match("^[^;]+")
      per_root[r0] = (per_root[r0] or 0) + n
      if r0 ~= prof.ROOT_OUTSIDE then on_cpu = on_cpu + n end
      if r0:match("^op_") then attributed_on_cpu = attributed_on_cpu + n end
    end
  end
  T.ok(attributed_on_cpu / on_cpu >= 0.95, ("on-CPU samples in execute attributed: %.3f"):format(attributed_on_cpu / on_cpu))
  T.eq(rec.samples.preempted > 0 or rec.switches ~= nil, true, "switch records read")
  local by = {}
  for _, op in ipairs(rec.ops) do by[op.name] = op end
  for name, share in pairs(time_shares) do
    local op = by[name]
    T.ok(op, "op " .. name .. " in cpu_profile.ops")
    local cs, os_ = cpu_shares[name], (per_root[name] or 0) / attributed_on_cpu
    print(("# %s: on-CPU samples %.3f, CPU time %.3f; all samples %.3f, wall time %.3f"):format(name, os_, cs, op.share, share))
    T.ok(math.abs(os_ - cs) <= 0.05, ("%s: on-CPU sample share %.3f vs CPU time %.3f"):format(name, os_, cs))
    T.eq(op.time_share and math.abs(op.time_share - share) < 1e-9, true, name .. ": time_share is the ETDump's")
    local hottest
    for _, t in ipairs(op.top) do if t.symbol ~= prof.PREEMPTED then hottest = t break end end
    T.eq(hottest and hottest.symbol, "spin_" .. name:match("op_(%a+)"), name .. "'s hottest function")
  end
  -- perf's shares over all the runner's samples against odp's leaf shares over all of them
  local pc, ptotal = perf_shares(data)
  T.ok(ptotal > 500, "perf samples of the runner: " .. ptotal)
  local oc, ototal = {}, 0
  for _, line in ipairs(p.folded) do
    local stack, n = line:match("^(.*) (%d+)$")
    local leaf = stack:match("([^;]+)$")
    if leaf ~= prof.PREEMPTED then
      oc[leaf] = (oc[leaf] or 0) + tonumber(n)
      ototal = ototal + tonumber(n)
    end
  end
  for _, fn in ipairs { "spin_alpha", "spin_beta", "spin_gamma" } do
    local a, b = (oc[fn] or 0) / ototal, (pc[fn] or 0) / ptotal
    print(("# %s: odp %.3f, perf %.3f"):format(fn, a, b))
    T.ok(math.abs(a - b) <= 0.05, ("%s: odp %.3f vs perf %.3f"):format(fn, a, b))
  end
end)

T.test("a runner that forks: its child is sampled too (inherit), placed in its own function", function()
  local r, bytes = sampled({ "--num_executions", "30", "--ms", "10", "--fork" }, { name = "fork" })
  T.ok(r.ok, r.stderr:sub(-300))
  local st = assert(sample.read(bytes))
  local forks = 0
  for _, t in ipairs(st:tasks()) do if t.kind == "fork" then forks = forks + 1 end end
  T.ok(forks >= 1, "a fork record")
  local p = assert(prof.profile(bytes, nil, { runner = runner, runner_remote = runner, local_modules = true }))
  local child = 0
  for _, line in ipairs(p.folded) do
    if line:match(";spin_child %d+$") then child = child + tonumber(line:match("(%d+)$")) end
  end
  -- the child spins beside the parent: on an idle machine half the samples, few when the CPUs are shared (at
  -- load 20 on 2 CPUs: 14 of 914)
  local on_cpu = p.record.samples.total - p.record.samples.preempted
  T.ok(child >= 5, ("spin_child has %d of %d on-CPU samples"):format(child, on_cpu))
  T.eq(p.record.samples.in_execute, 0, "no ETDump: nothing is in execute")
end)

T.test("a stripped runner: its functions named module+start offset; --symbols with its build-id names them, " ..
  "another file's is refused with a warning", function()
  local stripped = tmp .. "/sample_runner"
  local r0 = assert(proc.run { argv = { "strip", "-o", stripped, runner }, timeout = 30 })
  T.eq(r0.status, 0, r0.stderr)
  local out = tmp .. "/stripped.smp"
  local r = assert(proc.run { argv = { helper, "--sample", "4000", "--sample-out", out, "--", stripped,
    "--num_executions", "20", "--ms", "5" }, timeout = 120 })
  T.ok(r.ok, r.stderr)
  local bytes = T.read(out)
  local function leaves(opts)
    local p = assert(prof.profile(bytes, nil, opts))
    local c = {}
    for _, line in ipairs(p.folded) do
      local stack, n = line:match("^(.*) (%d+)$")
      local leaf = stack:match("([^;]+)$")
      c[leaf] = (c[leaf] or 0) + tonumber(n)
    end
    return c, p.warnings
  end
  local bare = leaves { runner = stripped, runner_remote = stripped }
  local named = leaves { runner = stripped, runner_remote = stripped, symbols = runner }
  local wrong, warns = leaves { runner = stripped, runner_remote = stripped, symbols = helper }
  -- the same four functions either way: by their start offset without symbols, by name with them
  local starts = {}
  for leaf, n in pairs(bare) do
    local off = leaf:match("^sample_runner%+0x(%x+)$")
    if off and n > 10 then starts[#starts + 1] = off end
  end
  T.ok(#starts >= 3, "the spinning functions by start offset: " .. table.concat(starts, " "))
  T.ok((named.spin_alpha or 0) > 10 and (named.spin_beta or 0) > 10, "named through --symbols")
  T.eq(wrong.spin_alpha, nil, "another file's symbols are not used")
  T.match(table.concat(warns, "\n"), "%-%-symbols .*: its build%-id %x+ is not the runner's")
end)

T.test("a runner that exits mid-run: the stream is whole up to its end, status passed on", function()
  local r, bytes = sampled({ "--num_executions", "50", "--ms", "4", "--exit-after", "20" }, { name = "exit" })
  T.eq(r.status, 3)
  local st = assert(sample.read(bytes))
  local info = st:info()
  T.eq(info.complete, true)
  T.ok(info.samples > 100, "samples until it exited: " .. info.samples)
  local exits = 0
  for _, t in ipairs(st:tasks()) do if t.kind == "exit" then exits = exits + 1 end end
  T.ok(exits >= 1, "its exit record")
end)

T.test("a ring buffer too small for the rate: lost samples counted, and said", function()
  -- a drainer held back 50 ms at each wake (as on a busy board): an idle machine's keeps up with a 1-page ring
  local r, bytes = sampled({ "--num_executions", "40", "--ms", "10" }, { name = "ring", ring = 1, hz = 50000,
    env = { ODP_RUSAGE_DRAIN_STALL_MS = "50" } })
  T.ok(r.ok, r.stderr:sub(-300))
  local st = assert(sample.read(bytes))
  local info = st:info()
  print(("# %d samples, %d lost in %d LOST records"):format(info.samples, info.lost, info.lost_records))
  T.ok(info.lost > 0 and info.lost_records > 0, "lost samples counted")
  local p = assert(prof.profile(bytes, nil, {}))
  T.eq(p.record.samples.lost, info.lost)
  local said = false
  for _, w in ipairs(p.warnings) do if w:match("dropped %d+ samples") then said = true end end
  T.ok(said, "a warning says so")
end)

T.test("perf_event_open refused: one line naming kernel.perf_event_paranoid, exit 125, nothing run", function()
  local marker = tmp .. "/ran"
  local r = assert(proc.run { argv = { helper, "--sample", "4000", "--sample-out", tmp .. "/denied.smp", "--",
    "sh", "-c", "touch " .. marker }, env = { ODP_RUSAGE_PERF_DENY = "1" }, timeout = 30 })
  T.eq(r.status, 125)
  T.match(r.stderr, "^odp%-rusage: sampling refused by the kernel: kernel%.perf_event_paranoid is %-?%d+ %(/proc/sys/kernel/perf_event_paranoid;")
  T.eq(select(2, r.stderr:gsub("\n", "")), 1, "one line")
  T.eq(io.open(marker) == nil, true, "the program never ran")
  local bytes = T.read(tmp .. "/denied.smp")
  T.eq(#bytes, 0, "no stream that could pass for one")
end)

T.test("the helper's usage: --sample needs --sample-out, a rate in range, a power-of-2 ring", function()
  for _, args in ipairs { { "--sample", "4000", "true" }, { "--sample", "0", "--sample-out", tmp .. "/x", "true" },
    { "--sample", "4000", "--sample-out", tmp .. "/x", "--sample-ring", "3", "true" } } do
    local argv = { helper }
    table.move(args, 1, #args, 2, argv)
    local r = assert(proc.run { argv = argv, timeout = 10 })
    T.eq(r.status, 125, table.concat(args, " "))
    T.match(r.stderr, "^odp%-rusage: ")
  end
end)

T.test("the stream parser on cut and mutated streams: an error or a stream, never a crash", function()
  local _, bytes = sampled({ "--num_executions", "5", "--ms", "4" }, { name = "small" })
  local st = assert(sample.read(bytes))
  T.eq(st:info().complete, true)
  -- cut anywhere: read as far as it is whole, never complete
  for _, cut in ipairs { 64, 65, 100, #bytes // 2, #bytes - 1 } do
    local s2 = sample.read(bytes:sub(1, cut))
    T.ok(s2, "cut at " .. cut)
    T.eq(s2:info().complete, false, "cut at " .. cut)
  end
  local s3, err, code = sample.read("ODPSMPL2" .. bytes:sub(9))
  T.eq({ s3, code }, { nil, "EPROTO" })
  T.match(err, "not an odp sample stream")
  local rnd = T.lcg(29)
  for _ = 1, 300 do
    local b = { bytes:byte(1, math.min(#bytes, 4096)) }
    for _ = 1, 1 + rnd(8) do b[65 + rnd(#b - 64)] = rnd(256) end
    local s4 = sample.read(string.char(table.unpack(b)))
    if s4 then
      s4:join { ops = { start = { 0 }, stop = { 1 << 62 }, id = { 1 } }, execs = { start = {}, stop = {} } }
    end
  end
end)

T.test("the join: nested intervals (a delegate call around its ops), the innermost wins; between and outside", function()
  -- a stream of the C runner; the intervals built around its sample times
  local _, bytes = sampled({ "--num_executions", "5", "--ms", "4" }, { name = "join" })
  local st = assert(sample.read(bytes))
  local times = st:times()
  table.sort(times)
  local n = #times
  T.ok(n > 20, "samples: " .. n)
  local a, b, c = times[n // 5], times[2 * n // 5], times[3 * n // 5]
  -- execute: [a, max]; op 1 (delegate call): [a, c); op 2 nested in it: [b, c); nothing after c is an op
  local j = st:join { ops = { start = { a, b }, stop = { c, c }, id = { 1, 2 } },
    execs = { start = { a }, stop = { times[n] + 1 } } }
  local want1, want2, between, outside = 0, 0, 0, 0
  for _, t in ipairs(times) do
    if t < a then outside = outside + 1
    elseif t < b then want1 = want1 + 1
    elseif t < c then want2 = want2 + 1
    else between = between + 1 end
  end
  T.eq({ j.per_op[1] or 0, j.per_op[2] or 0, j.between, j.outside, j.total },
    { want1, want2, between, outside, n })
end)

local odp = os.getenv("ODP") or (build .. "/odp")
local mlp = root .. "/tests/fixtures/pte/mlp.pte"

local oracle = require("sample_oracle")

T.with_real_runner("odp run --sample with the real runner and mlp.pte: >= 95% of execute's samples attributed, " ..
  "every op with >= 5% of execute's time within 5 points of its time share; cpu_profile.folded adds up", function(real)
  local runs = tmp .. "/runs"
  local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/host.lua", "--runner", real, "--model", mlp,
    "-n", "60", "--sample", "--runs-dir", runs, "--format", "json", "--no-history" }, timeout = 300 })
  T.eq(r.status, 0, r.stderr:sub(-500))
  local rec = require("odp.core.json").decode(r.stdout)
  local cp = rec.cpu_profile
  T.ok(cp, "the record has cpu_profile")
  print(("# %s at %d Hz: %d samples, %d in execute, attributed %.3f, clock from %d log lines"):format(cp.event,
    cp.rate_hz, cp.samples.total, cp.samples.in_execute, cp.attributed, cp.clock.lines))
  T.ok(cp.event == "cycles" or cp.event == "cpu-clock", "event " .. tostring(cp.event))
  T.ok(cp.samples.in_execute > 500, "samples in execute: " .. cp.samples.in_execute)
  T.ok(cp.attributed >= 0.95, ("attributed %.3f"):format(cp.attributed))
  -- no --sample-overhead: the record says the cost was not measured and what measures it, with no number
  T.eq(cp.overhead.state, "not measured")
  T.match(cp.overhead.need, "^%-%-sample%-overhead")
  T.eq(cp.overhead.pct, nil, "no made-up number")
  local checked = oracle.check(T, cp, rec.artifacts.run_dir .. "/" .. rec.artifacts.etdump.file)
  T.eq(checked >= 3, true, "mm, add and the second mm each hold >= 5% of execute")
  local total, roots = 0, {}
  for line in T.read(rec.artifacts.run_dir .. "/" .. rec.artifacts.cpu_profile_folded.file):gmatch("[^\n]+") do
    local stack, n = line:match("^(.-) (%d+)$")
    T.ok(stack, "folded line: " .. line)
    total = total + tonumber(n)
    roots[stack:match("^[^;]+")] = true
  end
  T.eq(total, cp.samples.total, "the folded counts are every sample")
  T.ok(roots["native_call_mm.out"] and roots["[outside execute]"], "ops and [outside execute] are root frames")
  -- odp inspect RUN: each op with its hottest functions, as the record has them
  local run_dir = rec.artifacts.run_dir
  local ins = assert(proc.run { argv = { odp, "inspect", run_dir }, timeout = 60 })
  T.eq(ins.status, 0, ins.stderr)
  for _, op in ipairs(cp.ops) do
    local line = ins.stdout:match("\n  (" .. op.name:gsub("%p", "%%%0") .. " #" .. op.instruction_id .. "[^\n]*)")
    T.ok(line, op.name .. " in odp inspect RUN")
    T.ok(line:find(op.top[1].symbol, 1, true), "its hottest function: " .. line)
  end
  -- odp report RUN: a flame graph of execute and one per op, each a row that shows it when clicked
  local page = tmp .. "/report.html"
  local rep = assert(proc.run { argv = { odp, "report", run_dir, "--out", page }, timeout = 120 })
  T.eq(rep.status, 0, rep.stderr)
  -- its Chrome trace: the ETDump's op slices and the samples on one clock, each sample inside its op's slice
  local tr = require("odp.core.json").decode(T.read(tmp .. "/report.trace.json"))
  local slices, instants = {}, 0
  for _, e in ipairs(tr.traceEvents) do
    if e.ph == "X" and e.name:match("^native_call_") then slices[#slices + 1] = e end
  end
  table.sort(slices, function(a, b) return a.ts < b.ts end)
  local inside = 0
  for _, e in ipairs(tr.traceEvents) do
    if e.ph == "i" and e.name ~= prof.PREEMPTED then
      instants = instants + 1
      local lo, hi = 1, #slices
      while lo < hi do
        local mid = (lo + hi + 1) // 2
        if slices[mid].ts <= e.ts then lo = mid else hi = mid - 1 end
      end
      local sl = slices[lo]
      if sl and e.ts >= sl.ts and e.ts < sl.ts + sl.dur then inside = inside + 1 end
    end
  end
  T.ok(instants > 0, "samples in the trace")
  print(("# trace: %d op slices, %d on-CPU samples, %d inside an op slice"):format(#slices, instants, inside))
  -- as many as the record attributes to ops (its on-CPU ones): the trace's clock is the join's
  local want_inside = 0
  for line in T.read(rec.artifacts.run_dir .. "/" .. rec.artifacts.cpu_profile_folded.file):gmatch("[^\n]+") do
    local stack, n = line:match("^(.-) (%d+)$")
    if stack:match("^native_call_") and not stack:match(";%[preempted%]$") then want_inside = want_inside + tonumber(n) end
  end
  T.ok(math.abs(inside - want_inside) <= math.max(2, 0.01 * instants),
    ("samples inside op slices: %d in the trace, %d attributed"):format(inside, want_inside))
  local html = T.read(page)
  local flames = select(2, html:gsub('class="flame"', ""))
  T.eq(flames, 1 + #cp.ops, "one flame graph for execute and one per op")
  for i = 1, #cp.ops do T.ok(html:find(('data-flame="flame-op%d"'):format(i), 1, true), "row " .. i .. " shows its graph") end
  T.eq(html:find('src="http', 1, true), nil, "self-contained")
end)

T.with_real_runner("over SSH (the loopback sshd, the resident helper pushed): the same profile, the stream fetched",
  function(real)
  local sshd = require("sshd")
  local srv = sshd.start()
  local ok, err = pcall(function()
    local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
      "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts,
      "--remote-dir", srv.remote_dir .. "/sample", "--runner", real, "--model", mlp, "-n", "40", "--sample=2000",
      "--runs-dir", tmp .. "/ssh-runs", "--format", "json", "--no-history" }, timeout = 300 })
    T.eq(r.status, 0, r.stderr:sub(-500))
    local rec = require("odp.core.json").decode(r.stdout)
    local cp = rec.cpu_profile
    T.ok(cp and cp.rate_hz == 2000, "cpu_profile at 2000 Hz")
    print(("# over SSH: %s, %d samples, attributed %.3f"):format(cp.event, cp.samples.total, cp.attributed))
    T.ok(cp.attributed >= 0.95, ("attributed %.3f"):format(cp.attributed))
    oracle.check(T, cp, rec.artifacts.run_dir .. "/" .. rec.artifacts.etdump.file, "over SSH")
    -- the runner staged on the board is named through the local copy: its functions, not unknown frames
    local hottest
    for _, t in ipairs(cp.ops[1].top) do if t.symbol ~= prof.PREEMPTED then hottest = t.symbol break end end
    T.match(hottest, "^executor_runner%+0x%x+$")
  end)
  srv:stop()
  if not ok then error(err, 0) end
end)

-- the runner's own "Iteration i of n: X ms" lines in a log, read here without odp's parser
local function iteration_ms(text, into)
  for ms in text:gmatch("Iteration %d+ of %d+: ([%d.]+) ms") do into[#into + 1] = tonumber(ms) end
  return into
end
-- one CSV line's cells (RFC 4180: a quoted cell may hold commas and doubled quotes)
local function split(line)
  local out, i = {}, 1
  while i <= #line + 1 do
    if line:sub(i, i) == '"' then
      local j, cell = i + 1, {}
      while true do
        local q = assert(line:find('"', j, true), "an unclosed quote")
        cell[#cell + 1] = line:sub(j, q - 1)
        if line:sub(q + 1, q + 1) == '"' then cell[#cell + 1] = '"'; j = q + 2 else i = q + 2 break end
      end
      out[#out + 1] = table.concat(cell)
    else
      local c = line:find(",", i, true) or (#line + 1)
      out[#out + 1] = line:sub(i, c - 1)
      i = c + 1
    end
  end
  return out
end
local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

T.with_real_runner("--sample-overhead=3 with the real runner and mlp.pte: the medians of the unsampled and sampled " ..
  "processes' own iteration lines, interleaved ABBA; in the terminal, HTML and CSV reports", function(real)
  local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/host.lua", "--runner", real, "--model", mlp,
    "-n", "15", "--sample", "--sample-overhead=3", "--runs-dir", tmp .. "/ovh-runs", "--format", "json",
    "--no-history" }, timeout = 300 })
  T.eq(r.status, 0, r.stderr:sub(-500))
  local rec = require("odp.core.json").decode(r.stdout)
  local ov, dir = rec.cpu_profile.overhead, rec.artifacts.run_dir
  local got = { sampled = {}, unsampled = {} }
  for i = 1, 3 do
    for side in pairs(got) do
      local a = rec.artifacts[("overhead_%d_%s_stderr"):format(i, side)]
      T.ok(a, ("process %d %s kept"):format(i, side))
      local before = #got[side]
      iteration_ms(T.read(dir .. "/" .. a.file), got[side])
      T.eq(#got[side] - before, 15, ("process %d %s printed its 15 iterations"):format(i, side))
    end
  end
  print(("# overhead: %s %+.1f%% [%+.1f, %+.1f]: %.3f ms sampled, %.3f ms unsampled"):format(ov.state, ov.pct,
    ov.ci_pct[1], ov.ci_pct[2], ov.sampled_p50_ms, ov.unsampled_p50_ms))
  T.eq(ov.processes, 3)
  T.eq(ov.iterations, { sampled = 45, unsampled = 45 })
  T.near(ov.sampled_p50_ms, median(got.sampled), 1e-9, "the sampled median is the runner's own lines'")
  T.near(ov.unsampled_p50_ms, median(got.unsampled), 1e-9, "the unsampled median is the runner's own lines'")
  T.near(ov.ratio, ov.sampled_p50_ms / ov.unsampled_p50_ms, 1e-12)
  T.near(ov.pct, (ov.ratio - 1) * 100, 1e-9)
  T.ok(ov.ci_pct[1] <= ov.pct and ov.pct <= ov.ci_pct[2], "the interval holds the estimate")
  if ov.state == "measured" then
    T.ok(ov.ci_pct[1] > 0 or ov.ci_pct[2] < 0, "measured: the interval leaves out no difference")
  else
    T.eq(ov.state, "undecided")
    T.ok(ov.ci_pct[1] <= 0 and ov.ci_pct[2] >= 0, "undecided: the interval holds no difference")
    T.match(ov.need, "%-%-sample%-overhead=6")
  end
  -- the sampler ran on the sampled processes only: their stderr passed through it, the unsampled ones' did not
  -- (each process's first iteration line is in both; the order is ABBA: the record's artifacts say nothing of
  -- order, the files' modification times do)
  local function mtime(i, side) return sys.stat(dir .. ("/overhead-%d-%s.stderr"):format(i, side)).mtime end
  T.ok(mtime(1, "unsampled") <= mtime(1, "sampled") and mtime(2, "sampled") <= mtime(2, "unsampled")
    and mtime(3, "unsampled") <= mtime(3, "sampled"), "ABBA: unsampled first in odd pairs, sampled first in even")
  T.ok(mtime(3, "sampled") <= sys.stat(dir .. "/runner.stderr").mtime, "the measured process last: its samples kept")
  T.eq(sys.stat(dir .. "/overhead-1-sampled.memory.csv"), nil, "the overhead processes' timelines not left behind")
  -- the views: terminal, HTML, CSV
  local line = require("odp.results.cpu_profile").overhead_line(ov)
  local term = assert(proc.run { argv = { odp, "inspect", dir }, timeout = 60 })
  T.ok(term.stdout:find(line, 1, true), "odp inspect RUN shows: " .. line)
  -- the run's terminal report names the overhead processes' 12 logs in one line, not a line each
  local human = require("odp.results.report").formats.human({ rec })
  T.eq(select(2, human:gsub("\n%s+overhead_%d+_", "")), 0, "no line per overhead log")
  T.match(human, "\n  overhead logs%s+12 runner logs of the %-%-sample%-overhead processes: " ..
    dir:gsub("%p", "%%%0") .. "/overhead%-%*%.std{out,err}\n")
  local page = tmp .. "/ovh.html"
  T.eq(assert(proc.run { argv = { odp, "report", dir, "--out", page }, timeout = 120 }).status, 0)
  T.ok(T.read(page):find("sampling overhead: " .. ("%+.1f%%"):format(ov.pct), 1, true), "the HTML page shows it")
  -- what `odp run --format csv` prints for this record
  local head, row = require("odp.results.report").formats.csv({ rec }):match("^([^\n]*)\n([^\n]*)")
  local col
  for i, name in ipairs(split(head, ",")) do if name == "cpu_profile.overhead.sampled_p50_ms" then col = i end end
  T.ok(col, "the CSV has cpu_profile.overhead.sampled_p50_ms")
  T.near(tonumber(split(row, ",")[col]), ov.sampled_p50_ms, 1e-6)
end)

T.test("hottest functions: those that round to 0% are left out, in the terminal and on the page alike", function()
  local prof = require("odp.results.cpu_profile")
  local op = { name = "native_call_mm.out", instruction_id = 0, samples = 1000, share = 0.6, time_share = 0.59,
    top = { { symbol = "gemm", samples = 620, share = 0.62 }, { symbol = "pack", samples = 310, share = 0.31 },
      { symbol = "memcpy", samples = 4, share = 0.004 }, { symbol = "once", samples = 1, share = 0.001 } } }
  T.eq(prof.top_text(op), "gemm 62%, pack 31%")
  T.eq(prof.top_text({ top = { { symbol = "x", share = 0.001 } } }), nil, "none left: nil")
  local cp = { event = "cpu-clock", rate_hz = 4000, samples = { total = 1000, in_execute = 1000 }, attributed = 1,
    ops = { op }, overhead = prof.overhead_not_measured() }
  local term = table.concat(prof.human_lines(cp), "\n")
  T.match(term, "gemm 62%%, pack 31%%\n?")
  T.ok(not term:find("memcpy", 1, true) and not term:find("[^%d%.]0%%"), "no 0% entry in the terminal: " .. term)
  local page = require("odp.results.html").run({ schema = "odp.result/1", ok = true, flow = "executorch",
    cpu_profile = cp })
  T.match(page, "<td>gemm 62%%, pack 31%%</td>")
  T.ok(not page:find("memcpy", 1, true) and not page:find("once 0%", 1, true), "no 0% entry on the page")
end)

T.test("cpu_profile.overhead's verdict: too few processes, no difference at that n, a clear one", function()
  -- 3 processes a side, 20 iterations each; the sampled side 10% slower with 1% noise: measured, +10%
  local function side(base, k, seed)
    local groups = {}
    for p = 1, k do
      groups[p] = {}
      for i = 1, 20 do groups[p][i] = base * (1 + 0.01 * math.sin(seed * 7 + p * 13 + i)) end
    end
    return groups
  end
  local ov = prof.overhead(side(8, 3, 1), side(8.8, 3, 2))
  T.eq(ov.state, "measured")
  T.near(ov.pct, 10, 1.0)
  T.ok(ov.ci_pct[1] > 5 and ov.ci_pct[2] < 15, ("interval %.1f..%.1f"):format(ov.ci_pct[1], ov.ci_pct[2]))
  -- the same distribution both sides: undecided, and what would decide
  ov = prof.overhead(side(8, 4, 1), side(8, 4, 1))
  T.eq(ov.state, "undecided")
  T.match(ov.why, "holds no difference at 4 processes a side")
  T.match(ov.need, "%-%-sample%-overhead=8")
  -- a clear difference but 2 processes a side: undecided all the same
  ov = prof.overhead(side(8, 2, 1), side(8.8, 2, 2))
  T.eq(ov.state, "undecided")
  T.match(ov.why, "2 process%(es%) a side")
  -- no iteration lines: not measured, no number
  ov = prof.overhead({ {}, {}, {} }, { {}, {}, {} })
  T.eq(ov.state, "not measured")
  T.eq(ov.pct, nil)
  T.match(prof.overhead_line(ov), "^sampling overhead: not measured %(")
end)

T.test("--sample is given its rate with '=': a bare number after it is refused, a misspelling is exit 2", function()
  for _, case in ipairs { { { "--sample", "1000" }, "takes its value after '='" }, { { "--sampel" }, "unknown option" },
    { { "--sample=0" }, "positive" }, { { "--sample", "--sample-overhed=3" }, "did you mean %-%-sample%-overhead" },
    { { "--sample", "--sample-overhead", "3" }, "takes its value after '='" },
    { { "--sample-overhead=3" }, "give %-%-sample%[=HZ%] too" } } do
    local argv = { odp, "run", root .. "/scripts/host.lua", "--runner", runner, "--model", mlp, "--no-history" }
    table.move(case[1], 1, #case[1], #argv + 1, argv)
    local r = assert(proc.run { argv = argv, timeout = 60 })
    T.eq(r.status, 2, table.concat(case[1], " "))
    T.match(r.stderr, case[2])
  end
end)

T.done()
