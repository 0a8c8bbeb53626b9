#!/usr/bin/env python3
"""The values rag_eval should print on the re-chunking example, computed by a
second, deliberately plain implementation of the measures (written from the
issue 11 semantics, not from rag_eval.py).  Characters are handled as sets of
(document, code point index) pairs rather than as intervals, so it shares no
interval arithmetic with the library.

make_example.py calls expected(files) and writes the result to expected.json;
run alone, this prints the means it computes from the files on disk:

    python3 examples/rechunk/expected.py
"""

import json
import math
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
REL = 1
CUTOFFS = (3, 5)
BUDGET = 100            # tokens (the chunk map's whitespace word counts)

# The two commands of the README print these (measure name -> mean).
COMMAND_MEASURES = ("recall(unit=doc)", "recall(unit=evidence)", "span_recall", "span_iou",
                    "diversity(unit=doc)")
# More measures of the same runs, for the library's tests (evaluate_files with chunks=).
MORE_MEASURES = ("success(unit=doc)", "mrr(unit=doc)", "precision(unit=doc)", "map(unit=doc)",
                 "ndcg(unit=doc)", "ndcg(gain=linear,unit=doc)", "complete(unit=doc)",
                 "success(unit=evidence)", "mrr(unit=evidence)", "complete(unit=evidence)",
                 "recall(cover=0.5,unit=evidence)", "span_precision",
                 "span_precision(dup=count)", "span_iou(dup=count)")
BUDGET_MEASURES = ("recall(budget=%d,unit=doc)" % BUDGET,
                   "recall(budget=%d,unit=evidence)" % BUDGET)


def read_jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ---------------------------------------------------------------------------
# One query.
# ---------------------------------------------------------------------------

def chars(doc, start, end):
    return {(doc, i) for i in range(start, end)}


class Query:
    def __init__(self, labels, ranking, chunk_map):
        self.labels = labels            # [{"doc", "start"?, "end"?, "grade"}]
        seen = []
        for cid in ranking:             # distinct ids, each at its first position
            if cid not in seen:
                seen.append(cid)
        self.ids = seen
        self.chunks = [chunk_map[cid] for cid in seen]

    # ---- unit=doc ----
    def doc_grades(self):
        grades = {}
        for lab in self.labels:
            grades[lab["doc"]] = max(lab["grade"], grades.get(lab["doc"], lab["grade"]))
        return grades

    def first_rank(self):
        """p(d): rank (1-based, in chunks) of each document's first chunk."""
        p = {}
        for rank, c in enumerate(self.chunks, 1):
            p.setdefault(c["doc"], rank)
        return p

    def doc_measure(self, name, k, gain="exponential"):
        grades, p = self.doc_grades(), self.first_rank()
        relevant = [d for d, g in grades.items() if g >= REL]
        hit_ranks = sorted(p[d] for d in relevant if d in p and p[d] <= k)
        if name == "recall":
            return len(hit_ranks) / len(relevant)
        if name == "success":
            return 1.0 if hit_ranks else 0.0
        if name == "mrr":
            return 1.0 / hit_ranks[0] if hit_ranks else 0.0
        if name == "precision":
            return len(hit_ranks) / k
        if name == "complete":
            return 1.0 if len(hit_ranks) == len(relevant) else 0.0
        if name == "map":
            return sum((i + 1) / r for i, r in enumerate(hit_ranks)) / len(relevant)
        if name == "ndcg":
            def g_of(g):
                if g <= 0:
                    return 0.0
                return float(g) if gain == "linear" else 2.0 ** g - 1.0
            dcg = sum(g_of(grades[d]) / math.log2(p[d] + 1)
                      for d in grades if d in p and p[d] <= k)
            ideal = sorted(grades.values(), reverse=True)[:k]
            idcg = sum(g_of(g) / math.log2(i + 2) for i, g in enumerate(ideal))
            return dcg / idcg
        if name == "diversity":
            slots = min(k, len(self.ids))
            if slots == 0:
                return 0.0
            return len({c["doc"] for c in self.chunks[:slots]}) / slots
        raise KeyError(name)

    # ---- unit=evidence ----
    def evidence_units(self):
        """[(doc, set of characters or None for the whole document)]."""
        by_doc = {}
        for lab in self.labels:
            if lab["grade"] >= REL:
                by_doc.setdefault(lab["doc"], []).append(lab)
        units = []
        for doc in sorted(by_doc):
            labs = by_doc[doc]
            if any("start" not in lab for lab in labs):
                units.append((doc, None))
                continue
            groups = [chars(doc, lab["start"], lab["end"]) for lab in labs]
            merged = True
            while merged:                 # join groups sharing a character
                merged = False
                for i in range(len(groups)):
                    for j in range(i + 1, len(groups)):
                        if groups[i] & groups[j]:
                            groups[i] |= groups.pop(j)
                            merged = True
                            break
                    if merged:
                        break
            units.extend((doc, g) for g in groups)
        return units

    def found_ranks(self, cover):
        share = Fraction(cover)
        out = []
        for doc, unit in self.evidence_units():
            seen, found = set(), None
            for rank, c in enumerate(self.chunks, 1):
                if c["doc"] != doc:
                    continue
                if unit is None:
                    found = rank
                    break
                seen |= chars(doc, c["start"], c["end"]) & unit
                if seen and Fraction(len(seen), len(unit)) >= share:
                    found = rank
                    break
            out.append(found)
        return out

    def evidence_measure(self, name, k, cover="1"):
        found = self.found_ranks(cover)
        hits = sorted(f for f in found if f is not None and f <= k)
        if name == "recall":
            return len(hits) / len(found)
        if name == "success":
            return 1.0 if hits else 0.0
        if name == "mrr":
            return 1.0 / hits[0] if hits else 0.0
        if name == "complete":
            return 1.0 if len(hits) == len(found) else 0.0
        raise KeyError(name)

    # ---- character measures ----
    def has_spans(self):
        return any("start" in lab and lab["grade"] >= REL for lab in self.labels)

    def char_measure(self, name, k, dup="merge"):
        e = set()
        for lab in self.labels:
            if "start" in lab and lab["grade"] >= REL:
                e |= chars(lab["doc"], lab["start"], lab["end"])
        r, s = set(), 0
        for c in self.chunks[:k]:
            r |= chars(c["doc"], c["start"], c["end"])
            s += c["end"] - c["start"]
        both = len(r & e)
        if name == "span_recall":
            return both / len(e)
        if name == "span_precision":
            retrieved = s if dup == "count" else len(r)
            return both / retrieved if retrieved else 0.0
        if name == "span_iou":
            if dup == "count":
                return both / (s + len(e) - both)
            return both / len(r | e)
        raise KeyError(name)

    def budget_cut(self, budget):
        used, k = 0, 0
        for c in self.chunks:
            if used + c["tokens"] > budget:
                break
            used += c["tokens"]
            k += 1
        return k


# ---------------------------------------------------------------------------
# One run.
# ---------------------------------------------------------------------------

def parse_name(name):
    """'recall(cover=0.5,unit=evidence)' -> ('recall', {'cover': '0.5', 'unit': 'evidence'})."""
    if "(" not in name:
        return name, {}
    base, inner = name[:-1].split("(")
    return base, dict(part.split("=") for part in inner.split(","))


def value(query, name, k):
    base, params = parse_name(name)
    if "budget" in params:
        k = query.budget_cut(int(params.pop("budget")))
        if k == 0:
            return 0.0
    unit = params.get("unit", "id")
    if base.startswith("span_"):
        if not query.has_spans():
            return None                      # unscored: no span label graded >= rel
        return query.char_measure(base, k, params.get("dup", "merge"))
    if unit == "doc":
        return query.doc_measure(base, k, params.get("gain", "exponential"))
    if unit == "evidence":
        return query.evidence_measure(base, k, params.get("cover", "1"))
    raise KeyError(name)


def score(labels_by_q, run, chunk_map, names):
    per_query = {}
    for name in names:
        cutoffs = [None] if "budget=" in name else CUTOFFS
        for k in cutoffs:
            full = name if k is None else "%s@%d" % (name, k)
            vals = {}
            for qid in sorted(labels_by_q):
                if not any(lab["grade"] >= REL for lab in labels_by_q[qid]):
                    continue                 # no relevant label: unscored for every measure
                v = value(Query(labels_by_q[qid], run.get(qid, []), chunk_map), name, k)
                if v is not None:
                    vals[qid] = v
            per_query[full] = vals
    means = {n: math.fsum(v.values()) / len(v) for n, v in per_query.items()}
    return means, per_query


def chunk_id_recall(qrels, run, k):
    """Today's recall@k (unit=id) with the chunk-id labels."""
    vals = {}
    for qid, grades in sorted(qrels.items()):
        relevant = {c for c, g in grades.items() if g >= REL}
        if relevant:
            top = []
            for c in run.get(qid, []):
                if c not in top:
                    top.append(c)
            vals[qid] = len(relevant & set(top[:k])) / len(relevant)
    return math.fsum(vals.values()) / len(vals), vals


def check_coverable(labels, chunk_map, tag):
    """Every labelled span lies inside the chunks of its document (nothing is
    lost at ingestion), so a miss is the retriever's."""
    for lab in labels:
        if "start" in lab:
            have = set()
            for c in chunk_map.values():
                if c["doc"] == lab["doc"]:
                    have |= chars(c["doc"], c["start"], c["end"])
            need = chars(lab["doc"], lab["start"], lab["end"])
            assert need <= have, (tag, lab)


def expected(files):
    labels = read_jsonl(files["labels.jsonl"])
    labels_by_q = {}
    for lab in labels:
        labels_by_q.setdefault(lab["query_id"], []).append(
            {key: v for key, v in lab.items() if key != "query_id"})
    chunk_qrels = json.loads(files["labels-chunk-ids.json"])
    out = {"note": "Means (math.fsum/len) over each measure's population, per run, computed by "
                   "examples/rechunk/expected.py from the issue 11 semantics (rel=1, cover "
                   "compared exactly). Population: unit=doc, unit=evidence and diversity over "
                   "the queries with a label graded >= 1 (all 8); span_* over the queries with "
                   "a span label graded >= 1 (q6 has whole-document labels only: unscored). "
                   "'command' is what the README runs; 'more' are further measures of the same "
                   "run for the library (rag_eval.evaluate_files(labels, run, chunks=...)); "
                   "'chunk_id_qrels' scores labels-chunk-ids.json with today's unit=id."}
    for tag in ("a", "b"):
        chunk_map = {c["id"]: c for c in read_jsonl(files["chunks-%s.jsonl" % tag])}
        check_coverable(labels, chunk_map, tag)
        run = {r["query_id"]: r["docs"] for r in read_jsonl(files["run-%s.jsonl" % tag])}
        means, per_query = score(labels_by_q, run, chunk_map, COMMAND_MEASURES)
        more, more_pq = score(labels_by_q, run, chunk_map, MORE_MEASURES + BUDGET_MEASURES)
        entry = {
            "command": ("python3 rag_eval.py examples/rechunk/labels.jsonl "
                        "examples/rechunk/run-%s.jsonl --chunks examples/rechunk/chunks-%s.jsonl "
                        "--metrics '%s' --k %s" % (tag, tag, ",".join(COMMAND_MEASURES),
                                                   ",".join(map(str, CUTOFFS)))),
            "mean": means,
            "per_query": per_query,
            "more": {"mean": more, "per_query": more_pq},
        }
        touched = {cid for r in run.values() for cid in r}
        labelled = {cid for g in chunk_qrels.values() for cid in g}
        entry["chunk_id_qrels"] = {
            "command": "python3 rag_eval.py examples/rechunk/labels-chunk-ids.json "
                       "examples/rechunk/run-%s.jsonl --metrics recall --k %s"
                       % (tag, ",".join(map(str, CUTOFFS))),
            # 2: not one retrieved id carries a label; the means are then what
            # --allow-unlabelled-run prints
            "exit": 0 if touched & labelled else 2,
            "mean": {"recall@%d" % k: chunk_id_recall(chunk_qrels, run, k)[0] for k in CUTOFFS}}
        out["run-%s" % tag] = entry
    return out


def main():
    names = ("chunks-a.jsonl", "chunks-b.jsonl", "labels.jsonl", "labels-chunk-ids.json",
             "run-a.jsonl", "run-b.jsonl")
    files = {n: (HERE / n).read_text(encoding="utf-8") for n in names}
    result = expected(files)
    for tag in ("a", "b"):
        print("run-%s" % tag)
        for name, mean in result["run-%s" % tag]["mean"].items():
            print("  %-28s %.4f" % (name, mean))


if __name__ == "__main__":
    main()
