-- The run step's capture (odp.flows.ethos_u.capture: capture + measure) on the twin's real firmware output: the
-- runner image built by the flow's build step, booted in QEMU, its RTT up channel copied by the twin's
-- rttcat helper and fed to the capture in RTT-sized chunks. Checks latency, PMU, the ETDump byte-identical
-- to the fixture, the op table in cycles, and the failure paths: truncated / corrupt base64, fewer lines.
-- (The full flow over odp.probe/odp.rtt is tests/lua/alif_twin_test.lua.)
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local sys = require("odp.sys")
local plan_mod = require("odp.flows.ethos_u.plan")
local E = require("odp.flows.ethos_u.capture")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local twin = root .. "/devices/twin_m55.lua"
local mnist = root .. "/tests/fixtures/pte/mnist_ethos_u55.pte"
local fixture_etdump = T.read(root .. "/tests/fixtures/etdump/docs_tutorial.etdp")
local dir = T.tmpdir()

local rttcat = dir .. "/rttcat"
assert(proc.run { argv = { "cc", "-std=c11", "-O2", "-o", rttcat, root .. "/tests/twin/rttcat.c" }, timeout = 60 }.ok,
  "rttcat builds")

-- Builds the runner through the flow's build step with extra cmake values (a derived device file).
local function build(name, cmake)
  local dev = dir .. "/" .. name .. ".lua"
  local body = { "d.build.vars = { inferences = false }" }
  for k, v in pairs(cmake) do body[#body + 1] = ("d.build.cmake[%q] = %q"):format(k, tostring(v)) end
  T.derived_device(twin, dev, name, table.concat(body, "\n"))
  local r = proc.run { argv = { odp, "run", root .. "/scripts/alif_e8.lua", "--device", dev, "--model", mnist,
    "--only", "build", "--build-dir", dir .. "/b-" .. name, "--runs-dir", dir .. "/runs", "-q" }, cwd = dir, timeout = 120 }
  assert(r and r.status == 0, "build " .. name .. ": " .. (r and r.stderr or "?"))
  return dir .. "/b-" .. name .. "/twin_runner.elf"
end

-- Boots an image and returns everything its up channel 0 printed until `odp-twin done`.
local function boot_and_read(image)
  local state = dir .. "/state-" .. tostring(sys.now()):gsub("%.", "")
  local r = proc.run { argv = { root .. "/tests/twin/launch.sh", image, state }, timeout = 30 }
  assert(r and r.ok, "launch: " .. (r and r.stderr or "?"))
  local out = proc.run { argv = { rttcat, "-s", state, "up", "-u", "odp-twin done", "-t", "20" }, timeout = 30 }
  proc.run { argv = { root .. "/tests/twin/stop.sh", state }, timeout = 20 }
  return out.stdout .. "\n" -- rttcat stops right after the text, before its newline
end

-- A stream over captured bytes, delivering RTT-sized chunks, then timing out like an idle channel.
local function chunk_stream(data, size)
  local pos, back = 1, ""
  return {
    read = function(_, n, opts)
      if #back > 0 then local b = back back = "" return b end
      if pos > #data then sys.sleep(math.min(opts and opts.timeout or 0.01, 0.01)) return nil, "ETIMEDOUT: idle", "ETIMEDOUT" end
      local c = data:sub(pos, pos + math.min(n, size or 1000) - 1)
      pos = pos + #c
      return c
    end,
    unread = function(_, b) back = b .. back end,
  }
end

local function plan(inferences)
  return plan_mod.make { device = twin, model = mnist, inferences = inferences, dry_run = true }
end

-- as_board: the same output read as a real board's (no twin): its ETDump is then the model's own. tweak(p):
-- changes to the plan (reset_at, max_log); stream: another stream than the output in 997-byte chunks.
local function capture(output, inferences, rundir, timeout, as_board, tweak, stream)
  local p = plan(inferences)
  if as_board then p.twin = nil end
  if tweak then tweak(p) end
  sys.mkdir_p(rundir)
  local rec = { artifacts = { rtt_log = rundir .. "/rtt.log" }, warnings = {} }
  local o = { timeout = timeout or 10, settle = 0.2 }
  local cap = E.capture(stream or chunk_stream(output, 997), p, o, rec.artifacts.rtt_log)
  local ok, err = pcall(E.measure, rec, p, cap, rundir, o)
  return rec, ok, err
end

local good = boot_and_read(build("cap_ok", { TWIN_INFERENCES = 5 }))

T.test("the runner's output: 5 latency samples, PMU counters, etdump.bin byte-identical, op table in cycles", function()
  local rec, ok, err = capture(good, 5, dir .. "/run-ok")
  T.ok(ok, "measure: " .. tostring(err and err.message or err))
  T.eq(rec.latency_ms.n, 5)
  T.eq(rec.latency_ms.source, "rtt")
  T.ok(rec.pmu and rec.pmu.cpu_cycles_total and rec.pmu.npu_cycles, "PMU: " .. json.encode(rec.pmu or {}))
  T.eq(#rec.pmu.counters, 7, "seven U85 counters")
  require("rttlog").check(rec) -- every latency and PMU value is the one the firmware printed
  T.ok(T.read(rec.artifacts.etdump) == fixture_etdump, "etdump.bin byte-identical to the fixture")
  -- the twin's ETDump is canned (another CNN's): kept, never shown as this model's operators
  T.eq(rec.ops, nil, "no op table from the twin's canned ETDump")
  T.ok(rec.latency_ms.modelled, "the twin's times are modelled")
  T.match(table.concat(rec.warnings, "\n"), "ETDump is canned, not this model's")
  -- the same output from a board: its ETDump is the model's, in cycles
  rec, ok, err = capture(good, 5, dir .. "/run-ok-board", nil, true)
  T.ok(ok, "measure: " .. tostring(err and err.message or err))
  T.eq(rec.latency_ms.modelled, nil)
  T.eq(rec.ops_unit, "cycles")
  T.ok(#rec.ops > 0, "op table")
  T.eq(rec.ops_summary.unit, "cycles", "the time split in cycles: " .. json.encode(rec.ops_summary))
  local log = T.read(dir .. "/run-ok/rtt.log")
  T.match(log, "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d+Z odp%-twin runner v1 boot 1\n", "host timestamps")
  T.match(log, "Inference: [%d.]+ ms")
end)

T.test("fewer Inference: lines than asked: ERUNNER exit 1, the samples that came kept in the record", function()
  local rec, ok, err = capture(good, 8, dir .. "/run-few")
  T.eq(ok, false)
  T.eq(err.code, "ERUNNER")
  T.eq(err.exit, 1)
  T.match(err.message, "5 of 8 Inference: lines")
  T.eq(rec.latency_ms.n, 5)
  T.ok(T.read(dir .. "/run-few/rtt.log"):find("odp-twin done", 1, true), "raw log kept")
end)

T.test("silence (reset without RTT output): ETIMEDOUT exit 3", function()
  local rec, ok, err = capture("", 5, dir .. "/run-silent", 1)
  T.eq(ok, false)
  T.eq(err.code, "ETIMEDOUT")
  T.eq(err.exit, 3)
  T.match(err.message, "printed nothing")
  T.eq(rec.latency_ms.n, 0)
end)

T.test("truncated base64 from the firmware: an error naming the block, exit 1, latency kept", function()
  local out = boot_and_read(build("cap_trunc", { TWIN_INFERENCES = 5, TWIN_FAULT = "truncated_base64" }))
  local rec, ok, err = capture(out, 5, dir .. "/run-trunc")
  T.eq(ok, false)
  T.eq({ err.code, err.exit }, { "ERUNNER", 1 })
  T.match(err.message, "run_this block.*truncated")
  T.eq(rec.latency_ms.n, 5)
  T.ok(not rec.artifacts.etdump, "no etdump.bin from a truncated block")
end)

T.test("corrupt base64 from the firmware: an error naming etdump.bin, exit 1", function()
  local out = boot_and_read(build("cap_corrupt", { TWIN_INFERENCES = 5, TWIN_FAULT = "corrupt_base64" }))
  local rec, ok, err = capture(out, 5, dir .. "/run-corrupt")
  T.eq(ok, false)
  T.eq({ err.code, err.exit }, { "ERUNNER", 1 })
  T.match(err.message, "artifact etdump%.bin .*corrupt base64")
  T.ok(not rec.artifacts.etdump)
end)

T.test("give_back hands bytes after the last line back to the stream (the flasher's C)", function()
  local s = chunk_stream("Starting xmodemReceive...\nCC", 100)
  local rd = require("odp.target.rtt_log").reader(s, nil, 1024)
  T.eq(rd:line(1), "Starting xmodemReceive...")
  rd:give_back()
  T.eq(s:read(10), "CC")
end)

------------------------------------------------------------------------------------- crafted RTT streams (issue 42)
-- Device text is untrusted: lying sizes, odp's own file names, duplicates, absurd or malformed Inference: values,
-- NUL bytes. Each stream goes through the capture path (capture, then measure) as the firmware's output would.

local function run_this(name, data, announced)
  return ("[base64] buffer size: %s\n#[RUN THIS]\necho \"%s\" | base64 -d >%s\n#[END]\n"):format(
    announced or tostring(#data), sys.base64_encode(data), name)
end
local function inference_lines(n, ms)
  local t = {}
  for i = 1, n do t[i] = ("Inference: %.3f ms\n"):format((ms or 10) + i / 1000) end
  return table.concat(t)
end
local DONE = "odp-twin done\n"
-- the structured failure measure raised, or nil when it passed (anything else is a bug: re-raised)
local function failure(ok, err)
  if ok then return nil end
  if type(err) ~= "table" or not err.code then error(err, 0) end
  return err
end

T.test("a lying buffer size (99999999999999999999999): a named error, not a Lua error; samples kept", function()
  local out = inference_lines(5) .. run_this("etdump.bin", "abc", "99999999999999999999999") .. DONE
  local rec, ok, err = capture(out, 5, dir .. "/lie-size")
  err = failure(ok, err)
  T.eq({ err and err.code, err and err.exit }, { "ERUNNER", 1 })
  T.match(err.message, "artifact etdump%.bin %(run_this block%): announced size 99999999999999999999999 is out of range")
  T.eq(rec.latency_ms.n, 5)
  T.ok(not rec.artifacts.etdump, "the block is refused")
  -- the same for -1, 2^63 and a size past the cap
  for _, n in ipairs({ "9223372036854775808", tostring(64 * 1024 * 1024 + 1) }) do
    rec, ok, err = capture(inference_lines(5) .. run_this("etdump.bin", "abc", n) .. DONE, 5, dir .. "/lie-" .. #n)
    T.match(failure(ok, err).message, "announced size " .. n .. " is out of range")
  end
end)

T.test("artifacts named like odp's own files are kept beside them as device-<name>, and said", function()
  local raw = "ls -l /\n"
  local out = inference_lines(5)
  for _, name in ipairs({ "rtt.log", "result.json", "build.log", "flash.log", "RTT.LOG" }) do
    out = out .. run_this(name, raw .. name)
  end
  local rd = dir .. "/reserved"
  local rec, ok, err = capture(out .. DONE, 5, rd)
  T.ok(ok, tostring(err and err.message or err))
  T.match(T.read(rd .. "/rtt.log"), "^%d%d%d%d%-%d%d%-%d%dT[^\n]*Z Inference: ", "rtt.log is still the raw log")
  for _, name in ipairs({ "rtt.log", "result.json", "build.log", "flash.log", "RTT.LOG" }) do
    T.eq(T.read(rd .. "/device-" .. name), raw .. name, "device-" .. name)
  end
  T.eq(rec.artifacts.rtt_log, rd .. "/rtt.log", "the record's rtt_log is odp's")
  T.eq(rec.artifacts.device_rtt_log, rd .. "/device-rtt.log")
  T.match(table.concat(rec.warnings, "\n"), 'artifact "result.json" is kept as device%-result%.json: the name of one of odp\'s own files')
end)

T.test("two artifacts of one name: both kept (etdump.bin, etdump-2.bin), with a warning", function()
  local rd = dir .. "/dup"
  local rec, ok, err = capture(inference_lines(5) .. run_this("etdump.bin", "first") .. run_this("etdump.bin", "second")
    .. run_this("../etdump.bin", "third") .. DONE, 5, rd, nil, true)
  T.ok(ok, tostring(err and err.message or err))
  T.eq({ T.read(rd .. "/etdump.bin"), T.read(rd .. "/etdump-2.bin"), T.read(rd .. "/etdump-3.bin") },
    { "first", "second", "third" })
  T.eq({ rec.artifacts.etdump, rec.artifacts.etdump_2, rec.artifacts.etdump_3 },
    { rd .. "/etdump.bin", rd .. "/etdump-2.bin", rd .. "/etdump-3.bin" })
  T.match(table.concat(rec.warnings, "\n"), '"etdump.bin" is kept as etdump%-2%.bin: a second artifact of that name')
  T.ok(not sys.stat(dir .. "/etdump.bin"), "nothing outside the run directory")
end)

T.test("Inference: values not finite, negative, longer than the run or not numbers: refused, counted, said", function()
  local bad = { "1e38", "-1", "nan", "inf", "1.2.3", "0x10", "20000", "1\0", "" }
  local out = inference_lines(3)
  for _, v in ipairs(bad) do out = out .. "Inference: " .. v .. " ms\n" end
  -- the run started 10 s ago: 20000 ms cannot be one inference of it
  local rec, ok, err = capture(out .. DONE, 5, dir .. "/bad-inf", nil, nil, function(p) p.reset_at = sys.now() - 10 end)
  err = failure(ok, err)
  T.eq(rec.latency_ms.n, 3, "only the three plausible values are samples")
  T.eq(rec.rtt.refused, #bad - 1, "every matching line refused is counted (the empty value does not match)")
  T.eq(err.code, "ERUNNER")
  T.match(err.message, "3 of 5 Inference: lines within 10 s %(%d+ RTT bytes%), 8 more refused")
  local w = table.concat(rec.warnings, "\n")
  T.match(w, '8 Inference: line%(s%) refused, not taken as samples %(line 4 "1e38": longer than the run so far')
  T.match(w, 'line 5 "%-1": negative; line 6 "nan": not a number')
  T.ok(rec.latency_ms.max < 11, "no refused value in the statistics")
end)

T.test("more Inference: lines than --inferences: all kept, flagged in rtt.extra and a warning", function()
  local rec, ok, err = capture(inference_lines(7) .. DONE, 4, dir .. "/extra")
  T.ok(ok, tostring(err and err.message or err))
  T.eq({ rec.latency_ms.n, rec.rtt.extra }, { 7, 3 })
  T.match(table.concat(rec.warnings, "\n"), "printed 7 Inference: lines for %-%-inferences 4")
end)

T.test("the raw rtt.log is capped (the cap said in the log, the record and a warning); the capture is whole", function()
  local rd = dir .. "/logcap"
  local rec, ok, err = capture(good, 5, rd, nil, nil, function(p) p.max_log = 1000 end)
  T.ok(ok, tostring(err and err.message or err))
  local log = T.read(rd .. "/rtt.log")
  T.ok(#log < 1000 + 200, #log .. " bytes")
  T.match(log, "\n%[odp: this log is capped at 1000 bytes; (%d+) bytes of later RTT lines were not written%]\n$")
  T.ok(rec.rtt.log_dropped > 0)
  T.eq(rec.latency_ms.n, 5, "samples read past the cap")
  T.ok(T.read(rec.artifacts.etdump) == fixture_etdump, "artifacts decoded past the cap")
  T.match(table.concat(rec.warnings, "\n"), "holds the first 1000 bytes of RTT lines %(its cap%)")
end)

T.test("the board dies mid-capture (ENODEV from the stream): what came is measured, then the error raised", function()
  local data = good:match("^(.-Inference: [^\n]*\nInference: [^\n]*\n)")
  local s = chunk_stream(data, 100)
  local read = s.read
  local served = 0
  s.read = function(self, n, opts)
    if served >= #data then return nil, "ENODEV: probe (qemu): the twin is gone", "ENODEV" end
    local c, e, code = read(self, n, opts)
    served = served + #(c or "")
    return c, e, code
  end
  local rec, ok, err = capture(nil, 5, dir .. "/dies", nil, nil, nil, s)
  err = failure(ok, err)
  T.eq({ err.code, err.exit }, { "ENODEV", 3 })
  T.match(err.message, "^run: RTT read: probe %(qemu%): the twin is gone %(capture ended after 2 Inference: lines, %d+ RTT bytes")
  T.eq(rec.latency_ms.n, 2)
  T.eq(rec.rtt.bytes, #data)
end)

T.test("fuzz: 300 seeded crafted RTT streams through capture + measure: only named errors, every count exact", function()
  local seed = tonumber(os.getenv("ODP_FUZZ_SEED") or "") or 4242
  math.randomseed(seed)
  local names = { "etdump.bin", "rtt.log", "result.json", "build.log", "flash.log", "samples.csv", "twin", "inputs",
    "../../etdump.bin", "a\0b.bin", ".hidden", "", "output.bin", "run_dir", "rtt_log" }
  local bad_values = { "1e38", "-1", "nan", "inf", "-inf", "1.2.3", "0x10", "1e999", "\0", "1\0", "..", "9e9999999" }
  local function bytes(n)
    local t = {}
    for i = 1, n do local c = math.random(0, 255) t[i] = c == 10 and "x" or string.char(c) end
    return table.concat(t)
  end
  local function digits(n)
    local t = {}
    for i = 1, n do t[i] = string.char(math.random(48, 57)) end
    return table.concat(t)
  end
  local reserved = {}
  for _, n in ipairs(E.RESERVED) do reserved[n] = true end
  for case = 1, 300 do
    local parts, valid, refused = {}, 0, 0
    for _ = 1, math.random(1, 25) do
      local r = math.random(9)
      local name = names[math.random(#names)]
      if r == 1 then valid = valid + 1 parts[#parts + 1] = ("Inference: %d.%03d ms\n"):format(math.random(0, 99), math.random(0, 999))
      elseif r == 2 then refused = refused + 1 parts[#parts + 1] = "Inference: " .. bad_values[math.random(#bad_values)] .. " ms\n"
      elseif r == 3 then parts[#parts + 1] = bytes(math.random(0, 300)) .. (math.random(2) == 1 and "\r\n" or "\n")
      elseif r == 4 then parts[#parts + 1] = "[base64] buffer size: " .. digits(math.random(1, 30)) .. "\n"
      elseif r == 5 then parts[#parts + 1] = run_this(name, bytes(math.random(0, 200)))
      elseif r == 6 then -- a block cut short, or corrupt
        local b = run_this(name, bytes(math.random(1, 200)))
        parts[#parts + 1] = math.random(2) == 1 and b:sub(1, math.random(#b - 1)) .. "\n" or b:gsub("echo \"(....)", "echo \"%1!!", 1)
      elseif r == 7 then
        parts[#parts + 1] = ("begin %s\n%s\nend\n"):format(name, sys.base64_encode(bytes(math.random(0, 100))))
      elseif r == 8 then parts[#parts + 1] = "[base64] buffer size: " .. math.random(0, 300) .. "\n"
      else parts[#parts + 1] = "I [executorch:arm_perf_monitor.cpp:233 StopMeasurements()] ethosu_pmu_cntr" ..
        digits(math.random(1, 25)) .. " : " .. digits(math.random(1, 25)) .. "\n"
      end
    end
    local data = table.concat(parts) .. "\n" .. DONE
    local rd = ("%s/fuzz/%d"):format(dir, case)
    local what = ("seed %d case %d"):format(seed, case)
    local p_reset = sys.now() - 1000 -- a run of 1000 s so far: no valid value is longer
    local rec, ok, err = capture(nil, 1000000, rd, 5, math.random(2) == 1,
      function(p) p.reset_at = p_reset end, chunk_stream(data, math.random(1, 3000)))
    if not ok and (type(err) ~= "table" or not (err.code == "ERUNNER" or err.code == "ETIMEDOUT")) then
      T.ok(false, what .. ": not a named error: " .. tostring(err and err.message or err))
      return
    end
    if rec.latency_ms.n ~= valid or rec.rtt.refused ~= refused or rec.rtt.bytes ~= #data then
      T.eq({ rec.latency_ms.n, rec.rtt.refused, rec.rtt.bytes }, { valid, refused, #data }, what)
      return
    end
    if not T.read(rd .. "/rtt.log"):match("^%d%d%d%d%-%d%d%-%d%dT") then
      T.ok(false, what .. ": rtt.log is not the raw log")
      return
    end
    for key, path in pairs(rec.artifacts) do
      if key ~= "rtt_log" and (path:sub(1, #rd + 1) ~= rd .. "/" or path:sub(#rd + 2):find("/")
        or reserved[path:sub(#rd + 2):lower()] or not sys.stat(path)) then
        T.ok(false, ("%s: artifact %s at %s"):format(what, key, path))
        return
      end
    end
  end
  local n = 0
  for _ in pairs(assert(sys.readdir(dir .. "/fuzz"))) do n = n + 1 end
  T.eq(n, 300, "nothing written beside the run directories")
end)

T.test("a silent board is said every silent_every seconds while the capture waits (issue 42)", function()
  local p = plan(5)
  p.silent_every = 0.3
  local said = {}
  local ui = { info = function(_, fmt, ...) said[#said + 1] = fmt:format(...) end }
  local cap = E.capture(chunk_stream(inference_lines(2), 997), p, { timeout = 2, settle = 0.2 }, nil, ui)
  T.eq(#cap.samples, 2)
  -- at least one line; never more than one per 0.3 s
  T.ok(#said >= 1 and #said <= 2 / 0.3 + 1, #said .. " lines: " .. table.concat(said, " | "))
  T.match(said[1] or "", "^run: 2 of 5 Inference: lines; the board has been silent for %d+ s %(%d+ s of %-%-timeout 2%)$")
end)

T.test("PMU numbers past what a 64-bit count holds, or not finite: dropped and named, the rest kept", function()
  local pre = "I [executorch:arm_perf_monitor.cpp:233 StopMeasurements()] "
  local out = inference_lines(5) .. pre .. "Inference runtime: 99999999999999999999999 CPU cycles total (1.5 per inference)\n" ..
    pre .. "ethosu_pmu_cycle_cntr : 1234\n" .. pre .. "ethosu_pmu_cntr0 : 99999999999999999999999\n" ..
    pre .. "ethosu_pmu_cntr1 : 77\n" .. DONE
  local rec, ok, err = capture(out, 5, dir .. "/pmu-absurd")
  T.ok(ok, tostring(err and err.message or err))
  T.eq({ rec.pmu.cpu_cycles_total, rec.pmu.cpu_cycles_per_inference, rec.pmu.npu_cycles }, { nil, 1.5, 1234 })
  T.eq({ rec.pmu.counters[1], rec.pmu.counters[2].count }, { nil, 77 })
  T.match(table.concat(rec.warnings, "\n"), "PMU values dropped, not whole numbers in range or not finite: " ..
    "cpu_cycles_total, ethosu_pmu_cntr0")
end)

T.done()
