"""Stages: which stage broke, retrieval or generation.

Each scored, answerable query with an answer verdict (--answer FIELD: the
mean of the query's judge runs, passing at the field's --pass-threshold X,
a boolean when true) is in one stage, by whether the top k hold its
evidence (complete(unit=U)@k, or success with --stages-evidence success)
and whether its answer passes:

  pass              evidence retrieved, answer passes
  generation_miss   evidence retrieved, answer fails: the context held what was needed
  retrieval_miss    evidence not retrieved, answer fails
  unsupported_pass  evidence not retrieved, answer passes: model memory, or a missing label

Queries stated unanswerable, answerable queries without a verdict and
verdicts on queries without a relevant label are counted apart, never in
these four.  _with_stages joins a report of both tiers with the verdicts:
the stage measures (answer_given_evidence@k, answer_without_evidence@k, see
03_measures: the scorer gives them each query's evidence) get their values
and populations, and the report its stages block (Report.stages).
_attribution says, against a baseline's per-query stages, which stage the
answers that changed moved through (the gate's attribution line).

Uses: 01_head to 13_judge_scores.  Used by: baselines, the gate, reports,
the report reader, HTML, the command line.
"""

STAGES = ("pass", "generation_miss", "retrieval_miss", "unsupported_pass")
_PASSING = frozenset(("pass", "unsupported_pass"))
_STAGE_SETTINGS = ("field", "threshold", "k", "unit", "evidence", "cover")
_STAGE_MEASURES = ("answer_given_evidence", "answer_without_evidence")


def _stage(found, passed):
    """The stage of a query: whether the top k hold its evidence, whether its
    answer passes.

    >>> [_stage(found, passed) for found in (True, False) for passed in (True, False)]
    ['pass', 'generation_miss', 'unsupported_pass', 'retrieval_miss']
    """
    if found:
        return "pass" if passed else "generation_miss"
    return "unsupported_pass" if passed else "retrieval_miss"


def _is_stage_measure(m):
    """True for a measure that joins retrieval with the answer verdicts."""
    return _REGISTRY[parse_measure(m).name].view == "stages"


def _midpoint(lo, hi):
    """The default pass threshold of a field of range [lo, hi]: its midpoint.

    >>> _midpoint(0.0, 1.0), _midpoint(1.0, 5.0), _midpoint(5.0, 1.0)
    (0.5, 3.0, 3.0)
    """
    return (lo + hi) / 2 + 0.0


def _checked_threshold(field, value, scores, what):
    """A pass threshold of ``field`` in its own units (None: the midpoint of
    its range), checked to lie in the range; returns it as a float."""
    lo, hi = scores.ranges[field]
    if value is None:
        return _midpoint(lo, hi)
    x = _as_score(value, what)
    if not min(lo, hi) <= x <= max(lo, hi):
        raise EvalError("%s, %s, is outside the range [%s, %s] of %s"
                        % (what, _number_text(x), _number_text(lo), _number_text(hi), field))
    return x + 0.0


def _stage_settings(field, files, *, threshold=None, k=DEFAULT_K, unit="id",
                    evidence="complete", cover=COVER.default):
    """The settings of the stages block, checked: ``field`` a score field of
    ``files`` ({field: Scores}), ``threshold`` in its units (default the
    midpoint of its range), one cutoff ``k``, the ``unit``, the
    ``evidence`` rule and, for unit=evidence, the ``cover``.

    >>> s = load_scores(io.StringIO('{"query_id": "q1", "correct": true}'))
    >>> _stage_settings("correct", {"correct": s}, k=3)
    {'field': 'correct', 'threshold': 0.5, 'k': 3, 'unit': 'id', 'evidence': 'complete'}
    """
    _checked_field_name(field, "--answer (answer=)")
    if files is not None and field not in files:
        raise EvalError("--answer %s: no score file has the field %r (fields: %s)"
                        % (field, field, ", ".join(files) or "none"))
    if unit not in UNITS:
        raise EvalError("unit must be one of %s, got %r" % (", ".join(UNITS), unit))
    if evidence not in EVIDENCE_RULES:
        raise EvalError("--stages-evidence must be one of %s, got %s"
                        % (", ".join(EVIDENCE_RULES), _short_repr(evidence)))
    out = {"field": field,
           "threshold": None if files is None else _checked_threshold(
               field, threshold, files[field], "the pass threshold of %s" % field),
           "k": _cutoff_int(k, "--stages-k (stages_k=)"), "unit": unit, "evidence": evidence}
    if unit == "evidence":
        out["cover"] = _param_value(_REGISTRY["answer_given_evidence"], "cover", cover, "cover")
    return out


def evaluate_stages(qrels, run, scores, answer=None, *, k=DEFAULT_K, measures=None, rel=1,
                    gain="exponential", unit="id", pass_threshold=None, stages_k=None,
                    stages_evidence=None, allow_missing_scores=False, skip_extra_queries=False,
                    chunks=None, doc_sep=None, queries=None, by=(), holdout=None, as_of=None,
                    reveal_holdout=False, min_score=None, meta=None):
    """Both tiers in one :class:`Report`, joined by the answer verdicts: the
    run against ``qrels`` (as :func:`evaluate`) beside the judge ``scores``
    (a :class:`Scores` or a list, as :func:`evaluate_scores`), each measure
    over its own queries, every query of the qrels needing a score unless
    ``allow_missing_scores``.  ``measures`` names both kinds
    (``score(field=F)`` for a judge field; default: evaluate's and every
    field) and the stage measures.

    ``answer`` names the field that is each query's answer verdict (the
    command line's --answer): its stage at one cutoff (``stages_k``,
    default the smallest of ``k``) by whether the top k hold its evidence
    (every relevant ``unit``, or one with ``stages_evidence="success"``)
    and whether the verdict passes (at ``pass_threshold[answer]`` in the
    field's units, default the midpoint of its range; a boolean when true).
    The report then holds ``stages`` (see :class:`Report`) and, unless
    ``measures`` names stage measures, answer_given_evidence@k and
    answer_without_evidence@k; :func:`gate` attributes its changes.  A
    verdict for a query the qrels (and ``queries``) do not hold is an error
    unless ``skip_extra_queries``.

    >>> s = load_scores(io.StringIO('{"query_id": "q1", "ok": true}\\n{"query_id": "q2", "ok": true}\\n'
    ...                             '{"query_id": "q3", "ok": false}\\n'))
    >>> r = evaluate_stages({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}},
    ...                     {"q1": ["a"], "q2": ["x"], "q3": ["c"]}, s, "ok", k=1, measures="recall")
    >>> r.stages["counts"], r.stages["per_query"]
    ({'pass': 1, 'generation_miss': 1, 'retrieval_miss': 0, 'unsupported_pass': 1}, {'q1': 'pass', 'q2': 'unsupported_pass', 'q3': 'generation_miss'})
    >>> r.mean["answer_given_evidence(field=ok)@1"], r.mean["answer_without_evidence(field=ok)@1"]
    (0.5, 1.0)
    """
    scores = _score_list(scores)
    files = _files_by_field(scores)
    meta = _checked_meta(meta)
    tiers = _Tiers(measures, k, files, rel=rel, gain=gain, unit=unit, answer=answer,
                   pass_threshold=pass_threshold, stages_k=stages_k,
                   stages_evidence=stages_evidence)
    testset = _test_set(queries, by, holdout, as_of, reveal_holdout, "scored")
    qrels = _validated(qrels, "qrels", _check_qrels_query)
    report = _evaluate(qrels, run, tiers.run_measures, rel, "scored", skip_extra_queries,
                       chunks, doc_sep, testset, min_score, False)
    return _with_meta(tiers.joined(report, scores, qrels, testset, allow_missing_scores,
                                   skip_extra_queries), meta)


def _score_list(scores):
    """``scores`` as a list of Scores (one Scores, or a list of them)."""
    scores = [scores] if isinstance(scores, Scores) else scores
    if not isinstance(scores, (list, tuple)) or not scores or not all(
            isinstance(one, Scores) for one in scores):
        raise EvalError("scores must be a Scores (see load_scores) or a list of them")
    return list(scores)


class _Tiers:
    """What a report of both tiers is made of, from evaluate_stages'
    options: the measures the run is scored with (``run_measures``: the
    retrieval ones, then the stage plan's), the judge score names
    (``judged``: None for every field), the pass ``thresholds`` and the
    _StagePlan (``plan``, None without stage measures or ``answer``).
    ``files`` are the score files by field ({field: Scores}).  A shard
    scoring rows apart reads the same options without files (None, and no
    plan): its stage measures have no threshold (_shard_measure), and
    ``shard_measures``, the same on the driver and on every shard, are
    what a shard scores.

    >>> s = load_scores(io.StringIO('{"query_id": "q1", "ok": true}'))
    >>> [str(m) for m in _Tiers("recall@5", 5, {"ok": s}, answer="ok",
    ...                         pass_threshold={"ok": 1}).run_measures]
    ['recall@5', 'answer_given_evidence(field=ok,threshold=1.0)@5', 'answer_without_evidence(field=ok,threshold=1.0)@5']
    >>> [str(m) for m in _Tiers("recall@5", 5, None, answer="ok").shard_measures]
    ['recall@5', 'answer_given_evidence(field=ok)@5', 'answer_without_evidence(field=ok)@5']
    """

    def __init__(self, measures, k, files, *, rel=1, gain="exponential", unit="id",
                 answer=None, pass_threshold=None, stages_k=None, stages_evidence=None):
        retrieval, self.judged, stage_names = _tier_names(measures)
        self.thresholds = dict(pass_threshold or {})
        rel = _positive_int(rel, "rel")
        settings = None
        if answer is not None:
            settings = _stage_settings(
                answer, files, threshold=self.thresholds.get(answer),
                k=stages_k if stages_k is not None else parse_cutoffs(k)[0], unit=unit,
                evidence=stages_evidence or "complete")
            if self.judged is not None and not any(_field_of(m) == answer for m in self.judged):
                self.judged.append("score(field=%s)" % answer)
        elif stages_k is not None or stages_evidence is not None:
            raise EvalError("stages_k and stages_evidence apply with answer= (the verdict field)")
        named = _stage_measures(stage_names, k, files, rel=rel, unit=unit,
                                thresholds=self.thresholds, evidence=stages_evidence,
                                answer=answer)
        self.retrieval = () if retrieval == [] else tuple(
            resolve_measures(retrieval, k, rel=rel, gain=gain, unit=unit))
        plan = (_stage_plan(named, settings, files, rel)
                if settings is not None or named else None)
        stage = plan.measures if plan else ()
        if not self.retrieval and not stage:
            raise EvalError("measures names no measure of the run (name one, e.g. recall@5, "
                            "or score the judge alone with evaluate_scores)")
        self.plan = None if files is None else plan
        self.run_measures = self.retrieval + tuple(dict.fromkeys(stage))
        # What a shard scores may not hang on a threshold (which measure is the
        # stages block's does): the named ones and both at the settings, without.
        ours = [] if settings is None else [
            _stage_measure(name, settings, None, rel) for name in _STAGE_MEASURES]
        self.shard_measures = self.retrieval + tuple(dict.fromkeys(
            [_shard_measure(m) for m in named] + ours))

    def joined(self, report, scores, qrels, testset, allow_missing, skip_extra=False):
        """The run's ``report`` (scored with run_measures) with the judge
        ``scores`` beside it and, with a plan, joined by the verdicts."""
        report = _with_scores(report, _evaluate_scores(scores, self.judged, testset,
                                                       allow_missing, self.thresholds, qrels,
                                                       skip_extra))
        if self.plan is None:
            return report
        stated = frozenset() if testset is None else frozenset(
            q for q, info in testset.queries.items() if info.get("answerable") is False)
        return _with_stages(report, self.plan, stated=stated, qrels=qrels, testset=testset,
                            skip_extra=skip_extra)


def _tier_names(measures):
    """(retrieval names, judge score names, stage measure names) of
    ``measures`` (None: the defaults of each: evaluate's, every field, none;
    a retrieval list empty when only the other kinds are named).

    >>> _tier_names("recall@5,score(field=ok),answer_given_evidence(field=ok)@5")
    (['recall@5'], ['score(field=ok)'], ['answer_given_evidence(field=ok)@5'])
    """
    if measures is None:
        return None, None, []
    if isinstance(measures, str):
        measures = _split_top_level(measures)
    if not isinstance(measures, (list, tuple)):
        raise EvalError("measures must be a list of names or one comma-separated string, got %s"
                        % _short_repr(measures))
    tiers = ([], [], [])
    for item in measures:
        if not isinstance(item, (str, Measure)):
            raise EvalError("a measure name must be a string, got %r" % (item,))
        name = item.name if isinstance(item, Measure) else _read_name(item).measure
        view = _REGISTRY[name].view
        tiers[1 if view == "scores" else 2 if view == "stages" else 0].append(item)
    return tiers[0], tiers[1] or None, tiers[2]


def _stage_measure(name, settings, scores, rel=1):
    """The stage measure ``name`` at the stages ``settings`` (its threshold
    left out at the midpoint of the field's range, as every default is).

    >>> s = load_scores(io.StringIO('{"query_id": "q1", "grade": 4}'), ranges={"grade": (1, 5)})
    >>> settings = _stage_settings("grade", {"grade": s}, threshold=4, k=5, unit="doc")
    >>> str(_stage_measure("answer_given_evidence", settings, s))
    'answer_given_evidence(field=grade,threshold=4.0,unit=doc)@5'
    """
    params = {"field": settings["field"], "evidence": settings["evidence"],
              "unit": settings["unit"], "rel": rel, "threshold": settings["threshold"],
              "cover": settings.get("cover", COVER.default)}
    return _canonical_stage_measure(Measure(name, settings["k"], tuple(sorted(params.items()))),
                                    None if scores is None else {settings["field"]: scores})


def _canonical_stage_measure(m, files):
    """``m`` with its threshold checked against its field's range and left
    out at the midpoint (the default), its other defaults left out.  Without
    score ``files`` (a shard's, which has no verdicts) the threshold cannot
    be checked: it is left out (see _shard_measure)."""
    if files is None:
        return _shard_measure(m)
    params = dict(m.params)
    field = params["field"]
    if field not in files:
        raise EvalError("%s: no score file has the field %r (fields: %s)"
                        % (m, field, ", ".join(files) or "none"))
    lo, hi = files[field].ranges[field]
    threshold = _checked_threshold(field, params.get("threshold"), files[field],
                                   "%s: the threshold" % (m,))
    params["threshold"] = None if threshold == _midpoint(lo, hi) else threshold
    spec = _REGISTRY[m.name]
    return m._replace(params=tuple(sorted((key, v) for key, v in params.items()
                                          if v != spec.accepts[key].default)))


def _shard_measure(m):
    """The stage measure ``m`` as a shard scoring rows apart names it: without
    its threshold, which only the score files can check and which does not
    change what the scorer gives a stage measure (whether the top k hold the
    query's evidence, see answer_given_evidence).  The shard scores these
    (see _Tiers); the driver's stage measures read them.

    >>> str(_shard_measure(parse_measure("answer_without_evidence(field=ok,threshold=0.7,unit=doc)@5")))
    'answer_without_evidence(field=ok,unit=doc)@5'
    """
    spec = _REGISTRY[m.name]
    return m._replace(params=tuple((key, v) for key, v in m.params
                                   if key != "threshold" and v != spec.accepts[key].default))


def _stage_measures(items, k, files, *, rel=1, unit="id", thresholds=None, evidence=None,
                    answer=None):
    """The stage measures of ``items`` (names, or Measures), in order: what a
    name leaves out is filled in as --rel and --unit fill in every name,
    and from --answer (``answer``: the field), the --pass-threshold of its
    field (``thresholds``, in the field's units) and --stages-evidence
    (``evidence``); a name without @k is taken at every cutoff of ``k``.
    Each field must be in ``files`` ({field: Scores}); a threshold at its
    field's midpoint is left out.  Without ``files`` (a shard's): each
    without its threshold (_shard_measure), once.

    >>> s = load_scores(io.StringIO('{"query_id": "q1", "ok": true}'))
    >>> [str(m) for m in _stage_measures(["answer_given_evidence(field=ok)"], "3,5", {"ok": s},
    ...                                  thresholds={"ok": 1}, evidence="success")]
    ['answer_given_evidence(evidence=success,field=ok,threshold=1.0)@3', 'answer_given_evidence(evidence=success,field=ok,threshold=1.0)@5']
    """
    out = []
    for item in items:
        if isinstance(item, Measure):
            found = [_checked_measure(item)]
        else:
            name = _read_name(item)
            overrides = {"rel": rel}
            if unit != "id":
                overrides["unit"] = unit
            if evidence is not None:
                overrides["evidence"] = evidence
            if answer is not None:
                overrides["field"] = answer
            field = name.params.get("field", answer)
            if field in (thresholds or {}):
                overrides["threshold"] = thresholds[field]
            found = [_complete(name, c, overrides)
                     for c in (parse_cutoffs(k) if _expands(name) else (None,))]
        for m in found:
            if _REGISTRY[m.name].view != "stages":
                raise EvalError("%s is not a stage measure" % (m,))
            m = _canonical_stage_measure(m, files)
            if m not in out:
                out.append(m)
    return out


class _StagePlan(NamedTuple):
    """What _with_stages joins: the stage ``measures`` the scorer gives each
    query's evidence (those ``shown``, then the block's when it is not one of
    them), the name whose evidence the stages block reads (``block``, None
    without --answer), the block's ``settings`` and the score ``files``
    ({field: Scores}) the verdicts come from."""
    settings: Optional[dict]
    measures: Tuple[Measure, ...]
    shown: Tuple[str, ...]
    block: Optional[str]
    files: Dict[str, "Scores"]


def _stage_plan(named, settings, files, rel=1):
    """The _StagePlan of the stage measures ``named`` (see _stage_measures)
    and the stages ``settings`` (None: no stages block): with settings and no
    stage measure named, both stage measures at the settings.

    >>> s = load_scores(io.StringIO('{"query_id": "q1", "ok": true}'))
    >>> plan = _stage_plan([], _stage_settings("ok", {"ok": s}), {"ok": s})
    >>> plan.shown, plan.block
    (('answer_given_evidence(field=ok)@5', 'answer_without_evidence(field=ok)@5'), 'answer_given_evidence(field=ok)@5')
    """
    named = list(named)
    block = None
    if settings is not None:
        scores = None if files is None else files[settings["field"]]
        ours = [_stage_measure(name, settings, scores, rel) for name in _STAGE_MEASURES]
        if not named:
            named = ours
        # Both stage measures read the same evidence: either one at the settings serves.
        block = next((m for m in named if m in ours), ours[0])
    measures = named + ([block] if block is not None and block not in named else [])
    return _StagePlan(settings, tuple(measures), tuple(str(m) for m in named),
                      None if block is None else str(block), files)


def _passes(value, threshold):
    """Whether a verdict passes: the query's mean on [0, 1] at or above the
    threshold mapped onto [0, 1] (within 1e-9: float rounding), which is at
    or above X in the field's units, or at or below it for a field declared
    lower is better."""
    return value >= threshold - FLOAT_SLACK


def _mapped_threshold(m, files):
    """(field, threshold on [0, 1]) of a stage measure."""
    params = dict(m.params)
    field = params["field"]
    lo, hi = files[field].ranges[field]
    x = params.get("threshold")
    return field, 0.5 if x is None else (x - lo) / (hi - lo) + 0.0


def _with_stages(report, plan, *, stated=frozenset(), qrels=None, testset=None,
                 skip_extra=False):
    """``report`` (both tiers, its stage measures holding each query's
    evidence: see answer_given_evidence) joined with the answer verdicts of
    ``plan``: the stage measures get their values (1 when the answer passes)
    over their halves, their means, n, slices and hold-out; with settings,
    the report gets its stages block (see Report.stages).  ``stated`` are the
    queries stated unanswerable, ``qrels`` and ``testset`` the test set: a
    verdict for a query of neither is an error unless ``skip_extra``."""
    if report.average != "scored":
        raise EvalError("answer stages are not for trec_eval's average, which is never gated: "
                        "drop --answer or the average")
    calls = {str(m): (m.name,) + _mapped_threshold(m, plan.files) for m in plan.measures}
    verdicts = {field: plan.files[field].values(field) for _, field, _ in calls.values()}
    hidden = frozenset(calls) - set(plan.shown)
    members = set(qrels or ()) | set(testset.queries if testset is not None else ())
    if qrels is not None:
        _drop_stray_verdicts(verdicts, members)
    warnings = list(report.warnings)
    block = _stages_block(report, plan, calls, verdicts, stated, members, warnings)

    def staged(rows):
        return {q: _staged_row(q, row, calls, verdicts, hidden) for q, row in rows.items()}
    measures = tuple(m for m in report.measures if m not in hidden)
    per_query = staged(report.per_query)
    report = report._replace(measures=measures, per_query=per_query, warnings=tuple(warnings),
                             stages=block, **_stage_means(report.mean, report.n, per_query,
                                                          measures, calls))
    if report.unjudged is not None:
        report = report._replace(unjudged=dict(report.unjudged, mean={
            m: v for m, v in report.unjudged["mean"].items() if m not in hidden}))
    if report.membership is not None:
        report = report._replace(slices=_slice_stats(report, report.membership))
    held = report.holdout
    if held is not None and held.per_query is not None:
        rows = staged(held.per_query)
        report = report._replace(holdout=held._replace(per_query=rows, **_stage_means(
            held.mean, held.n, rows, measures, calls)))
    return report


def _stage_means(mean, n, per_query, measures, calls):
    """{"mean", "n"} of a population (the report's, the hold-out's) whose
    ``per_query`` rows hold the stage measures' values now: their means over
    their halves, the other measures' as they were (``mean``, ``n``: None
    when every measure was over every row); n None when every measure is
    over every row.

    >>> s = "answer_given_evidence(field=ok)@1"
    >>> _stage_means({"recall@1": 0.5}, None, {"a": {"recall@1": 1.0, s: 1.0},
    ...              "b": {"recall@1": 0.0}}, ("recall@1", s), {s: None})
    {'mean': {'recall@1': 0.5, 'answer_given_evidence(field=ok)@1': 1.0}, 'n': {'recall@1': 2, 'answer_given_evidence(field=ok)@1': 1}}
    """
    stage = [m for m in measures if m in calls]
    means, counts = _population_means(per_query, stage)
    counts = counts or dict.fromkeys(stage, len(per_query))
    out = {m: means[m] if m in calls else mean[m] for m in measures
           if m in (means if m in calls else mean)}
    total = {m: counts[m] if m in calls else (n or {}).get(m, len(per_query)) for m in measures}
    return {"mean": out,
            "n": None if all(v == len(per_query) for v in total.values()) else total}


def _staged_row(qid, row, calls, verdicts, hidden):
    """A query's values with each stage measure's evidence made its value: 1
    or 0 as the answer passes, kept in the measure's half only (and not
    kept without a verdict, nor for a hidden measure)."""
    out = {}
    for name, value in row.items():
        if name not in calls:
            out[name] = value
            continue
        kind, field, threshold = calls[name]
        verdict = verdicts[field].get(qid)
        if name in hidden or verdict is None:
            continue
        if (value == 1.0) == (kind == "answer_given_evidence"):
            out[name] = 1.0 if _passes(verdict, threshold) else 0.0
    return out


def _drop_stray_verdicts(verdicts, members):
    """No verdict of a query the test set does not hold takes a stage: such
    score lines are the stray-row rule's (_extra_score_queries: exit 2, or
    left out with --skip-extra-queries and said so, once), and are left out
    of the stages too."""
    for values in verdicts.values():
        for qid in [q for q in values if q not in members]:
            del values[qid]


def _stages_block(report, plan, calls, verdicts, stated, members, warnings):
    """The stages block of the report (None without settings): each query's
    stage at the settings, the counts, the queries counted apart, the
    counts of every slice and of the hold-out; a warning names the queries
    of the test set with a verdict and no relevant label."""
    settings = plan.settings
    if settings is None:
        return None
    _, field, threshold = calls[plan.block]

    def stages_of(rows):
        found = {q: row[plan.block] == 1.0 for q, row in rows.items() if plan.block in row}
        return ({q: _stage(f, _passes(verdicts[field][q], threshold))
                 for q, f in found.items() if q in verdicts[field]},
                [q for q in found if q not in verdicts[field]])
    per_query, no_verdict = stages_of(report.per_query)
    unlabelled = sorted(q for q in report.per_query if plan.block not in report.per_query[q]
                        and q in verdicts[field] and q not in stated and q in members)
    if unlabelled:
        warnings.append("%s a %s verdict and no relevant label: in no stage (label them to see "
                        "their stage): %s" % (_plural(len(unlabelled), "query has",
                                                      "queries have"), field,
                                              _preview(unlabelled)))
    block = dict(settings, counts=_stage_counts(per_query.values()),
                 apart={"unanswerable": (report.answerability or {}).get("unanswerable", 0),
                        "no_verdict": len(no_verdict), "unlabelled": len(unlabelled)},
                 slices=_slice_counts(per_query, report.membership),
                 per_query=dict(sorted(per_query.items())))
    held = report.holdout
    if held is not None and held.per_query is not None:
        block["holdout"] = {"slice": held.slice,
                            "counts": _stage_counts(stages_of(held.per_query)[0].values())}
    return block


def _stage_counts(stages):
    """{stage: count} of the four stages, in order.

    >>> _stage_counts(["pass", "retrieval_miss", "pass"])
    {'pass': 2, 'generation_miss': 0, 'retrieval_miss': 1, 'unsupported_pass': 0}
    """
    counts = dict.fromkeys(STAGES, 0)
    for stage in stages:
        counts[stage] += 1
    return counts


def _slice_counts(stages, membership):
    """{slice: stage counts} of every slice the membership names.

    >>> _slice_counts({"q1": "pass", "q2": "retrieval_miss"},
    ...               {"q1": ("a=1",), "q2": ("a=1", "b=2")})["b=2"]
    {'pass': 0, 'generation_miss': 0, 'retrieval_miss': 1, 'unsupported_pass': 0}
    """
    members = {}
    for qid, names in (membership or {}).items():
        for name in names:
            members.setdefault(name, []).append(qid)
    return {name: _stage_counts(stages[q] for q in qids if q in stages)
            for name, qids in sorted(members.items())}


def _check_same_stages(ours, theirs, source):
    """Refuse (EvalError, one line) to gate stages made with settings other
    than the baseline's: which stage a query is in means something else.

    >>> _check_same_stages({"field": "ok", "threshold": 0.5, "k": 5, "unit": "id",
    ...                     "evidence": "complete"}, {"field": "ok", "threshold": 0.5, "k": 3,
    ...                     "unit": "id", "evidence": "complete"}, "b.json")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: b.json was saved with other answer stages: k 3, now 5; give its settings (--answer ok --pass-threshold ok=0.5 --stages-k 3 --unit id --stages-evidence complete) or save a new baseline
    """
    if ours is None or theirs is None:
        return
    differ = [key for key in _STAGE_SETTINGS if ours.get(key) != theirs.get(key)]
    if differ:
        raise EvalError("%s was saved with other answer stages: %s; give its settings (%s) or "
                        "save a new baseline" % (source, ", ".join(
                            "%s %s, now %s" % (key, _setting_text(theirs.get(key)),
                                               _setting_text(ours.get(key))) for key in differ),
                            _settings_options(theirs)))


def _setting_text(value):
    if value is None:
        return "none"
    return _number_text(value) if isinstance(value, float) else str(value)


def _settings_options(settings):
    """The command-line options that give a stages block's settings."""
    return "--answer %s --pass-threshold %s=%s --stages-k %d --unit %s --stages-evidence %s" % (
        settings["field"], settings["field"], _number_text(settings["threshold"]),
        settings["k"], settings["unit"], settings["evidence"])


def _attribution(then, now, k):
    """Which stage the answers that changed moved through: ``then`` and
    ``now`` map each query to its stage (the baseline's and the report's).
    Over the queries both hold (``paired``), those that moved from passing
    (pass, unsupported_pass) to failing (``newly_failed``): ``retrieval``
    those whose top ``k`` lack their evidence now (``lost_evidence`` of them
    held it in the baseline), ``generation`` those whose top k hold it
    (``kept_evidence`` of them held it then too); those that moved the other
    way (``newly_passed``); the exact McNemar p of the pass/fail change
    (``p``); and the ids of each group (``queries``).

    >>> a = _attribution({"q1": "pass", "q2": "pass", "q3": "unsupported_pass",
    ...                   "q4": "retrieval_miss"}, {"q1": "retrieval_miss", "q2": "generation_miss",
    ...                   "q3": "retrieval_miss", "q4": "pass"}, 5)
    >>> [a[key] for key in ("newly_failed", "retrieval", "lost_evidence", "generation",
    ...                     "newly_passed", "p")]      # p: 2 * (1 + 4) / 2**4
    [3, 2, 1, 1, 1, 0.625]
    """
    both = sorted(then.keys() & now.keys())
    failed = [q for q in both if then[q] in _PASSING and now[q] not in _PASSING]
    retrieval = [q for q in failed if now[q] == "retrieval_miss"]
    generation = [q for q in failed if now[q] == "generation_miss"]
    passed = [q for q in both if then[q] not in _PASSING and now[q] in _PASSING]
    return {"k": k, "paired": len(both), "newly_failed": len(failed),
            "retrieval": len(retrieval),
            "lost_evidence": sum(1 for q in retrieval if then[q] == "pass"),
            "generation": len(generation),
            "kept_evidence": sum(1 for q in generation if then[q] == "pass"),
            "newly_passed": len(passed), "p": mcnemar_p(len(failed), len(passed)),
            "queries": {"retrieval": retrieval, "generation": generation,
                        "newly_passed": passed}}


def _main_stage(attribution):
    """The stage most newly failing answers broke at: "retrieval",
    "generation", or "alike" on a tie; None when none newly fails.

    >>> _main_stage({"newly_failed": 3, "retrieval": 2, "generation": 1})
    'retrieval'
    """
    if not attribution["newly_failed"]:
        return None
    retrieval, generation = attribution["retrieval"], attribution["generation"]
    if retrieval == generation:
        return "alike"
    return "retrieval" if retrieval > generation else "generation"
