--- Change points in a series of runs (docs/history.md, "Finding changes"): where the runs before and after
-- a point differ by at least a minimum effect, confirmed by the runs after it. Pure Lua over plain tables.
--   local changes = require("odp.results.detect").detect(points)
--   -- points: oldest first, each {median = number, samples = {...}?, dirty = bool?}
--   -- changes[i] = {index, effect, ci = {lo, hi}, p, before, after, direction, runs_after}
-- How (the ideas of Mozilla's Perfherder and Apache Otava, with ranks instead of a t statistic):
--  1. Binary segmentation: in a segment of clean runs, every candidate k compares a window of up to
--     `window` runs before it with up to `window` from it on. A candidate needs the medians of the two
--     windows' run medians to differ by >= min_effect and by >= t_min times their standard error (the spread of
--     the run medians before k: a step inside the runs' own noise is not a change), and the first `confirm`
--     runs from k on to each lie beyond half of min_effect on the same side (one outlier is not a change).
--  2. The best candidate is where the windows separate most: |AUC - 1/2| of the run medians (AUC = U / n1 n2,
--     1 or 0 when every run after is above or below every run before), then the larger effect.
--  3. It is accepted when the runs and their samples agree: Mann-Whitney over the two windows' run medians
--     gives p < alpha (the runs are the replicates; with 3 runs after or fewer, each must lie beyond every run
--     before), over their pooled samples p < alpha, so does each confirming run's samples against the runs
--     before (same side), and the hierarchical bootstrap of the ratio of medians (runs drawn, then their samples;
--     odp.core.stats) has a 95% CI that excludes no change. The effect and its CI are that ratio - 1.
--  4. The segment is split there and both halves are searched again.
-- Without samples (records that kept none) the run medians stand in for them. Dirty points (another governor,
-- frequency cap, throttling) are left out. A drift slower than min_effect per window is not a change point:
-- `odp history` shows it as the change against the baseline.
local stats = require("odp.core.stats")

local M = {}

M.DEFAULTS = { min_effect = 0.02, confirm = 2, window = 12, min_before = 6, alpha = 0.01, t_min = 5,
  resamples = 500, seed = 1, tries = 3 }

local function median(list, i, j)
  local s = table.move(list, i, j, 1, {})
  table.sort(s)
  local n = #s
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

-- |U / (n1 n2) - 1/2| of x[i..k-1] against x[k..j]
local function separation(x, i, k, j)
  local u = 0
  for a = k, j do
    local xa = x[a]
    for b = i, k - 1 do
      local xb = x[b]
      if xa > xb then u = u + 1 elseif xa == xb then u = u + 0.5 end
    end
  end
  return math.abs(u / ((j - k + 1) * (k - i)) - 0.5)
end

-- The samples of points[idx[i..j]] as groups (each run's samples; its median when it kept none).
local function groups(points, idx, i, j)
  local g = {}
  for a = i, j do
    local p = points[idx[a]]
    g[#g + 1] = (p.samples and #p.samples > 0) and p.samples or { p.median }
  end
  return g
end

local function flatten(g)
  local out = {}
  for _, s in ipairs(g) do table.move(s, 1, #s, #out + 1, out) end
  return out
end

--- The change points of points (oldest first), in order. opts: min_effect (0.02 = 2%), confirm (runs after a
--- change that must show it, 2), window (runs on each side compared, 12), min_before (runs before a change,
--- 6), alpha (Mann-Whitney level, 0.01), t_min (the step in standard errors of the run medians, 5),
--- resamples/seed (bootstrap of the CI, 500), load_samples (function(list of
--- points) that fills their samples when the caller left them out: only candidates' windows are loaded).
--- Each change: {index (into points: the first run after the change), effect (after/before - 1), ci = {lo,
--- hi} (of effect, 95%), p, before, after (medians of the two windows' samples), direction ("up"|"down"),
--- runs_after (clean runs from index on, to the next change or the end)}.
---@param points {median: number, samples?: number[], dirty?: boolean}[]
---@param opts table?
function M.detect(points, opts)
  local o = {}
  for k, v in pairs(M.DEFAULTS) do o[k] = v end
  for k, v in pairs(opts or {}) do o[k] = v end
  local idx, x = {}, {}
  for i, p in ipairs(points) do
    if not p.dirty and type(p.median) == "number" and p.median == p.median then
      idx[#idx + 1], x[#x + 1] = i, p.median
    end
  end
  -- prefix sums: a window's mean screens candidates before the medians and ranks are worked out
  local pre = { [0] = 0 }
  for i = 1, #x do pre[i] = pre[i - 1] + x[i] end
  local W, half = o.window, o.min_effect / 2
  local found = {}

  local function verify(i, k, j)
    if o.load_samples then
      local need = {}
      for a = i, j do
        local p = points[idx[a]]
        if p.samples == nil then need[#need + 1] = p end
      end
      if #need > 0 then o.load_samples(need) end
    end
    local gb, ga = groups(points, idx, i, k - 1), groups(points, idx, k, j)
    -- the runs are the replicates: their medians must differ (rank test over runs: a machine whose runs fall
    -- into two modes, say two cores or two clock states, mixes them by chance, and pooled samples would call
    -- that a change), and so must the samples
    if j - k + 1 <= 3 then
      -- too few runs after for a rank test to reach alpha: each must lie beyond every run before
      if separation(x, i, k, j) < 0.5 then return nil end
    else
      local _, pr = stats.mann_whitney(table.move(x, i, k - 1, 1, {}), table.move(x, k, j, 1, {}))
      if not pr or pr >= o.alpha then return nil end
    end
    local before = flatten(gb)
    local _, p = stats.mann_whitney(before, flatten(ga))
    if not p or p >= o.alpha then return nil end
    -- each confirming run on its own differs from the runs before, on the same side
    local mb = stats.percentile(before, 50)
    for a = 1, math.min(o.confirm, #ga) do
      local s = ga[a]
      if #s > 1 then
        local _, pa = stats.mann_whitney(before, s)
        if pa >= o.alpha or (stats.percentile(s, 50) > mb) ~= (stats.percentile(flatten(ga), 50) > mb) then return nil end
      end
    end
    local ratio, lo, hi = stats.bootstrap_ratio_groups(gb, ga, { resamples = o.resamples, seed = o.seed })
    if not ratio or (lo <= 1 and hi >= 1) or math.abs(ratio - 1) < o.min_effect then return nil end
    return { effect = ratio - 1, ci = { lo - 1, hi - 1 }, p = p, before = mb,
      after = stats.percentile(flatten(ga), 50), direction = ratio > 1 and "up" or "down" }
  end

  local function search(lo, hi)
    local cands = {}
    for k = lo + o.min_before, hi - o.confirm + 1 do
      local i, j = math.max(lo, k - W), math.min(hi, k + W - 1)
      local mb, ma = (pre[k - 1] - pre[i - 1]) / (k - i), (pre[j] - pre[k - 1]) / (j - k + 1)
      if mb ~= 0 and math.abs(ma / mb - 1) >= half then
        local medb, meda = median(x, i, k - 1), median(x, k, j)
        local eff = medb ~= 0 and meda / medb - 1 or 0
        -- beyond the runs' own noise: the step against the spread of the run medians before it (1.4826 MAD, a
        -- robust standard deviation), as Perfherder's t over two windows
        local dev = {}
        for a = i, k - 1 do dev[#dev + 1] = math.abs(x[a] - medb) end
        local sd = 1.4826 * median(dev, 1, #dev)
        local t = math.abs(meda - medb) / math.max(sd * math.sqrt(1 / (k - i) + 1 / (j - k + 1)), 1e-12 * math.abs(medb))
        local ok = math.abs(eff) >= o.min_effect and t >= o.t_min
        for a = k, k + o.confirm - 1 do
          if not ok then break end
          local d = x[a] / medb - 1
          ok = (d > 0) == (eff > 0) and math.abs(d) >= half
        end
        if ok then cands[#cands + 1] = { k = k, i = i, j = j, score = separation(x, i, k, j), eff = math.abs(eff) } end
      end
    end
    table.sort(cands, function(a, b)
      if a.score ~= b.score then return a.score > b.score end
      if a.eff ~= b.eff then return a.eff > b.eff end
      return a.k < b.k
    end)
    for t = 1, math.min(o.tries, #cands) do
      local c = cands[t]
      local change = verify(c.i, c.k, c.j)
      if change then
        change.k = c.k
        found[#found + 1] = change
        search(lo, c.k - 1)
        search(c.k, hi)
        return
      end
    end
  end
  search(1, #x)

  table.sort(found, function(a, b) return a.k < b.k end)
  for n, c in ipairs(found) do
    local next_k = found[n + 1] and found[n + 1].k or #x + 1
    c.runs_after = next_k - c.k
    c.index = idx[c.k]
    c.k = nil
  end
  return found
end

return M
