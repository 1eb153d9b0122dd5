-- odp.adb against the adb device emulator (tests/adbemu), one emulator mode per run.
-- Run by tests/adb/test_odp_adb.sh with ADBEMU_PORT, ADBEMU_ROOT (the sandbox), ADB_MODE and a private HOME.
local T = require("t")
local adb = require("odp.adb")

local port = assert(os.getenv("ADBEMU_PORT"), "ADBEMU_PORT")
local root = assert(os.getenv("ADBEMU_ROOT"), "ADBEMU_ROOT")
local mode = os.getenv("ADB_MODE") or "plain"
local home = os.getenv("HOME")
local tcp = "tcp:127.0.0.1:" .. port
local tmp = T.tmpdir()

local function sh(cmd)
  local p = io.popen(cmd)
  local s = p:read("a")
  p:close()
  return s
end
local function sha(path) return (sh("sha256sum '" .. path .. "'"):match("^(%x+)")) end
local function connect(opts)
  opts = opts or {}
  opts.transport = opts.transport or tcp
  opts.timeout = opts.timeout or 5
  return adb.connect(opts)
end
local function bigfile(name, bytes)
  local p = tmp .. "/" .. name
  os.execute(string.format("head -c %d /dev/urandom > '%s'", bytes, p))
  return p
end
local function tag(name) return mode .. ": " .. name end

-- Every mode that ends in a working device runs the same round trip.
local function round_trip(d, opts)
  opts = opts or {}
  local size = opts.size or 3000000
  T.test(tag("shell exit status and output"), function()
    local r = assert(d:shell("echo out; echo err >&2; exit 3"))
    T.eq(r.status, 3)
    T.eq(r.ok, false)
    if opts.merged then
      T.eq(r.stdout, "out\nerr\n")
      T.eq(r.separate_stderr, false)
    else
      T.eq(r.stdout, "out\n")
      T.eq(r.stderr, "err\n")
      T.eq(r.separate_stderr, true)
    end
  end)
  T.test(tag("push " .. size .. " bytes, mode applied, pull back identical"), function()
    local src = bigfile("up", size)
    local seen, last = 0, 0
    assert(d:push(src, "/data/local/tmp/odp/up.bin", { mode = tonumber("755", 8),
      on_progress = function(done, total) seen = seen + 1; T.ok(done >= last); last = done; T.eq(total, size) end }))
    T.eq(last, size, "progress reached the total")
    T.ok(seen > 1, "several progress events")
    T.eq(sha(root .. "/data/local/tmp/odp/up.bin"), sha(src))
    T.eq(sh("stat -c %a '" .. root .. "/data/local/tmp/odp/up.bin'"), "755\n")
    assert(d:pull("/data/local/tmp/odp/up.bin", tmp .. "/down.bin"))
    T.eq(sha(tmp .. "/down.bin"), sha(src))
  end)
  T.test(tag("device paths reach the shell"), function()
    local r = assert(d:shell({ "sha256sum", "/data/local/tmp/odp/up.bin" }))
    T.eq(r.stdout:match("^(%x+)"), sha(tmp .. "/up"))
  end)
end

if mode == "plain" then
  local d = assert(connect())
  T.test("info comes from the banner", function()
    local i = d:info()
    T.eq(i.model, "X300_Pro_Emu")
    T.eq(i.state, "device")
    T.eq(i.serial, "127.0.0.1:" .. port)
    T.ok(i.features.shell_v2 and i.features.stat_v2, "features")
    T.eq(i.maxdata, 1024 * 1024)
    T.eq(i.version, 0x01000001)
  end)
  round_trip(d)
  T.test("argv words are quoted for the device shell", function()
    local r = assert(d:shell({ "printf", "%s|", "it's", "a b", "$HOME", ";true" }))
    T.eq(r.stdout, "it's|a b|$HOME|;true|")
  end)
  T.test("stdin reaches the command; no stdin means EOF", function()
    T.eq(assert(d:shell("cat", { stdin = "piped\n" })).stdout, "piped\n")
    T.eq(assert(d:shell("cat")).stdout, "")
    local big = string.rep("0123456789abcdef", 200000) -- 3.2 MB: several WRTEs of stdin
    T.eq(#assert(d:shell("cat", { stdin = big })).stdout, #big)
  end)
  T.test("8 MB of stdout and 1 MB of stderr intact", function()
    local r = assert(d:shell("head -c 8000000 /dev/zero; head -c 1000000 /dev/zero >&2"))
    T.eq(#r.stdout, 8000000)
    T.eq(#r.stderr, 1000000)
  end)
  T.test("capture_limit keeps the head and counts the rest", function()
    local r = assert(d:shell("head -c 100000 /dev/zero", { capture_limit = 1000 }))
    T.eq(#r.stdout, 1000)
    T.eq(r.stdout_dropped, 99000)
  end)
  T.test("a killed command reports 128+signal", function()
    T.eq(assert(d:shell("kill -9 $$")).status, 137)
  end)
  T.test("shell timeout: timed_out result, command killed, connection still usable", function()
    local t0 = os.time()
    local r = assert(d:shell("echo started; sleep 30", { timeout = 0.5 }))
    T.eq(r.timed_out, true)
    T.eq(r.ok, false)
    T.eq(r.stdout, "started\n")
    T.ok(os.time() - t0 < 5, "returned promptly")
    T.eq(assert(d:shell("echo again")).stdout, "again\n")
  end)
  T.test("stat: file, directory, missing", function()
    local st = assert(d:stat("/data/local/tmp/odp/up.bin"))
    T.eq(st.type, "file")
    T.eq(st.size, 3000000)
    T.eq(st.mode, tonumber("755", 8))
    T.eq(assert(d:stat("/data/local/tmp")).type, "directory")
    local no, err, code = d:stat("/data/local/tmp/none")
    T.eq(no, nil)
    T.eq(code, "ENOTFOUND")
    T.match(err, "^ENOTFOUND: /data/local/tmp/none")
  end)
  T.test("push of a missing local file, pull of a missing remote file", function()
    local ok, _, code = d:push(tmp .. "/nope", "/data/local/tmp/x")
    T.eq(ok, nil); T.eq(code, "ENOTFOUND")
    ok, _, code = d:pull("/data/local/tmp/nope", tmp .. "/x")
    T.eq(ok, nil); T.eq(code, "ENOTFOUND")
    T.ok(not io.open(tmp .. "/x"), "no local file left behind")
    T.ok(not io.open(tmp .. "/x.part"), "no partial file left behind")
  end)
  T.test("push to an unwritable place fails with the device's message", function()
    local ok, err, code = d:push(tmp .. "/up", "/proc/nope/x")
    T.eq(ok, nil); T.eq(code, "EIO"); T.match(err, "couldn't create file")
    T.eq(assert(d:shell("echo still")).stdout, "still\n")
  end)
  T.test("empty file push and pull", function()
    T.write(tmp .. "/empty", "")
    assert(d:push(tmp .. "/empty", "/data/local/tmp/empty"))
    assert(d:pull("/data/local/tmp/empty", tmp .. "/empty.back"))
    T.eq(T.read(tmp .. "/empty.back"), "")
  end)
  T.test("misuse raises: unknown option, bad transport, closed device", function()
    T.raises(function() d:shell("true", { timout = 1 }) end, "timout")
    T.raises(function() adb.connect { transport = "bluetooth" } end, "transport")
    T.raises(function() adb.connect { transport = tcp, sereal = "x" } end, "sereal")
    d:close()
    d:close() -- idempotent
    T.raises(function() d:shell("true") end, "closed")
  end)
  T.test("~/.android/adbkey is created 0600 at the first connection, even without AUTH, as Google's adb does", function()
    T.eq(sh("stat -c %a '" .. home .. "/.android/adbkey'"), "600\n")
    T.match(T.read(home .. "/.android/adbkey"), "^%-%-%-%-%-BEGIN PRIVATE KEY%-%-%-%-%-")
  end)
  T.test("adb target: rusage from odp-rusage (helper pushed) and from time -v, stderr left clean", function()
    local target = assert(require("odp.target.adb").new { adb = tcp, remote_dir = "/data/local/tmp/rt" })
    local method = target:rusage_method()
    T.eq(method, "odp-rusage", "this machine builds odp-rusage-" .. target:arch())
    local r = assert(target:exec({ "sh", "-c", "echo out; echo err >&2; head -c 20000000 /dev/zero | cat >/dev/null; exit 4" }))
    T.eq(r.status, 4); T.eq(r.stdout, "out\n"); T.eq(r.stderr, "err\n")
    T.ok(r.rusage and r.rusage.maxrss_kb > 0, "maxrss from odp-rusage")
    target.cache.rusage, target.cache.rusage_cmd = "time", "/usr/bin/time -v"
    r = assert(target:exec({ "sh", "-c", "echo out; echo err >&2; exit 5" }))
    T.eq(r.status, 5); T.eq(r.stdout, "out\n"); T.eq(r.stderr, "err\n", "time -v report taken out of stderr")
    T.ok(r.rusage and r.rusage.maxrss_kb > 0, "maxrss from time -v")
    local seen = {}
    r = assert(target:exec({ "echo", "streamed" }, { rusage = false, on_stdout = function(s) seen[#seen + 1] = s end }))
    T.eq(table.concat(seen), "streamed\n", "on_stdout sees the output as it arrives")
    T.eq(r.rusage, nil)
    T.eq(target:sha256("/data/local/tmp/none"), nil)
    T.ok(target:free_bytes("/data/local/tmp") > 0, "free_bytes from df")
    -- asked of the device, never assumed from the transport: the emulator's commands run on this machine's glibc
    local here = io.popen("getconf GNU_LIBC_VERSION"):read("a"):match("([%d%.]+)%s*$")
    T.eq(target:libc_version(), here, "the emulator's glibc (getconf here is the oracle)")
    target:close()
  end)
  T.test("connection refused is ENODEV", function()
    local ok, _, code = adb.connect { transport = "tcp:127.0.0.1:1", timeout = 2 }
    T.eq(ok, nil); T.eq(code, "ENODEV")
  end)
elseif mode == "noshellv2" then
  local d = assert(connect())
  T.test("noshellv2: features lack shell_v2", function() T.eq(d:info().features.shell_v2, nil) end)
  round_trip(d, { merged = true })
  T.test("noshellv2: status via the sentinel, output without it", function()
    local r = assert(d:shell("printf 'no newline'; exit 7"))
    T.eq(r.status, 7); T.eq(r.stdout, "no newline")
    r = assert(d:shell("exit 0"))
    T.eq(r.status, 0); T.eq(r.stdout, "")
  end)
elseif mode == "maxdata" or mode == "checksum" or mode == "split" or mode == "coalesce" then
  local d = assert(connect())
  if mode == "maxdata" then T.test("maxdata: negotiated 4096", function() T.eq(d:info().maxdata, 4096) end) end
  if mode == "checksum" then T.test("checksum: version 0x01000000", function() T.eq(d:info().version, 0x01000000) end) end
  round_trip(d, { size = mode == "split" and 200000 or nil })
  local n = mode == "split" and 20000 or 1000000
  T.test(tag(n .. " bytes of stdout"), function() T.eq(#assert(d:shell("head -c " .. n .. " /dev/zero")).stdout, n) end)
elseif mode == "failsend" then
  local d = assert(connect())
  T.test("failsend: push fails with the device's message, connection usable", function()
    T.write(tmp .. "/small", "x")
    local ok, err, code = d:push(tmp .. "/small", "/data/local/tmp/x")
    T.eq(ok, nil); T.eq(code, "EIO"); T.match(err, "SEND refused")
    local big = bigfile("big", 2000000)
    ok, err, code = d:push(big, "/data/local/tmp/y")
    T.eq(ok, nil); T.eq(code, "EIO"); T.match(err, "SEND refused")
    T.eq(assert(d:shell("echo ok")).stdout, "ok\n")
  end)
elseif mode == "clse" then
  local d = assert(connect())
  T.test("clse: a refused service is ENOTFOUND", function()
    local ok, err, code = d:shell("true")
    T.eq(ok, nil); T.eq(code, "ENOTFOUND"); T.match(err, "refused the service")
  end)
elseif mode == "drop" then
  T.test("drop: push interrupted -> EIO, then a new connection pushes", function()
    local d = assert(connect())
    local src = bigfile("d", 3000000)
    local ok, err, code = d:push(src, "/data/local/tmp/d")
    T.eq(ok, nil); T.eq(code, "EIO"); T.match(err, "closed")
    local ok2, _, code2 = d:shell("true")
    T.eq(ok2, nil); T.eq(code2, "EIO")
    d:close()
    d = assert(connect())
    assert(d:push(src, "/data/local/tmp/d"))
    T.eq(sha(root .. "/data/local/tmp/d"), sha(src))
    d:close()
  end)
elseif mode == "droptarget" then
  T.test("droptarget: the adb target waits for the device, says so, and the push goes through", function()
    local ui = require("odp.core.ui").new { quiet = true }
    local target = assert(require("odp.target.adb").new { adb = tcp, ui = ui })
    local src = tmp .. "/d"
    os.execute("head -c 2500000 /dev/urandom > '" .. src .. "'")
    local r = assert(target:push(src, "/data/local/tmp/t/d", { mode = tonumber("644", 8) }))
    T.eq(r.skipped, false)
    T.eq(sha(root .. "/data/local/tmp/t/d"), sha(src))
    for _, name in ipairs(assert(require("odp.sys").readdir(root .. "/data/local/tmp/t"))) do
      T.ok(not name:find(".odp-part-", 1, true), "temporary name renamed: " .. name)
    end
    T.eq(assert(target:push(src, "/data/local/tmp/t/d")).skipped, true, "second push skipped by hash")
    T.eq(assert(target:exec({ "echo", "alive" })).stdout, "alive\n")
    -- one line when it dropped, with the cause and what last worked (quiet: the "back" line is not shown)
    T.eq(#ui.warnings, 1, table.concat(ui.warnings, "\n"))
    T.match(ui.warnings[1], "^adb://%S+ dropped %(.+%); last worked: .*: waiting up to 60 s for it to come back$")
    target:close()
  end)
elseif mode == "auth-verify" then
  T.test("auth-verify: Google adb's key signs, device accepts", function()
    local d = assert(connect())
    T.eq(assert(d:shell("echo hi")).stdout, "hi\n")
    d:close()
  end)
elseif mode == "auth-vendor" then
  T.test("auth-vendor: a key from ADB_VENDOR_KEYS signs", function()
    local d = assert(connect())
    T.eq(assert(d:shell("echo hi")).stdout, "hi\n")
    d:close()
  end)
elseif mode == "auth-accept" then
  T.test("auth-accept: new key created 0600, prompt event, accepted after the tap", function()
    -- the emulator accepts the key once $HOME/tap exists (--auth accept-on): the user taps Allow a moment
    -- after the prompt (a background tap); the connection can only succeed after it, so it waited
    local tap, prompts, tapped_before = home .. "/tap", 0, nil
    local d = assert(connect { auth_timeout = 10, on_auth_prompt = function()
      prompts = prompts + 1
      tapped_before = io.open(tap) ~= nil
      os.execute(("(sleep 0.5; touch '%s') >/dev/null 2>&1 &"):format(tap))
    end })
    T.eq(prompts, 1)
    T.eq(tapped_before, false, "the prompt came before the tap")
    T.ok(io.open(tap), "connected only once the user tapped Allow")
    T.eq(sh("stat -c %a '" .. home .. "/.android/adbkey'"), "600\n")
    T.match(T.read(home .. "/.android/adbkey"), "^%-%-%-%-%-BEGIN PRIVATE KEY%-%-%-%-%-")
    T.match(T.read(home .. "/.android/adbkey.pub"), "^QAAAA[%w+/=]+ %S+@%S+\n$")
    T.eq(assert(d:shell("echo hi")).stdout, "hi\n")
    d:close()
  end)
  T.test("auth-accept: the accepted key signs on the next connection, no prompt", function()
    local prompts = 0
    local d = assert(connect { auth_timeout = 10, on_auth_prompt = function() prompts = prompts + 1 end })
    T.eq(prompts, 0)
    d:close()
  end)
elseif mode == "auth-never" then
  T.test("auth-never: EAUTH after auth_timeout, with the prompt hint", function()
    local prompts = 0
    local ok, err, code = connect { auth_timeout = 1, on_auth_prompt = function() prompts = prompts + 1 end }
    T.eq(ok, nil); T.eq(code, "EAUTH"); T.match(err, "USB debugging prompt")
    T.eq(prompts, 1)
  end)
else
  error("unknown ADB_MODE " .. mode)
end
T.done()
