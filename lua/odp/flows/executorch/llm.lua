--- The ExecuTorch flow's LLM mode (--llm): text generation with ExecuTorch's own LLM runner, `llama_main`
-- (examples/models/llama/main.cpp over extension/llm/runner). Each runner process is one model load and one
-- generation; -n counts processes under the stopping rule. What a process says of itself (its PyTorchObserver
-- line: load, time to first token, prefill and decode rates, in whole ms) is kept per process; every token's own
-- latency comes from the process's ETDump, one `Method::execute` per forward, or, where the ETDump cannot give it
-- (or --token-times stdout asks), from when each generated piece reached the runner's stdout, timed where it ran
-- (the board's helper, or odp's own read loop on the host): odp.parse.llm. docs/llm.md.
local errors = require("odp.core.errors")
local json = require("odp.core.json")
local stats = require("odp.core.stats")
local sys = require("odp.sys")
local function etdump() return require("odp.parse.etdump") end -- lazy: start-up (no --etdump: none read)
local function parse_llm() return require("odp.parse.llm") end -- lazy: start-up (only --llm runs parse it)
local run = require("odp.run")

local M = {}

M.options = {
  { "llm", "Profile text generation with ExecuTorch's LLM runner (llama_main as --runner): load, time to first " ..
    "token,\nprefill and decode tokens/s, every token's latency; -n counts runner processes (docs/llm.md)", false,
    "bool" },
  { "tokenizer", "With --llm: the tokenizer (tokenizer.model, tokenizer.json or a llama2.c tok.bin), staged like " ..
    "the model", nil, "file" },
  { "prompt", "With --llm: the prompt text", nil, "string", metavar = "TEXT" },
  { "prompt-file", "With --llm: a file holding the prompt (staged; --prompt_file)", nil, "file" },
  { "prompt-tokens", "With --llm: a prompt of N tokens, the word \"the\" N times (one token each in the common " ..
    "vocabularies;\nthe runner's own count is checked) -- what a sweep over prompt lengths takes", nil, "posint" },
  { "max-new-tokens", "With --llm: tokens to generate (--max_new_tokens)", 32, "posint" },
  { "temperature", "With --llm: sampling temperature; 0 (greedy) gives the same text every run, so runs compare",
    0, "number" },
  { "token-times", "With --llm: where every token's latency comes from: the ETDump's forwards (falling back to " ..
    "stdout\nwhen they do not match the runner's token counts) or when each piece reached stdout where the runner runs",
    "etdump", "choice", choices = { "etdump", "stdout" } },
}

local LLM_ONLY = { "tokenizer", "prompt", "prompt_file", "prompt_tokens" }

-- The phases of a generation, cut at the runner's own lines (text_llm_runner.cpp prints each when the phase is
-- over; the prefill's line comes after the first token, which prefill produces): the helper resets the
-- high-water mark at each, so each phase's peak is its own.
M.MARKS = {
  { "load", "*] RSS after loading model:*" },
  { "prefill", "*] RSS after prompt prefill:*" },
  { "decode", "*] RSS after finishing text generation:*" },
}

--- Checks the LLM options before any board is opened; in LLM mode -n is the number of runner processes.
function M.validate(o)
  if not o.llm then
    for _, k in ipairs(LLM_ONLY) do
      if o[k] ~= nil then
        errors.fail("EUSAGE", ("--%s is an --llm option: add --llm (with llama_main as --runner)"):format(k:gsub("_", "-")))
      end
    end
    return
  end
  if not o.tokenizer then errors.fail("EUSAGE", "--llm needs --tokenizer FILE (the model's tokenizer)") end
  local prompts = (o.prompt and 1 or 0) + (o.prompt_file and 1 or 0) + (o.prompt_tokens and 1 or 0)
  if prompts ~= 1 then
    errors.fail("EUSAGE", "--llm needs one of --prompt TEXT, --prompt-file FILE or --prompt-tokens N")
  end
  if o.prompt_tokens then o.prompt = ("the "):rep(o.prompt_tokens):sub(1, -2) end
  if o.temperature < 0 or o.temperature ~= o.temperature then
    errors.fail("EUSAGE", ("--temperature must be >= 0, got %s"):format(tostring(o.temperature)))
  end
  if o.sample or o.inputs or o.reference then
    errors.fail("EUSAGE", "--llm takes no --sample, --inputs or --reference yet: the LLM runner has no such flags")
  end
  -- one process is one load and one generation: -n N is N processes, as --repeat N is
  if o.num_executions > 1 then
    if o["repeat"] then errors.fail("EUSAGE", "--llm: give -n or --repeat, not both (each counts processes)") end
    o["repeat"] = o.num_executions
  end
  o.num_executions = 1
end

--- The record's params that change an LLM measurement.
function M.params(o, params)
  params.num_executions = nil
  params.llm = true
  params.max_new_tokens = o.max_new_tokens
  params.temperature = o.temperature
  -- a made prompt is its length; a given one its text or file
  params.prompt_tokens = o.prompt_tokens
  params.prompt = not o.prompt_tokens and o.prompt or nil
  params.prompt_file = o.prompt_file
end

--- The runner's argv, with its files staged by stage(path) -> where the runner reads it.
function M.argv(o, t, runner, model, data, stage, rec)
  local argv = { runner, "--model_path", model, "--tokenizer_path", stage(o.tokenizer, nil, rec.tokenizer) }
  if o.prompt_file then
    table.move({ "--prompt_file", stage(o.prompt_file) }, 1, 2, #argv + 1, argv)
  else
    table.move({ "--prompt", o.prompt }, 1, 2, #argv + 1, argv)
  end
  table.move({ "--temperature", tostring(o.temperature), "--max_new_tokens", tostring(o.max_new_tokens),
    "--etdump_path", t.etdump_remote }, 1, 6, #argv + 1, argv)
  if data then table.move({ "--data_paths", data }, 1, 2, #argv + 1, argv) end
  return argv
end

--- One process's generation, from its logs and its ETDump (fetched here, beside its logs: the next process writes
--- the same path on the board). files: the logs' prefix in the run dir (nil for a warmup: nothing kept).
function M.process(ctx, t, r, files)
  local llm = parse_llm()
  local obs, why = llm.observer(r.stdout)
  local p = { observer = obs, why = why, figures = obs and llm.figures(obs) or {}, ended = llm.ended(r.stderr),
    want = ctx.opts.token_times }
  if not files or r.status ~= 0 then return p end
  local prompt = ctx.opts.prompt
  if ctx.opts.prompt_file then prompt = sys.read_file(ctx.opts.prompt_file) end
  p.text = llm.generated_text(r.stdout, prompt)
  p.pieces, p.pieces_why = llm.piece_times(r.stdout_times, r.stdout, prompt)
  -- the raw arrivals beside the process's stdout, whichever source the record takes: what the pieces are read from
  local st = r.stdout_times
  if st then
    local rows = { "t_us,stdout_bytes\n" }
    for i, t in ipairs(st.t_us) do rows[#rows + 1] = ("%d,%d\n"):format(t, st.ends[i]) end
    errors.check(sys.write_file(files .. ".stdout_times.csv", table.concat(rows)))
  end
  local dump = files .. ".etdump"
  local got = t.target:fetch(t.etdump_remote, dump)
  local doc = got and etdump().read(dump)
  if doc then
    p.etdump = dump
    local spans
    p.forwards_ms, spans = llm.forwards(doc)
    -- odp's own time to first token, in µs on the ETDump's clock: the first prefill forward's start to the end
    -- of the forward that produced the first token (tokenizing the prompt, before it, is not in it)
    local pt = p.figures.prompt_tokens
    local span = pt and spans[1] and spans[pt] and spans[1][1] and spans[pt][2] and
      etdump().duration(spans[1][1], spans[pt][2])
    if span then p.figures.ttft_us = span // 1000 end
  end
  return p
end

-- Per-token latencies of one process, from the ETDump: its decode forwards (each generated token after the first
-- costs one; the first comes out of the last prefill forward). nil when the ETDump's forwards do not add up to the
-- observer's tokens (a runner that prefills in one forward, a dump missing or cut short).
local function etdump_ms(p)
  local f, fw = p.figures, p.forwards_ms
  if not (fw and f.prompt_tokens and f.generated_tokens) then return nil end
  if #fw ~= f.prompt_tokens + f.generated_tokens then return nil end
  return table.move(fw, f.prompt_tokens + 1, #fw, 1, {})
end

-- The same from stdout: the time from one piece's arrival to the next's, which holds the next token's forward,
-- its sampling and its print. Only when every token made (generated_tokens + 1: the first is prefill's) reached
-- stdout as a chunk of its own: otherwise which chunk carried which tokens is not known (a reader busy for a
-- moment reads two pieces as one chunk), and the process gives no times.
local function stdout_ms(p)
  local at, made = p.pieces and p.pieces.pieces_us, p.figures.generated_tokens and p.figures.generated_tokens + 1
  if not (at and made) or #at ~= made then return nil end
  local ms = {}
  for k = 2, #at do ms[k - 1] = (at[k] - at[k - 1]) / 1000 end
  return ms
end

local BY_SOURCE = { etdump = etdump_ms, stdout = stdout_ms }

-- Where the processes' per-token latencies come from, one source for all of them: the ETDump when every process's
-- forwards add up (unless --token-times stdout asks), else stdout, from the processes whose pieces came one chunk
-- each. -> "etdump" | "stdout" | nil, and how many processes have no times from it
local function token_source(runs)
  local function missing(f)
    local n = 0
    for _, x in ipairs(runs) do if not (x.parsed.llm and f(x.parsed.llm)) then n = n + 1 end end
    return n
  end
  local want = runs[1] and runs[1].parsed.llm and runs[1].parsed.llm.want
  if #runs == 0 then return nil end
  if want ~= "stdout" and missing(etdump_ms) == 0 then return "etdump", 0 end
  local left_out = missing(stdout_ms)
  if left_out < #runs then return "stdout", left_out end
end

--- The measured processes' per-token latencies as the stopping rule and odp.results.measure take them (one
--- group per process; empty for a process without times), or nil when no process has them.
function M.groups(runs)
  local source = token_source(runs)
  if not source then return nil end
  local g = { groups = {}, source = source, per_iteration = false, total = 0 }
  for i, x in ipairs(runs) do g.groups[i] = BY_SOURCE[source](x.parsed.llm) or {} end
  return g
end

-- odp's own time to first token in µs, from the same source as the per-token times: on the ETDump's clock (its
-- figure, M.process), or from the prompt's arrival on stdout to the first piece's (both after the prompt is
-- tokenized, as the ETDump's first forward is).
local function ttft_us(p, source)
  if source == "etdump" then return p.figures.ttft_us end
  local at = p.pieces
  return at and at.echo_us and at.pieces_us[1] - at.echo_us
end

local function median_of(runs, key)
  local xs = {}
  for _, x in ipairs(runs) do
    local v = x.parsed.llm and x.parsed.llm.figures[key]
    if v then xs[#xs + 1] = v end
  end
  return #xs > 0 and stats.percentile(xs, 50) or nil, xs
end

--- The last measured process's ETDump as the run's (the op table's; --etdump gets a copy) -> its path, or nil.
function M.keep_etdump(ctx, rec, runs)
  local p = runs[#runs].parsed.llm
  if not (p and p.etdump) then
    rec.warnings[#rec.warnings + 1] = "no ETDump was written (a runner built without the event tracer?)"
    return nil
  end
  local path = run.artifact(ctx, rec, "etdump", p.etdump)
  if ctx.opts.etdump then errors.check(sys.write_file(ctx.opts.etdump, errors.check(sys.read_file(p.etdump)))) end
  return path
end

--- rec.llm from the measured processes (each a {r, parsed} with parsed.llm), the generated text into the run dir.
function M.record(ctx, rec, runs)
  local o = ctx.opts
  local last = runs[#runs].parsed.llm or {}
  local out = { processes = #runs, max_new_tokens = o.max_new_tokens, temperature = o.temperature,
    prompt_tokens = last.figures and last.figures.prompt_tokens,
    generated_tokens = last.figures and last.figures.generated_tokens, ended = last.ended }
  if o.prompt_tokens and out.prompt_tokens and out.prompt_tokens ~= o.prompt_tokens then
    rec.warnings[#rec.warnings + 1] = ("llm: --prompt-tokens %d made a prompt of %d tokens with this tokenizer " ..
      "(the runner's count): give the prompt itself with --prompt"):format(o.prompt_tokens, out.prompt_tokens)
  end
  if not last.observer or last.why then
    rec.warnings[#rec.warnings + 1] = "llm: " .. (last.why or "no PyTorchObserver line")
  end
  -- generated_tokens counts the tokens after the first (stats.h): the run made generated_tokens + 1
  local made = out.generated_tokens and out.generated_tokens + 1
  if last.ended == "eos" and made and made < o.max_new_tokens then
    rec.warnings[#rec.warnings + 1] = ("llm: the model ended its text (EOS) after %d of --max-new-tokens %d " ..
      "tokens"):format(made, o.max_new_tokens)
  end
  for _, k in ipairs({ "load_ms", "ttft_ms", "prefill_ms", "decode_ms", "prefill_tokens_per_s",
    "decode_tokens_per_s", "sampling_share" }) do
    local med, xs = median_of(runs, k)
    out[k] = med
    if k == "ttft_ms" or k == "decode_tokens_per_s" then
      out[k .. "_ci95"] = #xs >= 6 and json.array({ stats.median_ci(xs) }) or nil
    end
    -- each process's own, for odp compare's CIs
    if k == "ttft_ms" or k == "prefill_tokens_per_s" or k == "decode_tokens_per_s" then
      out[k .. "_each"] = json.array(xs)
    end
  end
  local source, left_out = token_source(runs)
  local tt = {}
  for _, x in ipairs(runs) do
    local v = x.parsed.llm and ttft_us(x.parsed.llm, source or "etdump")
    if v then tt[#tt + 1] = v end
  end
  out.ttft_us = #tt > 0 and math.tointeger(stats.percentile(tt, 50) // 1) or nil
  -- every token's latency by its position after the prompt (the KV cache grows): the median over processes
  local by_pos = json.array({})
  local per, longest = {}, 0
  for _, x in ipairs(runs) do
    per[#per + 1] = source and x.parsed.llm and BY_SOURCE[source](x.parsed.llm) or {}
    longest = math.max(longest, #per[#per])
  end
  for pos = 1, longest do
    local xs = {}
    for _, d in ipairs(per) do if d[pos] then xs[#xs + 1] = d[pos] end end
    if #xs > 0 then by_pos[pos] = stats.percentile(xs, 50) end
  end
  out.token_ms_by_position = by_pos
  out.token_times = source
  out.stdout_chunks = last.pieces and #last.pieces.pieces_us
  local chunks = ("%s chunks of generated text for %s tokens made"):format(tostring(out.stdout_chunks),
    tostring(made))
  local one_each = "(an empty or non-printable piece prints nothing; pieces close together are read as one chunk)"
  if source == "stdout" and o.token_times ~= "stdout" then
    rec.warnings[#rec.warnings + 1] = "llm: the ETDump's forwards do not match the runner's token counts (a " ..
      "runner without the event tracer, a model that prefills in one forward, a dump cut short): every token's " ..
      "latency is from when its piece reached the runner's stdout, timed where it ran"
  end
  if source == "stdout" and left_out > 0 then
    -- a process whose arrivals could not be read at all says why (its chunks past the bound, no helper)
    local whys, seen = {}, {}
    for _, x in ipairs(runs) do
      local why = x.parsed.llm and x.parsed.llm.pieces_why
      if why and not seen[why] then seen[why], whys[#whys + 1] = true, why end
    end
    rec.warnings[#rec.warnings + 1] = ("llm: %d of %d processes' pieces did not reach stdout one chunk per token " ..
      "%s%s: their token times are left out"):format(left_out, #runs, one_each,
      #whys > 0 and ("; " .. table.concat(whys, "; ")) or "")
  elseif not source then
    rec.warnings[#rec.warnings + 1] = ("llm: no per-token latency: %sno process's pieces reached stdout one chunk " ..
      "per token %s; the last one's stdout had %s%s"):format(o.token_times == "stdout" and "" or
      "the ETDump's forwards do not match the runner's token counts, and ", one_each,
      last.pieces and chunks or "no times", last.pieces_why and (": " .. last.pieces_why) or "")
  end
  if last.text then
    local path = ctx.run_dir .. "/generated.txt"
    errors.check(sys.write_file(path, last.text))
    run.artifact(ctx, rec, "generated_text", path)
  end
  rec.llm = out
end

return M
