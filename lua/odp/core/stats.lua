--- Descriptive statistics over latency samples, defined so the numbers agree with numpy (and so with
-- ExecuTorch's Inspector, which uses numpy):
--   mean            sum / n
--   std             sample standard deviation (ddof = 1, numpy.std(x, ddof=1)); 0 for n = 1
--   percentile(p)   numpy.percentile(x, p) with its default method "linear": h = (n - 1) * p / 100,
--                   x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]) over sorted x,
--                   evaluated the way numpy's _lerp does (from the upper neighbour when the fraction >= 0.5)
--   trimmed_mean    scipy.stats.trim_mean(x, frac): drop floor(frac * n) samples from each end
--   median_ci       distribution-free confidence interval of the median from binomial order statistics
--   mann_whitney    scipy.stats.mannwhitneyu(x, y, method="asymptotic"): U of x, two-sided p with tie and
--                   continuity correction
--   welch_t         scipy.stats.ttest_ind(x, y, equal_var=False): Welch's t, its degrees of freedom and the
--                   two-sided p (Student's t through the regularized incomplete beta function)
--   bootstrap_ratio percentile bootstrap CI of median(y) / median(x), seeded (same inputs, same interval)
--   bootstrap_ratio_groups  the same over samples grouped by process: a two-level (cluster) bootstrap
-- Samples are numbers (integers or floats); a non-number or NaN raises (misuse), an empty list is fine.
local M = {}

local floor = math.floor

local function check(samples, fname)
  if type(samples) ~= "table" then
    error(("bad argument #1 to '%s' (table expected, got %s)"):format(fname, type(samples)), 3)
  end
  for i = 1, #samples do
    local v = samples[i]
    if type(v) ~= "number" or v ~= v then
      error(("bad argument #1 to '%s' (sample %d is %s, a number expected)"):format(fname, i, tostring(v)), 3)
    end
  end
end

local function sorted_copy(samples)
  local s = table.move(samples, 1, #samples, 1, {})
  table.sort(s)
  return s
end

-- numpy's _lerp: a + (b - a) * t, but b - (b - a) * (1 - t) when t >= 0.5 (exact at the ends).
local function lerp(a, b, t)
  local d = b - a
  if t >= 0.5 then return b - d * (1 - t) end
  return a + d * t
end

local function pct_sorted(s, p)
  local n = #s
  if n == 0 then return nil end
  local h = (n - 1) * (p / 100)
  local lo = floor(h)
  local t = h - lo
  local a = s[lo + 1]
  if lo + 1 >= n then return a + 0.0 end
  return lerp(a, s[lo + 2], t) + 0.0
end

--- The p-th percentile (0 <= p <= 100) with numpy's default linear interpolation; nil for no samples.
--- The input may be sorted or not; it is not modified.
---@param samples number[]
---@param p number
---@return number|nil
function M.percentile(samples, p)
  check(samples, "percentile")
  if type(p) ~= "number" or p ~= p or p < 0 or p > 100 then
    error("bad argument #2 to 'percentile' (a number in [0, 100] expected, got " .. tostring(p) .. ")", 2)
  end
  local sorted = true
  for i = 2, #samples do if samples[i] < samples[i - 1] then sorted = false; break end end
  return pct_sorted(sorted and samples or sorted_copy(samples), p)
end

--- Arithmetic mean; nil for no samples.
---@param samples number[]
---@return number|nil
function M.mean(samples)
  check(samples, "mean")
  local n = #samples
  if n == 0 then return nil end
  local sum = 0.0
  for i = 1, n do sum = sum + samples[i] end
  return sum / n
end

--- Sample standard deviation (n - 1 in the denominator, two-pass); 0 for one sample, nil for none.
---@param samples number[]
---@return number|nil
function M.std(samples)
  check(samples, "std")
  local n = #samples
  if n == 0 then return nil end
  if n == 1 then return 0.0 end
  local mean = M.mean(samples)
  local ss = 0.0
  for i = 1, n do local d = samples[i] - mean; ss = ss + d * d end
  return math.sqrt(ss / (n - 1))
end

--- Mean after dropping floor(frac * n) samples from each end of the sorted samples (scipy's trim_mean);
--- 0 <= frac < 0.5; nil for no samples.
---@param samples number[]
---@param frac number
---@return number|nil
function M.trimmed_mean(samples, frac)
  check(samples, "trimmed_mean")
  if type(frac) ~= "number" or not (frac >= 0 and frac < 0.5) then
    error("bad argument #2 to 'trimmed_mean' (a fraction in [0, 0.5) expected, got " .. tostring(frac) .. ")", 2)
  end
  local n = #samples
  if n == 0 then return nil end
  local s = sorted_copy(samples)
  local cut = floor(frac * n)
  local sum = 0.0
  for i = cut + 1, n - cut do sum = sum + s[i] end
  return sum / (n - 2 * cut)
end

---@class odp.stats.Summary
---@field n integer
---@field mean number?
---@field min number?
---@field max number?
---@field std number?  sample std (ddof = 1); 0 for n = 1
---@field p10 number?
---@field p50 number?
---@field p90 number?
---@field p99 number?

--- n, mean, min, max, std and the 10/50/90/99th percentiles. For n = 0 only n (= 0) is set.
---@param samples number[]
---@return odp.stats.Summary
function M.summary(samples)
  check(samples, "summary")
  local n = #samples
  if n == 0 then return { n = 0 } end
  local s = sorted_copy(samples)
  return {
    n = n,
    mean = M.mean(samples),
    min = s[1] + 0.0,
    max = s[n] + 0.0,
    std = M.std(samples),
    p10 = pct_sorted(s, 10),
    p50 = pct_sorted(s, 50),
    p90 = pct_sorted(s, 90),
    p99 = pct_sorted(s, 99),
  }
end

--- Coefficient of variation: sample std / mean (nil for no samples or a zero mean).
---@param samples number[]
---@return number|nil
function M.cv(samples)
  check(samples, "cv")
  local mean = M.mean(samples)
  if not mean or mean == 0 then return nil end
  return M.std(samples) / mean
end

-- log of the binomial coefficients C(n, k) for k = 0.. as needed, added up term by term
local log = math.log

--- Ranks (1-based, in sorted order) of the distribution-free confidence interval of the median:
--- the largest r with P(B <= r - 1) <= (1 - level) / 2 for B ~ Binomial(n, 1/2), and n + 1 - r. The interval
--- [x(r), x(n+1-r)] covers the median with probability >= level whatever the distribution. nil when n is
--- too small for any such interval (n < 6 at 95%).
---@param n integer
---@param level number? default 0.95
---@return integer|nil lo_rank
---@return integer|nil hi_rank
function M.median_ci_ranks(n, level)
  level = level or 0.95
  local alpha2 = (1 - level) / 2
  local logc, half = 0.0, n * log(0.5) -- log C(n, 0), log 0.5^n
  local cdf, r = 0.0, nil
  for k = 0, n // 2 do
    cdf = cdf + math.exp(logc + half)
    if cdf > alpha2 * (1 + 1e-12) then break end
    r = k + 1 -- P(B <= k) <= alpha/2: x(k+1) may be the lower bound
    logc = logc + log(n - k) - log(k + 1)
  end
  if not r then return nil end
  return r, n + 1 - r
end

--- The level (default 95%) confidence interval of the median: lo, hi (sample values), or nil when there are
--- too few samples (see median_ci_ranks).
---@param samples number[]
---@param level number?
---@return number|nil lo
---@return number|nil hi
function M.median_ci(samples, level)
  check(samples, "median_ci")
  local lo, hi = M.median_ci_ranks(#samples, level)
  if not lo then return nil end
  local s = sorted_copy(samples)
  return s[lo] + 0.0, s[hi] + 0.0
end

-- erfc(x), Numerical Recipes' erfcc (Chebyshev fit, relative error < 1.2e-7 everywhere)
local function erfc(x)
  local z = math.abs(x)
  local t = 1 / (1 + 0.5 * z)
  local r = t * math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
    t * (-0.82215223 + t * 0.17087277)))))))))
  return x >= 0 and r or 2 - r
end

--- Mann-Whitney U test of x against y: U of x (ties counted 1/2) and the two-sided p-value of the normal
--- approximation with tie correction and continuity correction (scipy.stats.mannwhitneyu(x, y,
--- method="asymptotic")). nil when either side is empty.
---@param x number[]
---@param y number[]
---@return number|nil u
---@return number|nil p
function M.mann_whitney(x, y)
  check(x, "mann_whitney")
  check(y, "mann_whitney")
  local n1, n2 = #x, #y
  if n1 == 0 or n2 == 0 then return nil end
  local all = {}
  for i = 1, n1 do all[i] = { x[i], 1 } end
  for i = 1, n2 do all[n1 + i] = { y[i], 2 } end
  table.sort(all, function(a, b) return a[1] < b[1] end)
  local n = n1 + n2
  local r1, ties, i = 0.0, 0.0, 1
  while i <= n do
    local j = i
    while j < n and all[j + 1][1] == all[i][1] do j = j + 1 end
    local rank = (i + j) / 2 -- the mean rank of a run of ties
    for k = i, j do if all[k][2] == 1 then r1 = r1 + rank end end
    local t = j - i + 1
    ties = ties + (t * t * t - t)
    i = j + 1
  end
  local u1 = r1 - n1 * (n1 + 1) / 2
  local mu = n1 * n2 / 2
  local sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
  if sigma == 0 then return u1, 1.0 end
  local u = math.max(u1, n1 * n2 - u1)
  local z = (u - mu - 0.5) / sigma
  return u1, math.min(1.0, erfc(z / math.sqrt(2)))
end

-- The regularized incomplete beta function I_x(a, b) (Numerical Recipes' betacf: Lentz's continued fraction,
-- relative error below 1e-13 here).
local function incomplete_beta(x, a, b)
  if x <= 0 then return 0.0 end
  if x >= 1 then return 1.0 end
  local lbeta = M.log_gamma(a + b) - M.log_gamma(a) - M.log_gamma(b)
  local front = math.exp(lbeta + a * log(x) + b * log(1 - x))
  local function cf(xx, aa, bb)
    local tiny = 1e-300
    local c, d = 1.0, 1 - (aa + bb) * xx / (aa + 1)
    if math.abs(d) < tiny then d = tiny end
    d = 1 / d
    local h = d
    for m = 1, 300 do
      local m2 = 2 * m
      local num = m * (bb - m) * xx / ((aa + m2 - 1) * (aa + m2))
      d = 1 + num * d; if math.abs(d) < tiny then d = tiny end
      c = 1 + num / c; if math.abs(c) < tiny then c = tiny end
      d = 1 / d; h = h * d * c
      num = -(aa + m) * (aa + bb + m) * xx / ((aa + m2) * (aa + m2 + 1))
      d = 1 + num * d; if math.abs(d) < tiny then d = tiny end
      c = 1 + num / c; if math.abs(c) < tiny then c = tiny end
      d = 1 / d
      local del = d * c
      h = h * del
      if math.abs(del - 1) < 1e-15 then break end
    end
    return h
  end
  if x < (a + 1) / (a + b + 2) then return front * cf(x, a, b) / a end
  return 1 - front * cf(1 - x, b, a) / b
end

--- log Gamma(x) for x > 0 (Lanczos, g = 7, n = 9: relative error below 1e-15).
---@param x number
---@return number
function M.log_gamma(x)
  local c = { 0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
    -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7 }
  if x < 0.5 then return log(math.pi / math.abs(math.sin(math.pi * x))) - M.log_gamma(1 - x) end
  x = x - 1
  local a = c[1]
  local t = x + 7.5
  for i = 1, 8 do a = a + c[i + 1] / (x + i) end
  return 0.5 * log(2 * math.pi) + (x + 0.5) * log(t) - t + log(a)
end

--- Welch's two-sample t-test of x against y (scipy.stats.ttest_ind(x, y, equal_var=False)): t (of mean(x) -
--- mean(y)), the Welch-Satterthwaite degrees of freedom, the two-sided p. Both sides without spread: t is
--- +-inf and p 0 when the means differ, p 1 when they do not. nil when a side has fewer than 2 values.
---@param x number[]
---@param y number[]
---@return number|nil t
---@return number|nil df
---@return number|nil p
function M.welch_t(x, y)
  check(x, "welch_t")
  check(y, "welch_t")
  local n1, n2 = #x, #y
  if n1 < 2 or n2 < 2 then return nil end
  local m1, m2 = M.mean(x), M.mean(y)
  local v1, v2 = M.std(x) ^ 2 / n1, M.std(y) ^ 2 / n2
  local se2 = v1 + v2
  if se2 == 0 then
    if m1 == m2 then return 0.0, n1 + n2 - 2.0, 1.0 end
    return (m1 > m2 and 1 or -1) * math.huge, n1 + n2 - 2.0, 0.0
  end
  local t = (m1 - m2) / math.sqrt(se2)
  local df = se2 * se2 / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1))
  return t, df, math.min(1.0, incomplete_beta(df / (df + t * t), df / 2, 0.5))
end

-- The median of a resample (with replacement) of sorted s, without sorting it: the resample's k-th
-- smallest value is s[the k-th smallest drawn index], found by counting the draws per index.
local counts = {}
local function resampled_median(s)
  local n, random = #s, math.random
  for i = 1, n do counts[i] = 0 end
  for _ = 1, n do
    local j = random(n)
    counts[j] = counts[j] + 1
  end
  local k, seen, i = (n + 1) // 2, 0, 0
  repeat i = i + 1; seen = seen + counts[i] until seen >= k
  if n % 2 == 1 then return s[i] + 0.0 end
  local lo = s[i]
  if seen == k then -- the next drawn index holds the (k+1)-th value
    repeat i = i + 1 until counts[i] > 0
  end
  return lerp(lo, s[i], 0.5) + 0.0
end

-- The percentile interval of draw_y() / draw_x() over opts.resamples (2000) draws at opts.level (0.95).
-- Lua's own generator (xoshiro256**), seeded with opts.seed (1): the same on every Lua 5.4; re-randomized
-- when done. -> lo, hi
local function ratio_interval(draw_x, draw_y, opts)
  local reps, level = opts.resamples or 2000, opts.level or 0.95
  math.randomseed(opts.seed or 1)
  local ratios = {}
  for r = 1, reps do
    local a = draw_x()
    ratios[r] = a ~= 0 and draw_y() / a or math.huge
  end
  math.randomseed()
  table.sort(ratios)
  local tail = (1 - level) / 2 * 100
  return pct_sorted(ratios, tail), pct_sorted(ratios, 100 - tail)
end

--- Percentile bootstrap of median(y) / median(x): `resamples` (default 2000) resamplings of each side with
--- replacement, seeded (default 1): the same inputs give the same interval. -> ratio, lo, hi at `level`
--- (default 0.95), or nil when a side is empty or has a zero median.
---@param x number[]
---@param y number[]
---@param opts {resamples: integer?, level: number?, seed: integer?}?
---@return number|nil ratio
---@return number|nil lo
---@return number|nil hi
function M.bootstrap_ratio(x, y, opts)
  check(x, "bootstrap_ratio")
  check(y, "bootstrap_ratio")
  opts = opts or {}
  local n1, n2 = #x, #y
  if n1 == 0 or n2 == 0 then return nil end
  local mx, my = M.percentile(x, 50), M.percentile(y, 50)
  if mx == 0 then return nil end
  local sx, sy = sorted_copy(x), sorted_copy(y)
  return my / mx, ratio_interval(function() return resampled_median(sx) end,
    function() return resampled_median(sy) end, opts)
end

-- The median of a two-level resample of groups: #groups groups drawn with replacement, then each drawn
-- group's samples drawn with replacement; buf is reused between calls.
local function resampled_groups_median(groups, buf)
  local random, n = math.random, 0
  for _ = 1, #groups do
    local g = groups[random(#groups)]
    local m = #g
    for _ = 1, m do n = n + 1; buf[n] = g[random(m)] end
  end
  for i = #buf, n + 1, -1 do buf[i] = nil end
  table.sort(buf)
  return pct_sorted(buf, 50)
end

--- Hierarchical (cluster) bootstrap of median(all of y) / median(all of x) for samples grouped by process
--- (xg, yg: lists of non-empty sample lists): each resampling draws processes with replacement, then the
--- iterations of each drawn process with replacement, so the interval also covers how much processes
--- differ from each other, not only the noise within one. Seeded like bootstrap_ratio. With one group a
--- side it is the plain bootstrap of that side. -> ratio, lo, hi, or nil when a side is empty or has a
--- zero median.
---@param xg number[][]
---@param yg number[][]
---@param opts {resamples: integer?, level: number?, seed: integer?}?
---@return number|nil ratio
---@return number|nil lo
---@return number|nil hi
function M.bootstrap_ratio_groups(xg, yg, opts)
  for _, groups in ipairs { xg, yg } do
    if type(groups) ~= "table" then
      error(("bad argument to 'bootstrap_ratio_groups' (table expected, got %s)"):format(type(groups)), 2)
    end
  end
  opts = opts or {}
  local x, y = {}, {}
  for _, g in ipairs(xg) do check(g, "bootstrap_ratio_groups"); table.move(g, 1, #g, #x + 1, x) end
  for _, g in ipairs(yg) do check(g, "bootstrap_ratio_groups"); table.move(g, 1, #g, #y + 1, y) end
  if #x == 0 or #y == 0 then return nil end
  local mx, my = M.percentile(x, 50), M.percentile(y, 50)
  if mx == 0 then return nil end
  local function nonempty(groups)
    local out = {}
    for _, g in ipairs(groups) do if #g > 0 then out[#out + 1] = g end end
    return out
  end
  xg, yg = nonempty(xg), nonempty(yg)
  local bx, by = {}, {}
  return my / mx, ratio_interval(function() return resampled_groups_median(xg, bx) end,
    function() return resampled_groups_median(yg, by) end, opts)
end

return M
