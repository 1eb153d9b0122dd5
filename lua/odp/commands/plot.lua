--- odp plot FILE.jsonl --x PARAM --y FIELD.PATH [--group PARAM] --out plot.svg
-- One point per (group, x): the mean of y over the records (repeats) that have it; error bars from the
-- p10/p90 next to y (latency_ms.p50 -> latency_ms.p10 .. latency_ms.p90), widest over the repeats.
local cli = require("odp.cli")
local errors = require("odp.errors")
local plot = require("odp.plot")
local sweep = require("odp.sweep")
local sys = require("odp.sys")

local M = { summary = "Plot a sweep's JSONL records as an SVG line chart (axes, legend, p10/p90 error bars)" }

M.options = {
  { "x", "Parameter (or record field path) on the x axis", nil, "string", required = true, metavar = "PARAM" },
  { "y", "Record field path on the y axis, e.g. latency_ms.p50, peak_rss_kb", nil, "string", required = true,
    metavar = "FIELD.PATH" },
  { "group", "Parameter that splits the records into lines", nil, "string", metavar = "PARAM" },
  { "title", "Chart title", nil, "string" },
  { "log-x", "Logarithmic x axis (default: automatic when x spans 100x)", nil, "bool" },
  { "no-error-bars", "Leave out the p10/p90 error bars", false, "bool" },
  { "width", "Width in pixels", 760, "posint" },
  { "height", "Height in pixels", 460, "posint" },
}

local function path_get(t, path)
  for part in path:gmatch("[^.]+") do
    if type(t) ~= "table" then return nil end
    t = t[part]
  end
  return t
end

local function field(rec, name)
  if rec.params and rec.params[name] ~= nil then return rec.params[name] end
  if rec.params and rec.params[(name:gsub("-", "_"))] ~= nil then return rec.params[(name:gsub("-", "_"))] end
  return path_get(rec, name)
end

--- Records -> series for odp.plot (exposed for scripts that plot their own records).
function M.series(records, x, y, group, error_bars)
  local parent, leaf = y:match("^(.*)%.([^.]+)$")
  local by_group, order, skipped = {}, {}, 0
  for _, r in ipairs(records) do
    local xv, yv = field(r, x), path_get(r, y)
    if r.ok == false or xv == nil or type(yv) ~= "number" then
      skipped = skipped + 1
    else
      local g = group and tostring(field(r, group)) or ""
      local s = by_group[g]
      if not s then
        s = { name = group and (group .. "=" .. g) or "", cells = {}, xorder = {} }
        by_group[g] = s
        order[#order + 1] = s
      end
      local k = tostring(xv)
      local c = s.cells[k]
      if not c then
        c = { x = xv, sum = 0, n = 0 }
        s.cells[k] = c
        s.xorder[#s.xorder + 1] = k
      end
      c.sum, c.n = c.sum + yv, c.n + 1
      local obj = parent and path_get(r, parent)
      if error_bars and leaf ~= "p10" and leaf ~= "p90" and type(obj) == "table" and type(obj.p10) == "number"
        and type(obj.p90) == "number" then
        c.lo = math.min(c.lo or math.huge, obj.p10)
        c.hi = math.max(c.hi or -math.huge, obj.p90)
      end
    end
  end
  local series = {}
  for i, s in ipairs(order) do
    local pts = {}
    for j, k in ipairs(s.xorder) do
      local c = s.cells[k]
      pts[j] = { x = c.x, y = c.sum / c.n, lo = c.lo, hi = c.hi, n = c.n }
    end
    series[i] = { name = s.name, points = pts }
  end
  -- numeric group values sort numerically, others keep file order
  table.sort(series, function(a, b)
    local na, nb = tonumber(a.name:match("=(.*)$")), tonumber(b.name:match("=(.*)$"))
    if na and nb then return na < nb end
    return false
  end)
  return series, skipped
end

function M.main(args)
  local opts, rest = cli.parse(args, M.options, cli.global_options)
  if opts.help or #rest ~= 1 then
    print(cli.help("odp plot FILE.jsonl --x PARAM --y FIELD.PATH [--group PARAM] --out plot.svg",
      "Plots the records of a sweep (scripts/sweep.lua --out FILE.jsonl).", M.options, cli.global_options))
    return opts.help and 0 or 2
  end
  local path = rest[1]
  if not io.open(path, "rb") then errors.fail("ENOTFOUND", ("cannot read '%s'"):format(path), 2) end
  local records = sweep.load(path)
  local series, skipped = M.series(records, opts.x, opts.y, opts.group, not opts.no_error_bars)
  local npoints = 0
  for _, s in ipairs(series) do npoints = npoints + #s.points end
  if npoints == 0 then
    errors.fail("ENOTFOUND", ("no record in %s has both %s and a number at %s"):format(path, opts.x, opts.y), 1)
  end
  local unit = opts.y:match("_ms%.") and " (ms)" or opts.y:match("_kb$") and " (kB)" or ""
  local svg = plot.svg(series, {
    title = opts.title or (opts.y .. " vs " .. opts.x), xlabel = opts.x, ylabel = opts.y .. unit,
    width = opts.width, height = opts.height, logx = opts.log_x == nil and "auto" or opts.log_x,
    note = ("%s: %d record(s)%s"):format(path:match("[^/]+$"), #records,
      skipped > 0 and (", %d failed or without the field"):format(skipped) or ""),
  })
  if opts.out then
    errors.check(sys.write_file(opts.out, svg))
    if not opts.quiet then
      io.stderr:write(("odp: %s: %d point(s) in %d series\n"):format(opts.out, npoints, #series))
    end
  else
    io.stdout:write(svg)
  end
  return 0
end

return M
