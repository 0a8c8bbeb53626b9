"""--format html and _repr_html_: a self-contained, well-formed page (or
fragment) whose charts and tables hold the library's numbers.
"""

import html
import html.parser
import json
import math
import os
import random
import re
import unittest

import rag_eval
from tests.support import run_cli, TempDir, example, EXAMPLE_FILES
from tests import test_measures


class _HtmlChecker(html.parser.HTMLParser):
    """Parses a page or fragment: every opened non-void tag closes, in order;
    collects each <svg>'s attributes and <title>, and the text of each
    <title> and <figcaption>."""
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
            "source", "track", "wbr"}

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.svgs, self.titles, self.captions = [], [], [], [], []
        self.tags = []
        self._text = None
        self.feed(text)
        self.close()
        if self.stack:
            self.errors.append("never closed: %s" % self.stack)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "svg":
            self.svgs.append(dict(attrs))
        elif tag == "title" and self.stack and self.stack[-1] == "svg":
            self.svgs[-1]["first title"] = True
        if tag in ("title", "figcaption"):
            self._text = []
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes %s" % (tag, self.stack[-1:]))
            return
        self.stack.pop()
        if tag in ("title", "figcaption"):
            (self.titles if tag == "title" else self.captions).append("".join(self._text))
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


# External references and script a self-contained page never holds.
_NOT_IN_HTML = ("<script", "http:", "https:", "//", "url(", "@import", "<link", "<img", " src=",
                "javascript:", "<iframe", "<object")


class HtmlReportTest(TempDir, unittest.TestCase):
    """--format html: one self-contained page (no script, no external reference,
    every string escaped), well-formed, the same bytes twice; its charts (bars
    with the baseline and the tolerance band, the forest plot of paired deltas
    per measure and slice, the per-query waterfall, judged@k) hold the
    library's numbers."""

    def assertPage(self, page):
        """Well-formed, self-contained, every <svg> an image with a title; the parse."""
        self.assertTrue(page.startswith("<!DOCTYPE html>\n"), page[:40])
        parsed = _HtmlChecker(page)
        self.assertEqual(parsed.errors, [])
        for needle in _NOT_IN_HTML:
            self.assertNotIn(needle, page.lower())
        # Every & starts an entity: nothing reached the page unescaped.
        self.assertEqual(re.findall(r"&(?!(?:amp|lt|gt|quot|#x27);)", page), [])
        for svg in parsed.svgs:
            self.assertEqual(svg.get("role"), "img")
            self.assertTrue(svg.get("first title"), svg)
        return parsed

    def example_page(self, *argv):
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", example("baseline.json"),
                                 "--format", "html", *argv)
        self.assertEqual(code, 1, err)
        return out

    def test_bundled_example(self):
        page = self.example_page()
        parsed = self.assertPage(page)
        self.assertIn('<p class="verdict fail">gate vs %s (max drop 0.02): FAILED, 2 regressions '
                      '(undecided: unjudged ids could explain them): mrr@5, recall@5</p>'
                      % html.escape(example("baseline.json")), page)
        self.assertIn("<title>rag_eval report: gate FAILED</title>", page)
        # The means chart: recall@5 = 2/3 against its baseline 0.70, allowed 0.02.
        self.assertIn("recall@5: mean 0.6666666666666666; baseline 0.7; allowed drop 0.02; "
                      "REGRESSED", page)
        self.assertIn("current mean of each measure against the baseline", parsed.titles)
        self.assertIn("judged@k below 1", parsed.titles)
        self.assertIn("mrr@5: judged@k 0.3333333333333333", parsed.titles)
        # A means-only baseline: no paired deltas, said in words.
        self.assertIn("No per-query baseline values, so no paired deltas to draw: the baseline "
                      "holds means only.", page)
        self.assertFalse([t for t in parsed.titles if t.startswith("paired deltas with 95%")])
        # The tables are the text renderer's, verdicts in its words.
        self.assertIn("<td>REGRESSED (undecided: 10 unjudged ids could explain it; label them: "
                      "--to-label FILE)</td>", page)
        self.assertIn('<td>mean</td><td class="num">0.6667</td>', page)
        self.assertEqual(page, self.example_page())

    def test_file_and_without_gate(self):
        path = os.path.join(self.tmp, "report.html")
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "html", "-o", path)
        self.assertEqual((code, out), (0, ""), err)
        with open(path, encoding="utf-8") as handle:
            page = handle.read()
        parsed = self.assertPage(page)
        self.assertNotIn('class="verdict', page)
        self.assertIn("current mean of each measure", parsed.titles)
        self.assertIn("recall@5: mean 0.6666666666666666", parsed.titles)
        self.assertEqual(len(parsed.svgs), 1)

    # Six queries, recall@1, one relevant id each.  Baseline run: r1-r3 found,
    # s1 found, s2 and s3 not.  Now: r1 found, r2 and r3 not (an unlabelled id
    # at rank 1), s1-s3 found.  Per query (now - baseline): r2 -1, r3 -1,
    # s2 +1, s3 +1, r1 and s1 0: 2 fell, 2 rose, 2 unchanged; the overall
    # stays 4/6, source=real falls from 3/3 to 1/3 (delta -2/3, regressed),
    # source=synthetic rises from 1/3 to 3/3.
    QUERIES = ["r1", "r2", "r3", "s1", "s2", "s3"]

    def sliced_inputs(self):
        testset = "".join(json.dumps({"query_id": q, "relevant": ["d_" + q],
                                      "slices": {"source": "real" if q[0] == "r" else
                                                 "synthetic"}}) + "\n" for q in self.QUERIES)
        before = {q: ["d_" + q] if q in ("r1", "r2", "r3", "s1") else ["x"]
                  for q in self.QUERIES}
        now = {q: ["x"] if q in ("r2", "r3") else ["d_" + q] for q in self.QUERIES}
        return (self.write("t.jsonl", testset), self.write("before.json", json.dumps(before)),
                self.write("now.json", json.dumps(now)))

    def sliced_page(self, *argv):
        testset, before, now = self.sliced_inputs()
        saved = os.path.join(self.tmp, "b.json")
        code, _, err = run_cli(testset, before, "--metrics", "recall", "--k", "1",
                               "--save-baseline", saved, "--allow-unlabelled-run")
        self.assertEqual(code, 0, err)
        code, out, err = run_cli(testset, now, "--metrics", "recall", "--k", "1", "--by",
                                 "source", "--baseline", saved, "--compare", before,
                                 "--format", "html", *argv)
        self.assertEqual(code, 1, err)
        return out, before

    def test_gated_report_with_slices_and_a_comparison(self):
        page, before = self.sliced_page()
        parsed = self.assertPage(page)
        for title in ("current mean of each measure against the baseline",
                      "paired deltas with 95% intervals (paired bootstrap)",
                      "per-query deltas of recall@1, sorted",
                      "run minus %s with 95%% bootstrap intervals" % before,
                      "judged@k below 1"):
            self.assertIn(title, parsed.titles)
        self.assertIn("recall@1: 2 queries fell, 2 rose, 2 unchanged (of the 6 queries both hold); "
                      "2 queries fell by more than the tolerated 0.0200. Sorted from the "
                      "largest drop to the largest gain.", parsed.captions)
        # One forest row per measure and per slice: the tooltips hold the library's
        # numbers, the interval the library's bootstrap_ci over the paired deltas in
        # query order, seeded by the row's name as the gate seeds its tests.
        for name, diffs in (("recall@1", [0.0, -1.0, -1.0, 0.0, 1.0, 1.0]),
                            ("source=real: recall@1", [0.0, -1.0, -1.0]),
                            ("source=synthetic: recall@1", [0.0, 1.0, 1.0])):
            lo, hi = rag_eval.bootstrap_ci(diffs, rng=random.Random("0|" + name))
            tips = [t for t in parsed.titles if t.startswith(name + ": paired delta ")]
            self.assertEqual(len(tips), 1, name)
            self.assertTrue(tips[0].startswith(
                "%s: paired delta %r, 95%% CI [%r, %r] (paired bootstrap), %d queries"
                % (name, sum(diffs) / len(diffs), lo, hi, len(diffs))), tips[0])
        self.assertIn("source=real: recall@1: paired delta -0.6666666666666666", page)
        # The waterfall: a bar per query that moved, its delta in the tooltip.
        for query, delta in (("r2", -1.0), ("r3", -1.0), ("s2", 1.0), ("s3", 1.0)):
            self.assertIn("%s: %r" % (query, delta), parsed.titles)
        self.assertNotIn("r1: 0.0", parsed.titles)
        # judged@1 of the real slice: r1's id is labelled, r2's and r3's "x" are not.
        self.assertIn("source=real: recall@1: judged@k 0.3333333333333333", parsed.titles)
        self.assertEqual(page, self.sliced_page()[0])

    def test_the_forest_draws_the_slice_rows_that_moved_most(self):
        # Found by review: 600 slices drew 1202 rows (1.18 MB, 34 s). 600 queries, slice
        # g=v000..v119 by i % 120: every odd slice falls (mrr@1 1 -> 0 on its queries,
        # which rank x first), every even one is unchanged.
        rows = [{"query_id": "q%04d" % i, "relevant": {"d": 1},
                 "slices": {"g": "v%03d" % (i % 120)}} for i in range(600)]
        testset = self.write("t.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        good = self.write("good.json", json.dumps({r["query_id"]: ["d"] for r in rows}))
        bad = self.write("bad.json", json.dumps({r["query_id"]: ["x", "d"] if i % 120 % 2
                                                 else ["d"] for i, r in enumerate(rows)}))
        saved = os.path.join(self.tmp, "base.json")
        argv = ("--metrics", "mrr", "--k", "1", "--by", "g", "--resamples", "200")
        self.assertEqual(run_cli(testset, good, *argv, "--save-baseline", saved)[0], 0)
        code, page, err = run_cli(testset, bad, *argv, "--baseline", saved, "--format", "html")
        self.assertEqual(code, 1, err)
        parsed = self.assertPage(page)
        tips = [t for t in parsed.titles if ": paired delta " in t]
        # The overall row (600 queries: the normal interval) and 50 of the 60 fallen
        # slices (5 queries each: the bootstrap), all of them -1: the first 50 by name.
        self.assertEqual(len(tips), 51)
        self.assertEqual(sorted(t.split(":")[0] for t in tips if t.startswith("g=")),
                         ["g=v%03d" % i for i in range(1, 101, 2)])
        self.assertIn("paired deltas with 95% intervals (normal approximation and paired "
                      "bootstrap)", parsed.titles)
        self.assertTrue(any(c.endswith("70 slice rows not drawn: unchanged or within the "
                                       "tolerance, or beyond the 50 that moved most (the "
                                       "tables hold every row).") for c in parsed.captions),
                        parsed.captions)

    def test_a_number_in_a_tooltip_is_the_librarys(self):
        qrels = {"q%d" % i: {"d": 1} for i in range(8)}
        ours = rag_eval.evaluate(qrels, {"q%d" % i: ["x", "d"] if i % 3 else ["d"]
                                         for i in range(8)}, k=2, measures="mrr")
        theirs = rag_eval.evaluate(qrels, {"q%d" % i: ["d"] for i in range(8)}, k=2,
                                   measures="mrr")
        c = rag_eval.compare(ours, theirs, reference_name="main")
        row = c.measures["mrr@2"]
        page = rag_eval.render_html(ours, comparisons=[c])
        self.assertPage(page)
        self.assertIn("mrr@2: delta %r, 95%% CI [%r, %r], 8 queries; p (Holm) %r; %s"
                      % (row.delta, row.ci95[0], row.ci95[1], row.p_holm, row.verdict), page)
        self.assertEqual(row.delta, -0.3125)   # 5 of 8 queries fall from 1 to 1/2

    def test_the_forest_interval_is_bootstrap_ci_of_the_paired_deltas(self):
        # 40 queries whose relevant id moves between ranks 1-10: many distinct
        # deltas, so another seed or another order of the deltas moves the interval.
        rng = random.Random(7)
        qrels = {"q%02d" % i: {"d": 1} for i in range(40)}

        def run():
            return {q: ["x%d" % j for j in range(rng.randint(0, 9))] + ["d"] for q in qrels}
        before = rag_eval.evaluate(qrels, run(), k=10, measures="mrr")
        now = rag_eval.evaluate(qrels, run(), k=10, measures="mrr")
        baseline = rag_eval.Baseline(before.mean, before.per_query)
        page = rag_eval.render_html(now, rag_eval.gate(now, baseline), baseline=baseline,
                                    resamples=500, seed=3)
        diffs = [now.per_query[q]["mrr@10"] - before.per_query[q]["mrr@10"] for q in sorted(qrels)]
        lo, hi = rag_eval.bootstrap_ci(diffs, resamples=500, rng=random.Random("3|mrr@10"))
        self.assertIn("mrr@10: paired delta %r, 95%% CI [%r, %r] (paired bootstrap), 40 queries"
                      % (math.fsum(diffs) / 40, lo, hi), page)
        self.assertNotEqual((lo, hi), rag_eval.bootstrap_ci(
            diffs, resamples=500, rng=random.Random("0|mrr@10")))

    def test_counts_of_one_are_singular(self):
        # Issue 22: "1 queries fell"; every count in the page takes its noun's number.
        qrels = {"q1": {"d": 1}}
        before = rag_eval.evaluate(qrels, {"q1": ["d"]}, k=2, measures="mrr")
        now = rag_eval.evaluate(qrels, {"q1": ["x", "d"]}, k=2, measures="mrr")
        baseline = rag_eval.Baseline(before.mean, before.per_query)
        page = rag_eval.render_html(now, rag_eval.gate(now, baseline), baseline=baseline,
                                    resamples=1)
        parsed = self.assertPage(page)
        self.assertIn("mrr@2: 1 query fell, 0 rose, 0 unchanged (of the 1 query both hold); "
                      "1 query fell by more than the tolerated 0.0200. Sorted from the largest "
                      "drop to the largest gain.", parsed.captions)
        self.assertIn("the paired bootstrap (1 resample)", page)
        self.assertNotRegex(page, r"\b1 (queries|resamples|rows|ids|measures)\b")
        # the text sections the page holds: a comparison's note
        wider = rag_eval.evaluate({"q1": {"d": 1}, "q2": {"d": 1}}, {"q1": ["d"], "q2": ["d"]},
                                  k=2, measures="mrr")
        page = rag_eval.render_html(wider, comparisons=[rag_eval.compare(wider, now)])
        self.assertIn("not compared: 1 query only in the run, 0 only in the reference", page)
        self.assertNotRegex(page, r"\b1 (queries|resamples|rows|ids|measures)\b")

    def test_the_interval_is_the_bootstrap_up_to_500_queries(self):
        for n, how in ((500, "paired bootstrap"), (501, "normal approximation")):
            qrels = {"q%03d" % i: {"d": 1} for i in range(n)}
            before = rag_eval.evaluate(qrels, {q: ["d"] for q in qrels}, k=2, measures="mrr")
            now = rag_eval.evaluate(qrels, {q: ["x", "d"] if i % 2 else ["d"]
                                            for i, q in enumerate(qrels)}, k=2, measures="mrr")
            baseline = rag_eval.Baseline(before.mean, before.per_query)
            page = rag_eval.render_html(now, rag_eval.gate(now, baseline), baseline=baseline,
                                        resamples=50)
            self.assertRegex(page, r"mrr@2: paired delta [-.0-9]+, 95%% CI \[[-.0-9e]+, "
                                   r"[-.0-9e]+\] \(%s\), %d queries" % (how, n))

    def test_gate_without_the_baselines_values(self):
        report = rag_eval.evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, measures="mrr")
        page = rag_eval.render_html(report, rag_eval.gate(report, {"mrr@2": 0.9}))
        self.assertPage(page)
        self.assertIn("or none was given to render_html (baseline=)", page)

    def test_hostile_ids_are_escaped(self):
        hostile = ["<script>alert(1)</script>", "a|b", "&", "\"q'", "<b>x</b>"]
        qrels = {q: {"d": 1} for q in hostile}
        before = rag_eval.evaluate(qrels, {q: ["d"] for q in hostile}, k=1, measures="recall",
                                   meta={"note": "<i>&</i>"})
        now = rag_eval.evaluate(qrels, {q: ["d"] if q == "a|b" else ["x"] for q in hostile},
                                k=1, measures="recall", meta={"note": "<i>&</i>"})
        baseline = rag_eval.Baseline(before.mean, before.per_query, source="<base>&")
        result = rag_eval.gate(now, baseline)
        page = rag_eval.render_html(now, result, per_query=True, baseline_name="<base>&",
                                    baseline=baseline)
        parsed = self.assertPage(page)
        self.assertNotIn("<script>alert", page)
        self.assertNotIn("<b>x", page)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", page)
        self.assertIn("<td>&quot;q&#x27;</td>", page)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;: -1.0", page)  # a waterfall bar
        self.assertIn("<script>alert(1)</script>: -1.0", parsed.titles)     # read back whole
        self.assertIn("&lt;i&gt;&amp;&lt;/i&gt;", page)
        self.assertIn("gate vs &lt;base&gt;&amp;", page)
        for fragment in (now._repr_html_(), result._repr_html_()):
            self.assertEqual(_HtmlChecker(fragment).errors, [])
            self.assertNotIn("<script>alert", fragment)

    def test_a_large_report_stays_small(self):
        # 5000 queries: per query, the waterfall draws 400 bins, not 5000 bars.
        n = 5000
        qrels = {"q%04d" % i: {"d": 1} for i in range(n)}
        before = rag_eval.evaluate(qrels, {q: ["d"] for q in qrels}, k=2, measures="mrr")
        now = rag_eval.evaluate(qrels, {q: ["x", "d"] if i % 4 == 0 else ["d"]
                                        for i, q in enumerate(qrels)}, k=2, measures="mrr")
        baseline = rag_eval.Baseline(before.mean, before.per_query)
        page = rag_eval.render_html(now, rag_eval.gate(now, baseline), baseline=baseline)
        parsed = self.assertPage(page)
        self.assertLess(len(page.encode("utf-8")), 100000)
        # Over 500 paired queries the interval is the normal one, not the bootstrap's
        # 5000 x 10000 draws: -1/8 -/+ 1.96 * sd / sqrt(5000) (margin_of_error).
        diffs = [-0.5 if i % 4 == 0 else 0.0 for i in range(n)]
        half = rag_eval.margin_of_error(diffs)
        self.assertIn("mrr@2: paired delta -0.125, 95%% CI [%r, %r] (normal approximation), "
                      "5000 queries" % (-0.125 - half, -0.125 + half), page)
        # Found by review: the chart called these bootstrap intervals.
        self.assertIn("paired deltas with 95% intervals (normal approximation)", parsed.titles)
        self.assertIn("mrr@2: 1250 queries fell, 0 rose, 3750 unchanged (of the 5000 queries "
                      "both hold); 1250 queries fell by more than the tolerated 0.0200. Sorted "
                      "from the largest drop to the largest gain. 5000 queries drawn as 400 bars, "
                      "each the mean delta of 12 or 13 consecutive queries.", parsed.captions)
        # 5000 = 200 bins of 13 and 200 of 12: the 1250 falls of -1/2 fill 96 bins
        # of 13 (1248 queries); the 97th holds the last 2 and 11 unchanged queries.
        self.assertIn("queries 1-13 of 5000: mean delta -0.5", parsed.titles)
        self.assertIn("queries 1249-1261 of 5000: mean delta %r" % (-1.0 / 13), parsed.titles)
        self.assertEqual(sum(1 for t in parsed.titles if t.startswith("queries ")), 97)

    def test_sweep_is_the_last_table(self):
        code, out, err = self.report_of(
            "--metrics", "abstained,recall@2", "--allow-unlabelled-run", "--format", "html",
            "--sweep-min-score=recall@2",
            qrels=("q.jsonl", test_measures.SweepMinScoreTest.QRELS),
            run=("r.jsonl", test_measures.SweepMinScoreTest.RUN))
        self.assertEqual(code, 0, err)
        self.assertPage(out)
        self.assertRegex(out, r"--sweep-min-score: abstention_f1 and recall@2 at each "
                              r"threshold</h3>\n<table>(.|\n)*</table>\n(<ul.*</ul>\n)?"
                              r"</section>\n</body>\n</html>\n$")
        self.assertIn('<td class="num">0.7</td><td class="num">1.0000</td>'
                      '<td class="num">0.0000</td>', out)


class HtmlReprTest(TempDir, unittest.TestCase):
    """_repr_html_ of Report, GateResult and Comparison (notebooks): an HTML
    fragment, no <html> or <body>, its numbers in a <table>, never per query."""

    def assertFragment(self, fragment):
        parsed = _HtmlChecker(fragment)
        self.assertEqual(parsed.errors, [])
        self.assertIn("table", parsed.tags)
        for tag in ("html", "body", "head", "script", "svg"):
            self.assertNotIn(tag, parsed.tags)
        return parsed

    def test_report(self):
        report = rag_eval.evaluate_files(*EXAMPLE_FILES)
        fragment = report._repr_html_()
        self.assertFragment(fragment)
        self.assertIn("<th>recall@5</th>", fragment)
        self.assertIn('<td>mean</td><td class="num">0.6667</td><td class="num">0.6667</td>'
                      '<td class="num">0.5000</td><td class="num">0.5095</td>', fragment)
        self.assertNotIn("q1", fragment)    # no per-query row

    def test_gate_result(self):
        report = rag_eval.evaluate_files(*EXAMPLE_FILES)
        result = rag_eval.gate(report, rag_eval.load_baseline(example("baseline.json")))
        fragment = result._repr_html_()
        self.assertFragment(fragment)
        self.assertIn("<p>gate: FAILED</p>", fragment)
        self.assertIn('<td>recall@5</td><td class="num">0.7000</td><td class="num">0.6667</td>'
                      '<td class="num">-0.0333</td><td>-</td><td>REGRESSED</td>', fragment)

    def test_comparison(self):
        qrels = {"q%d" % i: {"d": 1} for i in range(8)}
        ours = rag_eval.evaluate(qrels, {q: ["x", "d"] for q in qrels}, k=2, measures="mrr")
        theirs = rag_eval.evaluate(qrels, {q: ["d"] for q in qrels}, k=2, measures="mrr")
        fragment = rag_eval.compare(ours, theirs, reference_name="main")._repr_html_()
        self.assertFragment(fragment)
        self.assertIn("<p>comparison with main</p>", fragment)
        # 8 queries each fall from 1 to 1/2: every resample's mean is -0.5.
        self.assertIn('<td>mrr@2</td><td class="num">0.5000</td><td class="num">1.0000</td>'
                      '<td class="num">-0.5000</td><td>[-0.5000, -0.5000]</td>', fragment)
        self.assertIn("significantly worse", fragment)

    def test_small_for_many_queries(self):
        n = 20000
        qrels = {"q%05d" % i: {"d": 1} for i in range(n)}
        report = rag_eval.evaluate(qrels, {q: ["d"] for q in qrels}, k=1, measures="recall")
        result = rag_eval.gate(report, rag_eval.Baseline(report.mean, report.per_query))
        self.assertLess(len(report._repr_html_()), 1000)
        self.assertLess(len(result._repr_html_()), 2000)
