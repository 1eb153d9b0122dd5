-- Same inputs, outputs compared (issue 31): odp.numcmp's metrics and input generator against numpy
-- (tests/lib/numcmp_oracle.py), then the host flow with the real executor_runner: --inputs, --outputs,
-- --reference and its gates, a runner that perturbs one element (tests/lib/perturb_runner.sh) caught by each
-- gate with the metric values numpy computes, and every bad input: files of the wrong size or count, no output
-- file, an output of the wrong size, NaN and Inf, a reference of another model.
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local sys = require("odp.sys")
local numcmp = require("odp.numcmp")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local add = root .. "/tests/fixtures/pte/add_arduino.pte"
local datamap = root .. "/tests/fixtures/pte/datamap.pte"
local oracle = root .. "/tests/lib/numcmp_oracle.py"
local perturb = root .. "/tests/lib/perturb_runner.sh"
local dir = T.tmpdir()

local function py(args)
  local argv = { "/usr/bin/python3", oracle }
  table.move(args, 1, #args, #argv + 1, argv)
  local r = assert(proc.run { argv = argv, timeout = 120 })
  if r.status ~= 0 then error("numcmp_oracle.py: " .. r.stderr, 0) end
  return r.stdout
end

-- the oracle's numbers against odp's: relative 1e-12 (both sum in float64, in different orders)
local function same_metrics(got, want, what)
  for _, k in ipairs({ "n", "equal", "finite", "nonfinite", "nan_ref", "nan_got", "inf_ref", "inf_got" }) do
    T.eq(got[k], want[k], what .. ": " .. k)
  end
  T.eq(got.histogram, want.histogram, what .. ": histogram")
  for _, k in ipairs({ "max_abs_err", "mean_abs_err", "rmse", "cosine", "snr_db" }) do
    local g, w = got[k], want[k]
    if w == "inf" then
      T.eq(g, math.huge, what .. ": " .. k)
    else
      T.near(g, w, 1e-12 * math.max(1, math.abs(w)), what .. ": " .. k)
    end
  end
end

local function write(name, data)
  local p = dir .. "/" .. name
  T.write(p, data)
  return p
end

local f32 = function(...) return string.pack("<" .. ("f"):rep(select("#", ...)), ...) end

T.test("compare: float32 with NaN, infinities, -0 and zeros, against numpy", function()
  local inf, nan = math.huge, 0 / 0
  local ref = f32(1, 2, -3, 0, -0.0, inf, inf, -inf, nan, 5, 1e-12, 7, 1e4)
  local got = f32(1, 2.5, -3, -0.0, 0, inf, -inf, 3, nan, nan, 2e-12, 7.001, 1e4 + 2000)
  local a, b = write("a.bin", ref), write("b.bin", got)
  local r = assert(numcmp.compare(ref, got, "float32"))
  same_metrics(r, assert(json.decode(py { "compare", a, b, "float32" })), "float32")
  -- as documented: the same infinity is equal, NaN never, -0 == +0, the first non-finite mismatch named
  T.eq(r.equal, 5)        -- 1, -3, 0/-0, -0/0, inf/inf
  T.eq(r.nonfinite, 4)    -- inf/-inf, -inf/3, nan/nan, 5/nan
  T.eq(r.max_abs_at, 6)
  T.eq(r.max_abs_err, math.huge)
end)

T.test("compare: every dtype the .pte declares, random data, against numpy", function()
  local rnd = T.lcg(31)
  for _, dt in ipairs({ "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64",
    "bool" }) do
    local es = numcmp.element_bytes(dt)
    local n = 997
    local ra = numcmp.generate(n * es, dt, 5, 0)
    -- got: the reference with some bytes changed, so equal, near and far elements all occur
    local bytes = { ra:byte(1, -1) }
    for _ = 1, 300 do
      local i = rnd(#bytes) + 1
      bytes[i] = (bytes[i] + rnd(3) + 1) % 256
    end
    local got = string.char(table.unpack(bytes))
    local a, b = write("r-" .. dt, ra), write("g-" .. dt, got)
    local r = assert(numcmp.compare(ra, got, dt, { logits = true }))
    local want = assert(json.decode(py { "compare", a, b, dt, "logits" }))
    same_metrics(r, want, dt)
    T.eq(r.logits.topk_ref, want.topk_ref, dt .. ": top-5 of the reference")
    T.eq(r.logits.topk_got, want.topk_got, dt .. ": top-5 of the run")
  end
end)

T.test("compare: misuse raises, bytes that are not whole elements or differ in length are errors", function()
  T.raises(function() numcmp.compare("", "", "complex64") end, "cannot read elements of dtype 'complex64'")
  local _, err, code = numcmp.compare("abc", "abc", "float32")
  T.eq(code, "EPROTO")
  T.match(err, "3 bytes are not a whole number of 4%-byte elements")
  _, err = numcmp.compare(f32(1, 2), f32(1), "float32")
  T.match(err, "4 bytes against 8: the outputs differ in size")
end)

T.test("generate: SplitMix64 as documented, every dtype, against the Python implementation", function()
  for _, dt in ipairs({ "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64",
    "bool" }) do
    local n = 64 * numcmp.element_bytes(dt)
    for _, c in ipairs({ { 1, 0 }, { 1, 1 }, { 12345, 2 } }) do
      local out = dir .. "/gen-" .. dt
      py { "generate", tostring(n), dt, tostring(c[1]), tostring(c[2]), out }
      T.eq(numcmp.generate(n, dt, c[1], c[2]) == T.read(out), true, ("%s seed %d input %d"):format(dt, c[1], c[2]))
    end
  end
  local x = { string.unpack("<" .. ("f"):rep(1000), numcmp.generate(4000, "float32", 7, 0)) }
  local lo, hi = math.huge, -math.huge
  for i = 1, 1000 do lo, hi = math.min(lo, x[i]), math.max(hi, x[i]) end
  T.ok(lo >= -1 and lo < -0.99 and hi < 1 and hi > 0.99, ("float32 fills [-1, 1): %g .. %g"):format(lo, hi))
end)

------------------------------------------------------------------------------------------------ the host flow

local function odp_run(args, env)
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runs-dir", dir .. "/runs", "--no-history",
    "--format", "json" }
  table.move(args, 1, #args, #argv + 1, argv)
  local r = assert(proc.run { argv = argv, cwd = dir, env = env or {}, timeout = 120 })
  local rec = json.decode(r.stdout)
  return rec, r
end

local function run_dir(rec) return rec.artifacts.run_dir:sub(1, 1) == "/" and rec.artifacts.run_dir or (dir .. "/" .. rec.artifacts.run_dir) end

T.with_real_runner("--inputs random:1 --outputs: the runner gets odp's inputs, its output is x + 1 in float32", function(runner)
  local rec, r = odp_run({ "--runner", runner, "--model", add, "--inputs", "random:1", "--outputs" })
  T.eq(r.status, 0, r.stderr)
  local rd = run_dir(rec)
  T.eq(rec.params.inputs, "random:1")
  T.eq(#rec.inputs, 1)
  local inp = rec.inputs[1]
  T.eq({ inp.file, inp.bytes, inp.dtype, inp.sizes }, { "inputs/input-0.bin", 12, "float32", { 3 } })
  T.eq(inp.sha256, sys.sha256_file(rd .. "/inputs/input-0.bin"))
  T.eq(T.read(rd .. "/inputs/input-0.bin"), numcmp.generate(12, "float32", 1, 0))
  local out = rec.outputs[1].data
  T.eq({ out.file, out.bytes, out.dtype, out.sizes }, { "outputs/output-0.bin", 12, "float32", { 3 } })
  T.eq(out.sha256, sys.sha256_file(rd .. "/outputs/output-0.bin"))
  -- the oracle of the runner's arithmetic: add_arduino adds ones (its default input of ones gives [2, 2, 2])
  local x = { string.unpack("<fff", T.read(rd .. "/inputs/input-0.bin")) }
  T.eq(T.read(rd .. "/outputs/output-0.bin"), f32(x[1] + 1, x[2] + 1, x[3] + 1))
  -- what it printed is the same numbers
  for i = 1, 3 do T.near(rec.outputs[1].values[i], x[i] + 1, 1e-6) end
end)

local reference
T.with_real_runner("--reference a run: the same inputs agree exactly; other inputs fail --min-cosine", function(runner)
  local base = odp_run({ "--runner", runner, "--model", add, "--inputs", "random:1", "--outputs" })
  reference = run_dir(base)
  local rec, r = odp_run({ "--runner", runner, "--model", add, "--inputs", "random:1", "--reference", reference,
    "--max-abs-err", "0", "--min-cosine", "1", "--min-snr", "200" })
  T.eq(r.status, 0, r.stderr)
  local e = rec.reference.outputs[1]
  T.eq({ rec.reference.kind, e.n, e.equal, e.identical, e.max_abs_err, e.cosine, e.snr_db, e.top1, e.top5 },
    { "run", 3, 3, true, 0, 1, nil, true, 1 })
  rec, r = odp_run({ "--runner", runner, "--model", add, "--inputs", "random:2", "--reference", reference,
    "--min-cosine", "0.99" })
  T.eq(r.status, 1, "a disagreeing run exits 1")
  T.eq(rec.ok, false)
  T.eq(rec.error.code, "EMISMATCH")
  T.match(rec.error.message, "output 0: cosine 0%.%d+ is below the limit 0%.99")
  T.eq({ rec.reference.failed.output, rec.reference.failed.metric, rec.reference.failed.limit }, { 0, "cosine", 0.99 })
  -- the metrics against numpy on the files themselves
  local want = json.decode(py { "compare", reference .. "/outputs/output-0.bin",
    run_dir(rec) .. "/outputs/output-0.bin", "float32" })
  T.near(rec.reference.outputs[1].cosine, want.cosine, 1e-12)
  T.near(rec.reference.outputs[1].rmse, want.rmse, 1e-12)
end)

-- A runner that adds D to element I of its output: each gate catches it with numpy's numbers.
T.with_real_runner("a perturbed runner (one element + 0.25) is caught by each gate with numpy's metric values", function(runner)
  local env = { ODP_REAL_RUNNER = runner, PERTURB = "add:1:0.25" }
  local want
  for _, g in ipairs({ { "--max-abs-err", "0.2", "max_abs_err" }, { "--min-cosine", "0.999", "cosine" },
    { "--min-snr", "30", "snr_db" } }) do
    local rec, r = odp_run({ "--runner", perturb, "--model", add, "--inputs", "random:1", "--reference", reference,
      g[1], g[2] }, env)
    T.eq(r.status, 1, g[1] .. ": " .. r.stderr)
    want = want or json.decode(py { "compare", reference .. "/outputs/output-0.bin",
      run_dir(rec) .. "/outputs/output-0.bin", "float32", "logits" })
    local e = rec.reference.outputs[1]
    same_metrics({ n = e.n, equal = e.equal, finite = e.finite, nonfinite = e.nonfinite, nan_ref = e.nan.ref,
      nan_got = e.nan.got, inf_ref = e.inf.ref, inf_got = e.inf.got, histogram = e.histogram,
      max_abs_err = e.max_abs_err, mean_abs_err = e.mean_abs_err, rmse = e.rmse, cosine = e.cosine,
      snr_db = e.snr_db }, want, g[1])
    T.eq({ e.equal, e.max_abs_at }, { 2, 1 }, "one element off, the one perturbed")
    T.near(e.max_abs_err, 0.25, 1e-6, "by the amount added (rounded to float32)")
    T.eq(rec.reference.failed.metric, g[3])
    T.eq(rec.reference.failed.output, 0)
    T.near(rec.reference.failed.value, want[g[3]], 1e-12)
    T.match(rec.error.message, "output 0: " .. g[3])
    -- a limit it meets passes
    local looser = { ["--max-abs-err"] = "0.3", ["--min-cosine"] = "0.5", ["--min-snr"] = "0" }
    local _, r2 = odp_run({ "--runner", perturb, "--model", add, "--inputs", "random:1", "--reference", reference,
      g[1], looser[g[1]] }, env)
    T.eq(r2.status, 0, g[1] .. " looser: " .. r2.stderr)
  end
end)

T.with_real_runner("NaN and Inf in an output: never equal, every gate fails naming nonfinite", function(runner)
  for _, v in ipairs({ "nan", "inf", "-inf" }) do
    local rec, r = odp_run({ "--runner", perturb, "--model", add, "--inputs", "random:1", "--reference", reference,
      "--min-cosine", "0" }, { ODP_REAL_RUNNER = runner, PERTURB = "set:2:" .. v })
    T.eq(r.status, 1, v)
    local e = rec.reference.outputs[1]
    T.eq({ e.nonfinite, e.equal, e.max_abs_err, e.max_abs_at }, { 1, 2, nil, 2 }, v)
    T.eq(rec.reference.failed.metric, "nonfinite")
    T.match(rec.error.message, "1 non%-finite element differ")
  end
end)

T.with_real_runner("a runner that writes no output file, or one of the wrong size: exit 1, the rest kept", function(runner)
  local rec, r = odp_run({ "--runner", perturb, "--model", add, "--outputs" },
    { ODP_REAL_RUNNER = runner, PERTURB = "delete" })
  T.eq(r.status, 1)
  T.eq(rec.error.code, "ERUNNER")
  T.eq(rec.error.message, "output 0: the runner wrote no file")
  T.ok(rec.latency_ms.n == 1, "the latency is still measured")
  rec, r = odp_run({ "--runner", perturb, "--model", add, "--outputs" },
    { ODP_REAL_RUNNER = runner, PERTURB = "truncate" })
  T.eq(r.status, 1)
  T.eq(rec.error.message, "output 0: 8 bytes; the .pte says float32 [3] = 12 bytes")
  T.eq(rec.outputs[1].data.bytes, 8, "the file is kept, marked")
  T.eq(rec.outputs[1].data.error, rec.error.message)
end)

T.with_real_runner("odp compare A B compares the outputs too when both kept them", function(runner)
  local b = run_dir(odp_run({ "--runner", runner, "--model", add, "--inputs", "random:1", "--outputs" }))
  local c = run_dir(odp_run({ "--runner", runner, "--model", add, "--inputs", "random:2", "--outputs" }))
  local r = assert(proc.run { argv = { odp, "compare", reference, b, "--format", "json" }, timeout = 60 })
  T.eq(r.status, 0, r.stderr)
  local res = json.decode(r.stdout)
  T.eq({ res.outputs.outputs[1].identical, res.outputs.outputs[1].equal }, { true, 3 })
  r = assert(proc.run { argv = { odp, "compare", reference, c }, timeout = 60 })
  T.match(r.stdout, "agreement with ")
  T.match(r.stdout, "note: outputs compared, but A and B had different inputs")
  local want = json.decode(py { "compare", reference .. "/outputs/output-0.bin", c .. "/outputs/output-0.bin", "float32" })
  T.match(r.stdout, ("%.9f"):format(want.cosine):gsub("%.", "%%."), "the cosine numpy computes")
end)

T.with_real_runner("the history keeps the worst output's cosine and max abs error against the reference", function(runner)
  local h = dir .. "/history.db"
  for _, seed in ipairs({ "random:1", "random:1" }) do
    local argv = { odp, "run", root .. "/scripts/host.lua", "--runs-dir", dir .. "/runs", "--history", h, "-q",
      "--runner", runner, "--model", add, "--inputs", seed, "--reference", reference }
    local r = assert(proc.run { argv = argv, cwd = dir, timeout = 120 })
    T.eq(r.status, 0, r.stderr)
  end
  local db = assert(require("odp.results.history").open(h))
  for metric, want in pairs({ output_cosine = 1, output_max_abs_err = 0 }) do
    local series = assert(db:series { metric = metric })
    T.eq(#series, 1, metric)
    local pts = assert(db:points(series[1].id))
    T.eq(#pts, 2, metric .. ": two runs")
    T.eq(pts[2].median, want, metric)
  end
  db:close()
end)

T.with_real_runner("odp report: the agreement section and each output's error histogram, a failed run too", function(runner)
  local rec = odp_run({ "--runner", perturb, "--model", add, "--inputs", "random:1", "--reference", reference,
    "--min-cosine", "0.999" }, { ODP_REAL_RUNNER = runner, PERTURB = "add:0:3" })
  T.eq(rec.ok, false)
  local page = dir .. "/agree.html"
  local r = assert(proc.run { argv = { odp, "report", run_dir(rec), "--out", page }, timeout = 60 })
  T.eq(r.status, 0, r.stderr)
  local html = T.read(page)
  T.match(html, '<section id="sec%-agreement">')
  T.match(html, 'id="agreement%-hist%-0" data%-chart="agreement%-hist%-0" data%-points="16"')
  local e = rec.reference.outputs[1]
  T.match(html, ("%.9f"):format(e.cosine):gsub("%.", "%%."), "the cosine in the table")
  T.match(html, "output 0: cosine")
  -- the histogram's table: 2 elements equal, 1 in [1, 10) (the element moved by 3)
  T.eq(e.histogram[1], 2)
  T.eq(e.histogram[12], 1)
  T.match(html, "<td>%[1e0, 1e1%)</td><td class=\"n\"[^>]*>1</td>")
end)

T.with_real_runner("a sweep over two boards with --reference host: the same inputs, agreement per board and point", function(runner)
  local lab = dir .. "/lab.lua"
  T.write(lab, ("return { boards = { { name = 'a', device = %q }, { name = 'b', device = %q } } }")
    :format(root .. "/devices/host.lua", root .. "/devices/host.lua"))
  local out = dir .. "/sweep.jsonl"
  local argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/host.lua", "--boards", lab,
    "--runs-dir", dir .. "/runs", "--no-history", "--model", add, "-p", "runner=" .. runner .. "," .. perturb,
    "--inputs", "random:1", "--reference", "host", "--reference-runner", runner, "--min-cosine", "0.99999",
    "--out", out }
  local r = assert(proc.run { argv = argv, cwd = dir, timeout = 300,
    env = { ODP_REAL_RUNNER = runner, PERTURB = "add:1:0.01" } })
  T.eq(r.status, 1, "the perturbed points fail: " .. r.stderr)
  T.match(r.stdout, "agreement with the reference, per board and point")
  local recs = require("odp.run.sweep").load(out)
  T.eq(#recs, 4)
  local ref_of = {}
  for _, rec in ipairs(recs) do
    T.eq(rec.inputs[1].sha256, sys.sha256(numcmp.generate(12, "float32", 1, 0)), "the same inputs everywhere")
    ref_of[rec.params.runner] = ref_of[rec.params.runner] or rec.reference.path
    T.eq(rec.reference.path, ref_of[rec.params.runner], "every board's point against this machine's run of it")
    if rec.params.runner == runner then
      T.eq({ rec.ok, rec.reference.cosine, rec.reference.max_abs_err }, { true, 1, 0 }, rec.board)
    else
      T.eq({ rec.ok, rec.reference.failed.metric }, { false, "cosine" }, rec.board)
      T.near(rec.reference.max_abs_err, 0.01, 1e-6)
    end
  end
  -- this machine's references (one per point) ran the real runner (--reference-runner): x + 1 of the same input
  T.ok(ref_of[runner] ~= ref_of[perturb], "a reference per point")
  local x = { string.unpack("<fff", numcmp.generate(12, "float32", 1, 0)) }
  for _, d in pairs(ref_of) do T.eq(T.read(d .. "/outputs/output-0.bin"), f32(x[1] + 1, x[2] + 1, x[3] + 1)) end
  local board_lines = 0
  for line in r.stdout:match("agreement with the reference, per board and point\n(.*)"):gmatch("[^\n]+") do
    if line:match("^[ab] ") then board_lines = board_lines + 1 end
  end
  T.eq(board_lines, 4, "one line per board and point")
end)

------------------------------------------------------------------------------------------------ usage: exit 2

local function usage_case(args, pattern)
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runs-dir", dir .. "/usage-runs", "--no-history" }
  table.move(args, 1, #args, #argv + 1, argv)
  local r = assert(proc.run { argv = argv, cwd = dir, timeout = 60 })
  T.eq(r.status, 2, table.concat(args, " ") .. ": " .. r.stderr)
  T.match(r.stderr, pattern)
  T.eq(sys.stat(dir .. "/usage-runs"), nil, "nothing ran: no run directory")
end

T.test("run.point: a misspelt option is a usage error naming the near one, before anything runs", function()
  local run = require("odp.run")
  local board = run.open_board({ name = "host", transport = "host", flow = "executorch" }, {})
  local ok, e = pcall(run.point, board, "executorch", { runner = "/nonexistent", model = add, outptus = true })
  run.close(board)
  T.eq(ok, false)
  T.eq({ e.code, e.exit }, { "EUSAGE", 2 })
  T.eq(e.message, "key outptus is not an option of the executorch flow; did you mean outputs?")
end)

T.test("inputs that do not fit the signature, gates without a reference: exit 2 before anything runs", function()
  local runner = root .. "/tests/lib/perturb_runner.sh" -- never started
  usage_case({ "--runner", runner, "--model", add, "--inputs", write("short.bin", f32(1, 2)) },
    "%-%-inputs [^ ]*short%.bin: 8 bytes; input 0 is float32 %[3%] = 12 bytes")
  usage_case({ "--runner", runner, "--model", add, "--inputs", write("x.bin", f32(1, 2, 3)) .. "," .. dir .. "/x.bin" },
    "%-%-inputs gives 2 files; method forward takes 1 input %(float32 %[3%]%)")
  usage_case({ "--runner", runner, "--model", add, "--inputs", dir .. "/missing.bin" }, "cannot read '.*missing%.bin'")
  usage_case({ "--runner", runner, "--model", add, "--inputs", "random:x" }, "the seed must be an integer")
  usage_case({ "--runner", runner, "--model", add, "--min-cosine", "0.9" }, "%-%-min%-cosine needs %-%-reference")
  usage_case({ "--runner", runner, "--model", add, "--outputs", "--", "--output_file", "x" },
    "the runner's %-%-output_file after %-%-")
  usage_case({ "--runner", runner, "--model", add, "--output" }, "did you mean %-%-outputs")
end)

T.with_real_runner("a reference of another model is refused (its sha256 differs); a directory of files is one", function(runner)
  usage_case({ "--runner", runner, "--model", datamap, "--reference", reference },
    "refused, it ran another model %(sha256 538f335dc151, this run's " .. sys.sha256_file(datamap):sub(1, 12))
  usage_case({ "--runner", runner, "--model", add, "--reference", dir .. "/nowhere" }, "not a directory")
  -- a directory of the runner's own files (BASE-0.bin) is a reference too
  local files = dir .. "/ref-files"
  sys.mkdir_p(files)
  T.write(files .. "/model-0.bin", T.read(reference .. "/outputs/output-0.bin"))
  local rec, r = odp_run({ "--runner", runner, "--model", add, "--inputs", "random:1", "--reference", files,
    "--max-abs-err", "0" })
  T.eq(r.status, 0, r.stderr)
  T.eq({ rec.reference.kind, rec.reference.outputs[1].identical }, { "dir", true })
end)

T.done()
