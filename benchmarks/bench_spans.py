#!/usr/bin/env python3
"""Span measures on a layout like Chroma's chunking benchmark (issue 26).

    python3 benchmarks/bench_spans.py generate [--out DIR]
    python3 benchmarks/bench_spans.py run [--repeat 7] [--out DIR] [--rag-eval FILE]

``generate`` (seeded, ~2 s, ~10 MB under benchmarks/data/spans/, git-ignored)
writes what the issue describes: 5 documents of 400,000 characters; 9,440
queries (472 questions, each asked 20 times) with 1-3 evidence spans of
20-400 characters in one document (``labels.jsonl``, a span label a line);
the documents cut into 400-character chunks (``chunks-400.jsonl``, 5,000)
and the same cut in four (``chunks-100.jsonl``, 20,000); and for each map a
top-10 run (``run-400.jsonl``, ``run-100.jsonl``): most of a query's top
chunks overlap its spans, the rest are drawn from its document or another.

``run`` times ``python3 rag_eval.py labels.jsonl RUN --chunks MAP --k 10
--metrics span_recall,span_precision(dup=count),span_iou(dup=count)`` as a
whole process on each map, the two interleaved in every round, and prints
the medians and the ratio of the finer map's to the coarser's (the issue's
target: at most 1.5).  Standard library only.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "data", "spans")
DEFAULT_RAG_EVAL = os.path.join(os.path.dirname(HERE), "rag_eval.py")
MEASURES = "span_recall,span_precision(dup=count),span_iou(dup=count)"

DOCS, DOC_LENGTH, QUESTIONS, REPEATS, TOP = 5, 400000, 472, 20, 10


def write(path, rows):
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True) + "\n")


def chunk_map(size):
    return [{"id": "d%d#%d" % (d, start // size), "doc": "d%d" % d, "start": start,
             "end": start + size} for d in range(DOCS) for start in range(0, DOC_LENGTH, size)]


def ranking(rng, doc, spans, size):
    """A top 10 of chunks of ``size``: those the spans overlap first (most of
    them), then neighbours and chunks of other documents."""
    hits = []
    for start, end in spans:
        hits.extend(range(start // size, (end - 1) // size + 1))
    hits = list(dict.fromkeys(hits))
    rng.shuffle(hits)
    top = ["d%d#%d" % (doc, n) for n in hits[:rng.randint(1, TOP)] if rng.random() < 0.8]
    while len(top) < TOP:
        other = rng.randrange(DOCS) if rng.random() < 0.5 else doc
        chunk = "d%d#%d" % (other, rng.randrange(DOC_LENGTH // size))
        if chunk not in top:
            top.append(chunk)
    return top


def cmd_generate(args):
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(26)
    questions = []
    for _ in range(QUESTIONS):
        doc = rng.randrange(DOCS)
        spans = []
        for _ in range(rng.choice([1, 1, 2, 2, 3])):
            start = rng.randrange(DOC_LENGTH - 400)
            spans.append((start, start + rng.randint(20, 400)))
        questions.append((doc, spans))
    labels, runs = [], {400: [], 100: []}
    for n in range(QUESTIONS * REPEATS):
        doc, spans = questions[n % QUESTIONS]
        qid = "q%05d" % n
        labels.extend({"query_id": qid, "doc": "d%d" % doc, "start": s, "end": e, "grade": 1}
                      for s, e in spans)
        for size, rows in runs.items():
            rows.append({"query_id": qid, "docs": ranking(rng, doc, spans, size)})
    write(os.path.join(args.out, "labels.jsonl"), labels)
    for size, rows in runs.items():
        write(os.path.join(args.out, "chunks-%d.jsonl" % size), chunk_map(size))
        write(os.path.join(args.out, "run-%d.jsonl" % size), rows)
    print("bench_spans: %d queries, %d span labels, in %s" % (QUESTIONS * REPEATS, len(labels),
                                                             args.out))


def cmd_run(args):
    at = lambda name: os.path.join(args.out, name)     # noqa: E731
    argv = {size: [sys.executable, args.rag_eval, at("labels.jsonl"), at("run-%d.jsonl" % size),
                   "--chunks", at("chunks-%d.jsonl" % size), "--k", "10", "--metrics",
                   MEASURES, "--format", "json"] for size in (400, 100)}
    walls = {size: [] for size in argv}
    for _ in range(args.repeat):
        for size, command in argv.items():
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            walls[size].append(time.perf_counter() - started)
    coarse, fine = (statistics.median(walls[size]) for size in (400, 100))
    print("bench_spans: medians of %d rounds: 400-character chunks %.3f s, 100-character "
          "chunks %.3f s (%.2fx)" % (args.repeat, coarse, fine, fine / coarse))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("generate", "run"):
        one = sub.add_parser(name)
        one.add_argument("--out", default=DEFAULT_OUT)
        if name == "run":
            one.add_argument("--repeat", type=int, default=7)
            one.add_argument("--rag-eval", default=DEFAULT_RAG_EVAL)
    args = parser.parse_args()
    (cmd_generate if args.command == "generate" else cmd_run)(args)


if __name__ == "__main__":
    main()
