"""Rows: score_rows on shards, merge_rows on the driver, equal to one machine.

The reference is evaluate_files on the same rows written as JSONL files (the
command line's path); a merge must give its JSON report byte for byte but
for ``inputs``, whatever the shards and the order they come back in.
"""

import io
import json
import os
import random
import unittest

import rag_eval
from tests.support import HERE, TempDir, run_cli

EXAMPLES = os.path.join(HERE, "examples")


def jsonl(rows):
    return io.StringIO("".join(json.dumps(row) + "\n" for row in rows))


def shards(rng, qrels_rows, run_rows, parts):
    """(qrels rows, run rows) per shard: every query's rows in one shard, as a
    group-by-query would put them; qrels-only queries land in some shard or none."""
    queries = sorted({r["query_id"] for r in qrels_rows} | {r["query_id"] for r in run_rows})
    where = {q: rng.randrange(parts) for q in queries}
    return [([r for r in qrels_rows if where[r["query_id"]] == i],
             [r for r in run_rows if where[r["query_id"]] == i]) for i in range(parts)]


def synthetic(rng, queries=60):
    """Graded test-set lines (some with no label, some stated unanswerable,
    slices and a hold-out) and a run with ties, repeats, rising lists, empty
    and missing rankings and queries the qrels lack."""
    qrels_rows, run_rows = [], []
    docs = ["d%02d" % i for i in range(25)]
    for n in range(queries):
        qid = "q%03d" % n
        row = {"query_id": qid, "slices": {"topic": rng.choice(["a", "b", "c"]),
                                           "split": "holdout" if n % 9 == 0 else "dev"}}
        kind = rng.random()
        if kind < 0.08:
            row["answerable"] = False
        elif kind > 0.12:
            row["relevant"] = {d: rng.choice([0, 1, 2, 3]) for d in rng.sample(docs, 3)}
        qrels_rows.append(row)
        shape = rng.random()
        if shape < 0.08:
            continue                                    # not in the run
        if shape < 0.12:
            run_rows.append({"query_id": qid, "docs": []})
        elif shape < 0.4:
            ranked = [rng.choice(docs) for _ in range(8)]   # repeats
            run_rows.append({"query_id": qid, "docs": ranked})
        else:
            run_rows.append({"query_id": qid, "scores": {
                d: float(rng.choice([1, 2, 2, 3, 4])) for d in rng.sample(docs, 10)}})
    run_rows.append({"query_id": "extra1", "docs": ["d01"]})
    rng.shuffle(run_rows)
    return qrels_rows, run_rows


def whole(qrels_rows, run_rows, **options):
    return rag_eval.evaluate_files(jsonl(qrels_rows), jsonl(run_rows), **options)


MERGE_ONLY = ("by", "holdout", "reveal_holdout", "skip_extra_queries", "meta", "names",
              "scores", "pass_threshold", "allow_missing_scores")


def merged(rng, qrels_rows, run_rows, parts, **options):
    """The merge of the rows cut in ``parts`` shards (the options of the whole
    report: the driver's alone, MERGE_ONLY, are not score_rows')."""
    score_options = {k: v for k, v in options.items() if k not in MERGE_ONLY}
    records = []
    for shard_qrels, shard_run in shards(rng, qrels_rows, run_rows, parts):
        records.extend(rag_eval.score_rows(shard_qrels, shard_run, **score_options))
    rng.shuffle(records)
    return rag_eval.merge_rows(records, qrels_rows, **options)


def without_inputs(report):
    """The JSON report but for its inputs, with the label hashes a baseline
    saved of it keeps (the JSON report does not hold them)."""
    data = json.loads(rag_eval.render_json(report, per_query=True))
    data.pop("inputs")
    data["label_sha256"] = dict(report.label_sha256)
    return json.dumps(data, sort_keys=True)


class MergeEqualsOneMachineTest(unittest.TestCase):
    """Shards cut at random, merged in random order: the whole run's report."""

    def check(self, qrels_rows, run_rows, seeds=range(6), **options):
        expected = without_inputs(whole(qrels_rows, run_rows, **options))
        for seed in seeds:
            rng = random.Random(seed)
            with self.subTest(seed=seed):
                report = merged(rng, qrels_rows, run_rows, rng.randint(1, 6), **options)
                self.assertEqual(without_inputs(report), expected)

    def test_graded_ids_with_ties_repeats_and_missing_queries(self):
        qrels_rows, run_rows = synthetic(random.Random(1))
        self.check(qrels_rows, run_rows, measures="recall,ndcg,mrr,map,success,judged,rprec",
                   k="1,5,10", skip_extra_queries=True, unjudged_bounds=True, rel=2)

    def test_slices_a_holdout_and_unanswerable_queries(self):
        qrels_rows, run_rows = synthetic(random.Random(2))
        self.check(qrels_rows, run_rows, measures="recall,ndcg,abstention_f1", k="3,5",
                   skip_extra_queries=True, by="topic", holdout="split=holdout")

    def test_min_score(self):
        qrels_rows, run_rows = synthetic(random.Random(3))
        run_rows = [r for r in run_rows if "scores" in r]   # a cut needs scores
        self.check(qrels_rows, run_rows, measures="recall,precision", k=5, min_score=2.5,
                   skip_extra_queries=True)

    def test_span_labels_with_a_chunk_map(self):
        folder = os.path.join(EXAMPLES, "rechunk")
        with open(os.path.join(folder, "labels.jsonl")) as handle:
            qrels_rows = [json.loads(line) for line in handle if line.strip()]
        with open(os.path.join(folder, "run-a.jsonl")) as handle:
            run_rows = [json.loads(line) for line in handle if line.strip()]
        with open(os.path.join(folder, "chunks-a.jsonl")) as handle:
            chunks = [json.loads(line) for line in handle if line.strip()]
        expected = rag_eval.evaluate_files(
            jsonl(qrels_rows), jsonl(run_rows), k="3,5",
            measures="recall(unit=evidence),span_recall,ndcg(unit=doc),recall(unit=doc)",
            chunks=jsonl(chunks))
        for seed in range(4):
            rng = random.Random(seed)
            with self.subTest(seed=seed):
                report = merged(
                    rng, qrels_rows, run_rows, rng.randint(1, 3), k="3,5",
                    measures="recall(unit=evidence),span_recall,ndcg(unit=doc),recall(unit=doc)",
                    chunks=chunks)
                self.assertEqual(without_inputs(report), without_inputs(expected))
                self.assertEqual(report.mean["recall(unit=evidence)@5"],
                                 expected.mean["recall(unit=evidence)@5"])

    def test_labels_trimmed_of_whitespace_when_a_shard_has_none_to_trim(self):
        chunks = [{"id": "c1", "doc": "a", "start": 0, "end": 10},
                  {"id": "c2", "doc": "a", "start": 10, "end": 20}]
        qrels_rows = [{"query_id": "q1", "doc": "a", "start": 0, "end": 6, "grade": 1,
                       "text": " abcd "},
                      {"query_id": "q2", "doc": "a", "start": 10, "end": 14, "grade": 1}]
        run_rows = [{"query_id": "q1", "docs": ["c1"]}, {"query_id": "q2", "docs": ["c2"]}]
        options = dict(measures="recall(unit=evidence)", k=1, trim_label_whitespace=True)
        expected = without_inputs(whole(qrels_rows, run_rows, chunks=jsonl(chunks), **options))
        records = [r for i in (0, 1) for r in rag_eval.score_rows(
            qrels_rows[i:i + 1], run_rows[i:i + 1], chunks=chunks, **options)]
        self.assertEqual(without_inputs(rag_eval.merge_rows(records, qrels_rows, chunks=chunks,
                                                            **options)), expected)

    def test_warnings_name_the_inputs_as_given(self):
        qrels_rows = [{"query_id": "q1", "relevant": {"a": 1}, "tags": ["x"]}]
        run_rows = [{"query_id": "q1", "docs": [{"id": "x", "score": 0.1},
                                                {"id": "a", "score": 0.9}]}]
        options = dict(queries={"q1": {"slices": {"tag": ["y"]}}})
        expected = without_inputs(whole(qrels_rows, run_rows, **options))
        report = rag_eval.merge_rows(rag_eval.score_rows(qrels_rows, run_rows, **options),
                                     qrels_rows, names={"qrels": "<stream>", "run": "<stream>"},
                                     **options)
        self.assertEqual(without_inputs(report), expected)
        self.assertEqual(len(report.warnings), 2, report.warnings)     # rising; metadata
        default = rag_eval.merge_rows(rag_eval.score_rows(qrels_rows, run_rows, **options),
                                      qrels_rows, **options)
        self.assertTrue(default.warnings[0].startswith("run: 1 query lists scores that rise"))
        self.assertTrue(default.warnings[1].startswith("qrels rows says what its queries are"))

    def test_label_rows_not_graded_yet_are_said_as_the_command_line_says(self):
        qrels_rows = [{"query_id": "q1", "id": "a", "grade": 1},
                      {"query_id": "q1", "id": "b", "grade": None},
                      {"query_id": "q2", "id": "c", "grade": 2}]
        run_rows = [{"query_id": "q1", "docs": ["a", "b"]}, {"query_id": "q2", "docs": ["c"]}]
        expected = whole(qrels_rows, run_rows, measures="recall", k=2)
        self.assertEqual(expected.warnings[0],
                         '<stream>: skipped 1 row with "grade": null (not labelled yet)')
        report = rag_eval.merge_rows(
            rag_eval.score_rows(qrels_rows[:2], run_rows[:1], measures="recall", k=2)
            + rag_eval.score_rows(qrels_rows[2:], run_rows[1:], measures="recall", k=2),
            qrels_rows, measures="recall", k=2, names={"qrels": "<stream>", "run": "<stream>"})
        self.assertEqual(without_inputs(report), without_inputs(expected))

    def test_the_inputs_are_counted_and_hashed_in_any_order(self):
        qrels_rows, run_rows = synthetic(random.Random(4), queries=20)
        a = merged(random.Random(1), qrels_rows, run_rows, 3, skip_extra_queries=True)
        b = merged(random.Random(2), qrels_rows, run_rows, 2, skip_extra_queries=True)
        self.assertEqual(a.inputs, b.inputs)
        self.assertEqual(a.inputs["run"]["queries"], len(run_rows))
        self.assertEqual(a.inputs["qrels"]["queries"], 20)
        changed = [dict(r, docs=["d00"]) if "docs" in r else r for r in run_rows]
        c = merged(random.Random(1), qrels_rows, changed, 3, skip_extra_queries=True)
        self.assertNotEqual(c.inputs["run"]["rows_sha256"], a.inputs["run"]["rows_sha256"])
        self.assertEqual(c.inputs["qrels"], a.inputs["qrels"])

    def test_a_merged_report_saves_as_a_baseline(self):
        import tempfile
        qrels_rows, run_rows = synthetic(random.Random(6), queries=30)
        report = merged(random.Random(0), qrels_rows, run_rows, 3, measures="recall", k=5,
                        skip_extra_queries=True)
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "base.json")
            rag_eval.save_baseline(report, path)
            self.assertEqual(rag_eval.load_baseline(path).inputs["run"]["queries"],
                             report.inputs["run"]["queries"])
            self.assertTrue(rag_eval.gate(report, path).passed)

    def test_a_merged_report_gates_as_the_whole_does(self):
        qrels_rows, run_rows = synthetic(random.Random(5))
        base = whole(qrels_rows, run_rows, measures="recall", k=5, skip_extra_queries=True)
        worse = [{"query_id": r["query_id"], "docs": []} if r["query_id"] < "q020" else r
                 for r in run_rows]
        one = rag_eval.gate(whole(qrels_rows, worse, measures="recall", k=5,
                                  skip_extra_queries=True), base)
        two = rag_eval.gate(merged(random.Random(0), qrels_rows, worse, 4, measures="recall",
                                   k=5, skip_extra_queries=True), base)
        self.assertFalse(one.passed)
        self.assertEqual(two.passed, one.passed)
        self.assertEqual([(c.measure, c.status) for c in two.changes],
                         [(c.measure, c.status) for c in one.changes])


def judge_rows(rng, qrels_rows, missing=0.0):
    """A judge's score lines for the queries of ``qrels_rows``: a boolean
    verdict and a 1-5 grade; a share ``missing`` of the queries have none."""
    rows = []
    for row in qrels_rows:
        if rng.random() < missing:
            continue
        rows.append({"query_id": row["query_id"], "correct": rng.random() < 0.6,
                     "grade": rng.randint(1, 5)})
    return rows


class MergeWithJudgeScoresTest(TempDir, unittest.TestCase):
    """The judge's scores joined on the driver, the stage measures' evidence
    scored on the shards: the command line's report of both tiers, stages
    and all (its JSON but for inputs)."""

    def one_machine(self, qrels_rows, run_rows, score_rows_, *argv):
        paths = [self.write(name, "".join(json.dumps(r) + "\n" for r in rows))
                 for name, rows in (("qrels.jsonl", qrels_rows), ("run.jsonl", run_rows),
                                    ("scores.jsonl", score_rows_))]
        code, out, err = run_cli(paths[0], paths[1], "--scores", paths[2], "--format", "json",
                                 "--per-query", *argv)
        self.assertEqual(code, 0, err)
        data = json.loads(out)
        data.pop("inputs")
        return json.dumps(data, sort_keys=True), paths

    def check(self, qrels_rows, run_rows, judge, argv, fields, seeds=range(5), **options):
        """The merge against the command line's ``argv``; ``fields``: the
        score fields it reads (those --metrics and --answer name)."""
        expected, paths = self.one_machine(qrels_rows, run_rows, judge, *argv)
        ranges = {"grade": (1, 5)} if "grade" in fields else None
        scores = rag_eval.load_scores(paths[2], fields=fields, ranges=ranges,
                                      allow_missing=options.get("allow_missing_scores", False))
        for seed in seeds:
            rng = random.Random(seed)
            with self.subTest(seed=seed):
                report = merged(rng, qrels_rows, run_rows, rng.randint(1, 5), scores=scores,
                                names={"qrels": paths[0], "run": paths[1]}, **options)
                data = json.loads(rag_eval.render_json(report, per_query=True))
                data.pop("inputs")
                self.assertEqual(json.dumps(data, sort_keys=True), expected)
        return report

    def test_answer_stages_with_slices_a_holdout_and_unanswerable_queries(self):
        rng = random.Random(11)
        qrels_rows, run_rows = synthetic(rng)
        judge = judge_rows(rng, qrels_rows)
        report = self.check(
            qrels_rows, run_rows, judge,
            ["--metrics", "recall,ndcg", "--k", "3,5", "--answer", "correct",
             "--skip-extra-queries", "--by", "topic", "--holdout", "split=holdout"],
            ["correct"], measures="recall,ndcg", k="3,5", answer="correct", skip_extra_queries=True,
            by="topic", holdout="split=holdout")
        self.assertGreater(sum(report.stages["counts"].values()), 10)
        self.assertIn("answer_without_evidence(field=correct)@3", report.mean)

    def test_named_stage_measures_a_threshold_and_missing_scores(self):
        rng = random.Random(12)
        qrels_rows, run_rows = synthetic(rng)
        judge = judge_rows(rng, qrels_rows, missing=0.2)
        measures = ("recall,score(field=grade),answer_given_evidence(field=grade,"
                    "evidence=success)@5,answer_without_evidence(field=grade)@3")
        report = self.check(
            qrels_rows, run_rows, judge,
            ["--metrics", measures, "--k", "3,5", "--answer", "grade", "--pass-threshold",
             "grade=4", "--score-range", "grade=1:5", "--stages-k", "3",
             "--allow-missing-scores", "--skip-extra-queries"],
            ["grade"], measures=measures, k="3,5", answer="grade", pass_threshold={"grade": 4},
            stages_k=3, allow_missing_scores=True, skip_extra_queries=True)
        self.assertIn("answer_given_evidence(evidence=success,field=grade,threshold=4.0)@5",
                      report.mean)

    def test_a_named_stage_measure_at_the_stages_cutoff_with_its_own_threshold(self):
        # (the block's measure then differs from it on the driver, not on a shard)
        rng = random.Random(14)
        qrels_rows, run_rows = synthetic(rng)
        judge = judge_rows(rng, qrels_rows)
        measures = "recall,answer_without_evidence(field=grade,threshold=2)@5"
        self.check(
            qrels_rows, run_rows, judge,
            ["--metrics", measures, "--k", "5", "--answer", "grade", "--pass-threshold",
             "grade=4", "--score-range", "grade=1:5", "--skip-extra-queries"],
            ["grade"], measures=measures, k=5, answer="grade", pass_threshold={"grade": 4},
            skip_extra_queries=True)

    def test_judge_scores_beside_the_run_without_stages(self):
        rng = random.Random(13)
        qrels_rows, run_rows = synthetic(rng)
        judge = judge_rows(rng, qrels_rows)
        self.check(qrels_rows, run_rows, judge,
                   ["--metrics", "mrr,score(field=correct)", "--k", "5",
                    "--skip-extra-queries"], ["correct"], measures="mrr,score(field=correct)", k=5, skip_extra_queries=True)

    def test_a_shard_scores_the_stage_measures_without_their_thresholds(self):
        qrels_rows = [{"query_id": "q1", "relevant": {"a": 1}}]
        run_rows = [{"query_id": "q1", "docs": ["a"]}]
        records = rag_eval.score_rows(qrels_rows, run_rows, measures="recall", k=2,
                                      answer="ok", stages_evidence="success")
        self.assertEqual(records[0]["values"],      # whether the top 2 hold the evidence
                         {"recall@2": 1.0, "answer_given_evidence(evidence=success,field=ok)@2": 1.0,
                          "answer_without_evidence(evidence=success,field=ok)@2": 1.0})
        records = rag_eval.score_rows(
            qrels_rows, run_rows, k=2,
            measures="recall,answer_given_evidence(field=ok,threshold=0.7)")
        self.assertEqual(list(records[0]["values"]), ["recall@2", "answer_given_evidence(field=ok)@2"])

    def test_a_shard_names_the_stage_measure_it_refuses(self):
        chunks = [{"id": "c1", "doc": "a", "start": 0, "end": 10}]
        qrels_rows = [{"query_id": "q1", "doc": "a", "start": 0, "end": 5, "grade": 1}]
        run_rows = [{"query_id": "q1", "docs": ["c1"]}]
        with self.assertRaisesRegex(rag_eval.EvalError, r"answer_without_evidence\(field=ok\)@2"):
            rag_eval.score_rows(qrels_rows, run_rows, k=2, chunks=chunks,
                                measures="recall(unit=doc),answer_without_evidence(field=ok,"
                                         "threshold=0.7)@2")

    def test_rel_as_text_is_read_with_stages_as_without(self):
        # (it reached the stage measures unread: a TypeError on the shard)
        qrels_rows = [{"query_id": "q1", "relevant": {"a": 2}}]
        run_rows = [{"query_id": "q1", "docs": ["a"]}]
        records = [rag_eval.score_rows(qrels_rows, run_rows, answer="ok", k=1, rel=rel)
                   for rel in ("2", 2)]
        self.assertEqual(records[0], records[1])
        self.assertEqual(records[0][0]["values"]["answer_given_evidence(field=ok,rel=2)@1"], 1.0)

    def test_stages_need_the_scores_and_the_same_stage_options(self):
        qrels_rows = [{"query_id": "q1", "relevant": {"a": 1}}]
        run_rows = [{"query_id": "q1", "docs": ["a"]}]
        scores = rag_eval.load_scores(io.StringIO('{"query_id": "q1", "ok": true}\n'))
        records = rag_eval.score_rows(qrels_rows, run_rows, measures="recall", k=2,
                                      answer="ok")
        for options in ({"answer": "ok"}, {"pass_threshold": {"ok": 1}},
                        {"allow_missing_scores": True}, {"measures": "recall,score(field=ok)"}):
            with self.subTest(options=options):
                with self.assertRaisesRegex(rag_eval.EvalError, "give merge_rows scores="):
                    rag_eval.merge_rows(records, qrels_rows, **dict(
                        {"measures": "recall", "k": 2}, **options))
        two = rag_eval.load_scores(io.StringIO('{"query_id": "q1", "ok": true, "no": true}\n'))
        for options in ({"stages_k": 1}, {"stages_evidence": "success"}, {"answer": None},
                        {"answer": "no", "scores": two}):
            with self.subTest(options=options):
                with self.assertRaisesRegex(rag_eval.EvalError, "scored with other options"):
                    rag_eval.merge_rows(records, qrels_rows, measures="recall", k=2,
                                        **dict({"scores": scores, "answer": "ok"}, **options))
        # The pass threshold is the driver's alone: the shards never see a verdict.
        report = rag_eval.merge_rows(records, qrels_rows, measures="recall", k=2,
                                     scores=scores, answer="ok", pass_threshold={"ok": 1})
        self.assertEqual(report.stages["counts"]["pass"], 1)


class MergeRefusesTest(unittest.TestCase):
    """What would make a merge differ from the whole is an error naming it."""

    QRELS = [{"query_id": "q1", "relevant": {"a": 1}}, {"query_id": "q2", "relevant": {"b": 2}}]
    RUN = [{"query_id": "q1", "docs": ["a", "b"]}, {"query_id": "q2", "docs": ["b"]}]

    def test_a_query_in_two_shards(self):
        records = rag_eval.score_rows(self.QRELS, self.RUN) + rag_eval.score_rows(
            self.QRELS[:1], self.RUN[:1])
        with self.assertRaisesRegex(rag_eval.EvalError, "query 'q1' is in two shards"):
            rag_eval.merge_rows(records, self.QRELS)

    def test_other_measures_or_options(self):
        records = rag_eval.score_rows(self.QRELS, self.RUN, measures="recall", k=5)
        for options in ({"measures": "recall", "k": 3}, {"measures": "mrr", "k": 5},
                        {"measures": "recall", "k": 5, "rel": 2},
                        {"measures": "recall", "k": 5, "min_score": 0.5},
                        {"measures": "recall", "k": 5, "unjudged_bounds": True}):
            with self.subTest(options=options):
                with self.assertRaisesRegex(rag_eval.EvalError, "scored with other options"):
                    rag_eval.merge_rows(records, self.QRELS, **options)

    def test_other_labels_for_a_query(self):
        other = [{"query_id": "q1", "relevant": {"a": 2}}, self.QRELS[1]]
        records = rag_eval.score_rows(other, self.RUN)
        with self.assertRaisesRegex(rag_eval.EvalError, "query 'q1' was scored with other "
                                                        "labels"):
            rag_eval.merge_rows(records, self.QRELS)
        # a shard that lacked a query's labels scored it as not in the qrels
        records = rag_eval.score_rows(self.QRELS[1:], self.RUN)
        with self.assertRaisesRegex(rag_eval.EvalError, "query 'q1' was scored with other"):
            rag_eval.merge_rows(records, self.QRELS)

    def test_bad_rows_name_the_row_and_the_query(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "run row 2: query 'q1' appears on "
                                                        "more than one line"):
            rag_eval.score_rows(self.QRELS, self.RUN[:1] * 2)
        with self.assertRaisesRegex(rag_eval.EvalError, "run row 1.*'q1'.*NaN|run row 1"):
            rag_eval.score_rows(self.QRELS, [{"query_id": "q1", "scores": {"a": float("nan")}}])
        with self.assertRaisesRegex(rag_eval.EvalError, "^qrels rows|qrels row 1"):
            rag_eval.score_rows([{"query_id": "q1", "relevant": {"a": "high"}}], self.RUN)
        with self.assertRaisesRegex(rag_eval.EvalError, "merge_rows takes the records"):
            rag_eval.merge_rows([{"query_id": "q1"}], self.QRELS)

    def test_other_query_metadata(self):
        queries = {"q1": {"answerable": False}, "q2": {}}
        qrels = [{"query_id": "q1"}, self.QRELS[1]]
        records = rag_eval.score_rows(qrels, self.RUN, measures="recall,abstention_f1")
        with self.assertRaisesRegex(rag_eval.EvalError, "query 'q1' was scored with other "
                                                        "query metadata"):
            rag_eval.merge_rows(records, qrels, measures="recall,abstention_f1",
                                queries=queries)

    def test_a_run_mapping_its_own_chunks(self):
        run = [{"query_id": "q1", "docs": [{"id": "c1", "doc": "a", "start": 0, "end": 5}]}]
        with self.assertRaisesRegex(rag_eval.EvalError, "give the chunk map"):
            rag_eval.score_rows([{"query_id": "q1", "doc": "a", "start": 0, "end": 3,
                                  "grade": 1}], run, measures="recall(unit=evidence)")

    def test_run_items_giving_tokens_or_document_versions(self):
        chunks = [{"id": "c1", "doc": "a", "start": 0, "end": 10}]
        qrels = [{"query_id": "q1", "doc": "a", "start": 0, "end": 5, "grade": 1}]
        for item in ({"id": "c1", "doc": "a", "tokens": 4},
                     {"id": "c1", "doc": "a", "doc_sha256": "1" * 64}):
            with self.subTest(item=item):
                with self.assertRaisesRegex(rag_eval.EvalError, "run row 1: query 'q1': its "
                                                                "items give tokens or doc_sha256"):
                    rag_eval.score_rows(qrels, [{"query_id": "q1", "docs": [item]}],
                                        chunks=chunks, measures="recall(unit=evidence)")

    def test_records_that_went_through_json(self):
        records = rag_eval.score_rows(self.QRELS, self.RUN, unjudged_bounds=True)
        with self.assertRaisesRegex(rag_eval.EvalError, "query 'q1': its record changed after "
                                                        "score_rows"):
            rag_eval.merge_rows(json.loads(json.dumps(records)), self.QRELS,
                                unjudged_bounds=True)
        with self.assertRaisesRegex(rag_eval.EvalError, "merge_rows takes the records"):
            rag_eval.merge_rows([dict(records[0], extra=1)], self.QRELS, unjudged_bounds=True)

    def test_no_record_at_all(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "no records: the run rows were empty"):
            rag_eval.merge_rows([], self.QRELS)

    def test_empty_shards_are_nothing(self):
        self.assertEqual(rag_eval.score_rows(self.QRELS, []), [])
        records = rag_eval.score_rows([], self.RUN)    # no labels came with these queries
        self.assertEqual([r["values"] for r in records], [None, None])
        with self.assertRaisesRegex(rag_eval.EvalError, "scored with other labels"):
            rag_eval.merge_rows(records, self.QRELS)


if __name__ == "__main__":
    unittest.main()
