--- Descriptive statistics over latency samples, defined so the numbers agree with numpy (and so with
-- ExecuTorch's Inspector, which uses numpy):
--   mean            sum / n
--   std             sample standard deviation (ddof = 1, numpy.std(x, ddof=1)); 0 for n = 1
--   percentile(p)   numpy.percentile(x, p) with its default method "linear": h = (n - 1) * p / 100,
--                   x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]) over sorted x,
--                   evaluated the way numpy's _lerp does (from the upper neighbour when the fraction >= 0.5)
--   trimmed_mean    scipy.stats.trim_mean(x, frac): drop floor(frac * n) samples from each end
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

return M
