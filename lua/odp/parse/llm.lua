--- Parser for what ExecuTorch's LLM runner (`llama_main`, extension/llm/runner) prints, and for the per-forward
-- times in its ETDump.
-- - stdout: the prompt, each generated piece as it is produced, then one `PyTorchObserver {json}` line
--   (extension/llm/runner/stats.h, `stats_to_json_string`). Its keys changed across versions: release/0.6 and 1.0
--   have the timestamps, token counts, `aggregate_sampling_time_ms` and `SCALING_FACTOR_UNITS_PER_SECOND`; 1.4 adds
--   `prefill_token_per_sec`, `decode_token_per_sec` and `gpu_*`, main `model_execution_*_ms` and
--   `aggregate_model_execution_time_ms` (tests/fixtures/llm has a line of each). Any key may be
--   missing and unknown keys are ignored; the derived figures are computed here from the timestamps, as stats.h
--   prints them, so every version gives the same ones.
-- - stderr: the runner's log lines (odp.parse.executorch reads those), among them "Max new tokens N reached!" or
--   the end of generation at an EOS token, and the tokenizer's normal `E tokenizers:` lines while it tries
--   formats.
-- Pure functions over untrusted text: they never raise on content and bound what they keep.
local json = require("odp.core.json")

local M = {}

-- The observer line is a few hundred bytes; anything longer is not one (a runner's garbage).
local MAX_OBSERVER = 64 * 1024
-- The timestamps are wall-clock ms since the epoch (or, in some versions, since the runner's start): numbers
-- beyond this are garbage, and a span is trusted only when both ends are present and in order.
local MAX_MS = 2 ^ 53

-- The keys odp reads, as stats.h names them. The counts are integers (int64_t), the rest whole ms (long).
local COUNT_KEYS = { prompt_tokens = true, generated_tokens = true }
local INTEGER_KEYS = { "prompt_tokens", "generated_tokens", "model_load_start_ms", "model_load_end_ms",
  "inference_start_ms", "inference_end_ms", "prompt_eval_end_ms", "first_token_ms", "aggregate_sampling_time_ms",
  "SCALING_FACTOR_UNITS_PER_SECOND", "model_execution_start_ms", "model_execution_end_ms",
  "aggregate_model_execution_time_ms" }
-- A note names at most this many refused keys: a garbage line must not make a garbage-sized warning.
local MAX_NAMED = 4

--- The `PyTorchObserver {json}` line's object from a runner's stdout (the last one, when a runner printed
--- several), with only the known keys that are finite non-negative numbers (the counts whole). -> table and, when
--- it refused known keys (not such a number, or given twice: stats.h prints each once), one note naming them;
--- or nil and why.
function M.observer(text)
  text = text or ""
  -- the last occurrence, found by plain search: a pattern anchored on the line around it is quadratic in a long
  -- line without one (a runner's garbage)
  local at, from = nil, 1
  while true do
    local i = text:find("PyTorchObserver", from, true)
    if not i then break end
    at, from = i, i + 1
  end
  if not at then return nil, "the runner printed no PyTorchObserver line" end
  local last = text:sub(at, (text:find("\n", at, true) or #text + 1) - 1)
  local body = last:match("PyTorchObserver%s+(%b{})")
  if not body or #body > MAX_OBSERVER then return nil, "its PyTorchObserver line holds no JSON object" end
  local ok, obj = pcall(json.decode, body)
  if not ok or type(obj) ~= "table" then return nil, "its PyTorchObserver line is not valid JSON" end
  local out, refused = {}, {}
  for _, k in ipairs(INTEGER_KEYS) do
    local v = obj[k]
    local _, seen = body:gsub('"' .. k .. '"%s*:', "")
    if seen > 1 then
      refused[#refused + 1] = k .. " (given twice)"
    elseif type(v) == "number" and v == v and v >= 0 and v < MAX_MS and (not COUNT_KEYS[k] or math.tointeger(v)) then
      out[k] = v
    elseif v ~= nil then
      refused[#refused + 1] = k
    end
  end
  if #refused == 0 then return out end
  local named = table.concat(refused, ", ", 1, math.min(#refused, MAX_NAMED))
  if #refused > MAX_NAMED then named = named .. (" and %d more"):format(#refused - MAX_NAMED) end
  return out, ("its PyTorchObserver line has unusable %s: figures from them are left out"):format(named)
end

-- b - a when both are present and a <= b.
local function span(a, b)
  if a and b and b >= a then return b - a end
end

--- The figures ExecuTorch's stats.h prints, from an observer object: load_ms, ttft_ms (first token -
--- inference start), prefill_ms (prompt evaluated - inference start), decode_ms (inference end - prompt evaluated),
--- prefill and decode tokens/s (stats.h: prompt tokens over prefill, generated tokens over decode), sampling_share
--- (aggregate sampling time over the inference). Absent inputs leave their figure absent.
function M.figures(obs)
  local f = {
    prompt_tokens = math.tointeger(obs.prompt_tokens), generated_tokens = math.tointeger(obs.generated_tokens),
    load_ms = span(obs.model_load_start_ms, obs.model_load_end_ms),
    ttft_ms = span(obs.inference_start_ms, obs.first_token_ms),
    prefill_ms = span(obs.inference_start_ms, obs.prompt_eval_end_ms),
    decode_ms = span(obs.prompt_eval_end_ms, obs.inference_end_ms),
    inference_ms = span(obs.inference_start_ms, obs.inference_end_ms),
  }
  if f.prompt_tokens and f.prefill_ms and f.prefill_ms > 0 then
    f.prefill_tokens_per_s = f.prompt_tokens / f.prefill_ms * 1000
  end
  if f.generated_tokens and f.decode_ms and f.decode_ms > 0 then
    f.decode_tokens_per_s = f.generated_tokens / f.decode_ms * 1000
  end
  if obs.aggregate_sampling_time_ms and f.inference_ms and f.inference_ms > 0 then
    f.sampling_share = math.min(1, obs.aggregate_sampling_time_ms / f.inference_ms)
  end
  return f
end

--- How the generation ended, from the runner's log: "max" (it reached --max_new_tokens), "eos" (an end-of-sequence
--- token), or nil when the log does not say.
function M.ended(stderr)
  stderr = stderr or ""
  if stderr:find("Max new tokens %d+ reached") then return "max" end
  if stderr:find("[Rr]eached to the end of generation") or stderr:find("EOS token") then return "eos" end
end

--- The generated text: stdout without the observer line and without the echoed prompt at its start.
function M.generated_text(stdout, prompt)
  local text = (stdout or ""):gsub("\n?PyTorchObserver[^\n]*\n?", "")
  if prompt and prompt ~= "" and text:sub(1, #prompt) == prompt then text = text:sub(#prompt + 1) end
  return text
end

--- The model's forward executions in an ETDump (odp.parse.etdump.read), in file order: one per token the model
--- processed (prefill runs token by token in a KV-cache model without dynamic shapes; a model that takes the
--- prompt in one forward has one prefill forward). The dump does not name a run's method: the runner loads and
--- runs each metadata method (get_max_seq_len, ...) first, a `Default` run (Program::load_method) then an
--- `Execute` run each, and loads `forward` last, so the forwards are the `Execute` runs after the last load.
--- -> list of durations in ms (Linux runners' ticks are ns), and the list of {start, end} ticks.
function M.forwards(doc)
  local runs = doc and doc.run_data or {}
  local first = 1
  for i, run in ipairs(runs) do
    if run.name ~= "Execute" then first = i + 1 end
  end
  local ms, spans = {}, {}
  for i = first, #runs do
    for _, e in ipairs(runs[i].events or {}) do
      if e.kind == "profile" and e.name == "Method::execute" and e.duration then
        ms[#ms + 1] = e.duration / 1e6
        spans[#spans + 1] = { e.start_time, e.end_time }
      end
    end
  end
  return ms, spans
end

--- When the generated pieces reached stdout, from the times its chunks were read (odp.proc.run's stdout_times:
--- t_us, ends = the stdout bytes up to each chunk's end, cut) and the stdout itself: the runner prints the prompt,
--- then each piece as it is produced (fflush after each), then at its exit a newline and the PyTorchObserver line.
--- A chunk holding generated text is a piece's arrival; an empty or non-printable piece prints nothing, and pieces
--- written close together can be read as one chunk, so the count need not be the tokens'. -> {echo_us (the
--- prompt's chunk; nil when the prompt is not echoed alone), pieces_us = {...}} or nil and why.
function M.piece_times(times, stdout, prompt)
  if not (times and times.t_us and times.ends) then return nil, "no stdout arrival times (no odp helper ran it)" end
  stdout = stdout or ""
  local echo = prompt and prompt ~= "" and stdout:sub(1, #prompt) == prompt and #prompt or 0
  local stop = #stdout -- the generated text ends where the observer line (and its newline) begins
  for at in stdout:gmatch("()PyTorchObserver") do stop = at - 1 end
  if stop < #stdout and stdout:sub(stop, stop) == "\n" then stop = stop - 1 end
  local out, from = { pieces_us = {} }, 0
  for i, t in ipairs(times.t_us) do
    local to = times.ends[i]
    if type(t) ~= "number" or type(to) ~= "number" or to < from then return nil, "stdout arrival times out of order" end
    if to == echo and echo > 0 then out.echo_us = t end
    if to > echo and from < stop then out.pieces_us[#out.pieces_us + 1] = t end
    from = to
  end
  if (times.cut or 0) > 0 and from < stop then
    return nil, ("the generation printed more than %d chunks: their times were not all kept"):format(#times.t_us)
  end
  if #out.pieces_us == 0 then return nil, "no generated text reached stdout" end
  return out
end

return M
