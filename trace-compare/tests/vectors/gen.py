#!/usr/bin/env python3
"""Reference vectors for trace-compare's statistics, computed by SciPy and numpy.

Regenerate (after `scripts/install-test-tools.sh`, which installs SciPy into
.tools/py) from the repository root with

    .tools/py/bin/python trace-compare/tests/vectors/gen.py > trace-compare/tests/vectors/reference.json

The output is deterministic (fixed seeds); commit it. The tests in
trace-compare/tests/it/reference.rs read it and require agreement to 1e-12.

- `mwu`: scipy.stats.mannwhitneyu(x, y, alternative="two-sided", method="auto");
  `method` is the distribution SciPy's auto rule picks (exact when one side has
  at most 8 values and there are no ties).
- `quantiles`: numpy.percentile(x, [25, 50, 75]) (the default, linear).
- `signflip`: the two-sided sign-flip p of the sum of `d` over all 2^n sign
  assignments, and the interval [M_(k), M_(N-k)] of the sorted means of the
  2^n - 1 non-empty subsets, k = floor(N alpha / (2 m)), both by brute force;
  the p is cross-checked against scipy.stats.permutation_test.
- `hyperfine_fixtures`: the wall times (ms) of cli/tests/fixtures/hyperfine's
  two exports, command by command: U, p, medians, quartiles, IQRs (regenerate
  this file whenever those fixtures are regenerated).
"""
import itertools
import json
import math
import os
import sys

import numpy as np
import scipy
from scipy import stats


def mwu_case(name, x, y):
    r = stats.mannwhitneyu(x, y, alternative="two-sided", method="auto")
    ties = len(set(x) | set(y)) < len(x) + len(y) or len(set(x)) < len(x) or len(set(y)) < len(y)
    method = "exact" if (len(x) <= 8 or len(y) <= 8) and not ties else "asymptotic"
    return {"name": name, "x": x, "y": y, "u1": float(r.statistic), "p": float(r.pvalue), "method": method}


def quantile_case(name, x):
    q1, med, q3 = np.percentile(np.array(x, dtype=float), [25, 50, 75])
    return {"name": name, "x": x, "q1": float(q1), "median": float(med), "q3": float(q3)}


def signflip_case(name, d, alpha, m):
    n = len(d)
    observed = 0.0
    for v in d:
        observed += v
    scale = sum(abs(v) for v in d)
    threshold = abs(observed) - 1e-12 * scale
    extreme = 0
    means = []
    for flips in itertools.product([False, True], repeat=n):
        s, sub, size = 0.0, 0.0, 0
        for v, f in zip(d, flips):
            if f:
                s -= v
                sub += v
                size += 1
            else:
                s += v
        if abs(s) >= threshold:
            extreme += 1
        if size:
            means.append(sub / size)
    total = 2**n
    p = extreme / total
    # The same p from SciPy's own permutation test (one sample: signs flipped).
    ref = stats.permutation_test(
        (np.array(d),), lambda a, axis: np.sum(a, axis=axis), permutation_type="samples",
        alternative="two-sided", n_resamples=np.inf, vectorized=True,
    ).pvalue
    assert abs(ref - p) <= 1e-12, (name, ref, p)
    k = math.floor(total * alpha / (2 * m))
    means.sort()
    interval = None if k == 0 else [means[k - 1], means[len(means) - k]]
    return {"name": name, "d": d, "alpha": alpha, "m": m, "p": p, "k": k, "interval": interval}


def hyperfine_cases():
    """U, p, medians and IQRs of the wall times (ms) of the committed hyperfine
    fixtures, command by command: what `cabin-trace compare --format json`
    must report for them."""
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = os.path.join(here, "..", "..", "..", "cli", "tests", "fixtures", "hyperfine")
    with open(os.path.join(fixtures, "base.json")) as f:
        base = json.load(f)["results"]
    with open(os.path.join(fixtures, "head.json")) as f:
        head = json.load(f)["results"]
    out = []
    for b, h in zip(base, head):
        x = [t * 1000.0 for t in b["times"]]
        y = [t * 1000.0 for t in h["times"]]
        case = mwu_case(b["command"], x, y)
        for side, v in (("base", x), ("head", y)):
            q1, med, q3 = np.percentile(np.array(v), [25, 50, 75])
            case[side] = {"median": float(med), "q1": float(q1), "q3": float(q3), "iqr": float(q3 - q1)}
        del case["x"], case["y"]
        out.append(case)
    return out


def main():
    rng = np.random.default_rng(20261201)
    mwu = [
        mwu_case("separated 5 v 5", [1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]),
        mwu_case("separated 4 v 4", [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]),
        mwu_case("one v one", [1.0], [2.0]),
        mwu_case("two v two", [1.0, 3.0], [2.0, 4.0]),
        mwu_case("identical 6 v 6", [7.5] * 6, [7.5] * 6),
        mwu_case("identical 10 v 12", [3.0] * 10, [3.0] * 12),
        mwu_case("ties 6 v 7", [1.0, 2.0, 2.0, 3.0, 5.0, 5.0], [2.0, 3.0, 4.0, 5.0, 6.0, 6.0, 7.0]),
        mwu_case("ties 20 v 20", [float(v) for v in rng.integers(0, 6, 20)],
                 [float(v) for v in rng.integers(1, 7, 20)]),
    ]
    for n1, n2 in [(8, 8), (8, 9), (9, 8), (9, 9), (3, 20), (7, 5), (12, 30), (40, 25)]:
        x = [float(v) for v in np.round(rng.normal(100.0, 5.0, n1), 6)]
        y = [float(v) for v in np.round(rng.normal(104.0, 5.0, n2), 6)]
        mwu.append(mwu_case(f"normal {n1} v {n2}", x, y))
    quantiles = [
        quantile_case("one", [4.0]),
        quantile_case("two", [1.0, 2.0]),
        quantile_case("five", [5.0, 1.0, 4.0, 2.0, 3.0]),
        quantile_case("ties", [2.0, 2.0, 2.0, 9.0]),
    ]
    for n in [6, 7, 9, 10, 33]:
        quantiles.append(quantile_case(f"normal {n}", [float(v) for v in rng.normal(50.0, 3.0, n)]))
    signflip = [
        signflip_case("six all positive", [0.1, 0.2, 0.15, 0.12, 0.3, 0.05], 0.05, 1),
        signflip_case("five all positive", [0.1, 0.2, 0.15, 0.12, 0.3], 0.05, 1),
        signflip_case("mixed 8", [0.02, -0.01, 0.03, 0.015, -0.005, 0.04, 0.01, 0.025], 0.05, 1),
        signflip_case("zeros 6", [0.0] * 6, 0.05, 1),
        signflip_case("equal magnitudes", [0.1, -0.1, 0.1, 0.1, -0.1, 0.1, 0.1], 0.05, 1),
    ]
    for n, m, alpha in [(10, 1, 0.05), (10, 3, 0.01), (12, 3, 0.05), (14, 18, 0.05)]:
        d = [float(v) for v in rng.normal(0.02, 0.03, n)]
        signflip.append(signflip_case(f"normal {n}, family {m} at {alpha}", d, alpha, m))
    json.dump({
        "generator": "trace-compare/tests/vectors/gen.py",
        "scipy": scipy.__version__,
        "numpy": np.__version__,
        "mwu": mwu,
        "quantiles": quantiles,
        "signflip": signflip,
        "hyperfine_fixtures": hyperfine_cases(),
    }, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
