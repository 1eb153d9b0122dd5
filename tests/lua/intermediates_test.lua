-- Intermediate outputs op by op (issue 31): ETDumps with debug events built by tests/lib/fbuild.lua in the real
-- layout (the runners here log none), their tensors' bytes in debug buffers; odp names the first operator whose
-- output falls below --min-cosine, and its numbers are numpy's on the same bytes (tests/lib/numcmp_oracle.py).
local T = require("t")
local fb = require("fbuild")
local proc = require("odp.proc")
local json = require("odp.core.json")
local numcmp = require("odp.numcmp")
local etdump = require("odp.parse.etdump")
local im = require("odp.results.intermediates")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local dir = T.tmpdir()

local OPS = { "aten::convolution", "aten::relu", "aten::group_norm", "aten::addmm", "aten::softmax" }
local PER = 16 * 4 -- each op's output: float32 [2, 8]

-- An ETDump whose Execute run logs each op's output (a debug event per op, its tensor at offset k * PER), and
-- the debug buffer that holds them; change(k, bytes) -> the bytes of op k in this one.
local function build(name, change)
  local events, parts = {}, {}
  for k, op in ipairs(OPS) do
    events[#events + 1] = { kind = "profile", name = "native_call_" .. op, chain_index = 0, instruction_id = k - 1,
      start_time = k * 100, end_time = k * 100 + 50 }
    events[#events + 1] = { kind = "debug", name = op, chain_index = 0, instruction_id = k - 1,
      debug_entry = { val = "Tensor", tensor = { scalar_type = 6, sizes = { 2, 8 }, strides = { 8, 1 },
        offset = (k - 1) * PER } } }
    local bytes = numcmp.generate(PER, "float32", 11, k)
    parts[k] = change and change(k, bytes) or bytes
  end
  T.write(dir .. "/" .. name .. ".etdump", fb.etdump { version = 0, run_data = { { name = "Execute", events = events } } })
  T.write(dir .. "/" .. name .. ".bin", table.concat(parts))
  return dir .. "/" .. name .. ".etdump", dir .. "/" .. name .. ".bin"
end

-- op 3 (group_norm) drifts badly, op 2 a little, everything after follows op 3
local function drift(k, bytes)
  local v = { string.unpack("<" .. ("f"):rep(16), bytes) }
  v[17] = nil
  if k == 2 then v[1] = v[1] + 1e-4 end
  if k >= 3 then for i = 1, 8 do v[i] = -v[i] end end
  return string.pack("<" .. ("f"):rep(16), table.unpack(v, 1, 16))
end

local ref_etd, ref_bin = build("ref")
local got_etd, got_bin = build("got", drift)

T.test("collect: each op's output from the debug buffer, in order, keyed by instruction", function()
  local list = im.collect(assert(etdump.read(ref_etd)), T.read(ref_bin))
  T.eq(#list, #OPS)
  for k, r in ipairs(list) do
    T.eq({ r.name, r.instruction_id, r.dtype, r.numel, r.key }, { OPS[k], k - 1, "float32", 16, ("0:%d:nil:1#1"):format(k - 1) })
    T.eq(r.data, numcmp.generate(PER, "float32", 11, k))
  end
  -- bounds: a buffer cut short marks the outputs past its end, never reads beyond it
  list = im.collect(assert(etdump.read(ref_etd)), T.read(ref_bin):sub(1, 3 * PER - 1))
  T.eq(list[2].error, nil)
  T.match(list[3].error, "64 bytes at offset 128 are past the debug buffer's 191 bytes")
  T.eq(im.collect(assert(etdump.read(ref_etd)), nil)[1].error, "no debug buffer")
end)

T.test("compare: the first op below the cosine is named; the metrics are numpy's", function()
  local res = im.compare(im.collect(assert(etdump.read(ref_etd)), T.read(ref_bin)),
    im.collect(assert(etdump.read(got_etd)), T.read(got_bin)), { min_cosine = 0.99 })
  T.eq(res.compared, #OPS)
  T.eq(res.first_below.name, "aten::group_norm")
  T.eq(res.rows[1].equal, 16)
  T.ok(res.rows[2].cosine > 0.99 and res.rows[2].cosine < 1, "op 2 drifts a little")
  for k = 1, #OPS do
    local a, b = dir .. "/a.bin", dir .. "/b.bin"
    T.write(a, T.read(ref_bin):sub((k - 1) * PER + 1, k * PER))
    T.write(b, T.read(got_bin):sub((k - 1) * PER + 1, k * PER))
    local pr = assert(proc.run { "/usr/bin/python3", root .. "/tests/lib/numcmp_oracle.py", "compare", a, b, "float32",
      timeout = 60 })
    local want = assert(json.decode(pr.stdout), pr.stderr)
    T.near(res.rows[k].cosine, want.cosine, 1e-12, OPS[k])
    T.near(res.rows[k].max_abs_err, want.max_abs_err, 1e-12, OPS[k])
  end
end)

T.test("odp inspect --reference: the table, the first op named, exit 1; JSON; usage errors exit 2", function()
  local r = assert(proc.run { argv = { odp, "inspect", got_etd, "--debug-buffer", got_bin, "--reference", ref_etd,
    "--reference-debug-buffer", ref_bin, "--min-cosine", "0.99" }, timeout = 60 })
  T.eq(r.status, 1, r.stderr)
  T.match(r.stdout, "5 compared of 5")
  T.match(r.stdout, "first below %-%-min%-cosine 0%.99: aten::group_norm %(instruction 2%): cosine 0%.%d+\n")
  r = assert(proc.run { argv = { odp, "inspect", ref_etd, "--debug-buffer", ref_bin, "--reference", ref_etd,
    "--reference-debug-buffer", ref_bin, "--min-cosine", "1", "--format", "json" }, timeout = 60 })
  T.eq(r.status, 0, r.stderr)
  local doc = assert(json.decode(r.stdout))
  T.eq({ doc.kind, doc.compared, doc.first_below }, { "intermediates", 5, nil })
  -- an ETDump without debug events (the real runner's) has nothing to compare
  r = assert(proc.run { argv = { odp, "inspect", root .. "/tests/fixtures/etdump/add_n1.etdump", "--reference", ref_etd },
    timeout = 60 })
  T.eq(r.status, 2)
  T.match(r.stderr, "has no debug events with tensors")
  r = assert(proc.run { argv = { odp, "inspect", got_etd, "--min-cosine", "0.9" }, timeout = 60 })
  T.eq(r.status, 2)
  T.match(r.stderr, "%-%-min%-cosine: for an ETDump compared with %-%-reference")
end)

T.done()
