--- Where records go after a run: stdout and --out (odp.results.report's formats), then the lab engines'
-- reporters (--report lava|junit) and GitHub's step summary. A module of its own: the reporters read
-- report.lua (labels, metrics), so report.lua must not need them.
local errors = require("odp.core.errors")
local report = require("odp.results.report")
local step_summary = require("odp.results.step_summary")
local sys = require("odp.sys")

local M = {}

--- Lab engines' reporters, picked by --report NAME: each is a module odp.results.<name> whose
-- deliver(records, spec) returns true or nil, "ECODE: msg", "ECODE" (spec: {name=, file=}).
M.reporters = { lava = "odp.results.lava", junit = "odp.results.junit" }

--- Runs the reporters --report asked for (opts.report: a list of {name=, file=}) and, when GitHub Actions set
-- GITHUB_STEP_SUMMARY, appends a Markdown summary to it. Every reporter runs even when one fails; returns
-- true, or nil and the first failure's "ECODE: msg", "ECODE".
function M.deliver(records, opts)
  local failed, code
  local function note(ok, err, c)
    if not ok and not failed then failed, code = err, c end
  end
  for _, spec in ipairs(opts and opts.report or {}) do
    -- lazy: run-time name (the reporter --report names)
    note(require(M.reporters[spec.name]).deliver(records, spec)) -- lazy: run-time name
  end
  local summary = os.getenv("GITHUB_STEP_SUMMARY")
  if summary and summary ~= "" then
    note(sys.append_sync(summary, step_summary.markdown(records)))
  end
  if failed then return nil, failed, code end
  return true
end

local function format_for(path)
  return path and (path:match("%.(jsonl)$") or path:match("%.(json)$") or path:match("%.(csv)$")) or nil
end

--- Writes records: to stdout in opts.format (default human); with opts.out, also to that file (atomically),
-- in opts.format or the format its extension names (default json), while stdout gets the human table; then
-- the lab engines' reporters (M.deliver). A reporter that fails is one line and exit 3 after the others ran.
function M.emit(records, opts)
  opts = opts or {}
  local stdout_format = opts.out and "human" or (opts.format or "human")
  local ok, err, code = true, nil, nil
  if opts.out then
    local f = opts.format or format_for(opts.out) or "json"
    ok, err, code = sys.write_file(opts.out, report.formats[f](records))
  end
  -- the results are shown whatever became of --out (checked before the run; a disk can fill meanwhile), and
  -- the failure says where the records are kept
  io.stdout:write(report.formats[stdout_format](records))
  io.stdout:flush()
  if not ok then
    local dirs = {}
    for _, rec in ipairs(records) do
      local dir = type(rec.artifacts) == "table" and rec.artifacts.run_dir
      if type(dir) == "string" then dirs[#dirs + 1] = dir .. "/result.json" end
    end
    if #dirs == 0 then errors.check(ok, err, code) end
    errors.fail(code or "EIO", ("%s; the record%s kept in %s"):format(errors.text(err), #dirs > 1 and "s are" or
      " is", #dirs > 3 and (table.concat(dirs, ", ", 1, 3) .. ", ...") or table.concat(dirs, ", ")))
  end
  errors.check(M.deliver(records, opts))
end

return M
