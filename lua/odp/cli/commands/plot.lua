--- odp plot FILE.jsonl [--x PARAM] [--y FIELD.PATH[,FIELD.PATH...]] [--group PARAM] [--out plot.svg]
-- One point per (group, x): the mean of y over the records (repeats) that have it; error bars from the
-- p10/p90 next to y (latency_ms.p50 -> latency_ms.p10 .. latency_ms.p90), widest over the repeats.
-- Without flags: x is the swept parameter (the one whose values differ across the records; with two, the one
-- given first to the sweep, and the other is --group; records of several boards: one line per board), y is
-- latency_ms.p50, the SVG goes next to the input.
local cli = require("odp.core.options")
local errors = require("odp.core.errors")
local plot = require("odp.results.plot")
local sweep = require("odp.run.sweep")
local sys = require("odp.sys")

local M = { summary = "Plot a sweep's JSONL records as an SVG line chart (axes, legend, p10/p90 error bars)" }

M.options = {
  { "x", "Parameter (or record field path) on the x axis (default: the swept parameter)", nil, "string",
    metavar = "PARAM" },
  { "y", "Record field path(s) on the y axis, comma-separated, one panel each, e.g. latency_ms.p50,peak_rss_kb",
    "latency_ms.p50", "string", metavar = "FIELD.PATH" },
  { "group", "Parameter (or record field, e.g. board) that splits the records into lines (default: board when\n" ..
    "the records come from several boards, else a second swept parameter)", nil, "string",
    metavar = "PARAM" },
  { "title", "Chart title", nil, "string" },
  { "log-x", "Logarithmic x axis (default: automatic when x spans 100x)", nil, "bool" },
  { "no-error-bars", "Leave out the p10/p90 error bars", false, "bool" },
  { "width", "Width in pixels", 760, "posint" },
  { "height", "Height in pixels", 460, "posint" },
}

M.usage = "odp plot FILE.jsonl [--x PARAM] [--y FIELD.PATH,...] [--group PARAM] [--out plot.svg]"
M.description = "Plots the records of a sweep (scripts/sweep.lua --out FILE.jsonl). Without flags: x is the swept\n" ..
  "parameter (with two, the second is --group), y is latency_ms.p50 with p10/p90 bars, and the SVG is\n" ..
  "written next to FILE (s.jsonl -> s.svg); the path is printed. --out - writes the SVG to stdout."

-- --x and --group from the records where the command line leaves them out.
local function axes(path, records, opts)
  local swept, x, group = plot.swept(records), opts.x, opts.group
  local free = {}
  for _, k in ipairs(swept) do if k ~= x and k ~= group then free[#free + 1] = k end end
  if not x then
    x = table.remove(free, 1)
    if not x then
      errors.fail("EUSAGE", ("%s: no parameter differs across its records; name the x axis with --x PARAM")
        :format(path))
    end
  end
  if not group then
    -- records of many boards (--boards): one line per board
    local boards, n = {}, 0
    for _, r in ipairs(records) do
      if r.board ~= nil and not boards[r.board] then boards[r.board], n = true, n + 1 end
    end
    group = n > 1 and "board" or table.remove(free, 1)
  end
  if #free > 0 then
    errors.fail("EUSAGE", ("%s: the records also differ in %s; plot one slice, or pick the axes with --x and --group")
      :format(path, table.concat(free, ", ")))
  end
  return x, group
end

function M.main(args)
  local opts, rest = cli.parse_command(M, args)
  if not opts then return 0 end
  if #rest ~= 1 then
    errors.fail("EUSAGE", ("plot takes one sweep file, got %d (odp plot --help)"):format(#rest))
  end
  local path = rest[1]
  local f = io.open(path, "rb")
  if not f then errors.fail("EUSAGE", ("cannot read '%s'"):format(path)) end
  f:close()
  local records = sweep.load(path)
  local x, group = axes(path, records, opts)
  local ys = {}
  for y in opts.y:gmatch("[^,%s]+") do ys[#ys + 1] = y end
  if #ys == 0 then errors.fail("EUSAGE", "--y names no field") end
  local panels, npoints, nseries = {}, 0, 0
  for _, y in ipairs(ys) do
    local series, skipped = plot.series(records, x, y, group, not opts.no_error_bars)
    local n = 0
    for _, s in ipairs(series) do n = n + #s.points end
    if n == 0 then
      errors.fail("EUSAGE", ("no record in %s has both %s and a number at %s"):format(path, x, y))
    end
    npoints, nseries = npoints + n, math.max(nseries, #series)
    local unit = y:match("_ms%.") and " (ms)" or y:match("_kb$") and " (kB)" or ""
    panels[#panels + 1] = plot.svg(series, {
      title = (opts.title and #ys == 1) and opts.title or (y .. " vs " .. x), xlabel = x, ylabel = y .. unit,
      width = opts.width, height = opts.height, logx = opts.log_x == nil and "auto" or opts.log_x,
      note = ("%s: %d record(s)%s"):format(path:match("[^/]+$"), #records,
        skipped > 0 and (", %d failed or without the field"):format(skipped) or ""),
    })
  end
  local svg = plot.stack(panels, opts.width, opts.height)
  if opts.out == "-" then
    io.stdout:write(svg)
    return 0
  end
  local out = opts.out or (path:gsub("%.jsonl?$", "") .. ".svg")
  errors.check(sys.write_file(out, svg))
  io.stdout:write(out, "\n")
  io.stdout:flush()
  if not opts.quiet then
    io.stderr:write(("odp: %d point(s) in %d series%s, x = %s%s\n"):format(npoints, nseries,
      #ys > 1 and (", %d panels"):format(#ys) or "", x, group and (", group = " .. group) or ""))
  end
  return 0
end

return M
