#!/usr/bin/python3
"""The oracle of odp's output comparison and input generator (src/numcmp, docs/outputs.md), in numpy:
  numcmp_oracle.py compare REF GOT DTYPE [logits]   -> the metrics as JSON on stdout
  numcmp_oracle.py generate NBYTES DTYPE SEED INDEX OUT  -> the deterministic input bytes into OUT
Written from the documented definitions, not from odp's C: numpy masks for the classes of pairs, numpy's
float64 sums, argsort for the top-k, Python integers for SplitMix64."""
import json
import sys

import numpy as np

DTYPES = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "int8": "i1", "uint8": "u1", "int16": "<i2",
          "int32": "<i4", "int64": "<i8", "bool": "u1"}


def load(path, dtype):
    raw = open(path, "rb").read()
    if dtype == "bfloat16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    a = np.frombuffer(raw, DTYPES[dtype])
    if dtype == "bool":
        a = (a != 0).astype(np.uint8)
    return a


def compare(ref_path, got_path, dtype, logits):
    ra, ga = load(ref_path, dtype), load(got_path, dtype)
    r, g = ra.astype(np.float64), ga.astype(np.float64)
    both_finite = np.isfinite(r) & np.isfinite(g)
    same_inf = np.isinf(r) & (r == g)
    nonfinite = ~both_finite & ~same_inf
    if dtype.startswith("int") or dtype in ("uint8", "bool"):
        equal = int(np.sum(ra == ga))
    else:
        equal = int(np.sum(r == g))
    rf, gf = r[both_finite], g[both_finite]
    e = gf - rf
    ae = np.abs(e)
    n_f = int(both_finite.sum())
    out = {"n": int(r.size), "equal": equal, "finite": n_f, "nonfinite": int(nonfinite.sum()),
           "nan_ref": int(np.isnan(r).sum()), "nan_got": int(np.isnan(g).sum()),
           "inf_ref": int(np.isinf(r).sum()), "inf_got": int(np.isinf(g).sum())}
    out["max_abs_err"] = "inf" if out["nonfinite"] else (float(ae.max()) if n_f else 0.0)
    out["mean_abs_err"] = float(ae.mean()) if n_f else 0.0
    out["rmse"] = float(np.sqrt(np.mean(e * e))) if n_f else 0.0
    r2, g2 = float(np.dot(rf, rf)), float(np.dot(gf, gf))
    if r2 == 0 and g2 == 0:
        out["cosine"] = 1.0
    elif r2 == 0 or g2 == 0:
        out["cosine"] = 0.0
    else:
        out["cosine"] = float(np.dot(rf, gf) / np.sqrt(r2 * g2))
    s2 = float(np.dot(e, e))
    out["snr_db"] = "inf" if s2 == 0 else float(10 * np.log10(r2 / s2))
    edges = [0] + [10.0 ** k for k in range(-9, 4)]
    hist = [0] * 16
    hist[0] = int(np.sum(ae == 0)) + int(same_inf.sum())
    hist[1] = int(np.sum((ae > 0) & (ae < 1e-9)))
    for d in range(12):
        hist[2 + d] = int(np.sum((ae >= edges[1 + d]) & (ae < edges[2 + d])))
    hist[14] = int(np.sum(ae >= 1e3))
    hist[15] = out["nonfinite"]
    out["histogram"] = hist
    if logits:
        k = min(5, r.size)

        def top(v):
            idx = np.flatnonzero(~np.isnan(v))
            order = idx[np.argsort(-v[idx], kind="stable")]  # stable: ties keep the lower index first
            return [int(i) for i in order[:k]]
        tr, tg = top(r), top(g)
        out["top1"] = bool(tr and tg and tr[0] == tg[0])
        out["top5"] = len(set(tr) & set(tg)) / k
        out["topk_ref"], out["topk_got"] = tr, tg
    return out


MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def generate(nbytes, dtype, seed, index):
    size = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2,
            "int32": 4, "int64": 8, "bool": 1}[dtype]
    s = (seed + (index + 1) * 0x632BE59BD9B4E019) & MASK
    xs = []
    for _ in range(nbytes // size):
        s, x = splitmix64(s)
        xs.append(x)
    x = np.array(xs, dtype=np.uint64)
    if dtype == "float32":
        return ((x >> np.uint64(40)).astype(np.float64) * 2.0 ** -23 - 1).astype("<f4").tobytes()
    if dtype == "float64":
        return ((x >> np.uint64(11)).astype(np.float64) * 2.0 ** -52 - 1).astype("<f8").tobytes()
    if dtype == "float16":
        return ((x >> np.uint64(53)).astype(np.float64) * 2.0 ** -10 - 1).astype("<f2").tobytes()
    if dtype == "bfloat16":
        f = ((x >> np.uint64(56)).astype(np.float64) * 2.0 ** -7 - 1).astype("<f4")
        return (f.view(np.uint32) >> 16).astype("<u2").tobytes()
    if dtype in ("int8", "uint8"):
        return (x >> np.uint64(56)).astype(np.uint8).tobytes()
    if dtype == "bool":
        return (x >> np.uint64(63)).astype(np.uint8).tobytes()
    return ((x >> np.uint64(32)) % np.uint64(100)).astype(DTYPES[dtype]).tobytes()


if __name__ == "__main__":
    if sys.argv[1] == "compare":
        print(json.dumps(compare(sys.argv[2], sys.argv[3], sys.argv[4], len(sys.argv) > 5)))
    else:
        open(sys.argv[6], "wb").write(generate(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
