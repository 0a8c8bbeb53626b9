"""Ranking policies (ties, repeated ids, which queries count, runs that meet no
label) and evaluate(), the library's calls.
"""

import json
import math
import os
import unittest

import rag_eval
from tests.support import run_cli, TempDir, example, example_report


# ---------------------------------------------------------------------------
# Ranking policies: ties, repeated ids, which queries count, runs that meet no
# label (design.md, "Policies")
# ---------------------------------------------------------------------------

class TiesTest(TempDir, unittest.TestCase):
    """Equal scores: doc id descending, as trec_eval (a ranked list keeps its
    order); scores compare as doubles; ties counted only where they can change
    a number."""
    def test_ties_broken_by_doc_id_descending(self):
        # Equal scores: 'b' before 'a' (string comparison, descending), as trec_eval.
        report = rag_eval.evaluate({"q": {"a": 1}}, {"q": {"a": 1.0, "b": 1.0}}, k=1,
                                   metrics="success")
        self.assertEqual(report.mean["success@1"], 0.0)
        self.assertEqual(report.ties, {"q": 1})
        report = rag_eval.evaluate({"q": {"b": 1}}, {"q": {"a": 1.0, "b": 1.0}}, k=1,
                                   metrics="success")
        self.assertEqual(report.mean["success@1"], 1.0)

    def test_ties_by_utf8_bytes_lone_surrogates_by_their_code_point(self):
        # Issue 22: 1.0 with the accelerations, 0.0 plain.  UTF-8 bytes: '\u0800'
        # is E0 A0 80, a lone '\udc80' ED B2 80 (its code point's UTF-8 form),
        # so '\udc80' (grade 1) ranks first: mrr@1 = 1/1; without it, 1/2 at k=2.
        qrels = {"q1": {"\udc80": 1, "\u0800": 0}}
        run = {"q1": {"\udc80": 1.0, "\u0800": 1.0}}
        self.assertEqual(rag_eval.evaluate(qrels, run, k=1, measures=["mrr"]).mean,
                         {"mrr@1": 1.0})
        qrels = {"q1": {"\udc80": 0, "\u0800": 1}}
        self.assertEqual(rag_eval.evaluate(qrels, run, k=2, measures=["mrr"]).mean,
                         {"mrr@2": 0.5})
        # beside text above U+FFFF: '\U0001f600' is F0 9F 98 80, above ED B2 80
        run = {"q1": {"\udc80": 1.0, "\U0001f600": 1.0}}
        self.assertEqual(rag_eval.evaluate({"q1": {"\udc80": 1, "\U0001f600": 0}}, run, k=1,
                                           measures=["mrr"]).mean, {"mrr@1": 0.0})

    def test_ranked_list_keeps_its_order(self):
        report = rag_eval.evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=1, metrics="success")
        self.assertEqual(report.mean["success@1"], 0.0)
        self.assertEqual(report.ties, {})

    def test_long_integer_scores_tie_as_doubles(self):
        # 2**53 + 1 and 2**53 are the same double: a tie, broken by doc id (b first),
        # in Python ints in any order (was test_big_integer_scores_compare_as_doubles
        # _in_any_order) and in a TREC file.
        qrels = {"q": {"a": 1, "b": 0}}
        for run in ({"q": {"a": 2 ** 53 + 1, "b": 2 ** 53}}, {"q": {"b": 2 ** 53, "a": 2 ** 53 + 1}}):
            with self.subTest(run=run):
                self.assertEqual(rag_eval.evaluate(qrels, run, k=1, metrics="mrr").mean,
                                 {"mrr@1": 0.0})
        q = self.write("q.json", '{"q": {"a": 1, "b": 0}}')
        r = self.write("r.trec", "q Q0 a 1 9007199254740993 t\nq Q0 b 2 9007199254740992 t\n")
        report = rag_eval.evaluate_files(q, r, k=1, metrics="mrr")
        self.assertEqual(report.mean["mrr@1"], 0.0)
        self.assertEqual(report.mean, rag_eval.evaluate(
            {"q": {"a": 1, "b": 0}}, {"q": {"a": 9007199254740993.0, "b": 9007199254740992.0}},
            k=1, metrics="mrr").mean)

    def test_ties_counted_only_across_a_cutoff(self):
        run = {"q": {"a": 3.0, "b": 2.0, "c": 2.0, "d": 1.0, "e": 1.0}}
        # tie groups {b, c} at ranks 2-3 and {d, e} at ranks 4-5
        cases = {(1,): 0, (2,): 1, (3,): 0, (4,): 1, (2, 4): 2, (2, 3, 4): 2, (5,): 0}
        for cutoffs, expected in cases.items():
            with self.subTest(cutoffs=cutoffs):
                report = rag_eval.evaluate({"q": {"a": 1}}, run, k=cutoffs, metrics="recall")
                self.assertEqual(report.ties.get("q", 0), expected)

    def test_one_tie_group_counts_once(self):
        scores = {"d%d" % i: 1.0 for i in range(10)}
        report = rag_eval.evaluate({"q": {"d0": 1}}, {"q": scores}, k="3,7", metrics="recall")
        self.assertEqual(report.ties, {"q": 1})
        two = dict({"a%d" % i: 2.0 for i in range(3)}, **{"b%d" % i: 1.0 for i in range(3)})
        report = rag_eval.evaluate({"q": {"a0": 1}}, {"q": two}, k="2,4", metrics="recall")
        self.assertEqual(report.to_dict()["ties"], {"total": 2, "per_query": {"q": 2}})

    def test_ties_counted_only_where_they_can_change_a_number(self):
        report = rag_eval.evaluate({"q1": {"a": 1}, "q2": {"b": 0}},
                                   {"q1": {"a": 1.0, "x": 1.0}, "q2": {"b": 1.0, "y": 1.0}},
                                   k=1, metrics="recall")
        self.assertEqual(report.ties, {"q1": 1})


class RepeatedIdsTest(TempDir, unittest.TestCase):
    """An id repeated in one ranking counts once, at its best position, and is
    reported only among the ids that fill the top of the ranking."""
    def test_duplicates_do_not_inflate(self):
        report = rag_eval.evaluate({"q": {"a": 1, "b": 1}}, {"q": ["a", "a", "a"]}, k=3,
                                   metrics="recall,precision")
        self.assertEqual(report.mean, {"recall@3": 0.5, "precision@3": 1 / 3})
        self.assertTrue(any("repeat ids" in w for w in report.warnings))

    def test_repeats_reported_only_among_the_ids_that_fill_the_top(self):
        # One rule for every input form and both rankers: "a" again at rank 3 is
        # below the deepest cutoff at k=2 (no number changes, no warning) and is
        # read to fill the top at k=3 (a warning; precision@3 counts "a" once).
        qrels = {"q": {"a": 1, "c": 1}}
        forms = {"list": ["a", "b", "a", "c"],
                 "in order": rag_eval._Scored(["a", "b", "a", "c"], [4.0, 3.0, 2.0, 1.0]),
                 "shuffled": rag_eval._Scored(["a", "c", "b", "a"], [2.0, 1.0, 3.0, 4.0])}
        if rag_eval._ACCELERATED:       # the fast reader's representation: bytes
            forms["tokens"] = rag_eval._Scored([b"a", b"b", b"a", b"c"],
                                               [b"4.0", b"3.0", b"2.0", b"1.0"])
        expected = {2: ({"recall@2": 0.5, "precision@2": 0.5}, False),
                    3: ({"recall@3": 1.0, "precision@3": 2 / 3}, True)}
        for form, ranking in forms.items():
            for k, (mean, warned) in expected.items():
                with self.subTest(form=form, k=k):
                    scorer = rag_eval._QueryScorer(qrels, rag_eval.resolve_measures(
                        "recall,precision", k), 1)
                    report = rag_eval._score(scorer, rag_eval._scored_queries(
                        scorer, [("q", ranking)]), False, "r")
                    self.assertEqual(report.mean, mean)
                    self.assertEqual(any("repeat ids" in w for w in report.warnings), warned)

    def test_deep_repeats_are_not_reported(self):
        report = rag_eval.evaluate({"q": {"a": 1}}, {"q": ["b", "c", "a", "b"]}, k=2,
                                   metrics="recall")
        self.assertFalse(any("repeat" in w for w in report.warnings))

    def test_repeats_rule_in_every_file_format(self):
        files = {"r.json": '{"q": ["a", "b", "a", "c"]}',
                 "r.jsonl": '{"query_id": "q", "docs": ["a", "b", "a", "c"]}\n',
                 "r.trec": "q Q0 a 1 4.0 t\nq Q0 b 2 3.0 t\nq Q0 a 3 2.0 t\nq Q0 c 4 1.0 t\n",
                 "s.trec": "q Q0 c 1 1.0 t\nq Q0 a 2 2.0 t\nq Q0 b 3 3.0 t\nq Q0 a 4 4.0 t\n"}
        for name, text in files.items():
            for k, warned in ((2, False), (3, True)):
                with self.subTest(name=name, k=k):
                    code, out, err = self.report_of("--metrics", "recall", "--k", str(k),
                                                    qrels={"q": {"a": 1, "c": 1}},
                                                    run=(name, text))
                    self.assertEqual(code, 0, err)
                    self.assertIn("0.5000" if k == 2 else "1.0000", out)
                    self.assertEqual("1 query repeat ids" in err, warned, err)

    def test_trec_repeated_line_keeps_best_score_when_scoring(self):
        qrels = self.write("q.json", '{"q": {"a": 1}}')
        run = self.write("r.trec", "q Q0 x 1 0.9 t\nq Q0 a 2 0.8 t\nq Q0 a 3 0.95 t\n")
        report = rag_eval.evaluate_files(qrels, run, k=1, metrics="mrr")
        self.assertEqual(report.mean["mrr@1"], 1.0)
        self.assertEqual(report.warnings, ())     # the repeat lies below the top 1
        report = rag_eval.evaluate_files(qrels, run, k=3, metrics="mrr,precision")
        self.assertEqual(report.mean, {"mrr@3": 1.0, "precision@3": 1 / 3})
        self.assertIn("1 query repeat ids", " ".join(report.warnings))


class QueriesTest(TempDir, unittest.TestCase):
    """Which queries count: one missing from the run scores 0 and stays in the
    mean; one without a relevant id is listed, not averaged; one only in the run
    is an error, or skipped when asked."""
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

    def test_nothing_to_score_is_an_error(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "nothing to score"):
            rag_eval.evaluate({"q": {"a": 0}}, {"q": ["a"]})

    def test_extra_run_query_is_an_error_or_skipped(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "'qx'"):
            rag_eval.evaluate({"q": {"a": 1}}, {"q": ["a"], "qx": ["a"]})
        report = rag_eval.evaluate({"q": {"a": 1}}, {"q": ["a"], "qx": ["a"]},
                                   skip_extra_queries=True)
        self.assertEqual(report.skipped, ("qx",))
        self.assertTrue(any("skipped 1 run query" in w for w in report.warnings))

    def test_extra_run_query(self):
        self.assertBad(run='{"q1": ["a"], "q9": ["a"]}', expect="'q9'")

    def test_skip_extra_queries(self):
        qrels = {"q%02d" % i: {"a": 1} for i in range(30)}
        run = {"q00": ["a"], "q99": ["a"]}
        code, out, err = self.report_of(qrels=qrels, run=run)
        self.assertEqual(code, 2)
        self.assertIn("'q99'", err)
        self.assertIn("--skip-extra-queries", err)
        code, out, err = self.report_of("--skip-extra-queries", "--format", "json",
                                        qrels=qrels, run=run)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["skipped"], ["q99"])


class UnlabelledRunTest(TempDir, unittest.TestCase):
    """A run that meets no label scores 0 everywhere: an input error, not a number."""

    QRELS = {"q1": {"refund-policy": 2, "faq": 0}, "q2": {"sla": 1}}

    def cli(self, run, *argv, qrels=None):
        return self.report_of(*argv, qrels=qrels or self.QRELS, run=run)

    def test_no_retrieved_id_carries_a_label(self):
        cases = {
            "chunks": ({"q1": ["refund-policy#3"], "q2": ["x"]},
                       "(e.g. run 'refund-policy#3', qrels 'refund-policy'): the run names chunks"),
            "numbers": ({"q1": ["101.0"], "q2": ["7.0"]}, "numbers are written differently"),
            "text": ({"q1": ["Refunds are paid within 30 days."]}, "the run holds text, not ids"),
            "other": ({"q1": ["zzz"]}, "the files name ids differently, or do not belong"),
        }
        for name, (run, cause) in cases.items():
            with self.subTest(case=name):
                out_path = os.path.join(self.tmp, "out.json")
                qrels = {"q1": {"101": 1}, "q2": {"7": 1}} if name == "numbers" else None
                code, out, err = self.cli(run, "-o", out_path, qrels=qrels)
                self.assertEqual(code, 2)
                self.assertEqual(err.count("\n"), 1, err)
                self.assertIn("r.json: not one retrieved id carries a label", err)
                self.assertIn(cause, err)
                self.assertIn("--allow-unlabelled-run", err)
                self.assertFalse(os.path.exists(out_path))

    def test_allowed_scores_zero_with_a_warning(self):
        code, out, err = self.cli({"q1": ["refund-policy#3"], "q2": ["x"]},
                                  "--allow-unlabelled-run", "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mean"]["recall@5"], 0.0)
        self.assertIn("warning: ", err)
        self.assertIn("not one retrieved id carries a label", err)

    def test_library_warns_and_returns_the_report(self):
        report = rag_eval.evaluate(self.QRELS, {"q1": ["x"], "q2": ["y"]})
        self.assertEqual(report.unlabelled_run, "not one retrieved id carries a label in the "
                         "qrels (e.g. run 'x', qrels 'refund-policy'): the files name ids "
                         "differently, or do not belong together")
        self.assertTrue(any("not one retrieved id" in w for w in report.warnings))

    def test_grade_zero_or_a_label_below_the_cutoff_counts(self):
        # A judged non-relevant id (grade 0) is a label; so is one below k.
        for run in ({"q1": ["faq"], "q2": ["x"]},
                    {"q1": ["a", "b", "c", "d", "e", "f", "refund-policy"], "q2": ["x"]}):
            with self.subTest(run=run):
                code, out, err = self.cli(run)
                self.assertEqual(code, 0, err)
        report = rag_eval.evaluate(self.QRELS, {"q1": ["faq"], "q2": ["x"]})
        self.assertIsNone(report.unlabelled_run)
        self.assertEqual(report.unlabelled, ("q2",))      # q1's "faq" is judged (grade 0)

    def test_negative_grades_are_not_labels(self):
        code, out, err = self.cli({"q1": ["b"]}, qrels={"q1": {"a": 1, "b": -1}})
        self.assertEqual(code, 2)
        self.assertIn("e.g. run 'b', qrels 'b'): the run's ids carry only negative grades", err)

    def test_a_run_that_retrieved_nothing(self):
        # Every number 0, and a baseline saved from it could never fail again.
        for run in ({"q1": [], "q2": []}, {}):
            with self.subTest(run=run):
                code, out, err = self.cli(run, "--save-baseline", os.path.join(self.tmp, "b.json"))
                self.assertEqual(code, 2)
                self.assertIn("r.json: the run retrieved no id for any query in the qrels: "
                              "every number would be 0 (--allow-unlabelled-run", err)
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "b.json")))
        code, out, err = self.cli({"q1": ["refund-policy"], "q2": []})
        self.assertEqual(code, 0, err)
        self.assertIn("warning: 1 query retrieved nothing, scored 0: 'q2'", err)

    def test_no_query_of_the_run_in_the_qrels(self):
        code, out, err = self.cli({"1": ["refund-policy"], "2": ["sla"]}, "--skip-extra-queries")
        self.assertEqual(code, 2)
        self.assertIn("no query of the run is in the qrels (run '1', '2'; qrels 'q1', 'q2'): "
                      "the files do not belong together", err)

    def test_causes_are_found_over_the_whole_run(self):
        # Found by review: the first id of the first query rarely shows the cause.
        cases = [({"q1": {"doc1": 2, "doc7": 1}}, {"q1": ["doc7#2", "doc1#1"]},
                  "(e.g. run 'doc7#2', qrels 'doc7'): the run names chunks"),
                 ({"q1": {"doc1#2": 1}}, {"q1": ["doc1"]},
                  "(e.g. run 'doc1', qrels 'doc1#2'): the qrels name chunks"),
                 ({"q1": {"205": 1}}, {"q1": ["7"]}, "the files name ids differently"),
                 ({"q1": {"7": 1}, "q2": {"8": 1}}, {"q1": ["x"], "q2": ["8.0"]},
                  "(e.g. run '8.0', qrels '8'): numbers are written differently")]
        for qrels, run, cause in cases:
            with self.subTest(run=run):
                code, out, err = self.cli(run, qrels=qrels)
                self.assertEqual(code, 2)
                self.assertIn(cause, err)

    def test_the_example_follows_the_ranking_not_the_lines(self):
        # Issue 22: the example id (and so the cause) was a query's first line.
        # d19.2 (score 4) ranks first whatever the order of the lines; tied, x.1
        # ranks first (doc id descending) and shows the chunk cause.
        qrels = self.write("q.trec", "q0 0 x 1\nq0 0 d19.20 0\n")
        other = ("(e.g. run 'd19.2', qrels 'x'): the files name ids differently")
        chunks = "(e.g. run 'x.1', qrels 'x'): the run names chunks"
        lines = {"d": "q0 Q0 d19.2 1 %s run\n", "x": "q0 Q0 x.1 2 %s run\n"}
        for scores, cause in ((("4", "1"), other), (("1", "1"), chunks)):
            for order in ("dx", "xd"):
                with self.subTest(scores=scores, order=order):
                    text = "".join(lines[k] % s for k, s in zip(order, scores if order == "dx"
                                                                 else scores[::-1]))
                    code, out, err = run_cli(qrels, self.write("r.trec", text))
                    self.assertEqual(code, 2)
                    self.assertIn(cause, err)
        for run in ({"q0": {"x.1": 1.0, "d19.2": 4.0}}, {"q0": {"d19.2": 4.0, "x.1": 1.0}}):
            with self.subTest(run=run):
                report = rag_eval.evaluate({"q0": {"x": 1}}, run)
                self.assertIn(other, report.unlabelled_run)
        # documents: the best chunk's document, B, which shows no cause
        for run in ("q1 Q0 A#a1 1 1 t\nq1 Q0 B#b1 2 2 t\n", "q1 Q0 B#b1 1 2 t\nq1 Q0 A#a1 2 1 t\n"):
            with self.subTest(run=run):
                code, out, err = run_cli(self.input_file({"q1": {"A#a1": 1}}, "ids.json"),
                                         self.write("r.trec", run), "--unit", "doc",
                                         "--metrics", "recall", "--doc-sep", "#")
                self.assertEqual(code, 2)
                self.assertIn("(e.g. run document 'B', qrels 'A#a1'): the files name ids", err)

    def test_judged_asks_to_score_an_unlabelled_run(self):
        code, out, err = self.cli({"q1": ["x"], "q2": ["y"]}, "--metrics", "judged@5,recall@5",
                                  "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mean"], {"judged@5": 0.0, "recall@5": 0.0})
        self.assertIn("warning: ", err)

    def test_a_run_that_meets_no_label_never_becomes_a_baseline(self):
        # Issue 22, item 2: judged@k let a run whose ids meet no label be saved as an
        # all-zero baseline (exit 0), and every later gate on it passed.
        qrels, run = {"q1": {"a": 1}}, {"q1": ["a#1"]}
        saved, out_path = (os.path.join(self.tmp, name) for name in ("b.json", "out.json"))
        for flags in (("--metrics", "recall,judged"), ("--allow-unlabelled-run",),
                      ("--metrics", "recall,judged", "--accept")):
            with self.subTest(flags=flags):
                code, out, err = self.cli(run, *flags, "--save-baseline", saved, "-o", out_path,
                                          qrels=qrels)
                self.assertEqual((code, out), (2, ""), err)
                self.assertEqual(err.count("\n"), 1, err)
                self.assertTrue(err.startswith("rag-eval: error: "), err)
                self.assertIn("r.json: a run that meets no label is never "
                              "saved as a baseline (no later run could fall below its zeros): "
                              "not one retrieved id carries a label", err)
                self.assertFalse(os.path.exists(saved) or os.path.exists(out_path))
        # judged@k still scores it (no baseline asked for).
        code, out, err = self.cli(run, "--metrics", "recall,judged", "--format", "json",
                                  qrels=qrels)
        self.assertEqual((code, json.loads(out)["mean"]), (0, {"recall@5": 0.0, "judged@5": 0.0}))
        # The library refuses it in save_baseline, baseline_dict and as a gate's baseline.
        report = rag_eval.evaluate(qrels, run, measures="recall,judged")
        for call in (lambda: rag_eval.save_baseline(report, saved),
                     lambda: rag_eval.baseline_dict(report),
                     lambda: rag_eval.assert_no_regression(report, report)):
            with self.assertRaises(rag_eval.EvalError) as caught:
                call()
            self.assertIn("run: a run that meets no label is never saved as a baseline",
                          str(caught.exception))
        self.assertFalse(os.path.exists(saved))

    def test_some_queries_without_a_label_in_the_top_k(self):
        code, out, err = self.cli({"q1": ["refund-policy"], "q2": ["x", "y"]}, "--k", "1,2")
        self.assertEqual(code, 0, err)
        self.assertIn("warning: 1 query has no labelled id (grade >= 0) in the top 2: 'q2'",
                      err)
        code, out, err = self.cli({"q1": ["refund-policy"], "q2": ["x", "y"]},
                                  "--format", "json")
        self.assertEqual(json.loads(out)["unlabelled"], ["q2"])

    def test_every_input_form_and_the_compare_run(self):
        trec = self.write("r.trec", "q1 Q0 refund-policy#3 1 2.0 t\nq2 Q0 x 1 1.0 t\n")
        jsonl = self.write("r.jsonl", '{"query_id": "q1", "scores": {"zz": 1.0}}\n')
        qrels = self.write("q.json", json.dumps(self.QRELS))
        good = self.write("good.json", '{"q1": ["refund-policy"]}')
        for argv in ((qrels, trec), (qrels, jsonl), (qrels, good, "--compare", trec)):
            with self.subTest(argv=argv):
                code, out, err = run_cli(*argv)
                self.assertEqual(code, 2)
                self.assertIn("not one retrieved id carries a label", err)


# ---------------------------------------------------------------------------
# Evaluation: the library's calls
# ---------------------------------------------------------------------------

class EvaluationTest(TempDir, unittest.TestCase):
    """evaluate() and its arguments: ids of any JSON type, grades too large for
    a gain, odd Python values refused, records without a truth value."""
    def test_measures_keyword_and_its_old_name(self):
        qrels, run = {"q": {"a": 1}}, {"q": ["b", "a"]}
        self.assertEqual(rag_eval.evaluate(qrels, run, measures="mrr@2").mean, {"mrr@2": 0.5})
        self.assertEqual(rag_eval.evaluate(qrels, run, metrics="mrr@2").mean, {"mrr@2": 0.5})
        self.assertEqual(rag_eval.evaluate(qrels, run, 2, "mrr").mean, {"mrr@2": 0.5})

    def test_integer_ids_accepted_as_strings(self):
        # Merged with test_integer_keys_in_library_dicts: ids in lists, keys of
        # grade and score maps.
        report = rag_eval.evaluate({"q": {"7": 1}}, {"q": [3, 7]}, k=2, metrics="mrr")
        self.assertEqual(report.mean["mrr@2"], 0.5)
        self.assertEqual(rag_eval.evaluate({"q": {1: 1}}, {"q": [1]}, k=1,
                                           metrics="recall").mean, {"recall@1": 1.0})
        self.assertEqual(rag_eval.evaluate({"q": {"a": 1}}, {"q": {1: 0.5, "a": 0.7}}, k=1,
                                           metrics="recall").mean, {"recall@1": 1.0})
        with self.assertRaisesRegex(rag_eval.EvalError, "appears twice"):
            rag_eval.evaluate({"q": {"a": 1}}, {"q": {1: 0.5, "1": 0.7}})

    def test_grade_too_large_for_exponential_gain(self):
        # Merged: test_huge_grades and test_grade_too_large_names_the_query.
        q = self.write("q.json", '{"q": {"a": 1024, "b": 1}}')
        r = self.write("r.json", '{"q": ["a", "b"]}')
        code, out, err = run_cli(q, r, "--metrics", "ndcg")
        self.assertEqual(code, 2)
        self.assertIn("grade 1024 is too large for exponential gain", err)
        code, out, err = run_cli(q, r, "--metrics", "ndcg", "--gain", "linear")
        self.assertEqual(code, 0, err)
        qrels = self.write("g.json", '{"q1": {"refund-policy#2": 1024}}')
        code, out, err = run_cli(qrels, example("run.json"), "--skip-extra-queries")
        self.assertEqual(code, 2)
        self.assertEqual(err, "rag-eval: error: qrels: query 'q1': grade 1024 is too large for "
                              "exponential gain (a float overflows)\n")
        code, out, err = run_cli(qrels, example("run.json"), "--skip-extra-queries",
                                 "--gain", "linear", "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mean"]["ndcg(gain=linear)@5"], 1 / math.log2(3))

    def test_library_rejects_odd_python_values(self):
        report = example_report()
        qrels, run = {"q": {"a": 1}}, {"q": ["a"]}
        calls = [lambda: rag_eval.evaluate(qrels, run, k=None),
                 lambda: rag_eval.evaluate(qrels, run, k=1.5),
                 lambda: rag_eval.evaluate(qrels, run, metrics=5),
                 lambda: rag_eval.evaluate(qrels, run, metrics=[b"recall"]),
                 lambda: rag_eval.evaluate(qrels, run, k="５"),
                 lambda: rag_eval.gate(report, {"recall@5": 0.5}, alpha="x"),
                 lambda: rag_eval.gate(report, {"recall@5": 0.5}, resamples=None),
                 lambda: rag_eval.gate({"recall@5": 0.5}, {"recall@5": 0.5}),
                 lambda: rag_eval.compare(report, None),
                 lambda: rag_eval.evaluate(qrels, run, measures="recall", metrics="mrr")]
        for i, call in enumerate(calls):
            with self.subTest(call=i):
                self.assertRaises(rag_eval.EvalError, call)

    def test_reports_and_comparisons_have_no_truth_value(self):
        report = example_report()
        comparison = rag_eval.compare(report, report)
        for value in (report, comparison, comparison.measures["recall@5"]):
            with self.subTest(type=type(value).__name__):
                with self.assertRaisesRegex(TypeError, r"gate\(\.\.\.\)\.passed"):
                    bool(value)
