--- The oracles of --llm's per-token times from stdout (docs/llm.md): a record's, or a process's, against the
-- ETDump of the same processes and the runner's own PyTorchObserver line. The one check every suite that runs
-- llama_main with stdout times uses (tests/lua/llm_test.lua: host and SSH; tests/adb/flow.lua: adb).
--   local oracle = require("llm_oracle")
--   oracle.check_record(T, rec, n, etdump_paths, "ssh")   -- a run of n processes with --prompt "Once upon a time"
local llm = require("odp.parse.llm")
local etdump = require("odp.parse.etdump")
local stats = require("odp.core.stats")

local M = {}

-- The decode forwards in an ETDump: their durations, and the time from each one's end to the next one's (the
-- runner's own inter-token time on its clock: a forward, then sampling, decoding and printing the piece, and on a
-- busy machine the wait for a CPU). A process's ETDump, as stdout's pieces: token k > 1 comes out of forward
-- prompt_tokens + k - 1.
function M.decode_forwards(path, prompt_tokens, durations, gaps)
  local fw, spans = llm.forwards(assert(etdump.read(path)))
  table.move(fw, prompt_tokens + 1, #fw, #durations + 1, durations)
  for k = prompt_tokens + 1, #spans do gaps[#gaps + 1] = etdump.duration(spans[k - 1][2], spans[k][2]) / 1e6 end
end

-- stdout's per-token times against the ETDump's (the oracle), medians over every token:
-- - against the forwards' ends (the oracle of the same quantity on the runner's clock): a piece is printed right
--   after its forward, so the two differ only by when the reader woke for each piece; a late read lengthens one
--   interval and shortens the next, which the median absorbs, but not a reader that lags for a stretch (the
--   helper, sshd and odp share the 2 CPUs with the runner and the other suites): seen 17% over 23 tokens of one
--   process behind sshd, 5% with odp reading alone. 0.1 ms + 20%: times in the wrong unit, or intervals that are
--   not one token each (pieces read together counted as one token all through) would be well outside it;
-- - against the forwards' durations: an interval holds one whole forward, so not shorter but for late reads (one
--   shortens the next interval by its lateness; the medians of two different sets only mostly absorb that: seen
--   1.2% below with qemu-user's 21 ms tokens, and 0.22 ms below with the host's 2.2 ms ones in a CI run, where a
--   reader's lateness is a tenth of a token; so 0.3 ms + 5%: an interval of half a token, two pieces counted
--   where one came, still fails), but longer by all a token costs outside
--   Method::execute: 4-12% on an idle moment of this 2-CPU machine, seen at 2.6x under the other suites' load
--   (the runner waiting for a CPU between forwards, which their own durations leave out): no upper bound there.
function M.near_forward(T, stdout_p50, durations, gaps, what)
  local d50, g50 = stats.percentile(durations, 50), stats.percentile(gaps, 50)
  local msg = ("%s: stdout's per-token p50 %.3f ms; the ETDump's forward ends %.3f ms apart, forwards %.3f ms")
    :format(what, stdout_p50, g50, d50)
  T.ok(math.abs(stdout_p50 - g50) <= 0.1 + 0.2 * g50, msg)
  T.ok(stdout_p50 >= d50 - 0.3 - 0.05 * d50, msg)
end

--- The prefill in a process's ETDump, on the runner's clock: from the first forward's start to the end of the
-- forward the first token comes out of (forward prompt_tokens), in ms.
function M.prefill_ms(path, prompt_tokens)
  local _, spans = llm.forwards(assert(etdump.read(path)))
  return etdump.duration(spans[1][1], spans[prompt_tokens][2]) / 1e6
end

-- TTFT from stdout (the prompt's echo to the first piece's arrival), process by process, held between two
-- oracles on the runner's own clock (the load of the machine moves a process's TTFT by tens of ms; each pair
-- moves together), medians over the processes:
-- - at most the runner's own (first_token_ms - inference_start_ms, whole ms: each stamp truncated, so 1 ms
--   either way): the runner stamps its start before it tokenizes and echoes the prompt, and its first token
--   before it prints it; 2 ms more for the first piece's read waking late on a loaded 2-CPU machine (one was
--   seen 4 ms late; the median absorbs one);
-- - at least the ETDump's prefill (its forwards up to the first token's): the echo is printed before the first
--   forward starts and the first piece after that forward ends; 2 ms less for the echo's read waking late.
-- Not nearer the runner's own from below: what it counts before the echo (tokenizing the prompt) is µs natively
-- but several ms for the aarch64 runner under qemu-user on a loaded machine (code translated on first use in
-- each process): seen 1.9-5.8 ms.
function M.near_ttft(T, stdout_us, runner_ms, prefill_ms, what)
  local over, above = {}, {}
  for i = 1, #stdout_us do
    over[i] = stdout_us[i] / 1000 - runner_ms[i]
    above[i] = stdout_us[i] / 1000 - prefill_ms[i]
  end
  local msg = ("%s: stdout's TTFT minus the runner's, median %.3f ms; minus the ETDump's prefill, median %.3f ms " ..
    "(stdout %s us; runner %s ms; prefill %s ms)"):format(what, stats.percentile(over, 50),
    stats.percentile(above, 50), table.concat(stdout_us, ","), table.concat(runner_ms, ","),
    table.concat(prefill_ms, ","))
  T.ok(stats.percentile(over, 50) <= 1 + 2, msg)
  T.ok(stats.percentile(above, 50) >= -2, msg)
end

--- What a record with stdout as the token times must hold (its prompt "Once upon a time"): the processes with one chunk per piece, the rest
-- said; the per-token p50 and TTFT against the ETDumps (a list of files) and the runners' own lines. Without
-- `must`, a record where no process's pieces came one chunk each is accepted when it says so.
function M.check_record(T, rec, n, etdumps, what, must)
  local l = rec.llm
  local made = l.generated_tokens + 1
  T.ok(l.stdout_chunks and l.stdout_chunks <= made, "the last process's chunks: " .. tostring(l.stdout_chunks))
  local left = 0
  for _, w in ipairs(rec.warnings or {}) do
    left = tonumber(w:match("llm: (%d+) of %d+ processes' pieces did not reach stdout one chunk per token")) or left
  end
  if l.token_times == nil and not must then
    local said = false
    for _, w in ipairs(rec.warnings or {}) do said = said or w:find("no process's pieces reached stdout one chunk") end
    T.ok(said, "no per-token latency, and why: " .. table.concat(rec.warnings or {}, " | "))
    return
  end
  T.eq(l.token_times, "stdout")
  T.eq(rec.latency_ms.source, "stdout")
  T.eq(rec.latency_ms.n, (n - left) * l.generated_tokens, "every generated token of each process with times")
  -- each process's stdout and its chunks' arrivals (runN.stdout_times.csv): its TTFT beside the runner's own
  local runner, mine, prefill, durations, gaps = {}, {}, {}, {}, {}
  for i = 1, n do
    local base = ("%s/run%d"):format(rec.artifacts.run_dir, i)
    local out = T.read(base .. ".stdout")
    local obs = assert(llm.observer(out))
    local times = { t_us = {}, ends = {} }
    local csv = T.read(base .. ".stdout_times.csv")
    T.match(csv, "^t_us,stdout_bytes\n")
    for t, e in csv:gmatch("\n(%d+),(%d+)") do
      times.t_us[#times.t_us + 1], times.ends[#times.ends + 1] = tonumber(t), tonumber(e)
    end
    T.eq(times.ends[#times.ends], #out, "the arrivals cover the whole stdout")
    local pieces = assert(llm.piece_times(times, out, "Once upon a time"))
    -- the oracle from the same processes as the record's times: those whose pieces came one chunk each (a
    -- process left out ran on a busier machine, slower and more often read late)
    if #pieces.pieces_us == made then M.decode_forwards(etdumps[i], l.prompt_tokens, durations, gaps) end
    if pieces.echo_us then
      mine[#mine + 1] = pieces.pieces_us[1] - pieces.echo_us
      runner[#runner + 1] = obs.first_token_ms - obs.inference_start_ms
      prefill[#prefill + 1] = M.prefill_ms(etdumps[i], l.prompt_tokens)
    end
  end
  T.eq(#gaps, rec.latency_ms.n, "as many ETDump forwards as the record has token times")
  M.near_forward(T, rec.latency_ms.p50, durations, gaps, what)
  T.ok(#mine >= n // 2, "the prompt came in a chunk of its own")
  T.eq(l.ttft_us, math.tointeger(stats.percentile(mine, 50) // 1), "the record's TTFT: the processes' median")
  M.near_ttft(T, mine, runner, prefill, what)
end
return M
