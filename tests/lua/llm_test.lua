-- --llm: text generation with ExecuTorch's own LLM runner (llama_main) on the host target. Oracles: the runner's
-- own PyTorchObserver line (token counts, TTFT within its 1 ms resolution), the ETDump's forward count (prompt
-- tokens + generated tokens: this model prefills token by token), GNU time for the peak RSS.
local T = require("t")
local proc = require("odp.proc")
local json = require("odp.core.json")
local sys = require("odp.sys")
local llm = require("odp.parse.llm")
local etdump = require("odp.parse.etdump")

local stats = require("odp.core.stats")
local oracle = require("llm_oracle")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local dir = T.tmpdir()

local function odp_run(args, timeout)
  local argv = { odp, "run", root .. "/scripts/host.lua", "--runs-dir", dir .. "/runs" }
  table.move(args, 1, #args, #argv + 1, argv)
  return assert(proc.run { argv = argv, cwd = dir, timeout = timeout or 120 })
end

-- The observer line of the peer's own run (its transcript, ExecuTorch at cff6f4dd: stats.h on main).
local REAL = 'PyTorchObserver {"prefill_token_per_sec":1363.64,"decode_token_per_sec":1347.83,"prompt_tokens":15,' ..
  '"generated_tokens":31,"model_load_start_ms":1796454710485,"model_load_end_ms":1796454710485,' ..
  '"inference_start_ms":1796454710486,"inference_end_ms":1796454710520,"model_execution_start_ms":1796454710519,' ..
  '"model_execution_end_ms":1796454710520,"prompt_eval_end_ms":1796454710497,"first_token_ms":1796454710497,' ..
  '"aggregate_sampling_time_ms":0,"aggregate_model_execution_time_ms":34,"SCALING_FACTOR_UNITS_PER_SECOND":1000}'

T.test("the observer line: the figures stats.h prints, from any version's keys", function()
  local obs = assert(llm.observer("Once upon a time the tiny\n" .. REAL .. "\n"))
  local f = llm.figures(obs)
  T.eq(f.prompt_tokens, 15)
  T.eq(f.generated_tokens, 31)
  T.eq(f.ttft_ms, 11)
  T.eq(f.load_ms, 0)
  -- the runner's own rates (its prefill_token_per_sec and decode_token_per_sec), computed from the timestamps
  T.near(f.prefill_tokens_per_s, 1363.64, 0.01)
  T.near(f.decode_tokens_per_s, 1347.83, 0.01)
  -- an older runner (no rates, no model_execution_*), a newer one (gpu_* keys): the same figures
  local old = REAL:gsub('"prefill_token_per_sec":[%d.]+,"decode_token_per_sec":[%d.]+,', "")
    :gsub('"model_execution_start_ms":%d+,"model_execution_end_ms":%d+,', "")
  T.eq(llm.figures(assert(llm.observer(old))), f)
  local new = REAL:gsub("}$", ',"gpu_total_bytes":25769803776,"gpu_peak_usage_mb":1049.04,"future_key":"x"}')
  T.eq(llm.figures(assert(llm.observer(new))), f)
  -- missing timestamps leave their figures absent, never wrong
  local partial = llm.figures(assert(llm.observer('PyTorchObserver {"prompt_tokens":3,"first_token_ms":5}')))
  T.eq(partial.prompt_tokens, 3)
  T.eq(partial.ttft_ms, nil)
  T.eq(partial.decode_tokens_per_s, nil)
end)

-- One fixture per print format of stats.h (tests/fixtures/llm/README.md), with the figures worked out by hand from
-- its timestamps and counts; the versions that print rates are checked against them too.
local FORMATS = {
  { "release-0.6", prompt = 6, generated = 12, load = 840, ttft = 50, prefill = 50, decode = 310, inference = 360,
    sampling = 7 },
  { "release-1.0", prompt = 27, generated = 127, load = 2315, ttft = 540, prefill = 540, decode = 5350,
    inference = 5890, sampling = 41 },
  { "release-1.4", prompt = 9, generated = 63, load = 731, ttft = 57, prefill = 57, decode = 830, inference = 887,
    sampling = 3 },
  { "main-cff6f4dd", prompt = 15, generated = 31, load = 0, ttft = 11, prefill = 11, decode = 23, inference = 34,
    sampling = 0 },
}

T.test("the observer line of release/0.6, 1.0, 1.4 and main: the figures by hand, and the runner's own rates",
  function()
    for _, v in ipairs(FORMATS) do
      local text = T.read(root .. "/tests/fixtures/llm/observer-" .. v[1] .. ".txt")
      local obs, note = llm.observer(text)
      T.ok(obs, v[1])
      T.eq(note, nil, v[1] .. ": extra keys (gpu_*, the rates) are no note")
      local f = llm.figures(obs)
      T.eq({ f.prompt_tokens, f.generated_tokens, f.load_ms, f.ttft_ms, f.prefill_ms, f.decode_ms, f.inference_ms },
        { v.prompt, v.generated, v.load, v.ttft, v.prefill, v.decode, v.inference }, v[1])
      T.near(f.prefill_tokens_per_s, v.prompt / v.prefill * 1000, 1e-9, v[1])
      T.near(f.decode_tokens_per_s, v.generated / v.decode * 1000, 1e-9, v[1])
      T.near(f.sampling_share, v.sampling / v.inference, 1e-12, v[1])
      -- the rates the runner printed (1.4 on; 6 significant digits), read with the JSON decoder, not the parser
      local own = json.decode(text:match("PyTorchObserver (%b{})"))
      if v[1] == "release-0.6" or v[1] == "release-1.0" then
        T.eq(own.prefill_token_per_sec, nil, v[1] .. " prints no rates")
      else
        T.near(f.prefill_tokens_per_s, own.prefill_token_per_sec, 5e-6 * own.prefill_token_per_sec, v[1])
        T.near(f.decode_tokens_per_s, own.decode_token_per_sec, 5e-6 * own.decode_token_per_sec, v[1])
      end
    end
    T.eq(llm.generated_text(T.read(root .. "/tests/fixtures/llm/observer-release-0.6.txt"), "Once upon a time"),
      ", there was a little girl named Lily.")
  end)

T.test("the observer line: garbage never raises, and says what is missing", function()
  for _, text in ipairs({ "", "no line here", "PyTorchObserver ", "PyTorchObserver {", "PyTorchObserver {]",
    'PyTorchObserver {"prompt_tokens":-5,"first_token_ms":1e400}', "PyTorchObserver {" .. ("9"):rep(200000) .. "}" }) do
    local obs, why = llm.observer(text)
    if obs then
      T.eq(obs.prompt_tokens, nil, "a negative count is refused")
    else
      T.match(why, "PyTorchObserver")
    end
  end
  -- refused values: one note naming them (bounded), the rest of the line still read
  local obs, note = llm.observer(REAL:gsub('"prompt_tokens":15', '"prompt_tokens":"15"')
    :gsub('"first_token_ms":%d+', '"first_token_ms":1e400'):gsub('"generated_tokens":31', '"generated_tokens":31.5'))
  T.eq({ obs.prompt_tokens, obs.first_token_ms, obs.generated_tokens }, {})
  T.eq(obs.inference_start_ms, 1796454710486)
  T.eq(note, "its PyTorchObserver line has unusable prompt_tokens, generated_tokens, first_token_ms: figures " ..
    "from them are left out")
  obs, note = llm.observer(REAL:gsub("}$", ',"generated_tokens":5}'))
  T.eq(obs.generated_tokens, nil, "a key given twice is neither value")
  T.match(note, "generated_tokens %(given twice%)")
  -- every number negative: 12 of the 13 keys refused (aggregate_sampling_time_ms's -0 is 0), four named
  obs, note = llm.observer((REAL:gsub(":(%d+)", ":-%1")))
  T.eq(obs.aggregate_sampling_time_ms, 0)
  T.match(note, "^its PyTorchObserver line has unusable prompt_tokens, generated_tokens, model_load_start_ms, " ..
    "model_load_end_ms and 8 more: ")
  -- NaN and Infinity are no JSON (C++ streams print "nan", "inf"): the line is refused, with why
  for _, bad in ipairs({ "nan", "NaN", "inf", "-inf", "Infinity" }) do
    obs, note = llm.observer((REAL:gsub('"prefill_token_per_sec":[%d.]+', '"prefill_token_per_sec":' .. bad)))
    T.eq(obs, nil, bad)
    T.eq(note, "its PyTorchObserver line is not valid JSON")
  end
  -- every cut of every format (a runner killed mid-line), a huge line, a huge stdout of lines
  for _, v in ipairs(FORMATS) do
    local text = T.read(root .. "/tests/fixtures/llm/observer-" .. v[1] .. ".txt")
    for n = 0, #text do
      local o, why = llm.observer(text:sub(1, n))
      T.ok(o or type(why) == "string", "a result or why")
    end
  end
  obs, note = llm.observer("PyTorchObserver {" .. ('"k":1,'):rep(20000) .. '"prompt_tokens":3}')
  T.eq({ obs, note }, { nil, "its PyTorchObserver line holds no JSON object" })
  -- a 6 MB line (once quadratic to search: a pattern anchored on the line around the name)
  T.eq(select(2, llm.observer(("token "):rep(1000000))), "the runner printed no PyTorchObserver line")
  obs = llm.observer(("token "):rep(1000000) .. "\n" .. REAL)
  T.eq(obs.prompt_tokens, 15)
  local rnd = T.lcg(41)
  for _ = 1, 2000 do
    local o, why = llm.observer(T.mutate(REAL, rnd, "{}[]\":,0123456789.-eE \n\0xyz"))
    T.ok(o or why, "a result or why")
    if why then T.ok(#why < 300 and not why:find("\n"), "one bounded line: " .. why) end
    if o then
      for k, x in pairs(llm.figures(o)) do
        T.ok(x == x and x >= 0 and x < math.huge, k .. " finite, non-negative")
      end
    end
  end
  T.eq(llm.ended("I 00:00:00.036106 executorch:text_llm_runner.cpp:264] Max new tokens 32 reached!"), "max")
  T.eq(llm.ended("I 00:00:00.02 executorch:text_token_generator.h:120] \nReached to the end of generation"), "eos")
  T.eq(llm.ended("nothing"), nil)
end)

T.test("stdout pieces: the prompt's chunk, the generated ones, the observer line left out; never raises", function()
  local prompt = "Once upon a time"
  local out = prompt .. " the tiny model" .. "\nPyTorchObserver {}\n"
  local e = #prompt
  -- echo, three pieces, the observer line at exit
  local p = assert(llm.piece_times({ t_us = { 100, 900, 1900, 2950, 3100 }, ends = { e, e + 4, e + 9, e + 15, #out },
    cut = 0 }, out, prompt))
  T.eq(p, { echo_us = 100, pieces_us = { 900, 1900, 2950 } })
  -- two pieces read as one chunk: one arrival for them (the count says so; the flow gives no per-token times)
  p = assert(llm.piece_times({ t_us = { 100, 1900, 2950, 3100 }, ends = { e, e + 9, e + 15, #out } }, out, prompt))
  T.eq(p.pieces_us, { 1900, 2950 })
  -- the prompt read with the first piece: no echo time (no TTFT from stdout), the pieces still
  p = assert(llm.piece_times({ t_us = { 900, 1900, 2950, 3100 }, ends = { e + 4, e + 9, e + 15, #out } }, out, prompt))
  T.eq(p.echo_us, nil); T.eq(p.pieces_us, { 900, 1900, 2950 })
  -- the last piece and the observer line in one chunk: the piece's arrival is that chunk's
  p = assert(llm.piece_times({ t_us = { 100, 900, 1900, 3100 }, ends = { e, e + 4, e + 9, #out } }, out, prompt))
  T.eq(p.pieces_us, { 900, 1900, 3100 })
  -- chunks past the bound: the times are not all there
  local _, why = llm.piece_times({ t_us = { 100, 900 }, ends = { e, e + 4 }, cut = 3 }, out, prompt)
  T.match(why, "more than 2 chunks")
  T.eq(select(2, llm.piece_times(nil, out, prompt)), "no stdout arrival times (no odp helper ran it)")
  T.match(select(2, llm.piece_times({ t_us = { 1, 2 }, ends = { 9, 3 } }, out, prompt)), "out of order")
  T.match(select(2, llm.piece_times({ t_us = { 1 }, ends = { e } }, prompt, prompt)), "no generated text")
  local rnd = T.lcg(41)
  for _ = 1, 300 do
    local t = { t_us = {}, ends = {}, cut = rnd(3) }
    for k = 1, rnd(8) do t.t_us[k], t.ends[k] = rnd(5000), rnd(80) end
    if rnd(5) == 0 then t.ends[1] = "x" end
    local r, w = llm.piece_times(t, T.mutate(out, rnd, "\nPyTorchObserver{} ab"), prompt)
    T.ok(r or type(w) == "string")
  end
end)

-- llama_main run directly by odp.proc (one read loop between the runner and the times), n processes, and more up
-- to max_n while none read one chunk per piece (on a loaded machine pieces come together): for each, its stdout
-- pieces (odp.parse.llm), its observer line and its ETDump's forwards.
local function direct_runs(p, n, tokens, max_n)
  local out, whole = {}, false
  for i = 1, max_n or n do
    if i > n and whole then break end
    local dump = ("%s/direct%d.etdump"):format(dir, i)
    local r = assert(proc.run { argv = { p.runner, "--model_path", p.model, "--tokenizer_path", p.tokenizer,
      "--prompt", "Once upon a time", "--temperature", "0", "--max_new_tokens", tostring(tokens),
      "--etdump_path", dump }, timeout = 60, stdout_times = 4096 })
    T.eq(r.status, 0, r.stderr)
    local f = llm.figures(assert(llm.observer(r.stdout)))
    out[i] = { pieces = assert(llm.piece_times(r.stdout_times, r.stdout, "Once upon a time")), figures = f,
      durations = {}, gaps = {} }
    oracle.decode_forwards(dump, f.prompt_tokens, out[i].durations, out[i].gaps)
    out[i].prefill_ms = oracle.prefill_ms(dump, f.prompt_tokens)
    whole = whole or #out[i].pieces.pieces_us == f.generated_tokens + 1
  end
  return out
end

T.with_real_llm("stdout arrival times of llama_main's pieces against its ETDump's forwards and its own TTFT", function(p)
  local runs = direct_runs(p, 5, 32, 12)
  local ttft_s, ttft_r, prefill, iv, durations, gaps = {}, {}, {}, {}, {}, {}
  for _, x in ipairs(runs) do
    local made = x.figures.generated_tokens + 1
    T.ok(#x.pieces.pieces_us <= made, "never more chunks than pieces")
    if #x.pieces.pieces_us == made then -- one chunk per piece: per-token times
      for k = 2, made do iv[#iv + 1] = (x.pieces.pieces_us[k] - x.pieces.pieces_us[k - 1]) / 1000 end
      table.move(x.durations, 1, #x.durations, #durations + 1, durations)
      table.move(x.gaps, 1, #x.gaps, #gaps + 1, gaps)
    end
    if x.pieces.echo_us then
      ttft_s[#ttft_s + 1] = x.pieces.pieces_us[1] - x.pieces.echo_us
      ttft_r[#ttft_r + 1] = x.figures.ttft_ms
      prefill[#prefill + 1] = x.prefill_ms
    end
  end
  T.ok(#iv >= 31, ("at least one process of %d read one chunk per piece"):format(#runs))
  oracle.near_forward(T, stats.percentile(iv, 50), durations, gaps, "direct")
  T.ok(#ttft_s >= 3, "the prompt came in a chunk of its own")
  oracle.near_ttft(T, ttft_s, ttft_r, prefill, "direct")
end)

T.test("usage: LLM options need --llm, --llm needs a tokenizer and one prompt, misspelt options", function()
  local r = odp_run({ "--runner", "/bin/true", "--model", root .. "/tests/fixtures/pte/add_arduino.pte",
    "--tokenizer", root .. "/README.md" })
  T.eq(r.status, 2)
  T.match(r.stderr, "%-%-tokenizer is an %-%-llm option")
  r = odp_run({ "--llm", "--runner", "/bin/true", "--model", root .. "/tests/fixtures/pte/add_arduino.pte",
    "--prompt", "x" })
  T.eq(r.status, 2)
  T.match(r.stderr, "needs %-%-tokenizer")
  r = odp_run({ "--llm", "--runner", "/bin/true", "--model", root .. "/tests/fixtures/pte/add_arduino.pte",
    "--tokenizer", root .. "/README.md" })
  T.eq(r.status, 2)
  T.match(r.stderr, "one of %-%-prompt")
  r = odp_run({ "--llm", "--max-new-token", "3" })
  T.eq(r.status, 2)
  T.match(r.stderr, "did you mean %-%-max%-new%-tokens")
  r = odp_run({ "--llm", "--token-times", "stdut" })
  T.eq(r.status, 2)
  T.match(r.stderr, "%-%-token%-times must be one of etdump|stdout, got 'stdut'; did you mean stdout%?")
end)

T.with_real_llm("llama_main on the host: tokens, TTFT and every token's latency against the runner's own report",
  function(p)
    local r = odp_run({ "--llm", "--runner", p.runner, "--model", p.model, "--tokenizer", p.tokenizer,
      "--prompt", "Once upon a time", "--max-new-tokens", "12", "-n", "3", "--format", "json" })
    T.eq(r.status, 0, r.stderr)
    local rec = assert(json.decode(r.stdout))
    T.eq(rec.ok, true)
    T.eq(rec.params.llm, true)
    T.eq(rec.params.max_new_tokens, 12)
    T.eq(rec.params["repeat"], 3, "-n counts processes")
    T.eq(rec.params.num_executions, nil)
    local l = rec.llm
    T.eq(l.processes, 3)
    local run_dir = rec.artifacts.run_dir
    -- the runner's own counts, from each process's stdout
    local ttfts = {}
    for i = 1, 3 do
      local obs = assert(llm.observer(T.read(("%s/run%d.stdout"):format(run_dir, i))))
      T.eq(obs.prompt_tokens, l.prompt_tokens)
      T.eq(obs.generated_tokens, l.generated_tokens)
      ttfts[#ttfts + 1] = obs.first_token_ms - obs.inference_start_ms
    end
    T.eq(l.generated_tokens, 11, "stats.h counts the tokens after the first")
    T.eq(l.ended, "max")
    -- the ETDump's forwards: one per prompt token and one per generated token after the first
    local doc = assert(etdump.read(run_dir .. "/" .. rec.artifacts.etdump.file))
    local fw = llm.forwards(doc)
    T.eq(#fw, l.prompt_tokens + l.generated_tokens, "forward count")
    -- per-token latencies: the decode forwards of every process
    T.eq(rec.latency_ms.n, 3 * l.generated_tokens)
    T.eq(rec.latency_ms.source, "etdump")
    T.eq(#l.token_ms_by_position, l.generated_tokens)
    T.eq(l.token_times, "etdump", "the ETDump's forwards add up: they are the per-token times")
    -- odp's TTFT (ETDump clock, µs) is inside the runner's (whole ms, which also holds the prompt's tokenizing)
    table.sort(ttfts)
    T.ok(l.ttft_us > 0 and l.ttft_us <= (ttfts[#ttfts] + 1) * 1000,
      ("ETDump TTFT %d us within the runner's %s ms"):format(l.ttft_us, table.concat(ttfts, "/")))
    T.eq(l.ttft_ms, ttfts[2], "the median of the runner's own TTFTs")
    -- decode rate: the runner's own formula
    T.ok(l.decode_tokens_per_s > 0)
    -- the generated text, without the prompt or the observer line
    local text = T.read(run_dir .. "/generated.txt")
    T.match(text, "^ the tiny model says hello")
    T.ok(not text:find("PyTorchObserver", 1, true))
    -- memory by phase, cut at the runner's own lines
    local names = {}
    for _, ph in ipairs(rec.memory.phases) do names[#names + 1] = ph.name end
    T.match(table.concat(names, ","), "^load,prefill")
    -- the runner's default etdump.in is never left behind: odp gives it a path
    T.ok(not sys.stat(dir .. "/etdump.in"), "no etdump.in in the cwd")
    -- peak RSS against GNU time's of the same generation
    local g = assert(proc.run { argv = { "/usr/bin/time", "-v", p.runner, "--model_path", p.model,
      "--tokenizer_path", p.tokenizer, "--prompt", "Once upon a time", "--temperature", "0", "--max_new_tokens", "12",
      "--etdump_path", dir .. "/gnu.etdump" }, timeout = 60 })
    local gnu = tonumber(g.stderr:match("Maximum resident set size %(kbytes%): (%d+)"))
    T.ok(math.abs(rec.peak_rss_kb - gnu) <= 0.1 * gnu,
      ("peak RSS %d kB, GNU time %d kB"):format(rec.peak_rss_kb, gnu))
    -- the report page: the generation's figures and every token's latency by position
    local rep = assert(proc.run { argv = { odp, "report", run_dir }, cwd = dir, timeout = 60 })
    T.eq(rep.status, 0, rep.stderr)
    local page = T.read(run_dir .. "/report.html")
    T.match(page, 'id="sec%-llm"')
    T.match(page, "Latency by token position")
    T.match(page, "its forward in the ETDump")
    T.match(page, "decode %(tg%)")
    -- the terminal shows the names users know
    local h = odp_run({ "--llm", "--runner", p.runner, "--model", p.model, "--tokenizer", p.tokenizer,
      "--prompt", "Once upon a time", "--max-new-tokens", "4" })
    T.eq(h.status, 0, h.stderr)
    T.match(h.stdout, "TTFT %(runner%)")
    T.match(h.stdout, "decode %(tg%)")
    T.match(h.stdout, "prefill %(pp%)")
  end)

-- A variant of the toy whose get_eos_ids names "." (tests/fixtures/llm/gen_toy_pte.py's EOS_PIECE): greedy decoding
-- makes " the tiny model says hello from executorch." and the runner stops there, 8 tokens into --max-new-tokens 32.
-- Its generator must first rebuild the peer's own toy.pte byte for byte (the copy is faithful).
local function eos_toy(p)
  local out = dir .. "/toy-eos"
  if sys.stat(out .. "/toy-eos.pte") then return out .. "/toy-eos.pte" end
  local gen = { "/usr/bin/python3", root .. "/tests/fixtures/llm/gen_toy_pte.py", root .. "/tests/fixtures/pte/schema",
    out }
  local r = assert(proc.run { argv = gen, timeout = 120 })
  T.eq(r.status, 0, r.stderr)
  T.eq(sys.sha256_file(out .. "/toy.pte"), sys.sha256_file(p.model), "the generator rebuilds the peer's toy.pte")
  gen[#gen + 1] = "."
  r = assert(proc.run { argv = gen, timeout = 120 })
  T.eq(r.status, 0, r.stderr)
  return out .. "/toy-eos.pte"
end

T.with_real_llm("EOS before --max-new-tokens: the runner stops, odp says so with the count the runner reports",
  function(p)
    local model = eos_toy(p)
    local r = odp_run({ "--llm", "--runner", p.runner, "--model", model, "--tokenizer", p.tokenizer,
      "--prompt", "Once upon a time", "--max-new-tokens", "32", "-n", "2", "--format", "json" })
    T.eq(r.status, 0, r.stderr)
    local rec = assert(json.decode(r.stdout))
    T.eq(rec.ok, true)
    local run_dir = rec.artifacts.run_dir
    for i = 1, 2 do
      local out = T.read(("%s/run%d.stdout"):format(run_dir, i))
      local obs = assert(llm.observer(out))
      T.eq(obs.generated_tokens, rec.llm.generated_tokens, "the runner's own count")
      T.match(T.read(("%s/run%d.stderr"):format(run_dir, i)), "Reached to the end of generation")
    end
    -- the first token, then 7 more: " the tiny model says hello from executorch" and the EOS "."
    T.eq(rec.llm.generated_tokens, 7)
    T.eq(rec.llm.ended, "eos")
    T.eq(T.read(run_dir .. "/generated.txt"):match("^[^\n]*"), " the tiny model says hello from executorch.")
    local said = {}
    for _, w in ipairs(rec.warnings) do if w:find("EOS", 1, true) then said[#said + 1] = w end end
    T.eq(said, { "llm: the model ended its text (EOS) after 8 of --max-new-tokens 32 tokens" })
    -- per-token latency still adds up: the EOS token is sampled, never run through the model
    T.eq(rec.latency_ms.n, 2 * 7)
    local h = odp_run({ "--llm", "--runner", p.runner, "--model", model, "--tokenizer", p.tokenizer,
      "--prompt", "Once upon a time", "--max-new-tokens", "32" })
    T.eq(h.status, 0, h.stderr)
    T.match(h.stdout, "ended at%s+eos")
    T.match(h.stdout .. h.stderr, "EOS%) after 8 of %-%-max%-new%-tokens 32")
  end)

T.with_real_llm("odp compare of two --llm runs: time to first token and the rates per process; a rate that falls " ..
  "is slower", function(p)
  local dirs = {}
  for i = 1, 2 do
    local r = odp_run({ "--llm", "--runner", p.runner, "--model", p.model, "--tokenizer", p.tokenizer,
      "--prompt-tokens", "6", "--max-new-tokens", "6", "-n", "5", "--format", "json" })
    T.eq(r.status, 0, r.stderr)
    local rec = assert(json.decode(r.stdout))
    T.eq(#rec.llm.decode_tokens_per_s_each, 5, "each process's rate")
    dirs[i] = rec.artifacts.run_dir
  end
  local r = assert(proc.run { argv = { odp, "compare", dirs[1], dirs[2], "--format", "json" }, cwd = dir, timeout = 60 })
  T.eq(r.status, 0, r.stderr)
  local res = assert(json.decode(r.stdout))
  local by = {}
  for _, row in ipairs(res.rows) do by[row.metric] = row end
  T.ok(by["time to first token"] and by["decode tokens/s (tg)"] and by["prefill tokens/s (pp)"], "the LLM rows")
  T.eq(by["decode tokens/s (tg)"].a.n, 5)
  -- which way is worse, on made-up rates: half the tokens/s is slower, half the TTFT faster
  local compare = require("odp.results.compare")
  local hi, lo = {}, {}
  for i = 1, 8 do hi[i], lo[i] = 100 + i, 50 + i end
  T.eq(compare.row("decode tokens/s (tg)", "tokens/s", hi, lo, { kind = "rate" }).verdict, "slower")
  T.eq(compare.row("time to first token", "ms", hi, lo).verdict, "faster")
end)

T.with_real_llm("a sweep over prompt and generation lengths: --prompt-tokens N is N tokens by the runner's own count",
  function(p)
    local out = dir .. "/llm-sweep.jsonl"
    local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/sweep.lua", "--flow", root .. "/scripts/host.lua",
      "--llm", "--runner", p.runner, "--model", p.model, "--tokenizer", p.tokenizer, "-p", "prompt_tokens=3,9",
      "-p", "max_new_tokens=2,5", "--out", out, "--runs-dir", dir .. "/sweep-runs" }, cwd = dir, timeout = 240 })
    T.eq(r.status, 0, r.stderr)
    local seen = {}
    for line in T.read(out):gmatch("[^\n]+") do
      local rec = assert(json.decode(line))
      T.eq(rec.ok, true)
      T.eq(rec.llm.prompt_tokens, rec.params.prompt_tokens, "the runner counted the made prompt's tokens")
      T.eq(rec.llm.generated_tokens, rec.params.max_new_tokens - 1)
      T.eq(rec.latency_ms.n, rec.params.max_new_tokens - 1)
      for _, w in ipairs(rec.warnings or {}) do T.ok(not w:find("prompt%-tokens"), w) end
      seen[#seen + 1] = rec.params.prompt_tokens .. "/" .. rec.params.max_new_tokens
    end
    table.sort(seen)
    T.eq(seen, { "3/2", "3/5", "9/2", "9/5" })
  end)

T.with_real_llm("llama_main failures: a tokenizer that does not load, a model without its metadata methods",
  function(p)
    T.write(dir .. "/bad.tok", ("\255\1"):rep(1500))
    local r = odp_run({ "--llm", "--runner", p.runner, "--model", p.model, "--tokenizer", dir .. "/bad.tok",
      "--prompt", "hi", "--max-new-tokens", "4", "--format", "json" })
    T.ok(r.status ~= 0)
    local rec = assert(json.decode(r.stdout))
    T.eq(rec.ok, false)
    T.match(rec.error.message, "the tokenizer .*bad%.tok did not load")
    T.ok(not rec.error.message:find("\n"), "one line")
    r = odp_run({ "--llm", "--runner", p.runner, "--model", root .. "/tests/fixtures/pte/add_arduino.pte",
      "--tokenizer", p.tokenizer, "--prompt", "hi", "--max-new-tokens", "4", "--format", "json" })
    rec = assert(json.decode(r.stdout))
    T.eq(rec.ok, false)
    T.match(rec.error.message, "no get_max_seq_len method")
    -- killed by SIGKILL that odp did not send (a phone's low-memory killer): named, the tokenizer not blamed
    T.write(dir .. "/killed.sh", ('#!/bin/sh\n"%s" "$@" >/dev/null 2>&1 &\nsleep 0.2\nkill -KILL $$\n'):format(p.runner))
    assert(sys.chmod(dir .. "/killed.sh", tonumber("755", 8)))
    r = odp_run({ "--llm", "--runner", dir .. "/killed.sh", "--model", p.model, "--tokenizer", p.tokenizer,
      "--prompt", "hi", "--max-new-tokens", "4", "--format", "json" })
    rec = assert(json.decode(r.stdout))
    T.eq(rec.ok, false)
    T.match(rec.error.message, "runner killed by SIGKILL.*low%-memory killer")
    -- its own kill is in no log: said so (or that the kernel log is closed to odp here), never a made-up killer
    T.match(rec.error.message, "not odp's timeout; the board's (%a+) ")
    T.ok(not rec.error.message:find("tokenizer", 1, true), rec.error.message)
    -- a PyTorchObserver line with a refused value: the run goes on, with one warning that names it
    T.write(dir .. "/negative.sh", ('#!/bin/sh\n"%s" "$@" | sed "s/\\"prompt_tokens\\":[0-9]*/\\"prompt_tokens\\":-1/"\n')
      :format(p.runner))
    assert(sys.chmod(dir .. "/negative.sh", tonumber("755", 8)))
    r = odp_run({ "--llm", "--runner", dir .. "/negative.sh", "--model", p.model, "--tokenizer", p.tokenizer,
      "--prompt", "hi", "--max-new-tokens", "4", "--format", "json" })
    rec = assert(json.decode(r.stdout))
    T.eq(rec.ok, true, r.stderr)
    T.eq(rec.llm.prompt_tokens, nil)
    T.eq(rec.llm.generated_tokens, 3)
    local said = {}
    for _, w in ipairs(rec.warnings) do if w:find("PyTorchObserver", 1, true) then said[#said + 1] = w end end
    T.eq(said, { "llm: its PyTorchObserver line has unusable prompt_tokens: figures from them are left out" })
  end)

T.with_real_llm("an ETDump that cannot be read: every token's time from stdout on the host, the record says so",
  function(p)
    -- the runner's ETDump emptied after it ran (a copy kept as the oracle): the dump is there, its forwards not
    local keep = dir .. "/kept"
    sys.mkdir_p(keep)
    T.write(dir .. "/no-etdump.sh", ('#!/bin/sh\nfor a in "$@"; do [ "$prev" = --etdump_path ] && d="$a"; prev="$a"; ' ..
      'done\n"%s" "$@"; rc=$?\nk=$(ls "%s" | wc -l)\ncp "$d" "%s/$((k + 1)).etdump"; : > "$d"\nexit $rc\n')
      :format(p.runner, keep, keep))
    assert(sys.chmod(dir .. "/no-etdump.sh", tonumber("755", 8)))
    -- --no-memory: the runner's stdout straight into odp's read loop (with memory by phase it passes through
    -- odp-rusage's relay, a second reader, and more pieces arrive together on a busy machine: the case below)
    local r = odp_run({ "--llm", "--runner", dir .. "/no-etdump.sh", "--model", p.model, "--tokenizer", p.tokenizer,
      "--prompt", "Once upon a time", "--max-new-tokens", "24", "-n", "4", "--no-memory", "--format", "json" })
    T.eq(r.status, 0, r.stderr)
    local rec = assert(json.decode(r.stdout))
    T.eq(#sys.readdir(keep), 4, "each process's ETDump kept aside")
    local kept = {}
    for i = 1, 4 do kept[i] = ("%s/%d.etdump"):format(keep, i) end
    local said = false
    for _, w in ipairs(rec.warnings) do said = said or w:find("ETDump's forwards do not match .* stdout") end
    T.ok(said, "the fallback is said")
    oracle.check_record(T, rec, 4, kept, "host, fallback", true)
    -- asked for: stdout even with a good ETDump, and no fallback warning
    r = odp_run({ "--llm", "--runner", p.runner, "--model", p.model, "--tokenizer", p.tokenizer,
      "--prompt", "Once upon a time", "--max-new-tokens", "24", "-n", "4", "--token-times", "stdout",
      "--format", "json" })
    T.eq(r.status, 0, r.stderr)
    rec = assert(json.decode(r.stdout))
    for _, w in ipairs(rec.warnings) do T.ok(not w:find("ETDump's forwards do not match"), w) end
    local dumps = {}
    for i = 1, 4 do dumps[i] = ("%s/run%d.etdump"):format(rec.artifacts.run_dir, i) end
    oracle.check_record(T, rec, 4, dumps, "host, asked")
    -- the report's chart says which clock timed the tokens
    local rep = assert(proc.run { argv = { odp, "report", rec.artifacts.run_dir }, cwd = dir, timeout = 60 })
    T.eq(rep.status, 0, rep.stderr)
    -- (on a loaded machine no process's pieces may have come one chunk each: then there are no token times, said
    -- in the record, and the page claims none)
    local page = T.read(rec.artifacts.run_dir .. "/report.html")
    T.eq(page:find("when its piece arrived on stdout", 1, true) ~= nil, rec.llm.token_times == "stdout",
      "the page says stdout timed the tokens exactly when the record has stdout's token times")
  end)

-- A real OOM kill: the runner in a cgroup v1 memory cgroup limited to 256 KiB (it needs ~7 MB). The kernel kills
-- it; odp names the killer from the host's kernel log. Oracles: the cgroup's own oom_kill count, and the pid in
-- the kernel's line read here with a pattern of the test's. The cgroup is removed whatever happens.
local CGROUP_V1 = "/sys/fs/cgroup/memory"
local function cgroup_ok()
  local probe = CGROUP_V1 .. "/odp-test-probe-" .. sys.getpid()
  if not sys.mkdir_p(probe) then return false end
  os.remove(probe)
  return true
end
if not cgroup_ok() then
  T.skip("a runner killed by a memory cgroup's OOM killer: named from the kernel log",
    "no writable cgroup v1 memory controller at " .. CGROUP_V1)
else
  T.with_real_llm("a runner killed by a memory cgroup's OOM killer: named from the kernel log", function(p)
    local cg = CGROUP_V1 .. "/odp-test-" .. sys.getpid()
    assert(sys.mkdir_p(cg))
    local ok, err = pcall(function()
      T.write(cg .. "/memory.limit_in_bytes", "262144")
      -- named llama_main, so that the kernel's name for the runner it execs is the name odp looks for
      assert(sys.mkdir_p(dir .. "/cg"))
      T.write(dir .. "/cg/llama_main", ('#!/bin/sh\necho $$ > %s/cgroup.procs\nexec "%s" "$@"\n'):format(cg, p.runner))
      assert(sys.chmod(dir .. "/cg/llama_main", tonumber("755", 8)))
      local r = odp_run({ "--llm", "--runner", dir .. "/cg/llama_main", "--model", p.model, "--tokenizer",
        p.tokenizer, "--prompt", "hi", "--max-new-tokens", "4", "--format", "json" })
      local rec = assert(json.decode(r.stdout))
      T.eq(rec.ok, false)
      T.eq(T.read(cg .. "/memory.oom_control"):match("oom_kill (%d+)"), "1", "the cgroup killed once")
      local pid
      local kernel = assert(proc.run { argv = { "dmesg" }, timeout = 30 }).stdout
      for x in kernel:gmatch("Memory cgroup out of memory: Killed process (%d+) %(llama_main%)") do
        pid = x
      end
      T.eq(rec.error.message:match("^runner killed by SIGKILL %(the kernel's OOM killer at its memory cgroup's limit " ..
        "killed llama_main: pid (%d+), [%d.]+ MB resident; from the board's log%)$"),
        pid, rec.error.message)
      T.ok(not rec.error.message:find("\n"), "one line")
    end)
    os.remove(cg) -- rmdir: the cgroup is empty once its one process is dead
    T.ok(not sys.stat(cg), "the cgroup removed")
    assert(ok, err)
  end)
end

T.with_real_llm("llama_main over SSH (loopback sshd): the tokenizer staged like the model, each process's ETDump " ..
  "brought back, nothing left on the board", function(p)
  local sshd = require("sshd")
  local srv = sshd.start()
  local rd = srv.remote_dir .. "/llm"
  local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--remote-dir", rd,
    "--llm", "--runner", p.runner, "--model", p.model, "--tokenizer", p.tokenizer, "--prompt", "Once upon a time",
    "--max-new-tokens", "6", "-n", "2", "--runs-dir", dir .. "/ssh-runs", "--format", "json" }, cwd = dir,
    timeout = 180 })
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.eq(rec.ok, true)
  T.match(rec.target, "^ssh://")
  T.eq(rec.llm.generated_tokens, 5)
  T.eq(rec.latency_ms.n, 2 * 5)
  T.eq(sys.sha256_file(rd .. "/.odp/blobs/" .. sys.sha256_file(p.tokenizer)), sys.sha256_file(p.tokenizer),
    "the tokenizer staged")
  T.eq(rec.tokenizer.sha256, sys.sha256_file(p.tokenizer))
  local doc = assert(etdump.read(rec.artifacts.run_dir .. "/" .. rec.artifacts.etdump.file))
  T.eq(#llm.forwards(doc), rec.llm.prompt_tokens + rec.llm.generated_tokens)
  -- the run's own files are gone from the board, and the runner's default etdump.in was never written
  -- (odp's own directory there went with it: docs/devices.md "A shared board")
  local left
  T.settles(function() -- it goes just after odp (odp.target.shell.close_run_dir)
    left = io.popen("cd " .. rd .. " && find . -mindepth 1 | sort"):read("a")
    return not left:match("%./%.odp/runs/[^\n]+")
  end)
  T.eq(left:match("%./%.odp/runs/[^\n]+"), nil, "no odp directory left: " .. left)
  T.eq(left:match("etdump"), nil, "no ETDump left: " .. left)
  -- EOS on a board: the same stop, the same count as the runner's own
  r = assert(proc.run { argv = { odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--remote-dir", rd,
    "--llm", "--runner", p.runner, "--model", eos_toy(p), "--tokenizer", p.tokenizer, "--prompt", "Once upon a time",
    "--max-new-tokens", "32", "--runs-dir", dir .. "/ssh-runs", "--format", "json" }, cwd = dir, timeout = 180 })
  T.eq(r.status, 0, r.stderr)
  rec = assert(json.decode(r.stdout))
  T.eq({ rec.llm.ended, rec.llm.generated_tokens }, { "eos", 7 })
  T.eq(assert(llm.observer(T.read(rec.artifacts.run_dir .. "/runner.stdout"))).generated_tokens, 7)
  T.match(table.concat(rec.warnings, "\n"), "EOS%) after 8 of %-%-max%-new%-tokens 32")
  -- a runner killed by SIGKILL on the board: its log read there, through the board's own exec
  r = assert(proc.run { argv = { odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--remote-dir", rd,
    "--llm", "--runner", dir .. "/killed.sh", "--model", p.model, "--tokenizer", p.tokenizer, "--prompt", "hi",
    "--max-new-tokens", "4", "--runs-dir", dir .. "/ssh-runs", "--format", "json" }, cwd = dir, timeout = 180 })
  rec = assert(json.decode(r.stdout))
  T.eq(rec.ok, false)
  T.match(rec.error.message, "^runner killed by SIGKILL %(not odp's timeout; the board's (%a+) ")
end)

T.with_real_llm("per-token times from stdout over SSH (loopback sshd), read and timed by the helper on the board: " ..
  "against the ETDumps brought back", function(p)
  -- the aarch64 runner under qemu-user: ~25 ms a token, a board's pace (the x86 one's 1 ms tokens are read two
  -- at a time by a helper that shares 2 busy CPUs, and those processes give no per-token times)
  T.binfmt_aarch64() -- not left to another suite's registration
  local sshd = require("sshd")
  local srv = sshd.start()
  local r = assert(proc.run { argv = { odp, "run", root .. "/scripts/rpi5.lua", "--host", srv.user .. "@127.0.0.1",
    "--port", tostring(srv.port), "--identity", srv.identity, "--known-hosts", srv.known_hosts, "--remote-dir",
    srv.remote_dir .. "/llm-times", "--llm", "--runner", p.runner, "--allow-emulated", "--model", p.model,
    "--tokenizer", p.tokenizer, "--prompt", "Once upon a time", "--max-new-tokens", "12", "-n", "4",
    "--token-times", "stdout", "--runs-dir", dir .. "/ssh-times-runs", "--format", "json" }, cwd = dir,
    timeout = 180 })
  T.eq(r.status, 0, r.stderr)
  local rec = assert(json.decode(r.stdout))
  T.match(rec.target, "^ssh://")
  local dumps = {}
  for i = 1, 4 do dumps[i] = ("%s/run%d.etdump"):format(rec.artifacts.run_dir, i) end
  oracle.check_record(T, rec, 4, dumps, "ssh", true)
end, "aarch64")

T.done()
