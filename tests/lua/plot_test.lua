-- odp plot: SVG from sweep records, checked as data (points, error bars, legend) and as an image (rsvg-convert).
local T = require("t")
local json = require("odp.core.json")
local proc = require("odp.proc")
local plot = require("odp.results.plot")

local root = T.root()
local odp = os.getenv("ODP") or (root .. "/build/odp")

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

local function png_size(path)
  local s = T.read(path)
  T.eq(s:sub(1, 8), "\137PNG\r\n\26\n", "PNG signature")
  local w, h = string.unpack(">I4I4", s, 17)
  return w, h
end

T.test("ticks are nice: steps of 1, 2 or 5 times a power of ten, covering the range", function()
  T.eq(plot.ticks(0, 2.2, 6), { 0, 0.5, 1.0, 1.5, 2.0, 2.5 })
  local t, step = plot.ticks(0, 2200, 6)
  T.eq(step, 500)
  T.eq(t[#t], 2500)
  t = plot.ticks(5, 5)
  T.ok(t[1] < 5 and t[#t] > 5, "a flat series still gets an axis")
end)

T.test("odp plot: one point per (group, x), mean over repeats, p10/p90 error bars, legend; PNG renders", function()
  local dir = T.tmpdir()
  local jl = {}
  for _, mode in ipairs({ "fast", "slow" }) do
    for _, size in ipairs({ 1, 10, 100, 1000 }) do
      for rep = 1, 2 do
        local p50 = size * (mode == "slow" and 2 or 1) + rep - 1.5
        jl[#jl + 1] = json.encode { ok = true, params = { size = size, mode = mode },
          latency_ms = { p10 = p50 * 0.9, p50 = p50, p90 = p50 * 1.1 } }
      end
    end
  end
  jl[#jl + 1] = json.encode { ok = false, params = { size = 5, mode = "fast" }, error = { code = "EIO" } }
  T.write(dir .. "/s.jsonl", table.concat(jl, "\n") .. "\n")
  local r = proc.run { odp, "plot", dir .. "/s.jsonl", "--x", "size", "--y", "latency_ms.p50", "--group", "mode",
    "--out", dir .. "/s.svg", timeout = 30 }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stderr, "8 point%(s%) in 2 series")
  local svg = T.read(dir .. "/s.svg")
  T.eq(count(svg, 'class="point"'), 8, "points")
  T.eq(count(svg, 'class="errorbar"'), 8, "error bars")
  T.eq(count(svg, 'class="line"'), 2, "lines")
  T.match(svg, ">mode=fast</text>")
  T.match(svg, ">mode=slow</text>")
  T.match(svg, "size %(log scale%)")
  T.match(svg, "1 failed or without the field")
  -- the mean over the two repeats of size=1000, slow: 2000 (2000 - 0.5 and 2000 + 0.5)
  T.match(svg, "mode=slow: x=1000 y=2000<")
  local pr = proc.run { "rsvg-convert", "-o", dir .. "/s.png", dir .. "/s.svg", timeout = 30 }
  T.eq(pr.status, 0, pr.stderr)
  local w, h = png_size(dir .. "/s.png")
  T.eq({ w, h }, { 760, 460 })
  T.ok(#T.read(dir .. "/s.png") > 10000, "a drawing, not an empty canvas")
end)

T.test("odp plot: linear axis, no group, no error bars for a plain field; errors for a missing field", function()
  local dir = T.tmpdir()
  local jl = {}
  for i, v in ipairs({ 1, 2, 3, 5, 8 }) do jl[i] = json.encode { ok = true, params = { n = v }, peak_rss_kb = 1000 * v } end
  T.write(dir .. "/r.jsonl", table.concat(jl, "\n") .. "\n")
  local r = proc.run { odp, "plot", dir .. "/r.jsonl", "--x", "n", "--y", "peak_rss_kb", "--out", dir .. "/r.svg",
    "--width", "500", "--height", "300", timeout = 30 }
  T.eq(r.status, 0, r.stderr)
  local svg = T.read(dir .. "/r.svg")
  T.eq(count(svg, 'class="point"'), 5)
  T.eq(count(svg, 'class="errorbar"'), 0)
  T.ok(not svg:find('class="legend"'), "no legend for a single unnamed series")
  T.ok(not svg:find("log scale"), "linear x")
  T.match(svg, 'width="500" height="300"')
  local pr = proc.run { "rsvg-convert", "-o", dir .. "/r.png", dir .. "/r.svg", timeout = 30 }
  T.eq(pr.status, 0, pr.stderr)
  T.eq({ png_size(dir .. "/r.png") }, { 500, 300 })
  r = proc.run { odp, "plot", dir .. "/r.jsonl", "--x", "n", "--y", "latency_ms.p50", "--out", dir .. "/x.svg",
    timeout = 30 }
  T.eq(r.status, 2, "the axes named are not in the file: usage")
  T.match(r.stderr, "no record")
end)

-- Records as scripts/sweep.lua writes them for -p size=... -p mode=...: the first parameter varies slowest.
local function sweep_file(dir, extra)
  local jl = {}
  for _, size in ipairs({ 1, 10, 100, 1000 }) do
    for _, mode in ipairs({ "fast", "slow" }) do
      local p50 = size * (mode == "slow" and 2 or 1)
      local params = { size = size, mode = mode, ["repeat"] = 1 }
      for k, v in pairs(extra or {}) do params[k] = v(size, mode) end
      jl[#jl + 1] = json.encode { ok = true, params = params, peak_rss_kb = 1000 + size,
        latency_ms = { p10 = p50 * 0.9, p50 = p50, p90 = p50 * 1.1 } }
    end
  end
  T.write(dir .. "/s.jsonl", table.concat(jl, "\n") .. "\n")
  return dir .. "/s.jsonl"
end

T.test("odp plot s.jsonl without flags: x = the first swept parameter, the second = group, p50 with p10/p90, "
  .. "s.svg next to the input, its path printed", function()
  local dir = T.tmpdir()
  local r = proc.run { odp, "plot", sweep_file(dir), cwd = "/", timeout = 30 }
  T.eq(r.status, 0, r.stderr)
  T.eq(r.stdout, dir .. "/s.svg\n", "the path, on stdout")
  T.match(r.stderr, "8 point%(s%) in 2 series, x = size, group = mode")
  local svg = T.read(dir .. "/s.svg")
  T.eq(count(svg, 'class="point"'), 8)
  T.eq(count(svg, 'class="errorbar"'), 8, "p10/p90 bars")
  T.match(svg, ">mode=slow</text>")
  T.match(svg, "latency_ms.p50 vs size")
  T.match(svg, "mode=slow: x=1000 y=2000<")
  -- --x alone: the other swept parameter still becomes the group
  r = proc.run { odp, "plot", dir .. "/s.jsonl", "--x", "mode", "--out", "-", timeout = 30 }
  T.eq(r.status, 0, r.stderr)
  T.match(r.stdout, ">size=1000</text>")
  T.match(r.stdout, "latency_ms.p50 vs mode")
end)

T.test("odp plot --y with two fields: one panel each, stacked; the PNG is twice as tall", function()
  local dir = T.tmpdir()
  local r = proc.run { odp, "plot", sweep_file(dir), "--y", "latency_ms.p50,peak_rss_kb", "--out", dir .. "/two.svg",
    timeout = 30 }
  T.eq(r.status, 0, r.stderr)
  T.eq(r.stdout, dir .. "/two.svg\n")
  local svg = T.read(dir .. "/two.svg")
  T.eq(count(svg, 'class="panel"'), 2)
  T.eq(count(svg, 'class="point"'), 16)
  T.eq(count(svg, 'class="errorbar"'), 8, "bars only where the field has p10/p90")
  T.match(svg, "peak_rss_kb %(kB%)")
  T.match(svg, "x=1000 y=2000<")
  local pr = proc.run { "rsvg-convert", "-o", dir .. "/two.png", dir .. "/two.svg", timeout = 30 }
  T.eq(pr.status, 0, pr.stderr)
  T.eq({ png_size(dir .. "/two.png") }, { 760, 920 })
end)

T.test("odp plot without flags: records differing in three parameters, or in none, say which flag to give", function()
  local dir = T.tmpdir()
  local r = proc.run { odp, "plot", sweep_file(dir, { threads = function(size) return size < 50 and 1 or 4 end }), timeout = 30 }
  T.eq(r.status, 2)
  T.match(r.stderr, "also differ in mode; plot one slice, or pick the axes with %-%-x and %-%-group\n$")
  T.write(dir .. "/one.jsonl", json.encode { ok = true, params = { n = 1 }, latency_ms = { p50 = 1 } } .. "\n")
  r = proc.run { odp, "plot", dir .. "/one.jsonl", timeout = 30 }
  T.eq(r.status, 2)
  T.match(r.stderr, "no parameter differs across its records; name the x axis with %-%-x PARAM")
end)

T.done()
