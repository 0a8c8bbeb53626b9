"""Measures: hand-worked values (tests/data/hand_worked.json), invariants of
every registered measure, unanswerable queries and abstention, --sweep-min-score,
and peer-verified numbers (tests/data/peers, written by tests/peers/gen_peers.py).
"""

import copy
import io
import json
import math
import os
import unittest

import rag_eval
from tests.support import DATA, run_cli, TempDir, example, PEERS, jsonl


# ---------------------------------------------------------------------------
# Measures: hand-worked values (tests/data/hand_worked.json), invariants of every
# registered measure, and peer-verified numbers (tests/data/peers, written by
# tests/peers/gen_peers.py)
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
            unscored = {name for name, value in case["expected"].items() if value is None}
            self.assertEqual(set(case["arithmetic"]) | unscored, set(case["expected"]))
            for name, text in case.get("stage_arithmetic", {}).items():
                self.assertAlmostEqual(eval(text, {"__builtins__": {}}),
                                       case["stage_expected"][name], places=15)
            self.assertEqual(set(case.get("stage_arithmetic", {})),
                             set(case.get("stage_expected", {})))

    def test_values(self):
        # A case over chunks gives its chunk map (or doc_sep); an expected null
        # is a query outside the measure's population (no value for it): alone,
        # it leaves the measure nothing to average, an error; beside a query of
        # the population, it has no value.
        # A case may give the query's metadata ("queries": {"answerable": false});
        # a set-level measure (no per-query values) is checked on the mean.
        partner = {"doc": "~partner", "start": 0, "end": 1, "grade": 9}
        for case in self.cases:
            if "scores" in case:
                self.check_score_case(case)
                continue
            if "stages" in case:
                self.check_stage_case(case)
                continue
            for name, expected in case["expected"].items():
                with self.subTest(case=case["name"], measure=name):
                    options = dict(metrics=[name], chunks=case.get("chunks"),
                                   doc_sep=case.get("doc_sep"))
                    if "queries" in case:
                        options["queries"] = {"q": case["queries"]}
                    spec = rag_eval._REGISTRY[rag_eval.parse_measure(name).name]
                    if expected is None:
                        with self.assertRaisesRegex(rag_eval.EvalError, "nothing to average"):
                            rag_eval.evaluate({"q": case["qrels"]}, {"q": case["run"]},
                                              **options)
                        chunks = (case.get("chunks") or []) + [dict(partner, id="~p")]
                        report = rag_eval.evaluate(
                            {"q": case["qrels"], "p": [partner]}, {"q": case["run"], "p": ["~p"]},
                            **dict(options, chunks=chunks, doc_sep=None))
                        self.assertNotIn(name, report.per_query["q"])
                        self.assertEqual(report.n[name], 1)
                    else:
                        report = rag_eval.evaluate({"q": case["qrels"]}, {"q": case["run"]},
                                                   **options)
                        value = (report.mean if spec.aggregate else report.per_query["q"])[name]
                        self.assertAlmostEqual(value, expected, places=12)

    def check_score_case(self, case):
        """A case of judge scores: query 'q''s line of a score file
        ("scores"), its fields' ranges ("ranges")."""
        line = json.dumps(dict(case["scores"], query_id="q"))
        scores = rag_eval.load_scores(io.StringIO(line), ranges={
            f: tuple(pair) for f, pair in case.get("ranges", {}).items()})
        for name, expected in case["expected"].items():
            with self.subTest(case=case["name"], measure=name):
                report = rag_eval.evaluate_scores(scores, [name])
                self.assertAlmostEqual(report.per_query["q"][name], expected, places=12)

    @staticmethod
    def stage_report(spec, run, verdicts):
        """evaluate_stages() of a stages case: its qrels, this run and these
        verdicts (a null verdict: missing)."""
        lines = "".join(json.dumps({"query_id": q, spec["field"]: v}) + "\n"
                        for q, v in verdicts.items())
        options = dict(spec.get("options", {}))
        scores = rag_eval.load_scores(io.StringIO(lines), ranges={
            f: tuple(pair) for f, pair in spec.get("ranges", {}).items()},
            allow_missing=options.get("allow_missing_scores", False))
        return rag_eval.evaluate_stages(spec["qrels"], run, scores, spec["field"],
                                        queries=spec.get("queries"), **options)

    def check_stage_case(self, case):
        """A case of answer stages: its means, stage counts, the queries
        counted apart and, against its baseline, the gate's attribution."""
        spec = case["stages"]
        with self.subTest(case=case["name"]):
            report = self.stage_report(spec, spec["run"], spec["verdicts"])
            for name, expected in case["expected"].items():
                if expected is None:
                    self.assertNotIn(name, report.mean)
                    self.assertIn(name, report.measures)
                else:
                    self.assertAlmostEqual(report.mean[name], expected, places=12, msg=name)
            got = dict(report.stages["counts"])
            got.update(("apart." + key, n) for key, n in report.stages["apart"].items())
            attribution = None
            if "baseline" in spec:
                before = self.stage_report(spec, spec["baseline"]["run"],
                                           spec["baseline"]["verdicts"])
                baseline = rag_eval.load_baseline(io.StringIO(json.dumps(
                    rag_eval.baseline_dict(before))))
                result = rag_eval.gate(report, baseline)
                attribution = result.attribution[spec["field"]]
                got.update(attribution)
                row = next(c for c in result.changes if c.measure == "score(field=%s)"
                           % spec["field"])
                self.assertEqual((row.status, row.main_stage), ("regressed", spec["main_stage"]))
            for name, expected in case["stage_expected"].items():
                self.assertAlmostEqual(got[name], expected, places=15, msg=name)

    def test_every_measure_is_covered(self):
        covered = {rag_eval.parse_measure(n).name for c in self.cases for n in c["expected"]}
        self.assertEqual(covered, set(rag_eval.available_measures()))

    def test_success_is_not_recall(self):
        report = rag_eval.evaluate({"q": {"a": 1, "b": 1}}, {"q": ["a"]}, k=5,
                                   metrics="recall,success")
        self.assertEqual(report.mean, {"recall@5": 0.5, "success@5": 1.0})

    def test_rel_ignored_by_ndcg(self):
        # DCG = 1 + 3 / log2 3, ideal = 3 + 1 / log2 3 (exponential); linear: 1 + 2 / log2 3
        # over 2 + 1 / log2 3. The threshold rel=2 changes neither (as trec_eval).
        L = math.log2
        for rel in (1, 2):
            report = rag_eval.evaluate({"q": {"a": 1, "b": 2}}, {"q": ["a", "b"]}, k=2, rel=rel,
                                       metrics="ndcg,ndcg(gain=linear)")
            self.assertAlmostEqual(report.mean["ndcg@2"], (1 + 3 / L(3)) / (3 + 1 / L(3)), 15)
            self.assertAlmostEqual(report.mean["ndcg(gain=linear)@2"],
                                   (1 + 2 / L(3)) / (2 + 1 / L(3)), 15)


class MeasureInvariantsTest(unittest.TestCase):
    """Properties that hold for every registered measure at several cutoffs."""

    QRELS = {"q1": {"a": 2, "b": 1, "c": 0, "d": -1}, "q2": {"e": 1, "f": 3},
             "q3": {"g": 1}}

    RUN = {"q1": ["x", "a", "c", "a", "d", "b"], "q2": {"f": 0.2, "z": 0.2, "e": 0.9},
           "q3": ["h", "i"], "q4": ["x", "a"]}
    # q4 is stated unanswerable: the population of the abstention measures.
    QUERIES = {"q4": {"answerable": False}}

    # The same shapes over chunks: span and document labels, a chunk map with
    # overlapping (sliding-window) chunks, a repeated document, a tie.
    SPAN_QRELS = {"q1": [{"doc": "A", "start": 0, "end": 40, "grade": 2},
                         {"doc": "A", "start": 30, "end": 60, "grade": 1},
                         {"doc": "B", "start": 5, "end": 9, "grade": 0},
                         {"doc": "C", "grade": 1}],
                  "q2": [{"doc": "B", "start": 10, "end": 30, "grade": 3}],
                  "q3": [{"doc": "D", "grade": 1}]}
    CHUNKS = [{"id": "a1", "doc": "A", "start": 0, "end": 25},
              {"id": "a2", "doc": "A", "start": 20, "end": 45},
              {"id": "a3", "doc": "A", "start": 40, "end": 70},
              {"id": "b1", "doc": "B", "start": 0, "end": 20},
              {"id": "b2", "doc": "B", "start": 20, "end": 40},
              {"id": "c1", "doc": "C", "start": 0, "end": 10},
              {"id": "x1", "doc": "X", "start": 0, "end": 50}]
    SPAN_RUN = {"q1": ["x1", "a2", "b1", "a2", "a1", "c1", "a3"],
                "q2": {"b2": 0.2, "x1": 0.2, "b1": 0.9}, "q3": ["x1", "a1"], "q4": ["a1"]}

    def measures(self):
        """(metric, k) for every registered measure, in each unit it counts
        (and cover=0.5 for evidence), at several cutoffs and, for those that
        take one, @all and a budget."""
        for name in rag_eval.available_measures():
            spec = rag_eval._REGISTRY[name]
            if spec.view in ("scores", "stages"):
                continue    # read from a score file, or joined with one (StagesTest)
            variants = [name]
            if "unit" in spec.options:
                variants = ["%s(unit=%s)" % (name, u) if u != "id" else name
                            for u in spec.options["unit"].choices]
                if "evidence" in spec.options["unit"].choices:
                    variants.append("%s(cover=0.5,unit=evidence)" % name)
            for variant in variants:
                for k in (1, 2, 3, 10):
                    yield variant, k
                if spec.cutoff:
                    yield variant + "@all", 1
                    yield variant.replace(")", ",budget=50)") if "(" in variant else \
                        variant + "(budget=50)", 1

    def evaluate(self, name, k, run=None, qrels=None):
        """Score ``name``: measures that count ids on the id fixture, the
        others on the chunk fixture."""
        measure = rag_eval.resolve_measures([name], k)[0]
        call = rag_eval._UnitCall.of(measure)
        if call.view == "id" and not call.budget:
            return rag_eval.evaluate(qrels or self.QRELS, run or self.RUN, k=k, metrics=[name],
                                     queries=self.QUERIES)
        if call.view == "id":       # a budget over ids: every id a chunk of 20 characters
            sized = [{"id": i, "doc": i, "start": 0, "end": 20} for i in "abcdefghixz"]
            return rag_eval.evaluate(qrels or self.QRELS, run or self.RUN, k=k, metrics=[name],
                                     chunks=sized, queries=self.QUERIES)
        return rag_eval.evaluate(qrels or self.SPAN_QRELS, run or self.SPAN_RUN, k=k,
                                 metrics=[name], chunks=self.CHUNKS, queries=self.QUERIES)

    def test_every_measure_and_unit_is_tried(self):
        tried = {str(rag_eval.parse_measure(n, k=k)) for n, k in self.measures()}
        self.assertIn("recall(cover=0.5,unit=evidence)@all", tried)
        self.assertIn("span_iou(budget=50)", tried)
        self.assertIn("diversity(unit=doc)@3", tried)

    def test_a_huge_cutoff_costs_what_the_ranking_costs(self):
        # k = 10**7 means "no cutoff" to some users: the discount table grows with
        # the ranks met, not with k, and the values equal those at k = 10.
        saved = rag_eval._DISCOUNTS
        rag_eval._DISCOUNTS = [0.0, 1.0]
        try:
            huge = rag_eval.evaluate(self.QRELS, self.RUN, k=10 ** 7, metrics=["ndcg", "recall"],
                                     queries=self.QUERIES)
            self.assertLess(len(rag_eval._DISCOUNTS), 100)
        finally:
            rag_eval._DISCOUNTS = saved
        ten = rag_eval.evaluate(self.QRELS, self.RUN, k=10, metrics=["ndcg", "recall"],
                                queries=self.QUERIES)
        self.assertEqual(list(huge.mean.values()), list(ten.mean.values()))

    def test_discount_table_is_replaced_not_changed(self):
        # Threads may read the table while another grows it.
        old = rag_eval._DISCOUNTS
        snapshot = list(old)
        grown = rag_eval._discounts(len(old) + 50)
        self.assertIsNot(grown, old)
        self.assertEqual(old, snapshot)
        for rank in (1, 2, 3, len(old) + 50):
            self.assertEqual(grown[rank], 1.0 / math.log2(rank + 1))

    def test_bound_measure_takes_grades(self):
        self.assertEqual(rag_eval.parse_measure("recall@2").bind()([1, -1, 1], (1, 1, 0)), 0.5)
        self.assertEqual(rag_eval.parse_measure("mrr@5").value([0, None, 2], [2, 0]), 1 / 3)

    def test_values_in_unit_interval(self):
        for name, k in self.measures():
            with self.subTest(measure=name, k=k):
                report = self.evaluate(name, k)
                self.assertTrue(report.per_query)
                for values in report.per_query.values():
                    for value in values.values():
                        self.assertTrue(0.0 <= value <= 1.0, value)

    def test_inputs_unchanged(self):
        saved = copy.deepcopy((self.QRELS, self.RUN, self.SPAN_QRELS, self.SPAN_RUN, self.CHUNKS))
        for name, k in self.measures():
            self.evaluate(name, k)
        self.assertEqual((self.QRELS, self.RUN, self.SPAN_QRELS, self.SPAN_RUN, self.CHUNKS),
                         saved)

    def test_query_order_irrelevant(self):
        reordered_qrels = dict(reversed(list(self.QRELS.items())))
        reordered_run = dict(reversed(list(self.RUN.items())))
        for name, k in self.measures():
            with self.subTest(measure=name, k=k):
                a = self.evaluate(name, k)
                spans = "unit=" in name or "span_" in name
                b = self.evaluate(name, k, qrels=dict(reversed(list(
                    (self.SPAN_QRELS if spans else self.QRELS).items()))), run=dict(
                    reversed(list((self.SPAN_RUN if spans else self.RUN).items()))))
                self.assertEqual(a.mean, b.mean)
                self.assertEqual(list(a.per_query), list(b.per_query))

    def test_empty_run_scores_zero(self):
        # Nothing returned: every measure of answerable queries is 0, every
        # measure of unanswerable ones 1 (abstaining is right there), and a
        # measure over both (the 3 answerable q1-q3 and q4) is abstention_f1's
        # mean of the abstain class's F1, 2 * 1/4 * 1 / (1/4 + 1), and the
        # answer class's, 0 (recall 0 of 3).
        empty = {q: [] for q in list(self.QRELS) + list(self.QUERIES)}
        expected = {"unanswerable": 1.0, "stated": (2 * 1 / 4 * 1 / (1 / 4 + 1) + 0) / 2}
        for name, k in self.measures():
            with self.subTest(measure=name, k=k):
                report = self.evaluate(name, k, run=empty)
                population = rag_eval._REGISTRY[rag_eval.parse_measure(name, k=k).name].population
                self.assertEqual(set(report.mean.values()), {expected.get(population, 0.0)})

    def test_perfect_run_scores_one_where_defined(self):
        # Every relevant id first, in grade order: every measure reaches 1.0 at
        # a k that covers them, and over the whole ranking.
        # Over chunks: each chunk is exactly one labelled span of its own document.
        # An unanswerable query u, perfectly handled: it abstains.
        qrels = {"q": {"a": 3, "b": 2, "c": 1}}
        run = {"q": ["a", "b", "c"], "u": []}
        spans = {"q": [{"doc": d, "start": 0, "end": 10, "grade": g} for d, g in qrels["q"].items()]}
        chunks = [{"id": d, "doc": d, "start": 0, "end": 10} for d in "abc"]
        queries = {"u": {"answerable": False}}
        for name, k in self.measures():
            if k != 3 and "@all" not in name:
                continue
            metric = str(rag_eval.parse_measure(name, k=k))
            with self.subTest(measure=metric):
                if rag_eval._UnitCall.of(rag_eval.parse_measure(metric)).view == "id":
                    report = rag_eval.evaluate(qrels, run, metrics=[metric], chunks=chunks,
                                               queries=queries)
                else:
                    report = rag_eval.evaluate(spans, run, metrics=[metric], chunks=chunks,
                                               queries=queries)
                self.assertAlmostEqual(report.mean[metric], 1.0, places=15)


class UnanswerableQueriesTest(TempDir, unittest.TestCase):
    """Answerability is stated, never inferred; abstention by each of its three
    signals (an empty ranking, --min-score, "abstained": true); the measures'
    populations; --min-score recorded like rel."""

    QRELS = ('{"query_id": "q1", "relevant": ["a"]}\n'
             '{"query_id": "q2", "relevant": ["b"]}\n'
             '{"query_id": "q9", "answerable": false}\n'
             '{"query_id": "q4"}\n')
    MEASURES = "recall@2,answered,abstained,clean@2,abstention_f1"

    def report(self, run, *extra):
        self.write("qrels.jsonl", self.QRELS)
        self.write("run.jsonl", run)
        code, out, err = run_cli(os.path.join(self.tmp, "qrels.jsonl"),
                                 os.path.join(self.tmp, "run.jsonl"), "--metrics",
                                 self.MEASURES, "--format", "json", "--allow-unlabelled-run",
                                 *extra)
        self.assertEqual(code, 0, err)
        return json.loads(out)

    def test_a_run_that_abstains_everywhere_is_scored(self):
        # Found by review: exit 2 ("every number would be 0") for the best
        # possible abstention, or a total loss to gate on.
        self.write("qrels.jsonl", self.QRELS)
        self.write("run.jsonl", '{"query_id": "q1", "scores": {"a": 0.2}}\n'
                                '{"query_id": "q9", "abstained": true}\n')
        code, out, err = run_cli(os.path.join(self.tmp, "qrels.jsonl"),
                                 os.path.join(self.tmp, "run.jsonl"), "--metrics",
                                 "abstained,answered", "--min-score", "0.5", "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mean"], {"abstained": 1.0, "answered": 0.0})
        code, _, err = run_cli(os.path.join(self.tmp, "qrels.jsonl"),
                               os.path.join(self.tmp, "run.jsonl"), "--metrics", "recall",
                               "--min-score", "0.5")
        self.assertEqual(code, 2)       # without an abstention measure: nothing to score
        self.assertIn("the run retrieved no id", err)

    def test_each_abstention_signal(self):
        # q1 answered (a at rank 1), q2 abstained on an answerable query, q9
        # (unanswerable) abstained: by an empty ranking, by "abstained": true,
        # or by --min-score 0.5 cutting its only id (0.3).
        runs = [('{"query_id": "q9", "docs": []}', ()),
                ('{"query_id": "q9", "abstained": true}', ()),
                ('{"query_id": "q9", "scores": {"x": 0.3}}', ("--min-score", "0.5"))]
        for line, extra in runs:
            with self.subTest(line=line):
                if extra:
                    head = ('{"query_id": "q1", "scores": {"a": 0.9}}\n'
                            '{"query_id": "q2", "scores": {"z": 0.2}}\n')
                else:
                    head = ('{"query_id": "q1", "docs": ["a"]}\n'
                            '{"query_id": "q2", "docs": []}\n')
                doc = self.report(head + line + "\n", *extra)
                # abstention_f1: abstain class: predicted {q2, q9}, true {q9}: P 1/2, R 1/1,
                # F1 2/3; answer class: predicted {q1}, true {q1, q2}: P 1, R 1/2, F1 2/3.
                self.assertEqual(doc["mean"], {"recall@2": 0.5, "answered": 0.5,
                                               "abstained": 1.0, "clean@2": 1.0,
                                               "abstention_f1": (2 / 3 + 2 / 3) / 2})
                self.assertEqual(doc["n"], {"recall@2": 2, "answered": 2, "abstained": 1,
                                            "clean@2": 1, "abstention_f1": 3})
                self.assertEqual(doc["answerability"],
                                 {"answerable": 2, "unanswerable": 1, "unstated": 1})
                self.assertEqual(doc["unscored"], ["q4"])
                self.assertEqual(doc.get("min_score"), 0.5 if extra else None)

    def test_junk_on_an_unanswerable_query(self):
        doc = self.report('{"query_id": "q1", "docs": ["a"]}\n'
                          '{"query_id": "q2", "docs": ["b"]}\n'
                          '{"query_id": "q9", "docs": ["x"]}\n')
        # clean@2 = 1 - 1/2; abstain class: true {q9}, none predicted: F1 0;
        # answer class: P 2/3, R 2/2, F1 2 * 2/3 / (5/3) = 4/5.
        self.assertEqual(doc["mean"]["clean@2"], 0.5)
        self.assertEqual(doc["mean"]["abstained"], 0.0)
        self.assertAlmostEqual(doc["mean"]["abstention_f1"], (0 + 4 / 5) / 2, places=15)

    def test_unanswerable_with_a_relevant_grade_is_an_error(self):
        self.write("q.jsonl", '{"query_id": "q1", "relevant": ["a"], "answerable": false}\n')
        self.write("r.jsonl", '{"query_id": "q1", "docs": ["a"]}\n')
        code, out, err = run_cli(os.path.join(self.tmp, "q.jsonl"),
                                 os.path.join(self.tmp, "r.jsonl"))
        self.assertEqual(code, 2)
        self.assertIn("'q1' is stated unanswerable", err)
        self.assertEqual(len(err.strip().splitlines()), 1)

    def test_min_score_needs_scores_and_a_matching_baseline(self):
        self.write("q.json", '{"q1": {"a": 1}}')
        self.write("r.json", '{"q1": ["a"]}')
        q, r = os.path.join(self.tmp, "q.json"), os.path.join(self.tmp, "r.json")
        code, _, err = run_cli(q, r, "--min-score", "0.5")
        self.assertEqual(code, 2)
        self.assertIn("needs scores", err)
        self.write("s.json", '{"q1": {"a": 0.9}}')
        s, b = os.path.join(self.tmp, "s.json"), os.path.join(self.tmp, "b.json")
        self.assertEqual(run_cli(q, s, "--min-score", "0.5", "--save-baseline", b)[0], 0)
        self.assertEqual(run_cli(q, s, "--min-score", "0.5", "--baseline", b)[0], 0)
        code, _, err = run_cli(q, s, "--min-score", "0.6", "--baseline", b)
        self.assertEqual(code, 2)
        self.assertIn("--min-score 0.5", err)

    def test_abstained_with_ids_is_an_error(self):
        self.write("qrels.jsonl", self.QRELS)
        self.write("run.jsonl", '{"query_id": "q9", "abstained": true, "docs": ["x"]}\n')
        code, _, err = run_cli(os.path.join(self.tmp, "qrels.jsonl"),
                               os.path.join(self.tmp, "run.jsonl"))
        self.assertEqual(code, 2)
        self.assertIn('"abstained": true with a non-empty docs', err)

    def test_every_text_report_shows_the_answerability_block(self):
        code, out, err = run_cli(example("qrels.json"), example("run.json"))
        self.assertIn("answerability\n  answerable  unanswerable  unstated\n  3 ", out)
        code, out, err = run_cli(example("qrels.json"), example("run.json"),
                                 "--format", "markdown")
        self.assertIn("answerability", out)


class SweepMinScoreTest(TempDir, unittest.TestCase):
    """--sweep-min-score (sweep_min_score): abstention_f1 and one retrieval
    measure with --min-score at "no cut" and at each distinct score; never gated."""

    QRELS = UnanswerableQueriesTest.QRELS   # q1 -> a, q2 -> b, q9 unanswerable, q4 unstated
    RUN = ('{"query_id": "q1", "scores": {"a": 0.5, "x": 0.9}}\n'
           '{"query_id": "q2", "scores": {"y": 0.7, "b": 0.3}}\n'
           '{"query_id": "q9", "scores": {"z": 0.6}}\n'
           '{"query_id": "q4", "scores": {"w": 0.4}}\n')
    # Stated: q1, q2 (answerable), q9 (unanswerable); recall@2 over q1, q2.
    # no cut, 0.3: nobody abstains: abstain class F1 0 (q9 not predicted);
    #   answer class P 2/3, R 2/2, F1 4/5: abstention_f1 (0 + 4/5) / 2 = 0.4;
    #   recall@2: q1 1 (a in its two), q2 1 (b): 1.0.
    # 0.4, 0.5: q2 loses b (0.3): recall@2 (1 + 0) / 2 = 0.5; abstention as above.
    # 0.6: q1 loses a (0.5): recall@2 0; q9 keeps z (0.6 >= 0.6): 0.4.
    # 0.7: q9 abstains, q1 [x], q2 [y] answer: both classes F1 1: 1.0; recall@2 0.
    # 0.9: q2 abstains too (y 0.7): abstain P 1/2, R 1, F1 2/3; answer P 1, R 1/2,
    #   F1 2/3: abstention_f1 2/3; recall@2 0.
    ROWS = [(None, 0.4, 1.0), (0.3, 0.4, 1.0), (0.4, 0.4, 0.5), (0.5, 0.4, 0.5),
            (0.6, 0.4, 0.0), (0.7, 1.0, 0.0), (0.9, 2 / 3, 0.0)]

    def cli(self, *extra, qrels=None, run=None):
        self.write("qrels.jsonl", self.QRELS if qrels is None else qrels)
        self.write("run.jsonl", self.RUN if run is None else run)
        return run_cli(os.path.join(self.tmp, "qrels.jsonl"), os.path.join(self.tmp, "run.jsonl"),
                       "--metrics", "abstained,recall@2", "--allow-unlabelled-run", *extra)

    def test_an_abstention_measure_cannot_be_swept_against_itself(self):
        code, _, err = self.cli("--sweep-min-score=abstention_f1")
        self.assertEqual(code, 2)
        self.assertIn("abstention_f1 is an abstention measure", err)

    def test_thresholds_come_from_the_queries_swept(self):
        # Found by review: a hold-out's scores became rows (and moved the cap).
        qrels = self.QRELS.replace('"relevant": ["a"]}', '"relevant": ["a"], "slices": {"s": "d"}}') \
            + '{"query_id": "h1", "relevant": ["d"], "slices": {"s": "h"}}\n'
        run = self.RUN + '{"query_id": "h1", "scores": {"d": 0.123}}\n'
        code, out, err = self.cli("--sweep-min-score", "--holdout", "s=h", "--format", "json",
                                  qrels=qrels, run=run)
        self.assertEqual(code, 0, err)
        self.assertNotIn(0.123, [row["min_score"] for row in json.loads(out)["sweep"]["rows"]])

    def assertRows(self, rows, measure="recall@2"):
        got = [(r["min_score"], r["abstention_f1"], r[measure]) for r in rows]
        self.assertEqual(len(got), len(self.ROWS))
        for (t, f1, value), (t0, f10, value0) in zip(got, self.ROWS):
            self.assertEqual(t, t0)
            self.assertAlmostEqual(f1, f10, places=15)
            self.assertEqual(value, value0)

    def test_hand_worked_table_in_json(self):
        code, out, err = self.cli("--format", "json", "--sweep-min-score")
        self.assertEqual(code, 0, err)
        sweep = json.loads(out)["sweep"]
        self.assertEqual(sweep["measure"], "recall@2")   # abstained skipped: an abstention measure
        self.assertEqual(sweep["distinct_scores"], 6)
        self.assertIn("flatters", sweep["notes"][0])
        self.assertRows(sweep["rows"])
        self.assertEqual(json.loads(out)["mean"], {"abstained": 0.0, "recall@2": 1.0})

    def test_text_table_and_named_measure(self):
        code, out, err = self.cli("--sweep-min-score=success@1")
        self.assertEqual(code, 0, err)
        table = out[out.index("--sweep-min-score"):].splitlines()
        self.assertEqual(table[1].split(), ["min_score", "abstention_f1", "success@1"])
        # success@1: the top id is x (q1) and y (q2) at every threshold: 0.
        self.assertEqual([line.split() for line in table[2:9]],
                         [["no", "cut", "0.4000", "0.0000"]] +
                         [[t, f1, "0.0000"] for t, f1 in
                          [("0.3", "0.4000"), ("0.4", "0.4000"), ("0.5", "0.4000"),
                           ("0.6", "0.4000"), ("0.7", "1.0000"), ("0.9", "0.6667")]])
        self.assertIn("note: a threshold chosen from this table flatters it", table[9])

    def test_library_function(self):
        sweep = rag_eval.sweep_min_score(
            rag_eval.load_qrels(io.StringIO(self.QRELS)), rag_eval.load_run(io.StringIO(self.RUN)),
            "recall@2", queries={"q9": {"answerable": False}})
        self.assertRows(sweep.to_dict()["rows"])

    def test_many_distinct_scores_are_capped_to_quantiles(self):
        sweep = rag_eval.sweep_min_score(
            rag_eval.load_qrels(io.StringIO(self.QRELS)), rag_eval.load_run(io.StringIO(self.RUN)),
            "recall@2", queries={"q9": {"answerable": False}}, max_thresholds=3)
        # ranks 0, 3, 5 of the six distinct scores 0.3 .. 0.9 (rank i * 5 / 2, rounded)
        self.assertEqual([row[0] for row in sweep.rows], [None, 0.3, 0.6, 0.9])
        self.assertIn("6 distinct scores: the rows are 3", sweep.notes[1])

    def test_deterministic(self):
        for fmt in ("json", "text", "markdown"):
            first, second = self.cli("--format", fmt, "--sweep-min-score"), \
                self.cli("--format", fmt, "--sweep-min-score")
            self.assertEqual(first, second)
            self.assertEqual(first[0], 0, first[2])

    def test_refusals(self):
        no_unanswerable = self.QRELS.replace(', "answerable": false', "")   # q9 unstated
        cases = [
            (("--sweep-min-score", "--baseline", "b.json"), {}, "is not gated"),
            (("--sweep-min-score", "--save-baseline", os.path.join(self.tmp, "s.json")), {},
             "is not gated"),
            (("--sweep-min-score", "--format", "trec"), {}, "trec_eval's layout"),
            (("--metrics", "recall@2", "--sweep-min-score"), {"qrels": no_unanswerable},
             "needs queries stated"),
            (("--sweep-min-score",), {"run": '{"query_id": "q1", "docs": ["a"]}\n'
                                               '{"query_id": "q9", "docs": ["z"]}\n'},
             "needs scores"),
            (("--sweep-min-score=recall", "--k", "1,5"), {}, "takes one measure"),
            (("--metrics", "abstained", "--sweep-min-score"), {}, "no --metrics measure"),
        ]
        for extra, inputs, expect in cases:
            with self.subTest(extra=extra):
                code, out, err = self.cli(*extra, **inputs)
                self.assertEqual(code, rag_eval.EXIT_ERROR, err)
                self.assertEqual(out, "")
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(expect, err)
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "s.json")))

    def test_a_run_from_stdin_is_swept_as_a_file(self):
        qrels = self.write("qrels.jsonl", self.QRELS)
        code, out, err = run_cli(qrels, "-", "--sweep-min-score=recall@2", stdin=self.RUN)
        self.assertEqual(code, 0, err)
        on_file = run_cli(qrels, self.write("run.jsonl", self.RUN), "--sweep-min-score=recall@2")
        self.assertEqual(out.replace("<stdin>", "run"), on_file[1].replace(
            os.path.join(self.tmp, "run.jsonl"), "run"))

    def test_a_threshold_that_keeps_only_unlabelled_ids(self):
        # Found by review: q1's top-scored id x is unlabelled; the row at 0.9 keeps only x,
        # which once stopped the sweep ("not one retrieved id carries a label").  recall@5
        # at 0.9: q1 keeps x, 0 of 1; at 0.5: x and a, 1 of 1.
        qrels = self.write("t.jsonl", jsonl({"query_id": "q1", "relevant": ["a"]},
                                            {"query_id": "q9", "answerable": False}))
        run = self.write("r.json", json.dumps({"q1": {"a": 0.5, "x": 0.9}, "q9": {"c": 0.2}}))
        code, out, err = run_cli(qrels, run, "--metrics", "recall@5", "--sweep-min-score",
                                 "--format", "json")
        self.assertEqual(code, 0, err)
        rows = {r["min_score"]: r for r in json.loads(out)["sweep"]["rows"]}
        self.assertEqual((rows[0.9]["recall@5"], rows[0.5]["recall@5"]), (0.0, 1.0))


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
            measures = [rag_eval.parse_measure(m) for m in expected["values"]]
            for name, spec in rag_eval._REGISTRY.items():
                if not spec.peers:
                    continue   # no peer computes it (context_precision): hand-worked values
                self.assertTrue(any(m.name == name for m in measures), name)
                if spec.cutoff:     # the whole ranking too (trec_eval's uncut forms)
                    self.assertTrue(any(m.name == name and m.k is rag_eval.ALL
                                        for m in measures), name)
