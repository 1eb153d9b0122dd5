--- The ExecuTorch flow's LLM mode (--llm): text generation with ExecuTorch's own LLM runner, `llama_main`
-- (examples/models/llama/main.cpp over extension/llm/runner). Each runner process is one model load and one
-- generation; -n counts processes under the stopping rule. What a process says of itself (its PyTorchObserver
-- line: load, time to first token, prefill and decode rates, in whole ms) is kept per process; every token's own
-- latency comes from the process's ETDump, one `Method::execute` per forward (odp.parse.llm). docs/llm.md.
local errors = require("odp.core.errors")
local json = require("odp.core.json")
local stats = require("odp.core.stats")
local sys = require("odp.sys")
local etdump = require("odp.parse.etdump")
local llm = require("odp.parse.llm")
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
  local obs, why = llm.observer(r.stdout)
  local p = { observer = obs, why = why, figures = obs and llm.figures(obs) or {}, ended = llm.ended(r.stderr) }
  if not files or r.status ~= 0 then return p end
  local prompt = ctx.opts.prompt
  if ctx.opts.prompt_file then prompt = sys.read_file(ctx.opts.prompt_file) end
  p.text = llm.generated_text(r.stdout, prompt)
  local dump = files .. ".etdump"
  local got = t.target:fetch(t.etdump_remote, dump)
  local doc = got and etdump.read(dump)
  if doc then
    p.etdump = dump
    local spans
    p.forwards_ms, spans = llm.forwards(doc)
    -- odp's own time to first token, in µs on the ETDump's clock: the first prefill forward's start to the end
    -- of the forward that produced the first token (tokenizing the prompt, before it, is not in it)
    local pt = p.figures.prompt_tokens
    local span = pt and spans[1] and spans[pt] and spans[1][1] and spans[pt][2] and
      etdump.duration(spans[1][1], spans[pt][2])
    if span then p.figures.ttft_us = span // 1000 end
  end
  return p
end

-- Per-token latencies of one process: its decode forwards (each generated token after the first costs one; the
-- first comes out of the last prefill forward). nil when the ETDump's forwards do not add up to the observer's
-- tokens (a runner that prefills in one forward, or a dump cut short): then the process has no per-token times.
local function decode_ms(p)
  local f, fw = p.figures, p.forwards_ms
  if not (fw and f.prompt_tokens and f.generated_tokens) then return nil end
  if #fw ~= f.prompt_tokens + f.generated_tokens then return nil end
  return table.move(fw, f.prompt_tokens + 1, #fw, 1, {})
end

--- The measured processes' per-token latencies as the stopping rule and odp.results.measure take them (one
--- group per process), or nil when no process has them.
function M.groups(runs)
  local g = { groups = {}, source = "etdump", per_iteration = false, total = 0 }
  for i, x in ipairs(runs) do
    local d = x.parsed.llm and decode_ms(x.parsed.llm)
    if not d then return nil end
    g.groups[i] = d
  end
  if #g.groups == 0 then return nil end
  return g
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
    "decode_tokens_per_s", "sampling_share", "ttft_us" }) do
    local med, xs = median_of(runs, k)
    out[k] = k == "ttft_us" and med and math.tointeger(med // 1) or med
    if k == "ttft_ms" or k == "decode_tokens_per_s" then
      out[k .. "_ci95"] = #xs >= 6 and json.array({ stats.median_ci(xs) }) or nil
    end
    -- each process's own, for odp compare's CIs
    if k == "ttft_ms" or k == "prefill_tokens_per_s" or k == "decode_tokens_per_s" then
      out[k .. "_each"] = json.array(xs)
    end
  end
  -- every token's latency by its position after the prompt (the KV cache grows): the median over processes
  local by_pos = json.array({})
  local per, longest = {}, 0
  for _, x in ipairs(runs) do
    per[#per + 1] = x.parsed.llm and decode_ms(x.parsed.llm) or {}
    longest = math.max(longest, #per[#per])
  end
  for pos = 1, longest do
    local xs = {}
    for _, d in ipairs(per) do if d[pos] then xs[#xs + 1] = d[pos] end end
    if #xs > 0 then by_pos[pos] = stats.percentile(xs, 50) end
  end
  out.token_ms_by_position = by_pos
  out.token_source = runs[1].parsed.llm and decode_ms(runs[1].parsed.llm) and "etdump" or nil
  if not out.token_source then
    rec.warnings[#rec.warnings + 1] = "llm: no per-token latency: the ETDump's forwards do not match the " ..
      "runner's token counts (a runner without the event tracer, or a model that prefills in one forward)"
  end
  if last.text then
    local path = ctx.run_dir .. "/generated.txt"
    errors.check(sys.write_file(path, last.text))
    run.artifact(ctx, rec, "generated_text", path)
  end
  rec.llm = out
end

return M
