--- A CPU sampling profile joined with ETDump: which op (or delegate call) each sample of `Method::execute` fell
-- in, and which functions inside it took the time. The samples come from odp-rusage --sample (a sample stream,
-- docs/cpu-profile.md, "The sample stream", read in C: odp.sample); the join and the folding into call stacks are C too (the
-- join must take 1,000,000 samples against a 100,000-event ETDump in well under a second: bench/README.md).
--   local prof = require("odp.results.cpu_profile")
--   local p = prof.profile(stream_bytes, etdump_doc, {runner = "./executor_runner", runner_remote = "/data/x/executor_runner"})
--   -- p.record: the record's cpu_profile; p.folded: Brendan Gregg's folded lines (op as the root frame)
--
-- The clocks (docs/cpu-profile.md, "The clocks"): the samples are CLOCK_MONOTONIC ns (perf's use_clockid);
-- ExecuTorch's posix PAL counts ns of the same clock since its et_pal_init, an origin it never writes down.
-- Its log lines carry that count ("I 00:00:01.234567 ..."), and the helper timestamps each line as it reads it:
-- a line is read after it was written, so read time - logged time >= the origin, and the smallest difference
-- over all lines is the origin within the quickest line's delivery (plus the log's 1 us truncation).
local sample = require("odp.sample")
local elf = require("odp.elf")
local sys = require("odp.sys")
local etdump = require("odp.parse.etdump")
local stats = require("odp.core.stats")

local M = {}

M.DEFAULT_HZ = 4000
M.ROOT_BETWEEN = "[between ops]"
M.ROOT_OUTSIDE = "[outside execute]"
M.TOP = 5 -- functions kept per op in the record
-- the frame of the samples made for time a thread was runnable but not running (src/sample/sample.h)
M.PREEMPTED = "[preempted]"

--- The origin of the program's ExecuTorch clock on CLOCK_MONOTONIC from the stream's line records.
-- -> {method = "log-lines", offset_ns, lines = n} | nil, why
function M.align(lines)
  local best, n
  n = 0
  for _, l in ipairs(lines) do
    local h, m, s, us = l.text:match("^[DIWEF] (%d%d+):(%d%d):(%d%d)%.(%d%d%d%d%d%d) ")
    if h then
      local ticks = ((tonumber(h) * 3600 + tonumber(m) * 60 + tonumber(s)) * 1000000 + tonumber(us)) * 1000
      local off = l.time - math.tointeger(ticks)
      if not best or off < best then best = off end
      n = n + 1
    end
  end
  if not best then
    return nil, "the runner printed no ExecuTorch log lines (I 00:00:00.000000 ...) to place its ETDump clock " ..
      "on the samples' (a runner built without EXECUTORCH_ENABLE_LOGGING?)"
  end
  return { method = "log-lines", offset_ns = best, lines = n }
end

-- The op a profile event counts for, named as the op table names it (odp.parse.etdump.ops): by its delegate id
-- when it has one, else its name.
local function op_name(e)
  local did = e.delegate_debug_id_int
  if did and did ~= -1 then return tostring(did) end
  if e.delegate_debug_id_str and e.delegate_debug_id_str ~= "" then return e.delegate_debug_id_str end
  return e.name or ""
end

--- ETDump's intervals: `Method::execute` events, and the ops inside them (every profile event of an
-- instruction, chain_index >= 0, but the framework's OPERATOR_CALL wrappers). -> {ops = {start, stop, id},
-- execs = {start, stop}, names = {{name, instruction_id, ticks}}, execute_ticks}
function M.intervals(doc)
  local ops = { start = {}, stop = {}, id = {} }
  local execs = { start = {}, stop = {} }
  local names, index, exec_ticks = {}, {}, 0
  for _, run in ipairs(doc.run_data or {}) do
    for _, e in ipairs(run.events or {}) do
      if e.kind == "profile" and e.start_time and e.end_time and e.end_time > e.start_time then
        if e.name == "Method::execute" then
          execs.start[#execs.start + 1], execs.stop[#execs.stop + 1] = e.start_time, e.end_time
          exec_ticks = exec_ticks + (e.end_time - e.start_time)
        elseif (e.chain_index or -1) >= 0 and not etdump.FRAMEWORK_EVENTS[e.name] then
          local name = op_name(e)
          local key = name .. "\0" .. tostring(e.instruction_id)
          local id = index[key]
          if not id then
            id = #names + 1
            index[key] = id
            names[id] = { name = name, instruction_id = e.instruction_id, ticks = 0 }
          end
          names[id].ticks = names[id].ticks + (e.end_time - e.start_time)
          local k = #ops.start + 1
          ops.start[k], ops.stop[k], ops.id[k] = e.start_time, e.end_time, id
        end
      end
    end
  end
  return { ops = ops, execs = execs, names = names, execute_ticks = exec_ticks }
end

local function basename(p) return (p:match("([^/]+)$")) or p end

--- A function naming a frame: (addr, leaf) -> "symbol" | "module+0xoffset" | "[kernel]" | "[unknown]" (nil for a
-- caller frame in no module: a frame-pointer chain through code built without frame pointers reads garbage).
-- Without a symbol, the offset is the function's start where the module's .eh_frame_hdr tells it (a stripped
-- binary keeps it), so that a function's samples add up; else the instruction's own.
-- opts: runner (the runner on this machine), runner_remote (its path where it ran), symbols (an unstripped copy
-- of the runner, used when its build-id is the runner's), local_modules (the board is this machine: its other
-- modules, libc and the like, are read from their paths). Returns the function and a list of warnings.
function M.symbolizer(stream, opts)
  local mmaps = stream:mmaps()
  local warnings = {}
  local tables, names = {}, {}
  local function symbols_of(path)
    local t = tables[path]
    if t == nil then
      t = elf.symbols(path) or false
      tables[path] = t
    end
    return t or nil
  end
  local runner_file = opts.runner
  if opts.symbols and opts.runner then
    local a, b = symbols_of(opts.symbols), symbols_of(opts.runner)
    local ida, idb = a and a:build_id(), b and b:build_id()
    if ida and ida == idb then
      runner_file = opts.symbols
    else
      warnings[#warnings + 1] = ("--symbols %s: its build-id %s is not the runner's (%s): not used"):format(
        opts.symbols, ida or "(none)", idb or "(none)")
    end
  end
  local runner_base = opts.runner_remote and basename(opts.runner_remote)
  local function local_file(file)
    if opts.runner_remote and (file == opts.runner_remote or basename(file) == runner_base) then return runner_file end
    if opts.local_modules and file:sub(1, 1) == "/" and sys.stat(file) then return file end
  end
  return function(addr, leaf)
    if addr == -1 then return "[kernel]" end
    if addr == -2 then return M.PREEMPTED end
    local key = leaf and addr or -addr
    local got = names[key]
    if got ~= nil then return got or nil end
    -- a caller's frame is a return address: the call is the byte before it (as perf looks it up)
    local at = leaf and addr or addr - 1
    local k = stream:mapping(at)
    local m = k and mmaps[k]
    if not m then
      got = leaf and "[unknown]" or false
    else
      local off = at - m.start + m.pgoff
      local file = local_file(m.file)
      local s = file and symbols_of(file)
      local name = s and s:lookup(off)
      got = name and name:gsub(";", ":") or ("%s+0x%x"):format(basename(m.file), s and s:function_start(off) or off)
    end
    names[key] = got
    return got or nil
  end, warnings
end

--- The profile of one sampled runner process against its ETDump.
-- bytes: the sample stream; doc: etdump.read's document (nil: no join, every sample outside execute).
-- opts: as M.symbolizer, plus top (functions per op, default M.TOP).
-- -> {record = cpu_profile, folded = {lines}, warnings = {...}} | nil, err, code
function M.profile(bytes, doc, opts)
  opts = opts or {}
  local stream, err, code = sample.read(bytes)
  if not stream then return nil, err, code end
  local info = stream:info()
  local warnings = {}
  local iv = doc and M.intervals(doc) or { ops = { start = {}, stop = {}, id = {} }, execs = { start = {}, stop = {} },
    names = {}, execute_ticks = 0 }
  local clock, why = M.align(stream:lines())
  if not clock then
    warnings[#warnings + 1] = "cpu profile: samples not placed in ops: " .. why
    iv.ops, iv.execs = { start = {}, stop = {}, id = {} }, { start = {}, stop = {} }
  end
  local j = stream:join { ops = iv.ops, execs = iv.execs, offset = clock and clock.offset_ns or 0 }
  local name_of, swarn = M.symbolizer(stream, opts)
  table.move(swarn, 1, #swarn, #warnings + 1, warnings)
  local by_stack, leaf_counts = {}, {}
  for _, s in ipairs(j.stacks) do
    local root = s.owner > 0 and iv.names[s.owner].name or s.owner == -1 and M.ROOT_BETWEEN or M.ROOT_OUTSIDE
    local parts = { root }
    local fr = s.frames
    for d = #fr, 1, -1 do parts[#parts + 1] = name_of(fr[d], d == 1) end
    local line = table.concat(parts, ";")
    by_stack[line] = (by_stack[line] or 0) + s.count
    local leaf = parts[#parts]
    local per = leaf_counts[s.owner]
    if not per then per = {} leaf_counts[s.owner] = per end
    per[leaf] = (per[leaf] or 0) + s.count
  end
  local folded = {}
  for line, c in pairs(by_stack) do folded[#folded + 1] = line .. " " .. c end
  table.sort(folded)
  local function top(owner, total)
    local list = {}
    for sym, c in pairs(leaf_counts[owner] or {}) do list[#list + 1] = { symbol = sym, samples = c } end
    table.sort(list, function(a, b) return a.samples > b.samples or (a.samples == b.samples and a.symbol < b.symbol) end)
    local out = {}
    for i = 1, math.min(#list, opts.top or M.TOP) do
      out[i] = { symbol = list[i].symbol, samples = list[i].samples, share = list[i].samples / total }
    end
    return out
  end
  local ops = {}
  for id, n in ipairs(iv.names) do
    local c = j.per_op[id] or 0
    ops[#ops + 1] = { name = n.name, instruction_id = n.instruction_id, samples = c,
      share = j.in_execute > 0 and c / j.in_execute or 0,
      time_share = iv.execute_ticks > 0 and n.ticks / iv.execute_ticks or nil,
      top = c > 0 and top(id, c) or {} }
  end
  if info.lost > 0 then
    warnings[#warnings + 1] = ("cpu profile: the kernel dropped %d samples (the helper's ring buffer was full)"):format(info.lost)
  end
  if not info.complete then
    warnings[#warnings + 1] = "cpu profile: the sample stream is cut short (the helper did not finish it)"
  end
  local record = {
    event = info.event, rate_hz = info.freq_hz, user_only = info.user_only or nil, complete = info.complete,
    clock = clock,
    samples = { total = j.total, in_execute = j.in_execute, attributed = j.attributed, between_ops = j.between,
      outside_execute = j.outside, lost = info.lost, preempted = info.preempted_samples },
    switches = info.switch_records,
    attributed = j.in_execute > 0 and j.attributed / j.in_execute or nil,
    ops = ops,
    execute_top = j.in_execute > 0 and (function()
      local all = {}
      for owner, per in pairs(leaf_counts) do
        if owner ~= -2 then for sym, c in pairs(per) do all[sym] = (all[sym] or 0) + c end end
      end
      leaf_counts.all = all
      return top("all", j.in_execute)
    end)() or {},
  }
  stream:close()
  return { record = record, folded = folded, warnings = warnings }
end

M.TRACE_MAX_SAMPLES = 100000 -- samples drawn in a trace (every k-th beyond: the JSON stays loadable)

--- What the run's Chrome/Perfetto trace (odp.results.trace) gets from the sample stream, on its clock (ETDump's
-- ticks as microseconds): one track per runner thread with each on-CPU sample as an instant named by its leaf
-- function, and counter tracks of each CPU frequency policy (kHz) and thermal zone (degrees C) the helper read.
-- opts: as M.symbolizer, plus pid (the trace's process id for them). -> events | nil, err
function M.trace_events(bytes, opts)
  opts = opts or {}
  local stream, err = sample.read(bytes)
  if not stream then return nil, err end
  local clock = M.align(stream:lines())
  local offset = clock and clock.offset_ns or 0
  local pid = opts.pid or 2
  local events = { { name = "process_name", ph = "M", pid = pid, tid = 0, args = { name = "runner (CPU samples)" } } }
  local name_of = M.symbolizer(stream, opts)
  local c = stream:columns()
  -- on-CPU samples only: the time a thread waited for a CPU is already the gaps of its op slices
  local on_cpu = {}
  for i = 1, #c.time do if c.leaf[i] ~= -2 then on_cpu[#on_cpu + 1] = i end end
  local every = math.max(1, math.ceil(#on_cpu / M.TRACE_MAX_SAMPLES))
  local named = {}
  for k = 1, #on_cpu, every do
    local i = on_cpu[k]
    local tid = c.tid[i]
    if not named[tid] then
      named[tid] = true
      events[#events + 1] = { name = "thread_name", ph = "M", pid = pid, tid = tid, args = { name = "thread " .. tid } }
    end
    events[#events + 1] = { name = name_of(c.leaf[i], true) or "[unknown]", ph = "i", s = "t", pid = pid, tid = tid,
      ts = (c.time[i] - offset) / 1000 }
  end
  for _, k in ipairs(stream:counters()) do
    local freq = k.kind == "freq_khz"
    events[#events + 1] = { name = (freq and "cpufreq policy%d" or "thermal_zone%d"):format(k.index), ph = "C",
      pid = pid, tid = 0, ts = (k.time - offset) / 1000, args = freq and { kHz = k.value } or { C = k.value / 1000 } }
  end
  stream:close()
  return events
end

--- Reads a folded file back: {lines} | nil, err (a missing file is nil: the page then has no flame graph).
function M.read_folded(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local lines = {}
  for line in f:lines() do lines[#lines + 1] = line end
  f:close()
  return lines
end

--- An op's hottest functions as text, "sym 62%, other 31%": those that round to 0% left out (a function seen once
--- among thousands of samples is noise, not a hot spot), nil when none is left. Every view lists them this way.
function M.top_text(op)
  local tops = {}
  for _, t in ipairs(type(op.top) == "table" and op.top or {}) do
    local pct = type(t.share) == "number" and ("%.0f"):format(t.share * 100) or "0"
    if pct ~= "0" and pct ~= "-0" and pct ~= "nan" and pct ~= "-nan" then
      tops[#tops + 1] = ("%s %s%%"):format(tostring(t.symbol), pct)
    end
  end
  return #tops > 0 and table.concat(tops, ", ") or nil
end

--- The lines `odp inspect RUN` and the run's table print: the profile's counts, then each op's hottest functions.
function M.human_lines(cp)
  local out = {}
  local s = cp.samples or {}
  out[#out + 1] = ("%s at %d Hz: %d samples (%d while preempted), %d in execute, %.1f%% of them in an op; %d lost%s"):format(
    cp.event or "?", cp.rate_hz or 0, s.total or 0, s.preempted or 0, s.in_execute or 0, (cp.attributed or 0) * 100,
    s.lost or 0, cp.user_only and "; user space only (kernel.perf_event_paranoid)" or "")
  out[#out + 1] = M.overhead_line(cp.overhead)
  for _, op in ipairs(cp.ops or {}) do
    out[#out + 1] = ("%-28s %5.1f%% of samples%s  %s"):format(op.name .. " #" .. tostring(op.instruction_id),
      (op.share or 0) * 100, op.time_share and (" (%4.1f%% of time)"):format(op.time_share * 100) or "",
      M.top_text(op) or "-")
  end
  return out
end

-- The sampler's cost (--sample-overhead[=K], docs/cpu-profile.md "Overhead"): K runner processes without the
-- sampler interleaved with K sampled ones on the same board, compared by their per-iteration medians.
M.OVERHEAD_DEFAULT = 5      -- processes a side when --sample-overhead is given bare
M.OVERHEAD_MIN_DECIDE = 3   -- fewer processes a side cannot tell the sampler from how much processes differ anyway

--- What the record says when the overhead was not measured: never a number, and the option that measures it.
---@param why string?
function M.overhead_not_measured(why)
  return { state = "not measured", why = why or "--sample alone does not measure its own cost",
    need = "--sample-overhead[=K] measures it: K unsampled runner processes interleaved with K sampled ones" }
end

--- The record's cpu_profile.overhead from the per-iteration latencies (ms) of the unsampled and the sampled
--- processes, one list a process: the medians of all iterations a side, their ratio with its 95% interval
--- (a bootstrap over processes, then iterations: odp.core.stats.bootstrap_ratio_groups), and the verdict:
--- "measured" when the interval leaves out 1 (the sampler's cost, or a gain, shown at this n), else
--- "undecided" with why and what would decide.
---@param unsampled number[][]
---@param sampled number[][]
function M.overhead(unsampled, sampled)
  local function flat(groups)
    local all = {}
    for _, g in ipairs(groups) do table.move(g, 1, #g, #all + 1, all) end
    return all
  end
  local u, s = flat(unsampled), flat(sampled)
  if #u == 0 or #s == 0 then
    return M.overhead_not_measured("the runner printed no per-iteration times (a build without " ..
      "EXECUTORCH_ENABLE_LOGGING?): nothing to compare")
  end
  local ratio, lo, hi = stats.bootstrap_ratio_groups(unsampled, sampled)
  if not ratio then return M.overhead_not_measured("an unsampled median of 0 ms: no ratio") end
  local k = math.min(#unsampled, #sampled)
  local ov = { processes = k, iterations = { unsampled = #u, sampled = #s },
    unsampled_p50_ms = stats.percentile(u, 50), sampled_p50_ms = stats.percentile(s, 50),
    ratio = ratio, pct = (ratio - 1) * 100, ci_pct = { (lo - 1) * 100, (hi - 1) * 100 } }
  if k < M.OVERHEAD_MIN_DECIDE then
    ov.state = "undecided"
    ov.why = ("%d process(es) a side cannot tell the sampler's cost from how much runner processes differ"):format(k)
    ov.need = ("--sample-overhead=%d or more"):format(M.OVERHEAD_MIN_DECIDE)
  elseif lo <= 1 and hi >= 1 then
    ov.state = "undecided"
    ov.why = ("the 95%% interval of the difference, %+.1f%% to %+.1f%%, holds no difference at %d processes a side")
      :format(ov.ci_pct[1], ov.ci_pct[2], k)
    ov.need = ("more processes a side (--sample-overhead=%d) or more iterations each (-n)"):format(2 * k)
  else
    ov.state = "measured"
  end
  return ov
end

--- One line on the overhead, for the terminal, odp inspect and the HTML page.
function M.overhead_line(ov)
  if type(ov) ~= "table" then return "sampling overhead: not in this record" end
  if ov.state == "not measured" then
    return ("sampling overhead: not measured (%s; %s)"):format(ov.why or "?", ov.need or "?")
  end
  local ci = ov.ci_pct or {}
  local head = ("sampling overhead: %+.1f%% (95%% interval %+.1f%% to %+.1f%%): median %.3f ms sampled, %.3f ms " ..
    "without, %d processes a side, interleaved"):format(ov.pct or 0, ci[1] or 0, ci[2] or 0, ov.sampled_p50_ms or 0,
    ov.unsampled_p50_ms or 0, ov.processes or 0)
  if ov.state == "undecided" then head = head .. ("; undecided: %s; %s"):format(ov.why or "?", ov.need or "?") end
  return head
end

-- A flame graph's tree from folded lines: {name, value, children = {name -> node}, order = {names}}.
local function tree(lines, keep, root_name)
  local root = { name = root_name, value = 0, children = {}, order = {} }
  for _, line in ipairs(lines) do
    local stack, n = line:match("^(.*) (%d+)$")
    n = tonumber(n)
    if stack and keep(stack) then
      local node = root
      node.value = node.value + n
      for frame in stack:gmatch("[^;]+") do
        local c = node.children[frame]
        if not c then
          c = { name = frame, value = 0, children = {}, order = {} }
          node.children[frame] = c
          node.order[#node.order + 1] = frame
        end
        c.value = c.value + n
        node = c
      end
    end
  end
  return root
end

local function esc(v) return (tostring(v):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" })) end

-- a warm colour from the name (the same function the same colour in every graph)
local function colour(name)
  if name:sub(1, 1) == "[" then return "#c8c8c8" end
  local h = 0
  for i = 1, #name do h = (h * 31 + name:byte(i)) % 65536 end
  return ("hsl(%d,%d%%,%d%%)"):format(10 + h % 40, 70 + h % 20, 55 + (h // 40) % 12)
end

--- An SVG flame graph (Brendan Gregg's: the root at the bottom, each frame as wide as its samples, callers below
--- callees) of the folded lines whose stack keep(stack) accepts, under a root frame named root_name.
--- -> svg text, or nil when no sample is kept.
function M.flame_svg(lines, keep, root_name, opts)
  opts = opts or {}
  local root = tree(lines, keep, root_name)
  if root.value == 0 then return nil end
  local W, ROW = opts.width or 1000, 17
  local depth = 0
  local function measure(node, d)
    if d > depth then depth = d end
    for _, k in ipairs(node.order) do measure(node.children[k], d + 1) end
  end
  measure(root, 0)
  local H = (depth + 1) * ROW + 4
  local out = { ('<svg xmlns="http://www.w3.org/2000/svg" class="flame" viewBox="0 0 %d %d" width="100%%" ' ..
    'font-family="DejaVu Sans,Verdana,sans-serif" font-size="11" role="img" aria-label="%s">'):format(W, H, esc(opts.label or root_name)) }
  local scale = W / root.value
  local function draw(node, x, d)
    local w = node.value * scale
    if w < 0.3 then return end
    local y = H - (d + 1) * ROW
    out[#out + 1] = ('<g><title>%s: %d samples (%.1f%%)</title><rect x="%.2f" y="%d" width="%.2f" height="%d" ' ..
      'fill="%s" rx="2"/>'):format(esc(node.name), node.value, 100 * node.value / root.value, x, y, math.max(w - 0.5, 0.1),
      ROW - 1, colour(node.name))
    local chars = math.floor((w - 6) / 6.5)
    if chars >= 3 then
      local label = #node.name <= chars and node.name or (node.name:sub(1, chars - 2) .. "..")
      out[#out + 1] = ('<text x="%.2f" y="%d">%s</text>'):format(x + 3, y + ROW - 5, esc(label))
    end
    out[#out + 1] = "</g>"
    local cx = x
    table.sort(node.order)
    for _, k in ipairs(node.order) do
      local c = node.children[k]
      draw(c, cx, d + 1)
      cx = cx + c.value * scale
    end
  end
  draw(root, 0, 0)
  out[#out + 1] = "</svg>"
  return table.concat(out, "\n")
end

--- Writes folded lines to path (atomically: a partial file never stands for a whole one). -> true | nil, err
function M.write_folded(path, folded)
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "wb")
  if not f then return nil, err end
  f:write(table.concat(folded, "\n"), #folded > 0 and "\n" or "")
  f:close()
  return os.rename(tmp, path)
end

return M
