"""Judge scores (issue 15): score files, the Report of evaluate_scores and
--scores, the bundled judge example, the judge noise against numpy, and
--drift / --max-drift on a re-judged frozen sample (its statistics:
test_statistics.py).
"""

import copy
import gzip
import hashlib
import io
import json
import math
import os
import random
import sys
import unittest

import rag_eval
from tests.support import read_doc, HERE, DATA, run_cli, TempDir, EXAMPLE_FILES, read_text, jsonl


class ScoreFileTest(TempDir, unittest.TestCase):
    """Score files (issue 15): JSONL or CSV, one query a line, read by
    load_scores into runs mapped onto [0, 1]; every bad value is one
    EvalError naming the file, line, query and field."""

    def scores(self, text, name="s.jsonl", **options):
        return rag_eval.load_scores(self.write(name, text), **options)

    def assertRefused(self, text, expect, name="s.jsonl", **options):
        with self.assertRaises(rag_eval.EvalError) as caught:
            self.scores(text, name, **options)
        message = str(caught.exception)
        self.assertEqual(len(message.splitlines()), 1, message)
        self.assertIn(expect, message)
        return message

    def test_repeated_runs_mean_hand_worked(self):
        s = self.scores(jsonl({"query_id": "q1", "faithfulness": [0.8, 0.9, 0.85]},
                              {"query_id": "q2", "faithfulness": 0.5}))
        self.assertEqual(s.runs["faithfulness"]["q1"], (0.8, 0.9, 0.85))
        # q1: (0.8 + 0.9 + 0.85) / 3 = 2.55 / 3 = 0.85; q2: one run, 0.5
        self.assertAlmostEqual(s.values("faithfulness")["q1"], 0.85, places=15)
        self.assertEqual(s.values("faithfulness")["q2"], 0.5)
        self.assertEqual(s.queries, ("q1", "q2"))
        self.assertEqual(s.kinds, {"faithfulness": "number"})
        self.assertEqual(s.ranges, {"faithfulness": (0.0, 1.0)})

    def test_range_mapping_hand_worked(self):
        s = self.scores(jsonl({"query_id": "q1", "relevance": 4, "harm": 2},
                              {"query_id": "q2", "relevance": [1, 5, 2], "harm": 5}),
                        ranges={"relevance": (1, 5), "harm": (5, 1)})
        # relevance on [1, 5]: (4 - 1) / (5 - 1) = 0.75; runs 0, 1, (2 - 1)/4 = 0.25
        self.assertEqual(s.runs["relevance"], {"q1": (0.75,), "q2": (0.0, 1.0, 0.25)})
        # q2's mean: (0 + 1 + 0.25) / 3 = 1.25 / 3 = 0.41666...
        self.assertAlmostEqual(s.values("relevance")["q2"], 1.25 / 3, places=15)
        # harm declared 5:1, lower is better: (2 - 5) / (1 - 5) = 0.75; (5 - 5) / -4 = 0
        self.assertEqual(s.runs["harm"], {"q1": (0.75,), "q2": (0.0,)})
        self.assertEqual(s.kinds, {"relevance": "integer", "harm": "integer"})
        self.assertEqual(s.ranges, {"relevance": (1.0, 5.0), "harm": (5.0, 1.0)})

    def test_booleans_make_a_rate_hand_worked(self):
        s = self.scores(jsonl({"query_id": "q1", "refused": False},
                              {"query_id": "q2", "refused": True},
                              {"query_id": "q3", "refused": [True, False, True]}))
        # false = 0, true = 1; q3's runs 1, 0, 1: a fraction 2/3
        values = s.values("refused")
        self.assertEqual((values["q1"], values["q2"]), (0.0, 1.0))
        self.assertAlmostEqual(values["q3"], 2 / 3, places=15)
        self.assertEqual(s.kinds, {"refused": "boolean"})
        # declared 1:0 (refusing is bad): true -> (1 - 1)/(0 - 1) = 0, false -> 1
        flipped = self.scores(jsonl({"query_id": "q1", "refused": True},
                                    {"query_id": "q2", "refused": False}),
                              ranges={"refused": (1, 0)})
        self.assertEqual(flipped.values("refused"), {"q1": 0.0, "q2": 1.0})

    def test_fields_found_or_named(self):
        text = jsonl({"query_id": "q1", "f": 0.5, "g": 1, "question": "why?",
                      "input_sha256": "ab12"},
                     {"query_id": "q2", "f": 0.25, "g": 0, "question": "how?",
                      "input_sha256": "cd34"})
        self.assertEqual(self.scores(text).fields, ("f", "g"))
        self.assertEqual(self.scores(text, fields=["g"]).fields, ("g",))
        s = self.scores(text)
        self.assertEqual(s.input_sha256, {"q1": "ab12", "q2": "cd34"})
        self.assertEqual(s.info["fields"], ["f", "g"])
        self.assertEqual(s.info["format"], "jsonl")
        self.assertEqual(s.info["sha256"], hashlib.sha256(text.encode()).hexdigest())
        self.assertRefused(text, "s.jsonl: no field 'h' (fields: 'f', 'g', 'question')",
                           fields=["h"])
        self.assertRefused(text, "'input_sha256' is the id column or reserved",
                           fields=["input_sha256"])
        self.assertRefused(text, "score range is given for 'h', which is not a score field",
                           ranges={"h": (0, 1)})

    def test_id_column(self):
        text = jsonl({"item": 7, "f": 1}, {"item": "x", "f": 0})
        self.assertEqual(self.scores(text, id_column="item").queries, ("7", "x"))
        self.assertRefused(text, "s.jsonl:1: no 'query_id' (the query id; --id-column names "
                                 "another column)")

    def test_csv_export(self):
        # pandas' to_csv() without index=False: an unnamed index column, True/False
        text = (",query_id,user_input,faithfulness,refused,relevance\n"
                "0,q1,\"Why, then?\",0.83,False,\"[4, 5]\"\n"
                "1,q2,How?,0.5,True,3\n")
        s = self.scores(text, "s.csv", ranges={"relevance": (1, 5)})
        self.assertEqual(s.fields, ("faithfulness", "refused", "relevance"))
        self.assertEqual(s.values("faithfulness"), {"q1": 0.83, "q2": 0.5})
        self.assertEqual(s.values("refused"), {"q1": 0.0, "q2": 1.0})
        # relevance [4, 5] on [1, 5]: runs 3/4 and 4/4, mean 0.875; 3 -> 2/4
        self.assertEqual(s.values("relevance"), {"q1": 0.875, "q2": 0.5})
        self.assertEqual(s.info["format"], "csv")
        ids = self.scores("query_id,f\n001,1\n1,0\n", "t.csv")
        self.assertEqual(ids.queries, ("001", "1"))   # ids stay text

    def test_missing_scores(self):
        text = jsonl({"query_id": "q1", "f": 0.5, "g": 1}, {"query_id": "q2", "g": None},
                     {"query_id": "q3", "f": [], "g": 0})
        self.assertRefused(text, "s.jsonl:2: query 'q2' has no f score (--allow-missing-scores "
                                 "lists such queries as unscored)")
        s = self.scores(text, allow_missing=True)
        self.assertEqual(s.unscored, {"f": ("q2", "q3"), "g": ("q2",)})
        self.assertEqual(s.runs["f"], {"q1": (0.5,)})
        self.assertEqual(s.queries, ("q1", "q2", "q3"))
        csv_text = "query_id,f\nq1,0.5\nq2,\n"
        self.assertRefused(csv_text, "s.csv:3: query 'q2' has no f score", "s.csv")
        self.assertEqual(self.scores(csv_text, "s.csv", allow_missing=True).unscored,
                         {"f": ("q2",)})

    def test_bad_values_name_line_query_and_field(self):
        good = '{"query_id": "q1", "f": 0.5}\n'
        for line, expect in [
                ('{"query_id": "q2", "f": NaN}', "s.jsonl:2: query 'q2', field f: NaN is not a "
                                                 "score"),
                ('{"query_id": "q2", "f": Infinity}', "s.jsonl:2: query 'q2', field f: inf is "
                                                      "not a finite score"),
                ('{"query_id": "q2", "f": 1e400}', "query 'q2', field f: inf is not a finite"),
                ('{"query_id": "q2", "f": -0.1}', "s.jsonl:2: query 'q2', field f: -0.1 is "
                                                  "outside the range [0, 1] (declare another "
                                                  "with --score-range f=LO:HI)"),
                ('{"query_id": "q2", "f": [0.5, 2]}', "query 'q2', field f, run 2: 2 is outside"),
                ('{"query_id": "q2", "f": [0.5, null]}', "query 'q2', field f, run 2: null, a "
                                                         "failed run"),
                ('{"query_id": "q2", "f": "0.5"}', "query 'q2', field f: '0.5' is not a score"),
                ('{"query_id": "q2", "f": [[0.5]]}', "field f, run 1: [0.5] is not a score"),
                ('{"query_id": "q1", "f": 0.5}', "s.jsonl:2: query 'q1' again (first on "
                                                 "line 1)"),
                ('{"query_id": null, "f": 0.5}', "s.jsonl:2: no 'query_id'"),
                ('{"query_id": "q2", "f": 0.5, "f": 0.6}', "s.jsonl:2: duplicate key 'f'"),
                ('{"query_id": "q2", "f": 0.5', "s.jsonl:2: invalid JSON"),
                ('["q2", 0.5]', "s.jsonl:2: a JSON array, expected an object: a score line is "
                                '{"query_id": ..., FIELD: score, ...}'),
                ('{"query_id": "q2"} {"f": 1}', "s.jsonl:2: two JSON values on one line"),
                ('{"query_id": "q2", "f": 1}}', "s.jsonl:2: invalid JSON: more text after the "
                                                "JSON value")]:
            with self.subTest(line=line):
                self.assertRefused(good + line + "\n", expect)

    def test_bad_csv_cells(self):
        header = "query_id,f,question\nq1,0.5,why\n"
        for row, expect in [
                ("q2,nan,x", "s.csv:3: query 'q2', field f: NaN is not a score"),
                ("q2,inf,x", "s.csv:3: query 'q2', field f: inf is not a finite score"),
                ("q2,1.5,x", "s.csv:3: query 'q2', field f: 1.5 is outside the range [0, 1]"),
                ("q2,n/a,x", "s.csv:3: query 'q2', field f: 'n/a' is not a score"),
                ("q2,1_0,x", "s.csv:3: query 'q2', field f: '1_0' is not a score"),
                ("q2,[0.5,x", "s.csv:3: invalid JSON"),
                ('q2,"[0.5], [1]",x', "s.csv:3: two JSON values in one cell"),
                ("q2,0.5", "s.csv:3: 2 cells, but the header has 3 columns"),
                ("q1,0.5,x", "s.csv:3: query 'q1' again (first on line 2)"),
                (",0.5,x", "s.csv:3: no 'query_id'")]:
            with self.subTest(row=row):
                self.assertRefused(header + row + "\n", expect, "s.csv")
        self.assertRefused("query_id,f,f\nq1,1,1\n", "s.csv:1: the header names the column "
                                                      "'f' twice", "s.csv")
        self.assertRefused('query_id,f\nq1,"0.5\n', "s.csv:2: bad CSV: unexpected end", "s.csv")

    def test_field_names_a_measure_name_can_carry(self):
        text = "query_id,factual_correctness(mode=f1)\nq1,0.5\n"
        self.assertRefused(text, "s.csv: the field 'factual_correctness(mode=f1)' cannot name a "
                                 "score field", "s.csv")
        # a text column with such a name is not a field, so not refused
        self.assertEqual(self.scores("query_id,a b,f\nq1,text,1\n", "s.csv").fields, ("f",))
        with self.assertRaisesRegex(rag_eval.EvalError, "score field 'a,b' cannot name"):
            self.scores(jsonl({"query_id": "q1", "f": 1}), fields=["a,b"])

    def test_string_input_sha256_and_text_fields_are_not_refused(self):
        s = self.scores(jsonl({"query_id": "q1", "input_sha256": "e3b0", "f": 1,
                               "answer": "Paris"}))
        self.assertEqual((s.fields, s.input_sha256), (("f",), {"q1": "e3b0"}))
        self.assertRefused(jsonl({"query_id": "q1", "input_sha256": 12, "f": 1}),
                           "s.jsonl:1: query 'q1': input_sha256 must be text")

    def test_ranges_checked(self):
        text = jsonl({"query_id": "q1", "f": 1})
        for bad in [(1, 1), (0, math.inf), (0,), ("a", 1), (True, 2)]:
            with self.subTest(bad=bad):
                self.assertRefused(text, "the score range of f must be two different finite",
                                   ranges={"f": bad})

    def test_empty_and_array_files(self):
        self.assertRefused("\n\n", "s.jsonl: empty score file")
        self.assertRefused('[{"query_id": "q1"}]', "s.jsonl: a JSON array")
        self.assertRefused("query_id,f\n", "s.csv: no queries in the score file", "s.csv")

    def test_random_files_raise_only_one_line_errors(self):
        # Seeded: random ids, values and options; a file is read and reported, or
        # refused with one EvalError line, never another exception.
        rng = random.Random(15)
        values = [None, True, 0, 1, -1, 0.5, 1e308, 10 ** 400, "x", "", [], [None], [[1]], {},
                  [0.5, True], "NaN", [1e400]]
        for _ in range(300):
            records = []
            for q in range(rng.randint(1, 4)):
                record = {"query_id": rng.choice(["q%d" % q, q, None, True, [1]])}
                for key in rng.sample(["f", "g", "input_sha256", "a b"], rng.randint(0, 3)):
                    record[key] = rng.choice(values)
                records.append(record)
            options = rng.choice([{}, {"fields": ["f"]}, {"ranges": {"f": (5, 1)}},
                                  {"allow_missing": True}, {"ranges": {"g": (0, 0)}}])
            text = "".join(json.dumps(r) + "\n" for r in records)
            try:
                report = rag_eval.evaluate_scores(
                    rag_eval.load_scores(io.StringIO(text), **options),
                    allow_missing=options.get("allow_missing", False))
                rag_eval.render_text(report, per_query=True)
            except rag_eval.EvalError as exc:
                self.assertEqual(len(str(exc).splitlines()), 1, str(exc))

    def test_gzip_and_streams(self):
        text = jsonl({"query_id": "q1", "f": 0.25})
        path = self.write("s.jsonl.gz", gzip.compress(text.encode()))
        self.assertEqual(rag_eval.load_scores(path).values("f"), {"q1": 0.25})
        self.assertEqual(rag_eval.load_scores(io.StringIO(text)).values("f"), {"q1": 0.25})

    def test_a_field_without_a_usable_value_is_refused(self):
        # found by review: auto-detection kept only keys with a number, so these
        # read as "0 queries scored" and exit 0; a key is a score field unless
        # every value it has is text that is not a number.
        two = lambda a, b: jsonl({"query_id": "q1", "f": a}, {"query_id": "q2", "f": b})
        self.assertRefused(two(None, None), "query 'q1' has no f score")
        self.assertRefused(two([], []), "query 'q1' has no f score")
        self.assertRefused(two("0.8", "0.9"), "query 'q1', field f: '0.8' is not a score")
        self.assertRefused(two([0.5, None], [0.5, None]), "query 'q1', field f, run 2: null")
        # (Python 3.9's csv refuses the NUL itself: "s.csv:2: bad CSV: line contains NUL".)
        self.assertRefused("query_id,f\nq1,0.5\x00\nq2,0.5\n", "query 'q1', field f: "
                           if sys.version_info >= (3, 10) else "s.csv:2: bad CSV", name="s.csv")
        # Ragas's export when the judge failed on every row: faithfulness empty
        ragas = ("query_id,user_input,faithfulness,answer_relevancy\n"
                 "q1,a,,0.9\nq2,b,,0.8\n")
        self.assertRefused(ragas, "s.csv:2: query 'q1' has no faithfulness score",
                           name="s.csv")
        for text, name in ((ragas, "s.csv"), (two(None, None), "s.jsonl"),
                           (two([], []), "s.jsonl")):
            field = "faithfulness" if name == "s.csv" else "f"
            self.assertRefused(text, "field %s has no score on any query" % field,
                               name=name, allow_missing=True)
        # a file with no score field at all
        self.assertRefused("query_id,user_input\nq1,a\nq2,b\n", "s.csv: no score field",
                           name="s.csv")
        # text columns, some cells empty, are still not fields
        s = self.scores("query_id,user_input,reference,f\nq1,a,,0.5\nq2,b,c,1\n", "s.csv")
        self.assertEqual(s.fields, ("f",))

    def test_csv_text_columns_are_not_parsed_as_json(self):
        # found by review: pandas writes retrieved_contexts as "['ctx a', 'ctx b']",
        # a Python list, not JSON; it was refused as invalid JSON
        s = self.scores('query_id,retrieved_contexts,f\nq1,"[\'ctx a\', \'ctx b\']",0.5\n'
                        'q2,"[\'it\'\'s\']","[1, 0.5]"\n', "s.csv")
        self.assertEqual(s.fields, ("f",))
        self.assertEqual(s.runs["f"], {"q1": (0.5,), "q2": (1.0, 0.5)})
        # a score field's cell is still JSON, and a bad one is still refused
        self.assertRefused("query_id,f\nq1,0.5\nq2,\"[1, 0.5\"\n", "s.csv:3: invalid JSON",
                           name="s.csv")

    def test_a_key_with_numbers_and_text_says_so(self):
        # Issue 22: reference 14 then fourteen said "outside the range [0, 1]" (the
        # number was checked as a score first); the README promises an error that
        # names the line of a key holding numbers and text, in either order.
        both = ("is not a score (a number, true/false, or a list of them), and line %s holds "
                "a number: a key holds numbers or text, not both (a text column? name the "
                "score fields with --metrics)")
        cases = [("q1,14,0.9\nq2,fourteen,0.8\n", "s.csv:3: query 'q2', field reference: "
                  "'fourteen' " + both % 2),
                 ("q1,fourteen,0.9\nq2,14,0.8\n", "s.csv:2: query 'q1', field reference: "
                  "'fourteen' " + both % 3)]
        for rows, expect in cases:
            with self.subTest(rows=rows):
                text = "query_id,reference,faithfulness\n" + rows
                self.assertRefused(text, expect, "s.csv")
                self.assertEqual(self.scores(text, "s.csv", fields=["faithfulness"]).fields,
                                 ("faithfulness",))
        self.assertRefused(jsonl({"query_id": "q1", "reference": 14, "f": 1},
                                 {"query_id": "q2", "reference": "fourteen", "f": 1}),
                           "s.jsonl:2: query 'q2', field reference: 'fourteen' " + both % 1)
        # a named field keeps the plain message
        self.assertRefused(jsonl({"query_id": "q1", "f": 1}, {"query_id": "q2", "f": "x"}),
                           "s.jsonl:2: query 'q2', field f: 'x' is not a score (a number, "
                           "true/false, or a list of them)", fields=["f"])

    def test_an_empty_list_cell_decides_nothing_about_its_column(self):
        # Issue 22: retrieved_contexts [] (nothing retrieved) made the text column a
        # score field, refused as invalid JSON.  In CSV as in JSONL, [] is an empty
        # list: it decides nothing, so the column is text; in a score field it is a
        # missing score.
        text = ("query_id,retrieved_contexts,faithfulness\nq1,\"['a']\",0.9\nq2,[],0.8\n"
                "q3, [ ] ,0.7\n")
        s = self.scores(text, "s.csv")
        self.assertEqual((s.fields, s.values("faithfulness")),
                         (("faithfulness",), {"q1": 0.9, "q2": 0.8, "q3": 0.7}))
        self.assertEqual(self.scores(jsonl({"query_id": "q1", "retrieved_contexts": ["a"], "f": 1},
                                           {"query_id": "q2", "retrieved_contexts": [], "f": 0})
                                     ).fields, ("f",))
        self.assertRefused("query_id,f\nq1,0.5\nq2,[]\n", "s.csv:3: query 'q2' has no f score",
                           name="s.csv")

    def test_booleans_and_numbers_do_not_mix_in_a_field(self):
        # found by review: [true, 0.5] was read as runs 1 and 0.5
        self.assertRefused(jsonl({"query_id": "q1", "f": [True, 0.5]}),
                           "query 'q1', field f: true/false mixed with numbers")
        self.assertRefused(jsonl({"query_id": "q1", "f": 0.5}, {"query_id": "q2", "f": True}),
                           "query 'q2', field f: true/false mixed with numbers")

    def test_a_null_run_names_null_and_says_to_drop_it(self):
        # found by review: the message said None; a partly failed repeated run stays
        # an error even with --allow-missing-scores
        message = self.assertRefused(jsonl({"query_id": "q1", "f": [0.5, None]}),
                                     "query 'q1', field f, run 2: null", allow_missing=True)
        self.assertIn("drop the failed run", message)
        self.assertNotIn("None", message)
        # [null] (DeepEval's converter when every run errored) is a missing score
        every_run_failed = jsonl({"query_id": "q1", "f": [None]}, {"query_id": "q2", "f": 0.5})
        self.assertRefused(every_run_failed, "s.jsonl:1: query 'q1' has no f score")
        s = self.scores(every_run_failed, allow_missing=True)
        self.assertEqual((s.unscored, s.runs), ({"f": ("q1",)}, {"f": {"q2": (0.5,)}}))


class ScoreReportTest(TempDir, unittest.TestCase):
    """Judge scores as a Report (evaluate_scores, --scores): each field its own
    measure score(field=F) and population, through the gate, comparisons,
    slices, baselines and every format; the judge noise and borderline queries
    of repeated runs; the judge provenance and range refusals."""

    SCORES = ('{"query_id": "q1", "faithfulness": [0.8, 0.9, 0.85], "refused": false}\n'
              '{"query_id": "q2", "faithfulness": [0.5, 0.7], "refused": true}\n'
              '{"query_id": "q3", "faithfulness": 1, "refused": false}\n')
    F, R = "score(field=faithfulness)", "score(field=refused)"

    def cli(self, *argv, scores=None, name="s.jsonl"):
        return run_cli("--scores", self.write(name, scores or self.SCORES), *argv)

    def test_a_lost_score_never_passes_the_gate(self):
        # Found by review: with --allow-missing-scores the current mean left out q3, the
        # lowest-scored query: (0.9 + 0.5) / 2 = 0.70 against the baseline's all-query
        # (0.9 + 0.6 + 0.1) / 3 = 0.5333, "improved".  On the queries both hold (q1, q2):
        # baseline (0.9 + 0.6) / 2 = 0.75, now 0.70: a drop of 0.05 > 0.02, REGRESSED.
        # A dropped line is the same loss.
        baseline = os.path.join(self.tmp, "b.json")
        code, _, err = self.cli("--save-baseline", baseline, scores=(
            '{"query_id": "q1", "f": 0.9}\n{"query_id": "q2", "f": 0.6}\n'
            '{"query_id": "q3", "f": 0.1}\n'))
        self.assertEqual(code, 0, err)
        for lost in ('{"query_id": "q3", "f": null}\n', ""):
            code, out, err = self.cli("--baseline", baseline, "--allow-missing-scores",
                                      "--format", "json", scores=(
                                          '{"query_id": "q1", "f": 0.9}\n'
                                          '{"query_id": "q2", "f": 0.5}\n' + lost))
            self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
            gate = json.loads(out)["gate"]
            [change] = gate["changes"]
            self.assertEqual((change["status"], change["baseline"]), ("regressed", 0.75))
            self.assertAlmostEqual(change["current"], 0.7, places=12)
            self.assertEqual((change["n"], change["removed"]), (2, 1))
            self.assertIn("the test set changed since the baseline: 1 query the baseline scored "
                          "is not scored now (removed): 'q3'; each measure is compared on the "
                          "queries both sides scored, not on this one", gate["notes"])

    def test_a_lost_score_against_means_only_is_missing(self):
        # Found by review: q4 (0.1) lost its score; with a means-only baseline the
        # current mean over q1-q3 (0.8) read "improved" against 0.7 (0.9 * 3 + 0.1) / 4.
        # Neither side can pair the queries, so the measure is MISSING and fails.
        baseline = self.write("b.json", json.dumps({"score(field=f)": 0.7}))
        scores = "".join('{"query_id": "q%d", "f": %s}\n' % (i, v)
                         for i, v in ((1, 0.8), (2, 0.8), (3, 0.8), (4, "null")))
        code, out, err = self.cli("--baseline", baseline, "--allow-missing-scores", "--format",
                                  "json", scores=scores)
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        gate = json.loads(out)["gate"]
        self.assertEqual([(c["status"], c["current"]) for c in gate["changes"]],
                         [("missing", None)])
        self.assertEqual(gate["changes"][0]["reason"], "1 query has no value now and the "
                         "baseline records no query set: save it again with --save-baseline")
        saved = os.path.join(self.tmp, "r.json")        # a report without per-query values
        self.cli("--allow-missing-scores", "--format", "json", "-o", saved, scores=scores)
        full = os.path.join(self.tmp, "full.json")
        self.cli("--save-baseline", full, scores=scores.replace("null", "0.1"))
        self.assertFalse(rag_eval.gate(rag_eval.load_report(saved),
                                       rag_eval.load_baseline(full)).passed)

    def test_lost_scores_mark_only_the_rows_they_touch(self):
        # Found by review.  q1, q2 in slice a; q3, q4 in b; h1, h2 held out.  Every
        # score 0.5 but h2's 0.1 and q1's 0.9 in the baseline.
        queries = self.write("q.jsonl", "".join(
            json.dumps({"query_id": q, "slices": {"src": s}}) + "\n"
            for q, s in (("q1", "a"), ("q2", "a"), ("q3", "b"), ("q4", "b"), ("h1", "h"),
                         ("h2", "h"))))
        def scores(**values):
            return "".join('{"query_id": "%s", "f": %s}\n' % (q, values.get(q, 0.5))
                           for q in ("q1", "q2", "q3", "q4", "h1", "h2"))
        common = ("--queries", queries, "--by", "src", "--holdout", "src=h",
                  "--allow-missing-scores", "--format", "json")
        full = os.path.join(self.tmp, "full.json")
        self.assertEqual(self.cli(*common, "--save-baseline", full,
                                  scores=scores(q1=0.9, h2=0.1))[0], 0)
        # h2's score lost: the hold-out mean would rise 0.3 -> 0.5 on h1 alone; it is
        # scored on 1 query where the baseline had 2, and names none: MISSING.
        code, out, err = self.cli(*common, "--baseline", full, scores=scores(q1=0.9, h2="null"))
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        rows = {c["slice"]: c["status"] for c in json.loads(out)["gate"]["changes"]}
        self.assertEqual(rows["src=h"], "missing")
        self.assertNotRegex(out, r"\bh2\b")     # (the temporary folder may hold "h2")
        # q3 lost against a means-only baseline: only the overall and src=b rows cannot be
        # paired; src=a (q1, q2 intact, mean 0.7 both sides) is unchanged.
        means = os.path.join(self.tmp, "means.json")
        with open(full) as handle:
            doc = json.load(handle)
        del doc["per_query"]
        with open(means, "w") as handle:
            json.dump(doc, handle)
        code, out, err = self.cli(*common, "--baseline", means, scores=scores(q1=0.9, q3="null"))
        self.assertEqual({c["slice"]: c["status"] for c in json.loads(out)["gate"]["changes"]
                          if c["slice"] != "src=h"},
                         {None: "missing", "src=a": "unchanged", "src=b": "missing"})
        # A loaded report without per-query values records which queries each
        # mean is over: the rows whose queries changed (q3's) are missing, src=a
        # (the same q1, q2) is compared on its means.
        saved = os.path.join(self.tmp, "r.json")
        self.cli(*common, "-o", saved, scores=scores(q1=0.9, q3="null"))
        result = rag_eval.gate(rag_eval.load_report(saved), rag_eval.load_baseline(full))
        self.assertEqual({c.slice: c.status for c in result.changes if c.slice != "src=h"},
                         {None: "missing", "src=a": "unchanged", "src=b": "missing"})
        # The same query unscored on both sides: nothing was lost, and the run itself
        # passes, as does the loaded report: its records match the baseline's.
        same = os.path.join(self.tmp, "same.json")
        self.cli(*common, "--save-baseline", same, scores=scores(q1=0.9, q3="null"))
        result = rag_eval.gate(rag_eval.load_report(saved), rag_eval.load_baseline(same))
        self.assertEqual({c.slice: c.status for c in result.changes if c.slice != "src=h"},
                         {None: "unchanged", "src=a": "unchanged", "src=b": "unchanged"})
        code, out, err = self.cli(*common, "--baseline", same, scores=scores(q1=0.9, q3="null"))
        self.assertEqual(code, 0, err)
        # Found by review (before the records): a query swapped for another (q4's
        # score lost, q3's back) passed on the means; the records differ: missing.
        self.cli(*common, "-o", saved, scores=scores(q1=0.9, q4="null"))
        result = rag_eval.gate(rag_eval.load_report(saved), rag_eval.load_baseline(same))
        self.assertEqual({c.slice: c.status for c in result.changes if c.slice != "src=h"},
                         {None: "missing", "src=a": "unchanged", "src=b": "missing"})

    def test_a_means_only_baseline_records_its_unscored_queries(self):
        # Found by the fuzzer: a report without per-query values, q4 unscored, read back
        # and saved as a baseline failed its own gate (MISSING: a means-only baseline
        # did not say q4 was unscored then too). Now the baseline records it.
        scores = "".join('{"query_id": "q%d", "f": %s}\n' % (i, v)
                         for i, v in ((1, 0.8), (2, 0.8), (3, 0.8), (4, "null")))
        saved = os.path.join(self.tmp, "r.json")
        code, _, err = self.cli("--allow-missing-scores", "--format", "json", "-o", saved,
                                scores=scores)
        self.assertEqual(code, 0, err)
        loaded = rag_eval.load_report(saved)
        path = os.path.join(self.tmp, "b.json")
        rag_eval.save_baseline(loaded, path)
        baseline = rag_eval.load_baseline(path)
        self.assertIsNone(baseline.per_query)
        self.assertEqual(baseline.scores["unscored"], {"score(field=f)": ["q4"]})
        result = rag_eval.gate(loaded, baseline)
        self.assertTrue(result.passed, result.notes)
        [change] = result.changes
        self.assertEqual(change.status, "unchanged")
        self.assertAlmostEqual(change.current, 0.8, places=12)      # 2.4 / 3
        code, _, err = self.cli("--baseline", path, "--allow-missing-scores", scores=scores)
        self.assertEqual(code, 0, err)
        # q3 lost now (scored then: not recorded unscored): MISSING, as before.
        code, out, err = self.cli("--baseline", path, "--allow-missing-scores", "--format",
                                  "json", scores=scores.replace("0.8}\n{\"query_id\": \"q4",
                                                                "null}\n{\"query_id\": \"q4"))
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        self.assertEqual([c["status"] for c in json.loads(out)["gate"]["changes"]], ["missing"])
        # A baseline that records neither its query sets nor its unscored queries
        # (saved before): against a report that lists a query without a value,
        # MISSING.
        with open(path) as handle:
            doc = json.load(handle)
        del doc["scores"]["unscored"], doc["query_sets"]
        doc["format_version"] = 1   # (a version 2 file without either is refused)
        self.assertFalse(rag_eval.gate(loaded, rag_eval.load_baseline(io.StringIO(
            json.dumps(doc)))).passed)
        for bad, expect in (({"score(field=f)": "q4"}, "expected a list"),
                            ({"nope@@": []}, "scores unscored"), ([1], "expected an object")):
            doc["scores"]["unscored"] = bad
            with self.assertRaisesRegex(rag_eval.EvalError, "<stream>: scores unscored.*" + expect
                                        if expect != "scores unscored" else expect):
                rag_eval.load_baseline(io.StringIO(json.dumps(doc)))

    def test_a_json_report_is_not_a_baseline(self):
        # Found by review: it said "unknown measure 'abstention'".
        saved = os.path.join(self.tmp, "r.json")
        self.assertEqual(self.cli("--format", "json", "-o", saved)[0], 0)
        code, out, err = self.cli("--baseline", saved)
        self.assertEqual((code, out), (rag_eval.EXIT_ERROR, ""))
        self.assertIn("r.json: a JSON report (--format json), not a baseline", err)

    def test_a_loaded_report_keeps_its_ranges(self):
        # Found by review: load_report dropped the scores block, so a report made with
        # --score-range rel=1:5 gated against a baseline of the default 0:1 passed.
        baseline = os.path.join(self.tmp, "b.json")
        scores = '{"query_id": "q1", "rel": 0.6}\n{"query_id": "q2", "rel": 0.6}\n'
        self.assertEqual(self.cli("--save-baseline", baseline, scores=scores)[0], 0)
        saved = os.path.join(self.tmp, "r.json")
        code, _, err = self.cli("--score-range", "rel=1:5", "--format", "json", "-o", saved,
                                scores='{"query_id": "q1", "rel": 3}\n{"query_id": "q2", "rel": 3}\n')
        self.assertEqual(code, 0, err)
        report = rag_eval.load_report(saved)
        self.assertEqual(report.scores["ranges"], {"rel": (1.0, 5.0)})
        with self.assertRaisesRegex(rag_eval.EvalError, "made with the range 0:1 of rel"):
            rag_eval.gate(report, rag_eval.load_baseline(baseline))

    def assertBadScores(self, scores, expect, *argv, name="s.jsonl"):
        """exit 2, one line naming ``expect``, nothing written."""
        out_path, saved = os.path.join(self.tmp, "out.json"), os.path.join(self.tmp, "b.json")
        code, out, err = self.cli(*argv, "-o", out_path, "--save-baseline", saved,
                                  scores=scores, name=name)
        self.assertEqual(code, rag_eval.EXIT_ERROR, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertNotIn("Traceback", err)
        self.assertIn(expect, err)
        self.assertEqual(out, "")
        self.assertFalse(os.path.exists(out_path) or os.path.exists(saved))

    def test_report_of_a_score_file_hand_worked(self):
        report = rag_eval.evaluate_scores(rag_eval.load_scores(io.StringIO(self.SCORES)))
        self.assertEqual(report.measures, (self.F, self.R))
        # q1 (0.8 + 0.9 + 0.85)/3 = 0.85, q2 (0.5 + 0.7)/2 = 0.6, q3 1; mean 2.45/3
        self.assertAlmostEqual(report.mean[self.F], 2.45 / 3, places=15)
        self.assertEqual(report.mean[self.R], 1 / 3)     # one refusal in three
        self.assertEqual(report.per_query["q2"], {self.F: 0.6, self.R: 1.0})
        self.assertIsNone(report.n)

    def test_noise_floor_hand_worked(self):
        report = rag_eval.evaluate_scores(rag_eval.load_scores(io.StringIO(self.SCORES)))
        noise = report.scores["noise"]
        self.assertEqual(set(noise), {self.F})     # refused has one run a query
        # s_q^2 (ddof 1): q1 ((-0.05)^2 + 0.05^2 + 0) / 2 = 0.0025, r 3;
        # q2 (0.1^2 + 0.1^2) / 1 = 0.02, r 2; q3 one run: no spread known.
        # within sd = sqrt((0.0025 + 0.02) / 2) = sqrt(0.01125) = 0.10606601717798213
        # SE = sqrt(2 * (0.0025/3 + 0.02/2)) / n, n = 3 scored queries
        #    = sqrt(0.021666...) / 3 = 0.14719601443879746 / 3 = 0.04906533814626582
        self.assertEqual((noise[self.F]["queries"], noise[self.F]["runs"]), (2, [1, 3]))
        self.assertAlmostEqual(noise[self.F]["within_sd"], 0.10606601717798213, places=12)
        self.assertAlmostEqual(noise[self.F]["noise_floor"], 0.04906533814626582, places=12)
        self.assertAlmostEqual(noise[self.F]["noise_floor"],
                               math.sqrt(2 * (0.0025 / 3 + 0.02 / 2)) / 3, places=12)

    def test_borderline_shares_hand_worked(self):
        scores = jsonl({"query_id": "a", "f": [0.62, 0.58, 0.61]},   # deepeval #3110's case
                       {"query_id": "b", "f": [0.7, 0.9]}, {"query_id": "c", "f": [0.6, 0.1]},
                       {"query_id": "d", "f": [0.3, 0.4, 0.5, 0.2]})
        report = rag_eval.evaluate_scores(rag_eval.load_scores(io.StringIO(scores)),
                                          pass_threshold={"f": 0.6})
        # a: 0.62 and 0.61 pass, 0.58 fails: 2/3 and 1/3; c: 0.6 passes (at the threshold),
        # 0.1 fails: 1/2 each; b (all pass) and d (all fail) are not borderline.
        self.assertEqual(report.scores["borderline"], {"score(field=f)": {
            "threshold": 0.6, "queries": {"a": {"fail": 1, "pass": 2, "runs": 3},
                                          "c": {"fail": 1, "pass": 1, "runs": 2}}}})
        code, out, err = self.cli("--pass-threshold", "f=0.6", scores=scores)
        self.assertEqual(code, 0, err)
        self.assertIn("borderline queries of score(field=f): runs on both sides of 0.6 (2)", out)
        self.assertRegex(out, r"a\s+2/3 \(0\.6667\)\s+1/3 \(0\.3333\)")
        # in the field's own units: relevance 1:5, threshold 4 -> runs 4 and 5 pass
        code, out, err = self.cli("--score-range", "f=1:5", "--pass-threshold", "f=4",
                                  "--format", "json", scores=scores.replace(
                                      "0.62, 0.58, 0.61", "4, 3, 5").replace(
                                      "0.7, 0.9", "1, 2").replace("0.6, 0.1", "5, 5").replace(
                                      "0.3, 0.4, 0.5, 0.2", "3, 4, 5, 2"))
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["scores"]["borderline"]["score(field=f)"]["queries"],
                         {"a": {"fail": 1, "pass": 2, "runs": 3},
                          "d": {"fail": 2, "pass": 2, "runs": 4}})
        self.assertBadScores(scores, "pass threshold: 'g' is not a measured score field",
                             "--pass-threshold", "g=0.5")

    def test_a_failed_judge_column_is_exit_2_and_a_lacking_field_is_missing(self):
        # found by review: Ragas's export with faithfulness empty on every row read
        # as answer_relevancy alone, exit 0, and --save-baseline left faithfulness out
        good = ("query_id,user_input,faithfulness,answer_relevancy\n"
                "q1,a,0.5,0.9\nq2,b,0.7,0.8\n")
        failed = good.replace("0.5,", ",").replace("0.7,", ",")
        self.assertBadScores(failed, "s.csv:2: query 'q1' has no faithfulness score",
                             name="s.csv")
        self.assertBadScores(failed, "s.csv: field faithfulness has no score on any query",
                             "--allow-missing-scores", name="s.csv")
        self.assertBadScores("query_id,user_input\nq1,a\n", "s.csv: no score field",
                             name="s.csv")
        # a baseline field the current file lacks: without --metrics the baseline's
        # measures are asked for, so it is exit 2 naming the field; with --metrics
        # naming the others it is MISSING: either way the gate never passes
        saved = os.path.join(self.tmp, "base.json")
        self.assertEqual(self.cli("--save-baseline", saved, scores=good, name="s.csv")[0], 0)
        lacking = "query_id,user_input,answer_relevancy\nq1,a,0.9\nq2,b,0.8\n"
        self.assertBadScores(lacking, "s.csv: no field 'faithfulness' (fields: 'user_input', "
                             "'answer_relevancy')", "--baseline", saved, name="s.csv")
        code, out, err = self.cli("--baseline", saved, "--metrics", "answer_relevancy",
                                  scores=lacking, name="s.csv")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        self.assertRegex(out, r"score\(field=faithfulness\)\s+0\.6000\s+-\s+-\s+-\s+MISSING")

    def test_borderline_header_states_the_pass_direction(self):
        # found by review: a lower-is-better field's table said "runs >= threshold"
        # though runs <= the threshold pass. harm 5:1, threshold 2, runs 1, 3, 2:
        # 1 and 2 pass (<= 2), 3 fails: 2/3 and 1/3.
        scores = jsonl({"query_id": "a", "harm": [1, 3, 2]}, {"query_id": "b", "harm": 1})
        code, out, err = self.cli("--score-range", "harm=5:1", "--pass-threshold", "harm=2",
                                  scores=scores)
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"query\s+runs <= 2 \(lower is better\)\s+runs > 2\n")
        self.assertRegex(out, r"a\s+2/3 \(0\.6667\)\s+1/3 \(0\.3333\)")
        code, out, err = self.cli("--pass-threshold", "f=0.6",
                                  scores=jsonl({"query_id": "a", "f": [0.6, 0.5]}))
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"query\s+runs >= 0\.6\s+runs < 0\.6\n")

    def test_every_bad_value_is_exit_2_naming_query_and_field(self):
        good = '{"query_id": "q1", "f": 0.5}\n'
        for line, expect in [
                ('{"query_id": "q2"}', "s.jsonl:2: query 'q2' has no f score"),
                ('{"query_id": "q2", "f": NaN}', "s.jsonl:2: query 'q2', field f: NaN is not"),
                ('{"query_id": "q2", "f": -Infinity}', "query 'q2', field f: -inf is not a "
                                                       "finite score"),
                ('{"query_id": "q2", "f": 1.01}', "query 'q2', field f: 1.01 is outside the "
                                                  "range [0, 1]"),
                ('{"query_id": "q1", "f": 0.5}', "s.jsonl:2: query 'q1' again")]:
            with self.subTest(line=line):
                self.assertBadScores(good + line + "\n", expect)
        self.assertBadScores(good, "no field 'g' (fields: 'f')", "--metrics", "g")
        self.assertBadScores(good, "s.jsonl: no field 'g'", "--metrics", "score(field=g)")
        self.assertBadScores("query_id,f\nq1,0.5\nq2,abc\n", "s.csv:3: query 'q2', field f: "
                             "'abc' is not a score", name="s.csv")
        self.assertBadScores(good, "--metrics: recall@5 is a retrieval measure", "--metrics",
                             "recall@5")
        self.assertBadScores(good, "--score-range f=1: expected FIELD=LO:HI", "--score-range",
                             "f=1")
        self.assertBadScores(good, "--k applies to QRELS and a RUN", "--k", "5")

    def test_allow_missing_scores_lists_unscored_per_field(self):
        scores = jsonl({"query_id": "q1", "f": 0.5, "g": 1}, {"query_id": "q2", "g": 0},
                       {"query_id": "q3", "f": None, "g": None})
        code, out, err = self.cli("--allow-missing-scores", "--format", "json", scores=scores)
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        self.assertEqual(report["scores"]["unscored"],
                         {"score(field=f)": ["q2", "q3"], "score(field=g)": ["q3"]})
        self.assertEqual(report["n"], {"score(field=f)": 1, "score(field=g)": 2})
        self.assertEqual(report["unscored"], ["q3"])        # no value at all
        self.assertEqual(report["mean"], {"score(field=f)": 0.5, "score(field=g)": 0.5})
        self.assertIn("warning: score(field=f): 2 queries without a score, listed as "
                      "unscored: 'q2', 'q3'", err)
        self.assertIn("warning: score(field=g): 1 query without a score", err)

    def test_baseline_round_trip(self):
        saved = os.path.join(self.tmp, "base.json")
        code, out, err = self.cli("--save-baseline", saved, "--meta", "judge.model=m1")
        self.assertEqual(code, 0, err)
        with open(saved) as handle:
            base = json.load(handle)
        self.assertEqual(base["scores"]["ranges"], {"faithfulness": [0.0, 1.0],
                                                    "refused": [0.0, 1.0]})
        self.assertEqual(base["inputs"]["scores"]["sha256"],
                         hashlib.sha256(self.SCORES.encode()).hexdigest())
        code, out, err = self.cli("--baseline", saved, "--meta", "judge.model=m1")
        self.assertEqual(code, 0, err)
        self.assertIn("PASSED", out)
        lower = self.SCORES.replace("[0.5, 0.7]", "[0.3, 0.4]")    # q2 0.6 -> 0.35
        code, out, err = self.cli("--baseline", saved, "--meta", "judge.model=m1",
                                  "--format", "json", scores=lower)
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        gate = json.loads(out)["gate"]
        self.assertEqual([c["measure"] for c in gate["regressions"]], [self.F])
        self.assertEqual(gate["per_query"]["regressions"][0]["query"], "q2")
        # the significant gate reads the same per-query values (3 queries: too few)
        code, out, err = self.cli("--baseline", saved, "--meta", "judge.model=m1",
                                  "--gate", "significant", scores=lower)
        self.assertEqual(code, 1, err)
        self.assertIn("too few queries differ for a significance test", out)

    def test_judge_provenance_refusal(self):
        saved = os.path.join(self.tmp, "base.json")
        self.assertEqual(self.cli("--save-baseline", saved, "--meta", "judge.model=m1",
                                  "--meta", "judge.prompt_sha256=abc")[0], 0)
        for argv, expect in [
                (("--meta", "judge.model=m2", "--meta", "judge.prompt_sha256=abc"),
                 "not gated: judge.model is not the baseline's (m1 in"),
                (("--meta", "judge.model=m1", "--meta", "judge.prompt_sha256=abd"),
                 "not gated: judge.prompt_sha256 is not the baseline's (abc in"),
                (("--meta", "judge.model=m1"), "judge.prompt_sha256 is not the baseline's "
                                               "(abc in %s, (absent) in this run)" % saved)]:
            with self.subTest(argv=argv):
                code, out, err = self.cli("--baseline", saved, *argv)
                self.assertEqual(code, 2, err)
                self.assertIn(expect, err)
                self.assertIn("check the judge with --drift FROZEN.jsonl", err)
        # absent on both sides: equal, with a note
        bare = os.path.join(self.tmp, "bare.json")
        self.assertEqual(self.cli("--save-baseline", bare)[0], 0)
        code, out, err = self.cli("--baseline", bare)
        self.assertEqual(code, 0, err)
        self.assertIn("judge.model and judge.prompt_sha256 recorded neither in the baseline nor "
                      "in this run", out)

    def test_ranges_recorded_and_checked(self):
        scores = jsonl({"query_id": "q1", "relevance": 4}, {"query_id": "q2", "relevance": 2})
        saved = os.path.join(self.tmp, "base.json")
        code, out, err = self.cli("--score-range", "relevance=1:5", "--save-baseline", saved,
                                  "--format", "json", scores=scores)
        self.assertEqual(code, 0, err)
        # (4 - 1)/4 = 0.75, (2 - 1)/4 = 0.25: mean 0.5
        self.assertEqual(json.loads(out)["mean"], {"score(field=relevance)": 0.5})
        code, out, err = self.cli("--baseline", saved, "--score-range", "relevance=0:5",
                                  scores=scores)
        self.assertEqual(code, 2, err)
        self.assertIn("was made with the range 1:5 of relevance and this report with 0:5", err)
        self.assertBadScores(scores, "query 'q1', field relevance: 4 is outside the range "
                                     "[0, 1]", "--baseline", saved)

    def test_noise_note_when_the_tolerance_is_inside_judge_noise(self):
        saved = os.path.join(self.tmp, "base.json")
        self.assertEqual(self.cli("--save-baseline", saved)[0], 0)
        # 2 SE = 2 * 0.04906533814626582 = 0.098: a tolerance of 0.05 is inside it
        code, out, err = self.cli("--baseline", saved, "--max-drop", "0.05")
        self.assertEqual(code, 0, err)
        self.assertIn("score(field=faithfulness): tolerance is inside judge noise (+/-0.098 at "
                      "1-3 runs): expect flaky gates", out)
        code, out, err = self.cli("--baseline", saved, "--max-drop", "0.1")
        self.assertEqual(code, 0, err)
        self.assertNotIn("tolerance is inside judge noise", out)

    def test_both_tiers_in_one_report(self):
        # q3 (a judge score, no relevant id) and q9 (no judge score) are in the qrels.
        qrels = self.write("q.json", '{"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"d": 0}, '
                                     '"q9": {"c": 0}}')
        run = self.write("r.json", '{"q1": ["a"], "q2": ["x", "b"], "q3": ["d"], "q9": ["c"]}')
        scores = self.write("s.jsonl", self.SCORES)
        argv = (qrels, run, "--scores", scores, "--metrics", "mrr@2,score(field=faithfulness)")
        code, out, err = run_cli(*argv)     # q9 of the qrels has no judge score
        self.assertEqual(code, 2, err)
        self.assertIn("s.jsonl: 1 query of the test set (the other score files, the qrels, the "
                      "query metadata) has no line here, so no faithfulness score: 'q9'", err)
        argv += ("--allow-missing-scores",)
        code, out, err = run_cli(*argv, "--format", "json", "--per-query")
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        self.assertEqual(report["measures"], ["mrr@2", self.F])
        # mrr over q1, q2 (q9 has no relevant id): (1 + 1/2)/2; faithfulness over q1-q3
        self.assertEqual(report["mean"]["mrr@2"], 0.75)
        self.assertAlmostEqual(report["mean"][self.F], 2.45 / 3, places=15)
        self.assertEqual(report["n"], {"mrr@2": 2, self.F: 3})
        self.assertEqual(report["per_query"]["q3"], {self.F: 1.0})
        self.assertEqual(report["scores"]["unscored"], {self.F: ["q9"]})
        self.assertEqual(report["unscored"], ["q9"])     # no relevant id, no score
        self.assertEqual(set(report["inputs"]), {"qrels", "run", "scores"})
        saved = os.path.join(self.tmp, "base.json")
        self.assertEqual(run_cli(*argv, "--save-baseline", saved)[0], 0)
        self.assertEqual(run_cli(*argv, "--baseline", saved)[0], 0)
        lower = self.write("low.jsonl", self.SCORES.replace("[0.5, 0.7]", "[0.3, 0.4]"))
        code, out, err = run_cli(qrels, run, "--scores", lower, "--metrics",
                                 "mrr@2,score(field=faithfulness)", "--allow-missing-scores",
                                 "--baseline", saved)
        self.assertEqual(code, 1, err)
        self.assertIn("FAILED, 1 regression: score(field=faithfulness)", out)
        self.assertEqual(run_cli(qrels, run, "--scores", scores, "--metrics", "mrr@2")[0], 2)

    def test_score_lines_of_queries_the_qrels_lack_are_extra_queries(self):
        # Issue 22, item 5: beside QRELS RUN, a score line of a query the qrels do not
        # hold ({"query_id": "zz", "f": 0}) joined the judge mean (0.9 -> 0.45), exit
        # 0, while the same id in a run is exit 2.  One rule for both.
        qrels = self.write("q.json", '{"q1": {"a": 1}}')
        run = self.write("r.json", '{"q1": ["a"]}')
        scores = self.write("s.jsonl", jsonl({"query_id": "q1", "f": 0.9},
                                             {"query_id": "zz", "f": 0}))
        out_path = os.path.join(self.tmp, "out.json")
        argv = (qrels, run, "--scores", scores, "-o", out_path)
        code, out, err = run_cli(*argv)
        self.assertEqual((code, out), (2, ""), err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("s.jsonl: 1 query is not in the qrels: 'zz' (check the files match, or "
                      "skip them with --skip-extra-queries)", err)
        self.assertFalse(os.path.exists(out_path))
        code, out, err = run_cli(*argv[:-2], "--skip-extra-queries", "--format", "json",
                                 "--per-query")
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        # f over q1 alone: 0.9; zz is skipped and said so, in no count or table.
        self.assertEqual(report["mean"], {"recall@5": 1.0, "success@5": 1.0, "mrr@5": 1.0,
                                          "ndcg@5": 1.0, "score(field=f)": 0.9})
        self.assertEqual((report["queries"], report["skipped"]), (1, ["zz"]))
        self.assertEqual(list(report["per_query"]), ["q1"])
        self.assertIn("s.jsonl: skipped 1 score-file query not in the qrels: 'zz'", err)
        # A query of the query metadata is a member of the test set: not extra.
        queries = self.write("m.jsonl", jsonl({"query_id": "q1"}, {"query_id": "zz"}))
        code, out, err = run_cli(*argv[:-2], "--queries", queries, "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertAlmostEqual(json.loads(out)["mean"]["score(field=f)"], 0.45, places=15)
        # A reference score file (--compare-scores) is held to the same rule.
        good = self.write("good.jsonl", jsonl({"query_id": "q1", "f": 0.8}))
        code, out, err = run_cli(qrels, run, "--scores", good, "--compare-scores", scores)
        self.assertEqual(code, 2, err)
        self.assertIn("s.jsonl: 1 query is not in the qrels: 'zz'", err)
        # --scores alone: the score files are the test set (nothing to be extra to).
        code, out, err = run_cli("--scores", scores, "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertAlmostEqual(json.loads(out)["mean"]["score(field=f)"], 0.45, places=15)

    def test_compare_with_a_score_file(self):
        other = self.write("other.jsonl", self.SCORES.replace("[0.5, 0.7]", "[0.3, 0.4]")
                           .replace('"q3", "faithfulness": 1', '"q3", "faithfulness": 0.9'))
        code, out, err = self.cli("--compare", other, "--metrics", "faithfulness",
                                  "--format", "json")
        self.assertEqual(code, 0, err)
        row = json.loads(out)["comparison"][0]["measures"][self.F]
        # run minus reference: q1 0, q2 0.6 - 0.35 = 0.25, q3 1 - 0.9 = 0.1; mean 0.35/3
        self.assertAlmostEqual(row["delta"], 0.35 / 3, places=12)
        self.assertEqual((row["wins"], row["losses"], row["ties"]), (2, 0, 1))
        # beside QRELS RUN, --compare-scores takes the score file
        qrels = self.write("q.json", '{"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"a": 1}}')
        run = self.write("r.json", '{"q1": ["a"], "q2": ["x", "b"], "q3": ["a"]}')
        code, out, err = run_cli(qrels, run, "--scores", self.write("s.jsonl", self.SCORES),
                                 "--compare-scores", other, "--format", "json")
        self.assertEqual(code, 0, err)
        compared = json.loads(out)["comparison"]
        self.assertEqual([sorted(c["measures"]) for c in compared], [[self.F, self.R]])
        self.assertAlmostEqual(compared[0]["measures"][self.F]["delta"], 0.35 / 3, places=12)

    def test_slices_by_query_metadata(self):
        queries = self.write("meta.jsonl", jsonl(
            {"query_id": "q1", "slices": {"source": "real"}},
            {"query_id": "q2", "slices": {"source": "real"}},
            {"query_id": "q3", "slices": {"source": "synthetic"}}))
        code, out, err = self.cli("--queries", queries, "--by", "source", "--format", "json")
        self.assertEqual(code, 0, err)
        slices = json.loads(out)["slices"]
        # real: q1 0.85, q2 0.6 -> 0.725; synthetic: q3 1
        self.assertAlmostEqual(slices["source=real"]["mean"][self.F], 0.725, places=15)
        self.assertEqual(slices["source=synthetic"]["mean"], {self.F: 1.0, self.R: 0.0})
        code, out, err = self.cli("--queries", queries, "--by", "source")
        self.assertIn("by source", out)
        self.assertIn("faithfulness", out)
        # a test-set member without a line is a missing score
        more = self.write("more.jsonl", read_text(queries) + '{"query_id": "q4"}\n')
        self.assertBadScores(self.SCORES, "1 query of the test set (the other score files, the "
                             "qrels, the query metadata) has no line here, so no faithfulness "
                             "score: 'q4'",
                             "--queries", more)

    def test_every_format(self):
        for fmt in ("text", "markdown", "json", "trec"):
            with self.subTest(fmt=fmt):
                code, out, err = self.cli("--format", fmt, "--per-query")
                self.assertEqual(code, 0, err)
                self.assertIn("0.6000" if fmt != "json" else "0.6", out)
        code, out, err = self.cli("--format", "trec", "--per-query")
        self.assertIn("score(field=faithfulness)\tq2\t0.6000", out)

    def test_both_tiers_with_unjudged_bounds(self):
        # Found while adding answer stages: the bounds table read a bound for every
        # measure of the report, and a judge score has none (a KeyError, exit 2).
        qrels = self.write("q.json", '{"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}')
        run = self.write("r.json", '{"q1": ["a"], "q2": ["x", "b"], "q3": ["c"]}')
        scores = self.write("s.jsonl", self.SCORES)
        code, out, err = run_cli(qrels, run, "--scores", scores, "--metrics",
                                 "mrr@2,score(field=faithfulness)", "--unjudged-bounds")
        self.assertEqual(code, 0, err)
        self.assertIn("no bounds (only recall, precision, success, mrr, map and ndcg over ids "
                      "with unjudged=nonrel have them): %s" % self.F, out)

    def test_both_tiers_keep_the_holdouts_set_level_means(self):
        # Found while adding answer stages: merging the judge scores made the
        # hold-out's means again from its rows, and a set-level measure
        # (abstention_f1) has cells, which the test set had set apart: its mean was
        # lost, and a baseline holding it gated it MISSING.
        qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "h1": {"c": 1}, "h2": {}}
        run = {"q1": ["a"], "q2": [], "h1": ["c"], "h2": []}
        queries = {"h1": {"slices": {"split": ["holdout"]}}, "q1": {}, "q2": {},
                   "h2": {"answerable": False, "slices": {"split": ["holdout"]}}}
        options = dict(k=1, measures="recall,abstention_f1", queries=queries,
                       holdout="split=holdout")
        alone = rag_eval.evaluate(qrels, run, **options)
        scores = rag_eval.load_scores(io.StringIO(jsonl(*({"query_id": q, "f": 0.5}
                                                          for q in qrels))))
        both = rag_eval.evaluate_stages(qrels, run, scores, **options)
        self.assertEqual(both.holdout.mean, dict(alone.holdout.mean, **{"score(field=f)": 0.5}))
        self.assertEqual(both.holdout.n["abstention_f1"], alone.holdout.n["abstention_f1"])
        baseline = rag_eval.load_baseline(io.StringIO(json.dumps(rag_eval.baseline_dict(both))))
        self.assertTrue(rag_eval.gate(both, baseline).passed)

    def test_both_tiers_with_slices_and_a_holdout(self):
        queries = self.write("meta.jsonl", jsonl(
            {"query_id": "q1", "slices": {"source": "real"}},
            {"query_id": "q2", "slices": {"source": "real", "split": "holdout"}},
            {"query_id": "q3", "slices": {"source": "synthetic"}}))
        qrels = self.write("q.json", '{"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}')
        run = self.write("r.json", '{"q1": ["a"], "q2": ["x", "b"], "q3": ["x", "y", "c"]}')
        code, out, err = run_cli(qrels, run, "--scores", self.write("s.jsonl", self.SCORES),
                                 "--metrics", "mrr@3,score(field=faithfulness)", "--queries",
                                 queries, "--by", "source", "--holdout", "split=holdout",
                                 "--format", "json")
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        # q2 held out: overall mrr (1 + 1/3)/2, faithfulness (0.85 + 1)/2
        self.assertAlmostEqual(report["mean"]["mrr@3"], (1 + 1 / 3) / 2, places=15)
        self.assertAlmostEqual(report["mean"][self.F], 0.925, places=15)
        self.assertEqual(report["slices"]["source=real"]["mean"], {"mrr@3": 1.0, self.F: 0.85})
        held = report["holdout"]
        self.assertEqual((held["queries"], held["mean"]), (1, {"mrr@3": 0.5, self.F: 0.6}))
        self.assertNotRegex(json.dumps(report), r"\bq2\b")   # (not in the temporary path)
        saved = os.path.join(self.tmp, "base.json")
        argv = (qrels, run, "--scores", self.write("s.jsonl", self.SCORES), "--metrics",
                "mrr@3,score(field=faithfulness)", "--queries", queries, "--holdout",
                "split=holdout")
        self.assertEqual(run_cli(*argv, "--save-baseline", saved)[0], 0)
        lower = self.write("low.jsonl", self.SCORES.replace("[0.5, 0.7]", "[0.3, 0.4]"))
        code, out, err = run_cli(qrels, run, "--scores", lower, *argv[4:], "--baseline", saved,
                                 "--format", "json")
        self.assertEqual(code, 1, err)      # the hold-out's faithfulness fell: 0.6 -> 0.35
        self.assertEqual([(c["measure"], c["slice"]) for c in json.loads(out)["gate"][
            "regressions"]], [(self.F, "split=holdout")])

    def test_the_tiers_and_their_options(self):
        scores = self.write("s.jsonl", self.SCORES)
        for argv, expect in [
                ((), "give QRELS and RUN (or --scores FILE"),
                (("q.json",), "give QRELS and RUN"),
                (("--id-column", "id", "q.json", "r.json"), "--id-column only applies with "
                                                           "--scores"),
                (("--scores", scores, "q.json"), "beside --scores give both QRELS and RUN"),
                (("--scores", scores, "--compare-scores", scores), "--compare-scores is for "
                                                                    "both tiers"),
                (("--scores", scores, "--min-score", "0.5"), "--min-score applies to QRELS"),
                (("--scores", scores, "--scores", scores), "the score field 'faithfulness' "
                                                           "is in two files")]:
            with self.subTest(argv=argv):
                code, out, err = run_cli(*argv)
                self.assertEqual(code, 2, err)
                self.assertIn(expect, err)

    def test_qrels_and_run_may_sit_between_options(self):
        # QRELS RUN became optional (--scores alone); options between them still parse.
        code, out, err = run_cli(EXAMPLE_FILES[0], "--k", "3", EXAMPLE_FILES[1])
        self.assertEqual(code, 0, err)
        self.assertIn("recall@3", out)

    def test_several_score_files(self):
        a = self.write("a.jsonl", jsonl({"query_id": "q1", "f": 0.5}, {"query_id": "q2", "f": 1}))
        b = self.write("b.csv", "query_id,g\nq1,0\nq2,1\n")
        code, out, err = run_cli("--scores", a, "--scores", b, "--format", "json")
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        self.assertEqual(report["mean"], {"score(field=f)": 0.75, "score(field=g)": 0.5})
        self.assertEqual(sorted(report["inputs"]), ["scores", "scores.2"])
        self.assertEqual([i["fields"] for i in report["scores"]["inputs"]], [["f"], ["g"]])
        code, out, err = run_cli("--scores", a, "--scores", b, "--metrics", "g", "--format",
                                 "json")
        self.assertEqual(code, 2, err)
        self.assertIn("a.jsonl: holds none of the score fields asked for (g)", err)
        short = self.write("c.csv", "query_id,g\nq1,0\n")
        code, out, err = run_cli("--scores", a, "--scores", short)
        self.assertEqual(code, 2, err)
        self.assertIn("c.csv: 1 query of the test set (the other score files, the qrels, the "
                      "query metadata) has no line here, so no g score: 'q2'", err)
        self.assertEqual(run_cli("--scores", a, "--scores", short, "--allow-missing-scores")[0],
                         0)
        code, out, err = run_cli("--scores", a, "--scores", b, "--score-range", "h=1:5")
        self.assertIn("no score file has the field 'h'", err)

    def test_library_gate_and_compare(self):
        before = rag_eval.evaluate_scores(rag_eval.load_scores(io.StringIO(self.SCORES)))
        after = rag_eval.evaluate_scores(rag_eval.load_scores(io.StringIO(
            self.SCORES.replace("[0.5, 0.7]", "[0.3, 0.4]"))))
        saved = os.path.join(self.tmp, "b.json")
        rag_eval.save_baseline(before, saved)
        result = rag_eval.gate(after, rag_eval.load_baseline(saved))
        self.assertFalse(result.passed)
        self.assertEqual([c.measure for c in result.regressions], [self.F])
        row = rag_eval.compare(after, before).measures[self.F]
        self.assertAlmostEqual(row.delta, -0.25 / 3, places=12)   # q2: 0.35 - 0.6
        with self.assertRaisesRegex(rag_eval.EvalError, "no score file has the field 'x'"):
            rag_eval.evaluate_scores(rag_eval.load_scores(io.StringIO(self.SCORES)), ["x"])

    def test_library_evaluate_refuses_score_measures(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "read from a score file"):
            rag_eval.evaluate({"q": {"a": 1}}, {"q": ["a"]}, measures="score(field=f)")


class JudgeExampleTest(TempDir, unittest.TestCase):
    """examples/judge (README, "Judge scores"): the new Ragas export fails the
    gate on faithfulness; the repeated runs show the judge's noise."""

    HERE = os.path.join(HERE, "examples", "judge")
    JUDGE = ("--meta", "judge.model=gpt-4o-mini", "--meta", "judge.prompt_sha256=9f2c1e")

    def path(self, name):
        return os.path.join(self.HERE, name)

    def gate(self, *argv):
        return run_cli("--scores", self.path("ragas_export_new.csv"), *self.JUDGE,
                       "--baseline", self.path("baseline.json"), *argv)

    def test_faithfulness_regressed(self):
        code, out, err = self.gate("--format", "json")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        gate = json.loads(out)["gate"]
        changes = {c["measure"]: c for c in gate["changes"]}
        f, r = changes["score(field=faithfulness)"], changes["score(field=answer_relevancy)"]
        # (0.95 + 0.88 + 1.0 + 0.75 + 0.90 + 0.67 + 1.0 + 0.83) / 8 = 6.98 / 8; now
        # q04 0.40 and q06 0.33: 6.29 / 8.  answer_relevancy 7.02 / 8 both times.
        self.assertAlmostEqual(f["baseline"], 6.98 / 8, places=12)
        self.assertAlmostEqual(f["current"], 6.29 / 8, places=12)
        self.assertEqual((f["status"], r["status"]), ("regressed", "unchanged"))
        self.assertAlmostEqual(r["current"], 7.02 / 8, places=12)
        self.assertEqual([(d["query"], round(d["delta"], 12)) for d in
                          gate["per_query"]["regressions"]], [("q04", -0.35), ("q06", -0.34)])
        code, out, err = run_cli("--scores", self.path("ragas_export.csv"), *self.JUDGE,
                                 "--baseline", self.path("baseline.json"))
        self.assertEqual(code, 0, err)
        code, out, err = run_cli("--scores", self.path("ragas_export_new.csv"), "--meta",
                                 "judge.model=gpt-4o", "--meta", "judge.prompt_sha256=9f2c1e",
                                 "--baseline", self.path("baseline.json"))
        self.assertEqual(code, 2, err)
        self.assertIn("--drift", err)

    def test_the_bundled_baseline_is_what_the_tool_saves(self):
        saved = os.path.join(self.tmp, "baseline.json")
        code, out, err = run_cli("--scores", self.path("ragas_export.csv"), *self.JUDGE,
                                 "--save-baseline", saved)
        self.assertEqual(code, 0, err)
        docs = []
        for name in (saved, self.path("baseline.json")):
            with open(name) as handle:
                doc = json.load(handle)
            for info in list(doc["inputs"].values()) + doc["scores"]["inputs"]:
                del info["path"]
            docs.append(doc)
        self.assertEqual(docs[0], docs[1])

    def test_repeated_runs(self):
        code, out, err = run_cli("--scores", self.path("runs.jsonl"), "--pass-threshold",
                                 "faithfulness=0.7", "--format", "json")
        self.assertEqual(code, 0, err)
        scores = json.loads(out)["scores"]
        noise = scores["noise"]["score(field=faithfulness)"]
        # s_q^2: q01 0.0025, q02 0.01, q03 0, q04 ((-1/6)^2 + 2 (1/12)^2) / 2 = 1/48
        self.assertAlmostEqual(noise["noise_floor"],
                               math.sqrt(2 * (0.0025 + 0.01 + 0 + 1 / 48) / 3) / 4, places=12)
        self.assertAlmostEqual(noise["within_sd"], math.sqrt((0.0025 + 0.01 + 1 / 48) / 4),
                               places=12)
        self.assertEqual(scores["borderline"]["score(field=faithfulness)"]["queries"],
                         {"q02": {"fail": 1, "pass": 2, "runs": 3},
                          "q04": {"fail": 1, "pass": 2, "runs": 3}})

    def test_the_readme_shows_it(self):
        section = read_doc("06-judge-scores.md")
        code, out, err = self.gate()
        code, runs, err = run_cli("--scores", self.path("runs.jsonl"), "--pass-threshold",
                                  "faithfulness=0.7")
        shown = [line.replace(HERE + os.sep, "") for line in out.splitlines()
                 if "score(field=" in line or line.startswith(("mean", "gate vs"))]
        shown += [line for line in runs.splitlines()
                  if "score(field=" in line or line.startswith("  q0")]
        self.assertEqual(len(shown), 11)
        for line in shown:
            if "too few queries" not in line:
                self.assertIn(line, section)


class JudgeNoiseReferenceTest(unittest.TestCase):
    """evaluate_scores against numpy (tests/data/stats/judge_noise_reference.json,
    written by tests/peers/gen_judge_noise.py): per-query means of mapped runs,
    the mean, the within-query sd, the noise floor and the borderline queries,
    on [0, 1], 1:5, 5:1 and boolean fields."""

    def test_against_numpy(self):
        with open(os.path.join(DATA, "stats", "judge_noise_reference.json")) as handle:
            cases = json.load(handle)["cases"]
        self.assertEqual(len(cases), 12)
        for case in cases:
            with self.subTest(case=case["name"]):
                text = "".join(json.dumps(line) + "\n" for line in case["lines"])
                scores = rag_eval.load_scores(io.StringIO(text),
                                              ranges={"f": tuple(case["range"])})
                report = rag_eval.evaluate_scores(scores, pass_threshold={
                    "f": case["threshold"]})
                expected, name = case["expected"], "score(field=f)"
                for qid, value in expected["per_query"].items():
                    self.assertAlmostEqual(report.per_query[qid][name], value, places=12)
                self.assertAlmostEqual(report.mean[name], expected["mean"], places=12)
                noise = report.scores["noise"].get(name)
                if "noise_floor" in expected:
                    self.assertAlmostEqual(noise["noise_floor"], expected["noise_floor"],
                                           places=12)
                    self.assertAlmostEqual(noise["within_sd"], expected["within_sd"], places=12)
                    self.assertEqual(noise["runs"], expected["runs"])
                else:
                    self.assertIsNone(noise)
                self.assertEqual(report.scores["borderline"][name]["queries"],
                                 expected["borderline"])


def drift_rows(rows, id_column="query_id"):
    """JSONL of (item, input_sha256, {field: value}) rows."""
    return "".join(json.dumps(dict({id_column: item, "input_sha256": sha}, **values)) + "\n"
                   for item, sha, values in rows)


class JudgeDriftCliTest(TempDir, unittest.TestCase):
    """--drift FROZEN and --max-drift: a frozen sample re-judged, in every format."""

    # Six items; faithfulness 0.90 0.80 1.00 0.60 0.70 0.50 then, 0.85 0.80 0.90
    # 0.50 0.70 0.45 now; grounded T T T F T F then, T T F F T F now.
    THEN = [("f1", "a1", {"faithfulness": 0.90, "grounded": True}),
            ("f2", "a2", {"faithfulness": 0.80, "grounded": True}),
            ("f3", "a3", {"faithfulness": 1.00, "grounded": True}),
            ("f4", "a4", {"faithfulness": 0.60, "grounded": False}),
            ("f5", "a5", {"faithfulness": 0.70, "grounded": True}),
            ("f6", "a6", {"faithfulness": 0.50, "grounded": False})]
    NOW = [("f1", "a1", {"faithfulness": 0.85, "grounded": True}),
           ("f2", "a2", {"faithfulness": 0.80, "grounded": True}),
           ("f3", "a3", {"faithfulness": 0.90, "grounded": False}),
           ("f4", "a4", {"faithfulness": 0.50, "grounded": False}),
           ("f5", "a5", {"faithfulness": 0.70, "grounded": True}),
           ("f6", "a6", {"faithfulness": 0.45, "grounded": False})]

    def drift(self, *argv, then=None, now=None, id_column="query_id"):
        frozen = self.write("frozen.jsonl", drift_rows(self.THEN if then is None else then,
                                                       id_column))
        current = self.write("now.jsonl", drift_rows(self.NOW if now is None else now,
                                                     id_column))
        return run_cli("--scores", current, "--drift", frozen, *argv)

    def assertRefused(self, expect, *argv, **files):
        out_path = os.path.join(self.tmp, "out.json")
        code, out, err = self.drift("-o", out_path, *argv, **files)
        self.assertEqual(code, rag_eval.EXIT_ERROR, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(expect, err)
        self.assertEqual(out, "")
        self.assertFalse(os.path.exists(out_path))
        return err

    def test_a_failed_drift_check_is_said_everywhere(self):
        # Found by review: the HTML page said "gate passed" on a run that exits 1 for
        # drift; load_report dropped the drift block, so assert_no_regression passed.
        baseline = os.path.join(self.tmp, "b.json")
        code, _, err = run_cli("--scores", self.write("now.jsonl", drift_rows(self.NOW)),
                               "--save-baseline", baseline)
        self.assertEqual(code, 0, err)
        code, page, _ = self.drift("--baseline", baseline, "--format", "html")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION)
        self.assertIn("<title>rag_eval report: gate passed: judge drift FAILED</title>", page)
        self.assertIn('<p class="verdict fail">judge drift vs ', page)
        saved = os.path.join(self.tmp, "r.json")
        self.assertEqual(self.drift("--format", "json", "--per-query", "-o", saved)[0], 1)
        report = rag_eval.load_report(saved)
        self.assertFalse(report.drift["passed"])
        self.assertEqual(json.loads(rag_eval.render_json(report, per_query=True))["drift"],
                         json.loads(read_text(saved))["drift"])
        with self.assertRaisesRegex(AssertionError, "FAILED, the judge moved"):
            rag_eval.assert_no_regression(report, baseline)
        with open(saved) as handle:
            doc = json.load(handle)
        for key, value in (("fields", {"f": 1}), ("items", 1e400), ("notes", [1])):
            broken = copy.deepcopy(doc)
            broken["drift"][key] = value
            with self.assertRaisesRegex(rag_eval.EvalError, "drift"):
                rag_eval.Report.from_dict(broken)
        broken = copy.deepcopy(doc)
        broken["drift"]["fields"]["grounded"]["confusion"] = [[2, 0], []]
        with self.assertRaisesRegex(rag_eval.EvalError, "drift: not a --drift block"):
            rag_eval.Report.from_dict(broken)
        # Found by review: a drifted field's null difference passed the check and
        # the gate's suspect note raised a TypeError.
        broken = copy.deepcopy(doc)
        broken["drift"]["fields"]["faithfulness"]["mean_absolute_difference"] = None
        with self.assertRaisesRegex(rag_eval.EvalError, "drift: not a --drift block"):
            rag_eval.Report.from_dict(broken)
        # Found by review: a block contradicting itself was taken as it said.
        for key, value in (("passed", True), ("drifted", "no")):
            broken = copy.deepcopy(doc)
            if key == "passed":
                broken["drift"]["passed"] = value
            else:
                broken["drift"]["fields"]["faithfulness"]["drifted"] = value
            with self.assertRaisesRegex(rag_eval.EvalError, "drift: not a --drift block"):
                rag_eval.Report.from_dict(broken)

    def test_hand_worked_drift_fails_the_run(self):
        code, out, err = self.drift("--format", "json")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        drift = json.loads(out)["drift"]
        self.assertEqual((drift["passed"], drift["max_drift"], drift["items"]), (False, 0.02, 6))
        self.assertTrue(drift["frozen"]["path"].endswith("frozen.jsonl"))
        f, g = drift["fields"]["faithfulness"], drift["fields"]["grounded"]
        # faithfulness: differences -0.05 0 -0.10 -0.10 0 -0.05: mean -0.30 / 6 = -0.05,
        # mean absolute 0.30 / 6 = 0.05 > 0.02; largest f3 (first of the two -0.10)
        # 1.0 -> 0.9; the four non-zero differences all negative: 2 of 16 sign
        # patterns are as extreme, p = 0.125. Means 4.5 / 6 = 0.75 then, 4.2 / 6 = 0.70 now.
        self.assertAlmostEqual(f["mean_difference"], -0.05, places=15)
        self.assertAlmostEqual(f["mean_absolute_difference"], 0.05, places=15)
        self.assertEqual(f["largest_change"], {"item": "f3", "stored": 1.0, "current": 0.9})
        self.assertEqual((f["p"], f["n"], f["categorical"], f["drifted"]), (0.125, 6, False, True))
        self.assertAlmostEqual(f["stored_mean"], 0.75, places=15)
        self.assertAlmostEqual(f["current_mean"], 0.70, places=15)
        self.assertIsNone(f["kappa"])
        # grounded: f3 true -> false, the rest equal: agreement 5/6; table (rows then:
        # false, true) [[2, 0], [1, 3]]; rows 2, 4 and columns 3, 3: kappa =
        # (6 * 5 - (2 * 3 + 4 * 3)) / (36 - 18) = 12 / 18 = 2/3; mean absolute 1/6;
        # McNemar on 0 up, 1 down: 2 * 1 / 2 = 1.
        self.assertEqual((g["agreement"], g["kappa"], g["labels"], g["confusion"]),
                         (5 / 6, 2 / 3, [False, True], [[2, 0], [1, 3]]))
        self.assertEqual((g["mean_absolute_difference"], g["p"], g["categorical"]),
                         (1 / 6, 1.0, True))
        self.assertEqual(g["largest_change"], {"item": "f3", "stored": 1.0, "current": 0.0})
        code, text, _ = self.drift()
        self.assertEqual(code, rag_eval.EXIT_REGRESSION)
        self.assertIn("FAILED, the judge moved: faithfulness, grounded", text)
        self.assertIn("0.0500 > 0.02", text)
        self.assertIn("f3 1.0000 -> 0.9000", text)
        self.assertIn("grounded: stored (rows) against current (columns)", text)
        code, md, _ = self.drift("--format", "markdown")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION)
        self.assertTrue(md.startswith("**Judge drift failed**: the judge moved on faithfulness, "
                                      "grounded\n"), md)
        self.assertIn("**judge drift vs ", md)
        self.assertIn("| grounded | 6 | 0.6667 | 0.5000 | -0.1667 |", md)
        table = [line for line in md.splitlines() if line.startswith("| field |")]
        self.assertEqual(len(table), 1)
        self.assertEqual(table[0].count("|"), 12, table)      # 11 columns, no stray pipe

    def test_below_max_drift_passes(self):
        # 0.1667 (grounded) is the largest mean absolute difference.
        code, out, err = self.drift("--format", "json", "--max-drift", "0.2")
        self.assertEqual(code, 0, err)
        self.assertTrue(json.loads(out)["drift"]["passed"])
        code, out, err = self.drift("--format", "json", "--max-drift", str(1 / 6))
        self.assertEqual(code, 0, err)        # at the limit is not above it
        # Only faithfulness checked (--metrics), 0.05 at --max-drift 0.05: passes.
        code, out, err = self.drift("--format", "json", "--metrics", "faithfulness",
                                    "--max-drift", "0.05")
        self.assertEqual(code, 0, err)
        self.assertEqual(list(json.loads(out)["drift"]["fields"]), ["faithfulness"])
        # The default 0.02: one item of 50 moving 0.5 is 0.01 on average.
        then = [("i%02d" % i, "h%d" % i, {"s": 0.5}) for i in range(50)]
        now = [(i, h, {"s": 1.0 if i == "i07" else 0.5}) for i, h, _ in then]
        code, out, err = self.drift("--format", "json", then=then, now=now)
        self.assertEqual(code, 0, err)
        drift = json.loads(out)["drift"]
        self.assertEqual((drift["passed"], drift["fields"]["s"]["mean_absolute_difference"]),
                         (True, 0.01))
        now[8] = ("i08", "h8", {"s": 0.0})       # 1.0 / 50 = 0.02: still not above
        self.assertEqual(self.drift(then=then, now=now)[0], 0)
        now[9] = ("i09", "h9", {"s": 0.55})      # 1.05 / 50 = 0.021 > 0.02
        self.assertEqual(self.drift(then=then, now=now)[0], rag_eval.EXIT_REGRESSION)

    def test_the_hold_out_stays_out_of_the_drift_check(self):
        # Issue 22, item 4: "largest change h1 0.1000 -> 0.5000" and "item": "h1"
        # named a held-out item, and held-out items counted in the drift means.
        # The hold-out here is f3 (renamed hq3: no hex digest holds a q), the item
        # of the largest changes.  Left out: faithfulness differences -0.05 0 -0.10
        # 0 -0.05 over f1 f2 f4 f5 f6: mean -0.20 / 5 = -0.04, mean absolute 0.04
        # > 0.02 (still drifted); largest f4 0.6 -> 0.5; means 3.5 / 5 = 0.70 then,
        # 3.3 / 5 = 0.66 now.  grounded agrees on all 5: agreement 1, mean absolute
        # 0, no largest change; rows (false, true) 2, 3: kappa (25 - 13) / (25 - 13) = 1.
        held = lambda rows: [("hq3",) + row[1:] if row[0] == "f3" else row for row in rows]
        then, now = held(self.THEN), held(self.NOW)
        items = [row[0] for row in then]
        queries = self.write("m.jsonl", jsonl(*(
            {"query_id": q, "slices": {"split": "holdout" if q == "hq3" else "dev"}}
            for q in items)))
        options = ("--queries", queries, "--holdout", "split=holdout")
        code, out, err = self.drift(*options, "--format", "json", then=then, now=now)
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        self.assertNotIn("hq3", out + err)
        drift = json.loads(out)["drift"]
        self.assertEqual((drift["items"], drift["passed"]), (5, False))
        self.assertEqual(drift["notes"], ["1 item of the hold-out left out of the drift check "
                                          "(never shown)"])
        f, g = drift["fields"]["faithfulness"], drift["fields"]["grounded"]
        self.assertEqual((f["n"], f["drifted"]), (5, True))
        self.assertAlmostEqual(f["mean_difference"], -0.04, places=15)
        self.assertAlmostEqual(f["mean_absolute_difference"], 0.04, places=15)
        self.assertAlmostEqual(f["stored_mean"], 0.70, places=15)
        self.assertAlmostEqual(f["current_mean"], 0.66, places=15)
        self.assertEqual(f["largest_change"], {"item": "f4", "stored": 0.6, "current": 0.5})
        self.assertEqual((g["agreement"], g["kappa"], g["mean_absolute_difference"],
                          g["largest_change"], g["confusion"], g["drifted"]),
                         (1.0, 1.0, 0.0, None, [[2, 0], [0, 3]], False))
        for fmt in ("text", "markdown", "html"):
            code, out, err = self.drift(*options, "--format", fmt, then=then, now=now)
            self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
            self.assertNotIn("hq3", out + err, fmt)
            self.assertIn("f4", out, fmt)
        # Both tiers in one report: the same drift block.
        qrels = self.write("q.json", json.dumps({q: {"d": 1} for q in items}))
        run = self.write("r.json", json.dumps({q: ["d"] for q in items}))
        frozen = self.write("frozen.jsonl", drift_rows(then))
        current = self.write("now.jsonl", drift_rows(now))
        code, out, err = run_cli(qrels, run, "--scores", current, "--drift", frozen, *options,
                                 "--format", "json")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        self.assertNotIn("hq3", out + err)
        self.assertEqual(json.loads(out)["drift"], drift)
        # Every item of the frozen sample held out (f9, scored, is not in it): nothing
        # to check, exit 2.
        queries = self.write("m.jsonl", jsonl(*(
            [{"query_id": q, "slices": {"split": "holdout"}} for q in items]
            + [{"query_id": "f9", "slices": {"split": "dev"}}])))
        self.assertRefused("every item of the frozen sample is in the hold-out", *options,
                           then=then, now=now + [("f9", "a9", {"faithfulness": 0.5,
                                                                 "grounded": True})])
        # The library: held_out= does the same.
        d = rag_eval.judge_drift(rag_eval.load_scores(frozen), [rag_eval.load_scores(current)],
                                 held_out={"hq3"})
        self.assertEqual(d["fields"]["faithfulness"]["largest_change"]["item"], "f4")

    def test_not_a_drift_check(self):
        now = [row if row[0] != "f3" else ("f3", "changed", row[2]) for row in self.NOW]
        err = self.assertRefused("answer changed for f3: not a drift check", now=now)
        self.assertIn("frozen.jsonl", err)
        # An item of the frozen sample the current scores lack.
        then = self.THEN + [("f7", "a7", {"faithfulness": 0.5, "grounded": True})]
        err = self.assertRefused("item 'f7' of the frozen sample is not in the current scores",
                                 then=then)
        # input_sha256 missing or empty on either side; not text (the score file
        # reader refuses that, naming the line).
        for bad in (None, ""):
            with self.subTest(bad=bad):
                then = [(i, bad if i == "f2" else h, v) for i, h, v in self.THEN]
                self.assertRefused("item 'f2' has no input_sha256 as text", then=then)
                now = [(i, bad if i == "f2" else h, v) for i, h, v in self.NOW]
                self.assertRefused("item 'f2' has no input_sha256 as text", now=now)
        for bad in (123, ["a1"], True):
            with self.subTest(bad=bad):
                then = [(i, bad if i == "f2" else h, v) for i, h, v in self.THEN]
                err = self.assertRefused("query 'f2': input_sha256 must be text", then=then)
                self.assertIn("frozen.jsonl:2", err)
                now = [(i, bad if i == "f2" else h, v) for i, h, v in self.NOW]
                err = self.assertRefused("query 'f2': input_sha256 must be text", now=now)
                self.assertIn("now.jsonl:2", err)
        # A frozen item without a score now (--allow-missing-scores lists it unscored).
        now = [(i, h, {"faithfulness": v["faithfulness"]} if i == "f5" else v)
               for i, h, v in self.NOW]
        self.assertRefused("item 'f5' has no grounded score now", "--allow-missing-scores",
                           now=now)
        self.assertRefused("--max-drift", "--max-drift", "1.5")
        self.assertRefused("--max-drift", "--max-drift", "nan")
        code, _, err = run_cli("--scores", self.write("s.jsonl", drift_rows(self.NOW)),
                               "--max-drift", "0.1")
        self.assertEqual(code, 2)
        self.assertIn("--max-drift applies with --drift", err)
        code, _, err = self.report_of("--drift", self.write("d.jsonl", drift_rows(self.THEN)),
                                      qrels=self.GOOD_QRELS, run=self.GOOD_RUN)
        self.assertEqual(code, 2)
        self.assertIn("--drift only applies with --scores", err)
        other = [(i, h, {"relevance": 0.5}) for i, h, _ in self.THEN]
        self.assertRefused("holds none of the score fields", then=other)

    def test_the_library_gate_marks_judge_regressions_suspect(self):
        # Found by review: only the command line marked them; gate() of the same
        # report (a loaded JSON report, or judge_drift() set on it) did not.
        baseline = os.path.join(self.tmp, "base.json")
        then = self.write("then.jsonl", drift_rows(self.THEN))
        self.assertEqual(run_cli("--scores", then, "--save-baseline", baseline)[0], 0)
        saved = os.path.join(self.tmp, "r.json")
        code, _, err = self.drift("--format", "json", "--per-query", "--baseline", baseline,
                                  "-o", saved)
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        cli_gate = json.loads(read_text(saved))["gate"]
        report = rag_eval.load_report(saved)
        result = rag_eval.gate(report, rag_eval.load_baseline(baseline))
        self.assertFalse(result.passed)     # suspect regressions still fail
        self.assertEqual(json.loads(json.dumps(result.to_dict())), cli_gate)
        self.assertEqual({(c.measure, c.status, c.suspect) for c in result.changes},
                         {("score(field=faithfulness)", "regressed", "judge drift"),
                          ("score(field=grounded)", "regressed", "judge drift")})
        self.assertEqual(sum(n.startswith("suspect: judge drift: on the frozen sample ")
                             for n in result.notes), 1)
        # judge_drift() set on a library report: the same marks.
        frozen = rag_eval.load_scores(self.write("frozen.jsonl", drift_rows(self.THEN)))
        now = rag_eval.load_scores(os.path.join(self.tmp, "now.jsonl"))
        library = rag_eval.evaluate_scores(now)._replace(drift=rag_eval.judge_drift(frozen, [now]))
        result = rag_eval.gate(library, baseline=rag_eval.load_baseline(baseline))
        self.assertFalse(result.passed)
        self.assertEqual({c.suspect for c in result.changes}, {"judge drift"})
        # A drift check that passed marks nothing.
        calm = library._replace(drift=rag_eval.judge_drift(frozen, [now], max_drift=0.5))
        result = rag_eval.gate(calm, rag_eval.load_baseline(baseline))
        self.assertEqual(({c.suspect for c in result.changes}, result.passed), ({None}, False))
        self.assertFalse(any("suspect" in n for n in result.notes))

    def test_id_column_applies_to_the_drift_file(self):
        code, out, err = self.drift("--format", "json", "--id-column", "item",
                                    id_column="item")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        self.assertEqual(json.loads(out)["drift"]["fields"]["grounded"]["kappa"], 2 / 3)
        frozen = self.write("f.jsonl", drift_rows(self.THEN))       # query_id, not item
        current = self.write("c.jsonl", drift_rows(self.NOW, "item"))
        code, out, err = run_cli("--scores", current, "--id-column", "item", "--drift", frozen)
        self.assertEqual(code, 2)
        self.assertIn("'item'", err)

    def test_judge_regressions_are_suspect(self):
        baseline = os.path.join(self.tmp, "base.json")
        then = self.write("then.jsonl", drift_rows(self.THEN))
        self.assertEqual(run_cli("--scores", then, "--save-baseline", baseline)[0], 0)
        code, out, err = self.drift("--format", "json", "--baseline", baseline)
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        doc = json.loads(out)
        changes = {c["measure"]: c for c in doc["gate"]["changes"]}
        self.assertEqual({m: (c["status"], c["suspect"]) for m, c in changes.items()},
                         {"score(field=faithfulness)": ("regressed", "judge drift"),
                          "score(field=grounded)": ("regressed", "judge drift")})
        self.assertTrue(any(n.startswith("suspect: judge drift") for n in doc["gate"]["notes"]))
        for fmt, marker in (("text", "REGRESSED (suspect: judge drift)"),
                            ("markdown", "REGRESSED (suspect: judge drift)")):
            code, out, _ = self.drift("--format", fmt, "--baseline", baseline)
            self.assertEqual(code, rag_eval.EXIT_REGRESSION)
            self.assertIn(marker, out)
        # The judge within --max-drift: the same regressions, not suspect.
        code, out, _ = self.drift("--format", "json", "--baseline", baseline, "--max-drift", "0.5")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION)
        self.assertEqual({c["suspect"] for c in json.loads(out)["gate"]["changes"]}, {None})
        # A gate that passes still fails the run when the judge moved, and no
        # baseline is rewritten from its scores.
        code, out, err = self.drift("--format", "json", "--baseline", baseline,
                                    "--max-drop", "0.5", "--save-baseline", baseline + "2")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION)
        doc = json.loads(out)
        self.assertEqual((doc["gate"]["passed"], doc["drift"]["passed"]), (True, False))
        self.assertFalse(os.path.exists(baseline + "2"))
        self.assertIn("judge drifted (--drift)", err)

    def test_both_tiers_integer_range_and_repeated_runs(self):
        # relevance on 1:5 (integers): categorical on its own scale. 1 -> 2 on one
        # item of four: agreement 3/4; table over labels 1, 2, 4, 5 (rows then)
        # [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 2]]; rows 1, 0, 1, 2 and
        # columns 0, 1, 1, 2: kappa = (4 * 3 - (0 + 0 + 1 + 4)) / (16 - 5) = 7 / 11;
        # mean absolute difference (2 - 1) / 4 / 4 = 0.0625.
        then = [("q1", "h1", {"relevance": 1}), ("q2", "h2", {"relevance": 4}),
                ("q3", "h3", {"relevance": 5}), ("q4", "h4", {"relevance": 5})]
        now = [("q1", "h1", {"relevance": 2})] + then[1:]
        qrels = {"q%d" % i: {"a": 1} for i in range(1, 5)}
        run = {q: ["a"] for q in qrels}
        frozen = self.write("frozen.jsonl", drift_rows(then))
        current = self.write("now.jsonl", drift_rows(now))
        code, out, err = self.report_of("--scores", current, "--drift", frozen,
                                        "--score-range", "relevance=1:5", "--metrics",
                                        "recall@1,score(field=relevance)", "--format", "json",
                                        qrels=qrels, run=run)
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        r = json.loads(out)["drift"]["fields"]["relevance"]
        self.assertEqual((r["labels"], r["confusion"], r["agreement"], r["kappa"]),
                         ([1, 2, 4, 5], [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0],
                                         [0, 0, 0, 2]], 0.75, 7 / 11))
        self.assertEqual(r["mean_absolute_difference"], 0.0625)
        # Without a range that says integers, a number field: no kappa.
        then = [(i, h, {"relevance": v["relevance"] / 5}) for i, h, v in then]
        now = [(i, h, {"relevance": v["relevance"] / 5}) for i, h, v in now]
        code, out, err = self.drift("--format", "json", then=then, now=now)
        self.assertIsNone(json.loads(out)["drift"]["fields"]["relevance"]["kappa"])
        # Repeated runs of a boolean: fractions, compared as numbers, and said so.
        then = [("q1", "h1", {"ok": [True, True]}), ("q2", "h2", {"ok": [False, True]})]
        now = [("q1", "h1", {"ok": [True, False]}), ("q2", "h2", {"ok": [False, True]})]
        code, out, err = self.drift("--format", "json", then=then, now=now)
        drift = json.loads(out)["drift"]
        self.assertFalse(drift["fields"]["ok"]["categorical"])
        self.assertEqual(drift["fields"]["ok"]["mean_absolute_difference"], 0.25)
        self.assertIn("repeated judge runs", drift["notes"][0])

    def test_seeded_mutations_fail_cleanly(self):
        # Broken lines, deleted and inserted items, values of every wrong type on
        # either side: exit 0, 1 or 2, and 2 is one line with nothing written.
        broken = ['{', 'null', '[]', '{"query_id": "f9"}',
                  '{"query_id": "f1", "faithfulness": NaN}',
                  '{"query_id": "f2", "input_sha256": "a2", "faithfulness": 2, "grounded": 1}',
                  '{"query_id": "f3", "input_sha256": 5, "faithfulness": 0.5}', 'query_id,x',
                  '{"query_id": "f4", "input_sha256": "a4", "faithfulness": [0.1, 0.2], '
                  '"grounded": [true, false]}']
        rng = random.Random(15)
        seen = set()
        for case in range(60):
            sides = [drift_rows(self.THEN).splitlines(), drift_rows(self.NOW).splitlines()]
            for lines in sides:
                for _ in range(rng.randint(0, 2)):
                    i = rng.randrange(len(lines) + 1)
                    choice = rng.random()
                    if choice < 0.3 and i < len(lines):
                        del lines[i]
                    elif choice < 0.6:
                        lines.insert(i, rng.choice(broken))
                    elif i < len(lines):
                        record = json.loads(lines[i])
                        record[rng.choice(sorted(record))] = rng.choice([None, 0.3, True, "t",
                                                                         [1], 7, -1])
                        lines[i] = json.dumps(record)
            frozen = self.write("frozen.jsonl", "\n".join(sides[0]) + "\n")
            current = self.write("now.jsonl", "\n".join(sides[1]) + "\n")
            out_path = os.path.join(self.tmp, "out.json")
            extra = rng.choice([(), ("--max-drift", "0.3"), ("--allow-missing-scores",)])
            code, out, err = run_cli("--scores", current, "--drift", frozen, "-o", out_path,
                                     *extra)
            with self.subTest(case=case, frozen=sides[0], now=sides[1]):
                self.assertIn(code, (0, 1, 2))
                self.assertNotIn("Traceback", err)
                if code == 2:
                    self.assertEqual(len(err.strip().splitlines()), 1, err)
                    self.assertFalse(os.path.exists(out_path))
                else:
                    self.assertTrue(os.path.exists(out_path))
                    os.remove(out_path)
            seen.add(code)
        self.assertEqual(seen, {0, 1, 2})

    def test_same_bytes_every_time(self):
        first = self.drift("--format", "json")
        self.assertEqual(first, self.drift("--format", "json"))
        self.assertEqual(self.drift("--seed", "3")[1], self.drift("--seed", "3")[1])


class JudgeDriftExampleTest(unittest.TestCase):
    """examples/judge/frozen.jsonl against rejudged.jsonl (the example README
    works every number by hand; the README shows the text output)."""

    HERE = os.path.join(HERE, "examples", "judge")

    def drift(self, *argv):
        return run_cli("--scores", os.path.join(self.HERE, "rejudged.jsonl"), "--drift",
                       os.path.join(self.HERE, "frozen.jsonl"), *argv)

    def test_the_judge_moved(self):
        code, out, err = self.drift("--format", "json")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        drift = json.loads(out)["drift"]
        f, g = drift["fields"]["faithfulness"], drift["fields"]["grounded"]
        self.assertAlmostEqual(f["mean_difference"], -0.30 / 6, places=15)
        self.assertAlmostEqual(f["mean_absolute_difference"], 0.30 / 6, places=15)
        self.assertEqual((f["p"], f["largest_change"]),
                         (2 / 2 ** 4, {"item": "f3", "stored": 1.0, "current": 0.9}))
        self.assertEqual((g["agreement"], g["kappa"], g["confusion"], g["p"]),
                         (5 / 6, 12 / 18, [[2, 0], [1, 3]], 1.0))
        self.assertEqual(g["mean_absolute_difference"], 1 / 6)
        self.assertEqual(self.drift("--max-drift", "0.2")[0], 0)
        # The hashes are those the example README says: sha256 of [question, context, answer].
        with open(os.path.join(self.HERE, "frozen.jsonl"), encoding="utf-8") as handle:
            for line in handle:
                item = json.loads(line)
                text = json.dumps([item["question"], item["context"], item["answer"]])
                self.assertEqual(item["input_sha256"],
                                 hashlib.sha256(text.encode("utf-8")).hexdigest())

    def test_readme_shows_the_output(self):
        code, out, _ = self.drift()
        readme = read_doc("06-judge-scores.md")
        out = out.replace(self.HERE + os.sep, "examples/judge/")
        shown = out[out.index("judge drift vs"):].strip().splitlines()
        self.assertGreater(len(shown), 6)
        for line in shown:
            self.assertIn(line, readme)
