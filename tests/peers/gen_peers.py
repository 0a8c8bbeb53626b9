#!/usr/bin/env python3
"""Generate peer-verified reference values for rag_eval's unit tests.

Run from the repository root with the scratch venv that holds the peers:

    /work/venvs/peers/bin/python tests/peers/gen_peers.py

Writes tests/data/peers/<case>/ (inputs in every supported format plus
expected.json) and tests/data/peers/DISAGREEMENTS.md.  The repository never
imports this file; only the generated data is used by the tests.

Every recorded number comes from a peer tool (pytrec_eval = trec_eval,
ir_measures, ranx).  Each one is cross-checked against a second peer and
against a small independent reference implemented below; any difference above
1e-12 aborts the run.  Known peer disagreements (ties, negative grades, Judged,
RR cutoffs) are worked around explicitly and documented, with live examples,
in DISAGREEMENTS.md.
"""

import gzip
import io
import json
import math
import random
import sys
import warnings
from importlib.metadata import version
from pathlib import Path

warnings.filterwarnings("ignore")  # numba type-safety chatter from ranx

import pytrec_eval  # noqa: E402
import ir_measures  # noqa: E402
import ranx  # noqa: E402
from ir_measures import RR, Judged, nDCG  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "peers"
TOL = 1e-12
SEED = 20240601

V_PTE = version("pytrec-eval-terrier")
V_IRM = version("ir-measures")
V_RANX = version("ranx")

# trec_eval's measures over the whole ranking: the @all forms and rprec, bpref.
PTE_WHOLE = ("set_recall", "set_P", "map", "recip_rank", "ndcg", "Rprec", "bpref")

MEAN_NOTE = ("per-query values from the peer; qrels queries missing from the run "
             "filled with 0.0 by the generator; mean = math.fsum/len over scored "
             "queries, computed by the generator from the peer per-query values")


# --------------------------------------------------------------------------
# Independent reference (our stated policy), used only to cross-check peers.
# --------------------------------------------------------------------------

def policy_ranking(run_q):
    """Ranking under our policy.

    dict {doc: score}: score descending, ties by doc id descending (trec_eval).
    list [doc, ...]: given order, duplicates kept once at their first position.
    """
    if isinstance(run_q, dict):
        return [d for d, _ in sorted(run_q.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]
    seen, out = set(), []
    for d in run_q:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def ref_values(grades, ranking, k, rel):
    top = ranking[:k]
    nrel = sum(1 for g in grades.values() if g >= rel)
    hits = [grades.get(d, -10**9) >= rel for d in top]
    out = {}
    out["recall"] = sum(hits) / nrel
    out["success"] = 1.0 if any(hits) else 0.0
    out["mrr"] = next((1.0 / (i + 1) for i, h in enumerate(hits) if h), 0.0)
    out["precision"] = sum(hits) / k
    ap, seen = 0.0, 0
    for i, h in enumerate(hits):
        if h:
            seen += 1
            ap += seen / (i + 1)
    out["map"] = ap / nrel
    for name, gain in (("ndcg", lambda g: 2.0 ** g - 1.0), ("ndcg_lin", float)):
        dcg = sum(gain(grades[d]) / math.log2(i + 2)
                  for i, d in enumerate(top) if grades.get(d, 0) > 0)
        ideal_grades = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
        idcg = sum(gain(g) / math.log2(i + 2) for i, g in enumerate(ideal_grades))
        out[name] = dcg / idcg if idcg > 0 else 0.0
    labelled = sum(1 for d in top if d in grades and grades[d] >= 0)
    out["judged"] = labelled / min(k, len(ranking)) if ranking else 0.0
    return out


def ref_whole(grades, ranking, rel):
    """The @all forms (the whole ranking) and the measures without a cutoff."""
    # a cutoff deeper than any ranking: the nDCG ideal then holds every judged grade
    out = {name + "@all": v for name, v in ref_values(grades, ranking, 10 ** 9, rel).items()}
    nrel = sum(1 for g in grades.values() if g >= rel)
    out["precision@all"] = (sum(1 for d in ranking if grades.get(d, -1) >= rel) / len(ranking)
                            if ranking else 0.0)
    out["judged@all"] = (sum(1 for d in ranking if grades.get(d, -1) >= 0) / len(ranking)
                         if ranking else 0.0)
    out["rprec"] = sum(1 for d in ranking[:nrel] if grades.get(d, -1) >= rel) / nrel
    # bpref, from trec_eval's definition: judged ids only (grade >= 0)
    nonrel = sum(1 for g in grades.values() if 0 <= g < rel)
    above, total = 0, 0.0
    for d in ranking:
        g = grades.get(d, -1)
        if g < 0:
            continue
        if g < rel:
            above += 1
        else:
            total += 1.0 - min(above, nrel) / min(nonrel, nrel) if above else 1.0
    out["bpref"] = total / nrel
    return out


# --------------------------------------------------------------------------
# Peer evaluation of one case.
# --------------------------------------------------------------------------

def resolved_scores(ranking):
    """Strictly descending scores that encode a ranking (no ties left)."""
    n = len(ranking)
    return {d: float(n - i) for i, d in enumerate(ranking)}


def ranx_per_query(qrels, run, metrics):
    q = ranx.Qrels.from_dict(qrels)
    r = ranx.Run.from_dict(run)
    ranx.evaluate(q, r, metrics, return_mean=False, save_results_in_run=True)
    return {m: {qid: float(r.scores[m][qid]) for qid in run} for m in metrics}


def irm_per_query(measures, qrels, run):
    out = {m: {} for m in measures}
    for res in ir_measures.iter_calc(measures, qrels, run):
        out[res.measure][res.query_id] = float(res.value)
    return out


class Mismatch(Exception):
    pass


def check(label, a, b):
    if abs(a - b) > TOL:
        raise Mismatch(f"{label}: {a!r} != {b!r}")


def evaluate_case(case):
    qrels, run, rel, cutoffs = case["qrels"], case["run"], case["rel"], case["cutoffs"]
    scored = sorted(q for q, g in qrels.items() if any(v >= rel for v in g.values()))
    unscored = sorted(q for q in qrels if q not in scored)
    ranking = {q: policy_ranking(r) for q, r in run.items()}
    resolved = {q: resolved_scores(r) for q, r in ranking.items()}
    is_list_run = any(isinstance(r, list) for r in run.values())
    has_ties = (not is_list_run) and any(
        len(set(r.values())) < len(r) for r in run.values())
    has_neg = any(g < 0 for gr in qrels.values() for g in gr.values())
    in_run = [q for q in scored if q in run]

    # ---- pytrec_eval (trec_eval): raw scores, and the tie-resolved run ----
    pte_measures = set()
    for k in cutoffs:
        pte_measures |= {f"recall_{k}", f"P_{k}", f"map_cut_{k}", f"ndcg_cut_{k}", f"success_{k}"}
    pte_measures |= set(PTE_WHOLE)
    ev = pytrec_eval.RelevanceEvaluator(qrels, pte_measures, relevance_level=rel)
    pte_input = {q: (resolved[q] if is_list_run else run[q]) for q in in_run}
    pte = ev.evaluate(pte_input)
    ev2 = pytrec_eval.RelevanceEvaluator(qrels, pte_measures, relevance_level=rel)
    pte_res = ev2.evaluate({q: resolved[q] for q in in_run})
    for q in in_run:
        for m in pte_measures:
            check(f"pytrec_eval raw vs tie-resolved {q} {m}", pte[q][m], pte_res[q][m])

    # ---- ranx: tie-resolved run, scored queries present in the run ----
    rq = {q: qrels[q] for q in in_run}
    rr = {q: resolved[q] for q in in_run}
    ranx_metrics = []
    for k in cutoffs:
        ranx_metrics += [f"recall@{k}-l{rel}", f"precision@{k}-l{rel}", f"map@{k}-l{rel}",
                         f"hit_rate@{k}-l{rel}", f"mrr@{k}-l{rel}",
                         f"ndcg@{k}", f"ndcg_burges@{k}"]  # nDCG: no threshold (rel 1)
    ranx_metrics += [f"recall-l{rel}", f"precision-l{rel}", f"map-l{rel}", f"hit_rate-l{rel}",
                     f"mrr-l{rel}", "ndcg", "ndcg_burges", f"r-precision-l{rel}"]
    rx = ranx_per_query(rq, rr, ranx_metrics) if in_run else {m: {} for m in ranx_metrics}

    # ---- ir_measures: tie-resolved run ----
    grade_set = sorted({g for gr in qrels.values() for g in gr.values() if g >= 0})
    gains = {g: 2 ** g - 1 for g in grade_set}
    irm_m = []
    for k in cutoffs:
        irm_m += [RR(rel=rel) @ k, nDCG(gains=gains) @ k]
    irm_m += [nDCG(gains=gains)]
    irm = irm_per_query(irm_m, rq, rr) if in_run else {m: {} for m in irm_m}
    qrels_nonneg = {q: {d: g for d, g in gr.items() if g >= 0} for q, gr in rq.items()}
    judged_m = [Judged @ k for k in cutoffs] + [Judged]
    irm_j = irm_per_query(judged_m, qrels_nonneg, rr) if in_run else {m: {} for m in judged_m}
    irm_j_raw = irm_per_query(judged_m, rq, rr) if in_run else {m: {} for m in judged_m}

    rel_tag = "" if rel == 1 else f"(rel={rel})"
    notes = []
    if has_ties:
        notes.append("run has tied scores: pytrec_eval got the raw scores (trec_eval order: "
                     "score desc, doc id desc) and the generator asserted it gives the same "
                     "values on a tie-free rescoring of that order; ranx and ir_measures got "
                     "the tie-free rescoring (their own tie orders differ, see DISAGREEMENTS.md)")
    if is_list_run:
        notes.append("ranked list with repeated ids: every peer scored the deduplicated "
                     "ranking (each id once, at its first/best position), as in run.trec")
    suffix = "; ".join(notes + [MEAN_NOTE])

    values = {}
    tallies = {"judged_raw_diff": []}

    def record(name, peer, primary, crosses, refkey, k):
        per_query = {}
        for q in scored:
            if q not in run:
                per_query[q] = 0.0
                continue
            v = primary[q]
            for label, other in crosses:
                check(f"{name} {q} {peer} vs {label}", v, other[q])
            ref = (ref_values(qrels[q], ranking[q], k, rel) if k is not None
                   else ref_whole(qrels[q], ranking[q], rel))[refkey]
            check(f"{name} {q} {peer} vs generator reference", v, ref)
            per_query[q] = v
        vals = [per_query[q] for q in scored]
        values[name] = {"peer": f"{peer}; {suffix}", "per_query": per_query,
                        "mean": math.fsum(vals) / len(vals)}

    def col(d, m):
        return {q: d[q][m] for q in in_run}

    for k in cutoffs:
        record(f"recall{rel_tag}@{k}",
               f"pytrec_eval {V_PTE} recall_{k} (relevance_level={rel}); cross-checked with "
               f"ranx {V_RANX} recall@{k}-l{rel} and the generator reference",
               col(pte, f"recall_{k}"), [("ranx", rx[f"recall@{k}-l{rel}"])], "recall", k)
        record(f"precision{rel_tag}@{k}",
               f"pytrec_eval {V_PTE} P_{k} (relevance_level={rel}); cross-checked with "
               f"ranx {V_RANX} precision@{k}-l{rel} and the generator reference",
               col(pte, f"P_{k}"), [("ranx", rx[f"precision@{k}-l{rel}"])], "precision", k)
        record(f"map{rel_tag}@{k}",
               f"pytrec_eval {V_PTE} map_cut_{k} (relevance_level={rel}); cross-checked with "
               f"ranx {V_RANX} map@{k}-l{rel} and the generator reference",
               col(pte, f"map_cut_{k}"), [("ranx", rx[f"map@{k}-l{rel}"])], "map", k)
        record(f"success{rel_tag}@{k}",
               f"pytrec_eval {V_PTE} success_{k} (relevance_level={rel}); cross-checked with "
               f"ranx {V_RANX} hit_rate@{k}-l{rel} and the generator reference",
               col(pte, f"success_{k}"), [("ranx", rx[f"hit_rate@{k}-l{rel}"])], "success", k)
        record(f"ndcg(gain=linear)@{k}",
               f"pytrec_eval {V_PTE} ndcg_cut_{k} (linear gain; trec_eval ignores relevance_level "
               f"in nDCG); cross-checked with ranx {V_RANX} ndcg@{k} (rel level 1) and the "
               f"generator reference",
               col(pte, f"ndcg_cut_{k}"), [("ranx", rx[f"ndcg@{k}"])], "ndcg_lin", k)
        record(f"mrr{rel_tag}@{k}",
               f"ir_measures {V_IRM} RR(rel={rel})@{k} (msmarco provider); cross-checked with "
               f"ranx {V_RANX} mrr@{k}-l{rel} and the generator reference",
               irm[RR(rel=rel) @ k], [("ranx", rx[f"mrr@{k}-l{rel}"])], "mrr", k)
        record(f"ndcg@{k}",
               f"ranx {V_RANX} ndcg_burges@{k} (exponential gain 2^g-1, rel level 1: grades <= 0 "
               f"give no gain); cross-checked with ir_measures {V_IRM} "
               f"nDCG(gains={{g: 2**g-1}})@{k} (pytrec_eval provider) and the generator reference",
               rx[f"ndcg_burges@{k}"], [("ir_measures", irm[nDCG(gains=gains) @ k])], "ndcg", k)
        jnote = (f"ir_measures {V_IRM} Judged@{k}")
        if has_neg:
            jnote += (" computed on the qrels with negative-grade entries removed (ir_measures "
                      "counts any qrels entry as judged, even grade -1; our definition does not)")
        jnote += "; cross-checked with the generator reference (domain.md definition)"
        record(f"judged@{k}", jnote, irm_j[Judged @ k], [], "judged", k)
        for q in in_run:
            if abs(irm_j_raw[Judged @ k][q] - irm_j[Judged @ k][q]) > TOL:
                tallies["judged_raw_diff"].append(
                    (q, k, irm_j_raw[Judged @ k][q], irm_j[Judged @ k][q]))

    # ---- the whole ranking (@all) and the measures without a cutoff ----
    whole = [
        (f"recall{rel_tag}@all", "set_recall", f"recall-l{rel}", "recall@all"),
        (f"precision{rel_tag}@all", "set_P", f"precision-l{rel}", "precision@all"),
        (f"map{rel_tag}@all", "map", f"map-l{rel}", "map@all"),
        (f"mrr{rel_tag}@all", "recip_rank", f"mrr-l{rel}", "mrr@all"),
        ("ndcg(gain=linear)@all", "ndcg", "ndcg", "ndcg_lin@all"),
        (f"rprec{rel_tag}", "Rprec", f"r-precision-l{rel}", "rprec"),
    ]
    for name, pte_name, rx_name, refkey in whole:
        record(name, f"pytrec_eval {V_PTE} {pte_name} (relevance_level={rel}; no cutoff); "
               f"cross-checked with ranx {V_RANX} {rx_name} and the generator reference",
               col(pte, pte_name), [("ranx", rx[rx_name])], refkey, None)
    record(f"bpref{rel_tag}",
           f"pytrec_eval {V_PTE} bpref (relevance_level={rel}); cross-checked with the generator "
           f"reference (trec_eval's m_bpref.c: judged ids only, min(N, R) denominator)",
           col(pte, "bpref"), [], "bpref", None)
    record(f"success{rel_tag}@all",
           f"ranx {V_RANX} hit_rate-l{rel} (no cutoff; trec_eval has no uncut success); "
           f"cross-checked with the generator reference",
           rx[f"hit_rate-l{rel}"], [], "success@all", None)
    record("ndcg@all",
           f"ranx {V_RANX} ndcg_burges (no cutoff; exponential gain 2^g-1); cross-checked with "
           f"ir_measures {V_IRM} nDCG(gains={{g: 2**g-1}}) and the generator reference",
           rx["ndcg_burges"], [("ir_measures", irm[nDCG(gains=gains)])], "ndcg@all", None)
    record("judged@all",
           f"ir_measures {V_IRM} Judged (no cutoff)"
           + (" computed on the qrels with negative-grade entries removed" if has_neg else "")
           + "; cross-checked with the generator reference (domain.md definition)",
           irm_j[Judged], [], "judged@all", None)

    # ---- tie sensitivity: what ranx / ir_measures give on the RAW tied run ----
    tie_diffs = {}
    if has_ties:
        raw = {q: run[q] for q in in_run}
        irm_raw = irm_per_query([RR(rel=rel) @ k for k in cutoffs] + judged_m, rq, raw)
        rx_raw = ranx_per_query(rq, {q: dict(sorted(raw[q].items())) for q in in_run},
                                [f"mrr@{k}-l{rel}" for k in cutoffs] +
                                [f"ndcg_burges@{k}" for k in cutoffs])
        for k in cutoffs:
            for label, got, want in (
                    (f"ir_measures RR@{k}", irm_raw[RR(rel=rel) @ k], irm[RR(rel=rel) @ k]),
                    (f"ranx mrr@{k}", rx_raw[f"mrr@{k}-l{rel}"], irm[RR(rel=rel) @ k]),
                    (f"ranx ndcg_burges@{k}", rx_raw[f"ndcg_burges@{k}"], rx[f"ndcg_burges@{k}"])):
                diff = [(q, got[q], want[q]) for q in in_run if abs(got[q] - want[q]) > TOL]
                if diff:
                    tie_diffs[label] = diff

    expected = {"description": case["description"], "rel": rel, "cutoffs": list(cutoffs),
                "unscored": unscored, "values": values}
    return expected, tallies, tie_diffs


# --------------------------------------------------------------------------
# Writers.
# --------------------------------------------------------------------------

def dump_json(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def qrels_trec_text(qrels):
    lines = []
    for q in sorted(qrels):
        for d in sorted(qrels[q]):
            lines.append(f"{q} 0 {d} {qrels[q][d]}")
    return "\n".join(lines) + "\n"


def run_trec_text(run, layout, rng, tag="peers"):
    per_q = {}
    for q in sorted(run):
        r = run[q]
        if isinstance(r, list):
            order = policy_ranking(r)
            scores = {d: float(len(order) - i) for i, d in enumerate(order)}
        else:
            order, scores = policy_ranking(r), r
        per_q[q] = (order, scores)
    lines = []
    if layout == "sorted":
        for q, (order, scores) in per_q.items():
            for i, d in enumerate(order):
                lines.append(f"{q} Q0 {d} {i + 1} {scores[d]!r} {tag}")
    elif layout == "scattered":
        # lines of all queries shuffled together; rank column a random permutation
        for q, (order, scores) in per_q.items():
            ranks = list(range(1, len(order) + 1))
            rng.shuffle(ranks)
            for d, rk in zip(order, ranks):
                lines.append(f"{q} Q0 {d} {rk} {scores[d]!r} {tag}")
        rng.shuffle(lines)
    elif layout == "reversed":
        # worst document first with rank 1; queries interleaved round robin
        queues = {q: list(reversed(order)) for q, (order, _) in per_q.items()}
        pos = {q: 0 for q in per_q}
        while any(queues.values()):
            for q in per_q:
                if queues[q]:
                    d = queues[q].pop(0)
                    pos[q] += 1
                    lines.append(f"{q} Q0 {d} {pos[q]} {per_q[q][1][d]!r} {tag}")
    else:
        raise ValueError(layout)
    return "\n".join(lines) + "\n"


def gzip_bytes(data):
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as g:
        g.write(data)
    return buf.getvalue()


def write_case(case, expected, rng):
    d = OUT / case["name"]
    d.mkdir(parents=True, exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    qrels, run = case["qrels"], case["run"]
    qt = qrels_trec_text(qrels)
    (d / "qrels.trec").write_text(qt, encoding="utf-8", newline="\n")
    dump_json(d / "qrels.json", qrels)
    with open(d / "qrels.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for q in sorted(qrels):
            f.write(json.dumps({"query_id": q, "grades": qrels[q]}, sort_keys=True) + "\n")
    rt = run_trec_text(run, case.get("layout", "sorted"), rng)
    (d / "run.trec").write_text(rt, encoding="utf-8", newline="\n")
    dump_json(d / "run.json", run)
    is_list = any(isinstance(r, list) for r in run.values())
    with open(d / "run.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for q in sorted(run):
            key = "docs" if is_list else "scores"
            f.write(json.dumps({"query_id": q, key: run[q]}, sort_keys=True) + "\n")
    if case.get("gz"):
        (d / "qrels.trec.gz").write_bytes(gzip_bytes(qt.encode("utf-8")))
        (d / "run.trec.gz").write_bytes(gzip_bytes(rt.encode("utf-8")))
    dump_json(d / "expected.json", expected)
    # Round-trip: the written TREC files, read by a peer's own reader, equal what was scored.
    got_q = {}
    for r in ir_measures.read_trec_qrels(str(d / "qrels.trec")):
        got_q.setdefault(r.query_id, {})[r.doc_id] = r.relevance
    assert got_q == qrels, case["name"]
    got_r = {}
    for r in ir_measures.read_trec_run(str(d / "run.trec")):
        got_r.setdefault(r.query_id, {})[r.doc_id] = r.score
    want_r = {q: (resolved_scores(policy_ranking(r)) if isinstance(r, list) else r)
              for q, r in run.items()}
    assert got_r == want_r, case["name"]


# --------------------------------------------------------------------------
# Cases.
# --------------------------------------------------------------------------

def rscore(rng, decimals=3, lo=0.0, hi=100.0):
    return round(rng.uniform(lo, hi), decimals)


def random_case(rng, *, nq, qfmt="q{:03d}", doc=lambda i: f"doc{i}", pool=2000,
                judged=(3, 15), grades=(0, 1, 2, 3), weights=(5, 3, 2, 1),
                run_len=(5, 30), p_judged_in_run=0.5, n_unscored=2, n_missing=2,
                score=lambda rng: rscore(rng), neg_frac=0.0, unscored_grades=(0,)):
    qrels, run = {}, {}
    qids = [qfmt.format(i + 1) for i in range(nq)]
    unscored = set(rng.sample(qids, n_unscored))
    for q in qids:
        nj = rng.randint(*judged)
        docs = rng.sample(range(pool), nj + run_len[1] + 5)
        jdocs, others = docs[:nj], docs[nj:]
        g = {}
        for i in jdocs:
            if q in unscored:
                g[doc(i)] = rng.choice(unscored_grades)
            elif neg_frac and rng.random() < neg_frac:
                g[doc(i)] = -1
            else:
                g[doc(i)] = rng.choices(grades, weights)[0]
        if q not in unscored and not any(v >= 1 for v in g.values()):
            g[doc(jdocs[0])] = max(grades)
        qrels[q] = g
        n = rng.randint(*run_len)
        cand = [doc(i) for i in jdocs if rng.random() < p_judged_in_run] + [doc(i) for i in others]
        cand = cand[:n] if len(cand) >= n else cand
        rng.shuffle(cand)
        run[q] = {d: score(rng) for d in cand}
    scored_qids = [q for q in qids if q not in unscored]
    for q in rng.sample(scored_qids, n_missing):
        del run[q]
    return qrels, run


def case_domain_example(rng):
    qrels = {"q1": {"refund-policy#2": 2, "refund-policy#3": 1},
             "q2": {"sla-uptime#1": 2},
             "q3": {"sso-setup#4": 2, "sso-setup#5": 2, "okta-guide#1": 1},
             "q4": {"pricing#3": 0}}
    lists = {"q1": ["shipping#1", "refund-policy#2", "refund-policy#9", "refund-policy#3", "returns-faq#1"],
             "q2": ["pricing#3", "status-page#1", "sla-uptime#7", "support-hours#2", "sla-uptime#2"],
             "q3": ["sso-setup#5", "okta-guide#1", "sso-setup#1", "scim#2", "sso-setup#4"],
             "q4": ["pricing#3", "pricing#1", "plans#2", "billing#4", "invoices#1"]}
    run = {q: {d: round(0.9 - 0.1 * i, 1) for i, d in enumerate(l)} for q, l in lists.items()}
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10],
                description="The domain.md example fixture (q4 unscored: only grade 0; q2 scores 0); "
                            "scores 0.9..0.5 follow the rank order; runs shorter than k=10.")


def case_graded_basic(rng):
    qrels, run = random_case(rng, nq=40, n_unscored=3, n_missing=3)
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10, 20],
                description="40 queries, graded labels 0-3, unjudged docs retrieved, 3 unscored "
                            "queries (only grade 0), 3 scored queries missing from the run, "
                            "runs of 5-30 docs (some shorter than k=20).")


def case_short_runs(rng):
    qrels, run = random_case(rng, nq=30, judged=(4, 14), run_len=(1, 6), p_judged_in_run=0.8,
                             n_unscored=1, n_missing=2)
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10, 20, 100],
                description="30 queries with runs of 1-6 docs, shorter than most cutoffs "
                            "(precision still divides by k; judged by min(k, returned)); often "
                            "more relevant ids than returned ids.")


def case_long_runs(rng):
    qrels, run = random_case(rng, nq=12, judged=(40, 80), run_len=(200, 200), pool=5000,
                             p_judged_in_run=0.7, weights=(3, 3, 2, 1), n_unscored=1, n_missing=1,
                             score=lambda rng: rscore(rng, 4, -20.0, 20.0))
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10, 20, 100],
                description="12 queries with 200-doc runs and 40-80 judged ids (far more relevant "
                            "ids than k), negative scores, 1 unscored, 1 missing from the run.")


def case_binary_100q(rng):
    qrels, run = random_case(rng, nq=100, judged=(1, 8), grades=(0, 1), weights=(1, 1),
                             run_len=(10, 20), n_unscored=4, n_missing=5,
                             score=lambda rng: rscore(rng, 5, 0.0, 1.0))
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10, 20],
                description="100 queries with binary labels (0/1), runs of 10-20 docs, 4 unscored, "
                            "5 missing from the run.")


def case_rel2(rng):
    qrels, run = random_case(rng, nq=50, judged=(3, 12), weights=(4, 4, 2, 1), run_len=(5, 25),
                             n_unscored=2, n_missing=3)
    # a few queries whose only positive grade is 1: scored at rel 1, unscored at rel 2
    for q in sorted(qrels)[5:9]:
        for d in qrels[q]:
            if qrels[q][d] > 1:
                qrels[q][d] = 1
        if not any(v == 1 for v in qrels[q].values()):
            qrels[q][sorted(qrels[q])[0]] = 1
    return dict(qrels=qrels, run=run, rel=2, cutoffs=[1, 3, 5, 10, 20],
                description="Relevance threshold rel=2 on graded labels 0-3: grade 1 is not "
                            "relevant for recall/success/mrr/map/precision; queries whose best "
                            "grade is 1 are unscored; nDCG and judged have no threshold.")


def case_ties(rng):
    qrels, run = random_case(rng, nq=30, judged=(3, 12), run_len=(8, 30), p_judged_in_run=0.7,
                             n_unscored=2, n_missing=2,
                             score=lambda rng: float(rng.choice([1, 2, 3, 4, 5, 6])) / 2)
    # hand-made tie groups straddling k=1, 3 and 5, with relevant ids inside the groups
    qrels["q900"] = {"a": 1, "b": 0, "c": 2, "d": 0, "h": 3, "x": 1}
    run["q900"] = {"a": 5.0, "b": 5.0, "c": 5.0, "d": 2.5, "e": 2.5, "f": 2.5, "g": 2.5,
                   "h": 2.5, "i": 1.0, "j": 1.0, "k": 1.0}
    qrels["q901"] = {"doc-1": 1, "doc-10": 1, "doc-2": 0, "doc-9": 2}
    run["q901"] = {"doc-1": 0.5, "doc-10": 0.5, "doc-2": 0.5, "doc-9": 0.5, "doc-3": 0.5,
                   "doc-11": 0.25}
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10, 20], layout="scattered",
                description="Heavy score ties (scores from {0.5,...,3.0}) with several tie groups "
                            "per query, some straddling k; q900/q901 hand-made tie groups across "
                            "k=1,3,5 (q901: doc-1/doc-10/doc-2/doc-9 string order). Policy: score "
                            "desc, then doc id desc (trec_eval). run.trec lines of all queries are "
                            "shuffled together and the rank column is a random permutation.")


def case_repeated_ids(rng):
    qrels, base = random_case(rng, nq=30, judged=(3, 10), run_len=(4, 15), p_judged_in_run=0.7,
                              n_unscored=2, n_missing=2)
    run = {}
    for q, r in base.items():
        order = policy_ranking(r)
        lst = list(order)
        for _ in range(rng.randint(1, 5)):
            d = rng.choice(order)
            lst.insert(rng.randint(lst.index(d) + 1, len(lst)), d)
        run[q] = lst
    qrels["q900"] = {"r1": 2, "r2": 1, "r3": 1}
    run["q900"] = ["r1", "r1", "r1", "n1", "r1", "r2", "r1"]
    qrels["q901"] = {"r1": 1, "n0": 0}
    run["q901"] = ["n0", "n0", "n0", "n0", "n0", "r1", "r1"]
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10],
                description="Ranked-list runs ({qid: [docid, ...]}) with repeated ids; a duplicate "
                            "counts once, at its first (best) position. run.trec holds the "
                            "deduplicated ranking with strictly descending scores. q900 repeats a "
                            "relevant id 5 times; q901 repeats a non-relevant id 5 times.")


def case_special_ids(rng):
    shapes = [lambda i: f"msmarco#{i // 7}/{i % 7}", lambda i: f"wiki/Page_{i}#sec-{i % 3}",
              lambda i: f"kb/{i % 5}/art{i}#p{i % 4}/s{i % 2}", lambda i: f"doc:{i}#chunk={i % 9}"]
    qrels, run = random_case(rng, nq=20, qfmt="topic/{:02d}", judged=(3, 10), run_len=(5, 20),
                             doc=lambda i: shapes[i % 4](i), n_unscored=1, n_missing=1)
    qrels["q#a/1"] = {"msmarco#12/3": 2, "msmarco#12/30": 0, "msmarco#1/23": 1}
    run["q#a/1"] = {"msmarco#12/30": 3.0, "msmarco#1/23": 2.5, "msmarco#12/3": 2.0, "x#/": 1.0}
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10],
                description="Doc ids containing '#', '/', ':' and '=' (e.g. msmarco#12/3, "
                            "kb/1/art6#p2/s0) and query ids containing '/' and '#' (topic/07, q#a/1).")


def case_negative_grades(rng):
    qrels, run = random_case(rng, nq=30, judged=(4, 14), grades=(0, 1, 2, 3), weights=(4, 3, 2, 1),
                             run_len=(6, 25), p_judged_in_run=0.8, neg_frac=0.3, n_unscored=2,
                             n_missing=2, unscored_grades=(-1, 0))
    qrels["q900"] = {"p1": -1, "p2": -1, "r1": 1, "r2": 3, "z0": 0}
    run["q900"] = {"p1": 9.0, "p2": 8.0, "r1": 7.0, "u1": 6.0, "z0": 5.0}
    qrels["q901"] = {"p1": -1, "p2": -1}
    run["q901"] = {"p1": 2.0, "x": 1.0}
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10, 20],
                description="Qrels with negative grades (-1 = pooled but unjudged): not relevant, "
                            "not in the relevant count, no nDCG gain (DCG or ideal), and NOT judged "
                            "for judged@k. q900: two -1 docs at ranks 1-2; q901 (only -1 grades) "
                            "is unscored.")


def case_gz(rng):
    qrels, run = random_case(rng, nq=20, judged=(3, 10), run_len=(5, 20), n_unscored=1, n_missing=1)
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10], gz=True,
                description="Graded case also shipped gzipped: qrels.trec.gz and run.trec.gz are "
                            "gzip (mtime=0) of the exact bytes of qrels.trec and run.trec.")


def case_unscored_missing(rng):
    qrels, run = random_case(rng, nq=25, judged=(2, 8), run_len=(3, 12), n_unscored=8,
                             n_missing=6, unscored_grades=(0, 0, -1))
    # one unscored query missing from the run too
    unsc = sorted(q for q, g in qrels.items() if not any(v >= 1 for v in g.values()))
    del run[unsc[0]]
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 5, 10],
                description="Many unscored queries (8, grades only 0/-1; one of them also absent "
                            "from the run) and 6 scored queries absent from the run (score 0, "
                            "kept in the mean).")


def case_mixed(rng):
    qrels, run = random_case(rng, nq=60, judged=(2, 20), grades=(0, 1, 2, 3), weights=(5, 3, 2, 1),
                             run_len=(1, 60), p_judged_in_run=0.6, neg_frac=0.1, n_unscored=4,
                             n_missing=4, unscored_grades=(-1, 0),
                             score=lambda rng: round(rng.choice([0.1, 0.2, 0.3, 0.4]) + rng.randint(0, 20) / 10, 2))
    return dict(qrels=qrels, run=run, rel=1, cutoffs=[1, 3, 5, 10, 20, 100], layout="reversed",
                description="Everything at once: 60 queries, grades -1..3, ties, unjudged docs, "
                            "runs of 1-60 docs, unscored and missing queries. run.trec lists each "
                            "query worst-first with rank 1 on the worst doc, queries interleaved.")


CASES = [("domain_example", case_domain_example), ("graded_basic", case_graded_basic),
         ("short_runs", case_short_runs), ("long_runs_200", case_long_runs),
         ("binary_100q", case_binary_100q), ("rel2", case_rel2), ("ties_trec", case_ties),
         ("repeated_ids", case_repeated_ids), ("special_ids", case_special_ids),
         ("negative_grades", case_negative_grades), ("gz_input", case_gz),
         ("unscored_missing", case_unscored_missing), ("mixed_scattered", case_mixed)]


# --------------------------------------------------------------------------
# Live probes of peer behaviour, written to DISAGREEMENTS.md.
# --------------------------------------------------------------------------

def probes():
    out = []

    def pte(qrels, run, measures, rel=1):
        return pytrec_eval.RelevanceEvaluator(qrels, set(measures), relevance_level=rel).evaluate(run)["q1"]

    def irm(ms, qrels, run):
        return {str(k): v for k, v in ir_measures.calc_aggregate(ms, qrels, run).items()}

    def rx(qrels, run, ms):
        r = ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(run), ms)
        return {m: float(v) for m, v in (r.items() if isinstance(r, dict) else [(ms[0], r)])}

    q = {"q1": {"a": 1, "b": 0, "c": 0}}
    r = {"q1": {"c": 1.0, "a": 1.0, "b": 1.0}}
    r2 = {"q1": {"a": 1.0, "b": 1.0, "c": 1.0}}
    out.append(("Tie-breaking (all three docs score 1.0; only `a` relevant)",
                f"qrels `{q}`, run `{r}`. Our policy (trec_eval): score desc, doc id desc -> c, b, a; "
                f"mrr@3 = 1/3.",
                [("pytrec_eval recip_rank, P_1", pte(q, r, ["recip_rank", "P_1"])),
                 ("ir_measures RR@3 (msmarco provider: ties by doc id ASCENDING), RR (pytrec_eval), "
                  "P@1 (pytrec_eval) in ONE calc_aggregate call", irm([RR @ 3, RR, ir_measures.P @ 1], q, r)),
                 ("ranx mrr@3, precision@1, run inserted c,a,b (ranx: ties follow insertion order here; "
                  "it sorts with numba np.argsort(-score), quicksort, stability not guaranteed)", rx(q, r, ["mrr@3", "precision@1"])),
                 ("ranx mrr@3, precision@1, same scores inserted a,b,c", rx(q, r2, ["mrr@3", "precision@1"]))]))
    q = {"q1": {"a": 1, "b": -1, "c": 0}}
    r = {"q1": {"b": 3.0, "a": 2.0, "e": 1.0}}
    out.append(("Judged@k with a negative grade",
                f"qrels `{q}`, run `{r}`. domain.md: b (grade -1) is NOT judged and e is unlabelled, "
                f"so only a counts -> judged@3 = 1/3.",
                [("ir_measures Judged@3 (counts any qrels entry, even -1)", irm([Judged @ 3], q, r)),
                 ("ir_measures Judged@3 on qrels without the -1 entry",
                  irm([Judged @ 3], {"q1": {"a": 1, "c": 0}}, r))]))
    try:
        res = str(list(ir_measures.iter_calc([Judged @ 5], {"q1": {"a": 1}}, {"q1": {}})))
    except Exception as e:  # noqa: BLE001
        res = f"raises {e.__class__.__name__}: {e}"
    out.append(("Judged@k on an empty ranking", "qrels `{'q1': {'a': 1}}`, run `{'q1': {}}`; ours: 0.0.",
                [("ir_measures Judged@5", res)]))
    q = {"q1": {"a": 1, "b": -1}}
    r = {"q1": {"b": 2.0, "a": 1.0}}
    out.append(("Negative grades in recall's denominator and in nDCG (DCG and ideal)",
                f"qrels `{q}`, run `{r}`. Ours: recall@5 = 1 (denominator 1), ndcg@5 = 1/log2(3) = "
                f"{1 / math.log2(3)!r} (b gives no gain and is not in the ideal).",
                [("pytrec_eval", pte(q, r, ["recall_5", "ndcg_cut_5", "P_5"])),
                 ("ranx", rx(q, r, ["recall@5", "ndcg@5", "ndcg_burges@5"])),
                 ("ir_measures nDCG(gains={0:0,1:1})@5 (pytrec_eval provider; -1 left unmapped; "
                  "its repr drops identity gains)",
                  irm([nDCG(gains={0: 0, 1: 1}) @ 5], q, r))]))
    q = {"q1": {"a": 1, "x": 3}}
    r = {"q1": {"a": 1.0}}
    out.append(("nDCG ideal uses every judged doc in the qrels, retrieved or not",
                f"qrels `{q}`, run `{r}`. Ideal over qrels: linear 1/(3 + 1/log2 3) = "
                f"{1 / (3 + 1 / math.log2(3))!r}; 1.0 if normalised by retrieved docs only.",
                [("pytrec_eval ndcg_cut_5", pte(q, r, ["ndcg_cut_5"])),
                 ("ranx ndcg@5, ndcg_burges@5", rx(q, r, ["ndcg@5", "ndcg_burges@5"]))]))
    q = {"q1": {"a": 1, "b": 2}}
    r = {"q1": {"a": 2.0, "b": 1.0}}
    out.append(("Relevance threshold in nDCG",
                f"qrels `{q}`, run `{r}`, rel=2. trec_eval ignores relevance_level in nDCG; ranx "
                f"applies `-l2` to nDCG (drops grade-1 gains from DCG and ideal). We follow trec_eval, "
                f"so the generator always asks ranx for nDCG at level 1.",
                [("pytrec_eval ndcg_cut_2, relevance_level=2", pte(q, r, ["ndcg_cut_2"], rel=2)),
                 ("pytrec_eval ndcg_cut_2, relevance_level=1", pte(q, r, ["ndcg_cut_2"])),
                 ("ranx ndcg@2-l2, ndcg@2, ndcg_burges@2-l2, ndcg_burges@2",
                  rx(q, r, ["ndcg@2-l2", "ndcg@2", "ndcg_burges@2-l2", "ndcg_burges@2"]))]))
    q = {"q1": {"a": 1}}
    r = {"q1": {"b": 7.0, "c": 6.0, "d": 5.0, "e": 4.0, "f": 3.0, "g": 2.0, "a": 1.0}}
    out.append(("RR cutoff",
                f"qrels `{q}`, run `{r}` (a at rank 7). mrr@5 = 0. trec_eval has no RR cutoff; "
                f"pytrec_eval silently accepts `recip_rank_5` and returns the UNCUT recip_rank. "
                f"ir_measures routes RR@k to its msmarco provider (honours k; ties by doc id "
                f"ascending) and plain RR to pytrec_eval (ties by doc id descending). ranx's docstring "
                f"says mrr's k is ignored, but the code does apply it.",
                [("pytrec_eval {'recip_rank_5'}", pte(q, r, ["recip_rank_5"])),
                 ("ir_measures RR@5, RR@7, RR", irm([RR @ 5, RR @ 7, RR], q, r)),
                 ("ranx mrr@5, mrr@7", rx(q, r, ["mrr@5", "mrr@7"]))]))
    return out


def write_disagreements(probe_list, case_notes):
    lines = ["# Peer disagreements and surprises",
             "",
             f"Generated by `tests/peers/gen_peers.py` (pytrec_eval {V_PTE}, ir_measures {V_IRM}, "
             f"ranx {V_RANX}); every value below was computed live by the peer named.",
             "",
             "Where two peers compute the same measure on the same ranking, the generator asserts "
             "they agree to 1e-12 (and agree with its own small reference). The differences below "
             "are all about *input interpretation* (ties, negative grades, empty rankings, "
             "cutoffs, thresholds); the generator neutralises each one as described in the "
             "`peer` string of every expected.json entry.",
             ""]
    for title, setup, rows in probe_list:
        lines += [f"## {title}", "", setup, ""]
        for label, val in rows:
            if isinstance(val, dict):
                val = ", ".join(f"{k}={v!r}" for k, v in sorted(val.items()))
            lines.append(f"- {label}: {val}")
        lines.append("")
    lines += ["## Effect on the generated cases", ""]
    for name, tallies, tie_diffs in case_notes:
        jd = tallies["judged_raw_diff"]
        if jd:
            q, k, raw, ours = jd[0]
            lines.append(f"- `{name}`: ir_measures Judged on the raw qrels (negative grades counted "
                         f"as judged) differs from the recorded judged@k in {len(jd)} (query, k) "
                         f"pairs, e.g. {q} @ {k}: ir_measures {raw!r} vs recorded {ours!r}.")
        for label, diffs in sorted(tie_diffs.items()):
            q, got, want = diffs[0]
            lines.append(f"- `{name}`: {label} on the RAW tied scores differs from the recorded "
                         f"(trec_eval tie order) value on {len(diffs)} queries, e.g. {q}: "
                         f"{got!r} vs recorded {want!r}.")
    lines.append("")
    (OUT / "DISAGREEMENTS.md").write_text("\n".join(lines), encoding="utf-8", newline="\n")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    case_notes = []
    for i, (name, fn) in enumerate(CASES):
        rng = random.Random(SEED + i)
        case = fn(rng)
        case["name"] = name
        # never a run query absent from the qrels
        assert set(case["run"]) <= set(case["qrels"]), name
        expected, tallies, tie_diffs = evaluate_case(case)
        write_case(case, expected, random.Random(SEED + 1000 + i))
        case_notes.append((name, tallies, tie_diffs))
        n_scored = len(next(iter(expected["values"].values()))["per_query"])
        print(f"{name}: {len(case['qrels'])} qrels queries, {n_scored} scored, "
              f"{len(expected['unscored'])} unscored, {len(case['run'])} in run, "
              f"{len(expected['values'])} measures", file=sys.stderr)
    write_disagreements(probes(), case_notes)


if __name__ == "__main__":
    main()
