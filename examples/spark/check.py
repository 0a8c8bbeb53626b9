#!/usr/bin/env python3
"""Prove that the Spark job gives the single machine's report, byte for byte.

    python3 check.py WORK [--queries 20000] [--master local[2]]

For the bundled example, a generated run with graded id labels (and a
judge's verdicts: both tiers and the answer stages) and one with span
labels and a chunk map: make_data.py writes a run and a worse one; the
command line saves the baseline of the first, then gates the worse one
(exit 1) or the run itself (exit 0) against it, writing its JSON report;
score_spark.py does the same from the tables.  The JSON reports must be
equal but for "inputs" (files have paths, rows counts and hashes), and the
exit codes the same; and a run row that does not parse fails the job with
exit 2 and one line.  Exit 0 when all are; 1 naming the first difference.
Run it with the Python that has pyspark; Spark failing to start fails it.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RAG_EVAL = os.path.join(os.path.dirname(os.path.dirname(HERE)), "rag_eval.py")

CASES = [   # (name, make_data options, measures, cutoffs, the sides gated, judged)
    ("bundled", ["--bundled"], "recall,success,mrr,ndcg", "1,3,5", ["base"], False),
    ("graded", [], "recall,ndcg,mrr,map,precision", "5,10", ["worse"], True),
    ("spans", ["--spans"], "recall(unit=evidence),span_recall,ndcg(unit=doc),mrr(unit=doc)",
     "5,10", ["worse"], False),
]


def run(argv, expect=None):
    done = subprocess.run(argv, capture_output=True, text=True)
    if expect is not None and done.returncode not in expect:
        sys.exit("check: %s exited %d: %s" % (" ".join(argv), done.returncode,
                                              done.stderr.strip()[-2000:]))
    return done.returncode


def without_inputs(path):
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    data.pop("inputs", None)
    return json.dumps(data, indent=2, sort_keys=True)


def files(folder, spans):
    """The command line's QRELS RUN [--chunks MAP] of a make_data.py folder."""
    at = lambda name: os.path.join(folder, name)    # noqa: E731
    if spans:
        return [at("labels.jsonl"), at("run.jsonl"), "--chunks", at("chunks.jsonl")]
    return [at("qrels.jsonl"), at("run.jsonl")]


def judge(folder):
    """The judge's verdicts on each answer: --answer correct (the stages)."""
    return ["--scores", os.path.join(folder, "judge.jsonl"), "--answer", "correct"]


def check_case(work, name, make, measures, cutoffs, sides, judged, queries, master):
    spans = "--spans" in make
    base, worse = os.path.join(work, name, "base"), os.path.join(work, name, "worse")
    size = [] if "--bundled" in make else ["--queries", str(queries)]
    run([sys.executable, os.path.join(HERE, "make_data.py"), base] + make + size, {0})
    degrade = [] if "--bundled" in make else ["--degrade", "0.3"]
    run([sys.executable, os.path.join(HERE, "make_data.py"), worse] + make + size + degrade,
        {0})
    options = ["--metrics", measures, "--k", cutoffs]
    bounds = ["--unjudged-bounds"]      # on both sides (see score_spark.py)
    baseline = os.path.join(work, name, "baseline.json")
    run([sys.executable, RAG_EVAL] + files(base, spans) + options +
        (judge(base) if judged else []) + ["--save-baseline", baseline, "--format", "json"],
        {0})
    for side in (os.path.join(work, name, side) for side in sides):
        local, distributed = side + "-local.json", side + "-spark.json"
        scores = judge(side) if judged else []
        started = time.monotonic()
        local_code = run([sys.executable, RAG_EVAL] + files(side, spans) + options + bounds +
                         scores + ["--baseline", baseline, "--format", "json", "--output", local],
                         {0, 1})
        local_seconds = time.monotonic() - started
        started = time.monotonic()
        spark_code = run([sys.executable, os.path.join(HERE, "score_spark.py"), side] + options
                         + bounds + scores + ["--baseline", baseline, "--out", distributed,
                                     "--master", master]
                         + (["--spans"] if spans else []), {0, 1})
        spark_seconds = time.monotonic() - started
        label = "%s/%s" % (name, os.path.basename(side))
        if spark_code != local_code:
            sys.exit("check: %s: the Spark job exited %d, the command line %d"
                     % (label, spark_code, local_code))
        a, b = without_inputs(local), without_inputs(distributed)
        if a != b:
            for number, (x, y) in enumerate(zip(a.splitlines(), b.splitlines()), 1):
                if x != y:
                    sys.exit("check: %s: the reports differ at line %d:\n  local %s\n  spark %s"
                             % (label, number, x, y))
            sys.exit("check: %s: the reports differ in length" % label)
        print("check: %s: same report (%d bytes), exit %d; %.1f s local, %.1f s Spark"
              % (label, len(a), local_code, local_seconds, spark_seconds))


def check_bad_rows(work, master):
    """A row that does not parse fails the job the command line's way: exit 2,
    one line naming it, no report written."""
    folder = os.path.join(work, "bad")
    run([sys.executable, os.path.join(HERE, "make_data.py"), folder, "--bundled"], {0})
    rows = os.path.join(folder, "run_rows.jsonl")
    with open(rows, encoding="utf-8") as handle:
        lines = handle.readlines()
    lines[2] = json.dumps(dict(json.loads(lines[2]), score="high")) + "\n"
    with open(rows, "w", encoding="utf-8") as handle:
        handle.writelines(lines)
    out = os.path.join(folder, "report.json")
    done = subprocess.run([sys.executable, os.path.join(HERE, "score_spark.py"), folder,
                           "--metrics", "recall", "--out", out, "--master", master],
                          capture_output=True, text=True)
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    if done.returncode != 2 or not last.startswith("score_spark: error: a table row does "
                                                   "not parse (field score, value high"):
        sys.exit("check: bad rows: exit %d, last line %r" % (done.returncode, last))
    if os.path.exists(out):
        sys.exit("check: bad rows: a report was written")
    print("check: bad rows: exit 2, %s" % last)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work")
    parser.add_argument("--queries", type=int, default=20000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    for case in CASES:
        check_case(args.work, *case, args.queries, args.master)
    check_bad_rows(args.work, args.master)


if __name__ == "__main__":
    main()
