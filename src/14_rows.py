"""Rows: score where the data lives, merge the shards exactly.

A Spark (or Dask, or Ray) job holds its qrels and its run as tables, not
files.  score_rows runs on an executor: it reads rows already grouped by
query (a dict per query, as a line of a JSONL qrels or run file is) and
scores each query of its run rows with the scorer a single machine would
build, returning one record per query.  merge_rows runs on the driver: it
replays the records of every shard through _score, the one function that
turns per-query results into a Report on every path (the file path's
forked workers do the same), so the merged report is the single machine's:
the same means, counts, warnings, slices and hold-out, the same JSON but
for ``inputs`` (rows have no path: they get counts and content hashes).

What keeps a merge exact is said once, in _Plan: every option that changes
a number is in the plan's fingerprint, which each record carries; a record
scored under another plan is refused, as is a query in two records, and a
record whose query was scored with other labels than the driver's (each
record carries the hash of its query's labels).

Uses: 01_head to 13_stages.  Used by: Report.from_rows (02_records, forward).
"""


def score_rows(qrels_rows, run_rows, measures=None, k=DEFAULT_K, *, rel=1,
               gain="exponential", unit="id", chunks=None, doc_sep=None, queries=None,
               as_of=None, min_score=None, unjudged_bounds=False,
               trim_label_whitespace=False, answer=None, stages_k=None,
               stages_evidence=None):
    """Score the queries of ``run_rows`` against ``qrels_rows``: a list of
    records, one per run query, for merge_rows to merge on the driver.

    ``run_rows`` are dicts as the lines of a JSONL run are (``{"query_id":
    ..., "scores": {id: score}}`` or ``"docs": [ids]``, or result objects);
    ``qrels_rows`` as the lines of JSONL qrels (``{"query_id": ...,
    "relevant": {id: grade}}``, or label lines), holding at least the
    labels of these queries: group both tables by query first (a query's
    labels on the executor that scores it).  The options are evaluate()'s,
    and evaluate_stages()' answer=, stages_k= and stages_evidence=: the
    judge scores stay on the driver (merge_rows joins them), a shard scores
    the evidence the stage measures read.  Give merge_rows the same options
    (it refuses records scored otherwise).
    Bad rows raise EvalError naming the row and the query.  A record is a
    plain dict of plain values: it pickles, as collect() needs (it is not
    for JSON, which turns its tuples into lists: merge_rows refuses such a
    record).  Tokens and document versions go in the chunk map, not in the
    run's items: checked across queries, a shard cannot check them alone.

    >>> rows = score_rows([{"query_id": "q1", "relevant": {"a": 1}}],
    ...                   [{"query_id": "q1", "docs": ["x", "a"]}], k=2, measures="recall,mrr")
    >>> rows[0]["query_id"], rows[0]["values"]
    ('q1', {'recall@2': 1.0, 'mrr@2': 0.5})
    """
    plan = _Plan(measures, k, rel, gain, unit, chunks, doc_sep, min_score, unjudged_bounds,
                 trim_label_whitespace, as_of, _Tiers(
                     measures, k, None, rel=rel, gain=gain, unit=unit, answer=answer,
                     stages_k=stages_k, stages_evidence=stages_evidence))
    run_rows = list(run_rows)
    if not run_rows:
        return []
    qrels, described, _ = _rows_qrels(qrels_rows, plan)
    wanted = set(qrels).union(_row_query(row) for row in run_rows)
    metadata = _metadata(described, "qrels rows", queries)[0]
    if metadata is not None:    # this shard's queries: the rest are other executors'
        metadata = {qid: info for qid, info in _validated_queries(metadata).items()
                    if qid in wanted}
    testset = _test_set(metadata, (), None, as_of, False, "scored")
    scorer, qrels = plan.scorer(qrels, testset, whole=False)
    inp = _Rows(run_rows, "run rows")
    records = []
    for number, (qid, ranking) in enumerate(_jsonl_run(inp), 1):
        _refuse_own_sizes(ranking, number, qid)
        known = qid in qrels
        result = scorer(qid, ranking) if known else None
        record = {"query_id": qid, "plan": plan.fingerprint,
                  "values": None if result is None else result[0],
                  "detail": None if result is None else result[1:],
                  "labels": _labels_check(qrels[qid]) if known else None,
                  "unanswerable": qid in scorer.unanswerable,
                  "rising": bool(inp.rising) and inp.rising[-1] == qid,
                  "run_sha256": _row_sha256(run_rows[number - 1])}
        record["seal"] = _seal(record)
        records.append(record)
    return records


def merge_rows(records, qrels_rows, measures=None, k=DEFAULT_K, *, rel=1,
               gain="exponential", unit="id", chunks=None, doc_sep=None, queries=None,
               by=(), holdout=None, as_of=None, reveal_holdout=False, min_score=None,
               unjudged_bounds=False, trim_label_whitespace=False,
               skip_extra_queries=False, meta=None, names=None, scores=None, answer=None,
               pass_threshold=None, stages_k=None, stages_evidence=None,
               allow_missing_scores=False):
    """The Report of the records of every shard (score_rows' lists, joined
    in any order) against all of ``qrels_rows``: what evaluate_files() gives
    of the whole run, but for ``inputs``.  Give it the options score_rows
    had, and the test-set ones (``by``, ``holdout``, ...) of evaluate().
    ``names`` says what warnings call the inputs, {"qrels": ..., "run":
    ...} (default "qrels rows" and "run"): the command line says their
    paths, so giving those makes the two JSON reports equal.  With the
    judge ``scores`` (a Scores or a list, as evaluate_stages() takes, and
    its answer=, pass_threshold=, stages_k=, stages_evidence=,
    allow_missing_scores=) the report holds both tiers and the stages, as
    evaluate_stages() gives them.

    The driver holds the qrels and each query's values (about queries x
    measures floats).  A query in two records, a record scored under other
    options (measures, rel, unit, min_score, chunk map, ...) or with other
    labels for its query than ``qrels_rows`` holds raise EvalError.  Queries
    of the qrels in no record are not in the run: they score 0, as on one
    machine.  Warnings that name a first query name it in query-id order.
    No record at all (an empty run) is an error, as an empty run file is.

    >>> q = [{"query_id": "q1", "relevant": ["a"]}, {"query_id": "q2", "relevant": ["b"]}]
    >>> parts = [score_rows(q[:1], [{"query_id": "q1", "docs": ["a"]}], k=1, measures="recall"),
    ...          score_rows(q[1:], [{"query_id": "q2", "docs": ["c"]}], k=1, measures="recall")]
    >>> merge_rows(parts[1] + parts[0], q, k=1, measures="recall").mean
    {'recall@1': 0.5}
    """
    if scores is not None:
        scores = _score_list(scores)
    elif (answer is not None or pass_threshold or allow_missing_scores
          or any(_tier_names(measures)[1:])):
        raise EvalError("judge score measures (score(field=...)), stage measures "
                        "(answer_given_evidence, answer_without_evidence), answer=, "
                        "pass_threshold= and allow_missing_scores= are of the judge's scores: "
                        "give merge_rows scores=")
    plan = _Plan(measures, k, rel, gain, unit, chunks, doc_sep, min_score, unjudged_bounds,
                 trim_label_whitespace, as_of, _Tiers(
                     measures, k, None if scores is None else _files_by_field(scores), rel=rel,
                     gain=gain, unit=unit, answer=answer, pass_threshold=pass_threshold,
                     stages_k=stages_k, stages_evidence=stages_evidence))
    meta = _checked_meta(meta)
    names = dict({"qrels": "qrels rows", "run": "run"}, **(names or {}))
    qrels, described, pending = _rows_qrels(qrels_rows, plan)
    metadata, info, notes = _metadata(described, names["qrels"], queries)
    testset = _test_set(metadata, by, holdout, as_of, reveal_holdout, "scored", info, notes)
    scorer, qrels = plan.scorer(qrels, testset)
    ordered = _checked_records(records, plan, qrels, scorer.unanswerable)
    if not ordered:
        raise EvalError("%s: no records: the run rows were empty" % names["run"])
    report = _score(scorer, ((r["query_id"], _result_of(r, plan)) for r in ordered),
                    skip_extra_queries, names["run"], testset)
    report = report._replace(min_score=scorer.min_score,
                             trim_label_whitespace=trim_label_whitespace)
    report = _with_rising_note(report, names["run"],
                               [r["query_id"] for r in ordered if r["rising"]], testset)
    inputs = {"qrels": {"queries": len(qrels), "rows_sha256": _rows_sha256(
                  _label_sha256(labels) for labels in qrels.values())},
              "run": {"queries": len(ordered),
                      "rows_sha256": _rows_sha256(r["run_sha256"] for r in ordered)}}
    if testset is not None and testset.info is not None:
        inputs["queries"] = testset.info
    if report.mapping is not None:  # how chunks became documents is part of the numbers
        inputs["mapping"] = {key: report.mapping[key] for key in ("source", "doc_sep")
                             if report.mapping[key] is not None}
    report = report._replace(inputs=inputs, label_sha256=_label_hashes(qrels, testset))
    if scores is not None:
        report = plan.tiers.joined(report, scores, qrels, testset, allow_missing_scores,
                                   skip_extra_queries)
    if pending:     # first, as the command line puts it
        report = report._replace(warnings=(_pending_note(names["qrels"], pending),)
                                 + report.warnings)
    return _with_meta(report, meta)


def merge_reports(parts, qrels_rows, **options):
    """merge_rows of the records of ``parts``, score_rows' list of each
    shard (as a job gathers them one list a shard), with merge_rows'
    options.

    >>> q = [{"query_id": "q1", "relevant": ["a"]}, {"query_id": "q2", "relevant": ["b"]}]
    >>> parts = [score_rows(q[:1], [{"query_id": "q1", "docs": ["a"]}], k=1, measures="recall"),
    ...          score_rows(q[1:], [{"query_id": "q2", "docs": ["b"]}], k=1, measures="recall")]
    >>> merge_reports(parts, q, k=1, measures="recall").mean
    {'recall@1': 1.0}
    """
    records = []
    for part in parts:
        if not isinstance(part, (list, tuple)):
            raise EvalError("merge_reports takes a list of score_rows' lists (one a shard), "
                            "got %s in it: give merge_rows the records themselves"
                            % _short_repr(part, 60))
        records.extend(part)
    return merge_rows(records, qrels_rows, **options)


class _Plan:
    """What a shard is scored under, and its fingerprint: every option that
    changes a number (the measures by canonical name, rel, min_score, the
    unjudged bounds, label trimming, the chunk map or separator, as_of).
    ``tiers`` (a _Tiers) are the measures: a shard scores the stage
    measures without their thresholds (shard_measures), the driver's scorer
    with them (run_measures), and ``reads`` maps the one to the other ({name:
    shard name})."""

    def __init__(self, measures, k, rel, gain, unit, chunks, doc_sep, min_score, bounds, trim,
                 as_of, tiers):
        # The driver scores with the stage plan (which needs the score files); a shard,
        # and a driver without stage measures, with shard_measures.
        self.tiers = tiers
        self.measures = tiers.run_measures if tiers.plan is not None else tiers.shard_measures
        self.reads = {str(m): str(_shard_measure(m)) for m in self.measures
                      if _is_stage_measure(m)}
        self.shard_stage = frozenset(str(m) for m in tiers.shard_measures
                                     if _is_stage_measure(m))
        self.rel = _positive_int(rel, "rel")
        self.chunks, _ = _library_chunks(chunks)
        self.doc_sep, self.min_score, self.bounds, self.trim = doc_sep, min_score, bounds, trim
        if as_of is not None:
            _check_date(as_of, "as_of")
        facts = {"measures": [str(m) for m in tiers.shard_measures],
                 "rel": self.rel, "doc_sep": doc_sep, "min_score": _checked_min_score(min_score),
                 "bounds": bounds if bounds == "judged" else bool(bounds), "trim": trim,
                 "as_of": as_of,
                 "chunks": None if self.chunks is None else _chunk_map_sha256(self.chunks)}
        self.fingerprint = hashlib.sha256(_dumps(facts).encode()).hexdigest()[:16]

    def scorer(self, qrels, testset, whole=True):
        """(the _QueryScorer, the qrels) of these qrels (the test set's), as
        evaluate() makes them; ``whole``: False for a shard's (the checks
        over every query are the driver's)."""
        if testset is not None:
            qrels = testset.qrels(qrels)
        scorer = _scorer(qrels, self.measures, self.rel, "scored", self.chunks, self.doc_sep,
                         testset, self.min_score, self.bounds, self.trim, whole)
        if not scorer.forkable:
            raise EvalError("the measures map the run's own chunks (doc/start/end in its "
                            "items), which takes every query at once: give the chunk map "
                            "(chunks=) to score rows apart")
        return scorer, qrels


def _rows_qrels(rows, plan):
    """(validated qrels, query metadata or None, how many label rows have no
    grade yet) of qrels rows, read as the lines of a JSONL qrels file."""
    rows = list(rows)
    if not rows:    # a shard of run queries none of which the qrels hold
        return {}, None, 0
    inp = _Rows(rows, "qrels rows")
    return _jsonl_qrels(inp, _rows_label(plan.measures)) + (inp.pending,)


def _row_query(row):
    """The query id of a run row (an error for a row without one is the reader's)."""
    if isinstance(row, dict):
        key = "query_id" if "query_id" in row else _query_key(row, True)
        if key is not None and isinstance(row.get(key), (str, int)):
            return str(row[key])
    return None


def _validated_queries(queries):
    if not isinstance(queries, dict):
        raise EvalError("queries must be a dict {query_id: {...}}, got %s"
                        % type(queries).__name__)
    return queries


_RECORD_KEYS = frozenset(("query_id", "plan", "values", "detail", "labels", "unanswerable",
                          "rising", "run_sha256", "seal"))


def _checked_records(records, plan, qrels, unanswerable):
    """The records of every shard, in query-id order, each checked: as
    score_rows made it (its seal), scored under ``plan``, named once, with
    the labels ``qrels`` holds and stated unanswerable when the driver's
    query metadata says so."""
    by_query = {}
    for part in records:
        if not isinstance(part, dict) or set(part) != _RECORD_KEYS:
            raise EvalError("merge_rows takes the records of score_rows, got %s"
                            % _short_repr(part, 60))
        qid = part["query_id"]
        if part["seal"] != _seal(part):
            raise EvalError("query %r: its record changed after score_rows (passed through "
                            "JSON?): give merge_rows the records as collect() returns them"
                            % (qid,))
        if part["plan"] != plan.fingerprint:
            raise EvalError("query %r was scored with other options (measures, rel, unit, "
                            "min_score, chunk map, answer, stages_k, stages_evidence, ...): "
                            "give merge_rows those of score_rows" % qid)
        if qid in by_query:
            raise EvalError("query %r is in two shards: group the rows by query before "
                            "scoring" % qid)
        known = qid in qrels
        if (part["labels"] is None) == known or (
                known and part["labels"] != _labels_check(qrels[qid])):
            raise EvalError("query %r was scored with other labels than the qrels rows hold, "
                            "or other query metadata (give each executor all the labels of "
                            "its queries, and the queries= merge_rows has)" % qid)
        if part["unanswerable"] != (qid in unanswerable):
            raise EvalError("query %r was scored with other query metadata (stated "
                            "unanswerable on one side only): give score_rows the queries= "
                            "merge_rows has" % qid)
        by_query[qid] = part
    return [by_query[qid] for qid in sorted(by_query)]


def _result_of(record, plan):
    """The scorer's tuple of a record (None: the query is not in the qrels),
    each stage measure of ``plan`` given the value of its shard name (the
    evidence it reads), the shard's stage names left out."""
    if record["detail"] is None:
        return None
    values = record["values"]
    if values is not None and plan.reads:
        shard = values
        values = {name: v for name, v in shard.items() if name not in plan.shard_stage}
        values.update((name, shard[at]) for name, at in plan.reads.items() if at in shard)
    return (values,) + record["detail"]


def _refuse_own_sizes(ranking, number, qid):
    """A shard cannot check the run's own tokens or document versions: they
    are checked across queries (all or none; against every label)."""
    own = getattr(ranking, "chunks", None)
    if own and any(c.tokens is not None or c.doc_sha256 is not None for c in own.values()):
        raise EvalError("run row %d: query %r: its items give tokens or doc_sha256, which are "
                        "checked across queries: give them in the chunk map (chunks=) to "
                        "score rows apart" % (number, qid))


def _labels_check(labels):
    """What a record says of its query's labels: every field (texts and
    document versions too, which the label hash leaves out)."""
    items = sorted(map(repr, labels)) if type(labels) is list else sorted(labels.items())
    return hashlib.sha256(repr(items).encode()).hexdigest()


def _seal(record):
    """A hash of what a record says of its query (not of the seal itself):
    a record that went through JSON (lists for tuples, string keys) breaks it."""
    return hashlib.sha256(repr([record[key] for key in sorted(_RECORD_KEYS - {"seal"})])
                          .encode()).hexdigest()[:16]


def _row_sha256(row):
    return hashlib.sha256(json.dumps(row, sort_keys=True, ensure_ascii=False,
                                     default=str).encode()).hexdigest()


def _rows_sha256(hashes):
    """One hash of a set of rows' hashes, whatever order they came in."""
    return hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()


def _chunk_map_sha256(chunks):
    return _rows_sha256(_row_sha256([cid, list(chunk)]) for cid, chunk in chunks.items())
