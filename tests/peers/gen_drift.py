"""Generate tests/data/stats/drift.json: reference values for rag_eval's
judge drift statistics (a frozen sample's stored scores against the current
judge's): Cohen's kappa, raw agreement and the confusion table from
scikit-learn; the mean difference, mean absolute difference and largest change
from numpy; the paired p from scipy (exact permutation test) or statsmodels
(exact McNemar, 0/1 fields); scipy's percentile bootstrap interval (another
random generator: a loose check).

Not run by the tests or CI (rag_eval is standard library only); run it by hand
in a scratch environment when the cases change:

    python3 -m venv /tmp/stats && /tmp/stats/bin/pip install numpy scipy statsmodels scikit-learn
    /tmp/stats/bin/python -W ignore tests/peers/gen_drift.py

Deterministic: every random draw comes from a seeded numpy Generator.
"""

import json
import pathlib
import sys

import numpy as np
import scipy
import scipy.stats
import sklearn
import statsmodels
from sklearn.metrics import accuracy_score, cohen_kappa_score, confusion_matrix
from statsmodels.stats.contingency_tables import mcnemar

OUT = pathlib.Path(__file__).resolve().parents[1] / "data" / "stats" / "drift.json"
SEED = 20261215


def kappa_cases(rng):
    cases = [("hand_worked", [1, 1, 1, 0, 0, 1, 0, 1, 1, 1], [1, 1, 0, 0, 0, 1, 1, 1, 1, 1])]
    a = (rng.random(200) < 0.6).astype(int)
    b = np.where(rng.random(200) < 0.1, 1 - a, a)
    cases.append(("binary_200_flip10", a, b))
    a = (rng.random(300) < 0.95).astype(int)
    b = np.where(rng.random(300) < 0.04, 1 - a, a)
    cases.append(("imbalanced_300", a, b))
    a = rng.integers(1, 6, 300)
    b = np.clip(a + rng.choice([-1, 0, 0, 0, 1], 300), 1, 5)
    cases.append(("likert_1_5_300", a, b))
    a = rng.integers(1, 4, 40)
    b = np.where(rng.random(40) < 0.2, 4, a)
    cases.append(("label_only_current", a, b))
    a = (rng.random(60) < 0.5).astype(int)
    b = np.where(rng.random(60) < 0.8, 1 - a, a)
    cases.append(("worse_than_chance", a, b))
    a = rng.integers(0, 3, 25)
    cases.append(("perfect_3", a, a.copy()))
    a = rng.integers(0, 3, 50)
    b = np.where(rng.random(50) < 0.3, rng.integers(0, 3, 50), a)
    cases.append(("three_class_50", a, b))
    out = []
    for name, a, b in cases:
        a, b = [int(x) for x in a], [int(x) for x in b]
        labels = sorted(set(a) | set(b))
        out.append({"name": name, "stored": a, "current": b, "labels": labels,
                    "kappa": float(cohen_kappa_score(a, b)),
                    "agreement": float(accuracy_score(a, b)),
                    "confusion": confusion_matrix(a, b, labels=labels).tolist()})
    return out


def exact_sign_flip_p(d):
    """scipy's exact paired permutation test of the mean difference."""
    res = scipy.stats.permutation_test(
        (d,), lambda x, axis=-1: np.mean(x, axis=axis), permutation_type="samples",
        n_resamples=np.inf, alternative="two-sided")
    return float(res.pvalue)


def numeric_cases(rng):
    cases = []
    stored = np.round(rng.random(12), 2)
    current = np.round(np.clip(stored + rng.normal(0, 0.05, 12), 0, 1), 2)
    cases.append(("faithfulness_12", stored, current, "permutation"))
    stored = np.round(rng.random(16), 2)
    current = stored.copy()
    moved = rng.random(16) < 0.6
    current[moved] = np.round(np.clip(stored[moved] - 0.1 + rng.normal(0, 0.03, moved.sum()),
                                      0, 1), 2)
    cases.append(("shifted_down_16", stored, current, "permutation"))
    stored = (rng.random(200) < 0.7).astype(float)
    current = np.where(rng.random(200) < 0.08, 1 - stored, stored)
    cases.append(("boolean_200", stored, current, "mcnemar"))
    stored = np.round(rng.random(400), 2)
    current = np.round(np.clip(stored + rng.normal(0.01, 0.04, 400), 0, 1), 2)
    cases.append(("scatter_400", stored, current, None))
    out = []
    for name, stored, current, test in cases:
        d = current - stored
        biggest = int(np.argmax(np.abs(d)))      # the first of the largest
        item = {"name": name, "stored": [float(x) for x in stored],
                "current": [float(x) for x in current],
                "mean_difference": float(np.mean(d)),
                "mean_absolute_difference": float(np.mean(np.abs(d))),
                "largest_change": {"index": biggest, "from": float(stored[biggest]),
                                   "to": float(current[biggest])}}
        if test == "permutation":
            item["p"] = exact_sign_flip_p(d[d != 0])
        elif test == "mcnemar":
            table = [[int(np.sum((current == 1) & (stored == 1))),
                      int(np.sum((current == 1) & (stored == 0)))],
                     [int(np.sum((current == 0) & (stored == 1))),
                      int(np.sum((current == 0) & (stored == 0)))]]
            item["p"] = float(mcnemar(table, exact=True).pvalue)
        if len(d) >= 100:
            ci = scipy.stats.bootstrap((d,), np.mean, n_resamples=10000, method="percentile",
                                       random_state=np.random.default_rng(0)).confidence_interval
            item["bootstrap_percentile_95"] = [float(ci.low), float(ci.high)]
        out.append(item)
    return out


def main():
    rng = np.random.default_rng(SEED)
    data = {
        "about": ("Judge drift reference values. kappa: stored and current labels of a "
                  "categorical field; sklearn cohen_kappa_score (unweighted), accuracy_score "
                  "(raw agreement) and confusion_matrix (rows stored, columns current, labels "
                  "sorted). numeric: stored and current values in [0, 1]; numpy mean of "
                  "current - stored, of its absolute value, the first largest |change| "
                  "(index, from, to); p: scipy permutation_test exact (the nonzero "
                  "differences) or statsmodels mcnemar(exact=True) for 0/1 values; "
                  "bootstrap_percentile_95: scipy.stats.bootstrap percentile (another RNG: "
                  "a loose check)."),
        "generator": "tests/peers/gen_drift.py",
        "versions": {"python": sys.version.split()[0], "numpy": np.__version__,
                     "scipy": scipy.__version__, "statsmodels": statsmodels.__version__,
                     "scikit-learn": sklearn.__version__},
        "kappa": kappa_cases(rng),
        "numeric": numeric_cases(rng),
    }
    OUT.write_text(json.dumps(data, sort_keys=True) + "\n", encoding="utf-8")
    print("wrote", OUT, len(data["kappa"]), "kappa cases,", len(data["numeric"]), "numeric")


if __name__ == "__main__":
    main()
