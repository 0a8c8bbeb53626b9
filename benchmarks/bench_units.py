#!/usr/bin/env python3
"""Benchmarks for issue 11: documents, evidence and characters over a chunk map.

Standard library only.  See benchmarks/README.md, section "Units: documents,
evidence, characters (issue 11)".

    python3 benchmarks/bench_units.py generate [--out DIR]
    python3 benchmarks/bench_units.py run [--repeat 5] [--python PATH]
                                          [--before FILE] [--only CASE ...]
                                          [--json FILE]
    python3 benchmarks/bench_units.py load [--repeat 5] [--python PATH]

``generate`` writes (under benchmarks/data/units/, git-ignored; seeded):

* ``chunks.jsonl``: the chunk map, 50,000 documents x 20 chunks = 1,000,000
  lines ``{"id", "doc", "start", "end", "tokens"}`` (code-point offsets; one
  document in five chunked with overlapping windows);
* ``qrels_spans.jsonl``: span labels for 20,000 queries, one label a line
  ``{"query_id", "doc", "start", "end", "grade"}`` (1-3 span labels a query,
  some graded 0; 15 % of the queries also carry a whole-document label);
* ``qrels_ids.txt``: the same labels as TREC qrels on chunk ids (every chunk
  overlapping a span label gets its grade, every chunk of a document with a
  whole-document label gets that grade; the higher grade wins), so that the
  plain chunk-id path scores the same run;
* ``run.txt`` (TREC) and ``run.jsonl`` (``{"query_id", "docs"}``): 20,000
  queries x 100 distinct chunk ids.

``run`` times whole processes (``python rag_eval.py ...``), every case once a
round, medians over the rounds; ``load`` times, inside one process,
``rag_eval._read_chunks(path)`` against ``[json.loads(line) for line in
open(path)]``.  ``run`` does both.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench  # noqa: E402  (run_measured, _scores, _rank_skewed)

DEFAULT_DATA = os.path.join(HERE, "data", "units")
DEFAULT_RAG_EVAL = os.path.join(REPO, "rag_eval.py")
DEFAULT_BEFORE = "/tmp/rag_eval_before.py"   # git show 4aba8a5:rag_eval.py > /tmp/rag_eval_before.py
DEFAULT_PYTHON = "/work/venvs/peers/bin/python"

N_DOCS = 50000
CHUNKS_PER_DOC = 20
N_QUERIES = 20000
DEPTH = 100

# --------------------------------------------------------------------------
# Data generation
# --------------------------------------------------------------------------


def _doc(n):
    return "doc%05d" % n


def _chunk(doc_n, j):
    return "doc%05d#%02d" % (doc_n, j)


def _layout(rng):
    """The spans of each document's chunks: [[(start, end), ...] per doc]."""
    spans = []
    for _ in range(N_DOCS):
        overlap = 100 if rng.random() < 0.2 else 0     # sliding windows
        pos, doc = 0, []
        for _ in range(CHUNKS_PER_DOC):
            length = rng.randint(300, 1500)
            doc.append((pos, pos + length))
            pos += length - overlap
        spans.append(doc)
    return spans


def _labels(rng, spans):
    """[(doc_n, start, end, grade)] of one query; start None: whole document."""
    out = []
    n = rng.choices((1, 2, 3), (5, 3, 2))[0]
    doc_n = rng.randrange(N_DOCS)
    for i in range(n):
        if i and rng.random() < 0.5:
            doc_n = rng.randrange(N_DOCS)
        end_of_doc = spans[doc_n][-1][1]
        length = rng.randint(40, 800)
        start = rng.randrange(0, end_of_doc - length)
        grade = rng.choices((0, 1, 2, 3), (1, 4, 3, 2))[0] if i else rng.randint(1, 3)
        out.append((doc_n, start, start + length, grade))
    if rng.random() < 0.15:
        out.append((rng.randrange(N_DOCS), None, None, rng.randint(1, 2)))
    return out


def _overlapping(doc_spans, start, end):
    return [j for j, (s, e) in enumerate(doc_spans) if s < end and start < e]


def _ranking(rng, spans, labels):
    """DEPTH distinct (doc_n, j), the labelled chunks at ranks skewed to the top."""
    slots = [None] * DEPTH
    taken = set()

    def put(item, rank):
        if item in taken:
            return
        while slots[rank] is not None:
            rank = (rank + 1) % DEPTH
        slots[rank] = item
        taken.add(item)

    for doc_n, start, end, grade in labels:
        if rng.random() >= 0.85:     # this label's chunks are not retrieved
            continue
        js = (_overlapping(spans[doc_n], start, end) if start is not None
              else [rng.randrange(CHUNKS_PER_DOC)])
        rank = bench._rank_skewed(rng, DEPTH, 1.3)
        for j in js:
            if rng.random() < 0.9:   # now and then a piece of the evidence is missed
                put((doc_n, j), min(rank, DEPTH - 1))
            rank += rng.randint(0, 3)
        if rng.random() < 0.5:       # a neighbour of the evidence
            j = min(CHUNKS_PER_DOC - 1, js[-1] + 1)
            put((doc_n, j), bench._rank_skewed(rng, DEPTH, 1.0))
    labelled_docs = [lab[0] for lab in labels]
    for rank in range(DEPTH):
        while slots[rank] is None:
            if rng.random() < 0.1:   # another chunk of a labelled document
                item = (rng.choice(labelled_docs), rng.randrange(CHUNKS_PER_DOC))
            elif rng.random() < 0.3 and rank:   # same document as the chunk above
                item = (slots[rank - 1][0], rng.randrange(CHUNKS_PER_DOC))
            else:
                item = (rng.randrange(N_DOCS), rng.randrange(CHUNKS_PER_DOC))
            if item not in taken:
                slots[rank] = item
                taken.add(item)
    return slots


def cmd_generate(args):
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    rng = random.Random(11)
    t = time.perf_counter()
    spans = _layout(rng)
    with open(os.path.join(out, "chunks.jsonl"), "w", buffering=1 << 22) as f:
        for doc_n, doc in enumerate(spans):
            name = _doc(doc_n)
            f.write("".join(
                '{"id": "%s", "doc": "%s", "start": %d, "end": %d, "tokens": %d}\n'
                % (_chunk(doc_n, j), name, s, e, (e - s) // 4 + rng.randint(-20, 20))
                for j, (s, e) in enumerate(doc)))
    print("chunk map: %.1f s" % (time.perf_counter() - t))
    t = time.perf_counter()
    qr = open(os.path.join(out, "qrels_spans.jsonl"), "w", buffering=1 << 22)
    qi = open(os.path.join(out, "qrels_ids.txt"), "w", buffering=1 << 22)
    rt = open(os.path.join(out, "run.txt"), "w", buffering=1 << 22)
    rj = open(os.path.join(out, "run.jsonl"), "w", buffering=1 << 22)
    with qr, qi, rt, rj:
        for qn in range(N_QUERIES):
            qid = "q%05d" % (qn * 3 + 1)
            labels = _labels(rng, spans)
            by_chunk = {}
            for doc_n, start, end, grade in labels:
                if start is None:
                    qr.write('{"query_id": "%s", "doc": "%s", "grade": %d}\n'
                             % (qid, _doc(doc_n), grade))
                    js = range(CHUNKS_PER_DOC)
                else:
                    qr.write('{"query_id": "%s", "doc": "%s", "start": %d, "end": %d, '
                             '"grade": %d}\n' % (qid, _doc(doc_n), start, end, grade))
                    js = _overlapping(spans[doc_n], start, end)
                for j in js:
                    key = _chunk(doc_n, j)
                    by_chunk[key] = max(grade, by_chunk.get(key, grade))
            qi.write("".join("%s 0 %s %d\n" % (qid, c, g) for c, g in by_chunk.items()))
            ids = [_chunk(d, j) for d, j in _ranking(rng, spans, labels)]
            rt.write(bench._lines(qid, ids, bench._scores(rng, DEPTH, tie_p=0.03)))
            rj.write(json.dumps({"query_id": qid, "docs": ids}))
            rj.write("\n")
    # One query (the first): a process that loads the map and scores next to nothing.
    with open(os.path.join(out, "run.txt")) as f, open(os.path.join(out, "run_1q.txt"), "w") as g:
        g.write("".join(next(f) for _ in range(DEPTH)))
    with open(os.path.join(out, "qrels_ids.txt")) as f, \
            open(os.path.join(out, "qrels_ids_1q.txt"), "w") as g:
        g.write("".join(line for line in f if line.startswith("q00001 ")))
    print("qrels and runs: %.1f s" % (time.perf_counter() - t))
    for fn in sorted(os.listdir(out)):
        p = os.path.join(out, fn)
        with open(p, "rb") as f:
            lines = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
        print("  %-20s %8.1f MB %9d lines" % (fn, os.path.getsize(p) / 1e6, lines))


# --------------------------------------------------------------------------
# Whole-process timings
# --------------------------------------------------------------------------

K = 10
M_ID = "recall@10,success@10,mrr@10,ndcg@10,precision@10"
M_DOC = ",".join("%s(unit=doc)@10" % m for m in ("recall", "success", "mrr", "ndcg", "precision"))
M_CHAR = ("span_recall@10,span_precision@10,span_iou@10,recall(unit=evidence)@10,"
          "mrr(unit=evidence)@10")
M_CHAR_ALL = (M_CHAR + ",span_precision(dup=count)@10,span_iou(dup=count)@10,"
              "success(unit=evidence)@10,complete(unit=evidence)@10,"
              "recall(cover=0.5,unit=evidence)@10")

# case -> (script: "now" | "before", qrels, run, extra args, what it is)
CASES = {
    "a_before": ("before", "qrels_ids.txt", "run.txt", ["--metrics", M_ID],
                 "(a) plain chunk-id path, code before issue 11 (4aba8a5)"),
    "a_plain": ("now", "qrels_ids.txt", "run.txt", ["--metrics", M_ID],
                "(a) plain chunk-id path, no --chunks"),
    "b_id_chunks": ("now", "qrels_ids.txt", "run.txt",
                    ["--metrics", M_ID, "--chunks", "@chunks.jsonl"],
                    "(b) unit=id measures with --chunks given"),
    "c_doc": ("now", "qrels_spans.jsonl", "run.txt",
              ["--metrics", M_DOC, "--chunks", "@chunks.jsonl"],
              "(c) unit=doc measures, --chunks"),
    "c_doc_sep": ("now", "qrels_spans.jsonl", "run.txt",
                  ["--metrics", M_DOC, "--doc-sep", "#"],
                  "(c') unit=doc measures, --doc-sep '#' (no map to load)"),
    "d_chars": ("now", "qrels_spans.jsonl", "run.txt",
                ["--metrics", M_CHAR, "--chunks", "@chunks.jsonl"],
                "(d) span_recall/precision/iou + recall/mrr(unit=evidence), --chunks"),
    "d_chars_all": ("now", "qrels_spans.jsonl", "run.txt",
                    ["--metrics", M_CHAR_ALL, "--chunks", "@chunks.jsonl"],
                    "(d+) (d) and dup=count, success/complete(unit=evidence), cover=0.5"),
    "m_load": ("now", "qrels_ids_1q.txt", "run_1q.txt",
               ["--metrics", M_ID, "--chunks", "@chunks.jsonl"],
               "(e') start-up + map load: one query, --chunks, unit=id"),
    "s_start": ("now", "qrels_ids_1q.txt", "run_1q.txt", ["--metrics", M_ID],
                "start-up: one query, no map"),
    # bench.py's graded set (bench.py generate): issue 26's plain path
    "g_graded": ("now", "../graded/qrels.txt", "../graded/run.txt",
                 ["--k", "10,100", "--metrics", "recall,success,mrr,ndcg"],
                 "plain path: 2M graded TREC lines, 20k queries, --k 10,100 (issue 26)"),
    "a_plain_jsonl": ("now", "qrels_ids.txt", "run.jsonl", ["--metrics", M_ID],
                      "(a) plain chunk-id path, JSONL run"),
    "c_doc_jsonl": ("now", "qrels_spans.jsonl", "run.jsonl",
                    ["--metrics", M_DOC, "--chunks", "@chunks.jsonl"],
                    "(c) unit=doc measures, --chunks, JSONL run"),
}


def timed(cmd, timeout):
    """(wall s, cpu s, returncode, stdout, stderr) of one process.  cpu is
    user + sys from os.wait4, which includes the children it waited for (the
    forked workers and the hashing process): less sensitive than wall time to
    other load on a shared machine."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return (wall, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status),
                out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"))


def _argv(case, args, data):
    script, qrels, run, extra, _ = CASES[case]
    path = args.rag_eval if script == "now" else args.before
    extra = [os.path.join(data, x[1:]) if x.startswith("@") else x for x in extra]
    return [args.python, path, os.path.join(data, qrels), os.path.join(data, run)] + extra + [
        "--format", "json"]


LOAD_CHILD = r"""
import gc, json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import rag_eval
path, repeat = sys.argv[2], int(sys.argv[3])
def read_chunks():
    return rag_eval._read_chunks(path)
def json_lines():
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]
def records_only():      # rag_eval's parse alone: one json.loads of the joined lines
    return rag_eval._chunk_records(rag_eval._input_of(path).text(), path)
TASKS = {"read_chunks": read_chunks, "json_lines": json_lines, "chunk_records": records_only}
times = {(name, g): [] for name in TASKS for g in ("gc_on", "gc_off")}
cpu = {(name, g): [] for name in TASKS for g in ("gc_on", "gc_off")}
for i in range(repeat):
    order = list(TASKS) if i % 2 == 0 else list(TASKS)[::-1]
    for g in ("gc_off", "gc_on"):
        for name in order:
            gc.collect()
            if g == "gc_off":
                gc.disable()
            t, c = time.perf_counter(), time.process_time()
            out = TASKS[name]()
            times[(name, g)].append(time.perf_counter() - t)
            cpu[(name, g)].append(time.process_time() - c)
            gc.enable()
            n = len(out[0]) if name == "read_chunks" else len(out)
            del out
print(json.dumps({"lines": n, "times": {"%s/%s" % k: v for k, v in times.items()},
                  "cpu": {"%s/%s" % k: v for k, v in cpu.items()}}))
"""


def time_load(args, data):
    """In one process: _read_chunks vs json.loads per line (and the parse
    _read_chunks does), gc on (a plain script) and off (as the CLI runs)."""
    path = os.path.join(data, "chunks.jsonl")
    out = subprocess.run([args.python, "-c", LOAD_CHILD, os.path.dirname(args.rag_eval), path,
                          str(args.repeat)], capture_output=True, text=True, check=True)
    raw = json.loads(out.stdout)
    med = {k: statistics.median(v) for k, v in raw["times"].items()}
    for k in sorted(med):
        print("load %-22s median %.3f s  (%s)" % (k, med[k], ", ".join(
            "%.3f" % v for v in raw["times"][k])), file=sys.stderr)
    return {"lines": raw["lines"], "times": raw["times"], "cpu": raw["cpu"], "median": med,
            "median_cpu": {k: statistics.median(v) for k, v in raw["cpu"].items()}}


def cmd_run(args):
    data = os.path.abspath(args.data)
    if not os.path.exists(os.path.join(data, "chunks.jsonl")):
        sys.exit("no data in %s: run `bench_units.py generate` first" % data)
    if not os.access(args.python, os.X_OK):
        args.python = sys.executable
    cases = args.only or list(CASES)
    if not os.path.exists(args.before):
        print("note: skipping a_before (%s missing: git show 4aba8a5:rag_eval.py > %s)"
              % (args.before, args.before), file=sys.stderr)
        cases = [c for c in cases if c != "a_before"]
    recs = {c: {"case": c, "cmd": _argv(c, args, data), "walls": [], "cpus": []} for c in cases}
    for c in cases:     # one untimed run each: page cache warm, errors shown early
        wall, _, rc, out, err = timed(recs[c]["cmd"], args.timeout)
        if rc != 0:
            sys.exit("%s failed (exit %d): %s" % (c, rc, err.strip()[-500:]))
        rep = json.loads(out)
        recs[c]["mean"] = rep.get("mean")
        recs[c]["warnings"] = rep.get("warnings")
    for i in range(args.repeat):
        order = cases if i % 2 == 0 else cases[::-1]
        for c in order:
            wall, cpu, rc, _, err = timed(recs[c]["cmd"], args.timeout)
            if rc != 0:
                sys.exit("%s failed (exit %d): %s" % (c, rc, err.strip()[-500:]))
            recs[c]["walls"].append(wall)
            recs[c]["cpus"].append(cpu)
        print("round %d: %s" % (i + 1, "  ".join(
            "%s %.3f" % (c, recs[c]["walls"][-1]) for c in cases)), file=sys.stderr)
    for c in cases:
        recs[c]["median_s"] = statistics.median(recs[c]["walls"])
        recs[c]["median_cpu_s"] = statistics.median(recs[c]["cpus"])
    load = time_load(args, data) if not args.no_load else None
    print(markdown(recs, load, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cases": recs, "load": load, "python": args.python}, f, indent=1)


def _ratio(recs, num, den, key="walls", minus=None):
    """Median over rounds of (num - minus) / den, each round's own values."""
    if num not in recs or den not in recs or (minus and minus not in recs):
        return None
    sub = recs[minus][key] if minus else [0.0] * len(recs[num][key])
    return statistics.median((n - m) / d for n, m, d in zip(recs[num][key], sub, recs[den][key]))


def _f(v):
    return "n/a" if v is None else "%.2f" % v


def markdown(recs, load, args):
    rows = ["| case | what | median wall s | median CPU s | wall / a_plain | CPU / a_plain |"
            " wall per round |", "|---|---|---|---|---|---|---|"]
    for c, r in recs.items():
        rows.append("| %s | %s | %.3f | %.3f | %s | %s | %s |" % (
            c, CASES[c][4], r["median_s"], r["median_cpu_s"], _f(_ratio(recs, c, "a_plain")),
            _f(_ratio(recs, c, "a_plain", "cpus")), " ".join("%.2f" % w for w in r["walls"])))
    out = ["\n".join(rows), "\nRatios are medians of the ratios within each round."]
    if "m_load" in recs and "a_plain" in recs:
        out.append("\nScoring without the map load, same round: (case - m_load) / a_plain "
                   "(m_load = start-up + map load, one query):\n")
        out.append("| case | wall | CPU |\n|---|---|---|")
        for c, r in recs.items():
            if "--chunks" in r["cmd"] and c != "m_load":
                out.append("| %s | %s | %s |" % (c, _f(_ratio(recs, c, "a_plain", minus="m_load")),
                                                 _f(_ratio(recs, c, "a_plain", "cpus", "m_load"))))
    if load:
        m = load["median"]
        out.append("\n| in-process, %d lines, median s | gc on | gc off (as the CLI) |\n"
                   "|---|---|---|" % load["lines"])
        for name in ("read_chunks", "json_lines", "chunk_records"):
            out.append("| %s | %.3f | %.3f |" % (name, m[name + "/gc_on"], m[name + "/gc_off"]))
        for key, what in (("times", "wall"), ("cpu", "CPU")):
            t = load[key]
            out.append("| read_chunks / json_lines, %s (median of per-round ratios) | %.2f | %.2f |"
                       % ((what,) + tuple(statistics.median(
                           a / b for a, b in zip(t["read_chunks/" + g], t["json_lines/" + g]))
                           for g in ("gc_on", "gc_off"))))
        if "a_plain" in recs:
            load_s = m["read_chunks/gc_off"]
            out.append("\nScoring without the map load, in-process load subtracted "
                       "(case - %.3f s) / a_plain median:\n" % load_s)
            out.append("| case | scoring s | ratio |\n|---|---|---|")
            for c, r in recs.items():
                if "--chunks" in r["cmd"] and c != "m_load":
                    sc = r["median_s"] - load_s
                    out.append("| %s | %.3f | %.2f |" % (c, sc, sc / recs["a_plain"]["median_s"]))
    out.append("\nMeans (first run):")
    for c, r in recs.items():
        out.append("* %s: %s" % (c, ", ".join("%s %.4f" % kv for kv in (r["mean"] or {}).items())))
    return "\n".join(out)


def cmd_ab(args):
    """Two or more versions of rag_eval.py, interleaved case by case in every
    round (the order reversed every other round): medians, and the scoring
    ratio (case - m_load) / a_plain of each version, each round's own values."""
    data = os.path.abspath(args.data)
    if not os.access(args.python, os.X_OK):
        args.python = sys.executable
    versions = dict(v.split("=", 1) for v in args.versions)
    cases = args.only
    res = {(v, c): [] for v in versions for c in cases}
    for i in range(args.repeat):
        order = [(v, c) for c in cases for v in versions]
        for v, c in (order if i % 2 == 0 else order[::-1]):
            cmd = _argv(c, argparse.Namespace(python=args.python, rag_eval=versions[v],
                                              before=None), data)
            wall, cpu, rc, _, err = timed(cmd, args.timeout)
            if rc != 0:
                sys.exit("%s %s failed (exit %d): %s" % (v, c, rc, err.strip()[-500:]))
            res[v, c].append((wall, cpu))
        print("round %d: %s" % (i + 1, "  ".join("%s/%s %.2f/%.2f" % ((v, c) + res[v, c][-1])
                                                  for v in versions for c in cases)),
              file=sys.stderr)
    print("| version | case | median wall s | median CPU s | scoring wall | scoring CPU |")
    print("|---|---|---|---|---|---|")
    for v in versions:
        for c in cases:
            walls, cpus = zip(*res[v, c])
            ratios = ["", ""]
            if c not in ("a_plain", "m_load") and {"a_plain", "m_load"} <= set(cases):
                for k in (0, 1):
                    ratios[k] = "%.2f×" % statistics.median(
                        (res[v, c][i][k] - res[v, "m_load"][i][k]) / res[v, "a_plain"][i][k]
                        for i in range(args.repeat))
            print("| %s | %s | %.3f | %.3f | %s | %s |" % (v, c, statistics.median(walls),
                                                        statistics.median(cpus), *ratios))


def cmd_load(args):
    if not os.access(args.python, os.X_OK):
        args.python = sys.executable
    load = time_load(args, os.path.abspath(args.data))
    print(json.dumps(load["median"], indent=1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command")
    g = sub.add_parser("generate", help="write the synthetic data (~10 s, ~200 MB)")
    g.add_argument("--out", default=DEFAULT_DATA)
    for name in ("run", "load"):
        r = sub.add_parser(name)
        r.add_argument("--data", default=DEFAULT_DATA)
        r.add_argument("--repeat", type=int, default=5)
        r.add_argument("--python", default=DEFAULT_PYTHON,
                       help="interpreter for every timed process (default %s when it "
                       "exists, else this one)" % DEFAULT_PYTHON)
        r.add_argument("--rag-eval", default=DEFAULT_RAG_EVAL)
        if name == "run":
            r.add_argument("--before", default=DEFAULT_BEFORE,
                           help="rag_eval.py before issue 11 (a_before)")
            r.add_argument("--only", nargs="+", metavar="CASE", choices=list(CASES))
            r.add_argument("--no-load", action="store_true", help="skip the in-process load timing")
            r.add_argument("--timeout", type=float, default=1800.0)
            r.add_argument("--json", metavar="FILE", help="save raw results")
    a = sub.add_parser("ab", help="versions of rag_eval.py interleaved in every round")
    a.add_argument("versions", nargs="+", metavar="NAME=PATH")
    a.add_argument("--only", nargs="+", metavar="CASE", choices=list(CASES),
                   default=["a_plain", "c_doc", "d_chars", "m_load"])
    a.add_argument("--data", default=DEFAULT_DATA)
    a.add_argument("--repeat", type=int, default=5)
    a.add_argument("--python", default=DEFAULT_PYTHON)
    a.add_argument("--timeout", type=float, default=1800.0)
    args = ap.parse_args(argv)
    if args.command == "generate":
        cmd_generate(args)
    elif args.command == "run":
        cmd_run(args)
    elif args.command == "load":
        cmd_load(args)
    elif args.command == "ab":
        cmd_ab(args)
    else:
        ap.print_help()


if __name__ == "__main__":
    main()
