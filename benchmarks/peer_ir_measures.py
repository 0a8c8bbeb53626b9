"""ir_measures peer: read_trec_run/read_trec_qrels + calc_aggregate.

ir_measures' nDCG@10 uses the qrels grades as gains (linear), like
trec_eval's ndcg_cut.10.
"""
import json
import sys

import ir_measures
from ir_measures import R, RR, Success, nDCG


def main():
    qrels = ir_measures.read_trec_qrels(sys.argv[1])
    run = ir_measures.read_trec_run(sys.argv[2])
    measures = [R@10, R@100, Success@10, RR@10, nDCG@10]
    agg = ir_measures.calc_aggregate(measures, qrels, run)
    names = ["recall@10", "recall@100", "success@10", "mrr@10", "ndcg(gain=linear)@10"]
    print(json.dumps({n: float(agg[m]) for n, m in zip(names, measures)}))


if __name__ == "__main__":
    main()
