--- Parser for what ExecuTorch runners print: `executor_runner` (POSIX log prefix, with or without the
-- `HH:MM:SS.uuuuuu` timestamp), the Arm bare-metal runner (`I [executorch:file.cpp:12 func()] msg` and its
-- PMU report), Android logcat text (bare messages, or logcat's threadtime/brief prefixes), the Alif RTT
-- firmware's `Inference: <f> ms` lines, and the output tensors on stdout (`OutputX i: tensor(...)`,
-- `Output i: tensor(...)`, `Output[i][j]: (float) v`). See docs/sources.md §1 for every spelling.
--
-- Pure function over untrusted text: it never raises on content (garbage, binary, lines of megabytes),
-- runs in linear time (one pass, line by line, over each text) and bounds the lists it keeps.
-- Design: `Iteration i of N: f ms` lines (~95% of a long log) are recognised and their times converted by
-- odp.scan (C, src/parse/scan.c) without a Lua string per value; one LPeg grammar consumes the other lines
-- line by line (a multi-line output tensor counts as one line) and only lines worth keeping reach Lua
-- (function captures). bench/parse_bench.lua measures it against grep/awk.
local lpeg = require("lpeg")
local json = require("odp.core.json")
local scan = require("odp.scan")

local P, R, S, C, Cc, Ct, V = lpeg.P, lpeg.R, lpeg.S, lpeg.C, lpeg.Cc, lpeg.Ct, lpeg.V
local tonumber, tointeger, type, find, match, sub = tonumber, math.tointeger, type,
  string.find, string.match, string.sub

local M = {}

--- ExecuTorch's `Error` enum (runtime/core/error.h): status code -> name. Runner messages print the
-- code in hex (`... failed with status 0x14`, `FileDataLoader::from() failed: 0x22`).
---@type table<integer, string>
M.status_names = {
  [0x00] = "Ok",
  [0x01] = "Internal",
  [0x02] = "InvalidState",
  [0x03] = "EndOfMethod",
  [0x04] = "AlreadyLoaded",
  [0x10] = "NotSupported",
  [0x11] = "NotImplemented",
  [0x12] = "InvalidArgument",
  [0x13] = "InvalidType",
  [0x14] = "OperatorMissing",
  [0x15] = "RegistrationExceedingMaxKernels",
  [0x16] = "RegistrationAlreadyRegistered",
  [0x20] = "NotFound",
  [0x21] = "MemoryAllocationFailed",
  [0x22] = "AccessFailed",
  [0x23] = "InvalidProgram",
  [0x24] = "InvalidExternalData",
  [0x25] = "OutOfResources",
  [0x30] = "DelegateInvalidCompatibility",
  [0x31] = "DelegateMemoryAllocationFailed",
  [0x32] = "DelegateInvalidHandle",
}

--- Names of the Ethos-U PMU event counters when the runner does not print its `Ethos-U PMU Events:[...]`
-- line: by counter count (4 = U55/U65 setup, 7 = U85 setup of ExecuTorch's arm_perf_monitor.cpp).
M.pmu_default_events = {
  [4] = { "AXI0_RD_DATA_BEAT_RECEIVED", "AXI1_RD_DATA_BEAT_RECEIVED", "AXI0_WR_DATA_BEAT_WRITTEN", "NPU_IDLE" },
  [7] = { "SRAM_RD_DATA_BEAT_RECEIVED", "SRAM_WR_DATA_BEAT_WRITTEN", "EXT_RD_DATA_BEAT_RECEIVED",
    "EXT_WR_DATA_BEAT_WRITTEN", "NPU_IDLE", "MAC_ACTIVE", "WD_ACTIVE" },
}

-- Bounds on what one parse keeps (the input size bounds everything else).
M.defaults = {
  max_messages = 10000, -- log lines kept in `messages`; the rest are counted in `messages_dropped`
  max_errors = 1000,    -- E/F lines kept in `errors` (`errors_dropped` counts the rest)
  max_text = 1024,      -- bytes of a message's text kept (a longer text is cut and ends in "...")
  max_values = 1000000, -- values kept per output tensor
}

---------------------------------------------------------------------------------------------------------
-- Grammar
---------------------------------------------------------------------------------------------------------
local digit = R"09"
local nl = P"\n"
local notnl = 1 - nl
local sp = S" \t"
local toeol = notnl^0
local rest = C((1 - S"\r\n")^0) -- text up to the line end, without a CR
local int = C(digit^1) / tonumber
local numtext = S"+-"^-1 * (digit^1 * (P"." * digit^0)^-1 + P"." * digit^1) * (S"eE" * S"+-"^-1 * digit^1)^-1
local num = C(numtext) / function(s) return tonumber(s) + 0.0 end
local hexnum = P"0x" * C(R("09", "af", "AF")^1) / function(h) return tonumber(h, 16) end

-- Log prefixes. Each yields 6 values: level, timestamp|false, file|false, line|false, func|false, tag|false.
-- src/parse/scan.c recognises the same prefixes in front of iteration lines: change both together.
local level = C(S"DIEFW")
local ts = digit^1 * ":" * digit^1 * ":" * digit^1 * "." * digit^1
local fname = (1 - S":]\n")^1
local fn = (notnl - P"()]")^0
local PREFIX
do
  local c, cc, l = C, Cc, level
  -- POSIX: `I 00:00:00.001029 executorch:executor_runner.cpp:476] msg` (timestamp optional)
  local posix = l * sp * (c(ts) * sp + cc(false)) * "executorch:" * c(fname) * ":" * c(digit^1) * "]" * P" "^-1
    * cc(false) * cc(false)
  -- Arm bare metal: `I [executorch:arm_executor_runner.cpp:512 main()] msg`
  local arm = l * sp * cc(false) * "[executorch:" * c(fname) * ":" * c(digit^1) * sp * c(fn) * "()]" * P" "^-1
    * cc(false)
  -- logcat threadtime: `12-02 17:19:00.123  1234  1234 I ExecuTorch: msg`; brief: `I/ExecuTorch( 1234): msg`
  local cl = C(S"VDIWEFA")
  local tag = (1 - S": (\n")^1
  local threadtime = digit^2 * "-" * digit^2 * sp^1 * ts * sp^1 * digit^1 * sp^1 * digit^1 * sp^1 * cl * sp^1
    * cc(false) * cc(false) * cc(false) * cc(false) * c(tag) * sp^0 * ":" * P" "^-1
  local brief = cl * "/" * cc(false) * cc(false) * cc(false) * cc(false) * c(tag) * sp^0
    * ("(" * sp^0 * digit^1 * ")")^-1 * ":" * P" "^-1
  PREFIX = posix + arm + threadtime + brief
end

-- Output tensors (stdout). Summary format (ExecuTorch's print_evalue): `tensor(sizes=[1, 3], [a, b, c])`,
-- more than 10 printed items wrap over lines, long lists elide their middle as `...,`.
local ELIDED = {}
local ws = S" \t\r\n"^0
local tok = C((1 - S", \t\r\n[]()")^1)
local item = P"..." * Cc(ELIDED) + tok
local sizes = Ct("[" * ws * (int * ws * ("," * ws)^-1)^0 * "]")
local values = Ct("[" * ws * (item * ws * ("," * ws)^-1)^0 * "]")
local tensor = "tensor(sizes=" * sizes * "," * ws * values * ")"
local out_head = (P"OutputX" + P"Output") * sp^1 * int * ":" * sp^0
local out_summary = out_head * (tensor * Cc(false) + Cc(false) * Cc(false) * rest)
-- `--print_output all`: `Output[0][1]: (float) 2.000000`, `(bool) true  (0x1)`, `Output[2]: Not Tensor`
local out_all = "Output[" * int * "][" * int * "]:" * sp^0 * "(" * C((1 - S")\n")^1) * ")" * sp^0 * tok
local out_nt = "Output[" * int * "]:" * sp^0 * "Not Tensor"

-- Known messages (after the prefix, or bare): kind, values...
local function K(kind, p) return Cc(kind) * p end
-- Ordered choice of a list, as a grammar whose rules are the list's patterns: it matches as p1 + p2 + ... + pn,
-- but each `+` copies both operand trees (a left-leaning chain of these ~30 patterns copied them ~30 times over,
-- ~3 ms at every start; a balanced one still log2(n) times), while a grammar copies each rule once and chooses
-- between references to them: building this module allocates 130 KB less (of 580 KB), ~35 fewer fresh pages.
local function choice(ps)
  local g, alt = {}, V(2)
  for i, p in ipairs(ps) do
    g[i + 1] = p
    if i > 1 then alt = alt + V(i + 1) end
  end
  g[1] = alt
  return P(g)
end
local perinf = sp^0 * "(" * num * " per inference)" + Cc(false)
-- (`Iteration i of N: f ms` is not here: odp.scan takes those lines before the grammar sees them.)
local KNOWN = choice {
  K("model_file", "Model file " * C((1 - P" is loaded" - S"\r\n")^1) * " is loaded"),
  K("method", "Using method " * rest),
  K("buffer", "Setting up " * (C"CPU" * sp + C"device" * sp + Cc(false)) * "planned buffer " * int * ","
    * sp^0 * "size " * int * ("," * sp^0 * "device_type " * int + Cc(false))),
  K("loaded_in", "Model loaded in " * num * sp^0 * "ms"),
  K("executed", "Model executed successfully " * int * " time(s) in " * num * sp^0 * "ms"),
  K("executed1", P"Model executed successfully"),
  K("noutputs", int * " outputs:"),
  K("etdump", "ETDump written to file '" * C((1 - S"'\r\n")^0) * "'"),
  K("threads", "Resetting threadpool with num threads = " * int),
  K("method_loaded", P"Method loaded"),
  K("ptd", "PTD file " * C((1 - P" is loaded" - S"\r\n")^1) * " is loaded"),
  K("inference", "Inference:" * sp^0 * num * sp^0 * "ms"),
  K("missing_op", "Missing operator:" * sp^0 * "[" * int * "]" * sp^0 * rest),
  K("probe", P"Failed to open midr file" + "Reading file " * (notnl - P"midr_el1")^0 * "midr_el1"),
  -- Arm PMU report (examples/arm/executor_runner/arm_perf_monitor.cpp)
  K("npu_inferences", "NPU Inferences" * sp^0 * ":" * sp^0 * int),
  K("npu_delegations", "NPU delegations" * sp^0 * ":" * sp^0 * int * perinf),
  K("backend_cycles", "ethos-u" * sp^0 * ":" * sp^0 * "cycle_cnt" * sp^0 * ":" * sp^0 * int * " cycles" * perinf),
  K("operators_cycles", "Operator(s) total:" * sp^0 * int * " CPU cycles" * perinf),
  K("cpu_cycles", "Inference runtime:" * sp^0 * int * " CPU cycles total" * perinf),
  K("cpu_ratio", "Inference CPU ratio:" * sp^0 * (num + "?.??" * Cc(false))),
  K("npu_ratio", "Inference NPU ratio:" * sp^0 * (num + "?.??" * Cc(false))),
  K("wait_cycles", "cpu_wait_for_npu_cntr" * sp^0 * ":" * sp^0 * int * " CPU cycles" * perinf),
  K("npu_cycles", "ethosu_pmu_cycle_cntr" * sp^0 * ":" * sp^0 * int * perinf),
  K("npu_counter", "ethosu_pmu_cntr" * int * sp^0 * ":" * sp^0 * int * perinf),
  K("npu_events", "Ethos-U PMU Events:" * sp^0 * "[" * C((1 - S"]\r\n")^0) * "]"),
  K("out_all", out_all), K("out_nt", out_nt), K("out_summary", out_summary),
}

-- Bare lines (logcat text without prefix, RTT output) are looked at only when they start like a known
-- message or a known failure; anything else (noise, GNU time's block, a shell prompt) is skipped fast.
local FAIL_HEAD = choice { P"Failed to ", P"Missing operator", P"Loading of method", P"Execution of method",
  P"In function ", P"File size is too small", P"Program identifier", P"FileDataLoader" }
local HEAD = choice { P"Model ", P"Using method ", P"Setting up ", P"ETDump written", P"Resetting threadpool",
  P"Method loaded", P"PTD file ", P"Inference", digit^1 * " outputs:", P"NPU ", P"ethos", P"Operator(s) total",
  P"cpu_wait_for_npu", P"Ethos-U PMU", P"Reading file ", FAIL_HEAD }

---------------------------------------------------------------------------------------------------------
-- State and handlers (the grammar's function captures call these; they return nothing)
---------------------------------------------------------------------------------------------------------
local st -- the result being built by the current parse (parse() is not re-entrant through handlers)
local lim -- its limits

local function cut(s)
  if #s > lim.max_text then return sub(s, 1, lim.max_text) .. "..." end
  return s
end

local function tsec(t)
  if not t then return nil end
  local h, m, s = match(t, "^(%d+):(%d+):([%d.]+)$")
  return h and (tonumber(h) * 3600 + tonumber(m) * 60 + tonumber(s)) or nil
end

local function to_value(t)
  local v = tonumber(t)
  if v then return v end
  if t == "True" or t == "true" then return true end
  if t == "False" or t == "false" then return false end
  if t == "inf" or t == "+inf" then return math.huge end
  if t == "-inf" then return -math.huge end
  if t == "nan" or t == "-nan" or t == "+nan" then return 0 / 0 end
  return t
end

local function output_slot(idx)
  idx = tointeger(idx) or 0
  for _, o in ipairs(st.outputs) do if o.index == idx then return o end end
  if #st.outputs >= 4096 then return nil end -- bounded: a garbage log must not grow this without end
  local o = { index = idx, values = json.array(), elided = false }
  st.outputs[#st.outputs + 1] = o
  table.sort(st.outputs, function(a, b) return a.index < b.index end)
  return o
end

local function on_summary(idx, szs, vals, text)
  local o = output_slot(idx)
  if not o then return end
  if not szs then
    local head = match(text, "^tensor%(sizes=%[([%d, ]*)%]")
    if head then -- a tensor whose print never closed (output cut off): keep the shape, mark it
      local dims = {}
      for d in head:gmatch("%d+") do dims[#dims + 1] = tonumber(d) end
      o.sizes, o.values, o.elided, o.kind, o.truncated = dims, {}, true, "tensor", true
      return
    end
    -- not a tensor: a scalar, None, a list (`OutputX 0: 3`)
    o.values, o.sizes, o.elided, o.kind, o.raw = { to_value(text) }, {}, false, "scalar", cut(text)
    return
  end
  local out, elided_at = {}, nil
  for i = 1, #vals do
    local v = vals[i]
    if v == ELIDED then
      elided_at = elided_at or #out
    elseif #out < lim.max_values then
      out[#out + 1] = to_value(v)
    end
  end
  o.sizes, o.values, o.elided, o.elided_at, o.kind = szs, out, elided_at ~= nil or #out < #vals, elided_at,
    "tensor"
  local numel = 1
  for _, d in ipairs(szs) do numel = numel * d end
  o.numel = numel
  if elided_at == nil and numel ~= #out then o.elided = numel > #out end
end

local function on_all(i, j, dtype, v)
  local o = output_slot(i)
  if not o then return end
  j = tointeger(j)
  if not j or j < 0 or j >= lim.max_values then o.elided = true; return end
  o.dtype, o.kind, o.flat = dtype, "tensor", true
  o.values[j + 1] = to_value(v)
  if j + 1 > (o.numel or 0) then o.numel = j + 1; o.sizes = { j + 1 } end
end

local function on_notensor(i)
  local o = output_slot(i)
  if o then o.kind = "not_tensor" end
end

local function pmu()
  local p = st.pmu
  if not p then p = { counters = json.array() }; st.pmu = p end
  return p
end

local function add_error(level, text, tag)
  if #st.errors >= lim.max_errors then st.errors_dropped = st.errors_dropped + 1; return end
  local h = match(text, "status 0x(%x+)") or match(text, "failed: 0x(%x+)") or match(text, ": 0x(%x+)%s*%.?%s*$")
  local status = h and #h <= 8 and tonumber(h, 16) or nil
  st.errors[#st.errors + 1] = { level = level or nil, text = cut(text), status = status,
    status_name = status and M.status_names[status] or nil, tag = tag or nil }
end

-- kind handlers: (values...) from KNOWN
local H = {}
function H.model_file(p) st.model_path = p end
function H.method(m) st.method = m end
function H.buffer(kind, idx, size, dtype)
  idx = tointeger(idx)
  local info = st.planned_buffers_info
  if not idx or idx < 0 or #info >= 4096 then return end
  info[#info + 1] = { index = idx, size = size, device = kind == "device" and "device" or "cpu",
    device_type = dtype or nil }
end
function H.loaded_in(ms) st.load_ms = ms end
function H.executed(n, ms) st.num_executions, st.total_ms, st.executed = n, ms, true end
function H.executed1() st.executed = true end
function H.noutputs(n) st.num_outputs = n end
function H.etdump(p) st.etdump_path = p end
function H.threads(n) st.threads = n end
function H.method_loaded() st.method_loaded = true end
function H.ptd(p) st.data_path = p end
function H.inference(ms) st.inferences_ms[#st.inferences_ms + 1] = ms end
function H.missing_op(_, op)
  if #st.missing_operators < lim.max_errors then st.missing_operators[#st.missing_operators + 1] = op end
end
function H.probe() end
function H.npu_inferences(n) pmu().npu_inferences = n end
function H.npu_delegations(n, per) local p = pmu(); p.npu_delegations = n; p.npu_delegations_per_inference = per or nil end
function H.backend_cycles(n, per) local p = pmu(); p.backend_cycles = n; p.backend_cycles_per_inference = per or nil end
function H.operators_cycles(n, per) local p = pmu(); p.operators_cycles = n; p.operators_cycles_per_inference = per or nil end
function H.cpu_cycles(n, per) local p = pmu(); p.cpu_cycles_total = n; p.cpu_cycles_per_inference = per or nil end
function H.cpu_ratio(x) pmu().cpu_ratio_pct = x or nil end
function H.npu_ratio(x) pmu().npu_ratio_pct = x or nil end
function H.wait_cycles(n, per) local p = pmu(); p.cpu_wait_for_npu_cycles = n; p.cpu_wait_for_npu_cycles_per_inference = per or nil end
function H.npu_cycles(n, per) local p = pmu(); p.npu_cycles = n; p.npu_cycles_per_inference = per or nil end
function H.npu_counter(i, n, per)
  i = tointeger(i)
  if not i or i < 0 or i > 63 then return end
  pmu().counters[i + 1] = { index = i, count = n, per_inference = per or nil }
end
function H.npu_events(list)
  local names = {}
  for name in list:gmatch("[^,%s]+") do
    if #names < 64 then names[#names + 1] = (name:gsub("^ETHOSU_PMU_", "")) end
  end
  pmu().events = names
end
H.out_all = on_all
H.out_nt = on_notensor
H.out_summary = on_summary

-- Runs the handler of a KNOWN match; returns its kind (nil when nothing matched).
local function dispatch(kind, ...)
  if kind then H[kind](...) end
  return kind
end

local function is_error_level(l) return l == "E" or l == "F" or l == "A" end

-- A prefixed log line.
local function on_line(lvl, t, file, line, func, tag, text)
  st.log_lines = st.log_lines + 1
  if #st.messages < lim.max_messages then
    st.messages[#st.messages + 1] = { level = lvl, file = file or nil, line = line and tointeger(tonumber(line)) or nil,
      func = func or nil, tag = tag or nil, time_s = tsec(t), text = cut(text) }
  else
    st.messages_dropped = st.messages_dropped + 1
  end
  local kind = dispatch(lpeg.match(KNOWN, text))
  if kind == "probe" then -- CPU identification probes: harmless whatever their level
    if lvl ~= "I" and lvl ~= "D" then st.warnings[#st.warnings + 1] = { level = lvl, text = cut(text) } end
    return
  end
  if is_error_level(lvl) then
    add_error(lvl, text, tag)
  elseif lvl == "W" and #st.warnings < lim.max_errors then
    st.warnings[#st.warnings + 1] = { level = lvl, text = cut(text), tag = tag or nil }
  end
end

-- A bare line that starts like a known message or failure (logcat raw, RTT).
local function on_bare(text)
  local kind = dispatch(lpeg.match(KNOWN, text))
  if kind == "probe" then return end
  local failed = lpeg.match(FAIL_HEAD, text)
  if failed then add_error(nil, text) elseif not kind then return end
  if #st.messages < lim.max_messages then
    st.messages[#st.messages + 1] = { text = cut(text) }
  else
    st.messages_dropped = st.messages_dropped + 1
  end
end

local eol = toeol * nl^-1
local LOG_LINE = PREFIX * rest * eol / on_line
local OUT_SUMMARY_LINE = out_summary * eol / on_summary
local OUT_ALL_LINE = out_all * eol / on_all
local OUT_NT_LINE = out_nt * eol / on_notensor
local BARE_LINE = #HEAD * C((1 - S"\r\n")^1) * eol / on_bare
local SKIP_LINE = notnl^1 * nl^-1 + nl
local ALL_LINES = choice { LOG_LINE, OUT_ALL_LINE, OUT_NT_LINE, OUT_SUMMARY_LINE, BARE_LINE, SKIP_LINE }^0

-- The message entry of the iteration line at linestart (its time is already in iterations_ms).
local PREFIX_REST = PREFIX * rest
local function iter_message(text, linestart, bare)
  if bare then -- like any bare line: a text-only message, not a log line
    st.messages[#st.messages + 1] = { text = cut(lpeg.match(rest, text, linestart)) }
    return
  end
  st.log_lines = st.log_lines + 1
  local lvl, t, file, line, func, tag, msg = lpeg.match(PREFIX_REST, text, linestart)
  st.messages[#st.messages + 1] = { level = lvl, file = file or nil, line = line and tointeger(tonumber(line)) or nil,
    func = func or nil, tag = tag or nil, time_s = tsec(t), text = cut(msg) }
end

-- The text is matched in pieces of about this many bytes, cut at a line start that is not inside a wrapped
-- output tensor: LPeg evaluates captures when a match ends, so a piece bounds the capture memory.
local PIECE_BYTES = 256 * 1024
local GENERATIONAL_BYTES = 4 * 1024 * 1024

local function new_result(stderr_text, stdout_text)
  local A = json.array -- lists stay JSON arrays when empty
  return {
    num_executions = nil, total_ms = nil, executed = false,
    iterations_ms = A(scan.iteration_list(stderr_text, stdout_text)), iterations_total = nil,
    load_ms = nil, planned_buffers = A(), planned_buffers_info = A(), threads = nil, outputs = A(),
    num_outputs = nil, etdump_path = nil, method = nil, method_loaded = false, model_path = nil,
    data_path = nil, messages = A(), messages_dropped = 0, log_lines = 0, errors = A(), errors_dropped = 0,
    warnings = A(), missing_operators = A(), pmu = nil, inferences_ms = A(),
  }
end

local function scan_text(text)
  local pos, n = 1, #text
  local iters = st.iterations_ms
  local iter_at = scan.find_iteration(text, 1) -- start of the next iteration line (n + 1: none)
  while pos <= n do
    if pos == iter_at then
      local nxt, k, bare, total
      if #st.messages < lim.max_messages then -- one line: it gets its message entry
        nxt, k, bare, total = scan.iterations(text, pos, iters, 1)
        iter_message(text, pos, bare == 1)
      else -- the whole run, in C
        nxt, k, bare, total = scan.iterations(text, pos, iters)
        st.log_lines = st.log_lines + k - bare
        st.messages_dropped = st.messages_dropped + k
      end
      st.iterations_total = total
      pos = nxt
      iter_at = scan.find_iteration(text, pos)
    else -- other lines, up to the next iteration line, in pieces of about PIECE_BYTES
      local stop = iter_at - 1
      if stop - pos >= PIECE_BYTES then -- (an iteration line starts with neither ' ' nor ']': found <= stop)
        stop = find(text, "\n[^ %]]", pos + PIECE_BYTES) or stop
      end
      lpeg.match(ALL_LINES, (pos == 1 and stop == n) and text or sub(text, pos, stop))
      pos = stop + 1
    end
  end
end

local function finish(r)
  -- planned_buffers: sizes by ascending index, one per index (the last line for an index wins); dense even
  -- when a cut log lacks an index (planned_buffers_info keeps the indexes)
  local by_index, order = {}, {}
  for _, b in ipairs(r.planned_buffers_info) do
    if by_index[b.index] == nil then order[#order + 1] = b.index end
    by_index[b.index] = b.size
  end
  table.sort(order)
  for i, idx in ipairs(order) do r.planned_buffers[i] = by_index[idx] end
  if r.pmu then
    local names = r.pmu.events or M.pmu_default_events[#r.pmu.counters]
    for i, c in ipairs(r.pmu.counters) do c.event = names and names[i] or nil end
  end
  if r.num_executions == nil and #r.iterations_ms > 0 then r.num_executions = #r.iterations_ms end
  for _, o in ipairs(r.outputs) do
    if o.sizes == nil then o.sizes = {} end
    if o.numel == nil then o.numel = #o.values end
    if o.flat then -- `all` format with lines missing (a cut log): holes become json.null, marked elided
      for j = 1, o.numel do
        if o.values[j] == nil then o.values[j] = json.null; o.elided = true end
      end
    end
  end
end

---@class odp.parse.ExecutorchOutput
---@field index integer        output index as printed (0-based)
---@field kind string          "tensor" | "scalar" | "not_tensor"
---@field sizes integer[]      tensor shape (summary format); {numel} in the `all` format (flat = true)
---@field values any[]         numbers (NaN/inf decoded), booleans; elided middle values are absent
---@field elided boolean       true when the runner did not print every value
---@field elided_at integer?   number of values printed before the `...` gap
---@field numel integer        element count (product of sizes)
---@field dtype string?        "float" | "int" | "char" | "bool" (only the `all` format names it)
---@field flat boolean?        true for the `all` format (sizes unknown)

---@class odp.parse.ExecutorchResult
---@field num_executions integer?  from `Model executed successfully N time(s)`, else #iterations_ms
---@field total_ms number?         total execution time printed by the runner
---@field executed boolean         a `Model executed successfully` line was seen
---@field iterations_ms number[]   per-iteration times (`Iteration i of N: f ms`, v1.3+)
---@field load_ms number?          `Model loaded in f ms` (v1.3+)
---@field planned_buffers integer[] sizes in bytes in buffer index order (index 0 first)
---@field threads integer?         `Resetting threadpool with num threads = N`
---@field outputs odp.parse.ExecutorchOutput[]
---@field etdump_path string?
---@field method string?
---@field model_path string?
---@field messages table[]         {level, file, line, func?, tag?, time_s?, text}
---@field errors table[]           {level, text, status?, status_name?}
---@field warnings table[]         {level, text}
---@field pmu table?               Arm PMU report
---@field inferences_ms number[]   `Inference: f ms` lines (Alif RTT)

--- Parses a runner's stderr and stdout. Either may be nil; a transcript with both streams interleaved
-- can be passed as `stderr_text` alone. Never raises on content.
---@param stderr_text string?
---@param stdout_text string?
---@param opts table?  {max_messages=, max_errors=, max_text=, max_values=} (see M.defaults)
---@return odp.parse.ExecutorchResult
function M.parse(stderr_text, stdout_text, opts)
  if stderr_text ~= nil and type(stderr_text) ~= "string" then
    error("bad argument #1 to 'parse' (string or nil expected, got " .. type(stderr_text) .. ")", 2)
  end
  if stdout_text ~= nil and type(stdout_text) ~= "string" then
    error("bad argument #2 to 'parse' (string or nil expected, got " .. type(stdout_text) .. ")", 2)
  end
  local l = {}
  for k, v in pairs(M.defaults) do l[k] = v end
  for k, v in pairs(opts or {}) do
    if M.defaults[k] == nil then error("parse: unknown option '" .. tostring(k) .. "'", 2) end
    if math.type(v) ~= "integer" or v < 0 then error("parse: option '" .. k .. "' must be a non-negative integer", 2) end
    l[k] = v
  end
  local r = new_result(stderr_text, stdout_text)
  st, lim = r, l
  -- A big log makes millions of short-lived strings: Lua's generational collector handles that ~25% faster
  -- (bench/parse_bench.lua); the host's mode is restored afterwards.
  local big = #(stderr_text or "") + #(stdout_text or "") > GENERATIONAL_BYTES
  local prev_gc = big and collectgarbage("generational")
  local ok, err = pcall(function()
    if stderr_text then scan_text(stderr_text) end
    if stdout_text then scan_text(stdout_text) end
    finish(r)
  end)
  if prev_gc and prev_gc ~= "generational" then collectgarbage("incremental") end
  st, lim = nil, nil
  if not ok then r.internal_error = tostring(err) end -- a parser bug: report it, keep what was parsed
  return r
end

--- The lines the parser needs wherever they stand in a long log (per-iteration timing lines), as a Lua pattern
-- found inside them: what odp keeps of the middle of a runner's output it cannot keep whole
-- (odp.core.headtail's wanted).
M.TIMING_LINE = "Iteration %d+ of %d+: "

--- Name of an ExecuTorch status code (integer), or nil.
---@param code integer
---@return string?
function M.status_name(code) return M.status_names[code] end

return M
