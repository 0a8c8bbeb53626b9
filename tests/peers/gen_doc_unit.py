#!/usr/bin/env python3
"""Reference values for unit=doc (issue 11), computed by trec_eval.

Run from the repository root with the scratch venv that holds the peers:

    /work/venvs/peers/bin/python tests/peers/gen_doc_unit.py

Writes tests/data/doc_unit/{qrels.json,run.json,expected.json}.  The
repository never imports this file; only the generated data is used.

The run ranks chunks ("docN#i"); the qrels grade documents ("docN").  Our
unit=doc takes each document at the rank of its first chunk and lets k count
chunks (context slots).  trec_eval computes exactly that on a document run
built from the chunk run, rank by rank:

  - repeated chunk ids are removed first (each id once, at its first position);
  - the first chunk of each document becomes the document id at the same rank;
  - every later chunk of a document already seen becomes a unique unjudged
    filler id ("~filler-<qid>-<rank>"): it takes its slot and adds nothing;
  - scores descend strictly with the rank (no ties for trec_eval to break).

pytrec_eval scores (doc qrels, reduced run); every value is cross-checked
against a small reference written from the issue 11 semantics that reads the
CHUNK run directly (the document of a chunk id is everything before its last
"#"); any difference above 1e-12 aborts.
"""

import json
import math
import random
from importlib.metadata import version
from pathlib import Path

import pytrec_eval

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "doc_unit"
SEED = 20240611
CUTOFFS = (1, 3, 5, 10)
SEP = "#"
REL = 1
TOL = 1e-12
V_PTE = version("pytrec-eval-terrier")


# ---------------------------------------------------------------------------
# The case.
# ---------------------------------------------------------------------------

def make_case(rng, nq=30):
    """Doc-level qrels and a chunk-level run of ranked lists."""
    n_docs = 400
    chunks_of = {"doc%d" % i: rng.randint(1, 4) for i in range(n_docs)}
    qids = ["q%02d" % (i + 1) for i in range(nq)]
    no_relevant = set(rng.sample(qids, 3))        # only grade 0: no relevant doc
    qrels, run = {}, {}
    for qid in qids:
        docs = rng.sample(sorted(chunks_of), 40)
        judged, others = docs[:rng.randint(2, 9)], docs[12:12 + rng.randint(4, 12)]
        if qid in no_relevant:
            grades = {d: 0 for d in judged}
        else:
            grades = {d: rng.choices((0, 1, 2, 3), (4, 3, 2, 1))[0] for d in judged}
            if not any(g >= REL for g in grades.values()):
                grades[judged[0]] = rng.randint(1, 3)
        qrels[qid] = grades
        # candidate chunks: every chunk of a judged doc with p 0.6, plus unjudged docs
        cand = ["%s#%d" % (d, i) for d in judged for i in range(1, chunks_of[d] + 1)
                if rng.random() < 0.6]
        cand += ["%s#%d" % (d, i) for d in others for i in range(1, chunks_of[d] + 1)]
        rng.shuffle(cand)
        ranking = cand[:rng.randint(10, 30)]
        # some rankings repeat an id (a duplicate counts once, at its first position)
        if rng.random() < 0.3:
            for _ in range(rng.randint(1, 3)):
                c = rng.choice(ranking)
                ranking.insert(rng.randint(ranking.index(c) + 1, len(ranking)), c)
        run[qid] = ranking
    # a scored query absent from the run: every value 0.0
    missing = sorted(q for q in qids if q not in no_relevant)[-1]
    del run[missing]
    # hand-made: document ids containing the separator, an id without it, a
    # relevant document whose chunks sit at ranks 2 and 5, repeated ids
    qrels["q900"] = {"wiki#Paris": 2, "wiki#Lyon": 1, "plain": 3, "wiki": 0, "faq#7": 1}
    run["q900"] = ["wiki#Paris", "wiki#Lyon#3", "wiki#Lyon#3", "x#1", "wiki#Lyon#1",
                   "plain", "wiki#Paris#2", "x#2", "faq#7#1", "plain", "wiki#Paris#1"]
    return qrels, run


# ---------------------------------------------------------------------------
# The reduction, and trec_eval.
# ---------------------------------------------------------------------------

def distinct(ranking):
    return list(dict.fromkeys(ranking))


def doc_of(chunk_id):
    return chunk_id.rsplit(SEP, 1)[0]


def reduce_run(qid, ranking):
    """{doc or filler id: score}: see the module docstring."""
    chunks = distinct(ranking)
    seen, out = set(), {}
    for rank, chunk in enumerate(chunks, 1):
        d = doc_of(chunk)
        key = d if d not in seen else "~filler-%s-%d" % (qid, rank)
        seen.add(d)
        out[key] = float(len(chunks) - rank + 1)
    assert len(out) == len(chunks)
    return out


def cut(run, k):
    return {q: dict(sorted(s.items(), key=lambda p: -p[1])[:k]) for q, s in run.items()}


def exp_gains(qrels):
    return {q: {d: (2 ** g - 1 if g > 0 else g) for d, g in grades.items()}
            for q, grades in qrels.items()}


def table():
    """(our canonical name, pytrec_eval measure, how computed)."""
    out = []
    for k in CUTOFFS:
        out += [("precision(unit=doc)@%d" % k, "P_%d" % k, "plain"),
                ("recall(unit=doc)@%d" % k, "recall_%d" % k, "plain"),
                ("success(unit=doc)@%d" % k, "success_%d" % k, "plain"),
                ("map(unit=doc)@%d" % k, "map_cut_%d" % k, "plain"),
                ("ndcg(gain=linear,unit=doc)@%d" % k, "ndcg_cut_%d" % k, "plain"),
                ("ndcg(unit=doc)@%d" % k, "ndcg_cut_%d" % k, "exp_gain"),
                ("mrr(unit=doc)@%d" % k, "recip_rank", "cut_%d" % k)]
    out.append(("mrr(unit=doc)@all", "recip_rank", "plain"))
    return out


def trec_eval_values(qrels, reduced):
    per_query = {}
    for ours, theirs, how in table():
        q, r = qrels, reduced
        if how == "exp_gain":
            q = exp_gains(qrels)
        elif how.startswith("cut_"):
            r = cut(reduced, int(how[4:]))
        got = pytrec_eval.RelevanceEvaluator(q, {theirs}, relevance_level=REL).evaluate(r)
        for qid, values in got.items():
            per_query.setdefault(qid, {})[ours] = values[theirs]
    return per_query


# ---------------------------------------------------------------------------
# Independent reference: the issue 11 definitions, on the chunk run.
# ---------------------------------------------------------------------------

def reference(grades, ranking, k):
    chunks = distinct(ranking)
    first = {}                                   # p(d): rank of d's first chunk
    for rank, chunk in enumerate(chunks, 1):
        first.setdefault(doc_of(chunk), rank)
    relevant = [d for d, g in grades.items() if g >= REL]
    found = sorted(first[d] for d in relevant if first.get(d, k + 1) <= k)
    out = {"recall": len(found) / len(relevant),
           "success": 1.0 if found else 0.0,
           "mrr": 1.0 / found[0] if found else 0.0,
           "precision": len(found) / k,
           "map": sum((i + 1) / p for i, p in enumerate(found)) / len(relevant)}
    for name, gain in (("ndcg(gain=linear", float), ("ndcg(", lambda g: 2.0 ** g - 1)):
        dcg = sum(gain(g) / math.log2(first[d] + 1)
                  for d, g in grades.items() if g > 0 and first.get(d, k + 1) <= k)
        ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
        idcg = sum(gain(g) / math.log2(i + 2) for i, g in enumerate(ideal))
        out[name] = dcg / idcg
    return out


def reference_value(name, grades, ranking):
    base, cutoff = name.split("@")
    k = 10 ** 9 if cutoff == "all" else int(cutoff)
    ref = reference(grades, ranking, k)
    if base == "ndcg(gain=linear,unit=doc)":
        return ref["ndcg(gain=linear"]
    if base == "ndcg(unit=doc)":
        return ref["ndcg("]
    return ref[base.split("(")[0]]


# ---------------------------------------------------------------------------

def main():
    rng = random.Random(SEED)
    qrels, run = make_case(rng)
    assert set(run) <= set(qrels)
    scored = sorted(q for q, g in qrels.items() if any(v >= REL for v in g.values()))
    unscored = sorted(set(qrels) - set(scored))
    reduced = {q: reduce_run(q, r) for q, r in run.items()}
    pte = trec_eval_values(qrels, reduced)
    names = [ours for ours, _, _ in table()]
    per_query = {}
    for qid in scored:
        if qid in run:
            assert set(pte[qid]) == set(names), qid
            values = dict(pte[qid])
        else:                        # trec_eval leaves it out; ours scores it 0.0
            values = {n: 0.0 for n in names}
        for n in names:
            want = reference_value(n, qrels[qid], run.get(qid, []))
            if abs(values[n] - want) > TOL:
                raise SystemExit("%s %s: trec_eval %r != reference %r" % (qid, n, values[n], want))
        per_query[qid] = values
    # the case tells our policy apart from its two nearest misreadings: k counting
    # documents (the collapsed list) and repeated chunk ids taking slots
    def differs(ranking_of):
        return sum(1 for q in scored if q in run for n in names
                   if abs(reference_value(n, qrels[q], ranking_of(q)) - per_query[q][n]) > TOL)
    collapsed = differs(lambda q: [d + SEP + "1" for d in distinct(map(doc_of, distinct(run[q])))])
    with_repeats = differs(lambda q: ["%s%s~%d" % (c, SEP, i) if c in run[q][:i] else c
                                      for i, c in enumerate(run[q])])
    assert collapsed and with_repeats, (collapsed, with_repeats)
    for qid in unscored:            # trec_eval gives them zeros; ours leaves them out
        assert all(v == 0 for v in pte.get(qid, {}).values()), qid
    mean = {n: math.fsum(v[n] for v in per_query.values()) / len(per_query) for n in names}
    expected = {
        "note": "unit=doc reference: per_query values from pytrec_eval (trec_eval) on the doc "
                "qrels and a document run reduced from the chunk run (repeated chunk ids "
                "removed; each document's first chunk -> the document id at the same rank; "
                "every later chunk of a seen document -> a unique unjudged filler id; scores "
                "strictly descending by rank), so k counts chunks. Score with "
                "rag_eval.evaluate(qrels, run, measures=[...], doc_sep='#'). "
                "ndcg(unit=doc)@k is ndcg_cut_k on grades 2^g-1; mrr(unit=doc)@k is "
                "recip_rank on the reduced run cut to its first k ranks. Scored queries "
                "(a doc graded >= 1) only; a scored query absent from the run is 0.0 "
                "(filled by the generator). Every value equals the generator's own "
                "reference from the issue 11 definitions to 1e-12. mean = math.fsum/len.",
        "peer": "pytrec-eval-terrier %s (trec_eval 9.0.x)" % V_PTE,
        "doc_sep": SEP,
        "rel": REL,
        "unscored": unscored,
        "missing_from_run": sorted(q for q in scored if q not in run),
        "measures": names,
        "per_query": per_query,
        "mean": mean,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    for file, data in (("qrels.json", qrels), ("run.json", run), ("expected.json", expected)):
        with open(OUT / file, "w", encoding="utf-8", newline="\n") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.write("\n")
    n_repeat_doc = sum(1 for r in run.values()
                       if len({doc_of(c) for c in distinct(r)}) < len(distinct(r)))
    n_repeat_id = sum(1 for r in run.values() if len(set(r)) < len(r))
    print("doc_unit: %d qrels queries, %d scored, %d unscored, %d missing from the run; "
          "%d rankings repeat a document, %d repeat a chunk id; %d measures; values that "
          "differ if k counted documents: %d, if repeated ids took slots: %d"
          % (len(qrels), len(scored), len(unscored), len(expected["missing_from_run"]),
             n_repeat_doc, n_repeat_id, len(names), collapsed, with_repeats))


if __name__ == "__main__":
    main()
