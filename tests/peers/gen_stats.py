"""Generate tests/data/stats/scipy_reference.json: reference values for the
statistics section of rag_eval (paired t-test, randomization test, bootstrap
CI, Holm adjustment), computed with scipy / numpy / statsmodels.

Not run by the tests or CI (rag_eval is standard library only); run it by hand
in a scratch environment when the cases change:

    python3 -m venv /tmp/stats && /tmp/stats/bin/pip install scipy numpy statsmodels
    /tmp/stats/bin/python tests/peers/gen_stats.py

Deterministic: every random draw comes from a seeded numpy Generator.
"""

import json
import math
import pathlib
import sys

import numpy as np
import scipy
import scipy.stats
import statsmodels
from statsmodels.stats.multitest import multipletests

OUT = pathlib.Path(__file__).resolve().parents[1] / "data" / "stats" / "scipy_reference.json"
SEED = 20240601
EXACT_MAX_N = 20          # rag_eval's randomization_p is exact up to here
BOOTSTRAP_MIN_N = 60      # bootstrap references only for n >= this
BOOTSTRAP_RESAMPLES = 10000
PERMUTATION_MC_RESAMPLES = 20000


def mean_diff(x, y, axis=-1):
    """Statistic of the paired tests: the mean of the per-query differences."""
    return np.mean(x - y, axis=axis)


def floats(values):
    return [float(v) for v in values]


# -- per-query metric vectors shaped like real retrieval scores --------------

def success(rng, n, p):
    """0/1 values (success@k, or recall@k with one relevant id)."""
    return (rng.random(n) < p).astype(float)


def flip_some(rng, a, share):
    """b = a with a share of the 0/1 queries flipped (two systems that agree mostly)."""
    b = a.copy()
    flip = rng.random(len(a)) < share
    b[flip] = 1.0 - b[flip]
    return b


def degrade(rng, a, share):
    """b = a with a share of 0/1 successes lost, and a few gained: a is better."""
    b = a.copy()
    u = rng.random(len(a))
    b[(a == 1.0) & (u < share)] = 0.0
    b[(a == 0.0) & (u < share / 4)] = 1.0
    return b


def reciprocal_ranks(rng, n):
    """mrr@5-like values: 1/rank or 0."""
    ranks = rng.integers(1, 8, n)
    return np.where(ranks <= 5, 1.0 / ranks, 0.0)


def fractions(rng, n):
    """recall@k-like values: hits / relevant, relevant in 1..4."""
    rel = rng.integers(1, 5, n)
    hits = np.minimum(rng.integers(0, 5, n), rel)
    return hits / rel


def graded(rng, n):
    """ndcg@k-like values in [0, 1] with some exact 0s and 1s."""
    v = rng.random(n)
    v[rng.random(n) < 0.2] = 0.0
    v[rng.random(n) < 0.2] = 1.0
    return v


def make_cases(rng):
    cases = []

    def add(name, a, b, note=""):
        cases.append({"name": name, "a": floats(a), "b": floats(b), "note": note})

    add("n2_success", [1.0, 0.0], [0.0, 0.0])
    add("n3_graded", graded(rng, 3), graded(rng, 3))
    a = success(rng, 5, 0.7)
    add("n5_success_ties", a, flip_some(rng, a, 0.4))
    add("n8_mrr", reciprocal_ranks(rng, 8), reciprocal_ranks(rng, 8))
    add("n12_graded", graded(rng, 12), graded(rng, 12))
    b = rng.choice([0.0, 0.25, 0.5], 12)
    add("n12_all_equal_diffs", b + 0.5, b,
        "every difference is exactly 0.5: zero variance, nonzero mean")
    a = fractions(rng, 20)
    b = a.copy()
    b[7] = a[7] - 0.5 if a[7] >= 0.5 else a[7] + 0.5
    add("n20_single_nonzero_diff", a, b, "one query differs")
    a = success(rng, 20, 0.6)
    add("n20_success", a, degrade(rng, a, 0.4))
    a = fractions(rng, 20)
    b = np.where(rng.random(20) < 0.6, np.minimum(a, fractions(rng, 20)), a)
    add("n20_recall", a, b)
    a = graded(rng, 21)
    add("n21_identical", a, a.copy(), "a == b: every difference is 0")
    a = graded(rng, 30)
    add("n30_ndcg", a, np.clip(a - 0.1 + 0.25 * rng.standard_normal(30), 0.0, 1.0))
    add("n60_recall", fractions(rng, 60), fractions(rng, 60))
    a = graded(rng, 100)
    b = np.clip(a - 0.05 + 0.2 * rng.standard_normal(100), 0.0, 1.0)
    same = rng.random(100) < 0.5          # half the queries tie exactly
    b[same] = a[same]
    add("n100_ndcg", a, b)
    a = success(rng, 400, 0.8)
    add("n400_success", a, flip_some(rng, a, 0.1))
    return cases


# -- references ---------------------------------------------------------------

def finite_or_none(x):
    """JSON has no NaN/Infinity: NaN -> None; +-inf -> the strings "inf"/"-inf"."""
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def sign_flip_share(d):
    """Share of all 2**n sign patterns with |sum| >= |observed sum| (1e-9 rel).

    An independent numpy enumeration of rag_eval's definition, over *all*
    differences (zeros included, so it also checks that dropping zeros first
    does not change the share).
    """
    n = len(d)
    observed = abs(math.fsum(d))
    if observed <= 1e-12 * math.fsum(abs(x) for x in d):
        return 1.0
    threshold = observed * (1 - 1e-9)
    hits = 0
    chunk = 1 << 16
    powers = 1 << np.arange(n, dtype=np.int64)
    for start in range(0, 1 << n, chunk):
        codes = np.arange(start, min(start + chunk, 1 << n), dtype=np.int64)
        signs = np.where((codes[:, None] & powers) != 0, -1.0, 1.0)
        hits += int(np.count_nonzero(np.abs(signs @ d) >= threshold))
    return hits / (1 << n)


def sign_flip_share_mitm(d):
    """sign_flip_share for larger n: zeros dropped, then meet in the middle
    with numpy (2**(n/2) signed sums per half). Exact for up to ~44 nonzero."""
    d = [x for x in d if x != 0.0]
    observed = abs(math.fsum(d))
    if observed <= 1e-12 * math.fsum(abs(x) for x in d):
        return 1.0
    threshold = observed * (1 - 1e-9)

    def signed_sums(values):
        out = np.zeros(1)
        for v in values:
            out = np.concatenate([out + v, out - v])
        return out

    half = len(d) // 2
    left = signed_sums(d[:half])
    right = np.sort(signed_sums(d[half:]))
    hits = (len(right) - np.searchsorted(right, threshold - left, "left")).sum()
    hits += np.searchsorted(right, -threshold - left, "right").sum()
    return int(hits) / 2.0 ** len(d)


def case_reference(case, rng):
    a = np.array(case["a"])
    b = np.array(case["b"])
    d = a - b
    n = len(d)
    ref = {}
    with np.errstate(all="ignore"):
        res = scipy.stats.ttest_rel(a, b)
    ref["ttest_rel"] = {"statistic": finite_or_none(res.statistic),
                        "pvalue": finite_or_none(res.pvalue)}
    if n <= EXACT_MAX_N:
        res = scipy.stats.permutation_test(
            (a, b), mean_diff, permutation_type="samples", vectorized=True,
            n_resamples=np.inf, alternative="two-sided", batch=1 << 15)
        p = float(res.pvalue)
        share = sign_flip_share(d)
        if abs(p - share) > 1e-12:
            sys.exit(f"{case['name']}: scipy exact p {p!r} != |sum| share {share!r}")
        ref["permutation_exact_p"] = p
    else:
        res = scipy.stats.permutation_test(
            (a, b), mean_diff, permutation_type="samples", vectorized=True,
            n_resamples=PERMUTATION_MC_RESAMPLES, alternative="two-sided", rng=rng)
        ref["permutation_mc_p"] = float(res.pvalue)
        if np.count_nonzero(d) <= 44:
            ref["sign_flip_exact_p"] = sign_flip_share_mitm(list(d))
    if n >= BOOTSTRAP_MIN_N:
        res = scipy.stats.bootstrap(
            (a, b), mean_diff, paired=True, vectorized=True, method="percentile",
            confidence_level=0.95, n_resamples=BOOTSTRAP_RESAMPLES, rng=rng)
        ref["bootstrap_percentile_95"] = [float(res.confidence_interval.low),
                                          float(res.confidence_interval.high)]
    return ref


HOLM_INPUTS = [
    [0.01, 0.04, 0.03],
    [0.04, 0.001, 0.03, 0.2, 0.01],
    [0.5, 0.6],
    [0.02, 0.02, 0.02],                      # ties
    [0.3, 0.0, 1.0, 0.012, 0.049, 0.0125],   # 0, 1, near ties, a cap at 1
    [0.07],
]


def holm_references():
    out = []
    for pvals in HOLM_INPUTS:
        reject, adjusted, _, _ = multipletests(pvals, alpha=0.05, method="holm")
        out.append({"pvalues": pvals, "adjusted": floats(adjusted)})
    return out


def main():
    rng = np.random.default_rng(SEED)
    cases = make_cases(rng)
    for case in cases:
        case["reference"] = case_reference(case, rng)
    data = {
        "about": [
            "Reference values for rag_eval's statistics section, written by",
            "tests/peers/gen_stats.py (scipy, numpy, statsmodels; seeded).",
            "Each case holds per-query metrics a and b; rag_eval's diffs = a - b.",
            "ttest_rel: scipy.stats.ttest_rel(a, b). null = scipy gives NaN (n < 2 or",
            "every difference 0): rag_eval returns (0.0, 1.0) there, never NaN;",
            "\"inf\"/\"-inf\" = infinite t (zero variance, nonzero mean), p 0.",
            "permutation_exact_p (n <= 20): scipy.stats.permutation_test, paired",
            "(permutation_type='samples'), statistic mean(x - y), n_resamples=inf,",
            "two-sided; the generator asserts it equals the share of all 2**n sign",
            "patterns with |sum| >= |observed sum| (rag_eval's definition).",
            "permutation_mc_p (n > 20): the same test by Monte Carlo, 20000",
            "resamples; the RNGs differ, so compare loosely. sign_flip_exact_p",
            "(n > 20): rag_eval's |sum| share over all sign patterns of the nonzero",
            "differences, enumerated in numpy (meet in the middle): the exact value",
            "that randomization_p's Monte Carlo estimate (n > 20 nonzero) targets.",
            "bootstrap_percentile_95 (n >= 60): scipy.stats.bootstrap, paired, mean",
            "of differences, method='percentile', 10000 resamples. The RNGs differ:",
            "rag_eval's interval should be within ~0.02 of it, not equal.",
            "holm: statsmodels multipletests(method='holm') adjusted p-values.",
        ],
        "versions": {"numpy": np.__version__, "scipy": scipy.__version__,
                     "statsmodels": statsmodels.__version__},
        "seed": SEED,
        "cases": cases,
        "holm": holm_references(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
