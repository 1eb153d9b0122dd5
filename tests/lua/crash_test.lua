-- A runner that crashes (SIGSEGV, SIGABRT) after writing part of its ETDump, on the host target: the ETDump is
-- fetched, read as far as it goes and marked partial; a core the runner dumped is named (path, size), removed,
-- or kept with --keep-core. The runner is tests/c/fake_runner writing the first N bytes of the real
-- tests/fixtures/etdump/add_n10.etdump; the oracles are that file's flatc decode (add_n10.flatc.json: its
-- events and their durations), the kernel's own core file (an ELF of type ET_CORE) and this machine's
-- core_pattern, read by the test itself.
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local sys = require("odp.sys")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local fake = (os.getenv("ODP_BUILD_DIR") or (root .. "/build")) .. "/tests/fake_runner"
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local etd = root .. "/tests/fixtures/etdump/add_n10.etdump"
local full_bytes = #T.read(etd)

-- The oracle: the Execute runs' profile events of the whole file by name -> sorted durations (ticks = ns).
local function execute_events()
  local doc = json.decode(T.read(root .. "/tests/fixtures/etdump/add_n10.flatc.json"))
  local by = {}
  for _, run in ipairs(doc.run_data) do
    if run.name == "Execute" then
      for _, e in ipairs(run.events) do
        local p = e.profile_event
        if p then
          by[p.name] = by[p.name] or {}
          table.insert(by[p.name], tonumber(p.end_time) - tonumber(p.start_time))
        end
      end
    end
  end
  for _, d in pairs(by) do table.sort(d) end
  return by
end

local function median(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

-- odp run scripts/host.lua with the fake runner in mode, its ETDump cut to bytes, core dumps allowed when
-- core; -> the record, the result, the run dir.
local function crash(dir, mode, bytes, core, extra)
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runner", fake, "--model", add, "-n", "10",
    "--etdump", dir .. "/e.etdp", "--runs-dir", dir .. "/runs", "--format", "json", "-q" }
  table.move(extra or {}, 1, #(extra or {}), #argv + 1, argv)
  local words = {}
  for i, a in ipairs(argv) do words[i] = "'" .. a .. "'" end
  local r = assert(proc.run { argv = { "sh", "-c", ("ulimit -c %s && exec %s"):format(core and "unlimited" or "0",
    table.concat(words, " ")) }, cwd = dir, timeout = 120,
    env = { ODP_FAKE_MODE = mode, ODP_FAKE_ETDUMP = etd, ODP_FAKE_ETDUMP_BYTES = tostring(bytes) } })
  local rec = json.decode(r.stdout)
  if not rec then error(("not JSON; stdout:\n%s\nstderr:\n%s"):format(r.stdout, r.stderr), 0) end
  return rec, r, rec.artifacts.run_dir
end

local function has_warning(rec, pattern)
  for _, w in ipairs(rec.warnings) do if w:find(pattern) then return true end end
  return false
end

local function listing(dir)
  local p = io.popen("ls -A '" .. dir .. "'")
  local s = p:read("a")
  p:close()
  return s
end

-- Where this machine's kernel writes a core: a plain pattern is a file in the crashing process's working
-- directory (the run dir, on the host target); a pipe (|...) hands it to a program instead.
local pattern = T.read("/proc/sys/kernel/core_pattern"):match("[^\n]*")
local cores_in_cwd = pattern:sub(1, 1) ~= "|" and not pattern:find("/", 1, true)

T.test("SIGSEGV after all but the last 16 bytes of the ETDump: read up to the cut, marked partial; no core", function()
  local dir = T.tmpdir()
  local rec, r, run_dir = crash(dir, "segv_late", full_bytes - 16, false)
  T.eq(r.status, 1, r.stderr)
  T.eq(rec.ok, false)
  T.eq(rec.error.code, "ERUNNER")
  T.match(rec.error.message, "^runner killed by SIGSEGV")
  T.eq(rec.signal, 11)
  T.eq(rec.etdump_partial.bytes, full_bytes - 16, "the file's bytes")
  T.eq(rec.etdump_partial.expected_bytes, full_bytes, "what its size prefix says")
  T.eq(rec.etdump_partial.runs_lost, 1, "the Default run lies at the end of the flatbuffer: cut off")
  T.ok(has_warning(rec, "^ETDump cut short: " .. (full_bytes - 16) .. " of its " .. full_bytes .. " bytes"),
    json.encode(rec.warnings))
  -- the Execute runs lie whole before the cut: their ops are the whole file's
  local want = execute_events()
  local seen = 0
  for _, op in ipairs(rec.ops) do
    T.eq(op.block, "Execute", op.name)
    T.ok(want[op.name], "an op of the file: " .. op.name)
    T.eq(op.n, #want[op.name], op.name)
    T.near(op.p50, median(want[op.name]) / 1e6, 1e-9, op.name)
    seen = seen + 1
  end
  T.ok(seen >= 2, "native_call_add.out and Method::execute at least: " .. seen)
  T.eq(rec.artifacts.etdump.bytes, full_bytes - 16, "the partial ETDump is the run's artifact")
  T.eq(rec.core, nil, "no core (ulimit -c 0)")
  T.eq(sys.stat(run_dir .. "/core"), nil)
end)

T.test("SIGABRT after half the ETDump, with a core: nothing readable before the cut is said; the core named and removed",
  function()
  local dir = T.tmpdir()
  local rec, r, run_dir = crash(dir, "abort_late", full_bytes // 2, true)
  T.eq(r.status, 1, r.stderr)
  T.match(rec.error.message, "^runner killed by SIGABRT")
  T.eq(rec.etdump_partial.bytes, full_bytes // 2)
  T.eq(#rec.ops, 0, "no op lies whole before the cut")
  if cores_in_cwd then
    T.eq(rec.core.path, run_dir .. "/core", "the kernel's core in the runner's working directory")
    T.ok(rec.core.bytes > 0)
    T.eq(rec.core.removed, true)
    T.ok(has_warning(rec, "^the runner dumped core %(.*, " .. rec.core.bytes .. " bytes%): not kept %(%-%-keep%-core"),
      json.encode(rec.warnings))
    T.eq(sys.stat(run_dir .. "/core"), nil, "removed")
  else
    T.eq(rec.core.handler, pattern, "the core went to the kernel's handler, named")
  end
  T.ok(not listing(run_dir):find("core"), "no core left: " .. listing(run_dir))
end)

local keep_core = "--keep-core keeps the kernel's core in the run dir, named with its size"
if not cores_in_cwd then
  T.skip(keep_core, "this machine's core_pattern '" .. pattern .. "' writes no core file where the runner runs")
else T.test(keep_core, function()
  local dir = T.tmpdir()
  local rec, r, run_dir = crash(dir, "segv_late", full_bytes - 16, true, { "--keep-core" })
  T.eq(r.status, 1, r.stderr)
  T.eq(rec.core.kept, run_dir .. "/core")
  local core = T.read(run_dir .. "/core")
  T.eq(#core, rec.core.bytes, "its size as recorded")
  T.eq(core:sub(1, 4), "\127ELF", "an ELF file")
  T.eq(string.unpack("<I2", core, 17), 4, "of type ET_CORE: the kernel's core dump")
  T.eq(rec.artifacts.core.bytes, rec.core.bytes, "an artifact of the run")
  T.ok(rec.etdump_partial, "the ETDump still read as far as it goes")
end) end

T.test("over SSH (a loopback sshd): the cut ETDump fetched and read, the core fetched with --keep-core and "
  .. "removed from the board, nothing left there", function()
  local srv = require("sshd").start()
  T.at_done(function() srv:stop() end)
  local dir = T.tmpdir()
  local remote = srv.remote_dir .. "/crash"
  local argv = { odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1", "--port",
    tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--remote-dir", remote,
    "--runner", fake, "--model", add, "-n", "10", "--etdump", dir .. "/e.etdp", "--runs-dir", dir .. "/runs",
    "--format", "json", "-q", "--keep-core",
    -- the fake's knobs as its flags (the environment stays here); it raises its own core limit on the board
    "--", "--fake_mode=segv_late", "--fake_etdump=" .. etd, "--fake_etdump_bytes=" .. (full_bytes - 16), "--fake_core=1",
    timeout = 120 }
  local r = assert(proc.run(argv))
  local rec = json.decode(r.stdout)
  T.ok(rec, r.stderr)
  T.eq(r.status, 1, r.stderr)
  T.match(rec.error.message, "^runner killed by SIGSEGV")
  T.eq(rec.etdump_partial.bytes, full_bytes - 16)
  T.eq(rec.etdump_partial.runs_lost, 1)
  T.ok(#rec.ops >= 2, "the Execute block read")
  local run_dir = rec.artifacts.run_dir
  if cores_in_cwd then
    -- the runner's working dir on the board: this odp's own directory there (docs/devices.md "A shared board")
    T.match(rec.core.path, "^" .. remote:gsub("%p", "%%%0") .. "/%.odp/runs/[^/]+/core$",
      "in the runner's working dir on the board")
    T.eq(rec.core.kept, run_dir .. "/core")
    T.eq(rec.core.removed, true)
    local core = T.read(run_dir .. "/core")
    T.eq(#core, rec.core.bytes, "fetched whole")
    T.eq(string.unpack("<I2", core, 17), 4, "an ELF core")
  else
    T.eq(rec.core.handler, pattern)
  end
  local p = io.popen("ls -AR '" .. remote .. "' 2>&1")
  local left = p:read("a")
  p:close()
  T.ok(not left:find("core") and not left:find("odp%-run"), "nothing of the run left on the board: " .. left)
  srv:stop()
end)

T.done()
