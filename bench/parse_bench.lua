--- Log parsing throughput: odp.parse.executorch over a generated 100 MB executor_runner log, against what a
-- user would otherwise run for the same extraction (grep -c for the iteration count, awk for the mean
-- iteration time and the executed/total line). Not a test: prints MB/s and ratios; record in bench/README.md.
--   build/odp run bench/parse_bench.lua [--mb 100] [--keep FILE]
local et = require("odp.parse.executorch")
local proc = require("odp.proc")

local mb, keep = 100, nil
do
  local i = 1
  while arg[i] do
    if arg[i] == "--mb" then mb = tonumber(arg[i + 1]); i = i + 2
    elseif arg[i] == "--keep" then keep = arg[i + 1]; i = i + 2
    else error("usage: parse_bench.lua [--mb N] [--keep FILE]") end
  end
end

--- A realistic executor_runner log: runs of 1000 iterations, each run with the CPU probes, load lines,
-- per-iteration lines (timestamped like a v1.3+ runner; every 4th run without timestamps like the vendor
-- build), debug input lines, the executed line, a 1000-element output tensor (summary format, elided and
-- wrapped over lines), and the ETDump line. Deterministic (seeded).
local function generate(target_bytes)
  math.randomseed(42)
  local parts, size, run = {}, 0, 0
  local function add(s) parts[#parts + 1] = s; size = size + #s end
  local clock = 0
  while size < target_bytes do
    run = run + 1
    local stamp = run % 4 ~= 0
    local function pre(lvl, file, line)
      clock = clock + 0.000004
      if not stamp then return ("%s executorch:%s:%d] "):format(lvl, file, line) end
      local h = clock // 3600
      local m = (clock % 3600) // 60
      local s = clock % 60
      return ("%s %02d:%02d:%09.6f executorch:%s:%d] "):format(lvl, h, m, s, file, line)
    end
    add(pre("I", "cpuinfo_utils.cpp", 87) .. "Failed to open midr file /sys/devices/soc0/image_version\n")
    add(pre("I", "cpuinfo_utils.cpp", 100) .. "Reading file /sys/devices/system/cpu/cpu0/regs/identification/midr_el1\n")
    add(pre("I", "executor_runner.cpp", 203) .. "Resetting threadpool with num threads = 4\n")
    add(pre("I", "executor_runner.cpp", 476) .. "Model file /data/local/tmp/models/mobilenet_v2_xnnpack_fp32.pte is loaded.\n")
    add(pre("I", "executor_runner.cpp", 486) .. "Using method forward\n")
    add(pre("I", "executor_runner.cpp", 556) .. "Setting up CPU planned buffer 0, size 9633856.\n")
    add(pre("I", "executor_runner.cpp", 624) .. ("Model loaded in %f ms.\n"):format(30 + math.random() * 5))
    local total = 0
    for i = 1, 1000 do
      if i % 50 == 0 then add(pre("D", "executor_runner.cpp", 740) .. "Inputs prepared.\n") end
      local ms = 42 + math.random() * 3
      total = total + ms
      add(pre("I", "executor_runner.cpp", 779) .. ("Iteration %d of 1000: %f ms\n"):format(i, ms))
    end
    add(pre("I", "executor_runner.cpp", 789) .. ("Model executed successfully 1000 time(s) in %f ms.\n"):format(total))
    add(pre("I", "executor_runner.cpp", 798) .. "1 outputs: \n")
    local vals = {}
    for i = 1, 200 do vals[i] = ("%g, "):format(math.random() * 2 - 1) end
    local lines = { "OutputX 0: tensor(sizes=[1, 1000], [" }
    for l = 0, 9 do lines[#lines + 1] = "  " .. table.concat(vals, "", l * 10 + 1, l * 10 + 10) end
    lines[#lines + 1] = "  ...,"
    for l = 10, 19 do lines[#lines + 1] = "  " .. table.concat(vals, "", l * 10 + 1, l * 10 + 10) end
    lines[#lines + 1] = "])\n"
    add(table.concat(lines, "\n"))
    add(pre("I", "executor_runner.cpp", 261) .. "ETDump written to file 'profile.etdump'.\n")
  end
  return table.concat(parts), run
end

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

-- CPU seconds (user+system), not wall time: the bench machine is shared, CPU time is what the parser costs.
local function time_it(fn, reps)
  local ts = {}
  for i = 1, reps do
    local t0 = os.clock()
    fn()
    ts[i] = os.clock() - t0
  end
  local first = ts[1]
  return median(ts), first
end

local text, runs = generate(mb * 1000 * 1000)
local bytes = #text
local MB = bytes / 1e6
local path = keep or os.tmpname()
do
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end
print(("log: %.1f MB, %d runs, %d lines"):format(MB, runs, select(2, text:gsub("\n", "\n"))))

local r
local t_odp, t_first = time_it(function() r = et.parse(text) end, 3)
assert(#r.iterations_ms == runs * 1000, "iteration count")
assert(r.internal_error == nil, r.internal_error)
print(("odp.parse.executorch   %7.3f s  %7.1f MB/s   (%d iterations, %d outputs, %d messages kept)"):format(
  t_odp, MB / t_odp, #r.iterations_ms, #r.outputs, #r.messages))
print(("  first of the 3 parses %7.3f s  %7.1f MB/s   (the heap still growing: page faults)"):format(t_first, MB / t_first))

--- A plain string.find line loop doing the same core extraction (the other design measured).
local function find_loop(s)
  local find, match, sub = string.find, string.match, string.sub
  local iters, total, n = {}, nil, nil
  local pos, len = 1, #s
  while pos <= len do
    local e = find(s, "\n", pos, true) or len + 1
    local line = sub(s, pos, e - 1)
    local ms = match(line, "%] Iteration %d+ of %d+: ([%d.]+) ms")
    if ms then
      iters[#iters + 1] = tonumber(ms)
    else
      local a, b = match(line, "%] Model executed successfully (%d+) time%(s%) in ([%d.]+) ms")
      if a then n, total = tonumber(a), tonumber(b) end
    end
    pos = e + 1
  end
  return iters, n, total
end
local fl
local t_find = time_it(function() fl = find_loop(text) end, 3)
assert(#fl == runs * 1000)
print(("string.find line loop  %7.3f s  %7.1f MB/s   (iterations and totals only)"):format(t_find, MB / t_find))

-- The tool's CPU seconds from wait4's rusage (a shell's includes the children it waited for).
local function shell(cmd)
  local r = assert(proc.run({ "sh", "-c", cmd, timeout = 600 }))
  assert(r.status == 0, cmd .. " failed")
  return r.rusage.utime_s + r.rusage.stime_s, r.stdout
end
local tools = {
  { "grep -c 'Iteration '", "grep -c 'Iteration ' " .. path },
  { "awk mean iteration", "awk '/Iteration [0-9]+ of/ {s += $(NF-1); n++} END {print n, s/n}' " .. path },
  { "LC_ALL=C awk mean", "LC_ALL=C awk '/Iteration [0-9]+ of/ {s += $(NF-1); n++} END {print n, s/n}' " .. path },
  { "grep+awk executed", "grep 'Model executed successfully' " .. path .. " | awk '{n += $(NF-4); t += $(NF-1)} END {print n, t}'" },
}
for _, t in ipairs(tools) do
  local ts, out = {}, nil
  for i = 1, 3 do ts[i], out = shell(t[2]) end
  local tt = median(ts)
  print(("%-22s %7.3f s  %7.1f MB/s   odp takes %.1fx its time   -> %s"):format(t[1], tt, MB / tt, t_odp / tt,
    (out:gsub("\n", " "))))
end
print(("odp parser vs string.find loop: %.2fx faster, and it extracts everything"):format(t_find / t_odp))
print(("goal >= 100 MB/s: %s"):format(MB / t_odp >= 100 and "met" or "NOT met"))
if not keep then os.remove(path) end
