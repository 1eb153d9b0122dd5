--- odp compare A B: is B faster than A? (lua/odp/results/compare.lua does the work; this is the command line.)
local cli = require("odp.core.options")
local compare = require("odp.results.compare")
local errors = require("odp.core.errors")
local report = require("odp.results.report")
local sys = require("odp.sys")
local json = require("odp.core.json")

local M = { summary = "Compare two results (files, JSONL, runs/<id>/): B/A with 95% CIs, Mann-Whitney p, verdicts" }

M.usage = "odp compare A B [--noise PCT] [--fail-if-slower PCT] [--force] [--by board] [--svg FILE] [--html FILE] [--format human|json]"
M.description = "Is B faster than A? A and B: a result file, a JSONL of records or a runs/<id>/ directory.\n" ..
  "When both kept their outputs (--outputs), B's are compared with A's too (docs/outputs.md).\n" ..
  "Exit 1 with --fail-if-slower when B is slower beyond it; 2 for inputs that cannot be compared."

M.options = {
  { "noise", "Call a change faster/slower only when its whole 95% CI is beyond 1 +- PCT% (and p < 0.05)",
    math.tointeger(compare.NOISE * 100), "number", metavar = "PCT" },
  { "fail-if-slower", "Exit 1 when B's latency is slower than A's by more than PCT% with the whole 95% CI beyond it",
    nil, "number", metavar = "PCT" },
  { "force", "Compare records of different models", false, "bool" },
  { "svg", "Also draw the ratios with their CI whiskers as an SVG", nil, "outfile", metavar = "FILE" },
  { "html", "Also write the comparison as one self-contained HTML page (odp report A B does the same)", nil,
    "outfile", metavar = "FILE" },
  { "by", "Compare board by board: the records of each board of A with that board's in B (runs with --boards)",
    nil, "choice", choices = { "board" } },
  { "resamples", "Bootstrap resamples", 2000, "posint" },
  { "seed", "Bootstrap seed (the same inputs and seed give the same output)", 1, "int" },
}

local function pct(v) return v and ("%+.1f%%"):format((v - 1) * 100) or "-" end

local function human(res)
  local rows = {}
  for _, r in ipairs(res.rows) do
    local fmt = r.unit == "kB" and function(v) return v and ("%.0f"):format(v) or "-" end
      or r.unit == "tokens/s" and function(v) return v and ("%.1f/s"):format(v) or "-" end or report.duration
    rows[#rows + 1] = { metric = r.metric, a = fmt(r.a.median), b = fmt(r.b.median),
      n = ("%d/%d"):format(r.a.n, r.b.n), ratio = r.ratio and ("%.3f"):format(r.ratio) or "-", change = pct(r.ratio),
      ci = r.ci95 and ("[%s, %s]"):format(pct(r.ci95[1]), pct(r.ci95[2])) or "-",
      p = r.p and ("%.2g"):format(r.p) or "-", verdict = compare.VERDICT_TEXT[r.verdict] or r.verdict }
  end
  local out = { ("A: %s (%d record(s), %d process(es))"):format(res.a.path, res.a.records, res.a.processes),
    ("B: %s (%d record(s), %d process(es))"):format(res.b.path, res.b.records, res.b.processes), "",
    report.table(rows, { { key = "metric" }, { key = "a", title = "A median", align = "r" },
      { key = "b", title = "B median", align = "r" }, { key = "n", title = "n A/B", align = "r" },
      { key = "ratio", title = "B/A", align = "r" }, { key = "change", align = "r" },
      { key = "ci", title = "95% CI of change", align = "r" }, { key = "p", title = "p", align = "r" },
      { key = "verdict" } }) }
  if res.outputs then
    for _, line in ipairs(report.reference_lines(res.outputs)) do
      out[#out + 1] = (line:gsub("^  ", ""))
    end
  end
  for _, n in ipairs(res.notes) do out[#out + 1] = "note: " .. n end
  return table.concat(out, "\n") .. "\n"
end

local function svg(res)
  local points = {}
  for _, r in ipairs(res.rows) do
    if r.ratio then
      points[#points + 1] = { x = r.metric, y = r.ratio, lo = r.ci95 and r.ci95[1], hi = r.ci95 and r.ci95[2] }
    end
  end
  -- lazy: start-up
  return require("odp.results.plot").svg({ { name = "", points = points } }, { title = "B / A with 95% CIs",
    xlabel = "metric", ylabel = "B / A (1 = no change; above 1: B slower or larger)", lines = false,
    width = math.max(560, 110 * #points) })
end

--- --by board: one comparison per board that A and B both have (records of --boards runs), each under its name;
-- --fail-if-slower gates every board (exit 1 naming the slower ones).
function M.by_board(rest, opts)
  if opts.svg or opts.html then
    errors.fail("EUSAGE", "--svg and --html draw one comparison: leave out --by board, or compare one board's files")
  end
  local in_b, boards = {}, {}
  for _, b in ipairs(compare.boards(rest[2])) do in_b[b] = true end
  for _, b in ipairs(compare.boards(rest[1])) do if in_b[b] then boards[#boards + 1] = b end end
  if #boards == 0 then
    errors.fail("EUSAGE", "--by board: A and B have no measured board in common (records carry `board` with --boards)")
  end
  local doc, texts, slower, comparisons = { boards = {} }, {}, {}, {}
  for _, board in ipairs(boards) do
    local res = compare.compare(compare.load(rest[1], "A", board), compare.load(rest[2], "B", board),
      { force = opts.force, resamples = opts.resamples, seed = opts.seed, noise = opts.noise / 100 })
    doc.boards[board] = res
    comparisons[#comparisons + 1] = { res = res, board = board }
    texts[#texts + 1] = ("== board %s\n"):format(board) .. human(res)
    if (opts.format == "json" or opts.out) and not opts.quiet then
      for _, n in ipairs(res.notes) do io.stderr:write("odp: ", board, ": ", n, "\n") end
    end
    local gate = compare.gate(res, opts.fail_if_slower)
    if gate and gate.failed then slower[#slower + 1] = board .. ": " .. (gate.text:gsub("^FAIL: ", "")) end
  end
  local text = opts.format == "json" and (json.encode(doc, { indent = true }) .. "\n")
    or table.concat(texts, "\n")
  if opts.out then errors.check(sys.write_file(opts.out, text)) else io.stdout:write(text) end
  for _, spec in ipairs(opts.report or {}) do
    local junit = require("odp.results.junit") -- lazy: start-up
    errors.check(sys.write_file(spec.file, junit.xml(junit.compare_suites(comparisons, opts.fail_if_slower))))
  end
  if #slower > 0 then
    io.stderr:write("odp: ", table.concat(slower, "; "), "\n")
    return 1
  end
  return 0
end

function M.main(args)
  local opts, rest = cli.parse_command(M, args)
  if not opts then return 0 end
  if #rest ~= 2 then
    errors.fail("EUSAGE", ("compare takes two results, A and B, got %d (odp compare --help)"):format(#rest))
  end
  compare.check_thresholds(opts)
  if opts.format == "csv" or opts.format == "jsonl" then
    errors.fail("EUSAGE", "odp compare writes --format human or json")
  end
  for _, spec in ipairs(opts.report or {}) do
    if spec.name ~= "junit" then errors.fail("EUSAGE", "odp compare reports --report junit FILE only") end
  end
  if opts.by == "board" then return M.by_board(rest, opts) end
  local A = compare.load(rest[1], "A")
  local B = compare.load(rest[2], "B")
  local res = compare.compare(A, B, { force = opts.force, resamples = opts.resamples, seed = opts.seed,
    noise = opts.noise / 100 })
  local text = opts.format == "json" and (json.encode(res, { indent = true }) .. "\n") or human(res)
  -- the human report shows its notes; JSON or a report written to a file leaves the terminal to say them
  if (opts.format == "json" or opts.out) and not opts.quiet then
    for _, n in ipairs(res.notes) do io.stderr:write("odp: ", n, "\n") end
  end
  if opts.out then errors.check(sys.write_file(opts.out, text)) else io.stdout:write(text) end
  if opts.svg then errors.check(sys.write_file(opts.svg, svg(res))) end
  local gate = compare.gate(res, opts.fail_if_slower)
  if opts.html then
    errors.check(sys.write_file(opts.html, require("odp.results.html").comparison(res, A, B, gate))) -- lazy: start-up
  end
  for _, spec in ipairs(opts.report or {}) do
    local junit = require("odp.results.junit") -- lazy: start-up
    errors.check(sys.write_file(spec.file, junit.xml(junit.compare_suites({ { res = res } }, opts.fail_if_slower))))
  end
  if gate and gate.failed then
    io.stderr:write("odp: ", (gate.text:gsub("^FAIL: ", "")), "\n")
    return 1
  end
  return 0
end

return M
