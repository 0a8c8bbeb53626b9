"""The plainest JSON scorer: the bar rag_eval's JSON path must meet.

    python3 naive_json.py QRELS.json RUN.json|RUN.jsonl

QRELS: {qid: {docid: grade}}.  RUN: {qid: {docid: score}} (ranked by score,
descending; ties keep file order), {qid: [docid, ...]} (already ranked), or
JSONL lines {"query_id": ..., "scores": {...}}.  Every query in the qrels with
a relevant (grade > 0) document is scored; a query absent from the run scores
0.  Prints the means of recall@10, recall@100, success@10, mrr@10, ndcg@10
(exponential gain 2^g - 1) as JSON.
"""
import json
import math
import sys


def main():
    with open(sys.argv[1]) as f:
        qrels = json.load(f)
    if sys.argv[2].endswith(".jsonl"):
        run = {}
        with open(sys.argv[2]) as f:
            for line in f:
                if line.strip():
                    obj = json.loads(line)
                    run[obj["query_id"]] = obj["scores"]
    else:
        with open(sys.argv[2]) as f:
            run = json.load(f)

    totals = {"recall@10": 0.0, "recall@100": 0.0, "success@10": 0.0,
              "mrr@10": 0.0, "ndcg@10": 0.0}
    n = 0
    for qid, judged in qrels.items():
        relevant = {d for d, g in judged.items() if g > 0}
        if not relevant:
            continue
        n += 1
        ranked = run.get(qid, [])
        if isinstance(ranked, dict):
            ranked = sorted(ranked, key=lambda d: ranked[d], reverse=True)
        hits10 = sum(1 for d in ranked[:10] if d in relevant)
        hits100 = sum(1 for d in ranked[:100] if d in relevant)
        totals["recall@10"] += hits10 / len(relevant)
        totals["recall@100"] += hits100 / len(relevant)
        totals["success@10"] += 1.0 if hits10 else 0.0
        for i, d in enumerate(ranked[:10]):
            if d in relevant:
                totals["mrr@10"] += 1.0 / (i + 1)
                break
        dcg = 0.0
        for i, d in enumerate(ranked[:10]):
            g = judged.get(d, 0)
            if g > 0:
                dcg += (2 ** g - 1) / math.log2(i + 2)
        ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
        idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
        totals["ndcg@10"] += dcg / idcg
    print(json.dumps({k: v / n for k, v in totals.items()}))


if __name__ == "__main__":
    main()
