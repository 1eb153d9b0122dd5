--- odp inspect FILE: what is in an ETDump (op table), a .pte (methods, delegates, Vela scratch) or an ELF
-- (machine, required glibc). The kind is taken from the file's bytes, not its name. odp inspect RUN (a run
-- directory): its CPU profile, each op's hottest functions (odp run --sample).
local cli = require("odp.core.options")
local errors = require("odp.core.errors")
local json = require("odp.core.json")
local report = require("odp.results.report")
local sys = require("odp.sys")
local result = require("odp.results.result")

local M = { summary = "Show what an ETDump, a .pte or an ELF holds (op table, methods, delegates, glibc)" }

M.options = {
  { "trace", "ETDump: also write a Chrome/Perfetto trace (JSON) to FILE", nil, "outfile", metavar = "FILE" },
  { "time-scale", "ETDump: unit of the ticks", "ns", "choice", choices = { "ns", "us", "ms", "s", "cycles" } },
  { "clock-hz", "ETDump in cycles: CPU clock to convert cycles to ms", nil, "number", metavar = "HZ" },
  { "all", "ETDump: also show OPERATOR_CALL rows (kernel + framework overhead) in the human table", false, "bool" },
  { "debug-buffer", "ETDump: the debug buffer its debug events' tensors point into (their intermediate outputs)",
    nil, "file", metavar = "FILE" },
  { "reference", "ETDump: compare its intermediate outputs op by op with this ETDump of the same model",
    nil, "file", metavar = "ETDUMP" },
  { "reference-debug-buffer", "The reference ETDump's debug buffer", nil, "file", metavar = "FILE" },
  { "min-cosine", "With --reference: name the first operator whose output's cosine is below X; exit 1 if any",
    nil, "number", metavar = "X" },
}

M.usage = "odp inspect FILE|RUN [options]"
M.description = "FILE: an ETDump (.etdump/.etdp), a .pte, or an ELF (executor_runner).\n" ..
  "RUN: a run directory (runs/<id>/) or its result.json: the ETDump that run kept (its own copy, checked\n" ..
  "against the sha256 in its record); a run made with --sample: its CPU profile, each op's hottest functions.\n" ..
  "The kind is read from the file's bytes."

local function kind_of(head)
  if #head >= 12 and head:sub(9, 12) == "ED00" or head:sub(5, 8) == "ED00" then return "etdump" end
  if head:sub(5, 8) == "ET12" or head:sub(5, 6) == "BP" then return "pte" end
  if head:sub(1, 4) == "\127ELF" then return "elf" end
  return nil
end

-- odp inspect RUN: a run directory (runs/<id>/) or its result.json stands for the ETDump that run kept, read
-- from the run's own copy (odp.results.result.artifact: there, with the sha256 the record holds), never from
-- a path a later run may have written. Any other path is returned as it is.
local function run_etdump(path)
  local st = sys.stat(path)
  local record_file = st and st.type == "dir" and path .. "/result.json" or (path:match("%.json$") and path)
  if not record_file then return path end
  local rec = result.decode(sys.read_file(record_file) or "")
  if type(rec) ~= "table" or rec.schema == nil then
    errors.fail("EUSAGE", ("%s is not a run: no odp record in %s"):format(path, record_file))
  end
  local etd, why = result.artifact(rec, "etdump", record_file:match("^(.*)/[^/]*$") or ".")
  if not etd then errors.fail("EUSAGE", ("run %s: %s (run it with --etdump to keep one)"):format(path, why)) end
  return etd
end

local function etdump_doc(path, opts)
  local etdump = require("odp.parse.etdump") -- lazy: start-up
  local doc, err = etdump.read(path)
  if not doc then errors.fail("EUSAGE", ("%s: %s"):format(path, errors.text(err))) end
  local eopts = { time_scale = opts.time_scale, clock_hz = opts.clock_hz }
  local rows, unit = etdump.ops(doc, eopts)
  local blocks = {}
  for _, b in ipairs(etdump.blocks(doc)) do blocks[#blocks + 1] = { name = b.name, runs = b.runs } end
  if opts.trace then
    local trace = require("odp.results.trace") -- lazy: start-up
    errors.check(sys.write_file(opts.trace, trace.encode(trace.chrome(doc, eopts)) .. "\n"))
  end
  return doc, rows, unit, blocks, etdump.ops_summary(doc, eopts)
end

local function etdump_human(path, doc, rows, unit, blocks, summary, opts)
  local out = {}
  local parts = {}
  for _, b in ipairs(blocks) do parts[#parts + 1] = ("%s (%d run%s)"):format(b.name, b.runs, b.runs == 1 and "" or "s") end
  out[1] = ("ETDump %s: version %d, %d run%s; blocks: %s"):format(path, doc.version, #doc.run_data,
    #doc.run_data == 1 and "" or "s", #parts > 0 and table.concat(parts, ", ") or "none")
  local shown, hidden = {}, 0
  for _, r in ipairs(rows) do
    if opts.all or not r.framework then shown[#shown + 1] = r else hidden = hidden + 1 end
  end
  out[#out + 1] = ""
  out[#out + 1] = "operators"
  local t = report.table(shown, report.op_columns(unit,
    { { key = "delegate_id", title = "delegate", fmt = function(v) return v ~= nil and tostring(v) or "" end } }))
  for line in t:gmatch("[^\n]+") do out[#out + 1] = "  " .. line end
  if summary then out[#out + 1] = "  time split: " .. report.ops_summary_line(summary) end
  if hidden > 0 then
    out[#out + 1] = ("  (%d OPERATOR_CALL row%s hidden: kernel + framework overhead; --all shows them)")
      :format(hidden, hidden == 1 and "" or "s")
  end
  if opts.trace then out[#out + 1] = "trace: " .. opts.trace .. " (open in ui.perfetto.dev)" end
  return table.concat(out, "\n") .. "\n"
end

-- --reference: the intermediate outputs op by op (odp.results.intermediates; docs/outputs.md, "Op by op")
local function intermediates(path, opts)
  local etdump = require("odp.parse.etdump") -- lazy: start-up
  local im = require("odp.results.intermediates") -- lazy: start-up
  local function side(p, buf)
    local doc, err = etdump.read(p)
    if not doc then errors.fail("EUSAGE", ("%s: %s"):format(p, errors.text(err))) end
    local list = im.collect(doc, buf and assert(sys.read_file(buf)))
    if #list == 0 then
      errors.fail("EUSAGE", ("%s has no debug events with tensors: no intermediate outputs to compare (the runner " ..
        "must log them: ExecuTorch's ETDumpGen with a debug buffer)"):format(p))
    end
    return list
  end
  local res = im.compare(side(opts.reference, opts.reference_debug_buffer), side(path, opts.debug_buffer),
    { min_cosine = opts.min_cosine })
  local function human()
    local shape = require("odp.parse.pte").shape -- lazy: start-up
    local rows = {}
    for i, r in ipairs(res.rows) do
      rows[i] = { n = i, name = r.name, iid = r.instruction_id, shape = r.dtype and (r.dtype .. " " ..
        shape(r.sizes)) or "", cosine = r.cosine, max_abs_err = r.max_abs_err or
        (r.nonfinite and r.nonfinite > 0 and math.huge) or nil, snr_db = r.snr_db, note = r.error or
        (r == res.first_below and "<- first below" or "") }
    end
    local function g(fmt) return function(v) return report.number_text(v, fmt) end end
    local out = { ("intermediate outputs of %s against %s: %d compared of %d"):format(path, opts.reference,
      res.compared, #res.rows), report.table(rows, { { key = "n", title = "#", fmt = "%d" }, { key = "name" },
      { key = "iid", title = "instruction", fmt = "%d" }, { key = "shape" },
      { key = "cosine", fmt = g("%.9f") }, { key = "max_abs_err", title = "max abs err", fmt = g("%.4g") },
      { key = "snr_db", title = "SNR dB", fmt = g("%.2f") }, { key = "note", align = "l" } }) }
    local f = res.first_below
    if f then
      out[#out + 1] = ("first below --min-cosine %s: %s (instruction %s): cosine %.9f%s"):format(report.number(opts.min_cosine),
        f.name, tostring(f.instruction_id), f.cosine, f.nonfinite > 0 and (", %d non-finite"):format(f.nonfinite) or "")
    elseif opts.min_cosine then
      out[#out + 1] = ("every compared output at or above --min-cosine %s"):format(report.number(opts.min_cosine))
    end
    return table.concat(out, "\n") .. "\n"
  end
  for _, r in ipairs(res.rows) do r.sizes = r.sizes and json.array(r.sizes) end
  return res, human
end

local function pte_info(path)
  local pte = require("odp.parse.pte") -- lazy: start-up
  local p, err = pte.read(path)
  if not p then errors.fail("EUSAGE", ("%s: %s"):format(path, errors.text(err))) end
  local methods, delegates = {}, {}
  for i, m in ipairs(p.methods) do
    methods[i] = { name = m.name, operators = json.array(m.operators),
      planned_buffers = json.array(table.move(m.non_const_buffer_sizes, 2, #m.non_const_buffer_sizes, 1, {})),
      delegates = #m.delegates }
  end
  for _, d in ipairs(pte.delegates(p)) do
    delegates[#delegates + 1] = { backend = d.backend, method = d.method, location = d.location, bytes = d.bytes,
      scratch_size = d.scratch_size, vela_error = d.vela_error }
  end
  return { kind = "pte", identifier = p.identifier, version = p.version, bytes = p.bytes,
    extended_header = p.extended_header, segments = p.segments,
    methods = json.array(methods), delegates = json.array(delegates) }
end

local function pte_human(path, info)
  local out = { ("ExecuTorch program %s: %s, %d bytes, schema version %d"):format(path, info.identifier, info.bytes,
    info.version) }
  local eh = info.extended_header
  if eh then
    out[#out + 1] = ("  extended header: program %d bytes, segments at %d (%d bytes), expected file size %d")
      :format(eh.program_size, eh.segment_base_offset, eh.segment_data_size, eh.expected_size)
  end
  for _, m in ipairs(info.methods) do
    out[#out + 1] = ("  method %s: %d operator%s%s"):format(m.name, #m.operators, #m.operators == 1 and "" or "s",
      #m.operators > 0 and (" (" .. table.concat(m.operators, ", ") .. ")") or "")
    for i, b in ipairs(m.planned_buffers) do
      out[#out + 1] = ("    planned buffer %d: %d B"):format(i, b)
    end
  end
  for _, d in ipairs(info.delegates) do
    local extra = d.scratch_size and (", Vela scratch_size %d B (%.1f kB): ACTIVATION_BUF_SZ must hold it")
      :format(d.scratch_size, d.scratch_size / 1024) or (d.vela_error and (", Vela stream: " .. d.vela_error) or "")
    out[#out + 1] = ("  delegate %s (%s, %s B %s)%s"):format(d.backend or "?", d.method or "?",
      tostring(d.bytes or "?"), d.location, extra)
  end
  if #info.delegates == 0 then out[#out + 1] = "  no delegates (portable/optimized kernels only)" end
  return table.concat(out, "\n") .. "\n"
end

local function elf_info(path)
  local e, err = require("odp.elf").read(path) -- lazy: start-up
  if not e then errors.fail("EUSAGE", ("%s: %s"):format(path, errors.text(err))) end
  local info = { kind = "elf" }
  for k, v in pairs(e) do info[k] = v end
  return info
end

local function elf_human(path, info)
  local out = { ("ELF %s: %s %s %s"):format(path, tostring(info.machine), tostring(info.class),
    tostring(info.type)) }
  for _, k in ipairs({ "endian", "interpreter", "static", "glibc_required" }) do
    if info[k] ~= nil then out[#out + 1] = ("  %-15s %s"):format(k, tostring(info[k])) end
  end
  if info.glibc_versions then
    out[#out + 1] = ("  %-15s %s"):format("glibc_versions", table.concat(info.glibc_versions, " "))
  end
  return table.concat(out, "\n") .. "\n"
end

local function csv(rows, cols)
  local lines = { table.concat(cols, ",") }
  for _, r in ipairs(rows) do
    local cells = {}
    for i, c in ipairs(cols) do
      local v = r[c]
      local s = v == nil and "" or (type(v) == "number" and json.encode(v) or tostring(v))
      if s:find('[,"\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
      cells[i] = s
    end
    lines[#lines + 1] = table.concat(cells, ",")
  end
  return table.concat(lines, "\n") .. "\n"
end

local OP_COLS = { "block", "name", "n", "p10", "p50", "p90", "avg", "min", "max", "delegated", "delegate_id",
  "framework" }

--- odp inspect RUN: the record's cpu_profile, as the run's table shows it, or as JSON.
function M.run_dir(dir, opts)
  local text = sys.read_file(dir .. "/result.json")
  if not text then errors.fail("EUSAGE", ("%s has no result.json: not a run directory"):format(dir)) end
  local rec = json.decode(text)
  if type(rec) ~= "table" then errors.fail("EUSAGE", ("%s/result.json is not a record"):format(dir)) end
  local cp = rec.cpu_profile
  if not cp then
    errors.fail("EUSAGE", ("%s has no CPU profile: it was run without --sample (odp run ... --sample)"):format(dir))
  end
  local fmt = opts.format or "human"
  if fmt == "csv" then errors.fail("EUSAGE", "--format csv: a run's CPU profile has no rows in CSV; json or human") end
  local body
  if fmt == "human" then
    local lines = require("odp.results.cpu_profile").human_lines(cp) -- lazy: start-up
    body = ("%s: cpu profile (hottest functions per op)\n  %s\n"):format(dir, table.concat(lines, "\n  "))
  else
    body = fmt == "jsonl" and (json.encode(cp) .. "\n") or (json.encode(cp, { indent = true }) .. "\n")
  end
  if opts.out then
    errors.check(sys.write_file(opts.out, body))
  else
    io.stdout:write(body)
  end
  return 0
end

function M.main(args)
  local opts, rest = cli.parse_command(M, args)
  if not opts then return 0 end
  if #rest ~= 1 then
    errors.fail("EUSAGE", ("inspect takes one file, got %d (odp inspect --help)"):format(#rest))
  end
  local path = rest[1]
  local st = sys.stat(path)
  if st and st.type == "dir" then
    local rec = json.decode(sys.read_file(path .. "/result.json") or "null")
    if type(rec) == "table" and rec.cpu_profile then return M.run_dir(path, opts) end
  end
  path = run_etdump(path)
  local f = io.open(path, "rb")
  if not f then errors.fail("EUSAGE", ("cannot read '%s'"):format(path)) end
  local head = f:read(16) or ""
  f:close()
  local kind = kind_of(head)
  if not kind then
    errors.fail("EUSAGE", ("%s is not an ETDump (ED00), a .pte (ET12) or an ELF file"):format(path))
  end
  local fmt = opts.format or (opts.out and (opts.out:match("%.(csv)$") or opts.out:match("%.(json)$"))) or "human"
  local human, data
  for _, o in ipairs({ "debug_buffer", "reference_debug_buffer", "min_cosine" }) do
    if opts[o] ~= nil and not (kind == "etdump" and (opts.reference or o == "debug_buffer")) then
      errors.fail("EUSAGE", ("--%s: for an ETDump compared with --reference ETDUMP"):format(o:gsub("_", "-")))
    end
  end
  local below
  if kind == "etdump" and opts.reference then
    local res
    res, human = intermediates(path, opts)
    data = { kind = "intermediates", reference = opts.reference, min_cosine = opts.min_cosine,
      compared = res.compared, rows = json.array(res.rows), first_below = res.first_below }
    below = res.first_below ~= nil
  elseif kind == "etdump" then
    if opts.time_scale ~= "cycles" and opts.clock_hz then
      errors.fail("EUSAGE", "--clock-hz needs --time-scale cycles")
    end
    local doc, rows, unit, blocks, summary = etdump_doc(path, opts)
    human = function() return etdump_human(path, doc, rows, unit, blocks, summary, opts) end
    data = { kind = "etdump", version = doc.version, unit = unit, runs = #doc.run_data,
      blocks = json.array((function() local n = {} for i, b in ipairs(blocks) do n[i] = b.name end return n end)()),
      ops = json.array(rows), ops_summary = summary }
    data.csv = function() return csv(rows, OP_COLS) end
  elseif kind == "pte" then
    local info = pte_info(path)
    human = function() return pte_human(path, info) end
    data = info
    data.csv = function() return csv(info.delegates, { "method", "backend", "location", "bytes", "scratch_size" }) end
  else
    local info = elf_info(path)
    human = function() return elf_human(path, info) end
    data = info
  end
  local function render(f)
    if f == "human" then return human() end
    if f == "csv" then
      if not data.csv then errors.fail("EUSAGE", "--format csv: only ETDumps and .pte files have rows") end
      return data.csv()
    end
    local copy = {}
    for k, v in pairs(data) do if k ~= "csv" then copy[k] = v end end
    if f == "jsonl" then return json.encode(copy) .. "\n" end
    return json.encode(copy, { indent = true }) .. "\n"
  end
  if opts.out then
    errors.check(sys.write_file(opts.out, render(fmt)))
    if not opts.quiet then io.stdout:write(human()) end
  else
    io.stdout:write(render(fmt))
  end
  return below and 1 or 0
end

return M
