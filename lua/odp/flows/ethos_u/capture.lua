--- The Ethos-U flow, part 5: the run step: RTT capture (Inference: lines, base64 artifacts) and the
-- measurements. Takes the plan (odp.flows.ethos_u.plan); capture reads any stream.
local errors = require("odp.core.errors")
local result = require("odp.results.result")
local sys = require("odp.sys")
local json = require("odp.core.json")
local artifacts = require("odp.parse.artifacts")
local probe_target = require("odp.target.probe")
local etdump = require("odp.parse.etdump")
local executorch = require("odp.parse.executorch")
local rtt_log = require("odp.target.rtt_log")

local M = {}

-- An `Inference:` value as the firmware printed it -> ms, or nil and why it is refused. Device text is untrusted:
-- only a plain decimal number (no hex, inf or nan) that is finite, not negative and not longer than the run so
-- far (run_ms, when odp started the run) is a sample.
local function inference_ms(text, run_ms)
  local v = text:match("^[-+]?[%d.]+$") and tonumber(text) or (text:match("^[-+]?[%d.]+[eE][-+]?%d+$") and tonumber(text))
  if not v then return nil, "not a number" end
  if v ~= v or v == math.huge then return nil, "not finite" end
  if v < 0 then return nil, "negative" end
  if run_ms and v > run_ms then return nil, ("longer than the run so far (%.0f ms)"):format(run_ms) end
  return v
end
M.inference_ms = inference_ms

--- Reads RTT lines from `stream` (anything with read(n, {timeout=}) and unread) until p.inferences
-- `Inference:` lines and opts.settle seconds of quiet, the device's done line, or opts.timeout. Decodes artifact
-- blocks on the way. Returns {samples, refused = {{line, text, why}}, lines, decoded = {artifacts, errors}, bytes,
-- log_dropped, error}: a stream error or an interrupt ends the capture and is its `error` (what came before it
-- is kept: measure fills the record from it, then raises the error). p.reset_at (sys.now() of the reset odp
-- made) bounds an Inference: value by the run's length.
function M.capture(stream, p, opts, log_path, ui)
  local rd = rtt_log.reader(stream, log_path, p.max_line, p.max_log)
  local lines, samples, refused = {}, {}, {}
  local dec = artifacts.decoder { forms = p.device.artifact_forms }
  local t0 = sys.now()
  local deadline = t0 + opts.timeout
  local last_line, said = t0, t0
  local done_pat = p.lines.done
  local ok, err = pcall(function()
    while true do
      local now = sys.now()
      if now >= deadline then break end
      if #samples >= p.inferences and not dec.block and now - last_line >= opts.settle then break end
      local line = rd:line(math.min(0.25, deadline - now))
      if line then
        last_line = sys.now()
        lines[#lines + 1] = #line <= 4096 and line or line:sub(1, 4096)
        dec:line(line)
        local text = line:match(p.lines.inference)
        if text then
          local ms, why = inference_ms(text, p.reset_at and (last_line - p.reset_at) * 1000)
          if ms then
            samples[#samples + 1] = ms
            if #samples == p.inferences and ui then ui:info("run: %d Inference: lines", #samples) end
          else
            refused[#refused + 1] = { line = #lines, text = text:sub(1, 40), why = why }
          end
        end
        if done_pat and line:find(done_pat) then break end
      elseif ui and sys.now() - math.max(last_line, said) >= p.silent_every then
        said = sys.now() -- a silent board is said every p.silent_every seconds, not only at --timeout
        ui:info("run: %d of %d Inference: lines; the board has been silent for %.0f s (%.0f s of --timeout %.0f)",
          #samples, p.inferences, said - last_line, said - t0, opts.timeout)
      end
    end
  end)
  rd:close()
  return { samples = samples, refused = refused, lines = lines, decoded = dec:finish(), bytes = rd.bytes,
    log_dropped = rd.dropped, log_cap = p.max_log, error = not ok and err or nil }
end

-- The PMU report's numbers are device text too: a count that is not a whole number a 64-bit integer holds (the
-- parser reads 99999999999999999999999 as 1e23), a rate or ratio that is negative or not finite, is dropped and
-- named. -> the names dropped
local function plausible_pmu(pmu)
  local dropped = {}
  local function ok(k, v)
    if type(v) ~= "number" then return true end
    local whole = not (k:match("_per_inference$") or k:match("_pct$"))
    return v == v and v >= 0 and v < math.huge and (not whole or math.type(v) == "integer")
  end
  for k, v in pairs(pmu) do
    if not ok(k, v) then pmu[k] = nil dropped[#dropped + 1] = k end
  end
  for i, c in pairs(pmu.counters or {}) do
    if not (ok("count", c.count) and ok("per_inference", c.per_inference)) then
      pmu.counters[i] = nil
      dropped[#dropped + 1] = "ethosu_pmu_cntr" .. tostring(c.index)
    end
  end
  table.sort(dropped)
  return dropped
end

--- The latency block: odp.results.result.latency (odp.core.stats' field names) over the Inference: lines.
function M.latency(samples) return result.latency(samples, "rtt") end

-- File names odp itself writes in a run directory (and the directories it makes there): an artifact never
-- takes one (a block named rtt.log overwrote the raw log).
M.RESERVED = { "build.log", "flash.log", "flasher_rtt.log", "rtt.log", "result.json", "samples.csv", "memory.csv",
  "report.html", "cpu_profile.folded", "cpu_profile.samples", "etdump.etdp", "inputs", "outputs", "setools", "twin" }
local reserved = {}
for _, n in ipairs(M.RESERVED) do reserved[n] = true end

local function artifact_key(name) return (name:gsub("%.bin$", ""):gsub("[^%w_]", "_")) end

-- Where an artifact goes: its safe name, unless odp owns that name ("device-" in front) or an earlier artifact
-- (or anything) took it (-2, -3, ... before the extension; the record key likewise). Returns name, key, why.
local function artifact_place(rec, run_dir, name)
  local why
  if reserved[name:lower()] then name, why = "device-" .. name, "the name of one of odp's own files" end
  local stem, ext = name:match("^(.-)(%.[^.]*)$")
  if not stem or stem == "" then stem, ext = name, "" end
  local cand, k = name, 1
  while sys.stat(run_dir .. "/" .. cand) or rec.artifacts[artifact_key(cand)] ~= nil do
    k = k + 1
    cand = ("%s-%d%s"):format(stem, k, ext)
    why = why or "a second artifact of that name (both kept)"
  end
  return cand, artifact_key(cand), why
end

--- Fills the record from a capture, complete or not (a capture an error ended is measured too); then raises:
-- the error that ended the capture, else the first artifact error, else too few Inference: lines.
function M.measure(rec, p, cap, run_dir, opts, ui)
  local rlog = rec.artifacts.rtt_log or "rtt.log"
  local function warn(fmt, ...)
    local msg = fmt:format(...)
    rec.warnings[#rec.warnings + 1] = msg
    if ui then ui:warn("%s", msg) end
  end
  rec.rtt = { lines = #cap.lines, bytes = cap.bytes, log = rec.artifacts.rtt_log, refused = #cap.refused }
  if cap.log_dropped and cap.log_dropped > 0 then
    rec.rtt.log_dropped = cap.log_dropped
    warn("run: %s holds the first %d bytes of RTT lines (its cap); %d more bytes were read and not logged",
      rlog, cap.log_cap, cap.log_dropped)
  end
  for _, a in ipairs(cap.decoded.artifacts) do
    local name, key, why = artifact_place(rec, run_dir, artifacts.safe_name(a.name))
    local path = run_dir .. "/" .. name
    errors.check(sys.write_file(path, a.data))
    rec.artifacts[key] = path
    if why then warn("run: the firmware's artifact %q is kept as %s: %s", a.name:sub(1, 60), name, why) end
    if ui then ui:info("run: %s (%d bytes)", path, a.bytes) end
  end
  if #cap.refused > 0 then
    local shown = {}
    for i = 1, math.min(3, #cap.refused) do
      local r = cap.refused[i]
      shown[i] = ("line %d %q: %s"):format(r.line, r.text, r.why)
    end
    warn("run: %d Inference: line(s) refused, not taken as samples (%s%s)", #cap.refused, table.concat(shown, "; "),
      #cap.refused > 3 and "; ..." or "")
  end
  local samples = cap.samples
  if #samples > p.inferences then
    rec.rtt.extra = #samples - p.inferences
    warn("run: the firmware printed %d Inference: lines for --inferences %d (all kept): does it run the count asked?",
      #samples, p.inferences)
  end
  rec.latency_ms = #samples > 0 and M.latency(samples) or { n = 0, source = "rtt" }
  -- the twin's times come from modelled cycles and its ETDump is canned: never to be taken for a measurement
  if p.twin then rec.latency_ms.modelled = true end
  rec.pmu = executorch.parse(table.concat(cap.lines, "\n")).pmu
  local implausible = rec.pmu and plausible_pmu(rec.pmu) or {}
  if #implausible > 0 then
    warn("run: PMU values dropped, not whole numbers in range or not finite: %s", table.concat(implausible, ", "))
  end
  if rec.artifacts.etdump and p.twin then
    -- the twin's firmware sends one canned ETDump whatever model it runs (another CNN's operators, nothing
    -- delegated): kept as the file it sent, never shown as this model's operators
    rec.warnings[#rec.warnings + 1] = ("the QEMU twin's ETDump is canned, not this model's (its firmware sends the " ..
      "same file for every model): %s is kept, its operators are not shown"):format(rec.artifacts.etdump)
  elseif rec.artifacts.etdump then
    local doc, derr = etdump.read(rec.artifacts.etdump)
    if doc then
      local rows, unit = etdump.ops(doc, { time_scale = "cycles" })
      rec.ops = json.array(rows)
      rec.ops_unit = unit
      rec.ops_summary = etdump.ops_summary(doc, { time_scale = "cycles" })
    elseif ui then
      ui:warn("ETDump %s: %s", rec.artifacts.etdump, tostring(derr))
    end
  end
  -- failures after the measurements are in the record
  if cap.error then
    local e = cap.error
    if type(e) == "table" and e.code then -- the failure itself (its code, exit and any field kept), said in full
      e.message = ("run: %s (capture ended after %d Inference: lines, %d RTT bytes; kept in the record; raw RTT " ..
        "log in %s)"):format(e.message, #samples, cap.bytes, rlog)
    end
    error(e, 0) -- (anything else is a bug: raised as it came, the record filled first)
  end
  if #cap.decoded.errors > 0 then
    local e = cap.decoded.errors[1]
    errors.fail("ERUNNER", ("run: artifact %s (%s block): %s; raw RTT log in %s"):format(e.name, e.form, e.message, rlog))
  end
  if #samples < p.inferences then
    local silent = #samples == 0 and cap.bytes == 0 and #cap.refused == 0
    errors.fail(silent and "ETIMEDOUT" or "ERUNNER",
      ("run: %d of %d Inference: lines within %.0f s (%d RTT bytes)%s%s; raw RTT log in %s")
        :format(#samples, p.inferences, opts.timeout, cap.bytes,
          #cap.refused > 0 and (", %d more refused"):format(#cap.refused) or "",
          silent and ": the firmware printed nothing (no SWD reset? RTT in cached RAM?)" or "", rlog))
  end
end

--- The run step: SWD reset (unless --no-reset on a board this run did not flash), RTT attached, the capture,
-- the measurements into rec.
function M.step(ctx, p, rec, run_dir)
  local o = ctx.opts
  local rlog = run_dir .. "/rtt.log"
  rec.artifacts.rtt_log = rlog
  local probe = probe_target.open(p, "app", o)
  local cap
  local ok, err = pcall(function()
    if not o.no_reset or p.flashed then
      p.reset_at = sys.now()
      probe_target.fresh_reset(probe, p, p.rtt_ranges, ctx.ui)
    end
    local rtt = probe_target.attach(probe, p, p.rtt_ranges, math.min(o.timeout, 30), "run")
    -- (a stream error or an interrupt ends the capture as its cap.error: what came before it is measured)
    local ok2, e2 = pcall(function() cap = M.capture(rtt:channel(p.rtt_channel), p, o, rlog, ctx.ui) end)
    rtt:close()
    if not ok2 then error(e2, 0) end
  end)
  probe_target.close(probe)
  if not ok then error(err, 0) end
  M.measure(rec, p, cap, run_dir, o, ctx.ui)
end


return M
