"""Generate tests/data/stats/mcnemar.json: reference p-values of the exact
McNemar test (statsmodels' mcnemar(table, exact=True)) for rag_eval's
mcnemar_p and for its sign-flip test on 0/1 per-query vectors.

Not run by the tests or CI (rag_eval is standard library only); run it by hand
in a scratch environment when the cases change:

    python3 -m venv /tmp/stats && /tmp/stats/bin/pip install numpy scipy statsmodels
    /tmp/stats/bin/python -W ignore tests/peers/gen_mcnemar.py

Deterministic: every random draw comes from a seeded numpy Generator.
"""

import json
import pathlib
import sys

import numpy as np
import scipy
import statsmodels
from statsmodels.stats.contingency_tables import mcnemar

OUT = pathlib.Path(__file__).resolve().parents[1] / "data" / "stats" / "mcnemar.json"
SEED = 20261201


def exact_p(b, c):
    """statsmodels' exact McNemar p of the discordant counts b, c (the
    concordant cells do not enter the test; they are set to 7 and 3)."""
    return float(mcnemar([[7, b], [c, 3]], exact=True).pvalue)


def tables(rng):
    out = [(b, c) for b in range(26) for c in range(26)]          # every small table
    for n in (40, 99, 100, 257, 1000, 2000, 2001, 4999, 5000):       # around the exact-sum limit
        for share in (0.0, 0.3, 0.45, 0.49, 0.5):
            b = int(n * share)
            out.append((b, n - b))
    for _ in range(40):                                              # mid-size, near the middle
        n = int(rng.integers(30, 20000))
        b = int(rng.binomial(n, 0.47))
        out.append((b, n - b))
    out += [(2400, 2600), (2480, 2520), (0, 5000), (2500, 2500),
            (49000, 51000), (49800, 50200), (49950, 50050), (50000, 50000), (10, 99990),
            (499000, 501000), (499700, 500300), (1000, 999000), (0, 1000000)]
    return out


def vectors(rng):
    """Pairs of 0/1 per-query outcomes (a run and a baseline)."""
    out = []
    for n, p, flip in ((10, 0.6, 0.3), (25, 0.5, 0.4), (30, 0.8, 0.2), (60, 0.7, 0.1),
                       (120, 0.5, 0.25), (400, 0.6, 0.05), (400, 0.6, 0.5), (3000, 0.7, 0.1)):
        base = (rng.random(n) < p).astype(int)
        run = base.copy()
        flipped = rng.random(n) < flip
        run[flipped] = 1 - run[flipped]
        lost = (base == 1) & (rng.random(n) < flip / 3)             # the run is a little worse
        run[lost] = 0
        out.append({"name": "n%d_p%g_flip%g" % (n, p, flip),
                    "a": [int(x) for x in run], "b": [int(x) for x in base]})
    out.append({"name": "all_equal", "a": [1, 0, 1] * 5, "b": [1, 0, 1] * 5})
    out.append({"name": "all_lost_30", "a": [0] * 30, "b": [1] * 30})
    for item in out:
        a, b = np.array(item["a"]), np.array(item["b"])
        table = [[int(np.sum((a == 1) & (b == 1))), int(np.sum((a == 1) & (b == 0)))],
                 [int(np.sum((a == 0) & (b == 1))), int(np.sum((a == 0) & (b == 0)))]]
        item["table"] = table
        item["pvalue"] = float(mcnemar(table, exact=True).pvalue)
    return out


def main():
    rng = np.random.default_rng(SEED)
    data = {
        "about": ("Exact McNemar p-values from statsmodels.stats.contingency_tables."
                  "mcnemar(table, exact=True).pvalue (= 2 * scipy binom.cdf(min(b, c), b + c, "
                  "1/2), capped at 1). tables: discordant counts b, c and p; rag_eval's "
                  "mcnemar_p(b, c) must match to 1e-12 relative. vectors: 0/1 per-query "
                  "outcomes a (run) and b (baseline), their 2x2 table [[a1b1, a1b0], "
                  "[a0b1, a0b0]] and p; rag_eval's randomization_p of a - b must match it."),
        "generator": "tests/peers/gen_mcnemar.py",
        "versions": {"python": sys.version.split()[0], "numpy": np.__version__,
                     "scipy": scipy.__version__, "statsmodels": statsmodels.__version__},
        "tables": [{"b": b, "c": c, "pvalue": exact_p(b, c)} for b, c in tables(rng)],
        "vectors": vectors(rng),
    }
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print("wrote", OUT, len(data["tables"]), "tables,", len(data["vectors"]), "vectors")


if __name__ == "__main__":
    main()
