"""Unjudged ids: where the labels run out.

An id the qrels do not grade counts as non-relevant, so a retriever that
surfaces new, unlabelled chunks can look worse than it is.  Here:
  --to-label FILE   the unjudged ids of the top --pool-depth of the run and
                    of every --compare run, pooled, as rows to grade
                    (_to_label_rows); the file graded is qrels again, and
                    --qrels FILE (repeatable) merges it (_merged_qrels);
  bounds            how far labelling could move a value (see below).
(unjudged=skip, a measure over the judged ids only, is a measure parameter:
03_measures.)

Uses: 01_head, 03_measures, 04_measure_names, 09_ranking.  Used by:
evaluation, the command line.
"""


def _merged_qrels(parts):
    """One qrels from [(file name, qrels)]: the labels of every file.  The
    files must agree (see _agreed_file), whatever their order; a (query, id)
    the first file (QRELS) grades as agreed keeps its rows as that file gives
    them (its repeated rows too: the labels, and their hash, of QRELS do not
    change when a file agrees with it), any other one label of the agreed
    grade (the same, and the same hash, in any order of the other files).  Beside label lists, {id: grade}
    labels are whole-document labels (as they are read by unit=doc|evidence,
    the only measures label lists serve; a graded --to-label file, say).

    >>> _merged_qrels([("a", {"q": {"x": 1}}), ("b", {"q": {"y": 0}, "p": {"z": 2}})])
    {'q': {'x': 1, 'y': 0}, 'p': {'z': 2}}
    >>> _merged_qrels([("a", {"q": {"x": -1, "y": 2}}), ("b", {"q": {"x": 0, "y": -1}})])
    {'q': {'y': 2, 'x': 0}}
    >>> _merged_qrels([("a", {"q": {"x": 1}}), ("b", {"q": {"x": 2}})])
    Traceback (most recent call last):
    rag_eval.EvalError: query 'q': id 'x' is graded 1 in a and 2 in b: label it once
    >>> _merged_qrels([("a", {"q": [Label("x", 0, 9, 2)]}), ("b", {"q": {"y": 1}})])["q"]
    [Label(doc='x', start=0, end=9, grade=2, doc_sha256=None, text=None), Label(doc='y', start=None, end=None, grade=1, doc_sha256=None, text=None)]
    """
    if any(type(labels) is list and labels for _, qrels in parts for labels in qrels.values()):
        parts = [(name, {qid: labels if type(labels) is list else
                         [Label(doc, None, None, grade) for doc, grade in labels.items()]
                         for qid, labels in qrels.items()}) for name, qrels in parts]
    given = {}      # (qid, key) -> {file name: [grade, ...]}, files in order
    versions = {}   # (qid, doc) -> {doc_sha256: file name}
    for name, qrels in parts:
        for qid, labels in qrels.items():
            for key, grade, label in _label_items(labels):
                given.setdefault((qid, key), {}).setdefault(name, []).append(grade)
                if getattr(label, "doc_sha256", None):
                    versions.setdefault((qid, label.doc), {}).setdefault(label.doc_sha256, name)
    for (qid, doc), shas in sorted(versions.items()):
        if len(shas) > 1:
            (one, a), (other, b) = sorted(shas.items())[:2]
            raise EvalError("query %r: doc %r is labelled against doc_sha256 %s... in %s and "
                            "%s... in %s: label one version" % (qid, doc, one[:12], a,
                                                                other[:12], b))
    kept = {pair: _agreed_file(pair, files) for pair, files in given.items()}
    merged, first = {}, parts[0][0]
    for index, (name, qrels) in enumerate(parts):
        for qid, labels in qrels.items():
            here = merged.setdefault(qid, [] if type(labels) is list else {})
            if type(here) is not type(labels):      # {} and [] of queries with no label
                if here and type(here) is dict:     # whole-document labels beside a list
                    here = merged[qid] = [Label(doc, None, None, g) for doc, g in here.items()]
                elif not here:
                    here = merged[qid] = type(labels)()
                else:                               # a list beside a query's empty {}
                    labels = [Label(doc, None, None, g) for doc, g in labels.items()]
            for key, grade, label in _label_items(labels):
                agreed = kept.get((qid, key))
                # (QRELS by its place: the same path given again with --qrels is no
                # second copy of its rows)
                if agreed is None or (index == 0) != (agreed[1] == first):
                    continue    # given already, or not QRELS's to give
                if agreed[1] != first:  # one label, in whatever order the files came
                    del kept[qid, key]
                    grade = agreed[0]
                    label = label and label._replace(grade=grade)
                if type(here) is dict:
                    here[key] = grade
                else:           # the document's version, whichever file gave it
                    version = versions.get((qid, label.doc))
                    here.append(label._replace(doc_sha256=min(version)) if version else label)
    return merged


def _agreed_file(pair, files):
    """(grade, file name): the grade a (query, key) graded {file name: [grade,
    ...]} keeps, and the first file giving it.  A file's grade is the highest
    of its rows (as it reads alone); the grades >= 0 must agree, and a
    negative grade (judged-unknown, which --to-label pools) gives way to them,
    else the negative grades must agree.

    >>> _agreed_file(("q", "x"), {"a": [-1], "b": [2], "c": [2]})
    (2, 'b')
    >>> _agreed_file(("q", "x"), {"a": [-1, 2], "b": [0]})
    Traceback (most recent call last):
    rag_eval.EvalError: query 'q': id 'x' is graded 2 in a and 0 in b: label it once
    """
    qid, key = pair
    graded = [(max(rows), name) for name, rows in files.items()]
    agreeing = [entry for entry in graded if entry[0] >= 0] or graded
    for grade, name in agreeing[1:]:
        if grade != agreeing[0][0]:
            raise EvalError("query %r: %s is graded %d in %s and %d in %s: label it once"
                            % (qid, _label_key_text(key), agreeing[0][0], agreeing[0][1],
                               grade, name))
    return agreeing[0]


def _label_items(labels):
    """(key, grade, label) of each label: key is the id, or (doc, start, end) of a Label."""
    if type(labels) is list:
        return [((label.doc, label.start, label.end), label.grade, label) for label in labels]
    return [(key, grade, None) for key, grade in labels.items()]


def _label_key_text(key):
    if isinstance(key, tuple):
        doc, start, end = key
        return "doc %r" % doc + ("" if start is None else " [%d, %d)" % (start, end))
    return "id %r" % key


def _pool_depth(measures, given=None):
    """How deep --to-label looks: ``given``, else the deepest any measure
    reads labels: its cutoff, or the whole ranking (@all, no cutoff, a budget).

    >>> _pool_depth(resolve_measures("recall@5,mrr@10,clean@20"))
    10
    >>> _pool_depth(resolve_measures("recall@5,map@all")) == _WHOLE_RANKING
    True
    """
    if given is not None:
        return _positive_int(given, "--pool-depth")
    labelled = [m for m in measures if _REGISTRY[m.name].population
                not in _UNANSWERABLE_POPULATIONS | {"answerable"}]
    return max([m.k if isinstance(m.k, int) and not dict(m.params).get("budget")
                else _WHOLE_RANKING for m in labelled] or [_WHOLE_RANKING])


def _unjudged_top(ranking, labels, depth, doc_of=None):
    """[(rank, id)] of the ids in the top ``depth`` that carry no label (grade
    >= 0), under the ranking rules of _rank; with ``doc_of`` (id -> Chunk), an
    id whose document carries one is judged too.

    >>> _unjudged_top({"a": 3.0, "b": 2.0, "c": 1.0}, {"b": 0, "c": -1}, 3)
    [(1, 'a'), (3, 'c')]
    """
    top = _top_entries(_text_ids(ranking), depth)[0][:depth]
    out = []
    for rank, doc in enumerate(top, 1):
        if labels.get(doc, -1) >= 0:
            continue
        if doc_of is not None and labels.get(doc_of(doc).doc, -1) >= 0:
            continue
        out.append((rank, doc))
    return out


def _to_label_rows(runs, qrels, depth, mapping=None, hidden=frozenset(), by_doc=True,
                   first=frozenset(), questions=None, texts=None):
    """The rows of --to-label: for each (query, id) unjudged in the top
    ``depth`` of any of ``runs`` [(name, {qid: ranking} or (qid, ranking)
    stream)], one dict {"query_id"[, "question"], "id"[, "doc", "start",
    "end"][, "text"], "best_rank", "runs", "grade": None}, sorted by best
    rank, then query, then id; every row of the ``first`` queries
    (unsupported_pass: their answer passed without the evidence) comes
    before any other.  Only queries of ``qrels`` are pooled, the ``hidden``
    ones (the hold-out) never.  The rows carry what a person needs
    to grade, where the inputs give it: the query's ``questions`` {qid: text}
    (a test set's), the chunk's document and span (a ``mapping``, else the
    run's own fields: a ranked list of objects) and its text (the run item's
    "text", else the chunk map's: ``texts(ids)`` gives {id: text} of the ids
    still without one, asked once).  With a document
    known, an id whose document is labelled is judged when the measures
    count documents (``by_doc``).  A run given as (name, queries, mapping[,
    texts]) maps its ids by its own (another chunker's map) and takes their
    texts from its own; a row names the document, and the text, of the first
    run that pooled it.

    >>> rows = _to_label_rows([("new", {"q": ["x", "a", "y"]}), ("old", {"q": ["y", "z"]})],
    ...                       {"q": {"a": 1}}, 2)
    >>> [(r["id"], r["best_rank"], r["runs"]) for r in rows]
    [('x', 1, ['new']), ('y', 1, ['old']), ('z', 2, ['old'])]
    >>> [(r["query_id"], r["id"]) for r in _to_label_rows(
    ...     [("run", {"p": ["x"], "q": ["b", "y"]})], {"p": {"a": 1}, "q": {"a": 1}}, 2,
    ...     first={"q"})]
    [('q', 'b'), ('q', 'y'), ('p', 'x')]
    >>> run = {"q": _check_run_query("q", [{"id": "x", "doc": "a.md", "start": 0, "end": 9,
    ...                                     "text": "Refunds."}], "r")}
    >>> _to_label_rows([("r", run)], {"q": {}}, 1, questions={"q": "How long?"})
    [{'query_id': 'q', 'question': 'How long?', 'id': 'x', 'doc': 'a.md', 'start': 0, 'end': 9, 'text': 'Refunds.', 'best_rank': 1, 'runs': ['r'], 'grade': None}]
    """
    found = {}      # (qid, id) -> [best rank, run names, Chunk or None, text or None, texts]
    for name, queries, *own in runs:
        run_mapping = own[0] if own else mapping
        run_texts = own[1] if len(own) > 1 else texts
        pairs = queries.items() if isinstance(queries, dict) else queries
        for qid, ranking in pairs:
            if qid not in qrels or qid in hidden or ranking is None:
                continue
            chunk_of = _chunk_lookup(run_mapping, ranking)
            doc_of = (lambda doc: chunk_of(doc) or Chunk(doc)) if by_doc and chunk_of else None
            own_texts = getattr(ranking, "texts", None) or {}
            for rank, doc in _unjudged_top(ranking, qrels[qid], depth, doc_of):
                entry = found.setdefault((qid, doc), [rank, [], None, None, run_texts])
                entry[0] = min(entry[0], rank)
                if name not in entry[1]:
                    entry[1].append(name)
                entry[2] = entry[2] or (chunk_of and chunk_of(doc))
                entry[3] = entry[3] or own_texts.get(doc)
    wanted = {}     # each run's texts: the ids it pooled first that have no text yet
    for (_, doc), entry in found.items():
        if entry[3] is None and entry[4] is not None:
            wanted.setdefault(id(entry[4]), (entry[4], set()))[1].add(doc)
    more = {key: look_up(ids) for key, (look_up, ids) in wanted.items()}
    rows = []
    for (qid, doc), (rank, names, chunk, text, run_texts) in sorted(
            found.items(), key=lambda item: (item[0][0] not in first, item[1][0], item[0])):
        row = {"query_id": qid}
        if (questions or {}).get(qid) is not None:
            row["question"] = questions[qid]
        row["id"] = doc
        if chunk is not None:
            row["doc"] = chunk.doc
            if chunk.start is not None:
                row["start"], row["end"] = chunk.start, chunk.end
        text = text or (more[id(run_texts)].get(doc) if id(run_texts) in more else None)
        if text is not None:
            row["text"] = text
        row.update(best_rank=rank, runs=names, grade=None)
        rows.append(row)
    return rows


def _chunk_lookup(mapping, ranking=None):
    """id -> Chunk through a chunk map or a separator (an id the map lacks:
    its own document, unknown), else id -> Chunk or None through the
    ranking's own fields (a ranked list of objects); None when there is
    neither."""
    if mapping is not None and mapping.doc_sep is not None:
        return lambda doc: Chunk(_doc_of(doc, mapping.doc_sep))
    own = getattr(ranking, "chunks", None) or {}
    if mapping is not None:
        return lambda doc: mapping.chunks.get(doc) or own.get(doc) or Chunk(doc)
    return own.get if own else None


def _to_label_text(rows):
    """The JSONL of --to-label rows, keys in the order of the issue."""
    return "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows)


# --- bounds ---------------------------------------------------------------------------
#
# How far labelling the unjudged ids of a query's top k could move a value:
# only those ids vary, every other id keeps its label.  An unjudged id becomes
# either non-relevant or "relevant": grade rel for recall, precision, success,
# mrr and map; the query's highest qrels grade for ndcg (it is also added to
# the grades the ideal DCG orders, as a label would be).
#
# Exact by extremes.  Give m of the u unjudged ranks the relevant grade.  Every
# bounded measure is a sum over the relevant ranks r_1 < r_2 < ... of terms
# that fall as a rank grows (AP: i / r_i; DCG: gain / log2(r_i + 1); recall,
# precision, success and mrr count or look at the first), over a denominator
# that depends on m alone (R + m, the ideal DCG of the grades, k).  Moving one
# relevant label to an earlier unjudged rank leaves every r_i where it was or
# moves it earlier, so among the labellings with m relevant ids the best gives
# the m earliest unjudged ranks and the worst the m latest: the bounds are the
# max and min over m = 0..u of those 2(u + 1) labellings (tests pin this
# against enumerating all 2**u).  recall, precision, success and mrr never
# fall when a label is added ((h + 1)/(R + 1) >= h/R as h <= R), so their
# bounds are m = 0 (today's value, all non-relevant) and m = u.  map and ndcg
# can fall: AP is 1 with one relevant id, at rank 1; label rank 5 relevant too
# and it is (1/1 + 2/5) / 2 = 0.7.  Their lower bound can be below today's value.
# ---------------------------------------------------------------------------------------

_BOUNDED = ("recall", "precision", "success", "mrr", "map", "ndcg")
_MONOTONE = ("recall", "precision", "success", "mrr")


def _bounded(m):
    """True for a measure with unjudged bounds: one of _BOUNDED over ids
    (no unit, no budget) with unjudged ids counted non-relevant.

    >>> [_bounded(parse_measure(t)) for t in ("map@5", "recall(unit=doc)@5", "bpref",
    ...                                       "mrr(unjudged=skip)@5")]
    [True, False, False, False]
    """
    if m.name not in _BOUNDED or _skips_unjudged(m):
        return False
    call = _UnitCall.of(m)
    return call.view == "id" and not call.budget


def _unjudged_ranks(ranked, k):
    """The ranks <= k of the top that carry no label (grade >= 0), best first.

    >>> _unjudged_ranks(_from_grades([1, None, 0, -1, None]), 4)
    [2, 4]
    """
    judged_ranks = {rank for rank, _ in ranked.labelled}
    return [r for r in range(1, min(k, ranked.length) + 1) if r not in judged_ranks]


def _labelled_as(ranked, ranks, grade):
    """``ranked`` with the unjudged ``ranks`` given ``grade``."""
    labelled = sorted(ranked.labelled + [(r, grade) for r in ranks])
    return ranked._replace(labelled=labelled)


def _relevant_grade(m, grades):
    """The grade an unjudged id takes when labelled relevant for ``m``."""
    if m.name == "ndcg":
        return grades[0] if grades else 1
    return dict(m.params).get("rel", REL.default)


def _bounds_of(m, func, args, ranked, grades):
    """(lo, hi): the least and greatest value of measure ``m`` (``func(ranked,
    grades, *args)``) over the labellings of its unjudged ids (see above).

    >>> m = parse_measure("map@5"); f, a = m._parts()
    >>> _bounds_of(m, f, a, _from_grades([1, None, None, None, None]), (1,))   # AP 1: 0.7 ... 1
    (0.7, 1.0)
    """
    k = args[0] if isinstance(args[0], int) else ranked.length
    ranks = _unjudged_ranks(ranked, k)
    u = len(ranks)
    if not u:
        value = func(ranked, grades, *args)
        return value, value
    grade = _relevant_grade(m, grades)
    counts = (0, u) if m.name in _MONOTONE else range(u + 1)
    values = []
    for n in counts:
        more = tuple(sorted(grades + (grade,) * n, reverse=True))
        for chosen in {tuple(ranks[:n]), tuple(ranks[u - n:])}:
            values.append(func(_labelled_as(ranked, chosen, grade), more, *args))
    return min(values), max(values)


def _judged_cutoffs(measures):
    """The cutoffs judged@k is shown at: those of the measures over ids."""
    return sorted({m.k for m in measures if isinstance(m.k, int)
                   and _UnitCall.of(m).view == "id"})


def _query_unjudged(scorer, ranked, grades, ranking, labels):
    """What the scorer adds per query when asked for bounds (scorer.bounds):
    {"bounds": {measure: (lo, hi)}, "judged": {k: judged@k}, "ids": [(rank, id)]
    of the unjudged ids in the top of the deepest bounded cutoff}."""
    bounds = {name: _bounds_of(m, func, args, ranked, grades)
              for m, name, func, args in scorer.bounds}
    judged_at = {k: judged(ranked, grades, k) for k in scorer.judged_at}
    ids = []
    if scorer.bounds and ranking is not None and len(ranked.labelled) < ranked.length:
        ids = _unjudged_top(ranking, labels, scorer.bounds_depth)
    return {"bounds": bounds, "judged": judged_at, "ids": ids}


def _unjudged_summary(rows, names, per_query):
    """The report's ``unjudged`` field from the per-query rows of
    _query_unjudged (scored queries only): bounds of each mean and query
    (None: a measure with no bounds), judged@k means, the unjudged ids."""
    queries = sorted(q for q in per_query if q in rows)     # not the unanswerable ones
    mean = {}
    for name in names:
        over = [q for q in queries if name in per_query[q]]
        if not over or name not in rows[over[0]]["bounds"]:
            mean[name] = None
            continue
        pairs = [rows[q]["bounds"][name] for q in over]
        mean[name] = [_mean([p[0] for p in pairs]), _mean([p[1] for p in pairs])]
    bounded = [n for n in names if mean[n] is not None]
    cutoffs = rows[queries[0]]["judged"] if queries else {}
    return {"mean": mean,
            "per_query": {q: {n: list(rows[q]["bounds"][n]) for n in bounded
                              if n in per_query[q]} for q in queries},
            "judged": {"judged@%d" % k: _mean([rows[q]["judged"][k] for q in queries])
                       for k in sorted(cutoffs)},
            # per query for the gate, which averages judged@k over a slice's queries too
            "judged_per_query": {q: {"judged@%d" % k: v for k, v in rows[q]["judged"].items()}
                                 for q in queries},
            "ids": {q: rows[q]["ids"] for q in queries if rows[q]["ids"]}}
