local T = require("t")
local gnutime = require("odp.parse.gnutime")
local proc = require("odp.proc")

local DIR = T.root() .. "/tests/fixtures/transcripts/"

T.test("every field of a full GNU time -v block, inside a combined transcript", function()
  local r = gnutime.parse(T.read(DIR .. "19_datamap_with_ptd_n10.txt"))
  T.eq(r, {
    format = "gnu",
    command = "/opt/et/bin/executor_runner --model_path /tmp/et/pte/barakugav_executorch-rs_data_map_model.pte " ..
      "--data_path /tmp/et/pte/barakugav_executorch-rs_data_map__default_external_constant.ptd --num_executions 10 " ..
      "--etdump_path /tmp/et/etdumps/datamap_ptd_n10.etdump",
    user_s = 0.0, system_s = 0.0, cpu_percent = 80, elapsed_s = 0.01,
    avg_shared_text_kb = 0, avg_unshared_data_kb = 0, avg_stack_kb = 0, avg_total_kb = 0,
    max_rss_kb = 4964, avg_rss_kb = 0, major_faults = 4, minor_faults = 176,
    voluntary_switches = 5, involuntary_switches = 0, swaps = 0, fs_inputs = 1104, fs_outputs = 40,
    socket_msgs_sent = 0, socket_msgs_received = 0, signals_delivered = 0, page_size_bytes = 4096, exit_status = 0,
  })
end)

T.test("every transcript: peak RSS and status lines", function()
  local want = {
    ["00_rpi5_doc_example.txt"] = { 43600, 0 },
    ["01_add_n10_etdump.txt"] = { 4592, 0 },
    ["02_add_n1_etdump.txt"] = { 4608, 0 },
    ["05_missing_model.txt"] = { 3860, 0, signal = 6 },
    ["06_corrupt_truncated_600B.txt"] = { 3900, 1, nonzero = 1 },
    ["08_etdump_dir_missing.txt"] = { 4412, 0, signal = 6 },
    ["12_linear_without_ptd.txt"] = { 3904, 0, signal = 6 },
    ["15_add_n10_print_all.txt"] = { 4572, 0 },
    ["16_add_n10_print_none.txt"] = { 4504, 0 },
    ["17_add_n0.txt"] = { 3952, 0 },
    ["19_datamap_with_ptd_n10.txt"] = { 4964, 0 },
  }
  local n = 0
  for name, w in pairs(want) do
    n = n + 1
    local r = gnutime.parse(T.read(DIR .. name))
    T.eq(r.max_rss_kb, w[1], name .. " max_rss_kb")
    T.eq(r.exit_status, w[2], name .. " exit_status")
    T.eq(r.terminated_by_signal, w.signal, name .. " signal")
    T.eq(r.nonzero_status, w.nonzero, name .. " nonzero")
  end
  T.eq(n, 11)
end)

T.test("the RPi5 block: spaces, abridged", function()
  local r = gnutime.parse(T.read(DIR .. "00_rpi5_doc_example.txt"))
  T.eq(r.user_s, 1.45)
  T.eq(r.cpu_percent, 325)
  T.eq(r.elapsed_s, 0.45)
  T.eq(r.system_s, nil)
  T.eq(r.command, "executor_runner --model_path model.pte --num_executions 10 --etdump_path profile.etdump")
end)

T.test("elapsed h:mm:ss and m:ss.cc, ?% CPU, CRLF, spaces", function()
  local r = gnutime.parse("  Elapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03\r\n" ..
    "  Percent of CPU this job got: ?%\r\n  Maximum resident set size (kbytes): 12\r\n")
  T.eq(r.elapsed_s, 3723)
  T.eq(r.cpu_percent, nil)
  T.eq(r.max_rss_kb, 12)
  T.eq(gnutime.parse("\tElapsed (wall clock) time (h:mm:ss or m:ss): 12:34.56\n").elapsed_s, 12 * 60 + 34.56)
end)

T.test("toybox time -v (Android)", function()
  local r = gnutime.parse(table.concat({
    "OutputX 0: tensor(sizes=[3], [2., 2., 2.])",
    "Real time (s): 0.123456", "System time (s): 0.010000", "User time (s): 0.090000", "Max RSS (KiB): 45120",
    "Major faults: 3", "Minor faults: 1234", "File system inputs: 16", "File system outputs: 8",
    "Voluntary context switches: 5", "Involuntary context switches: 7",
  }, "\n"))
  T.eq(r, { format = "toybox", elapsed_s = 0.123456, system_s = 0.01, user_s = 0.09, max_rss_kb = 45120,
    major_faults = 3, minor_faults = 1234, fs_inputs = 16, fs_outputs = 8, voluntary_switches = 5,
    involuntary_switches = 7 })
end)

T.test("no report -> nil; garbage never raises", function()
  T.eq(gnutime.parse(""), nil)
  T.eq(gnutime.parse(nil), nil)
  T.eq(gnutime.parse("hello\nworld: 3\n"), nil)
  math.randomseed(7)
  for _ = 1, 100 do
    local b = {}
    for i = 1, math.random(0, 3000) do b[i] = string.char(math.random(0, 255)) end
    T.ok(pcall(gnutime.parse, table.concat(b) .. "\nMaximum resident set size (kbytes): x\n"))
  end
  T.eq(gnutime.parse("Maximum resident set size (kbytes): " .. ("9"):rep(5000)), nil, "a 5000-digit line is skipped")
  T.raises(function() gnutime.parse(5) end, "string expected")
end)

T.test("the real /usr/bin/time -v: every field present, RSS of a child touching 64 MB", function()
  local r = assert(proc.run({ "/usr/bin/time", "-v", "head", "-c", "67108864", "/dev/zero", timeout = 60,
    on_stdout = function() end }))
  T.eq(r.status, 0)
  local t = gnutime.parse(r.stderr)
  T.ok(t, "parsed")
  for _, k in ipairs({ "command", "user_s", "system_s", "cpu_percent", "elapsed_s", "max_rss_kb", "avg_rss_kb",
    "major_faults", "minor_faults", "voluntary_switches", "involuntary_switches", "swaps", "fs_inputs",
    "fs_outputs", "socket_msgs_sent", "socket_msgs_received", "signals_delivered", "page_size_bytes",
    "exit_status" }) do
    T.ok(t[k] ~= nil, k .. " present")
  end
  T.eq(t.command, "head -c 67108864 /dev/zero")
  T.eq(t.exit_status, 0)
  T.eq(t.page_size_bytes, 4096)
  T.ok(t.max_rss_kb > 0 and t.max_rss_kb < 64 * 1024, "head streams: small RSS")
end)

T.test("the real /usr/bin/time -v after SIGABRT: signal line", function()
  local r = assert(proc.run({ "/usr/bin/time", "-v", "sh", "-c", "kill -ABRT $$", timeout = 60 }))
  local t = gnutime.parse(r.stderr)
  T.eq(t.terminated_by_signal, 6)
end)

T.done()
