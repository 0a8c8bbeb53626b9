"""Helpers the test modules share: the repository's paths (HERE, DATA), main()
in-process (run_cli), the TempDir mixin, the bundled example, and fixtures read
by more than one module.  Not a test module (its name does not match test*.py).
"""

import io
import json
import os
import sys
import tempfile
import unittest

import rag_eval

# The repository root (tests/..): README.md, examples/, action.yml, rag_eval.py.
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(HERE, "tests", "data")


def read_doc(name):
    """The text of a guide under docs/ (the README's sections moved there)."""
    with open(os.path.join(HERE, "docs", name), encoding="utf-8") as handle:
        return handle.read()


def run_cli(*argv, stdin=None):
    """Run main() in-process; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    try:
        code = rag_eval.main(list(argv), stdout=out, stderr=err)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


class TempDir:
    """Mixin: self.tmp is a fresh folder; self.write(name, text) puts a file there;
    self.report_of(*argv, qrels=..., run=...) writes the two inputs and runs main()
    on them; self.assertBad(...) checks that main() refuses an input the one-line
    way."""

    GOOD_QRELS = '{"q1": {"a": 1, "b": 0}}'
    GOOD_RUN = '{"q1": ["a", "b"]}'

    def setUp(self):
        super().setUp()
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()
        super().tearDown()

    def write(self, name, content):
        path = os.path.join(self.tmp, name)
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(path, mode) as handle:
            handle.write(content)
        return path

    def input_file(self, spec, name):
        """The path of one input: ``spec`` is a path that exists, a (name,
        content) pair, or the content alone (text, bytes, or a dict or list
        written as JSON), written to ``name``."""
        if isinstance(spec, tuple):
            name, spec = spec
        elif isinstance(spec, str) and os.path.isabs(spec) and os.path.exists(spec):
            return spec
        if isinstance(spec, (dict, list)):
            spec = json.dumps(spec)
        return self.write(name, spec)

    def report_of(self, *argv, qrels, run, stdin=None):
        """main() on these qrels and run (see input_file; q.json and r.json
        unless named) and ``argv``: (exit code, stdout, stderr)."""
        return run_cli(self.input_file(qrels, "q.json"), self.input_file(run, "r.json"), *argv,
                       stdin=stdin)

    def assertBad(self, qrels=None, run=None, extra=(), expect="", baseline=None):
        """main() on q.json and r.json (GOOD_QRELS and GOOD_RUN unless given),
        asked for -o and --save-baseline: exit 2, one line on stderr naming
        ``expect``, no traceback, nothing on stdout, no file written."""
        argv = list(extra)
        if baseline is not None:
            argv += ["--baseline", self.write("b.json", baseline)]
        out_path = os.path.join(self.tmp, "out.json")
        saved = os.path.join(self.tmp, "saved.json")
        code, out, err = self.report_of(*argv, "-o", out_path, "--save-baseline", saved,
                                        qrels=self.GOOD_QRELS if qrels is None else qrels,
                                        run=self.GOOD_RUN if run is None else run)
        self.assertEqual(code, rag_eval.EXIT_ERROR, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(expect, err)
        self.assertFalse(os.path.exists(out_path))
        self.assertFalse(os.path.exists(saved))
        self.assertEqual(out, "")
        return err


# Tests of how an acceleration works (Part II), not of what it computes: skipped
# with RAG_EVAL_PLAIN=1, which keeps every plain twin (AccelerationTwinsTest).
accelerated_only = unittest.skipUnless(rag_eval._ACCELERATED, "RAG_EVAL_PLAIN=1")


def example(name):
    return os.path.join(HERE, name)


# The bundled example's qrels and run (domain.md), and their report.
EXAMPLE_FILES = (example("qrels.json"), example("run.json"))


def example_report(**options):
    return rag_eval.evaluate(rag_eval.load_qrels(example("qrels.json")),
                             rag_eval.load_run(example("run.json")), **options)


def read_text(path):
    with open(path) as handle:
        return handle.read()


PEERS = os.path.join(DATA, "peers")


def jsonl(*records):
    return "".join(json.dumps(r) + "\n" for r in records)


# A small test set with slices; k=2, recall and mrr, values by hand:
#   query  metadata                          labels   run       recall@2  mrr@2
#   s1     source=synthetic, tag=pricing,eu  a        a         1         1
#   s2     source=synthetic                  b, c     x b       1/2       1/2
#   s3     source=synthetic                  d        x y       0         0
#   r1     source=real, tag=eu               e        e         1         1
#   r2     source=real                       f        x f       1         1/2
#   r3     source=real                       (none: metadata only; unscored)  z
#   h1     source=real, split=holdout        g        x g       1         1/2
#   h2     split=holdout                     h        (absent)  0         0
SLICED_QRELS = {"s1": {"a": 1}, "s2": {"b": 1, "c": 1}, "s3": {"d": 1}, "r1": {"e": 1},
                "r2": {"f": 1}, "h1": {"g": 1}, "h2": {"h": 1}}
SLICED_RUN = {"s1": ["a"], "s2": ["x", "b"], "s3": ["x", "y"], "r1": ["e"], "r2": ["x", "f"],
              "r3": ["z"], "h1": ["x", "g"]}
SLICED_QUERIES = {
    "s1": {"slices": {"source": ["synthetic"], "tag": ["pricing", "eu"]}},
    "s2": {"slices": {"source": ["synthetic"]}},
    "s3": {"slices": {"source": ["synthetic"]}},
    "r1": {"slices": {"source": ["real"], "tag": ["eu"]}},
    "r2": {"slices": {"source": ["real"]}},
    "r3": {"slices": {"source": ["real"]}, "answerable": False},
    "h1": {"slices": {"source": ["real"], "split": ["holdout"]}},
    "h2": {"slices": {"split": ["holdout"]}},
}


def sliced_report(run=None, queries=None, measures="recall,mrr", **options):
    return rag_eval.evaluate(SLICED_QRELS, SLICED_RUN if run is None else run, k=2,
                             measures=measures,
                             queries=SLICED_QUERIES if queries is None else queries, **options)


def saved_baseline(test, report, name="base.json"):
    """``report`` saved with save_baseline() and read back."""
    path = os.path.join(test.tmp, name)
    rag_eval.save_baseline(report, path)
    return rag_eval.load_baseline(path)


def out_keys_sorted(text):
    """True when every JSON object in ``text`` lists its keys in sorted order."""
    ok = [True]

    def hook(pairs):
        keys = [k for k, _ in pairs]
        ok[0] = ok[0] and keys == sorted(keys)
        return dict(pairs)
    json.loads(text, object_pairs_hook=hook)
    return ok[0]


def plain_twins():
    """Context: every hook bound to its plain twin, as with RAG_EVAL_PLAIN=1."""
    import contextlib

    @contextlib.contextmanager
    def plain():
        was = rag_eval._ACCELERATED
        rag_eval._accelerate(False)
        try:
            yield
        finally:
            rag_eval._accelerate(was)
    return plain()


# Odd JSON values: the fuzzer's (test_fuzz.py) and TestSetFormatsTest's.
_FUZZ_VALUES = [None, True, False, 0, -1, 1, 2, 1.5, -0.0, 10 ** 400, -10 ** 400, float("nan"),
                float("inf"), float("-inf"), "", "1", "x", [], {}, [1], {"a": 1}, "\x00",
                "\ud800", "\udc00", 2 ** 63, 1e-320, 1e308, 0.7, 1.0000000001, [[[]]],
                {"": None}, "recall@5", {"sha256": 5}, {"qrels": "x"}]
