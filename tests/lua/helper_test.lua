-- The resident helper (odp-rusage --serve, docs/helper-protocol.md): its frames (odp.helper, the codec both ends
-- share), and odp's client over OpenSSH's sshd on 127.0.0.1 — counted from sshd's own DEBUG1 log (connections:
-- "Accepted publickey", channels: "server_input_channel_open: ctype session"), and every bad input of issue 17: a killed helper, a
-- dropped connection, malformed and oversized frames, a helper of another protocol, a flooding program, Ctrl-C.
local T = require("t")
local sshd = require("sshd")
local sys = require("odp.sys")
local proc = require("odp.proc")
local codec = require("odp.helper")
local helper = require("odp.target.helper")
local target_ssh = require("odp.target.ssh")
local board = require("odp.run.board")

local build = os.getenv("ODP_BUILD_DIR") or (T.root() .. "/build")
local tmp = T.tmpdir()
local quiet = require("odp.core.ui").new { quiet = true }

-- frames as the helper writes them, by hand (string.pack): the codec is checked against the format, not itself
local function frame(t, fields, len_override)
  local body = {}
  for _, f in ipairs(fields) do body[#body + 1] = string.pack("<s4", f) end
  local payload = table.concat(body)
  return "OH" .. t .. "\0" .. string.pack("<I4", len_override or #payload) .. payload
end

T.test("codec: encode is the documented layout; decode takes it back across any split", function()
  local fields = { "a", "", ("x"):rep(70000), "\0\1\2" }
  local bytes = codec.encode("R", fields)
  T.eq(bytes, frame("R", fields))
  local rng = T.lcg(7)
  for _ = 1, 50 do
    local d = codec.decoder()
    local pos, got = 1, {}
    local stream = bytes .. codec.encode("A", {}) .. bytes
    while pos <= #stream do
      local n = 1 + rng(9000)
      d:feed(stream:sub(pos, pos + n - 1))
      pos = pos + n
      while true do
        local t, f = d:next()
        if not t then T.eq(f, nil) break end
        got[#got + 1] = { t, f }
      end
    end
    T.eq(#got, 3); T.eq(got[1], { "R", fields }); T.eq(got[2], { "A", {} }); T.eq(got[3], { "R", fields })
  end
  T.raises(function() codec.encode("RR", {}) end, "one character")
  T.raises(function() codec.encode("R", { ("x"):rep(codec.FRAME_MAX + 1) }) end, "1 MiB")
end)

T.test("codec: malformed and oversized frames are one EPROTO, never a crash or a wait for 4 GiB", function()
  local cases = {
    { "hello world\n", "bad magic" },
    { "OHA\1" .. string.pack("<I4", 0), "reserved" },
    { "OHA\0" .. string.pack("<I4", codec.FRAME_MAX + 1), "longer than 1 MiB" },
    { "OHA\0" .. string.pack("<I4", 0xffffffff), "longer than 1 MiB" },
    { "OHA\0" .. string.pack("<I4", 6) .. string.pack("<I4", 9) .. "ab", "field longer" },
    { "OHA\0" .. string.pack("<I4", 3) .. "abc", "cut short" },
  }
  for _, c in ipairs(cases) do
    local d = codec.decoder():feed(c[1])
    local t, err, code = d:next()
    T.eq(t, nil, c[2]); T.eq(code, "EPROTO", c[2]); T.match(err, c[2], c[2])
    T.eq(select(3, d:next()), "EPROTO", "sticky") -- the stream is lost for good
  end
  -- 4097 empty fields: over the field bound
  local d = codec.decoder():feed(frame("A", {}))
  T.eq(d:next(), "A")
  local many = {}
  for i = 1, 4097 do many[i] = "" end
  d = codec.decoder():feed(frame("A", many))
  T.eq(select(3, d:next()), "EPROTO")
end)

-- bytes with 1..max_ops of its bytes replaced, removed or inserted
local function mutate(bytes, rng, max_ops)
  local b = { bytes:byte(1, -1) }
  for _ = 1, 1 + rng(max_ops) do
    local at = 1 + rng(#b)
    local op = rng(3)
    if op == 0 then b[at] = rng(256) elseif op == 1 then table.remove(b, at) else table.insert(b, at, rng(256)) end
  end
  return string.char(table.unpack(b))
end

-- A channel that replays bytes (the helper's side of a conversation) and swallows what odp writes.
local function replay(bytes)
  local pos = 1
  return {
    read = function(_, n) local c = bytes:sub(pos, pos + math.min(n, 977) - 1) pos = pos + #c return c end,
    write = function() return true end, stderr = function() return "" end, close = function() end,
  }
end

local RUSAGE_LINE = "ODP-RUSAGE status=0 signal=0 core=0 maxrss_kb=4592 utime_s=0.01 stime_s=0.0 wall_s=0.02 " ..
  "minflt=1 majflt=0 nvcsw=1 nivcsw=0\n"

T.test("odp's client on 3000 mutated helper conversations: an answer or one error, never a raise", function()
  local hello = codec.encode("H", { "odp-helper", tostring(codec.PROTO), "x86_64" })
  local good = hello .. codec.encode("O", { "I 00:00:00.000 executorch: Model loaded\n", "1500" }) ..
    codec.encode("O", { " the", "2750" }) ..
    codec.encode("E", { "err\n" }) .. codec.encode("D", { "0", RUSAGE_LINE, "TERM", "@v /proc/sys/kernel/hostname b\n",
      "@v /proc/sys/kernel/hostname b\n@c /sys/devices/system/cpu/online\n0-3\n@e\n",
      -- the point's end on the board (rm=, leases=): the leases, a file that could not be removed
      "now 1796533984\nlease 1796533980 h.ab12cd34.4026531836.77 host=h user=u pid=77 since=1796533900\n" ..
      "lease 1796533981 g.1.2.3 host=g user=v pid=78 since=1796533901 waiting\nunremoved /r/x.etdump: Busy\n" }) ..
    codec.encode("A", { "2022980df2c53cc5c31a63f1b5d8a45fe0e373ae9f8792bfc07fe358e6424bbb" })
  -- a run with memory by phase: its timeline in 'T' frames among the output, at most 120 bytes asked for
  local memory_run = hello .. codec.encode("T", { "t_ms,rss_kb,anon_kb,file_kb\n1.000,316,44,272\n" }) ..
    codec.encode("O", { "out\n", "0" }) .. codec.encode("T", { "2.000,1316,104,1212\n" }) ..
    codec.encode("D", { "0", "ODP-MEMORY samples=2 sample_ms=1.000 sampled_max_kb=1316 timeline=ok\n" .. RUSAGE_LINE }) ..
    codec.encode("A", {})
  local dir = T.tmpdir()
  local rng = T.lcg(17)
  for i = 1, 3000 do
    local memory = i % 2 == 0 and { csv = dir .. "/m.csv", marks = {}, timeline_max = 120 }
    local bytes = mutate(memory and memory_run or good, rng, 4)
    os.remove(dir .. "/m.csv")
    local ok, err = pcall(function()
      local h, herr = helper.open(replay(bytes), { uri = "fuzz", timeout = 1 })
      if not h then return T.ok(type(herr) == "string" and not herr:find("\n"), herr) end
      -- through the SSH and adb targets' own path: the answer's board text read as odp.target.shell reads it
      local r, report = require("odp.target.shell").helper_exec({ remote_dir = "/r" }, h, { "x" }, { timeout = 1,
        memory = memory, state = { "", "online", "ro.a" }, finish = { "/r/x.etdump" } })
      T.ok(r or (type(report) == "string" and not report:find("\n")), report)
      if r and r.finish then
        T.ok(type(r.finish.others) == "table" and type(r.finish.unremoved) == "table", "the board text read")
      end
      if r and r.state_text then -- the device state in the answer: untrusted text, read as the 'S' answer is
        require("odp.target.device_state").from_text(r.state_text.before)
        require("odp.target.device_state").from_text(r.state_text.after)
      end
      if r and r.stdout_times then -- the stdout chunks' times: in order, each with the stdout bytes up to its end
        local st = r.stdout_times
        T.eq(#st.t_us, #st.ends)
        for k = 2, #st.t_us do T.ok(st.t_us[k] >= st.t_us[k - 1] and st.ends[k] > st.ends[k - 1]) end
        T.ok(#st.ends == 0 or st.ends[#st.ends] == #r.stdout + (r.stdout_dropped or 0))
      end
      local kept = memory and sys.read_file(dir .. "/m.csv")
      T.ok(not kept or (r and #kept <= 120), "a timeline only from a whole answer, within the bound asked")
      local hex, xerr = h:sha256("/x")
      T.ok(hex == nil or hex:match("^%x+$"), xerr)
    end)
    if not ok then error(("mutation %d raised: %s"):format(i, err), 0) end
  end
  T.eq(sys.readdir(dir), {}, "no partial timeline left behind")
end)

T.test("stdout chunk times (protocol 5): kept in order and bounded; a chunk without its time, or times that go " ..
  "back, are EPROTO", function()
  local hello = codec.encode("H", { "odp-helper", tostring(codec.PROTO), "x86_64" })
  local done = codec.encode("D", { "0", RUSAGE_LINE })
  local h = assert(helper.open(replay(hello .. codec.encode("O", { "ab", "10" }) .. codec.encode("O", { "c", "10" }) ..
    codec.encode("O", { "de", "999999999999999" }) .. done), { uri = "fuzz", timeout = 1 }))
  local r = assert(h:run({ "x" }, { timeout = 1 }))
  T.eq(r.stdout, "abcde")
  T.eq(r.stdout_times, { t_us = { 10, 10, 999999999999999 }, ends = { 2, 3, 5 }, cut = 0 })
  for _, bad in ipairs({ { { "ab" }, "of 1 fields, not 2" }, { { "ab", "" }, "without the time" },
    { { "ab", "-1" }, "without the time" }, { { "ab", "1e3" }, "without the time" },
    { { "ab", "1000000000000000" }, "without the time" }, { { "ab", "5", "x" }, "of 3 fields" } }) do
    h = assert(helper.open(replay(hello .. codec.encode("O", bad[1]) .. done), { uri = "fuzz", timeout = 1 }))
    local _, err, code = h:run({ "x" }, { timeout = 1 })
    T.eq(code, "EPROTO"); T.match(err, bad[2]); T.ok(h.dead, "the stream is lost")
  end
  h = assert(helper.open(replay(hello .. codec.encode("O", { "a", "20" }) .. codec.encode("O", { "b", "19" }) .. done),
    { uri = "fuzz", timeout = 1 }))
  local _, err, code = h:run({ "x" }, { timeout = 1 })
  T.eq(code, "EPROTO"); T.match(err, "times that go back")
  -- at most STDOUT_TIMES_MAX chunks kept, the rest counted
  local saved = helper.STDOUT_TIMES_MAX
  helper.STDOUT_TIMES_MAX = 2
  h = assert(helper.open(replay(hello .. codec.encode("O", { "a", "1" }) .. codec.encode("O", { "b", "2" }) ..
    codec.encode("O", { "c", "3" }) .. done), { uri = "fuzz", timeout = 1 }))
  r = assert(h:run({ "x" }, { timeout = 1 }))
  helper.STDOUT_TIMES_MAX = saved
  T.eq(r.stdout_times, { t_us = { 1, 2 }, ends = { 1, 2 }, cut = 1 })
end)

T.test("a timeline beyond the bound asked, or for a run without memory: EPROTO, nothing kept", function()
  local hello = codec.encode("H", { "odp-helper", tostring(codec.PROTO), "x86_64" })
  local done = codec.encode("D", { "0", RUSAGE_LINE })
  local dir = T.tmpdir()
  local h = assert(helper.open(replay(hello .. codec.encode("T", { ("1.000,1,1,0\n"):rep(10) }) ..
    codec.encode("T", { ("1.000,1,1,0\n"):rep(10) }) .. done), { uri = "fuzz", timeout = 1 }))
  local r, err, code = h:run({ "x" }, { timeout = 1, memory = { csv = dir .. "/m.csv", timeline_max = 200 } })
  T.eq(r, nil); T.eq(code, "EPROTO"); T.match(err, "more of the memory timeline than the 200 bytes asked")
  T.ok(h.dead, "the stream is lost: the helper is started again for the next request")
  T.eq(sys.readdir(dir), {}, "neither the timeline nor a partial file")
  h = assert(helper.open(replay(hello .. codec.encode("T", { "t_ms\n" }) .. done), { uri = "fuzz", timeout = 1 }))
  r, err, code = h:run({ "x" }, { timeout = 1 })
  T.eq(r, nil); T.eq(code, "EPROTO"); T.match(err, "a memory timeline .* for a run without memory by phase")
  -- the bound odp asks of the helper is its own at most
  local asked
  h = assert(helper.open(replay(hello .. done), { uri = "fuzz", timeout = 1 }))
  h.send_all = function(self, reqs) asked = reqs[#reqs][2] return true end
  assert(h:run({ "x" }, { timeout = 1, memory = { csv = dir .. "/m.csv", timeline_max = 1 << 40 } }))
  T.eq(asked[1], "memory=" .. helper.TIMELINE_MAX)
end)

T.test("the helper on 400 mutated request streams: well-formed answers, an exit of 0 or 2, never a crash", function()
  local exe = build .. "/odp-rusage-x86_64"
  -- a mutated type byte turns one request into another (a read into a chmod, a hash into a mkdir): every path
  -- is in a scratch directory, which is also the helper's cwd for the relative ones a mutation makes
  local dir = tmp .. "/mut"
  sys.mkdir_p(dir)
  T.write(dir .. "/f", "some bytes\n")
  local good = codec.encode("X", { dir .. "/f" }) .. codec.encode("F", { dir .. "/x/y" }) ..
    codec.encode("G", { dir .. "/f", "50000" }) .. codec.encode("S", { "", "online cpufreq/scaling_cur_freq", "ro.a|ro.b" }) ..
    codec.encode("R", { "memory=300", "mark=a=*x*", "--", "sh", "-c", "echo x; echo y" }) ..
    codec.encode("R", { "counters=basic", "--", "true" }) .. codec.encode("R", { "--", "/nonexistent/prog" }) ..
    codec.encode("R", { "state_root=", "state_cpu=online", "state_props=ro.a", "--", "true" }) ..
    codec.encode("R", { "cwd=" .. dir, "rm=" .. dir .. "/gone", "rm=" .. dir .. "/f2", "leases=" .. dir, "--", "true" }) ..
    codec.encode("P", { dir .. "/up", "644", "0", "", "", "first " }) ..
    codec.encode("P", { dir .. "/up", "644", "6", sys.sha256("first second"), "", "second" }) ..
    codec.encode("L", { dir .. "/up", dir .. "/up.link" }) ..
    codec.encode("P", { dir .. "/bad", "600", "0", ("0"):rep(64), "", "x" }) ..
    codec.encode("U", { dir .. "/.odp/runs/gone" }) ..
    codec.encode("?", {}) .. codec.encode("X", { "a", "b" })
  local rng = T.lcg(23)
  for i = 1, 400 do
    local r = assert(proc.run { argv = { exe, "--serve" }, stdin = mutate(good, rng, 3), cwd = dir,
      timeout = 20 })
    T.ok(r.signal == nil and (r.status == 0 or r.status == 2),
      ("mutation %d: status %s signal %s"):format(i, r.status, tostring(r.signal)))
    local d = codec.decoder():feed(r.stdout)
    local t, f = d:next()
    T.eq(t, "H", "hello first")
    repeat t, f = d:next() until not t
    T.eq(f, nil, ("mutation %d: the helper's answers are well-formed frames"):format(i))
    T.eq(d:pending(), 0, "nothing cut short")
  end
end)

-- The hex of bytes, as odp.target.shell puts a session's first flight in the helper's command line.
local function hex(b) return (b:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end

T.test("a first flight on the command line (--serve FIRST): answered behind the hello, before stdin's requests; " ..
  "300 mutated ones: an exit of 0 or 2, never a crash", function()
  local exe = build .. "/odp-rusage-x86_64"
  local dir = tmp .. "/first"
  sys.mkdir_p(dir)
  T.write(dir .. "/f", "first\n")
  local flight = codec.encode("X", { dir .. "/f" }) .. codec.encode("R", { "--", "sh", "-c", "echo from-first" })
  T.write(dir .. "/stream", codec.encode("G", { dir .. "/f", "3" }))
  -- stdin held open while the run goes (its end would stop the run)
  local r = assert(proc.run { argv = { "sh", "-c", ("{ sleep 0.3; cat stream; sleep 0.3; } | %s --serve %s"):format(
    exe, hex(flight)) }, cwd = dir, timeout = 20 })
  T.eq(r.status, 0, r.stderr)
  local d = codec.decoder():feed(r.stdout)
  local got = {}
  repeat
    local t, f = d:next()
    if t then got[#got + 1] = { t, f } end
  until not t
  T.eq(got[1][1], "H", "the hello first")
  T.eq(got[2], { "A", { sys.sha256("first\n") } }, "the flight's hash")
  T.eq(got[3], { "O", { "from-first\n", got[3][2][2] } }, "its run's output")
  T.eq(got[4][1], "D"); T.eq(got[4][2][1], "0", "its run's end")
  T.eq(got[5], { "A", { "fir" } }, "then stdin's request")
  -- hex that is not (odd, not hex, too long): the one error answer, exit 2, before any request is served
  for _, bad in ipairs { "abc", "zz", hex(flight):upper(), ("00"):rep(16385) } do
    r = assert(proc.run { argv = { exe, "--serve", bad }, stdin = "", timeout = 20 })
    T.eq(r.status, 2, "malformed first flight: exit 2")
    d = codec.decoder():feed(r.stdout)
    T.eq(d:next(), "H")
    local t, f = d:next()
    T.eq(t, "!"); T.eq(f[1], "EPROTO"); T.match(f[2], "first flight")
  end
  local rng = T.lcg(41)
  for i = 1, 300 do
    local first = mutate(flight, rng, 3)
    r = assert(proc.run { argv = { exe, "--serve", hex(first) }, stdin = "", cwd = dir, timeout = 20 })
    T.ok(r.signal == nil and (r.status == 0 or r.status == 2),
      ("mutation %d: status %s signal %s"):format(i, r.status, tostring(r.signal)))
    d = codec.decoder():feed(r.stdout)
    T.eq(d:next(), "H", "hello first")
    local t, f
    repeat t, f = d:next() until not t
    T.eq(f, nil, ("mutation %d: the helper's answers are well-formed frames"):format(i))
  end
end)

T.test("U removes a run directory (.odp/runs/NAME) whole, follows no link out of it, and refuses anything else",
  function()
  local exe = build .. "/odp-rusage-x86_64"
  local base = tmp .. "/rmtree"
  local runs = base .. "/.odp/runs"
  local mine = runs .. "/me.1.2.3"
  sys.mkdir_p(mine .. "/a/b")
  sys.mkdir_p(base .. "/outside")
  T.write(base .. "/outside/keep", "k")
  T.write(mine .. "/a/b/f", "x"); T.write(mine .. "/lease", "host=h")
  assert(os.execute(("ln -s %s/outside %s/link && ln -s %s/outside/keep %s/a/filelink"):format(base, mine, base,
    mine)))
  local reqs = codec.encode("U", { mine }) .. codec.encode("U", { mine }) ..
    codec.encode("U", { base .. "/outside" }) .. codec.encode("U", { runs }) ..
    codec.encode("U", { runs .. "/../runs/x" }) .. codec.encode("U", { "rel/.odp/runs/x" }) ..
    codec.encode("U", { runs .. "/.." })
  local r = assert(proc.run { argv = { exe, "--serve" }, stdin = reqs, timeout = 20 })
  T.eq(r.status, 0, r.stderr)
  local d = codec.decoder():feed(r.stdout)
  T.eq(d:next(), "H")
  local answers = {}
  repeat
    local t, f = d:next()
    if t then answers[#answers + 1] = t == "A" and "A" or f[1] end
  until not t
  T.eq(answers, { "A", "A", "EPROTO", "EPROTO", "EPROTO", "EPROTO", "EPROTO" },
    "removed; already gone is no error; only a directory directly in .odp/runs")
  T.eq(sys.stat(mine), nil, "the run directory is gone")
  T.eq(T.read(base .. "/outside/keep"), "k", "what its links pointed at is kept")
  T.eq(sys.readdir(runs), {}, "nothing else in .odp/runs touched (there was nothing else)")
end)

T.test("the helper on 60 mutated streams of runs queued behind one going (protocol 6), stdin held open: " ..
  "well-formed answers, never more than one per request, never a crash", function()
  local exe = build .. "/odp-rusage-x86_64"
  local dir = tmp .. "/mutq"
  sys.mkdir_p(dir)
  local good = codec.encode("R", { "--", "sh", "-c", "sleep 0.1; echo one" }) .. codec.encode("R", { "--", "echo", "two" }) ..
    codec.encode("R", { "counters=basic", "--", "true" }) .. codec.encode("Z", { "15", "1" }) ..
    codec.encode("R", { "cwd=" .. dir, "--", "/nonexistent/prog" }) .. codec.encode("R", { "--", "echo", "after" })
  local rng = T.lcg(61)
  for i = 1, 60 do
    local stream = mutate(good, rng, 3)
    T.write(dir .. "/stream", stream)
    local r = assert(proc.run { argv = { "sh", "-c", ("{ cat stream; sleep 0.4; } | %s --serve"):format(exe) },
      cwd = dir, timeout = 20 })
    T.ok(r.signal == nil and (r.status == 0 or r.status == 2),
      ("mutation %d: status %s signal %s"):format(i, r.status, tostring(r.signal)))
    local d = codec.decoder():feed(r.stdout)
    local t, f = d:next()
    T.eq(t, "H", "hello first")
    local terminal = 0
    repeat
      t, f = d:next()
      if t == "D" or t == "!" or t == "A" then terminal = terminal + 1 end
    until not t
    T.eq(f, nil, ("mutation %d: the helper's answers are well-formed frames"):format(i))
    local sent = 0
    for _ in stream:gmatch("OH[^%z]%z") do sent = sent + 1 end
    T.ok(terminal <= sent, ("mutation %d: %d answers to at most %d requests"):format(i, terminal, sent))
  end
end)

T.test("uploads in chunks: one answer at the last, the file only whole and with the sha256 sent", function()
  local exe = build .. "/odp-rusage-x86_64"
  local dir = tmp .. "/up"
  sys.mkdir_p(dir)
  local a, b = ("a"):rep(70000), ("b\0"):rep(40000)
  local whole = sys.sha256(a .. b)
  local function serve(frames)
    local r = assert(proc.run { argv = { exe, "--serve" }, stdin = frames, cwd = dir, timeout = 20 })
    local d, got = codec.decoder():feed(r.stdout), {}
    T.eq((d:next()), "H")
    while true do
      local t, f = d:next()
      if not t then break end
      got[#got + 1] = { t, f[1], f[2] }
    end
    return got
  end
  local function P(path, mode, off, sha, bytes, raw)
    return codec.encode("P", { dir .. "/" .. path, mode, off, sha, raw or "", bytes })
  end
  -- two chunks and a link: two answers (the upload's and the link's)
  T.eq(serve(P("f", "640", "0", "", a) .. P("f", "640", tostring(#a), whole, b) ..
    codec.encode("L", { dir .. "/f", dir .. "/g" })), { { "A" }, { "A" } })
  T.eq(sys.sha256_file(dir .. "/f"), sys.sha256_file(dir .. "/g"))
  T.eq(sys.sha256_file(dir .. "/f"), whole, "the bytes sent"); T.eq(sys.stat(dir .. "/f").size, #a + #b)
  T.eq(proc.run { argv = { "stat", "-c", "%h %i", dir .. "/f" } }.stdout,
    proc.run { argv = { "stat", "-c", "%h %i", dir .. "/g" } }.stdout, "g is f: one inode")
  T.match(proc.run { argv = { "stat", "-c", "%h", dir .. "/f" } }.stdout, "^2\n", "with two links")
  T.eq(sys.stat(dir .. "/f").mode & tonumber("777", 8), tonumber("640", 8))
  -- the hash the board computed, remembered: a hash request answers it (same as sha256sum's)
  T.eq(serve(codec.encode("X", { dir .. "/f" })), { { "A", whole } })
  -- a chunk lost on the way (the second starts past the first's end): refused at the last, nothing under the name
  local got = serve(P("h", "644", "0", "", a) .. P("h", "644", tostring(#a + 1), whole, b))
  T.eq(#got, 1, "one answer for the upload"); T.eq(got[1][1], "!"); T.eq(got[1][2], "EPROTO")
  T.eq(sys.stat(dir .. "/h"), nil)
  -- the bytes are not the ones hashed: ECRC, nothing under the name
  got = serve(P("h", "644", "0", "", a) .. P("h", "644", tostring(#a), whole, b:upper() .. "x"))
  T.eq(got[1][1], "!"); T.eq(got[1][2], "ECRC"); T.eq(sys.stat(dir .. "/h"), nil)
  -- a malformed chunk (mode not octal, sha256 not hex, a raw length not decimal or over 1 MiB): answered at once
  T.eq(serve(P("h", "9", "0", whole, "x"))[1][2], "EPROTO"); T.eq(serve(P("h", "644", "0", "XYZ", "x"))[1][2], "EPROTO")
  T.eq(serve(P("h", "644", "0", whole, "x", "1x"))[1][2], "EPROTO")
  T.eq(serve(P("h", "644", "0", whole, "x", tostring((1 << 20) + 1)))[1][2], "EPROTO")
  -- chunks as LZ4 blocks (protocol 8: liblz4 compresses, the helper decodes), mixed with a plain one: the file is
  -- the bytes they decode to, offsets and the sha256 of those
  local za, zb = assert(sys.lz4_compress(a)), assert(sys.lz4_compress(b))
  T.ok(#za < #a // 10 and #zb < #b // 10, ("compressed: %d of %d, %d of %d bytes"):format(#za, #a, #zb, #b))
  T.eq(serve(P("z", "644", "0", "", za, tostring(#a)) .. P("z", "644", tostring(#a), "", "tail") ..
    P("z", "644", tostring(#a + 4), sys.sha256(a .. "tail" .. b), zb, tostring(#b))), { { "A" } })
  T.eq(T.read(dir .. "/z"), a .. "tail" .. b, "the decoded bytes, in order")
  T.eq(sys.lz4_compress("not shorter"), nil, "a chunk LZ4 would not shorten goes as it is")
  -- a block that decodes to another length than it says, or is no block at all: EPROTO at the upload's end,
  -- nothing under the name, no part left
  for _, bad in ipairs({ { za, tostring(#a - 1) }, { za:sub(1, -2), tostring(#a) }, { "\x1f\x00\x00\x00", "40" } }) do
    got = serve(P("y", "644", "0", "", bad[1], bad[2]) .. P("y", "644", bad[2], sys.sha256(a .. "x"), "x"))
    T.eq({ #got, got[1][1], got[1][2] }, { 1, "!", "EPROTO" }, got[1][3])
    T.eq(sys.stat(dir .. "/y"), nil)
  end
  -- a link to nothing: ENOTFOUND, the helper usable after it
  got = serve(codec.encode("L", { dir .. "/none", dir .. "/l" }) .. P("e", "644", "0", sys.sha256(""), ""))
  T.eq({ got[1][1], got[1][2], got[2] }, { "!", "ENOTFOUND", { "A" } })
  T.eq(sys.stat(dir .. "/e").size, 0, "an empty file is one chunk")
  -- stdin closed in the middle of an upload: the part goes with the helper
  serve(P("k", "644", "0", "", a))
  local left = 0
  for _, name in ipairs(sys.readdir(dir)) do if name:find("odp-part", 1, true) then left = left + 1 end end
  T.eq(left, 0, "no partial file left"); T.eq(sys.stat(dir .. "/k"), nil)
end)

T.test("runs queued behind the one going (protocol 6): answered in order, a Z drops the queued ones (EAGAIN), " ..
  "a fifth queued one is a protocol violation", function()
  local exe = build .. "/odp-rusage-x86_64"
  local dir = tmp .. "/queue"
  sys.mkdir_p(dir)
  -- the helper's stdin a pipe odp's tests write in steps: the parts, with pauses between them, and held open after
  local function serve(parts)
    local script = {}
    for i, part in ipairs(parts) do
      if type(part) == "number" then
        script[#script + 1] = ("sleep %g"):format(part)
      else
        T.write(("%s/part%d"):format(dir, i), part)
        script[#script + 1] = ("cat part%d"):format(i)
      end
    end
    local t0 = sys.now()
    local r = assert(proc.run { argv = { "sh", "-c", ("{ %s; } | %s --serve"):format(table.concat(script, "; "), exe) },
      cwd = dir, timeout = 30 })
    local d, got = codec.decoder():feed(r.stdout), {}
    T.eq((d:next()), "H")
    while true do
      local t, f = d:next()
      if not t then break end
      got[#got + 1] = t == "O" and ("O " .. f[1]) or t == "D" and ("D " .. f[1]) or t == "!" and ("! " .. f[1]) or t
    end
    return got, sys.now() - t0
  end
  local function R(cmd) return codec.encode("R", { "--", "sh", "-c", cmd }) end
  -- two runs sent back to back: the second starts once the first's D is written, each answer in its turn
  T.eq((serve { R("sleep 0.3; echo one") .. R("echo two"), 1.5 }), { "O one\n", "D 0", "O two\n", "D 0" })
  -- a Z while one runs and one is queued: the one going ends by the signal, the queued one is not run; a run
  -- sent after the Z is queued as usual
  T.eq((serve { R("sleep 5") .. R("echo dropped"), 0.3, codec.encode("Z", { "15", "1" }) .. R("echo after"), 1.5 }),
    { "D 143", "! EAGAIN", "O after\n", "D 0" })
  -- a Z naming a run that has ended (it crossed that run's answer) stops nothing: not the run going, not a queued
  -- one, and it is not answered
  T.eq((serve { R("echo one") .. R("sleep 0.5; echo two") .. R("echo three"), 0.2, codec.encode("Z", { "15", "1" }),
    1.2, codec.encode("Z", { "15", "3" }), 0.5 }), { "O one\n", "D 0", "O two\n", "D 0", "O three\n", "D 0" })
  -- at most 4 queued: a fifth ends the run and the helper, unanswered
  local got, took = serve { R("sleep 5") .. R("true"):rep(5), 1 }
  T.eq(got, {}, "no answer to a violation")
  T.ok(took < 4, "the run was killed, not waited for")
end)

-- a private sshd whose DEBUG1 log names every connection and every session channel
local srv = sshd.start { log_level = "DEBUG1" }
local rdir = srv.remote_dir .. "/h"
local function opts(extra)
  local o = { host = srv.user .. "@127.0.0.1", port = srv.port, identity = srv.identity,
    known_hosts = srv.known_hosts, remote_dir = rdir, ui = quiet }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end
local function gone(pattern)
  for _ = 1, 50 do
    local left = sshd.sh(("ps -eo stat,args | grep -e %s | grep -v grep | grep -v '^Z' || true"):format(pattern))
    if left == "" then return true end
    sys.sleep(0.1)
  end
  return false
end

T.test("the helper's own answers agree with independent tools (sha256sum, df, the file itself)", function()
  local t = assert(target_ssh.new(opts()))
  assert(t:mkdir(rdir))
  local h = assert(require("odp.target.shell").helper(t))
  T.eq(h.arch, sshd.sh("uname -m"):match("%S+"))
  sshd.sh(("head -c 3000001 /dev/urandom > %s/blob"):format(rdir))
  T.eq(h:sha256(rdir .. "/blob"), sshd.sh(("sha256sum %s/blob"):format(rdir)):match("^%x+"))
  T.eq(h:sha256(rdir .. "/none"), nil); T.eq(h:sha256(rdir), nil, "a directory has no hash")
  local df = tonumber(sshd.sh(("df -Pk %s | tail -1"):format(rdir)):match("^%S+%s+%d+%s+%d+%s+(%d+)")) * 1024
  T.near(h:free(rdir .. "/not/there"), df, 64 << 20, "free bytes vs df")
  T.write(tmp .. "/small", "a\0b")
  assert(h:put(tmp .. "/small", rdir .. "/small", { mode = tonumber("600", 8) }))
  T.eq(T.read(rdir .. "/small"), "a\0b"); T.eq(sys.stat(rdir .. "/small").mode & tonumber("777", 8), tonumber("600", 8))
  T.eq(h:read(rdir .. "/small", 2), "a\0")
  -- a hash with a mode: the file gets it in the same request, and keeps its ctime when it had it already (the
  -- remembered hash stays valid for the next session)
  local function ctime() return sshd.sh("stat -c %z " .. rdir .. "/small") end
  local c0 = ctime()
  sys.sleep(0.02)
  T.eq(h:sha256(rdir .. "/small", tonumber("600", 8)), sshd.sh("sha256sum " .. rdir .. "/small"):match("^%x+"))
  T.eq(ctime(), c0, "the same mode: no chmod, the ctime unchanged")
  assert(h:sha256(rdir .. "/small", tonumber("750", 8)))
  T.eq(sys.stat(rdir .. "/small").mode & tonumber("777", 8), tonumber("750", 8), "another mode: set")
  T.eq(select(3, h:request("X", { rdir .. "/small", "9" })), "EPROTO", "a mode that is not octal")
  T.eq(select(3, h:read(rdir .. "/none", 10)), "ENOTFOUND")
  T.eq(select(3, h:request("q", {})), "EPROTO", "unknown request: an error answer")
  T.eq(select(3, h:request("X", { "a", "b" })), "EPROTO", "wrong field count")
  T.eq(h.dead, nil, "error answers leave the helper usable")
  assert(h:mkdir(rdir .. "/d/e")); T.eq(sys.stat(rdir .. "/d/e").type, "dir")
  t:close()
end)

-- A point's end on a shared board in its run's answer (rm=, leases=): what finish_run's shell command did
T.test("a run's answer removes its files and lists the board's leases as the shell does", function()
  local shell = require("odp.target.shell")
  local remote = rdir .. "/ends"
  local t = assert(target_ssh.new(opts { remote_dir = remote }))
  local runs = remote .. "/.odp/runs"
  -- other odps: one running, one waiting (--exclusive), one whose lease expired (its directory unchanged for two
  -- days), a directory without a lease
  sshd.sh(("mkdir -p %s/host1.ab12cd34.4026531836.77 %s/host2.ab12cd34.4026531836.78 %s/old.1.2.3 %s/nolease " ..
    "&& printf 'host=host1 user=u1 pid=77 since=1700000000\nsecond line\n' >%s/host1.ab12cd34.4026531836.77/lease && " ..
    "printf 'host=host2 user=u2 pid=78 since=1700000001' >%s/host2.ab12cd34.4026531836.78/lease && " ..
    ": >%s/host2.ab12cd34.4026531836.78/waiting && echo 'host=old user=o pid=1 since=1' >%s/old.1.2.3/lease && " ..
    "touch -d '2 days ago' %s/old.1.2.3 && chown -R %s %s")
    :format(runs, runs, runs, runs, runs, runs, runs, runs, runs, srv.user, remote))
  local cwd = runs .. "/mine"
  sshd.sh(("mkdir -p %s/adir && echo x >%s/a.etdump && chown -R %s %s"):format(cwd, cwd, srv.user, cwd))
  local h = assert(shell.helper(t))
  local r = assert(shell.helper_exec(t, h, { "true" }, { cwd = cwd,
    finish = { cwd .. "/a.etdump", cwd .. "/absent", cwd .. "/adir" } }))
  T.eq(r.ok, true)
  T.eq(sys.stat(cwd .. "/a.etdump"), nil, "the run's file is gone")
  T.eq(r.finish.removed, true)
  T.eq(r.finish.unremoved, { cwd .. "/adir: Is a directory" }, "an absent file is no failure; a directory is one")
  -- the oracle: the shell's listing of the same leases (odp.target.shell.others, the path without the helper's
  -- answer), read by the same parser
  local listed = assert(shell.others(t))
  T.eq(r.finish.others, listed)
  local names = {}
  for _, o in ipairs(r.finish.others) do names[#names + 1] = o.name .. (o.waiting and " waiting" or "") end
  T.eq(names, { "host1.ab12cd34.4026531836.77", "host2.ab12cd34.4026531836.78 waiting" },
    "the expired lease is not counted; the directory without one is no odp")
  T.eq({ r.finish.others[1].user, r.finish.others[1].pid, r.finish.others[1].since }, { "u1", 77, 1700000000 })
  -- a program ended by a signal leaves its files (what a crash left is looked for): listed, not removed; a
  -- directory whose name the line format could not carry as one word is left out (the shell's would misread it)
  sshd.sh(("echo x >%s/b.etdump && mkdir '%s/sp ace' && echo 'host=sp user=s pid=2 since=2' >'%s/sp ace/lease'")
    :format(cwd, runs, runs))
  r = assert(shell.helper_exec(t, h, { "sh", "-c", "kill -9 $$" }, { cwd = cwd, finish = { cwd .. "/b.etdump" } }))
  T.eq(r.signal, 9); T.eq(r.finish.removed, false)
  T.ok(sys.stat(cwd .. "/b.etdump"), "a crashed run's file is kept")
  T.eq(#r.finish.others, 2, "no odp named 'sp'")
  t:close()
  -- only files directly in the run's cwd, 16 at most: anything else is refused before the program starts
  local exe = build .. "/odp-rusage-x86_64"
  for _, bad in ipairs { { "cwd=" .. cwd, "rm=" .. runs .. "/host1.ab12cd34.4026531836.77/lease" },
    { "cwd=" .. cwd, "rm=" .. cwd .. "/../x" }, { "cwd=" .. cwd, "rm=" .. cwd .. "/" }, { "rm=" .. cwd .. "/b.etdump" },
    { "cwd=" .. cwd, "rm=" .. cwd .. "/b.etdump/" } } do
    bad[#bad + 1], bad[#bad + 2] = "--", "true"
    local out = assert(proc.run { argv = { exe, "--serve" }, stdin = codec.encode("R", bad), timeout = 20 }).stdout
    local d = codec.decoder():feed(out)
    T.eq(d:next(), "H")
    local at, f = d:next()
    T.eq({ at, f[1] }, { "!", "EUSAGE" }, table.concat(bad, " "))
  end
  local many = { "cwd=" .. cwd }
  for i = 1, 17 do many[#many + 1] = ("rm=%s/f%d"):format(cwd, i) end
  many[#many + 1], many[#many + 2] = "--", "true"
  local d = codec.decoder():feed(assert(proc.run { argv = { exe, "--serve" }, stdin = codec.encode("R", many),
    timeout = 20 }).stdout)
  d:next()
  T.eq(select(2, d:next())[1], "EUSAGE", "17 files")
  T.ok(sys.stat(cwd .. "/b.etdump"), "nothing removed by a refused request")
end)

T.test("hashes are remembered across sessions, and a changed file is hashed again (same size and mtime)", function()
  local cache = rdir .. "/.odp/sha256-cache"
  local function session_hash(path)
    local t = assert(target_ssh.new(opts()))
    local hex = assert(require("odp.target.shell").helper(t)):sha256(path)
    t:close()
    return hex
  end
  local f = rdir .. "/cached"
  sshd.sh(("head -c 2000000 /dev/urandom > %s && chown %s %s"):format(f, srv.user, f))
  local want = sshd.sh("sha256sum " .. f):match("^%x+")
  T.eq(session_hash(f), want)
  T.match(T.read(cache), want .. " " .. f:gsub("%p", "%%%0") .. "\n", "remembered")
  -- the remembered hash is what a second session answers: put a wrong one in its line and it is believed...
  local text = T.read(cache)
  T.write(cache, (text:gsub(want, ("0"):rep(64))))
  T.eq(session_hash(f), ("0"):rep(64), "answered from the cache, not hashed again")
  -- ...but only for the same file: one byte changed, size and mtime put back, the ctime differs
  sshd.sh(("touch -r %s %s.ref && printf Z | dd of=%s conv=notrunc 2>/dev/null && touch -r %s.ref %s")
    :format(f, f, f, f, f))
  T.eq(session_hash(f), sshd.sh("sha256sum " .. f):match("^%x+"), "hashed again")
  -- a damaged cache costs only the hashing
  T.write(cache, "garbage\nmore garbage without an end")
  T.eq(session_hash(f), sshd.sh("sha256sum " .. f):match("^%x+"))
end)

T.test("counts (sshd's DEBUG1 log): a sweep is one connection and one channel, on a fresh board too", function()
  local odp = os.getenv("ODP") or (build .. "/odp")
  local fake = build .. "/tests/fake_runner"
  local model = T.root() .. "/tests/fixtures/pte/add_arduino.pte"
  local runs = 0
  local function sweep(points, remote)
    runs = runs + 1
    local c0, n0 = srv:count("Accepted publickey for "), srv:count("server_input_channel_open: ctype session")
    local s0, x0 = srv:count("Starting session: subsystem 'sftp'"), srv:count("Starting session: command")
    local r = proc.run { argv = { odp, "run", T.root() .. "/scripts/sweep.lua", "--flow", T.root() .. "/scripts/rpi5.lua",
      "--host", srv.user .. "@127.0.0.1", "--port", tostring(srv.port), "--identity", srv.identity,
      "--known-hosts", srv.known_hosts, "--remote-dir", remote, "--runner", fake, "--model", model,
      "-p", "num_executions=" .. points, "--out", ("%s/sweep%d.jsonl"):format(tmp, runs), -- a new file: a sweep skips points already in its file
      "--runs-dir", tmp .. "/runs", "-q" }, timeout = 300 }
    T.eq(r.status, 0, r.stderr)
    sys.sleep(0.3) -- sshd logs a moment after the client has gone
    return srv:count("Accepted publickey for ") - c0, srv:count("server_input_channel_open: ctype session") - n0,
      srv:count("Starting session: subsystem 'sftp'") - s0, srv:count("Starting session: command") - x0
  end
  local ten = "1,2,3,4,5,6,7,8,9,10"
  -- first on a board without the helper (it is installed), then on one that has it
  local c3, n3, fresh_sftp, fresh_cmds = sweep("1,2,3", srv.remote_dir .. "/c3")
  T.eq(fresh_cmds, 1, "the log names the sessions it starts (the helper's one command): the counts below can fail")
  T.eq(fresh_sftp, 0, "a fresh board: no SFTP session; the helper, runner and model go up through the helper's exec")
  local c10, n10 = sweep(ten, srv.remote_dir .. "/c10")
  T.eq(c3, 1, "one connection for 3 points"); T.eq(c10, 1, "one connection for 10 points")
  T.eq({ n3, n10 }, { 1, 1 }, "a fresh board: one channel, the helper's, however many points")
  local c3b, n3b = sweep("1,2,3", srv.remote_dir .. "/c3")
  local c10b, n10b, sweeps_sftp = sweep(ten, srv.remote_dir .. "/c10")
  T.eq({ c3b, c10b }, { 1, 1 })
  -- memory by phase (on by default) brings each point's timeline back in the run's answer on the helper's
  -- channel, so a point costs one round trip with it too
  T.eq({ n3b, n10b }, { 1, 1 }, "a board with the helper: one channel, the helper's, however many points")
  T.eq(sweeps_sftp, 0, "no SFTP session: nothing is brought back apart from the helper's answers")
end)

T.test("two tasks that need the helper at once (a pipelined sweep's points, both sent again after a reconnect): " ..
  "one starts it, the other waits for it; one channel, one program at a time", function()
  local t = assert(target_ssh.new(opts { remote_dir = srv.remote_dir .. "/two" }))
  T.eq(t.cache.helper_client, nil, "a target without its helper yet")
  local n0 = srv:count("server_input_channel_open: ctype session")
  local s = require("odp.core.sched").new()
  local spans = {}
  for i = 1, 2 do
    s:spawn(function()
      local r = assert(t:exec({ "sh", "-c", "date +%s%N; sleep 0.3; date +%s%N" }))
      spans[i] = { r.stdout:match("^(%d+)\n(%d+)") }
      return r.rusage ~= nil
    end, { name = "point " .. i })
  end
  s:run()
  for i = 1, 2 do T.eq({ s.tasks[i].ok, s.tasks[i].values[1] }, { true, true }, tostring(s.tasks[i].error)) end
  sys.sleep(0.3) -- sshd logs a moment after
  T.eq(srv:count("server_input_channel_open: ctype session") - n0, 1, "one channel: the helper's")
  local a, b = spans[1], spans[2]
  T.ok(tonumber(a[2]) <= tonumber(b[1]) or tonumber(b[2]) <= tonumber(a[1]),
    "on the board's clock the two programs did not overlap: " .. table.concat(a, "-") .. " " .. table.concat(b, "-"))
  t:close()
end)

T.test("helper killed mid-run: that run fails with one line, the next starts a new helper", function()
  local t = assert(target_ssh.new(opts()))
  assert(t:exec({ "true" }))
  local first = t.cache.helper_client
  -- the program kills its parent, the helper, then lingers: it must not outlive it
  local r, err, code = t:exec({ "sh", "-c", "kill -KILL $PPID; exec sleep 31" })
  T.eq(r, nil); T.eq(code, "EIO"); T.match(err, "helper on ssh://.* ended"); T.eq(err:find("\n"), nil)
  T.ok(gone("'sleep 31'"), "the program went with its helper (PDEATHSIG)")
  r = assert(t:exec({ "echo", "again" }))
  T.eq(r.stdout, "again\n"); T.ok(r.rusage.maxrss_kb > 0)
  T.ok(t.cache.helper_client ~= first, "a new helper")
  t:close()
end)

T.test("connection dropped: waited for on every outage; a program in flight is not run again", function()
  local s2 = sshd.start()
  local o = { host = s2.user .. "@127.0.0.1", port = s2.port, identity = s2.identity, known_hosts = s2.known_hosts,
    remote_dir = s2.remote_dir .. "/h", ui = quiet, reconnect_timeout = 20 }
  local t = assert(target_ssh.new(o))
  assert(t:exec({ "true" }))
  -- drop the connection: every sshd session process, not the listener
  local function drop()
    sshd.sh(("desc() { local c; for c in $(pgrep -P \"$1\"); do desc \"$c\"; echo \"$c\"; done; }; " ..
      "kill -KILL $(desc %d) 2>/dev/null; true"):format(s2.pid))
  end
  local ok, e = pcall(function()
    for outage = 1, 3 do
      drop()
      local r, err, code = t:exec({ "echo", "lost" })
      T.eq(r, nil, "the program in flight is not run again"); T.eq(code, "ECONNLOST")
      T.match(err, "dropped during running echo"); T.match(err, "it is back")
      r = assert(t:exec({ "echo", "back" }), "outage " .. outage .. ": the board is back")
      T.eq(r.stdout, "back\n")
      drop()
      T.eq(assert(t:run("echo probe")), "probe\n", "a probe is run again once the board is back")
    end
  end)
  t:close()
  s2:stop() -- also when a check failed: no sshd left behind
  if not ok then error(e, 0) end
end)

T.test("malformed and oversized answers from the board: EPROTO, the channel closed, never a crash", function()
  local t = assert(target_ssh.new(opts()))
  local cases = {
    { "printf 'hello\\n'", "bad magic" },
    { "printf 'OHH\\000\\377\\377\\377\\377'; sleep 5", "longer than 1 MiB" },
    { "printf 'OHH\\000\\010\\000\\000\\000\\011\\000\\000\\000abcd'; sleep 5", "field longer" },
    { "true", "ended" },
  }
  for _, c in ipairs(cases) do
    local ch = assert(t.session:open_channel(c[1]))
    local t0 = sys.now()
    local h, err, code = helper.open(ch, { uri = t.uri, timeout = 10 })
    T.eq(h, nil, c[2]); T.match(err, c[2], c[2]); T.ok(code == "EPROTO" or code == "EIO", code)
    T.ok(sys.now() - t0 < 3, "no wait for the rest of a bogus length")
  end
  t:close()
end)

-- partial files in dir
local function parts(dir)
  local n = 0
  for _, name in ipairs(sys.readdir(dir) or {}) do if name:find("odp-part", 1, true) then n = n + 1 end end
  return n
end

T.test("a helper of another build on the board never runs: odp's own replaces it in the same exec", function()
  local dir = srv.remote_dir .. "/v"
  sshd.sh(("mkdir -p %s/.odp && chown -R %s %s"):format(dir, srv.user, dir))
  -- a stale helper (another protocol's hello) that leaves a mark when it runs
  local hello = frame("H", { "odp-helper", "99", "x86_64" })
  local f = assert(io.open(dir .. "/.odp/odp-rusage", "wb"))
  f:write("#!/bin/sh\ntouch " .. dir .. "/ran\nprintf '" .. hello:gsub(".", function(ch) return ("\\%03o"):format(ch:byte()) end) ..
    "'\nsleep 5\n")
  f:close()
  sshd.sh(("chmod 755 %s/.odp/odp-rusage && chown %s %s/.odp/odp-rusage"):format(dir, srv.user, dir))
  local n0 = srv:count("server_input_channel_open: ctype session")
  local t = assert(target_ssh.new(opts { remote_dir = dir }))
  local r = assert(t:exec({ "echo", "ok" }))
  T.eq(r.stdout, "ok\n")
  T.eq(sys.stat(dir .. "/ran"), nil, "the stale helper never ran")
  T.eq(sys.sha256_file(dir .. "/.odp/odp-rusage"), sys.sha256_file(build .. "/odp-rusage-" .. t.cache.helper_client.arch))
  t:close()
  sys.sleep(0.3)
  T.eq(srv:count("server_input_channel_open: ctype session") - n0, 1, "one channel: checked, replaced and started")
  T.eq(parts(dir .. "/.odp"), 0, "no partial file left")
end)

T.test("a board without sha256sum: the bring-up says why on stderr and neither installs nor starts a helper", function()
  local dir = srv.remote_dir .. "/nosum"
  sshd.sh(("mkdir -p %s && chown -R %s %s"):format(dir, srv.user, dir))
  local t = assert(target_ssh.new(opts { remote_dir = dir }))
  local shell = require("odp.target.shell")
  -- the bring-up's own command with a PATH that has no sha256sum (sh's builtins and uname are what it needs first)
  local bin = tmp .. "/nosum-bin"
  sys.mkdir_p(bin)
  sshd.sh(("ln -sf $(command -v uname) %s/uname && chmod 755 %s"):format(bin, bin))
  local r = assert(t.session:exec("PATH=" .. bin .. "; " .. shell.start_command(shell.helper_path(t)), { timeout = 30 }))
  T.eq(r.status, 1); T.eq(r.stdout, "")
  T.match(r.stderr, "no sha256sum on the board: its helper cannot be checked, so it is not started")
  T.eq(sys.stat(dir .. "/.odp/odp-rusage"), nil, "nothing installed")
  t:close()
end)

T.test("a helper cut short on its way (the exec's stdin closed early) never runs, and nothing of it is left", function()
  local dir = srv.remote_dir .. "/cut"
  sshd.sh(("mkdir -p %s && chown -R %s %s"):format(dir, srv.user, dir))
  local t = assert(target_ssh.new(opts { remote_dir = dir }))
  -- the bring-up's own command, its stdin given half the helper's bytes and then closed
  local shell = require("odp.target.shell")
  local cmd = shell.start_command(shell.helper_path(t))
  local arch = sshd.sh("uname -m"):match("%S+")
  local bytes = T.read(build .. "/odp-rusage-" .. arch)
  local r = assert(t.session:exec(cmd, { stdin = bytes:sub(1, #bytes // 2), timeout = 30 }))
  T.match(r.stdout, "^ODP%-NO%-HELPER\n" .. arch .. "\n$", "it said there was none, and named the arch")
  T.eq(r.status, 1); T.match(r.stderr, "did not arrive whole")
  T.eq(sys.stat(dir .. "/.odp/odp-rusage"), nil, "no helper under its name")
  T.eq(parts(dir .. "/.odp"), 0, "no partial file left")
  -- the whole bytes: installed and started (its hello), in the same command
  r = assert(t.session:exec(cmd, { stdin = bytes, timeout = 30 }))
  T.match(r.stdout, "^ODP%-NO%-HELPER\n" .. arch .. "\nOH", "installed, then it greeted")
  T.eq(sys.sha256_file(dir .. "/.odp/odp-rusage"), sys.sha256_file(build .. "/odp-rusage-" .. arch))
  t:close()
end)

T.test("stdout chunk times on the board's clock: a program's pause between two writes, and its start", function()
  local t = assert(target_ssh.new(opts()))
  -- the oracle: the program's own sleeps (at least what it asked; well under a second more on a busy machine)
  local r = assert(t:exec({ "sh", "-c", "sleep 0.3; printf a; sleep 0.2; printf bc" }))
  T.eq(r.ok, true); T.eq(r.stdout, "abc")
  local st = r.stdout_times
  T.eq(st.ends, { 1, 3 }); T.eq(st.cut, 0)
  T.ok(st.t_us[1] >= 300000 and st.t_us[1] < 1300000, "the first write after the program's start: " .. st.t_us[1])
  local gap = st.t_us[2] - st.t_us[1]
  T.ok(gap >= 200000 and gap < 1200000, "the pause between the writes: " .. gap .. " us")
  t:close()
end)

T.test("a flooding program: output bounded in memory, every byte streamed to on_stdout", function()
  local t = assert(target_ssh.new(opts()))
  local saved = helper.CAPTURE_MAX
  helper.CAPTURE_MAX = 1 << 20
  local seen = 0
  local r = assert(t:exec({ "sh", "-c", "head -c 20000000 /dev/zero; echo done >&2" },
    { on_stdout = function(d) seen = seen + #d end }))
  helper.CAPTURE_MAX = saved
  T.eq(r.ok, true); T.eq(#r.stdout, 1 << 20); T.eq(r.stdout_dropped, 20000000 - (1 << 20)); T.eq(seen, 20000000)
  T.eq(r.stderr, "done\n"); T.ok(r.rusage, "still measured")
  t:close()
end)

T.test("a flooding runner in a profile: the whole output in the run dir, a bounded part in memory", function()
  local runner = tmp .. "/flood_runner"
  T.write(runner, "#!/bin/sh\nhead -c 6000000 /dev/zero | tr '\\0' x\necho 'I 00:00:00.000 flood' >&2\n")
  sys.chmod(runner, tonumber("755", 8))
  local saved = helper.CAPTURE_MAX
  helper.CAPTURE_MAX = 1 << 20
  local b <close> = board.open("devices/rpi5.lua", opts { remote_dir = srv.remote_dir .. "/flood" })
  local rec = b:profile { runner = runner, model = T.root() .. "/tests/fixtures/pte/add_arduino.pte", n = 1,
    runs_dir = tmp .. "/floodruns" }
  helper.CAPTURE_MAX = saved
  local out = rec.artifacts.run_dir .. "/runner.stdout"
  T.eq(sys.stat(out).size, 6000000, "every byte on disk")
  T.eq(T.read(out):match("^x+$") ~= nil, true)
  T.match(T.read(rec.artifacts.run_dir .. "/runner.stderr"), "^I 00:00:00.000 flood\n$")
end)

T.test("no exec permission in the remote dir: the shell path, said once", function()
  local dir = srv.remote_dir .. "/noexec"
  -- a noexec mount where this machine allows one, else a helper that cannot be executed (a directory)
  sshd.sh(("mkdir -p %s && chown %s %s"):format(dir, srv.user, dir))
  local mounted = proc.run { "mount", "-t", "tmpfs", "-o", "noexec,mode=0777", "tmpfs", dir }.ok
  if not mounted then sshd.sh(("mkdir -p %s/.odp/odp-rusage"):format(dir)) end
  local warned = {}
  local ui = require("odp.core.ui").new { quiet = true }
  ui.warn = function(_, fmt, ...) warned[#warned + 1] = fmt:format(...) end
  local t = assert(target_ssh.new(opts { remote_dir = dir, ui = ui }))
  local r = assert(t:exec({ "sh", "-c", "echo one; exit 3" }))
  T.eq(r.stdout, "one\n"); T.eq(r.status, 3)
  T.eq(assert(t:exec({ "echo", "two" })).stdout, "two\n")
  T.eq(#warned, 1, table.concat(warned, "\n")); T.match(warned[1], "cannot run on ssh://.*one command per exec")
  T.eq(t.cache.helper_client, nil)
  t:close()
  if mounted then proc.run { "umount", dir } end
end)

T.test("Ctrl-C mid-run: odp exits 130 and the program's process group is gone from the board", function()
  local odp = os.getenv("ODP") or (build .. "/odp")
  -- a real program (it passes the preflight's ELF check) that hangs and leaves a grandchild ignoring SIGTERM
  local runner = tmp .. "/hang_runner"
  T.write(runner, T.read(build .. "/tests/fake_runner"))
  sys.chmod(runner, tonumber("755", 8))
  local model = T.root() .. "/tests/fixtures/pte/add_arduino.pte"
  local cmd = ("%s run %s/scripts/rpi5.lua --host %s@127.0.0.1 --port %d --identity %s --known-hosts %s " ..
    "--remote-dir %s/cc --runner %s --model %s --runs-dir %s/runs -q -- --fake_mode=hang_tree"):format(odp, T.root(),
    srv.user, srv.port, srv.identity, srv.known_hosts, srv.remote_dir, runner, model, tmp)
  -- Ctrl-C once the runner runs on the board ([c]: the pattern must not match this shell's own command line)
  local r = proc.run { "sh", "-c", ("%s >%s/out 2>%s/err & p=$!; i=0; while [ $i -lt 300 ] && " ..
    "! pgrep -f '%s' >/dev/null; do sleep 0.1; i=$((i+1)); done; echo $i; kill -INT $p; wait $p; echo $?"):format(
    cmd, tmp, tmp, "[c]c/[.]odp/runs/[^/]*/hang_runner --model_path"), timeout = 60 }
  local waited, status = r.stdout:match("^(%d+)\n(%d+)\n$")
  T.ok(waited and tonumber(waited) < 300, "the runner ran on the board before the Ctrl-C: " .. r.stdout)
  T.eq(status, "130", T.read(tmp .. "/err"))
  -- the run's failed record says so in the report, and odp in one line on stderr (-q: nothing else)
  T.match(T.read(tmp .. "/out"), "error +ECANCELED: run: interrupted; runner killed")
  T.eq(T.read(tmp .. "/err"), "odp: ECANCELED: run: interrupted; runner killed\n")
  T.ok(gone("'[c]c/[.]odp/runs/[^/]*/hang_runner --model_path'"), "nothing of the runner left on the board, its grandchild included")
end)

srv:stop()
T.done()
