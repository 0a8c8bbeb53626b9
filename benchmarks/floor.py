#!/usr/bin/env python3
"""The floor of pure Python on a TREC run: what reading it costs before any scoring.

    python3 benchmarks/floor.py [RUN] [--repeat 7] [--peer-python PATH]

Times whole processes, each stage alone, split over the cores as rag_eval
splits a large run (forked workers, one byte range each; the parent waits):

  start     the interpreter starting and exiting (``python3 -c pass``)
  read      each worker reads its byte range, in blocks of about 1 MB
  split     ... and cuts each block into tokens (``bytes.split``: C speed)
  order     ... and compares each score token with the next, as bytes (is
            the run in order?  rag_eval compares decimal tokens of one width
            without float(): see _decimal_tokens)
  ids       ... and hashes every retrieved id once (into a set per block):
            a repeated id moves the ids below it up, so each id of a query's
            top must be compared with the others and looked up in the labels
            (on a run deeper than its deepest cutoff, only the top's ids:
            this row then overstates the floor)
  qrels     ... the parent first reads and splits the qrels (before forking)

No stage validates, groups, ranks or scores anything, so an exact scorer in
Python can hardly be faster than the last row on this machine: it must read
every line (to refuse a bad one), check the order of the scores, find
repeated ids and load the qrels.  (The order row compares every pair of
neighbours in one map; rag_eval's per-query check, a sort that finds the
scores already in order, costs about 0.06 s of CPU on bench.py's graded run,
against about 0.15 s here: the row overstates by some 0.04 s of wall time.)
With ``--peer-python`` (a venv with pytrec-eval-terrier) the same rounds time
benchmarks/peer_pytrec_eval.py on the run and its qrels, and the table says
what 4x it would take.  Medians of
``--repeat`` interleaved rounds; standard library only.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RUN = os.path.join(HERE, "data", "graded", "run.txt")

STAGE = r'''
import operator, os, sys
path, stage, qrels = sys.argv[1], sys.argv[2], sys.argv[3]
STAGES = ["read", "split", "order", "ids", "qrels"]
depth = STAGES.index(stage)
if stage == "qrels":
    with open(qrels, "rb") as handle:
        judged = handle.read().split()
size, workers = os.path.getsize(path), min(os.cpu_count() or 1, 8)
cuts = [size * i // workers for i in range(workers + 1)]

def work(lo, hi):
    with open(path, "rb") as handle:
        if lo:      # the lines that start in [lo, hi) are this worker's
            handle.seek(lo - 1)
            handle.readline()
        while handle.tell() < hi:
            # Blocks of about 1 MB of whole lines, as rag_eval reads them.
            data = handle.read(min(1 << 20, hi - handle.tell())) + handle.readline()
            if depth >= 1:
                tokens = data.split()
            if depth >= 2:
                scores = tokens[4::6]
                sum(map(operator.lt, scores, scores[1:]))
            if depth >= 3:
                set(tokens[2::6])

pids = []
for lo, hi in zip(cuts[1:-1], cuts[2:]):
    pid = os.fork()
    if pid == 0:
        work(lo, hi)
        os._exit(0)
    pids.append(pid)
work(cuts[0], cuts[1])
for pid in pids:
    os.waitpid(pid, 0)
'''


def timed(argv):
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", default=DEFAULT_RUN)
    parser.add_argument("--qrels", help="default: qrels.txt beside the run")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--peer-python", help="a Python with pytrec_eval: time it too")
    args = parser.parse_args()
    qrels = args.qrels or os.path.join(os.path.dirname(args.run), "qrels.txt")
    cases = [("start", [sys.executable, "-c", "pass"])]
    cases += [(stage, [sys.executable, "-c", STAGE, args.run, stage, qrels])
              for stage in ("read", "split", "order", "ids", "qrels")]
    if args.peer_python:
        cases.append(("pytrec_eval", [args.peer_python,
                                      os.path.join(HERE, "peer_pytrec_eval.py"), qrels,
                                      args.run]))
    walls = {name: [] for name, _ in cases}
    for _ in range(args.repeat):
        for name, argv in cases:
            walls[name].append(timed(argv))
    print("%s, %d workers, medians of %d rounds" % (args.run, min(os.cpu_count() or 1, 8),
                                                    args.repeat))
    for name, _ in cases:
        print("  %-12s %.3f s" % (name, statistics.median(walls[name])))
    if args.peer_python:
        peer = statistics.median(walls["pytrec_eval"])
        floor = statistics.median(walls["qrels"])
        print("  4x pytrec_eval needs %.3f s end to end; the floor is %.3f s, %.2f of it"
              % (peer / 4, floor, floor / (peer / 4)))


if __name__ == "__main__":
    main()
