"""The gate and baselines: the tolerance, per-query checks, baseline files and
--save-baseline; provenance (meta and the gate on it, per-query label hashes);
assert_no_regression.
"""

import io
import json
import math
import os
import re
import statistics
import unittest

import rag_eval
from tests.support import (HERE, run_cli, TempDir, example, EXAMPLE_FILES, example_report,
                           read_text, out_keys_sorted)


# ---------------------------------------------------------------------------
# Gate and baselines
# ---------------------------------------------------------------------------

class GateToleranceTest(TempDir, unittest.TestCase):
    """The tolerance rule on the means: absolute and relative drops, statuses,
    the verdict, the measures a baseline asks for."""
    def test_tolerance_boundary_is_not_float_noise(self):
        # Merged with test_tolerance_is_tight (1e-7 beyond the tolerance fails).
        # recall@5 = 0.6667; a baseline 0.02 above must pass (drop == tolerance).
        report = example_report(metrics="recall")
        self.assertTrue(rag_eval.gate(report, {"recall@5": 2 / 3 + 0.02}).passed)
        self.assertFalse(rag_eval.gate(report, {"recall@5": 2 / 3 + 0.0201}).passed)
        self.assertFalse(rag_eval.gate(report, {"recall@5": 2 / 3 + 0.02 + 1e-7}).passed)

    def test_relative_tolerance_is_of_the_baseline(self):
        # Merged with test_relative_tolerance (the example's mrr@5 = 0.5).
        report = example_report(metrics="mrr")   # 0.5
        self.assertTrue(rag_eval.gate(report, {"mrr@5": 0.52}, max_drop="5%").passed)
        self.assertFalse(rag_eval.gate(report, {"mrr@5": 0.53}, max_drop="5%").passed)
        # mrr 0.5 against a baseline of 0.5 / 0.95 = 0.5263: a drop of exactly 5% of
        # the baseline passes; measured against the current value (5% of 0.5) it would fail.
        report = rag_eval.evaluate({"q1": {"a": 1}, "q2": {"a": 1}},
                                   {"q1": ["a"], "q2": ["x", "y", "z", "w", "v"]}, k=5,
                                   metrics="mrr")
        self.assertEqual(report.mean["mrr@5"], 0.5)
        self.assertTrue(rag_eval.gate(report, {"mrr@5": 0.5 / 0.95}, max_drop="5%").passed)
        self.assertFalse(rag_eval.gate(report, {"mrr@5": 0.5 / 0.95 + 1e-6},
                                       max_drop="5%").passed)
        self.assertEqual(rag_eval.gate(report, {"mrr@5": 0.5}, max_drop="5%").tolerance, "5%")

    def test_max_drop_zero_fails_any_drop(self):
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--metrics", "ndcg",
                                 "--baseline", self.write("b.json", '{"ndcg@5": 0.51}'),
                                 "--max-drop", "0")
        self.assertEqual(code, 1)
        self.assertIn("gate vs", out)

    def test_statuses(self):
        report = example_report()
        result = rag_eval.gate(report, {"recall@5": 0.5, "mrr@5": 0.5, "ndcg@5": 0.52,
                                        "success@5": 0.9, "map@5": 0.1})
        statuses = {c.measure: c.status for c in result.changes}
        self.assertEqual(statuses, {"recall@5": "improved", "mrr@5": "unchanged",
                                    "ndcg@5": "dropped within tolerance",
                                    "success@5": "regressed", "map@5": "missing"})
        self.assertEqual([c.measure for c in result.improvements], ["recall@5"])

    def test_gate_result_is_its_verdict(self):
        report = example_report()          # recall@5 = 0.6667
        failed = rag_eval.gate(report, {"recall@5": 0.9})
        passed = rag_eval.gate(report, {"recall@5": 0.6})
        self.assertIs(bool(failed), False)
        self.assertIs(bool(passed), True)
        with self.assertRaises(AssertionError):
            assert rag_eval.gate(report, {"recall@5": 0.9})

    def test_gain_mismatch_never_compares(self):
        report = example_report(metrics="ndcg")
        result = rag_eval.gate(report, {"ndcg(gain=linear)@5": 0.1})
        self.assertFalse(result.passed)
        self.assertEqual(result.regressions[0].status, "missing")

    def test_baseline_measures_scored_when_none_requested(self):
        base = self.write("b.json", '{"ndcg(gain=linear)@3": 0.1}')
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--baseline", base)
        self.assertEqual(code, 0, err)
        self.assertIn("ndcg(gain=linear)@3", out)
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--baseline", base,
                                 "--k", "5")
        self.assertEqual(code, 1)
        self.assertIn("MISSING", out)

    RECHUNK = os.path.join(HERE, "examples", "rechunk")
    SPANS = ("recall(unit=evidence)@3", "recall(unit=evidence)@5", "span_recall@3",
             "span_recall@5")

    def rechunk(self, *argv):
        """main() on the bundled span labels and run A (its map unless --chunks is
        left out: ``argv`` then starts with "-")."""
        folder = self.RECHUNK
        chunks = ([] if argv[:1] == ("-",)
                  else ["--chunks", os.path.join(folder, "chunks-a.jsonl")])
        return run_cli(os.path.join(folder, "labels.jsonl"), os.path.join(folder, "run-a.jsonl"),
                       *chunks, *[a for a in argv if a != "-"])

    def test_a_span_label_baseline_gates_its_own_measures(self):
        # issue 23: the id defaults (recall@5, ...) were added on top of the baseline's
        # measures, and span labels refuse measures over ids: exit 2 on every gate
        base = os.path.join(self.tmp, "b.json")
        code, _, err = self.rechunk("--metrics", "recall(unit=evidence),span_recall", "--k",
                                    "3,5", "--save-baseline", base)
        self.assertEqual(code, 0, err)
        code, out, err = self.rechunk("--baseline", base, "--format", "json")
        self.assertEqual(code, 0, err)
        data = json.loads(out)
        self.assertEqual(data["measures"], list(self.SPANS))     # in the order saved
        self.assertTrue(data["gate"]["passed"])
        # --k re-cuts the baseline's names: @3 is then missing, the gate fails on it
        code, out, err = self.rechunk("--baseline", base, "--k", "5,10", "--format", "json")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        data = json.loads(out)
        self.assertEqual(data["measures"], ["recall(unit=evidence)@5",
                                            "recall(unit=evidence)@10", "span_recall@5",
                                            "span_recall@10"])
        self.assertEqual(sorted(c["measure"] for c in data["gate"]["changes"]
                                if c["status"] == "missing"),
                         ["recall(unit=evidence)@3", "span_recall@3"])

    def test_a_baseline_measure_without_its_input_is_exit_2_naming_it(self):
        base = os.path.join(self.tmp, "b.json")
        self.assertEqual(self.rechunk("--metrics", "recall(unit=evidence)@3",
                                      "--save-baseline", base)[0], 0)
        code, out, err = self.rechunk("-", "--baseline", base)     # no --chunks
        self.assertEqual(code, rag_eval.EXIT_ERROR, err)
        self.assertEqual(out, "")
        self.assertIn("retrieved id 'refund-policy.md#a1' has no document: give a chunk map "
                      "(--chunks) or --doc-sep, or doc/start/end for it in the run (or name "
                      "its document's field: --doc-field) (for recall(unit=evidence)@3)", err)
        # a judge score the baseline gates, without --scores
        judged = self.write("j.json", json.dumps({"recall@5": 0.5, "score(field=ok)": 0.9}))
        code, _, err = run_cli(*EXAMPLE_FILES, "--baseline", judged)
        self.assertEqual(code, rag_eval.EXIT_ERROR)
        self.assertIn("j.json gates the judge score score(field=ok): give --scores FILE beside "
                      "QRELS RUN (or name the measures to gate with --metrics)", err)
        scores = self.write("s.jsonl", '{"query_id": "q1", "ok": 0.9}\n')
        code, _, err = run_cli("--scores", scores, "--baseline", judged)
        self.assertEqual(code, rag_eval.EXIT_ERROR)
        self.assertIn("j.json gates recall@5, which needs QRELS and RUN beside --scores", err)

    def test_baseline_at_another_cutoff_names_the_options(self):
        base = self.write("b.json", '{"recall@10": 0.5, "mrr@5": 0.4}')
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base, "--k", "5")
        self.assertEqual(code, 1)
        self.assertIn("the report does not score 1 measure of the baseline (recall@10): add it "
                      "to --metrics, or leave out --metrics and --k to score every baseline "
                      "measure", out)


class PerQueryGateTest(TempDir, unittest.TestCase):
    """Gating against a baseline written by --save-baseline (per-query values)."""

    def setUp(self):
        super().setUp()
        self.qrels = {"q%02d" % i: {"a": 1} for i in range(30)}
        self.good = {q: ["a"] for q in self.qrels}

    def base(self, run=None, qrels=None):
        report = rag_eval.evaluate(qrels or self.qrels, run or self.good, k=1,
                                   metrics="success")
        path = os.path.join(self.tmp, "base.json")
        rag_eval.save_baseline(report, path)
        return rag_eval.load_baseline(path)

    def run_file(self, name, lost):
        return self.write(name, json.dumps({"q%02d" % i: (["b"] if i in lost else ["a"])
                                            for i in range(30)}))

    def test_query_drops_listed_whatever_the_mean(self):
        base = self.base()
        run = dict(self.good, q03=["b", "a"])
        report = rag_eval.evaluate(self.qrels, run, k=1, metrics="success")
        result = rag_eval.gate(report, base, max_drop=0.05)
        self.assertTrue(result.passed)    # mean fell 1/30 = 0.033 < 0.05
        self.assertEqual([(d.query, d.delta) for d in result.query_drops], [("q03", -1.0)])

    def test_query_drops_largest_first(self):
        qrels = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 1}}
        before = rag_eval.evaluate(qrels, {q: ["a"] for q in qrels}, k=3, metrics="mrr")
        base = os.path.join(self.tmp, "b.json")
        rag_eval.save_baseline(before, base)
        after = rag_eval.evaluate(qrels, {"q1": ["x", "a"], "q2": ["x", "y", "z"], "q3": ["a"]},
                                  k=3, metrics="mrr")
        drops = rag_eval.gate(after, rag_eval.load_baseline(base)).query_drops
        self.assertEqual([(d.query, d.delta) for d in drops], [("q2", -1.0), ("q1", -0.5)])

    def test_changed_test_set_is_shown(self):
        base = self.base()
        qrels = dict(self.qrels, new={"a": 1})
        del qrels["q00"]
        run = {q: ["a"] for q in qrels}
        report = rag_eval.evaluate(qrels, run, k=1, metrics="success")
        result = rag_eval.gate(report, base)
        self.assertEqual((result.queries_added, result.queries_removed), (("new",), ("q00",)))
        code, out, err = self.report_of("--metrics", "success", "--k", "1", "--baseline",
                                        os.path.join(self.tmp, "base.json"), qrels=qrels, run=run)
        self.assertIn("added    new", out)

    def test_empty_per_query_baseline_reports_every_query_added(self):
        base = self.write("b.json", '{"format": "rag_eval.baseline", "mean": {"recall@5": 0.5}, '
                                    '"per_query": {}}')
        result = rag_eval.gate(example_report(), rag_eval.load_baseline(base))
        self.assertEqual(result.queries_added, ("q1", "q2", "q3"))

    def test_significant_gate(self):
        # The baseline missed 6 queries; the run finds those 6 and loses 10 others.
        missed = {"q%02d" % i: ["b"] for i in range(24, 30)}
        base = self.base(run=dict(self.good, **missed))
        run = dict(self.good, **{"q%02d" % i: ["b"] for i in range(10)})
        report = rag_eval.evaluate(self.qrels, run, k=1, metrics="success")
        # Mean 20/30 vs 24/30: a drop of 0.133 > 0.02, so the plain gate fails.
        self.assertFalse(rag_eval.gate(report, base).passed)
        # 16 differences of +-1 with sum -4: p = P(|S| >= 4) for 16 fair signs
        # = 2 * (C(16,0) + ... + C(16,6)) / 2**16 = 2 * 14893 / 65536.
        result = rag_eval.gate(report, base, mode="significant")
        self.assertTrue(result.passed)
        self.assertEqual(result.changes[0].status, "dropped, not significant")
        self.assertAlmostEqual(result.changes[0].p_value, 2 * 14893 / 65536, places=12)
        # 8 of 30 lose it, none gain: p = 2 / 2**8, significant.
        base = self.base()
        run = dict(self.good, **{"q%02d" % i: ["b"] for i in range(8)})
        report = rag_eval.evaluate(self.qrels, run, k=1, metrics="success")
        result = rag_eval.gate(report, base, mode="significant")
        self.assertFalse(result.passed)
        self.assertEqual(result.changes[0].p_value, 2 / 256)

    def test_significant_gate_never_passes_an_untestable_drop(self):
        # 4 queries fall from 1 to 0 on two measures: the smallest exact p is
        # 2 / 2**4, times 2 for Holm = 0.25 > 0.05, so no test can pass the drop.
        base = self.base()
        run = dict(self.good, **{"q%02d" % i: ["b"] for i in range(4)})
        report = rag_eval.evaluate(self.qrels, run, k=1, metrics="success,recall")
        result = rag_eval.gate(report, base._replace(mean=dict(base.mean, **{"recall@1": 1.0}),
                                                     per_query={q: dict(v, **{"recall@1": 1.0})
                                                                for q, v in base.per_query.items()}),
                               mode="significant")
        self.assertFalse(result.passed)
        self.assertEqual({c.status for c in result.changes}, {"regressed"})
        self.assertIn("too few queries differ for a significance test", result.notes[0])

    def test_untestable_counts_every_gated_measure(self):
        # 5 queries differ on 2 measures: 2 / 2**5 = 0.0625 alone is above 0.05 already;
        # with 6 differing queries 2 / 64 = 0.031 passes alone but not after Holm over 2.
        qrels = {"q%02d" % i: {"a": 1} for i in range(20)}
        base = os.path.join(self.tmp, "b.json")
        good = {q: ["a"] for q in qrels}
        rag_eval.save_baseline(rag_eval.evaluate(qrels, good, k=1, metrics="success,recall"),
                               base)
        run = dict(good, **{"q%02d" % i: ["x"] for i in range(6)})
        result = rag_eval.gate(rag_eval.evaluate(qrels, run, k=1, metrics="success,recall"),
                               rag_eval.load_baseline(base), mode="significant")
        self.assertFalse(result.passed)
        self.assertIn("too few queries differ", " ".join(result.notes))
        one = rag_eval.gate(rag_eval.evaluate(qrels, run, k=1, metrics="success"),
                            rag_eval.load_baseline(base)._replace(
                                mean={"success@1": 1.0}), mode="significant")
        self.assertEqual(one.changes[0].p_value, 2 / 64)

    def test_significant_gate_compares_shared_queries(self):
        base = self.base()
        qrels = dict(self.qrels, **{"new%d" % i: {"a": 1} for i in range(30)})
        run = dict(self.good, **{"new%d" % i: ["b"] for i in range(30)})
        report = rag_eval.evaluate(qrels, run, k=1, metrics="success")
        # The report's mean is 0.5 over 60 queries; every verdict is on the
        # 30 both sides scored, which held: 1.0 -> 1.0, the 30 new ones listed.
        for mode in ("tolerance", "significant"):
            with self.subTest(mode=mode):
                result = rag_eval.gate(report, base, mode=mode)
                self.assertTrue(result.passed)
                self.assertEqual((result.changes[0].status, result.changes[0].n,
                                  result.changes[0].added), ("unchanged", 30, 30))
                self.assertEqual(result.queries_added, tuple(sorted("new%d" % i
                                                                    for i in range(30))))

    def test_flat_baseline_says_per_query_is_unavailable(self):
        report = rag_eval.evaluate(self.qrels, self.good, k=1, metrics="success")
        result = rag_eval.gate(report, {"success@1": 0.5}, mode="significant")
        self.assertIsNone(result.query_drops)
        self.assertEqual(result.mode, "tolerance")
        self.assertTrue(any("--save-baseline" in n for n in result.notes))

    def test_missing_measure_fails_the_significant_gate(self):
        base = self.base()
        report = rag_eval.evaluate(self.qrels, self.good, k=1, metrics="recall")
        self.assertFalse(rag_eval.gate(report, base, mode="significant").passed)

    def test_gate_significant(self):
        qrels = self.write("q.json", json.dumps(self.qrels))
        saved = os.path.join(self.tmp, "base.json")
        run_cli(qrels, self.run_file("base_run.json", range(24, 30)), "--k", "1",
                "--metrics", "success", "--save-baseline", saved)
        run = self.run_file("run.json", range(10))         # 16 flips, net -4: p = 0.45
        code, out, err = run_cli(qrels, run, "--k", "1", "--metrics", "success",
                                 "--baseline", saved)
        self.assertEqual(code, 1)
        code, out, err = run_cli(qrels, run, "--k", "1", "--metrics", "success",
                                 "--baseline", saved, "--gate", "significant")
        self.assertEqual(code, 0, out)
        self.assertIn("dropped, not significant", out)
        code, out, err = run_cli(qrels, run, "--k", "1", "--metrics", "success",
                                 "--baseline", saved, "--gate", "significant", "--alpha", "0.5")
        self.assertEqual(code, 1)

    def test_sample_size_note(self):
        # success at 80% on 30 queries: margin 1.96 * sd / sqrt(30) > 0.02.
        run = dict(self.good, **{"q%02d" % i: ["b"] for i in range(6)})
        report = rag_eval.evaluate(self.qrels, run, k=1, metrics="success")
        result = rag_eval.gate(report, {"success@1": 0.8})
        sd = statistics.stdev([0.0] * 6 + [1.0] * 24)
        margin = statistics.NormalDist().inv_cdf(0.975) * sd / math.sqrt(30)
        needed = math.ceil((statistics.NormalDist().inv_cdf(0.975) * sd / 0.02) ** 2)
        self.assertEqual("too few queries to see a drop of the tolerance: success@1 is +/-%.3f "
                         "on 30 queries, about %d needed" % (margin, needed), result.notes[-1])

    def test_the_sample_size_note_is_said_once(self):
        # Issue 23: on 100 queries at the default tolerance it named every measure (and
        # every slice).  Said once: the measure needing the most queries.  d at rank 2
        # on 80 of 100 queries.  success@2 and recall@2: 1 x 80, 0 x 20, sd 0.4020, margin
        # 1.96 * 0.4020 / 10 = 0.0788, needed (1.96 * 0.4020 / 0.02)^2 = 1552.2 -> 1553
        # (a tie: the first by name); mrr@2: 0.5 x 80, sd 0.2010, margin 0.0394, needed
        # 388.1 -> 389.  The slices (50 queries each) are wider still, and not named.
        qrels = {"q%02d" % i: {"d": 1} for i in range(100)}
        run = {"q%02d" % i: ["x", "d"] if i < 80 else ["x"] for i in range(100)}
        queries = {q: {"slices": {"half": [str(int(q[1:]) % 2)]}} for q in qrels}
        report = rag_eval.evaluate(qrels, run, k=2, measures="success@2,mrr@2,recall@2",
                                   queries=queries, by="half")
        base = rag_eval.Baseline(dict(report.mean))
        notes = [n for n in rag_eval.gate(report, base).notes if n.startswith("too few")]
        self.assertEqual(notes, ["too few queries to see a drop of the tolerance: recall@2 is "
                                 "+/-0.079 on 100 queries, about 1553 needed"])
        sd = statistics.stdev([1.0] * 80 + [0.0] * 20)
        self.assertEqual(math.ceil((statistics.NormalDist().inv_cdf(0.975) * sd / 0.02) ** 2),
                         1553)


class BaselineFileTest(TempDir, unittest.TestCase):
    """A baseline is read whole or refused: a file or a dict, its values, its
    inputs, its rel, its per-query values against its means."""
    def test_a_format_version_it_does_not_know_is_refused(self):
        # Found by review: "format_version" was written and never read, so a
        # version 99 file with fields of its own loaded silently.
        saved = rag_eval.baseline_dict(example_report())
        self.assertEqual(saved["format_version"], 2)
        for version in (99, 0, "2", True, None):
            with self.subTest(version=version):
                path = self.write("b.json", json.dumps(dict(saved, format_version=version)))
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.load_baseline(path)
                self.assertIn("b.json: format_version %s is not one this rag_eval %s reads "
                              "(1, 2)" % (repr(version), rag_eval.__version__),
                              str(caught.exception))
        # A version 1 file (no query sets) and a file written by hand without the
        # field are read as version 1.
        for doc in (dict(saved, format_version=1), {k: v for k, v in saved.items()
                                                    if k not in ("format_version",
                                                                 "query_sets")}):
            baseline = rag_eval.load_baseline(self.write("b.json", json.dumps(doc)))
            self.assertEqual(baseline.mean, example_report().mean)

    def test_baseline_file_missing(self):
        # Merged with test_missing_baseline_says_how_to_make_one (same call, its
        # text a part of this one).
        code, out, err = run_cli(example("qrels.json"), example("run.json"),
                                 "--baseline", os.path.join(self.tmp, "none.json"))
        self.assertEqual(code, 2)
        self.assertIn("none.json: no such baseline file; write one from an accepted run with --save-baseline", err)

    def test_file_names_with_newlines_stay_on_one_line(self):
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", os.path.join(self.tmp, "no\nsuch"))
        self.assertEqual(code, 2)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("no\\nsuch: no such baseline file", err)

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

    def test_unusable_baselines(self):
        for value in ("NaN", "Infinity", "true", '"0.5"', "1.5", "-0.1", "null"):
            with self.subTest(value=value):
                self.assertBad(baseline='{"recall@5": %s}' % value, expect="b.json")
        self.assertBad(baseline='{"recal@5": 0.5}', expect="did you mean")
        self.assertBad(baseline='[0.5]', expect="JSON object")
        self.assertBad(baseline='{}', expect="no measures")
        self.assertBad(baseline='{"format": "rag_eval.baseline", "mean": {"recall@5": "x"}}',
                       expect="b.json")

    def test_gate_checks_baselines_built_in_code(self):
        report = rag_eval.evaluate({"q": {"a": 1}}, {"q": ["b"]}, k=5, metrics="recall")
        for bad in (float("nan"), float("inf"), True, "0.5", 1.5):
            with self.subTest(value=bad):
                with self.assertRaises(rag_eval.EvalError):
                    rag_eval.gate(report, rag_eval.Baseline({"recall@5": bad}))

    def test_empty_baseline_never_passes(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "holds no measures"):
            rag_eval.gate(example_report(), {})
        with self.assertRaisesRegex(rag_eval.EvalError, "holds no measures"):
            rag_eval.gate(example_report(), rag_eval.Baseline({}))

    def test_huge_and_tiny_baseline_values(self):
        huge = self.write("huge.json", '{"recall@5": 1%s}' % ("0" * 400))
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", huge)
        self.assertEqual(code, 2)
        self.assertIn("'recall@5' must be a number in [0, 1]", err)
        with self.assertRaises(rag_eval.EvalError):
            rag_eval.gate(example_report(), {"recall@5": 10 ** 400})
        # A tolerance of 5% of 1e-200 is representable; the queries it needs are not.
        tiny = self.write("tiny.json", '{"recall@5": 1e-200}')
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", tiny, "--max-drop", "5%")
        self.assertEqual(code, 0, err)
        self.assertIn("no practical number of queries is enough", out)
        self.assertEqual(rag_eval.queries_needed(0.5, 1e-200), math.inf)

    def test_malformed_inputs_member(self):
        for inputs in ('{"qrels": "x"}', '{"qrels": {"sha256": 5}}', '[1]', '{"qrels": null}'):
            with self.subTest(inputs=inputs):
                base = self.write("b.json", '{"format": "rag_eval.baseline", "mean": '
                                            '{"recall@5": 0.5}, "inputs": %s}' % inputs)
                code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base)
                self.assertEqual(code, 2)
                self.assertRegex(err, r"^rag-eval: error: .*b\.json: inputs must be an object")
        with self.assertRaises(rag_eval.EvalError):
            rag_eval.gate(example_report(), rag_eval.Baseline({"recall@5": 0.5}, inputs={"qrels": 1}))
        with self.assertRaises(rag_eval.EvalError):
            rag_eval.gate(example_report(), rag_eval.Baseline({"recall@5": 0.5}, {1: {}}))

    def test_edited_mean_of_a_saved_baseline_is_refused(self):
        # The significant gate reads per-query values, the tolerance rule the means:
        # a raised mean with lowered per-query values must fool neither.
        base = os.path.join(self.tmp, "b.json")
        run_cli(*EXAMPLE_FILES, "--save-baseline", base)
        saved = json.loads(read_text(base))
        saved["mean"] = {m: 1.0 for m in saved["mean"]}
        saved["per_query"] = {q: {m: 0.0 for m in v} for q, v in saved["per_query"].items()}
        with open(base, "w") as handle:
            json.dump(saved, handle)
        for mode in rag_eval.GATE_MODES:
            with self.subTest(mode=mode):
                code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base, "--gate", mode)
                self.assertEqual(code, 2)
                self.assertIn("the mean of mrr@5 (1.0) is not the mean of its per-query "
                              "values (0.0): the file was edited", err)

    def test_rel_is_part_of_what_a_baseline_means(self):
        # With rel=2, q2 (grade 1 only) is unscored, so recall@5 would average
        # other queries than the rel=1 baseline did: refuse the comparison.
        qrels = self.write("q.json", '{"q1": {"a": 2}, "q2": {"b": 1}}')
        run = self.write("r.json", '{"q1": ["a"], "q2": ["x"]}')
        base = self.write("b.json", '{"recall@5": 0.5}')
        code, out, err = run_cli(qrels, run, "--baseline", base, "--rel", "2")
        self.assertEqual(code, 2)
        self.assertIn("rel=1", err)
        saved = os.path.join(self.tmp, "saved.json")
        self.assertEqual(run_cli(qrels, run, "--rel", "2", "--save-baseline", saved)[0], 0)
        self.assertEqual(run_cli(qrels, run, "--rel", "2", "--baseline", saved)[0], 0)
        self.assertEqual(run_cli(qrels, run, "--baseline", saved)[0], 2)

    def test_changed_qrels_are_reported(self):
        path = os.path.join(self.tmp, "base.json")
        run_cli(example("qrels.json"), example("run.json"), "--save-baseline", path)
        with open(example("qrels.json")) as handle:
            qrels = json.load(handle)
        qrels["q9"] = {"x": 1}
        changed = self.write("qrels2.json", json.dumps(qrels))
        code, out, err = run_cli(changed, example("run.json"), "--baseline", path)
        self.assertIn("qrels changed since the baseline", out)


class SaveBaselineTest(TempDir, unittest.TestCase):
    """--save-baseline writes what the gate reads back; a failed gate never
    rewrites its baseline unless --accept says so (issue 9)."""
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

    def test_passed_gate_saves(self):
        base = self.write("b.json", '{"recall@5": 0.6}')
        new = os.path.join(self.tmp, "new.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base, "--save-baseline", new)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(read_text(new))["mean"]["recall@5"], 2 / 3)

    def test_failed_gate_does_not_rewrite_the_baseline(self):
        base = self.write("b.json", '{"recall@5": 0.9}')
        out_path = os.path.join(self.tmp, "out.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base, "--save-baseline", base,
                                 "-o", out_path)
        self.assertEqual(code, 1)
        self.assertEqual(read_text(base), '{"recall@5": 0.9}')      # unchanged
        self.assertFalse(json.loads(read_text(out_path))["gate"]["passed"])  # -o still written
        self.assertIn("b.json was not written", err)
        self.assertIn("--accept", err)
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base)     # the rerun still fails
        self.assertEqual(code, 1)

    def test_accept_writes_the_baseline_and_still_exits_1(self):
        base = self.write("b.json", '{"recall@5": 0.9}')
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base, "--save-baseline", base,
                                 "--accept")
        self.assertEqual(code, 1)
        saved = json.loads(read_text(base))
        self.assertEqual(saved["mean"]["recall@5"], 2 / 3)
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base)
        self.assertEqual(code, 0, err)

    def test_accept_needs_save_baseline(self):
        code, out, err = run_cli(*EXAMPLE_FILES, "--accept")
        self.assertEqual(code, 2)
        self.assertIn("--accept only applies with --save-baseline", err)


# ---------------------------------------------------------------------------
# Provenance: meta (what the numbers are about) and per-query label hashes
# ---------------------------------------------------------------------------

class MetaTest(TempDir, unittest.TestCase):
    """--meta, --meta-file and evaluate(meta=...): a flat, sorted object of
    dotted keys to strings, in every report format and saved baseline; bad
    meta is one line, exit 2, nothing written."""

    def json_report(self, *argv):
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "json", *argv)
        self.assertEqual(code, 0, err)
        return out, json.loads(out)

    def test_options_and_file_flatten_to_sorted_strings(self):
        meta_file = self.write("meta.json", json.dumps({
            "embedding": {"model": "e5-large", "dim": 1024}, "git": {"dirty": False},
            "judge.model": "gpt-4o", "chunker": {"overlap": 0.25}}))
        out, doc = self.json_report("--meta-file", meta_file, "--meta", "dataset.version=v3",
                                    "--meta", "embedding.model=bge-m3",   # overrides the file
                                    "--meta", "note=a=b c")               # split at the first =
        self.assertEqual(doc["meta"], {"chunker.overlap": "0.25", "dataset.version": "v3",
                                       "embedding.dim": "1024", "embedding.model": "bge-m3",
                                       "git.dirty": "false", "judge.model": "gpt-4o",
                                       "note": "a=b c"})
        self.assertEqual(list(doc["meta"]), sorted(doc["meta"]))
        self.assertTrue(out_keys_sorted(out))
        self.assertEqual(out, self.json_report("--meta", "note=a=b c", "--meta",
                                               "embedding.model=bge-m3", "--meta",
                                               "dataset.version=v3", "--meta-file",
                                               meta_file)[0])     # order of options: same bytes

    def test_no_meta_is_an_empty_object_and_no_text(self):
        self.assertEqual(self.json_report()[1]["meta"], {})
        code, out, err = run_cli(*EXAMPLE_FILES)
        self.assertNotIn("meta", out)
        self.assertEqual(example_report().meta, {})

    def test_library(self):
        meta = {"embedding": {"model": "bge-m3"}, "index.build": 42}
        report = example_report(meta=meta)
        self.assertEqual(report.meta, {"embedding.model": "bge-m3", "index.build": "42"})
        self.assertEqual(report.to_dict()["meta"], report.meta)
        files = rag_eval.evaluate_files(*EXAMPLE_FILES, meta=meta)
        self.assertEqual(files.meta, report.meta)
        self.assertEqual(rag_eval.baseline_dict(files)["meta"], report.meta)
        for bad, expect in (({"a": None}, "meta a must be a string, number or boolean, got null"),
                            ({"a": float("nan")}, "got nan"), ({"a": [1]}, "got [1]"),
                            ({1: "x"}, "meta key 1 must be text"), ("x", "must be an object"),
                            ({"a": {}}, "meta a is an empty object")):
            with self.subTest(meta=bad):
                with self.assertRaisesRegex(rag_eval.EvalError, re.escape(expect)):
                    example_report(meta=bad)

    def test_every_format_shows_it(self):
        argv = ("--meta", "embedding.model=bge-m3", "--meta", "dataset.version=v3")
        code, text, err = run_cli(*EXAMPLE_FILES, *argv)
        self.assertIn("meta: what these numbers are about\n  key              value\n"
                      "  dataset.version  v3\n  embedding.model  bge-m3\n", text)
        code, md, err = run_cli(*EXAMPLE_FILES, "--format", "markdown", *argv)
        self.assertIn("<details><summary>meta: what these numbers are about</summary>\n\n"
                      "| key | value |\n"
                      "| --- | --- |\n| dataset.version | v3 |\n| embedding.model | bge-m3 |\n", md)
        # trec_eval's lines stay as they were; the meta goes to stderr with the gate.
        code, trec, err = run_cli(*EXAMPLE_FILES, "--format", "trec", *argv)
        self.assertEqual(trec, run_cli(*EXAMPLE_FILES, "--format", "trec")[1])
        self.assertIn("  embedding.model  bge-m3\n", err)
        saved = os.path.join(self.tmp, "b.json")
        self.assertEqual(run_cli(*EXAMPLE_FILES, *argv, "--save-baseline", saved)[0], 0)
        self.assertEqual(json.loads(read_text(saved))["meta"],
                         {"dataset.version": "v3", "embedding.model": "bge-m3"})

    def test_look_alike_keys_warn(self):
        code, out, err = run_cli(*EXAMPLE_FILES, "--meta", "Embedding_Model=bge-m3",
                                 "--meta", "team=search")
        self.assertEqual(code, 0)
        self.assertIn("warning: meta key 'Embedding_Model' looks like the documented "
                      "'embedding.model'", err)
        self.assertNotIn("'team'", err)

    def test_bad_meta_options(self):
        for extra, expect in [
                (["--meta", "novalue"], "--meta 'novalue': expected KEY=VALUE"),
                (["--meta", "a b=1"], "meta key 'a b' must be letters, digits, '_' and '-'"),
                (["--meta", "=x"], "meta key '' must be"),
                (["--meta", "a..b=1"], "meta key 'a..b' must be"),
                (["--meta", ".a=1"], "meta key '.a' must be"),
                (["--meta", "a=", "--meta", "b=1"], "--meta: meta a is empty (an unset variable?)"),
                (["--meta", "a=x\ny"], "meta a must be one line of text"),
                (["--meta", "a=1", "--meta", "a=2"], "--meta a is given twice (1 and 2)"),
                (["--same", "a"], "--same only applies with --baseline"),
                (["--meta-file", ""], "--meta-file: the file name is empty")]:
            with self.subTest(extra=extra):
                self.assertBad(extra=extra, expect=expect)

    def test_bad_meta_files(self):
        for content, expect in [
                ('[1]', "m.json: meta must be an object {key: value}, got list"),
                ('{"a": null}', "m.json: meta a must be a string, number or boolean, got null"),
                ('{"a": [1, 2]}', "m.json: meta a must be a string, number or boolean, got [1, 2]"),
                ('{"a": {"b": {}}}', "m.json: meta a.b is an empty object"),
                ('{"a": {"b": 1}, "a.b": 2}', "m.json: meta a.b is given twice"),
                ('{"a b": 1}', "m.json: meta key 'a b' must be"),
                ('{"a": NaN}', "m.json"),
                ('{"a": 1, "a": 2}', "m.json: duplicate key 'a'"),
                ('{"a": ', "m.json:1:7: invalid JSON")]:
            with self.subTest(content=content):
                self.assertBad(extra=["--meta-file", self.write("m.json", content)], expect=expect)
        self.assertBad(extra=["--meta-file", os.path.join(self.tmp, "none.json")],
                       expect="none.json: no such file")

    def test_meta_file_is_an_input(self):
        meta_file = self.write("meta.json", '{"a": 1}')
        code, out, err = run_cli(*EXAMPLE_FILES, "--meta-file", meta_file, "-o", meta_file)
        self.assertEqual(code, 2)
        self.assertIn("-o %s would overwrite the --meta-file input" % meta_file, err)
        self.assertEqual(read_text(meta_file), '{"a": 1}')
        code, out, err = run_cli(example("qrels.json"), "-", "--meta-file", "-",
                                 stdin='{"q1": ["a"]}')
        self.assertEqual(code, 2)
        self.assertIn("only one input can come from stdin", err)
        code, out, err = run_cli(*EXAMPLE_FILES, "--meta-file", "-", "--format", "json",
                                 stdin='{"git": {"commit": "3f2a9c1"}}')
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["meta"], {"git.commit": "3f2a9c1"})


class ProvenanceGateTest(TempDir, unittest.TestCase):
    """The gate names every meta key that changed since the baseline and
    refuses (--same KEY) when a key that must match does not."""

    def save(self, *meta, name="b.json"):
        path = os.path.join(self.tmp, name)
        argv = [a for kv in meta for a in ("--meta", kv)]
        code, out, err = run_cli(*EXAMPLE_FILES, *argv, "--save-baseline", path)
        self.assertEqual(code, 0, err)
        return path

    def test_round_trip(self):
        # meta -> JSON report -> saved baseline -> load -> gate note
        base = self.save("embedding.model=e5-large", "chunker.name=recursive-512",
                         "dataset.version=v3")
        self.assertEqual(rag_eval.load_baseline(base).meta,
                         {"chunker.name": "recursive-512", "dataset.version": "v3",
                          "embedding.model": "e5-large"})
        argv = ["--meta", "embedding.model=bge-m3", "--meta", "dataset.version=v3",
                "--meta", "reranker.model=bge-reranker-v2", "--baseline", base]
        code, out, err = run_cli(*EXAMPLE_FILES, *argv)
        self.assertEqual(code, 0, err)      # same numbers: the notes explain, they do not fail
        self.assertIn("  note: changed since the baseline: chunker.name: recursive-512 -> "
                      "(absent)\n  note: changed since the baseline: embedding.model: e5-large "
                      "-> bge-m3\n  note: changed since the baseline: reranker.model: (absent) "
                      "-> bge-reranker-v2\n", out)
        self.assertNotIn("dataset.version:", out)          # unchanged keys are not listed
        code, out, err = run_cli(*EXAMPLE_FILES, *argv, "--format", "json")
        gate = json.loads(out)["gate"]
        self.assertEqual(gate["meta_changes"], [
            {"key": "chunker.name", "baseline": "recursive-512", "current": None},
            {"key": "embedding.model", "baseline": "e5-large", "current": "bge-m3"},
            {"key": "reranker.model", "baseline": None, "current": "bge-reranker-v2"}])
        self.assertIn("changed since the baseline: embedding.model: e5-large -> bge-m3",
                      gate["notes"])
        code, out, err = run_cli(*EXAMPLE_FILES, *argv, "--format", "trec")
        self.assertIn("note: changed since the baseline: embedding.model: e5-large -> bge-m3",
                      err)
        self.assertNotIn("e5-large", out)
        # The library: the same changes.
        report = example_report(meta={"embedding.model": "bge-m3", "dataset.version": "v3",
                                      "reranker.model": "bge-reranker-v2"})
        result = rag_eval.gate(report, rag_eval.load_baseline(base))
        self.assertEqual(result.meta_changes, (
            rag_eval.MetaChange("chunker.name", "recursive-512", None),
            rag_eval.MetaChange("embedding.model", "e5-large", "bge-m3"),
            rag_eval.MetaChange("reranker.model", None, "bge-reranker-v2")))

    def test_same_meta_gives_no_note(self):
        base = self.save("embedding.model=e5-large")
        code, out, err = run_cli(*EXAMPLE_FILES, "--meta", "embedding.model=e5-large",
                                 "--baseline", base, "--same", "embedding.model")
        self.assertEqual(code, 0, err)
        self.assertNotIn("changed since the baseline", out)
        self.assertNotIn("--same", out)

    def test_same_refuses_a_differing_key(self):
        base = read_text(self.save("embedding.model=e5-large", "dataset.version=v3"))
        err = self.assertBad(qrels=read_text(EXAMPLE_FILES[0]), run=read_text(EXAMPLE_FILES[1]),
                             baseline=base, extra=["--meta", "embedding.model=bge-m3",
                                                   "--meta", "dataset.version=v3",
                                                   "--same", "embedding.model",
                                                   "--same", "dataset.version"])
        self.assertIn("not gated: --same embedding.model: embedding.model: e5-large in %s, "
                      "bge-m3 in this run (numbers about different setups are not compared)"
                      % os.path.join(self.tmp, "b.json"), err)

    def test_same_refuses_a_key_absent_on_one_side(self):
        base = read_text(self.save("dataset.version=v3"))
        good = dict(qrels=read_text(EXAMPLE_FILES[0]), run=read_text(EXAMPLE_FILES[1]),
                    baseline=base)
        err = self.assertBad(extra=["--same", "dataset.version"], **good)
        self.assertIn("dataset.version: v3 in %s, absent from this run"
                      % os.path.join(self.tmp, "b.json"), err)
        err = self.assertBad(extra=["--meta", "dataset.version=v3", "--meta", "judge.model=j1",
                                    "--same", "judge.model"], **good)
        self.assertIn("judge.model: absent from %s, j1 in this run"
                      % os.path.join(self.tmp, "b.json"), err)
        self.assertBad(extra=["--same", "bad key"], expect="--same 'bad key'", **good)
        # A flat baseline records no meta: a key asked to match is absent there.
        self.assertBad(baseline='{"recall@5": 0.1}', extra=["--meta", "dataset.version=v3",
                                                           "--same", "dataset.version"],
                       expect="dataset.version: absent from")

    def test_same_key_absent_on_both_sides_gates_with_a_note(self):
        base = self.save()
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base, "--same", "judge.model")
        self.assertEqual(code, 0, err)
        self.assertIn("note: --same judge.model: absent from the report and the baseline "
                      "alike, so nothing was compared", out)

    def test_library_same(self):
        base = rag_eval.load_baseline(self.save("embedding.model=e5-large"))
        report = example_report(meta={"embedding.model": "bge-m3"})
        for same in ("embedding.model", ["embedding.model"], ("judge.model", "embedding.model")):
            with self.subTest(same=same):
                with self.assertRaisesRegex(rag_eval.EvalError,
                                            "embedding.model: e5-large in .*b.json, bge-m3"):
                    rag_eval.gate(report, base, same=same)
        self.assertTrue(rag_eval.gate(report, base).passed)
        with self.assertRaisesRegex(rag_eval.EvalError, "same 'a b': meta key 'a b'"):
            rag_eval.gate(report, base, same=["a b"])

    def test_baseline_without_meta(self):
        flat = self.write("flat.json", '{"recall@5": 0.1}')
        code, out, err = run_cli(*EXAMPLE_FILES, "--meta", "embedding.model=bge-m3",
                                 "--baseline", flat)
        self.assertEqual(code, 0, err)
        self.assertIn("flat.json records no meta (a flat file, or saved before --meta): save it "
                      "again to compare what the numbers are about", out)
        self.assertNotIn("changed since the baseline", out)
        self.assertNotIn("records no meta", run_cli(*EXAMPLE_FILES, "--baseline", flat)[1])
        old = json.loads(read_text(self.save()))
        del old["meta"]
        old_path = self.write("old.json", json.dumps(old))
        self.assertIsNone(rag_eval.load_baseline(old_path).meta)
        self.assertEqual(run_cli(*EXAMPLE_FILES, "--baseline", old_path)[0], 0)

    def test_malformed_baseline_meta(self):
        for meta, expect in (('[1]', "meta must be an object {key: string}"),
                             ('{"a": 1}', "meta must be an object {key: string}"),
                             ('{"a b": "x"}', "meta key 'a b'"), ('{"a": ""}', "meta a is empty")):
            with self.subTest(meta=meta):
                self.assertBad(baseline='{"format": "rag_eval.baseline", "mean": '
                                        '{"recall@5": 0.5}, "meta": %s}' % meta, expect=expect)
        with self.assertRaisesRegex(rag_eval.EvalError, "meta must be an object"):
            rag_eval.gate(example_report(), rag_eval.Baseline({"recall@5": 0.5}, meta=["x"]))


class LabelHashTest(TempDir, unittest.TestCase):
    """Per-query label hashes (decision D): the definition, pinned; kept in
    saved baselines; a changed qrels file names the queries whose labels
    changed, and per-query checks compare the other queries."""

    # The canonical JSON written out by hand; the digests are those of
    # `printf '%s' '<text>' | sha256sum` (GNU coreutils), not of rag_eval.
    ID_LABELS = '[["a",null,null,2],["b",null,null,0],["café",null,null,1]]'
    ID_SHA = "16249bc4aa40e831121356258d856d43c270e6170e519db32e1e72f55d0f96d7"
    SPAN_LABELS = ('[["handbook.md",null,null,0],["handbook.md",9,20,1],'
                   '["handbook.md",100,250,2]]')     # 9 before 100: numbers, not text
    SPAN_SHA = "2bcbd7d6099204c66206a3d2608c197b75fd04aa7d4067e40b53ecc79c5a58e4"

    def test_definition_is_pinned(self):
        self.assertEqual(hashlib_sha256(self.ID_LABELS), self.ID_SHA)
        self.assertEqual(hashlib_sha256(self.SPAN_LABELS), self.SPAN_SHA)
        self.assertEqual(rag_eval._label_sha256({"café": 1, "b": 0, "a": 2}), self.ID_SHA)
        spans = [rag_eval.Label("handbook.md", 100, 250, 2),
                 rag_eval.Label("handbook.md", None, None, 0),
                 rag_eval.Label("handbook.md", 9, 20, 1, "ab" * 32)]   # doc_sha256 not hashed
        self.assertEqual(rag_eval._label_sha256(spans), self.SPAN_SHA)

    def test_order_of_keys_and_labels_does_not_matter(self):
        for qrels in ({"q": {"a": 2, "b": 0, "café": 1}}, {"q": {"café": 1, "a": 2, "b": 0}},
                      {"q": {"b": 0, "café": 1, "a": 2}}):
            with self.subTest(qrels=qrels):
                report = rag_eval.evaluate(qrels, {"q": ["a"]})
                self.assertEqual(dict(report.label_sha256), {"q": self.ID_SHA})
        # The same labels as a file (JSON, or TREC lines in another order): the same hash.
        trec = self.write("q.trec", "q 0 b 0\nq 0 café 1\nq 0 a 2\n")
        report = rag_eval.evaluate_files(trec, io.StringIO('{"q": ["a"]}'))
        self.assertEqual(dict(report.label_sha256), {"q": self.ID_SHA})
        lists = rag_eval.evaluate(
            {"q": [{"doc": "handbook.md", "start": 9, "end": 20, "grade": 1},
                   {"doc": "handbook.md", "grade": 0},
                   {"doc": "handbook.md", "start": 100, "end": 250, "grade": 2}]},
            {"q": ["handbook.md#1"]}, measures="recall(unit=doc)", doc_sep="#")
        self.assertEqual(dict(lists.label_sha256), {"q": self.SPAN_SHA})

    def test_saved_baseline_holds_every_qrels_query(self):
        path = os.path.join(self.tmp, "b.json")
        self.assertEqual(run_cli(*EXAMPLE_FILES, "--save-baseline", path)[0], 0)
        saved = json.loads(read_text(path))["label_sha256"]
        qrels = rag_eval.load_qrels(example("qrels.json"))
        self.assertEqual(sorted(saved), ["q1", "q2", "q3", "q4"])     # q4 is unscored
        for qid, labels in qrels.items():
            canonical = json.dumps(sorted([doc, None, None, g] for doc, g in labels.items()),
                                   separators=(",", ":"))
            self.assertEqual(saved[qid], hashlib_sha256(canonical))
        self.assertEqual(rag_eval.load_baseline(path).label_sha256, saved)

    def setUpGate(self, qrels_changes):
        """A baseline of 30 queries each finding its one relevant id, and
        qrels where ``qrels_changes`` replace some queries' labels."""
        self.qrels = {"q%02d" % i: {"a": 1} for i in range(30)}
        self.run = {q: ["a"] for q in self.qrels}
        self.base_path = os.path.join(self.tmp, "b.json")
        rag_eval.save_baseline(rag_eval.evaluate_files(
            self.write("base_qrels.json", json.dumps(self.qrels)), io.StringIO(
                json.dumps(self.run)), k=1, metrics="success"), self.base_path)
        self.changed = dict(self.qrels, **qrels_changes)
        return rag_eval.evaluate(self.changed, self.run, k=1, metrics="success")

    def test_changed_labels_are_named_and_left_out_of_per_query_checks(self):
        # q03's relevant id is now z (it scores 0); q07's label grade went 1 -> 2
        # (it still scores 1).  Mean 29/30: a drop of 1/30 = 0.0333 > 0.02.
        report = self.setUpGate({"q03": {"z": 1}, "q07": {"a": 2}})
        result = rag_eval.gate(report, rag_eval.load_baseline(self.base_path))
        self.assertEqual(result.labels_changed, ("q03", "q07"))
        self.assertEqual(result.query_drops, ())        # q03's drop is not compared
        self.assertFalse(result.passed)                 # the means include it
        self.assertAlmostEqual(result.changes[0].delta, -1 / 30, places=12)
        self.assertIn("labels changed since the baseline for 2 queries: 'q03', 'q07'; their "
                      "values changed with their labels: every mean (and the significant test) "
                      "includes them, the per-query drops leave them out", result.notes)
        self.assertFalse(any("qrels changed" in n for n in result.notes))
        code, out, err = self.report_of("--k", "1", "--metrics", "success", "--baseline",
                                        self.base_path, "--format", "json",
                                        qrels=self.changed, run=self.run)
        self.assertEqual(code, 1)
        self.assertEqual(json.loads(out)["gate"]["per_query"]["labels_changed"], ["q03", "q07"])

    def test_the_significant_gate_pairs_relabelled_queries_as_the_means_do(self):
        # q00..q07 relabelled so that the run misses them; the other 22 held.
        # Both sides scored all 30: the paired means are 1.0 and 22/30, and
        # the 8 equal differences give p = 2 / 2**8 (every sign pattern of 8),
        # a regression, with or without the label hashes.  Only the list of
        # per-query drops leaves the relabelled queries out.
        report = self.setUpGate({"q%02d" % i: {"z": 1} for i in range(8)})
        base = rag_eval.load_baseline(self.base_path)
        for hashes in (base.label_sha256, None):
            with self.subTest(label_hashes=hashes is not None):
                result = rag_eval.gate(report, base._replace(label_sha256=hashes),
                                       mode="significant")
                self.assertFalse(result.passed)
                self.assertEqual((result.changes[0].baseline, result.changes[0].current,
                                  result.changes[0].n), (1.0, 22 / 30, 30))
                self.assertEqual(result.changes[0].p_value, 2 / 256)
                self.assertEqual(len(result.query_drops), 0 if hashes else 8)

    def test_old_baseline_without_hashes_keeps_working(self):
        report = self.setUpGate({"q03": {"z": 1}})
        saved = json.loads(read_text(self.base_path))
        del saved["label_sha256"]
        old = self.write("old.json", json.dumps(saved))
        code, out, err = self.report_of("--k", "1", "--metrics", "success", "--baseline", old,
                                        "--format", "json", qrels=self.changed, run=self.run)
        self.assertEqual(code, 1, err)
        gate = json.loads(out)["gate"]
        self.assertIsNone(gate["per_query"]["labels_changed"])
        self.assertEqual([d["query"] for d in gate["per_query"]["regressions"]], ["q03"])
        self.assertTrue(any("the qrels changed since the baseline" in n for n in gate["notes"]))
        self.assertTrue(any("old.json holds no label hashes (saved before rag_eval kept them): "
                            "save it again to see which queries' labels change" in n
                            for n in gate["notes"]))

    def test_same_labels_in_another_file(self):
        # The qrels rewritten as TREC lines: another file (sha256), the same labels.
        self.setUpGate({})
        trec = self.write("q.trec", "".join("%s 0 a 1\n" % q for q in sorted(self.qrels)))
        code, out, err = self.report_of("--k", "1", "--metrics", "success", "--baseline",
                                        self.base_path, qrels=trec, run=self.run)
        self.assertEqual(code, 0, err)
        self.assertIn("note: the qrels changed since the baseline (sha256 ", out)
        self.assertIn("but no query both hold changed its labels", out)
        self.assertNotIn("not about the same test set", out)

    def test_hashes_cost_nothing_until_read(self):
        report = example_report()
        self.assertEqual(report.label_sha256._known, {})
        self.assertIn("q4", report.label_sha256)
        self.assertEqual(report.label_sha256._known, {})     # membership computes nothing
        self.assertEqual(len(report.label_sha256["q1"]), 64)

    def test_malformed_label_hashes_in_baseline(self):
        for hashes in ('{"q1": "xyz"}', '{"q1": 5}', '["q1"]', '{"q1": "%s"}' % ("A" * 64)):
            with self.subTest(hashes=hashes):
                self.assertBad(baseline='{"format": "rag_eval.baseline", "mean": '
                                        '{"recall@5": 0.5}, "label_sha256": %s}' % hashes,
                               expect="b.json: label_sha256 must be an object {query_id: "
                                      "sha256 in lowercase hex}")


def hashlib_sha256(text):
    import hashlib
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class GateBaselineFormsTest(TempDir, unittest.TestCase):
    """gate() takes its baseline as assert_no_regression does (issue 23): a
    Baseline, a dict of means, a file name or a Report, through one helper."""

    def test_a_path_a_report_and_a_dict_gate_alike(self):
        report = example_report()
        # The bundled baseline.json: mrr@5 0.55 -> 0.5 and recall@5 0.7 -> 0.6667 fall by
        # more than 0.02; ndcg@5 0.52 -> 0.5095 and success@5 do not.
        by_path = rag_eval.gate(report, example("baseline.json"))
        by_loaded = rag_eval.gate(report, rag_eval.load_baseline(example("baseline.json")))
        by_dict = rag_eval.gate(report, json.loads(read_text(example("baseline.json"))))
        for result in (by_path, by_loaded, by_dict):
            self.assertEqual([c.measure for c in result.regressions], ["mrr@5", "recall@5"])
        self.assertEqual(by_path.changes, by_loaded.changes)
        self.assertEqual(by_path.changes, by_dict.changes)
        saved = self.write("saved.json", "")
        rag_eval.save_baseline(report, saved)
        for baseline in (report, saved):    # a Report is the baseline it would save
            result = rag_eval.gate(report, baseline)
            self.assertTrue(result.passed)
            self.assertEqual({c.n for c in result.changes}, {3})       # paired per query
        self.assertEqual(rag_eval.gate(report, report).changes,
                         rag_eval.gate(report, saved).changes)

    def test_anything_else_is_refused_in_one_line(self):
        report = example_report()
        with self.assertRaisesRegex(rag_eval.EvalError, "^baseline must be a Baseline, a "
                                    "Report, a dict of means or a file name, got list$"):
            rag_eval.gate(report, [0.5])
        with self.assertRaisesRegex(rag_eval.EvalError, "nope.json: no such baseline file"):
            rag_eval.gate(report, os.path.join(self.tmp, "nope.json"))


class AssertNoRegressionTest(TempDir, unittest.TestCase):
    """assert_no_regression: gate() for pytest, the gate's text as the message."""

    def test_fails_with_the_gates_text(self):
        report = example_report(unjudged_bounds=True)
        with self.assertRaises(AssertionError) as caught:
            rag_eval.assert_no_regression(report, example("baseline.json"))
        message = str(caught.exception)
        self.assertTrue(message.startswith("gate vs %s (max drop 0.02): FAILED, 2 regressions "
                                           "(undecided: unjudged ids could explain them): "
                                           "mrr@5, recall@5\n" % example("baseline.json")))
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", example("baseline.json"))
        self.assertEqual(code, 1)
        self.assertIn(message, out)         # the same text the command line prints

    def test_passes_with_the_gate_result(self):
        report = example_report()
        result = rag_eval.assert_no_regression(report, example("baseline.json"), max_drop="10%")
        self.assertIsInstance(result, rag_eval.GateResult)
        self.assertTrue(result.passed)
        self.assertTrue(rag_eval.assert_no_regression(report, report).passed)   # a Report
        baseline = rag_eval.Baseline({"mrr@5": 0.5})
        self.assertTrue(rag_eval.assert_no_regression(report, baseline).passed)
        worse = example_report(k=1)._replace(measures=("mrr@5",))
        worse = worse._replace(mean={"mrr@5": 0.3}, per_query={
            q: {"mrr@5": 0.3} for q in worse.per_query})
        with self.assertRaises(AssertionError) as caught:
            rag_eval.assert_no_regression(worse, report)
        # Found by review: missing measures were called regressions.
        self.assertIn("gate vs report (max drop 0.02): FAILED, 1 regression: mrr@5; 3 missing: "
                      "ndcg@5, recall@5, success@5\n",
                      str(caught.exception))
