--- The Ethos-U flow, part 4: the flash step (SETOOLS + XMODEM over RTT; the probe: odp.target.probe). Takes
-- the plan (odp.flows.ethos_u.plan); its SETOOLS commands run through odp.target.host.run_logged.
local errors = require("odp.core.errors")
local sys = require("odp.sys")
local proc = require("odp.proc")
local host = require("odp.target.host")
local probe_target = require("odp.target.probe")
local rtt_log = require("odp.target.rtt_log")
local xmodem = require("odp.xmodem")

local M = {}

local function basename(p) return (p:match("([^/]+)$")) end


local function copy_file(src, dst)
  local data = sys.read_file(src)
  if not data then errors.fail("ENOTFOUND", ("cannot read %s"):format(src)) end
  local ok, err = sys.write_file(dst, data)
  if not ok then errors.fail("EIO", ("cannot write %s: %s"):format(dst, tostring(err))) end
end

-- The twin's QEMU ends with odp (its lifeline, docs/signals.md) unless it is to outlive this run: --keep-twin,
-- or a board opened with keep (which says so in twin_lifeline).
local function twin_lifeline(o)
  if o.twin_lifeline ~= nil then return o.twin_lifeline end
  return not o.keep_twin
end

local function setools_cmd(ctx, p, c, log)
  local env, lifeline = {}, nil
  if p.twin then
    env[(p.twin.state_env or "ODP_TWIN_STATE")] = p.twin_state
    -- the SETOOLS stand-in relaunches the twin: it hands this descriptor on to launch.sh -l
    if twin_lifeline(ctx.opts) then lifeline, env.ODP_TWIN_LIFELINE = 3, "3" end
  end
  c = { name = c.name, argv = c.argv, cwd = c.cwd, env = env, lifeline = lifeline }
  ctx.ui:info("flash: %s", table.concat(c.argv, " "):gsub("^%S*/", ""))
  local r = host.run_logged(c, log, ctx.opts.flash_timeout)
  if not r.ok then
    errors.fail("EIO", ("flash: %s failed (%s); output in %s:\n%s"):format(basename(c.argv[1]),
      r.timed_out and "timed out" or ("exit " .. tostring(r.status)), log, host.tail_lines(log, 10)))
  end
end

-- Sends file to the flasher over RTT and checks its answer.
local function xmodem_file(ctx, p, rec, rtt, rlog, file)
  local o, ui = ctx.opts, ctx.ui
  local ch = rtt:channel(p.rtt_channel)
  local rd = rtt_log.reader(ch, rlog, p.max_line, p.max_log)
  local t0 = sys.now()
  local deadline, said = t0 + o.flash_timeout, t0
  local started = false
  while sys.now() < deadline do
    local line = rd:line(math.min(1, deadline - sys.now()))
    if line and line:find(p.lines.flasher_start, 1, true) then started = true break end
    -- a board silent after the flash is said every p.silent_every seconds, not only at --flash-timeout
    if line then said = sys.now()
    elseif sys.now() - said >= p.silent_every then
      said = sys.now()
      ui:info("flash: waiting for the flasher's '%s': %.0f s of --flash-timeout %.0f, %s", p.lines.flasher_start,
        said - t0, o.flash_timeout, rd.bytes > 0 and ("silent since its last line (" .. rd.bytes .. " RTT bytes)")
        or "nothing on RTT yet")
    end
    if line and line:find(p.lines.flasher_fail) then
      rd:close()
      errors.fail("EPROTO", ("flash: the flasher failed before the transfer: %s"):format(line))
    end
  end
  if not started then
    rd:close()
    errors.fail("ETIMEDOUT", ("flash: the flasher never said '%s' nor sent 'C' within %.0f s: check the flasher " ..
      "image (--flasher) and the RTT ranges (--rtt-ranges); raw RTT log in %s"):format(p.lines.flasher_start,
      o.flash_timeout, rlog))
  end
  rd:give_back()
  local size = sys.stat(file).size
  local bar = ui:progress("xmodem " .. basename(file), size, "bytes")
  local t0 = sys.now()
  local r, err, code = xmodem.send(ch, file, { mode = p.xmodem_mode, timeout = o.flash_timeout,
    on_progress = function(pr) bar:update(pr.bytes) end }) -- xmodem passes {bytes=, total=, ...}
  bar:finish()
  rec.flash.xmodem = r and { bytes = r.bytes, blocks = r.blocks, retries = r.retries, wall_s = sys.now() - t0 } or nil
  -- whatever the flasher says next (Success/CRC32 or Failed = n)
  local ok_n, crc, fail_line
  local answer_deadline = sys.now() + math.min(o.flash_timeout, 10)
  while sys.now() < answer_deadline and not fail_line and not (ok_n and crc) do
    local line = rd:line(math.max(0.05, answer_deadline - sys.now()))
    if not line then break end
    ok_n = ok_n or line:match(p.lines.flasher_ok)
    crc = crc or line:match(p.lines.flasher_crc)
    if line:find(p.lines.flasher_fail) then fail_line = line end
    if ok_n and not p.device.twin and not crc then
      -- Alif's flasher prints no CRC: give it a moment, then go on with the byte count alone
      local l2 = rd:line(0.5)
      crc = l2 and l2:match(p.lines.flasher_crc)
      break
    end
  end
  rd:close()
  if not r then
    errors.fail(code == "ETIMEDOUT" and "ETIMEDOUT" or "EPROTO", ("flash: XMODEM transfer of %s aborted: %s%s; raw RTT " ..
      "log in %s"):format(basename(file), errors.text(err),
      fail_line and (" (flasher: " .. fail_line .. ")") or "", rlog))
  end
  if fail_line then errors.fail("EPROTO", ("flash: the flasher reported '%s' after the transfer"):format(fail_line)) end
  if not ok_n then
    errors.fail("EPROTO", ("flash: the flasher never confirmed the transfer ('%s'); raw RTT log in %s")
      :format(p.lines.flasher_ok, rlog))
  end
  local n = tonumber(ok_n)
  if n < size or n >= size + 1024 then
    errors.fail("EPROTO", ("flash: the flasher received %d bytes for a %d-byte file"):format(n, size))
  end
  local data = sys.read_file(file) .. ("\26"):rep(n - size)
  local want = ("%08x"):format(sys.crc32(data)) -- zlib's, as the flasher prints it
  rec.flash.received = { bytes = n, crc32 = crc and crc:lower(), expected_crc32 = want }
  if crc then
    if crc:lower() ~= want then
      errors.fail("ECRC", ("flash: the flasher's CRC32 %s differs from %s's %s (with padding to %d bytes)")
        :format(crc:lower(), basename(file), want, n))
    end
    ui:info("flash: %s received, %d bytes, CRC32 %s ok", basename(file), n, want)
  else
    ui:warn("the flasher printed no CRC32: only the byte count (%d) was checked", n)
  end
end

--- Flashes the flasher image, then sends `file` to it over XMODEM through RTT and checks its answer
-- (rec.flash.received = {bytes, crc32, expected_crc32}). board:flash(file) is this alone (--flash-file).
-- Returns the SETOOLS directory the commands ran in and the flash log.
function M.file(ctx, p, rec, run_dir, file)
  local o = ctx.opts
  local log = run_dir .. "/flash.log"
  rec.flash = rec.flash or {}
  rec.artifacts.flash_log = log
  -- SETOOLS directory: the stand-ins run from a scratch copy of their configs
  if p.setools_copy then
    local dst = run_dir .. "/setools"
    assert(sys.mkdir_p(dst .. "/build/images"))
    local r = proc.run { argv = { "cp", "-R", p.setools_bin .. "/build/config", dst .. "/build/" }, timeout = 30 }
    if not r or not r.ok then errors.fail("EIO", "cannot copy the SETOOLS configs to " .. dst) end
  end
  local sdir = p.gen_toc_flasher.cwd
  for _, c in ipairs({ p.gen_toc_flasher, p.write_mram_flasher, p.gen_toc_app, p.write_mram_app }) do
    if c.cwd then c.cwd = c.cwd:gsub("<run_dir>", run_dir) end
    for i, a in ipairs(c.argv) do c.argv[i] = a:gsub("<run_dir>", run_dir) end
  end
  sdir = p.gen_toc_flasher.cwd or "."
  -- (1) the flasher
  if not p.flasher or not sys.stat(p.flasher) then
    errors.fail("ENOTFOUND", ("flash: the flasher image %s does not exist (--flasher)"):format(p.flasher or "?"))
  end
  copy_file(p.flasher, sdir .. "/" .. p.flasher_image)
  setools_cmd(ctx, p, p.gen_toc_flasher, log)
  setools_cmd(ctx, p, p.write_mram_flasher, log)
  -- (2) ext_flash.bin over XMODEM to the flasher, through RTT
  local probe = probe_target.open(p, "flasher", o)
  local ok, err = pcall(function()
    probe_target.fresh_reset(probe, p, p.flasher_ranges, ctx.ui)
    local rtt = probe_target.attach(probe, p, p.flasher_ranges, math.min(o.flash_timeout, 30), "flash (flasher)")
    local ok2, e2 = pcall(xmodem_file, ctx, p, rec, rtt, run_dir .. "/flasher_rtt.log", file)
    rtt:close()
    if not ok2 then error(e2, 0) end
  end)
  probe_target.close(probe)
  rec.artifacts.flasher_rtt_log = run_dir .. "/flasher_rtt.log"
  if not ok then error(err, 0) end
  return sdir, log
end

--- The flash step: the flasher image, ext_flash.bin over XMODEM (M.file), then the firmware (mram.bin) through
-- SETOOLS; the SWD reset that boots it is the run step's first act. With opts.flash_file (board:flash(file)):
-- that file in place of ext_flash.bin, and no firmware.
function M.step(ctx, p, rec, run_dir)
  if ctx.opts.flash_file then
    M.file(ctx, p, rec, run_dir, ctx.opts.flash_file)
    return
  end
  local sdir, log = M.file(ctx, p, rec, run_dir, p.ext_flash)
  -- (3) the firmware
  copy_file(p.mram, sdir .. "/" .. p.app_image)
  setools_cmd(ctx, p, p.gen_toc_app, log)
  setools_cmd(ctx, p, p.write_mram_app, log)
  p.flashed = true -- (4) the SWD reset happens at the start of the run step, right before attaching
end


return M
