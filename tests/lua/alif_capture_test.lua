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

-- as_board: the same output read as a real board's (no twin): its ETDump is then the model's own
local function capture(output, inferences, rundir, timeout, as_board)
  local p = plan(inferences)
  if as_board then p.twin = nil end
  sys.mkdir_p(rundir)
  local rec = { artifacts = { rtt_log = rundir .. "/rtt.log" }, warnings = {} }
  local o = { timeout = timeout or 10, settle = 0.2 }
  local cap = E.capture(chunk_stream(output, 997), p, o, rec.artifacts.rtt_log)
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

T.done()
