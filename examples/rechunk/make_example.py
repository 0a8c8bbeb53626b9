#!/usr/bin/env python3
"""Build the re-chunking example: the same documents cut by two chunkers,
span labels that survive the change, and one run per chunking.

    python3 examples/rechunk/make_example.py           # (re)write the files
    python3 examples/rechunk/make_example.py --check   # exit 1 if a file differs

Standard library only; the output is deterministic (no randomness, no
clock, no dependence on PYTHONHASHSEED), so the committed files are exactly
what this script writes.  It reads docs/*.md and writes, next to itself:

  chunks-a.jsonl         chunker A: fixed 200-character windows, no overlap
  chunks-b.jsonl         chunker B: markdown sections, paragraphs packed up to 350 characters
  labels.jsonl           span and whole-document labels (one label a line)
  labels-chunk-ids.json  the same judgements as chunk-id qrels {qid: {chunk id of A: grade}}
  run-a.jsonl            the run over chunking A ({"query_id", "docs": [chunk ids]})
  run-b.jsonl            the run over chunking B
  expected.json          the values rag_eval should print (computed by expected.py,
                         an independent implementation of the measures)

Offsets are [start, end) in Unicode code points of the document text, i.e.
Python str indices of the file decoded as UTF-8 with no newline translation.
Every span label is found from a quoted evidence sentence with str.find, and
the quote must occur exactly once in its document.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = HERE / "docs"

A_WINDOW = 200          # chunker A: fixed windows of this many characters
RUN_DEPTH = 6           # chunks a run returns per query
B_LIMIT = 350           # chunker B: a section's paragraphs packed while within this

# Each query: its text (shown in the README), its labels and the passages a
# retriever finds for it, best first.
#   span label:   (doc, quoted evidence, grade)
#   whole doc:    (doc, None, grade, hint)  hint = the sentence a chunk-id labeller
#                 would have pointed at; used only for labels-chunk-ids.json
#   run:          (doc, quoted passage) hits, best first; each hit returns the chunks
#                 of the chunking that overlap the passage (most overlap first), so
#                 both runs find the same passages and only the chunk ids differ.
REFUND, HANDBOOK, PRICING, SLA = ("refund-policy.md", "employee-handbook.md", "pricing.md",
                                  "service-level-agreement.md")
QUERIES = [
    dict(id="q1", text="How long do I have to get a refund on a monthly plan?",
         labels=[(REFUND, "Customers can request a full refund within 30 days of their first "
                          "purchase.", 2),
                 (REFUND, "After 30 days, a monthly plan can be cancelled at any time, but the "
                          "current billing month is not refunded.", 1)],
         run=[(REFUND, "Customers can request a full refund within 30 days"),
              (REFUND, "After 30 days, a monthly plan can be cancelled"),
              (PRICING, "Every plan starts with a 14-day free trial"),
              (REFUND, "Refunds go back to the original payment method"),
              (HANDBOOK, "Submit expenses in the Spesen app within 30 days"),
              (SLA, "Submit a claim through the support portal within 30 days"),
              (REFUND, "Annual plans are refunded pro rata")]),
    dict(id="q2", text="Can I still get my money back on an annual plan after four months?",
         labels=[(REFUND, "After 90 days, annual plans are non-refundable, except where the law "
                          "requires a refund or where a service credit under the Service Level "
                          "Agreement applies.", 2),
                 (REFUND, "Annual plans are refunded pro rata, for the unused whole months, if "
                          "you cancel within the first 90 days.", 1)],
         run=[(REFUND, "Annual plans are refunded pro rata"),
              (REFUND, "After 90 days, annual plans are non-refundable"),
              (PRICING, "€15 billed annually"),
              (SLA, "Credits are applied to the next invoice"),
              (REFUND, "Customers can request a full refund within 30 days"),
              (PRICING, "Every plan starts with a 14-day free trial"),
              (REFUND, "Purchases made through a reseller")]),
    dict(id="q3", text="How many vacation days do employees in Zürich get?",
         labels=[(HANDBOOK, "Full-time employees in Zürich receive 25 days of paid vacation per "
                            "calendar year", 2)],
         run=[(HANDBOOK, "Full-time employees in Zürich receive 25 days"),
              (HANDBOOK, "Up to 5 unused vacation days can be carried over"),
              (HANDBOOK, "This section applies to every employee of Acme GmbH in Zürich"),
              (HANDBOOK, "Tell your manager before 10:00"),
              (PRICING, "Non-profits and schools get 50% off"),
              (HANDBOOK, "Travel is booked through the travel desk"),
              (SLA, "Priority 2: within 4 business hours")]),
    dict(id="q4", text="Who has to approve an expense of CHF 800?",
         labels=[(HANDBOOK, "Expenses up to CHF 500 are approved by your manager; anything above "
                            "CHF 500 also needs approval from Finance before you make the "
                            "purchase.", 2),
                 (PRICING, None, 0, "All prices are per seat per month")],
         run=[(PRICING, "All prices are per seat per month"),
              (HANDBOOK, "Expenses up to CHF 500 are approved by your manager"),
              (HANDBOOK, "Travel is booked through the travel desk"),
              (REFUND, "Open a ticket from Settings > Billing"),
              (HANDBOOK, "with a receipt for every item over CHF 20"),
              (PRICING, "Volume discounts start at 250 seats"),
              (REFUND, "Refunds go back to the original payment method"),
              (SLA, "Credits are applied to the next invoice")]),
    dict(id="q5", text="What does the Business plan cost per seat?",
         labels=[(PRICING, "Business — €39 per seat per month, billed annually only", 2)],
         run=[(PRICING, "Business — €39 per seat per month"),
              (PRICING, "Enterprise — custom pricing"),
              (SLA, "This SLA applies to the Business and Enterprise plans"),
              (PRICING, "Non-profits and schools get 50% off"),
              (REFUND, "Annual plans are refunded pro rata"),
              (PRICING, "Starter — €9 per seat per month"),
              (PRICING, "Every plan starts with a 14-day free trial"),
              (SLA, "Acme guarantees 99.9% monthly uptime")]),
    dict(id="q6", text="What uptime does Acme guarantee?",
         labels=[(SLA, None, 2, "Acme guarantees 99.9% monthly uptime"),
                 (PRICING, None, 1, "the 99.9% uptime SLA")],
         run=[(SLA, "Acme guarantees 99.9% monthly uptime"),
              (SLA, "If monthly uptime falls below 99.9%"),
              (REFUND, "Last updated: 3 March 2025"),
              (PRICING, "SCIM provisioning, audit logs and the 99.9% uptime SLA"),
              (SLA, "Priority 1 incidents: first response within 1 hour"),
              (SLA, "Submit a claim through the support portal"),
              (HANDBOOK, "Tell your manager before 10:00")]),
    dict(id="q7", text="Which plan do I need for a 99.9% uptime guarantee, and what does it cost "
                       "per seat?",
         labels=[(SLA, "Acme guarantees 99.9% monthly uptime for the web app and the API", 2),
                 (PRICING, "Business — €39 per seat per month, billed annually only", 2)],
         run=[(SLA, "Acme guarantees 99.9% monthly uptime"),
              (SLA, "This SLA applies to the Business and Enterprise plans"),
              (PRICING, "Business — €39 per seat per month"),
              (SLA, "If monthly uptime falls below 99.9%"),
              (PRICING, "Team — €19 per seat per month"),
              (REFUND, "Annual plans are refunded pro rata"),
              (PRICING, "Enterprise — custom pricing"),
              (PRICING, "Non-profits and schools get 50% off"),
              (SLA, "Submit a claim through the support portal")]),
    dict(id="q8", text="How do I ask for a refund?",
         labels=[(REFUND, "Open a ticket from Settings > Billing > Request refund, or email "
                          "billing@acme.example with your invoice number.", 2),
                 (SLA, None, 1, "Submit a claim through the support portal")],
         run=[(REFUND, "Open a ticket from Settings > Billing > Request refund"),
              (REFUND, "Customers can request a full refund within 30 days"),
              (SLA, "Submit a claim through the support portal"),
              (REFUND, "Purchases made through a reseller"),
              (PRICING, "At the end of the trial the workspace moves to Starter"),
              (HANDBOOK, "Submit expenses in the Spesen app"),
              (REFUND, "Annual plans are refunded pro rata")]),
]


def read_docs():
    out = {}
    for path in sorted(DOCS.glob("*.md")):
        with open(path, encoding="utf-8", newline="") as f:
            out[path.name] = f.read()
    return out


def find_once(text, quote, doc):
    start = text.find(quote)
    assert start >= 0, "%s: quote not found: %r" % (doc, quote)
    assert text.find(quote, start + 1) < 0, "%s: quote occurs more than once: %r" % (doc, quote)
    return start, start + len(quote)


def chunk_record(doc, tag, i, text, start, end):
    return {"id": "%s#%s%d" % (doc, tag, i), "doc": doc, "start": start, "end": end,
            "tokens": len(text[start:end].split())}


def chunker_a(doc, text):
    """Fixed windows of A_WINDOW characters, no overlap; the last one shorter."""
    return [chunk_record(doc, "a", i + 1, text, start, min(start + A_WINDOW, len(text)))
            for i, start in enumerate(range(0, len(text), A_WINDOW))]


def paragraphs(text):
    """[start, end) of each paragraph: a run of non-blank lines, without the
    newline that ends its last line."""
    out, start, pos = [], None, 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\n")
        if body.strip():
            if start is None:
                start = pos
            end = pos + len(body)
        elif start is not None:
            out.append((start, end))
            start = None
        pos += len(line)
    if start is not None:
        out.append((start, end))
    return out


def chunker_b(doc, text):
    """A markdown-aware paragraph splitter: every heading starts a new chunk
    and stays with the paragraph after it; the following paragraphs join the
    chunk while it stays within B_LIMIT characters.  A chunk runs from the
    start of its first paragraph to the end of its last one; the blank lines
    between two chunks belong to neither."""
    spans, heading_only = [], False
    for start, end in paragraphs(text):
        heading = text.startswith("#", start)
        if spans and (heading_only or (not heading and end - spans[-1][0] <= B_LIMIT)):
            spans[-1] = (spans[-1][0], end)
            heading_only = heading_only and heading
        else:
            spans.append((start, end))
            heading_only = heading          # the chunk holds nothing but headings so far
    return [chunk_record(doc, "b", i + 1, text, s, e) for i, (s, e) in enumerate(spans)]


def overlap(a_start, a_end, b_start, b_end):
    return max(0, min(a_end, b_end) - max(a_start, b_start))


def retrieve(hits, chunks_of, texts):
    """The top RUN_DEPTH chunk ids a retriever returns for these passages,
    best first: per passage the chunks overlapping it (most overlap first,
    then position), each id once."""
    ranking = []
    for doc, quote in hits:
        start, end = find_once(texts[doc], quote, doc)
        found = [(-overlap(start, end, c["start"], c["end"]), c["start"], c["id"])
                 for c in chunks_of[doc] if overlap(start, end, c["start"], c["end"])]
        for _, _, cid in sorted(found):
            if cid not in ranking:
                ranking.append(cid)
    assert len(ranking) >= RUN_DEPTH, (hits, ranking)
    return ranking[:RUN_DEPTH]


def jsonl(records):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def pretty(value):
    return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def build():
    """Every output file: {name: text}."""
    texts = read_docs()
    assert set(texts) == {REFUND, HANDBOOK, PRICING, SLA}, sorted(texts)
    chunks = {"a": {d: chunker_a(d, t) for d, t in texts.items()},
              "b": {d: chunker_b(d, t) for d, t in texts.items()}}
    labels, chunk_id_qrels, runs = [], {}, {"a": [], "b": []}
    for q in QUERIES:
        graded = {}
        for label in q["labels"]:
            doc, quote, grade = label[:3]
            if quote is None:            # a whole-document label
                labels.append({"query_id": q["id"], "doc": doc, "grade": grade})
                quote = label[3]
            else:
                start, end = find_once(texts[doc], quote, doc)
                labels.append({"query_id": q["id"], "doc": doc, "start": start, "end": end,
                               "grade": grade})
            # what a team labelling chunk ids writes: every A chunk holding the passage
            start, end = find_once(texts[doc], quote, doc)
            for c in chunks["a"][doc]:
                if overlap(start, end, c["start"], c["end"]):
                    graded[c["id"]] = max(grade, graded.get(c["id"], grade))
        chunk_id_qrels[q["id"]] = graded
        for tag in ("a", "b"):
            runs[tag].append({"query_id": q["id"],
                              "docs": retrieve(q["run"], chunks[tag], texts)})
    files = {}
    for tag in ("a", "b"):
        files["chunks-%s.jsonl" % tag] = jsonl(c for d in sorted(chunks[tag])
                                               for c in chunks[tag][d])
        files["run-%s.jsonl" % tag] = jsonl(runs[tag])
    files["labels.jsonl"] = jsonl(labels)
    files["labels-chunk-ids.json"] = pretty(chunk_id_qrels)

    sys.path.insert(0, str(HERE))
    sys.dont_write_bytecode = True     # no __pycache__ next to the example
    import expected   # the independent implementation of the measures
    files["expected.json"] = pretty(expected.expected(files))
    return files


def main(argv):
    check = argv == ["--check"]
    if argv and not check:
        sys.exit("usage: make_example.py [--check]")
    files = build()
    stale = []
    for name, text in sorted(files.items()):
        path = HERE / name
        data = text.encode("utf-8")
        if check:
            if not path.exists() or path.read_bytes() != data:
                stale.append(name)
        else:
            path.write_bytes(data)
    if stale:
        sys.exit("differs from what make_example.py writes: " + ", ".join(stale))
    print("%s %d files in %s" % ("checked" if check else "wrote", len(files), HERE))


if __name__ == "__main__":
    main(sys.argv[1:])
