"""Evaluation: qrels and a run in, a Report out.

evaluate and evaluate_files: per query, rank once (09_ranking) and keep
only the labelled ids of the top K, with their ranks; every measure then
reads those few labelled (_QueryScorer).  Also the chunk map's view of the
retrieved ids (_Mapping), the checks that say why a run meets no label, the
ingestion check of span labels, answerability counts, --min-score cuts and
the --sweep-min-score table.  The hook _scored_run is bound to forked
workers by 20_accelerations.

Uses: 01_head to 10_unjudged.  Used by: judge scores, baselines, the report
reader, the command line, accelerations.
"""


def _plan(measures):
    """(depth, cutoffs): how deep to rank, and the cutoffs ties are counted at.
    A measure at @all or without a cutoff reads the whole ranking.

    >>> _plan([parse_measure("recall@5"), parse_measure("mrr@10")])
    (10, (5, 10))
    >>> _plan([parse_measure("recall@5"), parse_measure("rprec")]) == (_WHOLE_RANKING, (5,))
    True
    """
    cutoffs = tuple(sorted({m.k for m in measures if isinstance(m.k, int)}))
    whole = any(not isinstance(m.k, int) or _skips_unjudged(m) for m in measures)
    return max(cutoffs + ((_WHOLE_RANKING,) if whole else ())), cutoffs


def _columns(rows, names):
    """The values of each name across rows (dicts), as one tuple per name.

    >>> _columns([{"a": 1, "b": 2}, {"a": 3, "b": 4}], ("b", "a"))
    [(2, 4), (1, 3)]
    """
    if len(names) == 1:
        return [tuple(row[names[0]] for row in rows)]
    return list(zip(*map(operator.itemgetter(*names), rows)))


@_gc_paused
def evaluate(qrels, run, k=DEFAULT_K, measures=None, *, rel=1, gain="exponential",
             skip_extra_queries=False, average="scored", metrics=None, chunks=None,
             doc_sep=None, unit="id", meta=None, queries=None, by=(), holdout=None,
             as_of=None, reveal_holdout=False, min_score=None, unjudged_bounds=False,
             fields=None, trim_label_whitespace=False):
    """Score ``run`` against ``qrels``; return a :class:`Report`.

    ``qrels`` is ``{qid: {doc_id: grade}}``; ``run`` is ``{qid: [ids]}`` (best
    first) or ``{qid: {doc_id: score}}``.  ``k`` is one cutoff or several
    (``[1, 5, 10]`` or ``"1,5,10"``); ``measures`` names measures (default:
    recall, success, mrr, ndcg; ``metrics=``, its old name, is still read).
    ``rel`` is the lowest relevant grade.
    Policies: a query with no grade >= rel is unscored (listed, not averaged);
    a qrels query absent from the run scores 0 and stays in the mean; a run
    query absent from the qrels is an error unless ``skip_extra_queries``.
    Inputs are never modified.

    ``average="trec_eval"`` averages as trec_eval does without ``-c``: over
    the queries the run and the qrels share, those with no relevant id
    included with the values trec_eval gives them (0, except nDCG, which
    ignores rel), those the run lacks left out.  Use it to reproduce a
    trec_eval ``all`` line, never to gate: leaving a hard query out of the
    run would raise that mean.

    ``meta`` says what the numbers are about, e.g. ``{"embedding.model":
    "bge-m3"}``: keys of letters, digits, ``_`` and ``-`` in parts joined by
    ``.``; nested objects are flattened with ``.``; values (strings, numbers,
    booleans) are kept as strings.  It is carried into every report format and
    saved baseline, and the gate names the keys that changed.

    ``queries`` is query metadata, ``{qid: {"slices": {field: [value, ...]},
    "valid_until": "YYYY-MM-DD", ...}}`` (see load_queries); its queries are
    members of the test set even without labels (unscored).  The report then
    holds every slice ``field=value`` (``slices``); ``by`` names the fields
    the renderers show.  ``holdout="field=value"`` scores that slice apart: it
    is left out of the overall mean and of every other slice, and only its
    counts and means are ever written (``reveal_holdout=True`` writes the
    rest).  ``as_of="YYYY-MM-DD"`` leaves out the queries whose valid_until
    is before it; without it, dates are only counted.

    ``chunks`` is a chunk map, as ``--chunks`` takes it: a file (a path, ``-``
    or a file object, JSONL; its path, sha256 and format go into the report's
    ``inputs``, so a saved baseline records it), or its records already read
    (a list of ``{"id", "doc", "start", "end"}`` objects, or ``{id: record}``);
    ``doc_sep`` names documents by cutting ids at a separator instead, and
    ``unit`` is the default unit of the measures (``"doc"``, ``"evidence"``).

    >>> m = io.StringIO('{"id": "c1", "doc": "a.md", "start": 0, "end": 50}\\n'
    ...                 '{"id": "c2", "doc": "a.md", "start": 50, "end": 99}\\n')
    >>> e = evaluate({"q": [Label("a.md", 60, 80, 1)]}, {"q": ["c1", "c2"]}, k=1,
    ...              measures="recall(unit=evidence),recall(unit=evidence)@2", chunks=m)
    >>> e.mean, e.inputs["chunks"]["path"]
    ({'recall(unit=evidence)@1': 0.0, 'recall(unit=evidence)@2': 1.0}, '<stream>')

    ``unjudged_bounds=True`` fills the report's ``unjudged``: the interval
    each mean and each query's value could take once the unjudged ids of the
    top k are labelled (``"mean"`` and ``"per_query"``, ``[lo, hi]``; None for
    a measure with no bounds: only recall, precision, success, mrr, map and
    ndcg over ids have them), judged@k at each cutoff (``"judged"``) and the
    unjudged (rank, id) of each query (``"ids"``).  :func:`gate` reads it.

    A ranked list may hold result objects: LangChain's ``Document.model_dump()``,
    LlamaIndex's ``NodeWithScore.to_dict()`` and plain ``{"id", "score", "doc",
    "start", "end"}`` objects are read by their keys.  ``fields`` replaces where
    they give their id, document, start or end: ``{"id": "metadata.chunk_id",
    "doc": "node.metadata.file_path", "start": ..., "end": ...}``, dotted paths
    from the object as written.
    ``trim_label_whitespace=True`` narrows each span label that carries its
    ``text`` (as long as the span) past the whitespace at the ends of that
    text before anything is scored: a chunker that strips whitespace never
    holds it, and ``cover`` stays exact.  It changes numbers, so the report
    records it and the gate refuses a baseline made the other way.

    >>> b = evaluate({"q": {"a": 1}}, {"q": ["a", "x", "y"]}, k=3, measures="map,precision",
    ...              unjudged_bounds=True).unjudged
    >>> b["mean"], b["judged"], b["ids"]   # map lo: y alone relevant, (1/1 + 2/3) / 2
    ({'map@3': [0.8333333333333333, 1.0], 'precision@3': [0.3333333333333333, 1.0]}, {'judged@3': 0.3333333333333333}, {'q': [(2, 'x'), (3, 'y')]})
    >>> s = evaluate({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}},
    ...              {"q1": ["a"], "q2": ["x"], "q3": ["c"]}, k=1, measures="recall",
    ...              queries={"q1": {"slices": {"source": ["real"]}},
    ...                       "q2": {"slices": {"source": ["real"]}},
    ...                       "q3": {"slices": {"split": ["holdout"]}}},
    ...              by="source", holdout="split=holdout")
    >>> s.mean, s.slices["source=real"]["mean"], s.holdout.mean, sorted(s.per_query)
    ({'recall@1': 0.5}, {'recall@1': 0.5}, {'recall@1': 1.0}, ['q1', 'q2'])
    >>> r = evaluate({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}},
    ...              {"q1": ["a", "a"], "q3": ["z"]}, k=1, measures="recall")
    >>> r.mean, r.unscored, r.missing
    ({'recall@1': 0.5}, ('q3',), ('q2',))
    >>> t = evaluate({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}},
    ...              {"q1": ["a", "a"], "q3": ["z"]}, k=1, measures="recall", average="trec_eval")
    >>> t.per_query      # q3 (no relevant id) counts, q2 (not in the run) does not
    {'q1': {'recall@1': 1.0}, 'q3': {'recall@1': 0.0}}
    >>> evaluate({"q": {"a": 1}}, {"q": ["a"]}, meta={"embedding": {"model": "bge-m3"}}).meta
    {'embedding.model': 'bge-m3'}
    """
    measures = resolve_measures(_renamed(measures, metrics), k, rel=rel, gain=gain, unit=unit)
    _refuse_joined(measures)
    meta = _checked_meta(meta)
    average = _checked_average(average)
    testset = _test_set(queries, by, holdout, as_of, reveal_holdout, average)
    report = _evaluate(_validated(qrels, "qrels", _check_qrels_query), run, measures, rel, average,
                       skip_extra_queries, chunks, doc_sep, testset, min_score, unjudged_bounds,
                       fields, trim_label_whitespace)
    return _with_meta(report, meta)


def _evaluate(qrels, run, measures, rel, average, skip_extra_queries, chunks, doc_sep, testset,
              min_score, unjudged_bounds, fields=None, trim=False):
    """evaluate() with its measures resolved, its qrels validated and its
    _TestSet made (None: no query metadata)."""
    rising, fields = [], _checked_fields(fields)
    if fields is not None and fields.query is not None:
        raise EvalError('fields: "query" names the query of a JSONL line (evaluate_files, '
                        "load_qrels, load_run); evaluate() takes {query_id: ranking}")
    run = _validated(run, "run", functools.partial(_check_run_query, rising=rising,
                                                   fields=fields))
    if testset is not None:
        qrels = testset.qrels(qrels)
    chunks, chunks_info = _library_chunks(chunks)
    scorer = _scorer(qrels, measures, _positive_int(rel, "rel"), average, chunks, doc_sep,
                     testset, min_score, unjudged_bounds, trim)
    report = _score(scorer, _scored_queries(scorer, run.items()), skip_extra_queries, "run",
                    testset)._replace(min_score=scorer.min_score, trim_label_whitespace=trim)
    if chunks_info is not None:     # a file, as --chunks reads it: the gate tells a new map
        report = report._replace(inputs={"chunks": chunks_info})
    report = _with_rising_note(report, "run", rising, testset)
    return report._replace(label_sha256=_label_hashes(qrels, testset))


def _refuse_joined(measures):
    """A stage measure needs the judge's verdicts beside the run: refused by
    evaluate() and evaluate_files(), which score the run alone."""
    for m in measures:
        if _REGISTRY[m.name].view == "stages":
            raise EvalError("%s joins retrieval with the judge's verdicts: score it with "
                            "evaluate_stages() (on the command line: --scores and --answer)"
                            % (m,))


@_gc_paused
def evaluate_files(qrels, run, k=DEFAULT_K, measures=None, *, rel=1, gain="exponential",
                   skip_extra_queries=False, qrels_format=None, run_format=None,
                   average="scored", metrics=None, chunks=None, doc_sep=None, unit="id",
                   meta=None, queries=None, by=(), holdout=None, as_of=None,
                   reveal_holdout=False, min_score=None, unjudged_bounds=False,
                   fields=None, trim_label_whitespace=False):
    """Like :func:`evaluate`, from files (paths, ``-`` or file objects), streaming
    the run one query at a time.  The report's ``inputs`` carry each file's
    path, sha256 and format (and the ``fields`` it was read with, when given).
    ``chunks`` is a chunk-map file (see load_chunks).  ``queries`` is query
    metadata, ``unjudged_bounds`` and ``fields`` as for :func:`evaluate`;
    ``fields={"query": "query"}`` also keys the JSONL lines of both files by
    that field (rows without an id, such as LlamaIndex's RetrieverEvaluator
    rows or Ragas' with "user_input", keyed by their question).

    >>> evaluate_files(io.StringIO('{"q": {"a": 1}}'),
    ...                io.StringIO('q Q0 b 1 2.0 x\\nq Q0 a 2 1.0 x\\n'), measures="mrr").mean
    {'mrr@5': 0.5}
    """
    measures = resolve_measures(_renamed(measures, metrics), k, rel=rel, gain=gain, unit=unit)
    _refuse_joined(measures)
    average = _checked_average(average)
    meta = _checked_meta(meta)
    fields = _checked_fields(fields)
    pending = []    # the note on label rows not graded yet, first, as the command line's
    qrels, qrels_info, described = _read_qrels(qrels, qrels_format, pending,
                                               rows_label=_rows_label(measures), fields=fields)
    metadata, info, notes = _metadata(described, qrels_info["path"], queries)
    testset = _test_set(metadata, by, holdout, as_of, reveal_holdout, average, info, notes)
    chunk_map, chunks_info = _read_chunks(chunks) if chunks is not None else (None, None)
    report = _evaluate_run(qrels, qrels_info, run, measures, _positive_int(rel, "rel"),
                           skip_extra_queries, run_format, average, chunk_map, doc_sep,
                           chunks_info, testset, min_score, unjudged_bounds, fields,
                           trim_label_whitespace)
    return _with_meta(report._replace(warnings=tuple(pending) + report.warnings), meta)


def _checked_average(average):
    if average not in AVERAGES:
        raise EvalError("average must be one of %s, got %r" % (", ".join(AVERAGES), average))
    return average


def _evaluate_run(qrels, qrels_info, run, measures, rel, skip_extra_queries, run_format,
                  average="scored", chunks=None, doc_sep=None, chunks_info=None, testset=None,
                  min_score=None, bounds=False, fields=None, trim=False):
    """evaluate_files() with the qrels (and chunk map, and _TestSet) already
    read (they may come from stdin); the run is read with ``fields``."""
    if testset is not None:
        qrels = testset.qrels(qrels)
    scorer = _scorer(qrels, measures, rel, average, chunks, doc_sep, testset, min_score,
                     bounds, trim)
    inp, fmt = _open_input(run, run_format, "run", fields)
    try:
        report = _score_run(inp, fmt, scorer, skip_extra_queries, testset)
    except BaseException:
        inp.stop_hashing()
        raise
    inputs = {"qrels": qrels_info, "run": inp.info(fmt)}
    if chunks_info is not None:
        inputs["chunks"] = chunks_info
    if report.mapping is not None:  # how chunks became documents is part of the numbers
        inputs["mapping"] = {key: report.mapping[key] for key in ("source", "doc_sep")
                             if report.mapping[key] is not None}
    if testset is not None and testset.info is not None:
        inputs["queries"] = testset.info
    return report._replace(inputs=inputs, label_sha256=_label_hashes(qrels, testset),
                           min_score=scorer.min_score, trim_label_whitespace=trim)


def _score_run(inp, fmt, scorer, skip_extra_queries, testset=None):
    """The report of one run, read one query at a time; a run whose queries
    are scattered is read whole."""
    progress = _PROGRESS
    if progress is not None:
        progress.begin(inp.name, os.path.getsize(inp.source)
                       if _is_regular_file(inp.source) else None)
    try:
        report = _score(scorer, _counted(_scored_run(inp, fmt, scorer), progress),
                        skip_extra_queries, inp.name, testset)
    except _NotGrouped:
        if progress is not None:    # read again from the start
            progress.begin(inp.name, progress.size)
        report = _score(scorer, _counted(_scored_run_plain(inp, fmt, scorer, grouped=False),
                                         progress), skip_extra_queries, inp.name, testset)
        note = ("%s: the lines of a query are not contiguous; read the whole run into memory"
                % inp.name)
        report = report._replace(warnings=(note,) + report.warnings)
    finally:
        if progress is not None:
            progress.end()
    return _with_rising_note(report, inp.name, inp.rising, testset)


def _counted(scored, progress, every=None):
    """``scored`` as it is, telling ``progress`` (if any) the count every
    ``every`` queries (default _PROGRESS_EVERY): no cost when it is None."""
    if progress is None:
        return scored
    return _counting(scored, progress, every or _PROGRESS_EVERY)


def _counting(scored, progress, every):
    for count, item in enumerate(scored, 1):
        yield item
        if not count % every:
            progress.scored(count)


def _scored_run_plain(inp, fmt, scorer, grouped=True):
    """(qid, scored tuple, or None for a query not in the qrels) per query of
    a run file, in file order, one query at a time."""
    return _scored_queries(scorer, _run_queries(inp, fmt, grouped))


_scored_run = _scored_run_plain     # hook: the accelerations install _scored_run_forked


def _scored_queries(scorer, queries):
    """(qid, scorer(qid, ranking)) per (qid, ranking); None for a query the
    qrels do not have (it is not scored)."""
    qrels = scorer.qrels
    for qid, ranking in queries:
        yield qid, (scorer(qid, ranking) if qid in qrels else None)


def _validated(data, what, check):
    if not isinstance(data, dict):
        raise EvalError("%s must be a dict {query_id: ...}, got %s" % (what, type(data).__name__))
    return {_as_id(q, "%s: query id" % what): check(q, v, what) for q, v in data.items()}


def _measure_values_plain(calls):
    """The function (ranked, grades) -> {name: value} of a scorer's measure
    calls, (name, func, args) each: every measure as its definition says.

    >>> values = _measure_values_plain([("mrr@3", mrr, (3, 1)), ("recall@3", recall, (3, 1))])
    >>> values(_from_grades([0, 2, -1]), (2, 1, 0))
    {'mrr@3': 0.5, 'recall@3': 0.5}
    """
    def values(ranked, grades):
        return {name: func(ranked, grades, *args) for name, func, args in calls}
    return values


_measure_values = _measure_values_plain   # hook: the accelerations score common ones in one pass


class _QueryScorer:
    """Scores one query at a time, in this process or in a worker.  A query
    scored is a plain tuple (values, duplicates, straddling, returned,
    unlabelled): its values (None when unscored), what ranking saw (see
    _Ranked), and whether its ids carry labels: None when the top K meets a
    label of every kind the measures look labels up by (see _label_checks),
    or nothing was retrieved; else one flag a kind (see _label_flags).  Plain
    tuples are cheap to make and to pickle."""

    def __init__(self, qrels, measures, rel, average="scored", labels=None, mapping=None):
        self.qrels, self.rel, self.average = qrels, rel, average
        self.every_query = average == "trec_eval"   # score unscored queries too
        self.names = tuple(str(m) for m in measures)
        self.depth, self.cutoffs = _plan(measures)
        self.calls = [(str(m),) + m._parts() for m in measures
                      if _REGISTRY[m.name].population != "unanswerable"]
        self.measure_values = _measure_values(self.calls)
        self.unanswerable_calls, self.aggregates = _answerability_calls(measures)
        # The measures of unanswerable queries only: the scored path skips them.
        self.apart = frozenset(str(m) for m in measures
                               if _REGISTRY[m.name].population == "unanswerable")
        if (self.unanswerable_calls or self.aggregates) and self.every_query:
            raise EvalError("abstention measures are not for trec_eval's average, which "
                            "knows no unanswerable query: drop them or the average")
        self.bounds = None          # see _ask_bounds: unjudged bounds and judged@k per query
        self.labels, self.mapping = labels, mapping or _Mapping()
        self.lost = None            # see _uncoverable
        self.units = [_UnitCall.of(m) for m in measures]
        self.mapped = any(call.view != "id" or call.budget for call in self.units)
        # The measures cut at a budget: each scored query reports the context it used.
        self.budgets = tuple((name, call.budget) for name, call in zip(self.names, self.units)
                             if call.budget)
        self.counts_docs = any(call.view == "doc" for call in self.units)
        # Once a ranking met a label of a kind, the run meets that kind's labels.
        self.checks = _label_checks(measures, self.units)
        self.met = [False] * len(self.checks)
        self.forkable = not self.mapped or self.mapping.external
        if self.mapped:
            self.mapping.index()
        if labels is not None:
            by_id = [str(m) for m, call in zip(measures, self.units)
                     if call.view == "id" and m.name != "diversity"]
            if by_id:
                raise EvalError("the qrels label documents and spans, not retrieved ids: %s "
                                "cannot count ids; score units instead (--unit doc or "
                                "evidence, e.g. recall(unit=doc)@5), with --chunks or --doc-sep"
                                % ", ".join(by_id[:3]))

    def __call__(self, qid, ranking):
        if self.min_score is not None and ranking is not None:
            ranking = _cut(qid, ranking, self.min_score)
        labels = self.qrels.get(qid, _NO_LABELS)
        grades = _sorted_grades(labels)
        scored = self.is_scored(grades)
        if self.mapped:     # (ranking already cut by min_score)
            return self._by_units(qid, ranking, labels, grades, scored)
        labels = _labels_for_ranking(ranking, labels)
        ranked = _rank(ranking, labels, self.depth, self.cutoffs, not scored)
        values = None
        if scored or self.every_query:
            try:
                values = self.measure_values(ranked, grades)
            except EvalError as exc:
                raise EvalError("qrels: query %r: %s" % (qid, exc)) from None
        elif qid in self.unanswerable:
            values = self._unanswerable_values(ranked, grades)
        if ranked.labelled or not ranked.length:   # (measures over ids only: one check)
            unlabelled = None
            self.met[0] = self.met[0] or bool(ranked.labelled)
        else:
            unlabelled = self._label_flags({"id": False}, ranking, labels)
        if self.bounds is not None and (scored or self.every_query):
            return (values, ranked.duplicates, ranked.straddling, ranked.returned, unlabelled,
                    _query_unjudged(self, ranked, grades, ranking,
                                    self.qrels.get(qid, _NO_LABELS)))
        return values, ranked.duplicates, ranked.straddling, ranked.returned, unlabelled

    def _by_units(self, qid, ranking, labels, grades, scored):
        """__call__ when measures count documents, evidence or characters, or
        cut at a budget: the top chunks are resolved (see _Mapping) and each
        unit's ranking is built once per query, on first use."""
        if ranking is None:
            ids, scores, read, returned, chunks = [], [], 0, 0, []
        else:
            ranking, top, scores, read, distinct = _top_chunks(ranking, self.depth)
            ids, returned = top[:self.depth], len(distinct)
            try:
                chunks = self.mapping.resolve(ranking, ids, distinct)
            except EvalError as exc:
                raise _RunError("query %r: %s%s" % (qid, exc, self._needing())) from None
        straddling = 0 if isinstance(ranking, list) else _straddling(scores, self.cutoffs,
                                                                      len(scores))
        ranked = _Ranked(_labelled(map(labels.get, ids)), len(ids), read - len(ids), straddling,
                         returned)
        doc_units = _doc_units(ids, chunks, labels, returned) if self.counts_docs else None
        values = used = None
        if scored or self.every_query:
            views = {"id": (ranked, grades), "doc": (doc_units, grades)}
            values, cuts = {}, {}
            try:
                for name, call in zip(self.names, self.units):
                    if name in self.apart:
                        continue
                    if call.view not in views:
                        views[call.view] = self._view(qid, call.view, labels, ids, chunks,
                                                      returned)
                    unit_ranking, unit_grades = views[call.view]
                    args = call.args
                    if call.budget:
                        if call.budget not in cuts:
                            cuts[call.budget] = _budget_cut(ids, chunks, call.budget)
                        args = (cuts[call.budget][0],) + args
                    value = call.func(unit_ranking, unit_grades, *args)
                    if value is not None:
                        values[name] = value
            except _NoSpan as exc:     # the run's chunks (or the map's): the run is named
                raise _RunError("query %r: %s%s" % (qid, exc, _unplaced_note(exc, ranking))) \
                    from None
            except EvalError as exc:
                raise EvalError("query %r: %s" % (qid, exc)) from None
            if self.budgets:    # (used, ran out, in tokens) of each budget measure scored
                used = tuple(cuts[budget][1:] if name in values else None
                             for name, budget in self.budgets)
        elif qid in self.unanswerable:
            values = self._unanswerable_values(ranked, grades)
        # A measure meets a label when what it counts (ids, or their documents) carries one.
        unlabelled = None if not ids else self._label_flags({
            "id": bool(ranked.labelled),
            "doc": bool(doc_units.labelled) if doc_units is not None else
            any(labels.get(chunk.doc, -1) >= 0 for chunk in chunks)}, ranking, labels)
        bounded = self.bounds is not None and (scored or self.every_query)
        if bounded or used is not None:
            return (values, read - len(ids), straddling, returned, unlabelled,
                    _query_unjudged(self, ranked, grades, ranking, labels) if bounded else None,
                    used)
        return values, read - len(ids), straddling, returned, unlabelled

    def _needing(self):
        """Which measures need where chunks come from, when neither a chunk map
        nor a separator is given (said after the error: a measure the
        command line took from a baseline is then named)."""
        if self.mapping.external:
            return ""
        names = [name for name, call in zip(self.names, self.units)
                 if call.view != "id" or call.budget]
        return " (for %s%s)" % (", ".join(names[:3]), ", ..." if len(names) > 3 else "")

    def _view(self, qid, view, labels, ids, chunks, returned):
        """(unit ranking, unit grades) of a view other than id and doc."""
        spans = self.labels.get(qid, {}) if self.labels is not None else {
            doc: [(None, None, grade)] for doc, grade in labels.items()}
        if view == "spans":
            return _Context(ids, chunks, {}), spans
        _, rel, cover = view
        units = _evidence(spans, rel)
        return (_evidence_units(units, ids, chunks, cover, returned),
                tuple(sorted((unit[3] for unit in units), reverse=True)))

    def _label_flags(self, top, ranking, labels):
        """None when the top K meets a label of every kind checked (``top``:
        kind -> True when it does); else a flag per kind of self.checks:
        None (the top K meets one), True (a deeper id does, or an earlier
        query's ranking did) or an example (an id, or a document) showing
        that the whole ranking meets none."""
        if all(top[kind] for kind, _ in self.checks):
            for i in range(len(self.met)):
                self.met[i] = True
            return None
        flags = []
        for i, (kind, _) in enumerate(self.checks):
            if top[kind]:
                flag = None
            elif self.met[i]:
                flag = True     # the whole-ranking look is needed only until a label is met
            elif kind == "id":
                flag = _unlabelled(ranking, labels)
            else:
                flag = self._unlabelled_docs(ranking, labels)
            self.met[i] = self.met[i] or flag is None or flag is True
            flags.append(flag)
        return tuple(flags)

    def _unlabelled_docs(self, ranking, labels):
        """_unlabelled over the whole ranking, where a retrieved chunk is
        labelled through its document: True, else the document of the best
        ranked id as an example."""
        chunks = self.mapping.resolve(ranking, list(_ids_of(ranking)))
        if any(labels.get(c.doc, -1) >= 0 for c in chunks):
            return True
        return self.mapping.resolve(ranking, [_best_id(ranking)])[0].doc

    unanswerable = frozenset()      # the queries stated unanswerable (see _answerability)
    min_score = None                # ids scored below it are dropped first (see _cut)

    def _unanswerable_values(self, ranked, grades):
        """The values of a query stated unanswerable: its measures' and the
        set-level measures' cells; None when no measure is about it."""
        if not self.unanswerable_calls:
            return None
        return {name: func(ranked, grades, *args) for name, func, args in self.unanswerable_calls}

    def ask_bounds(self, measures):
        """Score the unjudged bounds of every bounded measure and judged@k at
        every cutoff over ids too (see _query_unjudged); measures over units
        have none."""
        self.bounds = [(m, str(m)) + m._parts() for m in measures if _bounded(m)]
        self.judged_at = _judged_cutoffs(measures)
        self.bounds_depth = max([m.k if isinstance(m.k, int) else _WHOLE_RANKING
                                 for m, *_ in self.bounds] or [0])

    def ask_judged(self, measures):
        """Score judged@k only, at every cutoff over ids (what every gate shows
        beside its measures, see _with_unjudged): no bounds, no ids listed."""
        cutoffs = _judged_cutoffs(measures)
        if cutoffs:         # else (measures over units only) nothing to add per query
            self.bounds, self.judged_at, self.bounds_depth = [], cutoffs, 0

    trimmed = None      # with trim_label_whitespace: see _trim_counts

    def is_scored(self, grades):
        """True when a query's grades (see _sorted_grades) hold a relevant one;
        else the query is unscored."""
        return bool(grades) and grades[0] >= self.rel


class _RunError(EvalError):
    """An error in the run's rankings, raised per query; _score names the run."""


def _budget_cut(ids, chunks, budget):
    """(n, used, ran out, in tokens): how many of the top chunks fit the
    budget, the longest prefix whose sizes (tokens, else end - start
    characters) sum to at most ``budget``; the context they fill; whether
    the ranking ran out of chunks before the budget (all of them together
    are smaller); whether sizes are tokens (None: no chunk).

    >>> _budget_cut(["a", "b", "c"], [Chunk("d", 0, 50), Chunk("d", 50, 80), Chunk("d", 0, 5)], 70)
    (1, 50, False, False)
    >>> _budget_cut(["a", "b"], [Chunk("d", tokens=20), Chunk("e", tokens=30)], 70)
    (2, 50, True, True)
    """
    used = 0
    for n, (chunk_id, chunk) in enumerate(zip(ids, chunks)):
        if chunk.tokens is not None:
            size = chunk.tokens
        elif chunk.start is not None:
            size = chunk.end - chunk.start
        else:
            raise _NoSpan("chunk %r has no size: a budget needs tokens or start/end in the "
                          "chunk map" % chunk_id, chunk_id)
        if used + size > budget:
            return n, used, False, chunk.tokens is not None
        used += size
    return len(ids), used, used < budget, chunks[0].tokens is not None if chunks else None


class _Mapping:
    """Where each retrieved id comes from (its Chunk): a chunk map, the part of
    the id before the last ``doc_sep``, or the run's own fields (objects in a
    ranked list, see _MappedRanking).  Given a map or a separator, the run's
    fields must agree with it."""

    def __init__(self, chunks=None, doc_sep=None):
        if chunks is not None and doc_sep is not None:
            raise EvalError("give a chunk map or a document separator, not both "
                            "(--chunks or --doc-sep)")
        if doc_sep is not None and (not isinstance(doc_sep, str) or not doc_sep):
            raise EvalError("doc_sep must be a non-empty string, got %s" % _short_repr(doc_sep))
        self.chunks, self.doc_sep, self.inline = chunks, doc_sep, {}
        self.sized = set()          # whether the run's chunks give tokens: all or none
        self.chunk_ids = None       # the map's ids as a frozenset, once indexed (see index)
        self.label_versions = {}    # doc -> (qid, doc_sha256) of the labels

    @property
    def external(self):
        return self.chunks is not None or self.doc_sep is not None

    def resolve(self, ranking, ids, distinct=None):
        """The Chunk of each of ``ids`` (from ``ranking``, whose ``distinct``
        ids may be given).  The run's own fields fill in what the map or the
        separator does not say (a span, tokens)."""
        own = getattr(ranking, "chunks", None) or {}
        if own:
            self._take(own)
        if self.doc_sep is not None:
            return [own.get(chunk_id) or Chunk(_doc_of(chunk_id, self.doc_sep))
                    for chunk_id in ids]
        table = self.chunks if self.chunks is not None else self.inline
        docs = _ids_of(ranking)
        known = self.chunk_ids if self.chunk_ids is not None else table.keys()
        if not known >= (set(docs) if distinct is None else distinct):
            missing = next(doc for doc in docs if doc not in table)
            if self.chunks is not None:
                raise EvalError("retrieved id %r is not in the chunk map" % missing)
            raise EvalError("retrieved id %r has no document: give a chunk map (--chunks) or "
                            "--doc-sep, or doc/start/end for it in the run (or name its "
                            "document's field: --doc-field)" % missing)
        if own and self.chunks is not None:
            return [_filled(table[chunk_id], own.get(chunk_id)) for chunk_id in ids]
        return list(map(table.__getitem__, ids))

    def index(self):
        """Keep the chunk map's ids as a frozenset too, made once before any
        worker forks (they share it): on a 1M-id map, a set checks a query's
        ids in about 60% of the dict's time (fewer cache misses a look-up)."""
        if self.chunks is not None and self.chunk_ids is None:
            self.chunk_ids = frozenset(self.chunks)

    def _take(self, own):
        """Check the run's own chunk fields: against the map or separator, or
        against what the run said before; tokens on all or none; the labels'
        document versions."""
        for chunk_id, chunk in own.items():
            self.sized.add(chunk.tokens is not None)
            if len(self.sized) > 1:
                raise EvalError("tokens are given for some chunks of the run and not others "
                                "(not for %r or another): give them for all or none"
                                % chunk_id)
            seen = self.label_versions.get(chunk.doc)
            if seen and chunk.doc_sha256 is not None and seen[1] != chunk.doc_sha256:
                raise EvalError("labels (query %r) were written against %s %s..., the chunks "
                                "come from %s...: the document changed; label it again or "
                                "chunk the labelled version"
                                % (seen[0], chunk.doc, seen[1][:12], chunk.doc_sha256[:12]))
            if not self.external:
                if self.inline.setdefault(chunk_id, chunk) != chunk:
                    raise EvalError("chunk %r is given twice with different fields (%s and %s)"
                                    % (chunk_id, _chunk_text(self.inline[chunk_id]),
                                       _chunk_text(chunk)))
                continue
            known = (Chunk(_doc_of(chunk_id, self.doc_sep)) if self.doc_sep is not None
                     else self.chunks.get(chunk_id))
            if known is not None and not _agree(known, chunk):
                raise EvalError("the run places %r at %s, the %s at %s"
                                % (chunk_id, _chunk_text(chunk), "chunk map" if self.chunks
                                   is not None else "--doc-sep", _chunk_text(known)))

    def info(self):
        """What the report says of the mapping."""
        return {"doc_sep": self.doc_sep, "offsets": "code points",
                "source": "chunk map" if self.chunks is not None else "doc_sep"
                if self.doc_sep is not None else "run" if self.inline else None}


def _agree(known, given):
    """True when two accounts of a chunk agree where both say something."""
    return known.doc == given.doc and all(
        a is None or b is None or a == b for a, b in ((known.start, given.start),
                                                      (known.end, given.end),
                                                      (known.tokens, given.tokens),
                                                      (known.doc_sha256, given.doc_sha256)))


def _filled(known, given):
    """``known`` (the map's Chunk) with what it leaves out taken from ``given``."""
    if given is None:
        return known
    return Chunk(known.doc, *(a if a is not None else b for a, b in (
        (known.start, given.start), (known.end, given.end), (known.tokens, given.tokens),
        (known.doc_sha256, given.doc_sha256))))


def _check_versions(versions, mapping):
    """Each doc_sha256 a label gives must be the chunk map's for that document."""
    known = getattr(mapping.chunks, "versions", None) or {}
    for qid, docs in sorted(versions.items()):
        for doc, sha in sorted(docs.items()):
            if doc in known and known[doc] != sha:
                raise EvalError("query %r: labels were written against %s %s..., the chunks "
                                "come from %s...: the document changed; label it again or "
                                "chunk the labelled version" % (qid, doc, sha[:12],
                                                                  known[doc][:12]))


def _scorer(qrels, measures, rel, average, chunks=None, doc_sep=None, testset=None,
            min_score=None, bounds=False, trim=False, whole=True):
    """The _QueryScorer of validated qrels (id labels or label lists), of the
    mapping given (a _ChunkMap, a separator, or neither) and of the queries
    the test set states unanswerable; ``bounds``: it scores the unjudged
    bounds too (see _QueryScorer.ask_bounds), or with "judged" judged@k only
    (see _QueryScorer.ask_judged); ``trim``: span labels that carry their
    text are narrowed past the whitespace at its ends (see _trimmed_span);
    ``whole``: False when the qrels are a shard's (see score_rows), whose
    queries alone may have no label to trim."""
    for m in measures:
        if m.name == "score":
            raise EvalError("%s is read from a score file: evaluate_scores() (--scores FILE "
                            "on the command line); evaluate() scores runs" % (m,))
    if not isinstance(trim, bool):
        raise EvalError("trim_label_whitespace must be True or False, got %s" % _short_repr(trim))
    counts = _trim_counts(qrels, whole) if trim else None
    grades, spans, versions = _split_qrels(qrels, trim)
    mapping = _Mapping(chunks, doc_sep)
    _check_versions(versions, mapping)
    for qid, docs in sorted(versions.items()):
        for doc, sha in sorted(docs.items()):
            mapping.label_versions.setdefault(doc, (qid, sha))
    scorer = _QueryScorer(grades, measures, rel, average, spans, mapping)
    scorer.min_score = _checked_min_score(min_score)
    scorer.trimmed = counts
    if bounds == "judged":
        scorer.ask_judged(measures)
    elif bounds:
        scorer.ask_bounds(measures)
    return _answerability(scorer, testset and testset.queries)


def _checked_min_score(min_score):
    if min_score is None:
        return None
    return _finite(min_score, "min_score")


def _split_qrels(qrels, trim=False):
    """(grades, spans, versions) of validated qrels.  Id labels pass as they are
    (spans None).  Label lists become the documents' grades (the highest label
    on each, so every policy on scored queries holds), the span labels by
    document {qid: {doc: [(start, end, grade)]}} (start/end None: the whole
    document; with ``trim``, a span whose label carries its text narrowed
    past the whitespace at its ends, see _trimmed_span) and the labels'
    doc_sha256 {qid: {doc: sha}}.

    >>> _split_qrels({"q": [Label("a", 0, 5, 1), Label("a", 9, 12, 2), Label("b", None, None, 0)]})
    ({'q': {'a': 2, 'b': 0}}, {'q': {'a': [(0, 5, 1), (9, 12, 2)], 'b': [(None, None, 0)]}}, {})
    """
    forms = {type(labels) is list for labels in qrels.values() if labels}   # {}: either form
    if True not in forms:
        if any(type(labels) is list for labels in qrels.values()):    # [] beside {id: grade}
            qrels = {qid: labels or {} for qid, labels in qrels.items()}
        return qrels, None, {}
    if False in forms:
        raise EvalError("qrels: some queries give {id: grade} and others lists of labels; "
                        "write one form")
    grades, spans, versions = {}, {}, {}
    first = {}      # doc -> (qid, doc_sha256) of its first versioned label
    for qid, labels in qrels.items():
        grades[qid], spans[qid] = {}, {}
        for label in labels:
            grades[qid][label.doc] = max(label.grade, grades[qid].get(label.doc, label.grade))
            start, end = label.start, label.end
            if trim and start is not None and label.text is not None:
                start, end = _trimmed_span(qid, label)
            spans[qid].setdefault(label.doc, []).append((start, end, label.grade))
            if label.doc_sha256 is not None:
                _check_one_version(first, qid, label)
                versions.setdefault(qid, {})[label.doc] = label.doc_sha256
    return grades, spans, versions


def _trimmed_span(qid, label):
    """(start, end) of a span label narrowed past the whitespace (str.strip's:
    spaces, tabs, line breaks, and the other Unicode white space) at the
    ends of its ``text``, which must be as long as the span.  A splitter
    that strips its chunks (LangChain's does) never holds that whitespace,
    and an exact cover=1 would count the span lost over one space.

    >>> _trimmed_span("q1", Label("a.md", 10, 19, 1, text=" Refund\\n "))
    (11, 17)
    """
    text = label.text
    where = "qrels: query %r: the span label %s [%d, %d)" % (qid, label.doc, label.start,
                                                             label.end)
    if len(text) != label.end - label.start:
        raise EvalError("%s carries a text of %d code points, and the span is %d: the offsets "
                        "and the text disagree (byte offsets?), so --trim-label-whitespace "
                        "cannot narrow it" % (where, len(text), label.end - label.start))
    kept = text.strip()
    if not kept:
        raise EvalError("%s: its text is white space only: no evidence is left to label"
                        % where)
    start = label.start + len(text) - len(text.lstrip())
    return start, start + len(kept)


def _trim_counts(qrels, required=True):
    """{qid: (span labels, narrowed, without text)} of label-list qrels, for
    --trim-label-whitespace (trim_label_whitespace=True): an error when no
    span label carries its text (and they are ``required``: not a shard's),
    since the option would then do nothing.

    >>> _trim_counts({"q": [Label("a", 0, 3, 1, text=" ab"), Label("a", 5, 9, 1, text="abcd"),
    ...                     Label("b", 0, 4, 1), Label("b", None, None, 1, text="x")]})
    {'q': (3, 1, 1)}
    """
    counts = {}
    for qid, labels in qrels.items():
        spans = [label for label in labels if label.start is not None] if type(
            labels) is list else ()
        if spans:
            counts[qid] = (len(spans), sum(1 for label in spans if label.text is not None
                                           and label.text != label.text.strip()),
                           sum(1 for label in spans if label.text is None))
    if required and not any(total > without for total, _, without in counts.values()):
        raise EvalError("trim_label_whitespace (--trim-label-whitespace): no span label of the "
                        "qrels carries its text, so none can be narrowed: give each span "
                        "label its \"text\" (the characters [start, end) of its document)")
    return counts


def _check_one_version(first, qid, label):
    """A document is labelled against one version (doc_sha256) in every query:
    spans of two versions do not point at the same characters, whatever the
    chunk map says.  ``first`` maps each document to (qid, sha) of its first
    versioned label.

    >>> first = {}
    >>> _check_one_version(first, "q1", Label("A", None, None, 1, "a" * 64))
    >>> _check_one_version(first, "q2", Label("A", 0, 5, 1, "b" * 64))
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: qrels: document 'A' is labelled against two versions: doc_sha256 aaaaaaaaaaaa... in query 'q1' and bbbbbbbbbbbb... in query 'q2'; label one version
    """
    seen = first.setdefault(label.doc, (qid, label.doc_sha256))
    if seen[1] != label.doc_sha256:
        raise EvalError("qrels: document %r is labelled against two versions: doc_sha256 "
                        "%s... in query %r and %s... in query %r; label one version"
                        % (label.doc, seen[1][:12], seen[0], label.doc_sha256[:12], qid))


def _cut(qid, ranking, min_score):
    """The ranking without the ids scored below ``min_score`` (--min-score,
    the production similarity cut-off), before anything else reads it.  A
    ranked list without scores cannot be cut: an error.

    >>> _cut("q", {"a": 0.9, "b": 0.2}, 0.5), _cut("q", _Scored(["a", "b"], [0.9, 0.2]), 0.95)
    ({'a': 0.9}, _Scored(docs=[], scores=[]))
    """
    if isinstance(ranking, dict):
        return {doc: score for doc, score in ranking.items() if float(score) >= min_score}
    if type(ranking) is _Scored:
        kept = [(d, s) for d, s in zip(*ranking) if float(s) >= min_score]
        return _Scored([d for d, _ in kept], [s for _, s in kept])
    scores = getattr(ranking, "scores", None)
    if scores is None:
        if not ranking:
            return ranking
        raise _RunError("query %r: --min-score (min_score=) needs scores, and this ranking is "
                        "a ranked list without them" % qid)
    out = _MappedRanking(d for d, s in zip(ranking, scores) if s >= min_score)
    out.chunks, out.scores = ranking.chunks, [s for s in scores if s >= min_score]
    out.texts = ranking.texts
    out.unplaced = ranking.unplaced
    return out


def _answerability_calls(measures):
    """(calls, aggregates): the (name, func, args) of the measures a query
    stated unanswerable is scored on (its own and the set-level ones), and
    the names of the set-level measures (see measure(aggregate=))."""
    calls = [(str(m),) + m._parts() for m in measures
             if _REGISTRY[m.name].population in _UNANSWERABLE_POPULATIONS]
    return calls, frozenset(str(m) for m in measures if _REGISTRY[m.name].aggregate)


def _answerability(scorer, queries):
    """Give ``scorer`` the queries that query metadata states unanswerable
    (``"answerable": false``) among its qrels; one that holds a relevant id
    is an error.  Answerability is never inferred from missing labels."""
    if not queries:
        return scorer
    stated = frozenset(qid for qid, info in queries.items()
                       if info.get("answerable") is False and qid in scorer.qrels)
    for qid in sorted(stated):
        if scorer.is_scored(_sorted_grades(scorer.qrels[qid])):
            raise EvalError('qrels: query %r is stated unanswerable ("answerable": false) but '
                            "has a relevant id (grade >= %d): drop the statement or the labels"
                            % (qid, scorer.rel))
    scorer.unanswerable = stated
    return scorer


# --- --sweep-min-score: abstention against retrieval, threshold by threshold ---
#
# Each row is the run scored with --min-score at one threshold: exact, never
# interpolated.  A row costs one scoring of the run, so the thresholds are
# capped (SWEEP_MAX_THRESHOLDS, see _sweep_thresholds).

SWEEP_MAX_THRESHOLDS = 100
_SWEEP_WARNING = ("a threshold chosen from this table flatters it: it is tuned on the same "
                  "queries it is scored on; confirm it on queries it was not chosen on")


class Sweep(NamedTuple):
    """The rows of --sweep-min-score: (threshold, abstention_f1, the measure's
    mean), threshold None ("no cut") first, then ascending; ``distinct`` is the
    number of distinct scores the run holds (more than the rows when capped)."""
    measure: str
    rows: tuple
    distinct: int
    notes: tuple

    def to_dict(self):
        return {"measure": self.measure, "distinct_scores": self.distinct,
                "notes": list(self.notes),
                "rows": [{"min_score": t, "abstention_f1": f1, self.measure: value}
                         for t, f1, value in self.rows]}


def sweep_min_score(qrels, run, measure, *, rel=1, gain="exponential", queries=None,
                    skip_extra_queries=False, max_thresholds=SWEEP_MAX_THRESHOLDS):
    """``abstention_f1`` and the mean of ``measure`` with ``min_score`` at "no
    cut" and at each distinct score of ``run`` (at most ``max_thresholds`` of
    them, see _sweep_thresholds); a :class:`Sweep`.  It needs queries stated
    unanswerable (``queries`` metadata, ``"answerable": false``).

    >>> s = sweep_min_score({"q1": {"a": 1}, "q9": {}}, {"q1": {"a": 0.8, "b": 0.4},
    ...                     "q9": {"c": 0.6}}, "recall@1", queries={"q9": {"answerable": False}})
    >>> [(t, round(f1, 4), value) for t, f1, value in s.rows]   # at 0.8 q9 abstains
    [(None, 0.3333, 1.0), (0.4, 0.3333, 1.0), (0.6, 0.3333, 1.0), (0.8, 1.0, 1.0)]
    """
    run = _validated(run, "run", _check_run_query)
    name = str(_one_measure(measure, rel, gain))

    def score_at(threshold):
        return evaluate(qrels, run, measures=[name, "abstention_f1"], rel=rel, gain=gain,
                        queries=queries, skip_extra_queries=skip_extra_queries,
                        min_score=threshold)
    return _sweep(score_at, name, _run_scores(run.items()), max_thresholds)


def _one_measure(name, rel=1, gain="exponential", unit="id", k=DEFAULT_K):
    """The one measure ``name`` names (a name taken at several cutoffs is refused)."""
    found = resolve_measures(name, k, rel=rel, gain=gain, unit=unit)
    if len(found) != 1:
        raise EvalError("--sweep-min-score (sweep_min_score) takes one measure, and %r is %d: "
                        "give its cutoff, e.g. %s" % (name, len(found), found[0]))
    return found[0]


def _run_scores(rankings):
    """Every score of the (query, ranking) pairs of a checked run; a non-empty
    ranking without scores is an error (--min-score could not cut it).

    >>> sorted(_run_scores([("q1", {"a": 0.5, "b": 0.25}), ("q2", [])]))
    [0.25, 0.5]
    """
    for qid, ranking in rankings:
        scores = (ranking.values() if isinstance(ranking, dict)
                  else getattr(ranking, "scores", None))
        if scores is None and ranking:
            raise EvalError("query %r: --sweep-min-score needs scores, and this ranking is a "
                            "ranked list without them" % qid)
        yield from map(float, scores or ())


def _sweep_thresholds(scores, cap):
    """The distinct scores, ascending; above ``cap`` of them, ``cap`` taken at
    evenly spaced ranks (the lowest and the highest kept): quantiles of the
    distinct scores, each still an exact row.

    >>> _sweep_thresholds([0.5, 0.1, 0.5, 0.3], 10)
    [0.1, 0.3, 0.5]
    >>> _sweep_thresholds(range(10), 4)   # ranks 0, 3, 6, 9 of 0..9
    [0, 3, 6, 9]
    """
    distinct = sorted(set(scores))
    if len(distinct) <= cap:
        return distinct
    last = len(distinct) - 1
    return [distinct[(i * last + (cap - 1) // 2) // (cap - 1)] for i in range(cap)]


def _sweep(score_at, name, scores, cap=SWEEP_MAX_THRESHOLDS):
    """The Sweep of ``score_at(threshold)`` (a Report) at "no cut" (None) and
    at the thresholds of ``scores``."""
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 2:
        raise EvalError("max_thresholds must be an integer >= 2, got %s" % _short_repr(cap))
    scores = list(scores)
    distinct = len(set(scores))
    first = score_at(None)
    if not (first.answerability or {}).get("unanswerable"):
        raise EvalError('--sweep-min-score needs queries stated unanswerable ("answerable": '
                        "false): without them abstention_f1 only counts answerable queries "
                        "that abstained, and no threshold can gain anything")
    rows = []
    for threshold, report in itertools.chain([(None, first)], (
            (t, score_at(t)) for t in _sweep_thresholds(scores, cap))):
        rows.append((threshold, report.mean.get("abstention_f1"), report.mean.get(name)))
    notes = [_SWEEP_WARNING]
    if distinct > cap:
        notes.append("the run holds %d distinct scores: the rows are %d of them at evenly "
                     "spaced ranks (quantiles), each exact" % (distinct, cap))
    return Sweep(name, tuple(rows), distinct, tuple(notes))


_NO_LABELS = {}
_STRAYS_KEPT = 1000     # retrieved ids kept to find why a run meets no label


def _score(scorer, scored, skip_extra, run_name, testset=None):
    """The report over a stream of (qid, scored tuple or None: not in the
    qrels), see _scored_queries; qrels queries absent from it score 0.  With
    a _TestSet, the hold-out's queries are set apart before any list or
    warning is made, and the report gets its slices (see _TestSet.report)."""
    qrels, names, rel = scorer.qrels, scorer.names, scorer.rel
    per_query, abstention, ties, extra, unlabelled, empty = {}, {}, {}, [], [], []
    unjudged_rows = {}  # scorer.bounds: each scored query's _query_unjudged
    budget_rows = {}    # scorer.budgets: each scored query's context used (see _by_units)
    no_relevant = {}    # average="trec_eval": the run's queries with no relevant id
    repeated = []       # queries whose ranking repeats an id
    # Per label check (see _label_checks): whether the run met a label of its kind, and
    # strays, (qid, example id or document) of the rankings that meet none.
    met = [False] * len(scorer.checks)
    strays = [[] for _ in scorer.checks]
    cells = {}          # {qid: {set-level measure: cell}}, see _take_cells

    def add(qid, result, in_run=True):
        values, duplicates, straddling, returned, no_label = result[:5]
        if len(result) > 5:
            if result[5] is not None:
                unjudged_rows[qid] = result[5]
            if len(result) > 6 and result[6] is not None:
                budget_rows[qid] = result[6]
        if values is not None and scorer.every_query and not scorer.is_scored(
                _sorted_grades(qrels[qid])):
            if in_run:
                no_relevant[qid] = values
            values = None
        if values is not None and scorer.aggregates:
            values = _take_cells(qid, values, scorer, cells)
        if values is None:
            abstention[qid] = returned
        else:
            per_query[qid] = values
            if straddling:
                ties[qid] = straddling
            if no_label is not None and qid not in scorer.unanswerable:
                unlabelled.append(qid)
        if duplicates:
            repeated.append(qid)
        if no_label is None:
            if returned > 0:
                met[:] = [True] * len(met)
        else:
            for i, flag in enumerate(no_label):
                if flag is None or flag is True:
                    met[i] = True
                elif len(strays[i]) < _STRAYS_KEPT:
                    strays[i].append((qid, flag))
        return values is not None and returned == 0 and qid not in scorer.unanswerable

    try:
        for qid, result in scored:      # a stream names each query once (the readers check)
            if result is None:
                extra.append(qid)
            elif add(qid, result):
                empty.append(qid)
    except _RunError as exc:
        raise EvalError("%s: %s" % (run_name, exc)) from None
    absent = sorted(set(qrels).difference(per_query, abstention))
    missing = [qid for qid in absent if scorer.is_scored(_sorted_grades(qrels[qid]))]
    for qid in absent:
        add(qid, scorer(qid, None), in_run=False)
    hidden, held = frozenset(), None
    if testset is not None:
        extra = [qid for qid in extra if qid not in testset.expired]   # not in the test set now
        hidden = testset.hidden
        held = _set_apart(hidden, per_query, abstention, missing)
        if hidden:
            missing, empty, unlabelled, repeated = (
                [q for q in ids if q not in hidden] for ids in (missing, empty, unlabelled,
                                                                 repeated))
            ties = {q: n for q, n in ties.items() if q not in hidden}
            strays = [[stray for stray in kept if stray[0] not in hidden] for kept in strays]
            qrels = {q: labels for q, labels in qrels.items() if q not in hidden}
    extra.sort()
    if extra and not skip_extra:
        raise EvalError("%s: %s not in the qrels: %s (check the files match, or skip them "
                        "with --skip-extra-queries)"
                        % (run_name, _plural(len(extra), "query is", "queries are"),
                           _preview(extra)))
    if not per_query and not cells:
        if held and held[0]:
            raise EvalError("every scored query is in the hold-out %s: the overall mean would "
                            "be over none" % testset.holdout)
        raise EvalError("no query in the qrels has a relevant id (grade >= %d): nothing to score"
                        % rel)
    answerability = _answerability_counts(per_query, abstention, scorer.unanswerable - hidden)
    if scorer.every_query:
        # trec_eval without -c: the queries the run and the qrels share.
        per_query.update(no_relevant)
        for qid in no_relevant:     # in the means now: not unscored
            del abstention[qid]
        for qid in missing:
            del per_query[qid]
        if not per_query:
            raise EvalError("no query of the run is in the qrels: trec_eval's average is "
                            "over none")
    warnings = []
    if missing:
        warnings.append("%s in the qrels not in the run, %s: %s"
                        % (_plural(len(missing), "query", "queries"),
                           "left out of the means (trec_eval's average)" if scorer.every_query
                           else "scored 0", _preview(missing)))
    if empty:
        warnings.append("%s retrieved nothing, scored 0: %s"
                        % (_plural(len(empty), "query", "queries"), _preview(sorted(empty))))
    if repeated:
        warnings.append("%s repeat ids; each id counts once, at its best position"
                        % _plural(len(repeated), "query", "queries"))
    if extra:
        warnings.append("skipped %s not in the qrels: %s"
                        % (_plural(len(extra), "run query", "run queries"), _preview(extra)))
    if ties:
        warnings.append("%s cross a cutoff (ties broken by doc id descending, as trec_eval)"
                        % _plural(sum(ties.values()), "tied score group", "tied score groups"))
    unlabelled_run = None
    unlabelled.sort()
    # A run that abstained everywhere is an answer when abstention is measured.
    abstaining = not any(strays) and any(_REGISTRY[parse_measure(m).name].population in (
        "answerable", "unanswerable", "stated") for m in names)
    if not all(met) and not abstaining:
        unlabelled_run = _unlabelled_run(qrels, scorer.checks, met, strays, extra)
        warnings.append("%s: %s" % (run_name, unlabelled_run))
    elif unlabelled:
        warnings.append("%s no labelled id (grade >= 0) in the %s: %s; unlabelled ids "
                        "count as non-relevant, so label them before trusting a drop"
                        % (_plural(len(unlabelled), "query has", "queries have"),
                           "ranking" if scorer.depth == _WHOLE_RANKING else
                           "top %d" % scorer.depth, _preview(unlabelled)))
    per_query = dict(sorted(per_query.items()))
    counts = None
    if scorer.mapped or scorer.apart or scorer.aggregates:
        mean, counts = _population_means(per_query, names, {
            q: c for q, c in cells.items() if q not in hidden})
        for name in names:
            if name not in mean:    # as "no query has a relevant id": nothing to average
                raise EvalError(_nothing_to_average(name))
        warnings.extend(_population_notes(per_query, names, counts))
        warnings.extend(_label_notes(scorer, hidden))
        budget = _budget_summary(scorer.budgets, budget_rows, per_query)
        warnings.extend(_budget_notes(budget))
    else:
        mean = dict(zip(names, map(_mean, _columns(per_query.values(), names))))
    report = Report(names, mean, per_query, tuple(sorted(abstention)), tuple(missing),
                    tuple(extra), dict(sorted(abstention.items())), dict(sorted(ties.items())),
                    tuple(warnings), rel, None, tuple(unlabelled), unlabelled_run,
                    scorer.average, counts,
                    _mapping_info(scorer, hidden) if scorer.mapped else None,
                    answerability=answerability, cells=cells or None)
    if scorer.bounds is not None:
        report = report._replace(unjudged=_unjudged_summary(unjudged_rows, names, per_query))
    if scorer.budgets:
        report = report._replace(budget=budget)
    return report if testset is None else testset.report(report, held)


def _budget_summary(budgets, rows, per_query):
    """The report's ``budget`` (see Report): per measure cut at a budget, the
    mean context used over the queries it scored (``per_query``: the hold-out
    is out of it), how many of them ran out of retrieved chunks before the
    budget, and whether sizes were tokens or characters.  ``rows`` holds each
    query's (used, ran out, in tokens) per budget measure (see _by_units).

    >>> _budget_summary([("recall(budget=60)", 60)], {"q1": ((50, True, True),),
    ...                 "q2": ((60, False, True),)}, {"q1": {}, "q2": {}})
    {'recall(budget=60)': {'budget': 60, 'used': 55.0, 'ran_out': 1, 'queries': 2, 'unit': 'tokens'}}
    """
    out = {}
    for i, (name, budget) in enumerate(budgets):
        use = [rows[q][i] for q in per_query if q in rows and rows[q][i] is not None]
        if not use:
            continue
        kinds = {tokens for _, _, tokens in use if tokens is not None}
        out[name] = {"budget": budget, "used": _mean([used for used, _, _ in use]),
                     "ran_out": sum(1 for _, ran_out, _ in use if ran_out),
                     "queries": len(use),
                     "unit": "tokens" if True in kinds else "characters" if kinds else None}
    return out


def _budget_notes(budget):
    """One warning per budget that some queries could not fill: a run cut at
    a budget is scored on less context than it where its retrieved chunks
    run out first, so two runs compare at equal cost only when neither does.
    Measures with the same numbers share a warning.

    >>> print(_budget_notes({"recall(budget=600,unit=evidence)": {"budget": 600, "used": 512.25,
    ...                      "ran_out": 59, "queries": 100, "unit": "tokens"}})[0])
    recall(budget=600,unit=evidence): 59 of 100 queries ran out of retrieved chunks before the budget (all their retrieved chunks together hold fewer than 600 tokens), so they are scored on less context: 512.2 tokens used on average; retrieve deeper to compare at equal cost
    """
    groups = {}
    for name, use in budget.items():
        if use["ran_out"]:
            key = tuple(use[k] for k in ("budget", "used", "ran_out", "queries", "unit"))
            groups.setdefault(key, []).append(name)
    notes = []
    for (size, used, ran_out, queries, unit), names in groups.items():
        unit = unit or "tokens or characters"
        notes.append("%s: %d of %s ran out of retrieved chunks before the budget (all their "
                     "retrieved chunks together hold fewer than %d %s), so %s scored on less "
                     "context: %.1f %s used on average; retrieve deeper to compare at equal "
                     "cost" % (", ".join(names), ran_out, _plural(queries, "query", "queries"),
                               size, unit, "it is" if ran_out == 1 else "they are", used, unit))
    return notes


def _take_cells(qid, values, scorer, cells):
    """Move a query's cells of set-level measures out of its values (a cell
    never shows) into ``cells``, paired with its answerability: (answerable,
    abstained).  A query stated unanswerable left with no value stays unscored."""
    found = {name: (qid not in scorer.unanswerable, values.pop(name))
             for name in scorer.aggregates if name in values}
    if found:
        cells[qid] = found
    return None if not values and qid in scorer.unanswerable else values


def _answerability_counts(per_query, unscored, unanswerable):
    """The answerability block: answerable queries (a relevant id), those
    stated unanswerable, and those with neither (unscored, as before).

    >>> _answerability_counts({"q1": {}, "q9": {}}, {"q4": 0}, frozenset(["q9"]))
    {'answerable': 1, 'unanswerable': 1, 'unstated': 1}
    """
    return {"answerable": len(per_query) - len(unanswerable.intersection(per_query)),
            "unanswerable": len(unanswerable),
            "unstated": len(unscored) - len(unanswerable.intersection(unscored))}


def _nothing_to_average(name):
    """Why a measure has no mean: no query is in its population."""
    population = _REGISTRY[parse_measure(name).name].population
    if population == "spans":
        return ("%s: no scored query has a span label graded >= rel: nothing to average "
                "(character measures need span labels, not whole-document ones)" % name)
    return "%s: no query is in its population, %s: nothing to average" % (
        name, POPULATIONS[population])


def _set_apart(hidden, per_query, abstention, missing):
    """Move the hold-out's queries out of ``per_query`` and ``abstention``:
    (their values, their unscored ids, their ids missing from the run)."""
    ids = sorted(hidden)
    values = {q: per_query.pop(q) for q in ids if q in per_query}
    unscored = tuple(q for q in ids if abstention.pop(q, None) is not None)
    return values, unscored, tuple(q for q in missing if q in hidden)


def _label_notes(scorer, hidden=frozenset()):
    """Warnings about the labels themselves: overlapping span labels (merged
    into one evidence unit) and labels no chunk of the map can ever reach;
    the ``hidden`` queries (the hold-out) are never named."""
    notes = []
    overlapping = sorted(qid for qid, docs in (scorer.labels or {}).items() if qid not in hidden
                         and any(_overlaps(spans, scorer.rel) for spans in docs.values()))
    if overlapping:
        notes.append("%s overlapping span labels on one document, merged into one evidence "
                     "unit (the higher grade): %s"
                     % (_plural(len(overlapping), "query has", "queries have"),
                        _preview(overlapping)))
    lost = _uncoverable(scorer, hidden)
    if lost:
        shown = ["%s %s" % (qid, _unit_text(units[0])) for qid, units in list(lost.items())[:5]]
        notes.append("%s labelled evidence that no chunk of the map %s: lost at ingestion, "
                     "not by the retriever (scored as misses; see mapping.uncoverable): %s"
                     % (_plural(len(lost), "query has", "queries have"),
                        "holds" if _needed_cover(scorer) else "touches", "; ".join(shown)))
    unchecked = _unchecked_loss(scorer)
    if unchecked:
        notes.append(unchecked)
    counts = [c for qid, c in (scorer.trimmed or {}).items() if qid not in hidden]
    without = sum(c[2] for c in counts)
    if without:
        notes.append("--trim-label-whitespace: %d of %s carry no text, so they are scored as "
                     "written (%d narrowed); give each span label its \"text\" to trim it"
                     % (without, _plural(sum(c[0] for c in counts), "span label",
                                         "span labels"), sum(c[1] for c in counts)))
    return notes


_PLACED_BY = {"run": "the chunks were placed by the run's own fields",
              "doc_sep": "the chunks' documents came from --doc-sep"}


def _unchecked_loss(scorer):
    """The note of measures over documents or evidence scored without a chunk
    map: what the index lost cannot be told from what the retriever missed
    (see _lost_at_ingestion), so no query can be listed as lost; else None.

    >>> print(_unchecked_loss(_scorer({"q": {"A": 1}}, resolve_measures("recall", 5, unit="doc"),
    ...                               1, "scored", doc_sep="#")))
    the chunks' documents came from --doc-sep, not from a chunk map: evidence lost at ingestion (a labelled document or span no chunk holds) cannot be detected, and scores as a retrieval miss; give the index's chunk map (--chunks) to check
    """
    source = scorer.mapping.info()["source"]
    if source not in _PLACED_BY or all(call.view == "id" for call in scorer.units):
        return None
    return ("%s, not from a chunk map: evidence lost at ingestion (a labelled document or "
            "span no chunk holds) cannot be detected, and scores as a retrieval miss; give "
            "the index's chunk map (--chunks) to check" % _PLACED_BY[source])


def _overlaps(spans, rel):
    spans = sorted((s, e) for s, e, g in spans if s is not None and g >= rel)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def _unit_text(unit):
    doc, start, end = unit[:3]
    return doc if start is None else "%s [%d, %d)" % (doc, start, end)


def _needed_cover(scorer):
    """The cover a labelled span must reach in the chunk map to be findable:
    the largest cover asked for (1 when no evidence measure asks)."""
    covers = [call.view[2] for call in scorer.units if isinstance(call.view, tuple)]
    return max(covers) if covers else COVER.default


def _uncoverable(scorer, hidden=frozenset()):
    """{qid: [(doc, start, end), ...]}: the relevant units (see _evidence) of
    scored queries that the chunk map cannot deliver: a document with no
    chunk, or (when a measure reads spans) a span its chunks do not cover to
    the needed cover (see _needed_cover).  Worked out once per scorer; the
    ``hidden`` queries (a hold-out) are left out."""
    if scorer.lost is None:
        scorer.lost = _lost_at_ingestion(scorer) if scorer.mapping.chunks is not None else {}
    return {qid: units for qid, units in scorer.lost.items() if qid not in hidden}


def _lost_at_ingestion(scorer):
    spans = scorer.labels if scorer.labels is not None else {
        qid: {doc: [(None, None, g)] for doc, g in grades.items()}
        for qid, grades in scorer.qrels.items()}
    chunks = scorer.mapping.chunks
    documents = chunks.documents()
    reads_spans = any(call.view == "spans" or isinstance(call.view, tuple)
                      for call in scorer.units)
    # Only a document without a chunk is lost when no measure reads spans.
    evidence = {qid: _evidence(spans[qid], scorer.rel) for qid in sorted(spans)
                if reads_spans or not spans[qid].keys() <= documents}
    held = {doc: _Cover(spans) for doc, spans in _chunk_spans(chunks, {
        doc for units in evidence.values() for doc, start, _, _ in units
        if start is not None and doc in documents}).items()} if reads_spans else {}
    share, lost = _exact_share(_needed_cover(scorer)), {}
    for qid, units in evidence.items():
        for doc, start, end, grade in units:
            if doc not in documents:
                lost.setdefault(qid, []).append((doc, start, end))
                continue
            if start is None or not reads_spans or not held[doc]:
                continue    # (a document whose chunks give no span cannot tell)
            have = held[doc].within(start, end)
            if not have or have * share.denominator < share.numerator * (end - start):
                lost.setdefault(qid, []).append((doc, start, end))
    return lost


class _Cover:
    """The characters a document's chunks hold, merged once (see _union), so
    that how many of a span's characters they hold is two bisections, not a
    pass over every chunk of the document.

    >>> c = _Cover([(0, 6), (4, 10), (20, 30)])
    >>> c.within(5, 25), c.within(10, 20), c.within(0, 40), c.within(8, 9)
    (10, 0, 20, 1)
    """

    def __init__(self, spans):
        merged = _union(spans)
        self.starts = [start for start, _ in merged]
        self.ends = [end for _, end in merged]
        self.before = list(itertools.accumulate((end - start for start, end in merged),
                                                initial=0))

    def __bool__(self):
        return bool(self.starts)

    def within(self, start, end):
        """The characters of [start, end) the chunks hold."""
        first = bisect.bisect_right(self.ends, start)     # the first merged span ending after start
        last = bisect.bisect_left(self.starts, end)       # past the last one starting before end
        if first >= last:
            return 0
        return (self.before[last] - self.before[first] - max(0, start - self.starts[first])
                - max(0, self.ends[last - 1] - end))


def _chunk_spans(chunks, docs):
    """{doc: [(start, end), ...]}: the spans of the chunks of the documents
    ``docs`` in a chunk map.

    >>> _chunk_spans({"a1": Chunk("A", 0, 6), "b1": Chunk("B"), "a2": Chunk("A", 6, 9)}, {"A"})
    {'A': [(0, 6), (6, 9)]}
    """
    held = {doc: [] for doc in docs}
    for doc, start, end, _, _ in chunks.values():
        if start is not None and doc in held:
            held[doc].append((start, end))
    return held


def _mapping_info(scorer, hidden=frozenset()):
    """What the report says of the mapping; ``uncoverable`` is null without a
    chunk map (lost evidence cannot be told, see _unchecked_loss)."""
    info = scorer.mapping.info()
    info["uncoverable"] = None if scorer.mapping.chunks is None else {
        qid: [list(unit) for unit in units]
        for qid, units in _uncoverable(scorer, hidden).items()}
    return info


def _population_notes(per_query, names, counts):
    if counts is None:
        return []
    notes = []
    for name in names:
        if counts[name] < len(per_query) and (
                _REGISTRY[parse_measure(name).name].population == "spans"):
            left = [q for q, row in per_query.items() if name not in row]
            notes.append("%s averages over %d of %s: %s no span label graded >= rel (%s)"
                         % (name, counts[name], _plural(len(per_query), "query", "queries"),
                            _plural(len(left), "query has", "queries have"), _preview(left)))
    return notes


def _label_checks(measures, units):
    """((kind, names), ...): the measures grouped by what the run must meet a
    label through for their numbers to mean anything: "id" (the retrieved
    ids themselves) or "doc" (their documents: unit=doc and evidence, and
    the character measures), in the order the measures first name a kind.
    Measures no label decides (abstention, diversity) are left out, unless
    no measure reads a label: then every measure is checked on what it reads.

    >>> ms = resolve_measures("recall,recall(unit=doc),answered", 5)
    >>> _label_checks(ms, [_UnitCall.of(m) for m in ms])
    (('id', ('recall@5',)), ('doc', ('recall(unit=doc)@5',)))
    """
    pairs = list(zip(measures, units))
    reading = [(m, call) for m, call in pairs if _REGISTRY[m.name].labels] or pairs
    groups = {}
    for m, call in reading:
        groups.setdefault("id" if call.view == "id" else "doc", []).append(str(m))
    return tuple((kind, tuple(names)) for kind, names in groups.items())


def _unlabelled_run(qrels, checks, met, strays, extra):
    """Why the run meets no label, for the checks (see _label_checks) it
    failed, as one line: with one check the reason alone, with more each
    failed check's measures and reason (the others meet labels)."""
    failed = [i for i, done in enumerate(met) if not done]
    if len(checks) == 1 or not any(strays):     # (nothing retrieved: one reason for all)
        kind = checks[failed[0]][0]
        return _no_label_reason(qrels, strays[failed[0]], extra, by_document=kind == "doc")
    return "; ".join("%s: %s" % (", ".join(checks[i][1]), _no_label_reason(
        qrels, strays[i], extra, by_document=checks[i][0] == "doc")) for i in failed)


def _no_label_reason(qrels, strays, extra, by_document=False):
    """Why not one id the run retrieved carries a label, as one sentence: the
    run retrieved nothing, or its ids and the qrels' differ in a telling way
    (looked for over the kept retrieved ids and every label).

    >>> print(_no_label_reason({"q1": {"doc1": 2, "doc7": 1}}, [("q1", "doc7#2")], []))
    not one retrieved id carries a label in the qrels (e.g. run 'doc7#2', qrels 'doc7'): the run names chunks and the qrels whole documents; score documents (--unit doc) with --doc-sep or --chunks, or label the chunk ids
    """
    if not strays:
        if extra:
            return ("no query of the run is in the qrels (run %s; qrels %s): the files do not "
                    "belong together" % (_preview(extra, 3), _preview(sorted(qrels), 3)))
        return "the run retrieved no id for any query in the qrels: every number would be 0"
    graded = {doc for labels in qrels.values() for doc, grade in labels.items() if grade >= 0}
    retrieved = {doc for _, doc in strays}
    cause, pair = _no_label_cause(qrels, strays, graded, retrieved)
    if pair is None:
        qid, doc = strays[0]
        own = sorted((-g, d) for d, g in qrels.get(qid, {}).items() if g >= 0)
        pair = (doc, own[0][1] if own else min(graded, default=""))
    if by_document:     # the strays are the documents of the retrieved chunks
        cause = _BY_DOCUMENT_CAUSES.get(cause, cause)
        return ("not one retrieved chunk's document carries a label in the qrels (e.g. run "
                "document %r, qrels %r): %s" % (pair[0], pair[1], cause))
    return ("not one retrieved id carries a label in the qrels (e.g. run %r, qrels %r): %s"
            % (pair[0], pair[1], cause))


# The causes of _no_label_cause, said of documents (measures that count them).
_BY_DOCUMENT_CAUSES = {
    "the run names chunks and the qrels whole documents; score documents (--unit doc) with "
    "--doc-sep or --chunks, or label the chunk ids":
        "the documents --doc-sep or the chunk map give still hold a chunk part: they are not "
        "cut where the qrels' ids end (check the separator, or the map's doc field)",
    "the qrels name chunks and the run whole documents":
        "the qrels name chunk ids, and these measures count documents: label documents or "
        "spans, or score chunk ids (unit=id)",
}


def _no_label_cause(qrels, strays, graded, retrieved):
    """(cause, (run id, qrels id) that shows it, or None)."""
    if not graded:
        return "the qrels hold no id with a grade >= 0", None
    for qid, doc in strays:
        if qrels.get(qid, {}).get(doc, 0) < 0:
            return ("the run's ids carry only negative grades (judged-unknown, as trec_eval "
                    "reads -1)", (doc, doc))
    numbers = {}
    for label in graded:
        numbers.setdefault(_as_number(label), label)
    for doc in sorted(retrieved):
        value = _as_number(doc)
        if value is not None and value in numbers:
            return "numbers are written differently", (doc, numbers[value])
    for doc in sorted(retrieved):
        for prefix in _id_prefixes(doc):
            if prefix in graded:
                return ("the run names chunks and the qrels whole documents; score documents "
                        "(--unit doc) with --doc-sep or --chunks, or label the chunk ids",
                        (doc, prefix))
    for label in sorted(graded):
        for prefix in _id_prefixes(label):
            if prefix in retrieved:
                return "the qrels name chunks and the run whole documents", (prefix, label)
    if any(len(doc) > 80 or any(ch.isspace() for ch in doc.strip()) for doc in retrieved):
        return "the run holds text, not ids", None
    return "the files name ids differently, or do not belong together", None


def _id_prefixes(doc):
    """The parts of an id before each separator: 'a/b#3' -> ['a', 'a/b']."""
    return [doc[:i] for i, ch in enumerate(doc) if i and not ch.isalnum()]


def _as_number(text):
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
