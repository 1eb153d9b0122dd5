--- SVG line/point charts without external tools: axes with nice ticks, labels, a legend, error bars.
--   local svg = require("odp.results.plot").svg({ { name = "fast", points = { { x = 1, y = 2.5, lo = 2.1, hi = 3 } } } },
--     { title = "latency", xlabel = "num_executions", ylabel = "latency_ms.p50 (ms)" })
-- A series' points are joined in x order; x may be numbers or strings (a category axis, in first-seen order).
-- opts.logx = true | false | "auto" (default: log when every x > 0 and they span 100x or more).
local M = {}

M.PALETTE = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf" }

local function esc(s)
  return (tostring(s):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end

local function num(v) return ("%.2f"):format(v) end

--- "Nice" tick values covering [lo, hi] (Heckbert: steps of 1, 2 or 5 times a power of ten).
function M.ticks(lo, hi, n)
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
---@param opts? {title?: string, xlabel?: string, ylabel?: string, width?: integer, height?: integer, logx?: boolean|string, note?: string, lines?: boolean, marks?: {x: number, label: string}[]}
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
        xs[#xs + 1] = p.x
      end
      ys[#ys + 1] = p.y
      if p.lo then ys[#ys + 1] = p.lo end
      if p.hi then ys[#ys + 1] = p.hi end
    end
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
    t, xstep = M.ticks(mn, mx, 7)
    local lo, hi = t[1], t[#t]
    xmap = function(x) return ml + pw * (x - lo) / (hi - lo) end
    xticks = {}
    for i, v in ipairs(t) do xticks[i] = { pos = xmap(v), text = label(v, xstep) } end
  end
  local ymin = #ys > 0 and math.min(0, table.unpack(ys)) or 0
  local ymax = #ys > 0 and math.max(table.unpack(ys)) or 1
  local yt, ystep = M.ticks(ymin, ymax, 6)
  local ylo, yhi = yt[1], yt[#yt]
  local function ymap(y) return mt + ph * (1 - (y - ylo) / (yhi - ylo)) end

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
      :format(ml - 5, num(ymap(v)), ml, num(ymap(v)), ml - 8, num(ymap(v) + 4), esc(label(v, ystep))))
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
    add(('<text class="ylabel" x="18" y="%s" text-anchor="middle" font-size="13" transform="rotate(-90 18 %s)">%s</text>')
      :format(num(mt + ph / 2), num(mt + ph / 2), esc(opts.ylabel)))
  end
  for _, m in ipairs(not categorical and opts.marks or {}) do
    local x = num(xmap(m.x))
    add(('<g class="mark" stroke="#d62728" fill="#d62728"><line x1="%s" y1="%d" x2="%s" y2="%d" stroke-dasharray="5,4"/>' ..
      '<text x="%s" y="%d" stroke="none" text-anchor="start" font-size="11">%s</text></g>'):format(x, mt, x, mt + ph,
      num(xmap(m.x) + 3), mt + 12, esc(m.label or "")))
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
    add(('<g class="series" data-name="%s" stroke="%s" fill="%s">'):format(esc(s.name or ""), color, color))
    for _, p in ipairs(pts) do
      if p.lo and p.hi then
        local x = xmap(p.x)
        add(('<path class="errorbar" stroke-width="1.2" fill="none" d="M%s %sV%sM%s %sH%sM%s %sH%s"/>'):format(
          num(x), num(ymap(p.lo)), num(ymap(p.hi)), num(x - 4), num(ymap(p.lo)), num(x + 4), num(x - 4),
          num(ymap(p.hi)), num(x + 4)))
      end
    end
    if #pts > 1 and opts.lines ~= false then
      local d = {}
      for i, p in ipairs(pts) do d[i] = (i == 1 and "M" or "L") .. num(xmap(p.x)) .. " " .. num(ymap(p.y)) end
      add(('<path class="line" fill="none" stroke-width="2" d="%s"/>'):format(table.concat(d, "")))
    end
    for _, p in ipairs(pts) do
      add(('<circle class="point" cx="%s" cy="%s" r="4"><title>%s: x=%s y=%s</title></circle>'):format(
        num(xmap(p.x)), num(ymap(p.y)), esc(s.name or ""), esc(tostring(p.x)), esc(("%.6g"):format(p.y))))
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
      add(('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/><circle cx="%d" cy="%d" r="4" fill="%s"/>' ..
        '<text x="%d" y="%d">%s</text>'):format(lx, y, lx + 22, y, color, lx + 11, y, color, lx + 28, y + 4,
        esc(s.name or "")))
    end
    add("</g>")
  end
  if opts.note then
    add(('<text class="note" x="%d" y="%d" font-size="10" fill="#666666">%s</text>'):format(ml, H - 4, esc(opts.note)))
  end
  add("</svg>")
  return table.concat(o, "\n") .. "\n"
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
