-- odp's overhead on a text generation: the same llama_main generation run directly, under
-- `odp run scripts/host.lua --llm` (its helper, the 1 kHz memory watch, the ETDump path it gives) and under it with
-- --no-memory (which isolates the memory watch's cost), interleaved in a rotating order so machine load hits all
-- three alike. The generation time is the runner's own, so odp's start-up and report are not in it: the question is
-- whether odp disturbs what it measures. Goal (issue 41): at most 2%.
-- The runner's clock is whole ms on a ~110 ms generation (its PyTorchObserver line: inference_end_ms -
-- inference_start_ms), too coarse for 2% of it: the sum of the generation's forwards in its ETDump (ns ticks, one
-- forward per token) is the fine figure. Each odp run is compared with the direct run of its own round (adjacent in
-- time, so slow drifts of the load cancel): the median of those ratios, with its 95% CI.
--   build/odp run bench/llm_bench.lua [RUNS] [TOKENS]   (ODP_REAL_LLM: a folder with llama_main, toy.pte, tok.bin)
-- TOKENS defaults to 113, the longest generation the toy allows: its max_seq_len 128 less the prompt's 15 tokens.
local proc = require("odp.proc")
local sys = require("odp.sys")
local stats = require("odp.core.stats")
local llm = require("odp.parse.llm")
local etdump = require("odp.parse.etdump")

local RUNS, TOKENS = tonumber(arg[1]) or 30, tonumber(arg[2]) or 113
local root = require("odp.host").root
local odp = sys.realpath(require("odp.host").argv[0]) or require("odp.host").argv[0]
local dir = os.getenv("ODP_REAL_LLM")
if not dir or not sys.stat(dir .. "/llama_main") then print("skipped: set ODP_REAL_LLM to a folder with llama_main") return end
local tmp = os.tmpname()
os.remove(tmp)
assert(sys.mkdir_p(tmp))

local common = { "--model_path", dir .. "/toy.pte", "--tokenizer_path", dir .. "/tok.bin", "--prompt",
  "Once upon a time", "--temperature", "0", "--max_new_tokens", tostring(TOKENS) }
local direct = { dir .. "/llama_main" }
table.move(common, 1, #common, 2, direct)
table.move({ "--etdump_path", tmp .. "/direct.etdump" }, 1, 2, #direct + 1, direct)
local under = { odp, "run", root .. "/scripts/host.lua", "--llm", "--runner", dir .. "/llama_main", "--model",
  dir .. "/toy.pte", "--tokenizer", dir .. "/tok.bin", "--prompt", "Once upon a time", "--max-new-tokens",
  tostring(TOKENS), "-q", "--no-history", "--runs-dir", tmp .. "/runs" }
local no_memory = table.move(under, 1, #under, 1, {})
no_memory[#no_memory + 1] = "--no-memory"

-- -> the generation's ms as the runner says (whole ms), and the sum of its forwards in its ETDump
local function generation(stdout, dump)
  local f = llm.figures(assert(llm.observer(stdout), "no PyTorchObserver line"))
  local sum = 0
  for _, ms in ipairs((llm.forwards(assert(etdump.read(dump))))) do sum = sum + ms end
  return f.inference_ms, sum
end

local arms = {
  { name = "llama_main", argv = direct, ms = {}, fw = {} },
  { name = "odp --llm", argv = under, ms = {}, fw = {}, odp = true },
  { name = "--no-memory", argv = no_memory, ms = {}, fw = {}, odp = true },
}
for i = 1, RUNS do
  for k = 0, #arms - 1 do
    local arm = arms[(i + k - 1) % #arms + 1]
    local r = assert(proc.run { argv = arm.argv, cwd = tmp })
    assert(r.ok, r.stderr)
    if arm.odp then
      local run_dir
      for _, name in ipairs(sys.readdir(tmp .. "/runs")) do
        if not name:find("^%.") then run_dir = tmp .. "/runs/" .. name end -- (.sha256-cache.json beside it)
      end
      arm.ms[i], arm.fw[i] = generation(assert(sys.read_file(run_dir .. "/runner.stdout")), run_dir .. "/runner.etdump")
      os.execute("rm -rf '" .. tmp .. "/runs'")
    else
      arm.ms[i], arm.fw[i] = generation(r.stdout, tmp .. "/direct.etdump")
    end
  end
end

-- the median of each run's ratio to the direct run of its round, and its 95% CI
local function paired(arm, key)
  local ratios = {}
  for i = 1, RUNS do ratios[i] = arm[key][i] / arms[1][key][i] end
  local lo, hi = stats.median_ci(ratios)
  return stats.percentile(ratios, 50), lo, hi
end

local f = io.open("/proc/loadavg")
local load = f and f:read("l"):match("^(%S+ %S+ %S+)") or "?"
if f then f:close() end
print(("llm generation, %d tokens, %d rounds; load average %s"):format(TOKENS, RUNS, load))
for _, arm in ipairs(arms) do
  print(("  %-12s generation (runner, whole ms) median %6.1f ms; forwards (ETDump) median %8.3f ms"):format(arm.name,
    stats.percentile(arm.ms, 50), stats.percentile(arm.fw, 50)))
  if arm ~= arms[1] then
    local gm, glo, ghi = paired(arm, "ms")
    local fm, flo, fhi = paired(arm, "fw")
    -- (no CI under 6 rounds)
    local function ci(lo, hi) return lo and ("[95%% CI %.4f, %.4f]"):format(lo, hi) or "" end
    print(("  %-12s /direct, paired: generation %.3f %s, forwards %.4f %s"):format("", gm, ci(glo, ghi), fm,
      ci(flo, fhi)))
  end
end
os.execute("rm -rf '" .. tmp .. "'")
