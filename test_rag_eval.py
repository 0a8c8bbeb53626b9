"""Tests of rag_eval (standard library only): ``python3 -m unittest``.

Expected values come from hand arithmetic (tests/data/hand_worked.json and the
comments by the tests) or from peer tools, stored as data under tests/data/ by
the generators in tests/peers/ (which the suite never imports).

This file holds the module's doctests (load_tests), its public names, the
bundled example and the exit codes.  The rest is under tests/, one module per
area (tests/test_measures.py ... tests/test_fuzz.py, seeded fuzzing), with the
helpers they share in tests/support.py: TempDir.report_of writes a qrels file
and a run and runs main() on them.
"""

import doctest
import inspect
import math
import os
import re
import subprocess
import sys
import unittest

import rag_eval
from tests.support import HERE, run_cli, TempDir, example, read_text


def load_tests(loader, tests, ignore):
    tests.addTests(doctest.DocTestSuite(rag_eval))
    return tests


# ---------------------------------------------------------------------------
# The public names (__all__) and the bundled example (domain.md)
# ---------------------------------------------------------------------------

class PublicNamesTest(unittest.TestCase):
    """``__all__`` is sorted, names what exists, and holds every public function
    and class, so ``from rag_eval import *`` and the docs agree with the module.

    Public: a function or class defined in rag_eval whose name does not start
    with ``_``.  Each is exported or listed in NOT_EXPORTED with its reason, so
    adding a public function fails here until someone decides which."""

    NOT_EXPORTED = {
        # Declaring a measure (README "How to add a measure"): for authors of
        # rag_eval, who edit the module; users name measures as text.
        "measure": "declares a measure", "peer": "declares a peer spelling",
        "Param": "declares a measure parameter", "Spelling": "what peer() returns",
        # The command line's parts; main() is its entry point.
        "build_parser": "main()'s parser", "describe_measures": "--list-measures' text",
        "parse_cutoffs": "--k's parser", "parse_tolerance": "--max-drop's parser",
        # What --save-baseline writes; save_baseline() is the library's call.
        "baseline_dict": "save_baseline()'s content",
    }
    # Also not exported: each registered measure's per-query function (recall,
    # ndcg, ...), reached through its name: parse_measure("ndcg@10").value(...).

    @staticmethod
    def public():
        return {name for name, value in vars(rag_eval).items()
                if not name.startswith("_") and (inspect.isfunction(value) or inspect.isclass(value))
                and value.__module__ == rag_eval.__name__}

    @staticmethod
    def measure_functions():
        return {spec.func.__name__ for spec in rag_eval._REGISTRY.values()}

    def test_all_is_sorted_and_names_what_exists(self):
        self.assertEqual(rag_eval.__all__, sorted(rag_eval.__all__))
        self.assertEqual(len(rag_eval.__all__), len(set(rag_eval.__all__)))
        for name in rag_eval.__all__:
            with self.subTest(name=name):
                self.assertTrue(hasattr(rag_eval, name))
                self.assertFalse(name.startswith("_"))
        namespace = {}
        exec("from rag_eval import *", namespace)
        self.assertEqual(set(namespace) - {"__builtins__"}, set(rag_eval.__all__))

    def test_every_public_name_is_exported_or_not_by_decision(self):
        measures = self.measure_functions()
        for name in measures:
            self.assertIs(getattr(rag_eval, name), next(
                s.func for s in rag_eval._REGISTRY.values() if s.func.__name__ == name))
        undecided = self.public() - set(rag_eval.__all__) - set(self.NOT_EXPORTED) - measures
        self.assertEqual(undecided, set(), "add each to __all__, or to NOT_EXPORTED with a reason")
        self.assertEqual(set(self.NOT_EXPORTED) & set(rag_eval.__all__), set())
        self.assertEqual(measures & set(rag_eval.__all__), set())
        self.assertEqual(set(self.NOT_EXPORTED) - self.public(), set(), "stale NOT_EXPORTED")
        for code in ("EXIT_OK", "EXIT_REGRESSION", "EXIT_ERROR"):     # named exit codes too
            self.assertIn(code, rag_eval.__all__)

    def test_every_name_users_are_taught_is_exported(self):
        # Names in code the README's "From a notebook" section and the module
        # docstring show users: imports, calls, :func:/:class: references and
        # names alone in backquotes.
        with open(os.path.join(HERE, "docs", "09-notebooks-and-library.md"),
                  encoding="utf-8") as handle:
            readme = handle.read()
        section = readme.split("\n## From a notebook\n", 1)[1].split("\n## ", 1)[0]
        code = re.findall(r"```python\n(.*?)```", section, re.S)
        spans = re.findall(r"`+([^`]+)`+", re.sub(r"```.*?```", "", section, flags=re.S))
        doc = rag_eval.__doc__
        texts = code + spans + re.findall(r"^\s*>>> (.*)$", doc, re.M) + re.findall(
            r"``([^`]+)``", doc)
        taught = set(re.findall(r":(?:func|class):`~?(\w+)`", doc))
        for text in texts:
            for names in re.findall(r"\bimport ([\w, ]+)", text):
                taught.update(name.strip() for name in names.split(","))
            taught.update(re.findall(r"(?<![\w.])(\w+)\(", text))
            taught.update(re.findall(r"^@?(\w+)$", text.strip()))
        taught &= set(vars(rag_eval))
        self.assertLessEqual({"evaluate", "evaluate_files", "compare", "gate", "load_qrels",
                              "load_run", "EvalError", "Comparison", "GateResult", "Report"},
                             taught)
        for name in sorted(taught):
            with self.subTest(name=name):
                value = getattr(rag_eval, name)
                if name in self.NOT_EXPORTED:
                    continue        # taught to authors of measures (see NOT_EXPORTED)
                if inspect.isfunction(value) or inspect.isclass(value):
                    self.assertIn(name, rag_eval.__all__)


class ExampleFixtureTest(unittest.TestCase):
    """qrels.json / run.json / baseline.json, values worked out by hand.

    q1: grades by rank [-, 2, -, 1, -]; 2 relevant.  recall 2/2, success 1, mrr 1/2,
        ndcg = (3/log2 3 + 1/log2 5) / (3 + 1/log2 3) = 2.32347 / 3.63093 = 0.63991
    q2: the one relevant id is not retrieved: 0 everywhere.
    q3: grades by rank [2, 1, -, -, 2]; 3 relevant.  recall 1, success 1, mrr 1,
        ndcg = (3 + 1/log2 3 + 3/log2 6) / (3 + 3/log2 3 + 1/2) = 4.79150 / 5.39279 = 0.88850
    q4: only a grade-0 id: unscored.
    means over q1..q3: recall 2/3, success 2/3, mrr 1.5/3 = 0.5, ndcg 0.50947.
    """

    def setUp(self):
        self.qrels = rag_eval.load_qrels(example("qrels.json"))
        self.run = rag_eval.load_run(example("run.json"))
        self.report = rag_eval.evaluate(self.qrels, self.run, k=5)

    def test_means(self):
        L = math.log2
        q1 = (3 / L(3) + 1 / L(5)) / (3 + 1 / L(3))
        q3 = (3 + 1 / L(3) + 3 / L(6)) / (3 + 3 / L(3) + 0.5)
        expected = {"recall@5": 2 / 3, "success@5": 2 / 3, "mrr@5": 0.5,
                    "ndcg@5": (q1 + 0 + q3) / 3}
        self.assertEqual(list(self.report.mean), list(expected))
        for name, value in expected.items():
            self.assertAlmostEqual(self.report.mean[name], value, places=12, msg=name)
        self.assertEqual(round(self.report.mean["ndcg@5"], 4), 0.5095)

    def test_q2_scores_zero_and_q4_unscored(self):
        self.assertEqual(set(self.report.per_query["q2"].values()), {0.0})
        self.assertEqual(self.report.unscored, ("q4",))
        self.assertNotIn("q4", self.report.per_query)
        self.assertEqual(self.report.abstention, {"q4": 5})

    def test_ideal_uses_every_judged_grade(self):
        # q3 at k=3: normalising by the retrieved grades alone would give 1.0.
        report = rag_eval.evaluate(self.qrels, self.run, k=3, metrics="ndcg")
        self.assertEqual(round(report.per_query["q3"]["ndcg@3"], 3), 0.673)

    def test_gate_flags_recall_and_mrr(self):
        baseline = rag_eval.load_baseline(example("baseline.json"))
        result = rag_eval.gate(self.report, baseline)
        self.assertFalse(result.passed)
        self.assertEqual([c.measure for c in result.regressions], ["mrr@5", "recall@5"])

    def test_readme_command_exits_1(self):
        code, out, err = run_cli(example("qrels.json"), example("run.json"),
                                 "--baseline", example("baseline.json"))
        self.assertEqual(code, rag_eval.EXIT_REGRESSION)
        self.assertIn("FAILED, 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5", out)
        self.assertIn("0.5095", out)
        # The README's first example shows this output, line for line.
        readme = read_text(os.path.join(HERE, "README.md"))
        start = readme.index("```\nrag_eval 0.1.0: 3 queries scored") + 4
        shown = readme[start:readme.index("```", start)].splitlines()
        printed = (out + err).replace(example("baseline.json"), "baseline.json").splitlines()
        self.assertEqual(len(shown), len(printed))
        for line, real in zip(shown, printed):
            self.assertTrue(real.startswith(line[:-len(" ...")]) if line.endswith(" ...")
                            else real == line, (line, real))


# ---------------------------------------------------------------------------
# Exit codes, in a real process (the other command-line tests are in
# tests/test_command_line.py)
# ---------------------------------------------------------------------------

class ExitCodeTest(TempDir, unittest.TestCase):
    """0 ok, 1 a regression, 2 an error: whatever fails on the way (a closed
    stream, a bug), and in a real process."""
    def test_subprocess_smoke(self):
        proc = subprocess.run([sys.executable, "rag_eval.py", "qrels.json", "run.json",
                               "--baseline"], cwd=HERE, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("FAILED", proc.stdout)
        self.assertNotIn("Traceback", proc.stderr)

    def test_the_one_file_copied_alone_runs_the_example(self):
        # What a user who vendors rag_eval.py gets: the file and the three
        # example files in an empty folder, nothing of src/ or tests/.
        import shutil
        for name in ("rag_eval.py", "qrels.json", "run.json", "baseline.json"):
            shutil.copy(os.path.join(HERE, name), self.tmp)
        proc = subprocess.run([sys.executable, "rag_eval.py", "qrels.json", "run.json",
                               "--baseline"], cwd=self.tmp, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("FAILED, 2 regressions", proc.stdout)
        proc = subprocess.run([sys.executable, "-c", "import rag_eval; print(rag_eval.__file__)"],
                              cwd=self.tmp, capture_output=True, text=True)
        self.assertEqual(os.path.realpath(os.path.dirname(proc.stdout.strip())),
                         os.path.realpath(self.tmp), proc.stderr)

    def test_closed_stdout_keeps_the_exit_code(self):
        if not os.path.exists("/bin/sh"):
            self.skipTest("needs a POSIX shell")
        for extra, want in (("", 0), (" --baseline", 1), (" --metrics nope", 2)):
            with self.subTest(args=extra):
                proc = subprocess.run(["/bin/sh", "-c", '"$0" rag_eval.py qrels.json run.json%s >&-'
                                       % extra, sys.executable], cwd=HERE, capture_output=True,
                                      text=True)
                self.assertEqual(proc.returncode, want, proc.stderr)
                self.assertNotIn("Traceback", proc.stderr)


if __name__ == "__main__":
    unittest.main()
