"""The report reader: a JSON report read back (load_report, Report.from_dict).

Every field is checked as load_baseline checks a baseline's, so a report
read back is gated, compared and rendered as the run it came from could
be, within what the JSON kept (see Report.from_dict).

Uses: 01_head, 02_records, 04 and 05 (names, readers), 08_provenance,
11_evaluation, 14_baselines, 15_gate, 16_reports.  Used by: Report.from_dict
(02_records).
"""


# --- reading a JSON report back -------------------------------------------------

def _report_from_dict(data):
    """The Report of a JSON report (see Report.from_dict); EvalError naming what
    is wrong when ``data`` is not one."""
    if isinstance(data, dict) and data.get("format") == BASELINE_FORMAT:
        raise EvalError("a baseline (read it with load_baseline), not a JSON report")
    if not isinstance(data, dict) or not isinstance(data.get("tool"), dict) \
            or data["tool"].get("name") != "rag_eval" or "measures" not in data:
        raise EvalError("not a rag_eval JSON report (--format json)")
    try:
        return _report_fields(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, EvalError):
            raise
        raise EvalError("not a rag_eval JSON report (--format json): %s %s"
                        % (type(exc).__name__, _short_repr(str(exc)))) from None


def _report_fields(data):
    """The Report of a parsed JSON report, every field it reads checked as
    load_baseline checks a baseline (names that parse, values in [0, 1],
    counts, lists of strings): an EvalError naming the field, never a later
    TypeError."""
    measures = tuple(_checked_measure_name(m, "measures") for m in _checked_list(
        data["measures"], "measures"))
    slices = data.get("slices")
    if slices is not None:
        slices = {_checked_slice_name(name, "slices"): _checked_slice_stats(
            stats, "slices %r" % name) for name, stats in _checked_dict(slices, "slices").items()}
    holdout = data.get("holdout")
    bounds = data.get("unjudged_bounds")
    ties = _checked_dict(data["ties"], "ties")
    per_query = data.get("per_query")
    if per_query is not None:
        _checked_per_query(per_query, "per_query")   # names that parse, values in [0, 1]
    n = data.get("n")
    if n is not None and set(_checked_counts(n, "n")) != set(measures):
        raise EvalError("n: expected a count for each of the measures, got %s" % _short_repr(n))
    return Report(
        measures=measures,
        mean=_checked_values(data["mean"], "mean"),
        per_query=dict(per_query or {}),
        unscored=_checked_strs(data["unscored"], "unscored"),
        missing=_checked_strs(data["missing_from_run"], "missing_from_run"),
        skipped=_checked_strs(data["skipped"], "skipped"),
        abstention=_checked_counts(data["abstention"], "abstention"),
        ties=_checked_counts(ties["per_query"], "ties per_query"),
        warnings=_checked_strs(data["warnings"], "warnings"),
        rel=_positive_int(data["rel"], "rel"),
        inputs=_checked_report_inputs(data.get("inputs")) or None,
        unlabelled=_checked_strs(data.get("unlabelled", []), "unlabelled"),
        average=_checked_average(data.get("average", "scored")),
        n=n, mapping=_checked_dict(data.get("mapping"), "mapping", optional=True),
        meta=dict(_checked_baseline_meta(data.get("meta"), "meta") or {}),
        slices=slices, by=tuple(sorted({_slice_field(name) for name in slices or ()})),
        membership=_loaded_membership(data.get("membership"), per_query),
        query_sets=_checked_query_sets(data.get("query_sets"), "query_sets") or {},
        holdout=None if holdout is None else _report_holdout(holdout),
        answerability=_checked_counts(data.get("answerability") or {}, "answerability") or None,
        min_score=None if data.get("min_score") is None else _checked_min_score(
            data["min_score"]),
        scored_count=None if per_query is not None else _count(data["queries"], "queries"),
        unjudged=None if bounds is None else _checked_bounds(bounds),
        scores=_loaded_scores(data.get("scores")),
        drift=_loaded_drift(data.get("drift")),
        stages=_checked_stages(data.get("stages"), "report"),
        budget=_loaded_budget(data.get("budget"), measures),
        trim_label_whitespace=_checked_type(data.get("trim_label_whitespace", False), bool,
                                            "true or false", "trim_label_whitespace"))


def _loaded_budget(budget, measures):
    """A JSON report's budget block (see Report), checked: one record per
    measure of the report, each of counts and a mean context."""
    if budget is None:
        return None
    out = {}
    for m, use in _checked_dict(budget, "budget").items():
        where = "budget %r" % m
        if m not in measures:
            raise EvalError("%s: not a measure of the report" % where)
        use = _checked_dict(use, where)
        if use.get("unit") not in ("tokens", "characters", None):
            raise EvalError("%s: unit must be tokens or characters, got %s"
                            % (where, _short_repr(use.get("unit"))))
        out[m] = {"budget": _count(use.get("budget"), where + " budget"),
                  "used": _finite(use.get("used"), where + " used"),
                  "ran_out": _count(use.get("ran_out"), where + " ran_out"),
                  "queries": _count(use.get("queries"), where + " queries"),
                  "unit": use.get("unit")}
    return out


def _loaded_membership(membership, per_query):
    """A JSON report's membership (written with --per-query: each scored or
    unscored query's slices), or None."""
    if membership is None:
        return None
    if per_query is None:
        raise EvalError("membership: given without per_query (a report writes both or neither)")
    out = {}
    for qid, names in _checked_dict(membership, "membership").items():
        out[qid] = tuple(_checked_slice_name(n, "membership %r" % qid)
                         for n in _checked_strs(names, "membership %r" % qid))
    return out


def _loaded_scores(saved):
    """A JSON report's judge-score block as the gate reads it: the ranges
    (checked as a baseline's: they decide what every value means, so a gate
    against a baseline of other ranges is refused), the inputs and the
    queries each field left unscored (see _unpaired_lost_scores); the judge
    noise and borderline tables are not read back."""
    if saved is None:
        return None
    checked = _checked_saved_scores(saved, "scores")
    return {"inputs": checked.get("inputs"), "ranges": checked["ranges"],
            "unscored": checked.get("unscored") or {}}


def _loaded_drift(drift):
    """A JSON report's --drift block, checked by laying it out as every
    renderer does (an EvalError, never a later TypeError)."""
    if drift is None:
        return None
    try:
        if type(_checked_dict(drift, "drift")["passed"]) is not bool:
            raise TypeError("passed is not true or false")
        _count(drift["items"], "drift items")
        _checked_strs(drift["notes"], "drift notes")
        sections = list(_drift_sections(drift))
        if any(len(row) != len(header) for _, header, rows, _ in sections for row in rows):
            raise ValueError("a table row of the wrong length")
        _text_of(sections)
        _drifted_text(drift)    # as the gate's suspect note lays it out
        drifted = [f["drifted"] for f in drift["fields"].values()]
        differences = [f["mean_absolute_difference"] for f in drift["fields"].values()]
        if set(map(type, differences)) - {int, float}:
            raise TypeError("a mean absolute difference is not a number")
        if set(map(type, drifted)) - {bool} or drift["passed"] == any(drifted) or drifted != [
                f["mean_absolute_difference"] > drift["max_drift"] + FLOAT_SLACK
                for f in drift["fields"].values()]:
            raise ValueError("passed and drifted do not follow the differences")
    except (KeyError, TypeError, ValueError, AttributeError, IndexError,
            OverflowError) as exc:
        if isinstance(exc, EvalError):
            raise
        raise EvalError("drift: not a --drift block (%s %s)"
                        % (type(exc).__name__, _short_repr(str(exc)))) from None
    return drift


def _checked_report_inputs(inputs):
    """A report's inputs: {kind: {key: value}} (a score file's info holds a list)."""
    inputs = _checked_dict(inputs, "inputs", optional=True)
    for kind, info in (inputs or {}).items():
        _checked_dict(info, "inputs %r" % kind)
    return inputs


def _checked_slice_stats(stats, what):
    stats = _checked_dict(stats, what)
    _count(stats.get("queries"), what + " queries")
    _checked_strs(stats.get("unscored"), what + " unscored")
    _checked_values(stats.get("mean"), what + " mean")
    if "n" in stats:
        _checked_counts(stats["n"], what + " n")
    return stats


def _report_holdout(holdout):
    held = _loaded_holdout(holdout, "holdout")
    ids = holdout.get("ids")
    if ids is not None:
        ids = {"unscored": _checked_strs(_checked_dict(ids, "holdout ids").get("unscored"),
                                         "holdout ids unscored"),
               "missing": _checked_strs(ids.get("missing_from_run"),
                                        "holdout ids missing_from_run")}
    if not isinstance(holdout.get("revealed"), bool):
        raise EvalError("holdout revealed: expected true or false, got %s"
                        % _short_repr(holdout.get("revealed")))
    per_query = holdout.get("per_query")
    if per_query is not None:
        _checked_per_query(per_query, "holdout per_query")
    if ids is not None:    # every member the JSON names (not those expired by --as-of)
        ids["all"] = tuple(sorted(set(per_query or ()) | set(ids["unscored"])
                                  | set(ids["missing"])))
    sha = holdout.get("members_sha256", "")
    if sha and not re.fullmatch("[0-9a-f]{64}", str(sha)):
        raise EvalError("holdout members_sha256: expected 64 hex digits, got %s"
                        % _short_repr(sha))
    return held._replace(slice=_checked_slice_name(held.slice, "holdout slice"),
                         mean=_checked_values(held.mean, "holdout mean"),
                         n=None if held.n is None else _checked_counts(held.n, "holdout n"),
                         members_sha256=sha, revealed=holdout["revealed"], ids=ids)


def _checked_bounds(bounds):
    """unjudged_bounds: {"mean": {measure: [lo, hi] or null}, "per_query": {q: {...}}}."""
    bounds = _checked_dict(bounds, "unjudged_bounds")
    per_query = _checked_dict(bounds.get("per_query", {}), "unjudged_bounds per_query")
    return {"mean": _checked_pairs(bounds.get("mean"), "unjudged_bounds mean"),
            "per_query": {q: _checked_pairs(v, "unjudged_bounds per_query %r" % q)
                          for q, v in per_query.items()}}


def load_report(source):
    """Read a JSON report (``--format json``, :func:`render_json`) back into a
    :class:`Report`, e.g. one a CI job kept as an artifact (see
    :meth:`Report.from_dict`); an EvalError names the file when it is not one.

    >>> r = evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, measures="mrr")
    >>> load_report(io.StringIO(render_json(r, per_query=True))).per_query
    {'q': {'mrr@2': 0.5}}
    """
    inp = _Input(source)
    try:
        return _report_from_dict(_json_loads(inp.text(), inp.name))
    except EvalError as exc:
        text = str(exc)
        raise EvalError(text if text.startswith(inp.name + ":")
                        else "%s: %s" % (inp.name, text)) from None
