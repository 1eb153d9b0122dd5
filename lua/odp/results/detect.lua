--- Change points in a series of runs (docs/history.md, "Finding changes"): where the runs before and after
-- a point differ by at least a minimum effect, confirmed by the runs after it. Pure Lua over plain tables.
--   local changes, verdict = require("odp.results.detect").detect(points)
--   -- points: oldest first, each {median = number, samples = {...}?, dirty = bool?}
--   -- changes[i] = {index, effect, ci = {lo, hi}, p, before, after, direction, runs_after}
--   -- verdict = {state = "changes" | "no change" | "undecided", why?, need?}: never "no change" when the runs
--   -- could not tell (too few; a tail that moved; a step the small-n test could not judge)
-- How (the ideas of Mozilla's Perfherder and Apache Otava, with ranks instead of a t statistic):
--  1. Binary segmentation: in a segment of clean runs, every candidate k compares a window of up to
--     `window` runs before it with up to `window` from it on. A candidate needs the medians of the two
--     windows' run medians to differ by >= min_effect and by >= t_min times their standard error (the spread of
--     the run medians before k: a step inside the runs' own noise is not a change), and the first `confirm`
--     runs from k on to each lie beyond half of min_effect on the same side (one outlier is not a change).
--  2. The best candidate is where the windows separate most: |z| of the Mann-Whitney U of the run medians
--     (full separation of twelve runs from twelve scores higher than of two from twelve), then the larger
--     effect. A permutation test (Apache Otava's) asks whether that best is better than the best of the same
--     runs in random orders: p = (as good + 1) / (permutations + 1) < alpha (199: none as good).
--  3. It is accepted when the runs and their samples agree: Mann-Whitney over the two windows' run medians
--     gives p < alpha (the runs are the replicates; with 3 runs after or fewer, each must lie beyond every run
--     before), over their pooled samples p < alpha, so does each confirming run's samples against the runs
--     before (same side), and the hierarchical bootstrap of the ratio of medians (runs drawn, then their samples;
--     odp.core.stats) has a 95% CI that excludes no change. The effect and its CI are that ratio - 1.
--  4. The segment is split there and both halves are searched again.
-- Small n: a candidate with min_runs (3) to min_before - 1 runs before it (and min_runs after) cannot reach
-- alpha by ranks or permutations; decisive samples decide it instead: every run after beyond every run before,
-- Welch's t over the run medians p < alpha, and each run's samples telling it apart from every run on the other
-- side (the 95% CIs of the runs' medians do not overlap), then step 3's pooled test and bootstrap.
-- Without samples (records that kept none) the run medians stand in for them. Dirty points (another governor,
-- frequency cap, throttling) are left out. A drift slower than min_effect per window is not a change point:
-- `odp history` shows it as the change against the baseline.
local stats = require("odp.core.stats")

local M = {}

M.DEFAULTS = { min_effect = 0.02, confirm = 2, window = 12, min_before = 6, min_runs = 3, alpha = 0.01, t_min = 5,
  resamples = 500, permutations = 199, seed = 1, tries = 3 }

local function median(list, i, j)
  local s = table.move(list, i, j, 1, {})
  table.sort(s)
  local n = #s
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

-- How well x[k..j] separates from x[i..k-1]: |AUC - 1/2| (AUC = U / n1 n2: 1 or 0 when every run after lies
-- above or below every run before) and |z| of U (the same separation weighed by the windows' sizes: two runs
-- beyond twelve is weaker evidence than twelve beyond twelve).
local function separation(x, i, k, j)
  local u = 0
  for a = k, j do
    local xa = x[a]
    for b = i, k - 1 do
      local xb = x[b]
      if xa > xb then u = u + 1 elseif xa == xb then u = u + 0.5 end
    end
  end
  local n1, n2 = k - i, j - k + 1
  return math.abs(u / (n1 * n2) - 0.5), math.abs(u - n1 * n2 / 2) / math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
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

-- The candidates of x[lo..hi] (step 1 of the method), best first: {k, i, j (the windows), score, eff}.
local function candidates(x, lo, hi, o)
  local pre = { [lo - 1] = 0 } -- prefix sums: a window's mean screens candidates before medians and ranks
  for a = lo, hi do pre[a] = pre[a - 1] + x[a] end
  local W, half = o.window, o.min_effect / 2
  local cands = {}
  for k = lo + o.min_runs, hi - o.confirm + 1 do
    local i, j = math.max(lo, k - W), math.min(hi, k + W - 1)
    -- fewer runs before than the full test needs: the decisive-samples test, with min_runs on each side
    local small = k - i < o.min_before
    if small and j - k + 1 < o.min_runs then goto next end
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
      if ok then
        cands[#cands + 1] = { k = k, i = i, j = j, score = select(2, separation(x, i, k, j)), eff = math.abs(eff), small = small }
      end
    end
    ::next::
  end
  table.sort(cands, function(a, b)
    if a.score ~= b.score then return a.score > b.score end
    if a.eff ~= b.eff then return a.eff > b.eff end
    return a.k < b.k
  end)
  return cands
end

-- Step 3's permutation test (Apache Otava's, for E-divisive): how often the runs of x[lo..hi] in a random
-- order give a candidate that separates its windows as well as `score` does. The best of many candidates
-- is always somewhat separated; this asks whether this segment's best is better than chance. -> p
local function permutation_p(x, lo, hi, score, o)
  local seed = o.seed
  local function draw(n) -- its own generator (the caller's math.random is left alone); its high bits: an
    seed = (seed * 1103515245 + 12345) % 2147483648 -- LCG's low bits repeat with short periods
    return (seed >> 12) % n + 1
  end
  local m = hi - lo + 1
  local as_good = 0
  for _ = 1, o.permutations do
    local y = table.move(x, lo, hi, 1, {})
    for a = m, 2, -1 do
      local b = draw(a)
      y[a], y[b] = y[b], y[a]
    end
    local c = candidates(y, 1, m, o)[1]
    if c and c.score >= score then as_good = as_good + 1 end
  end
  return (as_good + 1) / (o.permutations + 1)
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
  local found = {}

  local function verify(i, k, j, small)
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
    if small then
      -- min_runs..min_before-1 runs before: too few for the rank tests and the permutation test to reach alpha.
      -- Decisive samples decide instead: every run after beyond every run before, Welch's t over the run
      -- medians below alpha, and each run's own samples agreeing: the 95% CIs of the runs' medians before and
      -- after do not overlap (every run is told apart from every run on the other side by its samples alone)
      local few = ("%d run(s) before it, too few for the full test, "):format(k - i)
      if separation(x, i, k, j) < 0.5 then return nil, few .. "and its runs overlap those before" end
      local _, _, pt = stats.welch_t(table.move(x, i, k - 1, 1, {}), table.move(x, k, j, 1, {}))
      if not pt or pt >= o.alpha then return nil, few .. ("and Welch's t over the run medians gives p = %.2g"):format(pt or 1) end
      local up = x[k] > x[i]
      local edge_before, edge_after = up and -math.huge or math.huge, up and math.huge or -math.huge
      for a = i, j do
        local lo, hi = stats.median_ci(points[idx[a]].samples or {})
        if not lo then return nil, few .. "and its runs kept too few samples (6 or more each) to be told apart by them" end
        if a < k then edge_before = up and math.max(edge_before, hi) or math.min(edge_before, lo)
        else edge_after = up and math.min(edge_after, lo) or math.max(edge_after, hi) end
      end
      if (up and edge_before >= edge_after) or (not up and edge_before <= edge_after) then
        return nil, few .. "and the 95% CIs of its runs' medians overlap those before"
      end
    elseif j - k + 1 <= 3 then
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

  local unjudged -- why a candidate could not be judged (its runs kept too few samples)
  local function search(lo, hi)
    local cands = candidates(x, lo, hi, o)
    for t = 1, math.min(o.tries, #cands) do
      local c = cands[t]
      local change, why = verify(c.i, c.k, c.j, c.small)
      if why then unjudged = unjudged or { k = c.k, why = why, eff = x[c.k] / median(x, c.i, c.k - 1) - 1 } end
      -- the permutation test cannot reach alpha over a few runs: the small-n path stands on its samples
      if change and (c.small or permutation_p(x, lo, hi, c.score, o) < o.alpha) then
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
  local verdict = M.verdict(x, found, unjudged, o, #points - #x)
  for n, c in ipairs(found) do
    local next_k = found[n + 1] and found[n + 1].k or #x + 1
    c.runs_after = next_k - c.k
    c.index = idx[c.k]
    c.k = nil
  end
  return found, verdict
end

-- What the detector could tell of the clean run medians x (found: the changes, at k): {state = "changes" |
-- "no change" | "undecided", why, need (what would decide)}. Undecided: too few runs for a change to have
-- min_runs on each side; the last runs (fewer than min_runs) moved by min_effect or more from those before
-- them (a change may be starting: runs to come decide); a candidate whose runs kept too few samples.
function M.verdict(x, found, unjudged, o, dirty)
  local n, m = #x, o.min_runs
  local left = dirty > 0 and (" (%d dirty left out)"):format(dirty) or ""
  if n < 2 * m then
    return { state = "undecided", why = ("%d clean run(s)%s"):format(n, left),
      need = ("need >=%d runs on each side of a change: %d more run(s)"):format(m, 2 * m - n) }
  end
  if unjudged and #found == 0 then
    return { state = "undecided", why = ("a step of %+.1f%% at clean run %d: %s"):format(unjudged.eff * 100, unjudged.k, unjudged.why),
      need = ("need >=%d runs before it (the full test), or runs whose samples tell them apart"):format(o.min_before) }
  end
  -- the last segment's tail: its last t < min_runs runs against up to `window` runs before them
  local start = found[#found] and found[#found].k or 1
  for t = m - 1, 1, -1 do
    local first = n - t + 1
    if first - start >= m then
      local base = median(x, math.max(start, first - o.window), first - 1)
      local side, moved = nil, base ~= 0
      for a = first, n do
        local d = x[a] / base - 1
        if math.abs(d) < o.min_effect or (side ~= nil and side ~= (d > 0)) then moved = false break end
        side = d > 0
      end
      if moved then
        return { state = "undecided", why = ("the last %d run(s) differ by %+.1f%% from the %d before them"):format(t,
          (median(x, first, n) / base - 1) * 100, first - math.max(start, first - o.window)),
          need = ("need >=%d runs after a change to decide: %d more run(s)"):format(m, m - t) }
      end
    end
  end
  if #found > 0 then return { state = "changes" } end
  return { state = "no change" }
end

return M
