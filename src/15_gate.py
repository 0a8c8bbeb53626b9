"""Gate: a report against its baseline, the verdict and its notes.

gate() builds the populations (_populations: every scored query not held
out, each slice of the baseline, the hold-out), pairs each baseline measure
of each with the report (_paired_view, in 12_statistics: the one rule for
which queries a verdict compares), and judges each row by the tolerance or,
with mode="significant", by a paired randomization test with Holm's
adjustment; it names the queries that fell, the queries only one side
scored, what changed in the metadata and the labels, the queries that moved
between slices, and why a measure is missing.  The verdict is a GateResult.

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
         slice_max_drop=None, fail_on_removed=False):
    """Compare ``report`` with ``baseline``; return a :class:`GateResult`.
    ``baseline`` is a Baseline, a dict of means, a file name (read by
    load_baseline) or a Report (the baseline save_baseline would write of it).

    Every verdict is made on paired values (see _paired_view): each baseline
    measure is compared over the queries both sides scored for it, the
    baseline's mean over them against the current mean over them.  A query
    the baseline scored and the report does not ("removed"), or a new one
    ("added"), is counted and named (never a held-out one) and in neither
    mean.  A regression is a baseline measure whose paired mean fell by more
    than ``max_drop`` (absolute, or relative to the baseline when given as
    ``"5%"``), or one that is MISSING: not in the report, no query both
    sides scored, or a side holding means only whose record of its queries
    differs from the other's (a changed test set).  A file of bare means,
    which records no query set, is compared on its means, with a note.
    ``fail_on_removed`` also fails the gate on any removed query (a frozen
    test set).  Improvements and drops within the tolerance are listed too.
    The gate passes only when there is no regression.

    With per-query values on both sides, every query that fell by more than
    the tolerance is listed, largest drop first, whatever the mean did.
    ``mode="significant"`` fails only on a drop beyond the tolerance whose
    paired randomization p (Holm-adjusted over every gated pair) is at most
    ``alpha``; a row compared on means falls back to the tolerance rule.

    Provenance: a note names every meta key that changed since the baseline
    (``meta_changes``); ``same`` lists keys that must not (an EvalError when
    one differs or is absent on one side).  When both sides hold label
    hashes, ``labels_changed`` lists the queries whose labels changed: the
    means keep them (their values changed with their labels), the list of
    per-query drops leaves them out.

    Slices are gated the same way, each on its own queries: a baseline saved
    with query metadata holds every slice; each is checked (``source=real:
    recall@5``), a slice that disappeared is missing, and ``slice_max_drop``
    gives a slice its own tolerance (``{"risk=high": 0}``).  The hold-out is
    compared on its means while its queries are the baseline's (the baseline
    records their count and sha256, never an id), paired when the baseline
    was saved with its values revealed, and its queries are never named.  Queries that changed slices since the
    baseline are listed (``moved``).

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
    baseline = _checked_baseline(baseline)
    same_notes = _check_same(report.meta, baseline, _same_keys(same))
    if baseline.rel != report.rel:
        raise EvalError("%s was made with rel=%d and this report with rel=%d: the scored "
                        "queries differ, so the numbers are not comparable"
                        % (baseline.source, baseline.rel, report.rel))
    _check_same_min_score(report, baseline)
    _check_same_ranges(report, baseline)
    _check_same_stages(report.stages, baseline.stages, baseline.source)
    same_notes += _check_same_judge(report, baseline)
    if mode not in GATE_MODES:
        raise EvalError("gate mode must be one of %s, got %r" % (", ".join(GATE_MODES), mode))
    if not isinstance(fail_on_removed, bool):
        raise EvalError("fail_on_removed must be True or False, got %s"
                        % _short_repr(fail_on_removed))
    _check_same_holdout(report, baseline)
    tolerance = parse_tolerance(max_drop)
    tolerances = _slice_tolerances(slice_max_drop, baseline)
    meta_changes = _meta_changes(report, baseline)
    relabelled = _relabelled(report, baseline)
    populations = _populations(report, baseline, tolerance, tolerances)
    views = _views(populations)
    pvalues, notes = {}, []
    if mode == "significant":
        pvalues, notes = _significance(views, resamples, seed, alpha, baseline.mean)
    changes = tuple(_row(view, pvalues.get(_view_key(view)), alpha, report.unjudged)
                    for view in views)
    attribution, stage_notes = _gate_attribution(report, baseline)
    changes = _with_main_stage(changes, attribution)
    held = _held_ids(report)
    added, removed = _changed_queries(report, baseline, held)
    # A report read back without --reveal-holdout does not say which ids its
    # hold-out holds: a query that moved into it would be named as removed.
    unnamed = report.holdout is not None and report.holdout.ids is None
    if unnamed:
        removed, hidden = (), len(removed)
    else:
        hidden = 0
    notes = (_meta_notes(report, meta_changes, baseline) + same_notes
             + _input_notes(report, baseline) + _relabelled_notes(report, baseline, relabelled)
             + _test_set_notes(views, added, removed, held, hidden) + notes
             + _slice_notes(report, baseline) + stage_notes
             + _judge_noise_notes(report, baseline, _allowed_of(views, populations[0])))
    notes += [n for n in [_unscored_note(report, baseline), _sample_size_note(
        [(p.name, p.now.values, _allowed_of(views, p)) for p in populations
         if p.listed and p.now.values is not None])] if n]
    # None: a side of means alone; with no query both scored, the lists still name them.
    paired = baseline.per_query is not None and report.scored_count is None
    drops = _query_drops(views, relabelled or ()) if paired else None
    frozen = _removed_count(views) if fail_on_removed else 0
    if frozen:
        notes.append("--fail-on-removed: %s the baseline scored %s no value now: the gate "
                     "fails" % (_plural(frozen, "query", "queries"),
                                "has" if frozen == 1 else "have"))
    unknowable = fail_on_removed and _unknowable_removals(views)
    if unknowable:
        notes.append("--fail-on-removed: the baseline records no query set, so a removed "
                     "query cannot be told: the gate fails (save the baseline with "
                     "--save-baseline)")
    passed = not (frozen or unknowable) and not any(c.status in ("regressed", "missing")
                                                    for c in changes)
    return _suspect_judge_drift(GateResult(
        passed, changes, _tolerance_text(tolerance), tuple(notes),
        mode if pvalues or mode == "tolerance" else "tolerance", added, removed, drops,
        meta_changes or (), relabelled, _moved(report, baseline),
        {name: _tolerance_text(t) for name, t in tolerances.items()}, frozen, attribution),
        report.drift)


def _gate_attribution(report, baseline):
    """({field: attribution} of the answer stages, or None; notes): against a
    baseline with each query's stage, which stage the answers that changed
    moved through (see _attribution), over the queries both sides staged;
    a note says why there is none when only one side can tell."""
    ours, theirs = report.stages, baseline.stages
    if ours is None and theirs is None:
        return None, []
    if ours is None:
        return None, ["the baseline holds answer stages and the report none: give --scores "
                      "with the answer field (%s) to see them" % theirs["field"]]
    if theirs is None:
        return None, ["the baseline holds no answer stages: save it again with --answer %s to "
                      "see which stage the answers that change break at" % ours["field"]]
    if "per_query" not in ours or "per_query" not in theirs:
        return None, ["answer stages: the %s keeps no per-query stages, so no attribution "
                      "(%s)" % (("report", "write it with --per-query") if "per_query" not in ours
                                else ("baseline", "save it again with --save-baseline"))]
    return {ours["field"]: _attribution(theirs["per_query"], ours["per_query"],
                                        ours["k"])}, []


def _with_main_stage(changes, attribution):
    """The changes with the regression of each attributed answer field's
    score (score(field=F), over every query) naming its main stage."""
    if not attribution:
        return changes
    return tuple(c._replace(main_stage=_main_stage(attribution[_field_of(c.measure)]))
                 if c.slice is None and c.status == "regressed"
                 and _field_of(c.measure) in attribution else c for c in changes)


_SHOWN_NAMES = 12     # measures a note names before it says how many more
NO_COMPARABLE = "no comparable queries"   # the status of a row with nothing to pair, not a failure
# Statuses of slice rows that the tables and charts leave to the JSON.
_QUIET_STATUSES = ("unchanged", "dropped within tolerance", NO_COMPARABLE)


class _Population(NamedTuple):
    """A population the gate compares: every scored query not held out (name
    None), a slice, or the hold-out (held)."""
    name: Optional[str]
    before: _Side                     # the baseline's
    now: _Side                        # the report's
    tolerance: Tuple[float, bool]     # (value, relative): see parse_tolerance
    listed: bool = True               # its queries may be named
    held: bool = False


class _View(NamedTuple):
    """One gated row before its verdict: a measure of a population, paired,
    and the drop it tolerates (a relative tolerance of its paired baseline)."""
    population: _Population
    measure: str
    paired: _Paired
    allowed: float


def _gate_views(report, baseline, tolerance, tolerances):
    """The _View of every (population, measure) the baseline gates, in the
    gate's order: the overall, every slice the baseline holds, the
    hold-out; measures sorted by name.  What the gate and the HTML charts
    compare."""
    return _views(_populations(report, baseline, tolerance, tolerances))


def _views(populations):
    out = []
    for population in populations:
        for measure in sorted(population.before.mean):
            paired = _paired_view(measure, population.before, population.now, _fixed(measure))
            value, relative = population.tolerance
            of = paired.baseline if paired.baseline is not None else population.before.mean[measure]
            out.append(_View(population, measure, paired, value * of if relative else value))
    return out


def _allowed_of(views, population):
    """{measure: tolerated drop} of one population's rows."""
    return {v.measure: v.allowed for v in views if v.population is population}


def _fixed(measure):
    """Whether the test set decides a measure's population (else the run does:
    see measure(fixed=)); what the gate tells _paired_view.

    >>> _fixed("recall@5"), _fixed("answer_given_evidence(field=correct)@5")
    (True, False)
    """
    return _REGISTRY[parse_measure(measure).name].fixed


def _populations(report, baseline, tolerance, tolerances):
    """The gate's _Population list (see _gate_views)."""
    def allowed(name, before):
        return tolerances.get(name, tolerance)

    sets = _query_sets(report)
    then_sets = baseline.query_sets or {}
    rows = _per_query_of(report)
    unscored = {m: tuple(ids) for m, ids in ((report.scores or {}).get("unscored") or {}).items()}
    scored = frozenset(report.measures)
    out = [_Population(None, _Side(baseline.mean, baseline.per_query, then_sets.get("all")),
                       _Side(report.mean, rows, sets.get("all"), unscored, scored=scored),
                       allowed(None, baseline.mean))]
    then_members, now_members = _members(baseline.membership), _members(report.membership)
    for name, before in sorted((baseline.slices or {}).items()):
        then = None if baseline.per_query is None or baseline.membership is None else {
            q: baseline.per_query[q] for q in then_members.get(name, ())
            if q in baseline.per_query}
        now = None if rows is None or report.membership is None else {
            q: rows[q] for q in now_members.get(name, ()) if q in rows}
        members = set(now_members.get(name, ()))
        out.append(_Population(
            name, _Side(before, then, then_sets.get(name)),
            _Side((report.slices or {}).get(name, {}).get("mean", {}), now, sets.get(name),
                  {m: tuple(q for q in ids if q in members or report.membership is None)
                   for m, ids in unscored.items()}, scored=scored),
            allowed(name, before)))
    if baseline.holdout is not None:
        theirs, ours = baseline.holdout, report.holdout
        record = sets.get(theirs.slice)
        out.append(_Population(
            theirs.slice, _Side(theirs.mean, theirs.per_query,
                                then_sets.get(theirs.slice) or _members_record(theirs, ours,
                                                                               record),
                                anonymous=True),
            _Side(ours.mean, ours.per_query, record, anonymous=True, scored=scored),
            allowed(theirs.slice, theirs.mean), ours.revealed, True))
    return out


def _members_record(theirs, ours, record):
    """The record of a baseline's hold-out that keeps none (written before
    records were): its members' sha256 (scored and unscored ids) and counts,
    translated to the report's ``record`` when both agree, else a record no
    report can have (the hold-out changed: compared on nothing).  None when
    the baseline keeps no members' sha256 either."""
    if not theirs.members_sha256 or not ours.members_sha256 or record is None:
        return None
    same = (theirs.members_sha256, theirs.queries, theirs.unscored) == (
        ours.members_sha256, ours.queries, ours.unscored)
    return record if same else {"queries": theirs.queries, "sha256": "changed"}


def _view_key(view):
    return view.population.name, view.measure


def _row(view, p_value, alpha, unjudged=None):
    """The MeasureChange of a _View: its verdict (see _change) on the paired
    means; with the report's ``unjudged`` bounds (never for the hold-out:
    its queries are set apart), judged@k and whether a regression is
    undecided, over the queries its current mean is over."""
    population, measure, paired, allowed = view
    if paired.missing:
        reason = paired.missing
        if population.held and paired.changed:
            reason = ("the hold-out changed since the baseline, which keeps its means only "
                      "(its per-query values only with --reveal-holdout): save it again")
        change = MeasureChange(measure, paired.baseline, None, None, "missing", reason=reason)
    elif paired.n == 0:     # a population the run decides, empty on one side or shared by none
        change = MeasureChange(measure, paired.baseline, None, None, NO_COMPARABLE)
    else:
        change = _change(measure, paired.baseline, paired.current, allowed, p_value, alpha)
    change = change._replace(slice=population.name, n=paired.n, removed=len(paired.removed),
                             added=len(paired.added))
    if unjudged is not None and not population.held and change.current is not None:
        queries = paired.queries or sorted(_values_of(population.now, measure) or ())
        change = _with_unjudged(change, queries, unjudged, allowed)
    return change


_NAMED_UNJUDGED = 5     # an undecided regression names its ids up to this many


def _changed_queries(report, baseline, held):
    """(added, removed): the queries the report scored and the baseline did
    not, and the other way round, over every scored query not held out now
    (a query held out now is never named; _slice_notes counts them)."""
    if baseline.per_query is None or report.scored_count is not None:
        return (), ()
    return (tuple(sorted(set(report.per_query) - set(baseline.per_query))),
            tuple(sorted(set(baseline.per_query) - set(report.per_query) - held)))


def _test_set_notes(views, added, removed, held, hidden=0):
    """What the gate says of the queries only one side scored: the removed
    and added queries of the test set (a few named, the JSON has them
    all), each measure whose own queries changed besides (a judge score lost
    or gained, a character measure), the hold-out's counts (never its ids),
    and the means each side compared on means alone stood for.  ``hidden``
    counts removed queries that may be held out now, so none is named."""
    notes = []
    if hidden:
        notes.append("%s the baseline scored %s not in the report's overall now (removed, or "
                     "moved into the hold-out: a report read back without --reveal-holdout "
                     "does not say which; not named), not in either mean" % (
                         _plural(hidden, "query", "queries"), "is" if hidden == 1 else "are"))
    if removed or added:
        notes.append("the test set changed since the baseline: %s; each measure is compared on "
                     "the queries both sides scored, not on %s" % ("; ".join(
                         part for part in (
                             removed and "%s the baseline scored %s not scored now (removed): %s"
                             % (_plural(len(removed), "query", "queries"),
                                "is" if len(removed) == 1 else "are", _preview(removed)),
                             added and "%s (added): %s" % (
                                 _plural(len(added), "new query", "new queries"),
                                 _preview(added))) if part),
                         "these" if len(removed) + len(added) > 1 else "this one"))
    whole = (set(removed) | held, set(added))
    for view in views:
        population, paired = view.population, view.paired
        lost = [q for q in paired.removed if q not in whole[0]]
        new = [q for q in paired.added if q not in whole[1]]
        if population.held:
            if paired.removed or paired.added:
                notes.append("%s in the hold-out %s: %d removed, %d added since the baseline (not "
                             "named), not in either mean" % (view.measure, population.name,
                                                             len(paired.removed),
                                                             len(paired.added)))
        elif population.name is None and (lost or new) and not hidden:
            notes.append("%s: %s%s, not in either mean" % (
                view.measure, "%s the baseline scored %s no value now: %s" % (
                    _plural(len(lost), "query", "queries"), "has" if len(lost) == 1 else
                    "have", _preview(lost)) if lost else "", "%s%s with a value only now: %s" % (
                    "; " if lost else "", _plural(len(new), "query", "queries"), _preview(new))
                if new else ""))
    means = {}
    for view in views:
        if view.paired.means and not view.paired.missing:
            means.setdefault(view.paired.means, []).append(_change_name(*_view_key(view)))
    for why, names in sorted(means.items()):
        notes.append("compared on the means alone (%s): %s%s" % (
            why, _shown_names(names), "; save the baseline again with --save-baseline to pair "
            "its queries" if why == _BARE else ""))
    differ = ["%s %.4f over %s (gated: %.4f over the %d both sides scored)" % (
        v.measure, v.population.now.mean[v.measure], _plural(
            len(_values_of(v.population.now, v.measure) or ()), "query", "queries"),
        v.paired.current, v.paired.n)
        for v in views if v.population.name is None and v.paired.queries
        and v.measure in v.population.now.mean
        and abs(v.population.now.mean[v.measure] - v.paired.current) > FLOAT_SLACK]
    if differ:
        notes.append("the report's means over all its queries differ from the paired ones: "
                     + "; ".join(differ))
    return notes


def _removed_count(views):
    """How many queries the baseline scored have a value no more (for some
    measure), the overall's and the hold-out's.  A query moved into the
    hold-out counts: it is in no verdict the baseline had it in."""
    overall = {q for v in views if v.population.name is None for q in v.paired.removed}
    held_out = max([len(v.paired.removed) for v in views if v.population.held] or [0])
    return len(overall) + held_out


def _unknowable_removals(views):
    """True when some row of the overall or the hold-out is compared on a file
    of bare means: which queries it was over, and so whether one was
    removed, is not known."""
    return any(v.paired.means == _BARE for v in views
               if v.population.name is None or v.population.held)


def _shown_names(names):
    """The first _SHOWN_NAMES names, and how many more."""
    return ", ".join(names[:_SHOWN_NAMES]) + (
        ", ... (%d more)" % (len(names) - _SHOWN_NAMES) if len(names) > _SHOWN_NAMES else "")


def _significance(views, resamples, seed, alpha, means):
    """(pvalues, notes) of the significant gate: the randomization p of each
    row's paired differences, Holm-adjusted over all of them as one family;
    the rows too few differences could ever make significant, and those
    compared on means, are left to the tolerance rule, with a note."""
    raw, smallest = {}, {}
    for view in views:
        paired = view.paired
        if not paired.queries:
            continue
        then = _values_of(view.population.before, view.measure)
        now = _values_of(view.population.now, view.measure)
        diffs = [now[q] - then[q] for q in paired.queries]
        key = _view_key(view)
        # Seeded by the name, so that a slice never changes another's p.
        raw[key] = randomization_p(diffs, resamples=resamples, rng=random.Random(
            "%s|%s" % (seed, _change_name(*key))))
        smallest[key] = _attainable_p(diffs, resamples)
    untestable = [key for key, p in smallest.items() if p * len(raw) > alpha]
    adjusted = dict(zip(raw, holm(list(raw.values()))))
    notes = []
    if untestable:
        notes.append("too few queries differ for a significance test at alpha=%g on %s (an "
                     "exact test needs at least %d); the tolerance rule applies there"
                     % (alpha, _shown_names([_change_name(*key) for key in untestable]),
                        _queries_for_significance(len(raw), alpha)))
    unpaired = [_change_name(*_view_key(v)) for v in views
                if not v.paired.queries and not v.paired.missing and v.paired.n != 0
                and not _REGISTRY[parse_measure(v.measure).name].aggregate]
    if unpaired:
        notes.append("no per-query values to test on %s: the tolerance rule applies there"
                     % _shown_names(unpaired))
    notes.extend(_set_level_notes(means))
    return {key: p for key, p in adjusted.items() if key not in untestable}, notes


def _query_drops(views, relabelled=()):
    """Every query of the overall and of a revealed hold-out whose value fell
    by more than the tolerance, over the queries both sides scored (not
    those whose labels changed), largest drop first."""
    drops, relabelled = [], frozenset(relabelled)   # (a sorted tuple: a set to look in)
    for view in views:
        population, measure, paired, allowed = view
        if not paired.queries or not (population.name is None or population.held
                                      and population.listed):
            continue
        then = _values_of(population.before, measure)
        now = _values_of(population.now, measure)
        for q in paired.queries:
            delta = now[q] - then[q]
            if q not in relabelled and -delta > allowed + FLOAT_SLACK:
                drops.append(QueryDrop(measure, q, then[q], now[q], delta))
    return tuple(sorted(drops, key=lambda d: (d.delta, d.measure, d.query)))


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
    # A report read back from JSON keeps the bounds (per query only with
    # --per-query), not judged@k nor the unjudged ids.
    judged = unjudged.get("judged_per_query") or {}
    if k is not None and queries and all("judged@%d" % k in judged.get(q, ()) for q in queries):
        change = change._replace(judged=_mean([judged[q]["judged@%d" % k] for q in queries]))
    bounds = unjudged.get("per_query") or {}
    if change.status != "regressed" or not queries or \
            unjudged["mean"].get(change.measure) is None or not all(
                (bounds.get(q) or {}).get(change.measure) for q in queries):
        return change
    upper = _mean([bounds[q][change.measure][1] for q in queries])
    if change.baseline - upper > allowed + FLOAT_SLACK:
        return change       # even the best labelling leaves a regression
    ids = ["%s:%s" % (q, doc) for q in queries for rank, doc in (unjudged.get("ids") or {}).get(
        q, ()) if k is None or rank <= k]
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


def _slice_notes(report, baseline):
    """What the gate says of slices beyond their rows: slices it cannot
    gate, slices it does not, a hold-out whose queries changed (by counts,
    never by name), queries now held out."""
    notes = []
    if report.slices is not None and baseline.slices is None:
        notes.append("the baseline holds no slices: only the overall mean is gated; save one "
                     "with query metadata to gate every slice")
    if report.slices is None and report.membership is None and baseline.slices:
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
        if (theirs.members_sha256 and ours.members_sha256
                and theirs.members_sha256 != ours.members_sha256 or counts[0] != counts[1]):
            notes.append("the hold-out %s changed since the baseline (%d -> %s; which is not "
                         "shown)" % (ours.slice, counts[0], _plural(counts[1], "query",
                                                                    "queries")))
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
    before = ((baseline.inputs or {}).get("run") or {}).get("fields")
    now = ((report.inputs or {}).get("run") or {}).get("fields")
    if (baseline.inputs or {}).get("run") and (report.inputs or {}).get("run") \
            and before != now:
        notes.append("the run was read at other field paths for the baseline (%s -> %s): its "
                     "ids, documents and spans may not be the same"
                     % (_fields_text(before), _fields_text(now)))
    return notes


def _fields_text(fields):
    """The field options a report's run was read with, as written.

    >>> _fields_text({"doc": "node.metadata.file_path"}), _fields_text(None)
    ('--doc-field node.metadata.file_path', "the shapes' own")
    """
    return " ".join("--%s-field %s" % item for item in sorted((fields or {}).items())) \
        or "the shapes' own"


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
