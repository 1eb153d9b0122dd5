--- Probe boards' transport: the probe (J-Link DLL, a GDB server, the twin's QEMU) opened for a plan, the SWD
-- reset that clears stale RTT ids first, and RTT attached. The Ethos-U flow (lua/odp/flows/ethos_u/) and
-- run/board.lua (board:reset(), board:attach(), ...) both use these; `p` is the flow's plan
-- (odp.flows.ethos_u.plan: device, probe_backend, twin_state, rtt_address, rtt_ranges).
local errors = require("odp.core.errors")
local probe_mod = require("odp.probe")
local rtt_mod = require("odp.rtt")
local sys = require("odp.sys")

local M = {}

local function hex(n) return ("0x%08X"):format(n) end

--- The J-Link library odp.probe would load (opts.jlink_lib, ODP_JLINK_LIB, SEGGER's install dirs), or nil: the
-- one search, in C (odp.probe.jlink_lib), that `odp devices` uses too.
function M.jlink_lib(opts)
  return (probe_mod.jlink_lib(opts and opts.jlink_lib))
end

-- A file the twin's launcher wrote into its state directory (its ports, its shared memory).
local function twin_file(p, name)
  local v = sys.read_file(p.twin_state .. "/" .. name)
  if not v then
    errors.fail("ENODEV", ("no twin running in %s (no %s file): run the flash step first, or pass --twin-state")
      :format(p.twin_state, name))
  end
  return (v:gsub("%s+$", ""))
end

-- The twin's probe is one QMP (or gdbstub) client at a time: a second odp connecting to a busy twin waited 10 s
-- for a greeting that never came and said "timed out". Each odp holding a twin's probe holds an flock on a file in
-- its state directory (released when the probe is collected or odp ends; odp.sys.lock), so a second one is told
-- at once who holds it and since when. The same odp opening it again (flash, then run) goes on.
local held = setmetatable({}, { __mode = "k" }) -- probe -> its lock
local function hold_twin(p)
  if not (p.twin and p.twin_state) then return nil end
  local path = p.twin_state .. "/probe.lock"
  local lock, _, _, holder = sys.lock(path)
  if lock or holder == sys.getpid() then return lock end
  if not holder or holder == 0 then return nil end -- (no state directory yet: the probe's own open says so)
  local st = sys.stat(path)
  errors.fail("EBUSY", ("probe (%s): the twin in %s is in use by odp pid %d%s (a run or a REPL on it): wait " ..
    "for it to end, or stop it"):format(p.probe_backend, p.twin_state, holder,
    st and os.date(" since %Y-%m-%d %H:%M:%S", math.floor(st.mtime)) or ""))
end

--- Opens the probe for the flasher ("flasher") or the application core ("app"). opts: gdb_address, jlink_lib,
-- jlink_serial, jlink_ip (a lab file's board: which J-Link). A twin held by another odp: EBUSY at once, naming it.
function M.open(p, which, opts)
  local lock = hold_twin(p)
  local pr = p.device.probe or {}
  local args
  if p.probe_backend == "qemu" then
    args = { backend = "qemu", shm = twin_file(p, "shm"), base = pr.base or 0x60000000,
      qmp = "127.0.0.1:" .. twin_file(p, "qmp_port") }
  elseif p.probe_backend == "gdb" then
    args = { backend = "gdb", address = opts.gdb_address or ("127.0.0.1:" .. twin_file(p, "gdb_port")) }
  else
    args = { backend = "jlink", device = which == "flasher" and pr.flasher_jlink_device or pr.jlink_device,
      speed_khz = pr.speed_khz or 4000, lib = M.jlink_lib(opts),
      serial = opts.jlink_serial and tostring(opts.jlink_serial), ip = opts.jlink_ip }
    -- Each J-Link has a process of its own (odp.probe): a twin's test DLL is told there, and only there, which
    -- twin it drives, so two twin boards in one odp each reach their own. Real boards pass nothing.
    if p.twin and p.twin_state then args.env = { [p.twin.state_env or "ODP_TWIN_STATE"] = p.twin_state } end
  end
  local probe, err, code = probe_mod.open(args)
  if not probe then
    if lock then lock:release() end
    errors.fail(code or "ENODEV", ("probe (%s): %s"):format(p.probe_backend, errors.text(err)))
  end
  held[probe] = lock
  return probe
end

--- Closes a probe M.open opened, and lets go of its twin (the next odp may take it at once).
function M.close(probe)
  probe:close()
  local lock = held[probe]
  held[probe] = nil
  if lock then lock:release() end
end

-- Where the RTT block is looked for: the plan's fixed address, else the ranges given.
local function where(p, ranges) return p.rtt_address and { address = p.rtt_address } or { ranges = ranges } end

--- SWD reset with stale-block protection: halt, clear old RTT IDs (RAM survives a reset: the next attach must
-- find only the block the restarted firmware writes), reset and run. ui: debug lines. A failure names the board
-- and the operation (a hung probe said only "ETIMEDOUT: timed out").
function M.fresh_reset(probe, p, ranges, ui)
  local function check(what, ok, err, code)
    return errors.check(ok, err, code, ("%s: reset (%s)"):format(p.device.name, what))
  end
  check("halting the core", probe:halt())
  local n = check("clearing stale RTT ids", rtt_mod.clear_ids(probe, where(p, ranges)))
  if ui then ui:debug("reset: cleared %d stale RTT id(s)", n) end
  check("the SWD reset", probe:reset())
end

--- Attaches RTT (waiting up to timeout seconds for the block); what names the step in the error line.
function M.attach(probe, p, ranges, timeout, what)
  local rtt, err, code = rtt_mod.attach(probe, where(p, ranges), { timeout = timeout })
  if not rtt then
    local desc = {}
    for _, x in ipairs(ranges or {}) do desc[#desc + 1] = hex(x[1]) .. "+" .. hex(x[2]) end
    errors.fail(code == "ETIMEDOUT" and "ETIMEDOUT" or (code or "ENOTFOUND"),
      ("%s: no RTT control block within %.0f s after the SWD reset (searched %s): the image did not boot, " ..
       "or its RTT block is elsewhere (--rtt-address / --rtt-ranges) [%s]"):format(what, timeout,
       p.rtt_address and hex(p.rtt_address) or table.concat(desc, ","), errors.text(err)))
  end
  return rtt
end

return M
