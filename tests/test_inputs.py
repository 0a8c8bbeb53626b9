"""Inputs: where they come from (paths, pipes, gzip), JSON and JSONL qrels and
runs, the test-set formats (test-set JSONL, BEIR, object lists, Ragas), TREC
files, and runs read as a stream.  Judge score files: test_judge_scores.py.
"""

import gzip
import io
import json
import os
import random
import re
import sys
import unittest

import rag_eval
from tests.support import read_doc, HERE, run_cli, TempDir, example, read_text, _FUZZ_VALUES


# ---------------------------------------------------------------------------
# Inputs: where they come from; JSON and JSONL; TREC; runs read as a stream
# Bad input: one line on stderr, exit 2, no traceback, nothing written (assertBad)
# ---------------------------------------------------------------------------

class InputSourcesTest(TempDir, unittest.TestCase):
    """Paths, file objects, stdin, named pipes, gzip, byte order marks; the
    format read from the content or given; files that cannot be read."""
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

    def test_format_is_detected_from_the_first_line_whole(self):
        # One line, no final newline: "query_id" inside a ranking does not make it
        # JSONL; a lone JSONL record does not make it JSON.
        q = self.write("q.json", '{"q1": {"a": 1}}')
        for name, text in (("r.json", '{"q1": ["query_id", "a"]}'),
                           ("r.jsonl", '{"query_id": "q1", "docs": ["query_id", "a"]}')):
            with self.subTest(text=text):
                code, out, err = run_cli(q, self.write(name, text), "--metrics", "mrr@2",
                                         "--format", "json")
                self.assertEqual(code, 0, err)
                report = json.loads(out)
                self.assertEqual(report["mean"], {"mrr@2": 0.5})
                self.assertEqual(report["inputs"]["run"]["format"], name[2:])
        # A first line over a MiB: the top-level keys held whole in that MiB decide.
        many = ["x%d" % i for i in range(150000)]
        huge = {"r.json": json.dumps({"q1": ["query_id"] + many + ["a"]}),
                "r.jsonl": json.dumps({"run": "bm25", "query_id": "q1", "docs": many + ["a"]})}
        for name, text in huge.items():
            with self.subTest(huge=name):
                path = self.write(name, text)
                self.assertGreater(os.path.getsize(path), 1 << 20)
                self.assertEqual(rag_eval._detect_format(rag_eval._Input(path), "run"), name[2:])
                code, out, err = run_cli(q, path, "--metrics", "success", "--k", "200000")
                self.assertEqual(code, 0, err)
                self.assertIn("1.0000", out)

    def test_format_override(self):
        path = self.write("run.txt", "q1 Q0 a 1 0.5 t\n")
        with self.assertRaises(rag_eval.EvalError):
            rag_eval.load_run(path, format="json")
        self.assertEqual(rag_eval.load_run(path, format="trec"), {"q1": {"a": 0.5}})

    def test_file_object_and_stdin(self):
        self.assertEqual(rag_eval.load_qrels(io.BytesIO(b'{"q": {"a": 1}}')), {"q": {"a": 1}})
        with open(example("qrels.json")) as handle:
            code, out, err = run_cli("-", example("run.json"), stdin=handle.read())
        self.assertEqual(code, 0, err)
        self.assertIn("0.5095", out)

    def test_qrels_from_stdin_with_compare(self):
        with open(example("qrels.json")) as handle:
            code, out, err = run_cli("-", example("run.json"), "--compare", example("run.json"),
                                     stdin=handle.read())
        self.assertEqual(code, 0, err)
        self.assertIn("no difference (equal on every query)", out)

    def test_both_from_stdin(self):
        code, out, err = run_cli("-", "-", stdin="{}")
        self.assertEqual(code, 2)
        self.assertIn("stdin", err)

    @unittest.skipUnless(hasattr(os, "mkfifo"), "needs named pipes")
    def test_named_pipe_input(self):
        fifo = os.path.join(self.tmp, "run.pipe")
        os.mkfifo(fifo)

        def feed():
            with open(fifo, "w") as pipe, open(example("run.json")) as source:
                pipe.write(source.read())
        import threading
        writer = threading.Thread(target=feed)
        writer.start()
        code, out, err = run_cli(example("qrels.json"), fifo)
        writer.join()
        self.assertEqual(code, 0, err)
        self.assertIn("0.5095", out)

    def test_compare_from_stdin_is_named_as_the_main_inputs_are(self):
        # Issue 22: --compare - was named by its holder object (JSON: an internal
        # error; text: "run vs <...object at 0x...>", other bytes each process).
        qrels = self.write("q.json", '{"q1": {"a": 1}, "q2": {"b": 1}}')
        run_path = self.write("r.json", '{"q1": ["a"], "q2": ["x", "b"]}')
        run = read_text(run_path)
        code, out, err = run_cli(qrels, run_path, "--format", "json", "--compare", "-",
                                 stdin=run)
        self.assertEqual(code, 0, err)
        self.assertEqual([c["reference"] for c in json.loads(out)["comparison"]], ["<stdin>"])
        code, out, err = run_cli(qrels, run_path, "--compare", "-", stdin=run)
        self.assertEqual(code, 0, err)
        self.assertIn("run vs <stdin>, paired over 2 queries", out)
        scores = self.write("s.jsonl", '{"query_id": "q1", "f": 0.5}\n'
                                       '{"query_id": "q2", "f": 1}\n')
        for argv in (("--scores", scores, "--compare", "-"),
                     (qrels, run_path, "--scores", scores, "--metrics", "recall,score(field=f)",
                      "--compare-scores", "-")):
            code, out, err = run_cli(*argv, stdin=read_text(scores))
            self.assertEqual(code, 0, err)
            self.assertIn("run vs <stdin>, paired over 2 queries", out)

    @unittest.skipUnless(hasattr(os, "mkfifo"), "needs named pipes")
    def test_compare_from_a_named_pipe_keeps_its_path(self):
        qrels = self.write("q.json", '{"q1": {"a": 1}, "q2": {"b": 1}}')
        run_path = self.write("r.json", '{"q1": ["a"], "q2": ["x", "b"]}')
        fifo = os.path.join(self.tmp, "ref.pipe")
        os.mkfifo(fifo)

        def feed():
            with open(fifo, "w") as pipe:
                pipe.write(read_text(run_path))
        import threading
        writer = threading.Thread(target=feed)
        writer.start()
        code, out, err = run_cli(qrels, run_path, "--compare", fifo, "--format", "json")
        writer.join()
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["comparison"][0]["reference"], fifo)

    def test_byte_order_marks(self):
        bom = b"\xef\xbb\xbf"
        for name, content in (("q.json", bom + b'{"q1": {"a": 1}}'),
                              ("q.trec", bom + b"q1 0 a 1\n")):
            with self.subTest(file=name):
                self.assertEqual(rag_eval.load_qrels(self.write(name, content)), {"q1": {"a": 1}})
        run = self.write("r.trec", bom + b"q1 Q0 a 1 2.5 t\n")
        self.assertEqual(rag_eval.load_run(run), {"q1": {"a": 2.5}})

    def test_sources_of_any_type(self):
        for source in (None, 1.5, True, ["qrels.json"], "\ud800"):
            for load in (rag_eval.load_qrels, rag_eval.load_run, rag_eval.load_baseline):
                with self.subTest(source=source, load=load.__name__):
                    self.assertRaises(rag_eval.EvalError, load, source)
        self.assertEqual(rag_eval.load_qrels(os.fsencode(example("qrels.json")))["q2"],
                         {"sla-uptime#1": 2})

    def test_missing_file(self):
        code, out, err = run_cli(os.path.join(self.tmp, "nope.json"), example("run.json"))
        self.assertEqual(code, 2)
        self.assertIn("nope.json: no such file", err)

    def test_directory(self):
        code, out, err = run_cli(self.tmp, example("run.json"))
        self.assertEqual(code, 2)
        self.assertIn("directory", err)

    def test_not_utf8_and_bad_gzip(self):
        self.assertBad(qrels=b'{"q1": {"\xff": 1}}', expect="not UTF-8")
        self.assertBad(qrels=b"\x1f\x8bnot really gzip", expect="gzip")

    def test_an_id_that_is_not_utf8_is_refused_naming_the_line(self):
        # Issue 22: the gate naming such an id exited 2 as an internal error (it
        # should have been 1) and the JSON held the raw byte; --to-label crashed.
        # One rule for every reader: an id is text, refused at read otherwise.
        baseline = '{"mrr@5": 1.0}'
        run = ("r.trec", b"q1 Q0 x\xff 1 2.0 r\nq1 Q0 a 2 1.0 r\n")
        expect = "r.trec:1: doc id b'x\\xff' is not UTF-8 text (byte 0xff)"
        qrels = ("q.trec", "q1 0 a 1\n")
        for extra in (("--metrics", "mrr"), ("--to-label", os.path.join(self.tmp, "t.jsonl"))):
            with self.subTest(extra=extra):
                self.assertBad(qrels=qrels, run=run, extra=extra, expect=expect,
                               baseline=baseline)
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "t.jsonl")))
        self.assertBad(qrels=("q.trec", b"q1 0 a 1\nq1 0 b\xff 1\n"),
                       expect="q.trec:2: doc id b'b\\xff' is not UTF-8 text (byte 0xff)")
        self.assertBad(qrels=("q.trec", b"q\xc3 0 a 1\n"),
                       expect="q.trec:1: query id b'q\\xc3' is not UTF-8 text (byte 0xc3)")
        # UTF-8 that encodes a surrogate is not UTF-8 either
        self.assertBad(qrels=qrels, run=("r.trec", b"q1 Q0 \xed\xb2\x80 1 2.0 r\n"),
                       expect="r.trec:1: doc id b'\\xed\\xb2\\x80' is not UTF-8 text")

    def test_swapped_files_say_the_order(self):
        swapped = "the files look swapped: give them in the order QRELS RUN"
        trec_run, trec_qrels = "q1 Q0 a 1 2.0 t\n", "q1 0 a 1\n"
        cases = [("q.trec", trec_run, "r.json", self.GOOD_RUN,
                  "q.trec:1: expected 4 fields (query_id iteration doc_id grade), got 6; "
                  "this looks like a TREC run: " + swapped),
                 ("q.json", self.GOOD_QRELS, "r.trec", "# c\n" + trec_qrels,
                  "r.trec:2: expected 6 fields (query_id Q0 doc_id rank score tag), got 4; "
                  "this looks like TREC qrels: " + swapped),
                 ("q.json", self.GOOD_RUN, "r.json", self.GOOD_RUN,
                  "q.json: query 'q1': judgments must be an object {doc_id: grade}, got list; "
                  "a ranked list is a run: " + swapped),
                 ("q.jsonl", '{"query_id": "q1", "docs": ["a"]}\n', "r.json", self.GOOD_RUN,
                  "q.jsonl:1: a JSONL qrels line needs %s, got keys ['query_id', 'docs']; this "
                  "looks like a run: %s" % (rag_eval._JSONL_FORMS["qrels"], swapped)),
                 ("q.json", self.GOOD_QRELS, "r.tsv", "query-id\tcorpus-id\tscore\nq1\ta\t1\n",
                  "r.tsv: starts with BEIR's qrels header line (query-id corpus-id score); this "
                  "looks like qrels: " + swapped)]
        for qname, qtext, rname, rtext, expect in cases:
            with self.subTest(expect=expect):
                code, out, err = self.report_of(qrels=(qname, qtext), run=(rname, rtext))
                self.assertEqual((code, out), (2, ""))
                self.assertEqual(err, "rag-eval: error: %s/%s\n" % (self.tmp, expect))
        # only the first line can say so: later, a short line is just a bad line
        code, out, err = self.report_of(qrels=self.GOOD_QRELS,
                                        run=("r.trec", trec_run + trec_qrels))
        self.assertEqual(code, 2)
        self.assertNotIn("swapped", err)

    def test_csv_and_tsv_name_the_accepted_formats(self):
        # BEIR's TSV with its header is read (TestSetFormatsTest); without it,
        # the message says to add it.
        accepted = ("this looks like CSV or TSV, which is not read: accepted formats are JSON, "
                    "JSONL, TREC (white-space columns) and, for qrels, BEIR's TSV (with its "
                    "header line query-id<TAB>corpus-id<TAB>score)")
        no_header = ("this looks like BEIR's qrels TSV without its header line "
                     "query-id<TAB>corpus-id<TAB>score: add it")
        for name, text, fields, expect in (("q.tsv", "q1\ta\t1\n", 3, no_header),
                                           ("q.tsv", "q1\ta\t1\tx\ty\n", 5, accepted),
                                           ("q.csv", "q1,a,1\n", 1, accepted)):
            with self.subTest(name=name, fields=fields):
                code, out, err = self.report_of(qrels=(name, text), run=self.GOOD_RUN)
                self.assertEqual((code, out), (2, ""))
                self.assertEqual(err, "rag-eval: error: %s/%s:1: expected 4 fields (query_id "
                                 "iteration doc_id grade), got %d; %s\n"
                                 % (self.tmp, name, fields, expect))
        code, out, err = self.report_of(qrels=self.GOOD_QRELS,
                                        run=("r.csv", "query_id,doc_id,score\n"))
        self.assertIn("r.csv:1: expected 6 fields (query_id Q0 doc_id rank score tag), got 1; "
                      + accepted, err)


class JsonInputTest(TempDir, unittest.TestCase):
    """JSON and JSONL qrels and runs: the forms read, and every malformed value
    refused by name."""
    def test_jsonl_ranked_lists(self):
        path = self.write("run.jsonl", '{"query_id": "q1", "docs": ["a", "b"]}\n'
                                       '{"query_id": 2, "docs": []}\n')
        self.assertEqual(rag_eval.load_run(path), {"q1": ["a", "b"], "2": []})

    def test_invalid_json_names_line_and_column(self):
        err = self.assertBad(qrels='{"q1": {"a": 1,\n  "b": }}', expect="q.json:2:")
        self.assertIn("invalid JSON", err)

    def test_top_level_not_object(self):
        self.assertBad(qrels='[1, 2]', expect="top level must be an object")

    def test_qrels_entry_not_object(self):
        self.assertBad(qrels='{"q1": ["a"]}', expect="'q1'")

    # test_error_texts was merged into the next three tests and test_bad_k: the
    # same inputs, with the texts it checked.
    def test_bad_grades(self):
        for grade in ("1.5", "true", '"2"', "NaN", "null", "1e400"):
            with self.subTest(grade=grade):
                err = self.assertBad(qrels='{"q1": {"a": %s}}' % grade, expect="q.json")
                if grade == "1.5":
                    self.assertIn("must be an integer grade, got 1.5", err)

    def test_run_value_not_list_or_object(self):
        self.assertBad(run='{"q1": "a"}', expect="ranked list")

    def test_ids_must_be_strings_or_ints(self):
        for bad in ("1.5", "null", "true", '["a"]'):
            with self.subTest(id=bad):
                self.assertBad(run='{"q1": [%s]}' % bad, expect="string (or an integer)")
        self.assertBad(run='{"q1": [{"x": 1}]}', expect='an object in a ranking needs "id"')

    def test_bad_scores(self):
        for score in ("NaN", "Infinity", "-Infinity", '"0.5"', '"x"', "true", "null"):
            with self.subTest(score=score):
                err = self.assertBad(run='{"q1": {"a": %s}}' % score, expect="r.json")
                if score == '"x"':
                    self.assertIn("must be a finite number, got 'x'", err)

    def test_duplicate_keys(self):
        self.assertBad(qrels='{"q1": {"a": 1, "a": 0}}', expect="duplicate key 'a'")
        self.assertBad(run='{"q1": ["a"], "q1": ["b"]}', expect="duplicate key 'q1'")

    def test_deep_nesting(self):
        self.assertBad(qrels="[" * 100000 + "]" * 100000, expect="q.json")

    def test_no_tracebacks(self):
        cases = [("r.json", '{"q1": {"d1": 1%s}}' % ("0" * 5000), "invalid JSON"),
                 ("r.json", '{"q1": {"d1": 1%s}}' % ("0" * 400), "must be a finite number")]
        for name, text, expect in cases:
            with self.subTest(expect=expect):
                code, out, err = self.report_of(qrels={"q1": {"d1": 1}}, run=(name, text))
                self.assertEqual(code, 2)
                self.assertIn(expect, err)
                self.assertEqual(len(err.strip().splitlines()), 1)
        saved = sys.stdin
        sys.stdin = None
        try:
            code, out, err = run_cli("-", example("run.json"))
        finally:
            sys.stdin = saved
        self.assertEqual(code, 2)
        self.assertIn("standard input is closed", err)

    def test_every_lone_surrogate_is_an_input_error(self):
        # High (\ud800-\udbff) and low (\udc00-\udfff) halves alike, in a key or
        # a value; the low half used to pass the check and crash the output.
        cases = [('{"q1": {"a": 1}, "\\udc00": {"b": 0}}', None, "q.json: '\\udc00' holds"),
                 (None, '{"q1": ["a", "\\uDFFF"]}', "r.json: '\\udfff' holds"),
                 (None, '{"q1": {"a": 1.0, "x\\ud83d": 0.5}}', "r.json: 'x\\ud83d' holds"),
                 ('{"q1": {"a": 1, "\\ude00\\ud83d": 0}}', None, "q.json: '\\ude00\\ud83d'")]
        # and a high half as a query id of both files (was test_lone_surrogate_is_an
        # _input_error): the same refusal, nothing written
        cases.append(('{"\\ud800": {"a": 1}}', '{"\\ud800": ["a"]}',
                      "q.json: '\\ud800' holds a lone surrogate"))
        for qrels, run, expect in cases:
            with self.subTest(expect=expect):
                self.assertBad(qrels=qrels, run=run, extra=["--per-query"], expect=expect)
                self.assertEqual(sorted(os.listdir(self.tmp)), ["q.json", "r.json"])
        q = self.write("q.jsonl", '{"query_id": "q1", "grades": {"a": 1}}\n'
                                  '{"query_id": "\\udc01", "grades": {"b": 0}}\n')
        code, out, err = run_cli(q, self.write("r.trec", "q1 Q0 a 1 1.0 t\n"))
        self.assertEqual((code, out), (2, ""))
        self.assertEqual(err, "rag-eval: error: %s:2: '\\udc01' holds a lone surrogate escape, "
                              "not text\n" % q)

    def test_surrogate_pair_is_text(self):
        code, out, err = self.report_of("--metrics", "recall@1", "--per-query", "--format", "json",
                                        qrels='{"q\\ud83d\\ude00": {"a\\uD83D\\uDE00": 1}}',
                                        run=("r.trec", "q\U0001f600 Q0 a\U0001f600 1 1.0 t\n"))
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["per_query"], {"q\U0001f600": {"recall@1": 1.0}})

    def test_jsonl_without_its_key_says_what_a_line_needs(self):
        # (Lines named by "qid" or "id" are read since issue 12: TestSetFormatsTest.)
        run_form = "a JSONL run line needs " + rag_eval._JSONL_FORMS["run"]
        lines = '{"query": "q1", "ranked": ["a"]}\n{"query": "q2", "ranked": ["b"]}\n'
        for extra in ((), ("--run-format", "jsonl")):
            with self.subTest(extra=extra):
                err = self.assertBad(run=lines, extra=extra)
                self.assertEqual(err, "rag-eval: error: %s/r.json:1: %s, got keys ['query', "
                                 "'ranked']\n" % (self.tmp, run_form))
                self.assertNotIn("Extra data", err)
        err = self.assertBad(run='{"query_id": "q1", "docs": ["a"]}\n[1]\n')
        self.assertIn("r.json:2: a JSON array, expected an object: %s\n" % run_form, err)
        err = self.assertBad(qrels='\n{"q": "q1", "grades": {"a": 1}}\n{"q": "q2"}\n')
        self.assertIn('q.json:2: a JSONL qrels line needs a query id ("query_id", "qid" or '
                      "\"id\"), got keys ['q', 'grades']", err)

    def test_a_jsonl_line_that_is_no_object_says_what_it_is(self):
        # Issue 22: an array line, or two objects on one line, said "invalid JSON:
        # Extra data"; say it in words, on the first line as on a later one.
        run_form = "a JSONL run line needs " + rag_eval._JSONL_FORMS["run"]
        first = '{"query_id": "q1", "docs": ["a"]}'
        for text, expect in (
                (first + "\n" + first.replace("q1", "q2") + " " + first.replace("q1", "q3"),
                 "r.json:2: two JSON values on one line\n"),
                (first + ", " + first.replace("q1", "q2") + "\n", "r.json:1: two JSON values on "
                                                                  "one line\n"),
                (first + "\n" + '"q2"\n', "r.json:2: a JSON string, expected an object: %s\n"
                 % run_form),
                (first + "\n" + first[:-1] + "}}\n",
                 "r.json:2:34: invalid JSON: more text after the JSON value\n")):
            with self.subTest(text=text):
                err = self.assertBad(run=text)
                self.assertTrue(err.endswith(expect), err)
                self.assertNotIn("Extra data", err)
        err = self.assertBad(qrels='{"query_id": "q1", "grades": {"a": 1}}\n[1]\n')
        self.assertIn("q.json:2: a JSON array, expected an object: a JSONL qrels line needs", err)
        chunks = self.write("c.jsonl", '{"id": "a", "doc": "d"}\n[1]\n')
        with self.assertRaisesRegex(rag_eval.EvalError, "c.jsonl:2: a JSON array, expected an "
                                                        "object: a chunk-map line is"):
            rag_eval.load_chunks(chunks)

    def test_long_first_jsonl_line_and_empty_jsonl(self):
        qrels = self.write("q.json", '{"q1": {"d1": 1}}')
        docs = ["x%d" % i for i in range(120000)] + ["d1"]
        run = self.write("r.jsonl", json.dumps({"query_id": "q1", "docs": docs}) + "\n")
        self.assertGreater(os.path.getsize(run), 1 << 20)
        code, out, err = run_cli(qrels, run, "--metrics", "recall", "--k", "200000")
        self.assertEqual(code, 0, err)
        self.assertIn("1.0000", out)
        code, out, err = run_cli(qrels, self.write("e.jsonl", "\n \n"), "--run-format", "jsonl")
        self.assertEqual(code, 2)
        self.assertIn("no JSONL records", err)


class TestSetFormatsTest(TempDir, unittest.TestCase):
    """The test set as RAG teams keep it (issue 12): a test-set JSONL file as
    qrels (its query metadata returned for slices), BEIR's qrels TSV, runs as
    lists of {"id", "score"} objects (LangChain, LlamaIndex) and Ragas columns.
    Every new form scores exactly as the same data in today's JSON form."""

    # Today's JSON form of the data most tests use.  By hand, at k=5 (rel 1):
    #   q1: relevant d1, d2; ranked d2, x, d1: recall 2/2 = 1, mrr 1/1 = 1
    #   q2: relevant d3 (grade 2), d4 is judged 0; ranked d3, d4: recall 1, mrr 1
    #   q3: relevant d5; ranked d6, d5: recall 1, mrr 1/2
    #   mrr@5 = (1 + 1 + 1/2) / 3 = 0.83333; q9 (no labels) is unscored
    QRELS = {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 2, "d4": 0}, "q3": {"d5": 1}, "q9": {}}
    RUN = {"q1": ["d2", "x", "d1"], "q2": ["d3", "d4"], "q3": ["d6", "d5"]}
    MEASURES = "recall@5,mrr@5,ndcg@5,precision@2,map@5,rprec"

    # One test set spelled every way the issue lists: id keys by precedence,
    # each name for the labels, id lists and a graded object, metadata fields.
    TEST_SET = [
        {"query_id": "q1", "qid": "not-this", "id": "nor-this", "question": "How do refunds work?",
         "relevant": ["d1", "d2"], "answer": "Within 30 days.",
         "slices": {"source": "synthetic", "hops": ["single", "multi"]}, "tags": ["pricing"],
         "valid_until": "2026-12-31", "notes": "ignored"},
        {"qid": "q2", "id": "row-2", "must_retrieve_doc_ids": {"d3": 2, "d4": 0},
         "slices": {"risk": "high", "year": 2024, "human": True}},
        {"id": "q3", "reference_context_ids": ["d5", "d5"], "user_input": "Ragas' question"},
        {"query_id": "q9", "question": "Who won in 2031?", "answerable": False},
    ]

    def jsonl_file(self, name, lines):
        return self.write(name, "".join(json.dumps(line) + "\n" for line in lines))

    def assertSameNumbers(self, qrels_path, run_path, json_qrels=None, json_run=None, **options):
        """evaluate_files on the new forms equals evaluate_files on today's JSON form."""
        expected = rag_eval.evaluate_files(
            self.write("today_q.json",
                       json.dumps(self.QRELS if json_qrels is None else json_qrels)),
            self.write("today_r.json", json.dumps(self.RUN if json_run is None else json_run)),
            measures=self.MEASURES, **options)
        report = rag_eval.evaluate_files(qrels_path, run_path, measures=self.MEASURES, **options)
        for field in ("mean", "per_query", "unscored", "missing", "abstention"):
            self.assertEqual(getattr(report, field), getattr(expected, field), field)
        # the same labels hash the same, whatever the file's form (saved baselines)
        self.assertEqual(dict(report.label_sha256), dict(expected.label_sha256))
        return report

    # -- test-set JSONL as qrels -------------------------------------------------

    def test_test_set_jsonl_scores_as_its_json_form(self):
        qrels = self.jsonl_file("testset.jsonl", self.TEST_SET)
        self.assertEqual(rag_eval.load_qrels(qrels), self.QRELS)
        report = self.assertSameNumbers(qrels, self.write("r.json", json.dumps(self.RUN)))
        self.assertAlmostEqual(report.mean["mrr@5"], (1 + 1 + 1 / 2) / 3, places=15)
        self.assertEqual(report.unscored, ("q9",))
        self.assertEqual(report.inputs["qrels"]["format"], "jsonl")
        # the ids of a list count once, grade 1 each: "d5" listed twice is one label
        self.assertEqual(rag_eval.load_qrels(qrels)["q3"], {"d5": 1})

    def test_every_labels_name_and_id_key(self):
        for labels in ("grades", "relevant", "relevant_ids", "must_retrieve_doc_ids",
                       "reference_context_ids"):
            for id_key in ("query_id", "qid", "id"):
                with self.subTest(labels=labels, id=id_key):
                    path = self.jsonl_file("t.jsonl", [{id_key: "q1", labels: ["a", 7]},
                                                      {id_key: 2, labels: {"b": 3, "c": 0}}])
                    self.assertEqual(rag_eval.load_qrels(path),
                                     {"q1": {"a": 1, "7": 1}, "2": {"b": 3, "c": 0}})

    def test_query_id_precedence(self):
        # query_id > qid > id, and "id" names the query only beside labels
        cases = [({"query_id": "a", "qid": "b", "id": "c", "relevant": ["d"]}, "a"),
                 ({"qid": "b", "id": "c", "relevant": ["d"]}, "b"),
                 ({"id": "c", "relevant": ["d"]}, "c"),
                 ({"qid": "b", "id": "c", "question": "no labels"}, "b")]
        for line, qid in cases:
            with self.subTest(line=line):
                self.assertEqual(list(rag_eval.load_qrels(self.jsonl_file("t.jsonl", [line]))),
                                 [qid])
        # a test-set line may say which document it came from: "doc" beside labels
        # does not make it a label line
        line = {"query_id": "q1", "doc": "faq.md", "relevant": ["faq#2"]}
        self.assertEqual(rag_eval.load_qrels(self.jsonl_file("t.jsonl", [line])),
                         {"q1": {"faq#2": 1}})
        # without labels, "id" names no query (a chunk's or a row's id, say)
        path = self.jsonl_file("t.jsonl", [{"query_id": "q1", "relevant": ["d"]},
                                          {"id": "q2", "question": "?"}])
        with self.assertRaisesRegex(rag_eval.EvalError, r"t\.jsonl:2: a JSONL qrels line needs "
                                    r'\{"query_id": \.\.\., "relevant"'):
            rag_eval.load_qrels(path)

    def test_a_query_without_labels_is_in_the_test_set_unscored(self):
        lines = [{"query_id": "q1", "relevant": {"d1": 1}},
                 {"query_id": "q9", "question": "Who won in 2031?", "answerable": False},
                 {"qid": "q8"}]
        report = self.assertSameNumbers(
            self.jsonl_file("t.jsonl", lines), self.write("r.json", '{"q1": ["d1"], "q9": ["x"]}'),
            json_qrels={"q1": {"d1": 1}, "q9": {}, "q8": {}}, json_run={"q1": ["d1"], "q9": ["x"]})
        self.assertEqual(report.unscored, ("q8", "q9"))
        self.assertEqual(list(report.per_query), ["q1"])
        # beside span labels (label objects) too: {} is no labels in either form
        spans = [{"query_id": "q1", "relevant": [{"doc": "a.md", "start": 0, "end": 10,
                                                  "grade": 1}]},
                 {"query_id": "q9", "answerable": False}]
        qrels = rag_eval.load_qrels(self.jsonl_file("s.jsonl", spans))
        self.assertEqual(qrels, {"q1": [rag_eval.Label("a.md", 0, 10, 1)], "q9": {}})
        report = rag_eval.evaluate(qrels, {"q1": [{"id": "c1", "doc": "a.md", "start": 0,
                                                   "end": 20}]}, measures="recall(unit=doc)@1")
        self.assertEqual((report.mean, report.unscored), ({"recall(unit=doc)@1": 1.0}, ("q9",)))

    def test_a_line_without_labels_holding_another_forms_keys_is_refused(self):
        for line, expect in (({"query_id": "q1", "docs": ["a"]}, "this looks like a run"),
                             ({"query_id": "q1", "grade": 1}, "got keys ['query_id', 'grade']"),
                             ({"query_id": "q1", "relevant": ["a"], "grades": {"a": 1}},
                              "gives both 'grades' and 'relevant': keep one")):
            with self.subTest(line=line):
                err = self.assertBad(qrels=("q.jsonl", json.dumps(line) + "\n"), expect=expect)
                self.assertIn("q.jsonl:1: a JSONL qrels line", err)

    def test_bad_labels_name_the_line(self):
        cases = [({"query_id": "q1", "relevant": "d1"},
                  "q.jsonl:1: query 'q1': 'relevant' must be an object {doc_id: grade} or a list "
                  "of ids, got 'd1'"),
                 ({"query_id": "q1", "relevant": None}, "got None"),
                 ({"query_id": "q1", "relevant_ids": ["a", 1.5]},
                  "q.jsonl:1: query 'q1': relevant_ids item 2 must be a string (or an integer)"),
                 ({"query_id": "q1", "relevant": ["a", {"doc": "b", "grade": 1}]}, "item 2"),
                 ({"query_id": "q1", "relevant": {"a": 0.5}}, "must be an integer grade"),
                 ({"query_id": ["q1"], "relevant": ["a"]}, "q.jsonl:1: query_id must be a string")]
        for line, expect in cases:
            with self.subTest(line=line):
                self.assertBad(qrels=("q.jsonl", json.dumps(line) + "\n"), expect=expect)
        self.assertBad(qrels=("q.jsonl", '{"id": "q1", "relevant": ["a"]}\n{"qid": "q1", '
                                         '"relevant": ["b"]}\n'),
                       expect="q.jsonl:2: query 'q1' appears on more than one line")

    # -- query metadata ------------------------------------------------------------

    def test_metadata_contract(self):
        # What part B (slices, hold-out, --as-of) reads: exactly this.
        qrels, info, queries = rag_eval._read_qrels(self.jsonl_file("t.jsonl", self.TEST_SET))
        self.assertEqual(qrels, self.QRELS)
        self.assertEqual(info["format"], "jsonl")
        self.assertEqual(queries, {
            "q1": {"slices": {"hops": ["single", "multi"], "source": ["synthetic"],
                              "tag": ["pricing"]},
                   "question": "How do refunds work?", "answer": "Within 30 days.",
                   "valid_until": "2026-12-31"},
            "q2": {"slices": {"human": ["true"], "risk": ["high"], "year": ["2024"]}},
            "q3": {"slices": {}},
            "q9": {"slices": {}, "question": "Who won in 2031?", "answerable": False}})
        # a file that says nothing of its queries, and every other format: None
        plain = self.jsonl_file("p.jsonl", [{"query_id": "q1", "relevant": ["a"], "x": 1}])
        for path in (plain, self.write("q.json", '{"q1": {"a": 1}}'),
                     self.write("q.trec", "q1 0 a 1\n"),
                     self.write("q.tsv", "query-id\tcorpus-id\tscore\nq1\ta\t1\n")):
            with self.subTest(path=os.path.basename(path)):
                self.assertIsNone(rag_eval._read_qrels(path)[2])
        # a null field is a field not given
        nulls = self.jsonl_file("n.jsonl", [{"query_id": "q1", "relevant": ["a"], "slices": None,
                                            "tags": None, "answer": None, "answerable": True}])
        self.assertEqual(rag_eval._read_qrels(nulls)[2],
                         {"q1": {"slices": {}, "answerable": True}})

    def test_readme_test_set_reads_as_documented(self):
        section = read_doc("01-inputs.md").split("\n## Inputs\n", 1)[1].split("\n## ", 1)[0]
        block = re.search(r"```jsonl\n(.*?)```", section, re.S).group(1)
        path = self.write("testset.jsonl", "\n".join(line.strip() for line in block.splitlines()))
        qrels, _, queries = rag_eval._read_qrels(path)
        self.assertEqual(qrels, {"q1": {"refunds#2": 1, "faq#7": 1},
                                 "q2": {"refunds#3": 2, "faq#7": 0}, "q9": {}})
        self.assertEqual(queries["q1"]["slices"], {"hops": ["single"], "source": ["synthetic"],
                                                   "tag": ["pricing"]})
        self.assertEqual(queries["q9"], {"slices": {}, "question": "Who won the 2031 final?",
                                         "answerable": False})
        report = rag_eval.evaluate(qrels, {"q1": ["faq#7"], "q2": ["refunds#3"]},
                                   measures="recall@5")
        # q1: 1 of 2 relevant; q2: 1 of 1; q9 unscored
        self.assertEqual((report.mean, report.unscored), ({"recall@5": (0.5 + 1) / 2}, ("q9",)))

    def test_queries_file(self):
        lines = [{"query_id": "q1", "slices": {"source": "synthetic", "hops": "multi"},
                  "tags": ["pricing", "refunds", "pricing"]},
                 {"qid": "q2", "slices": {"source": "real"}, "valid_until": "2024-02-29"},
                 {"id": 3, "answerable": False, "relevant": ["ignored: labels live in the qrels"]}]
        path = self.jsonl_file("queries.jsonl", lines)
        expected = {"q1": {"slices": {"hops": ["multi"], "source": ["synthetic"],
                                      "tag": ["pricing", "refunds"]}},
                    "q2": {"slices": {"source": ["real"]}, "valid_until": "2024-02-29"},
                    "3": {"slices": {}, "answerable": False}}
        self.assertEqual(rag_eval.load_queries(path), expected)
        gz = self.write("queries.jsonl.gz", gzip.compress(read_text(path).encode()))
        queries, info = rag_eval._read_queries(gz)
        self.assertEqual(queries, expected)
        self.assertEqual((info["path"], info["format"]), (gz, "jsonl"))
        self.assertIn("load_queries", rag_eval.__all__)

    def test_an_empty_label_list_is_no_label(self):
        # Found by review: an internal error (a list read as {id: grade}).
        for qrels in ({"q1": [], "q2": {"a": 1}}, {"q1": [], "q2": [{"doc": "a", "grade": 1}]}):
            with self.subTest(qrels=qrels):
                by_doc = isinstance(qrels["q2"], list)
                report = rag_eval.evaluate(qrels, {"q1": ["a"], "q2": ["a#1" if by_doc else "a"]},
                                           k=1, measures="recall(unit=doc)" if by_doc
                                           else "recall", doc_sep="#")
                self.assertEqual((report.unscored, list(report.mean.values())), (("q1",), [1.0]))

    def test_empty_metadata_is_no_value(self):
        # Found by review: exported test sets write "tags": [] for "no tags".
        for fields in ({"tags": []}, {"slices": {"s": []}}, {"slices": {"s": None}}):
            with self.subTest(fields=fields):
                line = dict({"query_id": "q1", "relevant": ["a"]}, **fields)
                code, out, err = self.report_of("--format", "json", qrels=(
                    "t.jsonl", json.dumps(line) + "\n"), run={"q1": ["a"]})
                self.assertEqual(code, 0, err)
                self.assertEqual(json.loads(out)["mean"]["recall@5"], 1.0)

    def test_bad_metadata_names_the_line(self):
        cases = [
            ({"slices": ["synthetic"]}, 't:2: "slices" must be an object {field: value, ...}'),
            ({"slices": {"source": 0.5}}, "t:2: slices.source: a slice value must be text, an "
                                          "integer or true/false (or a list of them), got 0.5"),
            ({"slices": {"source": {"a": 1}}}, "slices.source: a slice value must be text"),
            ({"slices": {"source": [["a"]]}}, "slices.source: a slice value must be text"),
            ({"slices": {"source": ""}}, "slices.source: a slice value cannot be empty"),
            ({"slices": {"a=b": "c"}}, "t:2: slice field 'a=b' must be non-empty text without "
                                       "'='"),
            ({"slices": {"": "c"}}, "t:2: slice field '' must be non-empty"),
            ({"tags": "pricing"}, 't:2: "tags" must be a list, got \'pricing\''),
            ({"tags": ["a"], "slices": {"tag": "b"}}, 't:2: give "tags" or slices.tag, not both'),
            ({"question": 5}, "t:2: 'question' must be text, got 5"),
            ({"answer": ["a"]}, "t:2: 'answer' must be text"),
            ({"answerable": "no"}, "t:2: 'answerable' must be true or false, got 'no'"),
            ({"answerable": 0}, "'answerable' must be true or false, got 0"),
            ({"valid_until": "2026-13-01"}, "t:2: valid_until must be a date YYYY-MM-DD, got "
                                            "'2026-13-01'"),
            ({"valid_until": "2023-02-29"}, "valid_until must be a date YYYY-MM-DD"),
            ({"valid_until": "31/12/2026"}, "valid_until must be a date YYYY-MM-DD"),
            ({"valid_until": "2026-12-31T00:00"}, "valid_until must be a date YYYY-MM-DD"),
            ({"valid_until": 20261231}, "'valid_until' must be text"),
        ]
        for fields, expect in cases:
            for reader in ("qrels", "queries"):
                with self.subTest(fields=fields, reader=reader):
                    line = dict({"query_id": "q2", "relevant": ["a"]}, **fields)
                    path = self.jsonl_file("t", [{"query_id": "q1"}, line])
                    load = rag_eval.load_qrels if reader == "qrels" else rag_eval.load_queries
                    with self.assertRaises(rag_eval.EvalError) as caught:
                        load(path)
                    message = str(caught.exception).replace(self.tmp + "/", "")
                    self.assertIn(expect, message)
                    self.assertNotIn("\n", message)
        # on the command line: exit 2, one line, nothing written
        line = json.dumps({"query_id": "q1", "relevant": ["a"], "answerable": "no"})
        self.assertBad(qrels=("q.jsonl", line + "\n"), expect="q.jsonl:1: 'answerable' must be")

    def test_bad_queries_file(self):
        cases = [('{"query_id": "q1"}\n{"query_id": "q1"}\n',
                  "q.jsonl:2: query 'q1' appears on more than one line"),
                 ('{"slices": {"a": "b"}}\n', 'q.jsonl:1: a queries line needs {"query_id": ...'),
                 ('["q1"]\n', "q.jsonl:1: a JSON array, expected an object: a queries line "
                              "needs"),
                 ('{"query_id": "q1"}\n{"query_id": "q2"}, {"query_id": "q3"}\n',
                  "q.jsonl:2: two JSON values on one line"),
                 ('{"q1": {"slices": {}},\n "q2": {"slices": {}}}\n',
                  "(a queries file is JSONL: one object a line)"),
                 ("\n\n", "q.jsonl: no queries found")]
        for text, expect in cases:
            with self.subTest(text=text):
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.load_queries(self.write("q.jsonl", text))
                self.assertIn(expect, str(caught.exception))

    # -- BEIR qrels TSV ------------------------------------------------------------

    # Shaped like the BEIR qrels users have: numeric ids (scifact), hashed ids
    # with "::" turns (mtRAG), path-like corpus ids and grades 0-3.
    BEIR = ("query-id\tcorpus-id\tscore\n"
            "1\t31715818\t1\n"
            "3\t14717500\t1\n"
            "36\t5152028\t1\n"
            "36\t11705328\t1\n"
            "dd6b6ffd177f2b311abe676261279d2f::2\t822086267_7384-8758-0-1374\t1\n"
            "q01\t05-meetings/meeting-005-final-presentation\t3\n"
            "q01\t02-subject/observation-001-onboarding\t2\n"
            "q01\t02-subject/observation-007-retro\t0\n")
    BEIR_QRELS = {"1": {"31715818": 1}, "3": {"14717500": 1},
                  "36": {"5152028": 1, "11705328": 1},
                  "dd6b6ffd177f2b311abe676261279d2f::2": {"822086267_7384-8758-0-1374": 1},
                  "q01": {"05-meetings/meeting-005-final-presentation": 3,
                          "02-subject/observation-001-onboarding": 2,
                          "02-subject/observation-007-retro": 0}}
    BEIR_RUN = {"1": ["31715818"], "3": ["x", "y", "14717500"], "36": ["11705328", "z"],
                "dd6b6ffd177f2b311abe676261279d2f::2": ["822086267_7384-8758-0-1374"],
                "q01": ["02-subject/observation-007-retro",
                        "02-subject/observation-001-onboarding",
                        "05-meetings/meeting-005-final-presentation"]}

    def test_beir_tsv_scores_as_its_json_form(self):
        path = self.write("test.tsv", self.BEIR)
        self.assertEqual(rag_eval._detect_format(rag_eval._Input(path), "qrels"), "beir")
        self.assertEqual(rag_eval.load_qrels(path), self.BEIR_QRELS)
        trec = "".join("%s 0 %s %d\n" % (q, d, g) for q, docs in self.BEIR_QRELS.items()
                       for d, g in docs.items())
        self.assertEqual(rag_eval.load_qrels(self.write("q.trec", trec)), self.BEIR_QRELS)
        run = self.write("r.json", json.dumps(self.BEIR_RUN))
        report = self.assertSameNumbers(path, run, self.BEIR_QRELS, self.BEIR_RUN)
        self.assertEqual(report.inputs["qrels"]["format"], "beir")
        # CRLF, blank lines, gzip and the explicit format read the same
        crlf = self.write("crlf.tsv", self.BEIR.replace("\n", "\r\n") + "\r\n")
        gz = self.write("test.tsv.gz", gzip.compress(self.BEIR.encode()))
        for source in (crlf, gz):
            self.assertEqual(rag_eval.load_qrels(source), self.BEIR_QRELS)
        self.assertEqual(rag_eval.load_qrels(path, format="beir"), self.BEIR_QRELS)
        code, out, err = run_cli(path, run, "--qrels-format", "beir", "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["inputs"]["qrels"]["format"], "beir")

    def test_bad_beir_lines_name_the_line(self):
        header = "query-id\tcorpus-id\tscore\n"
        cases = [(header + "q1\ta\n", "q.tsv:2: expected 3 tab-separated fields (query-id "
                                      "corpus-id score), got 2"),
                 (header + "q1\ta\t1\t9\n", "got 4"),
                 (header + "q1\ta\t1.0\n", "q.tsv:2: score must be an integer grade, got '1.0'"),
                 (header + "q1\ta\t1_0\n", "score must be an integer grade, got '1_0'"),
                 (header + "q1\t\t1\n", "q.tsv:2: empty corpus-id"),
                 (header + "q1\ta\t1\nq1\ta\t2\n", "q.tsv:3: query 'q1': 'a' judged twice with "
                                                   "different grades (1, 2)"),
                 (header, "q.tsv: no qrels lines found under the BEIR header")]
        for text, expect in cases:
            with self.subTest(text=text):
                self.assertBad(qrels=("q.tsv", text), expect=expect)
        # forced, a file without the header is refused, not read from line 2
        code, out, err = self.report_of("--qrels-format", "beir",
                                        qrels=("q.tsv", "q1\ta\t1\n"), run=self.GOOD_RUN)
        self.assertEqual(code, 2)
        self.assertIn("q.tsv:1: expected BEIR's header line query-id<TAB>corpus-id<TAB>score, "
                      "got 'q1\\ta\\t1'", err)
        # a run is never BEIR: given as the run, it looks swapped; not a run format
        self.assertBad(run=("r.tsv", header + "q1\ta\t1\n"),
                       expect="looks like qrels: the files look swapped")
        with self.assertRaisesRegex(rag_eval.EvalError, r"unknown run format 'beir' \(choose "
                                                        r"from json, jsonl, trec\)"):
            rag_eval.load_run(self.write("r.json", self.GOOD_RUN), format="beir")

    # -- runs as object lists ----------------------------------------------------------

    def langchain(self, ranking, scores, metadata=True):
        """A LangChain-shaped result list: {"id", "score", "metadata"} per document."""
        return [dict({"id": doc, "score": score},
                     **({"metadata": {"source": doc + ".md", "page": 3}} if metadata else {}))
                for doc, score in zip(ranking, scores)]

    def test_object_lists_score_as_ranked_lists(self):
        falling = {q: self.langchain(ranking, [1.0 - i / 10 for i in range(len(ranking))])
                   for q, ranking in self.RUN.items()}
        qrels = self.write("q.json", json.dumps(self.QRELS))
        run = self.write("r.json", json.dumps(falling))
        report = self.assertSameNumbers(qrels, run)
        self.assertEqual(report.warnings, ())
        loaded = rag_eval.load_run(run)
        self.assertEqual(loaded, self.RUN)
        self.assertEqual(loaded["q1"].scores, [1.0, 0.9, 0.8])      # kept for --min-score
        # the JSONL equivalent, LlamaIndex-style objects without metadata
        lines = [{"query_id": q, "docs": self.langchain(r, [5 - i for i in range(len(r))], False)}
                 for q, r in self.RUN.items()]
        self.assertSameNumbers(qrels, self.jsonl_file("r.jsonl", lines))

    def test_list_order_is_the_ranking_and_rising_scores_are_warned(self):
        # FAISS and Chroma return distances: lower is better, so scores rise down
        # a best-first list.  The list order ranks; the scores never reorder it.
        distances = {q: self.langchain(ranking, [0.25 * (i + 1) for i in range(len(ranking))])
                     for q, ranking in self.RUN.items()}
        distances["q2"] = self.langchain(self.RUN["q2"], [0.5, 0.5])     # equal: not rising
        qrels = self.write("q.json", json.dumps(self.QRELS))
        run = self.write("r.json", json.dumps(distances))
        report = self.assertSameNumbers(qrels, run)
        note = ("%s: 2 queries list scores that rise down the list (first 'q1'): the list "
                "order is the ranking, not the scores (distances rise); check each list is "
                "best first" % run)
        self.assertEqual(report.warnings, (note,))
        library = rag_eval.evaluate(self.QRELS, distances, measures=self.MEASURES)
        self.assertEqual(library.warnings, (note.replace(run, "run"),))
        self.assertEqual(library.mean, report.mean)
        code, out, err = run_cli(qrels, run)
        self.assertEqual(code, 0, err)
        self.assertEqual(err, "rag-eval: warning: %s\n" % note)
        # the same warning from the JSONL reader and from forked workers
        lines = [{"query_id": q, "docs": docs} for q, docs in distances.items()]
        jsonl = self.jsonl_file("r.jsonl", lines)
        self.assertEqual(rag_eval.evaluate_files(qrels, jsonl).warnings,
                         (note.replace(run, jsonl),))
        if hasattr(os, "fork") and (os.cpu_count() or 1) >= 2:
            saved = rag_eval._PARALLEL_MIN_BYTES
            rag_eval._PARALLEL_MIN_BYTES = 0
            try:
                for path in (run, jsonl):
                    with self.subTest(forked=path):
                        forked = rag_eval.evaluate_files(qrels, path, measures=self.MEASURES)
                        self.assertEqual(forked.warnings, (note.replace(run, path),))
                        self.assertEqual(forked.mean, report.mean)
            finally:
                rag_eval._PARALLEL_MIN_BYTES = saved

    def test_bad_scores_in_object_lists(self):
        for score in ('"0.5"', "true", "null", "1e400", "[1]"):
            with self.subTest(score=score):
                self.assertBad(run='{"q1": [{"id": "a", "score": %s}]}' % score,
                               expect="r.json: query 'q1': item 1: score must be a finite number")
        for score in ("NaN", "-Infinity"):
            with self.subTest(score=score):
                self.assertBad(run='{"q1": [{"id": "a", "score": %s}]}' % score,
                               expect="r.json: %s is not a number JSON allows" % score)
        self.assertBad(run='{"q1": [{"id": "a", "score": 0.5}, {"id": "b"}]}',
                       expect="r.json: query 'q1': 1 of 2 items give a score: give one on every "
                              "item or on none")
        self.assertBad(run='{"q1": [{"id": "a", "score": 0.5}, "b"]}', expect="1 of 2 items")
        self.assertBad(run='{"q1": [{"id": null, "score": 0.5, "metadata": {}}]}',
                       expect="r.json: query 'q1': item 1: id must be a string (or an integer)")
        self.assertBad(run=("r.jsonl", '{"query_id": "q1", "docs": [{"score": 0.5}]}\n'),
                       expect='r.jsonl:1: query \'q1\': item 1: an object in a ranking needs '
                              '"id" (and may give score, doc, start, end, tokens)')

    # -- Ragas columns ---------------------------------------------------------------

    def ragas_rows(self, with_ids=True):
        """Rows as Ragas' EvaluationDataset.to_jsonl writes them, with ids added."""
        rows = []
        for qid, ranking in self.RUN.items():
            relevant = [d for d, g in self.QRELS[qid].items() if g >= 1]
            row = {"user_input": "question %s" % qid,
                   "retrieved_contexts": ["text of %s" % d for d in ranking],
                   "reference_contexts": ["text of %s" % d for d in relevant],
                   "retrieved_context_ids": ranking, "reference_context_ids": relevant,
                   "response": "...", "reference": "..."}
            rows.append(dict({"id": qid}, **row) if with_ids else row)
        return rows

    def test_ragas_rows_are_qrels_and_run_at_once(self):
        rows = self.jsonl_file("ragas.jsonl", self.ragas_rows())
        json_qrels = {q: {d: 1 for d, g in labels.items() if g >= 1}
                      for q, labels in self.QRELS.items() if q != "q9"}
        self.assertEqual(rag_eval.load_qrels(rows), json_qrels)
        self.assertEqual(rag_eval.load_run(rows), self.RUN)
        self.assertSameNumbers(rows, rows, json_qrels=json_qrels)
        lines = [{"qid": q, "retrieved_context_ids": r} for q, r in self.RUN.items()]
        self.assertSameNumbers(self.write("q.json", json.dumps(self.QRELS)),
                               self.jsonl_file("r.jsonl", lines))

    def test_ragas_rows_without_an_id_are_refused(self):
        # Ragas rows carry no stable id: a baseline could pair nothing.
        rows = self.ragas_rows(with_ids=False)
        said = ('a JSONL qrels line needs a query id ("query_id", "qid" or "id"), got keys '
                "['user_input', 'retrieved_contexts', 'reference_contexts', "
                "'retrieved_context_ids', 'reference_context_ids', 'response']; Ragas rows have "
                "no stable id: key each row by its question with --query-field user_input, or "
                'add a "query_id" to each row, the same in every file')
        many = "".join(json.dumps(row) + "\n" for row in rows)
        forced = ("--qrels-format", "jsonl")
        for name, text, extra, where in (("q.jsonl", many, (), "q.jsonl:1"),
                                         ("q.jsonl", many, forced, "q.jsonl:1"),
                                         ("q.json", json.dumps(rows[0]), (), "q.json:1")):
            with self.subTest(name=name, extra=extra):
                err = self.assertBad(qrels=(name, text), extra=extra, expect=said)
                self.assertIn("%s: %s" % (where, said), err)
                self.assertNotIn("Extra data", err)
        err = self.assertBad(run=("r.jsonl", many), expect="r.jsonl:1: a JSONL run line needs "
                                                           "a query id")
        self.assertIn("Ragas rows have no stable id", err)

    # -- the first line of a JSONL file -------------------------------------------------

    def test_jsonl_is_detected_by_any_query_id_key(self):
        cases = [('{"qid": "q1", "relevant": ["a"]}\n', "qrels", "jsonl"),
                 ('{"id": 1, "retrieved_context_ids": ["a"]}\n', "run", "jsonl"),
                 ('{"id": "q1", "question": "?"}\n', "qrels", "json"),   # "id" names no query
                 ('{"id": ["a", "b"]}', "run", "json")]        # a query named "id"
        for text, kind, fmt in cases:
            with self.subTest(text=text):
                path = self.write("f", text)
                self.assertEqual(rag_eval._detect_format(rag_eval._Input(path), kind), fmt)
        self.assertEqual(rag_eval.load_run(self.write("r", '{"id": ["a", "b"]}')),
                         {"id": ["a", "b"]})
        # a first line over a MiB: the members held whole in that MiB decide
        many = ["x%d" % i for i in range(150000)]
        for record, fmt in (({"qid": "q1", "docs": many}, "jsonl"),
                            ({"id": "q1", "docs": many}, "jsonl"),
                            ({"docs": many, "id": "q1"}, "json"),   # "id" beyond the MiB
                            ({"id": many, "q2": ["a"]}, "json")):
            with self.subTest(huge=fmt):
                path = self.write("h", json.dumps(record))
                self.assertGreater(os.path.getsize(path), 1 << 20)
                self.assertEqual(rag_eval._detect_format(rag_eval._Input(path), "run"), fmt)

    def test_a_bad_first_line_says_what_each_form_needs(self):
        forms = {"qrels": rag_eval._JSONL_FORMS["qrels"], "run": rag_eval._JSONL_FORMS["run"]}
        for kind in ("qrels", "run"):
            for text in ('{"query": "q1", "hits": ["a"]}\n{"query": "q2", "hits": ["b"]}\n',
                         '{"question": "q1"}\n{"question": "q2"}\n'):
                with self.subTest(kind=kind, text=text):
                    spec = {kind: ("f.jsonl", text)}
                    err = self.assertBad(**spec)
                    self.assertIn("f.jsonl:1: a JSONL %s line needs %s, got keys"
                                  % (kind, forms[kind]), err)
                    self.assertNotIn("Extra data", err)
        for form in ('"relevant"', '"grades"', '"relevant_ids"', '"must_retrieve_doc_ids"',
                     '"reference_context_ids"', '"qid"', '"doc"'):
            self.assertIn(form, forms["qrels"])
        for form in ('"docs"', '"scores"', '"retrieved_context_ids"', '"score"', '"qid"'):
            self.assertIn(form, forms["run"])

    def test_seeded_lines_give_a_report_or_one_input_error(self):
        # Lines built from plausible and odd values for the keys these readers
        # look at: each file is read, or refused with a one-line EvalError;
        # nothing else escapes.
        rng = random.Random(12)
        plausible = {
            "query_id": ["q1", "q2", 3], "qid": ["q1", "q2"], "id": ["q1", "q3", "row-9"],
            "relevant": [["d1", "d2"], {"d1": 2, "d3": 0}, [{"doc": "d1", "grade": 1}], []],
            "grades": [{"d1": 1}, ["d2"]], "reference_context_ids": [["d1"], ["d1", "d1"]],
            "retrieved_context_ids": [["d1", "d2"], []], "docs": [["d2", "d1"], [
                {"id": "d1", "score": 0.5}, {"id": "d2", "score": 0.7}]],
            "scores": [{"d1": 0.5, "d2": 0.25}], "slices": [{"source": ["a", 1, True]}],
            "tags": [["faq", "faq"]], "question": ["why?"], "answerable": [False, True],
            "valid_until": ["2024-02-29", "2026-02-30"], "doc": ["d1"], "grade": [1],
            "user_input": ["why?"]}
        odd = _FUZZ_VALUES + [{"a=b": "c"}, [{"id": "d1", "score": 0.5}, {"id": "d2"}]]
        readers = {"qrels": rag_eval.load_qrels, "run": rag_eval.load_run,
                   "queries": rag_eval.load_queries,
                   "both": lambda p: rag_eval.evaluate_files(p, p, skip_extra_queries=True)}
        read_whole = dict.fromkeys(readers, 0)
        for case in range(400):
            lines = [json.dumps({key: rng.choice(plausible[key] if rng.random() < 0.8 else odd)
                                 for key in rng.sample(sorted(plausible), rng.randrange(1, 4))})
                     for _ in range(rng.randrange(1, 4))]
            text = "\n".join(lines) + "\n"
            if rng.random() < 0.1:
                text = "query-id\tcorpus-id\tscore\n" + text.replace(", ", "\t")
            path = self.write("f%d" % case, text)
            for name, read in readers.items():
                with self.subTest(case=case, text=text, reader=name):
                    try:
                        read(path)
                        read_whole[name] += 1
                    except rag_eval.EvalError as exc:
                        self.assertNotIn("\n", str(exc))
        self.assertGreater(min(read_whole.values()), 0, read_whole)     # not all refusals

    def test_jsonl_run_lines(self):
        path = self.jsonl_file("r.jsonl", [{"qid": "q1", "docs": ["a", "b"]},
                                          {"id": "q2", "scores": {"a": 0.5}},
                                          {"query_id": 3, "id": "x", "retrieved_context_ids": []}])
        self.assertEqual(rag_eval.load_run(path), {"q1": ["a", "b"], "q2": {"a": 0.5}, "3": []})
        for line, expect in (({"qid": "q1", "docs": ["a"], "retrieved_context_ids": ["a"]},
                              "r.jsonl:1: a JSONL run line gives both 'docs' and "
                              "'retrieved_context_ids': keep one"),
                             ({"qid": "q1", "retrieved_context_ids": "a"},
                              "r.jsonl:1: 'retrieved_context_ids' must be a list of ids"),
                             ({"qid": "q1", "relevant": ["a"]}, "this looks like qrels")):
            with self.subTest(line=line):
                self.assertBad(run=("r.jsonl", json.dumps(line) + "\n"), expect=expect)


class TrecInputTest(TempDir, unittest.TestCase):
    """TREC qrels and runs: white-space columns, comment lines, the rank column
    and fields after the run tag ignored; malformed lines named exactly."""
    def score(self, run_text, *extra):
        return self.report_of("--metrics", "mrr", "--k", "1", *extra,
                              qrels=("q.trec", "q1 0 d1 1\n"), run=("r.trec", run_text))

    def test_trec_ignores_rank_column_and_line_order(self):
        path = self.write("run.trec", "q1 Q0 b 1 0.1 t\nq2 Q0 c 1 3 t\n\nq1 Q0 a 9 0.7 t\n")
        self.assertEqual(rag_eval.load_run(path), {"q1": {"b": 0.1, "a": 0.7}, "q2": {"c": 3.0}})

    def test_trec_repeated_line_keeps_best_score(self):
        path = self.write("run.trec", "q1 Q0 a 1 0.1 t\nq1 Q0 a 2 0.7 t\n")
        self.assertEqual(rag_eval.load_run(path), {"q1": {"a": 0.7}})

    def test_trec_qrels_white_space_is_any_run_of_blanks(self):
        # Fields are separated by runs of space, tab, CR, VT or FF (as trec_eval and
        # the run reader); a tab next to a space used to stay inside the doc id.
        qrels = {"q1 0 d1\t 1\n": 1.0, "q1 0 d1 \x0b1\n": 1.0, "q1 0 d1\r 1\r\n": 1.0,
                 "q1\x0c 0  d1   1\n": 1.0, "q1 0 d2 1\nq1 0 d1\t\t0\n": 0.0}
        run = self.write("r.trec", "q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\n")
        for text, recall in qrels.items():
            with self.subTest(text=text):
                code, out, err = self.report_of("--metrics", "recall@1", "--format", "json",
                                                qrels=("q.trec", text), run=run)
                self.assertEqual(code, 0, err)
                self.assertEqual(json.loads(out)["mean"], {"recall@1": recall})
        for text, expect in {"q1 0  1\n": "q.trec:1: expected 4 fields", "q1 0 d1 \u0662\n":
                             "q.trec:1: grade must be an integer, got '\u0662'"}.items():
            with self.subTest(text=text):
                code, out, err = self.report_of(qrels=("q.trec", text), run=run)
                self.assertEqual((code, out), (2, ""))
                self.assertIn(expect, err)
                self.assertEqual(len(err.splitlines()), 1)

    def test_empty_fields_and_odd_white_space_in_trec_runs(self):
        cases = {"q1 Q0  1 9.0 t\nq1 Q0 d1 2 1.0 t\n": "r.trec:1: expected 6 fields",
                 " Q0 d1 1 9.0 t\nq1 Q0 d1 2 1.0 t\n": "r.trec:1: expected 6 fields",
                 "q1 Q0 d1 1 9.0 \nq1 Q0 d2 2 1.0 t\n": "r.trec:1: expected 6 fields"}
        for text, expect in cases.items():
            with self.subTest(text=text):
                code, out, err = self.score(text)
                self.assertEqual(code, 2, out)
                self.assertIn(expect, err)
        for text in ("q1\tQ0\td1\t1\t9.0\tt\r\n", "q1\tQ0  d1 1 9.0 t\n"):
            with self.subTest(text=text):     # tabs and runs of spaces are white space
                code, out, err = self.score(text)
                self.assertEqual(code, 0, err)
                self.assertIn("1.0000", out)

    def test_fields_after_the_run_tag_are_ignored(self):
        # trec_eval 10: "Any field following run_id is ignored"; in every line or some.
        for text in ("q1 Q0 d1 1 2.0 r extra\nq1 Q0 d2 2 1.0 r\n",
                     "q1 Q0 d2 1 1.0 r x y\nq1 Q0 d1 2 2.0 r # 3\n"):
            with self.subTest(text=text):
                code, out, err = self.score(text, "--format", "json")
                self.assertEqual(code, 0, err)
                self.assertEqual(json.loads(out)["mean"], {"mrr@1": 1.0})
                block = text.encode()
                self.assertEqual(rag_eval._block_segments(block, "r", 0, 2),
                                 [(b"q1", [b"d1", b"d2"], [2.0, 1.0])] if "extra" in text
                                 else [(b"q1", [b"d2", b"d1"], [1.0, 2.0])])

    def test_trec_comment_lines_are_skipped(self):
        # trec_eval 10 skips lines whose column 0 is "#"; both readers of each kind do.
        qrels = b"# judged by A\nq1 0 d1 1\n#q1 0 d2 1\nq1 0 d2 0\n"
        self.assertIsNone(rag_eval._trec_qrels_fast(qrels))
        self.assertEqual(rag_eval.load_qrels(io.BytesIO(qrels)), {"q1": {"d1": 1, "d2": 0}})
        run = b"#q1 Q0 d2 1 9.0 t\nq1 Q0 d2 1 2.0 t\n# c\nq1 Q0 d1 2 3.0 t\n"
        def read(block, lines):         # scores as floats: the fast path keeps byte tokens
            return [(q, d, list(map(float, s)))
                    for q, d, s in rag_eval._block_segments(block, "r", 0, lines)]
        self.assertEqual(read(run, 4), read(b"q1 Q0 d2 1 2.0 t\nq1 Q0 d1 2 3.0 t\n", 2))
        self.assertEqual(read(run, 4), [(b"q1", [b"d2", b"d1"], [2.0, 3.0])])
        self.assertEqual(rag_eval._block_segments(b"# only a comment\n", "r", 0, 1), [])
        q, r = self.write("q.trec", qrels), self.write("r.trec", b"#\n" * 3 + run)
        code, out, err = run_cli(q, r, "--metrics", "mrr@1", "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mean"], {"mrr@1": 1.0})
        self.assertEqual(json.loads(out)["inputs"]["qrels"]["format"], "trec")
        for qrels, run in ((b"q1 0 d1 1\n #q2 0 d1 1\n", run),
                           (qrels, b"q1 Q0 d1 1 1.0 t\n\t#q2 Q0 d1 1 1.0 t\n")):
            with self.subTest(qrels=qrels, run=run):
                code, out, err = self.report_of(qrels=("q.trec", qrels), run=("r.trec", run))
                self.assertEqual((code, out), (2, ""))
                bad = "q.trec" if qrels.startswith(b"q1") else "r.trec"
                self.assertIn("%s:2: a query id cannot start with '#' (got '#q2')" % bad, err)

    def test_trec_malformed_lines(self):
        cases = {"q1 0 a\n": "expected 4 fields", "q1 0 a x\n": "grade must be an integer",
                 "q1 0 a 1.5\n": "grade must be an integer"}
        for text, expect in cases.items():
            with self.subTest(text=text):
                code, out, err = self.report_of(qrels=("q.trec", "q1 0 b 1\n" + text),
                                                run=self.GOOD_RUN)
                self.assertEqual(code, 2)
                self.assertIn("q.trec:2: " + expect, err)
        for text, expect in {"q1 Q0 a 1 nan t\n": "score must be a finite number",
                             "q1 Q0 a 1 x t\n": "score must be a finite number", "q1 Q0 a 1\n": "expected 6 fields"}.items():
            with self.subTest(text=text):
                code, out, err = self.report_of(qrels=self.GOOD_QRELS,
                                                run=("r.trec", "q1 Q0 b 1 0.3 t\n" + text))
                self.assertEqual(code, 2)
                self.assertIn("r.trec:2: " + expect, err)

    def test_trec_conflicting_grades(self):
        code, out, err = self.report_of(qrels=("q.trec", "q1 0 a 1\nq1 0 a 2\n"),
                                        run=self.GOOD_RUN)
        self.assertEqual(code, 2)
        self.assertIn("q.trec:2:", err)

    def test_underscores_are_not_numbers(self):
        q = self.write("q.trec", "q1 0 a 1_0\n")
        with self.assertRaisesRegex(rag_eval.EvalError, "q.trec:1: grade must be an integer"):
            rag_eval.load_qrels(q)
        r = self.write("r.trec", "q1 Q0 a 1 1_0 t\n")
        with self.assertRaisesRegex(rag_eval.EvalError, "r.trec:1: score must be a finite"):
            rag_eval.evaluate_files(self.write("q.json", '{"q1": {"a": 1}}'), r)


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

    def test_a_change_of_run_tag_is_not_a_scattered_query(self):
        # Runs concatenated from several systems change tag inside a query or
        # between queries; the query is still contiguous and streams.
        expected = self.report(self.LINES)
        tagged = [line[:-1] + tag for line, tag in zip(self.LINES, "aabbbcd")]
        for size in (1, 7, 40, 1 << 17):
            with self.subTest(block=size):
                rag_eval._BLOCK_SIZE = size
                report = self.report(tagged)
                self.assertEqual(report.per_query, expected.per_query)
                self.assertEqual(report.warnings, expected.warnings)

    def test_non_utf8_query_id_is_named(self):
        qrels = self.write("q.json", json.dumps(self.QRELS))
        run = self.write("r.trec", b"q1 Q0 a 1 1.0 t\n\xffq Q0 b 1 1.0 t\n")
        with self.assertRaisesRegex(rag_eval.EvalError,
                                    r"r.trec:2: query id b'\\xffq' is not UTF-8 text"):
            rag_eval.evaluate_files(qrels, run)

    def test_non_utf8_ids_are_refused_at_read_at_any_block_size(self):
        # Issue 22: a doc id that is not UTF-8 was kept (as surrogates) and broke
        # the gate and --to-label when they named it.  Refused where it is read,
        # naming the line, by the line reader and the block reader alike (every
        # block size); the tag, which is not read, may hold any bytes.
        qrels = self.write("q.json", json.dumps(self.QRELS))
        lines = [line.encode() for line in self.LINES]
        bad = lines[:4] + [b"q2 Q0 y\xe2\x82 2 2 t"] + lines[5:]
        run = self.write("r.trec", b"\n".join(bad) + b"\n")
        for size in (1, 7, 40, 1 << 17):
            with self.subTest(block=size):
                rag_eval._BLOCK_SIZE = size
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.evaluate_files(qrels, run)
                self.assertEqual(str(caught.exception).replace(self.tmp + "/", ""),
                                 "r.trec:5: doc id b'y\\xe2\\x82' is not UTF-8 text (byte 0xe2)")
                with self.assertRaisesRegex(rag_eval.EvalError, "r.trec:5: doc id"):
                    rag_eval.load_run(run)
        tagged = self.write("t.trec", b"\n".join(line + b"\xff" for line in lines) + b"\n")
        self.assertEqual(rag_eval.evaluate_files(qrels, tagged, k="1,2,3",
                                                 metrics="recall,mrr,ndcg,judged").per_query,
                         self.report(self.LINES).per_query)

    def test_scattered_lines_fall_back_to_the_exact_path(self):
        scattered = self.LINES[3:5] + self.LINES[:2] + self.LINES[5:] + self.LINES[2:3]
        grouped = self.report(self.LINES)
        for size in (8, 1 << 20):
            with self.subTest(block=size):
                rag_eval._BLOCK_SIZE = size
                report = self.report(scattered)
                self.assertEqual(report.per_query, grouped.per_query)
                self.assertIn("not contiguous", report.warnings[0])

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
        self.assertEqual((qid, [rag_eval._doc_text(doc) for doc in first.docs]),
                         ("q1", ["x", "b", "a"]))
        with self.assertRaises(rag_eval.EvalError):
            list(stream)
        jsonl = self.write("r.jsonl", '{"query_id": "q1", "docs": ["a"]}\n' + "{" * 500 + "\n")
        stream = rag_eval._run_queries(rag_eval._Input(jsonl), "jsonl")
        self.assertEqual(next(stream), ("q1", ["a"]))
        with self.assertRaises(rag_eval.EvalError):
            list(stream)
