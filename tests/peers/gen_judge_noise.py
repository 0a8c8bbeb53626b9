"""Generate tests/data/stats/judge_noise_reference.json: reference values for
the judge scores of rag_eval (issue 15), computed with numpy from the raw
runs: each query's value (the mean of its runs, mapped from the field's range
onto [0, 1]), the field's mean, the within-query standard deviation
sqrt(mean of s_q^2) over the queries with 2 or more runs, the noise floor
SE = sqrt(2 * sum_q s_q^2 / r_q) / n (s_q: np.var(ddof=1) of the mapped runs,
n the queries), and the borderline queries of a threshold (runs on both
sides; a run at the threshold passes).

Not run by the tests or CI (rag_eval is standard library only); run it by
hand when the cases change, from the repo root:

    python3 tests/peers/gen_judge_noise.py

Deterministic: every draw comes from a seeded numpy Generator.
"""

import json
import pathlib

import numpy as np

OUT = pathlib.Path(__file__).resolve().parents[1] / "data" / "stats" / "judge_noise_reference.json"
SEED = 20261201


def case(rng, name, n, kind):
    """One score file: n queries, 1-5 runs each, of one field "f"."""
    lo, hi = {"unit": (0.0, 1.0), "likert": (1.0, 5.0), "reversed": (5.0, 1.0),
              "boolean": (0.0, 1.0)}[kind]
    lines, mapped = [], {}
    for i in range(n):
        runs = int(rng.integers(1, 6))
        if kind == "unit":
            raw = [round(float(v), 3) for v in rng.uniform(0, 1, runs)]
        elif kind == "boolean":
            raw = [bool(v) for v in rng.integers(0, 2, runs)]
        else:
            raw = [int(v) for v in rng.integers(1, 6, runs)]
        qid = "q%03d" % i
        lines.append({"query_id": qid, "f": raw if runs > 1 or i % 2 else raw[0]})
        mapped[qid] = (np.array(raw, dtype=float) - lo) / (hi - lo)
    threshold = {"unit": 0.5, "likert": 3, "reversed": 3, "boolean": 1}[kind]
    t = (threshold - lo) / (hi - lo)
    values = {q: float(np.mean(r)) for q, r in mapped.items()}
    repeated = {q: r for q, r in mapped.items() if len(r) > 1}
    variances = {q: float(np.var(r, ddof=1)) for q, r in repeated.items()}
    expected = {"per_query": values, "mean": float(np.mean(list(values.values())))}
    if repeated:
        expected["within_sd"] = float(np.sqrt(np.mean(list(variances.values()))))
        expected["noise_floor"] = float(np.sqrt(2 * sum(
            v / len(repeated[q]) for q, v in variances.items())) / n)
        expected["runs"] = [int(min(len(r) for r in mapped.values())),
                            int(max(len(r) for r in mapped.values()))]
    expected["borderline"] = {
        q: {"fail": int(np.sum(r < t)), "pass": int(np.sum(r >= t)), "runs": len(r)}
        for q, r in sorted(mapped.items()) if 0 < np.sum(r >= t) < len(r)}
    return {"name": name, "range": [lo, hi], "threshold": threshold, "lines": lines,
            "expected": expected}


def main():
    rng = np.random.default_rng(SEED)
    cases = [case(rng, "%s, %d queries" % (kind, n), n, kind)
             for kind in ("unit", "likert", "reversed", "boolean") for n in (2, 7, 40)]
    about = ("Score files of one field f and numpy's values for them (see "
             "tests/peers/gen_judge_noise.py); JudgeNoiseReferenceTest compares rag_eval's "
             "evaluate_scores at 1e-12.")
    OUT.write_text(json.dumps({"about": about, "numpy": np.__version__, "seed": SEED,
                               "cases": cases}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
