"""The shapes RAG frameworks write (issue 23): LangChain's Document, LlamaIndex's
NodeWithScore and RetrieverEvaluator rows, Haystack's Document, read as result
objects by their keys; the field paths that replace the shapes' own
(--id-field, --doc-field, --start-field, --end-field) and --query-field; the
note when no chunk map can tell lost evidence.  The fixtures are
examples/frameworks/ (see its README): hand-written, in each framework's
serialized shape, over the two documents in examples/frameworks/docs/.
"""

import copy
import json
import os
import unittest

import rag_eval
from tests.support import HERE, TempDir, jsonl, run_cli

FRAMEWORKS = os.path.join(HERE, "examples", "frameworks")


def fixture(name):
    return os.path.join(FRAMEWORKS, name)


def load_fixture(name):
    with open(fixture(name), encoding="utf-8") as handle:
        return json.load(handle)


def document(name):
    with open(fixture(os.path.join("docs", name)), encoding="utf-8", newline="") as handle:
        return handle.read()


def read_lines(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines()


LABELS = fixture("labels.jsonl")
MEASURES = ("recall(unit=doc),recall(unit=evidence),recall(cover=0.5,unit=evidence),"
            "mrr(unit=evidence),span_recall,span_precision")

# The chunks are the documents' non-blank lines (code points, [start, end)):
#   refunds.txt  R1 [0, 7)  R2 [9, 66)  R3 [67, 124)  R4 [126, 202)
#   pricing.txt  P1 [0, 7)  P2 [9, 52)  P3 [53, 115)  P4 [116, 151)   (€ before P2 and P3)
# Labels (grade >= 1 each):
#   q1 refunds [9, 66) = R2;  q2 pricing [53, 115) = P3 and [116, 151) = P4;
#   q3 refunds [147, 176) inside R4;  q4 refunds [66, 125) = R3 with the newline on
#   either side (59 characters, 57 of them in R3: no chunk holds the two newlines).
# Every fixture retrieves, best first:
#   q1 R3 R2 P2;  q2 P3 P2 R4;  q3 P1 R4 R1;  q4 R3 P2 R2.
# By hand, per query (k = 1, then 3):
#   recall(unit=doc)       q1 1 1;   q2 1 1;    q3 0 1;    q4 1 1
#   recall(unit=evidence)  q1 0 1;   q2 1/2 1/2; q3 0 1;   q4 0 0   (57/59 < cover 1)
#   cover=0.5              q1 0 1;   q2 1/2 1/2; q3 0 1;   q4 1 1
#   mrr(unit=evidence)     q1 0 1/2; q2 1 1;    q3 0 1/2;  q4 0 0
#   span_recall            q1 0 57/57; q2 62/97 62/97; q3 0 29/29; q4 57/59 57/59
#   span_precision @1      q1 0/57; q2 62/62; q3 0/7; q4 57/57
#   span_precision @3      q1 57/(57+57+43); q2 62/(62+43+76); q3 29/(7+76+7);
#                          q4 57/(57+57+43)
HAND = {
    "recall(unit=doc)@1": (1 + 1 + 0 + 1) / 4,
    "recall(unit=doc)@3": 1.0,
    "recall(unit=evidence)@1": (0 + 1 / 2 + 0 + 0) / 4,
    "recall(unit=evidence)@3": (1 + 1 / 2 + 1 + 0) / 4,
    "recall(cover=0.5,unit=evidence)@1": (0 + 1 / 2 + 0 + 1) / 4,
    "recall(cover=0.5,unit=evidence)@3": (1 + 1 / 2 + 1 + 1) / 4,
    "mrr(unit=evidence)@1": (0 + 1 + 0 + 0) / 4,
    "mrr(unit=evidence)@3": (1 / 2 + 1 + 1 / 2 + 0) / 4,
    "span_recall@1": (0 + 62 / 97 + 0 + 57 / 59) / 4,
    "span_recall@3": (1 + 62 / 97 + 1 + 57 / 59) / 4,
    "span_precision@1": (0 + 1 + 0 + 1) / 4,
    "span_precision@3": (57 / 157 + 62 / 181 + 29 / 90 + 57 / 157) / 4,
}
HAND_DOC = {name: value for name, value in HAND.items() if "unit=doc" in name}
# LangChain Documents without an id are known by their place: document[start:end].
PLACES = {"q1": ["refunds.txt[67:124]", "refunds.txt[9:66]", "pricing.txt[9:52]"],
          "q2": ["pricing.txt[53:115]", "pricing.txt[9:52]", "refunds.txt[126:202]"],
          "q3": ["pricing.txt[0:7]", "refunds.txt[126:202]", "refunds.txt[0:7]"],
          "q4": ["refunds.txt[67:124]", "pricing.txt[9:52]", "refunds.txt[9:66]"]}
NO_MAP = ("the chunks were placed by the run's own fields, not from a chunk map: evidence "
          "lost at ingestion (a labelled document or span no chunk holds) cannot be detected, "
          "and scores as a retrieval miss; give the index's chunk map (--chunks) to check")


def scored(run, measures=MEASURES, **options):
    return rag_eval.evaluate_files(LABELS, run, measures=measures, k=[1, 3], **options)


class FixturesTest(unittest.TestCase):
    """The hand-written fixtures say what the frameworks would: each chunk's
    text is the document's text at its offsets, in code points."""

    def test_offsets_hold_the_texts(self):
        for label in map(json.loads, read_lines(LABELS)):
            self.assertEqual(document(label["doc"])[label["start"]:label["end"]], label["text"])
        for q, docs in load_fixture("langchain.json").items():
            for d in docs:
                start = d["metadata"]["start_index"]
                text = document(d["metadata"]["source"])
                self.assertEqual(text[start:start + len(d["page_content"])], d["page_content"])
                self.assertEqual(text.find(d["page_content"]), start)   # as the splitter finds it
                self.assertEqual((d["id"], d["type"]), (None, "Document"))
        for q, nodes in load_fixture("llamaindex.json").items():
            for item in nodes:
                node = item["node"]
                text = document(node["metadata"]["file_name"])
                self.assertEqual(text[node["start_char_idx"]:node["end_char_idx"]], node["text"])
                self.assertEqual(node["metadata"]["file_size"], len(text.encode("utf-8")))
                self.assertEqual((item["class_name"], node["class_name"]),
                                 ("NodeWithScore", "TextNode"))
        for q, docs in load_fixture("haystack.json").items():
            for d in docs:
                start = d["split_idx_start"]
                self.assertEqual(document(d["file_path"])[start:start + len(d["content"])],
                                 d["content"])
        # pricing.txt holds a € (3 bytes in UTF-8) before P2 and P3: byte offsets differ
        pricing = document("pricing.txt")
        self.assertEqual((pricing.find("The Business"),
                          pricing.encode("utf-8").find(b"The Business")), (53, 55))


class ShapesScoredTest(TempDir, unittest.TestCase):
    """Each framework's shape, scored: document, evidence and span measures
    against the hand-worked values (HAND)."""

    def assertHand(self, report, expected=HAND):
        self.assertEqual(set(report.mean), set(expected))
        for name, value in expected.items():
            self.assertAlmostEqual(report.mean[name], value, places=12, msg=name)

    def test_langchain_documents(self):
        report = scored(fixture("langchain.json"))
        self.assertHand(report)
        self.assertEqual(rag_eval.load_run(fixture("langchain.json")), PLACES)
        self.assertEqual(report.mapping["source"], "run")
        # per query, as worked out above (q4: 57 of its 59 characters in R3)
        self.assertEqual(report.per_query["q2"]["recall(unit=evidence)@3"], 0.5)
        self.assertEqual(report.per_query["q4"]["recall(cover=0.5,unit=evidence)@1"], 1.0)
        self.assertAlmostEqual(report.per_query["q4"]["span_recall@1"], 57 / 59, places=15)
        self.assertAlmostEqual(report.per_query["q3"]["span_precision@3"], 29 / 90, places=15)
        # the library reads the same dicts (doc.model_dump()) the same
        library = rag_eval.evaluate(rag_eval.load_qrels(LABELS), load_fixture("langchain.json"),
                                    k=[1, 3], measures=MEASURES)
        self.assertEqual(library.mean, report.mean)

    def test_langchain_end_counts_code_points(self):
        # P3 "The Business plan costs €30 ..." is 62 code points (64 bytes) from 53
        chunks = rag_eval.load_run(fixture("langchain.json"))["q2"].chunks
        self.assertEqual(chunks["pricing.txt[53:115]"], rag_eval.Chunk("pricing.txt", 53, 115))

    def test_llamaindex_nodes(self):
        report = scored(fixture("llamaindex.json"))
        self.assertHand(report)
        run = rag_eval.load_run(fixture("llamaindex.json"))
        self.assertEqual(run["q1"].scores, [0.82, 0.74, 0.61])
        self.assertEqual(run["q1"][0], load_fixture("llamaindex.json")["q1"][0]["node"]["id_"])
        self.assertEqual(report.warnings, (NO_MAP,))

    def test_langchain_without_start_index_counts_for_documents_only(self):
        run = fixture("langchain-no-start.json")
        self.assertHand(scored(run, "recall(unit=doc)"), HAND_DOC)
        ids = rag_eval.load_run(run)["q1"]
        self.assertEqual(ids[0], load_fixture("langchain-no-start.json")["q1"][0]["id"])
        self.assertEqual(ids.scores, [0.82, 0.74, 0.61])
        for measure in ("recall(unit=evidence)", "span_recall", "span_precision",
                        "recall(budget=100,unit=doc)"):
            with self.subTest(measure=measure):
                code, out, err = run_cli(LABELS, run, "--metrics", measure)
                self.assertEqual((code, out), (2, ""), err)
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertIn("langchain-no-start.json: query 'q1': chunk '%s' has no " % ids[0],
                              err)
                self.assertIn("; its object in the run gives no metadata.start_index (a "
                              "LangChain text splitter writes it with add_start_index=True)",
                              err)
        # without ids either, a chunk is known by its document and its text's sha256
        bare = load_fixture("langchain-no-start.json")
        for docs in bare.values():
            for d in docs:
                d["id"] = None
        report = rag_eval.evaluate(rag_eval.load_qrels(LABELS), bare, k=[1, 3],
                                   measures="recall(unit=doc)")
        self.assertHand(report, HAND_DOC)
        import hashlib
        digest = hashlib.sha256("Annual plans are refunded pro rata for the unused months."
                                .encode("utf-8")).hexdigest()[:16]
        self.assertEqual(rag_eval.load_run(self.write("bare.json", json.dumps(bare)))["q1"][0],
                         "refunds.txt[sha256:%s]" % digest)

    def test_haystack_documents_are_read_as_before(self):
        run = fixture("haystack.json")
        loaded = rag_eval.load_run(run)
        written = load_fixture("haystack.json")
        self.assertEqual(loaded, {q: [d["id"] for d in docs] for q, docs in written.items()})
        self.assertEqual(loaded["q1"].scores, [3.1, 2.4, 1.7])
        self.assertEqual(loaded["q1"].chunks, {})       # no "doc": ids only
        code, out, err = run_cli(LABELS, run, "--metrics", "recall(unit=doc)")
        self.assertEqual(code, 2)
        self.assertIn("has no document: give a chunk map (--chunks) or --doc-sep, or "
                      "doc/start/end for it in the run (or name its document's field: "
                      "--doc-field)", err)
        # its flattened meta names the file: --doc-field reads it
        self.assertHand(scored(run, "recall(unit=doc)", fields={"doc": "file_path"}), HAND_DOC)
        # Haystack writes a start (split_idx_start) and no end: spans cannot be had
        code, out, err = run_cli(LABELS, run, "--unit", "evidence", "--doc-field", "file_path",
                                 "--start-field", "split_idx_start")
        self.assertEqual((code, out), (2, ""))
        self.assertIn("haystack.json: query 'q1': item 1: give split_idx_start and end together "
                      "(got only split_idx_start)", err)

    def test_llamaindex_retriever_evaluator_rows(self):
        rows = fixture("llamaindex-eval.jsonl")
        code, out, err = run_cli(rows, rows)
        self.assertEqual((code, out), (2, ""))
        self.assertIn("llamaindex-eval.jsonl:1: a JSONL qrels line needs a query id", err)
        self.assertIn("; LlamaIndex's RetrieverEvaluator rows have no stable id: key each row "
                      "by its question with --query-field query, or add a \"query_id\"", err)
        # Node ids as labels.  By hand (expected: q1 R2; q2 P3, P4; q3 R4; q4 R3):
        #   recall@1  q1 0, q2 1/2, q3 0, q4 1;   recall@3  q1 1, q2 1/2, q3 1, q4 1
        #   mrr@3     q1 1/2, q2 1, q3 1/2, q4 1
        report = rag_eval.evaluate_files(rows, rows, k=[1, 3], measures="recall,success,mrr",
                                         fields={"query": "query"})
        expected = {"recall@1": (0 + 1 / 2 + 0 + 1) / 4, "recall@3": (1 + 1 / 2 + 1 + 1) / 4,
                    "success@1": (0 + 1 + 0 + 1) / 4, "success@3": 1.0,
                    "mrr@1": (0 + 1 + 0 + 1) / 4, "mrr@3": (1 / 2 + 1 + 1 / 2 + 1) / 4}
        self.assertHand(report, expected)
        # the rows' own hit_rate and mrr (LlamaIndex's, cut at its top_k of 3) agree
        own = [json.loads(line)["metric_dict"] for line in read_lines(rows)]
        self.assertEqual(sum(m["hit_rate"]["score"] for m in own) / 4, report.mean["success@3"])
        self.assertEqual(sum(m["mrr"]["score"] for m in own) / 4, report.mean["mrr@3"])
        # the question text is the query id
        self.assertIn("Are annual plans refunded?", report.per_query)
        self.assertEqual(report.inputs["qrels"]["fields"], {"query": "query"})
        self.assertEqual(report.inputs["run"]["fields"], {"query": "query"})
        code, out, err = run_cli(rows, rows, "--query-field", "query", "--metrics", "mrr",
                                 "--k", "3")
        self.assertEqual(code, 0, err)
        self.assertIn("0.7500", out)

    def test_ragas_rows_keyed_by_their_question(self):
        rows = [{"user_input": "How long do refunds take?", "retrieved_context_ids": ["a", "b"],
                 "reference_context_ids": ["b"]},
                {"user_input": "Who approves expenses?", "retrieved_context_ids": ["c"],
                 "reference_context_ids": ["c", "d"]}]
        path = self.write("ragas.jsonl", jsonl(*rows))
        code, out, err = run_cli(path, path)
        self.assertEqual(code, 2)
        self.assertIn("Ragas rows have no stable id: key each row by its question with "
                      "--query-field user_input", err)
        # mrr@5: (1/2 + 1) / 2; recall@5: (1 + 1/2) / 2
        report = rag_eval.evaluate_files(path, path, measures="mrr,recall",
                                         fields={"query": "user_input"})
        self.assertEqual(report.mean, {"mrr@5": 0.75, "recall@5": 0.75})
        self.assertEqual(sorted(report.per_query), ["How long do refunds take?",
                                                    "Who approves expenses?"])
        # a line without the field is refused, naming it
        bad = self.write("bad.jsonl", jsonl(rows[0], {"retrieved_context_ids": ["c"],
                                                      "reference_context_ids": ["c"]}))
        code, out, err = run_cli(bad, bad, "--query-field", "user_input")
        self.assertEqual((code, out), (2, ""))
        self.assertIn("bad.jsonl:2: no user_input on this line (--query-field names the query "
                      "of every line)", err)

    def test_query_field_keys_label_lines_too(self):
        # one label a line, keyed by the question; the bulk label reader steps aside
        labels = self.write("l.jsonl", jsonl(
            {"question": "q?", "doc": "A", "start": 0, "end": 4, "grade": 1}))
        run = self.write("r.jsonl", jsonl({"question": "q?", "docs": [
            {"id": "a1", "doc": "A", "start": 0, "end": 2}, {"id": "a2", "doc": "A",
                                                             "start": 2, "end": 8}]}))
        report = rag_eval.evaluate_files(labels, run, measures="span_recall", k=1,
                                         fields={"query": "question"})
        self.assertEqual(report.mean, {"span_recall@1": 0.5})      # 2 of 4 characters
        keyed = self.write("k.jsonl", jsonl({"query_id": "q1", "doc": "A", "grade": 1}))
        with self.assertRaisesRegex(rag_eval.EvalError, "k.jsonl:1: no question on this line"):
            rag_eval.load_qrels(keyed, fields={"query": "question"})


class FieldPathsTest(TempDir, unittest.TestCase):
    """--id-field, --doc-field, --start-field and --end-field replace where
    every object gives its id, document, start and end."""

    def test_doc_field_on_llamaindex_nodes(self):
        # node.metadata.file_path is "/srv/kb/<name>": labels on those names score the same
        moved = self.write("labels.jsonl", "".join(
            json.dumps(dict(json.loads(line), doc="/srv/kb/" + json.loads(line)["doc"])) + "\n"
            for line in read_lines(LABELS)))
        report = rag_eval.evaluate_files(moved, fixture("llamaindex.json"), k=[1, 3],
                                         measures=MEASURES,
                                         fields={"doc": "node.metadata.file_path"})
        for name, value in HAND.items():
            self.assertAlmostEqual(report.mean[name], value, places=12)
        self.assertEqual(report.inputs["run"]["fields"], {"doc": "node.metadata.file_path"})
        code, out, err = run_cli(moved, fixture("llamaindex.json"), "--metrics", MEASURES,
                                 "--k", "1,3", "--doc-field", "node.metadata.file_path",
                                 "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mean"], report.mean)

    def test_llamaindex_document_falls_back(self):
        item = load_fixture("llamaindex.json")["q1"][1]        # R2, of refunds.txt
        source = item["node"]["relationships"]["1"]["node_id"]

        def doc_of(node_metadata, relationships=True):
            one = copy.deepcopy(item)
            one["node"]["metadata"] = node_metadata
            if not relationships:
                one["node"]["relationships"] = {}
            chunks = rag_eval.load_run(self.write("r.json", json.dumps({"q": [one]})))["q"].chunks
            return chunks[one["node"]["id_"]].doc if chunks else None
        self.assertEqual(doc_of({"file_name": "refunds.txt", "file_path": "/kb/r.txt"}),
                         "refunds.txt")
        self.assertEqual(doc_of({"file_path": "/kb/r.txt"}), "/kb/r.txt")
        self.assertEqual(doc_of({"file_name": None, "author": "x"}), source)
        self.assertIsNone(doc_of({}, relationships=False))     # its id alone counts

    def test_id_field_and_nested_offsets(self):
        docs = load_fixture("langchain.json")
        for q, items in docs.items():
            for i, d in enumerate(items):
                d["metadata"]["chunk_id"] = "%s-%d" % (q, i)
        path = self.write("lc.json", json.dumps(docs))
        loaded = rag_eval.load_run(path, fields={"id": "metadata.chunk_id"})
        self.assertEqual(loaded["q1"], ["q1-0", "q1-1", "q1-2"])
        self.assertEqual(loaded["q1"].chunks["q1-1"], rag_eval.Chunk("refunds.txt", 9, 66))
        report = scored(path, fields={"id": "metadata.chunk_id"})
        for name, value in HAND.items():
            self.assertAlmostEqual(report.mean[name], value, places=12)
        # plain objects with their place nested: every path replaced
        nested = {"q": [{"chunk": {"key": "c1", "where": {"file": "A", "from": 0, "to": 6}}}]}
        fields = {"id": "chunk.key", "doc": "chunk.where.file", "start": "chunk.where.from",
                  "end": "chunk.where.to"}
        run = rag_eval.load_run(self.write("n.json", json.dumps(nested)), fields=fields)
        self.assertEqual((run["q"], run["q"].chunks), (["c1"], {"c1": rag_eval.Chunk("A", 0, 6)}))
        report = rag_eval.evaluate({"q": [rag_eval.Label("A", 0, 12, 1)]}, nested, k=1,
                                   measures="span_recall", fields=fields)
        self.assertEqual(report.mean, {"span_recall@1": 0.5})  # 6 of 12 characters
        with self.assertRaisesRegex(rag_eval.EvalError, r"run: query 'q': item 1: an object in "
                                    r"a ranking needs chunk\.id \(--id-field\), got keys "
                                    r"\['chunk'\]"):
            rag_eval.evaluate({"q": {"c1": 1}}, nested, fields={"id": "chunk.id"})
        # a start field on LangChain Documents keeps the end rule: start + len(page_content)
        docs["q1"][0]["metadata"]["offset"] = 60
        chunks = rag_eval.load_run(self.write("o.json", json.dumps({"q1": docs["q1"][:1]})),
                                   fields={"start": "metadata.offset"})["q1"].chunks
        self.assertEqual(list(chunks.values()), [rag_eval.Chunk("refunds.txt", 60, 117)])

    def test_bad_fields_and_paths(self):
        self.assertBad(extra=("--doc-field", "metadata..source"),
                       expect="--doc-field: 'metadata..source' is not a field path (keys "
                              "joined by '.', e.g. metadata.source)")
        self.assertBad(extra=("--id-field", ""), expect="--id-field: '' is not a field path")
        self.assertBad(run='{"q1": [{"id": "a", "meta": {"d": ["x"]}}]}',
                       extra=("--doc-field", "meta.d"),
                       expect="r.json: query 'q1': item 1: meta.d must be a string (or an "
                              "integer), got ['x']")
        for fields, said in (({"source": "x"}, "fields: unknown field 'source' (choose from "
                                               "query, id, doc, start, end)"),
                             (["doc"], "fields must be a dict"),
                             ({"doc": 3}, "fields['doc']: 3 is not a field path"),
                             ({"query": "query"}, 'fields: "query" names the query of a JSONL '
                                                  'line')):
            with self.subTest(fields=fields):
                with self.assertRaisesRegex(rag_eval.EvalError, "^" + said.replace("(", r"\(")
                                            .replace(")", r"\)").replace("[", r"\[")):
                    rag_eval.evaluate({"q": {"a": 1}}, {"q": ["a"]}, fields=fields)
        code, out, err = run_cli("--scores", self.write("s.jsonl", '{"query_id": "q", "f": 1}\n'),
                                 "--doc-field", "x")
        self.assertEqual(code, 2)
        self.assertIn("--doc-field applies to QRELS and a RUN, not to --scores alone", err)

    def test_bad_values_name_their_paths(self):
        lc = {"id": None, "metadata": {"source": "refunds.txt", "start_index": 9},
              "page_content": "Monthly", "type": "Document"}
        node = load_fixture("llamaindex.json")["q1"][0]
        cases = [
            (dict(lc, metadata={"source": "refunds.txt", "start_index": -1}),
             "item 1: metadata.start_index must be a non-negative integer (a code point "
             "offset), got -1"),
            (dict(lc, page_content=""),
             "item 1: metadata.start_index (9) must be below metadata.start_index + the "
             "length of page_content (9): spans are [start, end)"),
            (dict(lc, page_content=None), "item 1: page_content must be text, got None"),
            (dict(lc, metadata={"start_index": 9}),
             "item 1: a LangChain Document without an id is known by its document and span, "
             "and it gives no metadata.source: give ids (--id-field) or documents "
             "(--doc-field)"),
            (dict(node, node=dict(node["node"], end_char_idx=None)),
             "item 1: give node.start_char_idx and node.end_char_idx together (got only "
             "node.start_char_idx)"),
            (dict(node, score="0.5"), "item 1: score must be a finite number, got '0.5'"),
        ]
        for item, said in cases:
            with self.subTest(said=said):
                self.assertBad(run=json.dumps({"q1": [item]}), expect="r.json: query 'q1': " + said)

    def test_plain_objects_read_the_same_on_the_fast_path(self):
        # _mapped_ranking reads a plain object without field options as a chunk-map
        # line (fast); through _result_object (a query field forces it) it reads the same.
        general = rag_eval._Fields(query=("question",))
        items = [{"id": "a"}, {"id": "a", "doc": "A"}, {"id": "a", "doc": "A", "start": 0,
                                                         "end": 5, "tokens": 2},
                 {"id": "a", "doc": None, "start": 3}, {"id": "a", "doc": "A", "start": 3},
                 {"id": "a", "doc": "A", "start": 5, "end": 5}, {"id": "a", "doc": 7},
                 {"id": "a", "doc": "A", "start": -1, "end": 5}, {"id": "a", "doc": ["A"]},
                 {"id": "a", "doc": "A", "tokens": -2}, {"id": "a", "doc": "A", "doc_sha256": "x"},
                 {"id": "a", "doc": "A", "start": True, "end": 4}]
        for item in items:
            with self.subTest(item=item):
                outcomes = []
                for fields in (None, general):
                    try:
                        r = rag_eval._mapped_ranking("q", [item], "x", [], fields)
                        outcomes.append((list(r), r.chunks, r.unplaced))
                    except rag_eval.EvalError as exc:
                        outcomes.append(str(exc))
                self.assertEqual(outcomes[0], outcomes[1])

    def test_null_scores(self):
        # LlamaIndex writes "score": null for a node not scored: no score
        nodes = load_fixture("llamaindex.json")["q1"]
        for item in nodes:
            item["score"] = None
        run = rag_eval.load_run(self.write("r.json", json.dumps({"q1": nodes})))
        self.assertIsNone(run["q1"].scores)
        nodes[0]["score"] = 0.5
        with self.assertRaisesRegex(rag_eval.EvalError, "1 of 3 items give a score"):
            rag_eval.load_run(self.write("r.json", json.dumps({"q1": nodes})))
        # a plain object's null score stays an error (no framework says what it means)
        with self.assertRaisesRegex(rag_eval.EvalError, "item 1: score must be a finite number"):
            rag_eval.load_run(self.write("p.json", '{"q1": [{"id": "a", "score": null}]}'))

    def test_fields_are_recorded_and_a_change_is_said(self):
        rows = self.write("r.jsonl", jsonl(*[{"query_id": q, "docs": docs} for q, docs in
                                             load_fixture("llamaindex.json").items()]))
        saved = os.path.join(self.tmp, "base.json")
        code, out, err = run_cli(LABELS, rows, "--metrics", "recall(unit=doc)", "--save-baseline",
                                 saved)
        self.assertEqual(code, 0, err)
        with open(saved) as handle:
            self.assertNotIn("fields", json.load(handle)["inputs"]["run"])
        code, out, err = run_cli(LABELS, rows, "--metrics", "recall(unit=doc)", "--baseline",
                                 saved, "--doc-field", "node.metadata.file_name")
        self.assertEqual(code, 0, err)
        self.assertIn("the run was read at other field paths for the baseline (the shapes' own "
                      "-> --doc-field node.metadata.file_name): its ids, documents and spans "
                      "may not be the same", out)

    def test_every_run_reader_of_the_command_line_takes_the_fields(self):
        # --to-label and --sweep-min-score read the run again: with the same paths
        # (objects without "id": read without the paths, they are refused)
        scores = {"q1": [0.9, 0.5], "q2": [0.8, 0.4], "q9": [0.3]}
        docs = {q: [{"chunk": {"key": "%s-%d" % (q, i)}, "score": x} for i, x in enumerate(xs)]
                for q, xs in scores.items()}
        run = self.write("r.json", json.dumps(docs))
        qrels = self.write("q.jsonl", jsonl({"query_id": "q1", "relevant": ["q1-0"]},
                                            {"query_id": "q2", "relevant": ["q2-1"]},
                                            {"query_id": "q9", "answerable": False}))
        rows = os.path.join(self.tmp, "rows.jsonl")
        code, out, err = run_cli(qrels, run, "--id-field", "chunk.key", "--metrics", "mrr",
                                 "--k", "2", "--to-label", rows)
        self.assertEqual(code, 0, err)
        with open(rows) as handle:
            self.assertEqual(sorted(json.loads(line)["id"] for line in handle),
                             ["q1-1", "q2-0", "q9-0"])
        code, out, err = run_cli(qrels, run, "--id-field", "chunk.key", "--metrics", "mrr",
                                 "--k", "2", "--format", "json", "--sweep-min-score")
        self.assertEqual(code, 0, err)
        sweep = json.loads(out)["sweep"]
        # no cut: mrr@2 (1 + 1/2) / 2; the thresholds are the run's scores
        self.assertEqual(sweep["rows"][0]["mrr@2"], 0.75)
        self.assertEqual([row["min_score"] for row in sweep["rows"]],
                         [None, 0.3, 0.4, 0.5, 0.8, 0.9])

    def test_forked_workers_read_the_same_fields(self):
        docs = load_fixture("langchain.json")
        path = self.write("lc.jsonl", jsonl(*[{"query_id": q, "docs": items}
                                              for q, items in docs.items()]))
        qrels = {q: {ids[1]: 1} for q, ids in PLACES.items()}   # the second chunk, by place
        qrels_path = self.write("q.json", json.dumps(qrels))
        plain = rag_eval.evaluate_files(qrels_path, path, measures="mrr", k=3)
        self.assertEqual(plain.mean, {"mrr@3": 0.5})            # each at rank 2
        if hasattr(os, "fork") and (os.cpu_count() or 1) >= 2:
            saved = rag_eval._PARALLEL_MIN_BYTES
            rag_eval._PARALLEL_MIN_BYTES = 0
            try:
                self.assertEqual(rag_eval.evaluate_files(qrels_path, path, measures="mrr",
                                                         k=3).mean, plain.mean)
                for q, items in docs.items():
                    for i, d in enumerate(items):
                        d["metadata"]["chunk_id"] = "%s-%d" % (q, i)
                ids = self.write("ids.jsonl", jsonl(*[{"query_id": q, "docs": items}
                                                      for q, items in docs.items()]))
                by_id = self.write("qi.json", json.dumps({q: {q + "-1": 1} for q in docs}))
                self.assertEqual(rag_eval.evaluate_files(by_id, ids, measures="mrr", k=3,
                                                         fields={"id": "metadata.chunk_id"})
                                 .mean, plain.mean)
            finally:
                rag_eval._PARALLEL_MIN_BYTES = saved


class LostEvidenceTest(TempDir, unittest.TestCase):
    """Issue 23's last bullet: with offsets inline (no map), lost evidence cannot
    be detected; say so, rather than let a query quietly drop out of the check."""

    def node_map(self):
        """The chunk map the LlamaIndex index would write: every node, by its id."""
        nodes = {}
        for items in load_fixture("llamaindex.json").values():
            for item in items:
                n = item["node"]
                nodes[n["id_"]] = {"id": n["id_"], "doc": n["metadata"]["file_name"],
                                   "start": n["start_char_idx"], "end": n["end_char_idx"]}
        self.assertEqual(len(nodes), 7)         # P4, never retrieved, is indexed too
        nodes["P4"] = {"id": "P4", "doc": "pricing.txt", "start": 116, "end": 151}
        return self.write("chunks.jsonl", jsonl(*nodes.values()))

    def test_inline_offsets_say_lost_evidence_cannot_be_detected(self):
        code, out, err = run_cli(LABELS, fixture("llamaindex.json"), "--unit", "evidence",
                                 "--format", "json")
        self.assertEqual(code, 0, err)
        self.assertIn("rag-eval: warning: " + NO_MAP, err)
        self.assertIsNone(json.loads(out)["mapping"]["uncoverable"])
        # with the index's chunk map, q4's span (two newlines no chunk holds) is listed
        code, out, err = run_cli(LABELS, fixture("llamaindex.json"), "--unit", "evidence",
                                 "--format", "json", "--chunks", self.node_map())
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["mapping"]["uncoverable"],
                         {"q4": [["refunds.txt", 66, 125]]})
        self.assertIn("1 query has labelled evidence that no chunk of the map holds: lost at "
                      "ingestion", err)
        self.assertNotIn("not from a chunk map", err)

    def test_doc_sep_cannot_tell_either_and_ids_need_no_note(self):
        report = rag_eval.evaluate({"q": {"A": 1}}, {"q": ["A#1"]}, measures="recall(unit=doc)",
                                   doc_sep="#")
        self.assertIn("the chunks' documents came from --doc-sep, not from a chunk map",
                      report.warnings[-1])
        self.assertIsNone(report.mapping["uncoverable"])
        ids = rag_eval.evaluate({"q": {"a": 1}}, {"q": [{"id": "a", "doc": "A"}]},
                                measures="recall")
        self.assertEqual(ids.warnings, ())


if __name__ == "__main__":
    unittest.main()
