--- Where the runner runs and with how many threads: --cpus LIST, --cluster big|mid|little|all, --threads N for
-- the executorch flows (and --counters: which perf counters odp-rusage opens on it, odp.target.rusage). The CPUs and clusters come from the device's state (odp.target.device_state: clusters by
-- cpu_capacity, else cpuinfo_max_freq); pinning is odp-rusage's `--cpus` (sched_setaffinity before exec,
-- inherited by the runner's threads), so it works where taskset is absent.
local errors = require("odp.core.errors")
local ds = require("odp.target.device_state")

local M = {}

M.options = {
  { "cpus", "Run the runner on these CPUs only, e.g. 4-7 or 0,2 (pinned before exec)", nil, "string",
    metavar = "LIST" },
  { "cluster", "Run the runner on one CPU cluster (by cpu_capacity, else max frequency)", nil, "choice",
    choices = { "big", "mid", "little", "all" } },
  { "threads", "Pass the runner --cpu_threads N (runners whose --help lists it)", nil, "posint", metavar = "N" },
  { "counters", "perf counters of the runner: none, basic (software + cycles, instructions) or all", "basic",
    "choice", choices = { "none", "basic", "all" } },
}

--- The CPUs an option set selects on a device (snapshot from odp.target.device_state.gather):
-- -> cpus (ids) | nil (no placement asked), warning?; a usage mistake raises an EUSAGE failure (exit 2).
function M.select(opts, snap)
  if opts.cpus and opts.cluster then errors.fail("EUSAGE", "--cpus and --cluster: give one of them") end
  if not opts.cpus and not opts.cluster then return nil end
  -- the online list, else the processors /proc/cpuinfo lists (it shows online ones only)
  local online = snap and (snap.online or snap.cpuinfo_cpus)
  if not online then
    errors.fail("ENODEV", "CPU placement: the device's online CPUs cannot be read (/sys/devices/system/cpu/online, " ..
      "/proc/cpuinfo)")
  end
  if opts.cpus then
    local cpus, why = ds.cpulist(opts.cpus)
    if not cpus or #cpus == 0 then errors.fail("EUSAGE", ("--cpus %s: %s"):format(opts.cpus, why or "no CPU")) end
    local on, off = {}, {}
    for _, c in ipairs(online) do on[c] = true end
    for _, c in ipairs(cpus) do if not on[c] then off[#off + 1] = c end end
    if #off > 0 then
      errors.fail("EUSAGE", ("--cpus %s: CPU%s %s %s not online on this device (online: %s)"):format(opts.cpus,
        #off > 1 and "s" or "", ds.cpulist_format(off), #off > 1 and "are" or "is", ds.cpulist_format(online)))
    end
    return cpus
  end
  local clusters = ds.clusters(snap)
  if opts.cluster == "all" then return online end
  if #clusters <= 1 then
    return online, ("--cluster %s: all CPUs are one cluster (%s): running on all of them")
      :format(opts.cluster, ds.cpulist_format(online))
  end
  for _, g in ipairs(clusters) do
    if g.name == opts.cluster then return g.cpus end
  end
  local have = {}
  for i, g in ipairs(clusters) do have[i] = ("%s (%s)"):format(g.name, ds.cpulist_format(g.cpus)) end
  errors.fail("EUSAGE", ("--cluster %s: this device has no %s cluster: %s"):format(opts.cluster, opts.cluster,
    table.concat(have, ", ")))
end

--- Does this runner take --cpu_threads? Asked from its own --help on the target (gflags lists every flag).
local function runner_has_threads_flag(target, runner, cwd)
  local r = target:exec({ runner, "--help" }, { cwd = cwd, timeout = 30, rusage = false, capture_limit = 1 << 20 })
  return r ~= nil and ((r.stdout or "") .. (r.stderr or "")):find("cpu_threads", 1, true) ~= nil
end

--- For the executorch flow, once the runner is staged and before any runner process: resolves the options
-- against the device's state, records them in rec.params, appends --cpu_threads N to argv and sets
-- t.helper_args (odp-rusage's --cpus) and t.cpus_used. ctx.ui gets the warning of a one-cluster device.
function M.apply(ctx, t, rec, argv)
  local o = ctx.opts
  local cpus, warning = M.select(o, t.state)
  if warning then ctx.ui:warn("%s", warning) end
  if cpus then
    local list = ds.cpulist_format(cpus)
    t.helper_args, t.cpus_used = { "--cpus", list }, cpus
    rec.params.cpus, rec.params.cluster = list, o.cluster
  end
  if o.threads then
    if not runner_has_threads_flag(t.target, argv[1], t.workdir) then
      errors.fail("EUSAGE", ("--threads %d: this runner has no --cpu_threads flag (its --help does not list it); " ..
        "drop --threads, or use a runner built with a threadpool (XNNPACK / optimized kernels)"):format(o.threads))
    end
    table.move({ "--cpu_threads", tostring(o.threads) }, 1, 2, #argv + 1, argv)
    rec.params.threads = o.threads
  end
end

return M
