"""Seeded fuzzing (issue 9): every input form, the options and the library
calls; each case reproducible from (seed, case), see FuzzTest.
"""

import csv
import copy
import gzip
import io
import json
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


class FuzzTest(TempDir, unittest.TestCase):
    """Seeded fuzzing of every input form, the options and the library calls.

    Each case is reproducible from (seed, case): RAG_EVAL_FUZZ_SEED picks the
    seed (default 0), RAG_EVAL_FUZZ_CASES the number of CLI cases (default
    2500), RAG_EVAL_FUZZ_ONLY one case to rerun, RAG_EVAL_FUZZ_TIMEOUT seconds per
    CLI case (default 30: a hang is a failure, a slow case on a loaded machine
    is not), RAG_EVAL_FUZZ_DUMP a folder where each distinct failure's files
    and argv are kept.  A failure report
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
