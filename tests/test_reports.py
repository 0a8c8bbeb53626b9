"""Output: the report in JSON, text and Markdown, the step summary, formats,
load_report, notebook reprs, the progress line, the files written, and
trec_eval's output and averaging (--format trec, --average trec_eval).
"""

import io
import json
import itertools
import os
import re
import unittest
import unittest.mock

import rag_eval
from tests.support import (DATA, run_cli, TempDir, example, EXAMPLE_FILES, example_report,
                           read_text, SLICED_QRELS, SLICED_QUERIES, SLICED_RUN, sliced_report,
                           saved_baseline, out_keys_sorted, plain_twins)


# ---------------------------------------------------------------------------
# Output: the report in JSON, text and Markdown; the files written
# ---------------------------------------------------------------------------

class ReportOutputTest(TempDir, unittest.TestCase):
    """The documented JSON schema, deterministic bytes, the text and Markdown
    tables; warnings on stderr."""
    TOP = {"tool", "inputs", "measures", "rel", "queries", "unscored", "missing_from_run",
           "skipped", "abstention", "ties", "mean", "warnings", "unlabelled", "meta",
           "answerability", "query_sets"}

    GATE = {"passed", "mode", "max_drop", "slice_max_drop", "regressions", "improvements",
            "changes", "per_query", "notes", "meta_changes", "removed_failing", "attribution"}

    def json_out(self, *argv):
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--format", "json",
                                 *argv)
        return code, json.loads(out)

    def test_json_keys(self):
        code, doc = self.json_out()
        self.assertEqual(set(doc), self.TOP)
        code, doc = self.json_out("--per-query", "--baseline", example("baseline.json"),
                                  "--max-drop", "5%")
        self.assertEqual(set(doc), self.TOP | {"per_query", "gate"})
        self.assertEqual(set(doc["gate"]), self.GATE)
        self.assertIsNone(doc["gate"]["per_query"])
        self.assertEqual(doc["gate"]["max_drop"], "5%")
        self.assertEqual(doc["rel"], 1)
        self.assertEqual(doc["abstention"], {"q4": 5})
        self.assertEqual(len(doc["gate"]["changes"]), 4)
        saved = os.path.join(self.tmp, "b.json")
        run_cli(example("qrels.json"), example("run.json"), "--save-baseline", saved)
        code, doc = self.json_out("--baseline", saved)
        self.assertEqual(doc["gate"]["per_query"],
                         {"queries_added": [], "queries_removed": [], "regressions": [],
                          "labels_changed": [], "moved": []})
        self.assertEqual(doc["gate"]["slice_max_drop"], {})
        for entry in doc["gate"]["changes"]:
            self.assertEqual(set(entry), {"measure", "baseline", "current", "delta", "status",
                                          "p_value", "slice", "judged", "undecided",
                                          "suspect", "n", "removed", "added", "reason",
                                          "main_stage"})
            self.assertIsNone(entry["slice"])
            self.assertIsNone(entry["suspect"])

    def test_json_schema(self):
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "json", "--per-query",
                                 "--baseline", example("baseline.json"))
        self.assertEqual(code, 1)
        doc = json.loads(out)
        self.assertEqual(doc["tool"], {"name": "rag_eval", "version": rag_eval.__version__})
        self.assertEqual(doc["measures"], ["recall@5", "success@5", "mrr@5", "ndcg@5"])
        self.assertEqual(doc["queries"], 3)
        self.assertEqual(doc["unscored"], ["q4"])
        self.assertEqual(doc["per_query"]["q3"]["mrr@5"], 1.0)
        self.assertEqual(len(doc["inputs"]["run"]["sha256"]), 64)
        self.assertFalse(doc["gate"]["passed"])
        self.assertEqual([r["measure"] for r in doc["gate"]["regressions"]], ["mrr@5", "recall@5"])
        self.assertNotIn("NaN", out)

    def test_deterministic_bytes(self):
        first = run_cli(*EXAMPLE_FILES, "--format", "json", "--per-query")[1]
        second = run_cli(*EXAMPLE_FILES, "--format", "json", "--per-query")[1]
        self.assertEqual(first, second)
        self.assertEqual(out_keys_sorted(first), True)

    def test_undecodable_path_names_are_written_safely(self):
        name = os.fsdecode(b"run\xff.json")
        with open(os.path.join(self.tmp, name), "w") as handle:
            handle.write('{"q1": ["d1"]}')
        out_path = os.path.join(self.tmp, "out.json")
        code, out, err = run_cli(self.write("q.json", '{"q1": {"d1": 1}}'),
                                 os.path.join(self.tmp, name), "--format", "json", "-o", out_path)
        self.assertEqual(code, 0, err)
        with open(out_path, encoding="utf-8") as handle:
            self.assertIn("run\ufffd.json", json.load(handle)["inputs"]["run"]["path"])

    def test_markdown(self):
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "markdown", "--baseline",
                                 example("baseline.json"))
        self.assertEqual(code, 1)
        self.assertIn("| mean | 0.6667 | 0.6667 | 0.5000 | 0.5095 |", out)

    def test_per_query_text(self):
        code, out, err = run_cli(*EXAMPLE_FILES, "--per-query", "--k", "1,5", "--metrics", "success")
        self.assertEqual(code, 0)
        self.assertRegex(out, r"q2\s+0\.0000\s+0\.0000")
        self.assertRegex(out, r"mean\s+0\.3333\s+0\.6667")

    def test_warnings_go_to_stderr(self):
        run = self.write("r.json", '{"q1": ["refund-policy#2", "refund-policy#2"]}')
        code, out, err = run_cli(example("qrels.json"), run)
        self.assertEqual(code, 0)
        self.assertIn("warning: 2 queries in the qrels not in the run", err)
        self.assertIn("repeat ids", err)
        self.assertNotIn("warning", out)


class WideTextTableTest(unittest.TestCase):
    """Issue 23: a text table of many measures (9 measures at 3 cutoffs: 27
    columns) is printed a measure a row when it would pass 100 columns."""

    NINE = "recall,success,mrr,ndcg,map,precision,context_precision,judged,complete"

    def test_many_measures_are_rows(self):
        report = example_report(k=[1, 5, 10], measures=self.NINE)
        self.assertEqual(len(report.measures), 27)
        lines = rag_eval.render_text(report).split("\n")
        self.assertEqual(lines[2].split(), ["measure", "mean"])
        rows = [line.split() for line in lines[3:30]]
        self.assertEqual([r[0] for r in rows], list(report.measures))
        # The README example's values: recall@5 2/3, mrr@5 (1/2 + 0 + 1) / 3, ndcg@5 0.5095.
        self.assertIn(["recall@5", "0.6667"], rows)
        self.assertIn(["mrr@5", "0.5000"], rows)
        self.assertIn(["ndcg@5", "0.5095"], rows)
        self.assertEqual(lines[30], "")
        self.assertLessEqual(max(map(len, lines[2:30])), 100)
        # Per query, 3 queries: a column each, beside the mean.
        lines = rag_eval.render_text(report, per_query=True).split("\n")
        self.assertEqual(lines[2].split(), ["measure", "q1", "q2", "q3", "mean"])
        self.assertEqual(lines[4].split(), ["recall@5", "1.0000", "0.0000", "1.0000", "0.6667"])

    def test_a_narrow_table_keeps_a_measure_a_column(self):
        lines = rag_eval.render_text(example_report()).split("\n")     # 4 measures: 41 columns
        self.assertEqual(lines[2].split(), ["query", "recall@5", "success@5", "mrr@5", "ndcg@5"])

    def test_many_queries_keep_a_query_a_row(self):
        # Turned, 40 queries would be 40 columns: wider, so the rows stay queries.
        qrels = {"q%02d" % i: {"d": 1} for i in range(40)}
        report = rag_eval.evaluate(qrels, {q: ["d"] for q in qrels}, k=[1, 5, 10],
                                   measures=self.NINE)
        lines = rag_eval.render_text(report, per_query=True).split("\n")
        self.assertEqual(lines[2].split()[:3], ["query", "recall@1", "recall@5"])
        self.assertEqual(lines[2 + 41].split()[0], "mean")

    def test_slice_tables_turn_too(self):
        # by source: synthetic s1 s2 s3, real r1 r2 (r3 unscored), h1 held out.
        report = rag_eval.evaluate(SLICED_QRELS, SLICED_RUN, k=[1, 2, 3], measures=self.NINE,
                                   queries=SLICED_QUERIES, by="source")
        text = rag_eval.render_text(report)
        block = text.split("by source (means over each slice's scored queries)\n", 1)[1]
        lines = block.split("\n")
        self.assertEqual(lines[0].split(), ["source", "real", "synthetic"])
        self.assertEqual(lines[1].split(), ["queries", "3", "3"])
        self.assertEqual(lines[2].split(), ["unscored", "1", "0"])
        # recall@1: real r1 1, r2 0, h1 0 (x first) -> 1/3; synthetic s1 1, s2 0, s3 0 -> 1/3.
        self.assertEqual(lines[3].split(), ["recall@1", "0.3333", "0.3333"])


class MarkdownReportTest(TempDir, unittest.TestCase):
    """--format markdown: the verdict first, every cell escaped, details in
    <details> blocks, and --max-bytes cutting whole rows of those only."""

    HOSTILE = {"a|b": {"d1": 1}, "<script>": {"d`2`": 1}, "x\ny": {"z": 1}}
    HOSTILE_RUN = {"a|b": ["d1"], "<script>": ["x", "d`2`"], "x\ny": ["z"]}

    def hostile(self):
        report = rag_eval.evaluate(self.HOSTILE, self.HOSTILE_RUN, k=2, metrics="mrr")
        # mrr@2: a|b 1 (d1 first), <script> 1/2 (d`2` second), x\ny 1: mean 2.5/3.
        baseline = rag_eval.Baseline({"mrr@2": 0.9}, per_query={
            "a|b": {"mrr@2": 1.0}, "<script>": {"mrr@2": 1.0}, "x\ny": {"mrr@2": 0.7}})
        return report, rag_eval.gate(report, baseline)

    def test_a_small_gated_report_exactly(self):
        report, result = self.hostile()
        # delta 2.5/3 - 0.9 = -0.0666666..., to 9 places; <script> fell 1 -> 0.5.
        self.assertEqual(rag_eval.render_markdown(report, result, per_query=True,
                                                  baseline_name="base|line.json"), """\
**Gate failed**: 1 regression: mrr@2

Gate vs base\\|line.json (max drop 0.02):

| measure | baseline | current | delta | n | status |
| --- | --- | --- | --- | --- | --- |
| mrr@2 | 0.9000 | 0.8333 | -0.066666667 | 3 | REGRESSED |

rag\\_eval %s: 3 queries scored

| query | mrr@2 |
| --- | --- |
| mean | 0.8333 |

<details><summary>gate notes (1)</summary>

- too few queries to see a drop of the tolerance: mrr@2 is +/-0.327 on 3 queries, about 801 needed

</details>

<details><summary>per-query drops beyond the tolerance, largest first (1)</summary>

| measure | query | baseline | current | delta |
| --- | --- | --- | --- | --- |
| mrr@2 | &lt;script&gt; | 1.0000 | 0.5000 | -0.5000 |

</details>

<details><summary>per-query values (3 queries)</summary>

| query | mrr@2 |
| --- | --- |
| &lt;script&gt; | 0.5000 |
| a\\|b | 1.0000 |
| x\\\\ny | 1.0000 |

</details>

<details><summary>answerability</summary>

| answerable | unanswerable | unstated |
| --- | --- | --- |
| 3 | 0 | 0 |

</details>
""" % rag_eval.__version__)

    def assertCellsIntact(self, markdown):
        """Every table line splits into as many cells as its header, on the
        unescaped pipes; no raw HTML or backtick from the data survives."""
        columns = None
        for line in markdown.splitlines():
            if not line.startswith("|"):
                columns = None
                continue
            self.assertTrue(line.endswith(" |"), line)
            cells = re.split(r"(?<!\\) \| ", line[2:-2])
            columns = columns or len(cells)
            self.assertEqual(len(cells), columns, line)
            for cell in cells:      # (our code spans of mentions and references aside)
                cell = re.sub("`(?:%s)`" % rag_eval._MD_LIVE.pattern, "", cell)
                self.assertNotRegex(cell, r"[<>]|(?<!\\)`", line)

    def test_hostile_ids_and_values_are_escaped(self):
        ids = ["a|b", "`x`", "<script>alert(1)</script>", "new\nline", "amp&lt;", "*em*",
               "_u_", "[l](http://x)", "back\\|slash", "$x$", "\r", "~~s~~"]
        qrels = {q: {"d%d" % i: 1} for i, q in enumerate(ids)}
        run = {q: ["d%d" % i] if i % 2 else ["n", "d%d" % i] for i, q in enumerate(ids)}
        code, out, err = self.report_of("--format", "markdown", "--per-query", "--k", "2",
                                        "--metrics", "mrr", "--meta", "who=<b>|`me`",
                                        qrels=qrels, run=run)
        self.assertEqual(code, 0, err)
        self.assertCellsIntact(out)
        self.assertIn("| a\\|b | 0.5000 |", out)
        self.assertIn("| \\`x\\` | 1.0000 |", out)
        self.assertIn("| &lt;script&gt;alert(1)&lt;/script&gt; | 0.5000 |", out)
        self.assertIn("| new\\\\nline | 1.0000 |", out)
        self.assertIn("| amp&amp;lt; | 0.5000 |", out)
        self.assertIn("| back\\\\\\|slash | 0.5000 |", out)
        self.assertIn("| who | &lt;b&gt;\\|\\`me\\` |", out)
        self.assertEqual(out.count("<details>"), out.count("</details>"))

    def test_mentions_and_issue_references_are_never_live(self):
        # Issue 22: an id @user or #12 pinged a user or linked an issue in a PR
        # comment.  Every such token is in a code span (in <summary>, <code>), in
        # cells, notes, warnings, slice rows and the step summary's error line;
        # a code span survives backticks around it; e-mail addresses and ids
        # like doc#3 are no mention or reference and stay as they are.
        ids = ["@alice", "#12", "GH-7", "octo/repo#3", "a`@b`", "x@example.com", "doc#3",
               "(@carol)"]
        qrels = {q: {"d%d" % i: 1} for i, q in enumerate(ids)}
        run = {q: ["n%d" % i] if q == "(@carol)" else ["d%d" % i] for i, q in enumerate(ids)}
        queries = self.write("queries.jsonl", "".join(
            json.dumps({"query_id": q, "slices": {"@team": "@bob" if i % 2 else "#5"}}) + "\n"
            for i, q in enumerate(ids)))
        code, out, err = self.report_of("--format", "markdown", "--per-query", "--k", "1",
                                        "--metrics", "mrr", "--queries", queries, "--by",
                                        "@team", qrels=qrels, run=run)
        self.assertEqual(code, 0, err)
        self.assertCellsIntact(out)
        for cell in ("`@alice`", "`#12`", "`GH-7`", "`octo/repo#3`", "a\\``@b`\\`",
                     "x@example.com", "doc#3", "(`@carol`)", "`@bob`", "`#5`"):
            self.assertIn("| %s |" % cell, out)
        self.assertIn("'(`@carol`)'", out)      # the warning naming the unlabelled query
        self.assertIn("<summary>by <code>@team</code> (means", out)
        self.assertNoLiveTokens(out)
        summary = self.write("summary.md", "")
        with unittest.mock.patch.dict(os.environ, {"GITHUB_STEP_SUMMARY": summary}):
            code, out, err = self.report_of("--step-summary", "--qrels-format", "jsonl",
                                            qrels=self.write("q.jsonl", '{"query_id": "@dan"}\n'
                                                             '{"query_id": "@dan"}\n'), run=run)
        self.assertEqual(code, rag_eval.EXIT_ERROR, err)
        self.assertIn("'@dan' appears on more than one line", err)   # stderr is no Markdown
        written = read_text(summary)
        self.assertIn("query '`@dan`' appears on more than one line", written)
        self.assertNoLiveTokens(written)

    def assertNoLiveTokens(self, markdown):
        """No mention or issue reference outside code spans and <code> elements."""
        bare = re.sub(r"<code>[^<]*</code>", "", markdown.replace("\\`", ""))
        bare = re.sub(r"`[^`\n]*`", "", bare)
        live = re.findall(r"(?<!\w)@\w|(?<!\w)#\d|(?<!\w)GH-\d|\w/[\w.-]+#\d", bare)
        self.assertEqual(live, [], markdown)

    def test_the_first_line_is_the_verdict(self):
        cases = [(("--baseline", example("baseline.json")), 1,
                  "**Gate failed**: 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5"),
                 # Found by review: the three measures --metrics leaves out were called
                 # regressions; they are missing.
                 (("--baseline", example("baseline.json"), "--metrics", "recall", "--k", "5"), 1,
                  "**Gate failed**: 1 regression (undecided: unjudged ids could explain it): "
                  "recall@5; 3 missing: mrr@5, ndcg@5, success@5"),
                 (("--baseline", example("baseline.json"), "--max-drop", "0.1"), 0,
                  "**Gate passed**"),
                 ((), 0, "**rag\\_eval %s: 3 queries scored; 1 unscored (no relevant id): q4**"
                  % rag_eval.__version__)]
        for argv, expect_code, first in cases:
            with self.subTest(argv=argv):
                code, out, err = run_cli(*EXAMPLE_FILES, "--format", "markdown", *argv)
                self.assertEqual(code, expect_code, err)
                self.assertEqual(out.splitlines()[0], first)

    def test_the_verdict_names_at_most_ten_of_each_kind(self):
        # Found by review: 499 names on the first line of a gate over 600 slices.
        changes = tuple(rag_eval.MeasureChange("m%02d@5" % i, 0.5, 0.1, -0.4, "regressed")
                        for i in range(12)) + tuple(
            rag_eval.MeasureChange("x%02d@5" % i, 0.5, None, None, "missing") for i in range(3))
        result = rag_eval.GateResult(False, changes, "0.02", ())
        self.assertEqual(rag_eval._gate_headline(result),
                         "**Gate failed**: 12 regressions: m00@5, m01@5, m02@5, m03@5, m04@5, "
                         "m05@5, m06@5, m07@5, m08@5, m09@5, ... (2 more); 3 missing: x00@5, "
                         "x01@5, x02@5")
        self.assertTrue(rag_eval._gate_verdict(result, "b").endswith(
            "FAILED, 12 regressions: m00@5, m01@5, m02@5, m03@5, m04@5, m05@5, m06@5, m07@5, "
            "m08@5, m09@5, ... (2 more); 3 missing: x00@5, x01@5, x02@5"))

    def test_delta_at_the_gates_precision(self):
        # success@5: 2/3 against the baseline's 0.6667 is -0.0000333...: shown, not -0.0000.
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "markdown",
                                 "--baseline", example("baseline.json"))
        self.assertIn("| success@5 | 0.6667 | 0.6667 | -0.000033333 | - | dropped within tolerance "
                      "| 0.3333 |", out)
        self.assertIn("| mrr@5 | 0.5500 | 0.5000 | -0.0500 | - | REGRESSED (undecided: 10 "
                      "unjudged ids could explain it; label them: --to-label FILE) | 0.3333 |",
                      out)

    def big(self, *argv):
        """5000 queries, half of them fallen since a saved baseline."""
        qrels = {"q%04d|" % i: {"d": 1} for i in range(5000)}
        good = {q: ["d"] for q in qrels}
        bad = {q: ["x", "d"] if i % 2 else ["d"] for i, q in enumerate(qrels)}
        saved = os.path.join(self.tmp, "base.json")
        self.report_of("--metrics", "mrr", "--save-baseline", saved, qrels=qrels, run=good)
        return self.report_of("--metrics", "mrr", "--baseline", saved, "--per-query",
                              "--format", "markdown", *argv, qrels=qrels, run=bad)

    def test_the_size_cap_leaves_out_whole_rows(self):
        code, full, err = self.big("--max-bytes", "100000000")
        self.assertEqual(code, 1, err)
        self.assertGreater(len(full.encode()), 60000)
        head = full.split("<details>", 1)[0]
        for cap in (None, 60000, 20000, 3000, 1500, 900):
            with self.subTest(cap=cap):
                code, out, err = self.big(*(("--max-bytes", str(cap)) if cap else ()))
                self.assertEqual(code, 1, err)
                self.assertLessEqual(len(out.encode()), cap or 60000)
                self.assertTrue(out.startswith(head))   # verdict and tables untouched
                self.assertCellsIntact(out)
                self.assertEqual(out.count("<details>"), out.count("</details>"))
                full_lines = set(full.splitlines())
                left = 0
                for line in out.splitlines():
                    found = re.match(r"> \*\*(\d+) of (\d+) rows? left out\*\*", line) or \
                        re.match(r"> \*\*\d+ sections? left out\*\* \((\d+) rows?\)", line)
                    if found:
                        self.assertIn("the JSON report (`--format json`, same options) holds "
                                      "them all", line)
                        left += int(found.group(1))
                    else:
                        self.assertIn(line, full_lines)      # no row cut half-way
                self.assertEqual(len(self.detail_rows(out)) + left, len(self.detail_rows(full)))
                self.assertGreater(left, 0)

    @staticmethod
    def detail_rows(markdown):
        """The rows and notes of the <details> blocks (not their table headers)."""
        lines = "".join(markdown.split("<details>", 1)[1:]).splitlines() + [""]
        return [line for i, line in enumerate(lines) if line.startswith("- ") or (
            line.startswith("| ") and not line.startswith("| --- ")
            and not lines[i + 1].startswith("| --- "))]

    def test_the_verdict_and_gate_table_are_never_cut(self):
        code, out, err = self.big("--max-bytes", "100")
        self.assertEqual(code, 1, err)
        self.assertTrue(out.startswith("**Gate failed**: 1 regression (undecided: unjudged ids "
                                        "could explain it): mrr@5\n"))
        self.assertIn("| mrr@5 | 1.0000 | 0.7500 | -0.2500 | 5000 | REGRESSED (undecided: 2500 unjudged "
                      "ids could explain it; label them: --to-label FILE) | 0.7500 |", out)
        self.assertNotIn("<details>", out)
        self.assertRegex(out, r"> \*\*\d+ sections left out\*\* \(\d+ rows\) to keep this "
                              r"under --max-bytes 100")

    def test_a_large_gate_table_keeps_to_the_cap(self):
        # Found by review: 600 slice values gave 106,813 bytes under the default cap, and
        # the first line named 499 measures. 3000 queries, slice g=v000..v599 by i % 600;
        # every odd slice falls from 1 to 0 (its queries rank x first).
        rows = [{"query_id": "q%04d" % i, "relevant": {"d": 1},
                 "slices": {"g": "v%03d" % (i % 600)}} for i in range(3000)]
        testset = ("t.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        good = {r["query_id"]: ["d"] for r in rows}
        bad = {q: ["x", "d"] if int(q[1:]) % 600 % 2 else ["d"] for q in good}
        saved = os.path.join(self.tmp, "base.json")
        argv = ("--metrics", "mrr,recall", "--k", "1", "--by", "g")
        self.assertEqual(self.report_of(*argv, "--save-baseline", saved, qrels=testset,
                                        run=good)[0], 0)
        for cap in (None, 20000, rag_eval.MARKDOWN_FLOOR):
            with self.subTest(cap=cap):
                code, out, err = self.report_of(*argv, "--baseline", saved, "--format",
                                                "markdown", *(("--max-bytes", str(cap))
                                                              if cap else ()),
                                                qrels=testset, run=bad)
                self.assertEqual(code, 1, err)
                self.assertLessEqual(len(out.encode()), cap or rag_eval.DEFAULT_MAX_BYTES)
                # 300 odd slices x 2 measures + the 2 overall rows regressed; mrr@1 is
                # undecided (an unjudged x at rank 1), recall@1 never (no bound for it here).
                self.assertEqual(out.splitlines()[0],
                                 "**Gate failed**: 602 regressions (301 undecided: unjudged ids "
                                 "could explain them): mrr@1, recall@1, g=v001: mrr@1, g=v001: "
                                 "recall@1, g=v003: mrr@1, g=v003: recall@1, g=v005: mrr@1, "
                                 "g=v005: recall@1, g=v007: mrr@1, g=v007: recall@1, ... "
                                 "(592 more)")
                head = out.split("<details>", 1)[0]
                self.assertIn("| recall@1 | 1.0000 | 0.5000 | -0.5000 | 3000 | REGRESSED | 0.5000 |",
                              head)
                self.assertIn("| g=v001: recall@1 | 1.0000 | 0.0000 | -1.0000 | 5 | REGRESSED | "
                              "0.0000 |", head)
                self.assertNotIn("improved", head)
                self.assertEqual(out.count("<details>"), out.count("</details>"))
                # Every regressed slice row is in the table or counted as left out.
                row = r"^\| g=v\d+: \w+@1 \| 1\.0000 \| 0\.0000 "
                block = re.search(r"<details><summary>more regressed or missing slice rows "
                                  r"\((\d+)\)</summary>.*?</details>", out, re.S)
                shown = len(re.findall(row, head, re.M))
                self.assertEqual(shown + int(block.group(1)) if block else shown, 600)
                if block:
                    left = re.search(r"> \*\*(\d+) of \d+ rows? left out", block.group(0))
                    self.assertEqual(len(re.findall(row, block.group(0), re.M))
                                     + (int(left.group(1)) if left else 0), int(block.group(1)))
                else:
                    self.assertIsNone(cap)

    def test_max_bytes_must_be_a_positive_integer(self):
        for bad in ("0", "-5", "x", "1.5"):
            with self.subTest(bad=bad):
                self.assertBad(extra=("--max-bytes", bad), expect="--max-bytes")


class StepSummaryTest(TempDir, unittest.TestCase):
    """--step-summary appends the Markdown report to $GITHUB_STEP_SUMMARY."""

    def run_with_summary(self, *argv, value=None):
        path = os.path.join(self.tmp, "summary.md") if value is None else value
        with unittest.mock.patch.dict(os.environ, {"GITHUB_STEP_SUMMARY": path}):
            result = run_cli(*argv)
        return result + (read_text(path) if path and os.path.exists(path) else None,)

    def test_appended_even_when_the_gate_fails(self):
        code, out, err, summary = self.run_with_summary(
            *EXAMPLE_FILES, "--baseline", example("baseline.json"), "--step-summary")
        self.assertEqual(code, 1, err)
        self.assertTrue(out.startswith("rag_eval "))          # stdout keeps --format text
        markdown = run_cli(*EXAMPLE_FILES, "--baseline", example("baseline.json"),
                           "--format", "markdown")[1]
        self.assertEqual(summary, "\n" + markdown + "\n")
        self.assertTrue(summary.startswith("\n**Gate failed**: 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5\n"))
        code, out, err, summary = self.run_with_summary(*EXAMPLE_FILES, "--step-summary")
        self.assertEqual(code, 0, err)                        # appended after the first
        self.assertEqual(summary.count("**Gate failed**"), 1)
        self.assertIn("\n**rag\\_eval", summary)

    def test_json_on_stdout_markdown_in_the_summary(self):
        out_path = os.path.join(self.tmp, "report.json")
        code, out, err, summary = self.run_with_summary(
            *EXAMPLE_FILES, "--baseline", example("baseline.json"), "--step-summary",
            "-o", out_path)
        self.assertEqual((code, out), (1, ""))
        self.assertFalse(json.loads(read_text(out_path))["gate"]["passed"])
        self.assertTrue(summary.startswith("\n**Gate failed**"))

    def test_a_blank_line_before_the_block(self):
        # Found by review: appended straight after a paragraph, the verdict merged with it.
        path = self.write("summary.md", "an earlier step's paragraph")
        code, out, err, summary = self.run_with_summary(*EXAMPLE_FILES, "--step-summary",
                                                        "--max-drop", "0.5",
                                                        "--baseline", example("baseline.json"),
                                                        value=path)
        self.assertEqual(code, 0, err)
        self.assertTrue(summary.startswith("an earlier step's paragraph\n\n**Gate passed**\n"),
                        summary[:80])
        self.assertTrue(summary.endswith("\n\n"))
        self.write("summary.md", "a paragraph ending its line\n")
        summary = self.run_with_summary(*EXAMPLE_FILES, "--step-summary", value=path)[3]
        self.assertTrue(summary.startswith("a paragraph ending its line\n\n**rag\\_eval "),
                        summary[:80])

    def test_an_unusable_summary_file_is_an_error_before_any_output(self):
        # Found by review: the outputs were written, then the append failed with exit 2.
        out_path = os.path.join(self.tmp, "o.json")
        saved = os.path.join(self.tmp, "nb.json")
        code, out, err, summary = self.run_with_summary(
            *EXAMPLE_FILES, "--save-baseline", saved, "-o", out_path, "--step-summary",
            value=os.path.join(self.tmp, "nodir", "s.md"))
        self.assertEqual(code, 2)
        self.assertEqual(err.splitlines(), ["rag-eval: error: $GITHUB_STEP_SUMMARY %s: cannot "
                                            "append: No such file or directory"
                                            % os.path.join(self.tmp, "nodir", "s.md")])
        self.assertFalse(os.path.exists(out_path))
        self.assertFalse(os.path.exists(saved))

    def test_a_failed_append_at_the_end_is_a_warning(self):
        # Found by review: the summary is a log, not an artifact: the exit code stands.
        out_path = os.path.join(self.tmp, "o.json")
        real = rag_eval._append_step_summary

        def fail_when_writing(path, text):
            if text is not None:
                raise rag_eval.EvalError("$GITHUB_STEP_SUMMARY %s: cannot append: disk full"
                                         % path)
            return real(path, text)
        with unittest.mock.patch.object(rag_eval, "_append_step_summary", fail_when_writing):
            code, out, err, summary = self.run_with_summary(
                *EXAMPLE_FILES, "--baseline", example("baseline.json"), "-o", out_path,
                "--step-summary")
        self.assertEqual(code, 1, err)
        self.assertIn("rag-eval: warning: $GITHUB_STEP_SUMMARY %s: cannot append: disk full\n"
                      % os.path.join(self.tmp, "summary.md"), err)
        self.assertTrue(os.path.exists(out_path))

    def test_a_usage_error_is_one_escaped_line(self):
        # Found by review: argparse's errors never reached the summary.
        code, out, err, summary = self.run_with_summary(*EXAMPLE_FILES, "--step-summary",
                                                        "--max-drpo", "0.1")
        self.assertEqual(code, 2)
        self.assertEqual(err, "rag-eval: error: unrecognized arguments: --max-drpo 0.1 "
                              "(see --help)\n")
        self.assertEqual(summary, "\n**rag-eval error**: unrecognized arguments: --max-drpo "
                                  "0.1 (see --help)\n\n")
        code, out, err, summary = self.run_with_summary(*EXAMPLE_FILES, "--max-drpo", "0.1",
                                                        value=os.path.join(self.tmp, "s2.md"))
        self.assertEqual((code, summary), (2, None))     # not asked for: nothing appended

    def test_an_internal_error_is_one_line_too(self):
        with unittest.mock.patch.object(rag_eval, "_run_cli", side_effect=ZeroDivisionError("x")):
            code, out, err, summary = self.run_with_summary(*EXAMPLE_FILES, "--step-summary")
        self.assertEqual(code, 2)
        self.assertEqual(summary.strip(), "**rag-eval error**: internal error (a bug in "
                         "rag\\_eval, please report it): ZeroDivisionError: x; rerun with "
                         "--debug or RAG\\_EVAL\\_DEBUG=1 to see the traceback")

    def test_the_cap_applies(self):
        qrels = {"q%d" % i: {"d": 1} for i in range(3000)}
        run = {q: ["d"] for q in qrels}
        with unittest.mock.patch.dict(os.environ, {"GITHUB_STEP_SUMMARY":
                                                   os.path.join(self.tmp, "s.md")}):
            code, out, err = self.report_of("--per-query", "--step-summary", "--max-bytes",
                                            "5000", qrels=qrels, run=run)
        self.assertEqual(code, 0, err)
        summary = read_text(os.path.join(self.tmp, "s.md"))
        self.assertLessEqual(len(summary.encode()), 5000 + 2)   # + the blank lines around it
        self.assertIn("rows left out** to keep this under --max-bytes 5000", summary)

    def test_unset_variable_is_an_error(self):
        for value in ("", None):
            with self.subTest(value=value):
                env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
                if value is not None:
                    env["GITHUB_STEP_SUMMARY"] = value
                with unittest.mock.patch.dict(os.environ, env, clear=True):
                    self.assertBad(extra=("--step-summary",),
                                   expect="--step-summary: $GITHUB_STEP_SUMMARY is not set")

    def test_an_input_error_is_one_escaped_line(self):
        run = self.write("r|<b>.json", "{")
        code, out, err, summary = self.run_with_summary(example("qrels.json"), run,
                                                        "--step-summary")
        self.assertEqual(code, 2)
        self.assertEqual(len(err.splitlines()), 1)
        lines = [line for line in summary.splitlines() if line]
        self.assertEqual(len(lines), 1)
        self.assertTrue(lines[0].startswith("**rag-eval error**: "), lines)
        self.assertIn("r\\|&lt;b&gt;.json", lines[0])


class OutputFormatTest(TempDir, unittest.TestCase):
    """-o FILE with no --format: the extension picks the format."""

    def test_extension_picks_the_format(self):
        expected = {"r.json": "{", "r.JSON": "{", "r.md": "**Gate failed**",
                    "r.markdown": "**Gate failed**", "r.txt": "rag_eval ", "r": "rag_eval ",
                    # html only once a renderer exists for it (another branch adds one)
                    "r.html": "<" if "html" in rag_eval._RENDERERS else "rag_eval "}
        for name, start in expected.items():
            with self.subTest(name=name):
                path = os.path.join(self.tmp, name)
                code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", example("baseline.json"),
                                         "-o", path)
                self.assertEqual((code, out), (1, ""), err)
                self.assertTrue(read_text(path).startswith(start), read_text(path)[:80])
                os.unlink(path)

    def test_format_wins_over_the_extension(self):
        path = os.path.join(self.tmp, "r.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "text", "-o", path)
        self.assertEqual(code, 0, err)
        self.assertTrue(read_text(path).startswith("rag_eval "))


class LoadReportTest(TempDir, unittest.TestCase):
    """load_report / Report.from_dict read a JSON report back: the report's
    fields come back, so render_json writes the same bytes again; the results
    of the run (gate, comparison, sweep, elapsed_seconds) are not read."""

    def test_unjudged_bounds_read_back_gate(self):
        # Found by review: load_report of a report written with --unjudged-bounds
        # --per-query, then gate(), raised KeyError 'judged_per_query' (the JSON
        # keeps the bounds, not judged@k nor the unjudged ids); and an inverted
        # bound [0.9, 0.1] was accepted.
        path = os.path.join(self.tmp, "r.json")
        code, _, err = run_cli(*EXAMPLE_FILES, "--unjudged-bounds", "--per-query", "--format",
                               "json", "-o", path)
        self.assertEqual(code, 0, err)
        loaded = rag_eval.load_report(path)
        for baseline in ({"recall@5": 0.7}, {"recall@5": 0.6}):
            result = rag_eval.gate(loaded, baseline)
            self.assertEqual(result.passed, baseline["recall@5"] == 0.6)
            self.assertEqual(bool(rag_eval.assert_no_regression(loaded, {"recall@5": 0.6})), True)
        with open(path) as handle:
            doc = json.load(handle)
        doc["unjudged_bounds"]["mean"]["recall@5"] = [0.9, 0.1]
        with self.assertRaisesRegex(rag_eval.EvalError, r"unjudged_bounds mean 'recall@5': the "
                                                        r"lower bound 0\.9 is above the upper 0\.1"):
            rag_eval.Report.from_dict(doc)

    def round_trip(self, report, result=None):
        text = rag_eval.render_json(report, result, per_query=True)
        path = self.write("report.json", text)
        loaded = rag_eval.load_report(path)
        self.assertEqual(rag_eval.render_json(loaded, result, per_query=True), text)
        for field in ("measures", "mean", "per_query", "n", "warnings", "unscored", "missing",
                      "skipped", "abstention", "ties", "rel", "unlabelled", "answerability",
                      "min_score", "mapping", "average"):
            self.assertEqual(getattr(loaded, field), getattr(report, field), field)
        return loaded

    def test_the_bundled_example_and_its_gate(self):
        report = example_report()
        result = rag_eval.gate(report, rag_eval.load_baseline(example("baseline.json")))
        loaded = self.round_trip(report, result)
        self.assertEqual(loaded.mean["mrr@5"], 0.5)
        self.assertEqual(rag_eval.render_text(loaded, result, per_query=True),
                         rag_eval.render_text(report, result, per_query=True))
        self.assertEqual(rag_eval.render_markdown(loaded, result, per_query=True),
                         rag_eval.render_markdown(report, result, per_query=True))
        # The gate of the loaded report is the gate of the report.
        self.assertEqual(rag_eval.gate(loaded, {"mrr@5": 0.55}),
                         rag_eval.gate(report, {"mrr@5": 0.55}))

    def test_a_loaded_reports_judge_slices_never_pass_on_a_lost_query(self):
        # Found by review: q1 (topic a, score 0.0) leaves the score file and q2 (a)
        # falls 1.0 -> 0.9.  Fresh: a is gated on q2 alone, 1.0 -> 0.9, regressed.
        # Read back from JSON, a's means went 0.5 -> 0.9: that passed; so did q1
        # moving to topic b, or q1 and q3 swapping topics.  Written with
        # --per-query, a report keeps each query's slices and gates as the run
        # does; without, it records which queries each mean is over, and a row
        # whose queries changed is missing.
        def report(rows):
            scores = rag_eval.load_scores(io.StringIO("".join(
                json.dumps({"query_id": q, "f": v}) + "\n" for q, _, v in rows)))
            return rag_eval.evaluate_scores(scores, queries={
                q: {"slices": {"topic": [t]}} for q, t, _ in rows}, by=("topic",))
        path = os.path.join(self.tmp, "b.json")
        rag_eval.save_baseline(report([("q1", "a", 0.0), ("q2", "a", 1.0), ("q3", "b", 0.5),
                                       ("q4", "b", 0.5)]), path)
        baseline = rag_eval.load_baseline(path)
        options = dict(max_drop=0.05, slice_max_drop={"topic=a": 0})
        left = report([("q2", "a", 0.9), ("q3", "b", 0.5), ("q4", "b", 0.5)])
        moved = report([("q1", "b", 0.0), ("q2", "a", 0.9), ("q3", "b", 0.5), ("q4", "b", 0.5)])
        swapped = report([("q1", "b", 0.6), ("q2", "a", 0.9), ("q3", "a", 1.0), ("q4", "b", 0.5)])
        # Without per-query values: left lost q1 (overall and a changed, b did not);
        # moved and swapped kept the overall's queries (compared on their means:
        # (0 + .9 + .5 + .5)/4 = 0.475 vs 0.5, within 0.05; 0.75, improved) and
        # changed both slices.
        means_only = [{None: "missing", "topic=a": "missing", "topic=b": "unchanged"},
                      {None: "dropped within tolerance", "topic=a": "missing",
                       "topic=b": "missing"},
                      {None: "improved", "topic=a": "missing", "topic=b": "missing"}]
        for now, expected in zip((left, moved, swapped), means_only):
            fresh = rag_eval.gate(now, baseline, **options)
            self.assertFalse(fresh.passed)
            self.assertEqual(fresh.changes[1].status, "regressed")        # topic=a: q2
            for per_query in (True, False):
                with self.subTest(now=now.mean, per_query=per_query):
                    loaded = rag_eval.load_report(io.StringIO(rag_eval.render_json(
                        now, per_query=per_query)))
                    result = rag_eval.gate(loaded, baseline, **options)
                    self.assertFalse(result.passed)
                    if per_query:
                        self.assertEqual(result.changes, fresh.changes)
                    else:
                        self.assertEqual({c.slice: c.status for c in result.changes},
                                         expected)

    def test_a_report_without_slices_says_why_the_baselines_are_missing(self):
        # Found by review: written without --by and read back, the same data failed
        # its gate with every slice MISSING and no note.  With --per-query it keeps
        # each query's slices, so they are gated as the run's; without, it has
        # none: they are missing, and a note says why.
        def report(by):
            scores = rag_eval.load_scores(io.StringIO("".join(
                json.dumps({"query_id": q, "f": v}) + "\n" for q, v in (("q1", 0.2), ("q2", 0.8)))))
            return rag_eval.evaluate_scores(scores, queries={
                "q1": {"slices": {"topic": ["a"]}}, "q2": {"slices": {"topic": ["b"]}}}, by=by)
        path = os.path.join(self.tmp, "b.json")
        rag_eval.save_baseline(report(()), path)
        for per_query, slices in ((True, "unchanged"), (False, "missing")):
            loaded = rag_eval.load_report(io.StringIO(rag_eval.render_json(
                report(()), per_query=per_query)))
            result = rag_eval.gate(loaded, rag_eval.load_baseline(path))
            self.assertEqual({c.slice: c.status for c in result.changes},
                             {None: "unchanged", "topic=a": slices, "topic=b": slices})
            self.assertEqual("the baseline holds slices and the report none: they are missing "
                             "(score with the query metadata and --by, or write the report "
                             "with --by)" in result.notes, not per_query)

    def test_slices_unit_measures_answerability(self):
        # q2 stated unanswerable abstains (its one id is cut by min_score 0.1);
        # recall(unit=doc) counts documents (doc#chunk), abstained only q2: n differs.
        report = rag_eval.evaluate(
            {"q1": {"docA": 1}, "q2": {}, "q3": {"docB": 2}},
            {"q1": {"docA#1": 0.9, "x#2": 0.5}, "q2": {"y#1": 0.05},
             "q3": {"z#1": 0.4, "docB#3": 0.3}},
            k=2, measures="recall(unit=doc),abstained", doc_sep="#", min_score=0.1,
            queries={"q2": {"answerable": False}, "q1": {"slices": {"src": ["real"]}},
                     "q3": {"slices": {"src": ["synthetic"]}}}, by="src")
        self.assertEqual(report.n, {"recall(unit=doc)@2": 2, "abstained": 1})
        loaded = self.round_trip(report)
        self.assertEqual(loaded.slices, report.slices)
        self.assertEqual(loaded.by, ("src",))
        self.assertEqual(loaded.answerability, {"answerable": 2, "unanswerable": 1,
                                                "unstated": 0})
        self.assertIn("| real | 1 | 0 | 1.0000 | - |", rag_eval.render_markdown(loaded))

    def test_hold_out_and_unjudged_bounds(self):
        report = sliced_report(holdout="split=holdout", by=["source", "tag"],
                               reveal_holdout=True, unjudged_bounds=True)
        self.assertIsNotNone(report.unjudged)
        loaded = self.round_trip(report)
        self.assertEqual(loaded.holdout.mean, report.holdout.mean)
        self.assertEqual(loaded.holdout.per_query, report.holdout.per_query)
        self.assertEqual(loaded.unjudged["mean"], report.unjudged["mean"])
        self.assertEqual(loaded.by, ("source", "tag"))
        rag_eval.render_text(loaded, per_query=True)      # renders without its membership

    def test_the_results_of_the_run_are_not_read(self):
        # Found by review: the README said every field the JSON holds comes back.
        path = os.path.join(self.tmp, "r.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--per-query", "--baseline",
                                 example("baseline.json"), "--compare", example("run.json"),
                                 "--timing", "--resamples", "100", "-o", path)
        self.assertEqual(code, 1, err)
        written = json.loads(read_text(path))
        self.assertTrue({"gate", "comparison", "elapsed_seconds"} <= set(written))
        again = json.loads(rag_eval.render_json(rag_eval.load_report(path), per_query=True))
        self.assertEqual(again, {k: v for k, v in written.items()
                                 if k not in ("gate", "comparison", "elapsed_seconds")})

    def test_from_the_command_line(self):
        path = os.path.join(self.tmp, "r.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--per-query", "--meta", "run.id=7",
                                 "-o", path)
        self.assertEqual(code, 0, err)
        loaded = rag_eval.load_report(path)
        self.assertEqual(loaded.meta, {"run.id": "7"})
        self.assertEqual(loaded.inputs["run"]["path"], example("run.json"))
        self.assertEqual(rag_eval.render_json(loaded, per_query=True), read_text(path))

    def test_malformed_fields_are_one_line_naming_the_field(self):
        # Found by review: mean 7.0 loaded and passed a gate at 0.9; the others loaded,
        # then failed later with a raw TypeError or KeyError; a string became a tuple
        # of its characters.
        report = sliced_report(holdout="split=holdout", by=["source"], reveal_holdout=True,
                               unjudged_bounds=True)
        good = json.loads(rag_eval.render_json(report, per_query=True))
        some = next(iter(good["per_query"]))
        cases = [(dict(good, mean=dict(good["mean"], **{"recall@5": 7.0})),
                  "mean: 'recall@5' must be a number in [0, 1], got 7.0"),
                 (dict(good, mean={"nonsense@@": 0.5}), "mean: "),
                 (dict(good, per_query={some: {"recall@5": -1}}),
                  "per_query %r: 'recall@5' must be a number in [0, 1], got -1" % some),
                 (dict(good, slices={"x=y": 1}), "slices 'x=y': expected an object, got 1"),
                 (dict(good, slices={"xy": good["slices"]["source=real"]}),
                  "slices: 'xy' is not a slice name field=value"),
                 (dict(good, answerability=[1]), "answerability: expected an object, got [1]"),
                 (dict(good, holdout=dict(good["holdout"], queries="3")),
                  "holdout: queries, unscored and missing_from_run must be counts"),
                 (dict(good, n={"recall@5": 3}), "n: expected a count for each of the measures"),
                 (dict(good, measures=["nonsense@@"]), "measures: "),
                 (dict(good, unjudged_bounds={"mean": {"recall@5": [1]}}),
                  "unjudged_bounds mean 'recall@5': expected [lower, upper], got [1]"),
                 (dict(good, unjudged_bounds={"mean": {"recall@5": [0.1, 2]}}),
                  "unjudged_bounds mean: 'recall@5' must be a number in [0, 1], got 2"),
                 (dict(good, inputs=[1]), "inputs: expected an object, got [1]"),
                 (dict(good, warnings="abc"), "warnings: expected a list, got 'abc'"),
                 (dict(good, unscored=[1]), "unscored: expected a string, got 1"),
                 (dict(good, abstention={"abstained": -1}),
                  "abstention 'abstained': expected a count, got -1"),
                 (dict(good, ties={"per_query": {"q": "x"}}), "ties per_query 'q': expected a count"),
                 (dict(good, average="best"), "average must be one of scored, trec_eval"),
                 (dict(good, meta={"a": 1}), "meta"),
                 (dict(good, min_score="x"), "min_score")]
        self.assertEqual(rag_eval.render_json(rag_eval.Report.from_dict(good), per_query=True),
                         rag_eval.render_json(report, per_query=True))
        for number, (data, expect) in enumerate(cases):
            with self.subTest(expect=expect):
                path = self.write("bad%d.json" % number, json.dumps(data))
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.load_report(path)
                message = str(caught.exception)
                self.assertTrue(message.startswith(path + ": "), message)
                self.assertIn(expect, message)
                self.assertEqual(len(message.splitlines()), 1)
        with self.assertRaises(rag_eval.EvalError):   # the gate never sees the 7.0
            rag_eval.assert_no_regression(rag_eval.Report.from_dict(cases[0][0]),
                                          {"recall@5": 0.9})

    def test_without_per_query_values(self):
        # Found by review: "queries": 3 came back as 0, and a gate then called every
        # query of a per-query baseline removed.
        path = os.path.join(self.tmp, "r.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "-o", path)
        self.assertEqual(code, 0, err)
        loaded = rag_eval.load_report(path)
        self.assertEqual((loaded.per_query, loaded.scored_count), ({}, 3))
        self.assertEqual(rag_eval.render_json(loaded), read_text(path))
        self.assertTrue(repr(loaded).startswith("<Report 3 queries, 1 unscored: "), repr(loaded))
        self.assertTrue(rag_eval.render_text(loaded).startswith(
            "rag_eval %s: 3 queries scored; 1 unscored" % rag_eval.__version__))
        # Against a baseline with per-query values: the means alone, as a means-only baseline.
        report = example_report()
        result = rag_eval.gate(loaded, rag_eval.load_baseline(io.StringIO(
            json.dumps(rag_eval.baseline_dict(report)))))
        means_only = rag_eval.gate(report, rag_eval.Baseline(report.mean))
        self.assertEqual((result.queries_removed, result.queries_added, result.query_drops),
                         ((), (), None))
        # Its record of which 3 queries the means are over matches the baseline's.
        self.assertEqual(result.changes, tuple(c._replace(n=3) for c in means_only.changes))
        self.assertEqual(result.notes[0], "compared on the means alone (the means of the "
                         "same 3 queries): mrr@5, ndcg@5, recall@5, success@5")
        self.assertNotIn("per_query", rag_eval.baseline_dict(loaded))
        with open(path) as handle:
            data = json.load(handle)
        for bad in (-1, "3", True):
            with self.subTest(queries=bad):
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.Report.from_dict(dict(data, queries=bad))
                self.assertIn("queries: expected a count", str(caught.exception))

    def test_a_loaded_report_with_slices_is_no_baseline(self):
        # Found by review: save_baseline(load_report(f)) of a report written with --by
        # failed with an AttributeError (no membership), and one with a hold-out wrote a
        # baseline that load_baseline refused (no members_sha256).  Written with
        # --per-query, a JSON report keeps each query's slices and the hold-out's hash:
        # its baseline is the run's.  Without, it keeps neither.
        path = os.path.join(self.tmp, "base.json")
        kept = ("mean", "per_query", "slices", "membership", "holdout", "query_sets")
        for options in ({"by": ["source"]}, {"holdout": "split=holdout"},
                        {"holdout": "split=holdout", "by": ["source"]}):
            with self.subTest(options=options):
                report = sliced_report(**options)
                loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
                    report, per_query=True)))
                saved = rag_eval.baseline_dict(loaded)
                fresh = rag_eval.baseline_dict(report)
                self.assertEqual({key: saved.get(key) for key in kept},
                                 {key: fresh.get(key) for key in kept})
        for options, expect in (
                ({"by": ["source"]}, "which does not keep the queries of each slice (only "
                                     "their means), and a baseline holds it: save the baseline "
                                     "from the evaluation itself (--save-baseline, or "
                                     "save_baseline(evaluate(...))), or drop the slices"),
                ({"holdout": "split=holdout", "by": ["source"]},
                 "which does not keep the queries of each slice (only their means)")):
            with self.subTest(options=options, per_query=False):
                report = sliced_report(**options)
                loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
                    report)))
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.save_baseline(loaded, path)
                message = str(caught.exception)
                self.assertIn("this report was read back from JSON, " + expect, message)
                self.assertEqual(len(message.splitlines()), 1)
                self.assertFalse(os.path.exists(path))
                with self.assertRaisesRegex(rag_eval.EvalError, "read back from JSON"):
                    rag_eval.assert_no_regression(report, loaded)
        # As the message says: without its slices, the overall alone is saved and gated.
        loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
            sliced_report(by=["source"]))))
        rag_eval.save_baseline(loaded._replace(slices=None, by=()), path)
        baseline = rag_eval.load_baseline(path)
        self.assertEqual((baseline.slices, baseline.membership), (None, None))

    def test_a_revealed_hold_out_read_back_without_per_query_values(self):
        # Found by the gate fuzzer (issue 22): a JSON report written with
        # --reveal-holdout and without --per-query keeps the hold-out's ids but
        # not its values; save_baseline(load_report(f)) raised AttributeError.
        # Its baseline keeps the hold-out's means and record, as an unrevealed one.
        report = sliced_report(holdout="split=holdout", reveal_holdout=True)
        loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(report)))
        baseline = saved_baseline(self, loaded)
        self.assertIsNone(baseline.holdout.per_query)
        self.assertEqual(baseline.holdout.mean, report.holdout.mean)
        result = rag_eval.gate(report, baseline)
        self.assertTrue(result.passed, result.notes)
        self.assertEqual({c.n for c in result.changes if c.slice == "split=holdout"},
                         {report.holdout.queries})

    def test_the_command_line_reads_no_report_as_an_input(self):
        # The command line saves a baseline only from its own evaluation: a JSON report
        # where qrels, a run, a score file or query metadata belong is refused in one
        # line naming the file, and nothing is written.
        report = self.write("report.json", rag_eval.render_json(
            sliced_report(by=["source"]), per_query=True))
        for where in ("qrels", "run"):
            with self.subTest(where=where):
                self.assertBad(**{where: report}, expect="report.json")
        self.assertBad(extra=("--queries", report), expect="report.json")
        saved = os.path.join(self.tmp, "saved.json")
        code, out, err = run_cli("--scores", report, "--save-baseline", saved)
        self.assertEqual((code, out), (rag_eval.EXIT_ERROR, ""))
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("report.json", err)
        self.assertFalse(os.path.exists(saved))

    def test_a_loaded_report_gates_its_slices_as_the_run_does(self):
        # The baseline saved by the evaluation (with its slices' queries); the later
        # run's JSON report read back and gated in Python.  With --per-query it
        # keeps each query's slices (every field, not only --by): its gate is the
        # run's.  Without, each slice is compared on its means, its record of
        # which queries they are over matching the baseline's.
        baseline = saved_baseline(self, sliced_report(by=["source"]))
        fields = ["source", "split", "tag"]

        def loaded(run, by=fields, per_query=True):
            report = sliced_report(run=run, by=by)
            return rag_eval.load_report(self.write("r.json", rag_eval.render_json(
                report, per_query=per_query))), report

        same, report = loaded(None)
        for mode in ("tolerance", "significant"):
            result = rag_eval.gate(same, baseline, mode=mode)
            self.assertTrue(result.passed, result)
            self.assertEqual(len(result.changes), 12)      # (overall + 5 slices) x 2
            self.assertEqual(result.changes, rag_eval.gate(report, baseline, mode=mode).changes)
        # Written with --by source only: the other fields' slices are gated all the same.
        self.assertTrue(rag_eval.gate(loaded(None, ["source"])[0], baseline).passed)
        # r1 loses e: source=real (r1, r2, h1) recall@2 from (1 + 1 + 1)/3 = 1 to
        # (0 + 1 + 1)/3 = 2/3, mrr@2 from (1 + 1/2 + 1/2)/3 = 2/3 to (0 + 1/2 + 1/2)/3
        # = 1/3; source=synthetic unchanged.
        for per_query in (True, False):
            worse, report = loaded(dict(SLICED_RUN, r1=["x", "y"]), per_query=per_query)
            for mode in ("tolerance", "significant"):
                result = rag_eval.gate(worse, baseline, mode=mode)
                self.assertFalse(result.passed)
                rows = {(c.slice, c.measure): c for c in result.changes
                        if c.slice in ("source=real", "source=synthetic")}
                self.assertEqual({key: c.status for key, c in rows.items()},
                                 {("source=real", "mrr@2"): "regressed",
                                  ("source=real", "recall@2"): "regressed",
                                  ("source=synthetic", "mrr@2"): "unchanged",
                                  ("source=synthetic", "recall@2"): "unchanged"})
                self.assertAlmostEqual(rows["source=real", "recall@2"].current, 2 / 3, places=12)
                self.assertAlmostEqual(rows["source=real", "mrr@2"].current, 1 / 3, places=12)
                self.assertAlmostEqual(rows["source=real", "mrr@2"].baseline, 2 / 3, places=12)
                self.assertEqual(rows["source=real", "mrr@2"].n, 3)
                # The evaluation's own gate says the same of these rows.
                own = {(c.slice, c.measure): c.status for c in rag_eval.gate(
                    report, baseline, mode=mode).changes if (c.slice, c.measure) in rows}
                self.assertEqual(own, {key: c.status for key, c in rows.items()})

    def test_a_loaded_report_with_a_hold_out_gates_it_on_its_means(self):
        # Found by review: a loaded report (no members_sha256) said the hold-out
        # changed since the baseline ("2 -> 2 queries") on an unchanged report.
        # It keeps the hash now, and the record of its scored queries: the
        # hold-out is compared on its means over the same 2 queries.
        baseline = saved_baseline(self, sliced_report(holdout="split=holdout"))

        def gated(run=None):
            report = sliced_report(run=run, holdout="split=holdout", by=["source", "tag"])
            loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
                report, per_query=True)))
            return rag_eval.gate(loaded, baseline)

        result = gated()
        self.assertTrue(result.passed, result)
        self.assertFalse(any("changed since the baseline (" in n for n in result.notes))
        self.assertIn("compared on the means alone (the means of the same 2 queries): "
                      "split=holdout: mrr@2, split=holdout: recall@2", result.notes)
        # h1 loses g: the hold-out (h1, h2) recall@2 from (1 + 0)/2 = 1/2 to 0.
        result = gated(dict(SLICED_RUN, h1=["x", "y"]))
        held = [c for c in result.changes if c.slice == "split=holdout"]
        self.assertEqual({(c.measure, c.status, c.baseline, c.current, c.n) for c in held},
                         {("recall@2", "regressed", 0.5, 0.0, 2),
                          ("mrr@2", "regressed", 0.25, 0.0, 2)})
        self.assertFalse(result.passed)

    def test_a_loaded_report_with_a_revealed_hold_out_gates(self):
        # Found by the fuzzer: gate() of a loaded report whose hold-out was revealed
        # failed with KeyError 'all' (the ids of its members).
        report = sliced_report(holdout="split=holdout", reveal_holdout=True, by=["source", "tag"])
        baseline = saved_baseline(self, report)
        loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
            report, per_query=True)))
        self.assertEqual(loaded.holdout.ids["all"], ("h1", "h2"))
        result = rag_eval.gate(loaded, baseline)
        self.assertEqual([c.status for c in result.changes if c.slice == "split=holdout"],
                         ["unchanged", "unchanged"])
        self.assertEqual(result.queries_removed, ())
        # Written without --per-query: its gate (means only) failed with an
        # AttributeError (the hold-out's per-query values were None).
        loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(report)))
        self.assertIsNone(loaded.holdout.per_query)
        result = rag_eval.gate(loaded, baseline)
        self.assertTrue(result.passed, result)
        # h1 loses g: the hold-out recall@2 from (1 + 0)/2 = 1/2 to 0, on its means.
        worse = sliced_report(run=dict(SLICED_RUN, h1=["x", "y"]), holdout="split=holdout",
                              reveal_holdout=True, by=["source", "tag"])
        for per_query in (True, False):
            loaded = rag_eval.load_report(self.write("r.json", rag_eval.render_json(
                worse, per_query=per_query)))
            held = {c.measure: (c.status, c.baseline, c.current)
                    for c in rag_eval.gate(loaded, baseline).changes if c.slice == "split=holdout"}
            self.assertEqual(held, {"recall@2": ("regressed", 0.5, 0.0),
                                    "mrr@2": ("regressed", 0.25, 0.0)})

    def test_slices_all_held_out_come_back(self):
        # Found by the fuzzer: --by split with --holdout split=holdout writes "slices": {}
        # (every split slice is held out); read back, render_json dropped the key.
        report = sliced_report(holdout="split=holdout", by=["split"])
        text = rag_eval.render_json(report, per_query=True)
        self.assertEqual(json.loads(text)["slices"], {})
        loaded = rag_eval.load_report(self.write("r.json", text))
        self.assertEqual(rag_eval.render_json(loaded, per_query=True), text)

    def test_a_loaded_judge_score_report_gates_its_slices(self):
        # A loaded per-query score report keeps each query's slices: every row is
        # paired as the run's (a review found them gated on their means, where a
        # lost, added or moved query let a slice pass that the run itself fails).
        self.write("m.jsonl", "".join(json.dumps({"query_id": q, "slices": {"src": src}}) + "\n"
                                      for q, src in (("q1", "a"), ("q2", "b"), ("q3", "a"),
                                                     ("q4", "b"))))
        base = os.path.join(self.tmp, "base.json")

        def scores(q2, *argv):
            rows = (("q1", 0.9), ("q2", q2), ("q3", 0.7), ("q4", 0.6))
            path = self.write("s.jsonl", "".join(json.dumps({"query_id": q, "f": v}) + "\n"
                                                 for q, v in rows))
            out = os.path.join(self.tmp, "r.json")
            code, _, err = run_cli("--scores", path, "--queries", os.path.join(self.tmp, "m.jsonl"),
                                   "--by", "src", "--format", "json", "--per-query", "-o", out,
                                   *argv)
            self.assertEqual(code, 0, err)
            return rag_eval.load_report(out)

        scores(0.5, "--save-baseline", base)
        baseline = rag_eval.load_baseline(base)
        for mode in ("tolerance", "significant"):
            result = rag_eval.gate(scores(0.5), baseline, mode=mode)
            self.assertTrue(result.passed, result.notes)
            self.assertEqual({c.slice: (c.status, c.n) for c in result.changes},
                             {None: ("unchanged", 4), "src=a": ("unchanged", 2),
                              "src=b": ("unchanged", 2)})
        # q2 0.5 -> 0.3: overall from 2.7/4 = 0.675 to 2.5/4 = 0.625, regressed;
        # src=b (q2, q4) from 0.55 to 0.45.
        result = rag_eval.gate(scores(0.3), baseline)
        got = {c.slice: (c.status, c.baseline, c.current) for c in result.changes}
        self.assertEqual({s: v[0] for s, v in got.items()},
                         {None: "regressed", "src=a": "unchanged", "src=b": "regressed"})
        self.assertAlmostEqual(got[None][1], 0.675, places=12)
        self.assertAlmostEqual(got[None][2], 0.625, places=12)
        self.assertAlmostEqual(got["src=b"][2], 0.45, places=12)
        # q2 lost its score: every row is compared on the queries both sides
        # scored; src=a (q1, q3) and the overall (q1, q3, q4) are unchanged, src=b
        # on q4 alone; q2 is named removed.
        rows = [json.dumps({"query_id": q, "f": v}) for q, v in (("q1", 0.9), ("q2", None),
                                                                  ("q3", 0.7), ("q4", 0.6))]
        self.write("s.jsonl", "\n".join(rows) + "\n")
        out = os.path.join(self.tmp, "lost.json")
        code, _, err = run_cli("--scores", os.path.join(self.tmp, "s.jsonl"), "--queries",
                               os.path.join(self.tmp, "m.jsonl"), "--by", "src",
                               "--allow-missing-scores", "--format", "json", "--per-query",
                               "-o", out)
        self.assertEqual(code, 0, err)
        result = rag_eval.gate(rag_eval.load_report(out), baseline)
        self.assertTrue(result.passed, result.notes)
        self.assertEqual({c.slice: (c.status, c.n, c.removed) for c in result.changes},
                         {None: ("unchanged", 3, 1), "src=a": ("unchanged", 2, 0),
                          "src=b": ("unchanged", 1, 1)})
        self.assertEqual(result.queries_removed, ("q2",))
        # --fail-on-removed: a frozen test set fails on it.
        frozen = rag_eval.gate(rag_eval.load_report(out), baseline, fail_on_removed=True)
        self.assertFalse(frozen.passed)
        self.assertEqual(frozen.removed_failing, 1)

    def test_not_a_report_is_one_line_naming_the_file(self):
        saved = os.path.join(self.tmp, "base.json")
        rag_eval.save_baseline(example_report(), saved)
        good = json.loads(rag_eval.render_json(example_report(), per_query=True))
        cases = [(self.write("a.json", "{"), "a.json:1:2: invalid JSON"),
                 (self.write("b.json", "[1]"), "b.json: not a rag_eval JSON report"),
                 (saved, "base.json: a baseline (read it with load_baseline)"),
                 (self.write("c.json", json.dumps(dict(good, mean={"mrr@5": "x"}))),
                  "c.json: mean: 'mrr@5' must be a number in [0, 1], got 'x'"),
                 (self.write("d.json", json.dumps({k: v for k, v in good.items()
                                                   if k != "warnings"})),
                  "d.json: not a rag_eval JSON report (--format json): KeyError"),
                 (os.path.join(self.tmp, "missing.json"), "missing.json")]
        for path, expect in cases:
            with self.subTest(path=path):
                with self.assertRaises(rag_eval.EvalError) as caught:
                    rag_eval.load_report(path)
                self.assertIn(expect, str(caught.exception))
                self.assertEqual(len(str(caught.exception).splitlines()), 1)


class NotebookReprTest(unittest.TestCase):
    """__repr__ shows counts and means (never the per-query table);
    _repr_markdown_ the numbers in a Markdown table."""

    def test_report(self):
        report = example_report()
        self.assertEqual(repr(report), "<Report 3 queries, 1 unscored: recall@5=0.6667 "
                                       "success@5=0.6667 mrr@5=0.5000 ndcg@5=0.5095>")
        markdown = report._repr_markdown_()
        self.assertIn("| mean | 0.6667 | 0.6667 | 0.5000 | 0.5095 |", markdown)
        self.assertEqual(markdown, rag_eval.render_markdown(report))

    def test_short_for_many_queries(self):
        qrels = {"q%d" % i: {"d": 1} for i in range(50000)}
        run = {q: ["d"] if i % 4 else ["x", "d"] for i, q in enumerate(qrels)}
        report = rag_eval.evaluate(qrels, run, k=[1, 5, 10],
                                   measures="recall,mrr,ndcg,success")
        text = repr(report)
        self.assertLess(len(text), 200)
        self.assertTrue(text.startswith("<Report 50000 queries: recall@1=0.7500 recall@5=1.0000"))
        self.assertTrue(text.endswith(" (+4 more)>"), text)
        self.assertLess(len(report._repr_markdown_().encode()), rag_eval.DEFAULT_MAX_BYTES + 1)

    def test_gate_result(self):
        report = example_report()
        result = rag_eval.gate(report, rag_eval.load_baseline(example("baseline.json")))
        self.assertEqual(repr(result), "<GateResult FAILED: 2 regressions of 4 (max drop 0.02) "
                                       "mrr@5, recall@5>")
        self.assertEqual(repr(rag_eval.gate(report, {"mrr@5": 0.5})),
                         "<GateResult PASSED: 0 regressions of 1 (max drop 0.02)>")
        # A measure the report lacks is missing, counted apart (as the verdict does).
        self.assertEqual(repr(rag_eval.gate(report, {"mrr@5": 0.9, "map@5": 0.1})),
                         "<GateResult FAILED: 1 regression, 1 missing of 2 (max drop 0.02) "
                         "map@5, mrr@5>")
        markdown = result._repr_markdown_()
        self.assertTrue(markdown.startswith("**Gate failed**: 2 regressions: mrr@5, recall@5\n"))
        self.assertIn("| recall@5 | 0.7000 | 0.6667 | -0.033333333 | - | REGRESSED |", markdown)

    def test_comparison(self):
        report = example_report()
        other = example_report(k=1)
        other = other._replace(per_query={q: {"recall@5": v["recall@1"]}
                                          for q, v in other.per_query.items()},
                               mean={"recall@5": other.mean["recall@1"]},
                               measures=("recall@5",))
        comparison = rag_eval.compare(report, other, resamples=200)
        row = comparison.measures["recall@5"]
        self.assertEqual(repr(comparison), "<Comparison vs reference over 3 queries: recall@5 "
                                           "%+.4f (%s)>" % (row.delta, row.verdict))
        self.assertIn("| recall@5 | 0.6667 | %.4f | %+.4f |" % (row.reference_mean, row.delta),
                      comparison._repr_markdown_())


class FakeTerminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


def on_screen(text):
    """What a terminal shows of ``text``: each carriage return goes back to
    the start of the line, and what follows overwrites what was there."""
    lines = []
    for line in text.split("\n"):
        shown = ""
        for part in line.split("\r"):
            shown = part + shown[len(part):]
        lines.append(shown.rstrip(" "))
    return "\n".join(lines)


class ProgressTest(TempDir, unittest.TestCase):
    """The progress line: on a terminal only, after about a second, at most
    every 0.25 s, erased before anything else is written; never for JSON or
    in a pipe; --timing."""

    QRELS = {"q%04d" % i: {"d": 1} for i in range(3000)}
    RUN = {q: ["x", "d"] for q in QRELS}

    def cli(self, *argv, stderr=None, step=0.3, every=100):
        """main() on QRELS and RUN with a clock that moves ``step`` seconds a
        look, the count told every ``every`` queries: (code, out, err)."""
        qrels, run = self.input_file(self.QRELS, "q.json"), self.input_file(self.RUN, "r.json")
        clock = itertools.count(0, step)
        out, err = io.StringIO(), stderr if stderr is not None else FakeTerminal()
        with unittest.mock.patch.object(rag_eval, "_progress_clock", lambda: next(clock)), \
                unittest.mock.patch.object(rag_eval, "_PROGRESS_EVERY", every):
            code = rag_eval.main([qrels, run, "--metrics", "mrr", *argv], stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    def test_on_a_terminal(self):
        code, out, err = self.cli()
        self.assertEqual(code, 0, err)
        plain = self.cli(stderr=io.StringIO())
        self.assertEqual(out, plain[1])
        self.assertNotIn("\r", plain[2])
        self.assertEqual(on_screen(err), plain[2])       # erased: the terminal shows the same
        size = "%.1f MB" % (os.path.getsize(os.path.join(self.tmp, "r.json")) / 1e6)
        draws = [part for part in err.split("\r") if part.startswith("rag-eval: r.json")]
        self.assertTrue(draws)
        # The clock: 0 at the start, then 0.3 s a look, one look per block and per 100
        # queries; the first line at 1.0 s or later, then at most one per 0.25 s.
        self.assertRegex(draws[0], r"^rag-eval: r\.json: \d+ queries scored, %s of %s read, "
                                   r"1\.[0-9] s$" % (size.split()[0], size))
        self.assertEqual(draws[-1].rstrip(), "rag-eval: r.json: 3000 queries scored, %s of %s "
                                             "read, 9.3 s" % (size.split()[0], size))
        self.assertEqual(len(draws), 28)     # looks at 1.2, 1.5, ..., 9.3 s, each 0.3 s apart

    def test_cut_to_the_terminal_width(self):
        # Found by review: a line wider than the terminal wraps, and \r then redraws only
        # its last row, leaving the others on screen.
        with unittest.mock.patch.dict(os.environ, {"COLUMNS": "30"}):
            code, out, err = self.cli()
        self.assertEqual(code, 0, err)
        draws = [part for part in err.split("\r") if part.startswith("rag-eval: r.json")]
        self.assertTrue(draws)
        self.assertEqual(draws[-1], "rag-eval: r.json: 3000 querie")   # 29 characters
        self.assertEqual({len(part) for part in draws}, {29})      # columns - 1
        self.assertEqual(on_screen(err), "")                       # erased

    def test_not_before_a_second(self):
        code, out, err = self.cli(step=0.0001)
        self.assertEqual(code, 0, err)
        self.assertNotIn("\r", err)

    def test_never_in_a_pipe_or_for_json(self):
        for argv, stderr in [((), io.StringIO()), (("--format", "json"), FakeTerminal()),
                             (("-o", os.path.join(self.tmp, "r.out.json")), FakeTerminal())]:
            with self.subTest(argv=argv):
                code, out, err = self.cli(*argv, stderr=stderr)
                self.assertEqual(code, 0, err)
                self.assertNotIn("\r", err)

    def test_erased_before_an_error(self):
        run = self.write("r.json", json.dumps(self.RUN)[:-1] + ', "zz": [1]}')
        clock = itertools.count(0, 0.3)
        err = FakeTerminal()
        with unittest.mock.patch.object(rag_eval, "_progress_clock", lambda: next(clock)):
            code = rag_eval.main([self.input_file(self.QRELS, "q.json"), run],
                                 stdout=io.StringIO(), stderr=err)
        self.assertEqual(code, 2)
        self.assertEqual(on_screen(err.getvalue()).count("\n"), 1)
        self.assertTrue(on_screen(err.getvalue()).startswith("rag-eval: error: "))

    def test_nothing_added_when_off(self):
        queries = iter([("q", None)])
        self.assertIs(rag_eval._counted(queries, None), queries)   # no per-query wrapper
        self.assertIsNone(rag_eval._PROGRESS)
        clock = itertools.count(0, 1)
        with unittest.mock.patch.object(rag_eval, "_progress_clock", lambda: next(clock)):
            rag_eval.evaluate_files(io.StringIO(json.dumps(self.QRELS)),
                                    io.StringIO(json.dumps(self.RUN)))
        self.assertEqual(next(clock), 0)        # the library never reads the clock

    def test_forked_workers_read_the_rest(self):
        progress = rag_eval._Progress(io.StringIO(), clock=itertools.count(5).__next__)
        progress.begin("/data/run.trec", 4e8, here=1e8)
        progress.read_bytes(5e7)
        self.assertEqual(progress.stream.getvalue(),
                         "\rrag-eval: run.trec: 0 queries scored, 50.0 of 100.0 MB read here "
                         "(workers read the rest), 1.0 s")

    def test_timing(self):
        first, second = self.cli("--format", "json")[1], self.cli("--format", "json")[1]
        self.assertEqual(first, second)
        self.assertNotIn("elapsed_seconds", first)
        code, out, err = self.cli("--format", "json", "--timing")
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertIsInstance(doc["elapsed_seconds"], float)
        self.assertGreaterEqual(doc["elapsed_seconds"], 0)
        self.assertEqual(dict(doc, elapsed_seconds=None), dict(json.loads(first),
                                                               elapsed_seconds=None))
        code, out, err = self.cli("--timing", stderr=io.StringIO())
        self.assertRegex(err, r"(?m)^rag-eval: timing: \d+\.\d{3} s$")


class OutputFilesTest(TempDir, unittest.TestCase):
    """-o and --save-baseline: each written whole or none at all, never over an
    input; '-' and empty names."""
    def test_output_file(self):
        path = os.path.join(self.tmp, "report.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--format", "json", "-o", path)
        self.assertEqual((code, out), (0, ""))
        with open(path) as handle:
            self.assertEqual(json.load(handle)["mean"]["mrr@5"], 0.5)

    def test_written_files_follow_the_umask(self):
        old = os.umask(0o022)
        try:
            path = os.path.join(self.tmp, "out.json")
            run_cli(example("qrels.json"), example("run.json"), "-o", path)
        finally:
            os.umask(old)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o644)

    def test_no_file_written_when_one_output_cannot_be(self):
        # Merged: test_no_file_written_when_one_output_fails (-o in a missing
        # folder), ..._when_a_later_output_is_bad (-o ending in a separator) and
        # test_outputs_that_cannot_both_be_written (-o a folder; one name for both).
        saved = os.path.join(self.tmp, "saved.json")
        os.mkdir(os.path.join(self.tmp, "outdir"))
        cases = [(os.path.join(self.tmp, "missing", "out.json"), ""),
                 (os.path.join(self.tmp, "out.json") + os.sep, "is a directory"),
                 (os.path.join(self.tmp, "outdir"), "is a directory"),
                 (saved, "named for two outputs")]
        for out_path, expect in cases:
            with self.subTest(o=out_path):
                code, out, err = run_cli(*EXAMPLE_FILES, "--save-baseline", saved, "-o", out_path)
                self.assertEqual(code, 2)
                self.assertEqual(len(err.strip().splitlines()), 1)
                self.assertIn(expect, err)
                self.assertEqual(os.listdir(self.tmp), ["outdir"])

    def test_an_output_never_replaces_an_input(self):
        base = self.write("b.json", '{"recall@5": 0.9}')
        qrels = self.write("q.json", read_text(example("qrels.json")))
        cases = [("--baseline", base, "-o", base), ("-o", qrels),
                 ("--save-baseline", qrels), ("--compare", example("run.json"), "-o",
                                              os.path.join(self.tmp, ".", "..",
                                                           os.path.basename(self.tmp), "b.json"),
                                              "--baseline", base)]
        for argv in cases:
            with self.subTest(argv=argv):
                code, out, err = run_cli(qrels, example("run.json"), *argv)
                self.assertEqual(code, 2)
                self.assertIn("would overwrite the", err)
                self.assertEqual(read_text(base), '{"recall@5": 0.9}')
        # The one allowed overlap: --save-baseline updating the --baseline it gates on.
        code, out, err = run_cli(qrels, example("run.json"), "--baseline", base,
                                 "--save-baseline", base, "--accept")
        self.assertEqual(code, 1)
        code, out, err = run_cli(qrels, example("run.json"), "-o", base, "--save-baseline", base)
        self.assertEqual(code, 2)
        self.assertIn("named for two outputs", err)

    def test_empty_file_names_are_errors(self):
        # An unset CI variable ("--baseline $BASELINE") must not skip the gate.
        for option in ("--baseline", "--save-baseline", "-o", "--compare"):
            with self.subTest(option=option):
                code, out, err = run_cli(*EXAMPLE_FILES, option, "")
                self.assertEqual(code, 2)
                self.assertEqual(err, "rag-eval: error: %s: the file name is empty "
                                      "(an unset variable?)\n" % option)
                self.assertEqual(out, "")

    def test_stdin_and_dash_outputs(self):
        with open(example("qrels.json")) as handle:
            qrels = handle.read()
        code, out, err = run_cli("-", example("run.json"), "--baseline", "-", stdin=qrels)
        self.assertEqual(code, 2)
        self.assertIn("only one input can come from stdin", err)
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "--save-baseline", "-")
        self.assertEqual(code, 2)
        code, out, err = run_cli(example("qrels.json"), example("run.json"), "-o", "-")
        self.assertEqual(code, 0)
        self.assertIn("0.5095", out)


# ---------------------------------------------------------------------------
# trec_eval's output (--format trec) and trec_eval's averaging (--average trec_eval)
# ---------------------------------------------------------------------------

    @unittest.skipUnless(hasattr(os, "mkfifo"), "needs named pipes")
    def test_a_pipe_or_device_is_written_in_place_never_replaced(self):
        # The atomic rename would put a regular file where /dev/null was (seen as root).
        import stat
        import threading
        for option in ("-o", "--save-baseline"):
            with self.subTest(option=option):
                pipe = os.path.join(self.tmp, "pipe%s" % option)
                os.mkfifo(pipe)
                got = []

                def read_pipe(path=pipe):
                    with open(path, encoding="utf-8") as handle:
                        got.append(handle.read())
                reader = threading.Thread(target=read_pipe, daemon=True)
                reader.start()
                extra = ["--format", "json"] if option == "-o" else []
                code, _, err = run_cli(*EXAMPLE_FILES, option, pipe, *extra)
                reader.join(10)
                self.assertEqual(code, 0, err)
                self.assertTrue(stat.S_ISFIFO(os.stat(pipe).st_mode))
                self.assertIn('"recall@5"', got[0])
                self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith(".rag_eval-")],
                                 [])


class TrecOutputTest(TempDir, unittest.TestCase):
    """``--format trec`` prints what trec_eval prints, for scripts that parse it.

    The expected bytes below were compared with trec_eval 9.0.8 built from
    usnistgov/trec_eval (tag v9.0.8) on the same files; the averaging data
    (tests/data/trec_average/) was written by tests/peers/gen_trec_average.py
    with pytrec_eval, which the suite never imports."""

    def test_names_are_trec_evals_only_for_its_parameters(self):
        names = {   # ours -> what --format trec prints (from the registry's peer spellings)
            "recall@5": "recall_5", "precision@10": "P_10", "success@1": "success_1",
            "map@5": "map_cut_5", "ndcg(gain=linear)@10": "ndcg_cut_10", "mrr@all": "recip_rank",
            "map@all": "map", "ndcg(gain=linear)@all": "ndcg", "recall@all": "set_recall",
            "precision@all": "set_P", "rprec": "Rprec", "bpref": "bpref",
            # no trec_eval name for these parameters: our canonical name
            "precision(rel=2)@5": None, "recall(rel=2)@5": None, "bpref(rel=2)": None,
            "ndcg@10": None, "ndcg@all": None, "mrr@5": None, "success@all": None,
            "judged@5": None, "context_precision@5": None,
        }
        for ours, theirs in names.items():
            with self.subTest(measure=ours):
                m = rag_eval.parse_measure(ours)
                self.assertEqual(rag_eval._peer_name(m, "trec_eval"), theirs)
        # trec_eval's set_ names are read too; its uncut map and ndcg are only
        # written: as input, bare map and ndcg keep our meaning (every --k).
        self.assertEqual(str(rag_eval.parse_measure("set_recall")), "recall@all")
        self.assertEqual(str(rag_eval.parse_measure("set_P")), "precision@all")
        self.assertEqual([str(m) for m in rag_eval.resolve_measures("map,ndcg", k=5)],
                         ["map@5", "ndcg@5"])

    # trec_eval 9.0.8: trec_eval -q -m num_q -m map -m recip_rank -m P.5 -m recall.5
    # -m ndcg_cut.5 on the bundled example (qrels.json, run.json as TREC files;
    # q4, which has no relevant id, left out of both, as our default averaging
    # leaves it out). Hand check of q1 (ranks 2 and 4 hold grades 2 and 1 of 2
    # relevant): map (1/2 + 2/4) / 2 = 0.5; P_5 2/5; ndcg_cut_5 (2/log2 3 + 1/log2 5)
    # / (2 + 1/log2 3) = 0.6433. num_q is an integer, as trec_eval prints it.
    EXAMPLE_TREC = (
        "map                   \tq1\t0.5000\n"
        "recip_rank            \tq1\t0.5000\n"
        "P_5                   \tq1\t0.4000\n"
        "recall_5              \tq1\t1.0000\n"
        "ndcg_cut_5            \tq1\t0.6433\n"
        "map                   \tq2\t0.0000\n"
        "recip_rank            \tq2\t0.0000\n"
        "P_5                   \tq2\t0.0000\n"
        "recall_5              \tq2\t0.0000\n"
        "ndcg_cut_5            \tq2\t0.0000\n"
        "map                   \tq3\t0.8667\n"
        "recip_rank            \tq3\t1.0000\n"
        "P_5                   \tq3\t0.6000\n"
        "recall_5              \tq3\t1.0000\n"
        "ndcg_cut_5            \tq3\t0.9050\n"
        "num_q                 \tall\t3\n"
        "map                   \tall\t0.4556\n"
        "recip_rank            \tall\t0.5000\n"
        "P_5                   \tall\t0.3333\n"
        "recall_5              \tall\t0.6667\n"
        "ndcg_cut_5            \tall\t0.5161\n")
    EXAMPLE_MEASURES = "map@all,mrr@all,P@5,recall@5,ndcg(gain=linear)@5"

    def trec(self, *argv, qrels=None, run=None):
        return run_cli(qrels or example("qrels.json"), run or example("run.json"),
                       "--format", "trec", *argv)

    def test_exact_bytes_of_trec_evals_layout(self):
        code, out, err = self.trec("--per-query", "--metrics", self.EXAMPLE_MEASURES)
        self.assertEqual(code, 0)
        self.assertEqual(out, self.EXAMPLE_TREC)
        self.assertNotIn("num_q", err)              # stderr holds warnings only
        for line in out.splitlines():               # what a script splits on
            name, qid, value = line.split("\t")
            self.assertEqual(len(name), 22)
            self.assertRegex(value, r"^\d+(\.\d{4})?$")
        code, out, err = self.trec("--metrics", self.EXAMPLE_MEASURES)   # no --per-query
        self.assertEqual(out, self.EXAMPLE_TREC[self.EXAMPLE_TREC.index("num_q"):])
        # the same bytes from a TREC run, and through -o
        with open(example("run.json"), encoding="utf-8") as handle:
            rankings = json.load(handle)
        lines = "".join("%s Q0 %s %d %d tag\n" % (q, doc, rank, 10 - rank)
                        for q, ranking in sorted(rankings.items())
                        for rank, doc in enumerate(ranking, 1))
        target = os.path.join(self.tmp, "out.txt")
        code, out, _ = self.trec("--per-query", "--metrics", self.EXAMPLE_MEASURES, "-o", target,
                                 run=self.write("run.trec", lines))
        with open(target, encoding="utf-8") as handle:
            self.assertEqual((code, out, handle.read()), (0, "", self.EXAMPLE_TREC))

    def test_names_in_the_output(self):
        code, out, _ = self.trec("--metrics", "ndcg@5,ndcg(gain=linear)@5,precision(rel=2)@5,"
                                 "P@5,judged@5,rprec,bpref,recall@all,precision@all")
        self.assertEqual([line.split("\t")[0].rstrip() for line in out.splitlines()],
                         ["num_q", "ndcg@5", "ndcg_cut_5", "precision(rel=2)@5", "P_5",
                          "judged@5", "Rprec", "bpref", "set_recall", "set_P"])
        # --rel 2 changes every rel measure's parameters: trec_eval's names would lie
        code, out, _ = self.trec("--rel", "2", "--metrics", "recall@5,mrr@all,ndcg(gain=linear)@5")
        self.assertEqual([line.split("\t")[0].rstrip() for line in out.splitlines()],
                         ["num_q", "recall(rel=2)@5", "mrr(rel=2)@all", "ndcg_cut_5"])
        long_name = "context_precision(rel=2)@10"      # longer than 22: no padding, as trec_eval
        code, out, _ = self.trec("--metrics", long_name, "--per-query")
        self.assertIn("\n%s\tall\t" % long_name, "\n" + out)

    def test_per_query_order_is_trec_evals(self):
        # queries in trec_eval's order (sorted as strings: q10 before q2), each
        # query's measures together, then the all lines.
        qrels = self.write("qrels.json", json.dumps(
            {"q2": {"a": 1}, "q10": {"b": 1}, "q1": {"c": 1}, "Q": {"d": 1}}))
        run = self.write("run.json", json.dumps(
            {"q2": ["a"], "q10": ["x", "b"], "q1": ["x"], "Q": ["d"]}))
        code, out, _ = self.trec("--per-query", "--metrics", "mrr@all,success@1",
                                 qrels=qrels, run=run)
        rows = [line.split("\t") for line in out.splitlines()]
        self.assertEqual([(name.rstrip(), qid) for name, qid, _ in rows], [
            ("recip_rank", "Q"), ("success_1", "Q"), ("recip_rank", "q1"), ("success_1", "q1"),
            ("recip_rank", "q10"), ("success_1", "q10"), ("recip_rank", "q2"),
            ("success_1", "q2"), ("num_q", "all"), ("recip_rank", "all"), ("success_1", "all")])
        self.assertEqual(rows[-2][2], "0.6250")      # (1 + 0 + 1/2 + 1) / 4

    def test_a_query_id_a_line_cannot_carry_is_refused(self):
        for qid in ("what is sso", "all", "tab\there"):
            with self.subTest(qid=qid):
                qrels = self.write("qrels.json", json.dumps({qid: {"a": 1}}))
                run = self.write("run.json", json.dumps({qid: ["a"]}))
                code, out, err = self.trec("--per-query", qrels=qrels, run=run)
                self.assertEqual((code, out), (2, ""))
                self.assertRegex(err, r"^rag-eval: error: --format trec: query id .* cannot be "
                                      r"written on a trec_eval line .*\n$")
                self.assertEqual(self.trec(qrels=qrels, run=run)[0], 0)   # no query lines

    def test_gate_and_comparison_go_to_stderr(self):
        # The bundled baseline fails (exit 1): stdout stays trec_eval's lines,
        # the gate's text is on stderr, as the text format writes it.
        code, out, err = self.trec("--baseline", example("baseline.json"))
        self.assertEqual(code, 1)
        self.assertTrue(out.startswith("num_q                 \tall\t3\n"))
        self.assertTrue(all(len(line.split("\t")) == 3 for line in out.splitlines()))
        _, text, _ = run_cli(example("qrels.json"), example("run.json"),
                             "--baseline", example("baseline.json"))
        gate_text = text[text.index("gate vs"):]
        self.assertTrue(err.startswith(gate_text), err)
        self.assertIn("FAILED, 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5", err)
        # a passing gate: exit 0, its verdict on stderr
        base = self.write("base.json", json.dumps({"recall@5": 0.5}))
        code, out, err = self.trec("--baseline", base, "--metrics", "recall@5")
        self.assertEqual(code, 0)
        self.assertEqual(out, "num_q                 \tall\t3\nrecall_5              \tall\t0.6667\n")
        self.assertIn("PASSED", err)
        # --save-baseline with a failing gate: exit 1, the baseline kept, said on stderr
        saved = os.path.join(self.tmp, "saved.json")
        code, out, err = self.trec("--baseline", example("baseline.json"), "--save-baseline", saved)
        self.assertEqual(code, 1)
        self.assertFalse(os.path.exists(saved))
        self.assertIn("was not written", err)
        # a comparison: its table on stderr, exit 0
        code, out, err = self.trec("--compare", example("run.json"), "--metrics", "recall@5",
                                   "--resamples", "100")
        self.assertEqual(code, 0)
        self.assertEqual(out, "num_q                 \tall\t3\nrecall_5              \tall\t0.6667\n")
        self.assertIn("run vs %s, paired over 3 queries" % example("run.json"), err)

    def trec_average_cases(self):
        folder = os.path.join(DATA, "trec_average")
        for case in sorted(os.listdir(folder)):
            with open(os.path.join(folder, case, "expected.json"), encoding="utf-8") as handle:
                yield case, os.path.join(folder, case), json.load(handle)

    def test_trec_eval_averaging_equals_pytrec_eval(self):
        # Queries with no relevant id (all grades 0, only negative grades,
        # grades below rel that nDCG still counts, an empty ranking) count;
        # qrels queries the run lacks (q10, q11) and a run query the qrels
        # lack do not: trec_eval without -c, as pytrec_eval computes it.
        for case, folder, expected in self.trec_average_cases():
            with self.subTest(case=case):
                qrels, run = (os.path.join(folder, f) for f in ("qrels.json", "run.json"))
                names = list(expected["mean"])
                report = rag_eval.evaluate_files(
                    qrels, run, k=[1], metrics=names, rel=expected["rel"],
                    skip_extra_queries=True, average="trec_eval")
                self.assertEqual(report.average, "trec_eval")
                self.assertEqual(list(report.per_query), list(expected["per_query"]))
                self.assertNotIn("q10", report.per_query)           # missing from the run
                self.assertIn("q10", report.missing)
                for qid, values in expected["per_query"].items():
                    for m, value in values.items():
                        self.assertAlmostEqual(report.per_query[qid][m], value, delta=1e-9,
                                               msg="%s %s" % (qid, m))
                for m, value in expected["mean"].items():
                    self.assertAlmostEqual(report.mean[m], value, delta=1e-9, msg=m)
                # the command line prints the same, with trec_eval's names
                code, out, err = run_cli(qrels, run, "--format", "trec", "--per-query",
                                         "--average", "trec_eval", "--skip-extra-queries",
                                         "--rel", str(expected["rel"]), "--metrics", ",".join(names))
                self.assertEqual(code, 0, err)
                self.assertIn("1 query in the qrels not in the run, left out of the means "
                              "(trec_eval's average): 'q10'\n", err)   # q11: no relevant id
                printed = {m: expected["names"].get(m, m) for m in names}
                lines = ["%-22s\t%s\t%6.4f\n" % (printed[m], qid, values[m])
                         for qid, values in expected["per_query"].items() for m in names]
                lines.append("num_q                 \tall\t%d\n" % expected["num_q"])
                lines += ["%-22s\tall\t%6.4f\n" % (printed[m], expected["mean"][m]) for m in names]
                self.assertEqual(out, "".join(lines))
                # the default average differs: no-relevant queries out, missing ones in as 0
                scored = rag_eval.evaluate_files(qrels, run, k=[1], metrics=names,
                                                 rel=expected["rel"], skip_extra_queries=True)
                self.assertEqual(set(scored.per_query), set(expected["per_query"])
                                 - set(scored.unscored) | set(scored.missing))
                self.assertNotEqual(scored.mean, report.mean)

    def test_trec_eval_averaging_lists_no_query_twice(self):
        # Found by review: a query of the run with no relevant id is in the
        # means under trec_eval's averaging, so it is not also "unscored"; a
        # query the run lacks is left out, not "scored 0".
        report = rag_eval.evaluate({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0},
                                    "q4": {"d": 0}}, {"q1": ["a"], "q3": ["z"]}, k=1,
                                   measures="recall", average="trec_eval")
        self.assertEqual((report.unscored, sorted(report.per_query), report.missing),
                         (("q4",), ["q1", "q3"], ("q2",)))
        self.assertIn("2 queries scored; 1 unscored (no relevant id): q4; 1 missing from the "
                      "run (left out, as trec_eval averages)", rag_eval.render_text(report))

    def test_trec_eval_averaging_is_never_gated_or_compared(self):
        base = self.write("base.json", json.dumps({"recall@5": 0.5}))
        saved = os.path.join(self.tmp, "saved.json")
        out_file = os.path.join(self.tmp, "out.txt")
        for extra in (["--baseline", base], ["--save-baseline", saved],
                      ["--compare", example("run.json")], ["--format", "json"],
                      ["--format", "text", "-o", out_file]):
            with self.subTest(extra=extra):
                code, out, err = run_cli(example("qrels.json"), example("run.json"),
                                         "--average", "trec_eval", "--format", "trec", *extra)
                self.assertEqual((code, out), (2, ""))
                self.assertEqual(err.count("\n"), 1)
                self.assertRegex(err, r"^rag-eval: error: --average trec_eval ")
                self.assertFalse(os.path.exists(saved) or os.path.exists(out_file))
        # the library refuses the same way
        qrels, run = rag_eval.load_qrels(example("qrels.json")), rag_eval.load_run(example("run.json"))
        report = rag_eval.evaluate(qrels, run, average="trec_eval")
        other = rag_eval.evaluate(qrels, run)
        for call in (lambda: rag_eval.gate(report, {"recall@5": 0.5}),
                     lambda: rag_eval.compare(report, other),
                     lambda: rag_eval.compare(other, report),
                     lambda: rag_eval.baseline_dict(report)):
            with self.assertRaisesRegex(rag_eval.EvalError, "never gated, compared or saved"):
                call()
        with self.assertRaisesRegex(rag_eval.EvalError, "average must be one of"):
            rag_eval.evaluate({"q": {"a": 1}}, {"q": ["a"]}, average="trec")
        self.assertEqual(report.to_dict()["average"], "trec_eval")
        self.assertNotIn("average", other.to_dict())    # the JSON of a default report is unchanged
        # the bundled example: q4 (no relevant id, in the run) counts, as trec_eval counts it
        self.assertEqual((len(report.per_query), len(other.per_query)), (4, 3))
        code, out, _ = run_cli(example("qrels.json"), example("run.json"), "--format", "trec",
                               "--average", "trec_eval", "--metrics", "recall@5")
        self.assertEqual(out, "num_q                 \tall\t4\nrecall_5              \tall\t0.5000\n")

    def test_trec_eval_averaging_through_every_reader(self):
        # A TREC run (no empty rankings: a TREC file cannot hold one) read by
        # the plain twins, the block reader, and forked workers (threshold
        # lowered) gives the same report.
        for case, folder, expected in self.trec_average_cases():
            with open(os.path.join(folder, "run.json"), encoding="utf-8") as handle:
                run = json.load(handle)
            text = "".join("%s Q0 %s %d %r t\n" % (q, doc, rank, score)
                           for q, scores in sorted(run.items())
                           for rank, (doc, score) in enumerate(sorted(
                               scores.items(), key=lambda p: -p[1]), 1))
            path = self.write("run_%s.trec" % case, text)

            def score():
                return rag_eval.evaluate_files(
                    os.path.join(folder, "qrels.json"), path, k=[1],
                    metrics=list(expected["mean"]), rel=expected["rel"],
                    skip_extra_queries=True, average="trec_eval")._replace(inputs=None)
            with plain_twins():
                plain = score()
            self.assertEqual(score(), plain)
            saved = rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE
            rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE = 0, 256
            try:
                self.assertEqual(score(), plain)
            finally:
                rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE = saved
            empty = {q for q, scores in run.items() if not scores}
            self.assertEqual(set(plain.per_query), set(expected["per_query"]) - empty)
            for qid, values in plain.per_query.items():
                for m, value in values.items():
                    self.assertAlmostEqual(value, expected["per_query"][qid][m], delta=1e-9)
