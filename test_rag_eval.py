"""Tests of rag_eval (standard library only): ``python3 -m unittest``.

Expected values come from hand arithmetic (tests/data/hand_worked.json and the
comments below) or from peer tools, stored as data under tests/data/ by the
generators in tests/peers/ (which the suite never imports).

One TestCase per behaviour, in the order of rag_eval.py, under a banner per
area: public names and the bundled example; measures and their names; inputs
(sources, JSON and JSONL, TREC, streaming); ranking policies (ties, repeated
ids, which queries count, unlabelled runs); evaluation; statistics; comparison;
gate and baselines; output; command line; accelerations against their plain
twins (AccelerationTwinsTest) and forked workers; seeded fuzzing (FuzzTest,
last).  TempDir.report_of writes a qrels file and a run and runs main() on them.
"""

import contextlib
import csv
import copy
import doctest
import gzip
import html
import html.parser
import inspect
import io
import json
import itertools
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import traceback
import unittest
import unittest.mock

import rag_eval
from tests.support import (HERE, DATA, run_cli, TempDir, accelerated_only, example, EXAMPLE_FILES,
                           example_report, read_text, PEERS, SLICED_RUN, sliced_report,
                           saved_baseline, out_keys_sorted, plain_twins, _FUZZ_VALUES)
from tests import test_measures
from tests import test_inputs


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
        with open(os.path.join(HERE, "README.md"), encoding="utf-8") as handle:
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
# Output: the report in JSON, text and Markdown; the files written
# ---------------------------------------------------------------------------

class ReportOutputTest(TempDir, unittest.TestCase):
    """The documented JSON schema, deterministic bytes, the text and Markdown
    tables; warnings on stderr."""
    TOP = {"tool", "inputs", "measures", "rel", "queries", "unscored", "missing_from_run",
           "skipped", "abstention", "ties", "mean", "warnings", "unlabelled", "meta",
           "answerability"}

    GATE = {"passed", "mode", "max_drop", "slice_max_drop", "regressions", "improvements",
            "changes", "per_query", "notes", "meta_changes"}

    def json_out(self, *argv):
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--format", "json",
                                 *argv)
        return code, json.loads(out)

    def test_json_keys(self):
        code, doc = self.json_out()
        self.assertEqual(set(doc), self.TOP)
        code, doc = self.json_out("--per-query", "--baseline", example("baseline.json"),
                                  "--max-drop", "5%")
        self.assertEqual(set(doc), self.TOP | {"per_query", "gate"})
        self.assertEqual(set(doc["gate"]), self.GATE)
        self.assertIsNone(doc["gate"]["per_query"])
        self.assertEqual(doc["gate"]["max_drop"], "5%")
        self.assertEqual(doc["rel"], 1)
        self.assertEqual(doc["abstention"], {"q4": 5})
        self.assertEqual(len(doc["gate"]["changes"]), 4)
        saved = os.path.join(self.tmp, "b.json")
        run_cli(example("qrels.json"), example("run.json"), "--save-baseline", saved)
        code, doc = self.json_out("--baseline", saved)
        self.assertEqual(doc["gate"]["per_query"],
                         {"queries_added": [], "queries_removed": [], "regressions": [],
                          "labels_changed": [], "moved": []})
        self.assertEqual(doc["gate"]["slice_max_drop"], {})
        for entry in doc["gate"]["changes"]:
            self.assertEqual(set(entry), {"measure", "baseline", "current", "delta", "status",
                                          "p_value", "slice", "judged", "undecided",
                                          "suspect"})
            self.assertIsNone(entry["slice"])
            self.assertIsNone(entry["suspect"])

    def test_json_schema(self):
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "json", "--per-query",
                                 "--baseline", example("baseline.json"))
        self.assertEqual(code, 1)
        doc = json.loads(out)
        self.assertEqual(doc["tool"], {"name": "rag_eval", "version": rag_eval.__version__})
        self.assertEqual(doc["measures"], ["recall@5", "success@5", "mrr@5", "ndcg@5"])
        self.assertEqual(doc["queries"], 3)
        self.assertEqual(doc["unscored"], ["q4"])
        self.assertEqual(doc["per_query"]["q3"]["mrr@5"], 1.0)
        self.assertEqual(len(doc["inputs"]["run"]["sha256"]), 64)
        self.assertFalse(doc["gate"]["passed"])
        self.assertEqual([r["measure"] for r in doc["gate"]["regressions"]], ["mrr@5", "recall@5"])
        self.assertNotIn("NaN", out)

    def test_deterministic_bytes(self):
        first = run_cli(*EXAMPLE_FILES, "--format", "json", "--per-query")[1]
        second = run_cli(*EXAMPLE_FILES, "--format", "json", "--per-query")[1]
        self.assertEqual(first, second)
        self.assertEqual(out_keys_sorted(first), True)

    def test_undecodable_path_names_are_written_safely(self):
        name = os.fsdecode(b"run\xff.json")
        with open(os.path.join(self.tmp, name), "w") as handle:
            handle.write('{"q1": ["d1"]}')
        out_path = os.path.join(self.tmp, "out.json")
        code, out, err = run_cli(self.write("q.json", '{"q1": {"d1": 1}}'),
                                 os.path.join(self.tmp, name), "--format", "json", "-o", out_path)
        self.assertEqual(code, 0, err)
        with open(out_path, encoding="utf-8") as handle:
            self.assertIn("run\ufffd.json", json.load(handle)["inputs"]["run"]["path"])

    def test_markdown(self):
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "markdown", "--baseline",
                                 example("baseline.json"))
        self.assertEqual(code, 1)
        self.assertIn("| mean | 0.6667 | 0.6667 | 0.5000 | 0.5095 |", out)

    def test_per_query_text(self):
        code, out, err = run_cli(*EXAMPLE_FILES, "--per-query", "--k", "1,5", "--metrics", "success")
        self.assertEqual(code, 0)
        self.assertRegex(out, r"q2\s+0\.0000\s+0\.0000")
        self.assertRegex(out, r"mean\s+0\.3333\s+0\.6667")

    def test_warnings_go_to_stderr(self):
        run = self.write("r.json", '{"q1": ["refund-policy#2", "refund-policy#2"]}')
        code, out, err = run_cli(example("qrels.json"), run)
        self.assertEqual(code, 0)
        self.assertIn("warning: 2 queries in the qrels not in the run", err)
        self.assertIn("repeat ids", err)
        self.assertNotIn("warning", out)


class MarkdownReportTest(TempDir, unittest.TestCase):
    """--format markdown: the verdict first, every cell escaped, details in
    <details> blocks, and --max-bytes cutting whole rows of those only."""

    HOSTILE = {"a|b": {"d1": 1}, "<script>": {"d`2`": 1}, "x\ny": {"z": 1}}
    HOSTILE_RUN = {"a|b": ["d1"], "<script>": ["x", "d`2`"], "x\ny": ["z"]}

    def hostile(self):
        report = rag_eval.evaluate(self.HOSTILE, self.HOSTILE_RUN, k=2, metrics="mrr")
        # mrr@2: a|b 1 (d1 first), <script> 1/2 (d`2` second), x\ny 1: mean 2.5/3.
        baseline = rag_eval.Baseline({"mrr@2": 0.9}, per_query={
            "a|b": {"mrr@2": 1.0}, "<script>": {"mrr@2": 1.0}, "x\ny": {"mrr@2": 0.7}})
        return report, rag_eval.gate(report, baseline)

    def test_a_small_gated_report_exactly(self):
        report, result = self.hostile()
        # delta 2.5/3 - 0.9 = -0.0666666..., to 9 places; <script> fell 1 -> 0.5.
        self.assertEqual(rag_eval.render_markdown(report, result, per_query=True,
                                                  baseline_name="base|line.json"), """\
**Gate failed**: 1 regression: mrr@2

Gate vs base\\|line.json (max drop 0.02):

| measure | baseline | current | delta | status |
| --- | --- | --- | --- | --- |
| mrr@2 | 0.9000 | 0.8333 | -0.066666667 | REGRESSED |

rag\\_eval %s: 3 queries scored

| query | mrr@2 |
| --- | --- |
| mean | 0.8333 |

<details><summary>gate notes (1)</summary>

- too few queries to see a drop of the tolerance: mrr@2 +/-0.327 on 3 queries (about 801 needed)

</details>

<details><summary>per-query drops beyond the tolerance, largest first (1)</summary>

| measure | query | baseline | current | delta |
| --- | --- | --- | --- | --- |
| mrr@2 | &lt;script&gt; | 1.0000 | 0.5000 | -0.5000 |

</details>

<details><summary>per-query values (3 queries)</summary>

| query | mrr@2 |
| --- | --- |
| &lt;script&gt; | 0.5000 |
| a\\|b | 1.0000 |
| x\\\\ny | 1.0000 |

</details>

<details><summary>answerability</summary>

| answerable | unanswerable | unstated |
| --- | --- | --- |
| 3 | 0 | 0 |

</details>
""" % rag_eval.__version__)

    def assertCellsIntact(self, markdown):
        """Every table line splits into as many cells as its header, on the
        unescaped pipes; no raw HTML or backtick from the data survives."""
        columns = None
        for line in markdown.splitlines():
            if not line.startswith("|"):
                columns = None
                continue
            self.assertTrue(line.endswith(" |"), line)
            cells = re.split(r"(?<!\\) \| ", line[2:-2])
            columns = columns or len(cells)
            self.assertEqual(len(cells), columns, line)
            for cell in cells:
                self.assertNotRegex(cell, r"[<>]|(?<!\\)`", line)

    def test_hostile_ids_and_values_are_escaped(self):
        ids = ["a|b", "`x`", "<script>alert(1)</script>", "new\nline", "amp&lt;", "*em*",
               "_u_", "[l](http://x)", "back\\|slash", "$x$", "\r", "~~s~~"]
        qrels = {q: {"d%d" % i: 1} for i, q in enumerate(ids)}
        run = {q: ["d%d" % i] if i % 2 else ["n", "d%d" % i] for i, q in enumerate(ids)}
        code, out, err = self.report_of("--format", "markdown", "--per-query", "--k", "2",
                                        "--metrics", "mrr", "--meta", "who=<b>|`me`",
                                        qrels=qrels, run=run)
        self.assertEqual(code, 0, err)
        self.assertCellsIntact(out)
        self.assertIn("| a\\|b | 0.5000 |", out)
        self.assertIn("| \\`x\\` | 1.0000 |", out)
        self.assertIn("| &lt;script&gt;alert(1)&lt;/script&gt; | 0.5000 |", out)
        self.assertIn("| new\\\\nline | 1.0000 |", out)
        self.assertIn("| amp&amp;lt; | 0.5000 |", out)
        self.assertIn("| back\\\\\\|slash | 0.5000 |", out)
        self.assertIn("| who | &lt;b&gt;\\|\\`me\\` |", out)
        self.assertEqual(out.count("<details>"), out.count("</details>"))

    def test_the_first_line_is_the_verdict(self):
        cases = [(("--baseline", example("baseline.json")), 1,
                  "**Gate failed**: 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5"),
                 # Found by review: the three measures --metrics leaves out were called
                 # regressions; they are missing.
                 (("--baseline", example("baseline.json"), "--metrics", "recall", "--k", "5"), 1,
                  "**Gate failed**: 1 regression (undecided: unjudged ids could explain it): "
                  "recall@5; 3 missing: mrr@5, ndcg@5, success@5"),
                 (("--baseline", example("baseline.json"), "--max-drop", "0.1"), 0,
                  "**Gate passed**"),
                 ((), 0, "**rag\\_eval %s: 3 queries scored; 1 unscored (no relevant id): q4**"
                  % rag_eval.__version__)]
        for argv, expect_code, first in cases:
            with self.subTest(argv=argv):
                code, out, err = run_cli(*EXAMPLE_FILES, "--format", "markdown", *argv)
                self.assertEqual(code, expect_code, err)
                self.assertEqual(out.splitlines()[0], first)

    def test_the_verdict_names_at_most_ten_of_each_kind(self):
        # Found by review: 499 names on the first line of a gate over 600 slices.
        changes = tuple(rag_eval.MeasureChange("m%02d@5" % i, 0.5, 0.1, -0.4, "regressed")
                        for i in range(12)) + tuple(
            rag_eval.MeasureChange("x%02d@5" % i, 0.5, None, None, "missing") for i in range(3))
        result = rag_eval.GateResult(False, changes, "0.02", ())
        self.assertEqual(rag_eval._gate_headline(result),
                         "**Gate failed**: 12 regressions: m00@5, m01@5, m02@5, m03@5, m04@5, "
                         "m05@5, m06@5, m07@5, m08@5, m09@5, ... (2 more); 3 missing: x00@5, "
                         "x01@5, x02@5")
        self.assertTrue(rag_eval._gate_verdict(result, "b").endswith(
            "FAILED, 12 regressions: m00@5, m01@5, m02@5, m03@5, m04@5, m05@5, m06@5, m07@5, "
            "m08@5, m09@5, ... (2 more); 3 missing: x00@5, x01@5, x02@5"))

    def test_delta_at_the_gates_precision(self):
        # success@5: 2/3 against the baseline's 0.6667 is -0.0000333...: shown, not -0.0000.
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "markdown",
                                 "--baseline", example("baseline.json"))
        self.assertIn("| success@5 | 0.6667 | 0.6667 | -0.000033333 | dropped within tolerance "
                      "| 0.3333 |", out)
        self.assertIn("| mrr@5 | 0.5500 | 0.5000 | -0.0500 | REGRESSED (undecided: 10 "
                      "unjudged ids could explain it; label them: --to-label FILE) | 0.3333 |",
                      out)

    def big(self, *argv):
        """5000 queries, half of them fallen since a saved baseline."""
        qrels = {"q%04d|" % i: {"d": 1} for i in range(5000)}
        good = {q: ["d"] for q in qrels}
        bad = {q: ["x", "d"] if i % 2 else ["d"] for i, q in enumerate(qrels)}
        saved = os.path.join(self.tmp, "base.json")
        self.report_of("--metrics", "mrr", "--save-baseline", saved, qrels=qrels, run=good)
        return self.report_of("--metrics", "mrr", "--baseline", saved, "--per-query",
                              "--format", "markdown", *argv, qrels=qrels, run=bad)

    def test_the_size_cap_leaves_out_whole_rows(self):
        code, full, err = self.big("--max-bytes", "100000000")
        self.assertEqual(code, 1, err)
        self.assertGreater(len(full.encode()), 60000)
        head = full.split("<details>", 1)[0]
        for cap in (None, 60000, 20000, 3000, 1500, 900):
            with self.subTest(cap=cap):
                code, out, err = self.big(*(("--max-bytes", str(cap)) if cap else ()))
                self.assertEqual(code, 1, err)
                self.assertLessEqual(len(out.encode()), cap or 60000)
                self.assertTrue(out.startswith(head))   # verdict and tables untouched
                self.assertCellsIntact(out)
                self.assertEqual(out.count("<details>"), out.count("</details>"))
                full_lines = set(full.splitlines())
                left = 0
                for line in out.splitlines():
                    found = re.match(r"> \*\*(\d+) of (\d+) rows? left out\*\*", line) or \
                        re.match(r"> \*\*\d+ sections? left out\*\* \((\d+) rows?\)", line)
                    if found:
                        self.assertIn("the JSON report (`--format json`, same options) holds "
                                      "them all", line)
                        left += int(found.group(1))
                    else:
                        self.assertIn(line, full_lines)      # no row cut half-way
                self.assertEqual(len(self.detail_rows(out)) + left, len(self.detail_rows(full)))
                self.assertGreater(left, 0)

    @staticmethod
    def detail_rows(markdown):
        """The rows and notes of the <details> blocks (not their table headers)."""
        lines = "".join(markdown.split("<details>", 1)[1:]).splitlines() + [""]
        return [line for i, line in enumerate(lines) if line.startswith("- ") or (
            line.startswith("| ") and not line.startswith("| --- ")
            and not lines[i + 1].startswith("| --- "))]

    def test_the_verdict_and_gate_table_are_never_cut(self):
        code, out, err = self.big("--max-bytes", "100")
        self.assertEqual(code, 1, err)
        self.assertTrue(out.startswith("**Gate failed**: 1 regression (undecided: unjudged ids "
                                        "could explain it): mrr@5\n"))
        self.assertIn("| mrr@5 | 1.0000 | 0.7500 | -0.2500 | REGRESSED (undecided: 2500 unjudged "
                      "ids could explain it; label them: --to-label FILE) | 0.7500 |", out)
        self.assertNotIn("<details>", out)
        self.assertRegex(out, r"> \*\*\d+ sections left out\*\* \(\d+ rows\) to keep this "
                              r"under --max-bytes 100")

    def test_a_large_gate_table_keeps_to_the_cap(self):
        # Found by review: 600 slice values gave 106,813 bytes under the default cap, and
        # the first line named 499 measures. 3000 queries, slice g=v000..v599 by i % 600;
        # every odd slice falls from 1 to 0 (its queries rank x first).
        rows = [{"query_id": "q%04d" % i, "relevant": {"d": 1},
                 "slices": {"g": "v%03d" % (i % 600)}} for i in range(3000)]
        testset = ("t.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        good = {r["query_id"]: ["d"] for r in rows}
        bad = {q: ["x", "d"] if int(q[1:]) % 600 % 2 else ["d"] for q in good}
        saved = os.path.join(self.tmp, "base.json")
        argv = ("--metrics", "mrr,recall", "--k", "1", "--by", "g")
        self.assertEqual(self.report_of(*argv, "--save-baseline", saved, qrels=testset,
                                        run=good)[0], 0)
        for cap in (None, 20000, rag_eval.MARKDOWN_FLOOR):
            with self.subTest(cap=cap):
                code, out, err = self.report_of(*argv, "--baseline", saved, "--format",
                                                "markdown", *(("--max-bytes", str(cap))
                                                              if cap else ()),
                                                qrels=testset, run=bad)
                self.assertEqual(code, 1, err)
                self.assertLessEqual(len(out.encode()), cap or rag_eval.DEFAULT_MAX_BYTES)
                # 300 odd slices x 2 measures + the 2 overall rows regressed; mrr@1 is
                # undecided (an unjudged x at rank 1), recall@1 never (no bound for it here).
                self.assertEqual(out.splitlines()[0],
                                 "**Gate failed**: 602 regressions (301 undecided: unjudged ids "
                                 "could explain them): mrr@1, recall@1, g=v001: mrr@1, g=v001: "
                                 "recall@1, g=v003: mrr@1, g=v003: recall@1, g=v005: mrr@1, "
                                 "g=v005: recall@1, g=v007: mrr@1, g=v007: recall@1, ... "
                                 "(592 more)")
                head = out.split("<details>", 1)[0]
                self.assertIn("| recall@1 | 1.0000 | 0.5000 | -0.5000 | REGRESSED | 0.5000 |",
                              head)
                self.assertIn("| g=v001: recall@1 | 1.0000 | 0.0000 | -1.0000 | REGRESSED | "
                              "0.0000 |", head)
                self.assertNotIn("improved", head)
                self.assertEqual(out.count("<details>"), out.count("</details>"))
                # Every regressed slice row is in the table or counted as left out.
                row = r"^\| g=v\d+: \w+@1 \| 1\.0000 \| 0\.0000 "
                block = re.search(r"<details><summary>more regressed or missing slice rows "
                                  r"\((\d+)\)</summary>.*?</details>", out, re.S)
                shown = len(re.findall(row, head, re.M))
                self.assertEqual(shown + int(block.group(1)) if block else shown, 600)
                if block:
                    left = re.search(r"> \*\*(\d+) of \d+ rows? left out", block.group(0))
                    self.assertEqual(len(re.findall(row, block.group(0), re.M))
                                     + (int(left.group(1)) if left else 0), int(block.group(1)))
                else:
                    self.assertIsNone(cap)

    def test_max_bytes_must_be_a_positive_integer(self):
        for bad in ("0", "-5", "x", "1.5"):
            with self.subTest(bad=bad):
                self.assertBad(extra=("--max-bytes", bad), expect="--max-bytes")


class StepSummaryTest(TempDir, unittest.TestCase):
    """--step-summary appends the Markdown report to $GITHUB_STEP_SUMMARY."""

    def run_with_summary(self, *argv, value=None):
        path = os.path.join(self.tmp, "summary.md") if value is None else value
        with unittest.mock.patch.dict(os.environ, {"GITHUB_STEP_SUMMARY": path}):
            result = run_cli(*argv)
        return result + (read_text(path) if path and os.path.exists(path) else None,)

    def test_appended_even_when_the_gate_fails(self):
        code, out, err, summary = self.run_with_summary(
            *EXAMPLE_FILES, "--baseline", example("baseline.json"), "--step-summary")
        self.assertEqual(code, 1, err)
        self.assertTrue(out.startswith("rag_eval "))          # stdout keeps --format text
        markdown = run_cli(*EXAMPLE_FILES, "--baseline", example("baseline.json"),
                           "--format", "markdown")[1]
        self.assertEqual(summary, "\n" + markdown + "\n")
        self.assertTrue(summary.startswith("\n**Gate failed**: 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5\n"))
        code, out, err, summary = self.run_with_summary(*EXAMPLE_FILES, "--step-summary")
        self.assertEqual(code, 0, err)                        # appended after the first
        self.assertEqual(summary.count("**Gate failed**"), 1)
        self.assertIn("\n**rag\\_eval", summary)

    def test_json_on_stdout_markdown_in_the_summary(self):
        out_path = os.path.join(self.tmp, "report.json")
        code, out, err, summary = self.run_with_summary(
            *EXAMPLE_FILES, "--baseline", example("baseline.json"), "--step-summary",
            "-o", out_path)
        self.assertEqual((code, out), (1, ""))
        self.assertFalse(json.loads(read_text(out_path))["gate"]["passed"])
        self.assertTrue(summary.startswith("\n**Gate failed**"))

    def test_a_blank_line_before_the_block(self):
        # Found by review: appended straight after a paragraph, the verdict merged with it.
        path = self.write("summary.md", "an earlier step's paragraph")
        code, out, err, summary = self.run_with_summary(*EXAMPLE_FILES, "--step-summary",
                                                        "--max-drop", "0.5",
                                                        "--baseline", example("baseline.json"),
                                                        value=path)
        self.assertEqual(code, 0, err)
        self.assertTrue(summary.startswith("an earlier step's paragraph\n\n**Gate passed**\n"),
                        summary[:80])
        self.assertTrue(summary.endswith("\n\n"))
        self.write("summary.md", "a paragraph ending its line\n")
        summary = self.run_with_summary(*EXAMPLE_FILES, "--step-summary", value=path)[3]
        self.assertTrue(summary.startswith("a paragraph ending its line\n\n**rag\\_eval "),
                        summary[:80])

    def test_an_unusable_summary_file_is_an_error_before_any_output(self):
        # Found by review: the outputs were written, then the append failed with exit 2.
        out_path = os.path.join(self.tmp, "o.json")
        saved = os.path.join(self.tmp, "nb.json")
        code, out, err, summary = self.run_with_summary(
            *EXAMPLE_FILES, "--save-baseline", saved, "-o", out_path, "--step-summary",
            value=os.path.join(self.tmp, "nodir", "s.md"))
        self.assertEqual(code, 2)
        self.assertEqual(err.splitlines(), ["rag-eval: error: $GITHUB_STEP_SUMMARY %s: cannot "
                                            "append: No such file or directory"
                                            % os.path.join(self.tmp, "nodir", "s.md")])
        self.assertFalse(os.path.exists(out_path))
        self.assertFalse(os.path.exists(saved))

    def test_a_failed_append_at_the_end_is_a_warning(self):
        # Found by review: the summary is a log, not an artifact: the exit code stands.
        out_path = os.path.join(self.tmp, "o.json")
        real = rag_eval._append_step_summary

        def fail_when_writing(path, text):
            if text is not None:
                raise rag_eval.EvalError("$GITHUB_STEP_SUMMARY %s: cannot append: disk full"
                                         % path)
            return real(path, text)
        with unittest.mock.patch.object(rag_eval, "_append_step_summary", fail_when_writing):
            code, out, err, summary = self.run_with_summary(
                *EXAMPLE_FILES, "--baseline", example("baseline.json"), "-o", out_path,
                "--step-summary")
        self.assertEqual(code, 1, err)
        self.assertIn("rag-eval: warning: $GITHUB_STEP_SUMMARY %s: cannot append: disk full\n"
                      % os.path.join(self.tmp, "summary.md"), err)
        self.assertTrue(os.path.exists(out_path))

    def test_a_usage_error_is_one_escaped_line(self):
        # Found by review: argparse's errors never reached the summary.
        code, out, err, summary = self.run_with_summary(*EXAMPLE_FILES, "--step-summary",
                                                        "--max-drpo", "0.1")
        self.assertEqual(code, 2)
        self.assertEqual(err, "rag-eval: error: unrecognized arguments: --max-drpo 0.1 "
                              "(see --help)\n")
        self.assertEqual(summary, "\n**rag-eval error**: unrecognized arguments: --max-drpo "
                                  "0.1 (see --help)\n\n")
        code, out, err, summary = self.run_with_summary(*EXAMPLE_FILES, "--max-drpo", "0.1",
                                                        value=os.path.join(self.tmp, "s2.md"))
        self.assertEqual((code, summary), (2, None))     # not asked for: nothing appended

    def test_an_internal_error_is_one_line_too(self):
        with unittest.mock.patch.object(rag_eval, "_run_cli", side_effect=ZeroDivisionError("x")):
            code, out, err, summary = self.run_with_summary(*EXAMPLE_FILES, "--step-summary")
        self.assertEqual(code, 2)
        self.assertEqual(summary.strip(), "**rag-eval error**: internal error (a bug in "
                         "rag\\_eval, please report it): ZeroDivisionError: x; rerun with "
                         "--debug or RAG\\_EVAL\\_DEBUG=1 to see the traceback")

    def test_the_cap_applies(self):
        qrels = {"q%d" % i: {"d": 1} for i in range(3000)}
        run = {q: ["d"] for q in qrels}
        with unittest.mock.patch.dict(os.environ, {"GITHUB_STEP_SUMMARY":
                                                   os.path.join(self.tmp, "s.md")}):
            code, out, err = self.report_of("--per-query", "--step-summary", "--max-bytes",
                                            "5000", qrels=qrels, run=run)
        self.assertEqual(code, 0, err)
        summary = read_text(os.path.join(self.tmp, "s.md"))
        self.assertLessEqual(len(summary.encode()), 5000 + 2)   # + the blank lines around it
        self.assertIn("rows left out** to keep this under --max-bytes 5000", summary)

    def test_unset_variable_is_an_error(self):
        for value in ("", None):
            with self.subTest(value=value):
                env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
                if value is not None:
                    env["GITHUB_STEP_SUMMARY"] = value
                with unittest.mock.patch.dict(os.environ, env, clear=True):
                    self.assertBad(extra=("--step-summary",),
                                   expect="--step-summary: $GITHUB_STEP_SUMMARY is not set")

    def test_an_input_error_is_one_escaped_line(self):
        run = self.write("r|<b>.json", "{")
        code, out, err, summary = self.run_with_summary(example("qrels.json"), run,
                                                        "--step-summary")
        self.assertEqual(code, 2)
        self.assertEqual(len(err.splitlines()), 1)
        lines = [line for line in summary.splitlines() if line]
        self.assertEqual(len(lines), 1)
        self.assertTrue(lines[0].startswith("**rag-eval error**: "), lines)
        self.assertIn("r\\|&lt;b&gt;.json", lines[0])


class OutputFormatTest(TempDir, unittest.TestCase):
    """-o FILE with no --format: the extension picks the format."""

    def test_extension_picks_the_format(self):
        expected = {"r.json": "{", "r.JSON": "{", "r.md": "**Gate failed**",
                    "r.markdown": "**Gate failed**", "r.txt": "rag_eval ", "r": "rag_eval ",
                    # html only once a renderer exists for it (another branch adds one)
                    "r.html": "<" if "html" in rag_eval._RENDERERS else "rag_eval "}
        for name, start in expected.items():
            with self.subTest(name=name):
                path = os.path.join(self.tmp, name)
                code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", example("baseline.json"),
                                         "-o", path)
                self.assertEqual((code, out), (1, ""), err)
                self.assertTrue(read_text(path).startswith(start), read_text(path)[:80])
                os.unlink(path)

    def test_format_wins_over_the_extension(self):
        path = os.path.join(self.tmp, "r.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "text", "-o", path)
        self.assertEqual(code, 0, err)
        self.assertTrue(read_text(path).startswith("rag_eval "))


class LoadReportTest(TempDir, unittest.TestCase):
    """load_report / Report.from_dict read a JSON report back: the report's
    fields come back, so render_json writes the same bytes again; the results
    of the run (gate, comparison, sweep, elapsed_seconds) are not read."""

    def round_trip(self, report, result=None):
        text = rag_eval.render_json(report, result, per_query=True)
        path = self.write("report.json", text)
        loaded = rag_eval.load_report(path)
        self.assertEqual(rag_eval.render_json(loaded, result, per_query=True), text)
        for field in ("measures", "mean", "per_query", "n", "warnings", "unscored", "missing",
                      "skipped", "abstention", "ties", "rel", "unlabelled", "answerability",
                      "min_score", "mapping", "average"):
            self.assertEqual(getattr(loaded, field), getattr(report, field), field)
        return loaded

    def test_the_bundled_example_and_its_gate(self):
        report = example_report()
        result = rag_eval.gate(report, rag_eval.load_baseline(example("baseline.json")))
        loaded = self.round_trip(report, result)
        self.assertEqual(loaded.mean["mrr@5"], 0.5)
        self.assertEqual(rag_eval.render_text(loaded, result, per_query=True),
                         rag_eval.render_text(report, result, per_query=True))
        self.assertEqual(rag_eval.render_markdown(loaded, result, per_query=True),
                         rag_eval.render_markdown(report, result, per_query=True))
        # The gate of the loaded report is the gate of the report.
        self.assertEqual(rag_eval.gate(loaded, {"mrr@5": 0.55}),
                         rag_eval.gate(report, {"mrr@5": 0.55}))

    def test_a_loaded_reports_judge_slices_never_pass_on_a_lost_query(self):
        # Found by review: q1 (topic a, score 0.0) leaves the score file and q2 (a)
        # falls 1.0 -> 0.9.  Fresh: a is gated on q2 alone, 1.0 -> 0.9, regressed.
        # Read back from JSON (no slice members), a's means went 0.5 -> 0.9: that
        # passed; so did q1 moving to topic b, or q1 and q3 swapping topics.  A
        # loaded report's judge-score slices are missing; written without
        # --per-query (no scored query named), it is missing overall too.
        def report(rows):
            scores = rag_eval.load_scores(io.StringIO("".join(
                json.dumps({"query_id": q, "f": v}) + "\n" for q, _, v in rows)))
            return rag_eval.evaluate_scores(scores, queries={
                q: {"slices": {"topic": [t]}} for q, t, _ in rows}, by=("topic",))
        path = os.path.join(self.tmp, "b.json")
        rag_eval.save_baseline(report([("q1", "a", 0.0), ("q2", "a", 1.0), ("q3", "b", 0.5),
                                       ("q4", "b", 0.5)]), path)
        baseline = rag_eval.load_baseline(path)
        options = dict(max_drop=0.05, slice_max_drop={"topic=a": 0})
        left = report([("q2", "a", 0.9), ("q3", "b", 0.5), ("q4", "b", 0.5)])
        moved = report([("q1", "b", 0.0), ("q2", "a", 0.9), ("q3", "b", 0.5), ("q4", "b", 0.5)])
        swapped = report([("q1", "b", 0.6), ("q2", "a", 0.9), ("q3", "a", 1.0), ("q4", "b", 0.5)])
        slices = {"topic=a": "missing", "topic=b": "missing"}
        for now, per_query, overall in ((left, True, "dropped within tolerance"),
                                        (left, False, "missing"),
                                        (moved, True, "dropped within tolerance"),
                                        (swapped, True, "improved"), (swapped, False, "missing")):
            self.assertFalse(rag_eval.gate(now, baseline, **options).passed)
            loaded = rag_eval.load_report(io.StringIO(rag_eval.render_json(now,
                                                                           per_query=per_query)))
            result = rag_eval.gate(loaded, baseline, **options)
            self.assertFalse(result.passed)
            self.assertEqual({c.slice: c.status for c in result.changes},
                             {None: overall, **slices})

    def test_a_report_without_slices_says_why_the_baselines_are_missing(self):
        # Found by review: written without --by and read back, the same data failed
        # its gate with every slice MISSING and no note.
        def report(by):
            scores = rag_eval.load_scores(io.StringIO("".join(
                json.dumps({"query_id": q, "f": v}) + "\n" for q, v in (("q1", 0.2), ("q2", 0.8)))))
            return rag_eval.evaluate_scores(scores, queries={
                "q1": {"slices": {"topic": ["a"]}}, "q2": {"slices": {"topic": ["b"]}}}, by=by)
        path = os.path.join(self.tmp, "b.json")
        rag_eval.save_baseline(report(()), path)
        loaded = rag_eval.load_report(io.StringIO(rag_eval.render_json(report(()),
                                                                       per_query=True)))
        result = rag_eval.gate(loaded, rag_eval.load_baseline(path))
        self.assertEqual({c.slice: c.status for c in result.changes},
                         {None: "unchanged", "topic=a": "missing", "topic=b": "missing"})
        self.assertIn("the baseline holds slices and the report none: they are missing (score "
                      "with the query metadata and --by, or write the report with --by)",
                      result.notes)

    def test_slices_unit_measures_answerability(self):
        # q2 stated unanswerable abstains (its one id is cut by min_score 0.1);
        # recall(unit=doc) counts documents (doc#chunk), abstained only q2: n differs.
        report = rag_eval.evaluate(
            {"q1": {"docA": 1}, "q2": {}, "q3": {"docB": 2}},
            {"q1": {"docA#1": 0.9, "x#2": 0.5}, "q2": {"y#1": 0.05},
             "q3": {"z#1": 0.4, "docB#3": 0.3}},
            k=2, measures="recall(unit=doc),abstained", doc_sep="#", min_score=0.1,
            queries={"q2": {"answerable": False}, "q1": {"slices": {"src": ["real"]}},
                     "q3": {"slices": {"src": ["synthetic"]}}}, by="src")
        self.assertEqual(report.n, {"recall(unit=doc)@2": 2, "abstained": 1})
        loaded = self.round_trip(report)
        self.assertEqual(loaded.slices, report.slices)
        self.assertEqual(loaded.by, ("src",))
        self.assertEqual(loaded.answerability, {"answerable": 2, "unanswerable": 1,
                                                "unstated": 0})
        self.assertIn("| real | 1 | 0 | 1.0000 | - |", rag_eval.render_markdown(loaded))

    def test_hold_out_and_unjudged_bounds(self):
        report = sliced_report(holdout="split=holdout", by=["source", "tag"],
                               reveal_holdout=True, unjudged_bounds=True)
        self.assertIsNotNone(report.unjudged)
        loaded = self.round_trip(report)
        self.assertEqual(loaded.holdout.mean, report.holdout.mean)
        self.assertEqual(loaded.holdout.per_query, report.holdout.per_query)
        self.assertEqual(loaded.unjudged["mean"], report.unjudged["mean"])
        self.assertEqual(loaded.by, ("source", "tag"))
        rag_eval.render_text(loaded, per_query=True)      # renders without its membership

    def test_the_results_of_the_run_are_not_read(self):
        # Found by review: the README said every field the JSON holds comes back.
        path = os.path.join(self.tmp, "r.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--per-query", "--baseline",
                                 example("baseline.json"), "--compare", example("run.json"),
                                 "--timing", "--resamples", "100", "-o", path)
        self.assertEqual(code, 1, err)
        written = json.loads(read_text(path))
        self.assertTrue({"gate", "comparison", "elapsed_seconds"} <= set(written))
        again = json.loads(rag_eval.render_json(rag_eval.load_report(path), per_query=True))
        self.assertEqual(again, {k: v for k, v in written.items()
                                 if k not in ("gate", "comparison", "elapsed_seconds")})

    def test_from_the_command_line(self):
        path = os.path.join(self.tmp, "r.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--per-query", "--meta", "run.id=7",
                                 "-o", path)
        self.assertEqual(code, 0, err)
        loaded = rag_eval.load_report(path)
        self.assertEqual(loaded.meta, {"run.id": "7"})
        self.assertEqual(loaded.inputs["run"]["path"], example("run.json"))
        self.assertEqual(rag_eval.render_json(loaded, per_query=True), read_text(path))

    def test_malformed_fields_are_one_line_naming_the_field(self):
        # Found by review: mean 7.0 loaded and passed a gate at 0.9; the others loaded,
        # then failed later with a raw TypeError or KeyError; a string became a tuple
        # of its characters.
        report = sliced_report(holdout="split=holdout", by=["source"], reveal_holdout=True,
                               unjudged_bounds=True)
        good = json.loads(rag_eval.render_json(report, per_query=True))
        some = next(iter(good["per_query"]))
        cases = [(dict(good, mean=dict(good["mean"], **{"recall@5": 7.0})),
                  "mean: 'recall@5' must be a number in [0, 1], got 7.0"),
                 (dict(good, mean={"nonsense@@": 0.5}), "mean: "),
                 (dict(good, per_query={some: {"recall@5": -1}}),
                  "per_query %r: 'recall@5' must be a number in [0, 1], got -1" % some),
                 (dict(good, slices={"x=y": 1}), "slices 'x=y': expected an object, got 1"),
                 (dict(good, slices={"xy": good["slices"]["source=real"]}),
                  "slices: 'xy' is not a slice name field=value"),
                 (dict(good, answerability=[1]), "answerability: expected an object, got [1]"),
                 (dict(good, holdout=dict(good["holdout"], queries="3")),
                  "holdout: queries, unscored and missing_from_run must be counts"),
                 (dict(good, n={"recall@5": 3}), "n: expected a count for each of the measures"),
                 (dict(good, measures=["nonsense@@"]), "measures: "),
                 (dict(good, unjudged_bounds={"mean": {"recall@5": [1]}}),
                  "unjudged_bounds mean 'recall@5': expected [lower, upper], got [1]"),
                 (dict(good, unjudged_bounds={"mean": {"recall@5": [0.1, 2]}}),
                  "unjudged_bounds mean: 'recall@5' must be a number in [0, 1], got 2"),
                 (dict(good, inputs=[1]), "inputs: expected an object, got [1]"),
                 (dict(good, warnings="abc"), "warnings: expected a list, got 'abc'"),
                 (dict(good, unscored=[1]), "unscored: expected a string, got 1"),
                 (dict(good, abstention={"abstained": -1}),
                  "abstention 'abstained': expected a count, got -1"),
                 (dict(good, ties={"per_query": {"q": "x"}}), "ties per_query 'q': expected a count"),
                 (dict(good, average="best"), "average must be one of scored, trec_eval"),
                 (dict(good, meta={"a": 1}), "meta"),
                 (dict(good, min_score="x"), "min_score")]
        self.assertEqual(rag_eval.render_json(rag_eval.Report.from_dict(good), per_query=True),
                         rag_eval.render_json(report, per_query=True))
        for number, (data, expect) in enumerate(cases):
            with self.subTest(expect=expect):
                path = self.write("bad%d.json" % number, json.dumps(data))
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.load_report(path)
                message = str(caught.exception)
                self.assertTrue(message.startswith(path + ": "), message)
                self.assertIn(expect, message)
                self.assertEqual(len(message.splitlines()), 1)
        with self.assertRaises(rag_eval.EvalError):   # the gate never sees the 7.0
            rag_eval.assert_no_regression(rag_eval.Report.from_dict(cases[0][0]),
                                          {"recall@5": 0.9})

    def test_without_per_query_values(self):
        # Found by review: "queries": 3 came back as 0, and a gate then called every
        # query of a per-query baseline removed.
        path = os.path.join(self.tmp, "r.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "-o", path)
        self.assertEqual(code, 0, err)
        loaded = rag_eval.load_report(path)
        self.assertEqual((loaded.per_query, loaded.scored_count), ({}, 3))
        self.assertEqual(rag_eval.render_json(loaded), read_text(path))
        self.assertTrue(repr(loaded).startswith("<Report 3 queries, 1 unscored: "), repr(loaded))
        self.assertTrue(rag_eval.render_text(loaded).startswith(
            "rag_eval %s: 3 queries scored; 1 unscored" % rag_eval.__version__))
        # Against a baseline with per-query values: the means alone, as a means-only baseline.
        report = example_report()
        result = rag_eval.gate(loaded, rag_eval.load_baseline(io.StringIO(
            json.dumps(rag_eval.baseline_dict(report)))))
        means_only = rag_eval.gate(report, rag_eval.Baseline(report.mean))
        self.assertEqual((result.queries_removed, result.queries_added, result.query_drops),
                         ((), (), None))
        self.assertEqual(result.changes, means_only.changes)
        self.assertEqual(result.notes, ("the report holds means only (read from a JSON report "
                                        "written without --per-query): per-query checks are "
                                        "unavailable",))
        self.assertNotIn("per_query", rag_eval.baseline_dict(loaded))
        with open(path) as handle:
            data = json.load(handle)
        for bad in (-1, "3", True):
            with self.subTest(queries=bad):
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.Report.from_dict(dict(data, queries=bad))
                self.assertIn("queries: expected a count", str(caught.exception))

    def test_a_loaded_report_with_slices_is_no_baseline(self):
        # Found by review: save_baseline(load_report(f)) of a report written with --by
        # failed with an AttributeError (no membership), and one with a hold-out wrote a
        # baseline that load_baseline refused (no members_sha256). A baseline keeps each
        # slice's queries and the hold-out's hash; a JSON report keeps neither.
        path = os.path.join(self.tmp, "base.json")
        for options, expect in (
                ({"by": ["source"]}, "which does not keep the queries of each slice (only "
                                     "their means), and a baseline holds it: save the baseline "
                                     "from the evaluation itself (--save-baseline, or "
                                     "save_baseline(evaluate(...))), or drop the slices"),
                ({"holdout": "split=holdout"}, "which does not keep the hash of the "
                                               "hold-out's queries, and a baseline holds it"),
                ({"holdout": "split=holdout", "by": ["source"]},
                 "which does not keep the queries of each slice (only their means) nor the "
                 "hash of the hold-out's queries, and a baseline holds both: save the "
                 "baseline from the evaluation itself (--save-baseline, or "
                 "save_baseline(evaluate(...)))")):
            with self.subTest(options=options):
                report = sliced_report(**options)
                loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
                    report, per_query=True)))
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.save_baseline(loaded, path)
                message = str(caught.exception)
                self.assertIn("this report was read back from JSON, " + expect, message)
                self.assertEqual(len(message.splitlines()), 1)
                self.assertFalse(os.path.exists(path))
                with self.assertRaisesRegex(rag_eval.EvalError, "read back from JSON"):
                    rag_eval.assert_no_regression(report, loaded)
        # As the message says: without its slices, the overall alone is saved and gated.
        loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
            sliced_report(by=["source"]), per_query=True)))
        rag_eval.save_baseline(loaded._replace(slices=None, by=()), path)
        baseline = rag_eval.load_baseline(path)
        self.assertEqual((baseline.slices, baseline.membership), (None, None))
        result = rag_eval.gate(sliced_report(by=["source"]), baseline)
        self.assertEqual([c.slice for c in result.changes], [None, None])
        self.assertIn("the baseline holds no slices: only the overall mean is gated; save one "
                      "with query metadata to gate every slice", result.notes)

    def test_the_command_line_reads_no_report_as_an_input(self):
        # The command line saves a baseline only from its own evaluation: a JSON report
        # where qrels, a run, a score file or query metadata belong is refused in one
        # line naming the file, and nothing is written.
        report = self.write("report.json", rag_eval.render_json(
            sliced_report(by=["source"]), per_query=True))
        for where in ("qrels", "run"):
            with self.subTest(where=where):
                self.assertBad(**{where: report}, expect="report.json")
        self.assertBad(extra=("--queries", report), expect="report.json")
        saved = os.path.join(self.tmp, "saved.json")
        code, out, err = run_cli("--scores", report, "--save-baseline", saved)
        self.assertEqual((code, out), (rag_eval.EXIT_ERROR, ""))
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("report.json", err)
        self.assertFalse(os.path.exists(saved))

    def test_a_loaded_report_gates_its_slices_on_their_means(self):
        # The baseline saved by the evaluation (with its slices' queries); the later
        # run's JSON report (per-query, --by each field) read back and gated in Python.
        baseline = saved_baseline(self, sliced_report(by=["source"]))
        fields = ["source", "split", "tag"]

        def loaded(run, by=fields):
            report = sliced_report(run=run, by=by)
            return rag_eval.load_report(self.write("r.json", rag_eval.render_json(
                report, per_query=True))), report

        same, report = loaded(None)
        for mode in ("tolerance", "significant"):
            result = rag_eval.gate(same, baseline, mode=mode)
            self.assertTrue(result.passed, result)
            self.assertEqual(len(result.changes), 12)      # (overall + 5 slices) x 2
            self.assertIn("the report was read back from JSON, which keeps its slices' means, "
                          "not their queries: each slice is gated on its means (no per-query "
                          "pairing), a judge score's not at all", result.notes)
        # Written with --by source only: the slices of split and tag are missing.
        result = rag_eval.gate(loaded(None, ["source"])[0], baseline)
        self.assertEqual({c.slice for c in result.regressions},
                         {"split=holdout", "tag=eu", "tag=pricing"})
        self.assertEqual({c.status for c in result.regressions}, {"missing"})
        self.assertIn("the report was read back from JSON, which keeps the slices of its "
                      "--by fields only: the baseline's slices of split, tag are missing "
                      "(write the report with --by split --by tag)", result.notes)
        # r1 loses e: source=real (r1, r2, h1) recall@2 from (1 + 1 + 1)/3 = 1 to
        # (0 + 1 + 1)/3 = 2/3, mrr@2 from (1 + 1/2 + 1/2)/3 = 2/3 to (0 + 1/2 + 1/2)/3
        # = 1/3; source=synthetic unchanged.
        worse, report = loaded(dict(SLICED_RUN, r1=["x", "y"]))
        for mode in ("tolerance", "significant"):
            result = rag_eval.gate(worse, baseline, mode=mode)
            self.assertFalse(result.passed)
            rows = {(c.slice, c.measure): c for c in result.changes
                    if c.slice in ("source=real", "source=synthetic")}
            self.assertEqual({key: c.status for key, c in rows.items()},
                             {("source=real", "mrr@2"): "regressed",
                              ("source=real", "recall@2"): "regressed",
                              ("source=synthetic", "mrr@2"): "unchanged",
                              ("source=synthetic", "recall@2"): "unchanged"})
            self.assertAlmostEqual(rows["source=real", "recall@2"].current, 2 / 3, places=12)
            self.assertAlmostEqual(rows["source=real", "mrr@2"].current, 1 / 3, places=12)
            self.assertAlmostEqual(rows["source=real", "mrr@2"].baseline, 2 / 3, places=12)
            # The evaluation's own gate says the same of these rows.
            own = {(c.slice, c.measure): c.status for c in rag_eval.gate(
                report, baseline, mode=mode).changes if (c.slice, c.measure) in rows}
            self.assertEqual(own, {key: c.status for key, c in rows.items()})

    def test_a_loaded_report_with_a_hold_out_gates_it_on_its_means(self):
        # Found by review: a loaded report (no members_sha256) said the hold-out
        # changed since the baseline ("2 -> 2 queries") on an unchanged report.
        baseline = saved_baseline(self, sliced_report(holdout="split=holdout"))

        def gated(run=None):
            report = sliced_report(run=run, holdout="split=holdout", by=["source", "tag"])
            loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
                report, per_query=True)))
            return rag_eval.gate(loaded, baseline)

        result = gated()
        self.assertTrue(result.passed, result)
        self.assertFalse(any("changed since the baseline (" in n for n in result.notes))
        self.assertIn("the report was read back from JSON, which does not keep the hash of "
                      "the hold-out's queries: whether split=holdout changed since the "
                      "baseline is not known", result.notes)
        # h1 loses g: the hold-out (h1, h2) recall@2 from (1 + 0)/2 = 1/2 to 0.
        result = gated(dict(SLICED_RUN, h1=["x", "y"]))
        held = [c for c in result.changes if c.slice == "split=holdout"]
        self.assertEqual({(c.measure, c.status, c.baseline, c.current) for c in held},
                         {("recall@2", "regressed", 0.5, 0.0), ("mrr@2", "regressed", 0.25, 0.0)})
        self.assertFalse(result.passed)

    def test_a_loaded_report_with_a_revealed_hold_out_gates(self):
        # Found by the fuzzer: gate() of a loaded report whose hold-out was revealed
        # failed with KeyError 'all' (the ids of its members).
        report = sliced_report(holdout="split=holdout", reveal_holdout=True, by=["source", "tag"])
        baseline = saved_baseline(self, report)
        loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
            report, per_query=True)))
        self.assertEqual(loaded.holdout.ids["all"], ("h1", "h2"))
        result = rag_eval.gate(loaded, baseline)
        self.assertEqual([c.status for c in result.changes if c.slice == "split=holdout"],
                         ["unchanged", "unchanged"])
        self.assertEqual(result.queries_removed, ())
        # Written without --per-query: its gate (means only) failed with an
        # AttributeError (the hold-out's per-query values were None).
        loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(report)))
        self.assertIsNone(loaded.holdout.per_query)
        result = rag_eval.gate(loaded, baseline)
        self.assertTrue(result.passed, result)
        # h1 loses g: the hold-out recall@2 from (1 + 0)/2 = 1/2 to 0, on its means.
        worse = sliced_report(run=dict(SLICED_RUN, h1=["x", "y"]), holdout="split=holdout",
                              reveal_holdout=True, by=["source", "tag"])
        for per_query in (True, False):
            loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
                worse, per_query=per_query)))
            held = {c.measure: (c.status, c.baseline, c.current)
                    for c in rag_eval.gate(loaded, baseline).changes if c.slice == "split=holdout"}
            self.assertEqual(held, {"recall@2": ("regressed", 0.5, 0.0),
                                    "mrr@2": ("regressed", 0.25, 0.0)})

    def test_slices_all_held_out_come_back(self):
        # Found by the fuzzer: --by split with --holdout split=holdout writes "slices": {}
        # (every split slice is held out); read back, render_json dropped the key.
        report = sliced_report(holdout="split=holdout", by=["split"])
        text = rag_eval.render_json(report, per_query=True)
        self.assertEqual(json.loads(text)["slices"], {})
        loaded = rag_eval.load_report(self.write("r.json", text))
        self.assertEqual(rag_eval.render_json(loaded, per_query=True), text)

    def test_a_loaded_judge_score_report_gates_its_slices(self):
        # A loaded per-query score report pairs its overall row with the baseline's
        # queries; its slices' members are not in the JSON, so which queries both sides
        # scored in a slice is not known: a judge score's slice rows are missing, said
        # in a note (a review found them gated on their means, where a lost, added or
        # moved query let a slice pass that the run itself fails).
        self.write("m.jsonl", "".join(json.dumps({"query_id": q, "slices": {"src": src}}) + "\n"
                                      for q, src in (("q1", "a"), ("q2", "b"), ("q3", "a"),
                                                     ("q4", "b"))))
        base = os.path.join(self.tmp, "base.json")

        def scores(q2, *argv):
            rows = (("q1", 0.9), ("q2", q2), ("q3", 0.7), ("q4", 0.6))
            path = self.write("s.jsonl", "".join(json.dumps({"query_id": q, "f": v}) + "\n"
                                                 for q, v in rows))
            out = os.path.join(self.tmp, "r.json")
            code, _, err = run_cli("--scores", path, "--queries", os.path.join(self.tmp, "m.jsonl"),
                                   "--by", "src", "--format", "json", "--per-query", "-o", out,
                                   *argv)
            self.assertEqual(code, 0, err)
            return rag_eval.load_report(out)

        scores(0.5, "--save-baseline", base)
        baseline = rag_eval.load_baseline(base)
        name = "score(field=f)"
        unknown = ("%s: the report (read back from JSON) keeps no slice members, so which "
                   "queries both sides scored is not known: missing in src=a, src=b (gate "
                   "the run itself, not a report of it)" % name)
        for mode in ("tolerance", "significant"):
            result = rag_eval.gate(scores(0.5), baseline, mode=mode)
            self.assertFalse(result.passed)
            self.assertEqual({c.slice: c.status for c in result.changes},
                             {None: "unchanged", "src=a": "missing", "src=b": "missing"})
            self.assertIn(unknown, result.notes)
            self.assertFalse(any("no score now" in n for n in result.notes), result.notes)
        # q2 0.5 -> 0.3: overall from 2.7/4 = 0.675 to 2.5/4 = 0.625, regressed.
        result = rag_eval.gate(scores(0.3), baseline)
        got = {c.slice: (c.status, c.baseline, c.current) for c in result.changes}
        self.assertEqual({s: v[0] for s, v in got.items()},
                         {None: "regressed", "src=a": "missing", "src=b": "missing"})
        self.assertAlmostEqual(got[None][1], 0.675, places=12)
        self.assertAlmostEqual(got[None][2], 0.625, places=12)
        # q2 lost its score: the overall is compared on q1, q3, q4 (unchanged); the
        # report does not say which slice holds q2, so every slice row is MISSING.
        rows = [json.dumps({"query_id": q, "f": v}) for q, v in (("q1", 0.9), ("q2", None),
                                                                  ("q3", 0.7), ("q4", 0.6))]
        self.write("s.jsonl", "\n".join(rows) + "\n")
        out = os.path.join(self.tmp, "lost.json")
        code, _, err = run_cli("--scores", os.path.join(self.tmp, "s.jsonl"), "--queries",
                               os.path.join(self.tmp, "m.jsonl"), "--by", "src",
                               "--allow-missing-scores", "--format", "json", "--per-query",
                               "-o", out)
        self.assertEqual(code, 0, err)
        result = rag_eval.gate(rag_eval.load_report(out), baseline)
        self.assertFalse(result.passed)
        self.assertEqual({c.slice: c.status for c in result.changes},
                         {None: "unchanged", "src=a": "missing", "src=b": "missing"})
        self.assertIn(unknown, result.notes)

    def test_not_a_report_is_one_line_naming_the_file(self):
        saved = os.path.join(self.tmp, "base.json")
        rag_eval.save_baseline(example_report(), saved)
        good = json.loads(rag_eval.render_json(example_report(), per_query=True))
        cases = [(self.write("a.json", "{"), "a.json:1:2: invalid JSON"),
                 (self.write("b.json", "[1]"), "b.json: not a rag_eval JSON report"),
                 (saved, "base.json: a baseline (read it with load_baseline)"),
                 (self.write("c.json", json.dumps(dict(good, mean={"mrr@5": "x"}))),
                  "c.json: mean: 'mrr@5' must be a number in [0, 1], got 'x'"),
                 (self.write("d.json", json.dumps({k: v for k, v in good.items()
                                                   if k != "warnings"})),
                  "d.json: not a rag_eval JSON report (--format json): KeyError"),
                 (os.path.join(self.tmp, "missing.json"), "missing.json")]
        for path, expect in cases:
            with self.subTest(path=path):
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.load_report(path)
                self.assertIn(expect, str(caught.exception))
                self.assertEqual(len(str(caught.exception).splitlines()), 1)


class NotebookReprTest(unittest.TestCase):
    """__repr__ shows counts and means (never the per-query table);
    _repr_markdown_ the numbers in a Markdown table."""

    def test_report(self):
        report = example_report()
        self.assertEqual(repr(report), "<Report 3 queries, 1 unscored: recall@5=0.6667 "
                                       "success@5=0.6667 mrr@5=0.5000 ndcg@5=0.5095>")
        markdown = report._repr_markdown_()
        self.assertIn("| mean | 0.6667 | 0.6667 | 0.5000 | 0.5095 |", markdown)
        self.assertEqual(markdown, rag_eval.render_markdown(report))

    def test_short_for_many_queries(self):
        qrels = {"q%d" % i: {"d": 1} for i in range(50000)}
        run = {q: ["d"] if i % 4 else ["x", "d"] for i, q in enumerate(qrels)}
        report = rag_eval.evaluate(qrels, run, k=[1, 5, 10],
                                   measures="recall,mrr,ndcg,success")
        text = repr(report)
        self.assertLess(len(text), 200)
        self.assertTrue(text.startswith("<Report 50000 queries: recall@1=0.7500 recall@5=1.0000"))
        self.assertTrue(text.endswith(" (+4 more)>"), text)
        self.assertLess(len(report._repr_markdown_().encode()), rag_eval.DEFAULT_MAX_BYTES + 1)

    def test_gate_result(self):
        report = example_report()
        result = rag_eval.gate(report, rag_eval.load_baseline(example("baseline.json")))
        self.assertEqual(repr(result), "<GateResult FAILED: 2 regressions of 4 (max drop 0.02) "
                                       "mrr@5, recall@5>")
        self.assertEqual(repr(rag_eval.gate(report, {"mrr@5": 0.5})),
                         "<GateResult PASSED: 0 regressions of 1 (max drop 0.02)>")
        # A measure the report lacks is missing, counted apart (as the verdict does).
        self.assertEqual(repr(rag_eval.gate(report, {"mrr@5": 0.9, "map@5": 0.1})),
                         "<GateResult FAILED: 1 regression, 1 missing of 2 (max drop 0.02) "
                         "map@5, mrr@5>")
        markdown = result._repr_markdown_()
        self.assertTrue(markdown.startswith("**Gate failed**: 2 regressions: mrr@5, recall@5\n"))
        self.assertIn("| recall@5 | 0.7000 | 0.6667 | -0.033333333 | REGRESSED |", markdown)

    def test_comparison(self):
        report = example_report()
        other = example_report(k=1)
        other = other._replace(per_query={q: {"recall@5": v["recall@1"]}
                                          for q, v in other.per_query.items()},
                               mean={"recall@5": other.mean["recall@1"]},
                               measures=("recall@5",))
        comparison = rag_eval.compare(report, other, resamples=200)
        row = comparison.measures["recall@5"]
        self.assertEqual(repr(comparison), "<Comparison vs reference over 3 queries: recall@5 "
                                           "%+.4f (%s)>" % (row.delta, row.verdict))
        self.assertIn("| recall@5 | 0.6667 | %.4f | %+.4f |" % (row.reference_mean, row.delta),
                      comparison._repr_markdown_())


class MiniYaml:
    """A reader for the YAML subset action.yml and the README's workflow use
    (PyYAML is not a dependency): nested mappings by indentation, lists of
    mappings (``- key: value``), plain or quoted scalars, ``|`` blocks, comment
    lines."""

    def __init__(self, text):
        self.lines, self.i = text.splitlines(), 0

    def parse(self):
        return self.block(0)

    def skip(self):
        while self.i < len(self.lines) and (not self.lines[self.i].strip()
                                            or self.lines[self.i].lstrip().startswith("#")):
            self.i += 1

    def indent(self):
        line = self.lines[self.i]
        return len(line) - len(line.lstrip(" "))

    def block(self, indent):
        self.skip()
        if self.i == len(self.lines) or self.indent() < indent:
            return None
        if self.lines[self.i].lstrip().startswith("- "):
            return self.sequence(self.indent())
        return self.mapping(self.indent())

    def mapping(self, indent, first=None):
        out = {}
        while True:
            if first is not None:
                text, first = first, None
            else:
                self.skip()
                if (self.i == len(self.lines) or self.indent() != indent
                        or self.lines[self.i].lstrip().startswith("- ")):
                    return out
                text = self.lines[self.i].strip()
                self.i += 1
            if text.endswith(":"):
                out[text[:-1]] = self.block(indent + 1)
                continue
            key, sep, value = text.partition(": ")
            assert sep, "not a key: value line: %r" % text
            value = re.sub(r"\s+#.*$", "", value) if not value.startswith(("'", '"')) else value
            out[key] = self.literal(indent) if value == "|" else self.scalar(value)

    def sequence(self, indent):
        out = []
        while True:
            self.skip()
            if (self.i == len(self.lines) or self.indent() != indent
                    or not self.lines[self.i].lstrip().startswith("- ")):
                return out
            text = self.lines[self.i].strip()[2:]
            self.i += 1
            out.append(self.mapping(indent + 2, first=text))

    def literal(self, indent):
        body = []
        while self.i < len(self.lines) and (not self.lines[self.i].strip()
                                            or self.indent() > indent):
            body.append(self.lines[self.i])
            self.i += 1
        while body and not body[-1].strip():
            body.pop()
        margin = min(len(line) - len(line.lstrip(" ")) for line in body if line.strip())
        return "\n".join(line[margin:] for line in body) + "\n"

    @staticmethod
    def scalar(value):
        if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
            return value[1:-1]
        return value


@unittest.skipUnless(shutil.which("bash") and shutil.which("python3"), "needs bash and python3")
class ActionTest(TempDir, unittest.TestCase):
    """action.yml and the README's GitHub Actions job: their command lines,
    run as GitHub runs them (bash -eo pipefail) on the bundled example, whose
    gate fails."""

    def run_step(self, step, env=None, cwd=None):
        summary = os.path.join(self.tmp, "summary.md")
        environ = dict(os.environ, GITHUB_STEP_SUMMARY=summary, GITHUB_ACTION_PATH=HERE,
                       **(env or {}))
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               step["run"]], env=environ, cwd=cwd or self.tmp,
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stderr, read_text(summary) if os.path.exists(summary) else ""

    def test_mini_yaml_reader(self):
        self.assertEqual(MiniYaml('a: "1"\nb:\n  - c: x  # note\n    d: |\n      one\n'
                                  '        two\n\n  - e: y\nf: z\n').parse(),
                         {"a": "1", "b": [{"c": "x", "d": "one\n  two\n"}, {"e": "y"}],
                          "f": "z"})

    def action_step(self, **inputs):
        action = MiniYaml(read_text(os.path.join(HERE, "action.yml"))).parse()
        self.assertEqual(action["runs"]["using"], "composite")
        self.assertEqual(set(action["inputs"]),
                         {"qrels", "run", "baseline", "options", "report", "python-version"})
        values = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
        values.update(inputs)
        steps = action["runs"]["steps"]
        self.assertEqual(steps[0]["uses"], "actions/setup-python@v5")
        self.assertEqual(steps[0]["with"], {"python-version": "${{ inputs.python-version }}"})
        step = next(s for s in steps if "run" in s)
        self.assertEqual(step["shell"], "bash")
        self.assertNotIn("${{", step["run"])       # inputs reach the script as variables

        def filled(text):
            return re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: values[m.group(1)], text)
        env = {name: filled(value) for name, value in step["env"].items()}
        self.assertNotIn("${{", "".join(env.values()))
        return step, env

    def test_the_action_fails_the_bundled_example_and_writes_the_summary(self):
        report = os.path.join(self.tmp, "report.json")
        step, env = self.action_step(qrels=example("qrels.json"), run=example("run.json"),
                                     baseline=example("baseline.json"), report=report)
        code, err, summary = self.run_step(step, env)
        self.assertEqual(code, 1, err)
        self.assertTrue(summary.startswith("\n**Gate failed**: 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5\n"),
                        summary[:200])
        doc = json.loads(read_text(report))
        self.assertFalse(doc["gate"]["passed"])
        self.assertEqual(doc["per_query"]["q3"]["mrr@5"], 1.0)

    def test_the_action_options_input(self):
        step, env = self.action_step(qrels=example("qrels.json"), run=example("run.json"),
                                     baseline=example("baseline.json"),
                                     options="--max-drop 0.1 --seed 3")
        code, err, summary = self.run_step(step, env)
        self.assertEqual(code, 0, err)
        self.assertTrue(summary.startswith("\n**Gate passed**\n"), summary[:200])
        self.assertIn("Gate vs %s (max drop 0.1):" % example("baseline.json").replace("_", "\\_"),
                      summary)
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "rag_eval-report.json")))

    def test_options_are_never_file_name_patterns(self):
        # Found by review: the unquoted $RAG_EVAL_OPTIONS expanded --meta who=* to file names.
        self.write("who=one", "")
        self.write("who=two", "")
        step, env = self.action_step(qrels=example("qrels.json"), run=example("run.json"),
                                     baseline=example("baseline.json"),
                                     options="--max-drop 0.1 --meta who=*")
        code, err, summary = self.run_step(step, env)
        self.assertEqual(code, 0, err)
        doc = json.loads(read_text(os.path.join(self.tmp, "rag_eval-report.json")))
        self.assertEqual(doc["meta"], {"who": "*"})

    def test_the_readme_job_as_written(self):
        readme = read_text(os.path.join(HERE, "README.md"))
        section = readme.split("\n## Use it as a CI step (GitHub Actions)\n", 1)[1]
        workflow = MiniYaml(re.search(r"```yaml\n(.*?)```", section, re.S).group(1)).parse()
        steps = workflow["jobs"]["rag-eval"]["steps"]
        self.assertEqual([s.get("uses") for s in steps[:2]],
                         ["actions/checkout@v4", "actions/setup-python@v5"])
        gate_step = next(s for s in steps if s.get("name") == "Retrieval quality gate")
        keep = steps[-1]
        self.assertEqual((keep["uses"], keep["if"]), ("actions/upload-artifact@v4", "always()"))
        self.assertIn("-o %s " % keep["with"]["path"], gate_step["run"])
        self.assertIn("--step-summary", gate_step["run"])
        # The repository the job checks out: rag_eval.py copied in, the data under eval/.
        os.mkdir(os.path.join(self.tmp, "eval"))
        shutil.copy(os.path.join(HERE, "rag_eval.py"), self.tmp)
        shutil.copy(example("run.json"), self.tmp)         # what the retriever step writes
        for name in ("qrels.json", "baseline.json"):
            shutil.copy(example(name), os.path.join(self.tmp, "eval"))
        code, err, summary = self.run_step(gate_step)
        self.assertEqual(code, 1, err)
        self.assertTrue(summary.startswith("\n**Gate failed**: 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5\n"))
        doc = json.loads(read_text(os.path.join(self.tmp, keep["with"]["path"])))
        self.assertFalse(doc["gate"]["passed"])


class FakeTerminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


def on_screen(text):
    """What a terminal shows of ``text``: each carriage return goes back to
    the start of the line, and what follows overwrites what was there."""
    lines = []
    for line in text.split("\n"):
        shown = ""
        for part in line.split("\r"):
            shown = part + shown[len(part):]
        lines.append(shown.rstrip(" "))
    return "\n".join(lines)


class ProgressTest(TempDir, unittest.TestCase):
    """The progress line: on a terminal only, after about a second, at most
    every 0.25 s, erased before anything else is written; never for JSON or
    in a pipe; --timing."""

    QRELS = {"q%04d" % i: {"d": 1} for i in range(3000)}
    RUN = {q: ["x", "d"] for q in QRELS}

    def cli(self, *argv, stderr=None, step=0.3, every=100):
        """main() on QRELS and RUN with a clock that moves ``step`` seconds a
        look, the count told every ``every`` queries: (code, out, err)."""
        qrels, run = self.input_file(self.QRELS, "q.json"), self.input_file(self.RUN, "r.json")
        clock = itertools.count(0, step)
        out, err = io.StringIO(), stderr if stderr is not None else FakeTerminal()
        with unittest.mock.patch.object(rag_eval, "_progress_clock", lambda: next(clock)), \
                unittest.mock.patch.object(rag_eval, "_PROGRESS_EVERY", every):
            code = rag_eval.main([qrels, run, "--metrics", "mrr", *argv], stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    def test_on_a_terminal(self):
        code, out, err = self.cli()
        self.assertEqual(code, 0, err)
        plain = self.cli(stderr=io.StringIO())
        self.assertEqual(out, plain[1])
        self.assertNotIn("\r", plain[2])
        self.assertEqual(on_screen(err), plain[2])       # erased: the terminal shows the same
        size = "%.1f MB" % (os.path.getsize(os.path.join(self.tmp, "r.json")) / 1e6)
        draws = [part for part in err.split("\r") if part.startswith("rag-eval: r.json")]
        self.assertTrue(draws)
        # The clock: 0 at the start, then 0.3 s a look, one look per block and per 100
        # queries; the first line at 1.0 s or later, then at most one per 0.25 s.
        self.assertRegex(draws[0], r"^rag-eval: r\.json: \d+ queries scored, %s of %s read, "
                                   r"1\.[0-9] s$" % (size.split()[0], size))
        self.assertEqual(draws[-1].rstrip(), "rag-eval: r.json: 3000 queries scored, %s of %s "
                                             "read, 9.3 s" % (size.split()[0], size))
        self.assertEqual(len(draws), 28)     # looks at 1.2, 1.5, ..., 9.3 s, each 0.3 s apart

    def test_cut_to_the_terminal_width(self):
        # Found by review: a line wider than the terminal wraps, and \r then redraws only
        # its last row, leaving the others on screen.
        with unittest.mock.patch.dict(os.environ, {"COLUMNS": "30"}):
            code, out, err = self.cli()
        self.assertEqual(code, 0, err)
        draws = [part for part in err.split("\r") if part.startswith("rag-eval: r.json")]
        self.assertTrue(draws)
        self.assertEqual(draws[-1], "rag-eval: r.json: 3000 querie")   # 29 characters
        self.assertEqual({len(part) for part in draws}, {29})      # columns - 1
        self.assertEqual(on_screen(err), "")                       # erased

    def test_not_before_a_second(self):
        code, out, err = self.cli(step=0.0001)
        self.assertEqual(code, 0, err)
        self.assertNotIn("\r", err)

    def test_never_in_a_pipe_or_for_json(self):
        for argv, stderr in [((), io.StringIO()), (("--format", "json"), FakeTerminal()),
                             (("-o", os.path.join(self.tmp, "r.out.json")), FakeTerminal())]:
            with self.subTest(argv=argv):
                code, out, err = self.cli(*argv, stderr=stderr)
                self.assertEqual(code, 0, err)
                self.assertNotIn("\r", err)

    def test_erased_before_an_error(self):
        run = self.write("r.json", json.dumps(self.RUN)[:-1] + ', "zz": [1]}')
        clock = itertools.count(0, 0.3)
        err = FakeTerminal()
        with unittest.mock.patch.object(rag_eval, "_progress_clock", lambda: next(clock)):
            code = rag_eval.main([self.input_file(self.QRELS, "q.json"), run],
                                 stdout=io.StringIO(), stderr=err)
        self.assertEqual(code, 2)
        self.assertEqual(on_screen(err.getvalue()).count("\n"), 1)
        self.assertTrue(on_screen(err.getvalue()).startswith("rag-eval: error: "))

    def test_nothing_added_when_off(self):
        queries = iter([("q", None)])
        self.assertIs(rag_eval._counted(queries, None), queries)   # no per-query wrapper
        self.assertIsNone(rag_eval._PROGRESS)
        clock = itertools.count(0, 1)
        with unittest.mock.patch.object(rag_eval, "_progress_clock", lambda: next(clock)):
            rag_eval.evaluate_files(io.StringIO(json.dumps(self.QRELS)),
                                    io.StringIO(json.dumps(self.RUN)))
        self.assertEqual(next(clock), 0)        # the library never reads the clock

    def test_forked_workers_read_the_rest(self):
        progress = rag_eval._Progress(io.StringIO(), clock=itertools.count(5).__next__)
        progress.begin("/data/run.trec", 4e8, here=1e8)
        progress.read_bytes(5e7)
        self.assertEqual(progress.stream.getvalue(),
                         "\rrag-eval: run.trec: 0 queries scored, 50.0 of 100.0 MB read here "
                         "(workers read the rest), 1.0 s")

    def test_timing(self):
        first, second = self.cli("--format", "json")[1], self.cli("--format", "json")[1]
        self.assertEqual(first, second)
        self.assertNotIn("elapsed_seconds", first)
        code, out, err = self.cli("--format", "json", "--timing")
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertIsInstance(doc["elapsed_seconds"], float)
        self.assertGreaterEqual(doc["elapsed_seconds"], 0)
        self.assertEqual(dict(doc, elapsed_seconds=None), dict(json.loads(first),
                                                               elapsed_seconds=None))
        code, out, err = self.cli("--timing", stderr=io.StringIO())
        self.assertRegex(err, r"(?m)^rag-eval: timing: \d+\.\d{3} s$")


class OutputFilesTest(TempDir, unittest.TestCase):
    """-o and --save-baseline: each written whole or none at all, never over an
    input; '-' and empty names."""
    def test_output_file(self):
        path = os.path.join(self.tmp, "report.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "json", "-o", path)
        self.assertEqual((code, out), (0, ""))
        with open(path) as handle:
            self.assertEqual(json.load(handle)["mean"]["mrr@5"], 0.5)

    def test_written_files_follow_the_umask(self):
        old = os.umask(0o022)
        try:
            path = os.path.join(self.tmp, "out.json")
            run_cli(example("qrels.json"), example("run.json"), "-o", path)
        finally:
            os.umask(old)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o644)

    def test_no_file_written_when_one_output_cannot_be(self):
        # Merged: test_no_file_written_when_one_output_fails (-o in a missing
        # folder), ..._when_a_later_output_is_bad (-o ending in a separator) and
        # test_outputs_that_cannot_both_be_written (-o a folder; one name for both).
        saved = os.path.join(self.tmp, "saved.json")
        os.mkdir(os.path.join(self.tmp, "outdir"))
        cases = [(os.path.join(self.tmp, "missing", "out.json"), ""),
                 (os.path.join(self.tmp, "out.json") + os.sep, "is a directory"),
                 (os.path.join(self.tmp, "outdir"), "is a directory"),
                 (saved, "named for two outputs")]
        for out_path, expect in cases:
            with self.subTest(o=out_path):
                code, out, err = run_cli(*EXAMPLE_FILES, "--save-baseline", saved, "-o", out_path)
                self.assertEqual(code, 2)
                self.assertEqual(len(err.strip().splitlines()), 1)
                self.assertIn(expect, err)
                self.assertEqual(os.listdir(self.tmp), ["outdir"])

    def test_an_output_never_replaces_an_input(self):
        base = self.write("b.json", '{"recall@5": 0.9}')
        qrels = self.write("q.json", read_text(example("qrels.json")))
        cases = [("--baseline", base, "-o", base), ("-o", qrels),
                 ("--save-baseline", qrels), ("--compare", example("run.json"), "-o",
                                              os.path.join(self.tmp, ".", "..",
                                                           os.path.basename(self.tmp), "b.json"),
                                              "--baseline", base)]
        for argv in cases:
            with self.subTest(argv=argv):
                code, out, err = run_cli(qrels, example("run.json"), *argv)
                self.assertEqual(code, 2)
                self.assertIn("would overwrite the", err)
                self.assertEqual(read_text(base), '{"recall@5": 0.9}')
        # The one allowed overlap: --save-baseline updating the --baseline it gates on.
        code, out, err = run_cli(qrels, example("run.json"), "--baseline", base,
                                 "--save-baseline", base, "--accept")
        self.assertEqual(code, 1)
        code, out, err = run_cli(qrels, example("run.json"), "-o", base, "--save-baseline", base)
        self.assertEqual(code, 2)
        self.assertIn("named for two outputs", err)

    def test_empty_file_names_are_errors(self):
        # An unset CI variable ("--baseline $BASELINE") must not skip the gate.
        for option in ("--baseline", "--save-baseline", "-o", "--compare"):
            with self.subTest(option=option):
                code, out, err = run_cli(*EXAMPLE_FILES, option, "")
                self.assertEqual(code, 2)
                self.assertEqual(err, "rag-eval: error: %s: the file name is empty "
                                      "(an unset variable?)\n" % option)
                self.assertEqual(out, "")

    def test_stdin_and_dash_outputs(self):
        with open(example("qrels.json")) as handle:
            qrels = handle.read()
        code, out, err = run_cli("-", example("run.json"), "--baseline", "-", stdin=qrels)
        self.assertEqual(code, 2)
        self.assertIn("only one input can come from stdin", err)
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--save-baseline", "-")
        self.assertEqual(code, 2)
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "-o", "-")
        self.assertEqual(code, 0)
        self.assertIn("0.5095", out)


class _HtmlChecker(html.parser.HTMLParser):
    """Parses a page or fragment: every opened non-void tag closes, in order;
    collects each <svg>'s attributes and <title>, and the text of each
    <title> and <figcaption>."""
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
            "source", "track", "wbr"}

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.svgs, self.titles, self.captions = [], [], [], [], []
        self.tags = []
        self._text = None
        self.feed(text)
        self.close()
        if self.stack:
            self.errors.append("never closed: %s" % self.stack)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "svg":
            self.svgs.append(dict(attrs))
        elif tag == "title" and self.stack and self.stack[-1] == "svg":
            self.svgs[-1]["first title"] = True
        if tag in ("title", "figcaption"):
            self._text = []
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes %s" % (tag, self.stack[-1:]))
            return
        self.stack.pop()
        if tag in ("title", "figcaption"):
            (self.titles if tag == "title" else self.captions).append("".join(self._text))
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


# External references and script a self-contained page never holds.
_NOT_IN_HTML = ("<script", "http:", "https:", "//", "url(", "@import", "<link", "<img", " src=",
                "javascript:", "<iframe", "<object")


class HtmlReportTest(TempDir, unittest.TestCase):
    """--format html: one self-contained page (no script, no external reference,
    every string escaped), well-formed, the same bytes twice; its charts (bars
    with the baseline and the tolerance band, the forest plot of paired deltas
    per measure and slice, the per-query waterfall, judged@k) hold the
    library's numbers."""

    def assertPage(self, page):
        """Well-formed, self-contained, every <svg> an image with a title; the parse."""
        self.assertTrue(page.startswith("<!DOCTYPE html>\n"), page[:40])
        parsed = _HtmlChecker(page)
        self.assertEqual(parsed.errors, [])
        for needle in _NOT_IN_HTML:
            self.assertNotIn(needle, page.lower())
        # Every & starts an entity: nothing reached the page unescaped.
        self.assertEqual(re.findall(r"&(?!(?:amp|lt|gt|quot|#x27);)", page), [])
        for svg in parsed.svgs:
            self.assertEqual(svg.get("role"), "img")
            self.assertTrue(svg.get("first title"), svg)
        return parsed

    def example_page(self, *argv):
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", example("baseline.json"),
                                 "--format", "html", *argv)
        self.assertEqual(code, 1, err)
        return out

    def test_bundled_example(self):
        page = self.example_page()
        parsed = self.assertPage(page)
        self.assertIn('<p class="verdict fail">gate vs %s (max drop 0.02): FAILED, 2 regressions '
                      '(undecided: unjudged ids could explain them): mrr@5, recall@5</p>'
                      % html.escape(example("baseline.json")), page)
        self.assertIn("<title>rag_eval report: gate FAILED</title>", page)
        # The means chart: recall@5 = 2/3 against its baseline 0.70, allowed 0.02.
        self.assertIn("recall@5: mean 0.6666666666666666; baseline 0.7; allowed drop 0.02; "
                      "REGRESSED", page)
        self.assertIn("current mean of each measure against the baseline", parsed.titles)
        self.assertIn("judged@k below 1", parsed.titles)
        self.assertIn("mrr@5: judged@k 0.3333333333333333", parsed.titles)
        # A means-only baseline: no paired deltas, said in words.
        self.assertIn("No per-query baseline values, so no paired deltas to draw: the baseline "
                      "holds means only.", page)
        self.assertFalse([t for t in parsed.titles if t.startswith("paired deltas with 95%")])
        # The tables are the text renderer's, verdicts in its words.
        self.assertIn("<td>REGRESSED (undecided: 10 unjudged ids could explain it; label them: "
                      "--to-label FILE)</td>", page)
        self.assertIn('<td>mean</td><td class="num">0.6667</td>', page)
        self.assertEqual(page, self.example_page())

    def test_file_and_without_gate(self):
        path = os.path.join(self.tmp, "report.html")
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "html", "-o", path)
        self.assertEqual((code, out), (0, ""), err)
        with open(path, encoding="utf-8") as handle:
            page = handle.read()
        parsed = self.assertPage(page)
        self.assertNotIn('class="verdict', page)
        self.assertIn("current mean of each measure", parsed.titles)
        self.assertIn("recall@5: mean 0.6666666666666666", parsed.titles)
        self.assertEqual(len(parsed.svgs), 1)

    # Six queries, recall@1, one relevant id each.  Baseline run: r1-r3 found,
    # s1 found, s2 and s3 not.  Now: r1 found, r2 and r3 not (an unlabelled id
    # at rank 1), s1-s3 found.  Per query (now - baseline): r2 -1, r3 -1,
    # s2 +1, s3 +1, r1 and s1 0: 2 fell, 2 rose, 2 unchanged; the overall
    # stays 4/6, source=real falls from 3/3 to 1/3 (delta -2/3, regressed),
    # source=synthetic rises from 1/3 to 3/3.
    QUERIES = ["r1", "r2", "r3", "s1", "s2", "s3"]

    def sliced_inputs(self):
        testset = "".join(json.dumps({"query_id": q, "relevant": ["d_" + q],
                                      "slices": {"source": "real" if q[0] == "r" else
                                                 "synthetic"}}) + "\n" for q in self.QUERIES)
        before = {q: ["d_" + q] if q in ("r1", "r2", "r3", "s1") else ["x"]
                  for q in self.QUERIES}
        now = {q: ["x"] if q in ("r2", "r3") else ["d_" + q] for q in self.QUERIES}
        return (self.write("t.jsonl", testset), self.write("before.json", json.dumps(before)),
                self.write("now.json", json.dumps(now)))

    def sliced_page(self, *argv):
        testset, before, now = self.sliced_inputs()
        saved = os.path.join(self.tmp, "b.json")
        code, _, err = run_cli(testset, before, "--metrics", "recall", "--k", "1",
                               "--save-baseline", saved, "--allow-unlabelled-run")
        self.assertEqual(code, 0, err)
        code, out, err = run_cli(testset, now, "--metrics", "recall", "--k", "1", "--by",
                                 "source", "--baseline", saved, "--compare", before,
                                 "--format", "html", *argv)
        self.assertEqual(code, 1, err)
        return out, before

    def test_gated_report_with_slices_and_a_comparison(self):
        page, before = self.sliced_page()
        parsed = self.assertPage(page)
        for title in ("current mean of each measure against the baseline",
                      "paired deltas with 95% intervals (paired bootstrap)",
                      "per-query deltas of recall@1, sorted",
                      "run minus %s with 95%% bootstrap intervals" % before,
                      "judged@k below 1"):
            self.assertIn(title, parsed.titles)
        self.assertIn("recall@1: 2 queries fell, 2 rose, 2 unchanged (of the 6 both hold); "
                      "2 queries fell by more than the tolerated 0.0200. Sorted from the "
                      "largest drop to the largest gain.", parsed.captions)
        # One forest row per measure and per slice: the tooltips hold the library's
        # numbers, the interval the library's bootstrap_ci over the paired deltas in
        # query order, seeded by the row's name as the gate seeds its tests.
        for name, diffs in (("recall@1", [0.0, -1.0, -1.0, 0.0, 1.0, 1.0]),
                            ("source=real: recall@1", [0.0, -1.0, -1.0]),
                            ("source=synthetic: recall@1", [0.0, 1.0, 1.0])):
            lo, hi = rag_eval.bootstrap_ci(diffs, rng=random.Random("0|" + name))
            tips = [t for t in parsed.titles if t.startswith(name + ": paired delta ")]
            self.assertEqual(len(tips), 1, name)
            self.assertTrue(tips[0].startswith(
                "%s: paired delta %r, 95%% CI [%r, %r] (paired bootstrap), %d queries"
                % (name, sum(diffs) / len(diffs), lo, hi, len(diffs))), tips[0])
        self.assertIn("source=real: recall@1: paired delta -0.6666666666666666", page)
        # The waterfall: a bar per query that moved, its delta in the tooltip.
        for query, delta in (("r2", -1.0), ("r3", -1.0), ("s2", 1.0), ("s3", 1.0)):
            self.assertIn("%s: %r" % (query, delta), parsed.titles)
        self.assertNotIn("r1: 0.0", parsed.titles)
        # judged@1 of the real slice: r1's id is labelled, r2's and r3's "x" are not.
        self.assertIn("source=real: recall@1: judged@k 0.3333333333333333", parsed.titles)
        self.assertEqual(page, self.sliced_page()[0])

    def test_the_forest_draws_the_slice_rows_that_moved_most(self):
        # Found by review: 600 slices drew 1202 rows (1.18 MB, 34 s). 600 queries, slice
        # g=v000..v119 by i % 120: every odd slice falls (mrr@1 1 -> 0 on its queries,
        # which rank x first), every even one is unchanged.
        rows = [{"query_id": "q%04d" % i, "relevant": {"d": 1},
                 "slices": {"g": "v%03d" % (i % 120)}} for i in range(600)]
        testset = self.write("t.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        good = self.write("good.json", json.dumps({r["query_id"]: ["d"] for r in rows}))
        bad = self.write("bad.json", json.dumps({r["query_id"]: ["x", "d"] if i % 120 % 2
                                                 else ["d"] for i, r in enumerate(rows)}))
        saved = os.path.join(self.tmp, "base.json")
        argv = ("--metrics", "mrr", "--k", "1", "--by", "g", "--resamples", "200")
        self.assertEqual(run_cli(testset, good, *argv, "--save-baseline", saved)[0], 0)
        code, page, err = run_cli(testset, bad, *argv, "--baseline", saved, "--format", "html")
        self.assertEqual(code, 1, err)
        parsed = self.assertPage(page)
        tips = [t for t in parsed.titles if ": paired delta " in t]
        # The overall row (600 queries: the normal interval) and 50 of the 60 fallen
        # slices (5 queries each: the bootstrap), all of them -1: the first 50 by name.
        self.assertEqual(len(tips), 51)
        self.assertEqual(sorted(t.split(":")[0] for t in tips if t.startswith("g=")),
                         ["g=v%03d" % i for i in range(1, 101, 2)])
        self.assertIn("paired deltas with 95% intervals (normal approximation and paired "
                      "bootstrap)", parsed.titles)
        self.assertTrue(any(c.endswith("70 slice rows not drawn: unchanged or within the "
                                       "tolerance, or beyond the 50 that moved most (the "
                                       "tables hold every row).") for c in parsed.captions),
                        parsed.captions)

    def test_a_number_in_a_tooltip_is_the_librarys(self):
        qrels = {"q%d" % i: {"d": 1} for i in range(8)}
        ours = rag_eval.evaluate(qrels, {"q%d" % i: ["x", "d"] if i % 3 else ["d"]
                                         for i in range(8)}, k=2, measures="mrr")
        theirs = rag_eval.evaluate(qrels, {"q%d" % i: ["d"] for i in range(8)}, k=2,
                                   measures="mrr")
        c = rag_eval.compare(ours, theirs, reference_name="main")
        row = c.measures["mrr@2"]
        page = rag_eval.render_html(ours, comparisons=[c])
        self.assertPage(page)
        self.assertIn("mrr@2: delta %r, 95%% CI [%r, %r], 8 queries; p (Holm) %r; %s"
                      % (row.delta, row.ci95[0], row.ci95[1], row.p_holm, row.verdict), page)
        self.assertEqual(row.delta, -0.3125)   # 5 of 8 queries fall from 1 to 1/2

    def test_the_forest_interval_is_bootstrap_ci_of_the_paired_deltas(self):
        # 40 queries whose relevant id moves between ranks 1-10: many distinct
        # deltas, so another seed or another order of the deltas moves the interval.
        rng = random.Random(7)
        qrels = {"q%02d" % i: {"d": 1} for i in range(40)}

        def run():
            return {q: ["x%d" % j for j in range(rng.randint(0, 9))] + ["d"] for q in qrels}
        before = rag_eval.evaluate(qrels, run(), k=10, measures="mrr")
        now = rag_eval.evaluate(qrels, run(), k=10, measures="mrr")
        baseline = rag_eval.Baseline(before.mean, before.per_query)
        page = rag_eval.render_html(now, rag_eval.gate(now, baseline), baseline=baseline,
                                    resamples=500, seed=3)
        diffs = [now.per_query[q]["mrr@10"] - before.per_query[q]["mrr@10"] for q in sorted(qrels)]
        lo, hi = rag_eval.bootstrap_ci(diffs, resamples=500, rng=random.Random("3|mrr@10"))
        self.assertIn("mrr@10: paired delta %r, 95%% CI [%r, %r] (paired bootstrap), 40 queries"
                      % (math.fsum(diffs) / 40, lo, hi), page)
        self.assertNotEqual((lo, hi), rag_eval.bootstrap_ci(
            diffs, resamples=500, rng=random.Random("0|mrr@10")))

    def test_the_interval_is_the_bootstrap_up_to_500_queries(self):
        for n, how in ((500, "paired bootstrap"), (501, "normal approximation")):
            qrels = {"q%03d" % i: {"d": 1} for i in range(n)}
            before = rag_eval.evaluate(qrels, {q: ["d"] for q in qrels}, k=2, measures="mrr")
            now = rag_eval.evaluate(qrels, {q: ["x", "d"] if i % 2 else ["d"]
                                            for i, q in enumerate(qrels)}, k=2, measures="mrr")
            baseline = rag_eval.Baseline(before.mean, before.per_query)
            page = rag_eval.render_html(now, rag_eval.gate(now, baseline), baseline=baseline,
                                        resamples=50)
            self.assertRegex(page, r"mrr@2: paired delta [-.0-9]+, 95%% CI \[[-.0-9e]+, "
                                   r"[-.0-9e]+\] \(%s\), %d queries" % (how, n))

    def test_gate_without_the_baselines_values(self):
        report = rag_eval.evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, measures="mrr")
        page = rag_eval.render_html(report, rag_eval.gate(report, {"mrr@2": 0.9}))
        self.assertPage(page)
        self.assertIn("or none was given to render_html (baseline=)", page)

    def test_hostile_ids_are_escaped(self):
        hostile = ["<script>alert(1)</script>", "a|b", "&", "\"q'", "<b>x</b>"]
        qrels = {q: {"d": 1} for q in hostile}
        before = rag_eval.evaluate(qrels, {q: ["d"] for q in hostile}, k=1, measures="recall",
                                   meta={"note": "<i>&</i>"})
        now = rag_eval.evaluate(qrels, {q: ["d"] if q == "a|b" else ["x"] for q in hostile},
                                k=1, measures="recall", meta={"note": "<i>&</i>"})
        baseline = rag_eval.Baseline(before.mean, before.per_query, source="<base>&")
        result = rag_eval.gate(now, baseline)
        page = rag_eval.render_html(now, result, per_query=True, baseline_name="<base>&",
                                    baseline=baseline)
        parsed = self.assertPage(page)
        self.assertNotIn("<script>alert", page)
        self.assertNotIn("<b>x", page)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", page)
        self.assertIn("<td>&quot;q&#x27;</td>", page)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;: -1.0", page)  # a waterfall bar
        self.assertIn("<script>alert(1)</script>: -1.0", parsed.titles)     # read back whole
        self.assertIn("&lt;i&gt;&amp;&lt;/i&gt;", page)
        self.assertIn("gate vs &lt;base&gt;&amp;", page)
        for fragment in (now._repr_html_(), result._repr_html_()):
            self.assertEqual(_HtmlChecker(fragment).errors, [])
            self.assertNotIn("<script>alert", fragment)

    def test_a_large_report_stays_small(self):
        # 5000 queries: per query, the waterfall draws 400 bins, not 5000 bars.
        n = 5000
        qrels = {"q%04d" % i: {"d": 1} for i in range(n)}
        before = rag_eval.evaluate(qrels, {q: ["d"] for q in qrels}, k=2, measures="mrr")
        now = rag_eval.evaluate(qrels, {q: ["x", "d"] if i % 4 == 0 else ["d"]
                                        for i, q in enumerate(qrels)}, k=2, measures="mrr")
        baseline = rag_eval.Baseline(before.mean, before.per_query)
        page = rag_eval.render_html(now, rag_eval.gate(now, baseline), baseline=baseline)
        parsed = self.assertPage(page)
        self.assertLess(len(page.encode("utf-8")), 100000)
        # Over 500 paired queries the interval is the normal one, not the bootstrap's
        # 5000 x 10000 draws: -1/8 -/+ 1.96 * sd / sqrt(5000) (margin_of_error).
        diffs = [-0.5 if i % 4 == 0 else 0.0 for i in range(n)]
        half = rag_eval.margin_of_error(diffs)
        self.assertIn("mrr@2: paired delta -0.125, 95%% CI [%r, %r] (normal approximation), "
                      "5000 queries" % (-0.125 - half, -0.125 + half), page)
        # Found by review: the chart called these bootstrap intervals.
        self.assertIn("paired deltas with 95% intervals (normal approximation)", parsed.titles)
        self.assertIn("mrr@2: 1250 queries fell, 0 rose, 3750 unchanged (of the 5000 both "
                      "hold); 1250 queries fell by more than the tolerated 0.0200. Sorted from "
                      "the largest drop to the largest gain. 5000 queries drawn as 400 bars, "
                      "each the mean delta of 12 or 13 consecutive queries.", parsed.captions)
        # 5000 = 200 bins of 13 and 200 of 12: the 1250 falls of -1/2 fill 96 bins
        # of 13 (1248 queries); the 97th holds the last 2 and 11 unchanged queries.
        self.assertIn("queries 1-13 of 5000: mean delta -0.5", parsed.titles)
        self.assertIn("queries 1249-1261 of 5000: mean delta %r" % (-1.0 / 13), parsed.titles)
        self.assertEqual(sum(1 for t in parsed.titles if t.startswith("queries ")), 97)

    def test_sweep_is_the_last_table(self):
        code, out, err = self.report_of(
            "--metrics", "abstained,recall@2", "--allow-unlabelled-run", "--format", "html",
            "--sweep-min-score=recall@2",
            qrels=("q.jsonl", test_measures.SweepMinScoreTest.QRELS),
            run=("r.jsonl", test_measures.SweepMinScoreTest.RUN))
        self.assertEqual(code, 0, err)
        self.assertPage(out)
        self.assertRegex(out, r"--sweep-min-score: abstention_f1 and recall@2 at each "
                              r"threshold</h3>\n<table>(.|\n)*</table>\n(<ul.*</ul>\n)?"
                              r"</section>\n</body>\n</html>\n$")
        self.assertIn('<td class="num">0.7</td><td class="num">1.0000</td>'
                      '<td class="num">0.0000</td>', out)


class HtmlReprTest(TempDir, unittest.TestCase):
    """_repr_html_ of Report, GateResult and Comparison (notebooks): an HTML
    fragment, no <html> or <body>, its numbers in a <table>, never per query."""

    def assertFragment(self, fragment):
        parsed = _HtmlChecker(fragment)
        self.assertEqual(parsed.errors, [])
        self.assertIn("table", parsed.tags)
        for tag in ("html", "body", "head", "script", "svg"):
            self.assertNotIn(tag, parsed.tags)
        return parsed

    def test_report(self):
        report = rag_eval.evaluate_files(*EXAMPLE_FILES)
        fragment = report._repr_html_()
        self.assertFragment(fragment)
        self.assertIn("<th>recall@5</th>", fragment)
        self.assertIn('<td>mean</td><td class="num">0.6667</td><td class="num">0.6667</td>'
                      '<td class="num">0.5000</td><td class="num">0.5095</td>', fragment)
        self.assertNotIn("q1", fragment)    # no per-query row

    def test_gate_result(self):
        report = rag_eval.evaluate_files(*EXAMPLE_FILES)
        result = rag_eval.gate(report, rag_eval.load_baseline(example("baseline.json")))
        fragment = result._repr_html_()
        self.assertFragment(fragment)
        self.assertIn("<p>gate: FAILED</p>", fragment)
        self.assertIn('<td>recall@5</td><td class="num">0.7000</td><td class="num">0.6667</td>'
                      '<td class="num">-0.0333</td><td>REGRESSED</td>', fragment)

    def test_comparison(self):
        qrels = {"q%d" % i: {"d": 1} for i in range(8)}
        ours = rag_eval.evaluate(qrels, {q: ["x", "d"] for q in qrels}, k=2, measures="mrr")
        theirs = rag_eval.evaluate(qrels, {q: ["d"] for q in qrels}, k=2, measures="mrr")
        fragment = rag_eval.compare(ours, theirs, reference_name="main")._repr_html_()
        self.assertFragment(fragment)
        self.assertIn("<p>comparison with main</p>", fragment)
        # 8 queries each fall from 1 to 1/2: every resample's mean is -0.5.
        self.assertIn('<td>mrr@2</td><td class="num">0.5000</td><td class="num">1.0000</td>'
                      '<td class="num">-0.5000</td><td>[-0.5000, -0.5000]</td>', fragment)
        self.assertIn("significantly worse", fragment)

    def test_small_for_many_queries(self):
        n = 20000
        qrels = {"q%05d" % i: {"d": 1} for i in range(n)}
        report = rag_eval.evaluate(qrels, {q: ["d"] for q in qrels}, k=1, measures="recall")
        result = rag_eval.gate(report, rag_eval.Baseline(report.mean, report.per_query))
        self.assertLess(len(report._repr_html_()), 1000)
        self.assertLess(len(result._repr_html_()), 2000)


# ---------------------------------------------------------------------------
# Command line: options, exit codes, one-line errors
# ---------------------------------------------------------------------------

class CommandLineOptionsTest(TempDir, unittest.TestCase):
    """Each option reaches the code it names, and bad values are refused on one
    line."""
    def test_help_ends_with_examples(self):
        code, out, err = run_cli("--help")
        self.assertEqual(code, 0)
        self.assertIn("exit codes: 0 ok, 1 the gate found a regression", out)

    def test_run_format_override(self):
        qrels = self.write("q.json", json.dumps({"q%02d" % i: {"a": 1} for i in range(30)}))
        run = self.write("run.txt", '{"q00": ["a"]}')
        code, out, err = run_cli(qrels, run, "--run-format", "trec")
        self.assertEqual(code, 2)
        self.assertIn("run.txt:1: expected 6 fields", err)
        self.write("run.txt", "q00 Q0 a 1 2.0 t\n")
        code, out, err = run_cli(qrels, run, "--run-format", "trec")
        self.assertEqual(code, 0, err)

    def test_bad_k(self):
        for k in ("0", "-1", "x", "2.5", "1,,0"):
            with self.subTest(k=k):
                self.assertBad(extra=["--k", k],
                               expect="k must be a positive integer, got '0'" if k == "0" else "k")

    def test_unknown_measure(self):
        self.assertBad(extra=["--metrics", "ndgc"], expect="did you mean 'ndcg'")

    def test_bad_rel_and_max_drop(self):
        self.assertBad(extra=["--rel", "0"], expect="rel")
        for tolerance in ("-0.1", "nan", "x", "inf%"):
            with self.subTest(max_drop=tolerance):
                self.assertBad(extra=["--max-drop", tolerance], expect="max drop")

    def test_numbers_in_options(self):
        bad = [("--max-drop", "1_0"), ("--max-drop", "5"), ("--max-drop", "1"),
               ("--max-drop", "150%"), ("--max-drop", "100%"), ("--k", "1_0"), ("--rel", "1_0"),
               ("--alpha", "0.0_5"), ("--seed", "1_0"), ("--resamples", "0")]
        for option, value in bad:
            with self.subTest(option=option, value=value):
                code, out, err = run_cli(example("qrels.json"), example("run.json"), option, value,
                                         "--baseline", example("baseline.json"))
                self.assertEqual(code, 2, out)
                self.assertEqual(len(err.strip().splitlines()), 1)

    def test_numbers_are_ascii(self):
        for argv in (("--k", "５"), ("--metrics", "recall@٣"), ("--rel", "２")):
            with self.subTest(argv=argv):
                code, out, err = run_cli(*EXAMPLE_FILES, *argv)
                self.assertEqual(code, 2)
                self.assertIn("must be a positive integer", err)
        base = self.write("b.json", '{"map@１00": 0.5}')
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base)
        self.assertEqual(code, 2)
        self.assertIn("the cutoff k must be a positive integer", err)

    def test_usage_error_is_one_line(self):
        # Holds test_bad_option_is_usage_error ("--format xml": exit 2, "invalid choice").
        for argv, message in ((("--bogus",), "unrecognized arguments: --bogus"),
                              (("--k",), "argument --k: expected one argument"),
                              (("--format", "xml"), "argument --format: invalid choice")):
            with self.subTest(argv=argv):
                code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", example("baseline.json"),
                                         *argv)
                self.assertEqual(code, 2)
                self.assertEqual(err.count("\n"), 1, err)
                self.assertTrue(err.startswith("rag-eval: error: " + message), err)
                self.assertTrue(err.endswith("(see --help)\n"))


class ExitCodeTest(TempDir, unittest.TestCase):
    """0 ok, 1 a regression, 2 an error: whatever fails on the way (a closed
    stream, a bug), and in a real process."""
    def test_subprocess_smoke(self):
        proc = subprocess.run([sys.executable, "rag_eval.py", "qrels.json", "run.json",
                               "--baseline"], cwd=HERE, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("FAILED", proc.stdout)
        self.assertNotIn("Traceback", proc.stderr)

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


class InternalErrorTest(TempDir, unittest.TestCase):
    """A bug exits 2 with one line, never 0 (a pass) or 1 (a regression)."""

    ARGS = (example("qrels.json"), example("run.json"), "--baseline", example("baseline.json"))

    def broken(self, *argv, env=None):
        saved_gate, saved_env = rag_eval.gate, os.environ.get("RAG_EVAL_DEBUG")

        def bug(*args, **kwargs):
            raise ZeroDivisionError("division by zero\nsecond line")
        rag_eval.gate = bug
        if env is None:
            os.environ.pop("RAG_EVAL_DEBUG", None)
        else:
            os.environ["RAG_EVAL_DEBUG"] = env
        try:
            return run_cli(*self.ARGS, *argv)
        finally:
            rag_eval.gate = saved_gate
            if saved_env is None:
                os.environ.pop("RAG_EVAL_DEBUG", None)
            else:
                os.environ["RAG_EVAL_DEBUG"] = saved_env

    def test_one_line_exit_2(self):
        code, out, err = self.broken()
        self.assertEqual(code, 2)
        self.assertEqual(err, "rag-eval: internal error (a bug in rag_eval, please report it): "
                              "ZeroDivisionError: division by zero; rerun with --debug or "
                              "RAG_EVAL_DEBUG=1 to see the traceback\n")

    def test_debug_shows_the_traceback(self):
        for argv, env in ((("--debug",), None), ((), "1")):
            with self.subTest(argv=argv, env=env):
                code, out, err = self.broken(*argv, env=env)
                self.assertEqual(code, 2)
                self.assertIn("Traceback (most recent call last)", err)
                self.assertTrue(err.endswith("to see the traceback\n"))

    def test_a_closed_stderr_keeps_the_exit_code(self):
        # Writing to a pipe nobody reads raises; that must not turn exit 2 (or 0)
        # into Python's exit 1, the regression code.
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as handle:
            handle.write("{")
        for argv, expected in (((bad, example("run.json")), 2),
                               ((example("qrels.json"), example("run.json")), 0),
                               (self.ARGS, 1)):
            with self.subTest(expected=expected):
                read_end, write_end = os.pipe()
                os.close(read_end)
                try:
                    done = subprocess.run([sys.executable, example("rag_eval.py"), *argv],
                                          stdout=subprocess.DEVNULL, stderr=write_end,
                                          timeout=60)
                finally:
                    os.close(write_end)
                self.assertEqual(done.returncode, expected)


# ---------------------------------------------------------------------------
# Accelerations and their plain twins (rag_eval.py, Part II)
# ---------------------------------------------------------------------------

def read_outcome(reader, data, grouped):
    """What a TREC run reader gives its caller (_score_run): [(qid, [doc text],
    [float score])], gathered after _NotGrouped as the caller does, or the error.
    Where a grouped read stops (_NotGrouped, or which of two errors comes first)
    may differ: the block reader reads a block ahead of the line reader."""
    try:
        try:
            queries = list(reader(rag_eval._Input(io.BytesIO(data)), grouped))
            how = "grouped" if grouped else "gathered"
        except rag_eval._NotGrouped:
            queries = list(reader(rag_eval._Input(io.BytesIO(data)), False))
            how = "not grouped"
    except rag_eval.EvalError as exc:
        return "error: %s" % exc
    return how, [(qid, [d if isinstance(d, str) else rag_eval._doc_text(d) for d in r.docs],
                  [float(s) for s in r.scores]) for qid, r in queries]


def run_faults(data):
    """Every error a TREC run reader may name for ``data``, line by line."""
    faults, first = set(), True
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip() or line.startswith(b"#"):
            continue
        try:
            qid = rag_eval._parse_run_line(line, "<stream>:%d" % number)[0]
            first = False
        except rag_eval.EvalError as exc:
            faults.add("error: %s" % exc)
            if first:
                faults.add("error: %s" % rag_eval._first_line_error(exc, line, "run"))
            qid = line.split()[0] if line.split() else b""
        try:
            rag_eval._decode_qid(qid, "<stream>")
        except rag_eval.EvalError as exc:
            faults.add("error: %s" % exc)
    return faults


def random_run_text(rng, scattered=0.1):
    """A TREC run of a few queries: ties, repeats, score layouts, tags, comments."""
    layout = rng.choice(["%.3f", "%.1f", "%d", "%s", "%.2e", "mixed"])
    lines = []
    for q in range(rng.randint(1, 5)):
        depth = rng.randint(1, 12)
        scores = [rng.choice([rng.uniform(-5, 99), rng.randint(0, 4)]) for _ in range(depth)]
        if rng.random() < 0.7:
            scores.sort(reverse=True)
        for r, s in enumerate(scores, 1):
            fmt = rng.choice(["%.3f", "%d", "%s"]) if layout == "mixed" else layout
            doc = rng.choice(["d%d" % rng.randrange(9), "D%d" % rng.randrange(3), "\u00e9%d" % r,
                              "\U0001f600", "\ue000"])
            tag = rng.choice(["t", "t", "t", "u"]) if rng.random() < 0.2 else "t"
            lines.append("q%d Q0 %s %d %s %s" % (q, doc, r, fmt % s, tag))
    if rng.random() < scattered and len(lines) > 2:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    if rng.random() < 0.1:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(["# comment", "", "  "]))
    text = "\n".join(lines) + "\n"
    if rng.random() < 0.1:
        text = text.replace("\n", "\r\n")
    return text


_RUN_MUTATIONS = [
    lambda t, i: t[:i] + " " + t[i:], lambda t, i: t[:i] + "\t" + t[i + 1:],
    lambda t, i: t[:i] + t[i + 1:], lambda t, i: t[:i] + "\r" + t[i:],
    lambda t, i: t[:i] + "\n" + t[i:], lambda t, i: t[:i] + "1" + t[i:],
    lambda t, i: t[:i] + "." + t[i:], lambda t, i: t[:i] + "e" + t[i:],
    lambda t, i: t[:i] + "-" + t[i:], lambda t, i: t[:i] + "_" + t[i:],
    lambda t, i: t.replace(" ", "  ", 1), lambda t, i: t.replace("\n", "\r\n"),
    lambda t, i: t.replace("\n", " extra 1\n", 1),     # fields after the tag
    lambda t, i: t[:i] + random.Random(i).choice(["\u0662", "\x0b", "\x0c", "\xa0", "\x85",
                                                  " \t", "\r ", "#", "inf", "nan"]) + t[i:]]


def json_run_case():
    """Seeded qrels and a run of 30 queries for the forked JSON and JSONL readers:
    score maps, and one ranked list holding a string that looks like a cut."""
    rng = random.Random(9)
    qrels = {"q%02d" % q: {"d%d" % d: rng.randrange(3) for d in range(12)} for q in range(30)}
    run = {q: {"d%d" % d: round(rng.random(), 3) for d in range(20)} for q in qrels}
    run["q07"] = ["d3", "d3", "x], \"y", "d1"]      # a string that looks like a cut
    return qrels, run


class ForkedRuns:
    """Mixin: forked workers for small files too, and a seeded TREC run of 40
    queries to score with them.  The test class saves and restores
    rag_eval._PARALLEL_MIN_BYTES and rag_eval._BLOCK_SIZE."""

    def use_forked_workers(self, block_size=256):
        """No size threshold (and small blocks), or skip without fork and two cores."""
        if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
            self.skipTest("needs fork and two cores")
        rag_eval._PARALLEL_MIN_BYTES = 0
        if block_size is not None:
            rag_eval._BLOCK_SIZE = block_size

    def lines(self):
        rng = random.Random(4)
        out = []
        for q in range(40):
            scores = sorted((round(rng.random(), 2) for _ in range(30)), reverse=True)
            out += ["q%02d Q0 d%d %d %s t" % (q, rng.randrange(60), r, s)
                    for r, s in enumerate(scores, 1)]
        return out

    def evaluate(self, lines):
        qrels = {"q%02d" % q: {"d%d" % d: q % 3 for d in range(0, 60, 7)} for q in range(40)}
        qrels["q00"] = {"d1": 0}          # unscored: its abstention count crosses workers too
        qpath = self.write("q.json", json.dumps(qrels))
        rpath = self.write("r.trec", "\n".join(lines) + "\n")
        return rag_eval.evaluate_files(qpath, rpath, k="1,5,10", metrics="recall,ndcg,mrr,judged")


class AccelerationTwinsTest(ForkedRuns, TempDir, unittest.TestCase):
    """Every acceleration of Part II against its plain twin in Part I (the table
    that opens Part II): seeded random inputs by the thousand, same result."""

    def setUp(self):
        super().setUp()
        self.saved = rag_eval._BLOCK_SIZE, rag_eval._PARALLEL_MIN_BYTES

    def tearDown(self):
        rag_eval._BLOCK_SIZE, rag_eval._PARALLEL_MIN_BYTES = self.saved
        super().tearDown()

    # -- _trec_run_queries: _trec_run_queries_fast == _trec_run_queries_plain --
    def test_trec_run_readers(self):
        # Valid and mutated runs, every block size from one line to the whole
        # file, grouped and gathered: the same queries, ids, scores and errors.
        for data in (b"# c\n\nq1,Q0,d1,1,2.0,t\n", b"#\n" * 9 + b"q1 0 d1 1\n"):
            for size in (1, 3, 1 << 17):       # the hint follows the first run line
                rag_eval._BLOCK_SIZE = size
                self.assertEqual(read_outcome(rag_eval._trec_run_queries_fast, data, True),
                                 read_outcome(rag_eval._trec_run_queries_plain, data, True))
        rng = random.Random(20)
        seen = {"queries": 0, "error": 0, "not grouped": 0, "bytes": 0}
        for case in range(2500):
            text = random_run_text(rng)
            for _ in range(rng.choice([0, 0, 1, 2])):
                text = rng.choice(_RUN_MUTATIONS)(text, rng.randrange(len(text)))
            data = text.encode("utf-8")
            if rng.random() < 0.05:         # an id (or query id) that is not UTF-8
                i = data.find(b" D")
                data = data[:i + 1] + b"\xff" + data[i + 1:] if i >= 0 else b"\xfe" + data
                seen["bytes"] += 1
            grouped = rng.random() < 0.8
            rag_eval._BLOCK_SIZE = rng.choice([1, 7, 40, 200, 1 << 17])
            fast = read_outcome(rag_eval._trec_run_queries_fast, data, grouped)
            plain = read_outcome(rag_eval._trec_run_queries_plain, data, grouped)
            if isinstance(fast, str) and isinstance(plain, str) and fast != plain:
                # two faults: each reader names one of them (see read_outcome)
                self.assertGreater(len(run_faults(data)), 1, (data, fast, plain))
                self.assertLessEqual({fast, plain}, run_faults(data), data)
                seen["error"] += 1
                continue
            self.assertEqual(fast, plain, (data, grouped, rag_eval._BLOCK_SIZE))
            seen["error" if isinstance(plain, str) else "queries"] += 1
            seen["not grouped"] += plain[0] == "not grouped"
        self.assertGreater(min(seen.values()), 50, seen)

    # -- _chunk_map_of: _chunk_map_bulk == _chunk_map_plain -------------------
    def test_chunk_map_readers(self):
        # Seeded chunk maps, well formed and mutated (nulls, floats, bools, blank
        # lines, repeated ids, missing fields, doc_sha256, bad JSON): the bulk
        # reader gives the plain reader's map, or its error, every time.
        rng = random.Random(5)

        def outcome(reader, text):
            try:
                chunks = reader(text, "m.jsonl")
                return dict(chunks), chunks.versions
            except rag_eval.EvalError as exc:
                return str(exc)
        mutations = ['"start": null', '"start": 1.5', '"start": true', '"end": 0', '"tokens": -1',
                     '"doc": 5', '"id": null', '"doc_sha256": "ab"', '"x": 1', '"start": -3']
        for case in range(600):
            lines = []
            for i in range(rng.randint(1, 12)):
                start = rng.randrange(0, 50)
                record = {"id": "c%d" % rng.randrange(15), "doc": "d%d" % rng.randrange(3),
                          "start": start, "end": start + rng.randint(1, 30)}
                if rng.random() < 0.5:
                    record["tokens"] = rng.randrange(40)
                if rng.random() < 0.03:     # found by review: an integer doc crashed the bulk reader
                    record[rng.choice(["id", "doc"])] = rng.choice([7, 2.5, None, True])
                line = json.dumps(record)
                if rng.random() < 0.1:
                    key = rng.choice(mutations)
                    line = line[:-1] + ", " + key + "}"
                if rng.random() < 0.03:
                    line = line[:rng.randrange(len(line))]
                lines.append(line)
            if rng.random() < 0.1:
                lines.insert(rng.randrange(len(lines) + 1), "")
            text = "\n".join(lines) + rng.choice(["\n", "", "\n\n"])
            self.assertEqual(outcome(rag_eval._chunk_map_bulk, text),
                             outcome(rag_eval._chunk_map_plain, text), text)
        # Two objects on one line, joined by a comma, are one bad line to both
        # readers (the lines joined into an array would parse them as two).
        two = ('{"id": "a", "doc": "d", "start": 0, "end": 5}\n'
               '{"id": "b", "doc": "d", "start": 5, "end": 9}, {"id": "c", "doc": "d"}\n')
        for reader in (rag_eval._chunk_map_bulk, rag_eval._chunk_map_plain):
            self.assertEqual(outcome(reader, two), "m.jsonl:2:46: invalid JSON: Extra data")
        # Found by review: a line break inside a string, two objects on the second
        # line: joined with commas it read as one id "a,b".  Line 1 is bad JSON.
        broken = ('{"id": "a\nb", "doc": "d", "start": 0, "end": 1}, '
                  '{"id": "c", "doc": "d", "start": 1, "end": 2}\n')
        for reader in (rag_eval._chunk_map_bulk, rag_eval._chunk_map_plain):
            self.assertIn("m.jsonl:1:8: invalid JSON: Unterminated string", outcome(reader, broken))

    # -- _rank: _rank_fast == _rank_plain -------------------------------------
    def test_rankers(self):
        # Ranked lists, score maps and _Scored (in order or not; text or the fast
        # reader's bytes and decimal tokens), ties, repeats, any depth.
        rng = random.Random(21)
        forms = {"list": 0, "dict": 0, "scored": 0, "tokens": 0}
        for case in range(6000):
            n = rng.randint(0, 14)
            ids = ["d%d" % rng.randrange(max(1, n + rng.randint(-3, 3))) for _ in range(n)]
            ids = [rng.choice(["\u00e9", "\U0001f600", "\ue000", "Z"]) if rng.random() < 0.1
                   else doc for doc in ids]
            scores = [float(rng.choice([rng.randint(0, 3), round(rng.uniform(0, 3), 1)]))
                      for _ in range(n)]
            if rng.random() < 0.6:
                scores.sort(reverse=True)
            labels = {doc: rng.choice([-1, 0, 1, 2]) for doc in set(ids) if rng.random() < 0.6}
            labels["unretrieved"] = 1
            cutoffs = tuple(sorted({rng.randint(1, 15) for _ in range(rng.randint(1, 3))}))
            depth, exact = cutoffs[-1], rng.random() < 0.5
            form = rng.choice(list(forms))
            plain_ranking = {"list": ids, "dict": dict(zip(ids, scores)),
                             "scored": rag_eval._Scored(ids, scores),
                             "tokens": rag_eval._Scored(ids, scores)}[form]
            fast_ranking, fast_labels = plain_ranking, labels
            if form == "tokens":
                fast_ranking = rag_eval._Scored([d.encode() for d in ids],
                                                [b"%.1f" % s for s in scores])
                fast_labels = rag_eval._labels_for_fast(fast_ranking, labels)
            plain = rag_eval._rank_plain(plain_ranking, labels, depth, cutoffs, exact)
            fast = rag_eval._rank_fast(fast_ranking, fast_labels, depth, cutoffs, exact)
            if not exact:   # the fast ranker counts returned ids exactly only when asked
                fast, plain = fast._replace(returned=fast.returned > 0), \
                    plain._replace(returned=plain.returned > 0)
            self.assertEqual(fast, plain, (form, plain_ranking, labels, cutoffs, exact))
            forms[form] += 1
        self.assertGreater(min(forms.values()), 1000, forms)

    # -- _jsonl_qrels_of: _jsonl_labels_bulk == _jsonl_qrels ------------------------
    def test_jsonl_label_readers(self):
        # Seeded label-line files, well formed and mutated (nulls, floats, bools,
        # negative or crossed offsets, other keys, other line forms, blank lines,
        # CRLF, two objects on a line, bad JSON): the bulk reader gives the plain
        # reader's labels and pending rows, or its error, every time.
        rng = random.Random(23)

        def outcome(reader, text):
            inp = rag_eval._Input(io.StringIO(text))
            try:
                return reader(inp), inp.pending, inp.digest.hexdigest()
            except rag_eval.EvalError as exc:
                return str(exc)
        mutations = ['"start": null', '"end": null', '"start": 1.5', '"start": true', '"end": 0',
                     '"grade": null', '"grade": true', '"grade": 2.0', '"grade": -1',
                     '"doc": 5', '"query_id": 7', '"query_id": null', '"doc_sha256": "ab"',
                     '"x": 1', '"start": -3', '"id": "c1"', '"qid": "q9"', '"grades": {}',
                     '"relevant": ["d1"]', '"answerable": false', '"doc": "\\udc00"']
        seen = {"bulk": 0, "plain": 0}
        for case in range(1500):
            lines = []
            for i in range(rng.randint(1, 10)):
                record = {"query_id": "q%d" % rng.randrange(4), "doc": "d%d" % rng.randrange(3),
                          "grade": rng.randint(0, 3)}
                if rng.random() < 0.7:
                    record["start"] = rng.randrange(0, 50)
                    record["end"] = record["start"] + rng.randint(1, 30)
                    if rng.random() < 0.5:
                        record = {k: record[k] for k in rng.sample(list(record), len(record))}
                if rng.random() < 0.1:      # a field set (or replaced) to a bad value
                    record.update(json.loads("{%s}" % rng.choice(mutations)))
                line = json.dumps(record)
                if rng.random() < 0.03:     # a key given twice
                    line = line[:-1] + ", " + rng.choice(mutations) + "}"
                if rng.random() < 0.02:
                    line = line[:rng.randrange(len(line))]
                if rng.random() < 0.02:
                    line = line + ", " + line
                lines.append(line)
            if rng.random() < 0.05:
                lines.insert(rng.randrange(len(lines) + 1), rng.choice(["", "  "]))
            end = rng.choice(["\n", "", "\n\n"])
            text = ("\r\n" if rng.random() < 0.03 else "\n").join(lines) + end
            if rng.random() < 0.03:
                text = "\ufeff" + text
            seen["bulk" if rag_eval._bulk_labels(text.lstrip("\ufeff")) is not None
                 else "plain"] += 1
            self.assertEqual(outcome(rag_eval._jsonl_labels_bulk, text),
                             outcome(rag_eval._jsonl_qrels, text), text)
        self.assertGreater(min(seen.values()), 300, seen)

    # -- _top_chunks: _top_chunks_fast == _top_chunks_plain -----------------------
    def test_top_chunks(self):
        # _Scored with text or the fast reader's bytes ids (some not UTF-8, cut
        # mid-character) and decimal tokens, in order or not; ties, repeats
        # near the top and below it; score maps and ranked lists; any depth.
        rng = random.Random(22)
        odd = [b"\xff", b"\xe2\x82", b"\xc3\xa9", b"\xf0\x9f\x98\x80", b"Z", b"\xed\xa0\x80"]
        seen = {"list": 0, "dict": 0, "text": 0, "bytes": 0, "tokens": 0, "in order": 0,
                "tie": 0, "repeat": 0}
        for case in range(6000):
            n = rng.randint(0, 16)
            ids = [b"d%d" % rng.randrange(max(1, n + rng.randint(-3, 8))) for _ in range(n)]
            ids = [rng.choice(odd) + doc if rng.random() < 0.1 else doc for doc in ids]
            # The reader's scores: decimal tokens of one layout (_decimal_tokens),
            # else floats.  Few distinct values: ties.
            layout = rng.choice([b"%d", b"%.1f", b"%04.1f", None])
            high = {b"%d": 9, b"%.1f": 9, b"%04.1f": 99, None: 30}[layout]
            scores = [float(rng.randint(0, 3)) if rng.random() < 0.5
                      else round(rng.uniform(0, high), 0 if layout == b"%d" else 1)
                      for _ in range(n)]
            if rng.random() < 0.7:
                scores.sort(reverse=True)
            given = [layout % score for score in scores] if layout else scores
            form = rng.choice(["list", "dict", "text", "bytes", "bytes"])
            text = [doc.decode("utf-8", "surrogateescape") for doc in ids]
            ranking = {"list": text, "dict": dict(zip(text, scores)),
                       "text": rag_eval._Scored(text, scores),
                       "bytes": rag_eval._Scored(ids, given)}[form]
            depth = rng.randint(1, 12)
            fast = rag_eval._top_chunks_fast(ranking, depth)
            plain = rag_eval._top_chunks_plain(ranking, depth)
            self.assertEqual(fast, plain, (ranking, depth))
            self.assertEqual(type(fast[0]), type(plain[0]))
            seen[form] += 1
            seen["tokens"] += form == "bytes" and layout is not None
            seen["in order"] += scores == sorted(scores, reverse=True)
            seen["tie"] += len(set(scores[:depth + 1])) < len(scores[:depth + 1])
            seen["repeat"] += len(set(ids[:depth + 1])) < len(ids[:depth + 1])
        self.assertGreater(min(seen.values()), 500, seen)

    # -- every hook at once: byte-identical reports ------------------------------
    def cli(self, folder, argv):
        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            code = rag_eval.main(list(argv), stdout=out, stderr=err)
        finally:
            os.chdir(cwd)
        return code, out.getvalue(), err.getvalue()

    def test_reports_are_byte_identical(self):
        # Random qrels and runs in every format (TREC runs mutated now and then),
        # scored through main() with every acceleration, forked workers included
        # (small blocks, no size threshold), and with every plain twin: the same
        # exit code, stdout and stderr, byte for byte.
        rng = random.Random(22)
        seen = {0: 0, 2: 0, "forked": 0}
        for case in range(1200):
            run_text = random_run_text(rng, scattered=0.05)
            if rng.random() < 0.15:
                run_text = rng.choice(_RUN_MUTATIONS)(run_text, rng.randrange(len(run_text)))
            queries = sorted({line.split()[0] for line in run_text.splitlines()
                              if line.strip() and not line.startswith("#")})
            qrels = {q: {"d%d" % d: rng.choice([-1, 0, 1, 2]) for d in range(9)
                         if rng.random() < 0.4} for q in queries[:rng.randint(1, 6)]}
            qrels = {q: g for q, g in qrels.items() if g} or {"q0": {"d1": 1}}
            if rng.random() < 0.5:
                qrels_text = "".join("%s 0 %s %d\n" % (q, d, g) for q in qrels
                                     for d, g in qrels[q].items())
            else:
                qrels_text = json.dumps(qrels)
            run_data = run_text.encode("utf-8")
            kind = rng.random()
            if kind < 0.2:                  # the same run as JSON score maps or JSONL
                try:
                    run = rag_eval.load_run(io.BytesIO(run_data))
                except rag_eval.EvalError:
                    continue
                run_data = (json.dumps(run) if rng.random() < 0.5 else "".join(
                    json.dumps({"query_id": q, "scores": s}) + "\n"
                    for q, s in run.items())).encode("utf-8")
            folder = os.path.join(self.tmp, "c%d" % case)
            os.mkdir(folder)
            with open(os.path.join(folder, "q"), "w", encoding="utf-8") as handle:
                handle.write(qrels_text)
            with open(os.path.join(folder, "r"), "wb") as handle:
                handle.write(run_data)
            argv = ["q", "r", "--format", rng.choice(["json", "text", "markdown"]),
                    "--per-query", "--skip-extra-queries", "--k",
                    rng.choice(["1,3,10", "2", "5,20"]), "--metrics",
                    rng.choice(["recall,ndcg,mrr,judged", "map,precision,success",
                                "context_precision,ndcg(gain=linear)",
                                "map@all,rprec,bpref,mrr@all,precision@all",
                                "recall(unit=doc),diversity(unit=doc),map(unit=doc)@all"])]
            if "unit=doc" in argv[-1]:      # ids without the separator: each its own document
                argv += ["--doc-sep", "#"]
            forked = rng.random() < 0.05 and hasattr(os, "fork") and (os.cpu_count() or 1) > 1
            rag_eval._BLOCK_SIZE = rng.choice([16, 256, 1 << 17])
            rag_eval._PARALLEL_MIN_BYTES = 0 if forked else self.saved[1]
            fast = self.cli(folder, argv)
            rag_eval._PARALLEL_MIN_BYTES = self.saved[1]
            with plain_twins():
                plain = self.cli(folder, argv)
            self.assertEqual(fast, plain, (qrels_text, run_data, argv, forked))
            seen[plain[0]] = seen.get(plain[0], 0) + 1
            seen["forked"] += forked
            shutil.rmtree(folder)
        self.assertGreater(min(seen[0], seen[2], seen["forked"]), 20, seen)

    # -- moved from LoaderTest and MalformedInputTest ---------------------------
    def test_trec_qrels_fast_and_checked_readers_agree(self):
        texts = [b"q1 0 a 1\nq1 0 b 0\nq2 0 c 2\n", b"q1 0 a 1\r\nq2 0 b -1\r\n",
                 b"q1 0 a 1\nq2 0 b 1", b"q1 0 a#1/x 3\n"]
        for name in sorted(os.listdir(PEERS)):
            path = os.path.join(PEERS, name, "qrels.trec")
            if os.path.exists(path):
                with open(path, "rb") as handle:
                    texts.append(handle.read())
        for data in texts:
            with self.subTest(data=data[:30]):
                path = self.write("q.trec", data)
                fast = rag_eval._trec_qrels_fast(data)
                self.assertIsNotNone(fast)
                self.assertEqual(fast, rag_eval._trec_qrels_checked(rag_eval._Input(path)))
        for data in (b"q1\t0\ta\t1\n", b"q1 0 a 1\n\nq2 0 b 1\n", b"q1 0  a 1\n",
                     b"q1 0 a 1 x\nq1 0 b\n", b"q1 0 a 1_0\n", b"q1 0 a 1\nq1 0 a 2\n"):
            with self.subTest(irregular=data):
                self.assertIsNone(rag_eval._trec_qrels_fast(data))

    def test_trec_qrels_fast_reader_agrees_on_mutated_lines(self):
        # Seeded mutations of regular qrels: whatever the split-on-spaces reader
        # returns, the line-by-line reader returns too (None defers to it).
        inserts = [" ", "\t", "\x0b", "\x0c", "\r", "\r\n", "\n", "  ", "1", "-", "+", "_",
                   "\u0662", "\x85", "\xa0", "\x1c", "#", "x"]
        rng = random.Random(9)
        seen = {"fast": 0, "deferred": 0, "error": 0}
        for case in range(3000):
            text = "".join("q%d 0 d%d %d\n" % (rng.randrange(3), rng.randrange(6),
                                                rng.choice([0, 1, 2, -1, 12]))
                           for _ in range(rng.randrange(1, 7)))
            text = "".join(dict.fromkeys(text.splitlines(True)))    # no conflicting grade yet
            for _ in range(rng.randrange(4)):
                i = rng.randrange(len(text))
                if rng.random() < 0.2:
                    text = text[:i] + text[i + 1:]
                else:
                    text = text[:i] + rng.choice(inserts) + text[i:]
            data = text.encode()
            fast = rag_eval._trec_qrels_fast(data)
            try:
                careful = rag_eval._trec_qrels_checked(rag_eval._Input(io.BytesIO(data)))
            except rag_eval.EvalError:
                careful = "error"
            if fast is not None:
                self.assertEqual(fast, careful, data)
            seen["fast" if fast is not None else "error" if careful == "error" else "deferred"] += 1
        self.assertGreater(min(seen.values()), 200, seen)

    def test_fast_trec_reader_agrees_with_the_line_reader(self):
        # Seeded mutations of a regular block: the split-on-spaces reader must
        # give what the line-by-line reader gives (segments or the same error).
        def outcome(read):
            try:
                segments = read()
            except rag_eval.EvalError as exc:
                return str(exc)
            merged = []     # a change of tag may cut a query in two: the reader joins them
            for qid, docs, scores in segments:
                if not merged or merged[-1][0] != qid:
                    merged.append((qid, [], []))
                merged[-1][1].extend(docs)
                merged[-1][2].extend(map(float, scores))
            return merged

        rng = random.Random(11)
        seen = {"fast": 0, "error": 0}
        for case in range(3000):
            scores = sorted((rng.choice([rng.uniform(0, 99), rng.randint(0, 20)])
                             for _ in range(12)), reverse=True)
            text = "".join("q%d Q0 d%d %d %s t\n" % (r // 5, rng.randrange(9), r,
                                                      rng.choice(["%.3f", "%.1f", "%s"]) % s)
                           for r, s in enumerate(scores))
            for _ in range(rng.randrange(3)):
                text = rng.choice(_RUN_MUTATIONS)(text, rng.randrange(len(text)))
            block = text.encode() + (b"" if text.endswith("\n") else b"\n")
            lines = block.count(b"\n")
            fast = outcome(lambda: rag_eval._block_segments(block, "r", 0, lines))
            slow = outcome(lambda: rag_eval._block_segments_checked(block, "r", 0))
            self.assertEqual(fast, slow, block)
            seen["error" if isinstance(slow, str) else "fast"] += 1
        self.assertGreater(min(seen.values()), 500, seen)

    def test_decimal_tokens_compare_as_numbers(self):
        # _decimal_tokens says yes exactly when every token has one width, at
        # most 15 digits and its point (or none) in one column.
        def reference(raw):
            width, point = len(raw[0]), raw[0].find(b".")
            return all(len(t) == width and t.find(b".") == point and t.count(b".") <= 1
                       and t.replace(b".", b"").isdigit() and len(t) - (point >= 0) <= 15
                       for t in raw)

        rng = random.Random(12)
        alphabet = [b"1", b"2", b"0", b".", b"-", b"e", b"9"]
        said_yes = 0
        for case in range(4000):
            width = rng.randint(1, 17)
            raw = [b"".join(rng.choice(alphabet[:3] if rng.random() < 0.7 else alphabet)
                            for _ in range(width + (rng.random() < 0.05)))
                   for _ in range(rng.randint(1, 6))]
            if rng.random() < 0.5:
                column = rng.randrange(width)
                raw = [t[:column] + b"." + t[column + 1:] for t in raw]
            got = rag_eval._decimal_tokens(raw)
            self.assertEqual(got, reference(raw), raw)
            said_yes += got
        self.assertGreater(said_yes, 400)

    # -- moved from StreamingTest, ParallelTest and ParallelJsonTest ------------
    def test_fast_path_matches_dict_path(self):
        # The run streamed from its file (evaluate_files) scores as the run loaded
        # whole into a dict (evaluate).
        qrels, lines = (test_inputs.StreamingTest.QRELS,
                        "\n".join(test_inputs.StreamingTest.LINES) + "\n")
        run = rag_eval.load_run(self.write("r.trec", lines))
        by_dict = rag_eval.evaluate(qrels, run, k="1,2,3", metrics="recall,mrr,ndcg,judged")
        streamed = rag_eval.evaluate_files(self.write("q.json", json.dumps(qrels)),
                                           self.write("r.trec", lines), k="1,2,3",
                                           metrics="recall,mrr,ndcg,judged")
        self.assertEqual(by_dict.per_query, streamed.per_query)

    # -- forked workers (_scored_run_forked) against one core ------------------
    def test_forked_trec_run_gives_the_numbers_of_one_core(self):
        self.use_forked_workers()
        lines = self.lines()
        parallel = self.evaluate(lines)
        self.assertTrue(rag_eval._parallel_ok(rag_eval._Input(os.path.join(self.tmp, "r.trec")),
                                              "trec"))
        rag_eval._PARALLEL_MIN_BYTES = 1 << 62
        sequential = self.evaluate(lines)
        self.assertEqual(parallel.per_query, sequential.per_query)
        self.assertEqual(parallel.ties, sequential.ties)
        self.assertEqual(parallel.abstention, sequential.abstention)
        self.assertEqual(parallel.inputs, sequential.inputs)
        self.assertEqual(parallel.warnings, sequential.warnings)
        self.assertEqual(parallel.unlabelled, sequential.unlabelled)
        self.assertGreater(len(parallel.ties), 0)
        self.assertGreater(len(parallel.unlabelled), 0)

    def test_a_run_meeting_no_label_says_the_same_on_every_core(self):
        self.use_forked_workers()
        lines = [line.replace(" d", " x", 1) for line in self.lines()]    # no id is labelled
        parallel = self.evaluate(lines)
        rag_eval._PARALLEL_MIN_BYTES = 1 << 62
        sequential = self.evaluate(lines)
        self.assertIn("not one retrieved id carries a label", parallel.unlabelled_run)
        self.assertEqual(parallel.unlabelled_run, sequential.unlabelled_run)
        self.assertEqual(parallel.warnings, sequential.warnings)

    def test_forked_json_runs_give_the_numbers_of_the_dict(self):
        self.use_forked_workers(block_size=None)
        qrels, run = json_run_case()
        qpath = self.write("q.json", json.dumps(qrels))
        expected = rag_eval.evaluate(qrels, run, k="1,3,10", metrics="recall,ndcg,mrr,judged")
        self.write("r.json", json.dumps(run, indent=1))
        self.write("r.jsonl", "".join(json.dumps({"query_id": q, ("docs" if isinstance(v, list)
                                                  else "scores"): v}) + "\n"
                                      for q, v in run.items()))
        for name in ("r.json", "r.jsonl"):
            with self.subTest(file=name):
                self.assertTrue(rag_eval._parallel_ok(
                    rag_eval._Input(os.path.join(self.tmp, name)), "json"))
                report = rag_eval.evaluate_files(qpath, os.path.join(self.tmp, name), k="1,3,10",
                                                 metrics="recall,ndcg,mrr,judged")
                self.assertEqual(report.per_query, expected.per_query)
                self.assertEqual(report.warnings, expected.warnings)


class ParallelTest(ForkedRuns, TempDir, unittest.TestCase):
    """Large plain TREC runs are scored by one forked worker per core; here the
    size threshold is lowered so small files take that path too."""

    def setUp(self):
        super().setUp()
        self.saved = rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE
        self.use_forked_workers()

    def tearDown(self):
        rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE = self.saved
        super().tearDown()

    def test_an_error_after_the_merge_leaves_no_pipe_open(self):
        # The run's hash is computed by another process while results merge; an
        # error after the merge (here a query not in the qrels) must not leak it.
        if not os.path.isdir("/proc/self/fd"):
            self.skipTest("needs /proc")
        lines = self.lines() + ["zz Q0 d1 1 1.0 t"]
        before = len(os.listdir("/proc/self/fd"))
        with self.assertRaisesRegex(rag_eval.EvalError, "1 query is not in the qrels: 'zz'"):
            self.evaluate(lines)
        rag_eval._reap_all()
        self.assertEqual(len(os.listdir("/proc/self/fd")), before)
        self.assertEqual(rag_eval._EXITING, set())

    @accelerated_only
    def test_a_change_of_run_tag_stays_on_every_core(self):
        lines = self.lines()
        tagged = [line[:-1] + ("a" if i % 7 < 3 else "b") for i, line in enumerate(lines)]
        expected = self.evaluate(lines)
        sequential = rag_eval._run_queries
        rag_eval._run_queries = lambda *args, **kwargs: self.fail("fell back to one core")
        try:
            report = self.evaluate(tagged)
        finally:
            rag_eval._run_queries = sequential
        self.assertEqual(report.per_query, expected.per_query)
        self.assertEqual(report.warnings, expected.warnings)

    @accelerated_only
    def test_comment_lines_stay_on_every_core(self):
        lines = self.lines()
        commented = ["# run of %d lines" % len(lines)]
        for i, line in enumerate(lines):
            commented += [line, "#" + line] if i % 50 == 7 else [line]
        expected = self.evaluate(lines)
        sequential = rag_eval._run_queries
        rag_eval._run_queries = lambda *args, **kwargs: self.fail("fell back to one core")
        try:
            report = self.evaluate(commented)
        finally:
            rag_eval._run_queries = sequential
        self.assertEqual(report.per_query, expected.per_query)
        self.assertEqual(report.ties, expected.ties)

    def test_bad_line_is_named_exactly(self):
        lines = self.lines()
        lines[1000] = "q33 Q0 d1 1 oops t"
        with self.assertRaisesRegex(rag_eval.EvalError, r"r.trec:1001: score must be a finite"):
            self.evaluate(lines)

    def test_fork_failure_falls_back(self):
        lines = self.lines()
        expected = self.evaluate(lines)
        real_fork = os.fork

        def no_fork():
            raise BlockingIOError(11, "Resource temporarily unavailable")
        os.fork = no_fork
        try:
            report = self.evaluate(lines)
        finally:
            os.fork = real_fork
        self.assertEqual(report.per_query, expected.per_query)

    def test_no_fork_while_other_threads_run(self):
        import threading
        path = self.write("r.trec", "q1 Q0 a 1 1.0 t\n")
        self.assertTrue(rag_eval._parallel_ok(rag_eval._Input(path), "trec"))
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait)
        worker.start()
        try:
            self.assertFalse(rag_eval._parallel_ok(rag_eval._Input(path), "trec"))
        finally:
            stop.set()
            worker.join()

    def test_error_in_this_process_while_a_child_has_much_to_send(self):
        # A bad line in the first range fails here while the child holds a result
        # larger than a pipe's buffer: the child must be released, not waited on
        # forever.  Run in a subprocess with a time limit so a hang fails the test.
        lines = ["q%04d Q0 d%d %d %d.5 t" % (q, d, d, 9 - d) for q in range(4000)
                 for d in range(3)]
        lines[1] = "q0000 Q0 d1 2 oops t"
        run = self.write("r.trec", "\n".join(lines) + "\n")
        qrels = self.write("q.json", json.dumps({"q%04d" % q: {"d1": 1} for q in range(4000)}))
        code = ("import sys, rag_eval; rag_eval._PARALLEL_MIN_BYTES = 0; "
                "sys.exit(rag_eval.main(sys.argv[1:]))")
        proc = subprocess.run([sys.executable, "-c", code, qrels, run], cwd=HERE, timeout=60,
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("r.trec:2: score must be a finite number, got 'oops'", proc.stderr)

    def test_scattered_queries_fall_back(self):
        lines = self.lines()
        lines = lines[600:] + lines[:600]
        lines[5], lines[900] = lines[900], lines[5]
        report = self.evaluate(lines)
        rag_eval._PARALLEL_MIN_BYTES = 1 << 62
        self.assertEqual(report.per_query, self.evaluate(self.lines()).per_query)
        self.assertIn("not contiguous", report.warnings[0])


class ParallelJsonTest(ForkedRuns, TempDir, unittest.TestCase):
    """JSON and JSONL runs cut between queries and scored by forked workers."""

    def setUp(self):
        super().setUp()
        self.saved = rag_eval._PARALLEL_MIN_BYTES
        self.use_forked_workers(block_size=None)
        self.qrels, self.run = json_run_case()
        self.qpath = self.write("q.json", json.dumps(self.qrels))

    def tearDown(self):
        rag_eval._PARALLEL_MIN_BYTES = self.saved
        super().tearDown()

    def evaluate(self, name):
        return rag_eval.evaluate_files(self.qpath, os.path.join(self.tmp, name), k="1,3,10",
                                       metrics="recall,ndcg,mrr,judged")

    def test_a_run_that_maps_its_own_chunks_is_not_split(self):
        # Found by review: each worker kept its own map, so one chunk placed two
        # ways in two byte ranges passed (exit 0) where the plain path refused.
        lines = []
        for q in range(60):
            items = [{"id": "d%d#%d" % (q % 7, c), "doc": "d%d" % (q % 7), "start": 10 * c,
                      "end": 10 * c + 10} for c in range(20)]
            if q in (0, 59):
                items[0] = {"id": "zz", "doc": "d%d" % q, "start": 0, "end": 5}
            lines.append(json.dumps({"query_id": "q%d" % q, "docs": items}))
        self.write("r.jsonl", "\n".join(lines) + "\n")
        qpath = self.write("l.jsonl", "".join(json.dumps({"query_id": "q%d" % q, "doc": "d1",
                                                          "grade": 1}) + "\n" for q in range(60)))
        for plain in (False, True):
            with self.subTest(plain=plain), (plain_twins() if plain else contextlib.nullcontext()):
                with self.assertRaisesRegex(rag_eval.EvalError, "chunk 'zz' is given twice"):
                    rag_eval.evaluate_files(qpath, os.path.join(self.tmp, "r.jsonl"), k=5,
                                            measures="recall(unit=doc)")

    def test_trailing_comma_is_still_invalid(self):
        text = json.dumps(self.run)
        self.write("r.json", text[:-1] + ",}")
        with self.assertRaisesRegex(rag_eval.EvalError, "invalid JSON"):
            self.evaluate("r.json")

    def test_cut_points_inside_strings_are_rejected(self):
        # Every cut falls inside the long id, so each worker's parse fails and the
        # sequential path scores the file.
        run = {"q00": ["x" + "], \"" * 50000], "q01": ["d1"]}
        self.write("r.json", json.dumps(run))
        report = self.evaluate("r.json")
        self.assertEqual(report.per_query["q01"]["recall@10"],
                         1 / sum(1 for g in self.qrels["q01"].values() if g >= 1))

    def test_duplicate_query_across_ranges_is_an_error(self):
        lines = [json.dumps({"query_id": q, "scores": v}) for q, v in self.run.items()
                 if isinstance(v, dict)]
        self.write("r.jsonl", "\n".join(lines + lines[:1]) + "\n")
        with self.assertRaisesRegex(rag_eval.EvalError, r"r.jsonl:30: query 'q00' appears on "
                                                        r"more than one line"):
            self.evaluate("r.jsonl")
        text = json.dumps(self.run)
        self.write("r.json", text[:-1] + ', "q00": ["d1"]}')
        with self.assertRaisesRegex(rag_eval.EvalError, "duplicate key 'q00'"):
            self.evaluate("r.json")


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


if __name__ == "__main__":
    unittest.main()


# ---------------------------------------------------------------------------
# trec_eval's output (--format trec) and trec_eval's averaging (--average trec_eval)
# ---------------------------------------------------------------------------

class TrecOutputTest(TempDir, unittest.TestCase):
    """``--format trec`` prints what trec_eval prints, for scripts that parse it.

    The expected bytes below were compared with trec_eval 9.0.8 built from
    usnistgov/trec_eval (tag v9.0.8) on the same files; the averaging data
    (tests/data/trec_average/) was written by tests/peers/gen_trec_average.py
    with pytrec_eval, which the suite never imports."""

    def test_names_are_trec_evals_only_for_its_parameters(self):
        names = {   # ours -> what --format trec prints (from the registry's peer spellings)
            "recall@5": "recall_5", "precision@10": "P_10", "success@1": "success_1",
            "map@5": "map_cut_5", "ndcg(gain=linear)@10": "ndcg_cut_10", "mrr@all": "recip_rank",
            "map@all": "map", "ndcg(gain=linear)@all": "ndcg", "recall@all": "set_recall",
            "precision@all": "set_P", "rprec": "Rprec", "bpref": "bpref",
            # no trec_eval name for these parameters: our canonical name
            "precision(rel=2)@5": None, "recall(rel=2)@5": None, "bpref(rel=2)": None,
            "ndcg@10": None, "ndcg@all": None, "mrr@5": None, "success@all": None,
            "judged@5": None, "context_precision@5": None,
        }
        for ours, theirs in names.items():
            with self.subTest(measure=ours):
                m = rag_eval.parse_measure(ours)
                self.assertEqual(rag_eval._peer_name(m, "trec_eval"), theirs)
        # trec_eval's set_ names are read too; its uncut map and ndcg are only
        # written: as input, bare map and ndcg keep our meaning (every --k).
        self.assertEqual(str(rag_eval.parse_measure("set_recall")), "recall@all")
        self.assertEqual(str(rag_eval.parse_measure("set_P")), "precision@all")
        self.assertEqual([str(m) for m in rag_eval.resolve_measures("map,ndcg", k=5)],
                         ["map@5", "ndcg@5"])

    # trec_eval 9.0.8: trec_eval -q -m num_q -m map -m recip_rank -m P.5 -m recall.5
    # -m ndcg_cut.5 on the bundled example (qrels.json, run.json as TREC files;
    # q4, which has no relevant id, left out of both, as our default averaging
    # leaves it out). Hand check of q1 (ranks 2 and 4 hold grades 2 and 1 of 2
    # relevant): map (1/2 + 2/4) / 2 = 0.5; P_5 2/5; ndcg_cut_5 (2/log2 3 + 1/log2 5)
    # / (2 + 1/log2 3) = 0.6433. num_q is an integer, as trec_eval prints it.
    EXAMPLE_TREC = (
        "map                   \tq1\t0.5000\n"
        "recip_rank            \tq1\t0.5000\n"
        "P_5                   \tq1\t0.4000\n"
        "recall_5              \tq1\t1.0000\n"
        "ndcg_cut_5            \tq1\t0.6433\n"
        "map                   \tq2\t0.0000\n"
        "recip_rank            \tq2\t0.0000\n"
        "P_5                   \tq2\t0.0000\n"
        "recall_5              \tq2\t0.0000\n"
        "ndcg_cut_5            \tq2\t0.0000\n"
        "map                   \tq3\t0.8667\n"
        "recip_rank            \tq3\t1.0000\n"
        "P_5                   \tq3\t0.6000\n"
        "recall_5              \tq3\t1.0000\n"
        "ndcg_cut_5            \tq3\t0.9050\n"
        "num_q                 \tall\t3\n"
        "map                   \tall\t0.4556\n"
        "recip_rank            \tall\t0.5000\n"
        "P_5                   \tall\t0.3333\n"
        "recall_5              \tall\t0.6667\n"
        "ndcg_cut_5            \tall\t0.5161\n")
    EXAMPLE_MEASURES = "map@all,mrr@all,P@5,recall@5,ndcg(gain=linear)@5"

    def trec(self, *argv, qrels=None, run=None):
        return run_cli(qrels or example("qrels.json"), run or example("run.json"),
                       "--format", "trec", *argv)

    def test_exact_bytes_of_trec_evals_layout(self):
        code, out, err = self.trec("--per-query", "--metrics", self.EXAMPLE_MEASURES)
        self.assertEqual(code, 0)
        self.assertEqual(out, self.EXAMPLE_TREC)
        self.assertNotIn("num_q", err)              # stderr holds warnings only
        for line in out.splitlines():               # what a script splits on
            name, qid, value = line.split("\t")
            self.assertEqual(len(name), 22)
            self.assertRegex(value, r"^\d+(\.\d{4})?$")
        code, out, err = self.trec("--metrics", self.EXAMPLE_MEASURES)   # no --per-query
        self.assertEqual(out, self.EXAMPLE_TREC[self.EXAMPLE_TREC.index("num_q"):])
        # the same bytes from a TREC run, and through -o
        with open(example("run.json"), encoding="utf-8") as handle:
            rankings = json.load(handle)
        lines = "".join("%s Q0 %s %d %d tag\n" % (q, doc, rank, 10 - rank)
                        for q, ranking in sorted(rankings.items())
                        for rank, doc in enumerate(ranking, 1))
        target = os.path.join(self.tmp, "out.txt")
        code, out, _ = self.trec("--per-query", "--metrics", self.EXAMPLE_MEASURES, "-o", target,
                                 run=self.write("run.trec", lines))
        with open(target, encoding="utf-8") as handle:
            self.assertEqual((code, out, handle.read()), (0, "", self.EXAMPLE_TREC))

    def test_names_in_the_output(self):
        code, out, _ = self.trec("--metrics", "ndcg@5,ndcg(gain=linear)@5,precision(rel=2)@5,"
                                 "P@5,judged@5,rprec,bpref,recall@all,precision@all")
        self.assertEqual([line.split("\t")[0].rstrip() for line in out.splitlines()],
                         ["num_q", "ndcg@5", "ndcg_cut_5", "precision(rel=2)@5", "P_5",
                          "judged@5", "Rprec", "bpref", "set_recall", "set_P"])
        # --rel 2 changes every rel measure's parameters: trec_eval's names would lie
        code, out, _ = self.trec("--rel", "2", "--metrics", "recall@5,mrr@all,ndcg(gain=linear)@5")
        self.assertEqual([line.split("\t")[0].rstrip() for line in out.splitlines()],
                         ["num_q", "recall(rel=2)@5", "mrr(rel=2)@all", "ndcg_cut_5"])
        long_name = "context_precision(rel=2)@10"      # longer than 22: no padding, as trec_eval
        code, out, _ = self.trec("--metrics", long_name, "--per-query")
        self.assertIn("\n%s\tall\t" % long_name, "\n" + out)

    def test_per_query_order_is_trec_evals(self):
        # queries in trec_eval's order (sorted as strings: q10 before q2), each
        # query's measures together, then the all lines.
        qrels = self.write("qrels.json", json.dumps(
            {"q2": {"a": 1}, "q10": {"b": 1}, "q1": {"c": 1}, "Q": {"d": 1}}))
        run = self.write("run.json", json.dumps(
            {"q2": ["a"], "q10": ["x", "b"], "q1": ["x"], "Q": ["d"]}))
        code, out, _ = self.trec("--per-query", "--metrics", "mrr@all,success@1",
                                 qrels=qrels, run=run)
        rows = [line.split("\t") for line in out.splitlines()]
        self.assertEqual([(name.rstrip(), qid) for name, qid, _ in rows], [
            ("recip_rank", "Q"), ("success_1", "Q"), ("recip_rank", "q1"), ("success_1", "q1"),
            ("recip_rank", "q10"), ("success_1", "q10"), ("recip_rank", "q2"),
            ("success_1", "q2"), ("num_q", "all"), ("recip_rank", "all"), ("success_1", "all")])
        self.assertEqual(rows[-2][2], "0.6250")      # (1 + 0 + 1/2 + 1) / 4

    def test_a_query_id_a_line_cannot_carry_is_refused(self):
        for qid in ("what is sso", "all", "tab\there"):
            with self.subTest(qid=qid):
                qrels = self.write("qrels.json", json.dumps({qid: {"a": 1}}))
                run = self.write("run.json", json.dumps({qid: ["a"]}))
                code, out, err = self.trec("--per-query", qrels=qrels, run=run)
                self.assertEqual((code, out), (2, ""))
                self.assertRegex(err, r"^rag-eval: error: --format trec: query id .* cannot be "
                                      r"written on a trec_eval line .*\n$")
                self.assertEqual(self.trec(qrels=qrels, run=run)[0], 0)   # no query lines

    def test_gate_and_comparison_go_to_stderr(self):
        # The bundled baseline fails (exit 1): stdout stays trec_eval's lines,
        # the gate's text is on stderr, as the text format writes it.
        code, out, err = self.trec("--baseline", example("baseline.json"))
        self.assertEqual(code, 1)
        self.assertTrue(out.startswith("num_q                 \tall\t3\n"))
        self.assertTrue(all(len(line.split("\t")) == 3 for line in out.splitlines()))
        _, text, _ = run_cli(example("qrels.json"), example("run.json"),
                             "--baseline", example("baseline.json"))
        gate_text = text[text.index("gate vs"):]
        self.assertTrue(err.startswith(gate_text), err)
        self.assertIn("FAILED, 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5", err)
        # a passing gate: exit 0, its verdict on stderr
        base = self.write("base.json", json.dumps({"recall@5": 0.5}))
        code, out, err = self.trec("--baseline", base, "--metrics", "recall@5")
        self.assertEqual(code, 0)
        self.assertEqual(out, "num_q                 \tall\t3\nrecall_5              \tall\t0.6667\n")
        self.assertIn("PASSED", err)
        # --save-baseline with a failing gate: exit 1, the baseline kept, said on stderr
        saved = os.path.join(self.tmp, "saved.json")
        code, out, err = self.trec("--baseline", example("baseline.json"), "--save-baseline", saved)
        self.assertEqual(code, 1)
        self.assertFalse(os.path.exists(saved))
        self.assertIn("was not written", err)
        # a comparison: its table on stderr, exit 0
        code, out, err = self.trec("--compare", example("run.json"), "--metrics", "recall@5",
                                   "--resamples", "100")
        self.assertEqual(code, 0)
        self.assertEqual(out, "num_q                 \tall\t3\nrecall_5              \tall\t0.6667\n")
        self.assertIn("run vs %s, paired over 3 queries" % example("run.json"), err)

    def trec_average_cases(self):
        folder = os.path.join(DATA, "trec_average")
        for case in sorted(os.listdir(folder)):
            with open(os.path.join(folder, case, "expected.json"), encoding="utf-8") as handle:
                yield case, os.path.join(folder, case), json.load(handle)

    def test_trec_eval_averaging_equals_pytrec_eval(self):
        # Queries with no relevant id (all grades 0, only negative grades,
        # grades below rel that nDCG still counts, an empty ranking) count;
        # qrels queries the run lacks (q10, q11) and a run query the qrels
        # lack do not: trec_eval without -c, as pytrec_eval computes it.
        for case, folder, expected in self.trec_average_cases():
            with self.subTest(case=case):
                qrels, run = (os.path.join(folder, f) for f in ("qrels.json", "run.json"))
                names = list(expected["mean"])
                report = rag_eval.evaluate_files(
                    qrels, run, k=[1], metrics=names, rel=expected["rel"],
                    skip_extra_queries=True, average="trec_eval")
                self.assertEqual(report.average, "trec_eval")
                self.assertEqual(list(report.per_query), list(expected["per_query"]))
                self.assertNotIn("q10", report.per_query)           # missing from the run
                self.assertIn("q10", report.missing)
                for qid, values in expected["per_query"].items():
                    for m, value in values.items():
                        self.assertAlmostEqual(report.per_query[qid][m], value, delta=1e-9,
                                               msg="%s %s" % (qid, m))
                for m, value in expected["mean"].items():
                    self.assertAlmostEqual(report.mean[m], value, delta=1e-9, msg=m)
                # the command line prints the same, with trec_eval's names
                code, out, err = run_cli(qrels, run, "--format", "trec", "--per-query",
                                         "--average", "trec_eval", "--skip-extra-queries",
                                         "--rel", str(expected["rel"]), "--metrics", ",".join(names))
                self.assertEqual(code, 0, err)
                self.assertIn("1 query in the qrels not in the run, left out of the means "
                              "(trec_eval's average): 'q10'\n", err)   # q11: no relevant id
                printed = {m: expected["names"].get(m, m) for m in names}
                lines = ["%-22s\t%s\t%6.4f\n" % (printed[m], qid, values[m])
                         for qid, values in expected["per_query"].items() for m in names]
                lines.append("num_q                 \tall\t%d\n" % expected["num_q"])
                lines += ["%-22s\tall\t%6.4f\n" % (printed[m], expected["mean"][m]) for m in names]
                self.assertEqual(out, "".join(lines))
                # the default average differs: no-relevant queries out, missing ones in as 0
                scored = rag_eval.evaluate_files(qrels, run, k=[1], metrics=names,
                                                 rel=expected["rel"], skip_extra_queries=True)
                self.assertEqual(set(scored.per_query), set(expected["per_query"])
                                 - set(scored.unscored) | set(scored.missing))
                self.assertNotEqual(scored.mean, report.mean)

    def test_trec_eval_averaging_lists_no_query_twice(self):
        # Found by review: a query of the run with no relevant id is in the
        # means under trec_eval's averaging, so it is not also "unscored"; a
        # query the run lacks is left out, not "scored 0".
        report = rag_eval.evaluate({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0},
                                    "q4": {"d": 0}}, {"q1": ["a"], "q3": ["z"]}, k=1,
                                   measures="recall", average="trec_eval")
        self.assertEqual((report.unscored, sorted(report.per_query), report.missing),
                         (("q4",), ["q1", "q3"], ("q2",)))
        self.assertIn("2 queries scored; 1 unscored (no relevant id): q4; 1 missing from the "
                      "run (left out, as trec_eval averages)", rag_eval.render_text(report))

    def test_trec_eval_averaging_is_never_gated_or_compared(self):
        base = self.write("base.json", json.dumps({"recall@5": 0.5}))
        saved = os.path.join(self.tmp, "saved.json")
        out_file = os.path.join(self.tmp, "out.txt")
        for extra in (["--baseline", base], ["--save-baseline", saved],
                      ["--compare", example("run.json")], ["--format", "json"],
                      ["--format", "text", "-o", out_file]):
            with self.subTest(extra=extra):
                code, out, err = run_cli(example("qrels.json"), example("run.json"),
                                         "--average", "trec_eval", "--format", "trec", *extra)
                self.assertEqual((code, out), (2, ""))
                self.assertEqual(err.count("\n"), 1)
                self.assertRegex(err, r"^rag-eval: error: --average trec_eval ")
                self.assertFalse(os.path.exists(saved) or os.path.exists(out_file))
        # the library refuses the same way
        qrels, run = rag_eval.load_qrels(example("qrels.json")), rag_eval.load_run(example("run.json"))
        report = rag_eval.evaluate(qrels, run, average="trec_eval")
        other = rag_eval.evaluate(qrels, run)
        for call in (lambda: rag_eval.gate(report, {"recall@5": 0.5}),
                     lambda: rag_eval.compare(report, other),
                     lambda: rag_eval.compare(other, report),
                     lambda: rag_eval.baseline_dict(report)):
            with self.assertRaisesRegex(rag_eval.EvalError, "never gated, compared or saved"):
                call()
        with self.assertRaisesRegex(rag_eval.EvalError, "average must be one of"):
            rag_eval.evaluate({"q": {"a": 1}}, {"q": ["a"]}, average="trec")
        self.assertEqual(report.to_dict()["average"], "trec_eval")
        self.assertNotIn("average", other.to_dict())    # the JSON of a default report is unchanged
        # the bundled example: q4 (no relevant id, in the run) counts, as trec_eval counts it
        self.assertEqual((len(report.per_query), len(other.per_query)), (4, 3))
        code, out, _ = run_cli(example("qrels.json"), example("run.json"), "--format", "trec",
                               "--average", "trec_eval", "--metrics", "recall@5")
        self.assertEqual(out, "num_q                 \tall\t4\nrecall_5              \tall\t0.5000\n")

    def test_trec_eval_averaging_through_every_reader(self):
        # A TREC run (no empty rankings: a TREC file cannot hold one) read by
        # the plain twins, the block reader, and forked workers (threshold
        # lowered) gives the same report.
        for case, folder, expected in self.trec_average_cases():
            with open(os.path.join(folder, "run.json"), encoding="utf-8") as handle:
                run = json.load(handle)
            text = "".join("%s Q0 %s %d %r t\n" % (q, doc, rank, score)
                           for q, scores in sorted(run.items())
                           for rank, (doc, score) in enumerate(sorted(
                               scores.items(), key=lambda p: -p[1]), 1))
            path = self.write("run_%s.trec" % case, text)

            def score():
                return rag_eval.evaluate_files(
                    os.path.join(folder, "qrels.json"), path, k=[1],
                    metrics=list(expected["mean"]), rel=expected["rel"],
                    skip_extra_queries=True, average="trec_eval")._replace(inputs=None)
            with plain_twins():
                plain = score()
            self.assertEqual(score(), plain)
            saved = rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE
            rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE = 0, 256
            try:
                self.assertEqual(score(), plain)
            finally:
                rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE = saved
            empty = {q for q, scores in run.items() if not scores}
            self.assertEqual(set(plain.per_query), set(expected["per_query"]) - empty)
            for qid, values in plain.per_query.items():
                for m, value in values.items():
                    self.assertAlmostEqual(value, expected["per_query"][qid][m], delta=1e-9)
