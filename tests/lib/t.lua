--- A small test library for Lua tests executed by the odp binary (so every C module is present).
-- Usage, in tests/lua/<area>_test.lua:
--   local T = require("t")
--   T.test("parses the RPi5 example", function() T.eq(x, 10) end)
--   T.done()            -- prints the plan "1..N"; exit code 1 if anything failed
-- Output is TAP: "ok N - name", "not ok N - name" (+ indented diagnostics), "ok N - name # SKIP why", and the
-- plan at the end, which tests/run.sh checks against the tests it saw (a script that stops early fails).
-- A test that needs a tool gets it from vendor/packages.txt. The only skip is for a peer that a fresh clone
-- does not carry (the real ExecuTorch runners, see T.real_runner): counted as skipped, never as passed.
local T = {}
local n, failed = 0, 0

local function repr(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) ~= "table" then return tostring(v) end
  local ok, json = pcall(require, "odp.core.json")
  if ok then return json.encode(v) end
  return tostring(v)
end

local function deep_eq(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  for k, v in pairs(a) do if not deep_eq(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local Fail = {}
local function fail(msg, level) error(setmetatable({ msg = msg }, Fail), (level or 1) + 1) end

function T.eq(got, want, what)
  if not deep_eq(got, want) then
    fail(string.format("%s: expected %s, got %s", what or "value", repr(want), repr(got)), 2)
  end
end

function T.near(got, want, tol, what)
  tol = tol or 1e-9
  if type(got) ~= "number" or math.abs(got - want) > tol * math.max(1, math.abs(want)) then
    fail(string.format("%s: expected %s (rel tol %g), got %s", what or "value", repr(want), tol, repr(got)), 2)
  end
end

function T.ok(v, what)
  if not v then fail((what or "condition") .. " is false", 2) end
  return v
end

function T.match(s, pattern, what)
  if type(s) ~= "string" or not s:find(pattern) then
    fail(string.format("%s: %s does not match %q", what or "string", repr(s), pattern), 2)
  end
end

--- Asserts that fn raises; returns the error message. pattern (optional) must be found in it.
function T.raises(fn, pattern, what)
  local ok, err = pcall(fn)
  if ok then fail((what or "call") .. " did not raise", 2) end
  local msg = type(err) == "table" and (err.message or err.msg) or tostring(err)
  if pattern and not tostring(msg):find(pattern) then
    fail(string.format("%s raised %q, which does not match %q", what or "call", tostring(msg), pattern), 2)
  end
  return msg
end

--- Asserts that fn raises a structured failure (odp.core.errors: {code, message, exit}); returns it.
function T.failure(fn, what)
  local ok, err = pcall(fn)
  if ok then fail((what or "call") .. " did not raise", 2) end
  if not require("odp.core.errors").is_failure(err) then
    fail(string.format("%s raised %s, not a structured failure", what or "call", tostring(err)), 2)
  end
  return err
end

function T.test(name, fn)
  n = n + 1
  local ok, err = xpcall(fn, function(e)
    if getmetatable(e) == Fail then return e.msg end
    return debug.traceback(tostring(type(e) == "table" and (e.message or e.msg) or e), 2)
  end)
  if ok then
    print(string.format("ok %d - %s", n, name))
  else
    failed = failed + 1
    print(string.format("not ok %d - %s", n, name))
    for line in tostring(err):gmatch("[^\n]+") do print("#   " .. line) end
  end
  io.stdout:flush()
end

--- Reports name as skipped (counted as such by tests/run.sh), with the reason.
function T.skip(name, why)
  n = n + 1
  print(string.format("ok %d - %s # SKIP %s", n, name, why))
  io.stdout:flush()
end

--- The real ExecuTorch executor_runner (x86_64, ETDump + logging) for tests that involve a runner:
-- $ODP_REAL_RUNNER, which tests/run.sh defaults to the copy beside the project when there is one.
-- arch "aarch64" gives the static aarch64 build ($ODP_REAL_RUNNER_AARCH64), which runs here under qemu-user.
-- Returns the path, or nil and the reason to skip with (a fresh clone has no such peer).
function T.real_runner(arch)
  local var = arch == "aarch64" and "ODP_REAL_RUNNER_AARCH64" or "ODP_REAL_RUNNER"
  local path = os.getenv(var)
  if not path or path == "" then return nil, var .. " is not set" end
  local f = io.open(path, "rb")
  if not f then return nil, ("no real executor_runner at %s (%s)"):format(path, var) end
  f:close()
  return path
end

--- Runs fn as test name when the real runner exists, else reports it skipped: fn(runner_path).
function T.with_real_runner(name, fn, arch)
  local runner, why = T.real_runner(arch)
  if not runner then return T.skip(name, why) end
  T.test(name, function() fn(runner) end)
end

--- ExecuTorch's LLM runner for the --llm tests: $ODP_REAL_LLM, a folder with llama_main (and
-- llama_main-linux-aarch64), toy.pte and tok.bin, which tests/run.sh defaults to the one beside the project.
-- Runs fn as test name with that folder's paths {runner, model, tokenizer, dir}, else reports it skipped.
-- arch "aarch64": the runner is the static aarch64 build.
function T.with_real_llm(name, fn, arch)
  local dir = os.getenv("ODP_REAL_LLM")
  if not dir or dir == "" then return T.skip(name, "ODP_REAL_LLM is not set") end
  local p = { dir = dir, runner = dir .. (arch == "aarch64" and "/llama_main-linux-aarch64" or "/llama_main"),
    model = dir .. "/toy.pte", tokenizer = dir .. "/tok.bin" }
  for _, f in ipairs({ p.runner, p.model, p.tokenizer }) do
    local h = io.open(f, "rb")
    if not h then return T.skip(name, ("no %s (ODP_REAL_LLM)"):format(f)) end
    h:close()
  end
  T.test(name, function() fn(p) end)
end

--- The records of a JSONL file (a sweep's --out), in order; none when the file is not there yet.
function T.records(path)
  local out, f = {}, io.open(path, "rb")
  if not f then return out end
  for line in f:lines() do out[#out + 1] = assert(require("odp.core.json").decode(line)) end
  f:close()
  return out
end

--- Path of the project's top directory (tests run from anywhere).
function T.root() return require("odp.host").root end

--- A deterministic random generator for bounded fuzz loops (no math.random seed dependence across Lua
-- builds): local rnd = T.lcg(7); rnd(n) -> an integer in [0, n).
function T.lcg(seed)
  local s = seed
  return function(n)
    s = (s * 1103515245 + 12345) % 2147483648
    return s % n
  end
end

--- base with 1..6 random edits (deletions, insertions of one character of alphabet, repeats of a slice),
-- for bounded fuzz loops over text parsers: rnd is a T.lcg generator.
function T.mutate(base, rnd, alphabet)
  local s = base
  for _ = 1, 1 + rnd(6) do
    local pos = 1 + rnd(#s)
    local op = rnd(3)
    if op == 0 then s = s:sub(1, pos - 1) .. s:sub(pos + 1 + rnd(20))
    elseif op == 1 then
      local c = 1 + rnd(#alphabet)
      s = s:sub(1, pos - 1) .. alphabet:sub(c, c) .. s:sub(pos)
    else s = s:sub(1, pos) .. s:sub(pos, pos + rnd(40)) .. s:sub(pos + 1) end
  end
  return s
end

--- A fresh temporary directory, removed at exit unless ODP_KEEP_TMP is set.
local tmpdirs = {}
function T.tmpdir()
  local p = io.popen("mktemp -d /tmp/odp-test.XXXXXX")
  local d = p:read("l")
  p:close()
  tmpdirs[#tmpdirs + 1] = d
  return d
end

--- fn() once it holds (a truthy value), asked every 20 ms for at most timeout_s (default 10): what a board does
--- just after odp has gone (an SSH board's helper removes odp's directory there once odp closed the session:
--- odp.target.shell.close_run_dir). -> fn's last value
function T.settles(fn, timeout_s)
  local sys = require("odp.sys")
  local deadline = sys.now() + (timeout_s or 10)
  local v = fn()
  while not v and sys.now() < deadline do
    sys.sleep(0.02)
    v = fn()
  end
  return v
end

--- The kernel made to run aarch64 programs through qemu-aarch64-static (binfmt_misc; tests/lib/aarch64_user.sh),
--- as a suite that runs the aarch64 runner on an x86_64 device needs: registered here when it was not, and then
--- removed again as the suite ends (a registration that was there stays: the machine's state).
function T.binfmt_aarch64()
  local proc = require("odp.proc")
  local reg = assert(proc.run { "sh", T.root() .. "/tests/lib/aarch64_user.sh", "binfmt", timeout = 60 })
  T.eq(reg.status, 0, "binfmt_misc registration (the rig): " .. reg.stderr)
  if reg.stdout:match("^registered:") then
    T.at_done(function()
      local f = io.open("/proc/sys/fs/binfmt_misc/qemu-aarch64", "w")
      if f then f:write("-1") f:close() end
    end)
  end
end

--- Under `make asan` (ASAN_OPTIONS set): proc.run's env for a program with further ASan options, e.g.
--- "detect_leaks=0" for one a test traces with strace (LeakSanitizer cannot work under ptrace: it stops the
--- process's threads with it, and fails the program at its exit); nil otherwise.
function T.asan_env(options)
  local asan = os.getenv("ASAN_OPTIONS")
  return asan and { ASAN_OPTIONS = asan .. ":" .. options } or nil
end

function T.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

--- The pid holding a flock on path, as the kernel lists it in /proc/locks (an oracle independent of
--- odp's own lookup), or nil: a test waits on it for a sweep to hold its --out.
function T.flock_holder(path)
  local st = require("odp.sys").stat(path)
  if not st then return nil end
  local major = ((st.dev >> 8) & 0xfff) | ((st.dev >> 32) & ~0xfff)
  local minor = (st.dev & 0xff) | ((st.dev >> 12) & ~0xff)
  local want = ("%02x:%02x:%d"):format(major, minor, st.ino)
  for line in io.lines("/proc/locks") do
    local pid, where = line:match("^%d+: FLOCK%s+%S+%s+WRITE%s+(%d+)%s+(%S+)")
    if where == want then return tonumber(pid) end
  end
end

--- Writes a device file derived from another (a user's copy with changes): `d` is the original table,
-- body is Lua that changes it. Device files are data loaded without globals, so a copy cannot dofile.
function T.derived_device(from, path, name, body)
  local src = T.read(from):gsub("\nreturn {", "\nlocal d = {", 1)
  T.write(path, ("%s\nd.name = %q\n%s\nreturn d\n"):format(src, name, body or ""))
  return path
end

function T.write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

--- fn runs at T.done, before the temporary directories go: a rig a test started (an sshd, say) is stopped
--- even when the test that started it failed before stopping it. Last registered, first run.
local at_done = {}
function T.at_done(fn) at_done[#at_done + 1] = fn end

-- What a suite started goes as it ends (servers stopped, temp dirs removed), once.
local cleaned = false
local function clean_up()
  if cleaned then return end
  cleaned = true
  for i = #at_done, 1, -1 do pcall(at_done[i]) end
  if not os.getenv("ODP_KEEP_TMP") then
    for _, d in ipairs(tmpdirs) do os.execute("rm -rf '" .. d .. "'") end
  end
end
-- A suite that never reaches T.done (an error outside T.test, the TERM of tests/run.sh's timeout) is cleaned up
-- too: odp's exit closes the Lua state, which runs this finalizer.
T._cleanup_at_exit = setmetatable({}, { __gc = clean_up })

function T.done()
  clean_up()
  print(("1..%d"):format(n))
  io.stdout:flush()
  os.exit(failed == 0 and 0 or 1)
end

return T
