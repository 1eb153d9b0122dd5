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

--- Reads RTT lines from `stream` (anything with read(n, {timeout=}) and unread) until p.inferences
-- `Inference:` lines and opts.settle seconds of quiet, the device's done line, or opts.timeout. Decodes artifact
-- blocks on the way. Returns {samples, lines, decoded = {artifacts, errors}, bytes}.
function M.capture(stream, p, opts, log_path, ui)
  local rd = rtt_log.reader(stream, log_path, p.max_line)
  local lines, samples = {}, {}
  local dec = artifacts.decoder { forms = p.device.artifact_forms }
  local deadline = sys.now() + opts.timeout
  local last_line = sys.now()
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
        local ms = line:match(p.lines.inference)
        if ms then
          samples[#samples + 1] = tonumber(ms)
          if #samples == p.inferences and ui then ui:info("run: %d Inference: lines", #samples) end
        end
        if done_pat and line:find(done_pat) then break end
      end
    end
  end)
  rd:close()
  if not ok then error(err, 0) end
  return { samples = samples, lines = lines, decoded = dec:finish(), bytes = rd.bytes }
end

--- The latency block: odp.results.result.latency (odp.core.stats' field names) over the Inference: lines.
function M.latency(samples) return result.latency(samples, "rtt") end

--- Fills the record from a capture; raises the failure (after filling) when the capture is incomplete.
function M.measure(rec, p, cap, run_dir, opts, ui)
  local rlog = rec.artifacts.rtt_log or "rtt.log"
  rec.rtt = { lines = #cap.lines, bytes = cap.bytes, log = rec.artifacts.rtt_log }
  for _, a in ipairs(cap.decoded.artifacts) do
    local name = artifacts.safe_name(a.name)
    local path = run_dir .. "/" .. name
    errors.check(sys.write_file(path, a.data))
    rec.artifacts[(name:gsub("%.bin$", ""):gsub("[^%w_]", "_"))] = path
    if ui then ui:info("run: %s (%d bytes)", path, a.bytes) end
  end
  local samples = cap.samples
  rec.latency_ms = #samples > 0 and M.latency(samples) or { n = 0, source = "rtt" }
  -- the twin's times come from modelled cycles and its ETDump is canned: never to be taken for a measurement
  if p.twin then rec.latency_ms.modelled = true end
  rec.pmu = executorch.parse(table.concat(cap.lines, "\n")).pmu
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
  if #cap.decoded.errors > 0 then
    local e = cap.decoded.errors[1]
    errors.fail("ERUNNER", ("run: artifact %s (%s block): %s; raw RTT log in %s"):format(e.name, e.form, e.message, rlog))
  end
  if #samples < p.inferences then
    local silent = #samples == 0 and cap.bytes == 0
    errors.fail(silent and "ETIMEDOUT" or "ERUNNER",
      ("run: %d of %d Inference: lines within %.0f s (%d RTT bytes)%s; raw RTT log in %s")
        :format(#samples, p.inferences, opts.timeout, cap.bytes,
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
    if not o.no_reset or p.flashed then probe_target.fresh_reset(probe, p, p.rtt_ranges, ctx.ui) end
    local rtt = probe_target.attach(probe, p, p.rtt_ranges, math.min(o.timeout, 30), "run")
    local ok2, e2 = pcall(function() cap = M.capture(rtt:channel(p.rtt_channel), p, o, rlog, ctx.ui) end)
    rtt:close()
    if not ok2 then error(e2, 0) end
  end)
  probe:close()
  if not ok then error(err, 0) end
  M.measure(rec, p, cap, run_dir, o, ctx.ui)
end


return M
