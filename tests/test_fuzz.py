"""Seeded fuzzing (issue 9): every input form, the options and the library
calls; each case reproducible from (seed, case), see FuzzTest.
"""

import csv
import copy
import gzip
import io
import json
import math
import os
import random
import re
import shutil
import signal
import sys
import traceback
import unittest

import rag_eval
from tests.support import TempDir, _FUZZ_VALUES


# ---------------------------------------------------------------------------
# Seeded fuzzing (issue 9)
# ---------------------------------------------------------------------------

def _fuzz_int(name, default):
    raw = os.environ.get(name, "")
    return int(raw) if raw.strip() else default


_FUZZ_DIGITS = "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669" \
               "\uff10\uff11\uff12\uff13\uff15\u0967\u0968\u07c1\U0001d7d9\U0001d7dc"
_FUZZ_SPACES = ["\t", "\v", "\f", "\r", "\u00a0", "\u2003", "\u3000", "\x1c", "\x85",
                " ", "  ", "\t ", " \r", "\r\n", "\n", "\n\n", "\u2028", "\ufeff", "\x00"]
_FUZZ_NUMBERS = ["1e400", "-1e400", "1" + "0" * 400, "-" + "1" * 400, "NaN", "Infinity",
                 "-Infinity", "nan", "inf", "1_0", "0x1", "1.", ".5", "+1", "01", "-0", "-0.0",
                 "1e-400", "4.9e-324", "1e308", "true", "false", "null", '"1"', '""', "2.5",
                 "-1", "-2", "0", "3", "9" * 25, "1E5", "1e+5", "\u0663", "\uff11", "1\u00a0",
                 "[]", "{}", "[1]", "{\"a\": 1}", "1.0", "2.0", "18446744073709551616",
                 "-9223372036854775809", "0.5", "1e-200", "0e0"]
_FUZZ_STRINGS = ["", " ", "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\u0000", "a\\nb",
                 "\u00e9", "e\u0301", "\U0001f600", "q1", "d1", "query_id", "a b", "a\\tb",
                 "#", "/", "\\\\", "\\\"", "x" * 300, "-", "recall@5", "format", "rag_eval.baseline"]


class _Fuzz:
    """One reproducible case: every choice comes from random.Random("seed:case")."""

    def __init__(self, seed, case):
        self.rng = random.Random("%d:%d" % (seed, case))

    # -- a valid world ------------------------------------------------------
    def world(self, queries=None, depth=None):
        rng = self.rng
        nq = queries or rng.randint(1, 6)
        style = rng.choice(["plain", "plain", "odd", "numeric"])

        def doc(i):
            if style == "odd":
                return rng.choice(["d%d", "doc#%d", "p/%d", "\u00e9%d", "x.%d", "%d-\U0001f600"]) % i
            return ("%d" % i) if style == "numeric" else "d%d" % i
        qids = ["q%d" % i for i in range(nq)]
        if style == "odd" and rng.random() < 0.5:
            qids[0] = rng.choice(["Q\u00e9", "1", "q#1", "q/1", "-x"])
        qrels, run = {}, {}
        for q in qids:
            docs = sorted({doc(rng.randrange(20)) for _ in range(rng.randint(1, 6))})
            qrels[q] = {d: rng.choice([-1, 0, 0, 1, 1, 2, 3]) for d in docs}
        if all(g < 1 for v in qrels.values() for g in v.values()):
            qrels[qids[0]][doc(0)] = 1
        for q in qids:
            if rng.random() < 0.1:
                continue              # in the qrels, not in the run
            n = depth or rng.randint(0, 12)
            ranked = list(dict.fromkeys(doc(rng.randrange(25)) for _ in range(n)))
            if rng.random() < 0.5:
                run[q] = ranked
            else:
                run[q] = {d: rng.choice([round(rng.uniform(-5, 20), rng.randint(0, 4)),
                                         rng.randrange(10), 1.0]) for d in ranked}
        return qrels, run

    def qrels_text(self, qrels):
        rng = self.rng
        form = rng.choice(["json", "jsonl", "trec"])
        if form == "json":
            return form, json.dumps(qrels, indent=rng.choice([None, None, 1]))
        if form == "jsonl":
            return form, "".join(json.dumps({"query_id": q, "grades": g}) + "\n"
                                 for q, g in qrels.items())
        sep = rng.choice([" ", " ", "\t"])
        return form, "".join(sep.join([q, "0", d, str(g)]) + "\n"
                             for q, grades in qrels.items() for d, g in grades.items()
                             if not any(c.isspace() for c in q + d))

    def run_text(self, run):
        rng = self.rng
        form = rng.choice(["json", "json_list", "json_scores", "jsonl", "trec", "trec"])
        as_scores = {q: (v if isinstance(v, dict) else
                         {d: float(len(v) - i) for i, d in enumerate(v)}) for q, v in run.items()}
        if form == "json":
            return "json", json.dumps(run, indent=rng.choice([None, None, 1]))
        if form == "json_list":
            return "json", json.dumps({q: (sorted(v, key=v.get, reverse=True)
                                           if isinstance(v, dict) else v) for q, v in run.items()})
        if form == "json_scores":
            return "json", json.dumps(as_scores)
        if form == "jsonl":
            return "jsonl", "".join(json.dumps({"query_id": q, ("docs" if isinstance(v, list)
                                                               else "scores"): v}) + "\n"
                                    for q, v in run.items())
        lines = []
        for q, scores in as_scores.items():
            ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
            fmt = rng.choice(["%r", "%.3f", "%g", "%.6e"])
            lines += ["%s Q0 %s %d %s %s" % (q, d, r, fmt % s, rng.choice(["t", "run-1"]))
                      for r, (d, s) in enumerate(ranked, 1)]
        if rng.random() < 0.2:
            rng.shuffle(lines)
        lines = [line for line in lines if len(line.split()) == 6]
        return "trec", "".join(line + "\n" for line in lines)

    def baseline_obj(self, qrels, run, metrics):
        rng = self.rng
        try:
            report = rag_eval.evaluate(qrels, run, k=rng.choice([5, "1,5", 10]), metrics=metrics)
        except rag_eval.EvalError:
            return {"recall@5": 0.7}
        if report.unlabelled_run:   # never a saved baseline (baseline_dict refuses it)
            return dict(report.mean)
        if rng.random() < 0.5:
            mean = {m: min(1.0, max(0.0, v + rng.choice([0, 0, -0.05, 0.05, 0.3, -0.3])))
                    for m, v in report.mean.items()}
            if rng.random() < 0.3:
                mean = {rng.choice([m, m.upper(), "nDCG@10", "R@5", "recall_5", "P_5"]): v
                        for m, v in mean.items()}
            return mean
        return rag_eval.baseline_dict(report)

    # -- mutations ----------------------------------------------------------
    def mutate_obj(self, obj, depth=0):
        """Replace, drop or add one node of a JSON-like value."""
        rng = self.rng
        if depth > 4 or not isinstance(obj, (dict, list)) or not obj or rng.random() < 0.2:
            return copy.deepcopy(rng.choice(_FUZZ_VALUES))
        obj = copy.copy(obj)
        if isinstance(obj, dict):
            key = rng.choice(list(obj))
            what = rng.random()
            if what < 0.15:
                del obj[key]
            elif what < 0.3:
                obj[rng.choice(_FUZZ_STRINGS).replace("\\", "")] = copy.deepcopy(
                    rng.choice(_FUZZ_VALUES))
            elif what < 0.4:
                obj[key + rng.choice(["", " ", "x", "\u00a0"])] = obj.pop(key)
            else:
                obj[key] = self.mutate_obj(obj[key], depth + 1)
        else:
            i = rng.randrange(len(obj))
            what = rng.random()
            if what < 0.2:
                del obj[i]
            elif what < 0.35:
                obj.insert(i, obj[i])
            else:
                obj[i] = self.mutate_obj(obj[i], depth + 1)
        return obj

    def mutate_text(self, text):
        rng = self.rng
        kind = rng.randrange(17)
        if kind == 0 and text:                                  # delete a line
            lines = text.splitlines(True)
            del lines[rng.randrange(len(lines))]
            return "".join(lines)
        if kind == 1 and text:                                  # duplicate a line
            lines = text.splitlines(True)
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            return "".join(lines)
        if kind == 2:                                           # white space of some kind
            i = self._near(text, " \t\n\"")
            return text[:i] + rng.choice(_FUZZ_SPACES) + text[i:]
        if kind == 3:                                           # a unicode digit
            spots = [i for i, c in enumerate(text) if c.isdigit()]
            if spots:
                i = rng.choice(spots)
                return text[:i] + rng.choice(_FUZZ_DIGITS) + text[i + 1:]
        if kind == 4:                                           # a number token
            spots = [m.span() for m in re.finditer(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)]
            if spots:
                a, b = rng.choice(spots)
                return text[:a] + rng.choice(_FUZZ_NUMBERS) + text[b:]
        if kind == 5:                                           # a string's content
            spots = [m.span(1) for m in re.finditer(r'"([^"\\]*)"', text)]
            if spots:
                a, b = rng.choice(spots)
                return text[:a] + rng.choice(_FUZZ_STRINGS) + text[b:]
        if kind == 6 and text:                                  # truncation
            return text[:rng.randrange(len(text))]
        if kind == 7:
            return rng.choice(["\ufeff", "\ufeff\ufeff", "\n", " \n", "\r\n"]) + text
        if kind == 8:                                           # swap two lines
            lines = text.splitlines(True)
            if len(lines) > 1:
                i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
                return "".join(lines)
        if kind == 9:                                           # a TREC column
            lines = text.splitlines(True)
            if lines:
                i = rng.randrange(len(lines))
                cols = lines[i].split(" ")
                j = rng.randrange(len(cols))
                if rng.random() < 0.5:
                    del cols[j]
                else:
                    cols.insert(j, rng.choice(["x", "0", "Q0", "1.5", "", "-", "#"]))
                lines[i] = " ".join(cols)
                return "".join(lines)
        if kind == 10:
            return text.replace("\n", rng.choice(["\r\n", "\r", "\n\n", "\v", "\f", "\x1c"]))
        if kind == 11:
            return text + rng.choice(["x", "\n", "]", "}", ",", "\x00", "\n\n\n", " ", "{}",
                                      "\nq9 Q0 d1 1 1.0 t\n", "\nq9 0 d1 1\n"])
        if kind == 12:                                          # deep nesting
            n = rng.choice([50, 1000, 100000])
            return text[:1] + "[" * n + "]" * n if rng.random() < 0.5 else "[" * n + "]" * n
        if kind == 13:                                          # empty or blank
            return rng.choice(["", " ", "\n", "{}", "[]", "null", "\ufeff", "0"])
        if kind == 14:
            i = self._near(text, ":,")
            return text[:i] + rng.choice(["", ",", ":", "\"\"", "null", "{", "[", "\"a\":1,",
                                          "\\", "\"\\ud800\"", "\"\\udc00\""]) + text[i:]
        if kind == 15 and len(text) > 1:                        # reverse a slice
            a = rng.randrange(len(text))
            b = min(len(text), a + rng.randint(1, 8))
            return text[:a] + text[a:b][::-1] + text[b:]
        i = self._near(text, "")                                # anything
        return text[:i] + chr(rng.choice([rng.randrange(32), rng.randrange(0x80, 0x3000),
                                           0xFFFD, 0xD7FF, 0x10FFFF])) + text[i:]

    def _near(self, text, chars):
        spots = [i for i, c in enumerate(text) if c in chars]
        if spots and self.rng.random() < 0.7:
            return self.rng.choice(spots) + self.rng.choice([0, 1])
        return self.rng.randint(0, len(text))

    def mutate_bytes(self, data):
        rng = self.rng
        kind = rng.randrange(6)
        if kind == 0 and data:                                  # byte flip
            i = rng.randrange(len(data))
            return data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
        if kind == 1 and data:
            i = rng.randrange(len(data))
            return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
        if kind == 2:                                           # invalid UTF-8
            i = rng.randint(0, len(data))
            return data[:i] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe2\x80",
                                          b"\xf4\x90\x80\x80", b"\x80"]) + data[i:]
        if kind == 3:
            return data.decode("utf-8", "replace").encode("utf-16")
        if kind == 4:
            return b"\x1f\x8b" + data
        return data[:len(data) // 2]

    def encode(self, text, mutate):
        """Text to stored bytes: maybe mutated, maybe gzip-compressed."""
        rng = self.rng
        data = text.encode("utf-8", "surrogatepass")
        if mutate and rng.random() < 0.25:
            data = self.mutate_bytes(data)
        if rng.random() < 0.15:
            data = gzip.compress(data, mtime=0)
            if mutate and rng.random() < 0.2:
                data = rng.choice([data[:-rng.randint(1, 12)], gzip.compress(data, mtime=0),
                                   data + b"garbage", data + data])
        return data

    def text_of(self, text, mutate):
        n = 0
        if mutate:
            n = self.rng.choice([0, 1, 1, 1, 2, 3])
        for _ in range(n):
            text = self.mutate_text(text)
        return text

    # -- argv ---------------------------------------------------------------
    def option(self, name):
        rng = self.rng
        pools = {
            "--k": ["5", "1,5,10", "3", "1", "20", "1,,5", " 5", "5 ", "0", "-1", "1.5", "",
                    "\u0665", "1e3", "all", "10" * 12, "5,5", "1,5\u00a0", "+5", "0x5", "1_0",
                    "100000"],
            "--metrics": ["recall,ndcg", "nDCG@10", "R@100,RR@3", "recall(rel=2)@5",
                          "ndcg(gain=linear)@3", "P_5", "success_10", "map_cut_3", "judged@2",
                          "context_precision@4", "precision,map", "nDCG(dcg=log2)@10",
                          "success(rel=2)@1", "hit_rate@3", "mrr", "rprec,bpref",
                          "map@all,ndcg(gain=linear)@all", "recip_rank,set_P", "foo", "", "recall@",
                          "recall@0", "recall(gain=linear)@5", "ndcg(gain=foo)@5",
                          "recall(rel=0)@5", "recall(rel=-1)@5", "recall(rel=1.5)@5", "mrr@all",
                          "recall, ndcg", "recall,,ndcg", "recall@5,R@5", "ndcg(gain=)@5",
                          "recall()@5", "recall(rel=2 )@5", "Recall@5", "recip_rank",
                          "recall@1e400", "recall(rel=1e400)@5", "recall@\u0665",
                          "judged(rel=2)@5", "\u0000", "recall@5\n",
                          "ndcg(gain=linear,gain=linear)@5",
                          # issues 11-13: units, budgets, abstention, unjudged ids
                          "recall(unit=doc),diversity(unit=doc)", "ndcg(unit=evidence)@5",
                          "recall(cover=0.5,unit=evidence)@3", "span_recall@3,span_iou(dup=count)@3",
                          "recall(budget=5,unit=doc)", "recall(budget=0)", "diversity@3",
                          "abstained,answered,clean@3,abstention_f1", "recall(unjudged=skip)@5",
                          "recall(cover=2,unit=evidence)@3", "complete(unit=doc)@all"],
            "--doc-sep": ["#", "", "d", "/", "%p", "\u00e9"],
            "--unit": ["id", "doc", "evidence", "x"],
            "--min-score": ["0.5", "-1", "nan", "x", "", "1e400"],
            "--pool-depth": ["5", "0", "x"],
            "--rel": ["1", "2", "3", "0", "-1", "1.5", "", "\u0662", "1e400", " 2", "1_0",
                      "9" * 30],
            "--max-drop": ["0.02", "5%", "0.1", "1", "100%", "-0.1", "nan", "inf", "0", "0%", "1e-400",
                           "%", "5%%", "0.02%", "99.9999%", "0.999999999", "1e-9", " 0.1 ",
                           "\u0660.1", "0x1", "-0", "-0%", "1e2%", "10**400"],
            "--alpha": ["0.05", "0", "1", "0.5", "nan", "1e-300", "-0.1", "x", "0.99999"],
            "--resamples": ["50", "1", "0", "-1", "x", "200", "1.5", "10" * 10, ""],
            "--seed": ["0", "1", "-1", "x", "1.5", "9" * 40, "", "\u0661"],
            "--format": ["text", "json", "markdown", "trec", "html"],
            "--max-bytes": ["60000", "800", "1", "0", "x", ""],
            "--average": ["scored", "trec_eval", "trec_eval", "x", ""],
            "--gate": ["tolerance", "significant", "significant"],
            "--gain": ["linear", "exponential"],
            "--qrels-format": list(rag_eval.FORMATS),
            "--run-format": list(rag_eval.FORMATS),
        }
        valid = {"--k": 5, "--metrics": 18, "--rel": 3, "--max-drop": 3, "--alpha": 1,
                 "--resamples": 1, "--seed": 2}
        pool = pools[name]
        if name in valid and rng.random() < 0.8:
            pool = pool[:valid[name]]
        return rng.choice(pool)

    def argv(self, names, qrels_form, run_form):
        """argv for files named in ``names`` (qrels, run, baseline, compare)."""
        rng = self.rng
        qrels, run = names["qrels"], names["run"]
        if rng.random() < 0.04:
            qrels, run = run, qrels
        argv = [qrels, run]
        extra = []
        if "baseline" in names and rng.random() < 0.7:
            extra += rng.choice([
                ["--baseline"], ["--baseline", ""], ["--baseline", "nope.json"],
                ["--baseline", "."], ["--baseline", qrels], ["--baseline", run]]
                if rng.random() < 0.15 else [["--baseline", names["baseline"]]])
        for name, p in (("--k", 0.3), ("--metrics", 0.35), ("--rel", 0.1), ("--max-drop", 0.2),
                        ("--format", 0.5), ("--gate", 0.15), ("--gain", 0.1), ("--alpha", 0.05),
                        ("--seed", 0.05), ("--qrels-format", 0.1), ("--run-format", 0.1),
                        ("--average", 0.1), ("--doc-sep", 0.08), ("--unit", 0.05),
                        ("--min-score", 0.05), ("--max-bytes", 0.05)):
            if rng.random() < p:
                extra += [name, self.option(name)]
        if rng.random() < 0.05:
            extra += ["--qrels-format", qrels_form]
        if "compare" in names and rng.random() < 0.3:
            extra += ["--compare", names["compare"]] * rng.choice([1, 1, 2])
        if rng.random() < 0.3 or "--compare" in extra or "significant" in extra:
            extra += ["--resamples", self.option("--resamples") if rng.random() < 0.1 else
                      rng.choice(["20", "100"])]
        if rng.random() < 0.3:
            extra += ["--per-query"]
        if rng.random() < 0.1:
            extra += ["--skip-extra-queries"]
        if rng.random() < 0.3:
            extra += ["--save-baseline", "sb.json" if rng.random() < 0.85 else
                      rng.choice(["", ".", "no/dir/sb.json", "out.txt", qrels, "-"])]
        if rng.random() < 0.1:
            extra += ["--accept"]
        if rng.random() < 0.1:
            extra += ["--allow-unlabelled-run"]
        if rng.random() < 0.02:
            extra += ["--debug"]
        if rng.random() < 0.3:
            extra += ["-o", "out.txt" if rng.random() < 0.8 else
                      rng.choice(["", ".", "no/dir/out", "-", "sb.json", "out.txt/", "out.html",
                                  "out.md", "out.json"])]
        if rng.random() < 0.03:
            extra += [rng.choice(["--bogus", "--k", "-o", "--version", "--help", "--list-measures", "extra.json",
                                  "--baseline=", "--max-drop=5%", "--k=", "--metrics="])]
        # options after the positionals, or interleaved: argparse takes both
        return argv + extra if rng.random() < 0.8 else extra[:0] + argv + extra


def _fuzz_snapshot(folder):
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder)
            if os.path.isdir(path):
                found[rel] = None
            else:
                with open(path, "rb") as handle:
                    found[rel] = handle.read()
    return found


def _fuzz_signature(kind, detail):
    """Dedupe key: the kind of failure plus the message with values blanked."""
    shape = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", detail)
    shape = re.sub(r"\d+", "N", shape)
    return "%s: %s" % (kind, shape[:160])


class _FuzzTimeout(BaseException):
    """A case ran longer than RAG_EVAL_FUZZ_TIMEOUT seconds."""


def _fuzz_alarm(signum, frame):
    raise _FuzzTimeout("case timed out")



def _fuzz_option(argv, *names):
    """The value of the last ``--name value`` or ``--name=value`` in argv."""
    value = None
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                value = argv[i + 1]
            elif arg.startswith(name + "=") and name.startswith("--"):
                value = arg[len(name) + 1:]
    return value


def _fuzz_where(exc):
    """function:line in rag_eval.py where ``exc`` (maybe None) was raised."""
    tb = traceback.extract_tb(exc.__traceback__) if exc is not None else []
    where = [f for f in tb if f.filename.endswith("rag_eval.py")]
    return "%s:%d" % (where[-1].name, where[-1].lineno) if where else "?"


def _fuzz_no_constant(token):
    raise ValueError("%s in the report" % token)


def _fuzz_short(args, kwargs):
    text = ", ".join([_fuzz_repr(a) for a in args] +
                     ["%s=%s" % (k, _fuzz_repr(v)) for k, v in kwargs.items()])
    return text[:400]


def _fuzz_repr(value):
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10 ** 30:
        return "10**%d" % len(str(abs(value)))
    text = repr(value)
    return text if len(text) < 120 else text[:117] + "..."


# ---------------------------------------------------------------------------
# The gate on a changed test set (issue 22)
# ---------------------------------------------------------------------------
#
# A gate case saves a baseline from a random test set, changes the test set
# (queries dropped, low-scoring ones first, added, moved between slices, in
# and out of the hold-out, rankings, judge scores and labels changed), gates
# the new run against the baseline and checks every row against
# _gate_reference_row: the paired rule on both sides' per-query values.

_GATE_MEASURES = ["recall,mrr", "ndcg,success", "mrr", "precision,recall",
                  "recall,ndcg,mrr,success,precision,map"]
_GATE_KS = ["3", "5", "1,5"]
_GATE_TOLERANCES = ["0", "0", "0.02", "0.05", "0.1", "0.3", "0%", "5%", "10%", "50%"]


def _gate_ranking(rng, labels):
    """A ranking of some labelled ids among others, or None (not in the run)."""
    kind = rng.random()
    if kind < 0.08:
        return None
    ranked = ["x%d" % rng.randrange(40) for _ in range(rng.randint(0, 6))]
    if kind > 0.35:                             # else it finds nothing labelled
        ranked += rng.sample(list(labels), rng.randint(1, len(labels)))
        rng.shuffle(ranked)
    return list(dict.fromkeys(ranked))


def _gate_query(rng, world):
    docs = ["d%d" % i for i in rng.sample(range(30), rng.randint(1, 4))]
    labels = {d: rng.choice([0, 1, 1, 2, 3]) for d in docs}
    if rng.random() < 0.07:
        labels = dict.fromkeys(docs, 0)         # a member with no relevant id: unscored
    return {"labels": labels, "ranking": _gate_ranking(rng, labels),
            "src": rng.choice("abc"), "hops": rng.choice(["one", "two", None]),
            "tags": rng.sample(["eu", "us", "pricing"], rng.randint(0, 2)) if world["tags"]
            else [],
            "held": world["holdout"] and rng.random() < 0.3,
            "score": round(rng.random(), 3) if rng.random() < 0.85 else None}


def _gate_low(state):
    """A query the run fails: no relevant id in its top 3."""
    ranking, labels = state["ranking"] or [], state["labels"] or {}
    return not any(labels.get(d, 0) >= 1 for d in ranking[:3])


def _gate_ready(world, state):
    """True for an open query with a relevant id, in the run (and judged)."""
    return (not state["held"] and bool(state["labels"]) and max(state["labels"].values()) >= 1
            and bool(state["ranking"]) and (state["score"] is not None or not world["judge"]))


def _gate_fix(rng, world):
    """What a test set needs to be scored at all: an open query with a
    relevant id in the run (and a judge score); with a hold-out, a member."""
    qs = world["queries"]
    while len(qs) < 2:
        qs["q%03d" % rng.randrange(100, 200)] = _gate_query(rng, world)
    if not any(_gate_ready(world, s) for s in qs.values()):
        state = qs[rng.choice(sorted(qs))]
        state["labels"] = dict(state["labels"] or {"d99": 1})
        doc = sorted(state["labels"])[0]
        state["labels"][doc] = max(1, state["labels"][doc])
        state.update(held=False, ranking=(state["ranking"] or []) + [doc],
                     score=state["score"] if state["score"] is not None else 0.5)
    if world["holdout"] and not any(s["held"] for s in qs.values()):
        qs[rng.choice([q for q in sorted(qs) if any(
            _gate_ready(world, s) for p, s in qs.items() if p != q)])]["held"] = True


def _gate_world(fz):
    rng = fz.rng
    meta = rng.random() < 0.75
    world = {"meta": meta, "holdout": meta and rng.random() < 0.5,
             "judge": rng.random() < 0.3, "tags": meta and rng.random() < 0.3, "queries": {}}
    for i in rng.sample(range(60), rng.randint(2, 9)):
        world["queries"]["q%03d" % i] = _gate_query(rng, world)
    _gate_fix(rng, world)
    return world


def _gate_changed(fz, world):
    """The test set after a change: some queries dropped (mostly those the
    run fails), some added, moved between slices, into or out of the
    hold-out, re-ranked, re-judged or relabelled."""
    rng = fz.rng
    new = copy.deepcopy(world)
    qs = new["queries"]
    change = 0.0 if rng.random() < 0.2 else 1.0     # else queries added or moved only
    if rng.random() < 0.6 * change:
        low = [q for q in sorted(qs) if _gate_low(qs[q])]
        pool = low if low and rng.random() < 0.7 else sorted(qs)
        for q in rng.sample(pool, rng.randint(1, max(1, len(pool) // 2))):
            how = rng.random()
            if how < 0.7:
                del qs[q]
            elif how < 0.85 and new["meta"]:
                qs[q]["labels"] = None              # left in the metadata only
            else:
                qs[q]["labels"] = dict.fromkeys(qs[q]["labels"], 0)   # no relevant id left
    if rng.random() < 0.5:
        for i in rng.sample(range(60, 100), rng.randint(1, 4)):
            qs["q%03d" % i] = _gate_query(rng, new)
    ids = sorted(qs)
    if new["meta"] and rng.random() < 0.5:
        for q in rng.sample(ids, rng.randint(1, len(ids))):
            field = rng.choice(["src", "hops", "tags"] if new["tags"] else ["src", "hops"])
            qs[q][field] = (rng.choice("abc") if field == "src" else
                            rng.choice(["one", "two", None]) if field == "hops" else
                            rng.sample(["eu", "us", "pricing"], rng.randint(0, 2)))
    if new["holdout"] and rng.random() < 0.5:
        for q in rng.sample(ids, rng.randint(1, min(3, len(ids)))):
            qs[q]["held"] = not qs[q]["held"]
    if rng.random() < 0.6 * change:
        for q in rng.sample(ids, rng.randint(1, len(ids))):
            if qs[q]["labels"]:
                qs[q]["ranking"] = _gate_ranking(rng, qs[q]["labels"])
    if new["judge"] and rng.random() < 0.5 * change:
        for q in rng.sample(ids, rng.randint(1, len(ids))):
            qs[q]["score"] = round(rng.random(), 3) if rng.random() < 0.7 else None
    if rng.random() < 0.1 * change:
        state = qs[rng.choice(ids)]
        if state["labels"]:
            doc = rng.choice(sorted(state["labels"]))
            state["labels"][doc] = rng.choice([0, 1, 2, 3])
    if new["meta"] and not new["holdout"] and rng.random() < 0.08:
        new["meta"] = new["tags"] = False           # gated without the metadata
    _gate_fix(rng, new)
    return new


def _gate_fields(world):
    """The slice fields a world's metadata carries (what --by may name)."""
    if not world["meta"]:
        return []
    qs = world["queries"].values()
    return (["src"] + ["hops"] * any(s["hops"] for s in qs) + ["tag"] * any(s["tags"] for s in qs)
            + ["split"] * world["holdout"])


def _gate_files(fz, world, w):
    """{name: bytes} of world ``w`` (0: the baseline's, 1: the new one)."""
    rng = fz.rng
    qs = world["queries"]
    qrels = {q: s["labels"] for q, s in qs.items() if s["labels"] is not None}
    run = {q: s["ranking"] for q, s in qs.items()
           if s["labels"] is not None and s["ranking"] is not None}
    files = {"qrels%d" % w: fz.qrels_text(qrels)[1], "run%d" % w: fz.run_text(run)[1]}
    if world["meta"]:
        lines = []
        for q, s in qs.items():
            slices = {"src": s["src"]}
            if s["hops"]:
                slices["hops"] = s["hops"]
            if world["holdout"]:
                slices["split"] = "holdout" if s["held"] else "open"
            record = {"query_id": q, "slices": slices}
            if s["tags"]:
                record["tags"] = s["tags"]
            lines.append(json.dumps(record) + "\n")
        files["m%d.jsonl" % w] = "".join(lines)
    if world["judge"]:
        files["s%d.jsonl" % w] = "".join(
            json.dumps({"query_id": q, "f": s["score"]}) + "\n" for q, s in qs.items()
            if s["labels"] is not None and (s["score"] is not None or rng.random() < 0.3))
    return {name: text.encode("utf-8") for name, text in files.items()}


def _gate_argv(world, w, measures, k, by=()):
    argv = ["qrels%d" % w, "run%d" % w, "--k", k, "--allow-unlabelled-run", "--metrics",
            measures + (",score(field=f)" if world["judge"] else "")]
    if world["meta"]:
        argv += ["--queries", "m%d.jsonl" % w]
    if world["holdout"]:
        argv += ["--holdout", "split=holdout"]
    if world["judge"]:
        argv += ["--scores", "s%d.jsonl" % w, "--allow-missing-scores"]
    for field in by:
        argv += ["--by", field]
    return argv


def _gate_tolerance(text):
    text = str(text)
    return (float(text[:-1]) / 100, True) if text.endswith("%") else (float(text), False)


def _gate_by_measure(rows):
    """{measure: {query: value}} of per-query rows {query: {measure: value}}."""
    out = {}
    for q, values in rows.items():
        for m, v in values.items():
            out.setdefault(m, {})[q] = v
    return out


def _gate_populations(truth, held, names, holdout):
    """{population: {measure: {query: value}}} of one side: every open
    query (None), each slice in ``names``, the hold-out."""
    rows, members = truth.get("per_query") or {}, truth.get("membership") or {}
    out = {None: _gate_by_measure(rows)}
    for name in names:
        out[name] = _gate_by_measure({q: v for q, v in rows.items()
                                      if name in members.get(q, ())})
    if holdout is not None:
        out[holdout] = _gate_by_measure(held or {})
    return out


def _gate_reference_row(then, now, then_holds, now_holds, tolerance, stated, anonymous=None):
    """(status, baseline, current, n, removed, added) the paired rule gives
    one measure of one population: ``then`` and ``now`` {query: value} (now
    None: the report does not score it); a side that does not hold its
    values (``*_holds`` False) is compared on its means when its queries are
    the other side's, else it is missing (for the hold-out, ``anonymous``:
    when its whole set of queries and the measure's count are the other
    side's, as its records keep no subset).  A relative tolerance is taken
    of the row's paired baseline."""
    if now is None:
        return "missing", None, None, None, 0, 0
    if then_holds and now_holds:
        both = sorted(set(then) & set(now))
        removed, added = len(set(then) - set(now)), len(set(now) - set(then))
    elif (set(then) == set(now) if anonymous is None
          else anonymous[0] == anonymous[1] and len(then) == len(now)):
        both, removed, added = None, 0, 0      # compared on each side's mean
    else:
        return "missing", None, None, None, 0, 0
    if both == []:
        return "missing", None, None, 0, removed, added
    if both is None:
        if not then:
            return "missing", None, None, 0, 0, 0
        before = math.fsum(then.values()) / len(then)
        after = math.fsum(now.values()) / len(now)
        both = then
    else:
        before = math.fsum(then[q] for q in both) / len(both)
        after = math.fsum(now[q] for q in both) / len(both)
    value, relative = tolerance
    drop = before - after
    of = before
    status = ("regressed" if drop > (value * of if relative else value) + 1e-9 else
              "dropped within tolerance" if drop > 1e-9 else
              "improved" if drop < -1e-9 else "unchanged")
    return status, before, after, len(both), removed, added


# --fail-on-removed counts the queries the baseline scored for a measure the
# report scores that have no value for it now in the same part of the test
# set: the open set (every scored query not held out) or the hold-out.  A
# query moved across the hold-out's boundary counts (no verdict pairs it).


def _gate_removed(then, now, holds, measures, holdout):
    """How many queries --fail-on-removed fails on (see above): the open
    set's lost ones, and the most any measure lost in a revealed hold-out
    (where both sides hold per-query values)."""
    def lost(pop):
        if not (holds[0].get(pop) and holds[1].get(pop)):
            return [set()]
        here = now.get(pop) or {}
        return [{q for q in then[pop][m] if q not in here.get(m, {})}
                for m in then[pop] if m in measures] or [set()]
    return len(set().union(*lost(None))) + (
        max(len(q) for q in lost(holdout)) if holdout is not None else 0)


class _GateFuzzCases:
    """FuzzTest's gate cases (issue 22): see test_gate_paired."""

    # About 45 ms a case (a few runs of main() each): 125 by default, and
    # RAG_EVAL_FUZZ_CASES / 20 when only that is set.
    GATE_CASES = _fuzz_int("RAG_EVAL_FUZZ_GATE_CASES", 0) or max(
        1, _fuzz_int("RAG_EVAL_FUZZ_CASES", 2500) // 20)

    def test_gate_paired(self):
        """Gate cases: a baseline saved (--save-baseline, sometimes
        --reveal-holdout; or one of means alone, from a report read back;
        or a flat file of means) from a random test set, gated after the
        test set changed (queries dropped, added, moved between slices, in
        and out of the hold-out; rankings, judge scores and labels changed),
        through the command line and, sometimes, a JSON report read back
        (with or without --per-query).  Each row is checked against
        _gate_reference_row on both sides' per-query values, the exit code
        against the rows and --fail-on-removed, and no output names a
        held-out query."""
        for case in self.cases(self.GATE_CASES):
            self.gate_case(case)
        self.report_failures()

    def gate_call(self, folder, argv, what, case, files, calls, refused=None):
        """(code, out, err) of a call expected to exit 0 or 1; None, recorded
        as a failure unless it is exit 2 saying ``refused``."""
        code, out, err, exc = self.call(folder, argv)
        if refused and exc is None and code == 2 and refused in err:
            return None
        if exc is not None or code not in (0, 1) or "Traceback" in out + err:
            self.record("gate case: %s" % what, "exit %r %r at %s; stderr %r" % (
                code, exc, _fuzz_where(exc), err[-300:]), case, files, calls)
            return None
        for line in err.splitlines():
            if not line.startswith("rag-eval: warning: "):
                self.record("gate case: %s stderr" % what, line[:200], case, files, calls)
        return code, out, err

    def gate_truth(self, folder, world, w, measures, k, doc, revealed, case, files, calls):
        """(open per-query rows and membership, held-out rows) of world
        ``w``: from ``doc`` when it holds them, else from a run with
        --reveal-holdout (the values the fuzzer knows, not the files)."""
        if world["holdout"] and not revealed:
            argv = _gate_argv(world, w, measures, k) + ["--reveal-holdout", "--per-query",
                                                        "--format", "json"]
            calls["truth%d" % w] = argv
            result = self.gate_call(folder, argv, "reference run", case, files, calls)
            if result is None:
                return None
            doc = json.loads(result[1])
        held = doc["holdout"].get("per_query") if world["holdout"] else None
        return doc, held

    def gate_case(self, case):
        fz = _Fuzz(self.SEED, 3 * 10 ** 6 + case)
        rng = fz.rng
        world0 = _gate_world(fz)
        world1 = _gate_changed(fz, world0)
        measures, k = rng.choice(_GATE_MEASURES), rng.choice(_GATE_KS)
        files = dict(_gate_files(fz, world0, 0), **_gate_files(fz, world1, 1))
        kind = rng.choices(["saved", "means", "flat"], [0.83, 0.12, 0.05])[0]
        if kind == "flat" and world0["holdout"]:
            kind = "saved"
        reveal0 = world0["holdout"] and kind != "flat" and rng.random() < 0.4
        fields0 = _gate_fields(world0)
        by0 = [] if kind == "means" else rng.sample(fields0, rng.randint(0, len(fields0)))
        folder = os.path.join(self.tmp, "g%d" % case)
        os.mkdir(folder)
        for name, data in files.items():
            with open(os.path.join(folder, name), "wb") as handle:
                handle.write(data)
        save = (_gate_argv(world0, 0, measures, k, by0) + ["--format", "json", "--per-query"]
                + ["--reveal-holdout"] * reveal0
                + ["--save-baseline", "b.json"] * (kind == "saved"))
        calls = {"save": save}
        try:
            self.gate_case_in(case, fz, folder, world0, world1, measures, k, kind, reveal0,
                              save, files, calls)
        finally:
            shutil.rmtree(folder)

    def gate_case_in(self, case, fz, folder, world0, world1, measures, k, kind, reveal0, save,
                     files, calls):
        rng = fz.rng
        # A run that meets no label is refused as a baseline, as it must be.
        result = self.gate_call(folder, save, "baseline run", case, files, calls,
                                refused="never saved as a baseline")
        if result is None:
            return
        doc0 = json.loads(result[1])
        held0 = {q for q, s in world0["queries"].items() if s["held"]}
        held1 = {q for q, s in world1["queries"].items() if s["held"]}
        open1 = {q for q, s in world1["queries"].items() if not s["held"]}
        path = os.path.join(folder, "b.json")
        try:
            if kind == "means":     # a baseline of means alone: a report read back, saved
                text = rag_eval.render_json(rag_eval.load_report(io.StringIO(result[1])))
                rag_eval.save_baseline(rag_eval.load_report(io.StringIO(text)), path)
            elif kind == "flat":
                with open(path, "w") as handle:
                    json.dump(doc0["mean"], handle)
        except Exception as exc:     # noqa: B902 - recorded, with where
            self.record("gate case: means-only baseline", "%s at %s: %s" % (
                type(exc).__name__, _fuzz_where(exc), str(exc)[:200]), case, files, calls)
            return
        with open(path, "rb") as handle:
            files["b.json"] = handle.read()
        base = json.loads(files["b.json"])
        if kind == "flat":
            base = {"mean": base}
        if not reveal0:
            self.gate_no_held_ids(held0, [result[1], result[2], files["b.json"].decode()],
                                  "baseline run", case, files, calls)
        truth0 = self.gate_truth(folder, world0, 0, measures, k, doc0, reveal0, case, files,
                                 calls)
        if truth0 is None:
            return
        if kind == "saved" and base.get("per_query") != doc0.get("per_query"):
            self.record("gate case: baseline per_query differs from the report's", "", case,
                        files, calls)
        # The gate run.
        measures1, k1 = (measures, k) if rng.random() < 0.85 else (
            rng.choice(_GATE_MEASURES), rng.choice(_GATE_KS))
        fields1 = _gate_fields(world1)
        by1 = rng.sample(fields1, rng.randint(0, len(fields1)))
        reveal1 = world1["holdout"] and rng.random() < 0.4
        tolerance = rng.choice(_GATE_TOLERANCES)
        mode = "significant" if rng.random() < 0.2 else "tolerance"
        frozen = rng.random() < 0.25
        gated = sorted(base.get("slices") or ()) + (
            [base["holdout"]["slice"]] if base.get("holdout") else [])
        slice_tolerances = {}
        if gated and rng.random() < 0.15:
            slice_tolerances[rng.choice(gated)] = rng.choice(_GATE_TOLERANCES)
        argv = (_gate_argv(world1, 1, measures1, k1, by1) + ["--reveal-holdout"] * reveal1
                + ["--baseline", "b.json", "--format", "json", "--per-query", "--max-drop",
                   tolerance, "--resamples", "20"] + ["--gate", "significant"] * (
                       mode == "significant") + ["--fail-on-removed"] * frozen)
        for name, value in slice_tolerances.items():
            argv += ["--slice-max-drop", "%s:%s" % (name, value)]
        calls["gate"] = argv
        result = self.gate_call(folder, argv, "gate run", case, files, calls)
        if result is None:
            return
        code, out, err = result
        doc1 = json.loads(out)
        if not reveal1:
            self.gate_no_held_ids(held1 | held0 - open1, [out, err], "gate run", case, files,
                                  calls)
        truth1 = self.gate_truth(folder, world1, 1, measures1, k1, doc1, reveal1, case, files,
                                 calls)
        if truth1 is None:
            return
        scored = set(doc1["measures"])
        lost = {m for m in scored if m.startswith("score(") and any(   # a member without it
            not s["held"] and (s["score"] is None or s["labels"] is None) and (
                s["labels"] is not None or world1["meta"]) for s in world1["queries"].values())}
        options = dict(tolerance=tolerance, mode=mode, frozen=frozen, lost=lost,
                       slice_tolerances=slice_tolerances, kind=kind, case=case, files=files,
                       calls=calls)
        holdout = base["holdout"]["slice"] if base.get("holdout") else None
        pops = [None] + sorted(base.get("slices") or ()) + [holdout] * (holdout is not None)
        holds = {p: kind != "flat" and "per_query" in base and (
            p is None or "membership" in base) for p in pops}
        if holdout is not None:
            holds[holdout] = "per_query" in base["holdout"]
        then = _gate_populations(truth0[0], truth0[1], sorted(base.get("slices") or ()), holdout)
        now = _gate_populations(truth1[0], truth1[1], sorted(base.get("slices") or ()), holdout)
        if not world1["meta"]:
            for name in base.get("slices") or ():
                now[name] = None
        gate = doc1["gate"]
        if gate["passed"] != (code == 0):
            self.record("gate case: gate.passed vs exit", "exit %d" % code, case, files, calls)
        self.gate_compare("cli", gate["changes"], code == 0, gate["removed_failing"], base,
                          then, now, (holds, {p: True for p in pops}), scored, options)
        if kind == "saved":
            expected = (sorted(set(truth0[0]["per_query"]) - set(truth1[0]["per_query"])
                               - held1),
                        sorted(set(truth1[0]["per_query"]) - set(truth0[0]["per_query"])))
            block = gate["per_query"]
            if block is None:
                self.record("gate case: gate.per_query null", "per-query baseline", case,
                            files, calls)
            elif (block["queries_removed"], block["queries_added"]) != expected:
                self.record("gate case: queries removed/added", "gate %r, reference %r" % (
                    (block["queries_removed"], block["queries_added"]), expected), case,
                    files, calls)
        if rng.random() < 0.3:
            self.gate_loaded(folder, rng, world1, measures1, k1, by1, held1, held0 - open1,
                             base, then, now, holds, scored, pops, options)

    def gate_loaded(self, folder, rng, world1, measures1, k1, by1, held1, gone, base, then,
                    now, holds, scored, pops, options):
        """The same gate on the new run's JSON report read back (load_report),
        written with or without --per-query and --reveal-holdout."""
        case, files, calls = options["case"], options["files"], options["calls"]
        per_query = rng.random() < 0.5
        revealed = world1["holdout"] and rng.random() < 0.4
        argv = (_gate_argv(world1, 1, measures1, k1, by1) + ["--reveal-holdout"] * revealed
                + ["--per-query"] * per_query + ["--format", "json", "-o", "r1.json"])
        calls["report"] = argv
        if self.gate_call(folder, argv, "report run", case, files, calls) is None:
            return
        with open(os.path.join(folder, "r1.json"), encoding="utf-8") as handle:
            text = handle.read()
        try:
            loaded = rag_eval.load_report(io.StringIO(text))
            result = rag_eval.gate(
                loaded, rag_eval.load_baseline(os.path.join(folder, "b.json")),
                max_drop=options["tolerance"], mode=options["mode"], resamples=20,
                fail_on_removed=options["frozen"],
                slice_max_drop=options["slice_tolerances"] or None)
            shown = rag_eval.render_text(loaded, result) + repr(result)
        except Exception as exc:     # noqa: B902 - recorded, with where
            self.record("gate case: loaded report", "%s at %s: %s" % (
                type(exc).__name__, _fuzz_where(exc), str(exc)[:200]), case, files, calls)
            return
        if not revealed:
            self.gate_no_held_ids(held1 | gone, [text, shown], "loaded report", case,
                                  files, calls)
        now = dict(now)
        for name in base.get("slices") or ():
            if not per_query and name.split("=")[0] not in by1 and now.get(name) is not None:
                now[name] = None            # a slice read back only with its --by field
        held = base["holdout"]["slice"] if base.get("holdout") else None
        current = {p: per_query and (held is None or p != held or revealed) for p in pops}
        changes = [{"slice": c.slice, "measure": c.measure, "status": c.status,
                    "baseline": c.baseline, "current": c.current, "n": c.n,
                    "removed": c.removed, "added": c.added} for c in result.changes]
        self.gate_compare("loaded, %s" % ("per-query" if per_query else "means"), changes,
                          result.passed, result.removed_failing, base, then, now,
                          (holds, current), scored, options)

    def gate_compare(self, path, changes, passed, removed_failing, base, then, now, holds,
                     scored, options):
        """Every gate row against the reference; the verdict against the rows."""
        case, files, calls = options["case"], options["files"], options["calls"]
        tolerance = _gate_tolerance(options["tolerance"])
        holdout = base["holdout"]["slice"] if base.get("holdout") else None
        expected = {}
        for pop in [None] + sorted(base.get("slices") or ()) + [holdout] * bool(holdout):
            means = (base["mean"] if pop is None else base["holdout"]["mean"] if pop == holdout
                     else base["slices"][pop]["mean"])
            allowed = _gate_tolerance(options["slice_tolerances"][pop]) \
                if pop in options["slice_tolerances"] else tolerance
            for m in sorted(means):
                values = None if now[pop] is None or m not in scored else now[pop].get(m, {})
                if options["kind"] == "flat":     # compared on its means, all of them
                    if not values or m in options["lost"]:
                        row = ("missing", None, None, None, 0, 0)
                    else:
                        row = _gate_reference_row({"": means[m]}, {"": math.fsum(
                            values.values()) / len(values)}, True, True, allowed,
                            means[m])[:3] + (None, 0, 0)
                else:
                    whole = None
                    if pop == holdout and holdout is not None:
                        whole = tuple(set().union(*(side[pop] or {}).values())
                                      for side in (then, now))
                    row = _gate_reference_row(then[pop].get(m, {}), values, holds[0][pop],
                                              holds[1][pop], allowed, means[m], whole)
                expected[(pop, m)] = row
        got = {(c["slice"], c["measure"]): c for c in changes}
        if set(got) != set(expected):
            self.record("gate rows (%s)" % path, "gate %s, reference %s" % (
                sorted(got, key=str), sorted(expected, key=str)), case, files, calls)
            return
        significant = options["mode"] == "significant"
        for key, ref in sorted(expected.items(), key=str):
            c = got[key]
            status = c["status"]
            if significant and ref[0] == "regressed":
                status_ok = status in ("regressed", "dropped, not significant")
            else:
                status_ok = status == ref[0]
            fields = ["status"] * (not status_ok)
            if ref[0] == "missing" or status == "missing":
                fields += [f for f, i in (("n", 3), ("removed", 4), ("added", 5))
                           if c[f] != ref[i]]
            else:
                fields += [f for f, i in (("baseline", 1), ("current", 2))
                           if c[f] is None or abs(c[f] - ref[i]) > 1e-12]
                fields += [f for f, i in (("n", 3), ("removed", 4), ("added", 5))
                           if c[f] != ref[i]]
            if fields:
                where = "overall" if key[0] is None else "hold-out" if key[0] == holdout \
                    else "slice"
                self.record("gate row (%s, %s baseline)" % (path, options["kind"]),
                            "%s %s %r differs in %s: gate %r, reference %r" % (
                                where, key[0], key[1], ",".join(fields),
                                tuple(c[f] for f in ("status", "baseline", "current", "n",
                                                     "removed", "added")), ref),
                            case, files, calls)
        removed = _gate_removed(then, now, holds, scored, holdout)
        removed *= options["frozen"]
        # Against a flat file of means a removed query cannot be told: fails.
        blind = options["frozen"] and options["kind"] == "flat"
        fails = (any(c["status"] in ("regressed", "missing") for c in changes) or removed > 0
                 or blind)
        if passed == fails or removed_failing != removed:
            self.record("gate verdict (%s)" % path, "passed %r, removed_failing %r; reference "
                        "%d removed" % (passed, removed_failing, removed), case, files, calls)

    def gate_no_held_ids(self, held, texts, what, case, files, calls):
        """No held-out query id in ``texts`` (outputs written without --reveal-holdout)."""
        for q in sorted(held):
            pattern = r"(?<![\w])%s(?![\w])" % re.escape(q)
            if any(re.search(pattern, t) for t in texts):
                self.record("gate case: %s names a held-out query" % what, q, case, files,
                            calls)
                return


class FuzzTest(TempDir, _GateFuzzCases, unittest.TestCase):
    """Seeded fuzzing of every input form, the options and the library calls.

    Each case is reproducible from (seed, case): RAG_EVAL_FUZZ_SEED picks the
    seed (default 0), RAG_EVAL_FUZZ_CASES the number of CLI cases (default
    2500), RAG_EVAL_FUZZ_ONLY one case to rerun, RAG_EVAL_FUZZ_TIMEOUT seconds per
    CLI case (default 30: a hang is a failure, a slow case on a loaded machine
    is not), RAG_EVAL_FUZZ_DUMP a folder where each distinct failure's files
    and argv are kept, RAG_EVAL_FUZZ_GATE_CASES the number of gate cases
    (test_gate_paired; default RAG_EVAL_FUZZ_CASES / 20).  A failure report
    lists distinct failures (deduplicated by kind and message shape) with the
    first case that showed each.

    The contract checked: exit code 0, 1 or 2 and never an exception or a
    traceback; on 2, stderr is one line "rag-eval: error: ..." (argparse's own
    usage block may precede it for a bad option) and no file was written or
    changed; on 0 or 1 a report was written (JSON parses, with no NaN), a saved
    baseline loads back and the same inputs pass against it, and only the named
    outputs changed; 1 only with a baseline or --drift.  A JSON report is read
    back (see check_loaded_report).  Some cases run twice, on the forked path
    and on one core, and must agree byte for byte.
    """

    SEED = _fuzz_int("RAG_EVAL_FUZZ_SEED", 0)
    CASES = _fuzz_int("RAG_EVAL_FUZZ_CASES", 2500)
    LIBRARY_CASES = _fuzz_int("RAG_EVAL_FUZZ_LIBRARY_CASES", 1500)
    PARALLEL_CASES = _fuzz_int("RAG_EVAL_FUZZ_PARALLEL_CASES", 12)
    PARALLEL_SHARE = float(os.environ.get("RAG_EVAL_FUZZ_PARALLEL_SHARE") or 0.02)
    ONLY = _fuzz_int("RAG_EVAL_FUZZ_ONLY", -1)
    DUMP = os.environ.get("RAG_EVAL_FUZZ_DUMP")
    TIMEOUT = float(os.environ.get("RAG_EVAL_FUZZ_TIMEOUT") or 30) \
        if hasattr(signal, "setitimer") else 0    # a hang is a failure, not a stuck suite

    def setUp(self):
        super().setUp()
        self.failures = {}
        self.cwd = os.getcwd()
        self.saved = rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE
        self.can_fork = hasattr(os, "fork") and (os.cpu_count() or 1) >= 2
        if self.TIMEOUT:
            self.saved_alarm = signal.signal(signal.SIGALRM, _fuzz_alarm)

    def tearDown(self):
        os.chdir(self.cwd)
        if self.TIMEOUT:
            signal.signal(signal.SIGALRM, self.saved_alarm)
        rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE = self.saved
        super().tearDown()

    def cases(self, count):
        return [self.ONLY] if self.ONLY >= 0 else range(count)

    def record(self, kind, detail, case, files=None, argv=None):
        key = _fuzz_signature(kind, detail)
        entry = self.failures.setdefault(key, {"count": 0, "case": case, "detail": detail,
                                               "argv": argv})
        entry["count"] += 1
        if entry["count"] == 1 and self.DUMP and files is not None:
            folder = os.path.join(self.DUMP, "%s-%d-%d" % (self.id().rsplit(".", 1)[-1],
                                                           self.SEED, case))
            os.makedirs(folder, exist_ok=True)
            for name, data in files.items():
                if data is not None and os.sep not in name:
                    with open(os.path.join(folder, name), "wb") as handle:
                        handle.write(data)
            with open(os.path.join(folder, "argv.json"), "w") as handle:
                json.dump({"argv": argv, "kind": kind, "detail": detail, "seed": self.SEED,
                           "case": case}, handle, indent=1)

    def report_failures(self):
        if self.failures:
            lines = ["%d distinct failures (seed %d; rerun one with RAG_EVAL_FUZZ_ONLY=case):"
                     % (len(self.failures), self.SEED)]
            for key, entry in sorted(self.failures.items()):
                lines.append("  [case %d, x%d] %s\n      %s\n      argv %r"
                             % (entry["case"], entry["count"], key, entry["detail"][:300],
                                entry["argv"]))
            self.fail("\n".join(lines))

    # -- the command line ---------------------------------------------------
    def call(self, folder, argv, stdin=None, parallel=False):
        """main() in ``folder``; (code, stdout, stderr, exception)."""
        out, err = io.StringIO(), io.StringIO()
        saved_stdin = sys.stdin
        if stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        if parallel:
            rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE = 0, 256
        else:
            rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE = self.saved
        os.chdir(folder)
        if self.TIMEOUT:
            signal.setitimer(signal.ITIMER_REAL, self.TIMEOUT)
        try:
            code = rag_eval.main(list(argv), stdout=out, stderr=err)
            exc = None
        except BaseException as caught:     # noqa: B036 - anything escaping main() is a failure
            code, exc = None, caught
            if isinstance(caught, KeyboardInterrupt):
                raise
        finally:
            if self.TIMEOUT:
                signal.setitimer(signal.ITIMER_REAL, 0)
            os.chdir(self.cwd)
            sys.stdin = saved_stdin
            rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE = self.saved
        return code, out.getvalue(), err.getvalue(), exc

    def check(self, case, folder, argv, before, result, files):
        """The CLI contract; every breach is recorded, not raised."""
        code, out, err, exc = result

        def bad(kind, detail):
            self.record(kind, detail, case, files, argv)
        if exc is not None:
            tb = traceback.extract_tb(exc.__traceback__)
            where = [f for f in tb if f.filename.endswith("rag_eval.py")]
            at = "%s:%d" % (where[-1].name, where[-1].lineno) if where else "?"
            bad("exception", "%s at %s: %s" % (type(exc).__name__, at, str(exc)[:200]))
            return
        if "Traceback" in err or "Traceback" in out:
            bad("traceback", err[-300:])
        after = _fuzz_snapshot(folder)
        if code not in (0, 1, 2):
            bad("exit code", "exit %r; stderr %r" % (code, err[-200:]))
            return
        if "--help" in argv or "--version" in argv or "--list-measures" in argv:
            return
        if code == 2:
            lines = err.splitlines()
            if len(lines) != 1 or not lines[0].startswith("rag-eval: error: ") \
                    or not err.endswith("\n") or len(lines[0]) <= len("rag-eval: error: "):
                bad("exit 2 message", "stderr %r" % err[:300])
            if after != before:
                changed = sorted(set(after) ^ set(before) | {k for k in after if k in before
                                                            and after[k] != before[k]})
                bad("exit 2 wrote", "%s changed; stderr %r" % (changed, err[:200]))
            if out:
                bad("exit 2 stdout", "stdout %r" % out[:200])
            return
        if code == 1 and not any(a in ("--baseline", "--drift") or a.startswith("--baseline=")
                                 for a in argv):
            bad("exit 1 without baseline", err[:200])
        kept = code == 1 and "--accept" not in argv     # a failed gate keeps its baseline
        gate_on_stderr = _fuzz_option(argv, "--format") == "trec"    # stdout stays trec_eval's
        for line in err.splitlines() if not gate_on_stderr else ():
            if kept and line.startswith("rag-eval: the ") and " was not written " in line:
                continue
            if not line.startswith("rag-eval: warning: "):
                bad("stderr line", "exit %d; stderr line %r" % (code, line[:200]))
                break
        target = _fuzz_option(argv, "-o", "--output")
        report = out
        if target not in (None, "-"):
            report = after.get(os.path.normpath(target))
            if out:
                bad("stdout with -o", out[:100])
            if not isinstance(report, bytes):
                bad("no report file", "exit %d; -o %r" % (code, target))
                return
            report = report.decode("utf-8")
        if not report.strip():
            bad("empty report", "exit %d" % code)
            return
        fmt = _fuzz_option(argv, "--format") or rag_eval._format_of(
            target if target not in (None, "-") else None)
        if fmt == "html" and ("<script" in report or not report.startswith("<!DOCTYPE html>")):
            bad("report HTML", report[:100])
        doc = None
        if fmt == "json":
            try:
                doc = json.loads(report, parse_constant=_fuzz_no_constant)
                if doc.get("gate") is not None and doc["gate"]["passed"] != (code == 0) \
                        and not (code == 1 and doc.get("drift") and not doc["drift"]["passed"]):
                    bad("gate vs exit", "exit %d, gate.passed %r" % (code, doc["gate"]["passed"]))
            except (ValueError, AttributeError, TypeError) as exc:
                bad("report JSON", "%s: %s" % (type(exc).__name__, exc))
                doc = None
        saved = _fuzz_option(argv, "--save-baseline")
        if saved and kept:
            if after.get(os.path.normpath(saved)) != before.get(os.path.normpath(saved)):
                bad("failed gate wrote the baseline", "--save-baseline %r" % saved)
            saved = None
        if saved:
            data = after.get(os.path.normpath(saved))
            if not isinstance(data, bytes):
                bad("no saved baseline", "exit %d; --save-baseline %r" % (code, saved))
            else:
                try:
                    rag_eval.load_baseline(io.BytesIO(data))
                except rag_eval.EvalError as exc:
                    bad("saved baseline does not load", str(exc)[:200])
                except Exception as exc:
                    bad("saved baseline does not load", "%s: %s" % (type(exc).__name__, exc))
                else:
                    self.check_round_trip(case, folder, argv, saved, files)
        if doc is not None:
            self.check_loaded_report(case, argv, report, doc, files, after.get(
                os.path.normpath(saved)) if saved else None)
        allowed = {os.path.normpath(p) for p in (target, saved) if p}
        for name in set(before) | set(after):
            if before.get(name, 0) != after.get(name, 0) and name not in allowed:
                bad("stray write", "exit %d; %r changed" % (code, name))
                break

    def check_loaded_report(self, case, argv, text, doc, files, saved):
        """A JSON report read back (load_report) writes its fields again; saved
        as a baseline, it loads and its own gate passes, or save_baseline
        refuses it in one line (slices and a hold-out are not kept); gated
        against the baseline the run saved (``saved``: its bytes), it fails
        on nothing but the slices of fields it was not written --by."""
        def bad(kind, detail):
            self.record(kind, detail, case, files, argv)

        def fault(kind, exc):
            tb = traceback.extract_tb(exc.__traceback__)
            where = [f for f in tb if f.filename.endswith("rag_eval.py")]
            at = "%s:%d" % (where[-1].name, where[-1].lineno) if where else "?"
            bad(kind, "%s at %s: %s" % (type(exc).__name__, at, str(exc)[:200]))
        try:
            loaded = rag_eval.load_report(io.StringIO(text))
            again = json.loads(rag_eval.render_json(loaded, per_query="per_query" in doc))
        except Exception as exc:
            fault("own report does not load", exc)
            return
        expected = {k: v for k, v in doc.items()
                    if k not in ("gate", "comparison", "sweep", "elapsed_seconds")}
        if "scores" in expected:     # noise and borderline are not read back
            expected["scores"] = {k: v for k, v in expected["scores"].items()
                                  if k in ("inputs", "ranges", "unscored")}
        if again != expected:
            keys = sorted(k for k in set(again) | set(expected) if again.get(k) != expected.get(k))
            bad("report round trip differs", "keys %s" % keys)
        mode = random.Random(case).choice(rag_eval.GATE_MODES)
        try:
            dumped = rag_eval._dumps(rag_eval.baseline_dict(loaded))
        except rag_eval.EvalError as exc:
            if loaded.slices is None and loaded.holdout is None or len(str(exc).splitlines()) != 1:
                bad("loaded report is no baseline", str(exc)[:200])
        except Exception as exc:
            fault("loaded report is no baseline", exc)
        else:
            try:
                result = rag_eval.gate(loaded, rag_eval.load_baseline(io.StringIO(dumped)),
                                       mode=mode, resamples=20)
                if not result.passed:
                    bad("loaded report fails its own baseline", repr(result)[:200])
            except Exception as exc:
                fault("loaded report against its own baseline", exc)
        if saved is None:
            return
        try:
            result = rag_eval.gate(loaded, rag_eval.load_baseline(io.BytesIO(saved)), mode=mode,
                                   resamples=20)
        except Exception as exc:
            fault("loaded report against the run's baseline", exc)
            return
        # A loaded report's slices are missing where it was not written --by their
        # field, and a judge score's slices always (the JSON keeps no slice members),
        # overall too when it was written without --per-query (no scored query named).
        judged_apart = [c for c in result.regressions if c.status == "missing"
                        and rag_eval._field_of(c.measure)
                        and (c.slice is not None or loaded.scored_count is not None)]
        unexpected = [c.name for c in result.regressions if c not in judged_apart and (
            c.slice is None or c.status != "missing"
            or rag_eval._slice_field(c.slice) in loaded.by)]
        if unexpected:
            bad("loaded report fails the run's baseline", "%r: %s" % (result, unexpected[:5]))

    def check_round_trip(self, case, folder, argv, saved, files):
        """The same inputs and options gated against the baseline they just
        saved pass, in either gate mode."""
        if argv[0] == "--scores":
            return self.check_score_round_trip(case, folder, argv, saved, files)
        if "-" in argv[:2] or os.path.normpath(saved) in files \
                or argv[:2] != [a for a in argv if not a.startswith("-")][:2]:
            return                      # stdin, an input overwritten, or argv reordered
        again = list(argv[:2])
        for name in ("--k", "--metrics", "--rel", "--gain", "--qrels-format", "--run-format",
                     "--doc-sep", "--unit", "--min-score"):
            value = _fuzz_option(argv, name)
            if value is not None:
                again += [name, value]
        for flag in ("--skip-extra-queries", "--allow-unlabelled-run"):
            if flag in argv:
                again.append(flag)
        self.gate_own_baseline(case, folder, again, saved, files)

    def gate_own_baseline(self, case, folder, again, saved, files):
        """The case's command line ``again`` against its saved baseline must pass."""
        again = again + ["--baseline", saved, "--gate", random.Random(case).choice(
            rag_eval.GATE_MODES), "--resamples", "20", "--format", "json"]
        code, out, err, exc = self.call(folder, again)
        if exc is not None or code != 0:
            detail = "exit %r %r; stderr %r" % (code, exc, err[-200:])
            self.record("own baseline does not pass", detail, case, files, again)

    def check_score_round_trip(self, case, folder, argv, saved, files):
        """check_round_trip of a judge-score case: the same score files and
        options that decide the values (not --drift) against the baseline."""
        again = argv[:2]
        for name in ("--score-range", "--metrics", "--id-column", "--queries", "--by",
                     "--holdout", "--pass-threshold"):
            for i, arg in enumerate(argv[:-1]):
                if arg == name:
                    again += [name, argv[i + 1]]
        again += [flag for flag in ("--allow-missing-scores", "--reveal-holdout") if flag in argv]
        self.gate_own_baseline(case, folder, again, saved, files)

    def make_case(self, case):
        """(files {name: bytes}, argv, stdin bytes or None) of one case."""
        fz = _Fuzz(self.SEED, case)
        rng = fz.rng
        if rng.random() < 0.12:
            return self.make_score_case(fz)
        qrels, run = fz.world()
        mutate_which = rng.choice(["qrels", "run", "baseline", "compare", "any", "any", "none"])
        qform, qtext = fz.qrels_text(qrels)
        rform, rtext = fz.run_text(run)
        metrics = rng.choice([None, "recall,ndcg", "mrr,success,precision,map,judged"])
        files = {}

        def put(name, text, who):
            mutate = mutate_which == who or (mutate_which == "any" and rng.random() < 0.5)
            files[name] = fz.encode(fz.text_of(text, mutate), mutate)
        put("qrels", qtext, "qrels")
        put("run", rtext, "run")
        names = {"qrels": "qrels", "run": "run"}
        if rng.random() < 0.6:
            base = fz.baseline_obj(qrels, run, metrics)
            if mutate_which in ("baseline", "any") and rng.random() < 0.7:
                base = fz.mutate_obj(base)
            try:
                btext = json.dumps(base, indent=rng.choice([None, 1]))
            except (TypeError, ValueError):
                btext = '{"recall@5": 0.5}'
            put("baseline.json", btext, "baseline")
            names["baseline"] = "baseline.json"
        if rng.random() < 0.2:
            _, other = fz.world(queries=len(qrels))
            other = {q: v for q, v in zip(qrels, other.values())}
            put("other", fz.run_text(other)[1], "compare")
            names["compare"] = "other"
        if rng.random() < 0.05:
            files["same"] = files["run"]
            names["compare"] = "same"
        argv = fz.argv(names, qform, rform)
        stdin = None
        if rng.random() < 0.05:
            i = rng.choice([0, 1])
            stdin = files[argv[i]] if argv[i] in files else b""
            argv[i] = "-"
        return files, argv, stdin, rng

    def make_score_case(self, fz):
        """A judge-score case (issue 15): a score file (JSONL or CSV; numbers,
        booleans, repeated runs, nulls), maybe query metadata with slices and a
        hold-out (--queries, --by, --holdout), a baseline of means or of an
        earlier run's per-query values, a frozen --drift sample, and the score
        options, any of them mutated."""
        rng = fz.rng
        rows, ranged = [], rng.random() < 0.3
        for i in range(rng.randint(1, 8)):
            row = {"query_id": "q%d" % i, "input_sha256": "%064x" % i}
            row["f"] = rng.choice([round(rng.random(), 3), [round(rng.random(), 2)] * 2,
                                   [round(rng.random(), 2), round(rng.random(), 2)]])
            row["ok"] = rng.random() < 0.5
            if ranged:
                row["rel"] = rng.randint(1, 5)
            rows.append(row)
        earlier = self.earlier_scores(fz, rows)     # before any mutation
        queries = rng.random() < 0.35
        mutate = rng.random() < (0.3 if queries else 0.6)
        if mutate and rng.random() < 0.5:
            row = rng.choice(rows)
            row[rng.choice(["f", "ok", "rel", "query_id", "input_sha256"])] = rng.choice(
                [None, [], "0.5", float("nan"), 1.5, -1, True, [0.5, None], "x", 1e400, {}])
        if rng.random() < 0.25:        # CSV, repeated runs as JSON arrays in their cells
            keys = sorted({k for row in rows for k in row})
            handle = io.StringIO()
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(keys)
            writer.writerows([
                "" if row.get(k) is None else json.dumps(row[k]) if isinstance(row.get(k), list)
                else str(row[k]).lower() if isinstance(row.get(k), bool) else str(row[k])
                for k in keys] for row in rows)
            text, name = handle.getvalue(), "s.csv"
        else:
            text, name = "".join(json.dumps(row) + "\n" for row in rows), "s.jsonl"
        files = {name: fz.encode(fz.text_of(text, mutate and rng.random() < 0.3), mutate)}
        argv = ["--scores", name] + (["--score-range", "rel=1:5"] if ranged else [])
        if queries:
            queries, extra = self.score_queries(fz, rows, mutate)
            files["m.jsonl"] = queries
            argv += ["--queries", "m.jsonl"] + extra
        else:
            queries = None
        if rng.random() < 0.35:
            means = {"score(field=f)": round(rng.random(), 3), "score(field=ok)": 0.5}
            files["b.json"] = json.dumps(fz.mutate_obj(means) if rng.random() < 0.3
                                         else means).encode()
            argv += ["--baseline", "b.json"]
        elif rng.random() < 0.3:       # an earlier run's baseline, per-query values
            base = self.earlier_baseline(earlier, ranged, queries, argv)
            if base is not None:
                files["b.json"] = json.dumps(fz.mutate_obj(base) if mutate and rng.random() < 0.3
                                             else base).encode()
                argv += ["--baseline", "b.json"]
        if rng.random() < 0.25:
            frozen = [dict(row) for row in rows]
            if rng.random() < 0.3:
                rng.choice(frozen)["input_sha256"] = "f" * 64
            for row in frozen:
                if rng.random() < 0.4 and isinstance(row.get("f"), float):
                    row["f"] = round(rng.random(), 3)
            files["frozen.jsonl"] = "".join(json.dumps(r) + "\n" for r in frozen).encode()
            argv += ["--drift", "frozen.jsonl"]
            if rng.random() < 0.5:
                argv += ["--max-drift", rng.choice(["0.02", "0.5", "0", "x", "2"])]
        for option, p, pool in (
                ("--score-range", 0.1, ["rel=5:1", "f=0:1", "f=1:1", "rel=x", "g=0:1"]),
                ("--pass-threshold", 0.15, ["f=0.5", "rel=3", "f=x", "g=1"]),
                ("--metrics", 0.2, ["f", "score(field=f)", "f,ok", "g", "recall@5"]),
                ("--id-column", 0.05, ["query_id", "qid"]),
                ("--format", 0.5 if queries is None else 0.7,
                 ["text", "json", "markdown", "html", "trec"] + ["json"] * 3 * (
                     queries is not None)),
                ("--gate", 0.1, ["significant"]), ("--resamples", 0.3, ["20"])):
            if rng.random() < p:
                argv += [option, rng.choice(pool)]
        if queries is not None and "--baseline" in argv and rng.random() < 0.2:
            argv += ["--slice-max-drop", rng.choice(["src=a:0", "src=b:5%", "nope=x:0.1"])]
        for flag, p in (("--allow-missing-scores", 0.3), ("--per-query", 0.3),
                        ("--accept", 0.05)):
            if rng.random() < p:
                argv.append(flag)
        if rng.random() < 0.25 + 0.25 * (queries is not None):
            argv += ["--save-baseline", "sb.json"]
        if rng.random() < 0.2:
            argv += ["-o", rng.choice(["out.txt", "out.json", "out.html"])]
        return files, argv, None, rng

    def earlier_scores(self, fz, rows):
        """The rows an earlier run gave: some values moved (a baseline's)."""
        rng = fz.rng
        earlier = copy.deepcopy(rows)
        for row in earlier:
            if rng.random() < 0.4:
                row["f"] = round(rng.random(), 3)
            if rng.random() < 0.2:
                row["ok"] = not row["ok"]
        return earlier

    def score_queries(self, fz, rows, mutate):
        """(JSONL bytes, argv) of query metadata for ``rows``: slices of a few
        fields, tags, a hold-out; maybe a query the scores lack, maybe mutated."""
        rng = fz.rng
        lines = []
        ids = [row["query_id"] for row in rows if isinstance(row.get("query_id"), str)]
        if rng.random() < 0.15:
            ids.append("qx")
        for qid in ids:
            record = {"query_id": qid, "slices": {"src": rng.choice(["a", "b", "c"])}}
            if rng.random() < 0.5:
                record["slices"]["hops"] = rng.choice(["one", "two"])
            if rng.random() < 0.3:
                record["slices"]["split"] = "holdout"
            if rng.random() < 0.3:
                record["tags"] = rng.sample(["eu", "us", "pricing"], rng.randint(1, 2))
            lines.append(json.dumps(record))
        text = "".join(line + "\n" for line in lines)
        if mutate and rng.random() < 0.3:
            text = fz.text_of(text, True)
        argv = []
        fields = ["src", "hops", "tag", "split"] + ["nope"] * (rng.random() < 0.1)
        for field in rng.sample(fields, rng.randint(0, 3)):
            argv += ["--by", field]
        if rng.random() < 0.3:
            argv += ["--holdout", rng.choice(["split=holdout", "src=c", "src=c", "x=y"][
                :3 if rng.random() < 0.9 else 4])]
            if rng.random() < 0.4:
                argv.append("--reveal-holdout")
        return text.encode("utf-8", "surrogatepass"), argv

    def earlier_baseline(self, earlier, ranged, queries, argv):
        """The baseline dict an earlier run of these scores saved (with the
        same metadata and hold-out), or None when the library refuses it."""
        try:
            scores = rag_eval.load_scores(io.StringIO("".join(
                json.dumps(row) + "\n" for row in earlier)),
                ranges={"rel": (1, 5)} if ranged else None)
            metadata = None if queries is None else rag_eval.load_queries(
                io.StringIO(queries.decode("utf-8", "surrogatepass")))
            report = rag_eval.evaluate_scores(
                scores, queries=metadata, holdout=_fuzz_option(argv, "--holdout"),
                reveal_holdout="--reveal-holdout" in argv, allow_missing=True)
            return rag_eval.baseline_dict(report)
        except (rag_eval.EvalError, UnicodeError):
            return None

    def run_case(self, case):
        files, argv, stdin, rng = self.make_case(case)
        parallel = self.can_fork and rng.random() < self.PARALLEL_SHARE
        results = []
        for mode in ([True, False] if parallel else [False]):
            folder = os.path.join(self.tmp, "c%d%s" % (case, "p" if mode else ""))
            os.mkdir(folder)
            for name, data in files.items():
                with open(os.path.join(folder, name), "wb") as handle:
                    handle.write(data)
            before = _fuzz_snapshot(folder)
            result = self.call(folder, argv, stdin, parallel=mode)
            self.check(case, folder, argv, before, result, files)
            results.append((result[:3], _fuzz_snapshot(folder)))
            shutil.rmtree(folder)
        if parallel and results[0] != results[1]:
            (a, sa), (b, sb) = results
            detail = "forked %r, one core %r" % (a, b) if a != b else "files differ"
            self.record("parallel differs", detail[:600], case, files, argv)

    def test_command_line(self):
        for case in self.cases(self.CASES):
            self.run_case(case)
        self.report_failures()

    # -- forked path == one core, on large valid runs -------------------------
    def test_parallel_equals_sequential(self):
        if not self.can_fork:
            self.skipTest("needs fork and two cores")
        for case in self.cases(self.PARALLEL_CASES):
            fz = _Fuzz(self.SEED, 10 ** 6 + case)
            rng = fz.rng
            qrels, run = fz.world(queries=rng.randint(20, 60), depth=rng.randint(10, 40))
            files = {"qrels": fz.qrels_text(qrels)[1].encode("utf-8"),
                     "run": fz.run_text(run)[1].encode("utf-8")}
            if rng.random() < 0.3:                  # a small mutation: errors must agree too
                files["run"] = fz.text_of(files["run"].decode("utf-8"), True).encode(
                    "utf-8", "surrogatepass")
            argv = ["qrels", "run", "--format", "json", "--per-query", "--k",
                    rng.choice(["1,5,10", "3", "20"]), "--metrics",
                    rng.choice(["recall,ndcg,mrr,judged", "map,precision,success"])]
            results = []
            for mode in (True, False):
                folder = os.path.join(self.tmp, "p%d%s" % (case, "p" if mode else ""))
                os.mkdir(folder)
                for name, data in files.items():
                    with open(os.path.join(folder, name), "wb") as handle:
                        handle.write(data)
                before = _fuzz_snapshot(folder)
                result = self.call(folder, argv, parallel=mode)
                self.check(case, folder, argv, before, result, files)
                results.append(result[:3])
                shutil.rmtree(folder)
            if results[0] != results[1]:
                self.record("parallel differs", "forked %r\none core %r"
                            % (results[0], results[1]), case, files, argv)
        self.report_failures()

    # -- the library ----------------------------------------------------------
    def library_call(self, case, name, func, *args, **kwargs):
        before = repr(args) + repr(kwargs)
        try:
            func(*args, **kwargs)
        except rag_eval.EvalError:
            pass
        except Exception as exc:
            tb = traceback.extract_tb(exc.__traceback__)
            where = [f for f in tb if f.filename.endswith("rag_eval.py")]
            at = "%s:%d" % (where[-1].name, where[-1].lineno) if where else "?"
            self.record("library %s" % name, "%s at %s: %s" % (type(exc).__name__, at,
                                                                str(exc)[:150]),
                        case, argv=_fuzz_short(args, kwargs))
            return
        if repr(args) + repr(kwargs) != before:
            self.record("library %s mutated its input" % name, _fuzz_short(args, kwargs), case,
                        argv=_fuzz_short(args, kwargs))

    def test_library(self):
        odd = [None, 1.5, b"x", 10 ** 400, float("nan"), float("inf"), True, -1, 0, "",
               "x", [], {}, [None], {"a": None}, {None: 1}, {1: 2}, {(1,): 1}, ["recall"],
               [b"recall"], "recall,", 5, "5", "1,5", [1, 5], (5,), {5}, range(3), "\ud800",
               [[1]], {"q": {"d": 1}}, {"q": ["d"]}, 2 ** 64, -0.0, object(), "1" * 5000]
        for case in self.cases(self.LIBRARY_CASES):
            fz = _Fuzz(self.SEED, 2 * 10 ** 6 + case)
            rng = fz.rng
            qrels, run = fz.world()
            pick = lambda value: copy.deepcopy(rng.choice(odd)) if rng.random() < 0.4 else value
            q = fz.mutate_obj(qrels) if rng.random() < 0.3 else pick(qrels)
            r = fz.mutate_obj(run) if rng.random() < 0.3 else pick(run)
            k = pick(rng.choice([5, "1,5", [1, 3]]))
            metrics = pick(rng.choice([None, "recall,ndcg", ["mrr", "ndcg@3"]]))
            kwargs = {}
            for key, value in (("rel", 1), ("gain", "linear"), ("skip_extra_queries", True)):
                if rng.random() < 0.2:
                    kwargs[key] = pick(value)
            self.library_call(case, "evaluate", rag_eval.evaluate, q, r, k, metrics, **kwargs)
            text = rng.choice(["recall@5", "nDCG(dcg=log2)@10", "success(rel=2)@1", "P_5",
                               "ndcg(gain=linear)@3"])
            text = pick(fz.mutate_text(text) if rng.random() < 0.5 else text)
            kwargs = {key: pick(value) for key, value in (("k", 5), ("rel", 2), ("gain", "linear"))
                      if rng.random() < 0.3}
            self.library_call(case, "parse_measure", rag_eval.parse_measure, text, **kwargs)
            base = fz.baseline_obj(qrels, run, None)
            if rng.random() < 0.6:
                base = fz.mutate_obj(base)
            try:
                btext = json.dumps(base)
            except (TypeError, ValueError):
                btext = "{}"
            if rng.random() < 0.5:
                btext = fz.mutate_text(btext)
            source = rng.choice([io.StringIO(btext), io.BytesIO(btext.encode("utf-8",
                                                                             "surrogatepass"))])
            self.library_call(case, "load_baseline", rag_eval.load_baseline,
                              pick(source) if rng.random() < 0.2 else source)
            try:
                report = rag_eval.evaluate(qrels, run, k=rng.choice([5, "1,5"]))
            except rag_eval.EvalError:
                continue
            baseline = base if rng.random() < 0.5 else pick(base)
            if rng.random() < 0.3:
                try:
                    baseline = rag_eval.load_baseline(io.StringIO(json.dumps(
                        rag_eval.baseline_dict(report))))
                    field = rng.choice(["mean", "per_query", "inputs", "rel", "source"])
                    baseline = baseline._replace(**{field: pick(fz.mutate_obj(
                        getattr(baseline, field)))})
                except (rag_eval.EvalError, TypeError, ValueError):
                    pass
            kwargs = {key: pick(value) for key, value in
                      (("max_drop", rng.choice([0.02, "5%", "0.1"])), ("mode", "significant"),
                       ("alpha", 0.05), ("resamples", 20), ("seed", 1)) if rng.random() < 0.4}
            kwargs.setdefault("resamples", 20)
            self.library_call(case, "gate", rag_eval.gate, report, baseline, **kwargs)
        self.report_failures()
