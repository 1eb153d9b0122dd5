--- Reporters: result records -> text. Each format is a function (records) -> string, picked by name
-- (sysbench's model); `odp.results.report.formats` can be extended by a user script.
local errors = require("odp.core.errors")
local json = require("odp.core.json")
local pte = require("odp.parse.pte")
local result = require("odp.results.result")
local schema = require("odp.results.schema")
local sys = require("odp.sys")
local device_state = require("odp.target.device_state")
local stats = require("odp.core.stats")
local ui = require("odp.core.ui")

local M = {}

--- A number as people read it: NaN and infinities spelled the same on every platform (printf gives "-nan").
function M.number(v)
  if v ~= v then return "NaN" end
  if v == math.huge then return "inf" elseif v == -math.huge then return "-inf" end
  return tostring(v)
end

-- Time units from the smallest up, in ms (the unit of records: docs/SCRIPTING.md).
local TIME_UNITS = { { "ns", 1e-6 }, { "µs", 1e-3 }, { "ms", 1 }, { "s", 1e3 } }

--- The unit a set of durations in ms reads best in (hyperfine and criterion do likewise): the largest unit
-- in which the median magnitude is at least 1. Returns name, ms per unit.
function M.time_unit(values_ms)
  local mags = {}
  for _, v in ipairs(values_ms) do
    if type(v) == "number" and v == v and v ~= 0 and math.abs(v) ~= math.huge then mags[#mags + 1] = math.abs(v) end
  end
  if #mags == 0 then return "ms", 1 end
  table.sort(mags)
  local median = mags[(#mags + 1) // 2]
  local pick = TIME_UNITS[1]
  for _, u in ipairs(TIME_UNITS) do if median >= u[2] then pick = u end end
  return pick[1], pick[2]
end

--- The one unit a record's latency block is shown in, by every view (terminal, HTML): the unit its p10, p50
--- and p90 read best in. -> name, ms per unit
function M.latency_unit(l)
  return M.time_unit({ l.p10, l.p50, l.p90 })
end

--- v (already in the display unit) with four significant digits; whole numbers from 1000 up.
function M.sig4(v)
  if type(v) ~= "number" then return "-" end
  if v ~= v or math.abs(v) == math.huge then return M.number(v) end
  if v == 0 then return "0" end
  local decimals = math.max(0, math.min(6, 3 - math.floor(math.log(math.abs(v), 10))))
  return ("%." .. decimals .. "f"):format(v)
end

--- A duration in ms as text in the unit its magnitude reads best in: 0.0006 -> "600.0 ns".
function M.duration(ms)
  if type(ms) ~= "number" then return "-" end
  local name, scale = M.time_unit({ ms })
  return M.sig4(ms / scale) .. " " .. name
end

--- The memory-by-phase table and its owners (docs/memory.md) appended to out, indented like the other blocks.
function M.memory_lines(mem, out)
  local rows = {}
  for _, p in ipairs(mem.phases) do
    rows[#rows + 1] = { phase = p.name .. (p.name == mem.peak_phase and " *" or ""), peak = p.peak_kb,
      how = p.exact and "exact" or "sampled", from = p.t_start_ms, to = p.t_end_ms }
  end
  if mem.note then
    out[#out + 1] = "  memory: " .. mem.note
  end
  if #mem.phases == 0 then
    local o = mem.owners or {}
    if o.planned_kb then out[#out + 1] = ("    planned arenas %d kB%s"):format(o.planned_kb,
      o.scratch_kb and (" · NPU scratch %d kB"):format(o.scratch_kb) or "") end
    out[#out + 1] = ""
    return
  end
  out[#out + 1] = "  memory by phase (* the peak)"
  local t = M.table(rows, { { key = "phase", align = "l" }, { key = "peak", title = "peak kB", fmt = "%d" },
    { key = "how", align = "l" }, { key = "from", title = "from ms", fmt = "%.1f" },
    { key = "to", title = "to ms", fmt = function(v) return v and ("%.1f"):format(v) or "exit" end } })
  for line in t:gmatch("[^\n]+") do out[#out + 1] = "    " .. line end
  local o = mem.owners
  if o then
    local parts = {}
    local function part(v, label) if v then parts[#parts + 1] = ("%s %d kB"):format(label, v) end end
    part(o.planned_kb, "planned")
    if o.weights_kb then
      parts[#parts + 1] = ("weights %d kB (%s)"):format(o.weights_kb,
        o.weights_mapped == nil and "mapped or copied: unknown" or o.weights_mapped and "mapped" or "copied")
    end
    part(o.heap_other_kb, "other heap")
    part(o.file_kb, "code+libs")
    part(o.unexplained_kb, "unexplained")
    out[#out + 1] = ("    at the largest sample: %s%s"):format(table.concat(parts, " · "),
      o.rss_kb and (" of RSS %d kB"):format(o.rss_kb) or "")
  end
  out[#out + 1] = ""
end

--- A labelled schema field's value as text (odp.results.schema: `format`): "duration" in the unit it reads
-- best in, "integer" a whole number, "kB" kilobytes with MB beside, else a printf format; then the unit.
---@param field table a schema entry
---@param v number|string|boolean
function M.show(field, v)
  local fmt, unit = field.format, field.unit and (" " .. field.unit) or ""
  if type(v) ~= "number" then return tostring(v) .. unit end
  if fmt == "duration" then return M.duration(v) end
  if fmt == "kB" then return ("%d kB (%.1f MB)"):format(v, v * 1024 / 1e6) end
  if fmt == "integer" then return ("%d"):format(v) .. unit end
  return (fmt or "%s"):format(v) .. unit
end

--- Aligns rows under columns. columns: list of {key=, title=, fmt=function(v, row)|string, align="l"|"r",
-- time=true|group}. A time column holds durations in ms; it is shown in one unit chosen from its values
-- (ns, µs, ms or s, four significant digits), named in its header ("p50 µs"). Time columns given the same
-- group name share one unit, chosen from all their values (the statistics of one distribution); unit =
-- {name, ms per unit} sets it.
function M.table(rows, columns)
  local cells, widths, titles, cols = {}, {}, {}, {}
  local function time_values(group, key)
    local vals = {}
    for _, col in ipairs(columns) do
      if col.key == key or (group ~= true and col.time == group) then
        for _, row in ipairs(rows) do vals[#vals + 1] = row[col.key] end
      end
    end
    return vals
  end
  for c, col in ipairs(columns) do
    titles[c] = col.title or col.key
    if col.time then
      local name, scale
      if col.unit then name, scale = col.unit[1], col.unit[2] else name, scale = M.time_unit(time_values(col.time, col.key)) end
      titles[c] = titles[c] .. " " .. name
      col = setmetatable({ fmt = function(v) return type(v) == "number" and M.sig4(v / scale) or "-" end },
        { __index = col })
    end
    cols[c] = col
    widths[c] = utf8.len(titles[c]) or #titles[c]
  end
  columns = cols
  for r, row in ipairs(rows) do
    cells[r] = {}
    for c, col in ipairs(columns) do
      local v = row[col.key]
      local s
      if type(col.fmt) == "function" then s = col.fmt(v, row)
      elseif v == nil then s = "-"
      elseif type(v) == "number" and (v ~= v or math.abs(v) == math.huge) then s = M.number(v)
      elseif col.fmt and type(v) == "number" then s = col.fmt:format(v)
      else s = tostring(v) end
      cells[r][c] = s
      widths[c] = math.max(widths[c], utf8.len(s) or #s)
    end
  end
  local function line(vals, header)
    local parts = {}
    for c, col in ipairs(columns) do
      local s = vals[c]
      local pad = (" "):rep(widths[c] - (utf8.len(s) or #s))
      local right = col.align == "r" or (col.align == nil and col.fmt ~= nil and not header)
      if header then right = col.align == "r" or col.fmt ~= nil end
      parts[#parts + 1] = right and (pad .. s) or (s .. pad)
    end
    return (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  local out = { line(titles, true) }
  for r = 1, #rows do out[#out + 1] = line(cells[r]) end
  return table.concat(out, "\n")
end

--- One line on where an inference's time went (etdump.ops_summary): "delegated 2.100 ms (68%) · kernels ...".
-- Each time in its own unit, four significant digits: a sub-microsecond split must not round to zeros.
function M.ops_summary_line(s)
  local f = s.unit == "cycles" and function(v) return ("%.0f cycles"):format(v) end or M.duration
  return ("delegated %s (%.0f%%) · kernels %s · other %s · execute %s (medians of %d)"):format(f(s.delegated_ms),
    s.delegated_share * 100, f(s.kernels_ms), f(s.other_ms), f(s.execute_ms), s.n)
end

--- The columns of an operator table (etdump.ops rows) whose times are in unit ("ms" or "cycles").
function M.op_columns(unit, extra)
  local cycles = unit == "cycles"
  local cols = { { key = "block" }, { key = "name" }, { key = "n", fmt = "%d" } }
  for _, k in ipairs({ "p10", "p50", "p90", "avg", "min", "max" }) do
    -- one unit for the whole table: a p10 in ns beside a p90 in µs reads as a thousandfold spread
    cols[#cols + 1] = cycles and { key = k, title = k .. " cycles", fmt = "%.0f" } or { key = k, time = "ops" }
  end
  for _, c in ipairs(extra or {}) do cols[#cols + 1] = c end
  return cols
end

local function human_one(r, out)
  local function kv(k, v) out[#out + 1] = ("  %-16s %s"):format(k, v) end
  out[#out + 1] = ("%s  %s on %s: %s"):format(r.ok and "OK  " or "FAIL", r.flow or "?", r.target or r.device or "?",
    r.ok and (r.latency_ms and r.latency_ms.modelled and "MODELLED by the QEMU twin, not measured"
      or r.emulated and ("measured under %s emulation, not natively"):format(r.emulated) or "measured")
    or ((r.error and r.error.message) or "failed"))
  if r.model then
    kv("model", ("%s (%s, sha256 %s)"):format(r.model.path, r.model.bytes and (r.model.bytes .. " B") or "?",
      (r.model.sha256 or "?"):sub(1, 12)))
  end
  if r.runner then kv("runner", r.runner.path) end
  if r.device_state then
    kv("device", r.device_state.error and ("state unknown: " .. r.device_state.error)
      or device_state.summary(r.device_state))
  end
  if r.params and next(r.params) then
    local keys = {}
    for k in pairs(r.params) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(r.params[k]) end
    kv("params", table.concat(parts, " "))
  end
  if r.steps and #r.steps > 0 then
    local parts = {}
    for _, st in ipairs(r.steps) do
      parts[#parts + 1] = ("%s %s%s"):format(st.name, M.duration(st.ms or 0), st.status ~= "ran" and (" (" .. st.status .. ")") or "")
    end
    kv("steps", table.concat(parts, ", "))
  end
  if r.status ~= nil or r.signal then
    kv("exit", r.signal and ("signal %s"):format(r.signal) or ("status %d"):format(r.status))
  end
  local l = r.latency_ms
  if l and l.n and l.n > 0 then
    out[#out + 1] = ""
    out[#out + 1] = ("  latency (from %s)"):format(l.source or "?")
    if l.modelled then
      out[#out + 1] = "  MODELLED, not measured: the QEMU twin computes these times from modelled cycles and sends a " ..
        "canned ETDump (tests/twin/README.md)"
    end
    if l.emulated then
      out[#out + 1] = ("  EMULATED, not a board's timings: the board is a %s"):format(
        r.device_state and r.device_state.emulated or "virtual machine")
    end
    local u = { M.latency_unit(l) } -- the HTML page's unit too
    local t = M.table({ l }, {
      { key = "n", fmt = "%d" }, { key = "mean", time = "t", unit = u }, { key = "min", time = "t", unit = u },
      { key = "p50", time = "t", unit = u }, { key = "p90", time = "t", unit = u }, { key = "p99", time = "t", unit = u },
      { key = "max", time = "t", unit = u }, { key = "std", time = "t", unit = u } })
    for line in t:gmatch("[^\n]+") do out[#out + 1] = "    " .. line end
    local extra = {}
    if l.ci95 then
      extra[#extra + 1] = ("median 95%% CI [%s, %s]"):format(M.duration(l.ci95[1]), M.duration(l.ci95[2]))
    end
    if l.cv then extra[#extra + 1] = ("cv %.1f%%"):format(l.cv * 100) end
    if l.warm then extra[#extra + 1] = ("warm p50 %s"):format(M.duration(l.warm.p50)) end
    if l.first_ms and #l.first_ms > 0 then
      extra[#extra + 1] = ("first iteration p50 %s"):format(M.duration(stats.percentile(l.first_ms, 50)))
    end
    if #extra > 0 then out[#out + 1] = "    " .. table.concat(extra, ", ") end
    out[#out + 1] = ""
  end
  if r.sustained and #r.sustained > 0 then
    out[#out + 1] = "  sustained (per minute)"
    local t = M.table(r.sustained, { { key = "minute", fmt = "%d" }, { key = "processes", fmt = "%d" },
      { key = "n", fmt = "%d" }, { key = "p50", time = "t" }, { key = "p90", time = "t" } })
    for line in t:gmatch("[^\n]+") do out[#out + 1] = "    " .. line end
    out[#out + 1] = ""
  end
  if r.thermal and #r.thermal > 0 then
    local waited, hottest = 0, nil
    for _, e in ipairs(r.thermal) do
      waited = waited + (e.waited_s or 0)
      for _, c in ipairs { e.before_c, e.after_c } do if c and (not hottest or c > hottest) then hottest = c end end
    end
    kv("cooling", ("%.1f s waited in all%s"):format(waited, hottest and (", hottest %.1f C"):format(hottest) or ""))
  end
  if r.stop and r.stop.rule ~= "repeat" then
    kv("stopped by", ("%s%s after %d process(es), %.1f s"):format(r.stop.rule, r.stop.met and "" or " (not met)",
      r.stop.processes, r.stop.measured_seconds or r.stop.seconds))
  end
  if r.stop and r.stop.overrun_seconds then
    kv("hung?", ("the point took %.1f s, %.1f s more than measuring and uploads"):format(r.stop.seconds,
      r.stop.overrun_seconds))
  end
  for _, f in ipairs(schema.labelled()) do
    local v = schema.get(r, f[1])
    if v ~= nil then kv(f.label, M.show(f, v)) end
  end
  if r.memory and r.memory.phases then M.memory_lines(r.memory, out) end
  local c = r.counters and r.counters.total
  if c then
    local parts = {}
    if c.task_clock_ms then parts[#parts + 1] = M.duration(c.task_clock_ms) .. " task-clock" end
    for _, k in ipairs({ "context_switches", "cpu_migrations", "page_faults", "cycles", "instructions",
      "branch_misses", "cache_misses" }) do
      if c[k] then parts[#parts + 1] = ("%.0f %s"):format(c[k], k:gsub("_", "-")) end
    end
    if c.ipc then parts[#parts + 1] = ("IPC %.2f"):format(c.ipc) end
    local n = #(r.counters.processes or {})
    kv("counters", table.concat(parts, " · ") .. (" (%d process%s%s)"):format(n, n == 1 and "" or "es",
      r.counters.scaled and ("; scaled: " .. table.concat(r.counters.scaled, ", ")) or ""))
    if r.counters.unavailable then
      local un = {}
      for k, why in pairs(r.counters.unavailable) do un[#un + 1] = k:gsub("_", "-") .. " " .. why end
      table.sort(un)
      kv("", "not counted: " .. table.concat(un, ", "))
    end
  end
  if r.planned_buffers and #r.planned_buffers > 0 then
    for i, b in ipairs(r.planned_buffers) do
      kv(i == 1 and "planned buffers" or "", ("[%d] %d B%s"):format(i - 1, b,
        b >= 1000 and (" (" .. ui.human_bytes(b) .. ")") or ""))
    end
  end
  for i, o in ipairs(r.outputs or {}) do
    local vals = {}
    for j = 1, math.min(#(o.values or {}), 8) do
      local v = o.values[j]
      vals[j] = type(v) == "number" and M.number(v) or tostring(v)
    end
    if o.values and (#o.values > 8 or o.elided) then vals[#vals + 1] = "..." end
    kv(i == 1 and "outputs" or "", ("[%d] sizes [%s]: %s"):format(i - 1, table.concat(o.sizes or {}, ", "),
      table.concat(vals, ", ")))
    if o.data then kv("", "    " .. M.file_line(o.data)) end
  end
  for i, f in ipairs(r.inputs or {}) do
    kv(i == 1 and "inputs" or "", ("[%d] %s"):format(i - 1, M.file_line(f)))
  end
  if r.reference then
    for _, line in ipairs(M.reference_lines(r.reference)) do out[#out + 1] = line end
  end
  if r.artifacts then
    local keys = {}
    -- the runner's logs of --sample-overhead's processes (two a process): one line for them all
    local overhead_logs = 0
    for k in pairs(r.artifacts) do
      if k:match("^overhead_%d+_") then overhead_logs = overhead_logs + 1 else keys[#keys + 1] = k end
    end
    table.sort(keys)
    local dir = type(r.artifacts.run_dir) == "string" and r.artifacts.run_dir or nil
    for _, k in ipairs(keys) do
      local a = r.artifacts[k]
      -- a file of the run's own directory ({file, sha256, bytes}): shown where it is
      if type(a) == "table" then a = dir and (dir .. "/" .. tostring(a.file)) or a.file end
      kv(k, a)
    end
    if overhead_logs > 0 then
      kv("overhead logs", ("%d runner logs of the --sample-overhead processes: %soverhead-*.std{out,err}"):format(
        overhead_logs, dir and (dir .. "/") or ""))
    end
  end
  if r.pmu then
    local p = r.pmu
    if p.cpu_cycles_total then
      kv("CPU cycles", ("%d total, %s per inference"):format(p.cpu_cycles_total,
        p.cpu_cycles_per_inference and ("%.0f"):format(p.cpu_cycles_per_inference) or "?"))
    end
    if p.npu_cycles then kv("NPU cycles", ("%d"):format(p.npu_cycles)) end
    for i, ctr in ipairs(p.counters or {}) do
      kv(i == 1 and "NPU counters" or "", ("[%d] %-28s %d"):format(ctr.index, ctr.event or "?", ctr.count))
    end
  end
  if r.ops_summary then kv("time split", M.ops_summary_line(r.ops_summary)) end
  -- like ExecuTorch's Inspector, the table hides OPERATOR_CALL (framework overhead); JSON keeps it, flagged
  local ops = {}
  for _, op in ipairs(r.ops or {}) do if not op.framework then ops[#ops + 1] = op end end
  if #ops > 0 then
    out[#out + 1] = ""
    out[#out + 1] = "  operators"
    local t = M.table(ops, M.op_columns(r.ops_unit))
    for line in t:gmatch("[^\n]+") do out[#out + 1] = "    " .. line end
  end
  if r.cpu_profile then
    out[#out + 1] = ""
    out[#out + 1] = "  cpu profile (hottest functions per op)"
    for _, line in ipairs(require("odp.results.cpu_profile").human_lines(r.cpu_profile)) do -- lazy: start-up
      out[#out + 1] = "    " .. line
    end
  end
  for _, w in ipairs(r.warnings or {}) do kv("warning", w) end
  if r.error then kv("error", ("%s: %s"):format(r.error.code or "?", r.error.message or "?")) end
end

--- A parameter's column title in a table of records: the flow's `repeat` is its runner processes per record,
--- told apart from a sweep's repetitions of a point (M.sweep_rep).
function M.param_title(k)
  return k == "repeat" and "processes" or k
end

--- Which of a sweep's repetitions of its point a record is, "2/3" (rec.sweep, written by odp.run.sweep), or nil
--- when the sweep ran each point once.
function M.sweep_rep(r)
  local s = type(r.sweep) == "table" and r.sweep or nil
  if not (s and math.type(s.rep) == "integer") then return nil end
  if math.type(s.reps) == "integer" then return s.reps > 1 and ("%d/%d"):format(s.rep, s.reps) or nil end
  return s.rep > 1 and tostring(s.rep) or nil -- a record of a sweep that did not say how many
end

--- A one-row-per-record summary (sweeps).
function M.summary(records)
  local rows, pkeys, seen, boards, reps = {}, {}, {}, false, false
  for _, r in ipairs(records) do
    for k in pairs(r.params or {}) do if not seen[k] then seen[k] = true pkeys[#pkeys + 1] = k end end
    boards = boards or r.board ~= nil
    reps = reps or M.sweep_rep(r) ~= nil
  end
  table.sort(pkeys)
  for _, r in ipairs(records) do
    local row = { ok = r.ok and "ok" or ("FAIL " .. ((r.error and r.error.code) or "")), board = r.board,
      rep = M.sweep_rep(r) }
    for _, k in ipairs(pkeys) do row["p:" .. k] = r.params and r.params[k] end
    local l = r.latency_ms or {}
    row.n, row.mean, row.p50, row.p90, row.max = l.n, l.mean, l.p50, l.p90, l.max
    row.rss = r.peak_rss_kb
    rows[#rows + 1] = row
  end
  local cols = {}
  if boards then cols[1] = { key = "board" } end -- records of --boards runs: which board each is
  for _, k in ipairs(pkeys) do cols[#cols + 1] = { key = "p:" .. k, title = M.param_title(k), align = "r" } end
  if reps then cols[#cols + 1] = { key = "rep", align = "r" } end
  for _, c in ipairs({ { key = "ok" }, { key = "n", fmt = "%d" }, { key = "mean", time = "lat" },
    { key = "p50", time = "lat" }, { key = "p90", time = "lat" }, { key = "max", time = "lat" },
    { key = "rss", title = "peak RSS kB", fmt = "%d" } }) do cols[#cols + 1] = c end
  return M.table(rows, cols)
end

-- CSV: records flattened to dotted columns; lists joined with ';'.
local function flatten(v, prefix, out)
  if type(v) == "table" and not (#v > 0 or getmetatable(v) == getmetatable(json.array())) then
    for k, x in pairs(v) do flatten(x, prefix and (prefix .. "." .. k) or k, out) end
  elseif type(v) == "table" then
    local parts = {}
    for i, x in ipairs(v) do
      parts[i] = type(x) == "table" and json.encode(x) or tostring(x)
    end
    out[prefix] = table.concat(parts, ";")
  elseif v ~= nil then
    out[prefix] = v
  end
end

local function csv_cell(v)
  if v == nil then return "" end
  local s = type(v) == "number" and json.encode(v) or tostring(v)
  if s:find('[,"\n\r]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

M.formats = {}

function M.formats.human(records)
  local out = {}
  for i, r in ipairs(records) do
    if i > 1 then out[#out + 1] = "" end
    human_one(schema.read(r) or {}, out)
  end
  if #records > 1 then
    out[#out + 1] = ""
    out[#out + 1] = M.summary(records)
  end
  return table.concat(out, "\n") .. "\n"
end

function M.formats.json(records)
  return result.encode(#records == 1 and records[1] or json.array(records), { indent = true }) .. "\n"
end

function M.formats.jsonl(records)
  local out = {}
  for i, r in ipairs(records) do out[i] = result.encode(r) end
  return table.concat(out, "\n") .. "\n"
end

function M.formats.csv(records)
  local flat, cols, seen = {}, {}, {}
  for i, r in ipairs(records) do
    flat[i] = {}
    local rr = {}
    for k, v in pairs(r) do if k ~= "ops" and k ~= "outputs" then rr[k] = v end end
    flatten(rr, nil, flat[i])
    for k in pairs(flat[i]) do if not seen[k] then seen[k] = true cols[#cols + 1] = k end end
  end
  local order = { schema = 1, ok = 2, flow = 3, device = 4, target = 5, started_at = 6 }
  table.sort(cols, function(a, b)
    local oa, ob = order[a] or 100, order[b] or 100
    if oa ~= ob then return oa < ob end
    return a < b
  end)
  local lines = { table.concat(cols, ",") }
  for _, f in ipairs(flat) do
    local cells = {}
    for j, c in ipairs(cols) do cells[j] = csv_cell(f[c]) end
    lines[#lines + 1] = table.concat(cells, ",")
  end
  return table.concat(lines, "\n") .. "\n"
end

--- Where a record was measured, as lab engines name it: {board=, model=, point=}. board: the lab file's
-- name, else the device; model: the .pte's file name without extension; point: the run parameters,
-- sorted, as "name-value" joined by "." ("" when none).
function M.labels(r)
  local model = r.model and r.model.path and r.model.path:match("([^/]+)$") or "model"
  local keys, parts = {}, {}
  for k in pairs(r.params or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "-" .. tostring(r.params[k]) end
  return { board = r.board or r.device or "board", model = (model:gsub("%.pte$", "")), point = table.concat(parts, ".") }
end

--- 0 when every record is ok; otherwise the largest exit status of their failures (error.exit, the status of
-- their codes: odp.core.errors.exit_status; 1 for a failed record that says nothing).
function M.exit_code(records)
  local code = 0
  for _, r in ipairs(records) do
    if not r.ok then code = math.max(code, r.error and (r.error.exit or errors.exit_status(r.error.code)) or 1) end
  end
  return code
end

-- ---------------------------------------------------------------------------------------------------------
-- Outputs against a reference (docs/outputs.md; odp.results.tensors makes the numbers)

--- One line for a kept file: "float32 [3], 12 B, outputs/output-0.bin, sha256 43b7020df19f".
function M.file_line(f)
  local parts = {}
  if f.dtype then parts[#parts + 1] = f.dtype .. (f.sizes and (" " .. pte.shape(f.sizes)) or "") end
  if f.bytes then parts[#parts + 1] = f.bytes .. " B" end
  if f.file then parts[#parts + 1] = f.file end
  if f.sha256 then parts[#parts + 1] = "sha256 " .. f.sha256:sub(1, 12) end
  if f.error then parts[#parts + 1] = "ERROR: " .. f.error end
  return table.concat(parts, ", ")
end

--- A number in fmt for a table's cell ("" for none), NaN and infinities spelt as M.number spells them.
function M.number_text(v, fmt)
  if type(v) ~= "number" then return "" end
  if v ~= v or v == math.huge or v == -math.huge then return M.number(v) end
  return fmt:format(v)
end
local num = M.number_text

--- The human report's agreement table with a reference (a run's `reference`, or odp compare's `outputs`).
function M.reference_lines(ref)
  local out = { "", ("  agreement with %s (%s)"):format(ref.path or "?", ref.kind == "run" and "a run" or "files") }
  local rows = {}
  for _, e in ipairs(ref.outputs or {}) do
    if e.error then
      out[#out + 1] = ("    output %d: not compared: %s"):format(e.index, e.error)
    else
      rows[#rows + 1] = { output = e.index, n = e.n, equal = e.equal, nonfinite = e.nonfinite,
        max_abs_err = e.max_abs_err or (e.nonfinite > 0 and math.huge) or nil, mean_abs_err = e.mean_abs_err,
        rmse = e.rmse, cosine = e.cosine, snr_db = e.snr_db or (e.identical and math.huge) or nil,
        top1 = e.top1 == nil and "" or (e.top1 and "yes" or "no"), top5 = e.top5 }
    end
  end
  if #rows > 0 then
    local function g(v) return num(v, "%.4g") end
    local t = M.table(rows, { { key = "output", fmt = "%d" }, { key = "n", fmt = "%d" },
      { key = "equal", fmt = "%d" }, { key = "nonfinite", fmt = "%d" },
      { key = "max_abs_err", title = "max abs err", fmt = function(v) return g(v) end },
      { key = "mean_abs_err", title = "mean abs err", fmt = function(v) return g(v) end },
      { key = "rmse", fmt = function(v) return g(v) end },
      { key = "cosine", fmt = function(v) return num(v, "%.9f") end },
      { key = "snr_db", title = "SNR dB", fmt = function(v) return g(v) end },
      { key = "top1", align = "l" }, { key = "top5", fmt = function(v) return v and ("%.0f%%"):format(v * 100) or "" end } })
    for line in t:gmatch("[^\n]+") do out[#out + 1] = "    " .. line end
  end
  if ref.failed then
    local f = ref.failed
    out[#out + 1] = ("    FAILED: output %d, %s %s (limit %s)"):format(f.output, f.metric,
      f.value ~= nil and num(f.value, "%.9g") or "-inf", num(f.limit, "%.9g"))
  end
  return out
end

--- Agreement per record (a sweep's, a many-board run's): board, the swept parameters, the worst output's
-- cosine and max abs error, whether top-1 agreed on every logits output, and the gate -> text | nil when no
-- record was compared with a reference.
function M.agreement_table(records)
  local rows, pkeys, seen, any = {}, {}, {}, false
  for _, r in ipairs(records) do
    if type(r.reference) == "table" then any = true end
    for k in pairs(r.params or {}) do
      if not seen[k] and k ~= "inputs" then seen[k] = true pkeys[#pkeys + 1] = k end
    end
  end
  if not any then return nil end
  table.sort(pkeys)
  for _, r in ipairs(records) do
    local ref = type(r.reference) == "table" and r.reference or {}
    local row = { board = r.board or r.device, cosine = ref.cosine, max_abs_err = ref.max_abs_err }
    for _, k in ipairs(pkeys) do row["p:" .. k] = r.params and r.params[k] end
    local top1, nonfinite, notcmp = nil, 0, 0
    for _, e in ipairs(ref.outputs or {}) do
      if e.top1 ~= nil then top1 = (top1 == nil or top1) and e.top1 end
      nonfinite = nonfinite + (e.nonfinite or 0)
      if e.error then notcmp = notcmp + 1 end
    end
    row.top1 = top1 == nil and "" or (top1 and "same" or "differs")
    row.agree = not r.reference and "no reference" or ref.failed and ("FAIL " .. ref.failed.metric .. " out " .. ref.failed.output)
      or nonfinite > 0 and (nonfinite .. " non-finite") or notcmp > 0 and (notcmp .. " not compared")
      or r.ok == false and ("FAIL " .. (r.error and r.error.code or "")) or "ok"
    rows[#rows + 1] = row
  end
  local cols = { { key = "board" } }
  for _, k in ipairs(pkeys) do cols[#cols + 1] = { key = "p:" .. k, title = k, align = "r" } end
  for _, c in ipairs({ { key = "cosine", title = "worst cosine", fmt = function(v) return num(v, "%.9f") end },
    { key = "max_abs_err", title = "max abs err", fmt = function(v) return num(v, "%.4g") end },
    { key = "top1", title = "top-1", align = "l" }, { key = "agree", title = "agreement", align = "l" } }) do
    cols[#cols + 1] = c
  end
  return "agreement with the reference, per board and point\n" .. M.table(rows, cols)
end


return M
