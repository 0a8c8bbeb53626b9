"""Tests of rag_eval (standard library only): ``python3 -m unittest``.

Expected values come from hand arithmetic (tests/data/hand_worked.json and the
comments below) or from peer tools, stored as data under tests/data/ by the
generators in tests/peers/ (which the suite never imports).
"""

import contextlib
import copy
import doctest
import gzip
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

import rag_eval

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "tests", "data")


def load_tests(loader, tests, ignore):
    tests.addTests(doctest.DocTestSuite(rag_eval))
    return tests


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
    """Mixin: self.tmp is a fresh folder; self.write(name, text) puts a file there."""

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


def example(name):
    return os.path.join(HERE, name)


# ---------------------------------------------------------------------------
# The bundled example (domain.md)
# ---------------------------------------------------------------------------

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
        self.assertIn("FAILED, 2 regressions: mrr@5, recall@5", out)
        self.assertIn("0.5095", out)


# ---------------------------------------------------------------------------
# Measures
# ---------------------------------------------------------------------------

class HandWorkedMeasuresTest(unittest.TestCase):
    """Every measure on small rankings; see tests/data/hand_worked.json."""

    @classmethod
    def setUpClass(cls):
        with open(os.path.join(DATA, "hand_worked.json")) as handle:
            cls.cases = json.load(handle)["cases"]

    def test_arithmetic_matches_stored_numbers(self):
        for case in self.cases:
            for name, text in case["arithmetic"].items():
                value = eval(text, {"__builtins__": {}, "L": math.log2})
                self.assertAlmostEqual(value, case["expected"][name], places=15)

    def test_values(self):
        for case in self.cases:
            for name, expected in case["expected"].items():
                with self.subTest(case=case["name"], measure=name):
                    report = rag_eval.evaluate({"q": case["qrels"]}, {"q": case["run"]},
                                               metrics=[name])
                    self.assertAlmostEqual(report.per_query["q"][name], expected, places=12)

    def test_every_measure_is_covered(self):
        covered = {rag_eval.parse_measure(n).name for c in self.cases for n in c["expected"]}
        self.assertEqual(covered, set(rag_eval.available_measures()))


class MeasureInvariantsTest(unittest.TestCase):
    """Properties that hold for every registered measure at several cutoffs."""

    QRELS = {"q1": {"a": 2, "b": 1, "c": 0, "d": -1}, "q2": {"e": 1, "f": 3},
             "q3": {"g": 1}}
    RUN = {"q1": ["x", "a", "c", "a", "d", "b"], "q2": {"f": 0.2, "z": 0.2, "e": 0.9},
           "q3": ["h", "i"]}

    def measures(self):
        for name in rag_eval.available_measures():
            for k in (1, 2, 3, 10):
                yield name, k

    def test_values_in_unit_interval(self):
        for name, k in self.measures():
            with self.subTest(measure=name, k=k):
                report = rag_eval.evaluate(self.QRELS, self.RUN, k=k, metrics=[name])
                for values in report.per_query.values():
                    for value in values.values():
                        self.assertTrue(0.0 <= value <= 1.0, value)

    def test_inputs_unchanged(self):
        qrels, run = copy.deepcopy(self.QRELS), copy.deepcopy(self.RUN)
        for name, k in self.measures():
            rag_eval.evaluate(qrels, run, k=k, metrics=[name])
        self.assertEqual(qrels, self.QRELS)
        self.assertEqual(run, self.RUN)

    def test_query_order_irrelevant(self):
        reordered_qrels = dict(reversed(list(self.QRELS.items())))
        reordered_run = dict(reversed(list(self.RUN.items())))
        for name, k in self.measures():
            with self.subTest(measure=name, k=k):
                a = rag_eval.evaluate(self.QRELS, self.RUN, k=k, metrics=[name])
                b = rag_eval.evaluate(reordered_qrels, reordered_run, k=k, metrics=[name])
                self.assertEqual(a.mean, b.mean)
                self.assertEqual(list(a.per_query), list(b.per_query))

    def test_empty_run_scores_zero(self):
        empty = {q: [] for q in self.QRELS}
        for name, k in self.measures():
            with self.subTest(measure=name, k=k):
                report = rag_eval.evaluate(self.QRELS, empty, k=k, metrics=[name])
                self.assertEqual(set(report.mean.values()), {0.0})

    def test_perfect_run_scores_one_where_defined(self):
        # Every relevant id first, in grade order: recall, success, mrr, ndcg, map,
        # context_precision reach 1.0 at a k that covers them.
        qrels = {"q": {"a": 3, "b": 2, "c": 1}}
        run = {"q": ["a", "b", "c"]}
        for name in ("recall", "success", "mrr", "ndcg", "map", "context_precision",
                     "judged", "precision"):
            with self.subTest(measure=name):
                report = rag_eval.evaluate(qrels, run, k=3, metrics=[name])
                self.assertAlmostEqual(report.mean[name + "@3"], 1.0, places=15)

    def test_success_is_not_recall(self):
        report = rag_eval.evaluate({"q": {"a": 1, "b": 1}}, {"q": ["a"]}, k=5,
                                   metrics="recall,success")
        self.assertEqual(report.mean, {"recall@5": 0.5, "success@5": 1.0})


# ---------------------------------------------------------------------------
# Measure names
# ---------------------------------------------------------------------------

class MeasureNamesTest(unittest.TestCase):

    def test_round_trip(self):
        for text in ("recall@5", "ndcg@10", "ndcg(gain=linear)@10", "success(rel=2)@1",
                     "map(rel=3)@100", "judged@10", "context_precision(rel=2)@3",
                     "precision@5", "mrr@10"):
            with self.subTest(text=text):
                self.assertEqual(str(rag_eval.parse_measure(text)), text)
                m = rag_eval.parse_measure(text)
                self.assertEqual(rag_eval.parse_measure(str(m)), m)

    def test_defaults_left_out(self):
        self.assertEqual(str(rag_eval.parse_measure("ndcg(gain=exponential)@5")), "ndcg@5")
        self.assertEqual(str(rag_eval.parse_measure("recall(rel=1)@5")), "recall@5")

    def test_peer_spellings(self):
        table = {
            "nDCG@10": "ndcg(gain=linear)@10", "R@100": "recall@100", "RR@10": "mrr@10",
            "P@5": "precision@5", "AP@10": "map@10", "Success@5": "success@5",
            "Judged@10": "judged@10", "P(rel=2)@5": "precision(rel=2)@5",
            "ndcg_cut_10": "ndcg(gain=linear)@10", "recall_100": "recall@100",
            "P_5": "precision@5", "map_cut_10": "map@10", "success_10": "success@10",
            "nDCG(dcg=exp-log2)@10": None,
        }
        for text, canonical in table.items():
            with self.subTest(text=text):
                if canonical is None:
                    with self.assertRaises(rag_eval.EvalError):
                        rag_eval.parse_measure(text)
                else:
                    self.assertEqual(str(rag_eval.parse_measure(text)), canonical)

    def test_unknown_measure_suggests(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "did you mean 'recall'"):
            rag_eval.parse_measure("recal@5")

    def test_bad_names(self):
        for text in ("ndcg(gain=cubic)@5", "recall(foo=1)@5", "recall@0", "recall@x",
                     "recall(rel=0)@5", "ndcg(rel=2)@5", "recall", "@5", ""):
            with self.subTest(text=text):
                with self.assertRaises(rag_eval.EvalError):
                    rag_eval.parse_measure(text)

    def test_rel_and_gain_defaults_fill_in(self):
        names = [str(m) for m in rag_eval.resolve_measures("recall,ndcg,judged", k=5, rel=2,
                                                            gain="linear")]
        self.assertEqual(names, ["recall(rel=2)@5", "ndcg(gain=linear)@5", "judged@5"])

    def test_commas_inside_parentheses(self):
        names = [str(m) for m in rag_eval.resolve_measures("ndcg(gain=linear),mrr", k="1,3")]
        self.assertEqual(names, ["ndcg(gain=linear)@1", "ndcg(gain=linear)@3", "mrr@1", "mrr@3"])


# ---------------------------------------------------------------------------
# Policies
# ---------------------------------------------------------------------------

class PolicyTest(unittest.TestCase):

    def test_ties_broken_by_doc_id_descending(self):
        # Equal scores: 'b' before 'a' (string comparison, descending), as trec_eval.
        report = rag_eval.evaluate({"q": {"a": 1}}, {"q": {"a": 1.0, "b": 1.0}}, k=1,
                                   metrics="success")
        self.assertEqual(report.mean["success@1"], 0.0)
        self.assertEqual(report.ties, {"q": 1})
        report = rag_eval.evaluate({"q": {"b": 1}}, {"q": {"a": 1.0, "b": 1.0}}, k=1,
                                   metrics="success")
        self.assertEqual(report.mean["success@1"], 1.0)

    def test_ties_counted_only_across_a_cutoff(self):
        run = {"q": {"a": 3.0, "b": 2.0, "c": 2.0, "d": 1.0, "e": 1.0}}
        # tie groups {b, c} at ranks 2-3 and {d, e} at ranks 4-5
        cases = {(1,): 0, (2,): 1, (3,): 0, (4,): 1, (2, 4): 2, (2, 3, 4): 2, (5,): 0}
        for cutoffs, expected in cases.items():
            with self.subTest(cutoffs=cutoffs):
                report = rag_eval.evaluate({"q": {"a": 1}}, run, k=cutoffs, metrics="recall")
                self.assertEqual(report.ties.get("q", 0), expected)

    def test_ranked_list_keeps_its_order(self):
        report = rag_eval.evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=1, metrics="success")
        self.assertEqual(report.mean["success@1"], 0.0)
        self.assertEqual(report.ties, {})

    def test_duplicates_do_not_inflate(self):
        report = rag_eval.evaluate({"q": {"a": 1, "b": 1}}, {"q": ["a", "a", "a"]}, k=3,
                                   metrics="recall,precision")
        self.assertEqual(report.mean, {"recall@3": 0.5, "precision@3": 1 / 3})
        self.assertTrue(any("repeat ids" in w for w in report.warnings))

    def test_missing_query_scores_zero_and_stays_in_mean(self):
        report = rag_eval.evaluate({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": ["a"]}, k=1,
                                   metrics="recall")
        self.assertEqual(report.mean, {"recall@1": 0.5})
        self.assertEqual(report.missing, ("q2",))
        self.assertEqual(report.per_query["q2"], {"recall@1": 0.0})

    def test_unscored_query_listed_not_averaged(self):
        report = rag_eval.evaluate({"q1": {"a": 1}, "q2": {"b": 0}, "q3": {}},
                                   {"q1": ["a"], "q2": []}, k=1, metrics="recall")
        self.assertEqual(report.mean, {"recall@1": 1.0})
        self.assertEqual(report.unscored, ("q2", "q3"))
        self.assertEqual(report.abstention, {"q2": 0, "q3": 0})

    def test_unscored_depends_on_rel(self):
        report = rag_eval.evaluate({"q1": {"a": 2}, "q2": {"b": 1}},
                                   {"q1": ["a"], "q2": ["b"]}, k=1, rel=2, metrics="recall")
        self.assertEqual(report.unscored, ("q2",))
        self.assertEqual(report.mean, {"recall(rel=2)@1": 1.0})

    def test_extra_run_query_is_an_error_or_skipped(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "'qx'"):
            rag_eval.evaluate({"q": {"a": 1}}, {"q": ["a"], "qx": ["a"]})
        report = rag_eval.evaluate({"q": {"a": 1}}, {"q": ["a"], "qx": ["a"]},
                                   skip_extra_queries=True)
        self.assertEqual(report.skipped, ("qx",))
        self.assertTrue(any("skipped 1 run query" in w for w in report.warnings))

    def test_nothing_to_score_is_an_error(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "nothing to score"):
            rag_eval.evaluate({"q": {"a": 0}}, {"q": ["a"]})

    def test_integer_ids_accepted_as_strings(self):
        report = rag_eval.evaluate({"q": {"7": 1}}, {"q": [3, 7]}, k=2, metrics="mrr")
        self.assertEqual(report.mean["mrr@2"], 0.5)

    def test_rel_ignored_by_ndcg(self):
        a = rag_eval.evaluate({"q": {"a": 1, "b": 2}}, {"q": ["a", "b"]}, k=2, metrics="ndcg")
        b = rag_eval.evaluate({"q": {"a": 1, "b": 2}}, {"q": ["a", "b"]}, k=2, metrics="ndcg",
                              rel=2)
        self.assertEqual(a.mean["ndcg@2"], b.mean["ndcg@2"])


# ---------------------------------------------------------------------------
# Loaders
# ---------------------------------------------------------------------------

class LoaderTest(TempDir, unittest.TestCase):

    QRELS = {"q1": {"d#1": 2, "d/2": 0}, "q2": {"d3": 1}}
    RUN = {"q1": {"d#1": 0.5, "d/2": 0.9}, "q2": {"d3": 1.0, "d4": 0.25}}

    def formats(self):
        trec_qrels = "".join("%s 0 %s %d\n" % (q, d, g) for q in self.QRELS
                             for d, g in self.QRELS[q].items())
        trec_run = "".join("%s Q0 %s %d %r tag\n" % (q, d, i, s) for q in self.RUN
                           for i, (d, s) in enumerate(self.RUN[q].items(), 1))
        jsonl_qrels = "".join(json.dumps({"query_id": q, "grades": g}) + "\n"
                              for q, g in self.QRELS.items())
        jsonl_run = "".join(json.dumps({"query_id": q, "scores": s}) + "\n"
                            for q, s in self.RUN.items())
        return {"json": (json.dumps(self.QRELS), json.dumps(self.RUN)),
                "trec": (trec_qrels, trec_run), "jsonl": (jsonl_qrels, jsonl_run)}

    def test_every_format_reads_the_same(self):
        for fmt, (qrels_text, run_text) in self.formats().items():
            for compress in (False, True):
                with self.subTest(format=fmt, gzip=compress):
                    q = qrels_text.encode()
                    r = run_text.encode()
                    if compress:
                        q, r = gzip.compress(q), gzip.compress(r)
                    qp = self.write("qrels." + fmt + (".gz" if compress else ""), q)
                    rp = self.write("run." + fmt + (".gz" if compress else ""), r)
                    self.assertEqual(rag_eval.load_qrels(qp), self.QRELS)
                    self.assertEqual(rag_eval.load_run(rp), self.RUN)

    def test_trec_ignores_rank_column_and_line_order(self):
        path = self.write("run.trec", "q1 Q0 b 1 0.1 t\nq2 Q0 c 1 3 t\n\nq1 Q0 a 9 0.7 t\n")
        self.assertEqual(rag_eval.load_run(path), {"q1": {"b": 0.1, "a": 0.7}, "q2": {"c": 3.0}})

    def test_trec_repeated_line_keeps_best_score(self):
        path = self.write("run.trec", "q1 Q0 a 1 0.1 t\nq1 Q0 a 2 0.7 t\n")
        self.assertEqual(rag_eval.load_run(path), {"q1": {"a": 0.7}})

    def test_jsonl_ranked_lists(self):
        path = self.write("run.jsonl", '{"query_id": "q1", "docs": ["a", "b"]}\n'
                                       '{"query_id": 2, "docs": []}\n')
        self.assertEqual(rag_eval.load_run(path), {"q1": ["a", "b"], "2": []})

    def test_file_object_and_stdin(self):
        self.assertEqual(rag_eval.load_qrels(io.BytesIO(b'{"q": {"a": 1}}')), {"q": {"a": 1}})
        with open(example("qrels.json")) as handle:
            code, out, err = run_cli("-", example("run.json"), stdin=handle.read())
        self.assertEqual(code, 0, err)
        self.assertIn("0.5095", out)

    def test_format_override(self):
        path = self.write("run.txt", "q1 Q0 a 1 0.5 t\n")
        with self.assertRaises(rag_eval.EvalError):
            rag_eval.load_run(path, format="json")
        self.assertEqual(rag_eval.load_run(path, format="trec"), {"q1": {"a": 0.5}})


class StreamingTest(TempDir, unittest.TestCase):
    """Runs are read block by block, one query at a time."""

    def setUp(self):
        super().setUp()
        self.saved_block = rag_eval._BLOCK_SIZE

    def tearDown(self):
        rag_eval._BLOCK_SIZE = self.saved_block
        super().tearDown()

    QRELS = {"q1": {"a": 1, "b": 2}, "q2": {"c": 1}, "q3": {"d": 1}}
    LINES = ["q1 Q0 x 1 0.9 t", "q1 Q0 b 2 0.8 t", "q1 Q0 a 3 0.8 t", "q2 Q0 c 1 3 t",
             "q2 Q0 y 2 2 t", "q3 Q0 d 1 -1 t", "q3 Q0 z 2 -1 t"]

    def report(self, lines, **kwargs):
        qrels = self.write("q.json", json.dumps(self.QRELS))
        run = self.write("r.trec", "\n".join(lines) + "\n")
        return rag_eval.evaluate_files(qrels, run, k="1,2,3",
                                       metrics="recall,mrr,ndcg,judged", **kwargs)

    def test_block_boundaries_do_not_matter(self):
        expected = self.report(self.LINES)
        for size in (1, 2, 7, 16, 33):
            with self.subTest(block=size):
                rag_eval._BLOCK_SIZE = size
                report = self.report(self.LINES)
                self.assertEqual(report.per_query, expected.per_query)
                self.assertEqual(report.ties, expected.ties)
        self.assertEqual(expected.ties, {"q1": 1, "q3": 1})

    def test_scattered_lines_fall_back_to_the_exact_path(self):
        scattered = self.LINES[3:5] + self.LINES[:2] + self.LINES[5:] + self.LINES[2:3]
        grouped = self.report(self.LINES)
        for size in (8, 1 << 20):
            with self.subTest(block=size):
                rag_eval._BLOCK_SIZE = size
                report = self.report(scattered)
                self.assertEqual(report.per_query, grouped.per_query)
                self.assertIn("not contiguous", report.warnings[0])

    def test_fast_path_matches_dict_path(self):
        run = rag_eval.load_run(self.write("r.trec", "\n".join(self.LINES) + "\n"))
        by_dict = rag_eval.evaluate(self.QRELS, run, k="1,2,3", metrics="recall,mrr,ndcg,judged")
        self.assertEqual(by_dict.per_query, self.report(self.LINES).per_query)

    def test_shifted_fields_are_caught(self):
        # 5 + 7 fields make 12 = 2 x 6 tokens: the per-line check must still fire.
        lines = ["q1 Q0 a 1 0.5", "q1 Q0 b 2 0.4 t extra"]
        with self.assertRaisesRegex(rag_eval.EvalError, r"r.trec:1: expected 6 fields"):
            self.report(lines)

    def test_varying_tag_and_blank_lines_are_fine(self):
        lines = ["q1 Q0 a 1 0.5 t1", "", "q1 0 b 2 0.4 t2", "   ", "q2 Q0 c 1 1 t3"]
        report = self.report(lines)
        self.assertEqual(report.per_query["q1"]["recall@2"], 1.0)

    def test_bad_score_names_its_line(self):
        for size in (5, 1 << 20):
            with self.subTest(block=size):
                rag_eval._BLOCK_SIZE = size
                with self.assertRaisesRegex(rag_eval.EvalError, r"r.trec:3: score must be a finite"):
                    self.report(self.LINES[:2] + ["q1 Q0 a 3 inf t"])

    def test_multi_member_and_truncated_gzip(self):
        data = gzip.compress(b"\n".join(l.encode() for l in self.LINES[:3]) + b"\n")
        data += gzip.compress(b"\n".join(l.encode() for l in self.LINES[3:]) + b"\n")
        path = self.write("r.trec.gz", data)
        qrels = self.write("q.json", json.dumps(self.QRELS))
        report = rag_eval.evaluate_files(qrels, path, k="1,2,3", metrics="recall,mrr,ndcg,judged")
        self.assertEqual(report.per_query, self.report(self.LINES).per_query)
        self.assertEqual(report.inputs["run"]["sha256"],
                         __import__("hashlib").sha256(data).hexdigest())
        self.write("cut.gz", data[:-12])
        with self.assertRaisesRegex(rag_eval.EvalError, "truncated gzip"):
            rag_eval.evaluate_files(qrels, os.path.join(self.tmp, "cut.gz"))

    def test_queries_are_yielded_before_the_file_is_read(self):
        # Structural proof of bounded memory: with small blocks, the first query
        # comes out of the stream before a broken line further down is reached.
        rag_eval._BLOCK_SIZE = 64
        trec = self.write("r.trec", "\n".join(self.LINES[:5]) + "\n" + "x" * 500 + "\n")
        stream = rag_eval._run_queries(rag_eval._Input(trec), "trec")
        qid, first = next(stream)
        self.assertEqual((qid, first.docs), ("q1", [b"x", b"b", b"a"]))
        with self.assertRaises(rag_eval.EvalError):
            list(stream)
        jsonl = self.write("r.jsonl", '{"query_id": "q1", "docs": ["a"]}\n' + "{" * 500 + "\n")
        stream = rag_eval._run_queries(rag_eval._Input(jsonl), "jsonl")
        self.assertEqual(next(stream), ("q1", ["a"]))
        with self.assertRaises(rag_eval.EvalError):
            list(stream)


# ---------------------------------------------------------------------------
# Peer-verified numbers (tests/data/peers, written by tests/peers/gen_peers.py)
# ---------------------------------------------------------------------------

PEERS = os.path.join(DATA, "peers")


class PeerDifferentialTest(unittest.TestCase):
    """Every per-query value and mean of every measure at every cutoff, for every
    input format, equals the peer tools' (trec_eval via pytrec_eval, ir_measures,
    ranx; see each value's "peer" field) within 1e-9."""

    def cases(self):
        names = sorted(n for n in os.listdir(PEERS) if os.path.isdir(os.path.join(PEERS, n)))
        self.assertGreaterEqual(len(names), 10)
        for name in names:
            with open(os.path.join(PEERS, name, "expected.json")) as handle:
                yield name, json.load(handle)

    def pairs(self, folder):
        files = sorted(os.listdir(folder))
        qrels = [f for f in files if f.startswith("qrels.")]
        runs = [f for f in files if f.startswith("run.")]
        # every qrels format with the JSON run, every run format with the TREC qrels
        return ([(q, "run.json") for q in qrels] + [("qrels.trec", r) for r in runs])

    def test_every_format_matches_the_peers(self):
        checked = 0
        for name, expected in self.cases():
            folder = os.path.join(PEERS, name)
            metrics = sorted(expected["values"])
            for qrels_file, run_file in self.pairs(folder):
                with self.subTest(case=name, qrels=qrels_file, run=run_file):
                    report = rag_eval.evaluate_files(
                        os.path.join(folder, qrels_file), os.path.join(folder, run_file),
                        metrics=metrics, rel=expected["rel"])
                    self.assertEqual(list(report.unscored), expected["unscored"])
                    for measure, reference in expected["values"].items():
                        self.assertAlmostEqual(report.mean[measure], reference["mean"],
                                               delta=1e-9, msg=measure)
                        self.assertEqual(set(report.per_query), set(reference["per_query"]))
                        for qid, value in reference["per_query"].items():
                            self.assertAlmostEqual(report.per_query[qid][measure], value,
                                                   delta=1e-9, msg="%s %s" % (measure, qid))
                            checked += 1
        self.assertGreater(checked, 10000)

    def test_cases_cover_the_promised_situations(self):
        cases = dict(self.cases())
        self.assertIn("run.trec.gz", os.listdir(os.path.join(PEERS, "gz_input")))
        self.assertEqual(cases["rel2"]["rel"], 2)
        for expected in cases.values():
            for measure in rag_eval.available_measures():
                if measure == "context_precision":
                    continue   # no peer computes it; hand-worked values cover it
                self.assertTrue(any(rag_eval.parse_measure(m).name == measure
                                    for m in expected["values"]), measure)


# ---------------------------------------------------------------------------
# Bad input: one line on stderr, exit 2, no traceback, nothing written
# ---------------------------------------------------------------------------

class BadInputTest(TempDir, unittest.TestCase):

    GOOD_QRELS = '{"q1": {"a": 1, "b": 0}}'
    GOOD_RUN = '{"q1": ["a", "b"]}'

    def assertBad(self, qrels=None, run=None, extra=(), expect="", baseline=None):
        q = self.write("q.json", qrels if qrels is not None else self.GOOD_QRELS)
        r = self.write("r.json", run if run is not None else self.GOOD_RUN)
        argv = [q, r] + list(extra)
        if baseline is not None:
            argv += ["--baseline", self.write("b.json", baseline)]
        out_path = os.path.join(self.tmp, "out.json")
        saved = os.path.join(self.tmp, "saved.json")
        code, out, err = run_cli(*argv, "-o", out_path, "--save-baseline", saved)
        self.assertEqual(code, rag_eval.EXIT_ERROR, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(expect, err)
        self.assertFalse(os.path.exists(out_path))
        self.assertFalse(os.path.exists(saved))
        self.assertEqual(out, "")
        return err

    def test_missing_file(self):
        code, out, err = run_cli(os.path.join(self.tmp, "nope.json"), example("run.json"))
        self.assertEqual(code, 2)
        self.assertIn("nope.json: no such file", err)

    def test_directory(self):
        code, out, err = run_cli(self.tmp, example("run.json"))
        self.assertEqual(code, 2)
        self.assertIn("directory", err)

    def test_invalid_json_names_line_and_column(self):
        err = self.assertBad(qrels='{"q1": {"a": 1,\n  "b": }}', expect="q.json:2:")
        self.assertIn("invalid JSON", err)

    def test_top_level_not_object(self):
        self.assertBad(qrels='[1, 2]', expect="top level must be an object")

    def test_qrels_entry_not_object(self):
        self.assertBad(qrels='{"q1": ["a"]}', expect="'q1'")

    def test_bad_grades(self):
        for grade in ("1.5", "true", '"2"', "NaN", "null", "1e400"):
            with self.subTest(grade=grade):
                self.assertBad(qrels='{"q1": {"a": %s}}' % grade, expect="q.json")

    def test_run_value_not_list_or_object(self):
        self.assertBad(run='{"q1": "a"}', expect="ranked list")

    def test_ids_must_be_strings_or_ints(self):
        for bad in ("1.5", "null", "true", '["a"]', '{"x": 1}'):
            with self.subTest(id=bad):
                self.assertBad(run='{"q1": [%s]}' % bad, expect="string (or an integer)")

    def test_bad_scores(self):
        for score in ("NaN", "Infinity", "-Infinity", '"0.5"', "true", "null"):
            with self.subTest(score=score):
                self.assertBad(run='{"q1": {"a": %s}}' % score, expect="r.json")

    def test_bad_k(self):
        for k in ("0", "-1", "x", "2.5", "1,,0"):
            with self.subTest(k=k):
                self.assertBad(extra=["--k", k], expect="k")

    def test_unknown_measure(self):
        self.assertBad(extra=["--metrics", "ndgc"], expect="did you mean 'ndcg'")

    def test_bad_rel_and_max_drop(self):
        self.assertBad(extra=["--rel", "0"], expect="rel")
        for tolerance in ("-0.1", "nan", "x", "inf%"):
            with self.subTest(max_drop=tolerance):
                self.assertBad(extra=["--max-drop", tolerance], expect="max drop")

    def test_duplicate_keys(self):
        self.assertBad(qrels='{"q1": {"a": 1, "a": 0}}', expect="duplicate key 'a'")
        self.assertBad(run='{"q1": ["a"], "q1": ["b"]}', expect="duplicate key 'q1'")

    def test_deep_nesting(self):
        self.assertBad(qrels="[" * 100000 + "]" * 100000, expect="q.json")

    def test_extra_run_query(self):
        self.assertBad(run='{"q1": ["a"], "q9": ["a"]}', expect="'q9'")

    def test_unusable_baselines(self):
        for value in ("NaN", "Infinity", "true", '"0.5"', "1.5", "-0.1", "null"):
            with self.subTest(value=value):
                self.assertBad(baseline='{"recall@5": %s}' % value, expect="b.json")
        self.assertBad(baseline='{"recal@5": 0.5}', expect="did you mean")
        self.assertBad(baseline='[0.5]', expect="JSON object")
        self.assertBad(baseline='{}', expect="no measures")
        self.assertBad(baseline='{"format": "rag_eval.baseline", "mean": {"recall@5": "x"}}',
                       expect="b.json")

    def test_baseline_file_missing(self):
        code, out, err = run_cli(example("qrels.json"), example("run.json"),
                                 "--baseline", os.path.join(self.tmp, "none.json"))
        self.assertEqual(code, 2)
        self.assertIn("none.json: no such file", err)

    def test_trec_malformed_lines(self):
        cases = {"q1 0 a\n": "expected 4 fields", "q1 0 a x\n": "grade must be an integer",
                 "q1 0 a 1.5\n": "grade must be an integer"}
        for text, expect in cases.items():
            with self.subTest(text=text):
                q = self.write("q.trec", "q1 0 b 1\n" + text)
                code, out, err = run_cli(q, self.write("r.json", self.GOOD_RUN))
                self.assertEqual(code, 2)
                self.assertIn("q.trec:2: " + expect, err)
        for text, expect in {"q1 Q0 a 1 nan t\n": "score must be a finite number",
                             "q1 Q0 a 1 x t\n": "score must be a finite number", "q1 Q0 a 1\n": "expected 6 fields"}.items():
            with self.subTest(text=text):
                r = self.write("r.trec", "q1 Q0 b 1 0.3 t\n" + text)
                code, out, err = run_cli(self.write("q.json", self.GOOD_QRELS), r)
                self.assertEqual(code, 2)
                self.assertIn("r.trec:2: " + expect, err)

    def test_trec_conflicting_grades(self):
        q = self.write("q.trec", "q1 0 a 1\nq1 0 a 2\n")
        code, out, err = run_cli(q, self.write("r.json", self.GOOD_RUN))
        self.assertEqual(code, 2)
        self.assertIn("q.trec:2:", err)

    def test_not_utf8_and_bad_gzip(self):
        self.assertBad(qrels=b'{"q1": {"\xff": 1}}', expect="not UTF-8")
        self.assertBad(qrels=b"\x1f\x8bnot really gzip", expect="gzip")

    def test_both_from_stdin(self):
        code, out, err = run_cli("-", "-", stdin="{}")
        self.assertEqual(code, 2)
        self.assertIn("stdin", err)

    def test_bad_option_is_usage_error(self):
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--format", "xml")
        self.assertEqual(code, 2)
        self.assertIn("invalid choice", err)


# ---------------------------------------------------------------------------
# Gate and baselines
# ---------------------------------------------------------------------------

class GateTest(TempDir, unittest.TestCase):

    def report(self, **kwargs):
        return rag_eval.evaluate(rag_eval.load_qrels(example("qrels.json")),
                                 rag_eval.load_run(example("run.json")), **kwargs)

    def test_tolerance_boundary_is_not_float_noise(self):
        # recall@5 = 0.6667; a baseline 0.02 above must pass (drop == tolerance).
        report = self.report(metrics="recall")
        self.assertTrue(rag_eval.gate(report, {"recall@5": 2 / 3 + 0.02}).passed)
        self.assertFalse(rag_eval.gate(report, {"recall@5": 2 / 3 + 0.0201}).passed)

    def test_relative_tolerance(self):
        report = self.report(metrics="mrr")   # 0.5
        self.assertTrue(rag_eval.gate(report, {"mrr@5": 0.52}, max_drop="5%").passed)
        self.assertFalse(rag_eval.gate(report, {"mrr@5": 0.53}, max_drop="5%").passed)

    def test_statuses(self):
        report = self.report()
        result = rag_eval.gate(report, {"recall@5": 0.5, "mrr@5": 0.5, "ndcg@5": 0.52,
                                        "success@5": 0.9, "map@5": 0.1})
        statuses = {c.measure: c.status for c in result.changes}
        self.assertEqual(statuses, {"recall@5": "improved", "mrr@5": "unchanged",
                                    "ndcg@5": "dropped within tolerance",
                                    "success@5": "regressed", "map@5": "missing"})
        self.assertEqual([c.measure for c in result.improvements], ["recall@5"])

    def test_gain_mismatch_never_compares(self):
        report = self.report(metrics="ndcg")
        result = rag_eval.gate(report, {"ndcg(gain=linear)@5": 0.1})
        self.assertFalse(result.passed)
        self.assertEqual(result.regressions[0].status, "missing")

    def test_save_baseline_round_trip(self):
        path = os.path.join(self.tmp, "base.json")
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--save-baseline", path)
        self.assertEqual(code, 0, err)
        with open(path) as handle:
            saved = json.load(handle)
        self.assertEqual(saved["format"], "rag_eval.baseline")
        self.assertEqual(saved["per_query"]["q2"]["recall@5"], 0.0)
        self.assertEqual(len(saved["inputs"]["qrels"]["sha256"]), 64)
        self.assertEqual([f for f in os.listdir(self.tmp) if f.endswith(".tmp")], [])
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--baseline", path)
        self.assertEqual(code, 0, err)
        self.assertIn("PASSED", out)

    def test_changed_qrels_are_reported(self):
        path = os.path.join(self.tmp, "base.json")
        run_cli(example("qrels.json"), example("run.json"), "--save-baseline", path)
        with open(example("qrels.json")) as handle:
            qrels = json.load(handle)
        qrels["q9"] = {"x": 1}
        changed = self.write("qrels2.json", json.dumps(qrels))
        code, out, err = run_cli(changed, example("run.json"), "--baseline", path)
        self.assertIn("qrels changed since the baseline", err)

    def test_baseline_measures_scored_when_none_requested(self):
        base = self.write("b.json", '{"ndcg(gain=linear)@3": 0.1}')
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--baseline", base)
        self.assertEqual(code, 0, err)
        self.assertIn("ndcg(gain=linear)@3", out)
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--baseline", base,
                                 "--k", "5")
        self.assertEqual(code, 1)
        self.assertIn("MISSING", out)

    def test_default_baseline_path(self):
        cwd = os.getcwd()
        try:
            os.chdir(self.tmp)
            self.write("baseline.json", '{"recall@5": 0.1}')
            code, out, err = run_cli(example("qrels.json"), example("run.json"), "--baseline")
        finally:
            os.chdir(cwd)
        self.assertEqual(code, 0, err)
        self.assertIn("PASSED", out)


# ---------------------------------------------------------------------------
# Command line and output
# ---------------------------------------------------------------------------

class CommandLineTest(TempDir, unittest.TestCase):

    ARGS = (example("qrels.json"), example("run.json"))

    def test_json_schema(self):
        code, out, err = run_cli(*self.ARGS, "--format", "json", "--per-query",
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
        first = run_cli(*self.ARGS, "--format", "json", "--per-query")[1]
        second = run_cli(*self.ARGS, "--format", "json", "--per-query")[1]
        self.assertEqual(first, second)
        self.assertEqual(out_keys_sorted(first), True)

    def test_output_file(self):
        path = os.path.join(self.tmp, "report.json")
        code, out, err = run_cli(*self.ARGS, "--format", "json", "-o", path)
        self.assertEqual((code, out), (0, ""))
        with open(path) as handle:
            self.assertEqual(json.load(handle)["mean"]["mrr@5"], 0.5)

    def test_markdown(self):
        code, out, err = run_cli(*self.ARGS, "--format", "markdown", "--baseline",
                                 example("baseline.json"))
        self.assertEqual(code, 1)
        self.assertIn("| **mean** | 0.6667 | 0.6667 | 0.5000 | 0.5095 |", out)

    def test_per_query_text(self):
        code, out, err = run_cli(*self.ARGS, "--per-query", "--k", "1,5", "--metrics", "success")
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

    def test_help_ends_with_examples(self):
        code, out, err = run_cli("--help")
        self.assertEqual(code, 0)
        self.assertIn("exit codes: 0 ok, 1 the gate found a regression", out)

    def test_subprocess_smoke(self):
        proc = subprocess.run([sys.executable, "rag_eval.py", "qrels.json", "run.json",
                               "--baseline"], cwd=HERE, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("FAILED", proc.stdout)
        self.assertNotIn("Traceback", proc.stderr)


def out_keys_sorted(text):
    """True when every JSON object in ``text`` lists its keys in sorted order."""
    ok = [True]

    def hook(pairs):
        keys = [k for k, _ in pairs]
        ok[0] = ok[0] and keys == sorted(keys)
        return dict(pairs)
    json.loads(text, object_pairs_hook=hook)
    return ok[0]


if __name__ == "__main__":
    unittest.main()
