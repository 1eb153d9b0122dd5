--- The ExecuTorch flow, its stage step: the runner, the model, its data and inputs where the runner will read
-- them, and the runner's argv.
local errors = require("odp.core.errors")
local json = require("odp.core.json")
local sys = require("odp.sys")
local memparse = require("odp.parse.memory")
local tensors = require("odp.results.tensors")
local llm = require("odp.flows.executorch.llm")
local result = require("odp.results.result")

local M = {}

local function basename(p) return (p:match("([^/]+)$")) end

--- Whether a runner has the --etdump_path flag (an event-tracer build: elsewhere gflags refuses the flag, and
--- no ETDump is written), told by the flag's name among its bytes. Remembered in `cache` beside the runner's
--- sha256 (odp.results.result.file_fact): reading a 7.5 MB runner on every run was half a host run's time.
---@param runner string  the runner on this machine
---@param cache string?  the flow's file cache
---@return boolean
function M.takes_etdump_path(runner, cache)
  return result.file_fact(runner, cache, "etdump_path", function(path)
    return sys.file_contains(path, "etdump_path") or false
  end) == true
end

--- The files every run stages, the runner and the model ({path, mode?, sha256} each; runner, model: their
-- odp.results.result.file_info): the stage step's, and the preflight's, which has the board check them in its own
-- flight (odp.target.shell.space), so that the stage step finds them checked.
function M.files(o, runner, model)
  return { { path = o.runner, mode = tonumber("755", 8), sha256 = runner and runner.sha256 },
    { path = o.model, sha256 = model and model.sha256 } }
end

-- The stage step: where the files are is the target's business (the host runs them in place; a remote target
-- pushes them into its remote dir, hash-skipped; the board remembers what it staged). -> the runner's argv,
-- and "unchanged" when a remote board had every file already.
function M.step(ctx, rec, t)
  local o, ui, board = ctx.opts, ctx.ui, ctx.board
  local files = M.files(o, rec.runner, rec.model)
  t.workdir = board:workdir(ctx.run_dir, files)
  -- --exclusive: the board to itself before anything of this run is staged
  if o.exclusive and t.target.wait_board then errors.check(t.target:wait_board(ui)) end
  local pushed_any, remote = false, false
  local function stage(path, mode, info)
    local where, pushed = board:stage(path, { mode = mode, ui = ui, sha256 = info and info.sha256 })
    if where ~= sys.realpath(path) then
      remote, pushed_any = true, pushed_any or pushed
      ui:info("%s %s", pushed and "pushed" or "unchanged", basename(path))
    end
    return where
  end
  local runner, model = stage(o.runner, files[1].mode, files[1]), stage(o.model, nil, files[2])
  if o.memory then
    -- each measured process's timeline goes into the run dir (written there on this machine; from a board it
    -- comes back on the helper's channel with the run's answer), the record's becomes memory.csv (memory_step);
    -- absolute: this machine's helper opens it in the runner's working directory
    t.memory = { marks = memparse.mark_specs(o.llm and llm.MARKS or memparse.EXECUTORCH_MARKS), model = model,
      prefix = sys.realpath(ctx.run_dir) .. "/" }
  end
  local data = o.data and stage(o.data)
  -- What the runner writes on the board for this run alone is named by the run directory, in this odp's own
  -- directory on the board (odp.target.shell.run_dir), removed once fetched. The runner always gets its own
  -- ETDump path when it has the flag (else it writes model.etdump into its working directory, left there); it
  -- is fetched for --etdump, and for --sample, which needs it to place its samples (the run dir keeps it).
  -- --llm: every token's latency is in the ETDump, and llama_main writes etdump.in into its cwd without one.
  local prefix = t.workdir .. "/" .. basename(ctx.run_dir)
  t.fetch_etdump = (o.etdump or o.sample) and true
  t.etdump_remote = (t.fetch_etdump or o.llm or M.takes_etdump_path(o.runner, ctx.file_cache))
    and (prefix .. ".etdump") or nil
  t.sample_remote = o.sample and (prefix .. ".samples")
  t.board_files = { t.etdump_remote, t.sample_remote }
  t.runner_remote = runner
  local argv
  if o.llm then
    argv = llm.argv(o, t, runner, model, data, stage, rec)
  else
    argv = { runner, "--model_path", model, "--num_executions", tostring(o.num_executions) }
    if t.etdump_remote then table.move({ "--etdump_path", t.etdump_remote }, 1, 2, #argv + 1, argv) end
    if data then table.move({ "--data_path", data }, 1, 2, #argv + 1, argv) end
  end
  local io = ctx.io
  if io and io.inputs then
    local files, staged = tensors.write_inputs(io.sig, io.inputs, ctx.run_dir .. "/inputs"), {}
    rec.inputs = json.array({})
    for i, f in ipairs(files) do
      rec.inputs[i] = tensors.file_entry(f, io.sig.inputs[i], ctx.run_dir)
      staged[i] = stage(f, nil, rec.inputs[i])
    end
    table.move({ "--inputs", table.concat(staged, ",") }, 1, 2, #argv + 1, argv)
  end
  if io and io.outputs then
    -- the runner writes output i to BASE-i.bin (executor_runner's --output_file), every process over the last
    t.output_base = prefix .. ".out"
    for _, out in ipairs(io.sig.outputs) do
      if out.kind == "tensor" then t.board_files[#t.board_files + 1] = ("%s-%d.bin"):format(t.output_base, out.index) end
    end
    table.move({ "--output_file", t.output_base }, 1, 2, #argv + 1, argv)
  end
  table.move(ctx.args, 1, #ctx.args, #argv + 1, argv)
  t.argv = argv
  -- none of them is fetched after the runner processes (its ETDump is written only because the runner has the
  -- flag): the board's helper removes them as each process ends, in the process's own answer, and reads who
  -- else runs on the board there too (odp.target.shell.helper_exec's finish): a point is one request
  if not (t.fetch_etdump or o.llm or t.sample_remote or t.output_base) then
    t.finish_in_run = { t.etdump_remote }
  end
  if remote and not pushed_any then return "unchanged" end
end

return M
