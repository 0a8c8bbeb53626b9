#!/usr/bin/env python3
"""Write the tables a Spark job reads, and the same data as the files rag_eval reads.

    python3 make_data.py OUT --queries 20000 [--seed 7]   # generated: graded ids and spans
    python3 make_data.py OUT --queries 20000 --spans       # span labels and a chunk map
    python3 make_data.py OUT --degrade 0.2                 # a worse run: it fails a gate
    python3 make_data.py OUT --bundled                     # the repository's qrels.json/run.json

OUT gets, as flat JSONL tables (one row a retrieved or labelled item, as a
lake table holds them): run_rows.jsonl (query_id, id, score), and either
qrels_rows.jsonl (query_id, id, grade) or, with spans, span_rows.jsonl
(query_id, doc, start, end, grade) and chunk_rows.jsonl (id, doc, start,
end).  Beside them, the same data grouped one query a line as rag_eval's
command line reads it: run.jsonl, qrels.jsonl (or labels.jsonl) and
chunks.jsonl; and judge.jsonl, a judge's verdict on each query's answer
({"query_id": ..., "correct": true}), which the driver reads.  The generated data has graded labels, ties, queries the run
misses and queries with no relevant label; the same seed, the same bytes.
"""

import argparse
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(path, rows):
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")


def generated(queries, seed, spans, degrade=0.0):
    """(qrels, run, chunks): {qid: labels}, {qid: {id: score}}, [chunk records]
    (None for id labels); ``degrade``: the share of queries, the first ones,
    whose run retrieves none of the ids it would have found (a worse run)."""
    rng = random.Random(seed)
    docs, chunks = ["doc%04d" % n for n in range(2000)], []
    for doc in docs:
        start = 0
        for part in range(5):
            end = start + rng.randint(200, 400)
            chunks.append({"id": "%s#%d" % (doc, part), "doc": doc, "start": start, "end": end})
            start = end
    by_doc = {}
    for chunk in chunks:
        by_doc.setdefault(chunk["doc"], []).append(chunk)
    qrels, run = {}, {}
    for n in range(queries):
        qid = "q%06d" % n
        if spans:
            labels = []
            for doc in rng.sample(docs, rng.randint(1, 2)):
                chunk = rng.choice(by_doc[doc])
                start = rng.randint(chunk["start"], chunk["end"] - 50)
                end = min(start + rng.randint(20, 300), by_doc[doc][-1]["end"])
                labels.append({"doc": doc, "start": start, "end": end,
                               "grade": rng.choice([1, 2])})
        else:
            labels = {c["id"]: rng.choice([0, 1, 1, 2, 3])
                      for c in rng.sample(chunks, rng.randint(1, 4))}
        qrels[qid] = labels
        # The run's draws are the query's own: a worse run keeps the same labels.
        draw = random.Random("%d:%s" % (seed, qid))
        if draw.random() < 0.03:
            continue                            # a query the run misses: it scores 0
        near = [c["id"] for c in draw.sample(chunks, 15)]
        relevant = [label_id for label_id in (labels if not spans else ()) if draw.random() < 0.5]
        if spans:
            relevant = [draw.choice(by_doc[label["doc"]])["id"] for label in labels
                        if draw.random() < 0.6]
        if n < degrade * queries:
            relevant = []
        run[qid] = {i: round(draw.choice([0.5, 0.6, 0.6, 0.7, 0.8, 0.9]) + draw.random() / 10, 2)
                    for i in near + relevant}
    return qrels, run, chunks if spans else None


def bundled():
    """The repository's example: ranked lists given scores that keep their order."""
    with open(os.path.join(ROOT, "qrels.json")) as handle:
        qrels = json.load(handle)
    with open(os.path.join(ROOT, "run.json")) as handle:
        ranked = json.load(handle)
    run = {}
    for qid, ids in ranked.items():
        scores = {}
        for rank, chunk_id in enumerate(ids):
            scores.setdefault(chunk_id, float(len(ids) - rank))   # a repeat: its best rank
        run[qid] = scores
    return qrels, run, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--queries", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--spans", action="store_true", help="span labels and a chunk map")
    parser.add_argument("--bundled", action="store_true", help="the repository's example")
    parser.add_argument("--degrade", type=float, default=0.0,
                        help="the share of queries that lose what they would have found")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    qrels, run, chunks = bundled() if args.bundled else generated(
        args.queries, args.seed, args.spans, args.degrade)
    out = lambda name: os.path.join(args.out, name)     # noqa: E731
    write(out("run_rows.jsonl"), ({"query_id": q, "id": i, "score": s}
                                  for q, scores in run.items() for i, s in scores.items()))
    write(out("run.jsonl"), ({"query_id": q, "scores": s} for q, s in sorted(run.items())))
    if chunks is None:
        write(out("qrels_rows.jsonl"), ({"query_id": q, "id": i, "grade": g}
                                        for q, labels in qrels.items() for i, g in labels.items()))
        write(out("qrels.jsonl"), ({"query_id": q, "relevant": labels}
                                   for q, labels in sorted(qrels.items())))
    else:
        rows = [dict(label, query_id=q) for q, labels in sorted(qrels.items()) for label in labels]
        write(out("span_rows.jsonl"), rows)
        write(out("labels.jsonl"), rows)
        write(out("chunk_rows.jsonl"), chunks)
        write(out("chunks.jsonl"), chunks)
    judge = random.Random(args.seed + 1)    # its own draws: the tables stay as they were
    write(out("judge.jsonl"), ({"query_id": q, "correct": judge.random() < 0.65}
                               for q in sorted(qrels)))


if __name__ == "__main__":
    main()
