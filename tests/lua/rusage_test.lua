-- tools/odp-rusage (x86_64 natively, aarch64 under qemu-aarch64-static) and its parser odp.target.rusage.
local T = require("t")
local proc = require("odp.proc")
local rusage = require("odp.target.rusage")
local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")

T.test("parser: a line among other stderr; rest is kept", function()
  local rec, rest = rusage.parse("I executorch: hello\nODP-RUSAGE status=0 signal=6 core=1 maxrss_kb=43600 "
    .. "utime_s=1.450000 stime_s=0.020000 wall_s=0.451234 minflt=12 majflt=0 nvcsw=10 nivcsw=3\nafter\n")
  T.eq(rec.status, 0); T.eq(rec.signal, 6); T.eq(rec.core, true); T.eq(rec.wall_s, 0.451234)
  T.eq(rec.rusage, { utime_s = 1.45, stime_s = 0.02, maxrss_kb = 43600, minflt = 12, majflt = 0, nvcsw = 10, nivcsw = 3 })
  T.eq(rest, "I executorch: hello\nafter\n")
end)

T.test("parser: absent or malformed lines are not records", function()
  for _, bad in ipairs { "", "nothing\n", "ODP-RUSAGE status=x signal=0\n", "ODP-RUSAGE status=0\n",
    "xODP-RUSAGE status=0 signal=0 maxrss_kb=1 utime_s=0 stime_s=0 wall_s=0\n",
    "ODP-RUSAGE status=0 signal=0 maxrss_kb=99999999999999999999 utime_s=0 stime_s=0 wall_s=0\n" } do
    local rec, rest = rusage.parse(bad)
    T.eq(rec, nil, bad); T.eq(rest, bad)
  end
  T.eq(rusage.parse(nil), nil)
end)

local function run_helper(prefix, args)
  local argv = {}
  for _, a in ipairs(prefix) do argv[#argv + 1] = a end
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  argv.timeout = 60
  return assert(proc.run(argv))
end

for _, v in ipairs { { "x86_64", {} }, { "aarch64", { "qemu-aarch64-static" } } } do
  local arch, pre = v[1], v[2]
  local helper = build .. "/odp-rusage-" .. arch
  local prefix = { table.unpack(pre) }
  prefix[#prefix + 1] = helper
  T.test(arch .. ": status, rusage and stderr passthrough", function()
    T.ok(io.open(helper), helper .. " built")
    local r = run_helper(prefix, { "sh", "-c", "echo out; echo err >&2; head -c 30000000 /dev/zero | cat >/dev/null; exit 3" })
    T.eq(r.status, 3); T.eq(r.stdout, "out\n")
    local rec, rest = rusage.parse(r.stderr)
    T.ok(rec, "line in " .. r.stderr)
    T.eq(rec.status, 3); T.eq(rec.signal, 0); T.eq(rest, "err\n")
    T.ok(rec.rusage.maxrss_kb > 100, "maxrss"); T.ok(rec.wall_s > 0, "wall")
  end)
  T.test(arch .. ": --cpus pins the program (sched_getaffinity of the program itself); bad lists are 125", function()
    local r = run_helper(prefix, { "--cpus", "0", "--", "sh", "-c", "grep Cpus_allowed_list /proc/self/status" })
    T.eq(r.status, 0, r.stderr)
    T.match(r.stdout, "Cpus_allowed_list:%s+0\n")
    for _, bad in ipairs({ "", "x", "3-1", "1,", "0-2000" }) do
      r = run_helper(prefix, { "--cpus", bad, "true" })
      T.eq(r.status, 125, bad)
      T.match(r.stderr, "not a CPU list", bad)
    end
  end)
  T.test(arch .. ": a signal is reported and reproduced; -o writes a file; missing program is 127", function()
    local r = run_helper(prefix, { "sh", "-c", "kill -ABRT $$" })
    local rec = rusage.parse(r.stderr)
    T.eq(rec.signal, 6); T.eq(rec.status, 0)
    -- under qemu the helper's own re-raise becomes qemu's; natively the helper dies of the same signal
    if arch == "x86_64" then T.eq(r.signal, 6) end
    local tmp = T.tmpdir()
    local out = { table.unpack(prefix) }
    out[#out + 1] = "-o"; out[#out + 1] = tmp .. "/ru"
    r = run_helper(out, { "true" })
    T.eq(r.status, 0); T.eq(r.stderr, "")
    T.eq(rusage.parse(T.read(tmp .. "/ru")).status, 0)
    r = run_helper(prefix, { "/nonexistent/prog" })
    T.eq(r.status, 127); T.match(r.stderr, "cannot run")
  end)
end

-- (an orphan reparented to a subreaper that does not reap it stays a zombie: that is gone, too)
T.test("x86_64: SIGTERM to the helper reaches the program's whole group", function()
  local tmp = T.tmpdir()
  -- waits for events, not times: the pid file written (the program's child runs), then the helper's exit;
  -- the child must be seen alive first, so an empty pid file cannot pass for "gone"
  local r = assert(proc.run { "sh", "-c", ([[
    export T=%s
    "$B/odp-rusage-x86_64" sh -c 'sleep 100 & echo $! >"$T/pid.tmp" && mv "$T/pid.tmp" "$T/pid"; wait' 2>"$T/err" & h=$!
    i=0; while [ ! -s "$T/pid" ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i + 1)); done
    p=$(cat "$T/pid")
    alive() { ps -o stat= -p "$p" | grep -qv Z; }
    alive && echo "alive before" || echo "not running before: pid '$p'"
    kill -TERM $h; wait $h
    i=0; while alive && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    alive && echo "alive after" || echo "gone after"]]):format(tmp), env = { B = build }, timeout = 30 })
  T.eq(r.stdout, "alive before\ngone after\n", r.stderr)
  T.eq(rusage.parse(T.read(tmp .. "/err")).signal, 15)
end)

T.done()
