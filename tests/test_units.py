"""Units that survive re-chunking (issue 11): span and document labels, chunk
maps, unit=doc against trec_eval, and the bundled chunked corpus (examples/rechunk).
"""

import copy
import io
import json
import os
import random
import re
import shlex
import unittest

import rag_eval
from tests.support import HERE, DATA, run_cli, TempDir, jsonl


# ---------------------------------------------------------------------------
# Units that survive re-chunking: documents, evidence spans, characters (issue 11)
# ---------------------------------------------------------------------------

class UnitsTest(TempDir, unittest.TestCase):
    """Span and document labels, chunk maps, --doc-sep, run fields; the checks
    and reports around them.  Values: HandWorkedMeasuresTest and
    DocUnitPeerTest."""

    LABELS = [{"query_id": "q1", "doc": "A", "start": 0, "end": 10, "grade": 2},
              {"query_id": "q1", "doc": "B", "grade": 1},
              {"query_id": "q2", "doc": "B", "start": 3, "end": 8, "grade": 1}]
    CHUNKS = [{"id": "a1", "doc": "A", "start": 0, "end": 6, "tokens": 3},
              {"id": "a2", "doc": "A", "start": 6, "end": 12, "tokens": 3},
              {"id": "b1", "doc": "B", "start": 0, "end": 5, "tokens": 2},
              {"id": "b2", "doc": "B", "start": 5, "end": 10, "tokens": 2}]
    RUN = {"q1": ["a1", "b1", "a2"], "q2": ["b2", "a1"]}
    MEASURES = "recall(unit=doc),recall(unit=evidence),span_recall,diversity(unit=doc)"

    def cli(self, *argv, labels=None, chunks=None, run=None):
        files = [self.write("labels.jsonl", jsonl(*(self.LABELS if labels is None else labels))),
                 self.input_file(self.RUN if run is None else run, "run.json")]
        if chunks is not False:
            files += ["--chunks", self.write("chunks.jsonl", jsonl(*(
                self.CHUNKS if chunks is None else chunks)))]
        return run_cli(*files, *argv)

    def bad(self, expect, *argv, **inputs):
        code, out, err = self.cli(*argv, **inputs)
        self.assertEqual(code, rag_eval.EXIT_ERROR, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertNotIn("Traceback", err)
        self.assertIn(expect, err)
        self.assertEqual(out, "")
        return err

    # --- what survives re-chunking -------------------------------------------

    def test_document_and_character_measures_survive_a_new_chunker(self):
        # Chunker B cuts the same documents elsewhere: its ids are all new.
        chunks_b = [{"id": "A-0", "doc": "A", "start": 0, "end": 12},
                    {"id": "B-0", "doc": "B", "start": 0, "end": 10}]
        run_b = {"q1": ["A-0", "B-0"], "q2": ["B-0"]}
        a = self.cli("--metrics", "recall(unit=doc),span_recall", "--k", "3", "--format", "json",
                     run=dict(self.RUN, q2=["b2", "b1"]))
        b = self.cli("--metrics", "recall(unit=doc),span_recall", "--k", "3", "--format", "json",
                     chunks=chunks_b, run=run_b)
        self.assertEqual(json.loads(a[1])["mean"], json.loads(b[1])["mean"])
        # Labels written as chunk ids of chunker A orphan under chunker B.
        code, _, err = run_cli(self.input_file({"q1": {"a1": 2, "b1": 1}, "q2": {"b2": 1}},
                                               "ids.json"), self.input_file(run_b, "b.json"))
        self.assertEqual(code, rag_eval.EXIT_ERROR)
        self.assertIn("not one retrieved id carries a label", err)

    def test_bare_names_take_the_unit_and_the_name_shows_it(self):
        code, out, err = self.cli("--unit", "doc", "--metrics", "recall,success,diversity",
                                  "--k", "1", "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["measures"],
                         ["recall(unit=doc)@1", "success(unit=doc)@1", "diversity(unit=doc)@1"])

    def test_plain_qrels_are_whole_document_labels_with_doc_sep(self):
        report = rag_eval.evaluate({"q": {"refund": 1, "faq": 0}},
                                   {"q": ["faq#1", "faq#2", "refund#4"]}, k=[2, 3],
                                   measures="recall(unit=doc),diversity(unit=doc)", doc_sep="#")
        self.assertEqual(report.mean, {"recall(unit=doc)@2": 0.0, "recall(unit=doc)@3": 1.0,
                                       "diversity(unit=doc)@2": 0.5,
                                       "diversity(unit=doc)@3": 2 / 3})

    def test_run_fields_are_a_chunk_map(self):
        inline = {"q1": [dict(c) for c in self.CHUNKS if c["id"] in ("a1", "b1", "a2")],
                  "q2": [dict(self.CHUNKS[3]), dict(self.CHUNKS[0])]}
        inline["q1"] = [next(c for c in inline["q1"] if c["id"] == i) for i in self.RUN["q1"]]
        mapped = self.cli("--metrics", self.MEASURES, "--format", "json")
        own = self.cli("--metrics", self.MEASURES, "--format", "json", chunks=False, run=inline)
        self.assertEqual(own[0], 0, own[2])
        self.assertEqual(json.loads(own[1])["mean"], json.loads(mapped[1])["mean"])
        moved = copy.deepcopy(inline)
        moved["q2"][1]["start"] = 1
        self.bad("is given twice with different fields", "--metrics", self.MEASURES,
                 chunks=False, run=moved)
        self.bad("the run places 'a1' at A [1, 6), the chunk map at A [0, 6)",
                 "--metrics", self.MEASURES, run={"q1": moved["q2"][::-1], "q2": ["b2"]})

    def test_a_budget_cuts_at_the_context_size(self):
        # tokens 3, 2, 3: a budget of 5 holds a1 and b1, not a2.
        code, out, err = self.cli("--metrics", "recall(budget=5,unit=evidence),"
                                  "recall(budget=6,unit=evidence)", "--format", "json")
        self.assertEqual(code, 0, err)
        mean = json.loads(out)["mean"]
        # q1: B (whole) found by b1, A [0, 10) needs a2 too; q2: B [3, 8) needs more than b2.
        self.assertEqual(mean, {"recall(budget=5,unit=evidence)": (1 / 2 + 0) / 2,
                                "recall(budget=6,unit=evidence)": (1 / 2 + 0) / 2})

    # --- populations -----------------------------------------------------------

    def test_character_measures_leave_out_whole_document_queries(self):
        labels = self.LABELS + [{"query_id": "q3", "doc": "A", "grade": 1}]
        code, out, err = self.cli("--metrics", "span_recall,recall(unit=doc)", "--k", "3",
                                  "--format", "json", labels=labels,
                                  run=dict(self.RUN, q3=["a1"]))
        self.assertEqual(code, 0, err)
        data = json.loads(out)
        self.assertEqual(data["n"], {"span_recall@3": 2, "recall(unit=doc)@3": 3})
        self.assertEqual(data["queries"], 3)
        self.assertIn("span_recall@3 averages over 2 of 3 queries: 1 query has no span label "
                      "graded >= rel ('q3')", err)
        self.assertIn("'q3'", err)
        text = self.cli("--metrics", "span_recall,recall(unit=doc)", "--k", "3",
                        "--per-query", labels=labels, run=dict(self.RUN, q3=["a1"]))[1]
        self.assertRegex(text, r"\nq3 +- +1\.0000")
        self.assertRegex(text, r"\nn +2 +3")

    def test_a_measure_no_query_can_take_is_an_error(self):
        # Found by review: it printed "-" and exit 0, and a saved baseline then
        # never gated it.
        whole = [{"query_id": "q1", "doc": "A", "grade": 1}]
        baseline = self.write("base.json", json.dumps({"span_recall@3": 0.5}))
        self.bad("span_recall@3: no scored query has a span label graded >= rel: nothing to "
                 "average", "--metrics", "span_recall", "--k", "3", "--baseline", baseline,
                 labels=whole, run={"q1": ["a1"]})

    def test_gate_and_compare_over_partial_populations(self):
        labels = self.LABELS + [{"query_id": "q3", "doc": "A", "grade": 1}]
        run = dict(self.RUN, q3=["a1"])
        saved = os.path.join(self.tmp, "base.json")
        code, _, err = self.cli("--metrics", "span_recall", "--k", "1,3", "--save-baseline",
                                saved, labels=labels, run=run)
        self.assertEqual(code, 0, err)
        worse = dict(run, q1=["b1", "a1", "a2"])
        code, out, err = self.cli("--metrics", "span_recall", "--k", "1,3", "--baseline", saved,
                                  "--gate", "significant", "--compare",
                                  self.input_file(run, "main.json"), labels=labels, run=worse)
        self.assertIn(code, (0, 1), err)
        self.assertIn("span_recall@1", out)
        self.assertNotIn("Traceback", err)

    # --- checks ----------------------------------------------------------------

    def test_labels_of_documents_refuse_id_measures(self):
        err = self.bad("the qrels label documents and spans, not retrieved ids", "--metrics",
                       "recall,judged")
        self.assertIn("recall@5, judged@5", err)

    def test_mapping_errors(self):
        self.bad("retrieved id 'zz' is not in the chunk map", "--metrics", self.MEASURES,
                 run={"q1": ["a1", "zz"]})
        self.bad("retrieved id 'a1' has no document: give a chunk map (--chunks) or --doc-sep",
                 "--metrics", self.MEASURES, chunks=False)
        self.bad("give --chunks or --doc-sep, not both", "--doc-sep", "#")
        twice = self.CHUNKS + [dict(self.CHUNKS[0], end=7)]
        self.bad("chunk 'a1' is mapped twice with different fields (A [0, 6) and A [0, 7))",
                 chunks=twice)
        same_twice = self.CHUNKS + [dict(self.CHUNKS[0])]
        self.assertEqual(self.cli("--metrics", self.MEASURES, chunks=same_twice)[0], 0)
        self.bad("tokens are given for some chunks and not others",
                 chunks=self.CHUNKS + [{"id": "c9", "doc": "C", "start": 0, "end": 4}])
        self.bad("chunk 'a1' has no start/end (document 'A' only)", "--metrics", "span_recall",
                 chunks=[{"id": c["id"], "doc": c["doc"]} for c in self.CHUNKS])
        self.bad("a budget needs tokens or start/end", "--metrics", "recall(budget=9,unit=doc)",
                 chunks=[{"id": c["id"], "doc": c["doc"]} for c in self.CHUNKS])

    def test_bad_offsets(self):
        for fields, expect in (({"start": 5, "end": 5}, "start (5) must be below end (5)"),
                               ({"start": -1, "end": 5}, "must be a non-negative integer"),
                               ({"start": 1.5, "end": 5}, "must be a non-negative integer"),
                               ({"start": True, "end": 5}, "must be a non-negative integer"),
                               ({"start": 1}, "give start and end together")):
            with self.subTest(fields=fields, file="labels"):
                label = {"query_id": "q1", "doc": "A", "grade": 1}
                label.update(fields)
                self.bad(expect, "--metrics", self.MEASURES, labels=[label])
            with self.subTest(fields=fields, file="chunks"):
                chunk = {"id": "a1", "doc": "A"}
                chunk.update(fields)
                err = self.bad(expect, "--metrics", self.MEASURES, chunks=[chunk])
                self.assertIn("chunks.jsonl:1", err)

    def test_document_versions_must_agree(self):
        labels = [dict(self.LABELS[0], doc_sha256="9f" * 32)] + self.LABELS[1:]
        chunks = [dict(c, doc_sha256="3a" * 32) if c["doc"] == "A" else c for c in self.CHUNKS]
        self.bad("query 'q1': labels were written against A 9f9f9f9f9f9f..., the chunks come "
                 "from 3a3a3a3a3a3a...", "--metrics", self.MEASURES, labels=labels,
                 chunks=chunks)
        same = [dict(c, doc_sha256="9f" * 32) if c["doc"] == "A" else c for c in self.CHUNKS]
        self.assertEqual(self.cli("--metrics", self.MEASURES, labels=labels, chunks=same)[0], 0)

    def test_doc_sha256_must_be_a_sha256_as_sha256sum_writes_it(self):
        # Issue 22: "xyz" was accepted (and compared as written: "9F..." was another
        # version than "9f...").  64 lower-case hex digits, in labels and chunk maps.
        expect = "doc_sha256 must be 64 lower-case hex digits (a sha256 as sha256sum writes it)"
        for sha in ("xyz", "9F" * 32, "9f" * 31 + "9", "9f" * 33, " " + "9f" * 32, 12, ["9f"]):
            with self.subTest(sha=sha, file="labels"):
                labels = [dict(self.LABELS[0], doc_sha256=sha)] + self.LABELS[1:]
                err = self.bad(expect, "--metrics", self.MEASURES, labels=labels)
                self.assertIn("labels.jsonl:1: ", err)
            with self.subTest(sha=sha, file="chunks"):
                chunks = [dict(self.CHUNKS[0], doc_sha256=sha)] + self.CHUNKS[1:]
                err = self.bad(expect, "--metrics", self.MEASURES, chunks=chunks)
                self.assertIn("chunks.jsonl:1: ", err)
        with self.assertRaisesRegex(rag_eval.EvalError, re.escape(expect)):
            rag_eval.evaluate({"q1": [rag_eval.Label("A", None, None, 1, "xyz")]},
                              {"q1": ["a1"]}, chunks=self.CHUNKS, measures="recall(unit=doc)")
        self.assertEqual(rag_eval.load_chunks(io.StringIO(jsonl(dict(self.CHUNKS[0],
                                                                     doc_sha256="09af" * 16))))
                         ["a1"].doc_sha256, "09af" * 16)

    def test_one_document_one_version_across_queries(self):
        # Issue 22: B labelled against two versions in q1 and q2 was accepted when
        # the chunk map gives no version (nothing to compare either with).
        labels = [dict(self.LABELS[0]), dict(self.LABELS[1], doc_sha256="9f" * 32),
                  dict(self.LABELS[2], doc_sha256="3a" * 32)]
        self.bad("qrels: document 'B' is labelled against two versions: doc_sha256 "
                 "9f9f9f9f9f9f... in query 'q1' and 3a3a3a3a3a3a... in query 'q2'; label one "
                 "version", "--metrics", self.MEASURES, labels=labels)
        twice = [dict(self.LABELS[1], doc_sha256="9f" * 32), dict(self.LABELS[1], start=0,
                                                                   end=4, doc_sha256="3a" * 32)]
        self.bad("in query 'q1' and 3a3a3a3a3a3a... in query 'q1'", "--metrics", self.MEASURES,
                 labels=[self.LABELS[0]] + twice)
        labels[2]["doc_sha256"] = "9f" * 32     # one version in both: fine
        self.assertEqual(self.cli("--metrics", self.MEASURES, labels=labels)[0], 0)

    def test_names_refused_with_a_reason(self):
        for name, expect in (("ndcg(unit=evidence)@5", "unit=evidence is refused: one chunk can "
                                                       "cover two evidence spans at one rank"),
                             ("recall(cover=0.5)@5", "cover applies to unit=evidence only"),
                             ("recall(budget=5)@3", "a budget is the cutoff"),
                             ("diversity@3", "diversity counts doc only"),
                             ("span_recall(unit=doc)@3", "unknown parameter 'unit'"),
                             ("recall(budget=0)", "budget must be a positive integer")):
            with self.subTest(name=name):
                with self.assertRaisesRegex(rag_eval.EvalError, re.escape(expect)):
                    rag_eval.parse_measure(name)
        self.assertEqual([str(m) for m in rag_eval.resolve_measures("recall(budget=9)", k="1,5")],
                         ["recall(budget=9)"])

    def test_qrels_forms_do_not_mix(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "write one form"):
            rag_eval.evaluate({"q1": {"a": 1}, "q2": [{"doc": "A", "grade": 1}]}, {"q1": ["a"]},
                              doc_sep="#", measures="recall(unit=doc)")
        lines = jsonl(self.LABELS[0], {"query_id": "q2", "grades": {"a": 1}})
        code, _, err = run_cli(self.write("mixed.jsonl", lines),
                               self.input_file(self.RUN, "run.json"))
        self.assertEqual(code, 2)
        self.assertIn("mixed.jsonl:2: expected a label line", err)

    # --- reports of the labels ------------------------------------------------------

    def test_overlapping_labels_are_merged_with_a_warning(self):
        labels = self.LABELS + [{"query_id": "q2", "doc": "B", "start": 6, "end": 9, "grade": 2}]
        code, out, err = self.cli("--metrics", "recall(unit=evidence)", "--k", "1",
                                  "--format", "json", labels=labels)
        self.assertEqual(code, 0, err)
        self.assertIn("1 query has overlapping span labels on one document, merged", err)
        # q2's units: B [3, 9) once (b2 holds 4 of its 6 characters: not found at cover 1)
        self.assertEqual(json.loads(out)["mean"], {"recall(unit=evidence)@1": 0.0})

    def test_evidence_no_chunk_can_deliver_is_listed(self):
        labels = self.LABELS + [{"query_id": "q2", "doc": "C", "grade": 1},
                                {"query_id": "q2", "doc": "A", "start": 20, "end": 30, "grade": 1}]
        code, out, err = self.cli("--metrics", self.MEASURES, "--format", "json", labels=labels)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mapping"]["uncoverable"],
                         {"q2": [["A", 20, 30], ["C", None, None]]})
        self.assertIn("lost at ingestion, not by the retriever", err)
        self.assertEqual(json.loads(out)["mapping"]["source"], "chunk map")

    def test_chunk_map_is_an_input_of_the_baseline(self):
        saved = os.path.join(self.tmp, "base.json")
        self.assertEqual(self.cli("--metrics", self.MEASURES, "--save-baseline", saved)[0], 0)
        with open(saved) as handle:
            inputs = json.load(handle)["inputs"]
        self.assertEqual(set(inputs), {"qrels", "run", "chunks", "mapping"})
        self.assertEqual(inputs["mapping"], {"source": "chunk map"})
        self.assertEqual(len(inputs["chunks"]["sha256"]), 64)
        # Found by review: a separator instead of the map went by without a word.
        run = {q: [c["doc"] + "#" + c["id"] for c in self.CHUNKS for i in ids if c["id"] == i]
               for q, ids in self.RUN.items()}
        code, out, err = self.cli("--metrics", "recall(unit=doc)", "--doc-sep", "#",
                                  "--baseline", saved, chunks=False, run=run)
        self.assertEqual(code, 1, err)      # the span measures are missing
        self.assertIn("chunks were mapped to documents another way for the baseline (--chunks "
                      "-> --doc-sep '#')", out)
        other = self.CHUNKS + [{"id": "c9", "doc": "C", "start": 0, "end": 4, "tokens": 1}]
        code, out, err = self.cli("--metrics", self.MEASURES, "--baseline", saved, chunks=other)
        self.assertEqual(code, 0, err)
        self.assertIn("the chunk map changed since the baseline", out)

    def test_trec_run_through_the_fast_reader_maps_the_same(self):
        trec = "".join("%s Q0 %s %d %g x\n" % (q, d, i, 10 - i) for q, ids in self.RUN.items()
                       for i, d in enumerate(ids, 1))
        a = self.cli("--metrics", self.MEASURES, "--format", "json")
        b = self.cli("--metrics", self.MEASURES, "--format", "json", run=("run.trec", trec))
        self.assertEqual(json.loads(a[1])["mean"], json.loads(b[1])["mean"])

    def test_one_chunk_per_document_is_unit_id(self):
        # When every id is its own document, unit=doc changes no number; and
        # whole-document labels as evidence are the documents again.
        rng = random.Random(11)
        names = ["recall", "success", "mrr", "precision", "map", "ndcg", "ndcg(gain=linear)",
                 "complete"]
        for case in range(200):
            qrels = {"q%d" % q: {"d%d" % d: rng.choice([-1, 0, 1, 2, 3]) for d in range(12)
                                 if rng.random() < 0.4} for q in range(4)}
            qrels = {q: g for q, g in qrels.items() if g and max(g.values()) >= 1} or {
                "q0": {"d1": 1}}
            run = {q: rng.sample(["d%d" % d for d in range(12)], rng.randint(0, 12))
                   for q in qrels}
            k = [1, 3, rng.randint(1, 12)]
            by_id = rag_eval.evaluate(qrels, run, k=k, measures=names)
            by_doc = rag_eval.evaluate(qrels, run, k=k, measures=names, doc_sep="#", unit="doc")
            self.assertTrue(all("unit=doc" in m for m in by_doc.measures))
            rename = dict(zip(by_doc.measures, by_id.measures))
            self.assertEqual(by_id.per_query, {q: {rename[m]: v for m, v in row.items()}
                                               for q, row in by_doc.per_query.items()},
                             (qrels, run, k))
            evidence = rag_eval.evaluate(qrels, run, k=k, measures="recall,mrr,complete",
                                         doc_sep="#", unit="evidence")
            same = rag_eval.evaluate(qrels, run, k=k, measures="recall,mrr,complete")
            self.assertEqual(list(evidence.mean.values()), list(same.mean.values()))

    def test_review_findings_on_mapping(self):
        # Found by review, each a false refusal or a check that was skipped.
        L, C = rag_eval.Label, rag_eval.Chunk
        # Labels and Chunks with None offsets are whole documents / doc-only chunks.
        report = rag_eval.evaluate({"q": [L("A", None, None, 1)]}, {"q": ["a1"]}, k=1,
                                   measures="recall(unit=doc)", chunks={"a1": C("A")})
        self.assertEqual(report.mean, {"recall(unit=doc)@1": 1.0})
        # The run's offsets fill in what --doc-sep or a doc-only map leaves out.
        run = {"q": [{"id": "A#1", "doc": "A", "start": 0, "end": 10}]}
        spans = {"q": [{"doc": "A", "start": 5, "end": 15, "grade": 1}]}
        for mapping in ({"doc_sep": "#"}, {"chunks": [{"id": "A#1", "doc": "A"}]}):
            with self.subTest(mapping=mapping):
                self.assertEqual(rag_eval.evaluate(spans, run, k=1, measures="span_recall",
                                                   **mapping).mean, {"span_recall@1": 0.5})
        # The run's own chunks: tokens for all or none, document versions checked.
        sized = {"q": [{"id": "a", "doc": "A", "start": 0, "end": 500, "tokens": 100},
                       {"id": "b", "doc": "A", "start": 500, "end": 900}]}
        with self.assertRaisesRegex(rag_eval.EvalError, "tokens are given for some chunks"):
            rag_eval.evaluate({"q": {"A": 1}}, sized, measures="recall(budget=300,unit=doc)")
        versioned = {"q": [{"doc": "A", "start": 0, "end": 5, "grade": 1, "doc_sha256": "9f" * 32}]}
        moved = {"q": [{"id": "a", "doc": "A", "start": 0, "end": 9, "doc_sha256": "3a" * 32}]}
        with self.assertRaisesRegex(rag_eval.EvalError, "labels \\(query 'q'\\) were written "
                                    "against A 9f9f9f9f9f9f..., the chunks come from 3a3a"):
            rag_eval.evaluate(versioned, moved, measures="span_recall")
        # -0 is 0: one policy, one name.
        self.assertEqual(str(rag_eval.parse_measure("recall(cover=-0,unit=evidence)@5")),
                         "recall(cover=0.0,unit=evidence)@5")

    def test_chunk_id_labels_counted_as_documents_are_refused(self):
        # Found by review: every mean 0 and exit 0, so a saved baseline could never fail.
        code, out, err = run_cli(self.input_file({"q1": {"A#a1": 1}}, "ids.json"),
                                 self.input_file({"q1": ["A#a1", "B#b1"]}, "r.json"), "--unit",
                                 "doc", "--metrics", "recall", "--doc-sep", "#")
        self.assertEqual((code, out), (rag_eval.EXIT_ERROR, ""))
        self.assertIn("not one retrieved chunk's document carries a label in the qrels (e.g. "
                      "run document 'A', qrels 'A#a1'): the qrels name chunk ids", err)

    def test_messages_name_the_file_and_the_option(self):
        other = self.input_file({"q1": ["zz"], "q2": ["b2"]}, "other.json")
        err = self.bad("other.json: query 'q1': retrieved id 'zz' is not in the chunk map",
                       "--metrics", self.MEASURES, "--compare", other)
        self.bad("--doc-sep: the separator is empty", "--doc-sep", "", chunks=False)
        code, out, err = self.cli("--unit", "evidence", "--format", "json")
        self.assertEqual((code, json.loads(out)["measures"]),
                         (0, ["recall(unit=evidence)@5", "success(unit=evidence)@5",
                              "mrr(unit=evidence)@5"]), err)

    def test_a_document_without_chunks_is_lost_for_document_measures_too(self):
        # Found by review: unit=doc looks the labelled documents up in the map's set
        # of documents.  q2 labels C, which no chunk of the map holds.
        labels = self.LABELS + [{"query_id": "q2", "doc": "C", "grade": 1}]
        code, out, err = self.cli("--metrics", "recall(unit=doc)", "--format", "json",
                                  labels=labels)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mapping"]["uncoverable"], {"q2": [["C", None, None]]})
        self.assertIn("1 query has labelled evidence that no chunk of the map holds", err)

    def test_a_documents_chunks_apart_in_the_map_cover_together(self):
        # Found by review: A's chunks are listed apart (a2, then b1, then a1); the
        # label A [0, 10) is covered by a1 [0, 6) and a2 [6, 12) together: not lost.
        chunks = [self.CHUNKS[1], self.CHUNKS[2], self.CHUNKS[0], self.CHUNKS[3]]
        code, out, err = self.cli("--metrics", "span_recall", "--format", "json", chunks=chunks)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mapping"]["uncoverable"], {})
        self.assertNotIn("lost at ingestion", err)

    def test_a_document_graded_0_is_a_label_met(self):
        # Found by review: with span measures only, a top chunk whose document is
        # graded 0 meets a label (no "no labelled id" warning for q2); grade -1 does not.
        for grade, warned in ((0, False), (-1, True)):
            labels = self.LABELS + [{"query_id": "q2", "doc": "A", "grade": grade}]
            code, _, err = self.cli("--metrics", "span_recall", "--k", "1", labels=labels,
                                    run=dict(self.RUN, q2=["a1", "b2"]))
            self.assertEqual(code, 0, err)
            self.assertEqual("no labelled" in err and "'q2'" in err, warned, err)

    def test_no_ingestion_warning_without_offsets_or_span_measures(self):
        # Found by review: "lost at ingestion (scored as misses)" where nothing was.
        doc_only = [{"id": c["id"], "doc": c["doc"]} for c in self.CHUNKS]
        code, _, err = self.cli("--metrics", "recall(unit=doc)", chunks=doc_only)
        self.assertEqual(code, 0, err)
        self.assertNotIn("lost at ingestion", err)

    def test_list_measures_shows_the_options(self):
        text = rag_eval.describe_measures()
        self.assertIn("parameter unit: str, default id, one of id, doc, evidence", text)
        self.assertIn("parameter cover: float, default 1.0, a number from 0 to 1", text)
        self.assertIn("span_recall@k", text)


class MixedUnitsTest(TempDir, unittest.TestCase):
    """Issue 22, item 1: the check that a run meets a label runs per measure,
    on what that measure counts (ids, or their documents), and a measure that
    counts ids and has no unit is refused under --unit, never scored on ids."""

    DOC_QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}}              # whole documents
    CHUNK_QRELS = {"q1": {"d1#0": 1}, "q2": {"d2#0": 1}}        # chunk ids
    RUN = {"q1": ["d1#0", "d2#1"], "q2": ["d1#2", "d2#0"]}

    def cli(self, qrels, *argv, run=None):
        return self.report_of("--doc-sep", "#", *argv, qrels=qrels,
                              run=self.RUN if run is None else run)

    def test_a_measure_without_a_unit_is_refused_under_unit(self):
        # Found by the user: --unit doc scored rprec and bpref on ids (0.0000, exit 0).
        for name in ("rprec", "bpref", "judged", "context_precision"):
            with self.subTest(name):
                err = self.assertBad(qrels=self.DOC_QRELS, run=self.RUN, extra=[
                    "--doc-sep", "#", "--unit", "doc", "--metrics", "recall," + name],
                    expect="measure %r counts retrieved ids and has no unit, so unit=doc "
                           "(--unit doc) cannot apply to it" % name)
                self.assertIn("recall(unit=doc),%s" % name, err)
                with self.assertRaises(rag_eval.EvalError):
                    rag_eval.evaluate(self.DOC_QRELS, self.RUN, measures=["recall", name],
                                      unit="evidence", doc_sep="#")
        # Measures no label decides, and character measures, take no unit and stay.
        measures = rag_eval.resolve_measures("recall,answered,clean,span_recall", 5, unit="doc")
        self.assertEqual([str(m) for m in measures],
                         ["recall(unit=doc)@5", "answered", "clean@5", "span_recall@5"])

    def test_ids_that_meet_no_label_beside_documents_that_do(self):
        # Found by the user: recall@5 0.0000 beside recall(unit=doc)@5 1.0000, exit 0.
        err = self.assertBad(qrels=self.DOC_QRELS, run=self.RUN, extra=[
            "--doc-sep", "#", "--metrics", "recall,recall(unit=doc)"],
            expect="r.json: recall@5: not one retrieved id carries a label in the qrels "
                   "(e.g. run 'd1#0', qrels 'd1')")
        self.assertNotIn("recall(unit=doc)@5:", err)
        # The library says the same of the same measures, and scores them.
        report = rag_eval.evaluate(self.DOC_QRELS, self.RUN, measures="recall,recall(unit=doc)",
                                   doc_sep="#")
        self.assertTrue(report.unlabelled_run.startswith("recall@5: not one retrieved id"))
        self.assertEqual(report.mean, {"recall@5": 0.0, "recall(unit=doc)@5": 1.0})

    def test_documents_that_meet_no_label_beside_ids_that_do(self):
        # Found by the user: chunk-id labels gave recall(unit=doc)@5 0 with exit 0.
        err = self.assertBad(qrels=self.CHUNK_QRELS, run=self.RUN, extra=[
            "--doc-sep", "#", "--metrics", "recall,recall(unit=doc)"],
            expect="r.json: recall(unit=doc)@5: not one retrieved chunk's document carries a "
                   "label in the qrels (e.g. run document 'd1', qrels 'd1#0')")
        self.assertNotIn("recall@5:", err)
        code, out, err = self.cli(self.CHUNK_QRELS, "--metrics", "recall,recall(unit=doc)",
                                  "--allow-unlabelled-run", "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mean"], {"recall@5": 1.0, "recall(unit=doc)@5": 0.0})

    def test_each_failed_check_is_named_once(self):
        # Labels that meet neither: ids 'x', documents 'x' (the run's are d1, d2).
        report = rag_eval.evaluate({"q1": {"x": 1}, "q2": {"x": 1}}, self.RUN,
                                   measures="recall,mrr,recall(unit=doc)", doc_sep="#")
        self.assertEqual(report.unlabelled_run.count("not one retrieved"), 2)
        self.assertTrue(report.unlabelled_run.startswith("recall@5, mrr@5: not one retrieved id"))
        self.assertIn("; recall(unit=doc)@5: not one retrieved chunk's document",
                      report.unlabelled_run)
        # One kind of measure: the reason alone, as before.
        report = rag_eval.evaluate(self.DOC_QRELS, self.RUN, measures="recall", doc_sep="#")
        self.assertTrue(report.unlabelled_run.startswith("not one retrieved id carries"))
        # Nothing retrieved: one reason for every measure.
        report = rag_eval.evaluate(self.DOC_QRELS, {"q1": [], "q2": []},
                                   measures="recall,recall(unit=doc)", doc_sep="#")
        self.assertEqual(report.unlabelled_run,
                         "the run retrieved no id for any query in the qrels: every number "
                         "would be 0")

    def test_a_measure_no_label_decides_is_not_checked(self):
        # diversity reads documents but no label: chunk-id labels do not refuse it.
        # q1 d1#0 relevant at rank 1, q2 d2#0 at rank 2: recall 1 each; 2 documents
        # in the 2 chunks of each query: diversity 1.
        code, out, err = self.cli(self.CHUNK_QRELS, "--metrics", "recall,diversity(unit=doc)",
                                  "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mean"],
                         {"recall@5": 1.0, "diversity(unit=doc)@5": 1.0})

    def test_a_query_is_listed_when_one_kind_meets_no_label_in_its_top_k(self):
        # q1 labels document d1, q2 chunk d2#0: the run meets both kinds, but q1's
        # top 5 holds no labelled id (recall@5 0) and q2's no labelled document
        # (recall(unit=doc)@5 0): each is listed.  Means (0 + 1) / 2 each.
        report = rag_eval.evaluate({"q1": {"d1": 1}, "q2": {"d2#0": 1}},
                                   {"q1": ["d1#0"], "q2": ["d2#0"]},
                                   measures="recall,recall(unit=doc)", doc_sep="#")
        self.assertIsNone(report.unlabelled_run)
        self.assertEqual(report.mean, {"recall@5": 0.5, "recall(unit=doc)@5": 0.5})
        self.assertEqual(report.unlabelled, ("q1", "q2"))

class DocUnitPeerTest(unittest.TestCase):
    """unit=doc equals trec_eval (pytrec_eval) on a document run reduced from
    the chunk run (tests/data/doc_unit, written by tests/peers/gen_doc_unit.py):
    each document at its first chunk's rank, later chunks of it unjudged filler."""

    def test_every_value_equals_the_peer(self):
        folder = os.path.join(DATA, "doc_unit")
        with open(os.path.join(folder, "expected.json")) as handle:
            expected = json.load(handle)
        qrels = rag_eval.load_qrels(os.path.join(folder, "qrels.json"))
        run = rag_eval.load_run(os.path.join(folder, "run.json"))
        report = rag_eval.evaluate(qrels, run, measures=expected["measures"],
                                   doc_sep=expected["doc_sep"])
        self.assertEqual(set(report.per_query), set(expected["per_query"]))
        self.assertEqual(list(report.unscored), expected["unscored"])
        self.assertEqual(list(report.missing), expected["missing_from_run"])
        for qid, values in expected["per_query"].items():
            for name, value in values.items():
                with self.subTest(query=qid, measure=name):
                    self.assertAlmostEqual(report.per_query[qid][name], value, places=12)
        for name, value in expected["mean"].items():
            self.assertAlmostEqual(report.mean[name], value, places=12)


class RechunkExampleTest(unittest.TestCase):
    """The bundled chunked corpus (examples/rechunk): the README's commands
    print the means a second implementation of the definitions computed
    (examples/rechunk/expected.py)."""

    FOLDER = os.path.join(HERE, "examples", "rechunk")

    def setUp(self):
        with open(os.path.join(self.FOLDER, "expected.json")) as handle:
            self.expected = json.load(handle)

    def test_each_chunker(self):
        for run in ("run-a", "run-b"):
            with self.subTest(run=run):
                case = self.expected[run]
                argv = shlex.split(case["command"])[2:]
                argv = [os.path.join(HERE, a) if a.startswith("examples/") else a for a in argv]
                code, out, err = run_cli(*argv, "--format", "json", "--per-query")
                self.assertEqual(code, 0, err)
                data = json.loads(out)
                self.assertEqual(set(data["mean"]), set(case["mean"]))
                for name, value in case["mean"].items():
                    self.assertAlmostEqual(data["mean"][name], value, places=12, msg=name)
                more = case["more"]
                report = rag_eval.evaluate_files(
                    os.path.join(self.FOLDER, "labels.jsonl"),
                    os.path.join(self.FOLDER, run + ".jsonl"), measures=list(more["mean"]),
                    chunks=os.path.join(self.FOLDER, "chunks-%s.jsonl" % run[-1]))
                for name, value in more["mean"].items():
                    self.assertAlmostEqual(report.mean[name], value, places=12, msg=name)
                for name, values in more["per_query"].items():     # measure -> query -> value
                    for qid, value in values.items():
                        if value is None:
                            self.assertNotIn(name, report.per_query[qid])
                        else:
                            self.assertAlmostEqual(report.per_query[qid][name], value, 12)

    def test_evaluate_takes_the_chunk_map_file_as_the_command_line_does(self):
        # Issue 23: evaluate(..., chunks=PATH) was refused ("chunks must be a list of
        # records"); it reads the file as --chunks does and records it in the inputs.
        labels = rag_eval.load_qrels(os.path.join(self.FOLDER, "labels.jsonl"))

        def library(side):
            return rag_eval.evaluate(labels, rag_eval.load_run(
                os.path.join(self.FOLDER, "run-%s.jsonl" % side)), k=[3, 5], unit="evidence",
                chunks=os.path.join(self.FOLDER, "chunks-%s.jsonl" % side))
        b = library("b")
        code, out, err = run_cli(os.path.join(self.FOLDER, "labels.jsonl"),
                                 os.path.join(self.FOLDER, "run-b.jsonl"), "--chunks",
                                 os.path.join(self.FOLDER, "chunks-b.jsonl"), "--unit", "evidence",
                                 "--k", "3,5", "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(b.mean, json.loads(out)["mean"])
        self.assertEqual(b.inputs, {"chunks": json.loads(out)["inputs"]["chunks"]})
        # The README's gate: chunker A against chunker B's baseline, the map change named.
        result = rag_eval.gate(library("a"), b)
        self.assertEqual([c.measure for c in result.regressions],
                         ["mrr(unit=evidence)@3", "mrr(unit=evidence)@5",
                          "recall(unit=evidence)@3", "recall(unit=evidence)@5"])
        self.assertIn("the chunk map changed since the baseline (sha256 bccbe55ffc5f... -> "
                      "3f92090eda63...)", " ".join(result.notes))
        with open(os.path.join(self.FOLDER, "chunks-b.jsonl"), "rb") as handle:   # a file object
            self.assertEqual(rag_eval.evaluate(labels, rag_eval.load_run(os.path.join(
                self.FOLDER, "run-b.jsonl")), k=[3, 5], unit="evidence",
                chunks=handle).mean, b.mean)

    def test_chunk_id_labels_orphan_under_the_other_chunker(self):
        labels = os.path.join(self.FOLDER, "labels-chunk-ids.json")
        code, _, err = run_cli(labels, os.path.join(self.FOLDER, "run-b.jsonl"))
        self.assertEqual(code, rag_eval.EXIT_ERROR)
        self.assertIn("not one retrieved id carries a label", err)
        code, out, err = run_cli(labels, os.path.join(self.FOLDER, "run-a.jsonl"), "--metrics",
                                 "recall", "--k", "3,5", "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mean"], self.expected["run-a"]["chunk_id_qrels"]["mean"])


class CoverTest(unittest.TestCase):
    """_Cover (the ingestion check's look-up) against its definition: the
    characters of a span that the union of the chunk spans clipped to it holds."""

    def test_equals_the_clipped_union_on_random_layouts(self):
        rng = random.Random(11)
        for _ in range(400):
            spans = []
            for _ in range(rng.randint(0, 12)):
                start = rng.randint(0, 200)
                spans.append((start, start + rng.randint(0, 40)))   # empty, touching, overlapping
            cover = rag_eval._Cover(spans)
            for _ in range(20):
                start = rng.randint(0, 230)
                end = start + rng.randint(1, 80)
                clipped = [(max(start, a), min(end, b)) for a, b in spans if a < end and b > start]
                self.assertEqual(cover.within(start, end),
                                 rag_eval._length(rag_eval._union(clipped)), (spans, start, end))
            self.assertEqual(bool(cover), bool(spans))
