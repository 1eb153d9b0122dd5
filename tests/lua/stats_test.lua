local T = require("t")
local stats = require("odp.core.stats")

-- Expected values computed with numpy 1.24.2 (Debian python3-numpy): mean, std(ddof=1), then
-- np.percentile at 0, 10, 25, 50, 90, 99, 100, 33.3; trimmed means as scipy.stats.trim_mean defines them.
local CASES = {
  rpi = { x = { 0.176204, 0.001434, 0.000861, 0.000791, 0.000781, 0.017643, 0.000822, 0.000802, 0.000812, 0.000782 },
    want = { 0.0200932, 0.05510432658714034, 0.000781, 0.0007819000000000001, 0.00079375, 0.000817,
      0.03349909999999995, 0.16193351000000003, 0.176204, 0.000801967 } },
  two = { x = { 3.0, 1.0 }, want = { 2.0, 1.4142135623730951, 1.0, 1.2, 1.5, 2.0, 2.8, 2.98, 3.0, 1.666 } },
  one = { x = { 42.645 }, want = { 42.645, 0.0, 42.645, 42.645, 42.645, 42.645, 42.645, 42.645, 42.645, 42.645 } },
  ints = { x = { 5, 1, 4, 2, 3, 9, 7, 6, 8, 10, 100 },
    want = { 14.090909090909092, 28.637229424141385, 1.0, 2.0, 3.5, 6.0, 10.0, 91.00000000000003, 100.0, 4.33 } },
  lat = { x = { 42.1, 43.7, 41.9, 45.2, 42.8, 44.0, 43.3, 42.2, 47.9, 42.6, 43.1, 42.9, 41.5 },
    want = { 43.323076923076925, 1.6882702420692044, 41.5, 41.94, 42.2, 42.9, 44.96, 47.57599999999999, 47.9,
      42.5984 } },
}
local PS = { 0, 10, 25, 50, 90, 99, 100, 33.3 }

for name, c in pairs(CASES) do
  T.test("numpy agreement: " .. name, function()
    T.near(stats.mean(c.x), c.want[1], 1e-14, "mean")
    T.near(stats.std(c.x), c.want[2], 1e-13, "std")
    for i, p in ipairs(PS) do
      -- exact to the last bit: same formula, same order of operations as numpy's _lerp
      T.eq(stats.percentile(c.x, p), c.want[2 + i], ("percentile %g"):format(p))
    end
    local s = stats.summary(c.x)
    T.eq(s.n, #c.x)
    T.near(s.mean, c.want[1], 1e-14)
    T.near(s.std, c.want[2], 1e-13)
    T.eq(s.p10, c.want[4])
    T.eq(s.p50, c.want[6])
    T.eq(s.p90, c.want[7])
    T.eq(s.p99, c.want[8])
    T.eq(s.min, c.want[3])
    T.eq(s.max, c.want[9])
  end)
end

T.test("n = 0: only n", function()
  T.eq(stats.summary({}), { n = 0 })
  T.eq(stats.percentile({}, 50), nil)
  T.eq(stats.mean({}), nil)
  T.eq(stats.std({}), nil)
  T.eq(stats.trimmed_mean({}, 0.1), nil)
end)

T.test("n = 1 and n = 2", function()
  T.eq(stats.summary({ 5 }), { n = 1, mean = 5.0, min = 5.0, max = 5.0, std = 0.0, p10 = 5.0, p50 = 5.0, p90 = 5.0,
    p99 = 5.0 })
  T.eq(stats.summary({ 2, 4 }), { n = 2, mean = 3.0, min = 2.0, max = 4.0, std = math.sqrt(2), p10 = 2.2, p50 = 3.0,
    p90 = 3.8, p99 = 3.98 })
end)

T.test("trimmed mean like scipy.stats.trim_mean", function()
  T.near(stats.trimmed_mean(CASES.lat.x, 0.1), 43.07272727272727, 1e-14)
  T.eq(stats.trimmed_mean(CASES.ints.x, 0.2), 6.0)
  T.near(stats.trimmed_mean(CASES.rpi.x, 0.1), 0.002993375, 1e-14)
  T.eq(stats.trimmed_mean({ 1, 2, 3 }, 0), 2.0)
  T.eq(stats.trimmed_mean({ 1, 2, 100 }, 0.34), 2.0, "floor(0.34 * 3) = 1 from each end")
  T.raises(function() stats.trimmed_mean({ 1 }, 0.5) end, "fraction")
  T.raises(function() stats.trimmed_mean({ 1 }, -0.1) end, "fraction")
end)

T.test("input is not modified; sorted and unsorted agree", function()
  local x = { 3, 1, 2 }
  T.eq(stats.percentile(x, 50), 2.0)
  T.eq(x, { 3, 1, 2 })
  T.eq(stats.percentile({ 1, 2, 3 }, 50), 2.0)
  stats.summary(x)
  T.eq(x, { 3, 1, 2 })
end)

T.test("misuse raises", function()
  T.raises(function() stats.summary({ 1, "2" }) end, "sample 2")
  T.raises(function() stats.summary({ 1, 0 / 0 }) end, "sample 2")
  T.raises(function() stats.percentile({ 1 }, 101) end, "%[0, 100%]")
  T.raises(function() stats.percentile({ 1 }, 0 / 0) end, "%[0, 100%]")
  T.raises(function() stats.mean("x") end, "table expected")
end)

-- SciPy (Debian python3-scipy) as the oracle of the confidence and test statistics, on fixed data: the
-- data go to python as JSON, the answers come back as JSON.
local json = require("odp.core.json")
local proc = require("odp.proc")
local PYTHON = "/usr/bin/python3"
local function scipy(code, data)
  local r = assert(proc.run { PYTHON, "-c", "import json, sys\nimport numpy as np\nimport scipy.stats as st\n"
    .. "d = json.load(sys.stdin)\n" .. code, stdin = json.encode(data), timeout = 120 })
  assert(r.status == 0, r.stderr)
  return assert(json.decode(r.stdout))
end
-- SciPy comes with the test packages (vendor/packages.txt): its absence is a failure, not a skip
local have_scipy = (function()
  local r = proc.run { PYTHON, "-c", "import scipy.stats", timeout = 60 }
  return r and r.status == 0
end)()
local function with_scipy(name, fn)
  T.test(name, function()
    T.ok(have_scipy, "SciPy (Debian python3-scipy, installed by tests/run.sh) importable by " .. PYTHON)
    fn()
  end)
end

-- fixed data: a skewed latency-like sample (log-normal), a shifted copy, ties, small n
local function lognormal(n, mu, seed)
  math.randomseed(seed)
  local out = {}
  for i = 1, n do
    local u1, u2 = math.random(1000000) / 1000001, math.random(1000000) / 1000001
    out[i] = math.floor(math.exp(mu + 0.1 * math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)) * 1000) / 1000
  end
  return out
end
local A, B, C = lognormal(200, 1.0, 1), lognormal(150, 1.03, 2), lognormal(40, 1.0, 3)
local TIES = { 1, 1, 2, 2, 2, 3, 3, 4, 5, 5, 5, 5, 6 }

with_scipy("median CI: the binomial order-statistic ranks and interval agree with scipy.stats.binom", function()
  local ns = { 6, 7, 8, 10, 13, 20, 40, 100, 150, 200, 1000, 12345 }
  local want = scipy([[
out = []
for n in d["ns"]:
    ks = np.arange(0, n // 2 + 1)
    ok = ks[st.binom.cdf(ks, n, 0.5) <= 0.025]
    out.append(int(ok.max()) + 1 if len(ok) else None)
x = np.sort(np.array(d["a"]))
r = out[d["ns"].index(200)]
print(json.dumps({"ranks": out, "lo": x[r - 1], "hi": x[200 - r]}))
]], { ns = ns, a = A })
  for i, n in ipairs(ns) do
    local lo, hi = stats.median_ci_ranks(n)
    T.eq(lo, want.ranks[i], "lower rank for n = " .. n)
    T.eq(hi, n + 1 - want.ranks[i], "upper rank for n = " .. n)
  end
  T.eq(stats.median_ci_ranks(5), nil, "n = 5 is too few for 95%")
  local lo, hi = stats.median_ci(A)
  T.eq(lo, want.lo); T.eq(hi, want.hi)
  T.ok(lo <= stats.percentile(A, 50) and stats.percentile(A, 50) <= hi, "the median is inside")
end)

with_scipy("Mann-Whitney U and p agree with scipy.stats.mannwhitneyu(method='asymptotic')", function()
  local pairs_ = { { A, B }, { A, C }, { TIES, { 2, 3, 3, 4, 6, 6, 7, 8 } }, { { 1, 2, 3 }, { 4, 5, 6 } }, { C, C } }
  local want = scipy([[
out = []
for x, y in d:
    r = st.mannwhitneyu(x, y, method="asymptotic")
    out.append([float(r.statistic), float(r.pvalue)])
print(json.dumps(out))
]], pairs_)
  for i, pr in ipairs(pairs_) do
    local u, p = stats.mann_whitney(pr[1], pr[2])
    T.eq(u, want[i][1], "U " .. i)
    T.near(p, want[i][2], math.max(1e-6 * want[i][2], 1e-12), "p " .. i)
  end
  T.eq(stats.mann_whitney({}, { 1 }), nil)
end)

with_scipy("bootstrap CI of the median ratio agrees with scipy.stats.bootstrap(method='percentile') within Monte Carlo error", function()
  local want = scipy([[
def ratio(x, y, axis=-1):
    return np.median(y, axis=axis) / np.median(x, axis=axis)
r = st.bootstrap((d["a"], d["b"]), ratio, n_resamples=20000, method="percentile", vectorized=True,
                 random_state=np.random.default_rng(7))
print(json.dumps([float(np.median(d["b"]) / np.median(d["a"])), r.confidence_interval.low, r.confidence_interval.high]))
]], { a = A, b = B })
  local ratio, lo, hi = stats.bootstrap_ratio(A, B, { resamples = 5000 })
  T.near(ratio, want[1], 1e-12, "ratio")
  -- two independent resamplings: the bounds agree to a small fraction of the interval's width
  local width = want[3] - want[2]
  T.near(lo, want[2], 0.1 * width, "lo"); T.near(hi, want[3], 0.1 * width, "hi")
  T.eq({ stats.bootstrap_ratio(A, B, { resamples = 500 }) }, { stats.bootstrap_ratio(A, B, { resamples = 500 }) },
    "fixed seed: the same inputs give the same interval")
  T.ok(select(2, stats.bootstrap_ratio(A, B, { resamples = 500, seed = 2 })) ~= select(2, stats.bootstrap_ratio(A, B, { resamples = 500 })),
    "another seed, another resampling")
end)

with_scipy("Welch's t, df and p agree with scipy.stats.ttest_ind(equal_var=False); log Gamma with scipy.special.gammaln", function()
  local pairs_ = { { A, B }, { A, C }, { { 1, 2, 3, 4 }, { 2, 3, 5, 7, 9 } }, { { 10.1, 10.0, 9.9, 10.05 }, { 12.0, 12.1, 11.9, 12.02 } },
    { { 1, 1.1 }, { 1.05, 1.2, 0.9 } }, { { 5, 5.0001, 5.0002 }, { 5.0004, 5.00041, 5.00039 } }, { C, C } }
  local want = scipy([=[
from scipy.special import gammaln
out = []
for x, y in d["pairs"]:
    r = st.ttest_ind(x, y, equal_var=False)
    vx, vy = np.var(x, ddof=1) / len(x), np.var(y, ddof=1) / len(y)
    out.append([float(r.statistic), float((vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))), float(r.pvalue)])
print(json.dumps({"t": out, "lg": [float(gammaln(v)) for v in d["g"]]}))
]=], { pairs = pairs_, g = { 0.5, 1, 1.5, 2.5, 7, 33.3, 1000 } })
  for i, pr in ipairs(pairs_) do
    local t, df, p = stats.welch_t(pr[1], pr[2])
    T.near(t, want.t[i][1], 1e-9 * math.abs(want.t[i][1]) + 1e-12, "t " .. i)
    T.near(df, want.t[i][2], 1e-9 * want.t[i][2], "df " .. i)
    T.near(p, want.t[i][3], 1e-9 * want.t[i][3] + 1e-15, "p " .. i)
  end
  for i, v in ipairs { 0.5, 1, 1.5, 2.5, 7, 33.3, 1000 } do T.near(stats.log_gamma(v), want.lg[i], 1e-12 * math.max(1, math.abs(want.lg[i]))) end
  -- no spread on either side (SciPy's answer is nan there): the means decide
  T.eq({ stats.welch_t({ 10, 10, 10 }, { 12, 12, 12 }) }, { -math.huge, 4.0, 0.0 })
  T.eq(select(3, stats.welch_t({ 10, 10 }, { 10, 10 })), 1.0)
  T.eq(stats.welch_t({ 1 }, { 1, 2 }), nil)
end)

T.test("cv is std / mean", function()
  T.near(stats.cv({ 1, 2, 3 }), 1 / 2, 1e-15)
  T.eq(stats.cv({}), nil)
end)

T.done()
