#!/usr/bin/env python3
"""Reference values for ``--average trec_eval`` (trec_eval's averaging, no -c).

Run from the repository root with the scratch venv that holds the peers:

    /work/venvs/peers/bin/python tests/peers/gen_trec_average.py

Writes tests/data/trec_average/<case>/{qrels.json,run.json,expected.json}.  The
repository never imports this file; TrecOutputTest reads the data.

trec_eval (here pytrec_eval, trec_eval 9.0.x) averages over the queries the
run and the qrels share: a query with no relevant id counts with the values
trec_eval gives it, a qrels query the run lacks is left out, a run query the
qrels lack is skipped.  Every per-query value and the set of queries come from
pytrec_eval; the means are math.fsum/len over those values (trec_eval's 'all'
line is the same mean).  Two of our measures have no trec_eval name but are
still computed by trec_eval: exponential nDCG (linear ndcg_cut on qrels whose
grades g > 0 become 2^g - 1) and mrr@k (recip_rank on the run cut to its top
k, ordered by score descending; the scores are distinct, so the cut is exact).
"""

import json
import math
import random
from importlib.metadata import version
from pathlib import Path

import pytrec_eval

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "trec_average"
SEED = 20240610
CUTOFFS = (1, 3, 5, 10)
V_PTE = version("pytrec-eval-terrier")


def measures(rel):
    """(our canonical name, pytrec_eval measure, how computed) per measure."""
    r = "" if rel == 1 else "(rel=%d)" % rel
    out = []
    for k in CUTOFFS:
        out += [("recall%s@%d" % (r, k), "recall_%d" % k, "plain"),
                ("precision%s@%d" % (r, k), "P_%d" % k, "plain"),
                ("success%s@%d" % (r, k), "success_%d" % k, "plain"),
                ("map%s@%d" % (r, k), "map_cut_%d" % k, "plain"),
                ("ndcg(gain=linear)@%d" % k, "ndcg_cut_%d" % k, "plain"),
                ("ndcg@%d" % k, "ndcg_cut_%d" % k, "exp_gain"),
                ("mrr%s@%d" % (r, k), "recip_rank", "cut_%d" % k)]
    out += [("map%s@all" % r, "map", "plain"), ("ndcg(gain=linear)@all", "ndcg", "plain"),
            ("mrr%s@all" % r, "recip_rank", "plain"), ("recall%s@all" % r, "set_recall", "plain"),
            ("precision%s@all" % r, "set_P", "plain"), ("rprec%s" % r, "Rprec", "plain"),
            ("bpref%s" % r, "bpref", "plain")]
    return out


def make_case(rng, rel, n=16):
    """qrels and a run with every situation trec_eval's averaging meets."""
    qrels, run = {}, {}
    docs = ["d%02d" % i for i in range(30)]
    kinds = (["scored"] * 6 + ["all_zero", "all_negative", "below_rel", "below_rel",
                               "scored_missing", "unscored_missing", "scored_empty",
                               "unscored_empty", "scored", "all_zero"])
    for i, kind in enumerate(kinds[:n]):
        qid = "q%02d" % i
        labelled = rng.sample(docs, rng.randint(2, 8))
        if kind in ("scored", "scored_missing", "scored_empty"):
            grades = {d: rng.choice([-1, 0, 0, 1, 2, 3]) for d in labelled}
            grades[labelled[0]] = rng.choice([rel, rel + 1])
        elif kind in ("all_zero", "unscored_missing", "unscored_empty"):
            grades = {d: 0 for d in labelled}
        elif kind == "all_negative":
            grades = {d: rng.choice([-1, -2]) for d in labelled}
        else:   # below_rel: grades that nDCG counts but rel does not
            grades = {d: rng.choice([0, rel - 1]) if rel > 1 else 0 for d in labelled}
        qrels[qid] = grades
        if kind.endswith("_missing"):
            continue
        if kind.endswith("_empty"):
            run[qid] = {}
            continue
        retrieved = rng.sample(docs, rng.randint(3, 14))
        if rng.random() < 0.7:
            retrieved[rng.randrange(len(retrieved))] = rng.choice(labelled)
        scores = rng.sample(range(1, 1000), len(set(retrieved)))
        run[qid] = {d: s / 10 for d, s in zip(dict.fromkeys(retrieved), scores)}
    return qrels, run


def exp_gains(qrels):
    return {q: {d: (2 ** g - 1 if g > 0 else g) for d, g in grades.items()}
            for q, grades in qrels.items()}


def cut(run, k):
    return {q: dict(sorted(scores.items(), key=lambda p: (-p[1], p[0]))[:k])
            for q, scores in run.items()}


def expected(qrels, run, rel):
    table = measures(rel)
    per_query = {}
    for ours, theirs, how in table:
        q, r = qrels, run
        if how == "exp_gain":
            q = exp_gains(qrels)
        elif how.startswith("cut_"):
            r = cut(run, int(how[4:]))
        values = pytrec_eval.RelevanceEvaluator(q, {theirs}, relevance_level=rel).evaluate(r)
        for qid, got in values.items():
            per_query.setdefault(qid, {})[ours] = got[theirs]
    counted = pytrec_eval.RelevanceEvaluator(qrels, {"num_q"}, relevance_level=rel).evaluate(run)
    assert set(counted) == set(per_query)
    mean = {ours: math.fsum(v[ours] for v in per_query.values()) / len(per_query)
            for ours, _, _ in table}
    return {
        "peer": "pytrec-eval-terrier %s (trec_eval 9.0.x, no -c); exponential nDCG as "
                "ndcg_cut on grades 2^g-1, mrr@k as recip_rank on the run cut to k; "
                "mean = math.fsum/len by the generator" % V_PTE,
        "rel": rel,
        "names": {ours: theirs for ours, theirs, how in table if how == "plain"
                  and "(rel=" not in ours},
        "num_q": len(per_query),
        "per_query": dict(sorted(per_query.items())),
        "mean": mean,
    }


def main():
    rng = random.Random(SEED)
    for name, rel in (("rel1", 1), ("rel2", 2)):
        qrels, run = make_case(rng, rel)
        run["extra"] = {"d01": 1.0}    # a run query the qrels lack: skipped by both
        folder = OUT / name
        folder.mkdir(parents=True, exist_ok=True)
        for file, data in (("qrels.json", qrels), ("run.json", run),
                           ("expected.json", expected(qrels, run, rel))):
            with open(folder / file, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1, sort_keys=True)
                handle.write("\n")


if __name__ == "__main__":
    main()
