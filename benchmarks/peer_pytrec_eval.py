"""pytrec_eval peer: parse TREC files into dicts of dicts (as in pytrec_eval's
README), evaluate, print means as JSON.

trec_eval's recip_rank has no cutoff.  RR@10 is derived exactly from the
per-query recip_rank: a query's RR@10 is its recip_rank when that is >= 1/10
(first relevant item within the top 10 in trec_eval's order), else 0.
ndcg_cut.10 uses linear gain (reported as ndcg(gain=linear)@10).
"""
import json
import sys

import pytrec_eval


def read_qrels(path):
    qrels = {}
    with open(path) as f:
        for line in f:
            qid, _, docid, rel = line.split()
            qrels.setdefault(qid, {})[docid] = int(rel)
    return qrels


def read_run(path):
    run = {}
    with open(path) as f:
        for line in f:
            qid, _, docid, _, score, _ = line.split()
            run.setdefault(qid, {})[docid] = float(score)
    return run


def main():
    qrels = read_qrels(sys.argv[1])
    run = read_run(sys.argv[2])
    ev = pytrec_eval.RelevanceEvaluator(
        qrels, {"recall.10,100", "success.10", "recip_rank", "ndcg_cut.10"})
    res = ev.evaluate(run)
    n = len(res)
    mean = lambda key: sum(r[key] for r in res.values()) / n  # noqa: E731
    rr10 = sum(r["recip_rank"] if r["recip_rank"] >= 0.1 - 1e-12 else 0.0
               for r in res.values()) / n
    print(json.dumps({
        "recall@10": mean("recall_10"), "recall@100": mean("recall_100"),
        "success@10": mean("success_10"), "mrr@10": rr10,
        "ndcg(gain=linear)@10": mean("ndcg_cut_10"), "num_queries": n}))


if __name__ == "__main__":
    main()
