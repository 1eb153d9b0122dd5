--- SVG line/point charts without external tools: axes with nice ticks, labels, a legend, error bars.
--   local svg = require("odp.results.plot").svg({ { name = "fast", points = { { x = 1, y = 2.5, lo = 2.1, hi = 3 } } } },
--     { title = "latency", xlabel = "num_executions", ylabel = "latency_ms.p50 (ms)" })
-- A series' points are joined in x order; x may be numbers or strings (a category axis, in first-seen order).
-- opts.logx = true | false | "auto" (default: log when every x > 0 and they span 100x or more); opts.logy = true
-- draws y in decades (when every y > 0).
-- A series may also be drawn as a band (series.band: the area between each point's lo and hi, no error
-- bars), as bars (series.bars: each point {x0, x1, y} a bar from 0 to y), as steps (series.step: an ECDF),
-- without markers (series.markers = false; series.marker_r sizes them) or without a line (series.line = false). Lines after the first are dashed, so they stay apart when
-- printed in grey.
local M = {}

M.PALETTE = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf" }
--- Dash patterns by series, in the palette's order: grey-scale print tells lines apart by them.
M.DASHES = { nil, "7 3", "2 2", "9 3 2 3", "4 4", "1 3", "12 4", "6 2 2 2" }

local function esc(s)
  return (tostring(s):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end

local function num(v) return ("%.2f"):format(v) end

-- The width of a character of an 11 px label, at most (DejaVu Sans, the widest of the fonts the SVG names):
-- where a label ends is known before a browser draws it.
local LABEL_CHAR_W = 7

--- "Nice" tick values covering [lo, hi] (Heckbert: steps of 1, 2 or 5 times a power of ten). integer: the
--- values are counts (runs, iterations): steps of at least 1, so no tick falls between two of them.
function M.ticks(lo, hi, n, integer)
  n = n or 6
  if hi < lo then lo, hi = hi, lo end
  if hi == lo then
    local d = lo == 0 and 1 or math.abs(lo) * 0.1
    lo, hi = lo - d, hi + d
  end
  local function nice(x, round)
    local e = math.floor(math.log(x, 10))
    local f = x / 10 ^ e
    local nf
    if round then nf = f < 1.5 and 1 or f < 3 and 2 or f < 7 and 5 or 10
    else nf = f <= 1 and 1 or f <= 2 and 2 or f <= 5 and 5 or 10 end
    return nf * 10 ^ e
  end
  local step = nice((hi - lo) / (n - 1), true)
  if integer then step = math.max(step, 1) end
  local first, last = math.floor(lo / step) * step, math.ceil(hi / step) * step
  local out = {}
  for i = 0, math.floor((last - first) / step + 0.5) do out[#out + 1] = first + i * step end
  return out, step
end

local function label(v, step)
  if math.type(v) == "integer" then return tostring(v) end
  if step and step >= 1 and math.abs(v) < 1e15 then return ("%d"):format(math.floor(v + 0.5)) end
  local s = ("%.6g"):format(v)
  if step then
    local decimals = math.max(0, -math.floor(math.log(step, 10) + 1e-9))
    s = ("%." .. decimals .. "f"):format(v)
  end
  return s
end

--- Renders series to an SVG document (string).
---@param series {name: string, points: {x: number|string, y: number, lo?: number, hi?: number}[]}[]
--- opts.lines = false draws points (and error bars) without joining them (categories that are not a sequence).
--- opts.marks: vertical dashed lines at numeric x, each {x = number, label = text} (odp history's change points).
--- opts.bands: shaded x ranges behind the series, each {x0, x1, label} (a run's memory phases).
---@param opts? {title?: string, xlabel?: string, ylabel?: string, width?: integer, height?: integer, logx?: boolean|string, note?: string, lines?: boolean, marks?: {x: number, label: string}[], bands?: {x0: number, x1: number, label: string}[]}
function M.svg(series, opts)
  opts = opts or {}
  local W, H = opts.width or 760, opts.height or 460
  local ml, mr, mt, mb = 78, 24, opts.title and 44 or 20, 64
  local legend = #series > 1 or (series[1] and series[1].name and series[1].name ~= "")
  if legend then mr = 170 end
  local pw, ph = W - ml - mr, H - mt - mb

  -- x: numbers, or categories in first-seen order
  local categorical, cats, cat_index = false, {}, {}
  for _, s in ipairs(series) do
    for _, p in ipairs(s.points) do
      if type(p.x) ~= "number" then categorical = true end
    end
  end
  local xs, ys = {}, {}
  for _, s in ipairs(series) do
    for _, p in ipairs(s.points) do
      if categorical then
        local k = tostring(p.x)
        if not cat_index[k] then cats[#cats + 1] = k cat_index[k] = #cats end
      else
        xs[#xs + 1] = p.x0 or p.x
        if p.x1 then xs[#xs + 1] = p.x1 end
      end
      ys[#ys + 1] = p.y
      if p.lo then ys[#ys + 1] = p.lo end
      if p.hi then ys[#ys + 1] = p.hi end
    end
  end
  -- x that are all whole numbers are counts (runs, iterations): ticks between them mean nothing
  local whole = #xs > 0
  for _, x in ipairs(xs) do whole = whole and math.type(x) == "integer" end
  -- shaded ranges and marked x are drawn inside the axes too (a run's first phase starts before its first sample)
  if not categorical then
    for _, b in ipairs(opts.bands or {}) do xs[#xs + 1] = b.x0; xs[#xs + 1] = b.x1 end
    for _, m in ipairs(opts.marks or {}) do xs[#xs + 1] = m.x end
  end
  local logx = opts.logx
  if logx == nil or logx == "auto" then
    logx = false
    if not categorical and #xs > 0 then
      local mn, mx = math.min(table.unpack(xs)), math.max(table.unpack(xs))
      logx = mn > 0 and mx / mn >= 100
    end
  end

  local xmap, xticks, xstep
  if categorical then
    local n = math.max(#cats, 1)
    xmap = function(x) return ml + pw * ((cat_index[tostring(x)] - 0.5) / n) end
    xticks = {}
    for i, c in ipairs(cats) do xticks[i] = { pos = ml + pw * ((i - 0.5) / n), text = c } end
  elseif logx then
    local mn, mx = math.min(table.unpack(xs)), math.max(table.unpack(xs))
    local lo, hi = math.floor(math.log(mn, 10)), math.ceil(math.log(mx, 10))
    if hi == lo then hi = lo + 1 end
    xmap = function(x) return ml + pw * (math.log(x, 10) - lo) / (hi - lo) end
    xticks = {}
    for e = lo, hi do
      local v = 10 ^ e
      xticks[#xticks + 1] = { pos = xmap(v), text = e >= 0 and ("%d"):format(math.floor(v + 0.5)) or ("%g"):format(v) }
    end
  else
    local mn = #xs > 0 and math.min(table.unpack(xs)) or 0
    local mx = #xs > 0 and math.max(table.unpack(xs)) or 1
    local t
    t, xstep = M.ticks(mn, mx, 7, whole)
    local lo, hi = t[1], t[#t]
    xmap = function(x) return ml + pw * (x - lo) / (hi - lo) end
    xticks = {}
    for i, v in ipairs(t) do xticks[i] = { pos = xmap(v), text = label(v, xstep) } end
  end
  local yt, ystep, ylo, yhi, ymap
  local ypos = #ys > 0 and math.min(table.unpack(ys)) > 0
  if opts.logy and ypos then
    -- decades covering the values; a cold first iteration 300x the warm ones leaves both readable
    local lo = math.floor(math.log(math.min(table.unpack(ys)), 10))
    local hi = math.ceil(math.log(math.max(table.unpack(ys)), 10))
    if hi == lo then hi = lo + 1 end
    yt = {}
    for e = lo, hi do yt[#yt + 1] = 10.0 ^ e end
    ymap = function(y) return mt + ph * (1 - (math.log(y, 10) - lo) / (hi - lo)) end
  else
    local ymin = #ys > 0 and math.min(0, table.unpack(ys)) or 0
    local ymax = #ys > 0 and math.max(table.unpack(ys)) or 1
    yt, ystep = M.ticks(ymin, ymax, 6)
    ylo, yhi = yt[1], yt[#yt]
    ymap = function(y) return mt + ph * (1 - (y - ylo) / (yhi - ylo)) end
  end

  local o = {}
  local function add(s) o[#o + 1] = s end
  add(('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" ' ..
    'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">'):format(W, H, W, H))
  add(('<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>'):format(W, H))
  if opts.title then
    add(('<text x="%s" y="26" text-anchor="middle" font-size="15" font-weight="bold">%s</text>')
      :format(num(ml + pw / 2), esc(opts.title)))
  end
  -- grid and ticks
  add('<g class="grid" stroke="#e4e4e4" stroke-width="1">')
  for _, v in ipairs(yt) do add(('<line x1="%d" y1="%s" x2="%d" y2="%s"/>'):format(ml, num(ymap(v)), ml + pw, num(ymap(v)))) end
  for _, t in ipairs(xticks) do add(('<line x1="%s" y1="%d" x2="%s" y2="%d"/>'):format(num(t.pos), mt, num(t.pos), mt + ph)) end
  add("</g>")
  add(('<g class="axes" stroke="#333333" stroke-width="1.2"><line x1="%d" y1="%d" x2="%d" y2="%d"/>' ..
    '<line x1="%d" y1="%d" x2="%d" y2="%d"/></g>'):format(ml, mt + ph, ml + pw, mt + ph, ml, mt, ml, mt + ph))
  add('<g class="yticks" text-anchor="end">')
  for _, v in ipairs(yt) do
    add(('<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#333333"/><text x="%d" y="%s">%s</text>')
      :format(ml - 5, num(ymap(v)), ml, num(ymap(v)), ml - 8, num(ymap(v) + 4), esc(ystep and label(v, ystep) or ("%g"):format(v))))
  end
  add("</g>")
  add('<g class="xticks" text-anchor="middle">')
  for _, t in ipairs(xticks) do
    add(('<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#333333"/><text x="%s" y="%d">%s</text>')
      :format(num(t.pos), mt + ph, num(t.pos), mt + ph + 5, num(t.pos), mt + ph + 19, esc(t.text)))
  end
  add("</g>")
  if opts.xlabel then
    add(('<text class="xlabel" x="%s" y="%d" text-anchor="middle" font-size="13">%s%s</text>')
      :format(num(ml + pw / 2), H - 18, esc(opts.xlabel), logx and " (log scale)" or ""))
  end
  if opts.ylabel then
    add(('<text class="ylabel" x="18" y="%s" text-anchor="middle" font-size="13" transform="rotate(-90 18 %s)">%s%s</text>')
      :format(num(mt + ph / 2), num(mt + ph / 2), esc(opts.ylabel), ystep and "" or " (log scale)"))
  end
  -- a label at x inside the plot area: starting right of x, or ending left of it where it would pass the
  -- right edge (the legend is there), never left of the y axis
  local function inside(x, text)
    local w = (utf8.len(text) or #text) * LABEL_CHAR_W
    if x + 3 + w <= ml + pw then return math.max(x + 3, ml + 3), "start" end
    return math.max(x - 3, ml + 3 + w), "end"
  end
  for i, b in ipairs(not categorical and opts.bands or {}) do
    -- alternate shades, the label at the top, on two rows so the labels of narrow neighbours do not overlap:
    -- phases of a run one after another
    local x0, x1 = xmap(b.x0), xmap(b.x1)
    local tx, anchor = inside(x0, b.label or "")
    add(('<g class="band"><rect x="%s" y="%d" width="%s" height="%d" fill="%s"/>' ..
      '<text x="%s" y="%d" font-size="11" fill="#555555" text-anchor="%s">%s</text></g>'):format(num(x0), mt,
      num(math.max(0, x1 - x0)), ph, i % 2 == 1 and "#eef3fa" or "#f7f7f7", num(tx), mt + (i % 2 == 1 and 26 or 40),
      anchor, esc(b.label or "")))
  end
  for _, m in ipairs(not categorical and opts.marks or {}) do
    local x = num(xmap(m.x))
    local tx, anchor = inside(xmap(m.x), m.label or "")
    add(('<g class="mark" stroke="#d62728" fill="#d62728"><line x1="%s" y1="%d" x2="%s" y2="%d" stroke-dasharray="5,4"/>' ..
      '<text x="%s" y="%d" stroke="none" text-anchor="%s" font-size="11">%s</text></g>'):format(x, mt, x, mt + ph,
      num(tx), mt + 12, anchor, esc(m.label or "")))
  end
  -- series: error bars, line, points
  for si, s in ipairs(series) do
    local color = M.PALETTE[(si - 1) % #M.PALETTE + 1]
    local pts = {}
    for _, p in ipairs(s.points) do pts[#pts + 1] = p end
    table.sort(pts, function(a, b)
      if categorical then return cat_index[tostring(a.x)] < cat_index[tostring(b.x)] end
      return a.x < b.x
    end)
    local dash = M.DASHES[(si - 1) % #M.DASHES + 1]
    add(('<g class="series" data-name="%s" stroke="%s" fill="%s">'):format(esc(s.name or ""), color, color))
    if s.band and #pts > 1 then
      local up, down = {}, {}
      for i, p in ipairs(pts) do
        up[i] = (i == 1 and "M" or "L") .. num(xmap(p.x)) .. " " .. num(ymap(p.hi or p.y))
        down[#pts - i + 1] = "L" .. num(xmap(p.x)) .. " " .. num(ymap(p.lo or p.y))
      end
      add(('<path class="band" stroke="none" fill-opacity="0.18" d="%s%sZ"/>'):format(table.concat(up),
        table.concat(down)))
    end
    if s.bars then
      for _, p in ipairs(pts) do
        local x0, x1 = xmap(p.x0), xmap(p.x1)
        add(('<rect class="bar" x="%s" y="%s" width="%s" height="%s" fill-opacity="0.35" stroke-width="1"%s>' ..
          '<title>%s%s .. %s: %s</title></rect>'):format(num(x0), num(ymap(p.y)), num(math.max(x1 - x0, 0.5)),
          num(ymap(0) - ymap(p.y)), dash and (' stroke-dasharray="%s"'):format(dash) or "",
          (s.name or "") ~= "" and (esc(s.name) .. ": ") or "",
          esc(("%.4g"):format(p.x0)), esc(("%.4g"):format(p.x1)), esc(("%.6g"):format(p.y))))
      end
    end
    for _, p in ipairs(pts) do
      if p.lo and p.hi and not s.band then
        local x = xmap(p.x)
        add(('<path class="errorbar" stroke-width="1.2" fill="none" d="M%s %sV%sM%s %sH%sM%s %sH%s"/>'):format(
          num(x), num(ymap(p.lo)), num(ymap(p.hi)), num(x - 4), num(ymap(p.lo)), num(x + 4), num(x - 4),
          num(ymap(p.hi)), num(x + 4)))
      end
    end
    if #pts > 1 and opts.lines ~= false and s.line ~= false and not s.bars then
      local d = {}
      for i, p in ipairs(pts) do
        local x, y = num(xmap(p.x)), num(ymap(p.y))
        d[i] = i == 1 and ("M" .. x .. " " .. y) or s.step and ("H" .. x .. "V" .. y) or ("L" .. x .. " " .. y)
      end
      add(('<path class="line" fill="none" stroke-width="2"%s d="%s"/>'):format(
        dash and (' stroke-dasharray="%s"'):format(dash) or "", table.concat(d, "")))
    end
    if s.markers ~= false and not s.bars then
      -- small markers are dots without an outline: the series' 1 px stroke would double their size
      local r = s.marker_r or 4
      local outline = r < 2 and ' stroke="none"' or ""
      for _, p in ipairs(pts) do
        add(('<circle class="point" cx="%s" cy="%s" r="%s"%s><title>%sx=%s y=%s%s</title></circle>'):format(
          num(xmap(p.x)), num(ymap(p.y)), r, outline, (s.name or "") ~= "" and (esc(s.name) .. ": ") or "",
          esc(tostring(p.x)), esc(("%.6g"):format(p.y)),
          s.band and p.lo and p.hi and esc((" (%.6g .. %.6g)"):format(p.lo, p.hi)) or ""))
      end
    end
    add("</g>")
  end
  if legend then
    local lx, ly = ml + pw + 16, mt + 6
    add(('<g class="legend"><rect x="%d" y="%d" width="%d" height="%d" fill="#ffffff" stroke="#cccccc"/>')
      :format(lx - 6, ly - 4, mr - 22, 20 * #series + 8))
    for si, s in ipairs(series) do
      local color = M.PALETTE[(si - 1) % #M.PALETTE + 1]
      local y = ly + 20 * (si - 1) + 10
      local dash = M.DASHES[(si - 1) % #M.DASHES + 1]
      add(('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/><circle cx="%d" cy="%d" r="4" fill="%s"/>' ..
        '<text x="%d" y="%d">%s</text>'):format(lx, y, lx + 22, y, color,
        dash and (' stroke-dasharray="%s"'):format(dash) or "", lx + 11, y, color, lx + 28, y + 4, esc(s.name or "")))
    end
    add("</g>")
  end
  if opts.note then
    add(('<text class="note" x="%d" y="%d" font-size="10" fill="#666666">%s</text>'):format(ml, H - 4, esc(opts.note)))
  end
  add("</svg>")
  return table.concat(o, "\n") .. "\n"
end

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

--- Records -> series for M.svg: one point per (group, x), the mean of y over the records that have it, with
--- the p10/p90 beside y (latency_ms.p50 -> latency_ms.p10 .. p90) as lo/hi, widest over the repeats. Records
--- that failed or lack x or a number at y are skipped (the second return value counts them).
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

--- The swept parameters: those whose values differ across the successful records, in the order they were
-- given to the sweep (the first given varies slowest, so it changes least often from record to record).
function M.swept(records)
  local first, differs, changes, prev = {}, {}, {}, nil
  for _, r in ipairs(records) do
    if r.ok ~= false and type(r.params) == "table" then
      for k, v in pairs(r.params) do
        if type(v) ~= "table" then
          local key = tostring(v)
          if first[k] == nil then first[k] = key elseif first[k] ~= key then differs[k] = true end
          if prev and prev[k] ~= nil and tostring(prev[k]) ~= key then changes[k] = (changes[k] or 0) + 1 end
        end
      end
      prev = r.params
    end
  end
  local names = {}
  for k in pairs(differs) do names[#names + 1] = k end
  table.sort(names, function(a, b)
    local ca, cb = changes[a] or 0, changes[b] or 0
    if ca ~= cb then return ca < cb end
    return a < b
  end)
  return names
end

--- Stacks SVG documents from M.svg (each width x height) into one, top to bottom: one panel per y field.
function M.stack(docs, width, height)
  if #docs == 1 then return docs[1] end
  local o = { ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">')
    :format(width, height * #docs, width, height * #docs) }
  for i, d in ipairs(docs) do
    o[#o + 1] = (d:gsub('^<svg xmlns="http://www.w3.org/2000/svg" ', ('<svg class="panel" x="0" y="%d" ')
      :format((i - 1) * height), 1))
  end
  o[#o + 1] = "</svg>\n"
  return table.concat(o, "\n")
end

return M
