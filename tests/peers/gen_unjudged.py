#!/usr/bin/env python3
"""Reference values of unjudged=skip: trec_eval -J, through pytrec_eval's
judged_docs_only_flag, on generated data.

Run from the repository root with the scratch venv that holds the peers:

    /work/venvs/peers/bin/python tests/peers/gen_unjudged.py

Writes tests/data/unjudged/{qrels.json, run.json, expected.json}.  The
repository never imports this file; the tests read only the data.

The case: 40 queries, each a run of 25 ids with distinct scores (so no tie
rule is involved) of which about half are labelled (grades -1, 0, 1, 2; a
negative grade is unjudged for trec_eval -J, as for rag_eval), every query with
at least one relevant id.  Every value recorded is pytrec_eval's, cross-checked
against a small reference below (condense the ranking to its judged ids, then
cut); a difference above 1e-12 aborts the run.
"""

import json
import math
import random
from importlib.metadata import version
from pathlib import Path

import pytrec_eval

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "unjudged"
SEED = 20250113
CUTOFFS = (1, 3, 5, 10)
TOL = 1e-12


def make_case(rng):
    qrels, run = {}, {}
    for q in range(40):
        qid = "q%02d" % q
        ids = ["d%03d" % i for i in rng.sample(range(300), 25)]
        scores = rng.sample(range(1, 1000), 25)
        run[qid] = {doc: float(s) for doc, s in zip(ids, scores)}
        grades = {}
        for doc in ids:
            if rng.random() < 0.5:
                grades[doc] = rng.choice((-1, 0, 0, 1, 1, 2))
        for i in range(rng.randint(0, 3)):      # relevant ids the run did not retrieve
            grades["u%03d-%d" % (q, i)] = rng.choice((1, 2))
        if not any(g >= 1 for g in grades.values()):
            grades[ids[rng.randrange(25)]] = 1
        qrels[qid] = grades
    return qrels, run


def table():
    """(our canonical name, pytrec_eval measure)."""
    out = []
    for k in CUTOFFS:
        out += [("precision(unjudged=skip)@%d" % k, "P_%d" % k),
                ("recall(unjudged=skip)@%d" % k, "recall_%d" % k),
                ("success(unjudged=skip)@%d" % k, "success_%d" % k),
                ("map(unjudged=skip)@%d" % k, "map_cut_%d" % k),
                ("ndcg(gain=linear,unjudged=skip)@%d" % k, "ndcg_cut_%d" % k)]
    out += [("precision(unjudged=skip)@all", "set_P"), ("recall(unjudged=skip)@all", "set_recall"),
            ("map(unjudged=skip)@all", "map"), ("ndcg(gain=linear,unjudged=skip)@all", "ndcg"),
            ("mrr(unjudged=skip)@all", "recip_rank"), ("rprec(unjudged=skip)", "Rprec")]
    return out


def reference(grades, scores, ours):
    """The value of one of our names: condense to judged ids, then cut."""
    ranking = [d for d, _ in sorted(scores.items(), key=lambda p: -p[1])]
    judged = [d for d in ranking if grades.get(d, -1) >= 0]
    base, _, cutoff = ours.partition("@")
    relevant = sum(1 for g in grades.values() if g >= 1)
    k = len(judged) if cutoff == "all" else int(cutoff) if cutoff else relevant
    hits = [grades[d] >= 1 for d in judged[:k]]
    name = base.split("(")[0]
    if name == "precision":
        return sum(hits) / (k if cutoff != "all" else max(len(judged), 1))
    if name == "rprec":
        return sum(hits) / relevant
    if name == "recall":
        return sum(hits) / relevant
    if name == "success":
        return 1.0 if any(hits) else 0.0
    if name == "mrr":
        return next((1.0 / (i + 1) for i, h in enumerate(hits) if h), 0.0)
    if name == "map":
        found, total = 0, 0.0
        for i, h in enumerate(hits):
            if h:
                found += 1
                total += found / (i + 1)
        return total / relevant
    if name == "ndcg":
        dcg = sum(max(grades[d], 0) / math.log2(i + 2) for i, d in enumerate(judged[:k]))
        ideal = sorted((g for g in grades.values() if g > 0), reverse=True)
        ideal = ideal if cutoff == "all" else ideal[:k]
        return dcg / sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    raise ValueError(ours)


def main():
    qrels, run = make_case(random.Random(SEED))
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {theirs for _, theirs in table()},
                                               relevance_level=1, judged_docs_only_flag=True)
    got = evaluator.evaluate(run)
    per_query = {}
    for qid in sorted(qrels):
        per_query[qid] = {}
        for ours, theirs in table():
            value = got[qid][theirs]
            ref = reference(qrels[qid], run[qid], ours)
            if abs(value - ref) > TOL:
                raise SystemExit("%s %s: pytrec_eval %r, reference %r" % (qid, ours, value, ref))
            per_query[qid][ours] = value
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in (("qrels.json", qrels), ("run.json", run)):
        (OUT / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    expected = {"peer": "pytrec-eval-terrier %s, judged_docs_only_flag=True, relevance_level=1"
                        % version("pytrec-eval-terrier"),
                "generator": "tests/peers/gen_unjudged.py", "seed": SEED,
                "names": {ours: theirs for ours, theirs in table()},
                "per_query": per_query}
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print("wrote %d queries x %d measures to %s" % (len(per_query), len(table()), OUT))


if __name__ == "__main__":
    main()
