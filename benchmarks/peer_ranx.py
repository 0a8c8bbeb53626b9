"""ranx peer: Qrels.from_file / Run.from_file (kind='trec') + evaluate.

ranx's ndcg is linear gain (Jarvelin & Kekalainen); ndcg_burges is
exponential gain (2^g - 1), the same as rag_eval's default ndcg.
Pass --graded to also compute ndcg_burges@10.
"""
import json
import sys

from ranx import Qrels, Run, evaluate


def main():
    graded = "--graded" in sys.argv
    qrels = Qrels.from_file(sys.argv[1], kind="trec")
    run = Run.from_file(sys.argv[2], kind="trec")
    metrics = ["recall@10", "recall@100", "hit_rate@10", "mrr@10", "ndcg@10"]
    if graded:
        metrics.append("ndcg_burges@10")
    res = evaluate(qrels, run, metrics)
    out = {"recall@10": res["recall@10"], "recall@100": res["recall@100"],
           "success@10": res["hit_rate@10"], "mrr@10": res["mrr@10"],
           "ndcg(gain=linear)@10": res["ndcg@10"]}
    if graded:
        out["ndcg@10"] = res["ndcg_burges@10"]
    print(json.dumps({k: float(v) for k, v in out.items()}))


if __name__ == "__main__":
    main()
