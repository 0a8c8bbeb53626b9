"""Accelerations (rag_eval.py, Part II) against their plain twins on seeded
inputs, and forked workers on TREC, JSON and JSONL runs against one core.
"""

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import unittest

import rag_eval
from tests.support import HERE, TempDir, accelerated_only, PEERS, plain_twins
from tests import test_inputs


# ---------------------------------------------------------------------------
# Accelerations and their plain twins (rag_eval.py, Part II)
# ---------------------------------------------------------------------------

def read_outcome(reader, data, grouped):
    """What a TREC run reader gives its caller (_score_run): [(qid, [doc text],
    [float score])], gathered after _NotGrouped as the caller does, or the error.
    Where a grouped read stops (_NotGrouped, or which of two errors comes first)
    may differ: the block reader reads a block ahead of the line reader."""
    try:
        try:
            queries = list(reader(rag_eval._Input(io.BytesIO(data)), grouped))
            how = "grouped" if grouped else "gathered"
        except rag_eval._NotGrouped:
            queries = list(reader(rag_eval._Input(io.BytesIO(data)), False))
            how = "not grouped"
    except rag_eval.EvalError as exc:
        return "error: %s" % exc
    return how, [(qid, [d if isinstance(d, str) else rag_eval._doc_text(d) for d in r.docs],
                  [float(s) for s in r.scores]) for qid, r in queries]


def run_faults(data):
    """Every error a TREC run reader may name for ``data``, line by line."""
    faults, first = set(), True
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip() or line.startswith(b"#"):
            continue
        try:
            qid = rag_eval._parse_run_line(line, "<stream>:%d" % number)[0]
            first = False
        except rag_eval.EvalError as exc:
            faults.add("error: %s" % exc)
            if first:
                faults.add("error: %s" % rag_eval._first_line_error(exc, line, "run"))
            qid = line.split()[0] if line.split() else b""
        try:
            rag_eval._decode_qid(qid, "<stream>")
        except rag_eval.EvalError as exc:
            faults.add("error: %s" % exc)
    return faults


def random_run_text(rng, scattered=0.1):
    """A TREC run of a few queries: ties, repeats, score layouts, tags, comments."""
    layout = rng.choice(["%.3f", "%.1f", "%d", "%s", "%.2e", "mixed"])
    lines = []
    for q in range(rng.randint(1, 5)):
        depth = rng.randint(1, 12)
        scores = [rng.choice([rng.uniform(-5, 99), rng.randint(0, 4)]) for _ in range(depth)]
        if rng.random() < 0.7:
            scores.sort(reverse=True)
        for r, s in enumerate(scores, 1):
            fmt = rng.choice(["%.3f", "%d", "%s"]) if layout == "mixed" else layout
            doc = rng.choice(["d%d" % rng.randrange(9), "D%d" % rng.randrange(3), "\u00e9%d" % r,
                              "\U0001f600", "\ue000"])
            tag = rng.choice(["t", "t", "t", "u"]) if rng.random() < 0.2 else "t"
            lines.append("q%d Q0 %s %d %s %s" % (q, doc, r, fmt % s, tag))
    if rng.random() < scattered and len(lines) > 2:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    if rng.random() < 0.1:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(["# comment", "", "  "]))
    text = "\n".join(lines) + "\n"
    if rng.random() < 0.1:
        text = text.replace("\n", "\r\n")
    return text


_RUN_MUTATIONS = [
    lambda t, i: t[:i] + " " + t[i:], lambda t, i: t[:i] + "\t" + t[i + 1:],
    lambda t, i: t[:i] + t[i + 1:], lambda t, i: t[:i] + "\r" + t[i:],
    lambda t, i: t[:i] + "\n" + t[i:], lambda t, i: t[:i] + "1" + t[i:],
    lambda t, i: t[:i] + "." + t[i:], lambda t, i: t[:i] + "e" + t[i:],
    lambda t, i: t[:i] + "-" + t[i:], lambda t, i: t[:i] + "_" + t[i:],
    lambda t, i: t.replace(" ", "  ", 1), lambda t, i: t.replace("\n", "\r\n"),
    lambda t, i: t.replace("\n", " extra 1\n", 1),     # fields after the tag
    lambda t, i: t[:i] + random.Random(i).choice(["\u0662", "\x0b", "\x0c", "\xa0", "\x85",
                                                  " \t", "\r ", "#", "inf", "nan"]) + t[i:]]


def json_run_case():
    """Seeded qrels and a run of 30 queries for the forked JSON and JSONL readers:
    score maps, and one ranked list holding a string that looks like a cut."""
    rng = random.Random(9)
    qrels = {"q%02d" % q: {"d%d" % d: rng.randrange(3) for d in range(12)} for q in range(30)}
    run = {q: {"d%d" % d: round(rng.random(), 3) for d in range(20)} for q in qrels}
    run["q07"] = ["d3", "d3", "x], \"y", "d1"]      # a string that looks like a cut
    return qrels, run


class ForkedRuns:
    """Mixin: forked workers for small files too, and a seeded TREC run of 40
    queries to score with them.  The test class saves and restores
    rag_eval._PARALLEL_MIN_BYTES and rag_eval._BLOCK_SIZE."""

    def use_forked_workers(self, block_size=256):
        """No size threshold (and small blocks), or skip without fork and two cores."""
        if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
            self.skipTest("needs fork and two cores")
        rag_eval._PARALLEL_MIN_BYTES = 0
        if block_size is not None:
            rag_eval._BLOCK_SIZE = block_size

    def lines(self):
        rng = random.Random(4)
        out = []
        for q in range(40):
            scores = sorted((round(rng.random(), 2) for _ in range(30)), reverse=True)
            out += ["q%02d Q0 d%d %d %s t" % (q, rng.randrange(60), r, s)
                    for r, s in enumerate(scores, 1)]
        return out

    def evaluate(self, lines):
        qrels = {"q%02d" % q: {"d%d" % d: q % 3 for d in range(0, 60, 7)} for q in range(40)}
        qrels["q00"] = {"d1": 0}          # unscored: its abstention count crosses workers too
        qpath = self.write("q.json", json.dumps(qrels))
        rpath = self.write("r.trec", "\n".join(lines) + "\n")
        return rag_eval.evaluate_files(qpath, rpath, k="1,5,10", metrics="recall,ndcg,mrr,judged")


class AccelerationTwinsTest(ForkedRuns, TempDir, unittest.TestCase):
    """Every acceleration of Part II against its plain twin in Part I (the table
    that opens Part II): seeded random inputs by the thousand, same result."""

    def setUp(self):
        super().setUp()
        self.saved = rag_eval._BLOCK_SIZE, rag_eval._PARALLEL_MIN_BYTES

    def tearDown(self):
        rag_eval._BLOCK_SIZE, rag_eval._PARALLEL_MIN_BYTES = self.saved
        super().tearDown()

    # -- _trec_run_queries: _trec_run_queries_fast == _trec_run_queries_plain --
    def test_trec_run_readers(self):
        # Valid and mutated runs, every block size from one line to the whole
        # file, grouped and gathered: the same queries, ids, scores and errors.
        # Ids that are not UTF-8 are refused naming their line, bytes in the tag
        # (not read) are not (see _id_text).
        for data in (b"# c\n\nq1,Q0,d1,1,2.0,t\n", b"#\n" * 9 + b"q1 0 d1 1\n",
                     b"q1 Q0 a 1 2 t\nq1 Q0 b\xff 2 1 t\n", b"q1 Q0 a 1 2 t\xff\nq2 Q0 b 1 1 t\n",
                     b"q1 Q0 a 1 2 t\n\xc3q Q0 b 1 1 t\n"):
            for size in (1, 3, 1 << 17):       # the hint follows the first run line
                rag_eval._BLOCK_SIZE = size
                self.assertEqual(read_outcome(rag_eval._trec_run_queries_fast, data, True),
                                 read_outcome(rag_eval._trec_run_queries_plain, data, True))
        rng = random.Random(20)
        seen = {"queries": 0, "error": 0, "not grouped": 0, "bytes": 0}
        for case in range(2500):
            text = random_run_text(rng)
            for _ in range(rng.choice([0, 0, 1, 2])):
                text = rng.choice(_RUN_MUTATIONS)(text, rng.randrange(len(text)))
            data = text.encode("utf-8")
            if rng.random() < 0.05:         # an id (or query id) that is not UTF-8
                i = data.find(b" D")
                data = data[:i + 1] + b"\xff" + data[i + 1:] if i >= 0 else b"\xfe" + data
                seen["bytes"] += 1
            grouped = rng.random() < 0.8
            rag_eval._BLOCK_SIZE = rng.choice([1, 7, 40, 200, 1 << 17])
            fast = read_outcome(rag_eval._trec_run_queries_fast, data, grouped)
            plain = read_outcome(rag_eval._trec_run_queries_plain, data, grouped)
            if isinstance(fast, str) and isinstance(plain, str) and fast != plain:
                # two faults: each reader names one of them (see read_outcome)
                self.assertGreater(len(run_faults(data)), 1, (data, fast, plain))
                self.assertLessEqual({fast, plain}, run_faults(data), data)
                seen["error"] += 1
                continue
            self.assertEqual(fast, plain, (data, grouped, rag_eval._BLOCK_SIZE))
            seen["error" if isinstance(plain, str) else "queries"] += 1
            seen["not grouped"] += plain[0] == "not grouped"
        self.assertGreater(min(seen.values()), 50, seen)

    # -- _chunk_map_of: _chunk_map_bulk == _chunk_map_plain -------------------
    def test_chunk_map_readers(self):
        # Seeded chunk maps, well formed and mutated (nulls, floats, bools, blank
        # lines, repeated ids, missing fields, doc_sha256, bad JSON): the bulk
        # reader gives the plain reader's map, or its error, every time.
        rng = random.Random(5)

        def outcome(reader, text):
            try:
                chunks = reader(text, "m.jsonl")
                return dict(chunks), chunks.versions
            except rag_eval.EvalError as exc:
                return str(exc)
        mutations = ['"start": null', '"start": 1.5', '"start": true', '"end": 0', '"tokens": -1',
                     '"doc": 5', '"id": null', '"doc_sha256": "ab"', '"x": 1', '"start": -3']
        for case in range(600):
            lines = []
            for i in range(rng.randint(1, 12)):
                start = rng.randrange(0, 50)
                record = {"id": "c%d" % rng.randrange(15), "doc": "d%d" % rng.randrange(3),
                          "start": start, "end": start + rng.randint(1, 30)}
                if rng.random() < 0.5:
                    record["tokens"] = rng.randrange(40)
                if rng.random() < 0.03:     # found by review: an integer doc crashed the bulk reader
                    record[rng.choice(["id", "doc"])] = rng.choice([7, 2.5, None, True])
                line = json.dumps(record)
                if rng.random() < 0.1:
                    key = rng.choice(mutations)
                    line = line[:-1] + ", " + key + "}"
                if rng.random() < 0.03:
                    line = line[:rng.randrange(len(line))]
                lines.append(line)
            if rng.random() < 0.1:
                lines.insert(rng.randrange(len(lines) + 1), "")
            text = "\n".join(lines) + rng.choice(["\n", "", "\n\n"])
            self.assertEqual(outcome(rag_eval._chunk_map_bulk, text),
                             outcome(rag_eval._chunk_map_plain, text), text)
        # Two objects on one line, joined by a comma, are one bad line to both
        # readers (the lines joined into an array would parse them as two).
        two = ('{"id": "a", "doc": "d", "start": 0, "end": 5}\n'
               '{"id": "b", "doc": "d", "start": 5, "end": 9}, {"id": "c", "doc": "d"}\n')
        for reader in (rag_eval._chunk_map_bulk, rag_eval._chunk_map_plain):
            self.assertEqual(outcome(reader, two), "m.jsonl:2: two JSON values on one line")
        # Found by review: a line break inside a string, two objects on the second
        # line: joined with commas it read as one id "a,b".  Line 1 is bad JSON.
        broken = ('{"id": "a\nb", "doc": "d", "start": 0, "end": 1}, '
                  '{"id": "c", "doc": "d", "start": 1, "end": 2}\n')
        for reader in (rag_eval._chunk_map_bulk, rag_eval._chunk_map_plain):
            self.assertIn("m.jsonl:1:8: invalid JSON: Unterminated string", outcome(reader, broken))

    # -- _rank: _rank_fast == _rank_plain -------------------------------------
    def test_rankers(self):
        # Ranked lists, score maps and _Scored (in order or not; text or the fast
        # reader's bytes and decimal tokens), ties, repeats, any depth.  Ids
        # include lone surrogates (evaluate() takes them; issue 22: the fast
        # ranker ordered "\udc80" and "\u0800" unlike _id_order), never in the
        # fast reader's bytes, which are UTF-8.
        rng = random.Random(21)
        forms = {"list": 0, "dict": 0, "scored": 0, "tokens": 0}
        odd = ["\u00e9", "\U0001f600", "\ue000", "Z", "\udc80", "\ud800", "\udfff", "\u0800"]
        for case in range(6000):
            n = rng.randint(0, 14)
            ids = ["d%d" % rng.randrange(max(1, n + rng.randint(-3, 3))) for _ in range(n)]
            ids = [rng.choice(odd) if rng.random() < 0.15 else doc for doc in ids]
            if rng.random() < 0.1:      # a tie of odd ids only, at the top
                ids = [rng.choice(odd) for _ in range(n)]
            scores = [float(rng.choice([rng.randint(0, 3), round(rng.uniform(0, 3), 1)]))
                      for _ in range(n)]
            if rng.random() < 0.6:
                scores.sort(reverse=True)
            labels = {doc: rng.choice([-1, 0, 1, 2]) for doc in set(ids) if rng.random() < 0.6}
            labels["unretrieved"] = 1
            cutoffs = tuple(sorted({rng.randint(1, 15) for _ in range(rng.randint(1, 3))}))
            depth, exact = cutoffs[-1], rng.random() < 0.5
            form = rng.choice(list(forms))
            if form == "tokens" and any("\ud800" <= ch <= "\udfff" for d in ids for ch in d):
                form = "scored"
            plain_ranking = {"list": ids, "dict": dict(zip(ids, scores)),
                             "scored": rag_eval._Scored(ids, scores),
                             "tokens": rag_eval._Scored(ids, scores)}[form]
            fast_ranking, fast_labels = plain_ranking, labels
            if form == "tokens":
                fast_ranking = rag_eval._Scored([d.encode() for d in ids],
                                                [b"%.1f" % s for s in scores])
                fast_labels = rag_eval._labels_for_fast(fast_ranking, labels)
            plain = rag_eval._rank_plain(plain_ranking, labels, depth, cutoffs, exact)
            fast = rag_eval._rank_fast(fast_ranking, fast_labels, depth, cutoffs, exact)
            if not exact:   # the fast ranker counts returned ids exactly only when asked
                fast, plain = fast._replace(returned=fast.returned > 0), \
                    plain._replace(returned=plain.returned > 0)
            self.assertEqual(fast, plain, (form, plain_ranking, labels, cutoffs, exact))
            forms[form] += 1
        self.assertGreater(min(forms.values()), 800, forms)

    # -- _jsonl_qrels_of: _jsonl_labels_bulk == _jsonl_qrels ------------------------
    def test_jsonl_label_readers(self):
        # Seeded label-line files, well formed and mutated (nulls, floats, bools,
        # negative or crossed offsets, other keys, other line forms, blank lines,
        # CRLF, two objects on a line, bad JSON): the bulk reader gives the plain
        # reader's labels and pending rows, or its error, every time.
        rng = random.Random(23)

        def outcome(reader, text):
            inp = rag_eval._Input(io.StringIO(text))
            try:
                return reader(inp), inp.pending, inp.digest.hexdigest()
            except rag_eval.EvalError as exc:
                return str(exc)
        mutations = ['"start": null', '"end": null', '"start": 1.5', '"start": true', '"end": 0',
                     '"grade": null', '"grade": true', '"grade": 2.0', '"grade": -1',
                     '"doc": 5', '"query_id": 7', '"query_id": null', '"doc_sha256": "ab"',
                     '"x": 1', '"start": -3', '"id": "c1"', '"qid": "q9"', '"grades": {}',
                     '"relevant": ["d1"]', '"answerable": false', '"doc": "\\udc00"']
        seen = {"bulk": 0, "plain": 0}
        for case in range(1500):
            lines = []
            for i in range(rng.randint(1, 10)):
                record = {"query_id": "q%d" % rng.randrange(4), "doc": "d%d" % rng.randrange(3),
                          "grade": rng.randint(0, 3)}
                if rng.random() < 0.7:
                    record["start"] = rng.randrange(0, 50)
                    record["end"] = record["start"] + rng.randint(1, 30)
                    if rng.random() < 0.5:
                        record = {k: record[k] for k in rng.sample(list(record), len(record))}
                if rng.random() < 0.1:      # a field set (or replaced) to a bad value
                    record.update(json.loads("{%s}" % rng.choice(mutations)))
                line = json.dumps(record)
                if rng.random() < 0.03:     # a key given twice
                    line = line[:-1] + ", " + rng.choice(mutations) + "}"
                if rng.random() < 0.02:
                    line = line[:rng.randrange(len(line))]
                if rng.random() < 0.02:
                    line = line + ", " + line
                lines.append(line)
            if rng.random() < 0.05:
                lines.insert(rng.randrange(len(lines) + 1), rng.choice(["", "  "]))
            end = rng.choice(["\n", "", "\n\n"])
            text = ("\r\n" if rng.random() < 0.03 else "\n").join(lines) + end
            if rng.random() < 0.03:
                text = "\ufeff" + text
            seen["bulk" if rag_eval._bulk_labels(text.lstrip("\ufeff")) is not None
                 else "plain"] += 1
            self.assertEqual(outcome(rag_eval._jsonl_labels_bulk, text),
                             outcome(rag_eval._jsonl_qrels, text), text)
        self.assertGreater(min(seen.values()), 300, seen)

    # -- _top_chunks: _top_chunks_fast == _top_chunks_plain -----------------------
    def test_top_chunks(self):
        # _Scored with text or the fast reader's bytes ids (UTF-8, as it checks
        # them: see _id_text) and decimal tokens, in order or not; ties, repeats
        # near the top and below it; score maps and ranked lists; any depth.
        rng = random.Random(22)
        odd = [b"\xe2\x82\xac", b"\xc3\xa9", b"\xf0\x9f\x98\x80", b"Z", b"\xee\x80\x80"]
        seen = {"list": 0, "dict": 0, "text": 0, "bytes": 0, "tokens": 0, "in order": 0,
                "tie": 0, "repeat": 0}
        for case in range(6000):
            n = rng.randint(0, 16)
            ids = [b"d%d" % rng.randrange(max(1, n + rng.randint(-3, 8))) for _ in range(n)]
            ids = [rng.choice(odd) + doc if rng.random() < 0.1 else doc for doc in ids]
            # The reader's scores: decimal tokens of one layout (_decimal_tokens),
            # else floats.  Few distinct values: ties.
            layout = rng.choice([b"%d", b"%.1f", b"%04.1f", None])
            high = {b"%d": 9, b"%.1f": 9, b"%04.1f": 99, None: 30}[layout]
            scores = [float(rng.randint(0, 3)) if rng.random() < 0.5
                      else round(rng.uniform(0, high), 0 if layout == b"%d" else 1)
                      for _ in range(n)]
            if rng.random() < 0.7:
                scores.sort(reverse=True)
            given = [layout % score for score in scores] if layout else scores
            form = rng.choice(["list", "dict", "text", "bytes", "bytes"])
            text = [doc.decode("utf-8") for doc in ids]
            if form != "bytes" and rng.random() < 0.3:     # lone surrogates: text only
                text = [rng.choice(["\udc80", "\ud800", "\u0800"]) + doc
                        if rng.random() < 0.3 else doc for doc in text]
            ranking = {"list": text, "dict": dict(zip(text, scores)),
                       "text": rag_eval._Scored(text, scores),
                       "bytes": rag_eval._Scored(ids, given)}[form]
            depth = rng.randint(1, 12)
            fast = rag_eval._top_chunks_fast(ranking, depth)
            plain = rag_eval._top_chunks_plain(ranking, depth)
            self.assertEqual(fast, plain, (ranking, depth))
            self.assertEqual(type(fast[0]), type(plain[0]))
            seen[form] += 1
            seen["tokens"] += form == "bytes" and layout is not None
            seen["in order"] += scores == sorted(scores, reverse=True)
            seen["tie"] += len(set(scores[:depth + 1])) < len(scores[:depth + 1])
            seen["repeat"] += len(set(ids[:depth + 1])) < len(ids[:depth + 1])
        self.assertGreater(min(seen.values()), 500, seen)

    # -- _measure_values: _measure_values_one_pass == _measure_values_plain ------
    def test_measure_values(self):
        # Random labelled tops and integer grades (some huge enough that
        # exponential gain overflows), random calls of the four one-pass measures
        # at any cutoff (@all too), threshold and gain, sometimes with another
        # measure (then the plain twin's function serves): the same values in
        # the same order, or the same error.
        rng = random.Random(26)
        one_pass = [rag_eval.recall, rag_eval.success, rag_eval.mrr, rag_eval.ndcg]
        seen = {"values": 0, "error": 0, "fallback": 0, "empty": 0}
        for case in range(4000):
            # 1023: one gain is finite, three sum to inf (_Overflow); 1100: one overflows
            grade = lambda: rng.choice([-1, 0, 1, 2, 3, 4, 1023, 1100])  # noqa: E731
            judged = sorted((grade() for _ in range(rng.randint(0, 8))), reverse=True)
            depth = rng.randint(1, 15)
            ranked = rag_eval._from_grades([rng.choice([None, grade()]) for _ in range(depth)])
            if case < 50:       # a DCG that overflows while its ideal does not
                ranked, judged = rag_eval._from_grades([1023] * 3 + [None] * case), [1023]
            calls = []
            for _ in range(rng.randint(1, 6)):
                func = rng.choice(one_pass)
                k = rng.choice([1, 2, 3, 5, 10, 20, rag_eval._WHOLE_RANKING])
                param = (rng.choice(["exponential", "linear"]) if func is rag_eval.ndcg
                         else rng.choice([1, 2, 3]))
                calls.append(("m%d" % len(calls), func, (k, param)))
            if rng.random() < 0.1:
                calls.insert(rng.randrange(len(calls) + 1),
                             ("p", rag_eval.precision, (rng.randint(1, 9), 1)))
            outcomes = []
            for make in (rag_eval._measure_values_one_pass, rag_eval._measure_values_plain):
                try:
                    outcomes.append(list(make(calls)(ranked, tuple(judged)).items()))
                except rag_eval.EvalError as exc:
                    outcomes.append("error: %s" % exc)
            self.assertEqual(outcomes[0], outcomes[1], (ranked, judged, calls))
            seen["error" if isinstance(outcomes[0], str) else "values"] += 1
            seen["fallback"] += calls[0][1] is rag_eval.precision or any(
                name == "p" for name, _, _ in calls)
            seen["empty"] += not ranked.labelled
        self.assertGreater(min(seen.values()), 100, seen)

    # -- every hook at once: byte-identical reports ------------------------------
    def cli(self, folder, argv):
        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            code = rag_eval.main(list(argv), stdout=out, stderr=err)
        finally:
            os.chdir(cwd)
        return code, out.getvalue(), err.getvalue()

    def test_reports_are_byte_identical(self):
        # Random qrels and runs in every format (TREC runs mutated now and then),
        # scored through main() with every acceleration, forked workers included
        # (small blocks, no size threshold), and with every plain twin: the same
        # exit code, stdout and stderr, byte for byte.
        rng = random.Random(22)
        seen = {0: 0, 2: 0, "forked": 0}
        for case in range(1200):
            run_text = random_run_text(rng, scattered=0.05)
            if rng.random() < 0.15:
                run_text = rng.choice(_RUN_MUTATIONS)(run_text, rng.randrange(len(run_text)))
            queries = sorted({line.split()[0] for line in run_text.splitlines()
                              if line.strip() and not line.startswith("#")})
            qrels = {q: {"d%d" % d: rng.choice([-1, 0, 1, 2]) for d in range(9)
                         if rng.random() < 0.4} for q in queries[:rng.randint(1, 6)]}
            qrels = {q: g for q, g in qrels.items() if g} or {"q0": {"d1": 1}}
            if rng.random() < 0.5:
                qrels_text = "".join("%s 0 %s %d\n" % (q, d, g) for q in qrels
                                     for d, g in qrels[q].items())
            else:
                qrels_text = json.dumps(qrels)
            run_data = run_text.encode("utf-8")
            kind = rng.random()
            if kind < 0.2:                  # the same run as JSON score maps or JSONL
                try:
                    run = rag_eval.load_run(io.BytesIO(run_data))
                except rag_eval.EvalError:
                    continue
                run_data = (json.dumps(run) if rng.random() < 0.5 else "".join(
                    json.dumps({"query_id": q, "scores": s}) + "\n"
                    for q, s in run.items())).encode("utf-8")
            folder = os.path.join(self.tmp, "c%d" % case)
            os.mkdir(folder)
            with open(os.path.join(folder, "q"), "w", encoding="utf-8") as handle:
                handle.write(qrels_text)
            with open(os.path.join(folder, "r"), "wb") as handle:
                handle.write(run_data)
            argv = ["q", "r", "--format", rng.choice(["json", "text", "markdown"]),
                    "--per-query", "--skip-extra-queries", "--k",
                    rng.choice(["1,3,10", "2", "5,20"]), "--metrics",
                    rng.choice(["recall,ndcg,mrr,judged", "map,precision,success",
                                "context_precision,ndcg(gain=linear)",
                                "map@all,rprec,bpref,mrr@all,precision@all",
                                "recall(unit=doc),diversity(unit=doc),map(unit=doc)@all",
                                "recall,success,mrr,ndcg"])]   # the four: one pass (_measure_values)
            if "unit=doc" in argv[-1]:      # ids without the separator: each its own document
                argv += ["--doc-sep", "#"]
            forked = rng.random() < 0.05 and hasattr(os, "fork") and (os.cpu_count() or 1) > 1
            rag_eval._BLOCK_SIZE = rng.choice([16, 256, 1 << 17])
            rag_eval._PARALLEL_MIN_BYTES = 0 if forked else self.saved[1]
            fast = self.cli(folder, argv)
            rag_eval._PARALLEL_MIN_BYTES = self.saved[1]
            with plain_twins():
                plain = self.cli(folder, argv)
            self.assertEqual(fast, plain, (qrels_text, run_data, argv, forked))
            seen[plain[0]] = seen.get(plain[0], 0) + 1
            seen["forked"] += forked
            shutil.rmtree(folder)
        self.assertGreater(min(seen[0], seen[2], seen["forked"]), 20, seen)

    # -- moved from LoaderTest and MalformedInputTest ---------------------------
    def test_trec_qrels_fast_and_checked_readers_agree(self):
        texts = [b"q1 0 a 1\nq1 0 b 0\nq2 0 c 2\n", b"q1 0 a 1\r\nq2 0 b -1\r\n",
                 b"q1 0 a 1\nq2 0 b 1", b"q1 0 a#1/x 3\n"]
        for name in sorted(os.listdir(PEERS)):
            path = os.path.join(PEERS, name, "qrels.trec")
            if os.path.exists(path):
                with open(path, "rb") as handle:
                    texts.append(handle.read())
        for data in texts:
            with self.subTest(data=data[:30]):
                path = self.write("q.trec", data)
                fast = rag_eval._trec_qrels_fast(data)
                self.assertIsNotNone(fast)
                self.assertEqual(fast, rag_eval._trec_qrels_checked(rag_eval._Input(path)))
        for data in (b"q1\t0\ta\t1\n", b"q1 0 a 1\n\nq2 0 b 1\n", b"q1 0  a 1\n",
                     b"q1 0 a 1 x\nq1 0 b\n", b"q1 0 a 1_0\n", b"q1 0 a 1\nq1 0 a 2\n"):
            with self.subTest(irregular=data):
                self.assertIsNone(rag_eval._trec_qrels_fast(data))

    def test_trec_qrels_fast_reader_agrees_on_mutated_lines(self):
        # Seeded mutations of regular qrels: whatever the split-on-spaces reader
        # returns, the line-by-line reader returns too (None defers to it).
        inserts = [" ", "\t", "\x0b", "\x0c", "\r", "\r\n", "\n", "  ", "1", "-", "+", "_",
                   "\u0662", "\x85", "\xa0", "\x1c", "#", "x"]
        rng = random.Random(9)
        seen = {"fast": 0, "deferred": 0, "error": 0}
        for case in range(3000):
            text = "".join("q%d 0 d%d %d\n" % (rng.randrange(3), rng.randrange(6),
                                                rng.choice([0, 1, 2, -1, 12]))
                           for _ in range(rng.randrange(1, 7)))
            text = "".join(dict.fromkeys(text.splitlines(True)))    # no conflicting grade yet
            for _ in range(rng.randrange(4)):
                i = rng.randrange(len(text))
                if rng.random() < 0.2:
                    text = text[:i] + text[i + 1:]
                else:
                    text = text[:i] + rng.choice(inserts) + text[i:]
            data = text.encode()
            fast = rag_eval._trec_qrels_fast(data)
            try:
                careful = rag_eval._trec_qrels_checked(rag_eval._Input(io.BytesIO(data)))
            except rag_eval.EvalError:
                careful = "error"
            if fast is not None:
                self.assertEqual(fast, careful, data)
            seen["fast" if fast is not None else "error" if careful == "error" else "deferred"] += 1
        self.assertGreater(min(seen.values()), 200, seen)

    def test_fast_trec_reader_agrees_with_the_line_reader(self):
        # Seeded mutations of a regular block: the split-on-spaces reader must
        # give what the line-by-line reader gives (segments or the same error).
        def outcome(read):
            try:
                segments = read()
            except rag_eval.EvalError as exc:
                return str(exc)
            merged = []     # a change of tag may cut a query in two: the reader joins them
            for qid, docs, scores in segments:
                if not merged or merged[-1][0] != qid:
                    merged.append((qid, [], []))
                merged[-1][1].extend(docs)
                merged[-1][2].extend(map(float, scores))
            return merged

        rng = random.Random(11)
        seen = {"fast": 0, "error": 0}
        for case in range(3000):
            scores = sorted((rng.choice([rng.uniform(0, 99), rng.randint(0, 20)])
                             for _ in range(12)), reverse=True)
            text = "".join("q%d Q0 d%d %d %s t\n" % (r // 5, rng.randrange(9), r,
                                                      rng.choice(["%.3f", "%.1f", "%s"]) % s)
                           for r, s in enumerate(scores))
            for _ in range(rng.randrange(3)):
                text = rng.choice(_RUN_MUTATIONS)(text, rng.randrange(len(text)))
            block = text.encode() + (b"" if text.endswith("\n") else b"\n")
            lines = block.count(b"\n")
            fast = outcome(lambda: rag_eval._block_segments(block, "r", 0, lines))
            slow = outcome(lambda: rag_eval._block_segments_checked(block, "r", 0))
            self.assertEqual(fast, slow, block)
            seen["error" if isinstance(slow, str) else "fast"] += 1
        self.assertGreater(min(seen.values()), 500, seen)

    def test_decimal_tokens_compare_as_numbers(self):
        # _decimal_tokens says yes exactly when every token has one width, at
        # most 15 digits and its point (or none) in one column.
        def reference(raw):
            width, point = len(raw[0]), raw[0].find(b".")
            return all(len(t) == width and t.find(b".") == point and t.count(b".") <= 1
                       and t.replace(b".", b"").isdigit() and len(t) - (point >= 0) <= 15
                       for t in raw)

        rng = random.Random(12)
        alphabet = [b"1", b"2", b"0", b".", b"-", b"e", b"9"]
        said_yes = 0
        for case in range(4000):
            width = rng.randint(1, 17)
            raw = [b"".join(rng.choice(alphabet[:3] if rng.random() < 0.7 else alphabet)
                            for _ in range(width + (rng.random() < 0.05)))
                   for _ in range(rng.randint(1, 6))]
            if rng.random() < 0.5:
                column = rng.randrange(width)
                raw = [t[:column] + b"." + t[column + 1:] for t in raw]
            got = rag_eval._decimal_tokens(raw)
            self.assertEqual(got, reference(raw), raw)
            said_yes += got
        self.assertGreater(said_yes, 400)

    # -- moved from StreamingTest, ParallelTest and ParallelJsonTest ------------
    def test_fast_path_matches_dict_path(self):
        # The run streamed from its file (evaluate_files) scores as the run loaded
        # whole into a dict (evaluate).
        qrels, lines = (test_inputs.StreamingTest.QRELS,
                        "\n".join(test_inputs.StreamingTest.LINES) + "\n")
        run = rag_eval.load_run(self.write("r.trec", lines))
        by_dict = rag_eval.evaluate(qrels, run, k="1,2,3", metrics="recall,mrr,ndcg,judged")
        streamed = rag_eval.evaluate_files(self.write("q.json", json.dumps(qrels)),
                                           self.write("r.trec", lines), k="1,2,3",
                                           metrics="recall,mrr,ndcg,judged")
        self.assertEqual(by_dict.per_query, streamed.per_query)

    # -- forked workers (_scored_run_forked) against one core ------------------
    def test_forked_trec_run_gives_the_numbers_of_one_core(self):
        self.use_forked_workers()
        lines = self.lines()
        parallel = self.evaluate(lines)
        self.assertTrue(rag_eval._parallel_ok(rag_eval._Input(os.path.join(self.tmp, "r.trec")),
                                              "trec"))
        rag_eval._PARALLEL_MIN_BYTES = 1 << 62
        sequential = self.evaluate(lines)
        self.assertEqual(parallel.per_query, sequential.per_query)
        self.assertEqual(parallel.ties, sequential.ties)
        self.assertEqual(parallel.abstention, sequential.abstention)
        self.assertEqual(parallel.inputs, sequential.inputs)
        self.assertEqual(parallel.warnings, sequential.warnings)
        self.assertEqual(parallel.unlabelled, sequential.unlabelled)
        self.assertGreater(len(parallel.ties), 0)
        self.assertGreater(len(parallel.unlabelled), 0)

    def test_a_run_meeting_no_label_says_the_same_on_every_core(self):
        self.use_forked_workers()
        lines = [line.replace(" d", " x", 1) for line in self.lines()]    # no id is labelled
        parallel = self.evaluate(lines)
        rag_eval._PARALLEL_MIN_BYTES = 1 << 62
        sequential = self.evaluate(lines)
        self.assertIn("not one retrieved id carries a label", parallel.unlabelled_run)
        self.assertEqual(parallel.unlabelled_run, sequential.unlabelled_run)
        self.assertEqual(parallel.warnings, sequential.warnings)

    def test_forked_json_runs_give_the_numbers_of_the_dict(self):
        self.use_forked_workers(block_size=None)
        qrels, run = json_run_case()
        qpath = self.write("q.json", json.dumps(qrels))
        expected = rag_eval.evaluate(qrels, run, k="1,3,10", metrics="recall,ndcg,mrr,judged")
        self.write("r.json", json.dumps(run, indent=1))
        self.write("r.jsonl", "".join(json.dumps({"query_id": q, ("docs" if isinstance(v, list)
                                                  else "scores"): v}) + "\n"
                                      for q, v in run.items()))
        for name in ("r.json", "r.jsonl"):
            with self.subTest(file=name):
                self.assertTrue(rag_eval._parallel_ok(
                    rag_eval._Input(os.path.join(self.tmp, name)), "json"))
                report = rag_eval.evaluate_files(qpath, os.path.join(self.tmp, name), k="1,3,10",
                                                 metrics="recall,ndcg,mrr,judged")
                self.assertEqual(report.per_query, expected.per_query)
                self.assertEqual(report.warnings, expected.warnings)


class ParallelTest(ForkedRuns, TempDir, unittest.TestCase):
    """Large plain TREC runs are scored by one forked worker per core; here the
    size threshold is lowered so small files take that path too."""

    def setUp(self):
        super().setUp()
        self.saved = rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE
        self.use_forked_workers()

    def tearDown(self):
        rag_eval._PARALLEL_MIN_BYTES, rag_eval._BLOCK_SIZE = self.saved
        super().tearDown()

    def test_an_error_after_the_merge_leaves_no_pipe_open(self):
        # The run's hash is computed by another process while results merge; an
        # error after the merge (here a query not in the qrels) must not leak it.
        if not os.path.isdir("/proc/self/fd"):
            self.skipTest("needs /proc")
        lines = self.lines() + ["zz Q0 d1 1 1.0 t"]
        before = len(os.listdir("/proc/self/fd"))
        with self.assertRaisesRegex(rag_eval.EvalError, "1 query is not in the qrels: 'zz'"):
            self.evaluate(lines)
        rag_eval._reap_all()
        self.assertEqual(len(os.listdir("/proc/self/fd")), before)
        self.assertEqual(rag_eval._EXITING, set())

    @accelerated_only
    def test_a_change_of_run_tag_stays_on_every_core(self):
        lines = self.lines()
        tagged = [line[:-1] + ("a" if i % 7 < 3 else "b") for i, line in enumerate(lines)]
        expected = self.evaluate(lines)
        sequential = rag_eval._run_queries
        rag_eval._run_queries = lambda *args, **kwargs: self.fail("fell back to one core")
        try:
            report = self.evaluate(tagged)
        finally:
            rag_eval._run_queries = sequential
        self.assertEqual(report.per_query, expected.per_query)
        self.assertEqual(report.warnings, expected.warnings)

    @accelerated_only
    def test_comment_lines_stay_on_every_core(self):
        lines = self.lines()
        commented = ["# run of %d lines" % len(lines)]
        for i, line in enumerate(lines):
            commented += [line, "#" + line] if i % 50 == 7 else [line]
        expected = self.evaluate(lines)
        sequential = rag_eval._run_queries
        rag_eval._run_queries = lambda *args, **kwargs: self.fail("fell back to one core")
        try:
            report = self.evaluate(commented)
        finally:
            rag_eval._run_queries = sequential
        self.assertEqual(report.per_query, expected.per_query)
        self.assertEqual(report.ties, expected.ties)

    def test_bad_line_is_named_exactly(self):
        lines = self.lines()
        lines[1000] = "q33 Q0 d1 1 oops t"
        with self.assertRaisesRegex(rag_eval.EvalError, r"r.trec:1001: score must be a finite"):
            self.evaluate(lines)

    def test_fork_failure_falls_back(self):
        lines = self.lines()
        expected = self.evaluate(lines)
        real_fork = os.fork

        def no_fork():
            raise BlockingIOError(11, "Resource temporarily unavailable")
        os.fork = no_fork
        try:
            report = self.evaluate(lines)
        finally:
            os.fork = real_fork
        self.assertEqual(report.per_query, expected.per_query)

    def test_no_fork_while_other_threads_run(self):
        import threading
        path = self.write("r.trec", "q1 Q0 a 1 1.0 t\n")
        self.assertTrue(rag_eval._parallel_ok(rag_eval._Input(path), "trec"))
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait)
        worker.start()
        try:
            self.assertFalse(rag_eval._parallel_ok(rag_eval._Input(path), "trec"))
        finally:
            stop.set()
            worker.join()

    def test_error_in_this_process_while_a_child_has_much_to_send(self):
        # A bad line in the first range fails here while the child holds a result
        # larger than a pipe's buffer: the child must be released, not waited on
        # forever.  Run in a subprocess with a time limit so a hang fails the test.
        lines = ["q%04d Q0 d%d %d %d.5 t" % (q, d, d, 9 - d) for q in range(4000)
                 for d in range(3)]
        lines[1] = "q0000 Q0 d1 2 oops t"
        run = self.write("r.trec", "\n".join(lines) + "\n")
        qrels = self.write("q.json", json.dumps({"q%04d" % q: {"d1": 1} for q in range(4000)}))
        code = ("import sys, rag_eval; rag_eval._PARALLEL_MIN_BYTES = 0; "
                "sys.exit(rag_eval.main(sys.argv[1:]))")
        proc = subprocess.run([sys.executable, "-c", code, qrels, run], cwd=HERE, timeout=60,
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("r.trec:2: score must be a finite number, got 'oops'", proc.stderr)

    def test_scattered_queries_fall_back(self):
        lines = self.lines()
        lines = lines[600:] + lines[:600]
        lines[5], lines[900] = lines[900], lines[5]
        report = self.evaluate(lines)
        rag_eval._PARALLEL_MIN_BYTES = 1 << 62
        self.assertEqual(report.per_query, self.evaluate(self.lines()).per_query)
        self.assertIn("not contiguous", report.warnings[0])


class ParallelJsonTest(ForkedRuns, TempDir, unittest.TestCase):
    """JSON and JSONL runs cut between queries and scored by forked workers."""

    def setUp(self):
        super().setUp()
        self.saved = rag_eval._PARALLEL_MIN_BYTES
        self.use_forked_workers(block_size=None)
        self.qrels, self.run = json_run_case()
        self.qpath = self.write("q.json", json.dumps(self.qrels))

    def tearDown(self):
        rag_eval._PARALLEL_MIN_BYTES = self.saved
        super().tearDown()

    def evaluate(self, name):
        return rag_eval.evaluate_files(self.qpath, os.path.join(self.tmp, name), k="1,3,10",
                                       metrics="recall,ndcg,mrr,judged")

    def test_a_run_that_maps_its_own_chunks_is_not_split(self):
        # Found by review: each worker kept its own map, so one chunk placed two
        # ways in two byte ranges passed (exit 0) where the plain path refused.
        lines = []
        for q in range(60):
            items = [{"id": "d%d#%d" % (q % 7, c), "doc": "d%d" % (q % 7), "start": 10 * c,
                      "end": 10 * c + 10} for c in range(20)]
            if q in (0, 59):
                items[0] = {"id": "zz", "doc": "d%d" % q, "start": 0, "end": 5}
            lines.append(json.dumps({"query_id": "q%d" % q, "docs": items}))
        self.write("r.jsonl", "\n".join(lines) + "\n")
        qpath = self.write("l.jsonl", "".join(json.dumps({"query_id": "q%d" % q, "doc": "d1",
                                                          "grade": 1}) + "\n" for q in range(60)))
        for plain in (False, True):
            with self.subTest(plain=plain), (plain_twins() if plain else contextlib.nullcontext()):
                with self.assertRaisesRegex(rag_eval.EvalError, "chunk 'zz' is given twice"):
                    rag_eval.evaluate_files(qpath, os.path.join(self.tmp, "r.jsonl"), k=5,
                                            measures="recall(unit=doc)")

    def test_trailing_comma_is_still_invalid(self):
        text = json.dumps(self.run)
        self.write("r.json", text[:-1] + ",}")
        with self.assertRaisesRegex(rag_eval.EvalError, "invalid JSON"):
            self.evaluate("r.json")

    def test_cut_points_inside_strings_are_rejected(self):
        # Every cut falls inside the long id, so each worker's parse fails and the
        # sequential path scores the file.
        run = {"q00": ["x" + "], \"" * 50000], "q01": ["d1"]}
        self.write("r.json", json.dumps(run))
        report = self.evaluate("r.json")
        self.assertEqual(report.per_query["q01"]["recall@10"],
                         1 / sum(1 for g in self.qrels["q01"].values() if g >= 1))

    def test_duplicate_query_across_ranges_is_an_error(self):
        lines = [json.dumps({"query_id": q, "scores": v}) for q, v in self.run.items()
                 if isinstance(v, dict)]
        self.write("r.jsonl", "\n".join(lines + lines[:1]) + "\n")
        with self.assertRaisesRegex(rag_eval.EvalError, r"r.jsonl:30: query 'q00' appears on "
                                                        r"more than one line"):
            self.evaluate("r.jsonl")
        text = json.dumps(self.run)
        self.write("r.json", text[:-1] + ', "q00": ["d1"]}')
        with self.assertRaisesRegex(rag_eval.EvalError, "duplicate key 'q00'"):
            self.evaluate("r.json")
