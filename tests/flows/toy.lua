-- A tiny declared flow for sweep tests: a "latency" that is a known function of its options, so plots and
-- resumes can be checked exactly. --die-at N kills this odp process with SIGKILL while running point N; size 66
-- is a bug in the script (a nil indexed).
local sys = require("odp.sys")
local proc = require("odp.proc")

local state = { calls = 0 }

return {
  name = "toy",
  description = "Test flow: latency_ms.p50 = size * scale (ms), p10/p90 = -/+ 10%.",
  options = {
    { "size", "Problem size", nil, "int", required = true },
    { "scale", "Milliseconds per unit of size", 1.0, "number" },
    { "mode", "A string option", "fast", "choice", choices = { "fast", "slow" } },
    { "die-at", "SIGKILL this process when starting the Nth point run", 0, "int" },
    { "delay", "Seconds each point takes", 0, "number" },
  },
  validate = function(ctx)
    if ctx.opts.size < 0 then error("size must be >= 0") end
  end,
  run = function(ctx)
    local o = ctx.opts
    state.calls = state.calls + 1
    if o.die_at > 0 and state.calls == o.die_at then
      proc.run { "kill", "-KILL", tostring(sys.getpid()), timeout = 10 }
    end
    if o.delay > 0 then sys.sleep(o.delay) end
    if o.size == 13 then error({ code = "EIO", message = "unlucky size" }) end
    if o.size == 66 then local missing = nil; return missing.record end
    local p50 = o.size * o.scale * (o.mode == "slow" and 2 or 1)
    return { schema = "odp.result/1", ok = true, flow = "toy", params = { size = o.size, mode = o.mode },
      latency_ms = { n = 10, p10 = p50 * 0.9, p50 = p50, p90 = p50 * 1.1, mean = p50, min = p50 * 0.8,
        max = p50 * 1.2 } }
  end,
}
