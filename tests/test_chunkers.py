"""Two chunkers compared fairly (issue 23): each --compare run with its own
chunk map (--compare-chunks), lost evidence and context budgets reported per
side, and span labels narrowed past whitespace (--trim-label-whitespace)."""

import io
import json
import os
import unittest

import rag_eval
from tests.support import HERE, TempDir, jsonl, run_cli

RECHUNK = os.path.join(HERE, "examples", "rechunk")


def rechunk(name):
    return os.path.join(RECHUNK, name)


# The bundled chunkers, A against B, each with its own map.
BOTH_CHUNKERS = (rechunk("labels.jsonl"), rechunk("run-a.jsonl"), "--chunks",
                 rechunk("chunks-a.jsonl"), "--compare", rechunk("run-b.jsonl"),
                 "--compare-chunks", rechunk("chunks-b.jsonl"))


class CompareChunksTest(TempDir, unittest.TestCase):
    """--compare RUN --compare-chunks MAP: the other run scored on its own map."""

    def test_the_bundled_chunkers_compare_each_on_its_own_map(self):
        # without its map, run B's ids are not in chunker A's: exit 2
        code, _, err = run_cli(*BOTH_CHUNKERS[:6], "--metrics", "recall(unit=evidence)@3")
        self.assertEqual(code, rag_eval.EXIT_ERROR)
        self.assertIn("retrieved id 'refund-policy.md#b2' is not in the chunk map", err)
        code, out, err = run_cli(*BOTH_CHUNKERS, "--metrics",
                                 "recall(unit=evidence),span_recall", "--k", "3,5",
                                 "--format", "json")
        self.assertEqual(code, 0, err)
        with open(rechunk("expected.json")) as handle:
            expected = json.load(handle)     # examples/rechunk/expected.py, per run
        data = json.loads(out)
        rows = data["comparison"][0]["measures"]
        for name, row in rows.items():
            self.assertAlmostEqual(row["mean"], expected["run-a"]["mean"][name], places=12)
            self.assertAlmostEqual(row["reference_mean"], expected["run-b"]["mean"][name],
                                   places=12)
        self.assertEqual(data["inputs"]["chunks"]["path"], rechunk("chunks-a.jsonl"))
        self.assertEqual(data["comparison"][0]["mapping"]["uncoverable"], {})

    def test_one_map_per_compare_run_or_none(self):
        base = ["--metrics", "recall(unit=doc)@3"]
        for argv, expect in [
                (BOTH_CHUNKERS + ("--compare-chunks", rechunk("chunks-a.jsonl")),
                 "2 --compare-chunks for 1 --compare: give one chunk map per --compare run, "
                 "paired by order, or none"),
                (BOTH_CHUNKERS[:4] + BOTH_CHUNKERS[6:], "1 --compare-chunks for 0 --compare"),
                (BOTH_CHUNKERS[:6] + ("--compare-chunks", ""),
                 "--compare-chunks: the file name is empty"),
                (BOTH_CHUNKERS[:6] + ("--compare-chunks", "-", "--queries", "-"),
                 "only one input can come from stdin")]:
            with self.subTest(expect=expect):
                code, out, err = run_cli(*argv, *base)
                self.assertEqual(code, rag_eval.EXIT_ERROR, err)
                self.assertEqual(out, "")
                self.assertIn(expect, err)
        out_path = os.path.join(self.tmp, "x.json")
        code, _, err = run_cli(*BOTH_CHUNKERS[:6], "--compare-chunks", out_path, "-o", out_path,
                               *base)
        self.assertEqual(code, rag_eval.EXIT_ERROR)
        self.assertIn("would overwrite the --compare-chunks input", err)
        scores = self.write("s.jsonl", '{"query_id": "q1", "ok": 0.5}\n')
        code, _, err = run_cli("--scores", scores, "--compare", scores, "--compare-chunks",
                               rechunk("chunks-a.jsonl"))
        self.assertEqual(code, rag_eval.EXIT_ERROR)
        self.assertIn("--compare-chunks applies to QRELS and a RUN, not to --scores alone", err)

    def lost_on_one_side(self):
        """A labelled span [10, 30) of d.md: chunker A holds it in one chunk;
        chunker B's chunks [0, 20) and [21, 40) skip character 20, so no chunk
        of B can deliver it whole (lost at ingestion, not by the retriever)."""
        labels = self.write("l.jsonl", jsonl({"query_id": "q1", "doc": "d.md", "start": 10,
                                              "end": 30, "grade": 1}))
        map_a = self.write("a.jsonl", jsonl({"id": "a1", "doc": "d.md", "start": 0, "end": 40}))
        map_b = self.write("b.jsonl", jsonl({"id": "b1", "doc": "d.md", "start": 0, "end": 20},
                                            {"id": "b2", "doc": "d.md", "start": 21, "end": 40}))
        run_a = self.write("ra.json", '{"q1": ["a1"]}')
        run_b = self.write("rb.json", '{"q1": ["b1", "b2"]}')
        return labels, run_a, map_a, run_b, map_b

    def test_lost_evidence_is_reported_per_side(self):
        # issue 23: one map for both (concatenated) hid which side lost the span
        labels, run_a, map_a, run_b, map_b = self.lost_on_one_side()
        code, out, err = run_cli(labels, run_a, "--chunks", map_a, "--compare", run_b,
                                 "--compare-chunks", map_b, "--metrics",
                                 "recall(unit=evidence)@2", "--format", "json")
        self.assertEqual(code, 0, err)
        data = json.loads(out)
        self.assertEqual(data["mapping"]["uncoverable"], {})
        self.assertEqual(data["comparison"][0]["mapping"]["uncoverable"],
                         {"q1": [["d.md", 10, 30]]})
        row = data["comparison"][0]["measures"]["recall(unit=evidence)@2"]
        self.assertEqual((row["mean"], row["reference_mean"]), (1.0, 0.0))
        self.assertEqual(data["comparison"][0]["notes"], [
            "lost at ingestion (labelled evidence no chunk of the side's map can deliver, "
            "scored as misses; see mapping.uncoverable): run 0 queries, reference 1 query"])
        self.assertIn("rag-eval: warning: %s: 1 query has labelled evidence that no chunk of "
                      "the map holds: lost at ingestion" % run_b, err)
        self.assertEqual(err.count("lost at ingestion"), 1)     # run A lost nothing
        code, out, _ = run_cli(labels, run_a, "--chunks", map_a, "--compare", run_b,
                               "--compare-chunks", map_b, "--metrics",
                               "recall(unit=evidence)@2")
        self.assertIn("note: lost at ingestion (labelled evidence no chunk of the side's map "
                      "can deliver", out)

    def test_to_label_names_each_run_s_documents_by_its_own_map(self):
        qrels = self.write("q.json", '{"q1": {"A": 1}}')
        map_a = self.write("a.jsonl", jsonl({"id": "a1", "doc": "A"}))
        map_b = self.write("b.jsonl", jsonl({"id": "b7", "doc": "B"}, {"id": "b8", "doc": "A"}))
        run_a = self.write("ra.json", '{"q1": ["a1"]}')
        run_b = self.write("rb.json", '{"q1": ["b7", "b8"]}')
        rows = os.path.join(self.tmp, "rows.jsonl")
        code, _, err = run_cli(qrels, run_a, "--chunks", map_a, "--compare", run_b,
                               "--compare-chunks", map_b, "--metrics", "recall(unit=doc)@2",
                               "--to-label", rows)
        self.assertEqual(code, 0, err)
        with open(rows) as handle:
            # b8 is in document A, labelled: judged; b7 is in B (by run B's map), not
            # in the qrels: to label.  By map A, b7 would be a document of its own.
            self.assertEqual([json.loads(line) for line in handle],
                             [{"query_id": "q1", "id": "b7", "doc": "B", "best_rank": 1,
                               "runs": [run_b], "grade": None}])


    def test_to_label_takes_each_run_s_chunk_texts_from_its_own_map(self):
        # Both chunkers name chunks doc#N: e.md#0 is another chunk in each map.
        qrels = self.write("q.jsonl", jsonl({"query_id": "q1", "doc": "d.md", "start": 0,
                                             "end": 5, "grade": 1}))
        map_a = self.write("a.jsonl", jsonl(
            {"id": "d.md#0", "doc": "d.md", "start": 0, "end": 10, "text": "dddd of A"},
            {"id": "e.md#0", "doc": "e.md", "start": 0, "end": 10, "text": "eeeee from A map"}))
        map_b = self.write("b.jsonl", jsonl(
            {"id": "e.md#0", "doc": "e.md", "start": 0, "end": 4, "text": "ee B"},
            {"id": "e.md#1", "doc": "e.md", "start": 4, "end": 20, "text": "B's second chunk"}))
        run_a = self.write("ra.json", '{"q1": ["d.md#0"]}')
        run_b = self.write("rb.json", '{"q1": ["e.md#0", "e.md#1"]}')
        rows = os.path.join(self.tmp, "rows.jsonl")
        code, _, err = run_cli(qrels, run_a, "--chunks", map_a, "--compare", run_b,
                               "--compare-chunks", map_b, "--metrics", "recall(unit=evidence)@2",
                               "--to-label", rows, "--allow-unlabelled-run")
        self.assertEqual(code, 0, err)
        with open(rows) as handle:
            self.assertEqual([(r["id"], r["start"], r["end"], r["text"])
                              for r in map(json.loads, handle)],
                             [("e.md#0", 0, 4, "ee B"), ("e.md#1", 4, 20, "B's second chunk")])


class BudgetUseTest(TempDir, unittest.TestCase):
    """A budget a run cannot fill is said: the context used, per side."""

    def test_the_bundled_chunkers_at_a_budget_of_220_tokens(self):
        # Tokens of the 6 chunks retrieved per query (chunks-*.jsonl):
        #   A: 214 214 207 217 214 193 215 215: each fits whole, so used = all of them,
        #      mean 1689/8 = 211.125; every one is below 220: 8 of 8 ran out.
        #   B: q1 36+34+46+45+29 = 190 (+47 > 220), q2 47+75+47+36 = 205 (+34),
        #      q3 180 (all 6: ran out), q4 201 (all 6: ran out), q5 75+27+19+47+34 = 202
        #      (+33), q6 33+47+23+75+27 = 205 (+29), q7 33+27+75+47 = 182 (+47),
        #      q8 46+36+29+37+34 = 182 (+45): mean 1547/8 = 193.375, 2 of 8 ran out.
        name = "recall(budget=220,unit=evidence)"
        code, out, err = run_cli(*BOTH_CHUNKERS, "--metrics", name, "--format", "json")
        self.assertEqual(code, 0, err)
        data = json.loads(out)
        self.assertEqual(data["budget"], {name: {"budget": 220, "used": 211.125, "ran_out": 8,
                                                 "queries": 8, "unit": "tokens"}})
        self.assertEqual(data["comparison"][0]["budget"],
                         {name: {"budget": 220, "used": 193.375, "ran_out": 2, "queries": 8,
                                 "unit": "tokens"}})
        self.assertIn("rag-eval: warning: %s: 8 of 8 queries ran out of retrieved chunks "
                      "before the budget (all their retrieved chunks together hold fewer than "
                      "220 tokens), so they are scored on less context: 211.1 tokens used on "
                      "average; retrieve deeper to compare at equal cost" % name, err)
        self.assertIn("rag-eval: warning: %s: %s: 2 of 8 queries ran out" % (
            rechunk("run-b.jsonl"), name), err)
        self.assertIn("%s: context used 211.1 (run) and 193.4 (reference) of 220 tokens on "
                      "average; ran out of retrieved chunks before the budget on 8 of 8 (run) "
                      "and 2 of 8 (reference) queries: the run and the reference are scored on "
                      "less context; retrieve deeper to compare at equal cost" % name,
                      data["comparison"][0]["notes"])
        code, out, err = run_cli(*BOTH_CHUNKERS[:4], "--metrics", name)
        self.assertIn("context used against the budget (mean over the scored queries)\n"
                      "  measure                           budget      used   ran out\n"
                      "  %s  220 tokens  211.1  8 of 8\n" % name, out)

    def test_used_and_ran_out_by_hand_in_characters(self):
        # sizes end - start (no tokens), budget 100:
        #   q1: 50, 30 fit (80), 40 more would be 120: used 80, did not run out
        #   q2: 20, all it retrieved: used 20, ran out
        #   q3: not in the run: used 0, ran out (it is scored 0 all the same)
        #   h1: held out: in no number but its own means
        chunks = [{"id": "a", "doc": "A", "start": 0, "end": 50},
                  {"id": "b", "doc": "A", "start": 50, "end": 80},
                  {"id": "c", "doc": "B", "start": 0, "end": 40},
                  {"id": "d", "doc": "C", "start": 0, "end": 20}]
        qrels = {"q1": {"A": 1}, "q2": {"C": 1}, "q3": {"A": 1}, "h1": {"A": 1}}
        run = {"q1": ["a", "b", "c"], "q2": ["d"], "h1": ["d"]}
        queries = {"h1": {"slices": {"split": ["holdout"]}}}
        report = rag_eval.evaluate(qrels, run, measures="recall(budget=100,unit=doc)",
                                   chunks=chunks, queries=queries, holdout="split=holdout")
        self.assertEqual(report.budget, {"recall(budget=100,unit=doc)": {
            "budget": 100, "used": 100 / 3, "ran_out": 2, "queries": 3, "unit": "characters"}})
        self.assertIn("recall(budget=100,unit=doc): 2 of 3 queries ran out of retrieved "
                      "chunks before the budget (all their retrieved chunks together hold "
                      "fewer than 100 characters), so they are scored on less context: 33.3 "
                      "characters used on average", " ".join(report.warnings))
        # at 20, q1 and q2 fill the budget; q3, missing from the run, cannot
        full = rag_eval.evaluate(qrels, run, measures="recall(budget=20,unit=doc)",
                                 chunks=chunks)
        self.assertEqual(full.budget["recall(budget=20,unit=doc)"]["ran_out"], 1)   # q3
        self.assertIsNone(rag_eval.evaluate(qrels, run, k=2, measures="recall(unit=doc)",
                                            chunks=chunks).budget)

    def test_the_budget_block_reads_back(self):
        report = rag_eval.evaluate({"q1": {"A": 1}}, {"q1": ["a"]},
                                   measures="recall(budget=100,unit=doc)",
                                   chunks=[{"id": "a", "doc": "A", "tokens": 30}])
        data = json.loads(rag_eval.render_json(report, per_query=True))
        self.assertEqual(data["budget"], {"recall(budget=100,unit=doc)": {
            "budget": 100, "used": 30.0, "ran_out": 1, "queries": 1, "unit": "tokens"}})
        self.assertEqual(rag_eval.load_report(io.StringIO(json.dumps(data))).budget,
                         report.budget)
        data["budget"]["recall(budget=100,unit=doc)"]["ran_out"] = -1
        with self.assertRaisesRegex(rag_eval.EvalError, "ran_out: expected a count"):
            rag_eval.load_report(io.StringIO(json.dumps(data)))


class TrimLabelWhitespaceTest(TempDir, unittest.TestCase):
    """--trim-label-whitespace: span labels that carry their text narrowed past
    the whitespace at its ends."""

    DOC = "Intro.\n\nRefunds are due in 14 days.\nMore text here."

    def files(self, **label):
        """Labels of one span, "\\nRefunds are due in 14 days.\\n" ([7, 36): it
        begins and ends with a line break), and a map whose splitter strips
        whitespace: c2 holds "Refunds are due in 14 days." ([8, 35))."""
        record = {"query_id": "q1", "doc": "d.md", "start": 7, "end": 36, "grade": 1,
                  "text": self.DOC[7:36]}
        record.update(label)
        record = {key: value for key, value in record.items() if value is not None}
        assert self.DOC[8:35] == "Refunds are due in 14 days."
        return (self.write("l.jsonl", jsonl(record)), self.write("r.json", '{"q1": ["c2"]}'),
                "--chunks", self.write("c.jsonl", jsonl(
                    {"id": "c1", "doc": "d.md", "start": 0, "end": 6},
                    {"id": "c2", "doc": "d.md", "start": 8, "end": 35})))

    MEASURES = ("--metrics", "recall(unit=evidence)@1,span_recall@1", "--format", "json")

    def test_a_span_that_begins_and_ends_with_whitespace(self):
        files = self.files()
        # as written, cover stays exact: 27 of the 29 characters, not found, and lost at
        # ingestion over the two line breaks
        code, out, err = run_cli(*files, *self.MEASURES)
        self.assertEqual(code, 0, err)
        data = json.loads(out)
        self.assertEqual(data["mean"], {"recall(unit=evidence)@1": 0.0,
                                        "span_recall@1": 27 / 29})
        self.assertEqual(data["mapping"]["uncoverable"], {"q1": [["d.md", 7, 36]]})
        self.assertNotIn("trim_label_whitespace", data)
        # trimmed: [8, 35), which c2 holds whole
        code, out, err = run_cli(*files, *self.MEASURES, "--trim-label-whitespace")
        self.assertEqual(code, 0, err)
        data = json.loads(out)
        self.assertEqual(data["mean"], {"recall(unit=evidence)@1": 1.0, "span_recall@1": 1.0})
        self.assertEqual(data["mapping"]["uncoverable"], {})
        self.assertIs(data["trim_label_whitespace"], True)
        self.assertNotIn("lost at ingestion", err)
        self.assertIs(rag_eval.load_report(io.StringIO(out)).trim_label_whitespace, True)
        # the library: the same option
        labels = [dict(doc="d.md", start=7, end=36, grade=1, text=self.DOC[7:36])]
        chunks = [{"id": "c2", "doc": "d.md", "start": 8, "end": 35}]
        for trim, value in ((False, 0.0), (True, 1.0)):
            report = rag_eval.evaluate({"q1": labels}, {"q1": ["c2"]}, k=1,
                                       measures="recall(unit=evidence)", chunks=chunks,
                                       trim_label_whitespace=trim)
            self.assertEqual((report.mean["recall(unit=evidence)@1"],
                              report.trim_label_whitespace), (value, trim))

    def test_baselines_record_it_and_a_mismatch_is_refused(self):
        files = self.files()
        trimmed, plain = os.path.join(self.tmp, "t.json"), os.path.join(self.tmp, "p.json")
        self.assertEqual(run_cli(*files, *self.MEASURES[:2], "--trim-label-whitespace",
                                 "--save-baseline", trimmed)[0], 0)
        self.assertEqual(run_cli(*files, *self.MEASURES[:2], "--save-baseline", plain)[0], 0)
        with open(trimmed) as handle:
            self.assertIs(json.load(handle)["trim_label_whitespace"], True)
        with open(plain) as handle:
            self.assertNotIn("trim_label_whitespace", json.load(handle))
        for base, option, then, now in ((trimmed, (), "--trim-label-whitespace",
                                         "no --trim-label-whitespace"),
                                        (plain, ("--trim-label-whitespace",),
                                         "no --trim-label-whitespace",
                                         "--trim-label-whitespace")):
            code, out, err = run_cli(*files, "--baseline", base, *option)
            self.assertEqual(code, rag_eval.EXIT_ERROR, err)
            self.assertIn("%s was made with %s and this report with %s: the numbers are not "
                          "comparable" % (base, then, now), err)
        self.assertEqual(run_cli(*files, "--baseline", trimmed, "--trim-label-whitespace")[0],
                         0)
        with open(trimmed) as handle:
            saved = json.load(handle)
        saved["trim_label_whitespace"] = "yes"
        bad = self.write("bad.json", json.dumps(saved))
        code, _, err = run_cli(*files, "--baseline", bad, "--trim-label-whitespace")
        self.assertEqual(code, rag_eval.EXIT_ERROR)
        self.assertIn("trim_label_whitespace must be true or false, got 'yes'", err)

    def test_labels_it_cannot_trim(self):
        for label, expect in [
                ({"text": self.DOC[7:35]}, "qrels: query 'q1': the span label d.md [7, 36) "
                 "carries a text of 28 code points, and the span is 29: the offsets and the "
                 "text disagree"),
                ({"start": 6, "end": 8, "text": "\n\n"}, "the span label d.md [6, 8): its "
                 "text is white space only"),
                ({"text": None}, "no span label of the qrels carries its text, so none can be "
                 "narrowed"),
                ({"text": 7}, "l.jsonl:1: text must be a string (the labelled text), got 7")]:
            with self.subTest(expect=expect):
                code, out, err = run_cli(*self.files(**label), *self.MEASURES,
                                         "--trim-label-whitespace")
                self.assertEqual(code, rag_eval.EXIT_ERROR, err)
                self.assertEqual(out, "")
                self.assertIn(expect, err)
        # some labels without text: scored as written, and said
        labels = self.write("l2.jsonl", jsonl(
            {"query_id": "q1", "doc": "d.md", "start": 7, "end": 36, "grade": 1,
             "text": self.DOC[7:36]},
            {"query_id": "q2", "doc": "d.md", "start": 0, "end": 6, "grade": 1}))
        code, _, err = run_cli(labels, self.write("r2.json", '{"q1": ["c2"], "q2": ["c1"]}'),
                               *self.files()[2:], "--metrics", "recall(unit=evidence)@1",
                               "--trim-label-whitespace")
        self.assertEqual(code, 0, err)
        self.assertIn("--trim-label-whitespace: 1 of 2 span labels carry no text, so they are "
                      "scored as written (1 narrowed)", err)
        code, _, err = run_cli("--scores", self.write("s.jsonl", '{"query_id": "q", "f": 1}\n'),
                               "--trim-label-whitespace")
        self.assertEqual(code, rag_eval.EXIT_ERROR)
        self.assertIn("--trim-label-whitespace applies to QRELS and a RUN", err)


if __name__ == "__main__":
    unittest.main()
