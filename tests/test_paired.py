"""One paired comparison behind every verdict (_paired_view): the tolerance
gate, the significant gate, --compare, slices, judge scores, the hold-out,
reports read back and baselines of means alone each compare a measure over
the queries both sides scored.  For each: failing queries dropped from the
test set (must fail), new queries added with the old ones unchanged (must
pass, naming them), a query moved between slices, and the hold-out; then a
property test against a ten-line reference over the paired arrays."""

import io
import json
import os
import random
import unittest

import rag_eval
from tests.support import TempDir, run_cli, saved_baseline

# The case of the issue: 30 questions, 24 answered at rank 1 (mrr 1), 6 never
# (mrr 0): the baseline's mean is 24/30 = 0.8.  The new chunker drops the 6
# failing ones from the test set and answers 4 of the 24 at rank 2 only:
# its mean over the 24 left is (20 + 4/2)/24 = 0.9167, above 0.8 ("improved"
# against the unpaired mean), but on the 24 both scored it fell from 1.0.
GOOD = ["q%02d" % i for i in range(24)]
FAILING = ["f%d" % i for i in range(6)]
NEW = ["n%d" % i for i in range(5)]


def qrels(queries):
    return {q: {"d": 1} for q in queries}


def run(queries, second=()):
    """Each query finds d at rank 1, at rank 2 for ``second``, never for FAILING."""
    return {q: (["x"] if q in FAILING else ["x", "d"] if q in second else ["d"]) for q in queries}


def evaluate(test_set, second=(), **options):
    return rag_eval.evaluate(qrels(test_set), run(test_set, second), k=2, measures="mrr",
                             **options)


SECOND = GOOD[:4]
DROPPED = dict(test_set=GOOD, second=SECOND)          # the failing ones dropped
ADDED = dict(test_set=GOOD + FAILING + NEW)           # new ones, the old unchanged


class PairedViewTest(unittest.TestCase):
    """The view alone, on the sides each verdict path builds."""

    view = staticmethod(rag_eval._paired_view)
    Side = rag_eval._Side
    M = "mrr@2"

    def values(self, **by_query):
        return {q: {self.M: v} for q, v in by_query.items()}

    def test_both_sides_per_query(self):
        then = self.Side({self.M: 0.5}, self.values(a=1.0, b=0.0))
        now = self.Side({self.M: 0.75}, self.values(a=0.5, c=1.0))
        paired = self.view(self.M, then, now)
        self.assertEqual(paired[:7], (1.0, 0.5, 1, ("a",), ("b",), ("c",), None))

    def test_no_query_both_scored_is_missing_unless_the_run_decides_the_population(self):
        then = self.Side({self.M: 0.5}, self.values(a=1.0))
        now = self.Side({self.M: 1.0}, self.values(b=1.0))
        self.assertEqual(self.view(self.M, then, now).missing, "no query that both sides scored")
        loose = self.view(self.M, then, now, fixed=False)
        self.assertEqual((loose.missing, loose.current, loose.n), (None, None, 0))

    def test_means_against_a_record(self):
        now = self.Side({self.M: 0.5}, self.values(a=1.0, b=0.0))
        same = self.Side({self.M: 0.4}, sets=rag_eval._query_set(["a", "b"]))
        other = self.Side({self.M: 0.4}, sets=rag_eval._query_set(["a", "c"]))
        paired = self.view(self.M, same, now)
        self.assertEqual((paired.baseline, paired.current, paired.n, paired.missing),
                         (0.4, 0.5, 2, None))
        self.assertEqual(paired.means, "the means of the same 2 queries")
        self.assertTrue(self.view(self.M, other, now).missing.startswith("test set changed"))
        # The other way round: a report of means alone against per-query values.
        loaded = self.Side({self.M: 0.5}, sets=rag_eval._query_set(["a", "c"]))
        self.assertEqual(self.view(self.M, now, loaded).missing, "test set changed; the report "
                         "holds means only: write it with --per-query")

    def test_a_bare_means_file_is_compared_on_its_means_with_a_note(self):
        bare = self.Side({self.M: 0.4})
        now = self.Side({self.M: 0.5}, self.values(a=1.0, b=0.0))
        paired = self.view(self.M, bare, now)
        self.assertEqual((paired.baseline, paired.current, paired.n, paired.missing),
                         (0.4, 0.5, None, None))
        self.assertIn("cannot be seen", paired.means)
        # ... unless the report itself says a query lost its value.
        lost = now._replace(unscored={self.M: ("c",)})
        self.assertIn("1 query has no value now", self.view(self.M, bare, lost).missing)

    def test_a_measure_not_in_the_report(self):
        then = self.Side({self.M: 0.5}, self.values(a=1.0))
        self.assertEqual(self.view(self.M, then, self.Side({}, {"a": {}})).missing,
                         "not in the report")


class EveryVerdictPathTest(TempDir, unittest.TestCase):
    """The case of the issue and its mirror on every path to a verdict."""

    def setUp(self):
        super().setUp()
        self.before = evaluate(GOOD + FAILING)
        self.path = os.path.join(self.tmp, "base.json")
        rag_eval.save_baseline(self.before, self.path)
        self.baseline = rag_eval.load_baseline(self.path)

    def test_the_unpaired_means_would_have_passed(self):
        # The arithmetic of the case: what the old default gate compared.
        self.assertEqual(self.before.mean["mrr@2"], 24 / 30)
        self.assertAlmostEqual(evaluate(**DROPPED).mean["mrr@2"], 22 / 24, places=15)

    def test_tolerance_and_significant_gates(self):
        for mode in ("tolerance", "significant"):
            with self.subTest(mode=mode):
                dropped = rag_eval.gate(evaluate(**DROPPED), self.baseline, mode=mode)
                self.assertFalse(dropped.passed)
                [change] = dropped.changes
                self.assertEqual((change.status, change.baseline, change.n, change.removed),
                                 ("regressed", 1.0, 24, 6))
                self.assertAlmostEqual(change.current, 22 / 24, places=15)
                self.assertEqual(dropped.queries_removed, tuple(FAILING))
                added = rag_eval.gate(evaluate(**ADDED), self.baseline, mode=mode)
                self.assertTrue(added.passed, added.notes)
                self.assertEqual((added.changes[0].status, added.changes[0].n,
                                  added.changes[0].added), ("unchanged", 30, 5))
                self.assertEqual(added.queries_added, tuple(NEW))

    def test_the_command_line(self):
        self.write("q.json", json.dumps(qrels(GOOD)))
        self.write("r.json", json.dumps(run(GOOD, SECOND)))
        code, out, err = run_cli(os.path.join(self.tmp, "q.json"), os.path.join(self.tmp, "r.json"),
                                 "--metrics", "mrr", "--k", "2", "--baseline", self.path)
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        self.assertRegex(out, r"mrr@2 +1\.0000 +0\.9167 +-0\.0833 +24 +REGRESSED")
        self.assertIn("6 queries the baseline scored are not scored now (removed): 'f0', 'f1', "
                      "'f2', 'f3', 'f4', ... (1 more)", out)
        self.write("q2.json", json.dumps(qrels(GOOD + FAILING + NEW)))
        self.write("r2.json", json.dumps(run(GOOD + FAILING + NEW)))
        argv = (os.path.join(self.tmp, "q2.json"), os.path.join(self.tmp, "r2.json"),
                "--metrics", "mrr", "--k", "2", "--baseline", self.path)
        code, out, err = run_cli(*argv)
        self.assertEqual(code, rag_eval.EXIT_OK, err)
        self.assertIn("5 new queries (added): 'n0', 'n1', 'n2', 'n3', 'n4'", out)
        # --fail-on-removed fails on a removed query, not on added ones.
        self.assertEqual(run_cli(*argv, "--fail-on-removed")[0], rag_eval.EXIT_OK)
        self.write("q3.json", json.dumps(qrels(GOOD + FAILING[1:])))
        self.write("r3.json", json.dumps(run(GOOD + FAILING[1:])))
        code, out, err = run_cli(os.path.join(self.tmp, "q3.json"), os.path.join(self.tmp, "r3.json"),
                                 "--metrics", "mrr", "--k", "2", "--baseline", self.path,
                                 "--fail-on-removed", "--format", "json")
        self.assertEqual(code, rag_eval.EXIT_REGRESSION, err)
        doc = json.loads(out)["gate"]
        self.assertEqual((doc["removed_failing"], doc["per_query"]["queries_removed"]),
                         (1, ["f0"]))
        self.assertEqual([c["status"] for c in doc["changes"]], ["unchanged"])
        self.assertEqual(run_cli("q.json", "r.json", "--fail-on-removed")[0], rag_eval.EXIT_ERROR)

    def test_no_shared_query_still_names_the_changed_queries(self):
        # Found by the gate fuzzer: with no query both sides scored, the JSON's
        # gate.per_query was null (as for a baseline of means alone), so
        # queries_added and queries_removed were not written.
        result = rag_eval.gate(evaluate(NEW), self.baseline)
        self.assertEqual(result.changes[0].status, "missing")
        block = result.to_dict()["per_query"]
        self.assertIsNotNone(block)
        self.assertEqual((block["queries_added"], block["queries_removed"], block["regressions"]),
                         (NEW, sorted(GOOD + FAILING), []))
        self.assertIsNone(rag_eval.gate(evaluate(NEW), {"mrr@2": 0.8}).query_drops)

    def test_compare(self):
        comparison = rag_eval.compare(evaluate(**DROPPED), self.before)
        row = comparison.measures["mrr@2"]
        self.assertEqual((row.n, row.reference_mean, row.losses), (24, 1.0, 4))
        self.assertAlmostEqual(row.delta, -4 / 2 / 24, places=15)
        self.assertEqual(comparison.only_in_reference, tuple(FAILING))
        added = rag_eval.compare(evaluate(**ADDED), self.before).measures["mrr@2"]
        self.assertEqual((added.n, added.delta), (30, 0.0))

    def slices(self, queries):
        """GOOD in slice a (even) and b (odd); FAILING in b; NEW in c."""
        return {q: {"slices": {"s": ["a" if q in GOOD and int(q[1:]) % 2 == 0 else
                                     "c" if q in NEW else "b"]}} for q in queries}

    def test_slices_and_a_moved_query(self):
        before = evaluate(GOOD + FAILING, queries=self.slices(GOOD + FAILING))
        path = os.path.join(self.tmp, "sliced.json")
        rag_eval.save_baseline(before, path)
        baseline = rag_eval.load_baseline(path)
        # s=b held the 6 failing (mrr 0) and the 12 odd good ones: 12/18 before;
        # the failing dropped, and q01 (odd, in b) at rank 2: 11.5/12 on b's 12
        # left, against 1.0 on those 12 paired.
        now = evaluate(GOOD, ["q01"], queries=self.slices(GOOD))
        result = rag_eval.gate(now, baseline)
        rows = {c.name: c for c in result.changes}
        self.assertEqual((rows["s=b: mrr@2"].status, rows["s=b: mrr@2"].n,
                          rows["s=b: mrr@2"].removed), ("regressed", 12, 6))
        self.assertAlmostEqual(rows["s=b: mrr@2"].current, 11.5 / 12, places=15)
        self.assertEqual(rows["s=a: mrr@2"].status, "unchanged")
        # q00 moves from a to b: each slice is paired on its own queries (a on
        # the 11 left, b on the 18 shared plus q00 added there), the move listed.
        moved = self.slices(GOOD + FAILING)
        moved["q00"] = {"slices": {"s": ["b"]}}
        result = rag_eval.gate(evaluate(GOOD + FAILING, queries=moved), baseline)
        self.assertTrue(result.passed, result.notes)
        rows = {c.name: c for c in result.changes}
        self.assertEqual((rows["s=a: mrr@2"].n, rows["s=a: mrr@2"].removed), (11, 1))
        self.assertEqual((rows["s=b: mrr@2"].n, rows["s=b: mrr@2"].added), (18, 1))
        self.assertEqual(result.moved, (rag_eval.MembershipChange("q00", ("s=a",), ("s=b",)),))
        # A slice whose queries are all gone: MISSING.
        gone = {q: {"slices": {"s": ["a"]}} for q in GOOD}
        rows = {c.name: c for c in rag_eval.gate(evaluate(GOOD, queries=gone),
                                                 baseline).changes}
        self.assertEqual((rows["s=b: mrr@2"].status, rows["s=b: mrr@2"].reason),
                         ("missing", "no query that both sides scored"))

    def test_judge_scores(self):
        def scores(rows):
            return rag_eval.evaluate_scores(rag_eval.load_scores(io.StringIO("".join(
                json.dumps({"query_id": q, "f": v}) + "\n" for q, v in rows))))
        then = scores([(q, 1.0) for q in GOOD] + [(q, 0.0) for q in FAILING])
        path = os.path.join(self.tmp, "judge.json")
        rag_eval.save_baseline(then, path)
        baseline = rag_eval.load_baseline(path)
        dropped = rag_eval.gate(scores([(q, 0.5 if q in SECOND else 1.0) for q in GOOD]),
                                baseline)
        self.assertFalse(dropped.passed)
        self.assertEqual((dropped.changes[0].n, dropped.changes[0].removed), (24, 6))
        added = rag_eval.gate(scores([(q, 1.0) for q in GOOD] + [(q, 0.0) for q in FAILING]
                                     + [(q, 0.2) for q in NEW]), baseline)
        self.assertTrue(added.passed, added.notes)
        self.assertEqual(added.queries_added, tuple(NEW))

    def test_the_hold_out(self):
        def held(queries):
            return {q: {"slices": {"split": ["held" if q in FAILING or q in NEW else "open"]}}
                    for q in queries}
        before = evaluate(GOOD + FAILING, queries=held(GOOD + FAILING), holdout="split=held")
        for reveal in (False, True):
            path = os.path.join(self.tmp, "held%d.json" % reveal)
            rag_eval.save_baseline(before._replace(holdout=before.holdout._replace(
                revealed=reveal)), path)
            baseline = rag_eval.load_baseline(path)
            with self.subTest(revealed=reveal):
                # f0 (mrr 0) leaves the hold-out: its mean would rise 0 -> 0.
                # Its baseline's record differs: missing, unless its per-query
                # values were revealed and saved: then paired on f1..f5.
                now = evaluate(GOOD + FAILING[1:], queries=held(GOOD + FAILING[1:]),
                               holdout="split=held")
                row = {c.name: c for c in rag_eval.gate(now, baseline).changes}[
                    "split=held: mrr@2"]
                if reveal:
                    self.assertEqual((row.status, row.n, row.removed), ("unchanged", 5, 1))
                else:
                    self.assertEqual(row.status, "missing")
                    self.assertIn("--reveal-holdout", row.reason)
                # A new held-out query: the same rule.
                grown = evaluate(GOOD + FAILING + NEW[:1], queries=held(GOOD + FAILING + NEW[:1]),
                                 holdout="split=held")
                result = rag_eval.gate(grown, baseline)
                row = {c.name: c for c in result.changes}["split=held: mrr@2"]
                self.assertEqual(row.status, "unchanged" if reveal else "missing")
                text = rag_eval.render_text(grown, result)
                for query in FAILING + NEW:
                    self.assertNotRegex(text, r"\b%s\b" % query)

    def test_reports_read_back(self):
        for per_query in (True, False):
            for case, passes in ((DROPPED, False), (ADDED, per_query)):
                with self.subTest(per_query=per_query, added=case is ADDED):
                    report = evaluate(**case)
                    loaded = rag_eval.load_report(io.StringIO(rag_eval.render_json(
                        report, per_query=per_query)))
                    result = rag_eval.gate(loaded, self.baseline)
                    self.assertEqual(result.passed, passes)
                    if per_query:
                        self.assertEqual(result.changes,
                                         rag_eval.gate(report, self.baseline).changes)
                    else:   # a changed test set, which means alone cannot tell
                        self.assertEqual(result.changes[0].reason, "test set changed; the "
                                         "report holds means only: write it with --per-query")

    def test_a_baseline_of_means_alone(self):
        means = rag_eval.load_report(io.StringIO(rag_eval.render_json(self.before)))
        path = os.path.join(self.tmp, "means.json")
        rag_eval.save_baseline(means, path)
        baseline = rag_eval.load_baseline(path)
        self.assertIsNone(baseline.per_query)
        self.assertTrue(rag_eval.gate(self.before, baseline).passed)
        for case in (DROPPED, ADDED):
            result = rag_eval.gate(evaluate(**case), baseline)
            self.assertFalse(result.passed)
            self.assertEqual(result.changes[0].reason, "test set changed; the baseline holds "
                             "means only: save it again with per-query values")
        # A bare file of means records nothing: compared on its means, with a note.
        bare = rag_eval.gate(evaluate(**DROPPED), {"mrr@2": 0.8})
        self.assertTrue(bare.passed)
        self.assertIn("a changed test set cannot be seen", " ".join(bare.notes))


def split(**queries):
    """Query metadata: each query's split (open or holdout)."""
    return {q: {"slices": {"split": [where]}} for q, where in queries.items()}


class FoundByTheFuzzerTest(TempDir, unittest.TestCase):
    """Found by the fuzzer's gate cases (FuzzTest.test_gate_paired), each
    pinned.  --fail-on-removed counts a query the baseline scored that has no
    value now in the same part of the test set (the open set, the hold-out):
    one moved across the hold-out's boundary counts, since no verdict pairs
    it any more."""

    def test_a_relative_tolerance_is_of_the_rows_baseline(self):
        # --max-drop 50% is taken of the baseline's mean over all its queries
        # (0.6), not of the row's paired baseline (0.2): q1's fall 0.2 -> 0.0,
        # 100% of the row's baseline, is "dropped within tolerance".
        before = rag_eval.evaluate({"q1": {"d": 1}, "q2": {"d": 1}},
                                   {"q1": ["a", "b", "c", "e", "d"], "q2": ["d"]}, k=5,
                                   measures="mrr")
        baseline = rag_eval.Baseline(before.mean, per_query=before.per_query)
        now = rag_eval.evaluate({"q1": {"d": 1, "z": 0}}, {"q1": ["z"]}, k=5, measures="mrr")
        [row] = rag_eval.gate(now, baseline, max_drop="50%").changes
        self.assertEqual((row.baseline, row.current, row.n), (0.2, 0.0, 1))
        self.assertEqual(row.status, "regressed")

    def test_a_report_read_back_never_names_a_query_held_out_now(self):
        # q2 moves into the hold-out.  The run's gate names nothing; its JSON
        # report (--per-query, no --reveal-holdout) read back and gated names
        # q2 as removed and --fail-on-removed counts it.
        qrels = {q: {"d": 1} for q in ("q1", "q2", "h")}
        run = {q: ["d"] for q in qrels}
        before = rag_eval.evaluate(qrels, run, k=1, measures="mrr", holdout="split=holdout",
                                   queries=split(q1="open", q2="open", h="holdout"))
        baseline = saved_baseline(self, before)
        now = rag_eval.evaluate(qrels, run, k=1, measures="mrr", holdout="split=holdout",
                                queries=split(q1="open", q2="holdout", h="holdout"))
        self.assertEqual(rag_eval.gate(now, baseline, fail_on_removed=True).queries_removed, ())
        live = rag_eval.gate(now, baseline, fail_on_removed=True)
        loaded = rag_eval.load_report(io.StringIO(rag_eval.render_json(now, per_query=True)))
        result = rag_eval.gate(loaded, baseline, fail_on_removed=True)
        self.assertEqual((result.queries_removed, result.removed_failing),
                         ((), live.removed_failing))
        self.assertEqual(live.removed_failing, 1)       # it crossed into the hold-out
        self.assertNotIn("q2", " ".join(result.notes))
        self.assertIn("1 query the baseline scored is not in the report's overall now "
                      "(removed, or moved into the hold-out", " ".join(result.notes))

    def test_fail_on_removed_a_query_that_left_a_revealed_hold_out(self):
        # h1 leaves a revealed hold-out for the open set, still scored: it is
        # in no row the baseline had it in (the hold-out's lost it, the open
        # set's gained it), so a frozen test set fails on it.
        qrels = {q: {"d": 1} for q in ("q1", "h1", "h2")}
        run = {q: ["d"] for q in qrels}
        before = rag_eval.evaluate(qrels, run, k=1, measures="mrr", holdout="split=holdout",
                                   reveal_holdout=True,
                                   queries=split(q1="open", h1="holdout", h2="holdout"))
        now = rag_eval.evaluate(qrels, run, k=1, measures="mrr", holdout="split=holdout",
                                queries=split(q1="open", h1="open", h2="holdout"))
        result = rag_eval.gate(now, saved_baseline(self, before), fail_on_removed=True)
        self.assertEqual(result.removed_failing, 1, result.notes)

    def test_fail_on_removed_a_query_moved_into_the_hold_out_without_a_value(self):
        # q2 moves into the hold-out and loses its relevant label: it has no
        # value now, as if dropped (which fails), but the gate passes.
        run = {q: ["d"] for q in ("q1", "q2", "h")}
        before = rag_eval.evaluate({q: {"d": 1} for q in ("q1", "q2", "h")}, run, k=1,
                                   measures="mrr", holdout="split=holdout",
                                   queries=split(q1="open", q2="open", h="holdout"))
        now = rag_eval.evaluate({"q1": {"d": 1}, "q2": {"d": 0}, "h": {"d": 1}}, run, k=1,
                                measures="mrr", holdout="split=holdout",
                                queries=split(q1="open", q2="holdout", h="holdout"))
        result = rag_eval.gate(now, saved_baseline(self, before), fail_on_removed=True)
        self.assertEqual(result.removed_failing, 1, result.notes)

    def test_a_slice_whose_queries_lost_a_judge_score(self):
        # q2, alone in src=b, loses its f score (it keeps g): the overall row
        # counts it removed; the src=b row says "not in the report", though
        # the report scores f, and removed 0.
        def scores(f):
            rows = [{"query_id": "q1", "f": 0.5, "g": 0.5}, {"query_id": "q2", "f": f, "g": 0.5}]
            return rag_eval.evaluate_scores(rag_eval.load_scores(io.StringIO("".join(
                json.dumps(row) + "\n" for row in rows)), allow_missing=True),
                queries={"q1": {"slices": {"src": ["a"]}}, "q2": {"slices": {"src": ["b"]}}},
                allow_missing=True)
        rows = {c.name: c for c in rag_eval.gate(scores(None), saved_baseline(
            self, scores(0.9))).changes}
        self.assertEqual(rows["score(field=f)"].removed, 1)
        row = rows["src=b: score(field=f)"]
        self.assertEqual((row.status, row.reason, row.n, row.removed),
                         ("missing", "no query that both sides scored", 0, 1))


class PairedReferenceTest(unittest.TestCase):
    """For random baselines and runs, the gate's verdict is the verdict of a
    ten-line reference over the paired arrays."""

    @staticmethod
    def reference(then, now, allowed):
        """then, now: {query: value}; the verdict and the two paired means."""
        both = sorted(set(then) & set(now))
        if not both:
            return False, None, None
        before = sum(then[q] for q in both) / len(both)
        after = sum(now[q] for q in both) / len(both)
        return before - after <= allowed + 1e-9, before, after

    def test_random_cases(self):
        rng = random.Random(22)
        pool = ["q%d" % i for i in range(12)]
        for case in range(300):
            then_queries = rng.sample(pool, rng.randint(1, 12))
            now_queries = rng.sample(pool, rng.randint(1, 12))
            ranks = {q: rng.randint(1, 4) for q in pool}
            moved = {q: rng.randint(1, 4) for q in pool}

            def ranked(queries, at):
                return {q: ["x%d" % i for i in range(at[q] - 1)] + ["d"] for q in queries}
            before = rag_eval.evaluate(qrels(then_queries), ranked(then_queries, ranks), k=3,
                                       measures="mrr")
            after = rag_eval.evaluate(qrels(now_queries), ranked(now_queries, moved), k=3,
                                      measures="mrr")
            baseline = rag_eval.Baseline(before.mean, per_query=before.per_query)
            allowed = rng.choice([0.0, 0.02, 0.1])
            with self.subTest(case=case):
                result = rag_eval.gate(after, baseline, max_drop=allowed)
                passed, then_mean, now_mean = self.reference(
                    {q: v["mrr@3"] for q, v in before.per_query.items()},
                    {q: v["mrr@3"] for q, v in after.per_query.items()}, allowed)
                self.assertEqual(result.passed, passed)
                if then_mean is not None:
                    self.assertAlmostEqual(result.changes[0].baseline, then_mean, places=12)
                    self.assertAlmostEqual(result.changes[0].current, now_mean, places=12)


if __name__ == "__main__":
    unittest.main()


class FoundByReviewTest(TempDir, unittest.TestCase):
    """Paths a review of the paired gate found open, each pinned."""

    QRELS = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}, "q4": {"d4": 1},
             "h1": {"d5": 1}, "h2": {"d6": 1}}
    RUN = {"q1": ["d1"], "q2": ["d2"], "q3": ["d3"], "q4": ["x", "d4"], "h1": ["d5"],
           "h2": ["d6"]}
    META = {"q1": ("real", "dev"), "q2": ("real", "dev"), "q3": ("syn", "dev"),
            "q4": ("syn", "dev"), "h1": ("real", "hold"), "h2": ("syn", "hold")}

    def report(self, run=None, meta=None, **options):
        meta = meta or self.META
        queries = {q: {"slices": {"src": [s], "split": [p]}} for q, (s, p) in meta.items()}
        return rag_eval.evaluate(self.QRELS, run or self.RUN, k=2, measures="recall,mrr",
                                 queries=queries, holdout="split=hold", **options)

    def saved(self, report, name="b.json", edit=None):
        doc = rag_eval.baseline_dict(report)
        if edit:
            edit(doc)
        return rag_eval.load_baseline(self.write(name, json.dumps(doc)))

    def test_a_query_moved_into_the_hold_out_counts_as_removed(self):
        # q4 falls (mrr 1/2 -> 0) and moves into the hold-out: no row pairs it
        # (the overall lost it, the revealed hold-out gained it), so the frozen
        # test set must fail.
        baseline = self.saved(self.report(reveal_holdout=True))
        moved = dict(self.META, q4=("syn", "hold"))
        now = self.report(run=dict(self.RUN, q4=["x", "y"]), meta=moved)
        self.assertTrue(rag_eval.gate(now, baseline).passed)
        frozen = rag_eval.gate(now, baseline, fail_on_removed=True)
        self.assertFalse(frozen.passed)
        self.assertEqual(frozen.removed_failing, 1)

    def test_fail_on_removed_fails_when_removals_cannot_be_told(self):
        report = rag_eval.evaluate(self.QRELS, self.RUN, k=2, measures="mrr")
        result = rag_eval.gate(report, {"mrr@2": 0.5}, fail_on_removed=True)
        self.assertFalse(result.passed)
        self.assertIn("a removed query cannot be told", " ".join(result.notes))
        self.assertTrue(rag_eval.gate(report, {"mrr@2": 0.5}).passed)

    def test_a_set_level_measure_of_an_older_baseline_is_never_compared_blind(self):
        # u1, the unanswerable query the system got wrong, leaves the test set:
        # abstention_f1 would rise.  A version 1 baseline records no query set
        # for it, though it holds per-query values: missing, not "improved".
        qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "u1": {}, "u2": {}}
        meta = {q: {"answerable": not q.startswith("u")} for q in qrels}
        run = {"q1": ["d1"], "q2": ["d2"], "u1": ["x"], "u2": []}
        before = rag_eval.evaluate(qrels, run, k=2, measures="recall,abstention_f1",
                                   queries=meta)

        def v1(doc):
            doc["format_version"] = 1
            del doc["query_sets"]
        baseline = self.saved(before, edit=v1)
        gone = {q: v for q, v in qrels.items() if q != "u1"}
        now = rag_eval.evaluate(gone, {q: r for q, r in run.items() if q != "u1"}, k=2,
                                measures="recall,abstention_f1",
                                queries={q: m for q, m in meta.items() if q != "u1"})
        rows = {c.measure: c for c in rag_eval.gate(now, baseline).changes}
        self.assertEqual(rows["abstention_f1"].status, "missing")
        self.assertIn("records no query set for it", rows["abstention_f1"].reason)
        # A version 2 baseline records it: the changed set says so.
        rows = {c.measure: c for c in rag_eval.gate(now, self.saved(before)).changes}
        self.assertEqual((rows["abstention_f1"].status, rows["abstention_f1"].reason),
                         ("missing", "test set changed; a set-level value, compared on its "
                                     "means, which are over other queries now"))

    def test_a_baseline_that_records_nothing_is_never_written_or_read_as_version_2(self):
        old = json.loads(rag_eval.render_json(self.report()))
        del old["query_sets"]          # a JSON report of an older rag_eval
        loaded = rag_eval.Report.from_dict(old)
        with self.assertRaisesRegex(rag_eval.EvalError, "records no query set"):
            rag_eval.baseline_dict(loaded._replace(slices=None, by=(), holdout=None))

        def bare(doc):
            del doc["per_query"], doc["query_sets"]
        with self.assertRaisesRegex(rag_eval.EvalError, "a version 2 baseline holds per-query "
                                                        "values or a record of its queries"):
            self.saved(self.report(), edit=bare)

    def test_the_hold_out_records_no_subset_of_its_queries(self):
        # A judge-null-like subset: h2 unanswerable, so abstained is over h2 alone.
        # Its record keeps the count, never a hash of ["h2"].
        qrels = dict(self.QRELS, h2={}, u1={})
        meta = {q: {"slices": {"split": ["hold" if q.startswith("h") else "dev"]},
                    "answerable": q not in ("h2", "u1")} for q in qrels}
        report = rag_eval.evaluate(qrels, dict(self.RUN, u1=[]), k=2,
                                   measures="recall,abstained",
                                   queries=meta, holdout="split=hold")
        held = json.loads(rag_eval.render_json(report))["query_sets"]["split=hold"]
        text = json.dumps(held)
        self.assertNotIn(rag_eval._query_set(["h2"])["sha256"], text)
        self.assertEqual(held["measures"], {"abstained": {"queries": 1},
                                             "recall@2": {"queries": 1}})

    def test_a_slice_emptied_against_means_alone_is_missing_not_an_error(self):
        def means_only(doc):
            del doc["per_query"]
        baseline = self.saved(self.report(), edit=means_only)
        moved = dict(self.META, q1=("syn", "dev"), q2=("syn", "dev"))   # src=real: h1 only
        rows = {c.name: c for c in rag_eval.gate(self.report(meta=moved), baseline).changes}
        self.assertEqual(rows["src=real: mrr@2"].status, "missing")
        # A loaded report pairs by its membership; against means alone, a slice
        # the JSON shows no mean for is missing too (found as a KeyError).
        loaded = rag_eval.load_report(io.StringIO(rag_eval.render_json(
            self.report(meta=moved), per_query=True)))
        rows = {c.name: c for c in rag_eval.gate(loaded, baseline).changes}
        self.assertEqual(rows["src=real: mrr@2"].status, "missing")
