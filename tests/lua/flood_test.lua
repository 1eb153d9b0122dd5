-- A runner that prints 100 MiB on stdout and 100 MiB on stderr before its timing lines (tests/c/fake_runner,
-- ODP_FAKE_FLOOD_MB), on the host target and over SSH (a loopback sshd, the resident helper): the latency comes
-- from its own iteration lines after the flood (not from the wall time), the record says what was cut and
-- where all of it is, the run dir's files hold every byte, and odp's peak RSS stays under 64 MB. Oracles: the
-- iteration lines read back from the run dir's stderr file by this test, the files' sizes against what the
-- fake prints, and GNU time's maximum resident set size of odp.
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local sys = require("odp.sys")
local sshd = require("sshd")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local fake = (os.getenv("ODP_BUILD_DIR") or (root .. "/build")) .. "/tests/fake_runner"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local FLOOD_MB, N = 100, 5
-- odp's peak RSS bound. Under `make asan` odp runs with an 8 MB quarantine (ASan's default 256 MB of freed memory
-- kept unreused would be most of the peak) and its redzones and shadow on top: 78 MB measured for 53 MB plain
local ASAN = T.asan_env("quarantine_size_mb=8")
local RSS_MAX_KB = (ASAN and 96 or 64) * 1024

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- odp run SCRIPT ARGS under GNU time -v, the fake flooding; -> the record, the result, odp's peak RSS (kB).
local function flooded(dir, script, args)
  local argv = { odp, "run", root .. "/scripts/" .. script, "--runner", fake, "--model", add, "-n", tostring(N),
    "--runs-dir", dir .. "/runs", "--format", "json", "-q" }
  table.move(args, 1, #args, #argv + 1, argv)
  -- the fake's knobs as its flags: they reach it on the board too (the environment does not)
  table.move({ "--", "--fake_flood_mb=" .. FLOOD_MB, "--fake_iter_us=10000" }, 1, 3, #argv + 1, argv)
  local words = {}
  for i, a in ipairs(argv) do words[i] = q(a) end
  local r = assert(proc.run { argv = { "sh", "-c", ("/usr/bin/time -v -o %s %s"):format(q(dir .. "/time.txt"),
    table.concat(words, " ")) }, cwd = dir, env = ASAN, timeout = 600, capture_limit = 1 << 20 })
  local rec = json.decode(r.stdout)
  if not rec then error(("not JSON; stdout:\n%s\nstderr:\n%s"):format(r.stdout:sub(1, 2000), r.stderr), 0) end
  local rss = tonumber(T.read(dir .. "/time.txt"):match("Maximum resident set size %(kbytes%): (%d+)"))
  return rec, r, rss
end

-- The median of the iteration times the runner printed, read from its whole stderr file.
local function iterations_median(path)
  local xs = {}
  for line in io.lines(path) do
    local ms = line:match("%] Iteration %d+ of %d+: ([%d.]+) ms$")
    if ms then xs[#xs + 1] = tonumber(ms) end
  end
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2, n
end

local function check(rec, r, rss, what)
  T.eq(r.status, 0, what .. ": " .. r.stderr)
  T.eq(rec.ok, true, what)
  local run_dir = rec.artifacts.run_dir
  local err_file = run_dir .. "/runner.stderr"
  local median, n = iterations_median(err_file)
  T.eq(n, N, what .. ": the runner's iteration lines, after the flood, are all in its file")
  T.eq(rec.latency_ms.source, "log", what .. ": latency from its lines, not the wall time")
  T.eq(rec.latency_ms.n, N, what)
  T.near(rec.latency_ms.p50, median, 1e-9, what .. ": the median of its own iteration lines")
  for _, ext in ipairs { "stdout", "stderr" } do
    local cut = rec.output_cut and rec.output_cut[ext]
    T.ok(cut, what .. ": the record says " .. ext .. " was cut: " .. json.encode(rec.output_cut or {}) .. json.encode(rec.warnings))
    local size = sys.stat(run_dir .. "/runner." .. ext).size
    T.ok(size >= FLOOD_MB << 20, ("%s: the whole %s is in the run dir (%d bytes)"):format(what, ext, size))
    T.eq(cut.bytes, size, what .. ": its size as the record says")
    T.eq(cut.file, "runner." .. ext, what)
    T.ok(cut.kept < 8 << 20, what .. ": a bounded part read")
    local said = false
    for _, w in ipairs(rec.warnings) do
      if w:find("the runner printed " .. size .. " bytes on " .. ext, 1, true) then said = true end
    end
    T.ok(said, what .. ": a warning says so: " .. json.encode(rec.warnings))
  end
  T.ok(rss and rss < RSS_MAX_KB, ("%s: odp's peak RSS %s kB, under %d MB"):format(what, tostring(rss),
    RSS_MAX_KB // 1024))
end

T.test("host target: 100 MiB per stream, then the timing lines", function()
  local dir = T.tmpdir()
  local rec, r, rss = flooded(dir, "host.lua", {})
  check(rec, r, rss, "host")
end)

T.test("over SSH (the resident helper): 100 MiB per stream, then the timing lines; nothing left on the board",
  function()
  local srv = sshd.start()
  T.at_done(function() srv:stop() end)
  local dir = T.tmpdir()
  local remote = srv.remote_dir .. "/flood"
  local rec, r, rss = flooded(dir, "rpi5.lua", { "--host", srv.user .. "@127.0.0.1", "--port", tostring(srv.port),
    "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--remote-dir", remote })
  check(rec, r, rss, "ssh")
  local p = io.popen("ls -A " .. q(remote) .. " 2>&1")
  local left = p:read("a")
  p:close()
  T.ok(not left:find("odp%-run"), "no run file left on the board: " .. left)
  srv:stop()
end)

T.done()
