"""Test sets (issue 12): slices, the hold-out and valid_until dates; the gate
per slice, their options and command line, and the bundled examples/testset.
"""

import hashlib
import json
import math
import os
import re
import statistics
import unittest

import rag_eval
from tests.support import (read_doc, HERE, run_cli, TempDir, example_report, read_text, jsonl, SLICED_QRELS,
                           SLICED_RUN, SLICED_QUERIES, sliced_report, saved_baseline,
                           out_keys_sorted)


# ---------------------------------------------------------------------------
# Slices, the hold-out and valid_until dates (issue 12)
# ---------------------------------------------------------------------------

class SliceReportTest(TempDir, unittest.TestCase):
    """Query metadata puts queries in slices field=value; each slice's mean is
    over its scored queries; --by shows one table per field."""

    def test_slice_means_worked_by_hand(self):
        report = sliced_report(holdout="split=holdout", by=["source", "tag"])
        # Overall, hold-out left out: s1, s2, s3, r1, r2.
        self.assertEqual(report.mean, {"recall@2": (1 + 1 / 2 + 0 + 1 + 1) / 5,     # 0.7
                                       "mrr@2": (1 + 1 / 2 + 0 + 1 + 1 / 2) / 5})    # 0.6
        self.assertEqual(report.slices["source=synthetic"],
                         {"queries": 3, "unscored": [],
                          "mean": {"recall@2": (1 + 1 / 2 + 0) / 3, "mrr@2": (1 + 1 / 2 + 0) / 3}})
        # h1 is real too, but held out: real is r1, r2 (r3 has no label: unscored).
        self.assertEqual(report.slices["source=real"],
                         {"queries": 2, "unscored": ["r3"],
                          "mean": {"recall@2": (1 + 1) / 2, "mrr@2": (1 + 1 / 2) / 2}})
        self.assertEqual(report.slices["tag=eu"]["mean"], {"recall@2": (1 + 1) / 2,
                                                           "mrr@2": (1 + 1) / 2})
        self.assertEqual(report.slices["tag=pricing"]["queries"], 1)
        self.assertNotIn("split=holdout", report.slices)
        held = report.holdout
        self.assertEqual((held.queries, held.unscored, held.missing), (2, 0, 1))
        self.assertEqual(held.mean, {"recall@2": (1 + 0) / 2, "mrr@2": (1 / 2 + 0) / 2})

    def test_without_a_hold_out_its_queries_are_a_slice_like_any(self):
        report = sliced_report()
        self.assertEqual(report.mean["mrr@2"], (1 + 1 / 2 + 0 + 1 + 1 / 2 + 1 / 2 + 0) / 7)
        self.assertEqual(report.slices["source=real"]["mean"]["mrr@2"], (1 + 1 / 2 + 1 / 2) / 3)
        self.assertEqual(report.slices["split=holdout"]["mean"]["mrr@2"], (1 / 2 + 0) / 2)
        self.assertIsNone(report.holdout)

    def test_a_query_only_in_the_metadata_is_an_unscored_member(self):
        report = sliced_report()
        self.assertIn("r3", report.unscored)
        self.assertEqual(report.abstention["r3"], 1)     # the run's ranking is not "extra"
        self.assertEqual(report.skipped, ())
        with self.assertRaisesRegex(rag_eval.EvalError, "not in the qrels: 'r3'"):
            rag_eval.evaluate(SLICED_QRELS, SLICED_RUN, k=2)

    def test_json_has_the_by_fields_only_with_sorted_keys(self):
        out = rag_eval.render_json(sliced_report(by="source"))
        doc = json.loads(out)
        self.assertEqual(list(doc["slices"]), ["source=real", "source=synthetic"])
        # Without a hold-out, real is r1, r2 and h1: mrr (1 + 1/2 + 1/2)/3.
        self.assertEqual(doc["slices"]["source=real"],
                         {"queries": 3, "unscored": ["r3"], "mean": {"mrr@2": 2 / 3,
                                                                     "recall@2": 1.0}})
        self.assertTrue(out_keys_sorted(out))
        self.assertNotIn("slices", json.loads(rag_eval.render_json(sliced_report())))

    def test_one_table_per_field_with_the_count_on_every_row(self):
        text = rag_eval.render_text(sliced_report(by=["tag", "source"]))
        self.assertLess(text.index("by tag"), text.index("by source"))
        self.assertRegex(text, r"\n  real +3 +1 +1\.0000 +0\.6667\n")
        self.assertRegex(text, r"\n  synthetic +3 +0 +0\.5000 +0\.5000\n")
        self.assertRegex(text, r"\n  eu +2 +0 +1\.0000 +1\.0000\n")
        self.assertIn("a query with several tag values is in each of their rows", text)
        self.assertIn("5 scored queries have no tag: in no row", text)     # s2 s3 r2 h1 h2
        markdown = rag_eval.render_markdown(sliced_report(by="source"))
        self.assertIn("| real | 3 | 1 | 1.0000 | 0.6667 |", markdown)

    def test_slice_means_follow_each_measures_population(self):
        # span_recall scores only queries with span labels: q1 (span) yes, q2 (whole doc) no.
        qrels = {"q1": [rag_eval.Label("A", 0, 10, 1)], "q2": [rag_eval.Label("B", None, None, 1)],
                 "q3": [rag_eval.Label("A", 0, 4, 1)]}
        chunks = {"a1": {"doc": "A", "start": 0, "end": 5}, "b1": {"doc": "B", "start": 0, "end": 5}}
        run = {"q1": ["a1"], "q2": ["b1"], "q3": ["b1"]}
        queries = {q: {"slices": {"kind": ["x"]}} for q in qrels}
        report = rag_eval.evaluate(qrels, run, k=1, measures="span_recall,recall(unit=doc)",
                                   chunks=chunks, queries=queries, by="kind")
        stats = report.slices["kind=x"]
        # q1: 5 of 10 characters; q3: 0 of 4; q2 has no span label.
        self.assertEqual(stats["mean"], {"span_recall@1": (5 / 10 + 0 / 4) / 2,
                                         "recall(unit=doc)@1": (1 + 1 + 0) / 3})
        self.assertEqual(stats["n"], {"span_recall@1": 2, "recall(unit=doc)@1": 3})
        self.assertIn("kind=x: span_recall@1 averages over 2 of its 3 scored queries",
                      rag_eval.render_text(report))

    def test_without_metadata_nothing_changes(self):
        report = example_report()
        self.assertIsNone(report.slices)
        self.assertEqual(set(report.to_dict()) & {"slices", "holdout"}, set())
        self.assertEqual(set(rag_eval.baseline_dict(report)),
                         {"format", "format_version", "tool", "inputs", "meta", "label_sha256",
                          "measures", "rel", "mean", "per_query", "unscored", "query_sets"})

    def test_bad_metadata_and_options_are_refused(self):
        cases = [
            ({"queries": {"q": {"tags": ["a"]}}}, "unknown key 'tags'"),
            ({"queries": {"q": {"slices": {"s": "a"}}}}, "slices.s must be a non-empty list"),
            ({"queries": {"q": {"slices": {"a=b": ["c"]}}}}, "without '='"),
            ({"queries": {"q": {"valid_until": "2025-02-30"}}}, "must be a date YYYY-MM-DD"),
            ({"queries": {"q": {"answerable": "no"}}}, "answerable must be bool"),
            ({"queries": [], "by": "x"}, "queries must be a dict"),
            ({"queries": SLICED_QUERIES, "by": "topic"}, "no query carries the slice field 'topic'"),
            ({"queries": SLICED_QUERIES, "holdout": "split"}, "FIELD=VALUE"),
            ({"queries": SLICED_QUERIES, "holdout": "split=test"}, "no query is in that slice"),
            ({"queries": SLICED_QUERIES, "reveal_holdout": True}, "needs a hold-out"),
            ({"queries": SLICED_QUERIES, "as_of": "today"}, "as_of must be a date"),
            ({"by": "source"}, "need query metadata"),
            ({"queries": SLICED_QUERIES, "by": "source", "average": "trec_eval"},
             "not for trec_eval's average"),
        ]
        for options, message in cases:
            with self.subTest(options=options):
                with self.assertRaisesRegex(rag_eval.EvalError, re.escape(message)):
                    rag_eval.evaluate(SLICED_QRELS, SLICED_RUN, k=2, skip_extra_queries=True,
                                      **options)


class HoldOutTest(TempDir, unittest.TestCase):
    """--holdout: the slice is scored and gated apart, left out of every other
    mean, and no id or per-query value of it is written anywhere."""

    # Hold-out queries with ids found nowhere else, values no mean can equal
    # (mrr 1/7: rank 7; 1/9: rank 9), and every reason a query is named in a
    # warning or a list: repeated ids (alpha), ties across the cutoff (beta:
    # h, a1, a0 tied at ranks 9-11, broken by id descending), missing from the
    # run (gamma), no relevant label (delta), nothing labelled in the top 10
    # (eps), nothing retrieved (zeta), expired (old).
    QRELS = {"open1": {"a": 1}, "open2": {"b": 1}, "open3": {"c": 1},
             "hidden-alpha": {"g": 1}, "hidden-beta": {"h": 1}, "hidden-gamma": {"i": 1},
             "hidden-delta": {"j": 0}, "hidden-eps": {"s": 1}, "hidden-zeta": {"t": 1},
             "hidden-old": {"k": 1}}
    RUN = {"open1": ["a"], "open2": ["x", "b"], "open3": [],
           "hidden-alpha": ["x1", "x2", "x3", "x1", "x4", "x5", "x6", "g"],
           "hidden-beta": dict({"y%d" % i: 2.0 for i in range(1, 9)}, h=1.0, a1=1.0, a0=1.0),
           "hidden-delta": ["j"], "hidden-eps": ["q", "r"], "hidden-zeta": [],
           "hidden-old": ["k"]}
    QUERIES = {q: {"slices": {"split": ["holdout" if q.startswith("hidden") else "open"],
                              "source": ["real"]}} for q in QRELS}
    QUERIES["hidden-old"]["valid_until"] = "2020-01-01"
    IDS = ["hidden-alpha", "hidden-beta", "hidden-gamma", "hidden-delta", "hidden-eps",
           "hidden-zeta", "hidden-old"]
    VALUES = ["0.1429", "0.1111", repr(1 / 7), repr(1 / 9), "0.142857", "0.111111"]

    def report(self, run=None, **options):
        return rag_eval.evaluate(self.QRELS, self.RUN if run is None else run, k=10,
                                 measures="mrr,recall,ndcg", queries=self.QUERIES,
                                 holdout="split=holdout", by=["source", "split"],
                                 as_of="2021-01-01", **options)

    def assertNothingHeldOut(self, *texts):
        for text in texts:
            for secret in self.IDS + self.VALUES:
                self.assertNotIn(secret, text)

    def test_no_id_and_no_per_query_value_in_any_output(self):
        report = self.report()
        # alpha 1/7, beta 1/9; gamma, eps and zeta 0; delta unscored; old expired.
        self.assertEqual(report.holdout.mean["mrr@10"], (1 / 7 + 1 / 9 + 0 + 0 + 0) / 5)
        self.assertEqual((report.holdout.queries, report.holdout.unscored,
                          report.holdout.missing), (5, 1, 1))
        # The same scorer, the hold-out not set apart: every warning names it.
        plain = rag_eval.evaluate(self.QRELS, self.RUN, k=10, measures="mrr",
                                  skip_extra_queries=True)
        for query in self.IDS[:-1]:
            self.assertIn(query, repr(tuple(plain)))    # every field (repr is counts only)
        self.assertEqual((plain.ties, plain.unlabelled), ({"hidden-beta": 1}, ("hidden-eps",)))
        self.assertIn("1 query repeat ids", " ".join(plain.warnings))
        base = saved_baseline(self, report)
        worse = dict(self.RUN, open1=["x", "a"], **{"hidden-alpha": ["g"]})
        result = rag_eval.gate(self.report(run=worse), base, mode="significant")
        outputs = [repr(report), repr(base), repr(result), str(report.warnings)]
        for render in (rag_eval.render_text, rag_eval.render_markdown, rag_eval.render_json,
                       rag_eval.render_trec):
            outputs.append(render(report, result, per_query=True))
        with open(os.path.join(self.tmp, "base.json")) as handle:
            outputs.append(handle.read())
        self.assertNothingHeldOut(*outputs)
        self.assertIn("1 query expired by 2021-01-01 (valid_until before it), left out of "
                      "every mean: 1 held out (not named)", report.warnings)
        self.assertFalse(any("repeat ids" in w or "tied" in w for w in report.warnings))
        self.assertIn("1 query retrieved nothing, scored 0: 'open3'", report.warnings)

    def test_hold_out_is_in_no_other_list_or_mean(self):
        report = self.report()
        self.assertEqual(sorted(report.per_query), ["open1", "open2", "open3"])
        self.assertEqual((report.unscored, report.missing), ((), ()))
        self.assertEqual(report.mean["mrr@10"], (1 + 1 / 2 + 0) / 3)
        self.assertEqual(report.slices["source=real"]["mean"]["mrr@10"], (1 + 1 / 2 + 0) / 3)
        self.assertEqual(sorted(report.slices), ["source=real", "split=open"])

    def test_reveal_holdout_writes_ids_and_values(self):
        report = self.report(reveal_holdout=True)
        doc = json.loads(rag_eval.render_json(report, per_query=True))
        self.assertEqual(doc["holdout"]["ids"], {"unscored": ["hidden-delta"],
                                                 "missing_from_run": ["hidden-gamma"]})
        self.assertEqual(doc["holdout"]["per_query"]["hidden-alpha"]["mrr@10"], 1 / 7)
        self.assertEqual(doc["holdout"]["per_query"]["hidden-beta"]["mrr@10"], 1 / 9)
        self.assertIn("hidden-beta", rag_eval.render_text(report, per_query=True))
        saved = rag_eval.baseline_dict(report)["holdout"]
        self.assertEqual(set(saved["per_query"]), {"hidden-alpha", "hidden-beta", "hidden-gamma",
                                                   "hidden-eps", "hidden-zeta"})

    def test_saved_baseline_keeps_counts_means_and_a_digest(self):
        report = self.report()
        saved = rag_eval.baseline_dict(report)["holdout"]
        self.assertEqual(set(saved), {"slice", "queries", "unscored", "missing_from_run",
                                      "mean", "members_sha256"})
        members = sorted(["hidden-alpha", "hidden-beta", "hidden-gamma", "hidden-delta",
                          "hidden-eps", "hidden-zeta"])     # not hidden-old: expired
        digest = hashlib.sha256(json.dumps(members, separators=(",", ":")).encode()).hexdigest()
        self.assertEqual(saved["members_sha256"], digest)

    def test_every_scored_query_held_out_is_an_error(self):
        queries = {q: {"slices": {"split": ["holdout"]}} for q in SLICED_QRELS}
        with self.assertRaisesRegex(rag_eval.EvalError, "every scored query is in the hold-out"):
            sliced_report(queries=queries, holdout="split=holdout", run={})


class ValidUntilTest(TempDir, unittest.TestCase):
    """valid_until dates: --as-of leaves out the queries expired by then; no
    clock is ever read."""

    def queries(self, **dates):
        return {q: dict(info, **({"valid_until": dates[q]} if q in dates else {}))
                for q, info in SLICED_QUERIES.items()}

    def test_without_as_of_dates_are_only_counted(self):
        # 1999 is long past: a report that read the clock would leave s3 out.
        report = sliced_report(queries=self.queries(s3="1999-01-01", r1="2999-01-01"))
        self.assertIn("s3", report.per_query)
        self.assertIn("2 queries carry a valid_until date; --as-of DATE (as_of=) leaves out "
                      "those expired by then", report.warnings)

    def test_as_of_leaves_out_expired_queries_with_a_listed_warning(self):
        report = sliced_report(queries=self.queries(s3="2025-01-01", s2="2025-06-01",
                                                    r1="2026-06-30"),
                               as_of="2025-06-01", holdout="split=holdout")
        # s3 expired (2025-01-01 < 2025-06-01); s2 is valid through its day.
        self.assertEqual(report.mean["recall@2"], (1 + 1 / 2 + 1 + 1) / 4)
        self.assertEqual(report.slices["source=synthetic"]["queries"], 2)
        self.assertNotIn("s3", report.unscored)
        self.assertEqual(report.skipped, ())    # its ranking in the run is not an extra query
        self.assertIn("1 query expired by 2025-06-01 (valid_until before it), left out of "
                      "every mean: 's3'", report.warnings)

    def test_a_bad_date_is_refused(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "as_of must be a date YYYY-MM-DD, "
                                                        "got '2025-6-1'"):
            sliced_report(as_of="2025-6-1")


def result_note(result):
    """The gate's sample-size note (the one starting "too few queries to see")."""
    found = [n for n in result.notes if n.startswith("too few queries to see")]
    return found[0] if len(found) == 1 else found


class SliceGateTest(TempDir, unittest.TestCase):
    """A saved baseline holds every slice's means and each query's slices; the
    gate checks every slice it holds, the hold-out on its means."""

    def base(self, **options):
        return saved_baseline(self, sliced_report(holdout="split=holdout", **options))

    def gate(self, run=None, queries=None, measures="recall,mrr", **options):
        report = sliced_report(run=run, queries=queries, measures=measures,
                               holdout="split=holdout")
        return rag_eval.gate(report, self.base(measures=measures), **options)

    def status(self, result):
        return {c.name: c.status for c in result.changes}

    def test_the_overall_mean_passes_and_a_slice_fails(self):
        # s2 loses b (mrr 1/2 -> 0), r2 finds f first (1/2 -> 1).
        # Overall mrr: (1 + 1/2 + 0 + 1 + 1/2)/5 = 0.6 -> (1 + 0 + 0 + 1 + 1)/5 = 0.6.
        # synthetic: (1 + 1/2 + 0)/3 = 1/2 -> (1 + 0 + 0)/3 = 1/3, a drop of 1/6.
        # real: (1 + 1/2)/2 = 3/4 -> (1 + 1)/2 = 1.
        run = dict(SLICED_RUN, s2=["x", "y"], r2=["f"])
        result = self.gate(run=run, measures="mrr")
        status = self.status(result)
        self.assertEqual(status["mrr@2"], "unchanged")
        self.assertEqual(status["source=synthetic: mrr@2"], "regressed")
        self.assertEqual(status["source=real: mrr@2"], "improved")
        self.assertFalse(result.passed)
        self.assertEqual([c.name for c in result.regressions], ["source=synthetic: mrr@2"])
        change = result.regressions[0]
        self.assertAlmostEqual(change.delta, 1 / 3 - 1 / 2, places=15)
        self.assertEqual((change.measure, change.slice), ("mrr@2", "source=synthetic"))
        text = rag_eval.render_text(sliced_report(run=run, measures="mrr",
                                                  holdout="split=holdout"), result)
        self.assertIn("FAILED, 1 regression: source=synthetic: mrr@2", text)
        # tag=eu, tag=pricing and the hold-out did not move: their rows are in the JSON only.
        self.assertIn("3 slice rows unchanged or within the tolerance, not shown", text)
        self.assertNotIn("tag=eu: mrr@2", text)
        self.assertRegex(text, r"\n  source=real: mrr@2 +0\.7500 +1\.0000 +\+0\.2500 +2 +improved")

    def test_every_slice_of_the_baseline_is_gated_not_only_by(self):
        base = self.base(by="source")
        self.assertEqual(sorted(base.slices), ["source=real", "source=synthetic", "tag=eu",
                                               "tag=pricing"])
        run = dict(SLICED_RUN, s1=["x", "y"])     # tag=pricing: mrr 1 -> 0
        result = rag_eval.gate(sliced_report(run=run, holdout="split=holdout"), base)
        self.assertEqual(self.status(result)["tag=pricing: mrr@2"], "regressed")

    def test_a_slice_that_disappeared_is_a_regression(self):
        queries = {q: info for q, info in SLICED_QUERIES.items()}
        queries["s1"] = {"slices": {"source": ["synthetic"]}}      # no tags now
        result = self.gate(queries=queries)
        self.assertEqual(self.status(result)["tag=pricing: recall@2"], "missing")
        self.assertEqual(self.status(result)["tag=eu: recall@2"], "unchanged")   # r1 is still eu
        self.assertFalse(result.passed)
        no_metadata = rag_eval.evaluate(SLICED_QRELS, SLICED_RUN, k=2, measures="recall,mrr",
                                        skip_extra_queries=True)
        with self.assertRaisesRegex(rag_eval.EvalError, "and this report has none"):
            rag_eval.gate(no_metadata, self.base())

    def test_slice_max_drop_gives_a_slice_its_own_tolerance(self):
        run = dict(SLICED_RUN, s2=["x", "y"], r2=["f"])
        # synthetic fell 1/6 = 0.1667: within 0.2, beyond 10% of 1/2 = 0.05.
        self.assertTrue(self.gate(run=run, measures="mrr",
                                  slice_max_drop={"source=synthetic": 0.2}).passed)
        result = self.gate(run=run, measures="mrr", slice_max_drop={"source=synthetic": "10%"})
        self.assertFalse(result.passed)
        self.assertEqual(result.slice_tolerances, {"source=synthetic": "10%"})
        # A drop of 0.01 passes the overall 0.02 and fails a slice held at 0.
        base = self.base()
        strict = base._replace(slices=dict(base.slices, **{"source=real": {
            "recall@2": 1.0, "mrr@2": 0.76}}), per_query=None)
        result = rag_eval.gate(sliced_report(holdout="split=holdout"), strict,
                               slice_max_drop={"source=real": 0})
        self.assertEqual(self.status(result)["source=real: mrr@2"], "regressed")
        with self.assertRaisesRegex(rag_eval.EvalError, "names 'risk=high', a slice"):
            self.gate(slice_max_drop={"risk=high": 0})

    def test_significant_gate_holm_adjusts_over_one_family(self):
        # 30 queries, a=1 for q00..q09, a=2 for the rest; q00..q09 lose their hit.
        qrels = {"q%02d" % i: {"d": 1} for i in range(30)}
        queries = {q: {"slices": {"a": ["1" if i < 10 else "2"]}}
                   for i, q in enumerate(sorted(qrels))}
        good = {q: ["d"] for q in qrels}
        before = rag_eval.evaluate(qrels, good, k=1, measures="success", queries=queries)
        base = saved_baseline(self, before)
        after = rag_eval.evaluate(qrels, dict(good, **{"q%02d" % i: ["x"] for i in range(10)}),
                                  k=1, measures="success", queries=queries)
        result = rag_eval.gate(after, base, mode="significant")
        # Tested pairs: overall, a=1, a=2.  Overall and a=1 see the same 10
        # differences of -1: exact p = 2 / 2**10 each; a=2 sees none: p = 1.
        # Holm over the family of 3: 3 * 2/2**10 = 3/512 for the two smallest.
        p = {c.name: c.p_value for c in result.changes}
        self.assertEqual(p["success@1"], 3 * 2 / 2 ** 10)
        self.assertEqual(p["a=1: success@1"], 3 * 2 / 2 ** 10)
        self.assertIsNone(p["a=2: success@1"])      # no difference: untestable, tolerance rule
        self.assertFalse(result.passed)
        self.assertIn("a=2: success@1", " ".join(result.notes))

    def test_relabelled_queries_stay_in_the_paired_slice_comparison(self):
        # s2's labels change (c dropped, so its run's b now finds all of them):
        # the significant gate pairs synthetic over s1, s2 and s3, (1 + 1/2 +
        # 0)/3 -> (1 + 1 + 0)/3, and names s2 relabelled.
        base = self.base()
        qrels = dict(SLICED_QRELS, s2={"b": 1})
        report = rag_eval.evaluate(qrels, SLICED_RUN, k=2, measures="recall,mrr",
                                   queries=SLICED_QUERIES, holdout="split=holdout")
        result = rag_eval.gate(report, base, mode="significant")
        self.assertEqual(result.labels_changed, ("s2",))
        change = {c.name: c for c in result.changes}["source=synthetic: recall@2"]
        self.assertEqual((change.baseline, change.current, change.n),
                         ((1 + 1 / 2 + 0) / 3, (1 + 1 + 0) / 3, 3))

    def test_small_slices_get_the_sample_size_note(self):
        # Overall (h1 held out): recall@2 s1 1, s2 1/2, s3 0, r1 1, r2 1: sd sqrt(0.2) =
        # 0.4472, margin 1.96 * 0.4472 / sqrt(5) = 0.392, needed (1.96 * 0.4472 / 0.02)^2
        # = 1920.8 -> 1921; mrr@2 (1, 1/2, 0, 1, 1/2: sd 0.4183) needs fewer.  The whole
        # is too small, so its slices are too: said once, no slice named (issue 23).
        z = statistics.NormalDist().inv_cdf(0.975)
        sd = statistics.stdev([1.0, 0.5, 0.0, 1.0, 1.0])
        margin, needed = z * sd / math.sqrt(5), math.ceil((z * sd / 0.02) ** 2)
        self.assertEqual(result_note(self.gate()), "too few queries to see a drop of the "
                         "tolerance: recall@2 is +/-%.3f on 5 queries, about %d needed"
                         % (margin, needed))
        self.assertEqual((round(margin, 3), needed), (0.392, 1921))
        # At 0.45 the whole is enough (margins 0.392 and 0.367), its slices are not:
        # synthetic (s1 1, s2 1/2, s3 0 for both measures: sd 1/2, margin 1.96 * 0.5 /
        # sqrt(3) = 0.566, needed (1.96 * 0.5 / 0.45)^2 = 4.7 -> 5; a tie: mrr@2 by name)
        # needs more than real (mrr@2 1, 1/2: margin 0.490, needed 2.4 -> 3).  The
        # hold-out is never named; tag=eu (s1, r1: 1, 1) has no spread.
        self.assertEqual(result_note(self.gate(max_drop=0.45)), "too few queries to see a "
                         "drop of the tolerance in slice source=synthetic: mrr@2 is +/-0.566 "
                         "on 3 queries, about 5 needed (and in 1 more slice)")

    def test_membership_changes_are_listed(self):
        queries = dict(SLICED_QUERIES, s2={"slices": {"source": ["real"]}})
        result = self.gate(queries=queries)
        self.assertEqual(result.moved, (rag_eval.MembershipChange(
            "s2", ("source=synthetic",), ("source=real",)),))
        report = sliced_report(queries=queries, holdout="split=holdout")
        self.assertRegex(rag_eval.render_text(report, result),
                         r"queries whose slices changed since the baseline \(1\)\n.*\n"
                         r"  s2 +source=synthetic +source=real")
        self.assertEqual(result.to_dict()["per_query"]["moved"],
                         [{"query": "s2", "left": ["source=synthetic"], "joined": ["source=real"]}])

    def test_the_hold_out_is_gated_on_its_means_over_the_same_queries(self):
        # h1 misses g: hold-out mrr (1/2 + 0)/2 = 1/4 -> 0, over the same 2
        # queries (the baseline's record of them matches): compared on the
        # means, as the baseline keeps no held-out value (not revealed).
        run = dict(SLICED_RUN, h1=["x", "y"])
        result = self.gate(run=run, mode="significant")
        change = {c.name: c for c in result.changes}["split=holdout: mrr@2"]
        self.assertEqual((change.status, change.baseline, change.current, change.n),
                         ("regressed", 1 / 4, 0.0, 2))
        self.assertIsNone(change.p_value)               # the tolerance rule
        self.assertEqual(result.query_drops, ())        # its queries are never named
        self.assertIn("compared on the means alone (the means of the same 2 queries): "
                      "split=holdout: mrr@2", " ".join(result.notes))
        moved = dict(SLICED_QUERIES, s3={"slices": {"split": ["holdout"]}})
        result = self.gate(queries=moved)
        self.assertNotIn("s3", result.queries_removed)
        self.assertIn("the hold-out split=holdout changed since the baseline (2 -> 3 queries",
                      " ".join(result.notes))
        self.assertIn("1 query of the baseline is in the hold-out now (not named)",
                      " ".join(result.notes))

    def test_a_baseline_with_another_hold_out_is_refused(self):
        report = sliced_report()
        with self.assertRaisesRegex(rag_eval.EvalError, "saved with the hold-out split=holdout "
                                                        "and this report has none"):
            rag_eval.gate(report, self.base())

    def test_notes_on_slices_the_gate_cannot_check(self):
        base = saved_baseline(self, rag_eval.evaluate(SLICED_QRELS, SLICED_RUN, k=2,
                                                      measures="recall,mrr",
                                                      skip_extra_queries=True))
        result = rag_eval.gate(sliced_report(), base)
        self.assertIn("the baseline holds no slices: only the overall mean is gated",
                      " ".join(result.notes))

    def test_an_edited_slice_mean_is_refused(self):
        self.base()
        path = os.path.join(self.tmp, "base.json")
        with open(path) as handle:
            saved = json.load(handle)
        saved["slices"]["source=real"]["mean"]["mrr@2"] = 0.9
        self.write("edited.json", json.dumps(saved))
        with self.assertRaisesRegex(rag_eval.EvalError, "slices 'source=real': the mean of "
                                                        "mrr@2 \\(0.9\\) is not the mean"):
            rag_eval.load_baseline(os.path.join(self.tmp, "edited.json"))
        del saved["membership"]
        self.write("edited.json", json.dumps(saved))
        with self.assertRaisesRegex(rag_eval.EvalError, "slices and membership come together"):
            rag_eval.load_baseline(os.path.join(self.tmp, "edited.json"))


class SliceOptionsTest(TempDir, unittest.TestCase):
    """The slice options of the command line, refused the one-line way."""

    def test_bad_slice_options(self):
        self.assertBad(extra=["--by", "source"], expect="need query metadata: --queries FILE")
        self.assertBad(extra=["--holdout", "split=holdout"], expect="need query metadata")
        self.assertBad(extra=["--slice-max-drop", "risk=high:0"],
                       expect="--slice-max-drop only applies with --baseline")
        self.assertBad(extra=["--reveal-holdout"],
                       expect="--reveal-holdout only applies with --holdout")
        self.assertBad(extra=["--as-of", "2025-13-01"],
                       expect="--as-of must be a date YYYY-MM-DD, got '2025-13-01'")
        baseline = '{"recall@5": 0.5}'
        for value, expect in (("risk:0", "needs FIELD=VALUE:X"), ("risk=high", "FIELD=VALUE:X"),
                              ("risk=high:1.5", "--slice-max-drop risk=high: max drop must be")):
            self.assertBad(extra=["--slice-max-drop", value], baseline=baseline, expect=expect)
        self.assertBad(extra=["--slice-max-drop", "a=b:0", "--slice-max-drop", "a=b:0.1"],
                       baseline=baseline, expect="--slice-max-drop gives a=b twice")


class SliceCommandLineTest(TempDir, unittest.TestCase):
    """Query metadata from the test set or --queries FILE, on the command line."""

    TESTSET = [
        {"query_id": "q1", "relevant": ["a"], "slices": {"source": "real"}, "tags": ["faq"]},
        {"query_id": "q2", "relevant": {"b": 1}, "slices": {"source": "synthetic"}},
        {"query_id": "q3", "relevant": ["c"], "slices": {"source": "real"},
         "valid_until": "2025-01-01"},
        {"query_id": "q4", "question": "no answer in the corpus", "answerable": False,
         "slices": {"source": "real"}},
    ]
    RUN = {"q1": ["a"], "q2": ["x", "b"], "q3": ["x"], "q4": ["z"]}

    def cli(self, *argv, testset=None):
        return self.report_of(*argv, qrels=("t.jsonl", jsonl(*(testset or self.TESTSET))),
                              run=self.RUN)

    def test_the_test_set_says_what_its_queries_are(self):
        code, out, err = self.cli("--by", "source", "--format", "json", "--metrics", "mrr",
                                  "--k", "2")
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        # real: q1 (mrr 1), q3 (0); q4 has no label: unscored.  synthetic: q2 (1/2).
        self.assertEqual(doc["slices"], {
            "source=real": {"queries": 2, "unscored": ["q4"], "mean": {"mrr@2": (1 + 0) / 2}},
            "source=synthetic": {"queries": 1, "unscored": [], "mean": {"mrr@2": 1 / 2}}})
        self.assertIn("1 query carries a valid_until date", err)
        code, out, err = self.cli("--by", "source", "--as-of", "2025-06-30", "--metrics", "mrr",
                                  "--k", "2", "--format", "json")
        self.assertEqual(json.loads(out)["slices"]["source=real"]["mean"], {"mrr@2": 1.0})
        self.assertIn("1 query expired by 2025-06-30 (valid_until before it), left out of "
                      "every mean: 'q3'", err)

    def test_a_queries_file_replaces_the_test_sets_own(self):
        queries = self.write("queries.jsonl", jsonl({"query_id": "q1", "slices": {"risk": "high"}},
                                                    {"query_id": "q2", "tags": ["pricing"]}))
        code, out, err = self.cli("--queries", queries, "--by", "risk", "--by", "tag",
                                  "--format", "json")
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual(sorted(doc["slices"]), ["risk=high", "tag=pricing"])
        self.assertEqual(doc["inputs"]["queries"]["sha256"],
                         hashlib.sha256(read_text(queries).encode()).hexdigest())
        self.assertIn("that metadata's slices and dates are used, the test set's are not", err)
        plain = self.report_of("--queries", queries, "--by", "risk", qrels={"q1": {"a": 1}},
                               run={"q1": ["a"], "q2": ["b"]})
        self.assertEqual(plain[0], 0, plain[2])     # q2: a member with no label, not extra
        self.assertIn("unscored (no relevant id): q2", plain[1])
        self.assertBad(extra=["--queries", ""], expect="--queries: the file name is empty")
        self.assertBad(extra=["--queries", self.write("bad.jsonl", '{"slices": {}}\n')],
                       expect="a queries line needs")

    def test_evaluate_files_reads_metadata_like_the_command_line(self):
        testset = self.write("t.jsonl", jsonl(*self.TESTSET))
        run = self.input_file(self.RUN, "r.json")
        report = rag_eval.evaluate_files(testset, run, k=2, measures="mrr", by="source")
        self.assertEqual(report.slices["source=synthetic"]["mean"], {"mrr@2": 1 / 2})
        queries = self.write("queries.jsonl", jsonl({"query_id": "q1", "tags": ["faq"]}))
        report = rag_eval.evaluate_files(testset, run, k=2, measures="mrr", queries=queries)
        self.assertEqual(sorted(report.slices), ["tag=faq"])
        self.assertEqual(report.inputs["queries"]["path"], queries)
        report = rag_eval.evaluate_files(testset, run, k=2, measures="mrr",
                                         queries={"q2": {"slices": {"x": ["1"]}}})
        self.assertEqual(report.slices["x=1"]["mean"], {"mrr@2": 1 / 2})

    def test_slices_gate_on_the_command_line(self):
        saved = os.path.join(self.tmp, "b.json")
        code, out, err = self.cli("--metrics", "mrr", "--k", "2", "--save-baseline", saved)
        self.assertEqual(code, 0, err)
        worse = dict(self.RUN, q2=["x", "y"])          # synthetic: mrr 1/2 -> 0
        code, out, err = self.report_of("--metrics", "mrr", "--k", "2", "--baseline", saved,
                                        "--slice-max-drop", "source=real:0",
                                        qrels=("t.jsonl", jsonl(*self.TESTSET)), run=worse)
        self.assertEqual(code, 1, err)
        self.assertIn("FAILED, 2 regressions (undecided: unjudged ids could explain them): mrr@2, source=synthetic: mrr@2", out)
        self.assertIn("max drop 0.02, source=real: 0", out)
        code, out, err = self.report_of("--metrics", "mrr", "--k", "2", "--baseline", saved,
                                        "--slice-max-drop", "source=synthetic:0.5",
                                        "--max-drop", "0.2", qrels=("t.jsonl", jsonl(
                                            *self.TESTSET)), run=worse)
        # Overall (1 + 1/2 + 0)/3 -> (1 + 0 + 0)/3, a drop of 1/6 < 0.2; synthetic 1/2 <= 0.5.
        self.assertEqual(code, 0, out + err)


class HoldOutCommandLineTest(TempDir, unittest.TestCase):
    """No id or per-query value of the hold-out in any byte the command line
    writes: stdout and stderr of every format, -o files, saved baselines."""

    def test_hold_out_bytes_are_nowhere(self):
        hidden = HoldOutTest
        testset = [dict({"query_id": q, "relevant": labels}, **hidden.QUERIES[q])
                   for q, labels in hidden.QRELS.items()]
        for record in testset:
            record["slices"] = {k: v[0] for k, v in record["slices"].items()}
        qrels = self.write("t.jsonl", jsonl(*testset))
        run = self.input_file(hidden.RUN, "r.json")
        other = self.input_file(dict(hidden.RUN, open1=["x", "a"]), "other.json")
        common = ["--holdout", "split=holdout", "--as-of", "2021-01-01", "--k", "10",
                  "--metrics", "mrr,recall,ndcg", "--allow-unlabelled-run"]
        saved = os.path.join(self.tmp, "saved.json")
        outputs = []
        code, out, err = run_cli(qrels, run, *common, "--save-baseline", saved)
        self.assertEqual(code, 0, err)
        outputs += [out, err, read_text(saved)]
        for fmt in ("text", "json", "markdown", "trec"):
            path = os.path.join(self.tmp, "out." + fmt)
            code, out, err = run_cli(qrels, other, *common, "--by", "source", "--by", "split",
                                     "--per-query", "--format", fmt, "-o", path,
                                     "--baseline", saved, "--compare", run,
                                     "--save-baseline", saved, "--accept")
            self.assertIn(code, (0, 1), err)
            outputs += [out, err, read_text(path), read_text(saved)]
            code, out, err = run_cli(qrels, other, *common, "--gate", "significant",
                                     "--baseline", saved, "--format", fmt)
            outputs += [out, err]
        self.assertIn("held out: split=holdout", read_text(os.path.join(self.tmp, "out.text")))
        self.assertIn('"holdout"', read_text(os.path.join(self.tmp, "out.json")))
        for text in outputs:
            for secret in hidden.IDS + hidden.VALUES:
                self.assertNotIn(secret, text)
        code, out, err = run_cli(qrels, run, *common, "--reveal-holdout", "--per-query")
        self.assertIn("hidden-alpha", out)


class TestSetExampleTest(TempDir, unittest.TestCase):
    """examples/testset (README, "Slices and the held-out set"): the overall
    mean passes the gate, the real slice fails it."""

    HERE = os.path.join(HERE, "examples", "testset")

    def path(self, name):
        return os.path.join(self.HERE, name)

    def gate(self, *argv):
        return run_cli(self.path("testset.jsonl"), self.path("run.json"), "--holdout",
                       "split=holdout", "--by", "source", "--meta",
                       "embedding.model=bge-small-en-v1.5", "--baseline", self.path("baseline.json"),
                       *argv)

    def test_the_overall_passes_and_one_slice_fails(self):
        code, out, err = self.gate("--format", "json")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        result = json.loads(out)["gate"]
        overall = {c["measure"]: c["status"] for c in result["changes"] if c["slice"] is None}
        self.assertEqual(overall, {m: "unchanged" for m in ("recall@5", "success@5", "mrr@5",
                                                              "ndcg@5")})
        self.assertEqual({(c["slice"], c["status"]) for c in result["regressions"]},
                         {("source=real", "regressed")})
        # real: 7 scored, 6 of them found at rank 1 before, 4 now (r04, r05 lost).
        real = {c["measure"]: c for c in result["changes"] if c["slice"] == "source=real"}
        self.assertEqual((real["recall@5"]["baseline"], real["recall@5"]["current"]),
                         (6 / 7, 4 / 7))
        self.assertEqual(result["meta_changes"], [{"key": "embedding.model",
                                                   "baseline": "e5-base-v2",
                                                   "current": "bge-small-en-v1.5"}])

    def test_the_bundled_baseline_is_what_the_tool_saves(self):
        saved = os.path.join(self.tmp, "baseline.json")
        code, out, err = run_cli(self.path("testset.jsonl"), self.path("run-baseline.json"),
                                 "--holdout", "split=holdout", "--meta",
                                 "embedding.model=e5-base-v2", "--save-baseline", saved)
        self.assertEqual(code, 0, err)
        with open(saved) as handle:
            fresh = json.load(handle)
        with open(self.path("baseline.json")) as handle:
            bundled = json.load(handle)
        for doc in (fresh, bundled):
            for info in doc["inputs"].values():
                del info["path"]
        self.assertEqual(fresh, bundled)
        for hidden in ("h01", "h02", "h03"):
            self.assertNotIn(hidden, read_text(self.path("baseline.json")))

    def test_the_readme_shows_it(self):
        code, out, err = self.gate()
        section = read_doc("04-test-sets.md")
        shown = [line.replace(HERE + os.sep, "") for line in out.splitlines()
                 if "REGRESSED" in line or line.startswith("gate vs") or "  real " in line
                 or "0.8333    1.0000" in line]
        self.assertEqual(len(shown), 7)
        for line in shown:
            self.assertIn(line, section)
