-- odp.parse.etdump against real ETDumps (tests/fixtures/etdump), with flatc's decodes as the expected values.
local T = require("t")
local json = require("odp.core.json")
local etdump = require("odp.parse.etdump")

local dir = T.root() .. "/tests/fixtures/etdump/"
local FIXTURES = { "add_n0", "add_n1", "add_n10", "datamap_ptd_n10", "docs_tutorial" }
local function file(name) return dir .. name .. (name == "docs_tutorial" and ".etdp" or ".etdump") end

for _, name in ipairs(FIXTURES) do
  T.test(name .. ": every run and event matches flatc's decode", function()
    local want = json.decode(T.read(dir .. name .. ".flatc.json"))
    local doc = assert(etdump.read(file(name)))
    T.eq(doc.version, want.version, "version")
    T.eq(doc.size_prefixed, true, "size_prefixed")
    T.eq(#doc.run_data, #want.run_data, "run count")
    local total = 0
    for i, wr in ipairs(want.run_data) do
      local r = doc.run_data[i]
      T.eq(r.name, wr.name, "run name")
      T.eq(r.bundled_input_index, wr.bundled_input_index, "bundled_input_index")
      T.eq(#r.events, #(wr.events or {}), "event count of run " .. i)
      for j, we in ipairs(wr.events or {}) do
        local e, pe = r.events[j], we.profile_event
        T.ok(pe, "fixture event is a profile event")
        T.eq(e.kind, "profile", "kind")
        for _, f in ipairs({ "name", "chain_index", "instruction_id", "delegate_debug_id_int", "start_time",
          "end_time" }) do
          T.eq(e[f], pe[f], ("run %d event %d %s"):format(i, j, f))
        end
        T.eq(e.duration, pe.end_time - pe.start_time, "duration")
        total = total + 1
      end
    end
    T.ok(total > 0, "events compared")
  end)
end

T.test("read accepts bytes as well as a path", function()
  local doc = assert(etdump.read(T.read(dir .. "add_n1.etdump")))
  T.eq(#doc.run_data, 2)
  T.eq(doc.run_data[2].events[3].name, "Method::execute")
end)

T.test("add_n10: ten Execute runs merge into one block with ten samples per event", function()
  local doc = assert(etdump.read(dir .. "add_n10.etdump"))
  T.eq(etdump.block_names(doc), { "Default", "Execute" })
  local rows, unit = etdump.ops(doc)
  T.eq(unit, "ms")
  T.eq(#rows, 5)
  local by = {}
  for _, r in ipairs(rows) do by[r.block .. "/" .. r.name] = r end
  local add = by["Execute/native_call_add.out"]
  T.eq(add.n, 10)
  -- numpy.percentile (linear) of the ten (end - start) / 1e6 from add_n10.flatc.json
  T.near(add.p10, 0.00021, 1e-9, "p10")
  T.near(add.p50, 0.000216, 1e-9, "p50")
  T.near(add.p90, 0.0156226, 1e-9, "p90")
  T.near(add.avg, 0.0153885, 1e-9, "avg")
  T.near(add.min, 0.00021, 1e-9, "min")
  T.near(add.max, 0.151618, 1e-9, "max")
  T.eq(add.framework, false)
  T.eq(add.delegated, false)
  T.eq(by["Execute/OPERATOR_CALL"].framework, true)
  T.eq(by["Default/Method::init"].n, 1)
  local ex = by["Execute/Method::execute"]
  T.near(ex.p50, 0.0005455, 1e-9, "execute p50")
  T.near(ex.p90, 0.0329878, 1e-9, "execute p90")
end)

T.test("latency: Method::execute samples in ms, in file order", function()
  local want = json.decode(T.read(dir .. "add_n10.flatc.json"))
  local expect = {}
  for _, r in ipairs(want.run_data) do
    for _, e in ipairs(r.events or {}) do
      local p = e.profile_event
      if p.name == "Method::execute" then expect[#expect + 1] = (p.end_time - p.start_time) / 1e6 end
    end
  end
  local got = etdump.latency(assert(etdump.read(dir .. "add_n10.etdump")))
  T.eq(#got, 10)
  for i = 1, 10 do T.near(got[i], expect[i], 1e-12) end
  T.near(got[1], 0.17398, 1e-9, "first (cold) inference")
end)

T.test("add_n0: no Execute block, no latency samples", function()
  local doc = assert(etdump.read(dir .. "add_n0.etdump"))
  T.eq(etdump.block_names(doc), { "Default" })
  T.eq(#etdump.latency(doc), 0)
end)

T.test("docs_tutorial.etdp: ExecuTorch's shipped ETDump, one run a block: every op row is its flatc event", function()
  local want = json.decode(T.read(dir .. "docs_tutorial.flatc.json"))
  local events = {}
  for _, wr in ipairs(want.run_data) do
    for _, we in ipairs(wr.events) do events[#events + 1] = { block = wr.name, pe = we.profile_event } end
  end
  local rows, unit = etdump.ops(assert(etdump.read(dir .. "docs_tutorial.etdp")))
  T.eq(unit, "ms")
  T.eq(#rows, #events, "one row per event")
  local visible = 0
  for i, ev in ipairs(events) do
    local r, d = rows[i], (ev.pe.end_time - ev.pe.start_time) / 1e6
    T.eq({ r.block, r.name, r.n, r.framework }, { ev.block, ev.pe.name, 1, ev.pe.name == "OPERATOR_CALL" }, "row " .. i)
    for _, f in ipairs { "p10", "p50", "p90", "avg", "min", "max" } do T.near(r[f], d, 1e-12, ("row %d %s"):format(i, f)) end
    if ev.pe.name ~= "OPERATOR_CALL" then visible = visible + 1 end
  end
  T.eq(visible, 17, "rows left after hiding OPERATOR_CALL (counted in the decode)")
  T.eq(rows[#rows].name, "Method::execute")
end)

T.test("time scales: cycles stay cycles, or convert with clock_hz", function()
  local doc = assert(etdump.read(dir .. "add_n1.etdump"))
  local rows, unit = etdump.ops(doc, { time_scale = "cycles" })
  T.eq(unit, "cycles")
  T.eq(rows[3].name, "native_call_add.out")
  T.eq(rows[3].p50, 124816)
  rows, unit = etdump.ops(doc, { time_scale = "cycles", clock_hz = 1e9 })
  T.eq(unit, "ms")
  T.near(rows[3].p50, 0.124816, 1e-12)
  rows = etdump.ops(doc, { time_scale = "us" })
  T.near(rows[3].p50, 124.816, 1e-12)
  T.raises(function() etdump.ops(doc, { time_scal = "ns" }) end, "unknown option")
  T.raises(function() etdump.ops(doc, { time_scale = "fortnights" }) end, "time_scale")
end)

T.test("duration survives a 32-bit wrap the way the Inspector computes it", function()
  T.eq(etdump.duration(100, 250), 150)
  T.eq(etdump.duration(0xfffffff0, 0x10), 0xf + 0x10)
  T.eq(etdump.duration(0x1fffffff0, 0x10), nil)
end)

T.test("not an ETDump, missing file, truncated: errors, not crashes", function()
  local d, err, code = etdump.read(dir .. "nope.etdump")
  T.eq(d, nil)
  T.eq(code, "ENOTFOUND")
  d, err, code = etdump.read(T.root() .. "/tests/fixtures/pte/add_arduino.pte")
  T.eq(code, "EPROTO")
  T.match(err, "ED00")
  local bytes = T.read(dir .. "add_n10.etdump")
  d, err, code = etdump.read(bytes:sub(1, 16))
  T.eq(code, "EPROTO")
  T.match(err, "truncated ETDump: the size prefix says 2540 bytes, the file holds 12, too few to read anything")
end)

T.test("cut short (its writer died): read as far as it goes, what lay past the cut counted", function()
  local bytes = T.read(dir .. "add_n10.etdump")
  local whole = assert(etdump.read(bytes))
  T.eq(whole.partial, nil, "a whole file is not partial")
  -- flatbuffers are built back to front: the first run (Default) and its strings lie at the end of the file
  local d = assert(etdump.read(bytes:sub(1, #bytes - 16)))
  T.eq(d.partial, { declared_bytes = #bytes - 4, bytes = #bytes - 16, events_lost = 0, runs_lost = 1 })
  local rows = etdump.ops(d)
  local want = {}
  for _, row in ipairs(etdump.ops(whole)) do if row.block == "Execute" then want[#want + 1] = row end end
  T.eq(rows, want, "the Execute block, whole before the cut, as in the whole file")
  -- every cut: no crash, a partial dump or the one error; never more events than the whole file has
  local events = 0
  for _, run in ipairs(whole.run_data) do events = events + #run.events end
  for n = 12, #bytes - 1 do
    local p, perr = etdump.read(bytes:sub(1, n))
    if p then
      local kept = 0
      for _, run in ipairs(p.run_data) do kept = kept + #run.events end
      T.ok(kept + p.partial.events_lost <= events, ("cut at %d: %d kept + %d lost"):format(n, kept, p.partial.events_lost))
      T.eq(p.partial.bytes, n)
    else
      T.match(perr, "truncated ETDump", "cut at " .. n)
    end
  end
end)

T.test("built ETDump: allocation and debug events, Value kinds, delegated events, wrap", function()
  local fb = require("fbuild")
  local bytes = fb.etdump { version = 3, run_data = {
    { name = "Execute", bundled_input_index = 2, allocators = { { name = "planned" }, { name = "temp" } }, events = {
      { kind = "profile", name = "DELEGATE_CALL", instruction_id = 1, start_time = 100, end_time = 300 },
      { kind = "profile", name = "conv #1", instruction_id = 1, delegate_debug_id_int = 7,
        delegate_debug_metadata = "\1\2", start_time = 0xfffffff0, end_time = 0x20 },
      { kind = "profile", name = "fc", instruction_id = 1, delegate_debug_id_str = "fc_0", start_time = 5, end_time = 9 },
      { kind = "allocation", allocator_id = 1, allocation_size = 4096 },
      { kind = "debug", name = "aten::add", instruction_id = 2, debug_entry = { val = "Tensor",
        tensor = { scalar_type = 6, sizes = { 1, 3 }, strides = { 3, 1 }, offset = 64 } } },
      { kind = "debug", instruction_id = 3, debug_entry = { val = "TensorList",
        tensor_list = { { sizes = { 2 } }, { sizes = { 4, 4 } } } } },
      { kind = "debug", instruction_id = 4, debug_entry = { val = "Int", int_value = -5 } },
      { kind = "debug", instruction_id = 5, debug_entry = { val = "Double", double_value = 2.5, output = true } },
      { kind = "debug", instruction_id = 6, debug_entry = { val = "Float", float_value = 1.5, bool_value = true } },
    } } } }
  local doc = assert(etdump.read(bytes))
  T.eq(doc.version, 3)
  local r = doc.run_data[1]
  T.eq(r.bundled_input_index, 2)
  T.eq(r.allocators, { { name = "planned" }, { name = "temp" } })
  local e = r.events
  T.eq(#e, 9)
  T.eq(e[2].duration, 0xffffffff - 0xfffffff0 + 0x20, "32-bit wrap")
  T.eq(e[2].delegate_debug_metadata, "\1\2")
  T.eq(e[3].delegate_debug_id_str, "fc_0")
  T.eq({ e[4].kind, e[4].allocator_id, e[4].allocation_size }, { "allocation", 1, 4096 })
  T.eq(e[5].name, "aten::add")
  T.eq(e[5].debug_entry.tensor, { scalar_type = 6, scalar_type_name = "FLOAT", sizes = { 1, 3 }, strides = { 3, 1 },
    offset = 64 })
  T.eq(#e[6].debug_entry.tensor_list, 2)
  T.eq(e[6].debug_entry.tensor_list[2].sizes, { 4, 4 })
  T.eq(e[7].debug_entry.int_value, -5)
  T.eq({ e[8].debug_entry.double_value, e[8].debug_entry.output }, { 2.5, true })
  T.eq({ e[9].debug_entry.float_value, e[9].debug_entry.bool_value, e[9].debug_entry.val }, { 1.5, true, "Float" })
  local rows = etdump.ops(doc, { time_scale = "cycles" })
  T.eq(#rows, 3)
  T.eq({ rows[1].name, rows[1].delegated, rows[1].p50 }, { "DELEGATE_CALL", false, 200 })
  T.eq({ rows[2].name, rows[2].delegated, rows[2].delegate_id, rows[2].p50 }, { "7", true, 7, 47 })
  T.eq({ rows[3].name, rows[3].delegate_id }, { "fc_0", "fc_0" })
end)

-- Runs that exercise the merge's corners: instructions interleaved, a signature repeated in one run,
-- debug-only instructions, run-output debug events, runs with another pattern (a block of their own).
local function tricky()
  local fb = require("fbuild")
  local function execute(extra, shift)
    local ev = {
      { kind = "profile", name = "native_call_a", chain_index = 0, instruction_id = 0, start_time = 10 + shift, end_time = 20 + shift },
      { kind = "profile", name = "native_call_b", chain_index = 0, instruction_id = 1, start_time = 30, end_time = 45 + shift },
      { kind = "profile", name = "OPERATOR_CALL", chain_index = 0, instruction_id = 0, start_time = 5, end_time = 25 + shift },
      { kind = "debug", name = "dbg", instruction_id = 2, debug_entry = { val = "Int", int_value = 1 } },
      { kind = "debug", instruction_id = 3, debug_entry = { val = "Int", int_value = 1, output = true } },
      { kind = "profile", name = "native_call_b", chain_index = 0, instruction_id = 1, start_time = 50, end_time = 58 + shift },
      { kind = "profile", name = "x #1", instruction_id = 4, delegate_debug_id_int = 3, start_time = 60, end_time = 61 + shift },
      { kind = "profile", name = "x #2", instruction_id = 4, delegate_debug_id_str = "node_7", start_time = 62, end_time = 70 },
      { kind = "allocation", allocator_id = 0, allocation_size = 8 },
      { kind = "profile", name = "Method::execute", chain_index = -1, instruction_id = 0, start_time = 0, end_time = 100 + shift },
    }
    if extra then ev[#ev + 1] = { kind = "profile", name = "extra", instruction_id = 9, start_time = 1, end_time = 2 } end
    return { name = "Execute", events = ev }
  end
  local runs = { { name = "Default", events = { { kind = "profile", name = "Method::init", instruction_id = 0,
    chain_index = -1, start_time = 1, end_time = 9 } } } }
  for i = 1, 5 do runs[#runs + 1] = execute(i == 3, i) end
  runs[#runs + 1] = { name = "Execute", bundled_input_index = 1, events = execute(false, 0).events }
  return fb.etdump { run_data = runs }
end

T.test("the C merge and the Lua merge agree on every fixture and on a tricky dump", function()
  local inputs = {}
  for _, n in ipairs(FIXTURES) do inputs[#inputs + 1] = file(n) end
  inputs[#inputs + 1] = tricky()
  for _, input in ipairs(inputs) do
    local a = etdump.blocks(assert(etdump.read(input)))
    local b = etdump.blocks(assert(etdump.read(input)), { lua = true })
    T.eq(a, b, #input < 200 and input or "tricky")
    local d = assert(etdump.read(input))
    local _ = d.run_data[1].events -- touched: the Lua path over tables
    T.eq(etdump.blocks(d), a, "tables path")
  end
end)

T.test("tricky dump: blocks, order, repeated signature keeps its place and its last event", function()
  local doc = assert(etdump.read(tricky()))
  local bl = etdump.blocks(doc)
  T.eq(#bl, 4, "Default, Execute x4, Execute with an extra op, Execute with bundled input 1")
  T.eq({ bl[2].name, bl[2].runs, bl[3].runs, bl[4].runs, bl[4].bundled_input_index }, { "Execute", 4, 1, 1, 1 })
  local names = {}
  for i, e in ipairs(bl[2].events) do names[i] = e.name .. (e.profile and "" or "(debug)") end
  T.eq(names, { "native_call_a", "OPERATOR_CALL", "native_call_b", "dbg(debug)", "x #1", "x #2", "Method::execute" })
  T.eq(bl[2].events[3].samples, { 8 + 1, 8 + 2, 8 + 4, 8 + 5 }, "native_call_b: the last of the two, per run")
  T.eq(bl[2].events[5].delegate_id, 3)
  T.eq(bl[2].events[6].delegate_id, "node_7")
  local rows = etdump.ops(doc, { time_scale = "cycles" })
  local r5
  for _, r in ipairs(rows) do if r.block == "Execute" and r.name == "node_7" then r5 = r break end end
  T.eq({ r5.n, r5.delegated, r5.p50 }, { 4, true, 8 })
end)

-- ops_summary's oracle: flatc's decode, walked here independently (per Execute run: Method::execute, the
-- OPERATOR_CALL and DELEGATE_CALL events' end - start, in ns) with a median of its own.
local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end

for _, name in ipairs(FIXTURES) do
  T.test(name .. ": ops_summary agrees with flatc's decode", function()
    local want = json.decode(T.read(dir .. name .. ".flatc.json"))
    local exe, ker, oth = {}, {}, {}
    for _, wr in ipairs(want.run_data) do
      local ops, e = 0, nil
      for _, we in ipairs(wr.events or {}) do
        local pe = we.profile_event
        local d = pe.end_time - pe.start_time
        if pe.name == "OPERATOR_CALL" then ops = ops + d elseif pe.name == "Method::execute" then e = d end
      end
      if e then exe[#exe + 1], ker[#ker + 1], oth[#oth + 1] = e / 1e6, ops / 1e6, (e - ops) / 1e6 end
    end
    local s = etdump.ops_summary(assert(etdump.read(file(name))))
    if #exe == 0 then return T.eq(s, nil, "no Method::execute, no summary") end
    T.eq({ s.n, s.unit, s.delegated_ms, s.delegated_share }, { #exe, "ms", 0, 0 }, "no delegates in these models")
    T.near(s.execute_ms, median(exe), 1e-12, "execute")
    T.near(s.kernels_ms, median(ker), 1e-12, "kernels")
    T.near(s.other_ms, median(oth), 1e-12, "other")
  end)
end

T.test("ops_summary, hand-checked: add_n1 and the Method::execute row of add_n10", function()
  -- add_n1.flatc.json: Method::execute 1232297..1379156, OPERATOR_CALL 1232939..1378815 (ns)
  local s = etdump.ops_summary(assert(etdump.read(dir .. "add_n1.etdump")))
  T.near(s.execute_ms, 0.146859, 1e-12)
  T.near(s.kernels_ms, 0.145876, 1e-12)
  T.near(s.other_ms, 0.000983, 1e-9)
  local doc = assert(etdump.read(dir .. "add_n10.etdump"))
  s = etdump.ops_summary(doc)
  for _, r in ipairs(etdump.ops(doc)) do
    if r.name == "Method::execute" then T.eq(s.execute_ms, r.p50, "same median as the op table") end
  end
  T.eq(etdump.ops_summary(assert(etdump.read(dir .. "add_n0.etdump"))), nil, "no inference")
end)

-- A delegated model as ExecuTorch's runtime records it: per inference one kernel instruction (its kernel
-- event inside OPERATOR_CALL), one delegate instruction (the backend's own events inside DELEGATE_CALL),
-- then Method::execute; the last run is a runtime that logs only the delegate's events.
local function delegated_dump()
  local fb = require("fbuild")
  local runs = {}
  for i, t in ipairs({ { 100, 600, 1000 }, { 120, 700, 1000 }, { 140, 800, 1000 } }) do
    local op, dl, ex = t[1], t[2], t[3]
    runs[i] = { name = "Execute", events = {
      { kind = "profile", name = "native_call_add.out", instruction_id = 0, start_time = 15, end_time = 10 + op },
      { kind = "profile", name = "OPERATOR_CALL", instruction_id = 0, start_time = 10, end_time = 10 + op },
      { kind = "profile", name = "conv", instruction_id = 1, delegate_debug_id_int = 4, start_time = 200, end_time = 400 },
      { kind = "profile", name = "fc", instruction_id = 1, delegate_debug_id_str = "fc_0", start_time = 400, end_time = 500 },
      { kind = "profile", name = "DELEGATE_CALL", instruction_id = 1, start_time = 150, end_time = 150 + dl },
      { kind = "profile", name = "Method::execute", instruction_id = 0, chain_index = -1, start_time = 0, end_time = ex },
    } }
  end
  runs[4] = { name = "Execute", events = {
    { kind = "profile", name = "conv", instruction_id = 1, delegate_debug_id_int = 4, start_time = 0, end_time = 300 },
    { kind = "profile", name = "fc", instruction_id = 1, delegate_debug_id_str = "fc_0", start_time = 300, end_time = 700 },
    { kind = "profile", name = "Method::execute", instruction_id = 0, chain_index = -1, start_time = 0, end_time = 1000 },
  } }
  return fb.etdump { run_data = runs }
end

T.test("ops_summary, built ETDump with delegate events: medians of four inferences", function()
  local doc = assert(etdump.read(delegated_dump()))
  -- delegated per inference: 600, 700, 800 (DELEGATE_CALL), 700 (conv + fc, no DELEGATE_CALL) -> median 700
  -- kernels: 100, 120, 140, 0 -> 110; other: 300, 180, 60, 300 -> 240; shares .6 .7 .8 .7 -> .7
  local s = etdump.ops_summary(doc, { time_scale = "cycles" })
  T.eq({ s.n, s.unit, s.execute_ms, s.delegated_ms, s.kernels_ms, s.other_ms }, { 4, "cycles", 1000, 700, 110, 240 })
  T.near(s.delegated_share, 0.7, 1e-12)
  s = etdump.ops_summary(doc, { time_scale = "cycles", clock_hz = 1e6 })
  T.eq({ s.unit, s.execute_ms, s.delegated_ms }, { "ms", 1, 0.7 }, "1 MHz: 1000 cycles = 1 ms")
  local touched = assert(etdump.read(delegated_dump()))
  local _ = touched.run_data[1].events
  T.eq(etdump.ops_summary(touched, { time_scale = "cycles" }), etdump.ops_summary(doc, { time_scale = "cycles" }),
    "the tables path agrees with the columns path")
  T.raises(function() etdump.ops_summary(doc, { scale = "ns" }) end, "unknown option")
end)

T.test("events are decoded on first touch and show up in pairs/json", function()
  local doc = assert(etdump.read(dir .. "add_n1.etdump"))
  T.eq(rawget(doc.run_data[2], "events"), nil, "not yet")
  local enc = json.encode(doc)
  T.match(enc, "native_call_add%.out")
  T.eq(#doc.run_data[2].events, 3)
end)

T.done()
