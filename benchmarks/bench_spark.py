#!/usr/bin/env python3
"""The Spark example's wall time and driver memory, next to the single machine.

    /path/to/venv-with-pyspark/bin/python benchmarks/bench_spark.py WORK 200000 [2000000 ...]

For each size: examples/spark/make_data.py writes a graded run, then the
command line (`rag_eval.py QRELS RUN --format json`) and
examples/spark/score_spark.py (local[2]) score it, each timed (wall, and
peak RSS: the command line's process, the Spark driver's Python process; the
JVM is apart) and their reports compared but for "inputs".  No target: the
point is equality and the path to a cluster (benchmarks/README.md).
"""

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPARK = os.path.join(ROOT, "examples", "spark")
MEASURES = ["--metrics", "recall,ndcg,mrr,map", "--k", "5,10"]


def timed(argv):
    """(wall seconds, peak RSS MB by /usr/bin/time, stderr) of one command."""
    started = time.monotonic()
    done = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit("bench_spark: %s exited %d: %s" % (argv[1], done.returncode, done.stderr[-1500:]))
    return wall, int(done.stderr.strip().splitlines()[-1]) / 1024, done.stderr


def report(path):
    with open(path) as handle:
        data = json.load(handle)
    data.pop("inputs")
    return data


def main():
    work, sizes = sys.argv[1], [int(n) for n in sys.argv[2:]] or [200000]
    for size in sizes:
        data = os.path.join(work, "q%d" % size)
        subprocess.run([sys.executable, os.path.join(SPARK, "make_data.py"), data,
                        "--queries", str(size)], check=True)
        local, spark = os.path.join(data, "local.json"), os.path.join(data, "spark.json")
        local_wall, local_mb, _ = timed(
            [sys.executable, os.path.join(ROOT, "rag_eval.py"), os.path.join(data, "qrels.jsonl"),
             os.path.join(data, "run.jsonl")] + MEASURES + ["--format", "json", "-o", local])
        spark_wall, _, err = timed(
            [sys.executable, os.path.join(SPARK, "score_spark.py"), data] + MEASURES +
            ["--out", spark, "--stats"])
        driver = [line for line in err.splitlines() if line.startswith("score_spark:")]
        print("%d queries: command line %.1f s, %.0f MB; Spark local[2] %.1f s (%s); same: %s"
              % (size, local_wall, local_mb, spark_wall, driver[-1] if driver else "?",
                 report(local) == report(spark)))


if __name__ == "__main__":
    main()
