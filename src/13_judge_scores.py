"""Judge scores: a judge's per-query scores as a Report, and judge drift.

A score file's per-query values become a Report's (evaluate_scores): each
measure score(field=F) over the queries that have a value for F (its own
population and n, as a character measure's), so the gate, comparisons,
slices, the hold-out, baselines and every renderer read them as they read
retrieval measures.  Queries with no value for a field are listed per
measure in ``Report.scores["unscored"]`` (only with allow_missing).  With
repeated judge runs, ``Report.scores["noise"]`` gives the judge's noise:
  within_sd    sqrt(mean of s_q^2) over the queries with 2 or more runs,
               s_q the sample standard deviation (ddof 1) of query q's runs;
  noise_floor  SE = sqrt(2 * sum_q s_q^2 / r_q) / n: the standard error of a
               difference of two means of n queries (r_q runs each) from
               judge noise alone; the gate notes a tolerance below 2 * SE.
With a pass threshold (--pass-threshold F=X, in F's own units), the
queries whose runs fall on both sides of X ("borderline") are listed with
the share of their runs on each side.  Judge drift (field_drift,
judge_drift): one judge's stored scores against its scores now.

Uses: 01_head to 12_statistics.  Used by: the command line.
"""

def evaluate_scores(scores, measures=None, *, queries=None, by=(), holdout=None, as_of=None,
                    reveal_holdout=False, meta=None, allow_missing=False, pass_threshold=None):
    """A :class:`Report` of judge scores: ``scores`` is one :class:`Scores`
    (see :func:`load_scores`) or a list of them (each field in one file).

    ``measures`` names the fields: ``score(field=faithfulness)`` or the field
    name alone (default: every field).  A query with no value for a field,
    in its file or in another file or ``queries`` (the test set), is an error
    unless ``allow_missing``: then it is listed as unscored for that field.
    ``pass_threshold`` maps a field to a threshold in its own units: the
    queries whose runs fall on both sides are listed (``scores["borderline"]``).
    ``queries``, ``by``, ``holdout``, ``as_of``, ``reveal_holdout`` and
    ``meta`` are as for :func:`evaluate`.

    >>> s = load_scores(io.StringIO('{"query_id": "q1", "f": [0.8, 0.9, 0.85]}\\n'
    ...                             '{"query_id": "q2", "f": 0.5}\\n'))
    >>> r = evaluate_scores(s)
    >>> r.measures, r.mean, r.per_query["q1"]
    (('score(field=f)',), {'score(field=f)': 0.675}, {'score(field=f)': 0.85})
    """
    scores = [scores] if isinstance(scores, Scores) else scores
    if not isinstance(scores, (list, tuple)) or not scores or not all(
            isinstance(s, Scores) for s in scores):
        raise EvalError("scores must be a Scores (see load_scores) or a list of them")
    meta = _checked_meta(meta)
    testset = _test_set(queries, by, holdout, as_of, reveal_holdout, "scored")
    return _with_meta(_evaluate_scores(scores, measures, testset, allow_missing,
                                       pass_threshold), meta)


def _evaluate_scores(scores, measures, testset, allow_missing, thresholds=None, queries=None,
                     skip_extra=False):
    """evaluate_scores() with the _TestSet made (None: no query metadata).
    ``queries`` are the qrels' queries when both tiers are in one report:
    each needs a score too, and they (with the query metadata) are the test
    set, so a score line of another query is an error naming it, as a run's
    is, unless ``skip_extra`` (--skip-extra-queries): then it is left out,
    with a warning.  Without qrels the score files are part of the test set."""
    files = _files_by_field(scores)
    measures = _score_measures(measures, files)
    report = _scores_report(files, measures, testset, allow_missing,
                            _checked_thresholds(thresholds, measures, files), queries,
                            skip_extra)
    inputs = {("scores" if i == 0 else "scores.%d" % (i + 1)): {
        key: value for key, value in s.info.items() if key != "fields"}     # as a run's
        for i, s in enumerate(scores)}
    if testset is not None and testset.info is not None:
        inputs["queries"] = testset.info
    return report._replace(inputs=inputs)


# --- judge drift: one judge's stored scores against its scores now ---------------
#
# A frozen sample holds items (question, context and answer, fixed by their
# input_sha256) and the scores a judge gave them; scored again, the two sets
# of scores are paired by item.  Numeric fields get the paired statistics of
# the gate (mean difference, bootstrap interval, sign-flip p: McNemar for 0/1
# values) and the mean absolute difference, which --max-drift reads; for 0/1
# values it is 1 - agreement.  Categorical fields (booleans, integers on an
# integer range) also get raw agreement and unweighted Cohen's kappa
# (reference: sklearn.metrics.cohen_kappa_score; tests/data/stats/drift.json).


def cohen_kappa(stored, current):
    """Unweighted Cohen's kappa of two labellings of the same items; returns
    (agreement, kappa, labels, counts).

    ``counts[i][j]`` is the number of items labelled ``labels[i]`` then
    (stored) and ``labels[j]`` now (current), labels sorted.  With n items,
    d of them on the diagonal and r_k, c_k the row and column totals:
    agreement = d / n, chance agreement p_e = sum r_k c_k / n**2, and kappa =
    (agreement - p_e) / (1 - p_e) = (n d - sum r_k c_k) / (n**2 - sum r_k c_k),
    taken from integers in one division.  When both labellings use one and
    the same label throughout, p_e = 1 and kappa is undefined: None (sklearn
    gives NaN).  No items gives (None, None, [], []).

    >>> a, k, labels, counts = cohen_kappa([1, 1, 1, 0, 0, 1, 0, 1, 1, 1],
    ...                                    [1, 1, 0, 0, 0, 1, 1, 1, 1, 1])
    >>> a, k == 11 / 21, labels, counts    # (10 * 8 - 58) / (100 - 58) = 22 / 42
    (0.8, True, [0, 1], [[2, 1], [1, 6]])
    >>> cohen_kappa([True, True], [True, True])[:2]
    (1.0, None)
    """
    stored, current = list(stored), list(current)
    if len(stored) != len(current):
        raise EvalError("cohen_kappa needs two labellings of the same items, got %d and %d"
                        % (len(stored), len(current)))
    n = len(stored)
    if n == 0:
        return None, None, [], []
    labels = sorted(set(stored) | set(current))
    index = {label: i for i, label in enumerate(labels)}
    counts = [[0] * len(labels) for _ in labels]
    for a, b in zip(stored, current):
        counts[index[a]][index[b]] += 1
    diagonal = sum(counts[i][i] for i in range(len(labels)))
    chance = sum(sum(counts[i]) * sum(row[i] for row in counts) for i in range(len(labels)))
    kappa = None if chance == n * n else (n * diagonal - chance) / (n * n - chance)
    return diagonal / n, kappa, labels, counts


class FieldDrift(NamedTuple):
    """One score field of a drift check (see :func:`field_drift`); differences
    are current minus stored, on the field's [0, 1] scale."""
    field: str
    n: int
    stored_mean: float
    current_mean: float
    mean_difference: float
    ci95: Tuple[float, float]
    p: float
    mean_absolute_difference: float
    largest_change: Optional[Tuple[str, float, float]]
    agreement: Optional[float] = None
    kappa: Optional[float] = None
    labels: Optional[Tuple] = None
    confusion: Optional[Tuple[Tuple[int, ...], ...]] = None

    __bool__ = _no_truth_value

    def to_dict(self):
        out = self._asdict()
        out["ci95"] = list(self.ci95)
        out["largest_change"] = (None if self.largest_change is None else dict(zip(
            ("item", "stored", "current"), self.largest_change)))
        out["categorical"] = self.labels is not None
        out["labels"] = None if self.labels is None else list(self.labels)
        out["confusion"] = None if self.confusion is None else [list(r) for r in self.confusion]
        return out


def field_drift(field, stored, current, *, labels=None, resamples=10000, seed=0):
    """Drift of one score field: ``stored`` and ``current`` map each item of
    the frozen sample to its value then and now ([0, 1], the same items).

    Over the n items: both means; the mean difference (current - stored) with
    its 95% paired percentile bootstrap interval (:func:`bootstrap_ci`) and
    two-sided sign-flip p (:func:`randomization_p`: the exact McNemar test
    for 0/1 values), as the gate computes them, from one generator seeded by
    (seed, field); the mean absolute difference; the largest change (item,
    stored, current: the largest |difference|, first item id on ties; None
    when nothing changed).  ``labels`` (a function of a value, e.g. the
    field's original integer) makes the field categorical: agreement, kappa
    and the confusion table of :func:`cohen_kappa` on the labels.

    >>> d = field_drift("f", {"a": 0.5, "b": 1.0, "c": 0.25, "e": 1.0},
    ...                 {"a": 0.75, "b": 1.0, "c": 0.0, "e": 0.75})
    >>> d.mean_difference, d.mean_absolute_difference, d.largest_change, d.p
    (-0.0625, 0.1875, ('a', 0.5, 0.75), 1.0)
    """
    items = sorted(stored)
    if sorted(current) != items:
        raise EvalError("field_drift: %s: the stored and current values must be of the same "
                        "items" % field)
    if not items:
        raise EvalError("field_drift: %s: no items" % field)
    then = _finite_floats([stored[i] for i in items], "stored %s scores" % field)
    now = _finite_floats([current[i] for i in items], "current %s scores" % field)
    diffs = [b - a for a, b in zip(then, now)]
    rng = random.Random("%s|drift|%s" % (seed, field))
    biggest = max(range(len(items)), key=lambda i: abs(diffs[i]))    # the first of the largest
    out = FieldDrift(
        field=field, n=len(items), stored_mean=_mean(then), current_mean=_mean(now),
        mean_difference=_mean(diffs), ci95=bootstrap_ci(diffs, resamples=resamples, rng=rng),
        p=randomization_p(diffs, resamples=resamples, rng=rng),
        mean_absolute_difference=math.fsum(map(abs, diffs)) / len(diffs),
        largest_change=((items[biggest], then[biggest], now[biggest])
                        if diffs[biggest] != 0.0 else None))
    if labels is None:
        return out
    agreement, kappa, names, counts = cohen_kappa([labels(v) for v in then],
                                                  [labels(v) for v in now])
    return out._replace(agreement=agreement, kappa=kappa, labels=tuple(names),
                        confusion=tuple(map(tuple, counts)))


def judge_drift(frozen, current, *, max_drift=DEFAULT_MAX_DRIFT, resamples=10000, seed=0,
                held_out=()):
    """Did the judge move?  ``frozen`` is the :class:`Scores` of a frozen
    sample (scores stored then), ``current`` a list of :class:`Scores` with
    the same items scored now; returns the ``"drift"`` block of a report.

    Every item of the frozen sample must carry ``input_sha256`` (the hash of
    the question, context and answer judged), be in the current scores of
    each field with a value, and carry the same hash there: otherwise the
    answers were not frozen and this is no drift check (EvalError naming the
    item).  Each field of the frozen sample gets :func:`field_drift` over its
    items, categorical when its values are booleans or integers on an integer
    range with one judge run each (labels on the field's own scale; repeated
    runs make fractions, compared as numbers).  ``passed`` is False when the
    mean absolute difference of a field exceeds ``max_drift``.  ``held_out``
    are the ids of a hold-out (see evaluate): those items are checked as
    inputs but left out of every statistic, never named, only counted in a
    note, as the hold-out is left out of every other mean.

    >>> then = load_scores(io.StringIO('{"query_id": "f1", "input_sha256": "ab", "ok": true}\\n'
    ...                                '{"query_id": "f2", "input_sha256": "cd", "ok": true}\\n'))
    >>> now = load_scores(io.StringIO('{"query_id": "f1", "input_sha256": "ab", "ok": true}\\n'
    ...                               '{"query_id": "f2", "input_sha256": "cd", "ok": false}\\n'))
    >>> d = judge_drift(then, [now])
    >>> d["passed"], d["fields"]["ok"]["mean_absolute_difference"], d["fields"]["ok"]["confusion"]
    (False, 0.5, [[0, 0], [1, 1]])
    >>> judge_drift(then, [load_scores(io.StringIO(
    ...     '{"query_id": "f1", "input_sha256": "ab", "ok": true}\\n'
    ...     '{"query_id": "f2", "input_sha256": "ef", "ok": true}\\n'))])
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: <stream>: answer changed for f2: not a drift check (input_sha256 cd... in the frozen sample, ef... in <stream>)
    """
    name = frozen.info["path"]
    if not frozen.fields:
        raise EvalError("%s: the frozen sample holds none of the score fields checked"
                        % name)
    for qid in frozen.queries:
        if not frozen.input_sha256.get(qid):
            raise EvalError("%s: item %r has no input_sha256 as text (the sha256 of the "
                            "question, context and answer judged): a drift check needs it"
                            % (name, qid))
    fields, notes = {}, []
    held_out = frozenset(held_out)
    items = [q for q in frozen.queries if q not in held_out]
    if not items:
        raise EvalError("%s: every item of the frozen sample is in the hold-out, which no "
                        "output names: nothing to check for drift" % name)
    if len(items) < len(frozen.queries):
        notes.append("%s of the hold-out left out of the drift check (never shown)"
                     % _plural(len(frozen.queries) - len(items), "item", "items"))
    for field in frozen.fields:
        now = _drift_current(frozen, current, field)
        stored = {q: v for q, v in frozen.values(field).items() if q not in held_out}
        values = now.values(field)
        labels = _drift_labels(field, frozen, now, notes)
        fields[field] = field_drift(field, stored, {q: values[q] for q in stored},
                                    labels=labels, resamples=resamples,
                                    seed=seed).to_dict()
        fields[field]["drifted"] = (fields[field]["mean_absolute_difference"]
                                    > max_drift + FLOAT_SLACK)
        del fields[field]["field"]
    return {"passed": not any(f["drifted"] for f in fields.values()), "max_drift": max_drift,
            "frozen": {"path": name, "sha256": frozen.info.get("sha256")},
            "items": len(items), "fields": fields, "notes": notes}


def _drift_current(frozen, current, field):
    """The current Scores of ``field``, checked against the frozen sample:
    each frozen item there, with a value and the same input_sha256."""
    now = next((s for s in current if field in s.fields), None)
    if now is None:
        raise EvalError("%s: the frozen sample's field %r is in no current --scores file"
                        % (frozen.info["path"], field))
    where = now.info["path"]
    for qid in frozen.runs[field]:
        if qid not in now.queries:
            raise EvalError("%s: item %r of the frozen sample is not in the current scores "
                            "(%s)" % (frozen.info["path"], qid, where))
        if qid not in now.runs[field]:
            raise EvalError("%s: item %r has no %s score now: the drift check needs one"
                            % (where, qid, field))
        then_hash, now_hash = frozen.input_sha256[qid], now.input_sha256.get(qid)
        if not now_hash:
            raise EvalError("%s: item %r has no input_sha256 as text: the drift check cannot "
                            "tell that it judged the frozen answer" % (where, qid))
        if now_hash != then_hash:
            raise EvalError("%s: answer changed for %s: not a drift check (input_sha256 %s... "
                            "in the frozen sample, %s... in %s)" % (
                                frozen.info["path"], qid, then_hash[:12], now_hash[:12], where))
    return now


def _drift_labels(field, frozen, now, notes):
    """The label of a value of a categorical field on its own scale (a
    boolean, or an integer of its integer range), else None."""
    kinds = {frozen.kinds[field], now.kinds[field]}
    lo, hi = frozen.ranges[field]
    if not (kinds <= {"boolean"} or (kinds <= {"boolean", "integer"}
                                     and lo.is_integer() and hi.is_integer())):
        return None
    if any(len(runs) > 1 for scores in (frozen, now)
           for runs in scores.runs[field].values()):
        notes.append("%s: repeated judge runs make each item's value a fraction: compared as "
                     "numbers (no agreement or kappa; the p is no McNemar test)" % field)
        return None
    if kinds == {"boolean"}:
        return lambda v: v == 1.0
    return lambda v: int(round(lo + v * (hi - lo)))


def _with_scores(report, scored):
    """Both tiers in one report: the retrieval ``report`` and the judge scores'
    (``scored``), measures side by side, each over its own population (n);
    slices and the hold-out made again over both."""
    names = report.measures + scored.measures
    per_query = {q: dict(report.per_query.get(q, {}), **scored.per_query.get(q, {}))
                 for q in sorted(set(report.per_query) | set(scored.per_query))}
    counts = dict(report.n or dict.fromkeys(report.measures, len(report.per_query)),
                  **(scored.n or dict.fromkeys(scored.measures, len(scored.per_query))))
    same = all(n == len(per_query) for n in counts.values())
    merged = report._replace(
        measures=names, per_query=per_query, mean=dict(report.mean, **scored.mean),
        n=None if same else counts, scores=scored.scores, drift=scored.drift,
        unscored=tuple(sorted((set(report.unscored) | set(scored.unscored)) - set(per_query))),
        skipped=tuple(sorted(set(report.skipped) | set(scored.skipped))),
        inputs=dict(report.inputs or {}, **(scored.inputs or {})),
        warnings=report.warnings + tuple(w for w in scored.warnings if w not in report.warnings))
    if report.membership is None:
        return merged
    membership = dict(sorted(dict(report.membership, **scored.membership).items()))
    merged = merged._replace(membership=membership, slices=_slice_stats(merged, membership))
    ours, theirs = report.holdout, scored.holdout
    if ours is None:
        return merged
    held_rows = {q: dict((ours.per_query or {}).get(q, {}), **(theirs.per_query or {}).get(q, {}))
                 for q in sorted(set(ours.per_query or ()) | set(theirs.per_query or ()))}
    unscored = tuple(q for q in sorted(set(ours.ids["unscored"]) | set(theirs.ids["unscored"]))
                     if q not in held_rows)
    held = _held_out(ours.slice, (held_rows, unscored, ours.ids["missing"]), names,
                     ours.revealed, ours.ids["all"])
    # A set-level measure's hold-out mean is of cells the report no longer holds
    # (the test set set them apart): kept as the retrieval report made it.
    kept = {m: v for m, v in ours.mean.items() if m not in held.mean}
    if not kept:
        return merged._replace(holdout=held)
    counts = dict(held.n or dict.fromkeys(held.mean, held.queries),
                  **{m: (ours.n or {}).get(m, ours.queries) for m in kept})
    return merged._replace(holdout=held._replace(
        mean={m: kept.get(m, held.mean.get(m)) for m in names if m in kept or m in held.mean},
        n=None if all(v == held.queries for v in counts.values()) else counts))


def _files_by_field(scores):
    """{field: Scores}: each field read from one file."""
    files = {}
    for s in scores:
        for field in s.fields:
            if field in files:
                raise EvalError("the score field %r is in two files, %s and %s: give it once"
                                % (field, files[field].info["path"], s.info["path"]))
            files[field] = s
    return files


def _score_measures(measures, files):
    """The score measures asked for: names (a list, or one comma-separated
    string), each score(field=F) or F alone; default every field."""
    if measures is None:
        return tuple(parse_measure("score(field=%s)" % f) for f in files)
    if isinstance(measures, str):
        measures = _split_top_level(measures)
    out = []
    for item in measures:
        m = item if isinstance(item, Measure) else None
        if m is None and isinstance(item, str) and _FIELD_NAME.match(item.strip()):
            m = parse_measure("score(field=%s)" % item.strip())
        m = m or parse_measure(item)
        if m.name != "score":
            raise EvalError("%s is a retrieval measure: it needs QRELS and a RUN, not a score "
                            "file" % (m,))
        field = dict(m.params)["field"]
        if field not in files:
            raise EvalError("%s: no score file has the field %r (fields: %s)"
                            % (m, field, ", ".join(files) or "none"))
        if m not in out:
            out.append(m)
    if not out:
        raise EvalError("no measures requested")
    return tuple(out)


def _checked_thresholds(thresholds, measures, files):
    """{measure name: (threshold mapped onto [0, 1], as given)} of
    ``pass_threshold`` ({field: X}, X in the field's own units)."""
    out = {}
    named = {dict(m.params)["field"]: str(m) for m in measures}
    for field, value in sorted((thresholds or {}).items()):
        if field not in named:
            raise EvalError("pass threshold: %r is not a measured score field (fields: %s)"
                            % (field, ", ".join(named)))
        lo, hi = files[field].ranges[field]
        x = _as_score(value, "the pass threshold of %s" % field)
        if not min(lo, hi) <= x <= max(lo, hi):
            raise EvalError("the pass threshold of %s, %s, is outside its range [%s, %s]"
                            % (field, _number_text(x), _number_text(lo), _number_text(hi)))
        out[named[field]] = ((x - lo) / (hi - lo) + 0.0, x)
    return out


def _scores_report(files, measures, testset, allow_missing, thresholds, queries=None,
                   skip_extra=False):
    """The Report of the score measures (see evaluate_scores)."""
    names = tuple(str(m) for m in measures)
    fields = {str(m): dict(m.params)["field"] for m in measures}
    members = dict.fromkeys(queries or ())  # the test set: the score files, metadata, qrels
    used = _files_of(files, fields.values())
    extra = _extra_score_queries(used, queries, testset, skip_extra)
    skipped = {q for _, ids in extra for q in ids}
    for s in used:
        members.update(dict.fromkeys(q for q in s.queries if q not in skipped))
    if testset is not None:
        members.update(dict.fromkeys(q for q in testset.queries))
        members = {q: None for q in members if q not in testset.expired}
    per_query = {q: {} for q in sorted(members)}
    runs, unscored = {}, {}
    for name, field in fields.items():
        s = files[field]
        runs[name] = s.runs[field]
        for qid, query_runs in s.runs[field].items():
            if qid in per_query:
                per_query[qid][name] = _run_mean(query_runs)
        absent = [q for q in per_query if q not in s.runs[field]]
        _check_absent(absent, s, field, allow_missing)
        unscored[name] = absent
    hidden = testset.hidden if testset is not None else frozenset()
    nothing = {q: 0 for q, row in per_query.items() if not row}    # no score at all: unscored
    per_query = {q: row for q, row in per_query.items() if row}
    held = _set_apart(hidden, per_query, nothing, ())
    for name in names:
        if not any(name in row for row in per_query.values()):
            raise EvalError("%s: no query has a score: nothing to average" % name)
    mean, counts = _population_means(per_query, names)
    block = {"inputs": [s.info for s in used],
             "ranges": {f: list(files[f].ranges[f]) for f in fields.values()},
             "unscored": {n: [q for q in ids if q not in hidden] for n, ids in unscored.items()},
             "noise": _judge_noise({n: {q: r for q, r in runs[n].items() if q in per_query
                                        and n in per_query[q]} for n in names}, counts,
                                   len(per_query)),
             "borderline": {n: _borderline({q: r for q, r in runs[n].items()
                                            if q in per_query}, *thresholds[n])
                            for n in names if n in thresholds}}
    warnings = ["%s: skipped %s not in the qrels: %s"
                % (s.info["path"], _plural(len(ids), "score-file query", "score-file queries"),
                   _preview(ids)) for s, ids in extra if ids]
    warnings += ["%s: %s without a score, listed as unscored: %s"
                 % (n, _plural(len(ids), "query", "queries"), _preview(ids))
                 for n, ids in block["unscored"].items() if ids]
    report = Report(names, mean, per_query, tuple(sorted(nothing)), (), tuple(sorted(skipped)),
                    {}, {}, tuple(warnings), n=counts, scores=block)
    return report if testset is None else testset.report(report, held)


def _extra_score_queries(used, queries, testset, skip_extra):
    """The queries of the score files ``used`` that the test set (the qrels'
    ``queries`` and the query metadata) does not hold, when qrels are given
    (``queries`` not None): an error naming them, as for a run, unless
    ``skip_extra``; then [(Scores, sorted ids)], the ids to leave out."""
    if queries is None:
        return []
    known = set(queries) | set(testset.queries if testset is not None else ())
    by_file = [(s, sorted(q for q in s.queries if q not in known)) for s in used]
    for s, extra in by_file:
        if extra and not skip_extra:
            raise EvalError("%s: %s not in the qrels: %s (check the files match, or skip them "
                            "with --skip-extra-queries)"
                            % (s.info["path"], _plural(len(extra), "query is", "queries are"),
                               _preview(extra)))
    return by_file


def _files_of(files, fields):
    """The distinct Scores holding these fields, in order."""
    out = []
    for field in fields:
        if not any(files[field] is s for s in out):
            out.append(files[field])
    return out


def _check_absent(absent, scores, field, allow_missing):
    """Queries of the report with no value for a field: listed (allowed), or
    an error naming them."""
    if absent and not allow_missing:
        missing = [q for q in absent if q in scores.unscored[field]]
        if missing:     # load_scores was allowed to keep them, the report is not
            raise EvalError("%s: %s no %s score: %s (--allow-missing-scores lists them as "
                            "unscored)" % (scores.info["path"], _plural(
                                len(missing), "query has", "queries have"), field,
                                           _preview(missing)))
        raise EvalError("%s: %s of the test set (the other score files, the qrels, the query "
                        "metadata) %s no line here, "
                        "so no %s score: %s (--allow-missing-scores lists them as unscored)"
                        % (scores.info["path"], _plural(len(absent), "query", "queries"),
                           "has" if len(absent) == 1 else "have", field, _preview(absent)))


def _judge_noise(runs, counts, scored):
    """{measure: {"queries", "runs", "within_sd", "noise_floor"}} of the
    measures with repeated runs (see the section's comment); ``runs`` maps
    each measure to {qid: runs} of the queries its mean is over, ``counts``
    its n when populations differ (else every one of ``scored`` queries).

    >>> noise = _judge_noise({"m": {"a": (0.8, 0.9, 0.85), "b": (0.5,)}}, None, 2)["m"]
    >>> sorted((key, round(v, 6) if isinstance(v, float) else v) for key, v in noise.items())
    [('noise_floor', 0.020412), ('queries', 1), ('runs', [1, 3]), ('within_sd', 0.05)]
    """
    out = {}
    for name, by_query in runs.items():
        repeated = {q: r for q, r in by_query.items() if len(r) > 1}
        if not repeated:
            continue
        variances = {q: _statistics().variance(r) for q, r in repeated.items()}
        n = counts[name] if counts is not None else scored
        sizes = [len(r) for r in by_query.values()]
        out[name] = {
            "queries": len(repeated), "runs": [min(sizes), max(sizes)],
            "within_sd": math.sqrt(math.fsum(variances.values()) / len(variances)),
            "noise_floor": math.sqrt(2 * math.fsum(v / len(repeated[q])
                                                   for q, v in variances.items())) / n}
    return out


def _borderline(runs, threshold, given):
    """{"threshold": X as given, "queries": {qid: {"runs", "pass", "fail"}}}
    of the queries whose runs fall on both sides of the threshold (a run at
    the threshold passes).

    >>> _borderline({"q1": (0.62, 0.58, 0.61), "q2": (0.7, 0.9)}, 0.6, 0.6)
    {'threshold': 0.6, 'queries': {'q1': {'fail': 1, 'pass': 2, 'runs': 3}}}
    """
    queries = {}
    for qid, query_runs in sorted(runs.items()):
        passed = sum(1 for r in query_runs if r >= threshold)
        if 0 < passed < len(query_runs):
            queries[qid] = {"fail": len(query_runs) - passed, "pass": passed,
                            "runs": len(query_runs)}
    return {"threshold": given, "queries": queries}
