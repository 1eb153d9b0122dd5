--- The ExecuTorch flow, its fetch step and CPU profile: the ETDump and samples the runner wrote on the board,
-- brought into the run directory; the samples joined with the ETDump (odp.results.cpu_profile).
local errors = require("odp.core.errors")
local sys = require("odp.sys")
local device = require("odp.target.device")
local shell = require("odp.target.shell")
local run = require("odp.run")

local M = {}

-- The fetch step: the ETDump the runner wrote on the board, brought here.
function M.step(ctx, rec, t)
  local o = ctx.opts
  -- The run's own copy, in its run directory (named in the record with its sha256): a later run writing the
  -- same --etdump cannot change what this record shows; --etdump gets a copy of it. Judged by this run's file
  -- only: an older file at --etdump must not pass for a new one.
  local own = ctx.run_dir .. "/etdump.etdp"
  local got, perr, pcode = t.target:fetch(t.etdump_remote, own)
  -- no file on the board is the runner's doing (warned about below); anything else is a transfer failure
  if not got and pcode ~= "ENOTFOUND" then errors.check(got, perr, pcode) end
  local size = got and (sys.stat(own) or {}).size
  if got and size == 0 then
    -- a full disk lets the runner create the file and write nothing (it does not fail for it)
    local dir = t.etdump_remote:match("^(.*)/[^/]*$")
    local why = shell.space_cause(t.target, dir, 1024 * 1024, "the runner's ETDump",
      "the runner wrote an empty file")
    rec.warnings[#rec.warnings + 1] = ("ETDump lost: %s"):format(errors.text(why))
  elseif got then
    t.etdump = run.artifact(ctx, rec, "etdump", own)
    if o.etdump and o.etdump ~= own then errors.check(sys.write_file(o.etdump, errors.check(sys.read_file(own)))) end
  else
    local killed = t.stopper and t.stopper.stop and t.stopper.stop.rule == "timeout"
    rec.warnings[#rec.warnings + 1] = killed and "no ETDump was written: --timeout killed the runner before its end"
      or "no ETDump was written (a runner built without the event tracer?)"
  end
  if t.sample_remote then
    local path = ctx.run_dir .. "/cpu_profile.samples"
    errors.check(t.target:fetch(t.sample_remote, path))
    t.samples = run.artifact(ctx, rec, "cpu_profile_samples", path)
  end
end

-- The last measured process's samples joined with its ETDump: rec.cpu_profile, cpu_profile.folded.
function M.profile(ctx, rec, t, doc)
  local prof = require("odp.results.cpu_profile") -- lazy: start-up
  local o = ctx.opts
  local bytes = errors.check(sys.read_file(t.samples))
  local p, err, code = prof.profile(bytes, doc, { runner = o.runner, runner_remote = t.runner_remote,
    symbols = o.symbols, local_modules = device.kind(ctx.target_kind).runs_in_place })
  if not p then
    rec.warnings[#rec.warnings + 1] = "cpu profile: " .. err
    return
  end
  rec.cpu_profile = p.record
  p.record.overhead = t.overhead or prof.overhead_not_measured()
  p.record.perf_harden = t.perf_harden
  for _, w in ipairs(p.warnings) do rec.warnings[#rec.warnings + 1] = w end
  if p.record.rate_hz and p.record.rate_hz < o.sample then
    rec.warnings[#rec.warnings + 1] = ("cpu profile: sampled at %d Hz, not %d: the board's " ..
      "kernel.perf_event_max_sample_rate (the kernel lowers it when its sampling interrupts take too long)")
      :format(p.record.rate_hz, o.sample)
  end
  local folded = ctx.run_dir .. "/cpu_profile.folded"
  errors.check(prof.write_folded(folded, p.folded))
  run.artifact(ctx, rec, "cpu_profile_folded", folded)
end

return M
