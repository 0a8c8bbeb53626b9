"""Gate: a report against its baseline, the verdict and its notes.

gate() compares each baseline measure with the report over every scored
query, each slice and the hold-out (_gated_subsets), by the tolerance or,
with mode="significant", by a paired randomization test with Holm's
adjustment; it names the queries that fell, what changed in the metadata
and the labels, the queries that moved between slices, and why a measure is
missing.  The verdict is a GateResult.

Uses: 01_head, 02_records, 03_measures, 04_measure_names, 08_provenance,
12_statistics, 14_baselines.  Used by: reports, the report reader, HTML,
the command line.
"""


def parse_tolerance(text):
    """``(value, relative)`` from ``0.02`` (absolute) or ``"5%"`` (relative).

    Measures lie in [0, 1], so a drop of 1 or 100% could never be exceeded: such
    a tolerance would pass every gate and is an error.

    >>> parse_tolerance("0.02"), parse_tolerance("5%")
    ((0.02, False), (0.05, True))
    """
    raw = str(text).strip()
    relative = raw.endswith("%")
    try:
        value = _number(raw[:-1] if relative else raw, float)
    except ValueError:
        value = math.nan
    if relative:
        value /= 100.0
    if not 0.0 <= value < 1.0:
        raise EvalError("max drop must be a number in [0, 1) or a percentage in [0%%, 100%%) "
                        "(e.g. 0.02 or 5%%), got %r" % (text,))
    return value, relative


GATE_MODES = ("tolerance", "significant")


def gate(report, baseline, *, max_drop=DEFAULT_MAX_DROP, mode="tolerance",
         alpha=DEFAULT_ALPHA, resamples=DEFAULT_RESAMPLES, seed=DEFAULT_SEED, same=(),
         slice_max_drop=None):
    """Compare ``report`` with ``baseline``; return a :class:`GateResult`.

    A regression is a baseline measure missing from the report, or one whose
    mean fell by more than ``max_drop`` (absolute, or relative to the baseline
    when given as ``"5%"``).  Improvements and drops within the tolerance are
    listed too.  The gate passes only when there is no regression.

    When the baseline holds per-query values (``--save-baseline`` writes them),
    queries added to or removed from the test set are listed, and so is every
    query that fell by more than the tolerance, largest drop first, whatever
    the mean did.  ``mode="significant"`` then compares the means over the
    queries both share and fails only on a drop beyond the tolerance whose
    paired randomization p (Holm-adjusted over every gated pair) is at most
    ``alpha``; with a means-only baseline it falls back to the tolerance rule.

    Provenance: a note names every meta key that changed since the baseline
    (``meta_changes``); ``same`` lists keys that must not (an EvalError when
    one differs or is absent on one side).  When both sides hold label
    hashes, ``labels_changed`` lists the queries whose labels changed, and the
    per-query checks above leave them out (the means keep them).

    Slices are gated the same way: a slice is a named subset of the queries,
    the overall the subset of all of them (see _Subset).  A baseline saved
    with query metadata holds the means of every slice; each is checked
    (``source=real: recall@5``), a slice that disappeared is missing, and
    ``slice_max_drop`` gives a slice its own tolerance (``{"risk=high": 0}``).
    The hold-out is gated on its means, and its queries are never named.
    Queries that changed slices since the baseline are listed (``moved``).

    >>> r = evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, measures="mrr")
    >>> result = gate(r, Baseline({"mrr@2": 0.6, "recall@2": 1.0}))
    >>> result.passed, [(c.measure, c.status) for c in result.regressions]
    (False, [('mrr@2', 'regressed'), ('recall@2', 'missing')])

    A report holding a failed judge drift check (``drift``: the CLI's
    ``--drift``, or :func:`judge_drift` set on it) has its judge score
    regressions marked ``suspect="judge drift"``, with a note; they still
    fail the gate.

    >>> then = load_scores(io.StringIO('{"query_id": "q", "input_sha256": "ab", "ok": 0.9}'))
    >>> now = load_scores(io.StringIO('{"query_id": "q", "input_sha256": "ab", "ok": 0.5}'))
    >>> r = evaluate_scores(now)._replace(drift=judge_drift(then, [now]))
    >>> result = gate(r, {"score(field=ok)": 0.9})
    >>> result.passed, [(c.status, c.suspect) for c in result.changes]
    (False, [('regressed', 'judge drift')])
    """
    resamples = _checked_options(report, alpha, resamples, seed)
    baseline = given = _checked_baseline(baseline)
    means_only = report.scored_count is not None and baseline.per_query is not None
    if means_only:    # nothing to pair query by query: the tolerance rule on the means
        baseline = baseline._replace(per_query=None, holdout=baseline.holdout and
                                     baseline.holdout._replace(per_query=None))
        report = report._replace(unjudged=None)
    same_notes = _check_same(report.meta, baseline, _same_keys(same))
    if baseline.rel != report.rel:
        raise EvalError("%s was made with rel=%d and this report with rel=%d: the scored "
                        "queries differ, so the numbers are not comparable"
                        % (baseline.source, baseline.rel, report.rel))
    _check_same_min_score(report, baseline)
    _check_same_ranges(report, baseline)
    same_notes += _check_same_judge(report, baseline)
    if mode not in GATE_MODES:
        raise EvalError("gate mode must be one of %s, got %r" % (", ".join(GATE_MODES), mode))
    _check_same_holdout(report, baseline)
    tolerance = parse_tolerance(max_drop)
    tolerances = _slice_tolerances(slice_max_drop, baseline)
    meta_changes = _meta_changes(report, baseline)
    relabelled = _relabelled(report, baseline)
    subsets = _gated_subsets(report, baseline, tolerance, tolerances, relabelled or ())
    notes = (_meta_notes(report, meta_changes, baseline) + same_notes
             + _input_notes(report, baseline) + _relabelled_notes(report, baseline, relabelled))
    drops, pvalues, paired = None, {}, {}
    if means_only:
        notes.append("the report holds means only (read from a JSON report written without "
                     "--per-query): per-query checks%s are unavailable"
                     % (" and the significant gate" if mode == "significant" else ""))
    elif baseline.per_query is None:
        notes.append("the baseline holds means only: per-query checks%s are unavailable; "
                     "write one with --save-baseline to get them"
                     % (" and the significant gate" if mode == "significant" else ""))
    else:
        # Per-query drops of every query shown one by one: slices are parts of the overall.
        drops = _query_drops([s for s in subsets if s.listed and s.then is not None
                              and (s.name is None or s.held)])
        if mode == "significant":
            paired, pvalues, untestable, family = _paired_means_and_p(subsets, resamples, seed,
                                                                      alpha)
            if untestable:
                names = [_change_name(*key) for key in untestable]
                notes.append("too few queries differ for a significance test at alpha=%g on %s "
                             "(an exact test needs at least %d); the tolerance rule applies there"
                             % (alpha, ", ".join(names[:_SHOWN_NAMES]) + (
                                 ", ... (%d more)" % (len(names) - _SHOWN_NAMES)
                                 if len(names) > _SHOWN_NAMES else ""),
                                _queries_for_significance(family, alpha)))
            notes.extend(_set_level_notes(baseline.mean))
    changes = tuple(change for subset in subsets
                    for change in _subset_changes(subset, paired, pvalues, alpha,
                                                  report.unjudged))
    notes += _slice_notes(report, baseline, subsets, mode) + _lost_score_notes(subsets)
    changes, unpaired = _unpaired_lost_scores(changes, report, given)
    notes += unpaired
    notes += _judge_noise_notes(report, baseline, subsets[0].allowed)
    notes += [n for n in [_unscored_note(report, baseline), _sample_size_note(
        [(s.name, s.rows, s.allowed) for s in subsets if s.listed])] if n]
    passed = not any(c.status in ("regressed", "missing") for c in changes)
    held = _held_ids(report)
    added = tuple(sorted(set(report.per_query) - set(
        report.per_query if baseline.per_query is None else baseline.per_query)))
    removed = tuple(sorted(set(baseline.per_query or {}) - set(report.per_query) - held))
    return _suspect_judge_drift(GateResult(
        passed, changes, _tolerance_text(tolerance), tuple(notes),
        mode if pvalues or mode == "tolerance" else "tolerance", added, removed, drops,
        meta_changes or (), relabelled, _moved(report, baseline),
        {name: _tolerance_text(t) for name, t in tolerances.items()}), report.drift)


_SHOWN_NAMES = 12     # measures a note names before it says how many more


class _Subset(NamedTuple):
    """A named subset of the test set as the gate checks it: every scored
    query not held out (name None), a slice, or the hold-out (held)."""
    name: Optional[str]
    before: Dict[str, float]                        # the baseline's means
    now: Dict[str, float]                           # the report's ({}: the slice is gone)
    rows: Dict[str, Dict[str, float]]              # the report's values of its scored queries
    then: Optional[Dict[str, Dict[str, float]]]    # the baseline's (None: means only)
    allowed: Dict[str, float]                       # the tolerated drop of each measure
    listed: bool = True                             # its queries may be named
    held: bool = False


def _gated_subsets(report, baseline, tolerance, tolerances, relabelled=()):
    """The overall, then every slice the baseline holds, then its hold-out;
    the baseline's per-query values of relabelled queries are left out (they
    are not comparable query by query)."""
    def allowed(name, before):
        value, relative = tolerances.get(name, tolerance)
        return {m: value * v if relative else value for m, v in before.items()}

    then_rows, relabelled = baseline.per_query, frozenset(relabelled)
    if then_rows is not None and relabelled:
        then_rows = {q: v for q, v in then_rows.items() if q not in relabelled}
    subsets = [_Subset(None, baseline.mean, report.mean, report.per_query, then_rows,
                       allowed(None, baseline.mean))]
    now_members, then_members = _members(report.membership), _members(baseline.membership)
    # A report read back from JSON keeps its slices' means, not their queries:
    # its slices are compared on the means, as against a means-only baseline.
    slice_rows = None if report.membership is None else then_rows
    for name, before in sorted((baseline.slices or {}).items()):
        rows = {q: report.per_query[q] for q in now_members.get(name, ())
                if q in report.per_query}
        then = None if slice_rows is None else {
            q: slice_rows[q] for q in then_members.get(name, ()) if q in slice_rows}
        now = (report.slices or {}).get(name, {}).get("mean", {})
        subsets.append(_Subset(name, before, now, rows, then, allowed(name, before)))
    if baseline.holdout is not None:
        theirs, ours = baseline.holdout, report.holdout
        rows = ours.per_query       # None: read back from JSON written without them
        subsets.append(_Subset(theirs.slice, theirs.mean, ours.mean, rows or {},
                               None if rows is None else theirs.per_query,
                               allowed(theirs.slice, theirs.mean), ours.revealed, True))
    return subsets


def _subset_changes(subset, paired, pvalues, alpha, unjudged=None):
    """The MeasureChange of each baseline measure of a subset; under the
    significant gate, over the queries both sides hold (``paired``).  With
    the report's ``unjudged`` bounds (never for the hold-out: its queries
    are set apart), judged@k and whether a regression is undecided."""
    for measure in sorted(subset.before):
        key = (subset.name, measure)
        before, now = subset.before[measure], subset.now.get(measure)
        if key in paired:
            now, before = paired[key]
        elif _lost_scores(subset, measure):
            now, before = _both_held_means(subset, measure)
        change = _change(measure, before, now, subset.allowed[measure], pvalues.get(key), alpha)
        if unjudged is not None and not subset.held and change.current is not None:
            queries = [q for q in sorted(subset.rows) if measure in subset.rows[q]
                       and (key not in paired or measure in subset.then.get(q, ()))]
            change = _with_unjudged(change, queries, unjudged, subset.allowed[measure])
        yield change._replace(slice=subset.name)


_NAMED_UNJUDGED = 5     # an undecided regression names its ids up to this many


def _lost_scores(subset, measure):
    """The queries whose judge score the baseline holds and the report does
    not (a null with --allow-missing-scores, a dropped line).  A judge score
    file is written per run, not a fixed test set: left out of the current
    mean, the worst query's lost score could pass the gate.

    >>> s = _Subset(None, {}, {}, {"q1": {"score(field=f)": 0.5}}, {"q1": {"score(field=f)": 0.9},
    ...             "q2": {"score(field=f)": 0.1}}, {})
    >>> _lost_scores(s, "score(field=f)"), _both_held_means(s, "score(field=f)")
    (['q2'], (0.5, 0.9))
    """
    if subset.then is None or not _field_of(measure):
        return []
    return [q for q in sorted(subset.then) if measure in subset.then[q]
            and measure not in subset.rows.get(q, ())]


def _both_held_means(subset, measure):
    """(current, baseline) means of a measure over the queries both sides hold
    (current None when there are none: the measure is missing)."""
    both = [q for q in sorted(subset.then) if measure in subset.then[q]
            and measure in subset.rows.get(q, ())]
    if not both:
        return None, subset.before[measure]
    return (_mean([subset.rows[q][measure] for q in both]),
            _mean([subset.then[q][measure] for q in both]))


def _unpaired_lost_scores(changes, report, baseline):
    """(changes, notes): a judge score whose report left queries unscored
    that the baseline scored (if it holds means only: any it does not record
    as unscored in ``scores["unscored"]``) cannot be compared
    on the queries both hold when either side holds means only (see
    _lost_scores): the rows of the subsets holding such a query are MISSING,
    never passed.  The hold-out names none of its queries: a field scored on
    fewer of them than in the baseline is lost there.  A report read back from
    JSON names no slice member, and without per-query values no scored query:
    its judge scores are MISSING where those would be needed (its slices; its
    overall row against per-query values).  ``baseline`` is the baseline as
    given (before a means-only report set its per-query aside)."""
    paired = baseline.per_query is not None and report.scored_count is None
    known = report.membership is not None     # a loaded report's slices: means only
    unscored = (report.scores or {}).get("unscored") or {}
    members = _members(report.membership)
    theirs, ours = baseline.holdout, report.holdout
    out, notes, unmembered, held = [], {}, {}, {}
    then_unscored = (baseline.scores or {}).get("unscored") or {}
    for c in changes:
        # Lost: scored in the baseline (its per-query values, else not among the
        # queries it recorded unscored), unscored now.
        ids = [q for q in unscored.get(c.measure) or () if (
            c.measure in baseline.per_query.get(q, ()) if baseline.per_query is not None
            else q not in then_unscored.get(c.measure, ()))]
        if theirs is not None and ours is not None and c.slice == theirs.slice:
            fewer = _field_of(c.measure) and (ours.n or {}).get(c.measure, ours.queries) < \
                (theirs.n or {}).get(c.measure, theirs.queries)
            if fewer and (theirs.per_query is None or ours.per_query is None
                          or not ours.revealed) and c.status != "missing":
                c = MeasureChange(c.measure, c.baseline, None, None, "missing", slice=c.slice)
                held[c.measure] = [c.slice]
            hit = False
        elif not known and c.slice is not None and _field_of(c.measure):
            # A report read back from JSON keeps no slice members: which of a
            # slice's queries both sides scored (lost, added or moved ones) is
            # not known, so a judge score's slice is never passed on its means.
            if c.status != "missing":
                c = MeasureChange(c.measure, c.baseline, None, None, "missing", slice=c.slice)
                unmembered.setdefault(c.measure, []).append(c.slice)
            hit = False
        else:
            hit = not (paired and (c.slice is None or known)) and bool(ids) and (
                c.slice is None or not known or not set(ids).isdisjoint(
                    members.get(c.slice, ())))     # no membership: any slice may hold them
            if (c.slice is None and _field_of(c.measure) and report.scored_count is not None
                    and baseline.per_query is not None and c.status != "missing"):
                # A report holding means only names no scored query: a judge
                # score lost, added or swapped is not known, so never passed.
                c = MeasureChange(c.measure, c.baseline, None, None, "missing", slice=c.slice)
                unmembered.setdefault(c.measure, []).append("overall")
                hit = False
        if hit and c.status != "missing":
            c = MeasureChange(c.measure, c.baseline, None, None, "missing", slice=c.slice)
            notes.setdefault(c.measure, []).append(c.slice)
        out.append(c)
    side, advice = (
        ("the baseline holds means only", "gate per-query values: --save-baseline, --per-query")
        if baseline.per_query is None else
        ("the report holds means only", "gate per-query values: --per-query"))
    return tuple(out), ["%s: the report (read back from JSON) %s, so which queries both "
                        "sides scored is not known: missing in %s (gate the run itself, %s)" % (
                            m, "holds means only" if report.scored_count is not None else
                            "keeps no slice members", ", ".join(where),
                            "or a report of it written with --per-query" if where == ["overall"]
                            else "not a report of it")
                        for m, where in sorted(unmembered.items())] + [
                        "%s: the hold-out %s scores fewer queries than in the baseline and "
                        "names none of them, so the mean cannot be compared on the queries "
                        "both hold: missing (--reveal-holdout pairs them)" % (m, where[0])
                        for m, where in sorted(held.items())] + [
                        "%s: a query lost its score and %s, so the mean cannot be compared "
                        "on the queries both hold: missing in %s (%s)" % (
                            m, side, ", ".join("overall" if w is None else w for w in where),
                            advice)
                        for m, where in sorted(notes.items())]


def _lost_score_notes(subsets):
    """A note per gated judge score compared on fewer queries (_lost_scores)."""
    notes = []
    for subset in subsets:
        for measure in sorted(subset.before):
            lost = _lost_scores(subset, measure)
            if lost and subset.listed:
                notes.append("%s%s: %s the baseline scored %s no score now (%s): compared on "
                             "the queries both hold" % (
                                 measure, "" if subset.name is None else " in " + subset.name,
                                 _plural(len(lost), "query", "queries"),
                                 "has" if len(lost) == 1 else "have", _preview(lost)))
            elif lost:
                notes.append("%s in %s: %s the baseline scored %s no score now: compared on "
                             "the queries both hold" % (measure, subset.name, _plural(
                                 len(lost), "query", "queries"), "has" if len(lost) == 1
                                 else "have"))
    return notes


def _with_unjudged(change, queries, unjudged, allowed):
    """``change`` with judged@k of its cutoff over ``queries`` (those its
    current mean is over) and, for a regression, ``undecided`` when the best
    labelling of the unjudged ids in the top k would bring the mean back
    within the tolerance (see MeasureChange).

    >>> u = {"mean": {"recall@2": [0.0, 1.0]}, "per_query": {"q": {"recall@2": [0.0, 1.0]}},
    ...      "judged_per_query": {"q": {"judged@2": 0.5}}, "ids": {"q": [(1, "x")]}}
    >>> c = _with_unjudged(MeasureChange("recall@2", 1.0, 0.0, -1.0, "regressed"), ["q"], u, 0.0)
    >>> c.status, c.judged, sorted(c.undecided.items())
    ('regressed', 0.5, [('ids', 1), ('named', ['q:x']), ('upper', 1.0)])
    """
    measure = parse_measure(change.measure)
    call = _UnitCall.of(measure)
    # judged@k counts labelled ids: beside measures over ids only.
    k = measure.k if isinstance(measure.k, int) and call.view == "id" and not call.budget \
        else None
    if k is not None and queries and all("judged@%d" % k in unjudged["judged_per_query"].get(q, ())
                                         for q in queries):
        change = change._replace(judged=_mean([unjudged["judged_per_query"][q]["judged@%d" % k]
                                               for q in queries]))
    if change.status != "regressed" or not queries or \
            unjudged["mean"].get(change.measure) is None:
        return change
    upper = _mean([unjudged["per_query"][q][change.measure][1] for q in queries])
    if change.baseline - upper > allowed + FLOAT_SLACK:
        return change       # even the best labelling leaves a regression
    ids = ["%s:%s" % (q, doc) for q in queries for rank, doc in unjudged["ids"].get(q, ())
           if k is None or rank <= k]
    return change._replace(undecided={
        "ids": len(ids), "upper": upper, "named": ids if len(ids) <= _NAMED_UNJUDGED else []})


def _set_level_notes(means):
    """Under the significant gate: the set-level measures (no per-query
    values, no paired test) are gated on the tolerance rule."""
    names = [m for m in sorted(means) if _REGISTRY[parse_measure(m).name].aggregate]
    if not names:
        return []
    return ["%s: a set-level value with no per-query values, so no significance test; the "
            "tolerance rule applies" % ", ".join(names)]


def _held_ids(report):
    """Every query id the metadata puts in the report's hold-out (expired
    ones too): ids the gate must never name."""
    held = report.holdout
    return frozenset(held.ids["all"]) if held is not None and held.ids else frozenset()


def _check_same_holdout(report, baseline):
    """A baseline and a report with different hold-outs have overall means
    over different queries: refused, never compared."""
    ours = report.holdout.slice if report.holdout is not None else None
    theirs = baseline.holdout.slice if baseline.holdout is not None else None
    if ours != theirs:
        raise EvalError("%s was saved with %s and this report has %s: the overall means are "
                        "over different queries; gate with the same --holdout, or save a new "
                        "baseline" % (baseline.source, "the hold-out %s" % theirs if theirs
                                      else "no hold-out", "the hold-out %s" % ours if ours
                                      else "none"))


def _slice_tolerances(slice_max_drop, baseline):
    """{slice: (value, relative)} of ``slice_max_drop`` ({slice: tolerance}),
    each naming a slice the baseline gates."""
    if not slice_max_drop:
        return {}
    if not isinstance(slice_max_drop, dict):
        raise EvalError("slice_max_drop must be a dict {\"field=value\": tolerance}, got %s"
                        % _short_repr(slice_max_drop))
    gated = set(baseline.slices or ())
    if baseline.holdout is not None:
        gated.add(baseline.holdout.slice)
    out = {}
    for name, value in sorted(slice_max_drop.items(), key=lambda item: str(item[0])):
        if name not in gated:
            raise EvalError("slice_max_drop (--slice-max-drop) names %s, a slice %s does not "
                            "gate (%s)"
                            % (_short_repr(name), baseline.source, "it gates " + ", ".join(
                                sorted(gated)) if gated else "it holds no slices"))
        try:
            out[name] = parse_tolerance(value)
        except EvalError as exc:
            raise EvalError("--slice-max-drop %s: %s" % (name, exc)) from None
    return out


def _tolerance_text(tolerance):
    value, relative = tolerance
    return "%g%%" % (value * 100) if relative else "%g" % value


def _moved(report, baseline):
    """The queries of both test sets whose slices changed (never a hold-out
    query: those are in neither report list)."""
    if baseline.membership is None or report.membership is None:
        return ()
    then = set(baseline.per_query or ()) | set(baseline.membership)
    now = set(report.per_query) | set(report.unscored)
    moved = []
    for qid in sorted(then & now):
        before = set(baseline.membership.get(qid, ()))
        after = set(report.membership.get(qid, ()))
        if before != after:
            moved.append(MembershipChange(qid, tuple(sorted(before - after)),
                                          tuple(sorted(after - before))))
    return tuple(moved)


def _slice_notes(report, baseline, subsets, mode):
    """What the gate says of slices beyond their rows: slices it cannot
    gate, a changed hold-out (by counts), queries now held out."""
    notes = []
    if report.slices is not None and baseline.slices is None:
        notes.append("the baseline holds no slices: only the overall mean is gated; save one "
                     "with query metadata to gate every slice")
    if report.slices is not None and report.membership is None and baseline.slices:
        notes += _loaded_slice_notes(report, baseline)
    if report.slices is None and baseline.slices:
        notes.append("the baseline holds slices and the report none: they are missing (score "
                     "with the query metadata and --by, or write the report with --by)")
    new = sorted(set(report.slices or ()) - set(baseline.slices or ()))
    if new and baseline.slices is not None:
        notes.append("%s not in the baseline, not gated: %s"
                     % (_plural(len(new), "slice", "slices"), ", ".join(new[:10])
                        + (", ..." if len(new) > 10 else "")))
    ours, theirs = report.holdout, baseline.holdout
    if theirs is not None:
        counts = (theirs.queries + theirs.unscored, ours.queries + ours.unscored)
        if not ours.members_sha256 and counts[0] == counts[1]:  # read back from JSON
            notes.append("the report was read back from JSON, which does not keep the hash "
                         "of the hold-out's queries: whether %s changed since the baseline "
                         "is not known" % ours.slice)
        elif theirs.members_sha256 != ours.members_sha256 or counts[0] != counts[1]:
            notes.append("the hold-out %s changed since the baseline (%d -> %s; which "
                         "is not shown): its means are over other queries"
                         % (ours.slice, theirs.queries + theirs.unscored,
                            _plural(ours.queries + ours.unscored, "query", "queries")))
        if mode == "significant" and theirs.per_query is None:
            notes.append("the hold-out's baseline holds means only (its per-query values are "
                         "never saved): the tolerance rule gates %s" % ours.slice)
        now_held = len(set(baseline.per_query or ()) & _held_ids(report))
        if now_held:
            notes.append("%s of the baseline %s in the hold-out now (not named)"
                         % (_plural(now_held, "query", "queries"),
                            "is" if now_held == 1 else "are"))
    return notes


def _drifted_text(drift):
    """The fields a failed drift check found moved, with their mean absolute
    differences against the limit."""
    return ", ".join("%s %.4f > %g" % (name, f["mean_absolute_difference"], drift["max_drift"])
                     for name, f in drift["fields"].items() if f["drifted"])


def _suspect_judge_drift(result, drift):
    """The gate result with its judge score regressions marked ``suspect:
    judge drift`` when the report's --drift check (``report.drift``, see
    :func:`judge_drift`) failed, and a note saying why.  The verdict is left
    as it is: drift only ever fails a run more."""
    if drift is None or drift["passed"]:
        return result
    moved = _drifted_text(drift)
    changes = tuple(c._replace(suspect="judge drift")
                    if c.status in ("regressed", "missing") and _field_of(c.measure) else c
                    for c in result.changes)
    if changes == result.changes:
        return result
    return result._replace(changes=changes, notes=result.notes + (
        "suspect: judge drift: on the frozen sample %s the judge moved (mean absolute "
        "difference %s): a judge score regression may be the judge's, not the system's"
        % (drift["frozen"]["path"], moved),))


def _loaded_slice_notes(report, baseline):
    """What a report read back from JSON (slices without membership) gates of
    the baseline's slices: those of the fields it shows, on their means."""
    notes = []
    unshown = sorted({_slice_field(name) for name in baseline.slices} - set(report.by))
    if unshown:
        notes.append("the report was read back from JSON, which keeps the slices of its --by "
                     "fields only: the baseline's slices of %s are missing (write the report "
                     "with --by %s)" % (", ".join(unshown), " --by ".join(unshown)))
    if baseline.per_query is not None and report.scored_count is None:
        notes.append("the report was read back from JSON, which keeps its slices' means, not "
                     "their queries: each slice is gated on its means (no per-query pairing), "
                     "a judge score's not at all")
    return notes


def _judge_noise_notes(report, baseline, allowed):
    """A note for each gated score measure whose tolerated drop is below
    twice its judge noise floor (see _judge_noise): a gate that would fail
    on judge noise alone now and then."""
    notes = []
    for name, noise in sorted(((report.scores or {}).get("noise") or {}).items()):
        band = 2 * noise["noise_floor"]
        if name in allowed and allowed[name] < band - FLOAT_SLACK:
            low, high = noise["runs"]
            notes.append("%s: tolerance is inside judge noise (+/-%.3f at %s runs): expect "
                         "flaky gates" % (name, band, low if low == high else "%d-%d"
                                          % (low, high)))
    return notes


def _unscored_note(report, baseline):
    """What to ask for when baseline measures are missing from the report (a
    baseline written at another k, or with other measures)."""
    absent = sorted(set(baseline.mean) - set(report.mean))
    if not absent:
        return None
    return ("the report does not score %s of the baseline (%s): add %s to --metrics, or "
            "leave out --metrics and --k to score every baseline measure"
            % (_plural(len(absent), "measure", "measures"), ", ".join(absent),
               "it" if len(absent) == 1 else "them"))


def _change(measure, before, now, allowed, p_value, alpha):
    if now is None or not math.isfinite(now):
        return MeasureChange(measure, before, None, None, "missing")
    delta = now - before
    if -delta > allowed + FLOAT_SLACK:
        status = "regressed" if p_value is None or p_value <= alpha else "dropped, not significant"
    elif delta < -FLOAT_SLACK:
        status = "dropped within tolerance"
    elif delta > FLOAT_SLACK:
        status = "improved"
    else:
        status = "unchanged"
    return MeasureChange(measure, before, now, delta, status, p_value)


def _query_drops(subsets):
    """Every query of these subsets whose value fell by more than the
    subset's tolerance, largest drop first."""
    drops = []
    for subset in subsets:
        for qid in sorted(set(subset.then) & set(subset.rows)):
            before, now = subset.then[qid], subset.rows[qid]
            for measure in sorted(set(before) & set(now) & set(subset.allowed)):
                delta = now[measure] - before[measure]
                if -delta > subset.allowed[measure] + FLOAT_SLACK:
                    drops.append(QueryDrop(measure, qid, before[measure], now[measure], delta))
    return tuple(sorted(drops, key=lambda d: (d.delta, d.measure, d.query)))


def _paired_means_and_p(subsets, resamples, seed, alpha):
    """For each (subset, measure) both sides hold per-query values for: both
    means over the queries both hold; the randomization p of the paired
    differences, Holm-adjusted over all of them as one family; the pairs too
    few differences could ever make significant; and the family's size."""
    paired, raw, smallest = {}, {}, {}
    for subset in subsets:
        if subset.then is None:
            continue
        common = sorted(set(subset.then) & set(subset.rows))
        for measure in sorted(set(subset.before) & set(subset.now)):
            rows = [q for q in common
                    if measure in subset.then[q] and measure in subset.rows[q]]
            if not rows:
                continue
            now, then = _paired(subset.rows, subset.then, measure, rows)
            diffs = [a - b for a, b in zip(now, then)]
            key = (subset.name, measure)
            paired[key] = _mean(now), _mean(then)
            # Seeded by the name, so that a slice never changes another's p.
            raw[key] = randomization_p(diffs, resamples=resamples, rng=random.Random(
                "%s|%s" % (seed, _change_name(*key))))
            smallest[key] = _attainable_p(diffs, resamples)
    untestable = [key for key, p in smallest.items() if p * len(raw) > alpha]
    adjusted = dict(zip(raw, holm(list(raw.values()))))
    return (paired, {key: p for key, p in adjusted.items() if key not in untestable},
            untestable, len(raw))


def _input_notes(report, baseline):
    notes = []
    for kind in ("qrels", "chunks"):
        before = ((baseline.inputs or {}).get(kind) or {}).get("sha256")
        now = ((report.inputs or {}).get(kind) or {}).get("sha256")
        if kind == "qrels" and before and now and before != now and None in (
                baseline.label_sha256, report.label_sha256):    # else _relabelled_notes
            notes.append("the qrels changed since the baseline (sha256 %s... -> %s...): "
                         "the numbers are not about the same test set" % (before[:12], now[:12]))
        if kind == "chunks" and before and now and before != now:
            by_id = sorted(m for m in baseline.mean if _counts_ids(m))
            notes.append("the chunk map changed since the baseline (sha256 %s... -> %s...): "
                         "documents, evidence and characters compare across chunkers%s"
                         % (before[:12], now[:12], "; chunk-id measures do not (%s)"
                            % ", ".join(by_id[:5]) if by_id else ""))
    before = (baseline.inputs or {}).get("mapping")
    now = (report.inputs or {}).get("mapping")
    if before is not None and now is not None and before != now:
        notes.append("chunks were mapped to documents another way for the baseline (%s -> %s): "
                     "unit=doc, unit=evidence and span measures may not be comparable"
                     % (_mapping_text(before), _mapping_text(now)))
    return notes


def _mapping_text(info):
    return ("--doc-sep %r" % info["doc_sep"] if "doc_sep" in info
            else {"chunk map": "--chunks", "run": "the run's fields"}.get(info.get("source"),
                                                                         "none"))


def _counts_ids(name):
    """True when a measure name counts retrieved ids (unit=id, no span view)."""
    try:
        call = _UnitCall.of(parse_measure(name))
    except EvalError:
        return False
    return call.view == "id"
