"""Records: the plain values the library hands out.

Report (what evaluate returns), HeldOut, Baseline, and the gate's results
(MeasureChange, QueryDrop, MetaChange, MembershipChange, GateResult), with
their JSON forms (to_dict); the cutoff ALL.  Records hold data and say how
they print; the numbers in them are made by the later files.

Uses: 01_head.  Used by: nearly every later file.  Forward (tools/build.py,
FORWARD): the notebook views (_repr_markdown_, _repr_html_),
Report.from_dict and Report.from_rows call the renderers, the report
reader and the merge of rows at run time.
"""

class _All:
    """The cutoff "the whole ranking": ``Measure.k`` of ``map@all`` (see :data:`ALL`)."""
    __slots__ = ()

    def __repr__(self):
        return "ALL"

    def __reduce__(self):
        return "ALL"   # pickles as the module's one instance


ALL = _All()   # Measure.k of a measure taken over the whole ranking, written @all


def _cutoff_text(k):
    """How a cutoff is written: ``@5``, ``@all``, or nothing (no cutoff)."""
    return "" if k is None else "@all" if k is ALL else "@%d" % k


def _value_text(value):
    """A parameter value as written: numbers as their shortest repr.

    >>> _value_text(0.5), _value_text(2), _value_text("linear")
    ('0.5', '2', 'linear')
    """
    return repr(value) if isinstance(value, float) else str(value)


def _no_truth_value(self):
    raise TypeError("a %s has no pass/fail verdict: gate it and test "
                    "gate(...).passed" % type(self).__name__)


class Report(NamedTuple):
    """What :func:`evaluate` returns.  Plain data; render it or read it.

    ``per_query`` maps every scored query to its values (queries absent from
    the run included, with zeros); ``unscored`` lists queries with no relevant
    id, excluded from ``mean``.  ``unlabelled`` lists the scored queries of the
    run whose top K (the deepest cutoff) holds no labelled id (grade >= 0);
    ``unlabelled_run`` says why, when not one id the run retrieved carries a
    label (or it retrieved nothing), else it is None: every number would be 0
    for a reason that has nothing to do with retrieval.  The check runs per
    kind of measure, on what each counts: the ids, or their documents; when
    only some measures meet no label, it names them ("recall@5: not one
    retrieved id ...").  ``average`` is
    ``"scored"``, or ``"trec_eval"`` when ``per_query`` and ``mean`` are over
    the queries the run and the qrels share, as trec_eval averages (see
    :func:`evaluate`); such a report is never gated, compared or saved as a
    baseline.  ``meta`` is what the numbers are about (flat dotted keys to
    strings, see :func:`evaluate`); ``label_sha256`` maps each qrels query to
    the hash of its labels (see :func:`_label_sha256`), computed when read.

    With query metadata (``queries=``, see :func:`evaluate`): ``slices``
    gives every slice ``field=value`` of the queries not held out (its scored
    ``queries``, ``unscored`` ids, ``mean``, and ``n`` when its measures
    average over different queries), ``membership`` the slices of each query
    that is in any, ``by`` the fields the renderers show, and ``holdout`` the
    held-out slice (a :class:`HeldOut`), whose queries are in no other field
    of the report.  ``unjudged`` holds the unjudged bounds and judged@k when
    asked for (see :func:`evaluate`), else None.  ``scores`` is None unless
    the report holds judge scores (:func:`evaluate_scores`): then the score
    files (``inputs``), each field's ``ranges``, the queries ``unscored`` per
    measure, the judge ``noise`` and the ``borderline`` queries.
    ``scored_count`` is None unless ``per_query`` is empty because the report
    was read from JSON written without its per-query values (see
    :func:`load_report`): then it counts the scored queries, and the gate
    treats the report as means only.  ``query_sets`` is None unless the
    report was read back from JSON: then it is what the JSON recorded of
    which queries each mean is over (see _query_sets), which a report
    scored here computes from its values.  ``stages`` is None unless the
    report joins retrieval with an answer verdict (--answer FIELD, see
    _with_stages): then the stage settings (``field``, ``threshold``, ``k``,
    ``unit``, ``evidence``), the ``counts`` of the four stages (pass,
    generation_miss, retrieval_miss, unsupported_pass), the queries counted
    ``apart``, the counts of every slice (``slices``) and of the hold-out,
    and each query's stage (``per_query``, never a held-out query).
    scored here computes from its values.  ``budget`` is None unless a
    measure is cut at a context budget (``recall(budget=600,unit=evidence)``):
    then ``{measure: {"budget": N, "used": mean, "ran_out": n, "queries": n,
    "unit": "tokens" or "characters"}}``, the context its scored queries
    filled on average and how many ran out of retrieved chunks before the
    budget.  ``trim_label_whitespace`` is True when span labels were narrowed
    past the whitespace at their ends (see :func:`evaluate`): a policy, so a
    baseline records it and the gate refuses another.

    A report has no verdict, so it has no truth value either: ``assert report``
    would pass a failed gate.

    >>> bool(evaluate({"q": {"a": 1}}, {"q": ["a"]}))
    Traceback (most recent call last):
    ...
    TypeError: a Report has no pass/fail verdict: gate it and test gate(...).passed
    """
    measures: Tuple[str, ...]
    mean: Dict[str, float]
    per_query: Dict[str, Dict[str, float]]
    unscored: Tuple[str, ...]
    missing: Tuple[str, ...]
    skipped: Tuple[str, ...]
    abstention: Dict[str, int]
    ties: Dict[str, int]
    warnings: Tuple[str, ...]
    rel: int = 1
    inputs: Optional[Dict[str, dict]] = None
    unlabelled: Tuple[str, ...] = ()
    unlabelled_run: Optional[str] = None
    average: str = "scored"
    n: Optional[Dict[str, int]] = None
    mapping: Optional[dict] = None
    meta: Optional[Dict[str, str]] = None
    label_sha256: Optional[collections.abc.Mapping] = None
    slices: Optional[Dict[str, dict]] = None
    membership: Optional[Dict[str, Tuple[str, ...]]] = None
    by: Tuple[str, ...] = ()
    holdout: Optional["HeldOut"] = None
    answerability: Optional[Dict[str, int]] = None
    cells: Optional[Dict[str, dict]] = None
    min_score: Optional[float] = None
    unjudged: Optional[dict] = None
    scores: Optional[dict] = None
    drift: Optional[dict] = None
    scored_count: Optional[int] = None
    query_sets: Optional[dict] = None
    stages: Optional[dict] = None
    budget: Optional[dict] = None
    trim_label_whitespace: bool = False

    __bool__ = _no_truth_value

    def __repr__(self):
        """Counts and means, never the per-query table (a report may hold 50k queries)."""
        counts = [_plural(_query_count(self), "query", "queries")]
        counts += ["%d unscored" % len(self.unscored)] if self.unscored else []
        counts += ["%d held out" % (self.holdout.queries + self.holdout.unscored)
                   ] if self.holdout is not None else []
        return "<Report %s: %s>" % (", ".join(counts), _means_text(self.mean))

    def _repr_markdown_(self):
        """Jupyter's Markdown display: the summary, the means, details folded."""
        return render_markdown(self, max_bytes=DEFAULT_MAX_BYTES)

    @classmethod
    def from_dict(cls, data):
        """The Report of a JSON report (``--format json``, :func:`render_json`,
        parsed): the report's fields, the others at their defaults; the
        ``gate``, ``comparison``, ``sweep`` and ``elapsed_seconds`` blocks are
        results of a run, not of the report, and are not read.  Without
        ``per_query`` in it (written without ``--per-query``), ``per_query`` is
        empty and ``scored_count`` holds the count of scored queries; slices come back as shown (``by`` sorted), with
        no ``membership``; a hold-out without ``members_sha256``: the gate
        compares those on their means, and :func:`save_baseline` refuses them.

        >>> r = evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, measures="mrr")
        >>> text = render_json(r, per_query=True)
        >>> render_json(Report.from_dict(json.loads(text)), per_query=True) == text
        True
        """
        return _report_from_dict(data)

    @classmethod
    def from_rows(cls, records, qrels_rows, **options):
        """The Report of the records of every shard (see :func:`score_rows`)
        against all of ``qrels_rows``: :func:`merge_rows`, whose options it
        takes.

        >>> q = [{"query_id": "q1", "relevant": ["a"]}]
        >>> Report.from_rows(score_rows(q, [{"query_id": "q1", "docs": ["b", "a"]}], k=2,
        ...                             measures="mrr"), q, k=2, measures="mrr").mean
        {'mrr@2': 0.5}
        """
        return merge_rows(records, qrels_rows, **options)

    def to_dict(self, per_query=True):
        """The JSON-ready form documented in README.md (without ``gate``)."""
        out = {
            "tool": {"name": "rag_eval", "version": __version__},
            "inputs": self.inputs or {},
            "meta": dict(self.meta or {}),
            "measures": list(self.measures),
            "rel": self.rel,
            "queries": _query_count(self),
            "unscored": list(self.unscored),
            "missing_from_run": list(self.missing),
            "skipped": list(self.skipped),
            "abstention": dict(self.abstention),
            "answerability": dict(self.answerability or {}),
            "unlabelled": list(self.unlabelled),
            "ties": {"total": sum(self.ties.values()), "per_query": dict(self.ties)},
            "mean": dict(self.mean),
            "warnings": list(self.warnings),
        }
        if self.min_score is not None:  # like rel, part of what every number means
            out["min_score"] = self.min_score
        if self.trim_label_whitespace:  # so is a label policy
            out["trim_label_whitespace"] = True
        if self.budget is not None:
            out["budget"] = {m: dict(use) for m, use in self.budget.items()}
        if self.average != "scored":     # only the library makes one (the CLI: --format trec)
            out["average"] = self.average
        if self.n is not None:
            out["n"] = dict(self.n)
        if self.mapping is not None:
            out["mapping"] = dict(self.mapping)
        if per_query:
            out["per_query"] = {q: dict(v) for q, v in self.per_query.items()}
        out["query_sets"] = _query_sets(self)
        if per_query and self.membership is not None:   # what a slice's pairing needs
            out["membership"] = {q: list(names) for q, names in sorted(self.membership.items())}
        if self.by or self.query_sets is not None and self.slices is not None:  # as read back
            out["slices"] = {name: _slice_json(stats) for name, stats in self.slices.items()
                             if _slice_field(name) in self.by}
        if self.holdout is not None:
            out["holdout"] = self.holdout.to_dict(per_query)
        if self.scores is not None:
            out["scores"] = json.loads(json.dumps(self.scores))    # a deep copy
        if self.drift is not None:
            out["drift"] = json.loads(json.dumps(self.drift))
        if self.stages is not None:
            out["stages"] = _stages_json(self.stages, per_query, self.by)
        if self.unjudged is not None:
            out["unjudged_bounds"] = {"mean": dict(self.unjudged["mean"])}
            if per_query:
                out["unjudged_bounds"]["per_query"] = dict(self.unjudged["per_query"])
        return out

    def _repr_html_(self):
        """A notebook's view: the means as an HTML <table> (see render_html)."""
        return _report_html(self)


def _query_count(report):
    """How many queries a report scored (see Report.scored_count)."""
    return len(report.per_query) if report.scored_count is None else report.scored_count


def _query_sets(report):
    """What a report records of which queries each mean is over, without
    naming them: {population: record}, the populations "all" (every scored
    query not held out), each slice and the hold-out, each record a _query_set of the scored queries with, under
    "measures", that of each measure whose mean is over other queries (a
    character measure, a judge field, a set-level measure's cells).

    >>> r = evaluate({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": ["a"]}, k=1, measures="mrr")
    >>> sets = _query_sets(r)
    >>> sorted(sets), sets["all"]["queries"], sets["all"]["sha256"] == _members_sha256(["q1", "q2"])
    (['all'], 2, True)
    """
    if report.query_sets is not None:
        return report.query_sets      # read back from JSON
    out = {"all": _population_record(report.per_query, report.measures, report.cells)}
    members = {}
    for qid, names in (report.membership or {}).items():
        for name in names:
            members.setdefault(name, []).append(qid)
    for name, qids in sorted(members.items()):
        rows = {q: report.per_query[q] for q in qids if q in report.per_query}
        cells = report.cells and {q: report.cells[q] for q in qids if q in report.cells}
        out[name] = _population_record(rows, report.measures, cells)
    held = report.holdout
    if held is not None and held.per_query is not None:
        out[held.slice] = _population_record(held.per_query, report.measures, anonymous=True)
    return out


def _population_record(values, measures, cells=None, anonymous=False):
    """The record of one population (see _query_sets): ``values`` its
    per-query values, ``cells`` those of its set-level measures.  An
    ``anonymous`` one (the hold-out's) gives a measure's count alone, so
    that no subset of its queries is hashed (see _Side)."""
    record = _query_set(list(values))
    other = {}
    counts = collections.Counter(itertools.chain.from_iterable(values.values()))
    for m in measures:
        if counts[m] == len(values):
            continue        # the population's own queries (a subset of the same size)
        ids = [q for q, v in values.items() if m in v]
        if not ids and cells:
            ids = [q for q, c in cells.items() if m in c]
        elif not ids:
            continue        # a set-level measure without cells: the population's record
        other[m] = {"queries": len(ids)} if anonymous else _query_set(ids)
    if other:
        record["measures"] = other
    return record


def _stages_json(stages, per_query, by):
    """A report's stages block as the JSON writes it (a copy): each query's
    stage only with ``per_query``, the slices of the ``by`` fields only (as
    the report's own slices)."""
    out = json.loads(json.dumps({key: value for key, value in stages.items()
                                 if key != "per_query" or per_query}))
    out["slices"] = {name: counts for name, counts in out.get("slices", {}).items()
                     if _slice_field(name) in by}
    return out


def _gated_average(report):
    """Refuse a report averaged as trec_eval does: its mean leaves out the
    queries the run lacks, so leaving a hard query out would raise it."""
    if report.average != "scored":
        raise EvalError("a report averaged as trec_eval does (average=%r) is never gated, "
                        "compared or saved as a baseline: its mean leaves out the queries "
                        "the run lacks" % report.average)


def _check_labelled_run(report):
    """Refuse to make a baseline of a report whose run meets no label (for
    some measures or all, see Report.unlabelled_run): those numbers are 0
    for a reason retrieval has no part in, and a baseline of them could never
    fail again.  judged@k and --allow-unlabelled-run score such a run; neither
    makes it a baseline."""
    if report.unlabelled_run:
        run = ((report.inputs or {}).get("run") or {}).get("path", "run")
        raise EvalError("%s: a run that meets no label is never saved as a baseline (no later "
                        "run could fall below its zeros): %s" % (run, report.unlabelled_run))


def _slice_field(name):
    """The field of a slice name: fields hold no '=', values may."""
    return name.partition("=")[0]


def _slice_json(stats):
    """A slice's stats as the JSON report writes them (copies)."""
    return {key: value if key == "queries" else type(value)(value)
            for key, value in stats.items()}


def _means_text(mean, shown=8):
    """``recall@5=0.6667 mrr@5=0.5000``: the first ``shown`` means.

    >>> _means_text({"a@1": 0.5, "b@1": 1.0, "c@1": 0.25}, shown=2)
    'a@1=0.5000 b@1=1.0000 (+1 more)'
    """
    items = list(mean.items())
    return " ".join("%s=%s" % (m, _fmt(v)) for m, v in items[:shown]) + (
        " (+%d more)" % (len(items) - shown) if len(items) > shown else "")


class HeldOut(NamedTuple):
    """The held-out slice of a report or a baseline: scored and gated on its
    own, and only its counts and means are ever written.  ``queries`` counts
    its scored queries, ``unscored`` and ``missing`` (from the run) some of
    the others; ``members_sha256`` is the sha256 of its query ids (see
    _members_sha256), so a baseline tells that the hold-out changed without
    naming any of them.  ``per_query`` and ``ids`` (its unscored and missing
    ids) are kept for the gate and written only when ``revealed``
    (``--reveal-holdout``); a baseline holds ``per_query`` only if revealed,
    and else the record of which queries its means are over (see
    _query_sets): no hash per id, which would name an id as guessable as
    ``q17``.  Its repr shows counts and means alone.
    """
    slice: str
    mean: Dict[str, float]
    n: Optional[Dict[str, int]]
    queries: int
    unscored: int
    missing: int
    members_sha256: str
    revealed: bool = False
    per_query: Optional[Dict[str, Dict[str, float]]] = None
    ids: Optional[Dict[str, Tuple[str, ...]]] = None

    def __repr__(self):
        return ("HeldOut(%r: %d scored, %d unscored, %d missing from the run; mean %r; %s)"
                % (self.slice, self.queries, self.unscored, self.missing, self.mean,
                   "revealed" if self.revealed else "per-query values hidden"))

    def to_dict(self, per_query=False):
        """The JSON form: counts and means; the ids and, with ``per_query``,
        the per-query values only when revealed."""
        out = {"slice": self.slice, "queries": self.queries, "unscored": self.unscored,
               "missing_from_run": self.missing, "mean": dict(self.mean),
               "revealed": self.revealed, "members_sha256": self.members_sha256}
        if self.n is not None:
            out["n"] = dict(self.n)
        if self.revealed:
            ids = self.ids or {}
            out["ids"] = {"unscored": list(ids.get("unscored", ())),
                          "missing_from_run": list(ids.get("missing", ()))}
            if per_query and self.per_query is not None:
                out["per_query"] = {q: dict(v) for q, v in self.per_query.items()}
        return out


class Baseline(NamedTuple):
    """Numbers a report is gated against (see :func:`load_baseline`).

    ``rel`` is the relevance threshold the numbers were made with: it decides
    which queries are scored, so a baseline only gates reports of the same rel.
    ``meta`` and ``label_sha256`` are the report's (None: not recorded).
    ``scores`` holds the score files' inputs and each field's range.
    ``slices`` holds the means of every slice (``{"source=real": {measure:
    mean}}``), ``membership`` the slices of each query in any, ``holdout`` the
    held-out slice's counts and means (see :class:`HeldOut`).  ``query_sets``
    records which queries each mean is over (see _query_sets; None: not
    recorded, as in a file of means): what lets a baseline of means alone
    tell a changed test set.  ``min_score`` and ``trim_label_whitespace``
    are the scoring policies it was made with (the gate refuses others).
    """
    mean: Dict[str, float]
    per_query: Optional[Dict[str, Dict[str, float]]] = None
    inputs: Optional[Dict[str, dict]] = None
    source: str = "<baseline>"
    rel: int = 1
    meta: Optional[Dict[str, str]] = None
    label_sha256: Optional[Dict[str, str]] = None
    slices: Optional[Dict[str, Dict[str, float]]] = None
    membership: Optional[Dict[str, Tuple[str, ...]]] = None
    holdout: Optional[HeldOut] = None
    min_score: Optional[float] = None
    scores: Optional[dict] = None     # {"inputs": [...], "ranges": {field: [lo, hi]}}
    query_sets: Optional[dict] = None  # {population: record}: see _query_sets
    stages: Optional[dict] = None     # the settings, counts and per-query stages (Report.stages)
    trim_label_whitespace: bool = False     # span labels narrowed past whitespace


class MeasureChange(NamedTuple):
    """One baseline measure against the current report, over every scored
    query (``slice`` None) or over one slice (``"source=real"``).

    ``baseline`` and ``current`` are the two means over the same queries: the
    ``n`` queries both sides scored for the measure (see _paired_view).
    ``removed`` counts the queries the baseline scored and the report does
    not, ``added`` the new ones: neither is in either mean.  Compared on
    the means alone (a side without per-query values), ``n`` is the count
    both records agree on, or None when the baseline records none.  A
    ``missing`` row says why in ``reason``.

    ``status`` is one of ``regressed``, ``missing``, ``dropped within tolerance``,
    ``dropped, not significant``, ``unchanged``, ``improved``.  ``p_value`` (the
    Holm-adjusted randomization p) is set by the significant gate only.
    ``name`` is what the gate calls it: ``recall@5``, ``source=real: recall@5``.

    When the report holds unjudged bounds (a gated CLI run scores them):
    ``judged`` is judged@k at the measure's cutoff over the queries its mean
    is over (None: not known, as for the hold-out); ``undecided`` is set on a
    regression that the unjudged ids in the top k could explain (the upper
    bound of the current mean is within the tolerance): ``{"ids": N unjudged
    ids in the top k over those queries, "upper": that bound, "named":
    ["query:id", ...] when N <= 5, else []}``.  It stays a regression: the
    gate fails until the ids are labelled.

    ``suspect`` is ``"judge drift"`` on a regression of a judge score
    (``score(...)``) when the report's drift check (``Report.drift``: --drift,
    or :func:`judge_drift`) failed: the judge itself moved, so the drop may be
    the judge's.  It stays a regression.

    ``main_stage`` is set on a regression of the answer field's score
    (``score(field=F)``, F the report's stages field) when the gate could
    attribute its newly failing queries (see GateResult.attribution):
    ``"retrieval"`` when more of them lack their evidence now,
    ``"generation"`` when more have it, ``"alike"`` on a tie.
    ``status`` ``no comparable queries`` is a measure whose population the
    run decides (answer_given_evidence) with no query in it on both sides:
    nothing to compare, not a failure.
    """
    measure: str
    baseline: float
    current: Optional[float]
    delta: Optional[float]
    status: str
    p_value: Optional[float] = None
    slice: Optional[str] = None
    judged: Optional[float] = None
    undecided: Optional[dict] = None
    suspect: Optional[str] = None
    n: Optional[int] = None
    removed: int = 0
    added: int = 0
    reason: Optional[str] = None
    main_stage: Optional[str] = None

    @property
    def name(self):
        return self.measure if self.slice is None else "%s: %s" % (self.slice, self.measure)


class QueryDrop(NamedTuple):
    """One query whose value fell by more than the tolerance since the baseline."""
    measure: str
    query: str
    baseline: float
    current: float
    delta: float


class MetaChange(NamedTuple):
    """One meta key whose value differs from the baseline's (None: absent)."""
    key: str
    baseline: Optional[str]
    current: Optional[str]


class MembershipChange(NamedTuple):
    """A query whose slices changed since the baseline: the slices it
    ``left`` and those it ``joined``."""
    query: str
    left: Tuple[str, ...]
    joined: Tuple[str, ...]


class GateResult(NamedTuple):
    """The verdict of :func:`gate`.  In a boolean context it is that verdict,
    so ``assert gate(report, baseline)`` fails on a failed gate.
    ``attribution`` is None unless both the report and the baseline hold
    each query's answer stage (Report.stages): then, per answer field, which
    stage the answers that changed moved through (see _attribution).

    >>> r = evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, measures="mrr")
    >>> bool(gate(r, {"mrr@2": 0.9})), bool(gate(r, {"mrr@2": 0.5}))
    (False, True)
    """
    passed: bool
    changes: Tuple[MeasureChange, ...]
    tolerance: str
    notes: Tuple[str, ...]
    mode: str = "tolerance"
    queries_added: Tuple[str, ...] = ()
    queries_removed: Tuple[str, ...] = ()
    query_drops: Optional[Tuple[QueryDrop, ...]] = None   # None: a means-only baseline
    meta_changes: Tuple[MetaChange, ...] = ()
    labels_changed: Optional[Tuple[str, ...]] = None    # None: no label hashes to compare
    moved: Tuple[MembershipChange, ...] = ()
    slice_tolerances: Optional[Dict[str, str]] = None   # --slice-max-drop, as given
    removed_failing: int = 0       # --fail-on-removed: the removed queries that fail it
    # {field: {"newly_failed", "retrieval", "lost_evidence", "generation", "newly_passed",
    # "p", "queries"}}: which stage the answers that changed moved through (_attribution)
    attribution: Optional[Dict[str, dict]] = None

    def __bool__(self):
        return bool(self.passed)

    def __repr__(self):
        """The verdict and its counts, never the per-query drops."""
        names = [c.name for c in self.regressions]
        missing = sum(c.status == "missing" for c in self.regressions)
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        return "<GateResult %s: %s%s of %d (max drop %s)%s>" % (
            "PASSED" if self.passed else "FAILED",
            _plural(len(names) - missing, "regression", "regressions"),
            ", %d missing" % missing if missing else "", len(self.changes),
            self.tolerance, " " + shown if names else "")

    def _repr_markdown_(self):
        """Jupyter's Markdown display: the verdict and the gate table."""
        return _gate_result_markdown(self)

    @property
    def regressions(self):
        return tuple(c for c in self.changes if c.status in ("regressed", "missing"))

    @property
    def improvements(self):
        return tuple(c for c in self.changes if c.status == "improved")

    def to_dict(self):
        return {
            "passed": self.passed,
            "mode": self.mode,
            "max_drop": self.tolerance,
            "slice_max_drop": dict(self.slice_tolerances or {}),
            "regressions": [c._asdict() for c in self.regressions],
            "improvements": [c._asdict() for c in self.improvements],
            "changes": [c._asdict() for c in self.changes],
            "meta_changes": [c._asdict() for c in self.meta_changes],
            "per_query": None if self.query_drops is None else {
                "queries_added": list(self.queries_added),
                "queries_removed": list(self.queries_removed),
                "labels_changed": (None if self.labels_changed is None
                                   else list(self.labels_changed)),
                "regressions": [d._asdict() for d in self.query_drops],
                "moved": [{"query": m.query, "left": list(m.left), "joined": list(m.joined)}
                          for m in self.moved]},
            "notes": list(self.notes),
            "removed_failing": self.removed_failing,
            "attribution": json.loads(json.dumps(self.attribution or {})),
        }

    def _repr_html_(self):
        """A notebook's view: the verdict and the gate table in HTML."""
        return _gate_html(self)
