-- Every runnable example in README.md and docs/*.md, run as written (issue 28: docs must not drift from what odp
-- does). The examples are the `odp ...` lines of the ```sh blocks and the `$ build/odp ...` / `build/odp ...`
-- lines of the untagged ones (a line ending in `\` goes on; `# ...` is a comment). A transcript's output (the
-- lines after its `$ ` line) must be what odp prints, where no runner's timing makes it vary. Each is run in one scratch directory, in the order the docs give them, with the build's odp and a
-- history of the test's own, after these placeholders are mapped (the mapping the docs' readers make too):
--   m.pte                         -> tests/fixtures/pte/add_arduino.pte
--   with --llm: m.pte, llama_main, tok.bin -> $ODP_REAL_LLM's toy.pte, llama_main, tok.bin
--   ./executor_runner, executor_runner (the host runner)  -> $ODP_REAL_RUNNER (the real x86_64 runner)
--   runs/<id>/                    -> the run the example before made (the latest run directory)
--   runs/<id-A>/, runs/<id-B>/, A, B  -> the first two run directories the examples before made
--   result.json                   -> the first of those runs' record file
--   sweep.jsonl, s.jsonl          -> a host sweep made here first (odp run scripts/sweep.lua --flow scripts/host.lua)
--   a series id (odp history 12)  -> the first series of this history
--   a trailing `...` or `[...]`  -> left out
-- An example that needs hardware or a lab (a board's script, --boards, labgrid, LAVA, a device's REPL) cannot
-- run here (a board's script given the QEMU twin's device file, devices/twin_m55.lua, runs): it is checked to
-- parse as written (its --runner and --identity files, which live on the user's machine, stood in for by empty
-- files of the same name), with --help added (odp parses every option before it prints help, so a misspelt or
-- removed option is exit 2 there): exit 0, never 2. A runnable example must exit 0,
-- or 1 where it is a gate (--fail*, which may trip). Without the real runner the runnable ones are SKIPPED.
local T = require("t")
local proc = require("odp.proc")
local sys = require("odp.sys")
local json = require("odp.core.json")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")
local model = root .. "/tests/fixtures/pte/add_arduino.pte"

-- odp's commands: a line of an untagged block starting `odp WORD` is an example only for these (a diagram's
-- "odp    board" is not)
local COMMANDS = { run = true, repl = true, devices = true, inspect = true, compare = true, plot = true,
  history = true, report = true, version = true, help = true }

--- The examples of one markdown file: {file, line, text, shown} for each `odp ...` command of its ```sh blocks
--- and of its untagged blocks (`$ build/odp ...` transcripts, `build/odp ...` lines); shown: the output a
--- transcript gives after its `$ ` line (up to the next `$ ` line or the block's end), nil when none.
local function examples(file)
  local out, kind, pending, at, last, prompted = {}, nil, nil, nil, nil, false
  local n = 0
  for line in io.lines(root .. "/" .. file) do
    n = n + 1
    local fence = line:match("^%s*```(%w*)")
    if fence then
      if kind then kind = nil
      elseif fence == "sh" or fence == "bash" or fence == "console" then kind = "sh"
      elseif fence == "" then kind = "plain"
      else kind = "other" end
      last = nil
    elseif kind == "sh" or kind == "plain" then
      local prompt = line:match("^%s*%$ ") ~= nil
      local text = line:gsub("^%s*%$ ", ""):gsub("^(%s*)build/odp%s", "%1odp ")
      if pending then
        pending = pending .. " " .. text:gsub("^%s+", "")
      elseif text:match("^%s*odp%s") and (kind == "sh" or prompt or COMMANDS[text:match("^%s*odp%s+(%S+)")]) then
        pending, at, last, prompted = text:gsub("^%s+", ""), n, nil, prompt
      elseif prompt then
        last = nil -- another program's transcript
      elseif last and kind == "plain" then
        last.shown = (last.shown and (last.shown .. "\n") or "") .. line
      end
      if pending and not pending:match("\\%s*$") then
        out[#out + 1] = { file = file, line = at, text = pending }
        last = prompted and out[#out] or nil
        pending = nil
      elseif pending then
        pending = pending:gsub("\\%s*$", "")
      end
    end
  end
  for _, e in ipairs(out) do e.shown = e.shown and e.shown:gsub("%s+$", "") end
  return out
end

local files = { "README.md" }
for _, f in ipairs(sys.readdir(root .. "/docs")) do if f:match("%.md$") then files[#files + 1] = "docs/" .. f end end
table.sort(files, function(a, b) return a == "README.md" or (b ~= "README.md" and a < b) end)
local all = {}
for _, f in ipairs(files) do for _, e in ipairs(examples(f)) do all[#all + 1] = e end end

-- words of a command line: whitespace-separated, '...' / "..." quoted, a `#` word ends it
local function words(text)
  local out, i = {}, 1
  while i <= #text do
    local s = text:find("%S", i)
    if not s then break end
    local c = text:sub(s, s)
    if c == "#" then break end
    if c == "'" or c == '"' then
      local e = assert(text:find(c, s + 1, true), "unclosed quote: " .. text)
      out[#out + 1] = text:sub(s + 1, e - 1)
      i = e + 1
    else
      local e = (text:find("%s", s) or #text + 1) - 1
      out[#out + 1] = text:sub(s, e)
      i = e + 1
    end
  end
  return out
end

-- Needs a board or a lab: a board's flow script, --boards, labgrid/LAVA, `odp repl DEVICE`, `odp devices`
local BOARD_SCRIPTS = { ["scripts/rpi5.lua"] = true, ["scripts/graviton4.lua"] = true, ["scripts/x300pro.lua"] = true,
  ["scripts/alif_e8.lua"] = true }
local function needs_board(w)
  -- a board script pointed at a twin (devices/twin_m55.lua: the Ethos-U flow on QEMU) runs here, as written
  for i, a in ipairs(w) do
    if a == "--device" and w[i + 1] == "devices/twin_m55.lua" and w[2] == "run" then return false end
  end
  for i, a in ipairs(w) do
    -- (board.etdump, board.bin: files a board wrote, which the user has and this test does not)
    if a == "--boards" or a:match("^%-%-boards=") or BOARD_SCRIPTS[a] or (a == "--flow" and BOARD_SCRIPTS[w[i + 1]])
      or a:match("^board%.") then
      return true
    end
  end
  return w[2] == "repl" or w[2] == "devices"
end

T.test(("the docs' examples are found: %d odp commands in ```sh blocks"):format(#all), function()
  T.ok(#all >= 30, "the README's and docs' examples")
  local seen = {}
  for _, e in ipairs(all) do seen[e.file] = true end
  for _, f in ipairs { "README.md", "docs/history.md", "docs/many-boards.md", "docs/report.md", "docs/labgrid.md" } do
    T.ok(seen[f], f .. " has examples")
  end
end)

local work = T.tmpdir()
-- the docs' fixture paths (tests/fixtures/..., tests/flows/toy.lua) are the checkout's, as in a transcript
assert(proc.run { "ln", "-s", root .. "/tests", work .. "/tests", timeout = 10 }.ok)
local env = { ODP_HISTORY = work .. "/history.db", ODP_PATH = false }
-- merged: stderr into stdout, in the order a terminal shows them (a transcript's)
local function odp_run(argv, timeout, merged)
  local a = merged and { "sh", "-c", 'exec "$0" "$@" 2>&1', odp } or { odp }
  table.move(argv, 1, #argv, #a + 1, a)
  return assert(proc.run { argv = a, cwd = work, env = env, timeout = timeout or 300 })
end

-- What the examples before have made, for the placeholders of the ones after.
-- state.runs: the run directories in the order the examples made them (new ones appended after each example, by
-- name among themselves). Not all of them by name: a run dir's name starts with its second, so two examples'
-- runs in one second would sort by flow name (an Ethos-U twin run's "alif_e8" before the host run's "host").
local state = { runs = {} }
local function refresh_runs()
  local seen, new = {}, {}
  for _, d in ipairs(state.runs) do seen[d] = true end
  for _, d in ipairs(sys.readdir(work .. "/runs") or {}) do
    local rel = "runs/" .. d .. "/"
    if not seen[rel] and sys.stat(work .. "/" .. rel .. "result.json") then new[#new + 1] = rel end
  end
  table.sort(new)
  table.move(new, 1, #new, #state.runs + 1, state.runs)
end

-- --llm examples: ExecuTorch's LLM runner and its tiny model ($ODP_REAL_LLM)
local llm_dir = os.getenv("ODP_REAL_LLM") or ""
local LLM = { ["m.pte"] = llm_dir .. "/toy.pte", llama_main = llm_dir .. "/llama_main", ["tok.bin"] = llm_dir .. "/tok.bin" }

local function map(w, runner)
  local out, ids = {}, { A = 1, B = 2, ["runs/<id-A>/"] = 1, ["runs/<id-B>/"] = 2, ["runs/<id>/"] = 1 }
  local llm = false
  for _, a in ipairs(w) do if a == "--llm" then llm = true end end
  for i, a in ipairs(w) do
    if a == "..." or a == "[...]" then -- left out
    elseif llm and LLM[a] then out[#out + 1] = LLM[a]
    elseif a == "m.pte" then out[#out + 1] = model
    elseif (a == "./executor_runner" or a == "executor_runner") and runner then out[#out + 1] = runner
    elseif ids[a] and (a:find("^runs/") or w[2] == "compare" or w[2] == "report") then
      local k = a == "runs/<id>/" and #state.runs or ids[a]
      out[#out + 1] = assert(state.runs[k], "no run made before " .. a)
    elseif a == "result.json" then out[#out + 1] = assert(state.runs[1], "no run made before " .. a) .. "result.json"
    elseif w[2] == "history" and i == 3 and a:match("^%d+$") then out[#out + 1] = tostring(state.series)
    else out[#out + 1] = (a:gsub("^%[(.-)%]$", "%1")) end
  end
  return out
end

local function gate(w)
  for _, a in ipairs(w) do if a:match("^%-%-fail") then return true end end
end

T.test("examples that need a board or a lab parse as written (--help added): exit 0, never 2", function()
  local checked = 0
  for _, e in ipairs(all) do
    local w = words(e.text)
    if needs_board(w) then
      local argv = map(w)
      table.remove(argv, 1)
      -- the board's own files (its runner, a key) exist on the user's machine: empty ones stand in (only parsed)
      for i = 1, #argv - 1 do
        local file_opt = { ["--runner"] = true, ["--identity"] = true, ["--reference-runner"] = true,
          ["--debug-buffer"] = true, ["--reference-debug-buffer"] = true, ["--reference"] = true }
        if file_opt[argv[i]] and not sys.stat(argv[i + 1]) and argv[i + 1] ~= "host" then
          local name = argv[i + 1]:match("([^/]+)/?$"):gsub("[<>]", "_")
          local stand_in = work .. "/" .. name
          if argv[i + 1]:match("/$") then -- a run directory: an empty one stands in
            assert(sys.mkdir_p(stand_in))
          else
            T.write(stand_in, "")
          end
          argv[i + 1] = stand_in
        end
      end
      argv[#argv + 1] = "--help"
      local r = odp_run(argv, 60)
      T.eq(r.status, 0, ("%s:%d: %s\n%s"):format(e.file, e.line, e.text, r.stderr))
      checked = checked + 1
    end
  end
  T.ok(checked >= 10, checked .. " board examples")
end)

T.with_real_runner("examples that run here run as written (the real runner, fixtures for placeholders): exit 0, or 1 for a tripped gate", function(runner)
  -- the sweep the plot and report examples draw (sweep.jsonl, s.jsonl)
  local r = odp_run({ "run", "scripts/sweep.lua", "--flow", "scripts/host.lua", "--runner", runner, "--model", model,
    "-p", "num_executions=1,10", "--out", "sweep.jsonl", "-q" })
  T.eq(r.status, 0, r.stderr)
  assert(sys.write_file(work .. "/s.jsonl", assert(sys.read_file(work .. "/sweep.jsonl"))))
  local ran, shown = 0, 0
  for _, e in ipairs(all) do
    local w = words(e.text)
    if not needs_board(w) then
      refresh_runs()
      if w[2] == "history" then
        local list = json.decode(odp_run({ "history", "--format", "json" }).stdout) or {}
        state.series = list[1] and list[1].id or 1
      end
      local argv = map(w, runner)
      table.remove(argv, 1)
      -- what a transcript shows is what odp prints (stdout and stderr, as a terminal shows them), where no
      -- runner's timing makes it vary (fixtures, the toy flow)
      local compared = e.shown and not table.concat(w, " "):find("--runner", 1, true)
      r = odp_run(argv, nil, compared)
      -- a transcript showing odp's one-line refusal of a bad input exits 2, as it shows
      local refusal = e.shown and e.shown:match("^odp: [^\n]*$") and r.status == 2
      local ok = r.status == 0 or (gate(w) and r.status == 1) or refusal
      T.ok(ok, ("%s:%d: %s\nexit %d\n%s"):format(e.file, e.line, e.text, r.status, r.stderr))
      if compared then
        T.eq(r.stdout:gsub("%s+$", ""), e.shown, ("%s:%d: %s: the output shown"):format(e.file, e.line,
          e.text))
        shown = shown + 1
      end
      ran = ran + 1
    end
  end
  T.ok(ran >= 15, ran .. " examples ran")
  T.ok(shown >= 5, shown .. " transcripts compared")
end)

T.done()
