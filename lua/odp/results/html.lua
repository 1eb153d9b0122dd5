--- One self-contained HTML page per report (`odp report`, docs/report.md): a run, a sweep, a comparison or a
-- history. Inline CSS, inline SVG drawn by odp.results.plot, the page's data as embedded JSON, and a little
-- plain JavaScript (sortable and filterable tables, values on hover); nothing external. The page reads
-- without JavaScript (real tables, a text alternative for every chart) and in grey scale (dashed lines,
-- words beside colours). The same input gives the same bytes: nothing here reads a clock or the
-- environment. These functions take data and return text; lua/odp/cli/commands/report.lua reads the files.
local compare = require("odp.results.compare")
local json = require("odp.core.json")
local plot = require("odp.results.plot")
local report = require("odp.results.report")
local schema = require("odp.results.schema")
local stats = require("odp.core.stats")
local tensors = require("odp.results.tensors")
local device_state = require("odp.target.device_state")
local host = require("odp.host")
local ui = require("odp.core.ui")

local M = {}

--- Most points a chart draws from one series: longer series are thinned (the time series keeps each
-- bucket's smallest and largest sample, so outliers stay visible).
M.MAX_CHART_POINTS = 2000
--- Most points of an ECDF (quantiles at equal steps beyond that).
M.MAX_ECDF_POINTS = 400

local function esc(s)
  return (tostring(s):gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
    ["'"] = "&#39;" }))
end
M.escape = esc

-- A number for a data-v attribute (what the table sorts by): exact enough, no float noise.
local function dv(v)
  if type(v) ~= "number" or v ~= v or math.abs(v) == math.huge then return nil end
  return ("%.9g"):format(v)
end

local CSS = [[
:root{color-scheme:light}
body{font:14px/1.45 "DejaVu Sans",Helvetica,Arial,sans-serif;color:#1a1a1a;background:#fff;margin:0}
main{max-width:1100px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #999;padding-bottom:3px}
p.sub{color:#444;margin:0 0 12px}
table{border-collapse:collapse;margin:6px 0 12px}
th,td{padding:3px 10px;text-align:left;vertical-align:top;border-bottom:1px solid #ddd}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.kv th{font-weight:normal;color:#444;white-space:nowrap}
thead th{border-bottom:2px solid #555;white-space:nowrap}
thead th button{font:inherit;font-weight:bold;border:0;background:none;padding:0;cursor:pointer;color:inherit}
th[aria-sort=ascending] button::after{content:" \25B2"}th[aria-sort=descending] button::after{content:" \25BC"}
tr.delegated td{background:#eef3fa}
.tag{display:inline-block;border:1px solid #555;border-radius:3px;padding:0 4px;font-size:11px;margin-left:4px}
.share{display:inline-block;height:10px;background:#1f77b4;border:1px solid #1a1a1a;vertical-align:middle;margin-right:6px}
.warn{border:2px solid #1a1a1a;border-left-width:8px;background:#fff4e0;padding:6px 12px;margin:10px 0}
.warn ul{margin:4px 0;padding-left:20px}
.banner{border:2px solid #1a1a1a;border-left-width:10px;padding:10px 14px;margin:12px 0;font-size:16px}
.banner.slower,.banner.larger,.banner.fail{background:#fde2e1}.banner.faster,.banner.smaller{background:#e3f3e1}
.banner.same,.banner.none{background:#f0f0f0}
.banner strong{font-size:18px}
figure{margin:10px 0 18px}figcaption{color:#333;font-size:13px}
figure svg{max-width:100%;height:auto}
.readout{font-family:"DejaVu Sans Mono",monospace;font-size:12px;min-height:1.3em;color:#333}
.split{display:flex;height:22px;border:1px solid #1a1a1a;max-width:700px}
.split span{display:block;height:100%}
.grid{display:flex;flex-wrap:wrap;gap:12px}
.grid figure{flex:1 1 460px}
details summary{cursor:pointer;color:#333}
input[type=search]{font:inherit;padding:2px 6px;width:18em}
code{font-family:"DejaVu Sans Mono",monospace;font-size:13px}
@media print{.readout,input[type=search]{display:none}}
]]

-- Sorting (click a header), filtering (a search box names its table) and the hover readout. Plain ES5.
local JS = [[
(function(){
"use strict";
function each(list,f){Array.prototype.forEach.call(list,f);}
function key(td){var v=td.getAttribute("data-v");if(v!==null&&v!==""){return parseFloat(v);}
return td.textContent.trim().toLowerCase();}
each(document.querySelectorAll("table.sortable"),function(t){
var ths=t.tHead.rows[0].cells;
each(ths,function(th,i){var b=th.querySelector("button");if(!b){return;}
b.addEventListener("click",function(){
var asc=th.getAttribute("aria-sort")!=="ascending";
each(ths,function(o){if(o.hasAttribute("aria-sort")){o.setAttribute("aria-sort","none");}});
th.setAttribute("aria-sort",asc?"ascending":"descending");
var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows);
rows.sort(function(a,b){var x=key(a.cells[i]),y=key(b.cells[i]),c;
if(typeof x==="number"&&typeof y==="number"){c=x-y;}
else if(typeof x==="number"){c=-1;}else if(typeof y==="number"){c=1;}
else{c=x<y?-1:(x>y?1:0);}
return asc?c:-c;});
each(rows,function(r){body.appendChild(r);});});});});
each(document.querySelectorAll("input[data-filter]"),function(inp){
var t=document.getElementById(inp.getAttribute("data-filter")),out=document.getElementById(inp.getAttribute("data-filter")+"-shown");
inp.addEventListener("input",function(){var q=inp.value.trim().toLowerCase(),n=0;
each(t.tBodies[0].rows,function(r){var hit=!q||r.textContent.toLowerCase().indexOf(q)>=0;r.hidden=!hit;if(hit){n++;}});
if(out){out.textContent=n+" of "+t.tBodies[0].rows.length+" shown";}});});
each(document.querySelectorAll("figure[data-chart]"),function(f){
var out=f.querySelector(".readout");if(!out){return;}
f.addEventListener("mouseover",function(e){var el=e.target,t=el&&el.querySelector?el.querySelector("title"):null;
if(t&&el!==f){out.textContent=t.textContent;}});});
var data=document.getElementById("odp-data");
if(data){window.odpReport=JSON.parse(data.textContent);}
}());
]]

--- The page around sections (HTML strings). data: what the page shows, embedded as JSON (scripts and
--- tests read it as window.odpReport).
function M.page(title, subtitle, sections, data)
  local o = { "<!DOCTYPE html>\n", '<html lang="en">\n<head>\n<meta charset="utf-8"/>\n',
    '<meta name="viewport" content="width=device-width, initial-scale=1"/>\n',
    '<meta name="generator" content="odp ', esc(host.version), '"/>\n',
    "<title>", esc(title), "</title>\n<style>", CSS, "</style>\n</head>\n<body>\n<main>\n",
    "<h1>", esc(title), "</h1>\n" }
  if subtitle then o[#o + 1] = '<p class="sub">' .. subtitle .. "</p>\n" end
  for _, s in ipairs(sections) do o[#o + 1] = s end
  -- JSON in a script element: no "<", ">" or "&" at all (JSON's \u escapes say the same), so no text from a
  -- record can end the element or start markup, and the page stays well-formed XML too
  local text = json.encode(data or {}):gsub("[<>&]", { ["<"] = "\\u003c", [">"] = "\\u003e", ["&"] = "\\u0026" })
  o[#o + 1] = '</main>\n<script type="application/json" id="odp-data">' .. text .. "</script>\n"
  o[#o + 1] = "<script>//<![CDATA[\n" .. JS .. "//]]></script>\n</body>\n</html>\n"
  return table.concat(o)
end

--- <section> with a heading.
function M.section(id, heading, body)
  return ('<section id="sec-%s">\n<h2>%s</h2>\n%s</section>\n'):format(esc(id), esc(heading), body)
end

--- A two-column table of label, value (value is HTML; nil values are left out).
function M.kv(rows)
  local o = { '<table class="kv"><tbody>\n' }
  for _, r in ipairs(rows) do
    if r[2] ~= nil then o[#o + 1] = ("<tr><th scope=\"row\">%s</th><td>%s</td></tr>\n"):format(esc(r[1]), r[2]) end
  end
  o[#o + 1] = "</tbody></table>\n"
  return table.concat(o)
end

--- A data table. columns: {key, title, num = true (right-aligned, sorts by number), html = function(v, row)
--- -> cell HTML, text = function(v, row) -> cell text (not called for nil: "-")}. opts: id, sortable, filter (placeholder text),
--- caption, row_class = function(row) -> class.
function M.table(rows, columns, opts)
  opts = opts or {}
  local o = {}
  if opts.filter then
    o[#o + 1] = ('<p><label>Filter <input type="search" data-filter="%s" placeholder="%s"/></label> ' ..
      '<output id="%s-shown">%d shown</output></p>\n'):format(esc(opts.id), esc(opts.filter), esc(opts.id), #rows)
  end
  o[#o + 1] = ("<table%s%s>"):format(opts.id and (' id="%s"'):format(esc(opts.id)) or "",
    opts.sortable and ' class="sortable"' or "")
  if opts.caption then o[#o + 1] = "<caption>" .. esc(opts.caption) .. "</caption>" end
  o[#o + 1] = "\n<thead><tr>"
  for _, c in ipairs(columns) do
    local title = esc(c.title or c.key)
    o[#o + 1] = ('<th scope="col"%s%s>%s</th>'):format(c.num and ' class="n"' or "",
      opts.sortable and ' aria-sort="none"' or "", opts.sortable and ('<button type="button">' .. title .. "</button>") or title)
  end
  o[#o + 1] = "</tr></thead>\n<tbody>\n"
  for _, row in ipairs(rows) do
    local cls = opts.row_class and opts.row_class(row)
    o[#o + 1] = cls and ('<tr class="%s">'):format(esc(cls)) or "<tr>"
    for _, c in ipairs(columns) do
      local v = row[c.key]
      local cell
      if c.html then cell = c.html(v, row)
      elseif c.text then cell = v == nil and "-" or esc(c.text(v, row))
      elseif v == nil then cell = "-"
      elseif type(v) == "number" then cell = esc(report.sig4(v))
      else cell = esc(v) end
      local sortv = c.num and dv(c.sort and c.sort(v, row) or v)
      o[#o + 1] = ("<td%s%s>%s</td>"):format(c.num and ' class="n"' or "", sortv and (' data-v="%s"'):format(sortv) or "",
        cell)
    end
    o[#o + 1] = "</tr>\n"
  end
  o[#o + 1] = "</tbody></table>\n"
  return table.concat(o)
end

--- A chart: the SVG (role img, labelled), a caption, a hover readout, and the data as a table in <details>
--- (the text alternative; a string starting "<p" stands as it is: a pointer to a table elsewhere on the
--- page). npoints: how many points the chart draws (data-points; tests count them).
function M.figure(id, svg, caption, alt_html, npoints)
  svg = svg:gsub("^<svg ", ('<svg role="img" aria-labelledby="%s-cap" '):format(esc(id)), 1)
  return ('<figure id="%s" data-chart="%s" data-points="%d">\n%s<figcaption id="%s-cap">%s</figcaption>\n' ..
    '<div class="readout" aria-live="polite"></div>\n%s</figure>\n'):format(esc(id), esc(id), npoints or 0, svg,
    esc(id), esc(caption), alt_html and alt_html:find("^<p") and alt_html or alt_html and
      ("<details><summary>The chart's data as a table</summary>\n" .. alt_html .. "</details>\n") or "")
end

--- Warnings as a box (nothing when there are none).
function M.warnings(list)
  if #list == 0 then return "" end
  local o = { '<div class="warn" role="note"><strong>Warning' .. (#list > 1 and "s" or "") .. ":</strong><ul>\n" }
  for _, w in ipairs(list) do o[#o + 1] = "<li>" .. esc(w) .. "</li>\n" end
  o[#o + 1] = "</ul></div>\n"
  return table.concat(o)
end

-- ---------------------------------------------------------------------------------------------------------
-- Distributions

--- Histogram bins over samples: about sqrt(n) bins (5..40), log-spaced when the samples span 20x or more
--- (a first iteration 300x the others must not squash the rest into one bin). -> bins {x0, x1, y = count}, log
---@param samples number[]
---@return {x0: number, x1: number, x: number, y: integer}[] bins
---@return boolean log
function M.histogram(samples)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(samples) do lo, hi = math.min(lo, v), math.max(hi, v) end
  if #samples == 0 then return {}, false end
  local nb = math.max(5, math.min(40, math.ceil(math.sqrt(#samples))))
  local log = lo > 0 and hi / lo >= 20
  local a, b = lo, hi
  if log then a, b = math.log(lo), math.log(hi) end
  if b == a then b = a + (a == 0 and 1 or math.abs(a) * 0.01) end
  local w = (b - a) / nb
  local bins = {}
  for i = 1, nb do
    local x0, x1 = a + (i - 1) * w, a + i * w
    if log then x0, x1 = math.exp(x0), math.exp(x1) end
    bins[i] = { x0 = x0, x1 = x1, y = 0 }
  end
  for _, v in ipairs(samples) do
    local t = log and math.log(v) or v
    local i = math.min(nb, math.floor((t - a) / w) + 1)
    bins[i].y = bins[i].y + 1
  end
  for _, bin in ipairs(bins) do bin.x = (bin.x0 + bin.x1) / 2 end
  return bins, log
end

--- The ECDF of samples as points {x, y} (y the fraction <= x), at most M.MAX_ECDF_POINTS of them.
---@param samples number[]
---@return {x: number, y: number}[]
function M.ecdf(samples)
  local s = table.move(samples, 1, #samples, 1, {})
  table.sort(s)
  local n, out = #s, {}
  if n <= M.MAX_ECDF_POINTS then
    for i, v in ipairs(s) do out[i] = { x = v, y = i / n } end
  else
    for k = 1, M.MAX_ECDF_POINTS do
      local i = math.max(1, math.floor(k * n / M.MAX_ECDF_POINTS + 0.5))
      out[k] = { x = s[i], y = i / n }
    end
  end
  return out
end

--- A sequence thinned to at most max points: each of max/2 buckets keeps its smallest and largest value
--- (in order). points: {x, y}.
---@param points {x: number, y: number}[]
---@param max? integer default M.MAX_CHART_POINTS
function M.thin(points, max)
  max = max or M.MAX_CHART_POINTS
  if #points <= max then return points end
  local buckets, out = max // 2, {}
  for b = 0, buckets - 1 do
    local i0, i1 = b * #points // buckets + 1, (b + 1) * #points // buckets
    local lo, hi = i0, i0
    for i = i0, i1 do
      if points[i].y < points[lo].y then lo = i end
      if points[i].y > points[hi].y then hi = i end
    end
    if lo == hi then out[#out + 1] = points[lo]
    else
      out[#out + 1] = points[math.min(lo, hi)]
      out[#out + 1] = points[math.max(lo, hi)]
    end
  end
  return out
end

-- What a chart draws, one element per point: markers, or bars.
local function count_points(series)
  local n = 0
  for _, s in ipairs(series) do
    if s.markers ~= false or s.bars then n = n + #s.points end
  end
  return n
end

-- Latency charts of one side or two (label = "A"/"B" or ""): histogram(s) and ECDF(s) in unit.
local function distribution_figures(id, sides, unit, scale)
  local all = {}
  for _, side in ipairs(sides) do
    for _, v in ipairs(side.samples) do all[#all + 1] = v / scale end
  end
  local common, log = M.histogram(all)
  local hist, ecdf, alt_rows = {}, {}, {}
  for si, side in ipairs(sides) do
    local bins = {}
    for i, b in ipairs(common) do bins[i] = { x0 = b.x0, x1 = b.x1, x = b.x, y = 0 } end
    for _, v in ipairs(side.samples) do
      local t = v / scale
      for _, b in ipairs(bins) do
        if t <= b.x1 or b == bins[#bins] then b.y = b.y + 1 break end
      end
    end
    hist[si] = { name = side.name, bars = true, points = bins }
    local scaled = {}
    for i, v in ipairs(side.samples) do scaled[i] = v / scale end
    ecdf[si] = { name = side.name, step = true, marker_r = 2, points = M.ecdf(scaled) }
    for i, b in ipairs(bins) do
      alt_rows[i] = alt_rows[i] or { from = b.x0, to = b.x1 }
      alt_rows[i]["n" .. si] = b.y
    end
  end
  local cols = { { key = "from", title = "from " .. unit, num = true }, { key = "to", title = "to " .. unit, num = true } }
  for si, side in ipairs(sides) do
    cols[#cols + 1] = { key = "n" .. si, title = (side.name ~= "" and side.name .. " " or "") .. "samples", num = true }
  end
  local W = #sides > 1 and 760 or 540
  local hsvg = plot.svg(hist, { title = "Latency histogram", xlabel = "latency (" .. unit .. ")",
    ylabel = "samples", width = W, height = 340, logx = log })
  local esvg = plot.svg(ecdf, { title = "Latency ECDF", xlabel = "latency (" .. unit .. ")",
    ylabel = "fraction of samples <= x", width = W, height = 340, logx = log })
  local percentiles = {}
  for _, p in ipairs { 10, 50, 90, 99 } do
    local row = { p = "p" .. p }
    for si, side in ipairs(sides) do row["v" .. si] = stats.percentile(side.samples, p) / scale end
    percentiles[#percentiles + 1] = row
  end
  local pcols = { { key = "p", title = "percentile" } }
  for si, side in ipairs(sides) do
    pcols[#pcols + 1] = { key = "v" .. si, title = (side.name ~= "" and side.name .. " " or "") .. unit, num = true }
  end
  return (#sides == 1 and '<div class="grid">\n' or "<div>\n") ..
    M.figure(id .. "-hist", hsvg, ("Histogram of %s latency samples%s, %d bins%s."):format(
      table.concat((function() local t = {} for i, s in ipairs(sides) do t[i] = tostring(#s.samples) end return t end)(), " + "),
      #sides > 1 and " (A and B on the same bins)" or "", #common, log and ", log-spaced" or ""),
      M.table(alt_rows, cols), count_points(hist)) ..
    M.figure(id .. "-ecdf", esvg, "Share of samples at or below each latency (the empirical CDF)" ..
      (#all > M.MAX_ECDF_POINTS and (", drawn through %d quantiles"):format(M.MAX_ECDF_POINTS) or "") .. ".",
      M.table(percentiles, pcols), count_points(ecdf)) .. "</div>\n"
end

-- ---------------------------------------------------------------------------------------------------------
-- A record as the page uses it: read through odp.results.schema (records hold what devices said: every
-- declared field is of its type or absent, and the page shows "-"), with the few things the page derives.

--- The record as the pages read it: schema.read's checked copy, ok unless it says false, operators named
--- ("?" when not), counters.processes counted, and device_state's fields the page reads beside the raw table
--- (whose summary line odp.target.device_state makes).
function M.shape(rec)
  local r = schema.read(rec) or {}
  r.ok = r.ok ~= false
  local l = r.latency_ms
  if l and l.ci95 and #l.ci95 ~= 2 then l.ci95 = nil end
  for _, op in ipairs(r.ops or {}) do op.block, op.name = op.block or "?", op.name or "?" end
  if r.counters then r.counters.total, r.counters.processes = r.counters.total or {}, #(r.counters.processes or {}) end
  local v = r.device_state
  if v then
    local function tab(x) return type(x) == "table" and x or {} end
    local before = tab(v.before)
    local cpus_online = schema.finite(v.cpus_online)
    r.device_state = { error = type(v.error) == "string" and v.error or nil, throttled = v.throttled == true or nil,
      cpus_online = cpus_online and math.tointeger(cpus_online), raw = v,
      os = type(v.os) == "string" and v.os or nil, kernel = type(v.kernel) == "string" and v.kernel or nil,
      governors = {}, loadavg1 = schema.finite(tab(before.loadavg)[1]) }
    for _, c in ipairs(tab(before.cpus)) do
      if type(c) == "table" and type(c.governor) == "string" then r.device_state.governors[#r.device_state.governors + 1] = c.governor end
    end
  end
  return r
end

-- ---------------------------------------------------------------------------------------------------------
-- A run

local function fmt_bytes(b)
  return b >= 1000 and ("%d B (%s)"):format(b, ui.human_bytes(b)) or ("%d B"):format(b)
end

--- The record's warnings, and what a view must say besides: throttling, the setup's warnings
--- (odp.target.device_state.setup_warnings: records made before they were kept in the record get them here),
--- modelled times, a failed run.
function M.run_warnings(rec)
  local out, have = {}, {}
  for _, w in ipairs(rec.warnings or {}) do out[#out + 1] = w; have[w] = true end
  local ds = rec.device_state or {}
  if ds.throttled and not table.concat(out, "\n"):find("throttled", 1, true) then
    out[#out + 1] = "throttled: the CPUs' frequency or the thermal status changed during the run"
  end
  for _, w in ipairs(device_state.setup_warnings(ds.raw)) do
    if not have[w] then out[#out + 1] = w end
  end
  if rec.latency_ms and rec.latency_ms.modelled then
    out[#out + 1] = "modelled, not measured: these times come from the QEMU twin's modelled cycles"
  end
  if rec.ok == false then
    out[#out + 1] = ("the run failed: %s: %s"):format(rec.error and rec.error.code or "?",
      rec.error and rec.error.message or "?")
  end
  return out
end

local function op_rows(rec)
  local rows, total = {}, 0
  for _, op in ipairs(rec.ops or {}) do
    if not op.framework then
      local row = setmetatable({ total = (op.avg or op.p50 or 0) * (op.n or 1) }, { __index = op })
      rows[#rows + 1] = row
      -- the share is of the inference's operators: Execute-block events other than Method::execute
      if op.block == "Execute" and op.name ~= "Method::execute" then total = total + row.total end
    end
  end
  for _, r in ipairs(rows) do
    if r.block == "Execute" and r.name ~= "Method::execute" and total > 0 then r.share = r.total / total end
  end
  return rows
end

local function ops_section(rec)
  local rows = op_rows(rec)
  if #rows == 0 then return "" end
  local cycles = rec.ops_unit == "cycles"
  local vals = {}
  for _, r in ipairs(rows) do vals[#vals + 1] = r.p50 end
  local unit, scale = "cycles", 1
  if not cycles then unit, scale = report.time_unit(vals) end
  -- cycles are counts: whole numbers
  local function t(v) return type(v) == "number" and (cycles and ("%.0f"):format(v) or report.sig4(v / scale)) or "-" end
  local cols = { { key = "block" },
    { key = "name", html = function(v, row)
      return esc(v) .. (row.delegated and '<span class="tag">delegated</span>' or "")
    end },
    { key = "n", num = true, text = function(v) return tostring(v) end } }
  for _, k in ipairs { "p10", "p50", "p90", "avg", "min", "max" } do
    cols[#cols + 1] = { key = k, title = k .. " " .. unit, num = true, text = t }
  end
  cols[#cols + 1] = { key = "total", title = "total " .. unit, num = true, text = t }
  cols[#cols + 1] = { key = "share", title = "share", num = true, html = function(v)
    if not v then return "-" end
    return ('<span class="share" style="width:%dpx" aria-hidden="true"></span>%.1f%%'):format(
      math.floor(v * 120 + 0.5), v * 100)
  end }
  local ndeleg = 0
  for _, r in ipairs(rows) do if r.delegated then ndeleg = ndeleg + 1 end end
  return M.section("operators", "Operators",
    ("<p>%d operator rows from the ETDump%s; ExecuTorch's own OPERATOR_CALL overhead rows are left out, as " ..
      "the Inspector does. Share: the operator's total time (avg x n) over all operators of the Execute block. " ..
      "Click a header to sort.</p>\n"):format(#rows, ndeleg > 0 and (", %d delegated (marked)"):format(ndeleg) or "") ..
    M.table(rows, cols, { id = "ops", sortable = true, filter = "operator or block",
      row_class = function(r) return r.delegated and "delegated" or nil end }))
end

local function split_section(s)
  if type(s) ~= "table" or not s.execute_ms then return "" end
  local f = s.unit == "cycles" and function(v) return ("%.0f cycles"):format(v) end or report.duration
  local parts = { { "delegated", s.delegated_ms, "#1f77b4", "repeating-linear-gradient(45deg,#1f77b4 0 4px,#9cc3e5 4px 8px)" },
    { "kernels", s.kernels_ms, "#d62728", "#d62728" }, { "other", s.other_ms, "#dddddd", "#dddddd" } }
  local total = (s.delegated_ms or 0) + (s.kernels_ms or 0) + (s.other_ms or 0)
  local bar = { '<div class="split" role="img" aria-label="time split">' }
  local rows = {}
  for _, p in ipairs(parts) do
    local share = total > 0 and (p[2] or 0) / total or 0
    if share > 0 then
      bar[#bar + 1] = ('<span style="width:%.2f%%;background:%s" title="%s %s (%.1f%%)"></span>'):format(share * 100,
        p[4], p[1], esc(f(p[2])), share * 100)
    end
    rows[#rows + 1] = { part = p[1], time = f(p[2] or 0), share = ("%.1f%%"):format(share * 100) }
  end
  bar[#bar + 1] = "</div>\n"
  return M.section("split", "Time split",
    ("<p>Where a median inference's time went (medians over %d inferences; execute %s): delegated work, " ..
      "portable kernels, and the method's own work between instructions.</p>\n"):format(s.n or 0, esc(f(s.execute_ms))) ..
    table.concat(bar) .. M.table(rows, { { key = "part" }, { key = "time", num = true }, { key = "share", num = true } }))
end

local function latency_section(rec, groups, unit, scale)
  local l = rec.latency_ms
  if type(l) ~= "table" or not l.n then return "" end
  local function d(v) return type(v) == "number" and report.sig4(v / scale) or "-" end
  local cols = {}
  for _, k in ipairs { "n", "mean", "min", "p10", "p50", "p90", "p99", "max", "std" } do
    cols[#cols + 1] = { key = k, title = k == "n" and "n" or (k .. " " .. unit), num = true,
      text = k == "n" and tostring or d }
  end
  local o = { ("<p>From %s%s.</p>\n"):format(esc(l.source or "?"), l.modelled and " (modelled by the twin)" or ""),
    M.table({ l }, cols) }
  local facts = {}
  if l.ci95 then
    facts[#facts + 1] = { "median 95% CI", esc(("[%s, %s]"):format(report.duration(l.ci95[1]), report.duration(l.ci95[2]))) }
  end
  if l.cv then facts[#facts + 1] = { "cv", ("%.1f%%"):format(l.cv * 100) } end
  if l.warm then facts[#facts + 1] = { "warm p50 (first iteration of each process left out)", esc(report.duration(l.warm.p50)) } end
  if l.first_ms and #l.first_ms > 0 then
    facts[#facts + 1] = { "first iteration p50", esc(report.duration(stats.percentile(l.first_ms, 50))) }
  end
  if l.drift then
    facts[#facts + 1] = { "drift (last third vs first third of warm samples)",
      esc(("%+.1f%% (Mann-Whitney p %.2g)"):format(l.drift.pct or 0, l.drift.p or 1)) }
  end
  local st = rec.stop
  if type(st) == "table" then
    facts[#facts + 1] = { "stopping rule", esc(("%s%s: %d process(es), %d samples, %.2f s%s"):format(st.rule or "?",
      st.met == false and " (NOT met)" or " (met)", st.processes or 0, st.samples or 0, st.measured_seconds or st.seconds or 0,
      st.target_ci and (", target CI +-%g%%%s"):format(st.target_ci, st.ci_pct and (", reached +-%.2f%%"):format(st.ci_pct) or "") or "")) }
    if st.overrun_seconds then
      facts[#facts + 1] = { "hung?", esc(("the point took %.1f s, %.1f s more than measuring and uploads")
        :format(st.seconds or 0, st.overrun_seconds)) }
    end
  end
  o[#o + 1] = M.kv(facts)
  local samples = {}
  for _, g in ipairs(groups or {}) do table.move(g, 1, #g, #samples + 1, samples) end
  if #samples > 0 then
    o[#o + 1] = distribution_figures("latency", { { name = "", samples = samples } }, unit, scale)
    -- the time series: every iteration in order, first iterations of each process as their own points
    local pts, firsts, i = {}, {}, 0
    for _, g in ipairs(groups) do
      for j, v in ipairs(g) do
        i = i + 1
        pts[#pts + 1] = { x = i, y = v / scale }
        if j == 1 then firsts[#firsts + 1] = { x = i, y = v / scale } end
      end
    end
    local shown = M.thin(pts)
    -- many iterations: small dots, not joined (a line through hundreds of noisy points paints a solid band)
    local dense = #shown > 200
    local series = { { name = "iterations", marker_r = dense and 1.5 or 3, line = not dense, points = shown } }
    if #groups > 1 or #firsts > 0 then
      series[2] = { name = "first of a process", line = false, marker_r = 4, points = M.thin(firsts) }
    end
    local lo, hi = math.huge, 0
    for _, p in ipairs(pts) do lo, hi = math.min(lo, p.y), math.max(hi, p.y) end
    local svg = plot.svg(series, { title = "Per-iteration latency", xlabel = "iteration (processes one after another)",
      ylabel = "latency (" .. unit .. ")", width = 1000, height = 360, logx = false, logy = lo > 0 and hi / lo >= 20 })
    local alt = {}
    for _, p in ipairs(M.thin(pts, 200)) do alt[#alt + 1] = { i = p.x, v = p.y } end
    o[#o + 1] = M.figure("series", svg, ("Every iteration's latency in order (%d iterations in %d process(es)%s): " ..
      "warm-up, outliers and drift show here."):format(i, #groups,
        #shown < #pts and (", thinned to %d points keeping each bucket's lowest and highest"):format(#shown) or ""),
      M.table(alt, { { key = "i", title = "iteration", num = true, text = function(v) return tostring(v) end },
        { key = "v", title = unit, num = true } }), count_points(series))
  else
    o[#o + 1] = "<p>No per-iteration samples beside this record (samples.csv): the distribution is not drawn.</p>\n"
  end
  return M.section("latency", "Latency", table.concat(o))
end

-- The labelled schema fields of an HTML group as kv rows (odp.results.schema: label, format).
local function labelled_rows(rec, group)
  local rows = {}
  for _, f in ipairs(schema.labelled(group)) do
    local v = schema.get(rec, f[1])
    if v ~= nil then rows[#rows + 1] = { f.label, esc(report.show(f, v)) } end
  end
  return rows
end

-- The memory timeline (docs/memory.md): RSS, anonymous and file-backed over the run, the phases as bands, the
-- overall peak marked; the phase table under it.
local function memory_timeline(mem, rows)
  local series = { { name = "RSS", points = {} }, { name = "anonymous", points = {} }, { name = "file-backed", points = {} } }
  for _, r in ipairs(rows) do
    series[1].points[#series[1].points + 1] = { x = r.t_ms, y = r.rss_kb }
    series[2].points[#series[2].points + 1] = { x = r.t_ms, y = r.anon_kb }
    series[3].points[#series[3].points + 1] = { x = r.t_ms, y = r.file_kb }
  end
  -- each series thinned on its own values (a timeline row has no y: thinning the rows failed past 2000 of them)
  for _, s in ipairs(series) do s.points = M.thin(s.points, M.MAX_CHART_POINTS) end
  local bands, marks = {}, {}
  for _, p in ipairs(mem.phases or {}) do
    if p.t_start_ms and p.t_end_ms then
      bands[#bands + 1] = { x0 = p.t_start_ms, x1 = p.t_end_ms, label = p.name }
      if p.name == mem.peak_phase then
        marks[#marks + 1] = { x = p.t_end_ms, label = ("peak %d kB (%s)"):format(p.peak_kb, p.exact and "exact" or "sampled") }
      end
    end
  end
  local svg = plot.svg(series, { title = "Memory over the run", xlabel = "ms since the runner started",
    ylabel = "kB", width = 1000, height = 420, bands = bands, marks = marks })
  return M.figure("memory-timeline", svg, ("Resident memory sampled every %s ms (%d samples), phases as bands; " ..
    "the peak is read when its phase ends (marked there).%s"):format(mem.sample_ms or "?", #rows,
    #series[1].points < #rows and (" %d of %d samples drawn."):format(#series[1].points, #rows) or ""), nil,
    count_points(series))
end

local function memory_section(rec, rows_of_timeline)
  local rows = labelled_rows(rec, "memory")
  local planned = 0
  for i, b in ipairs(rec.planned_buffers or {}) do
    planned = planned + b
    rows[#rows + 1] = { ("planned buffer [%d]"):format(i - 1), esc(fmt_bytes(b)) }
  end
  if #(rec.planned_buffers or {}) > 1 then rows[#rows + 1] = { "planned, in all", esc(fmt_bytes(planned)) } end
  local mem = rec.memory
  local body = {}
  if #rows > 0 then body[#body + 1] = M.kv(rows) end
  if mem and mem.note then body[#body + 1] = "<p>" .. esc(mem.note) .. "</p>\n" end
  if mem and mem.phases then
    if rows_of_timeline and #rows_of_timeline > 0 then body[#body + 1] = memory_timeline(mem, rows_of_timeline) end
    -- a bare-metal board has no phases (no processes, no RSS): no empty table
    body[#body + 1] = #mem.phases > 0 and M.table(mem.phases, { { key = "name", title = "phase" },
      { key = "peak_kb", title = "peak kB", num = true },
      { key = "exact", title = "how", text = function(v) return v and "exact" or "sampled" end },
      { key = "t_start_ms", title = "from ms", num = true, text = function(v) return v and ("%.1f"):format(v) or "-" end },
      { key = "t_end_ms", title = "to ms", num = true, text = function(v) return v and ("%.1f"):format(v) or "exit" end } })
      or nil
    local o = mem.owners or {}
    local owner_rows = {}
    for _, k in ipairs { { "planned_kb", "planned arenas" }, { "scratch_kb", "NPU scratch (the Vela stream's)" },
      { "weights_kb", "weights (constant data)" },
      { "heap_other_kb", "other heap" }, { "file_kb", "code and libraries" }, { "unexplained_kb", "unexplained" },
      { "rss_kb", "RSS at the largest sample" } } do
      if o[k[1]] then owner_rows[#owner_rows + 1] = { k[2], esc(("%d kB"):format(o[k[1]])) } end
    end
    if o.weights_mapped ~= nil then
      owner_rows[#owner_rows + 1] = { "weights are", o.weights_mapped and "mapped (file-backed)" or "copied (heap)" }
    end
    if #owner_rows > 0 then body[#body + 1] = M.kv(owner_rows) end
  end
  if #body == 0 then return "" end
  return M.section("memory", "Memory", table.concat(body))
end

-- Labelled fields of no other group (odp.results.schema): a field added there shows here.
-- --llm (docs/llm.md): the generation's figures, and every generated token's latency by its position (the KV
-- cache grows with it).
local function llm_section(rec)
  local l = rec.llm
  if not l then return "" end
  local o = { M.kv(labelled_rows(rec, "llm")) }
  local pos = l.token_ms_by_position or {}
  if #pos > 0 then
    local series = { { name = "token latency", points = {} } }
    for i, v in ipairs(pos) do series[1].points[i] = { x = i, y = v } end
    local svg = plot.svg(series, { title = "Latency by token position", xlabel = "generated token (after the first)",
      ylabel = "ms", width = 1000, height = 360 })
    local alt = {}
    for i, v in ipairs(pos) do alt[i] = { i = i, v = v } end
    -- which clock timed the tokens (llm.token_times): a reader comparing two reports must know
    local source = l.token_times == "stdout" and "when its piece arrived on stdout, timed where the runner ran"
      or "its forward in the ETDump"
    o[#o + 1] = M.figure("llm-tokens", svg, ("Each generated token's own latency (%s), the " ..
      "median over %d process(es), by its position after the prompt."):format(source, l.processes or 1),
      M.table(alt, { { key = "i", title = "token", num = true, text = function(v) return tostring(v) end },
        { key = "v", title = "ms", num = true } }), #pos)
  end
  return M.section("llm", "Text generation", table.concat(o))
end

local function measurements_section(rec)
  local rows = labelled_rows(rec, "measurements")
  if #rows == 0 then return "" end
  return M.section("measurements", "Measurements", M.kv(rows))
end

local function counters_section(rec)
  local o = {}
  local c = rec.counters and rec.counters.total
  if type(c) == "table" then
    local rows = {}
    local keys = {}
    for k in pairs(c) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do
      if type(c[k]) == "number" then rows[#rows + 1] = { counter = k:gsub("_", "-"), value = c[k] } end
    end
    o[#o + 1] = ("<p>perf counters of the runner, summed over %d process(es).</p>\n"):format(rec.counters.processes)
    o[#o + 1] = M.table(rows, { { key = "counter" }, { key = "value", num = true,
      text = function(v) return math.type(v) == "integer" and tostring(v) or ("%.6g"):format(v) end } })
  end
  local p = rec.pmu
  if type(p) == "table" then
    local rows = {}
    if p.cpu_cycles_total then rows[#rows + 1] = { "CPU cycles, in all", ("%d"):format(p.cpu_cycles_total) } end
    if p.cpu_cycles_per_inference then
      rows[#rows + 1] = { "CPU cycles per inference", ("%.0f"):format(p.cpu_cycles_per_inference) }
    end
    if p.npu_cycles then rows[#rows + 1] = { "NPU cycles", ("%d"):format(p.npu_cycles) } end
    o[#o + 1] = "<h3>Ethos-U: NPU and CPU</h3>\n" .. M.kv(rows)
    if p.counters and #p.counters > 0 then
      o[#o + 1] = M.table(p.counters, { { key = "index", num = true, text = tostring }, { key = "event" },
        { key = "count", num = true, text = function(v) return ("%d"):format(v) end } }, { caption = "NPU PMU counters" })
    end
  end
  if #o == 0 then return "" end
  return M.section("counters", "Counters", table.concat(o))
end

-- The CPU profile (odp run --sample): each op's samples and hottest functions; a flame graph of the whole execute,
-- and one per op shown by clicking its row (folded: the run's cpu_profile.folded lines).
local FLAME_JS = [[
(function(){
var rows=document.querySelectorAll("#cpu-ops tr[data-flame]"),figs=document.querySelectorAll("figure.flame-fig");
Array.prototype.forEach.call(rows,function(r){r.style.cursor="pointer";r.addEventListener("click",function(){
var id=r.getAttribute("data-flame");
Array.prototype.forEach.call(figs,function(f){f.hidden=f.id!==id;});});});
}());
]]

local function cpu_section(rec, folded)
  local cp = rec.cpu_profile
  if not cp then return "" end
  local prof = require("odp.results.cpu_profile") -- lazy: start-up
  local rows = {}
  local figs = {}
  if folded then
    local svg = prof.flame_svg(folded, function(st) return st:sub(1, #prof.ROOT_OUTSIDE) ~= prof.ROOT_OUTSIDE end,
      "execute", { label = "flame graph of Method::execute" })
    if svg then
      figs[#figs + 1] = ('<figure class="flame-fig" id="flame-all"><figcaption>Method::execute: every sample ' ..
        'inside it (click an op row for its own)</figcaption>%s</figure>'):format(svg)
    end
  end
  for i, op in ipairs(cp.ops or {}) do
    local id
    if folded and (op.samples or 0) > 0 then
      -- an op's own graph: its root frame is its name (ops of the same name share it: the folded file has no id)
      local prefix = op.name .. ";"
      local svg = prof.flame_svg(folded, function(st) return st:sub(1, #prefix) == prefix end, op.name,
        { label = "flame graph of " .. op.name })
      if svg then
        id = "flame-op" .. i
        figs[#figs + 1] = ('<figure class="flame-fig" id="%s" hidden><figcaption>%s</figcaption>%s</figure>'):format(
          id, esc(op.name), svg)
      end
    end
    rows[#rows + 1] = { name = op.name .. " #" .. tostring(op.instruction_id), samples = op.samples, share = op.share,
      time_share = op.time_share, top = prof.top_text(op), flame = id }
  end
  local s = cp.samples or {}
  local intro = ("<p>%s sampled at %s Hz: %s samples (%s while the runner waited for a CPU), %s inside " ..
    "Method::execute, %.1f%% of those in an op's ETDump interval; %s lost.</p>\n"):format(esc(cp.event or "?"),
    tostring(cp.rate_hz or "?"), tostring(s.total or 0), tostring(s.preempted or 0), tostring(s.in_execute or 0),
    (cp.attributed or 0) * 100, tostring(s.lost or 0)) ..
    ('<p class="overhead">%s</p>\n'):format(esc(prof.overhead_line(cp.overhead)))
  local pct = function(v) return v and ("%.1f%%"):format(v * 100) or "-" end
  local t = M.table(rows, { { key = "name", title = "op" }, { key = "samples", num = true, text = tostring },
    { key = "share", title = "share of samples", num = true, text = pct },
    { key = "time_share", title = "share of time (ETDump)", num = true, text = pct },
    { key = "top", title = "hottest functions" } }, { id = "cpu-ops" })
  -- the rows carry the id of their graph (M.table knows no per-row attributes)
  local k = 0
  t = t:gsub("<tr>", function()
    k = k + 1
    local r = rows[k - 1] -- the first <tr> is the header's
    return (r and r.flame) and ('<tr data-flame="%s">'):format(r.flame) or "<tr>"
  end)
  return M.section("cpu-profile", "CPU profile", intro .. t .. table.concat(figs, "\n") ..
    "<script>" .. FLAME_JS .. "</script>\n")
end

local function steps_section(rec)
  if type(rec.steps) ~= "table" or #rec.steps == 0 then return "" end
  local longest = 0
  for _, s in ipairs(rec.steps) do longest = math.max(longest, s.ms or 0) end
  return M.section("steps", "Steps", M.table(rec.steps, { { key = "name", title = "step" }, { key = "status" },
    { key = "ms", title = "duration", num = true, html = function(v)
      if type(v) ~= "number" then return "-" end
      return ('<span class="share" style="width:%dpx" aria-hidden="true"></span>%s'):format(
        longest > 0 and math.floor(v / longest * 160 + 0.5) or 0, esc(report.duration(v)))
    end } }))
end

local function header_rows(rec)
  local rows = {}
  local m = rec.model
  if type(m) == "table" then
    rows[#rows + 1] = { "model", ("<code>%s</code> (%s, sha256 %s)"):format(esc(m.path or "?"),
      m.bytes and esc(fmt_bytes(m.bytes)) or "?", esc((m.sha256 or "?"):sub(1, 12))) }
  end
  if type(rec.runner) == "table" then rows[#rows + 1] = { "runner", "<code>" .. esc(rec.runner.path or "?") .. "</code>" } end
  rows[#rows + 1] = { "flow", rec.flow and esc(rec.flow) }
  rows[#rows + 1] = { "board", rec.board and esc(rec.board) }
  rows[#rows + 1] = { "device", (rec.device or rec.target) and esc(("%s (%s)"):format(rec.device or "?", rec.target or "?")) }
  rows[#rows + 1] = { "emulated", rec.emulated and esc(("%s: the runner ran emulated, not natively"):format(rec.emulated)) }
  if rec.device_state then
    local ok, summary = pcall(device_state.summary, rec.device_state.raw)
    rows[#rows + 1] = { "device state", esc(rec.device_state.error and ("unknown: " .. rec.device_state.error)
      or ok and summary or "unreadable (a field of an unexpected type)") }
    if rec.device_state.kernel or rec.device_state.os then
      rows[#rows + 1] = { "system", esc(table.concat({ rec.device_state.os or "", rec.device_state.kernel or "" }, " · ")) }
    end
  end
  if type(rec.params) == "table" and next(rec.params) then
    local keys = {}
    for k in pairs(rec.params) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = esc(k .. "=" .. tostring(rec.params[k])) end
    rows[#rows + 1] = { "parameters", "<code>" .. table.concat(parts, " ") .. "</code>" }
  end
  if rec.status ~= nil or rec.signal then
    rows[#rows + 1] = { "exit", esc(rec.signal and ("signal " .. tostring(rec.signal)) or ("status " .. tostring(rec.status))) }
  end
  rows[#rows + 1] = { "started", rec.started_at and esc(rec.started_at) }
  rows[#rows + 1] = { "odp", rec.odp_version and esc(rec.odp_version) }
  return rows
end

--- A run's page. rec: the record; opts: samples (groups per process, from samples.csv; nil: none), files
--- ({name, href, bytes} of the run directory, hrefs relative to the page), trace ({href, events} of a
--- Chrome trace written beside the page), source (the path the record came from, for the subtitle).
---@param rec table a result record
---@param opts? {samples?: number[][], files?: {name: string, href: string, bytes?: integer}[], trace?: {href: string, events: integer}, source?: string}
---@return string page
-- The agreement with --reference (docs/outputs.md): the metrics per output, and each compared output's
-- error histogram (|got - ref| per decade, odp.numcmp's bins).
local function agreement_section(rec)
  local ref = rec.reference
  if not ref or not ref.outputs or #ref.outputs == 0 then return "" end
  local function g(v) return v and report.number(v) or nil end
  local rows = {}
  for _, e in ipairs(ref.outputs) do
    rows[#rows + 1] = { output = e.index, n = e.n, equal = e.equal, nonfinite = e.nonfinite, error = e.error,
      max_abs_err = e.max_abs_err or ((e.nonfinite or 0) > 0 and math.huge or nil), mean_abs_err = e.mean_abs_err,
      rmse = e.rmse, cosine = e.cosine, snr_db = e.snr_db or (e.identical and math.huge or nil), top1 = e.top1,
      top5 = e.top5 }
  end
  local function intcol(key) return { key = key, num = true, text = function(v) return ("%d"):format(v) end } end
  local function numcol(key, title, fmt)
    return { key = key, title = title, num = true, text = function(v) return report.number_text(v, fmt) end }
  end
  local body = { M.kv { { "reference", esc(ref.path or "?") .. (ref.kind == "dir" and " (files)" or " (a run)") },
    { "failed", ref.failed and esc(("output %d: %s %s (limit %s)"):format(ref.failed.output, ref.failed.metric,
      g(ref.failed.value) or "-inf", g(ref.failed.limit) or "?")) or nil } },
    M.table(rows, { intcol("output"), intcol("n"), intcol("equal"), intcol("nonfinite"), numcol("max_abs_err", "max abs err", "%.4g"),
      numcol("mean_abs_err", "mean abs err", "%.4g"), numcol("rmse", "RMSE", "%.4g"),
      numcol("cosine", "cosine", "%.9f"), numcol("snr_db", "SNR dB", "%.2f"),
      { key = "top1", title = "top-1", text = function(v) return v and "same" or "differs" end },
      { key = "top5", title = "top-5", num = true, text = function(v) return ("%.0f%%"):format(v * 100) end },
      { key = "error", title = "not compared" } }, { id = "agreement" }) }
  for _, e in ipairs(ref.outputs) do
    if e.histogram then
      local pts, alt = {}, {}
      for i, c in ipairs(e.histogram) do
        pts[i] = { x = tensors.HISTOGRAM_BINS[i].short, y = c }
        alt[i] = { bin = tensors.HISTOGRAM_BINS[i].name, n = c }
      end
      local svg = plot.svg({ { name = "", points = pts } }, { title = ("Output %d: |error| per decade"):format(e.index),
        xlabel = "decade of |got - reference| (-3: [1e-3, 1e-2); NaN: non-finite mismatches)", ylabel = "elements",
        width = 760, height = 320 })
      body[#body + 1] = M.figure(("agreement-hist-%d"):format(e.index), svg,
        ("Output %d: how far each of its %d elements is from the reference, per decade."):format(e.index, e.n or 0),
        M.table(alt, { { key = "bin", title = "|error|" }, intcol("n") }), #pts)
    end
  end
  return M.section("agreement", "Agreement with the reference", table.concat(body))
end

function M.run(rec, opts)
  opts = opts or {}
  rec = M.shape(rec)
  local unit, scale = report.latency_unit(rec.latency_ms or {})
  local name = rec.model and rec.model.path and rec.model.path:match("[^/]+$") or "run"
  local title = ("%s on %s%s"):format(name, rec.board or rec.device or rec.target or "?",
    rec.emulated and (" (emulated: " .. rec.emulated .. ")") or "")
  local sections = { M.warnings(M.run_warnings(rec)), M.kv(header_rows(rec)) }
  sections[#sections + 1] = agreement_section(rec)
  -- what the record measured, failed or not (a run that failed only its output check has all of it), as the
  -- terminal shows it; each section is empty where the record has nothing for it
  sections[#sections + 1] = llm_section(rec)
  sections[#sections + 1] = latency_section(rec, opts.samples, unit, scale)
  sections[#sections + 1] = memory_section(rec, opts.memory_rows)
  sections[#sections + 1] = measurements_section(rec)
  sections[#sections + 1] = split_section(rec.ops_summary)
  sections[#sections + 1] = ops_section(rec)
  sections[#sections + 1] = counters_section(rec)
  sections[#sections + 1] = cpu_section(rec, opts.folded)
  sections[#sections + 1] = steps_section(rec)
  local links = {}
  if opts.trace then
    links[#links + 1] = ('<p><a href="%s" download="">Chrome/Perfetto trace</a> (%d events): open ' ..
      "https://ui.perfetto.dev and drop the file on it, or load it in chrome://tracing.</p>\n"):format(
        esc(opts.trace.href), opts.trace.events)
  end
  if opts.files and #opts.files > 0 then
    links[#links + 1] = M.table(opts.files, { { key = "name", title = "file", html = function(v, row)
      return ('<a href="%s">%s</a>'):format(esc(row.href), esc(v))
    end }, { key = "bytes", num = true, text = function(v) return v and tostring(v) or "-" end } })
  end
  if #links > 0 then sections[#sections + 1] = M.section("files", "Files", table.concat(links)) end
  local data = { kind = "run", record = { ok = rec.ok, flow = rec.flow, device = rec.device, board = rec.board,
    model = rec.model, latency_ms = rec.latency_ms, peak_rss_kb = rec.peak_rss_kb, ops = #(rec.ops or {}) },
    samples = opts.samples and #opts.samples or 0 }
  return M.page(title, esc(("%s · %s%s"):format(rec.ok == false and "FAILED run" or "run",
    rec.started_at or "?", opts.source and (" · " .. opts.source) or "")), sections, data)
end

-- ---------------------------------------------------------------------------------------------------------
-- A sweep

--- A sweep's page. records: the JSONL's records; opts: x, group (parameters; default: the swept ones, or
--- the board when records name boards), source (the file's path).
---@param records table[]
---@param opts? {x?: string, group?: string, source?: string}
---@return string page
function M.sweep(records, opts)
  opts = opts or {}
  local shaped = {}
  for i, r in ipairs(records) do shaped[i] = M.shape(r) end
  records = shaped
  local swept = plot.swept(records)
  local x, group = opts.x or swept[1], opts.group or swept[2]
  local boards, nboards = {}, 0
  for _, r in ipairs(records) do
    if r.board and not boards[r.board] then boards[r.board] = true nboards = nboards + 1 end
  end
  if not group and nboards > 1 then group = "board" end
  local ok, failed = {}, {}
  for _, r in ipairs(records) do
    if r.ok == false then failed[#failed + 1] = r else ok[#ok + 1] = r end
  end
  local sections = {}
  local vals = {}
  for _, r in ipairs(ok) do if r.latency_ms then vals[#vals + 1] = r.latency_ms.p50 end end
  local unit, scale = report.time_unit(vals)
  sections[#sections + 1] = M.kv({ { "records", ("%d (%d ok, %d failed)"):format(#records, #ok, #failed) },
    { "swept", #swept > 0 and esc(table.concat(swept, ", ")) or "nothing differs across the records" },
    { "boards", nboards > 0 and esc(tostring(nboards)) or nil } })
  local npoints = 0
  if x then
    local series = plot.series(records, x, "latency_ms.p50", group, true)
    for _, s in ipairs(series) do
      s.band = true
      s.marker_r = 3
      for _, p in ipairs(s.points) do
        p.y, p.lo, p.hi = p.y / scale, p.lo and p.lo / scale, p.hi and p.hi / scale
      end
      npoints = npoints + #s.points
    end
    if npoints > 0 then
      local svg = plot.svg(series, { title = "Latency over " .. x, xlabel = x, ylabel = "latency p50 (" .. unit .. ")",
        width = 1000, height = 440, logx = "auto" })
      sections[#sections + 1] = M.section("chart", "Latency over " .. x, M.figure("sweep", svg,
        ("p50 latency as a line, the p10-p90 band shaded; one point per value of %s%s (the mean over repeats)."):format(
          x, group and (", one line per " .. group) or ""),
        '<p>The data: every record\'s p10, p50 and p90 in <a href="#points">the table of points</a>.</p>\n', npoints))
    end
  end
  -- every record, one row
  local pkeys, seen = {}, {}
  for _, r in ipairs(records) do
    for k, v in pairs(r.params or {}) do
      if not seen[k] and type(v) ~= "table" then seen[k] = true pkeys[#pkeys + 1] = k end
    end
  end
  table.sort(pkeys)
  local rows, reps = {}, false
  for i, r in ipairs(records) do
    local l = type(r.latency_ms) == "table" and r.latency_ms or {}
    local row = { i = i, board = r.board, ok = r.ok == false and ("FAIL " .. (r.error and r.error.code or "")) or "ok",
      n = l.n, p10 = l.p10, p50 = l.p50, p90 = l.p90, mean = l.mean, rss = r.peak_rss_kb, rep = report.sweep_rep(r) }
    if row.rep then reps = true end
    for _, k in ipairs(pkeys) do row["p:" .. k] = r.params and r.params[k] end
    rows[i] = row
  end
  local function t(v) return type(v) == "number" and report.sig4(v / scale) or "-" end
  local cols = { { key = "i", title = "#", num = true, text = tostring } }
  for _, k in ipairs(pkeys) do
    cols[#cols + 1] = { key = "p:" .. k, title = report.param_title(k), num = true, sort = function(v) return tonumber(v) end,
      text = function(v) return v == nil and "-" or tostring(v) end }
  end
  if reps then cols[#cols + 1] = { key = "rep", num = true, sort = function(v) return type(v) == "string" and tonumber(v:match("^%d+")) or nil end } end
  if nboards > 0 then cols[#cols + 1] = { key = "board" } end
  for _, c in ipairs { { key = "ok" }, { key = "n", num = true, text = function(v) return v and tostring(v) or "-" end },
    { key = "p10", title = "p10 " .. unit, num = true, text = t }, { key = "p50", title = "p50 " .. unit, num = true, text = t },
    { key = "p90", title = "p90 " .. unit, num = true, text = t }, { key = "mean", title = "mean " .. unit, num = true, text = t },
    { key = "rss", title = "peak RSS kB", num = true, text = function(v) return v and ("%d"):format(v) or "-" end } } do
    cols[#cols + 1] = c
  end
  sections[#sections + 1] = M.section("points", "Points", M.table(rows, cols,
    { id = "points", sortable = true, filter = "parameter value, board, FAIL" }))
  if #failed > 0 then
    local frows = {}
    for _, r in ipairs(failed) do
      local parts = {}
      for _, k in ipairs(pkeys) do
        if r.params and r.params[k] ~= nil then parts[#parts + 1] = k .. "=" .. tostring(r.params[k]) end
      end
      frows[#frows + 1] = { point = table.concat(parts, " "), board = r.board,
        code = r.error and r.error.code, message = r.error and r.error.message }
    end
    local fcols = { { key = "point" }, { key = "code" }, { key = "message" } }
    if nboards > 0 then table.insert(fcols, 2, { key = "board" }) end
    sections[#sections + 1] = M.section("failed", ("Failed points (%d)"):format(#failed), M.table(frows, fcols))
  end
  local data = { kind = "sweep", records = #records, ok = #ok, failed = #failed, x = x, group = group,
    points = npoints, swept = json.array(swept) }
  return M.page("Sweep" .. (x and (" over " .. x) or ""), esc(opts.source or ""), sections, data)
end

-- ---------------------------------------------------------------------------------------------------------
-- A comparison

local function pct(v) return v and ("%+.1f%%"):format((v - 1) * 100) or "-" end

--- A comparison's page. res: odp.results.compare.compare's result; A, B: the loaded sides (their groups
--- are the latency samples); gate: odp.results.compare.gate's decision (nil: no gate set).
---@param res table from odp.results.compare.compare
---@param A table from odp.results.compare.load
---@param B table from odp.results.compare.load
---@param gate? {pct: number, failed: boolean, text: string}
---@return string page
function M.comparison(res, A, B, gate)
  local lat = res.rows[1]
  local sections = {}
  local verdict = lat and lat.verdict or "none"
  local head
  if lat and lat.ratio then
    local words = verdict == "same" and "no difference within noise" or ("B is %s"):format(verdict)
    head = ("<strong>%s</strong>: B/A = %.3f (%s)%s%s"):format(esc(words), lat.ratio, pct(lat.ratio),
      lat.ci95 and esc((", 95%% CI %s .. %s"):format(pct(lat.ci95[1]), pct(lat.ci95[2]))) or "",
      lat.p and esc((", Mann-Whitney p %.2g"):format(lat.p)) or "")
  else
    head = "<strong>no latency to compare</strong>"
  end
  local gate_text = gate and esc(gate.text) or "no gate: odp compare --fail-if-slower PCT makes this a CI gate"
  sections[1] = ('<div class="banner %s%s" role="status">%s<br/>Gate: %s</div>\n'):format(esc(verdict:gsub(" ", "-")),
    gate and gate.failed and " fail" or "", head, gate_text)
  sections[2] = M.kv({
    { "A", esc(("%s (%d record(s), %d process(es))"):format(res.a.path, res.a.records, res.a.processes)) },
    { "B", esc(("%s (%d record(s), %d process(es))"):format(res.b.path, res.b.records, res.b.processes)) } })
  sections[3] = M.warnings(res.notes)
  local function fmt(r, v)
    if type(v) ~= "number" then return "-" end
    if r.unit == "tokens/s" then return ("%.1f tokens/s"):format(v) end
    return r.unit == "kB" and ("%.0f kB"):format(v) or report.duration(v)
  end
  local metric_rows, deltas = {}, {}
  for _, r in ipairs(res.rows) do
    local row = { metric = r.metric, a = r.a.median, b = r.b.median, n = ("%d/%d"):format(r.a.n, r.b.n), ratio = r.ratio,
      lo = r.ci95 and r.ci95[1], hi = r.ci95 and r.ci95[2], p = r.p, verdict = compare.VERDICT_TEXT[r.verdict] or r.verdict, r = r,
      delta = (r.a.median and r.b.median) and (r.b.median - r.a.median) or nil }
    if r.metric:match("^op ") then
      row.metric = r.metric:sub(4)
      deltas[#deltas + 1] = row
    else
      metric_rows[#metric_rows + 1] = row
    end
  end
  local cols = { { key = "metric" },
    { key = "a", title = "A median", num = true, text = function(v, row) return fmt(row.r, v) end },
    { key = "b", title = "B median", num = true, text = function(v, row) return fmt(row.r, v) end },
    { key = "n", title = "n A/B", num = true, sort = function(_, row) return row.r.a.n end },
    { key = "ratio", title = "B/A", num = true, text = function(v) return v and ("%.3f"):format(v) or "-" end },
    { key = "lo", title = "95% CI of change", num = true, text = function(_, row)
      return row.lo and ("%s .. %s"):format(pct(row.lo), pct(row.hi)) or "-"
    end },
    { key = "p", num = true, text = function(v) return v and ("%.2g"):format(v) or "-" end },
    { key = "verdict" } }
  sections[#sections + 1] = M.section("metrics", "Metrics", M.table(metric_rows, cols, { id = "metrics", sortable = true }))
  local function samples_of(side)
    local s = {}
    for _, g in ipairs(side.groups) do table.move(g, 1, #g, #s + 1, s) end
    return s
  end
  local sa, sb = samples_of(A), samples_of(B)
  local unit, scale = report.time_unit({ stats.percentile(sa, 50), stats.percentile(sb, 50) })
  sections[#sections + 1] = M.section("distributions", "Distributions",
    distribution_figures("dist", { { name = "A", samples = sa }, { name = "B", samples = sb } }, unit, scale))
  if #deltas > 0 then
    table.sort(deltas, function(x, y)
      local dx, dy = math.abs(x.delta or 0), math.abs(y.delta or 0)
      if dx ~= dy then return dx > dy end
      return x.metric < y.metric
    end)
    local ocols = { cols[1], cols[2], cols[3],
      { key = "delta", title = "B - A", num = true, text = function(v) return v and report.duration(v) or "-" end },
      cols[5], cols[6], cols[7], cols[8] }
    ocols[1] = { key = "metric", title = "operator" }
    sections[#sections + 1] = M.section("op-deltas", "Operators, by impact",
      "<p>Per-operator medians of A and B, sorted by how much the median moved (|B - A|), largest first.</p>\n" ..
      M.table(deltas, ocols, { id = "op-deltas", sortable = true, filter = "operator" }))
  end
  local data = { kind = "comparison", verdict = verdict, ratio = lat and lat.ratio, ci95 = lat and lat.ci95,
    gate = gate, rows = #res.rows, operators = #deltas, samples = json.array { #sa, #sb } }
  return M.page("A vs B", esc(("%s vs %s"):format(res.a.path, res.b.path)), sections, data)
end

-- ---------------------------------------------------------------------------------------------------------
-- A history

--- A history's page from a plain table: {series = name, unit = "ms" (default), points = {{t, p50, ci_lo,
--- ci_hi, run?, commit?}}, changes = {{t, before, after, pct?, note?}}, about = {{label, text}} (what the
--- series is: model, board, parameters...), verdict = {state, why?, need?} (odp.results.history.detect's:
--- "undecided" is said as such, never as no change), min_effect = percent}. t: a number or a timestamp text
--- (a category axis, in the points' order).
---@param h {series: string, unit?: string, points: {t: number|string, p50: number, ci_lo?: number, ci_hi?: number}[], changes?: {t: number|string, before?: number, after?: number, pct?: number, note?: string}[], about?: {[1]: string, [2]: string}[], verdict?: {state: string, why?: string, need?: string}, min_effect?: number}
---@return string page
function M.history(h)
  local pts, change_pts, by_t = {}, {}, {}
  for i, p in ipairs(h.points or {}) do
    pts[i] = { x = p.t, y = p.p50, lo = p.ci_lo, hi = p.ci_hi }
    by_t[tostring(p.t)] = p
  end
  for _, c in ipairs(h.changes or {}) do
    local at = by_t[tostring(c.t)]
    if at then change_pts[#change_pts + 1] = { x = c.t, y = at.p50 } end
  end
  local unit = h.unit or "ms"
  local series = { { name = "p50 with 95% CI", band = true, marker_r = 3, points = pts } }
  if #change_pts > 0 then series[2] = { name = "detected change", line = false, marker_r = 7, points = change_pts } end
  local sections = {}
  local about = {}
  for i, r in ipairs(h.about or {}) do about[i] = { r[1], esc(r[2]) } end
  if #about > 0 then sections[#sections + 1] = M.kv(about) end
  -- what the runs say, in the terminal's words
  local verdict = h.verdict or {}
  local said
  if verdict.state == "undecided" then
    said = ("undecided: %s; %s"):format(verdict.why or "?", verdict.need or "?")
  elseif #change_pts == 0 then
    said = h.min_effect and ("no change of %g%% or more found"):format(h.min_effect) or "no change found"
  else
    said = ("%d change(s) found, marked"):format(#change_pts)
  end
  sections[#sections + 1] = ('<p class="verdict">%s</p>\n'):format(esc(said))
  if #pts > 0 then
    local svg = plot.svg(series, { title = h.series, xlabel = "run", ylabel = "p50 (" .. unit .. ")", width = 1000,
      height = 420, logx = false })
    sections[#sections + 1] = M.section("trend", "Trend", M.figure("history", svg,
      ("%d runs of %s: the p50 as a line, its 95%% CI shaded; %s."):format(#pts, h.series or "?", said),
      M.table(h.points, { { key = "t", title = "run" }, { key = "p50", title = "p50 " .. unit, num = true },
        { key = "ci_lo", title = "CI low", num = true }, { key = "ci_hi", title = "CI high", num = true } }),
      #pts + #change_pts))
  end
  if h.changes and #h.changes > 0 then
    sections[#sections + 1] = M.section("changes", "Detected changes", M.table(h.changes, {
      { key = "t", title = "first run after" }, { key = "before", title = "before " .. unit, num = true },
      { key = "after", title = "after " .. unit, num = true },
      { key = "pct", title = "change", num = true, text = function(v) return v and ("%+.1f%%"):format(v) or "-" end },
      { key = "note" } }))
  end
  return M.page("History of " .. tostring(h.series or "?"), nil, sections,
    { kind = "history", series = h.series, points = #pts, changes = #change_pts, verdict = verdict.state })
end

return M
