--- A model's inputs and outputs as files of raw bytes (what executor_runner reads with `--inputs` and writes
-- with `--output_file`), checked against the .pte's method signature, generated deterministically, and
-- compared element by element with a reference (docs/outputs.md). The numbers come from the C core
-- (odp.numcmp, src/numcmp); this module says which files, which dtype, and what a run's record keeps.
--   local tensors = require("odp.results.tensors")
--   local sig = tensors.signature("m.pte")
--   local spec = tensors.inputs_spec("random:1")
--   tensors.check_inputs(sig, spec)                      -- exit 2 when they do not fit
--   local files = tensors.write_inputs(sig, spec, "runs/x/inputs")
local errors = require("odp.core.errors")
local numcmp = require("odp.numcmp")
local pte = require("odp.parse.pte")
local sys = require("odp.sys")
local json = require("odp.core.json")
local result = require("odp.results.result")

local M = {}

--- The options a flow that runs a .pte takes for its inputs and outputs (odp.core.options entries).
M.options = {
  { "inputs", "The model's inputs: FILE[,FILE...] of raw bytes, one per input (pushed to the board, hash-skipped,\n" ..
    "given to the runner's --inputs), or random[:SEED]: odp writes them from the .pte's signature (docs/outputs.md)",
    nil, "string", metavar = "FILES|random[:SEED]" },
  { "outputs", "Keep every output in the run dir: the runner writes them (--output_file); Ethos-U: output.bin", false,
    "bool" },
  { "reference", "Compare the outputs element by element with a run directory (runs/<id>/, the same model) or a\n" ..
    "directory of output files (output-<i>.bin); implies --outputs", nil, "string", metavar = "DIR" },
  { "max-abs-err", "With --reference: fail (exit 1) when an output's max abs error is above X", nil, "number",
    metavar = "X" },
  { "min-cosine", "With --reference: fail (exit 1) when an output's cosine similarity is below X", nil, "number",
    metavar = "X" },
  { "min-snr", "With --reference: fail (exit 1) when an output's SNR is below DB decibels", nil, "number",
    metavar = "DB" },
}

local function usage(fmt, ...) errors.fail("EUSAGE", fmt:format(...)) end

local function describe(io)
  if io.kind ~= "tensor" then return io.kind end
  return ("%s %s"):format(io.dtype or ("scalar type " .. tostring(io.scalar_type)), pte.shape(io.sizes))
end
M.describe = describe

--- The signature of `model`'s method (nil: the first, as executor_runner picks; a `--method_name` in the
-- runner's arguments names another). A bad model or method is exit 2.
function M.signature(model, method)
  local p, err = pte.read(model)
  if not p then usage("model %s: %s", model, errors.text(err)) end
  local sig, serr = pte.signature(p, method)
  if not sig then usage("model %s: %s", model, errors.text(serr)) end
  return sig
end

--- The method the runner's own arguments ask for (`--method_name X`, `--method_name=X`), or nil.
function M.method_from_args(args)
  for i, a in ipairs(args or {}) do
    local v = a:match("^%-%-?method_name=(.*)$")
    if v then return v end
    if a == "--method_name" or a == "-method_name" then return args[i + 1] end
  end
end

--- --inputs as data: "random", "random:SEED" -> {random = true, seed}; "a.bin,b.bin" -> {files = {...}}.
function M.inputs_spec(value)
  if value == nil then return nil end
  local seed = value:match("^random:(.*)$")
  if value == "random" or seed then
    local n = seed == nil and 0 or math.tointeger(tonumber(seed))
    if not n or n < 0 then usage("--inputs random:SEED: the seed must be an integer >= 0, got '%s'", seed) end
    return { random = true, seed = n, text = "random:" .. n }
  end
  local files = {}
  for f in (value .. ","):gmatch("([^,]*),") do
    if f == "" then usage("--inputs: an empty file name in '%s' (FILE[,FILE...] or random[:SEED])", value) end
    files[#files + 1] = f
  end
  return { files = files, text = value }
end

--- Checks the inputs against the signature before any board is touched: their count, each file's size
-- against its tensor's bytes (a dynamic tensor's bound: at most that many, whole elements); random inputs
-- need tensors of a dtype odp writes and a fixed shape. Raises exit 2 naming the input.
function M.check_inputs(sig, spec)
  local ins = sig.inputs
  local function wants()
    local parts = {}
    for i, io in ipairs(ins) do parts[i] = describe(io) end
    return ("method %s takes %d input%s%s"):format(sig.method, #ins, #ins == 1 and "" or "s",
      #ins > 0 and (" (" .. table.concat(parts, ", ") .. ")") or "")
  end
  if spec.random then
    for _, io in ipairs(ins) do
      if io.kind ~= "tensor" or not io.elem_bytes or not numcmp.element_bytes(io.dtype) then
        usage("--inputs random: input %d is %s, which odp does not generate; give --inputs FILE[,FILE...]",
          io.index, describe(io))
      end
      if not io.bytes then
        usage("--inputs random: input %d (%s) has a %s shape; give --inputs FILE[,FILE...] of the size it runs with",
          io.index, describe(io), io.dynamism == "bound" and "dynamic" or "unknown")
      end
    end
    return
  end
  if #spec.files ~= #ins then
    usage("--inputs gives %d file%s; %s", #spec.files, #spec.files == 1 and "" or "s", wants())
  end
  for i, f in ipairs(spec.files) do
    local io, st = ins[i], sys.stat(f)
    if not st or st.type ~= "file" then usage("--inputs: cannot read '%s'", f) end
    if io.kind == "tensor" and io.bytes and st.size ~= io.bytes then
      usage("--inputs %s: %d bytes; input %d is %s = %d bytes", f, st.size, io.index, describe(io), io.bytes)
    elseif io.kind == "tensor" and io.elem_bytes and io.numel and not io.bytes
        and (st.size % io.elem_bytes ~= 0 or st.size > io.numel * io.elem_bytes) then
      usage("--inputs %s: %d bytes; input %d is %s (dynamic, at most %d bytes of %d-byte elements)", f, st.size,
        io.index, describe(io), io.numel * io.elem_bytes, io.elem_bytes)
    end
  end
end

--- The input files for a run: the given ones, or random ones written into dir (input-<i>.bin).
function M.write_inputs(sig, spec, dir)
  if not spec.random then return spec.files end
  errors.check(sys.mkdir_p(dir))
  local out = {}
  for i, io in ipairs(sig.inputs) do
    local path = ("%s/input-%d.bin"):format(dir, io.index)
    errors.check(sys.write_file(path, numcmp.generate(io.bytes, io.dtype, spec.seed, io.index)))
    out[i] = path
  end
  return out
end

--- A file's entry in the record: {file, sha256, bytes, dtype?, sizes?}; file relative to base when inside it.
function M.file_entry(path, io, base)
  local st = sys.stat(path)
  local file = path
  if base and path:sub(1, #base + 1) == base .. "/" then file = path:sub(#base + 2) end
  return { file = file, sha256 = sys.sha256_file(path), bytes = st and st.size, dtype = io and io.dtype,
    sizes = io and io.sizes and json.array(io.sizes) or nil }
end

--- Checks an output file the runner wrote against its signature entry -> nil | "why" (device output is
-- untrusted: a file of another size is never compared).
function M.check_output(path, io)
  local st = sys.stat(path)
  if not st then return ("output %d: the runner wrote no file"):format(io.index) end
  if io.bytes and st.size ~= io.bytes then
    return ("output %d: %d bytes; the .pte says %s = %d bytes"):format(io.index, st.size, describe(io), io.bytes)
  end
  if io.elem_bytes and st.size % io.elem_bytes ~= 0 then
    return ("output %d: %d bytes, not whole %d-byte elements"):format(io.index, st.size, io.elem_bytes)
  end
end

--- The options above, checked on this machine before any board is touched (a flow's validate calls it with
-- ctx.opts and the runner's arguments) -> nil when none is set, else {sig, inputs = spec?, outputs = bool,
-- ref?, gates}. Raises exit 2.
function M.validate(o, args)
  local gates = {}
  for _, g in ipairs(M.GATES) do
    if o[g.option] ~= nil then
      if not o.reference then usage("--%s needs --reference DIR: what to compare with", (g.option:gsub("_", "-"))) end
      gates[g.option] = o[g.option]
    end
  end
  if o.inputs == nil and not o.outputs and o.reference == nil then return nil end
  for _, a in ipairs(args or {}) do
    local flag = a:match("^%-%-?([%w_]+)")
    if flag == "inputs" or flag == "output_file" then
      usage("the runner's --%s after -- and odp's --inputs/--outputs/--reference: give one of them", flag)
    end
  end
  local io = { sig = M.signature(o.model, M.method_from_args(args)), inputs = M.inputs_spec(o.inputs),
    outputs = o.outputs or o.reference ~= nil, gates = gates }
  if io.inputs then M.check_inputs(io.sig, io.inputs) end
  if o.reference then io.ref = M.reference(o.reference, sys.sha256_file(o.model), io.sig) end
  return io
end

--- Brings each tensor output here (run_dir/outputs/output-<i>.bin) with fetch(i, dst) -> true | nil, err, code
-- (ENOTFOUND: the runner wrote none) and checks it against the signature. A failed transfer raises (exit 3);
-- a missing or wrong file is kept as {path, error} for judge. -> {[i + 1] = {io, path, error?}}
function M.fetch_outputs(sig, run_dir, fetch)
  local dir = run_dir .. "/outputs"
  errors.check(sys.mkdir_p(dir))
  local kept = {}
  for _, io in ipairs(sig.outputs) do
    if io.kind == "tensor" then
      local dst = ("%s/output-%d.bin"):format(dir, io.index)
      local ok, err, code = fetch(io.index, dst)
      if not ok and code ~= "ENOTFOUND" then errors.check(ok, err, code) end
      kept[#kept + 1] = { io = io, path = dst, error = M.check_output(dst, io) }
    end
  end
  return kept
end

--- The kept outputs into the record (rec.outputs[i].data = {file, sha256, bytes, dtype, sizes, error?}, joined
-- to what the runner printed by index), compared with io.ref when there is one (rec.reference), then judged:
-- a missing or wrong output file fails the run (ERUNNER: the runner did not write what it owes), then a gate
-- (EMISMATCH); both exit 1.
function M.judge(io, rec, kept, run_dir)
  rec.outputs = rec.outputs or json.array({})
  local by_index = {}
  for _, o in ipairs(rec.outputs) do by_index[o.index] = o end
  local bad
  for _, k in ipairs(kept) do
    local o = by_index[k.io.index]
    if not o then
      o = { index = k.io.index, kind = "tensor", sizes = json.array(k.io.sizes or {}) }
      rec.outputs[#rec.outputs + 1] = o
      by_index[o.index] = o
    end
    if sys.stat(k.path) then o.data = M.file_entry(k.path, k.io, run_dir) else o.data = {} end
    o.data.error = k.error
    bad = bad or k.error
  end
  table.sort(rec.outputs, function(a, b) return a.index < b.index end)
  local ref = io.ref
  if ref then
    local entries = json.array({})
    for _, k in ipairs(kept) do
      local rf = ref.files[k.io.index]
      local e, why
      if k.error then
        why = k.error
      elseif not rf then
        why = ("the reference has no output %d"):format(k.io.index)
      else
        local st = sys.stat(rf)
        if not st then
          why = ("the reference's %s is missing"):format(rf)
        elseif k.io.bytes and st.size ~= k.io.bytes then
          why = ("the reference's %s has %d bytes; the .pte says %d"):format(rf, st.size, k.io.bytes)
        else
          e, why = M.compare_files(k.path, rf, k.io)
        end
      end
      entries[#entries + 1] = e or { index = k.io.index, error = why }
    end
    rec.reference = { path = ref.path, kind = ref.kind, run_id = ref.run_id, model_sha256 = ref.model_sha256,
      gates = next(io.gates) and io.gates or nil, outputs = entries }
    -- the worst output, for the history's series: the lowest cosine, the largest max abs error (absent when
    -- an output has non-finite mismatches or could not be compared: no number stands for it)
    local worst_cos, worst_err, whole = nil, nil, true
    for _, e in ipairs(entries) do
      if e.cosine and (not worst_cos or e.cosine < worst_cos) then worst_cos = e.cosine end
      if e.max_abs_err and (not worst_err or e.max_abs_err > worst_err) then worst_err = e.max_abs_err end
      if e.error or (e.nonfinite or 0) > 0 then whole = false end
    end
    if whole then rec.reference.cosine, rec.reference.max_abs_err = worst_cos, worst_err end
    if not bad then
      local g = M.gate(entries, io.gates)
      if g then
        rec.reference.failed = { output = g.output, metric = g.metric, value = g.value, limit = g.limit }
        errors.fail("EMISMATCH", "outputs disagree with the reference: " .. g.message)
      end
    end
  end
  if bad then errors.fail("ERUNNER", bad) end
end

------------------------------------------------------------------------------------------------ reference

local function read_record(dir)
  local text = sys.read_file(dir .. "/result.json")
  if not text then return nil end
  local rec = result.decode(text)
  if type(rec) == "table" and rec[1] and not rec.schema then rec = rec[1] end
  return type(rec) == "table" and rec or nil
end

--- The reference's output files, by output index (0-based): a run directory (its result.json's outputs, refused
-- when its model's sha256 differs from model_sha256) or a directory of files (output-<i>.bin, else the one
-- file named *-<i>.bin, else output.bin for a one-output model). Raises exit 2. -> {path, kind = "run"|"dir",
-- run_id?, model_sha256?, files = {[0] = path, ...}}
function M.reference(path, model_sha256, sig)
  local st = sys.stat(path)
  if not st or st.type ~= "dir" then usage("--reference %s: not a directory (a run directory or one of output files)", path) end
  local ref = { path = path, files = {} }
  local rec = read_record(path)
  if rec then
    ref.kind, ref.run_id = "run", path:match("([^/]+)/*$")
    ref.model_sha256 = rec.model and rec.model.sha256
    if model_sha256 and ref.model_sha256 ~= model_sha256 then
      usage("--reference %s: refused, it ran another model (sha256 %s, this run's %s)", path,
        tostring(ref.model_sha256):sub(1, 12), model_sha256:sub(1, 12))
    end
    for _, o in ipairs(rec.outputs or {}) do
      if type(o) == "table" and type(o.data) == "table" and o.data.file and o.index then
        local f = o.data.file
        ref.files[o.index] = f:sub(1, 1) == "/" and f or (path .. "/" .. f)
      end
    end
    if next(ref.files) == nil then
      usage("--reference %s: that run kept no outputs (run it with --outputs)", path)
    end
    return ref
  end
  ref.kind = "dir"
  local names = sys.readdir(path) or {}
  for _, io in ipairs(sig.outputs) do
    local i = io.index
    local exact = ("%s/output-%d.bin"):format(path, i)
    if sys.stat(exact) then
      ref.files[i] = exact
    else
      local found = {}
      for _, n in ipairs(names) do
        if n:match("%-" .. i .. "%.bin$") then found[#found + 1] = n end
      end
      table.sort(found)
      if #found > 1 then
        usage("--reference %s: output %d is ambiguous (%s); name it output-%d.bin", path, i,
          table.concat(found, ", "), i)
      elseif #found == 1 then
        ref.files[i] = path .. "/" .. found[1]
      elseif #sig.outputs == 1 and sys.stat(path .. "/output.bin") then
        ref.files[i] = path .. "/output.bin"
      end
    end
  end
  if next(ref.files) == nil then usage("--reference %s: no output files in it (output-<i>.bin)", path) end
  return ref
end

------------------------------------------------------------------------------------------------ comparison

--- Whether an output is shaped like logits: [N] or [1, N] with N >= 2, a float dtype.
function M.is_logits(io)
  local s = io.sizes or {}
  local n = (#s == 1 and s[1]) or (#s == 2 and s[1] == 1 and s[2]) or nil
  return n ~= nil and n >= 2 and (io.dtype or ""):match("float") ~= nil
end

local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

--- Compares one output file with its reference file -> the record's entry {index, dtype, n, equal, finite,
-- nonfinite, nan, inf, max_abs_err, max_abs_at, mean_abs_err, rmse, cosine, snr_db, identical, histogram,
-- top1?, top5?, topk?} | nil, "why". Infinite values are absent (JSON has none): max_abs_err is absent when
-- nonfinite > 0, snr_db when the outputs are identical (identical = true) or the reference is all zeros.
function M.compare_files(got_path, ref_path, io)
  local r, err = numcmp.compare_files(ref_path, got_path, io.dtype, { logits = M.is_logits(io) })
  if not r then return nil, errors.text(err) end
  local e = { index = io.index, dtype = io.dtype, n = r.n, equal = r.equal, finite = r.finite,
    nonfinite = r.nonfinite, nan = { ref = r.nan_ref, got = r.nan_got }, inf = { ref = r.inf_ref, got = r.inf_got },
    max_abs_at = r.max_abs_at, mean_abs_err = r.mean_abs_err, rmse = r.rmse, cosine = r.cosine,
    identical = r.equal == r.n, histogram = json.array(r.histogram) }
  if finite(r.max_abs_err) then e.max_abs_err = r.max_abs_err end
  if finite(r.snr_db) then e.snr_db = r.snr_db end
  if r.logits then
    local l = r.logits
    e.top1 = l.top1_ref ~= nil and l.top1_ref == l.top1_got
    e.top5 = l.topk_overlap / l.k
    e.topk = { k = l.k, ref = json.array(l.topk_ref), got = json.array(l.topk_got) }
  end
  return e
end

--- The histogram's bins (odp.numcmp), as the reports name them.
M.HISTOGRAM_BINS = { { name = "0", short = "equal" }, { name = "below 1e-9", short = "<-9" } }
for d = -9, 2 do
  M.HISTOGRAM_BINS[#M.HISTOGRAM_BINS + 1] = { name = ("[1e%d, 1e%d)"):format(d, d + 1), short = tostring(d) }
end
table.move({ { name = "1e3 and above", short = ">=3" }, { name = "non-finite mismatch", short = "NaN" } }, 1, 2,
  #M.HISTOGRAM_BINS + 1, M.HISTOGRAM_BINS)

--- The gates (--max-abs-err, --min-cosine, --min-snr) as data: which options, and how each metric fails.
M.GATES = {
  { option = "max_abs_err", metric = "max_abs_err", fails = function(e, limit)
      return e.nonfinite > 0 or e.max_abs_err > limit end },
  { option = "min_cosine", metric = "cosine", fails = function(e, limit)
      return e.nonfinite > 0 or e.cosine < limit end },
  { option = "min_snr", metric = "snr_db", fails = function(e, limit)
      return e.nonfinite > 0 or (not e.identical and not (e.snr_db and e.snr_db >= limit)) end },
}

--- The first output and metric outside the gates in opts -> {output, metric, value, limit, message} | nil.
-- A non-finite mismatch fails every gate (a NaN is never close to anything), named as metric "nonfinite".
function M.gate(entries, opts)
  for _, e in ipairs(entries) do
    for _, g in ipairs(M.GATES) do
      local limit = opts[g.option]
      if limit ~= nil and (e.error or g.fails(e, limit)) then
        if e.error then
          return { output = e.index, metric = "error", limit = limit,
            message = ("output %d: %s"):format(e.index, e.error) }
        end
        if e.nonfinite > 0 then
          return { output = e.index, metric = "nonfinite", value = e.nonfinite, limit = limit,
            message = ("output %d: %d non-finite element%s differ from the reference (NaN/Inf; first at %d)")
              :format(e.index, e.nonfinite, e.nonfinite == 1 and "" or "s", e.max_abs_at) }
        end
        local value = e[g.metric]
        return { output = e.index, metric = g.metric, value = value, limit = limit,
          message = ("output %d: %s %s is %s the limit %s"):format(e.index, g.metric,
            value == nil and "-inf" or ("%.9g"):format(value), g.metric == "max_abs_err" and "above" or "below",
            ("%.9g"):format(limit)) }
      end
    end
  end
end

return M
