"""Answer stages (--answer FIELD, evaluate_stages): each query's stage, the stage
measures and their run-decided populations in the gate, the attribution of a
regression to retrieval or generation, every output format, baselines and
reports read back, --to-label, the errors, and the bundled example
(examples/stages).  The hand-worked numbers are in tests/data/hand_worked.json
(HandWorkedMeasuresTest)."""

import io
import json
import os
import re
import unittest

import rag_eval
from tests.support import HERE, TempDir, jsonl, run_cli

# Eight queries, k=2, as the first hand-worked stages case: q1-q3 pass, q4
# generation_miss, q5 and q6 retrieval_miss, q7 and q8 unsupported_pass.
QRELS = {"q%d" % i: {d: 1} for i, d in enumerate("abcdefgh", 1)}
RUN = {"q1": ["a", "x"], "q2": ["b"], "q3": ["x", "c"], "q4": ["d"], "q5": ["x", "y", "e"],
       "q6": [], "q7": ["x"], "q8": ["y", "z"]}
VERDICTS = {"q1": True, "q2": True, "q3": True, "q4": False, "q5": False, "q6": False,
            "q7": True, "q8": True}
# The retriever loses q1-q3's evidence, and their answers fail.
LOST = dict(RUN, q1=["x", "y"], q2=["z"], q3=["x", "y", "c"])
LOST_VERDICTS = dict(VERDICTS, q1=False, q2=False, q3=False)
GIVEN = "answer_given_evidence(field=correct)@2"
WITHOUT = "answer_without_evidence(field=correct)@2"
EXAMPLE = os.path.join(HERE, "examples", "stages")


def verdicts(values, field="correct"):
    return jsonl(*({"query_id": q, field: v} for q, v in values.items()))


class StagesCliTest(TempDir, unittest.TestCase):
    """--answer on the command line: the report, the gate, the formats."""

    def files(self, run=RUN, values=VERDICTS, qrels=QRELS, name=""):
        return (self.write("q%s.json" % name, json.dumps(qrels)),
                self.write("r%s.json" % name, json.dumps(run)),
                self.write("s%s.jsonl" % name, verdicts(values)))

    def cli(self, *argv, run=RUN, values=VERDICTS, qrels=QRELS, name="", code=0):
        q, r, s = self.files(run, values, qrels, name)
        got, out, err = run_cli(q, r, "--scores", s, *argv)
        self.assertEqual(got, code, err)
        return out, err

    def baseline(self, *argv):
        path = os.path.join(self.tmp, "base.json")
        self.cli("--answer", "correct", "--k", "2", "--save-baseline", path, *argv, name="0")
        return path

    def test_a_baseline_decides_the_measures_and_the_stage_k(self):
        # A baseline of retrieval alone takes --scores --answer: the answer field joins it.
        q, r, s = self.files(name="r")
        retrieval = os.path.join(self.tmp, "retrieval.json")
        self.assertEqual(run_cli(q, r, "--k", "2", "--save-baseline", retrieval)[0], 0)
        code, out, err = run_cli(q, r, "--scores", s, "--answer", "correct", "--stages-k", "2",
                                 "--baseline", retrieval, "--format", "json")
        self.assertEqual(code, 0, err)
        data = json.loads(out)
        self.assertIn("score(field=correct)", data["mean"])
        self.assertEqual(data["stages"]["k"], 2)
        # Without --k or --stages-k, --answer takes the baseline's stage k (2, not 5).
        base = self.baseline()
        code, out, err = run_cli(q, r, "--scores", s, "--answer", "correct", "--baseline", base,
                                 "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["stages"]["k"], 2)
        # A baseline gating a stage measure needs the judge's verdicts.
        staged = self.write("staged.json", json.dumps(
            {"recall@2": 0.5, "answer_given_evidence(field=correct)@2": 1.0}))
        code, out, err = run_cli(q, r, "--baseline", staged)
        self.assertEqual((code, out, err.count("\n")), (2, "", 1), err)
        self.assertIn("joins retrieval with the judge's verdicts: give --scores FILE", err)

    def test_the_stages_block(self):
        out, _ = self.cli("--answer", "correct", "--k", "2", "--format", "json", "--per-query")
        doc = json.loads(out)
        self.assertEqual(doc["stages"], {
            "field": "correct", "threshold": 0.5, "k": 2, "unit": "id", "evidence": "complete",
            "counts": {"pass": 3, "generation_miss": 1, "retrieval_miss": 2,
                       "unsupported_pass": 2},
            "apart": {"unanswerable": 0, "no_verdict": 0, "unlabelled": 0}, "slices": {},
            "per_query": {"q1": "pass", "q2": "pass", "q3": "pass", "q4": "generation_miss",
                          "q5": "retrieval_miss", "q6": "retrieval_miss",
                          "q7": "unsupported_pass", "q8": "unsupported_pass"}})
        self.assertEqual(doc["measures"][-3:], [GIVEN, WITHOUT, "score(field=correct)"])
        self.assertEqual((doc["mean"][GIVEN], doc["mean"][WITHOUT]), (3 / 4, 2 / 4))
        self.assertEqual((doc["n"][GIVEN], doc["n"][WITHOUT]), (4, 4))
        self.assertEqual(doc["per_query"]["q4"], {"recall@2": 1.0, "success@2": 1.0,
                                                  "mrr@2": 1.0, "ndcg@2": 1.0, GIVEN: 0.0,
                                                  "score(field=correct)": 0.0})
        out, _ = self.cli("--answer", "correct", "--k", "2", "--format", "json")
        self.assertNotIn("per_query", json.loads(out)["stages"])     # only with --per-query

    def test_the_plain_path_has_no_stages(self):
        out, _ = self.cli("--k", "2", "--format", "json")
        doc = json.loads(out)
        self.assertNotIn("stages", doc)
        self.assertFalse(any(m.startswith("answer_") for m in doc["measures"]))

    def test_text_and_markdown(self):
        out, _ = self.cli("--answer", "correct", "--k", "2")
        self.assertIn("answer stages: correct passes at >= 0.5; evidence: complete@2, every "
                      "relevant unit in the top 2\n  stage             queries  share", out)
        self.assertIn("  unsupported_pass  2        0.2500  not retrieved  passes: model memory, "
                      "or a missing label (--to-label lists them first)", out)
        base = self.baseline()
        out, _ = self.cli("--answer", "correct", "--k", "2", "--baseline", base, run=LOST,
                          values=LOST_VERDICTS, code=1)
        line = ("correct: 3 queries newly fail: 3 lost their evidence in the top 2 (retrieval), "
                "0 kept it (generation); 0 newly pass; McNemar p = 0.250")
        self.assertIn("\n%s\n" % line, out)
        self.assertRegex(out, r"score\(field=correct\) +0\.6250 +0\.2500 .*REGRESSED \(mostly "
                              r"retrieval\)")
        md, _ = self.cli("--answer", "correct", "--k", "2", "--baseline", base, "--format",
                         "markdown", run=LOST, values=LOST_VERDICTS, code=1)
        table, _, rest = md.partition("\n\n" + rag_eval._md_text(line) + "\n")
        self.assertIn("| score(field=correct) |", table)     # the line right below the gate table
        self.assertNotIn("<details>", table)
        self.assertIn("REGRESSED (mostly retrieval)", md)

    def test_json_attribution(self):
        base = self.baseline()
        out, _ = self.cli("--answer", "correct", "--k", "2", "--baseline", base, "--format",
                          "json", run=LOST, values=LOST_VERDICTS, code=1)
        gate = json.loads(out)["gate"]
        self.assertEqual(gate["attribution"], {"correct": {
            "k": 2, "paired": 8, "newly_failed": 3, "retrieval": 3, "lost_evidence": 3,
            "generation": 0, "kept_evidence": 0, "newly_passed": 0, "p": 0.25,
            "queries": {"retrieval": ["q1", "q2", "q3"], "generation": [], "newly_passed": []}}})
        stage = {c["measure"]: c["main_stage"] for c in gate["changes"]}
        self.assertEqual(stage["score(field=correct)"], "retrieval")
        self.assertEqual({m for m, s in stage.items() if s}, {"score(field=correct)"})

    def test_a_tie_is_alike(self):
        # q1 loses its evidence (retrieval), q2 keeps it and fails (generation).
        base = self.baseline()
        out, _ = self.cli("--answer", "correct", "--k", "2", "--baseline", base,
                          run=dict(RUN, q1=["x"]), values=dict(VERDICTS, q1=False, q2=False),
                          code=1)
        self.assertIn("REGRESSED (retrieval and generation alike)", out)
        self.assertIn("correct: 2 queries newly fail: 1 lost its evidence in the top 2 "
                      "(retrieval), 1 kept it (generation); 0 newly pass; McNemar p = 0.500", out)

    def test_the_population_a_query_enters_or_leaves_is_no_added_or_removed_query(self):
        base = self.baseline()
        out, _ = self.cli("--answer", "correct", "--k", "2", "--baseline", base, "--format",
                          "json", run=LOST, values=LOST_VERDICTS, code=1)
        gate = json.loads(out)["gate"]
        self.assertEqual((gate["per_query"]["queries_added"], gate["per_query"]["queries_removed"]),
                         ([], []))
        rows = {c["measure"]: c for c in gate["changes"]}
        # q1-q3 left answer_given_evidence: paired on q4, the one in it on both sides.
        self.assertEqual((rows[GIVEN]["n"], rows[GIVEN]["removed"], rows[GIVEN]["added"],
                          rows[GIVEN]["status"]), (1, 0, 0, "unchanged"))
        self.assertEqual((rows[WITHOUT]["n"], rows[WITHOUT]["status"]), (4, "unchanged"))
        self.assertFalse(any("no value now" in n or "with a value only now" in n
                             for n in gate["notes"]))

    def test_no_comparable_queries_does_not_fail(self):
        # Every evidence retrieved before, none now: answer_given_evidence shares no
        # query, answer_without_evidence had none: neither fails the gate.
        found = {q: [d] for q, d in zip(QRELS, "abcdefgh")}
        every = dict.fromkeys(QRELS, True)
        path = os.path.join(self.tmp, "all.json")
        names = "%s,%s,score(field=correct)" % (GIVEN, WITHOUT)
        self.cli("--answer", "correct", "--k", "2", "--metrics", names, "--save-baseline", path,
                 run=found, values=every, name="0")
        out, err = self.cli("--answer", "correct", "--k", "2", "--baseline", path, "--metrics",
                            names, "--format", "json",
                            "--allow-unlabelled-run", run={q: ["x"] for q in QRELS},
                            values=every)
        rows = {c["measure"]: c for c in json.loads(out)["gate"]["changes"]}
        self.assertEqual(rows[GIVEN]["status"], "no comparable queries")
        self.assertEqual(rows[GIVEN]["n"], 0)
        self.assertNotIn(WITHOUT, rows)      # the baseline has no mean for it: not gated
        self.assertTrue(json.loads(out)["gate"]["passed"])
        text, _ = self.cli("--answer", "correct", "--k", "2", "--baseline", path, "--metrics",
                           names, "--allow-unlabelled-run",
                           run={q: ["x"] for q in QRELS}, values=every)
        self.assertRegex(text, r"answer_given_evidence\(field=correct\)@2 +1\.0000 +- +- +0 +"
                               r"no comparable queries")

    def test_html_draws_one_stacked_bar_per_side(self):
        base = self.baseline()
        html, _ = self.cli("--answer", "correct", "--k", "2", "--baseline", base, "--format",
                           "html", run=LOST, values=LOST_VERDICTS, code=1)
        self.assertIn("<h3>Answer stages</h3>", html)
        self.assertIn("<title>baseline: pass 3 of 8 (0.3750)</title>", html)
        self.assertIn("<title>current: retrieval_miss 5 of 8 (0.6250)</title>", html)
        self.assertIn("<title>answer stages, current against baseline</title>", html)
        alone, _ = self.cli("--answer", "correct", "--k", "2", "--format", "html")
        self.assertIn("<title>answer stages, current</title>", alone)
        self.assertNotIn("baseline: pass", alone)
        self.assertNotIn("<script", html)

    def test_a_lower_is_better_field_passes_at_or_below(self):
        harm = dict(zip(QRELS, (1, 2, 4, 5, 1, 3, 2, 4)))
        q, r, _ = self.files()
        s = self.write("harm.jsonl", verdicts(harm, "harm"))
        for fmt, words in (("text", "harm passes at <= 2"), ("html", "harm passes at &lt;= 2")):
            code, out, err = run_cli(q, r, "--scores", s, "--score-range", "harm=5:1",
                                     "--answer", "harm", "--pass-threshold", "harm=2", "--k", "2",
                                     "--format", fmt)
            self.assertEqual(code, 0, err)
            self.assertIn(words, out)
        code, out, _ = run_cli(q, r, "--scores", s, "--score-range", "harm=5:1", "--answer",
                               "harm", "--pass-threshold", "harm=2", "--k", "2", "--format",
                               "json")
        # harm 1, 2 pass (<= 2), 4, 5 fail with their evidence; 1, 2 pass and 3, 4 fail without.
        self.assertEqual(json.loads(out)["stages"]["counts"], {
            "pass": 2, "generation_miss": 2, "retrieval_miss": 2, "unsupported_pass": 2})

    def test_to_label_lists_the_unsupported_passes_first(self):
        path = os.path.join(self.tmp, "label.jsonl")
        self.cli("--answer", "correct", "--k", "2", "--to-label", path)
        with open(path) as handle:
            rows = [json.loads(line) for line in handle]
        queries = [r["query_id"] for r in rows]
        self.assertEqual(queries, ["q7", "q8", "q8", "q3", "q5", "q1", "q5"])
        self.assertEqual([r["id"] for r in rows[:3]], ["x", "y", "z"])

    def test_a_baseline_keeps_each_query_stage_and_its_settings_are_adopted(self):
        base = self.baseline()
        with open(base) as handle:
            saved = json.load(handle)["stages"]
        self.assertEqual(saved["per_query"]["q4"], "generation_miss")
        self.assertEqual((saved["field"], saved["threshold"], saved["k"], saved["unit"],
                          saved["evidence"]), ("correct", 0.5, 2, "id", "complete"))
        given, _ = self.cli("--answer", "correct", "--k", "2", "--baseline", base, run=LOST,
                            values=LOST_VERDICTS, code=1)
        adopted, _ = self.cli("--k", "2", "--baseline", base, run=LOST, values=LOST_VERDICTS,
                              code=1)
        self.assertEqual(adopted, given)     # no --answer: the baseline's stage settings

    def test_a_baseline_with_other_stage_settings_is_refused(self):
        base = self.baseline()
        for argv, differs in (
                (("--stages-k", "1"), "k 2, now 1"),
                (("--pass-threshold", "correct=1"), "threshold 0.5, now 1"),
                (("--stages-evidence", "success"), "evidence complete, now success"),
                (("--unit", "doc", "--doc-sep", "#"), "unit id, now doc")):
            with self.subTest(argv=argv):
                saved = os.path.join(self.tmp, "never.json")
                q, r, s = self.files(name="2")
                code, out, err = run_cli(q, r, "--scores", s, "--answer", "correct", "--k", "2",
                                         "--baseline", base, "--save-baseline", saved, *argv)
                self.assertEqual(code, 2, err)
                self.assertEqual(out, "")
                self.assertEqual(err.count("\n"), 1, err)
                self.assertIn("base.json was saved with other answer stages: %s; give its "
                              "settings (--answer correct --pass-threshold correct=0.5 "
                              "--stages-k 2 --unit id --stages-evidence complete)" % differs, err)
                self.assertFalse(os.path.exists(saved))
        two = self.write("two.jsonl", jsonl(*({"query_id": q, "correct": v, "other": v}
                                              for q, v in VERDICTS.items())))
        q, r, _ = self.files(name="3")
        code, _, err = run_cli(q, r, "--scores", two, "--answer", "other", "--k", "2",
                               "--baseline", base)
        self.assertEqual(code, 2)
        self.assertIn("field correct, now other", err)

    def test_errors_are_one_line(self):
        q, r, s = self.files()
        label = os.path.join(self.tmp, "label.jsonl")
        cases = [
            ((q, r, "--answer", "correct"), "--answer only applies with --scores FILE"),
            ((q, r, "--scores", s, "--answer", "nosuch"),
             "--answer nosuch: no --scores file has the field 'nosuch' (fields: correct)"),
            (("--scores", s, "--answer", "correct"),
             "--answer joins retrieval with the judge's verdicts: give QRELS and RUN beside "
             "--scores"),
            ((q, r, "--scores", s, "--stages-k", "2"), "--stages-k only applies with --answer"),
            ((q, r, "--scores", s, "--answer", "correct", "--stages-k", "0"),
             "--stages-k (stages_k=) must be a positive integer, got '0'"),
            ((q, r, "--metrics", GIVEN), "%s joins retrieval with the judge's verdicts: give "
             "--scores FILE beside QRELS RUN" % GIVEN),
            ((q, r, "--scores", s, "--answer", "correct", "--pass-threshold", "correct=2"),
             "the pass threshold of correct, 2, is outside the range [0, 1] of correct"),
            ((q, r, "--scores", s, "--answer", "correct", "--average", "trec_eval",
              "--format", "trec"), "--answer: answer stages are not for --average trec_eval"),
            ((q, r, "--scores", s, "--metrics", "answer_given_evidence@2,score(field=correct)"),
             "answer_given_evidence needs field=..."),
            ((q, r, "--scores", s, "--answer", "correct", "--sweep-min-score=%s" % GIVEN),
             "--sweep-min-score: %s joins the judge's verdicts" % GIVEN),
        ]
        for argv, expect in cases:
            with self.subTest(argv=argv):
                code, out, err = run_cli(*argv, *(("--to-label", label) if argv[0] == q else ()))
                self.assertEqual(code, 2, err)
                self.assertEqual((out, err.count("\n")), ("", 1), err)
                self.assertIn(expect, err)
                self.assertNotIn("Traceback", err)
                self.assertFalse(os.path.exists(label))

    def test_verdicts_the_test_set_does_not_hold(self):
        # A stray verdict follows the stray-row rule; a verdict on a query of the
        # test set with no relevant label is a warning and no stage.
        stray = dict(VERDICTS, zz=True)
        q, r, s = self.files(values=stray)
        code, out, err = run_cli(q, r, "--scores", s, "--answer", "correct")
        self.assertEqual(code, 2)
        self.assertIn("s.jsonl: 1 query is not in the qrels: 'zz' "
                      "(check the files match, or skip them with --skip-extra-queries)", err)
        out, err = self.cli("--answer", "correct", "--skip-extra-queries", "--format", "json",
                            values=stray)
        self.assertIn("skipped 1 score-file query not in the qrels: 'zz'", err)
        self.assertNotIn("verdicts of", err)        # said once, by the stray rule
        self.assertNotIn("zz", json.loads(out)["stages"].get("per_query", {}))
        unlabelled = dict(QRELS, q9={})
        out, err = self.cli("--answer", "correct", "--format", "json", "--per-query",
                            qrels=unlabelled, values=dict(VERDICTS, q9=True))
        self.assertIn("1 query has a correct verdict and no relevant label: in no stage (label "
                      "them to see their stage): 'q9'", err)
        stages = json.loads(out)["stages"]
        self.assertEqual(stages["apart"]["unlabelled"], 1)
        self.assertNotIn("q9", stages["per_query"])

    def test_a_missing_verdict_follows_the_scores_rule(self):
        partial = {q: v for q, v in VERDICTS.items() if q != "q4"}
        q, r, s = self.files(values=partial)
        code, _, err = run_cli(q, r, "--scores", s, "--answer", "correct")
        self.assertEqual(code, 2)
        self.assertIn("no correct score: 'q4' (--allow-missing-scores lists them as unscored)",
                      err)
        out, _ = self.cli("--answer", "correct", "--k", "2", "--allow-missing-scores",
                          "--format", "json", values=partial)
        stages = json.loads(out)["stages"]
        self.assertEqual((stages["apart"]["no_verdict"], stages["counts"]["generation_miss"]),
                         (1, 0))

    def test_stage_measure_names(self):
        out, _ = self.cli("--answer", "correct", "--k", "1,3", "--format", "json")
        self.assertEqual(json.loads(out)["measures"][-3:],
                         ["answer_given_evidence(field=correct)@1",
                          "answer_without_evidence(field=correct)@1", "score(field=correct)"])
        out, _ = self.cli("--answer", "correct", "--k", "1,3", "--stages-k", "3",
                          "--stages-evidence", "success", "--pass-threshold", "correct=1",
                          "--format", "json")
        self.assertEqual(json.loads(out)["measures"][-3:-1], [
            "answer_given_evidence(evidence=success,field=correct,threshold=1.0)@3",
            "answer_without_evidence(evidence=success,field=correct,threshold=1.0)@3"])
        # --metrics names them: what a name leaves out comes from the options; the
        # threshold at the midpoint is the default, left out.
        out, _ = self.cli("--answer", "correct", "--metrics",
                          "recall@2,answer_given_evidence(threshold=0.5)@1", "--format", "json")
        doc = json.loads(out)
        self.assertEqual(doc["measures"], ["recall@2", "answer_given_evidence(field=correct)@1",
                                           "score(field=correct)"])
        self.assertEqual(doc["stages"]["k"], 5)     # the stages' own cutoff: the smallest --k

    def test_slices_and_the_holdout(self):
        queries = self.write("meta.jsonl", jsonl(
            *({"query_id": q, "slices": {"half": "one" if i < 5 else "two"}}
              for i, q in enumerate(QRELS, 1)),
            {"query_id": "h1", "slices": {"split": "holdout"}}))
        qrels = dict(QRELS, h1={"hh": 1})
        out, err = self.cli("--answer", "correct", "--k", "2", "--queries", queries, "--by",
                            "half", "--holdout", "split=holdout", "--format", "json",
                            "--per-query", qrels=qrels, run=dict(RUN, h1=["hh"]),
                            values=dict(VERDICTS, h1=True))
        stages = json.loads(out)["stages"]
        self.assertEqual(stages["slices"]["half=one"], {"pass": 3, "generation_miss": 1,
                                                        "retrieval_miss": 0,
                                                        "unsupported_pass": 0})
        self.assertEqual(stages["holdout"], {"slice": "split=holdout", "counts": {
            "pass": 1, "generation_miss": 0, "retrieval_miss": 0, "unsupported_pass": 0}})
        self.assertNotIn("h1", out + err)
        text, _ = self.cli("--answer", "correct", "--k", "2", "--queries", queries, "--by",
                           "half", "--holdout", "split=holdout", qrels=qrels,
                           run=dict(RUN, h1=["hh"]), values=dict(VERDICTS, h1=True))
        self.assertIn("answer stages by half: queries (share)\n  half  pass        "
                      "generation_miss  retrieval_miss  unsupported_pass\n  one   3 (0.7500)",
                      text)
        self.assertIn("the hold-out split=holdout, apart (not in the rows above): pass 1", text)


class StagesLibraryTest(TempDir, unittest.TestCase):
    """evaluate_stages, Report.stages, GateResult.attribution, reports read back."""

    def scores(self, values=VERDICTS):
        return rag_eval.load_scores(io.StringIO(verdicts(values)))

    def report(self, run=RUN, values=VERDICTS, **options):
        return rag_eval.evaluate_stages(QRELS, run, self.scores(values), "correct", k=2,
                                        **options)

    def test_a_score_line_of_another_query_is_refused_or_skipped_as_on_the_command_line(self):
        scores = rag_eval.load_scores(io.StringIO(
            '{"query_id": "q1", "ok": true}\n{"query_id": "zz", "ok": true}\n'))
        with self.assertRaisesRegex(rag_eval.EvalError, "1 query is not in the qrels: 'zz'"):
            rag_eval.evaluate_stages({"q1": {"a": 1}}, {"q1": ["a"]}, scores, "ok", k=1,
                                     measures="recall")
        report = rag_eval.evaluate_stages({"q1": {"a": 1}}, {"q1": ["a"]}, scores, "ok", k=1,
                                          measures="recall", skip_extra_queries=True)
        self.assertEqual(report.warnings,
                         ("<stream>: skipped 1 score-file query not in the qrels: 'zz'",))
        self.assertEqual(report.stages["counts"]["pass"], 1)

    def test_report_and_gate(self):
        before, after = self.report(), self.report(LOST, LOST_VERDICTS)
        self.assertEqual(after.stages["counts"]["retrieval_miss"], 5)
        baseline = rag_eval.load_baseline(io.StringIO(json.dumps(rag_eval.baseline_dict(before))))
        result = rag_eval.gate(after, baseline)
        self.assertFalse(result.passed)
        self.assertEqual(result.attribution["correct"]["lost_evidence"], 3)
        self.assertIn("GateResult", repr(result))

    def test_evaluate_refuses_a_stage_measure(self):
        for call in (lambda: rag_eval.evaluate(QRELS, RUN, measures=[GIVEN]),
                     lambda: rag_eval.evaluate_files(io.StringIO(json.dumps(QRELS)),
                                                     io.StringIO(json.dumps(RUN)),
                                                     measures=[GIVEN])):
            with self.assertRaisesRegex(rag_eval.EvalError, "joins retrieval with the judge's "
                                        "verdicts: score it with evaluate_stages"):
                call()

    def test_evaluate_stages_checks_its_arguments(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "scores must be a Scores"):
            rag_eval.evaluate_stages(QRELS, RUN, {"q1": 1.0}, "correct")
        with self.assertRaisesRegex(rag_eval.EvalError, "no score file has the field 'nope'"):
            rag_eval.evaluate_stages(QRELS, RUN, self.scores(), "nope")
        with self.assertRaisesRegex(rag_eval.EvalError, "apply with answer="):
            rag_eval.evaluate_stages(QRELS, RUN, self.scores(), stages_k=2)
        with self.assertRaisesRegex(rag_eval.EvalError, "names no measure of the run"):
            rag_eval.evaluate_stages(QRELS, RUN, self.scores(), measures="score(field=correct)")
        # Without answer=: both tiers in one report, no stages block.
        both = rag_eval.evaluate_stages(QRELS, RUN, self.scores(), k=2)
        self.assertIsNone(both.stages)
        self.assertEqual(both.measures[-1], "score(field=correct)")

    def test_a_json_report_reads_back_and_gates_as_the_run(self):
        before, after = self.report(), self.report(LOST, LOST_VERDICTS)
        baseline = rag_eval.load_baseline(io.StringIO(json.dumps(rag_eval.baseline_dict(before))))
        loaded = rag_eval.load_report(io.StringIO(rag_eval.render_json(after, per_query=True)))
        self.assertEqual(loaded.stages, after.stages)
        self.assertEqual(rag_eval.gate(loaded, baseline).attribution,
                         rag_eval.gate(after, baseline).attribution)
        means = rag_eval.load_report(io.StringIO(rag_eval.render_json(after)))
        result = rag_eval.gate(means, baseline)
        self.assertIsNone(result.attribution)
        self.assertIn("answer stages: the report keeps no per-query stages, so no attribution "
                      "(write it with --per-query)", result.notes)

    def test_a_stages_block_read_back_is_checked(self):
        doc = json.loads(rag_eval.render_json(self.report(), per_query=True))
        for path, value, expect in (
                (("counts", "pass"), -1, "stages counts: expected a count for each"),
                (("evidence",), "some", "stages evidence: expected one of complete, success"),
                (("per_query", "q1"), "fine", "stages per_query: expected {query: stage}"),
                (("per_query", "q1"), "retrieval_miss", "the counts are not those of per_query"),
                (("k",), 0, "stages k must be a positive integer")):
            with self.subTest(path=path, value=value):
                bad = json.loads(json.dumps(doc))
                target = bad["stages"]
                for key in path[:-1]:
                    target = target[key]
                target[path[-1]] = value
                with self.assertRaisesRegex(rag_eval.EvalError, re.escape(expect)):
                    rag_eval.load_report(io.StringIO(json.dumps(bad)))

    def test_gate_notes_when_one_side_has_no_stages(self):
        plain = rag_eval.Baseline(dict(self.report().mean))
        self.assertIn("the baseline holds no answer stages: save it again with --answer "
                      "correct to see which stage the answers that change break at",
                      rag_eval.gate(self.report(), plain).notes)


class StagesExampleTest(unittest.TestCase):
    """examples/stages: the README's numbers (its commands run in DocsTest)."""

    def report(self, side):
        return rag_eval.evaluate_stages(
            rag_eval.load_qrels(os.path.join(EXAMPLE, "testset.jsonl")),
            rag_eval.load_run(os.path.join(EXAMPLE, "run-%s.jsonl" % side)),
            rag_eval.load_scores(os.path.join(EXAMPLE, "judge-%s.jsonl" % side)), "correct",
            k=3, queries=rag_eval.load_queries(os.path.join(EXAMPLE, "testset.jsonl")))

    def test_the_numbers_of_the_readme(self):
        main, pull = self.report("a"), self.report("b")
        self.assertEqual(main.stages["counts"], {"pass": 8, "generation_miss": 1,
                                                 "retrieval_miss": 1, "unsupported_pass": 1})
        self.assertEqual(pull.stages["counts"], {"pass": 5, "generation_miss": 1,
                                                 "retrieval_miss": 4, "unsupported_pass": 1})
        self.assertEqual(pull.stages["apart"]["unanswerable"], 1)
        self.assertEqual((main.mean["score(field=correct)"], pull.mean["score(field=correct)"]),
                         (10 / 12, 7 / 12))
        baseline = rag_eval.load_baseline(os.path.join(EXAMPLE, "baseline.json"))
        self.assertEqual(baseline.stages["per_query"], main.stages["per_query"])
        result = rag_eval.gate(pull, baseline)
        a = result.attribution["correct"]
        self.assertEqual((a["newly_failed"], a["retrieval"], a["lost_evidence"], a["generation"],
                          a["kept_evidence"], a["newly_passed"]), (4, 3, 3, 1, 1, 1))
        self.assertEqual(a["p"], 12 / 32)
        self.assertEqual(a["queries"], {"retrieval": ["q01", "q02", "q03"],
                                        "generation": ["q04"], "newly_passed": ["q07"]})
        given = next(c for c in result.changes if c.slice is None
                     and c.measure == "answer_given_evidence(field=correct)@3")
        self.assertEqual((given.baseline, given.current, given.n, given.status),
                         (5 / 6, 5 / 6, 6, "unchanged"))

    def test_to_label_lists_q09_first(self):
        folder = os.path.join(HERE, "examples", "stages")
        out = os.path.join(HERE, "tests", "__stages_label.jsonl")
        try:
            code, _, err = run_cli(*(os.path.join(folder, f) for f in ("testset.jsonl",
                                                                     "run-b.jsonl")),
                                   "--scores", os.path.join(folder, "judge-b.jsonl"), "--answer",
                                   "correct", "--k", "3", "--to-label", out)
            self.assertEqual(code, 0, err)
            with open(out) as handle:
                rows = [json.loads(line) for line in handle]
        finally:
            if os.path.exists(out):
                os.unlink(out)
        self.assertEqual([r["query_id"] for r in rows[:3]], ["q09"] * 3)
        self.assertNotIn("q09", [r["query_id"] for r in rows[3:]])


if __name__ == "__main__":
    unittest.main()
