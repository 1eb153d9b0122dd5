-- `odp inspect` end to end (the real binary on the fixtures) and the Chrome trace export.
local T = require("t")
local json = require("odp.core.json")
local proc = require("odp.proc")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local fx = root .. "/tests/fixtures/"

local function inspect(...)
  local argv = { odp, "inspect", ... }
  argv.timeout = 30
  return proc.run(argv)
end

T.test("etdump, human: op table without OPERATOR_CALL, p50 of the add kernel", function()
  local r = inspect(fx .. "etdump/add_n10.etdump")
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "blocks: Default %(1 run%), Execute %(10 runs%)")
  -- one unit for the table, from its values, named in each header; four significant digits (flatc's decode of
  -- the fixture: 210 and 216 ns, p90 15625 ns)
  T.match(r.stdout, "n%s+p10 µs%s+p50 µs%s+p90 µs%s+avg µs%s+min µs%s+max µs%s+delegate\n", "one unit for the table")
  T.match(r.stdout, "Execute%s+native_call_add%.out%s+10%s+0%.2100%s+0%.2160%s+15%.62%s")
  T.ok(not r.stdout:find("Execute%s+OPERATOR_CALL"), "OPERATOR_CALL hidden")
  T.match(r.stdout, "1 OPERATOR_CALL row hidden")
  r = inspect(fx .. "etdump/add_n10.etdump", "--all")
  T.match(r.stdout, "Execute%s+OPERATOR_CALL%s+10")
end)

T.test("etdump cut short: the cut said, the ops before it shown (the Default run lay past it)", function()
  local whole = T.read(fx .. "etdump/add_n10.etdump")
  local cut = T.tmpdir() .. "/cut.etdump"
  T.write(cut, whole:sub(1, #whole - 16))
  local r = inspect(cut)
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "blocks: Execute %(10 runs%)\ncut short: " .. (#whole - 16) .. " of its " .. #whole ..
    " bytes %(its writer died%?%); what lies whole before the cut is read, 0 event%(s%) and 1 run%(s%) past it lost\n")
  T.match(r.stdout, "Execute%s+native_call_add%.out%s+10%s+210%.0%s+216%.0%s", "the kernel's rows as in the whole file")
end)

T.test("etdump, json: kind, version, blocks, ops with OPERATOR_CALL flagged", function()
  local r = inspect(fx .. "etdump/add_n10.etdump", "--format", "json")
  T.eq(r.status, 0, r.stderr)
  local d = assert(json.decode(r.stdout))
  T.eq(d.kind, "etdump")
  T.eq(d.version, 0)
  T.eq(d.blocks, { "Default", "Execute" })
  T.eq(#d.ops, 5)
  local framework = {}
  for _, o in ipairs(d.ops) do if o.framework then framework[#framework + 1] = o.name end end
  T.eq(framework, { "OPERATOR_CALL" })
  T.near(d.ops[3].p90, 0.0156226, 1e-9)
end)

T.test("etdump, csv to a file; trace to a file", function()
  local dir = T.tmpdir()
  local r = inspect(fx .. "etdump/docs_tutorial.etdp", "--format", "csv", "--out", dir .. "/ops.csv",
    "--trace", dir .. "/trace.json")
  T.eq(r.status, 0, r.stderr)
  local lines = {}
  for l in T.read(dir .. "/ops.csv"):gmatch("[^\n]+") do lines[#lines + 1] = l end
  T.eq(lines[1], "block,name,n,p10,p50,p90,avg,min,max,delegated,delegate_id,framework")
  -- the oracle: flatc's decode of the same file (one run a block: each event is one row, n = 1)
  local want = json.decode(T.read(fx .. "etdump/docs_tutorial.flatc.json"))
  local events = {}
  for _, wr in ipairs(want.run_data) do
    for _, we in ipairs(wr.events) do events[#events + 1] = { block = wr.name, pe = we.profile_event } end
  end
  T.eq(#lines, #events + 1, "a header and one line per event")
  for i, ev in ipairs(events) do
    local block, name, n, p50 = lines[i + 1]:match("^([^,]*),([^,]*),(%d+),[^,]*,([^,]*),")
    T.eq({ block, name, n }, { ev.block, ev.pe.name, "1" }, "csv line " .. i + 1)
    T.near(tonumber(p50), (ev.pe.end_time - ev.pe.start_time) / 1e6, 1e-6, "csv line " .. i + 1 .. " p50 (ms)")
  end
  local tr = assert(json.decode(T.read(dir .. "/trace.json")))
  local got_x, want_x, names = {}, {}, {}
  for _, e in ipairs(tr.traceEvents) do
    if e.ph == "X" then
      T.ok(e.ts > 0, "µs times")
      got_x[#got_x + 1] = ("%s %.3f"):format(e.name, e.dur)
    elseif e.name == "thread_name" then
      names[#names + 1] = e.args.name
    end
  end
  for i, ev in ipairs(events) do want_x[i] = ("%s %.3f"):format(ev.pe.name, (ev.pe.end_time - ev.pe.start_time) / 1e3) end
  table.sort(got_x); table.sort(want_x)
  T.eq(got_x, want_x, "one complete event per profile event, its duration in µs")
  T.eq(names, { "Default", "Execute" }, "one track per block")
end)

T.test("trace: ns -> µs; cycles with a clock, or 1 cycle = 1 µs with a note", function()
  local trace = require("odp.results.trace")
  local doc = assert(require("odp.parse.etdump").read(fx .. "etdump/add_n1.etdump"))
  local tr = trace.chrome(doc)
  local ev
  for _, e in ipairs(tr.traceEvents) do if e.name == "native_call_add.out" then ev = e end end
  T.eq(ev.ts, 1253.518)
  T.eq(ev.dur, 124.816)
  tr = trace.chrome(doc, { time_scale = "cycles", clock_hz = 2e6 })
  for _, e in ipairs(tr.traceEvents) do if e.name == "native_call_add.out" then ev = e end end
  T.eq(ev.dur, 124816 / 2)
  tr = trace.chrome(doc, { time_scale = "cycles" })
  T.match(tr.otherData.note, "1 cycle = 1 us")
  T.raises(function() trace.chrome(doc, { clock = 1 }) end, "unknown option")
end)

T.test("trace.encode writes what the general JSON encoder writes, byte for byte, in a fraction of its time", function()
  local trace = require("odp.results.trace")
  for _, f in ipairs { "add_n10.etdump", "docs_tutorial.etdp", "datamap_ptd_n10.etdump", "add_n0.etdump" } do
    local doc = assert(require("odp.parse.etdump").read(fx .. "etdump/" .. f))
    for _, o in ipairs { {}, { time_scale = "cycles" }, { time_scale = "cycles", clock_hz = 3e6 } } do
      local tr = trace.chrome(doc, o)
      T.ok(trace.encode(tr) == json.encode(tr), f .. " " .. json.encode(o))
    end
  end
end)

T.test("etdump: the time split (delegated / kernels / other), human and json", function()
  local r = inspect(fx .. "etdump/add_n1.etdump", "--format", "json")
  local s = assert(json.decode(r.stdout)).ops_summary
  T.eq({ s.n, s.delegated_ms, s.delegated_share, s.unit }, { 1, 0, 0, "ms" })
  T.near(s.kernels_ms, 0.145876, 1e-12, "OPERATOR_CALL 1232939..1378815 ns (flatc)")
  -- a delegated inference as the runtime logs it: 2 ms in DELEGATE_CALL of a 3 ms Method::execute
  local fb = require("fbuild")
  local dir = T.tmpdir()
  T.write(dir .. "/d.etdump", fb.etdump { run_data = { { name = "Execute", events = {
    { kind = "profile", name = "OPERATOR_CALL", instruction_id = 0, start_time = 0, end_time = 250000 },
    { kind = "profile", name = "conv", instruction_id = 1, delegate_debug_id_int = 3, start_time = 300000, end_time = 2200000 },
    { kind = "profile", name = "DELEGATE_CALL", instruction_id = 1, start_time = 250000, end_time = 2250000 },
    { kind = "profile", name = "Method::execute", instruction_id = 0, start_time = 0, end_time = 3000000 } } } } })
  r = inspect(dir .. "/d.etdump")
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, "time split: delegated 2%.000 ms %(67%%%) · kernels 250%.0 µs · other 750%.0 µs · execute 3%.000 ms %(medians of 1%)")
  r = inspect(dir .. "/d.etdump", "--format", "json")
  s = assert(json.decode(r.stdout)).ops_summary
  T.near(s.delegated_share, 2 / 3, 1e-12)
  r = inspect(fx .. "etdump/add_n0.etdump")
  T.ok(not r.stdout:find("time split"), "no inference, no split")
end)

T.test("pte, json: identifier, bytes, methods, delegates with scratch_size", function()
  local r = inspect(fx .. "pte/mnist_ethos_u55.pte", "--format", "json")
  T.eq(r.status, 0, r.stderr)
  local d = assert(json.decode(r.stdout))
  T.eq({ d.kind, d.identifier, d.bytes }, { "pte", "ET12", 113376 })
  T.eq(d.methods[1].name, "forward")
  T.eq(#d.delegates, 1)
  T.eq({ d.delegates[1].backend, d.delegates[1].scratch_size }, { "EthosUBackend", 104160 })
  r = inspect(fx .. "pte/mnist_ethos_u55.pte")
  T.match(r.stdout, "Vela scratch_size 104160 B")
end)

T.test("truncated .pte, unknown file, missing file: one-line errors and exit codes", function()
  local r = inspect(fx .. "pte/truncated_600B.pte")
  T.eq(r.status, 2, "a bad file is usage: exit 2")
  T.match(r.stderr, "truncated %.pte: the extended header expects 1156 bytes, the file has 600")
  r = inspect(fx .. "README.md")
  T.eq(r.status, 2)
  T.match(r.stderr, "not an ETDump")
  r = inspect(fx .. "nope.bin")
  T.eq(r.status, 2)
end)

T.test("an ELF is recognised by its bytes: odp.elf's fields, as readelf -h reads them", function()
  local r = inspect(odp, "--format", "json")
  T.eq(r.status, 0, r.stderr)
  local d = assert(json.decode(r.stdout))
  T.eq(d.kind, "elf")
  local h = assert(proc.run { "readelf", "-h", odp, timeout = 30 })
  T.eq(h.status, 0, h.stderr)
  local machine = ({ ["Advanced Micro Devices X86-64"] = "x86_64", AArch64 = "aarch64" })[h.stdout:match("Machine:%s+([^\n]-)%s*\n")]
  T.eq(d.machine, machine, "readelf: " .. h.stdout:match("Machine:[^\n]*"))
end)

T.done()
