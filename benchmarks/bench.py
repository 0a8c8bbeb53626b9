#!/usr/bin/env python3
"""Benchmark harness for rag_eval ("Speed and scale").

Standard library only.  Peers (trec_eval C, pytrec_eval, ir_measures, ranx)
are run as separate processes with another interpreter (``--peer-python``),
so this script works when they are not installed: missing peers are skipped.

    python3 benchmarks/bench.py generate [--out DIR]
    python3 benchmarks/bench.py run [--repeat 3] [--peer-python PATH]
                                    [--only DATASET ...] [--tools TOOL ...]
                                    [--json FILE]

See benchmarks/README.md.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_DATA = os.path.join(HERE, "data")
DEFAULT_RAG_EVAL = os.path.join(REPO, "rag_eval.py")
DEFAULT_PEER_PYTHON = "/work/venvs/bench/bin/python"

# --------------------------------------------------------------------------
# Data generation
# --------------------------------------------------------------------------

DOC_UNIVERSE = 8841823  # MS MARCO passage collection size
RUN_TAG = "bench"


def _scores(rng, n, tie_p):
    """n descending scores rounded to 6 decimals; adjacent ties w.p. tie_p."""
    s = round(20.0 + rng.random() * 10.0, 6)
    out = []
    app = out.append
    rnd = rng.random
    for _ in range(n):
        app(s)
        if rnd() >= tie_p:
            s = round(s - (1e-6 + rnd() * 0.02), 6)
    return out


def _lines(qid, docs, scores):
    return "".join(
        "%s Q0 %s %d %.6f %s\n" % (qid, d, i, s, RUN_TAG)
        for i, (d, s) in enumerate(zip(docs, scores), 1)
    )


def _did(n):
    return "D%07d" % n


def _rank_skewed(rng, n, power):
    """A rank in [0, n) skewed towards the top (log-uniform ** power)."""
    return min(n - 1, int(n ** (rng.random() ** power)) - 1)


def gen_msmarco(out, n_queries=7000, depth=1000, seed=42,
                scale_sizes=(1000, 2000, 4000), json_queries=2000):
    """Binary qrels, ~1-2 relevant per query; scale_* prefixes; JSON copy."""
    rng = random.Random(seed)
    d_ms = os.path.join(out, "msmarco")
    os.makedirs(d_ms, exist_ok=True)
    runs = [open(os.path.join(d_ms, "run.txt"), "w", buffering=1 << 22)]
    qrel_lines = []
    scale = []
    for nq in scale_sizes:
        name = "scale_%dM" % (nq * depth // 1000000)
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        scale.append((nq, d, open(os.path.join(d, "run.txt"), "w", buffering=1 << 22)))
    json_run = {}
    json_qrels = {}
    for qn in range(n_queries):
        qid = "Q%d" % (1000 + qn * 7)
        docs = [_did(x) for x in rng.sample(range(DOC_UNIVERSE), depth)]
        scores = _scores(rng, depth, tie_p=0.03)
        nrel = 1 if rng.random() < 0.8 else 2
        rels = []
        for _ in range(nrel):
            if rng.random() < 0.85:  # relevant id retrieved somewhere
                r = _rank_skewed(rng, depth, 1.6)
                rels.append(docs[r])
            else:  # relevant id not retrieved
                while True:
                    d = _did(rng.randrange(DOC_UNIVERSE))
                    if d not in docs:
                        break
                rels.append(d)
        rels = list(dict.fromkeys(rels))
        block = _lines(qid, docs, scores)
        runs[0].write(block)
        ql = "".join("%s 0 %s 1\n" % (qid, d) for d in rels)
        qrel_lines.append(ql)
        for nq, d, f in scale:
            if qn < nq:
                f.write(block)
        if qn < json_queries:
            json_run[qid] = dict(zip(docs, scores))
            json_qrels[qid] = {d: 1 for d in rels}
    runs[0].close()
    with open(os.path.join(d_ms, "qrels.txt"), "w") as f:
        f.write("".join(qrel_lines))
    for nq, d, f in scale:
        f.close()
        with open(os.path.join(d, "qrels.txt"), "w") as g:
            g.write("".join(qrel_lines[:nq]))
    dj = os.path.join(out, "json")
    os.makedirs(dj, exist_ok=True)
    with open(os.path.join(dj, "qrels.json"), "w") as f:
        json.dump(json_qrels, f)
    with open(os.path.join(dj, "run.json"), "w", buffering=1 << 22) as f:
        json.dump(json_run, f)
    with open(os.path.join(dj, "run_list.json"), "w", buffering=1 << 22) as f:
        json.dump({q: list(s) for q, s in json_run.items()}, f)
    with open(os.path.join(dj, "run.jsonl"), "w", buffering=1 << 22) as f:
        for q, s in json_run.items():
            f.write(json.dumps({"query_id": q, "scores": s}))
            f.write("\n")


def gen_graded(out, n_queries=20000, depth=100, seed=43):
    rng = random.Random(seed)
    d_g = os.path.join(out, "graded")
    os.makedirs(d_g, exist_ok=True)
    qrel_lines = []
    with open(os.path.join(d_g, "run.txt"), "w", buffering=1 << 22) as f:
        for qn in range(n_queries):
            qid = "Q%d" % (5 + qn * 3)
            docs = [_did(x) for x in rng.sample(range(DOC_UNIVERSE), depth)]
            scores = _scores(rng, depth, tie_p=0.03)
            f.write(_lines(qid, docs, scores))
            judged = {}
            for _ in range(rng.randint(2, 8)):
                if rng.random() < 0.8:
                    d = docs[_rank_skewed(rng, depth, 1.3)]
                else:
                    d = _did(rng.randrange(DOC_UNIVERSE))
                judged[d] = rng.choices((0, 1, 2, 3), (4, 3, 2, 1))[0]
            if max(judged.values()) < 1:
                judged[next(iter(judged))] = rng.randint(1, 3)
            qrel_lines.append(
                "".join("%s 0 %s %d\n" % (qid, d, g) for d, g in judged.items()))
    with open(os.path.join(d_g, "qrels.txt"), "w") as f:
        f.write("".join(qrel_lines))


def cmd_generate(args):
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    t = time.perf_counter()
    gen_msmarco(out)
    print("msmarco + scale_* + json: %.1f s" % (time.perf_counter() - t))
    t = time.perf_counter()
    gen_graded(out)
    print("graded: %.1f s" % (time.perf_counter() - t))
    for root, _, files in sorted(os.walk(out)):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            print("  %-40s %8.1f MB" % (os.path.relpath(p, out), os.path.getsize(p) / 1e6))


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------

METRICS = ["recall@10", "recall@100", "success@10", "mrr@10", "ndcg@10",
           "ndcg(gain=linear)@10"]
SHORT = {"recall@10": "R@10", "recall@100": "R@100", "success@10": "S@10",
         "mrr@10": "RR@10", "ndcg@10": "nDCG@10", "ndcg(gain=linear)@10": "nDCGlin@10"}
# The issue's five measures, in ir_measures' spelling (nDCG@10 is linear gain, as
# trec_eval's ndcg_cut.10 and pytrec_eval compute it): the same work as the peers.
OUR_METRICS = "R@10,R@100,Success@10,RR@10,nDCG@10"

# dataset name -> (qrels, run, binary?, default tools)
TREC_PEERS = ["trec_eval", "pytrec_eval", "ir_measures", "ranx"]
DATASETS = {
    "startup": (None, None, True, ["ours", "ours_cli"]),
    "example": ("@repo/qrels.json", "@repo/run.json", False, ["ours", "ours_cli", "naive_json"]),
    "msmarco": ("msmarco/qrels.txt", "msmarco/run.txt", True, ["ours", "ours_cli"] + TREC_PEERS),
    "graded": ("graded/qrels.txt", "graded/run.txt", False, ["ours", "ours_cli"] + TREC_PEERS),
    "scale_1M": ("scale_1M/qrels.txt", "scale_1M/run.txt", True, ["ours", "ours_cli"]),
    "scale_2M": ("scale_2M/qrels.txt", "scale_2M/run.txt", True, ["ours", "ours_cli"]),
    "scale_4M": ("scale_4M/qrels.txt", "scale_4M/run.txt", True, ["ours", "ours_cli"]),
    "json_dict": ("json/qrels.json", "json/run.json", True, ["ours", "ours_cli", "naive_json"]),
    "json_list": ("json/qrels.json", "json/run_list.json", True, ["ours", "ours_cli", "naive_json"]),
    "jsonl": ("json/qrels.json", "json/run.jsonl", True, ["ours", "ours_cli", "naive_json"]),
}
ALL_TOOLS = ["ours", "ours_cli", "naive_json"] + TREC_PEERS
PEER_MODULES = {"pytrec_eval": "pytrec_eval", "ir_measures": "ir_measures", "ranx": "ranx"}


class ToolMissing(Exception):
    pass


def _tree_rss_kib(pid):
    """Summed VmRSS of a process and all its descendants (Linux /proc), in KiB."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            with open("/proc/%d/status" % p) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
            for task in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, task)) as f:
                    stack.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return total


def run_measured(cmd, timeout, sample=False):
    """Run cmd; return (wall_s, peak_kib, returncode, stdout, stderr).

    peak_kib is the child's ru_maxrss; with ``sample``, the larger of that and
    the peak of the summed RSS of its whole process tree, sampled every 5 ms
    (so a tool that forks workers is charged for all of them).  The sampler
    takes CPU from the tool, so timed runs do not sample."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        peak = [0]
        done = threading.Event()

        def poll():
            while not done.is_set():
                peak[0] = max(peak[0], _tree_rss_kib(p.pid))
                done.wait(0.005)
        sampler = threading.Thread(target=poll, daemon=True)
        if sample:
            sampler.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            done.set()
            timer.cancel()
        wall = time.perf_counter() - t0
        if sample:
            sampler.join()
        p.returncode = os.waitstatus_to_exitcode(status) if hasattr(
            os, "waitstatus_to_exitcode") else (status >> 8)
        out.seek(0)
        err.seek(0)
        return (wall, max(ru.ru_maxrss, peak[0]), p.returncode,
                out.read().decode("utf-8", "replace"),
                err.read().decode("utf-8", "replace"))


def find_trec_eval(peer_python):
    exe = shutil.which("trec_eval")
    if exe:
        return exe
    if peer_python:
        cand = os.path.join(os.path.dirname(peer_python), "trec_eval")
        if os.access(cand, os.X_OK):
            return cand
    return None


def peer_available(peer_python, module):
    if not peer_python or not os.access(peer_python, os.X_OK):
        return False
    r = subprocess.run([peer_python, "-c", "import " + module],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


def build_cmd(tool, ds, qrels, run, binary, args):
    """Return (argv, parser) for tool on dataset; raise ToolMissing."""
    if tool == "ours":
        if not os.path.exists(args.rag_eval):
            raise ToolMissing("%s not found" % args.rag_eval)
        if ds == "startup":
            return [args.our_python, args.rag_eval, "--help"], None
        metrics = OUR_METRICS
        return ([args.our_python, args.rag_eval, qrels, run, "--metrics", metrics,
                 "--format", "json"], parse_ours)
    if tool == "ours_cli":
        exe = installed_cli(args)
        if ds == "startup":
            return [exe, "--help"], None
        metrics = OUR_METRICS
        return [exe, qrels, run, "--metrics", metrics, "--format", "json"], parse_ours
    if tool == "naive_json":
        return ([args.our_python, os.path.join(HERE, "naive_json.py"), qrels, run],
                parse_json_means)
    if tool == "trec_eval":
        exe = find_trec_eval(args.peer_python)
        if not exe:
            raise ToolMissing("trec_eval binary not on PATH nor next to --peer-python")
        return ([exe, "-c", "-q", "-m", "recall.10,100", "-m", "success.10",
                 "-m", "recip_rank", "-m", "ndcg_cut.10", qrels, run], parse_trec_eval)
    if tool in PEER_MODULES:
        if not args._peer_ok.get(tool):
            raise ToolMissing("%s not importable with %s" % (PEER_MODULES[tool], args.peer_python))
        script = os.path.join(HERE, "peer_%s.py" % tool)
        extra = [] if binary else ["--graded"]
        return [args.peer_python, script, qrels, run] + extra, parse_json_means
    raise ToolMissing("unknown tool " + tool)


def installed_cli(args):
    """The ``rag-eval`` command installed next to --our-python, if it runs this
    checkout's rag_eval.py (`pip install --no-deps .` into that venv)."""
    exe = os.path.join(os.path.dirname(args.our_python), "rag-eval")
    if not os.path.exists(exe):
        raise ToolMissing("no %s (pip install --no-deps . into that venv)" % exe)
    probe = subprocess.run([args.our_python, "-c", "import rag_eval; print(rag_eval.__file__)"],
                           capture_output=True, text=True, cwd="/")
    with open(args.rag_eval, "rb") as mine:
        want = hashlib.sha256(mine.read()).hexdigest()
    try:
        with open(probe.stdout.strip(), "rb") as theirs:
            have = hashlib.sha256(theirs.read()).hexdigest()
    except OSError:
        have = None
    if have != want:
        raise ToolMissing("%s is not this checkout's rag_eval.py (pip install --no-deps "
                          "--force-reinstall . into that venv)" % exe)
    return exe


def parse_ours(stdout):
    data = json.loads(stdout)
    means = data.get("mean", data)
    return {k: float(v) for k, v in means.items() if isinstance(v, (int, float))}


def parse_json_means(stdout):
    return {k: float(v) for k, v in json.loads(stdout).items()}


def parse_trec_eval(stdout):
    """trec_eval -q output -> means; RR@10 derived from per-query recip_rank."""
    vals = {}
    rr10 = []
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        m, q, v = parts
        if m == "recip_rank" and q != "all":
            v = float(v)
            rr10.append(v if v >= 0.1 - 1e-12 else 0.0)
        if q == "all":
            vals[m] = float(v)
    out = {"recall@10": vals.get("recall_10"), "recall@100": vals.get("recall_100"),
           "success@10": vals.get("success_10"),
           "ndcg(gain=linear)@10": vals.get("ndcg_cut_10")}
    if rr10:
        out["mrr@10"] = sum(rr10) / len(rr10)
    return {k: v for k, v in out.items() if v is not None}


def time_once(rec, args):
    """One timed run of a tool; its means are parsed from the first run."""
    wall, rss, rc, out, err = run_measured(rec["cmd"], args.timeout)
    if rc != 0:
        rec["error"] = "exit %d: %s" % (rc, (err.strip().splitlines() or [""])[-1][:200])
        return
    rec["walls"].append(wall)
    rec["rss_kib"].append(rss)
    if rec["parser"] and "means" not in rec:
        try:
            rec["means"] = rec["parser"](out)
        except Exception as e:  # noqa: BLE001
            rec["error"] = "could not parse output: %r" % (e,)


def cmd_run(args):
    if args.our_python is None:
        args.our_python = (args.peer_python if os.path.exists(args.peer_python)
                           else sys.executable)
    data = os.path.abspath(args.data)
    args._peer_ok = {t: peer_available(args.peer_python, m) for t, m in PEER_MODULES.items()}
    for t, ok in args._peer_ok.items():
        if not ok:
            print("note: skipping %s (not importable with %s)" % (t, args.peer_python),
                  file=sys.stderr)
    if not find_trec_eval(args.peer_python):
        print("note: skipping trec_eval (no binary on PATH nor next to --peer-python)",
              file=sys.stderr)
    datasets = args.only or list(DATASETS)
    results = []
    for ds in datasets:
        if ds not in DATASETS:
            sys.exit("unknown dataset %r (choose from %s)" % (ds, ", ".join(DATASETS)))
        q_rel, r_rel, binary, tools = DATASETS[ds]
        qrels = run = None
        if q_rel:
            qrels, run = (os.path.join(REPO, p[6:]) if p.startswith("@repo/")
                          else os.path.join(data, p) for p in (q_rel, r_rel))
            if not (os.path.exists(qrels) and os.path.exists(run)):
                print("note: skipping %s: data missing (run `bench.py generate`)" % ds,
                      file=sys.stderr)
                continue
        if args.tools:
            tools = [t for t in args.tools if t in tools or (
                t in TREC_PEERS and ds.startswith("scale_"))]
        records = []
        for tool in tools:
            rec = {"dataset": ds, "tool": tool, "binary": binary, "walls": [], "rss_kib": []}
            try:
                rec["cmd"], rec["parser"] = build_cmd(tool, ds, qrels, run, binary, args)
            except ToolMissing as e:
                rec["error"] = "skipped: %s" % e
            records.append(rec)
            if tool == "ranx" and "error" not in rec and not args._ranx_warm:
                # populate numba's on-disk cache once (compilation is not timed)
                run_measured(rec["cmd"], args.timeout)
                args._ranx_warm = True
        # Rounds: each runs every tool once, so a slow spell of this shared machine
        # hits all tools alike and the ratios of medians stay fair.
        repeat = args.repeat if ds not in ("startup", "example") else max(args.repeat, 10)
        for _ in range(repeat):
            for rec in records:
                if "error" not in rec:
                    time_once(rec, args)
        for rec in records:
            if rec["walls"] and "error" not in rec:     # one more run, sampling memory
                rec["rss_kib"].append(run_measured(rec["cmd"], args.timeout, sample=True)[1])
                rec["median_s"] = statistics.median(rec["walls"])
                rec["peak_rss_mb"] = max(rec["rss_kib"]) / 1024.0
            rec.pop("parser", None)
            print("%-10s %-12s %s" % (ds, rec["tool"], (
                "%.3f s, %.0f MB" % (rec["median_s"], rec["peak_rss_mb"])
                if "median_s" in rec else rec.get("error"))), file=sys.stderr)
            results.append(rec)
    print(markdown(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def fmt(v):
    return "" if v is None else "%.4f" % v


def markdown(results):
    ours = {r["dataset"]: r.get("median_s") for r in results if r["tool"] == "ours"}
    head = ["dataset", "tool", "median wall s", "peak RSS MB", "ratio (peer/ours)"] + [
        SHORT[m] for m in METRICS]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        if "median_s" not in r:
            rows.append("| %s | %s | %s |" % (r["dataset"], r["tool"], r.get("error", "")) +
                        " |" * (len(head) - 3))
            continue
        base = ours.get(r["dataset"])
        ratio = "%.2f" % (r["median_s"] / base) if base and r["tool"] != "ours" else (
            "1" if r["tool"] == "ours" else "n/a")
        means = dict(r.get("means") or {})
        if r["binary"]:  # exponential == linear gain for binary qrels
            means.setdefault("ndcg@10", means.get("ndcg(gain=linear)@10"))
            means.setdefault("ndcg(gain=linear)@10", means.get("ndcg@10"))
        rows.append("| " + " | ".join(
            [r["dataset"], r["tool"], "%.3f" % r["median_s"], "%.0f" % r["peak_rss_mb"], ratio]
            + [fmt(means.get(m)) for m in METRICS]) + " |")
    return "\n".join(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command")
    g = sub.add_parser("generate", help="write the synthetic data sets")
    g.add_argument("--out", default=DEFAULT_DATA)
    r = sub.add_parser("run", help="time the tools on the data sets")
    r.add_argument("--data", default=DEFAULT_DATA)
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--peer-python", default=DEFAULT_PEER_PYTHON)
    r.add_argument("--our-python", default=None,
                   help="interpreter for rag_eval.py and naive_json.py (default: the "
                        "--peer-python one when it exists, so that every Python tool "
                        "starts the same interpreter with the same site-packages; "
                        "else this one)")
    r.add_argument("--rag-eval", default=DEFAULT_RAG_EVAL)
    r.add_argument("--only", nargs="+", metavar="DATASET", help=", ".join(DATASETS))
    r.add_argument("--tools", nargs="+", metavar="TOOL", help=", ".join(ALL_TOOLS))
    r.add_argument("--timeout", type=float, default=3600.0)
    r.add_argument("--json", metavar="FILE", help="save raw results")
    args = ap.parse_args(argv)
    if args.command == "generate":
        cmd_generate(args)
    elif args.command == "run":
        args._ranx_warm = False
        cmd_run(args)
    else:
        ap.print_help()


if __name__ == "__main__":
    main()
