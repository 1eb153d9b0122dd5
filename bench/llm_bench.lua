-- odp's overhead on a text generation: the same llama_main generation run directly and under
-- `odp run scripts/host.lua --llm` (its helper, the 1 kHz memory watch, the ETDump path it gives), interleaved so
-- machine load hits both alike. The generation time is the runner's own (its PyTorchObserver line:
-- inference_end_ms - inference_start_ms, and the decode rate), so odp's start-up and report are not in it: the
-- question is whether odp disturbs what it measures. Goal (issue 41): at most 2%.
--   build/odp run bench/llm_bench.lua [PAIRS] [TOKENS]   (ODP_REAL_LLM: a folder with llama_main, toy.pte, tok.bin)
local proc = require("odp.proc")
local sys = require("odp.sys")
local stats = require("odp.core.stats")
local llm = require("odp.parse.llm")

local PAIRS, TOKENS = tonumber(arg[1]) or 15, tonumber(arg[2]) or 100
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

-- -> the generation's ms and decode tokens/s, as the runner says
local function generation(stdout)
  local f = llm.figures(assert(llm.observer(stdout), "no PyTorchObserver line"))
  return f.inference_ms, f.decode_tokens_per_s
end

local d_ms, o_ms, d_tps, o_tps = {}, {}, {}, {}
for i = 1, PAIRS do
  for _, which in ipairs(i % 2 == 1 and { "direct", "odp" } or { "odp", "direct" }) do
    if which == "direct" then
      local r = assert(proc.run { argv = direct, cwd = tmp })
      assert(r.ok, r.stderr)
      d_ms[#d_ms + 1], d_tps[#d_tps + 1] = generation(r.stdout)
    else
      local r = assert(proc.run { argv = under, cwd = tmp })
      assert(r.ok, r.stderr)
      local runs = sys.readdir(tmp .. "/runs")
      table.sort(runs)
      o_ms[#o_ms + 1], o_tps[#o_tps + 1] = generation(assert(sys.read_file(tmp .. "/runs/" .. runs[#runs] ..
        "/runner.stdout")))
    end
  end
end
local dm, om = stats.percentile(d_ms, 50), stats.percentile(o_ms, 50)
local dt, ot = stats.percentile(d_tps, 50), stats.percentile(o_tps, 50)
print(("llm generation, %d tokens, %d pairs (medians of the runner's own figures)"):format(TOKENS, PAIRS))
print(("  generation ms    llama_main %8.1f   odp --llm %8.1f   odp/direct %.3f"):format(dm, om, om / dm))
print(("  decode tokens/s  llama_main %8.1f   odp --llm %8.1f   odp/direct %.3f"):format(dt, ot, ot / dt))
local _, lo, hi = stats.bootstrap_ratio(d_ms, o_ms) -- odp/direct
if lo then print(("  generation odp/direct 95%% CI [%.3f, %.3f]"):format(lo, hi)) end
os.execute("rm -rf '" .. tmp .. "'")
