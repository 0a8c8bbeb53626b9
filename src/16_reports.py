"""Reports: text, Markdown, JSON and TREC.

Pure functions of a Report (and a GateResult, comparisons): render_text,
render_markdown (a pull-request comment: the verdict first, capped at
--max-bytes), render_json (the documented JSON form) and render_trec
(trec_eval's own layout); assert_no_regression for tests; the notebook
views of GateResult and Comparison.

Uses: 01_head, 02_records, 03_measures, 04_measure_names, 06 (score
files), 08_provenance, 14_baselines, 15_gate.  Used by: the report reader,
HTML, the command line, and the records' notebook views.
"""


def render_json(report, gate_result=None, comparisons=(), *, per_query=False, **_):
    """The report as JSON text: sorted keys, never NaN, same input same bytes."""
    out = report.to_dict(per_query=per_query)
    if gate_result is not None:
        out["gate"] = gate_result.to_dict()
    if comparisons:
        out["comparison"] = [c.to_dict() for c in comparisons]
    return _dumps(out)


def assert_no_regression(report, baseline, **gate_options):
    """:func:`gate` for a test suite: the GateResult when the gate passes, else
    an AssertionError whose message is the gate's text, as the command line
    prints it.  ``baseline`` is a Baseline, a dict of means, a file name or a
    Report (the baseline it would save).

    >>> r = evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, measures="mrr")
    >>> assert_no_regression(r, {"mrr@2": 0.5}).passed
    True
    >>> assert_no_regression(r, {"mrr@2": 0.9})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: gate vs baseline (max drop 0.02): FAILED, 1 regression: mrr@2
    ...
    """
    name = "baseline" if isinstance(baseline, dict) else None
    baseline = _checked_baseline(baseline)      # read once: its name is the verdict's
    result = gate(report, baseline, **gate_options)
    if not result.passed:
        name = name or baseline.source
        raise AssertionError(_text_of(_gate_sections(result, name), first=1).rstrip("\n"))
    if report.drift is not None and not report.drift["passed"]:    # the run failed on it
        raise AssertionError(_text_of(list(_drift_sections(report.drift))[:1],
                                      first=1).rstrip("\n"))
    return result


def _summary_line(report):
    parts = ["%s scored" % _plural(_query_count(report), "query", "queries")]
    if report.unscored:
        parts.append("%d unscored (%s): %s"
                     % (len(report.unscored), _unscored_reason(report),
                        ", ".join(report.unscored[:10])
                        + (" ..." if len(report.unscored) > 10 else "")))
    if report.missing:
        parts.append("%d missing from the run (%s)" % (len(report.missing), "scored 0"
                     if report.average == "scored" else "left out, as trec_eval averages"))
    if report.holdout is not None:
        held = report.holdout
        parts.append("%d held out (%s, reported apart)"
                     % (held.queries + held.unscored, held.slice))
    return "rag_eval %s: %s" % (__version__, "; ".join(parts))


def _unscored_reason(report):
    if report.scores is None:
        return "no relevant id"
    return "no score" if all(map(_field_of, report.measures)) else "no relevant id, no score"


def _label(measure):
    """A measure as a table heads its column: a score field by its name."""
    return _field_of(measure) or measure


def _gate_how(gate_result):
    """How a gate judged: its tolerances and mode (``max drop 0.02``)."""
    return "max drop %s%s%s" % (gate_result.tolerance, "".join(
        ", %s: %s" % item for item in sorted((gate_result.slice_tolerances or {}).items())),
        ", significant drops only" if gate_result.mode == "significant" else "")


def _gate_verdict(gate_result, baseline_name):
    how = _gate_how(gate_result)
    if gate_result.passed:
        return "gate vs %s (%s): PASSED" % (baseline_name, how)
    return "gate vs %s (%s): FAILED, %s" % (baseline_name, how, _failures_text(gate_result))


_HEADLINE_NAMES = 10     # names a verdict line gives per kind of failure


def _failures_text(gate_result):
    """Why a gate failed, in words: the regressions (those the unjudged ids
    could explain called undecided), then the missing measures, at most
    _HEADLINE_NAMES names each.

    >>> c = MeasureChange("mrr@5", 0.5, 0.4, -0.1, "regressed", undecided={"ids": 2})
    >>> _failures_text(GateResult(False, (c, MeasureChange("recall@5", 0.7, None, None,
    ...                                                    "missing")), "0.02", ()))
    '1 regression (undecided: unjudged ids could explain it): mrr@5; 1 missing: recall@5'
    """
    regressed = [c for c in gate_result.changes if c.status == "regressed"]
    missing = [c.name for c in gate_result.changes if c.status == "missing"]
    undecided = sum(1 for c in regressed if c.undecided)
    parts = []
    if regressed:
        parts.append("%s%s: %s" % (
            _plural(len(regressed), "regression", "regressions"),
            "" if not undecided else " (%sundecided: unjudged ids could explain %s)" % (
                "" if undecided == len(regressed) else "%d " % undecided,
                "it" if undecided == 1 else "them"),
            _names_text([c.name for c in regressed])))
    if missing:
        parts.append("%d missing: %s" % (len(missing), _names_text(missing)))
    if gate_result.removed_failing:
        parts.append("%s removed (--fail-on-removed)" % _plural(
            gate_result.removed_failing, "query", "queries"))
    return "; ".join(parts)


def _names_text(names, shown=_HEADLINE_NAMES):
    """``a, b, ... (3 more)``: the first ``shown`` names."""
    return ", ".join(names[:shown]) + (", ... (%d more)" % (len(names) - shown)
                                       if len(names) > shown else "")


_SHOWN_QUERY_DROPS = 20


def _signed(delta):
    """A difference with its sign, 4 decimals; more where 4 would show a
    drop or a gain as a zero, and never a negative zero.

    >>> _signed(-0.05), _signed(2 / 3 - 0.6667), _signed(-0.0)
    ('-0.0500', '-0.000033333', '+0.0000')
    """
    text = "%+.4f" % delta
    if float(text) == 0:
        return "+0.0000" if delta == 0 else _full_delta(delta)
    return text


def _sections(report, gate_result, comparisons, per_query, baseline_name, delta=_signed):
    """The report as (title, header, rows, notes) blocks, laid out by the text and
    Markdown renderers alike; ``delta`` formats a gate's differences."""
    rows = [[q] + [_fmt(v[m]) if m in v else "-" for m in report.measures]
            for q, v in report.per_query.items()] if per_query else []
    rows.append(["mean"] + [_fmt(report.mean[m]) if m in report.mean else "-"
                            for m in report.measures])
    if report.n is not None:    # the measures average over different queries
        rows.append(["n"] + [str(report.n[m]) for m in report.measures])
    yield (_summary_line(report), _MeasureHeader(["query"] + [_label(m) for m in report.measures],
                                                 "measure"), rows, [])
    yield from _answerability_section(report)
    yield from _budget_section(report)
    yield from _meta_section(report)
    yield from _judge_sections(report, per_query)
    yield from _stages_sections(report, per_query)
    yield from _drift_sections(report.drift)
    if report.unjudged is not None:
        yield _bounds_section(report, per_query)
    for field in report.by:
        yield _slice_section(report, field)
    if report.holdout is not None:
        yield _holdout_section(report.holdout, report.measures, per_query)
    if gate_result is not None:
        yield from _gate_sections(gate_result, baseline_name, delta)
    for c in comparisons:
        yield _comparison_section(c)


def _gate_sections(gate_result, baseline_name, delta=_signed):
    """The gate's (title, header, rows, notes) sections: the verdict and its
    table, then the per-query drops and the queries that changed; ``delta``
    formats a difference."""
    significant = gate_result.mode == "significant"
    shown, quiet = _shown_changes(gate_result)
    # judged@k beside the measures it is below 1 for; no column when it never is.
    judged = any(c.judged is not None and c.judged < 1 - FLOAT_SLACK for c in shown)
    rows = [[c.name, _fmt(c.baseline), _fmt(c.current),
             "-" if c.delta is None else delta(c.delta), "-" if c.n is None else str(c.n),
             _status_text(c)]
            + ([_fmt(c.p_value)] if significant else [])
            + ([_fmt(c.judged) if c.judged is not None and c.judged < 1 - FLOAT_SLACK
                else "-"] if judged else []) for c in shown]
    header = (["measure", "baseline", "current", "delta", "n", "status"]
              + (["p (Holm)"] if significant else []) + (["judged@k"] if judged else []))
    empty = sum(1 for c in quiet if c.status == NO_COMPARABLE)
    notes = list(gate_result.notes) + (
        ["%s unchanged or within the tolerance%s, not shown (every row is in the JSON "
         "output)" % (_plural(len(quiet) - empty, "slice row", "slice rows"),
                      ", %d with no comparable queries" % empty if empty else "")]
        if quiet else [])
    yield _gate_verdict(gate_result, baseline_name), header, rows, notes
    for line in _attribution_lines(gate_result):
        yield line, None, [], []
    drops = gate_result.query_drops
    if drops:
        notes = (["%d more in the JSON output" % (len(drops) - _SHOWN_QUERY_DROPS)]
                 if len(drops) > _SHOWN_QUERY_DROPS else [])
        yield ("per-query drops beyond the tolerance, largest first (%d)" % len(drops),
               ["measure", "query", "baseline", "current", "delta"],
               [[d.measure, d.query, _fmt(d.baseline), _fmt(d.current), delta(d.delta)]
                for d in drops[:_SHOWN_QUERY_DROPS]], notes)
    if gate_result.queries_added or gate_result.queries_removed:
        yield ("the test set changed since the baseline", ["change", "queries"],
               [["added", ", ".join(gate_result.queries_added) or "-"],
                ["removed", ", ".join(gate_result.queries_removed) or "-"]],
               ["each measure is compared on the queries both sides scored: these are in "
                "neither mean"])
    moved = gate_result.moved
    if moved:
        notes = (["%d more in the JSON output" % (len(moved) - _SHOWN_QUERY_DROPS)]
                 if len(moved) > _SHOWN_QUERY_DROPS else [])
        yield ("queries whose slices changed since the baseline (%d)" % len(moved),
               ["query", "left", "joined"],
               [[m.query, ", ".join(m.left) or "-", ", ".join(m.joined) or "-"]
                for m in moved[:_SHOWN_QUERY_DROPS]], notes)


def _shown_changes(gate_result):
    """(shown, quiet): the gate rows a report shows, and the slice rows that did
    not move beyond the tolerance, left to the JSON (slices multiply the rows)."""
    quiet = [c for c in gate_result.changes if c.slice is not None
             and c.status in _QUIET_STATUSES]
    return [c for c in gate_result.changes if c not in quiet], quiet


def _comparison_section(c):
    """One comparison as a (title, header, rows, notes) section."""
    any_row = next(iter(c.measures.values()))
    rows = [[r.measure, _fmt(r.mean), _fmt(r.reference_mean), "%+.4f" % r.delta,
             "[%+.4f, %+.4f]" % r.ci95, "%.4f" % r.p_randomization, "%.4f" % r.p_ttest,
             "%.4f" % r.p_holm, "%d/%d/%d" % (r.wins, r.losses, r.ties), r.verdict]
            for r in c.measures.values()]
    notes = ["%s: most worse %s; most better %s" % (
        r.measure, ", ".join("%s %+.4f" % m for m in r.most_worse) or "-",
        ", ".join("%s %+.4f" % m for m in r.most_better) or "-")
        for r in c.measures.values() if r.wins or r.losses]
    notes += c.notes
    if c.only_in_run or c.only_in_reference:
        notes.append("not compared: %s only in the run, %d only in the reference"
                     % (_plural(len(c.only_in_run), "query", "queries"),
                        len(c.only_in_reference)))
    return ("run vs %s, paired over %s (95%% bootstrap CI; p: randomization, t-test, "
            "Holm-adjusted)" % (c.reference, _plural(any_row.n, "query", "queries")),
            ["measure", "run", "reference", "delta", "95% CI", "p rand", "p t", "p Holm",
             "W/L/T", "verdict"], rows, notes)


def _status_text(change):
    """A change's status as the gate table shows it: a failure in capitals,
    and what could explain an undecided regression.

    >>> _status_text(MeasureChange("recall@5", 1.0, 0.5, -0.5, "regressed",
    ...                            undecided={"ids": 1, "upper": 1.0, "named": ["q1:d7"]}))
    'REGRESSED (undecided: 1 unjudged id could explain it: q1:d7; label them: --to-label FILE)'
    """
    if change.status not in ("regressed", "missing"):
        return change.status
    text = change.status.upper()
    undecided = change.undecided
    if undecided:
        text += " (undecided: %s could explain it%s; label them: --to-label FILE)" % (
            _plural(undecided["ids"], "unjudged id", "unjudged ids"),
            ": " + ", ".join(undecided["named"]) if undecided["named"] else "")
    if change.main_stage:
        text += " (%s)" % _MAIN_STAGE_WORDS[change.main_stage]
    if change.reason:
        text += " (%s)" % change.reason
    if change.suspect:
        text += " (suspect: %s)" % change.suspect
    return text


_MAIN_STAGE_WORDS = {"retrieval": "mostly retrieval", "generation": "mostly generation",
                     "alike": "retrieval and generation alike"}


def _attribution_lines(gate_result):
    """The gate's attribution of each answer field, one line each (see
    _attribution).

    >>> a = {"k": 5, "newly_failed": 12, "retrieval": 9, "lost_evidence": 9, "generation": 3,
    ...      "kept_evidence": 3, "newly_passed": 4, "p": mcnemar_p(12, 4)}
    >>> print(_attribution_lines(GateResult(True, (), "0.02", (), attribution={"answer": a}))[0])
    answer: 12 queries newly fail: 9 lost their evidence in the top 5 (retrieval), 3 kept it (generation); 4 newly pass; McNemar p = 0.077
    """
    lines = []
    for field, a in sorted((gate_result.attribution or {}).items()):
        if not a["newly_failed"]:
            head = "no query newly fails"
        else:
            retrieval, generation = a["retrieval"], a["generation"]
            head = "%s newly %s: %s (retrieval%s), %s (generation%s)" % (
                _plural(a["newly_failed"], "query", "queries"),
                "fails" if a["newly_failed"] == 1 else "fail",
                "%d %s %s evidence in the top %d" % (
                    retrieval, "lost" if a["lost_evidence"] == retrieval else
                    "lacks" if retrieval == 1 else "lack", "its" if retrieval == 1 else "their",
                    a["k"]),
                "" if a["lost_evidence"] == retrieval else "; %d lost it" % a["lost_evidence"],
                "%d %s it" % (generation, "kept" if a["kept_evidence"] == generation else
                              "has" if generation == 1 else "have"),
                "" if a["kept_evidence"] == generation else
                "; %d kept it" % a["kept_evidence"])
        lines.append("%s: %s; %d newly %s; McNemar p = %s" % (
            field, head, a["newly_passed"], "passes" if a["newly_passed"] == 1 else "pass",
            _p_text(a["p"])))
    return lines


def _p_text(p):
    """A p-value in a sentence: three decimals, or two significant digits
    below 0.001.

    >>> _p_text(0.0768), _p_text(1.0), _p_text(0.00012207)
    ('0.077', '1.000', '0.00012')
    """
    return "%.3f" % p if p >= 0.001 else "%.2g" % p


def _stages_sections(report, per_query):
    """The answer stages: the four counts and shares overall (and the
    hold-out's), per --by slice, and with ``per_query`` each query's stage."""
    stages = report.stages
    if stages is None:
        return
    counts = stages["counts"]
    notes = []
    apart = stages.get("apart") or {}
    shown = ["%d %s" % (n, _APART_WORDS[key]) for key, n in apart.items() if n]
    if shown:
        notes.append("counted apart, in no stage: " + ", ".join(shown))
    held = stages.get("holdout")
    if held is not None:
        notes.append("the hold-out %s, apart (not in the rows above): %s" % (
            held["slice"], ", ".join("%s %d" % item for item in held["counts"].items())))
    lower = _lower_is_better(report, stages["field"])
    yield ("answer stages: %s" % _stages_setting_text(stages, lower),
           ["stage", "queries", "share", "evidence", "answer"],
           [[stage, str(counts[stage]), _share(counts, stage)] + list(_STAGE_WORDS[stage])
            for stage in STAGES], notes)
    for field in report.by:
        prefix = field + "="
        names = [name for name in stages.get("slices", {}) if name.startswith(prefix)]
        rows = [[name[len(prefix):]] + ["%d (%s)" % (stages["slices"][name][stage],
                                                     _share(stages["slices"][name], stage))
                                        for stage in STAGES] for name in names]
        yield ("answer stages by %s: queries (share)" % field, [field] + list(STAGES), rows, [])
    if per_query and stages.get("per_query"):
        yield ("answer stage of each query (%d)" % len(stages["per_query"]), ["query", "stage"],
               [[q, stage] for q, stage in stages["per_query"].items()], [])


_STAGE_WORDS = {"pass": ("retrieved", "passes"),
                "generation_miss": ("retrieved", "fails: the context held what was needed"),
                "retrieval_miss": ("not retrieved", "fails"),
                "unsupported_pass": ("not retrieved", "passes: model memory, or a missing "
                                     "label (--to-label lists them first)")}
_APART_WORDS = {"unanswerable": "stated unanswerable", "no_verdict": "without a verdict",
                "unlabelled": "with a verdict and no relevant label"}


def _share(counts, stage):
    """A stage's share of the staged queries ("-" when none is staged)."""
    total = sum(counts.values())
    return _fmt(counts[stage] / total if total else None)


def _lower_is_better(report, field):
    lo, hi = ((report.scores or {}).get("ranges") or {}).get(field, SCORE_RANGE)
    return hi < lo


def _stages_setting_text(stages, lower=False):
    """What the stages read, in words.

    >>> _stages_setting_text({"field": "ok", "threshold": 0.5, "k": 5, "unit": "doc",
    ...                       "evidence": "complete"})
    'ok passes at >= 0.5; evidence: complete(unit=doc)@5, every relevant unit in the top 5'
    """
    params = [] if stages["unit"] == "id" else ["unit=%s" % stages["unit"]]
    if stages.get("cover", COVER.default) != COVER.default:
        params.insert(0, "cover=%s" % _value_text(stages["cover"]))
    return "%s passes at %s %s; evidence: %s%s@%d, %s relevant unit in the top %d" % (
        stages["field"], "<=" if lower else ">=", _number_text(stages["threshold"]),
        stages["evidence"], "(%s)" % ",".join(params) if params else "", stages["k"],
        "every" if stages["evidence"] == "complete" else "a", stages["k"])


def _drift_sections(drift):
    """The --drift check: one row per field, then each categorical field's
    confusion table (stored rows, current columns)."""
    if drift is None:
        return
    rows = []
    for name, f in drift["fields"].items():
        change = f["largest_change"]
        rows.append([name, str(f["n"]), _fmt(f["stored_mean"]), _fmt(f["current_mean"]),
                     "%+.4f" % f["mean_difference"], "[%+.4f, %+.4f]" % tuple(f["ci95"]),
                     "%.4f" % f["p"], _fmt(f["mean_absolute_difference"])
                     + (" > %g" % drift["max_drift"] if f["drifted"] else ""),
                     "-" if change is None else "%s %.4f -> %.4f" % (
                         change["item"], change["stored"], change["current"]),
                     _fmt(f["agreement"]), _fmt(f["kappa"]) if f["categorical"] else "-"])
    yield ("judge drift vs %s (%s, max drift %g): %s" % (
        drift["frozen"]["path"], _plural(drift["items"], "item", "items"), drift["max_drift"],
        "PASSED" if drift["passed"] else "FAILED, the judge moved: " + ", ".join(
            name for name, f in drift["fields"].items() if f["drifted"])),
        ["field", "n", "stored", "current", "delta", "95% CI", "p", "mean abs delta",
         "largest change", "agreement", "kappa"], rows, list(drift["notes"]))
    for name, f in drift["fields"].items():
        if f["categorical"]:
            labels = [json.dumps(label) for label in f["labels"]]
            yield ("%s: stored (rows) against current (columns)" % name,
                   ["stored \\ current"] + labels,
                   [[label] + [str(c) for c in row] for label, row in zip(labels, f["confusion"])],
                   [])


def _judge_sections(report, per_query):
    """The judge noise of score measures with repeated runs, and the
    borderline queries of each --pass-threshold (see evaluate_scores)."""
    block = report.scores or {}
    noise = block.get("noise") or {}
    if noise:
        rows = [[name, str(n["queries"]), "%d-%d" % tuple(n["runs"]) if n["runs"][0] !=
                 n["runs"][1] else str(n["runs"][0]), _fmt(n["within_sd"]),
                 _fmt(n["noise_floor"]), _fmt(2 * n["noise_floor"])]
                for name, n in noise.items()]
        yield ("judge noise (repeated runs of each query)",
               ["measure", "queries", "runs", "within-query sd", "noise floor (SE)", "2 SE"],
               rows, ["noise floor: the standard error of a difference of two means from judge "
                      "noise alone, sqrt(2 * sum s_q^2 / r_q) / n; a --max-drop below 2 SE "
                      "makes a flaky gate"])
    for name, found in (block.get("borderline") or {}).items():
        queries = found["queries"]
        shown = list(queries.items()) if per_query else list(queries.items())[:_SHOWN_QUERY_DROPS]
        rows = [[q, "%d/%d (%s)" % (c["pass"], c["runs"], _fmt(c["pass"] / c["runs"])),
                 "%d/%d (%s)" % (c["fail"], c["runs"], _fmt(c["fail"] / c["runs"]))]
                for q, c in shown]
        notes = ["no query has runs on both sides" if not queries else
                 "%d more in the JSON output" % (len(queries) - len(shown))
                 if len(shown) < len(queries) else
                 "a run at the threshold passes; every other query's runs agree"]
        x = _number_text(found["threshold"])
        lo, hi = block["ranges"][dict(parse_measure(name).params)["field"]]
        passing, failing = (("runs <= %s (lower is better)" % x, "runs > %s" % x) if hi < lo
                            else ("runs >= %s" % x, "runs < %s" % x))
        yield ("borderline queries of %s: runs on both sides of %s (%d)" % (name, x, len(queries)),
               ["query", passing, failing], rows, notes)


def _answerability_section(report):
    """The answerability block: how many queries are answerable (a relevant
    id), stated unanswerable, or neither (unscored)."""
    counts = report.answerability
    if counts is not None:
        keys = ("answerable", "unanswerable", "unstated")
        yield "answerability", list(keys), [[str(counts[key]) for key in keys]], []


def _budget_section(report):
    """The context each measure cut at a budget used: the mean over its
    scored queries, and how many ran out of retrieved chunks first."""
    if report.budget:
        yield ("context used against the budget (mean over the scored queries)",
               ["measure", "budget", "used", "ran out"],
               [[m, ("%d %s" % (use["budget"], use["unit"] or "")).strip(),
                 "%.1f" % use["used"], "%d of %d" % (use["ran_out"], use["queries"])]
                for m, use in report.budget.items()], [])


def _bounds_section(report, per_query):
    """The --unjudged-bounds table: [lo, hi] of each mean (and query)."""
    bounds = report.unjudged

    def cell(pair):
        return "-" if pair is None else "[%.4f, %.4f]" % tuple(pair)
    rows = [[q] + [cell(v.get(m)) for m in report.measures]
            for q, v in bounds["per_query"].items()] if per_query else []
    rows.append(["mean"] + [cell(bounds["mean"].get(m)) for m in report.measures])
    unbounded = [m for m in report.measures if bounds["mean"].get(m) is None]
    notes = ["lo: every unjudged id in the top k non-relevant; hi: the best labelling "
             "(map and ndcg: the least and greatest value over every labelling)"]
    if unbounded:
        notes.append("no bounds (only recall, precision, success, mrr, map and ndcg over ids "
                     "with unjudged=nonrel have them): %s" % ", ".join(unbounded))
    return ("unjudged bounds: what each value could be once the unjudged ids in the top k "
            "are labelled", _MeasureHeader(["query"] + list(report.measures), "measure"), rows,
            notes)


def _slice_section(report, field):
    """The table of one --by field: a row per value, its scored queries, its
    unscored ones and its means."""
    prefix = field + "="
    names = [name for name in report.slices if name.startswith(prefix)]
    rows = [[name[len(prefix):], str(report.slices[name]["queries"]),
             str(len(report.slices[name]["unscored"]))]
            + [_fmt(report.slices[name]["mean"].get(m)) for m in report.measures]
            for name in names]
    notes = []
    if report.membership is not None:    # None: read back from a JSON report
        members = _members(report.membership)
        scored = [set(q for q in members[name] if q in report.per_query) for name in names]
        if sum(map(len, scored)) > len(set().union(*scored)):
            notes.append("a query with several %s values is in each of their rows" % field)
        left = len(report.per_query) - len(set().union(*scored))
        if left:
            notes.append("%s no %s: in no row" % (_plural(left, "scored query has",
                                                           "scored queries have"), field))
    for name in names:
        for m, n in sorted(report.slices[name].get("n", {}).items()):
            if n < report.slices[name]["queries"]:
                notes.append("%s: %s averages over %d of its %s"
                             % (name, m, n, _plural(report.slices[name]["queries"],
                                                    "scored query", "scored queries")))
    return ("by %s (means over each slice's scored queries)" % field,
            _MeasureHeader([field, "queries", "unscored"] + [_label(m) for m in report.measures]),
            rows, notes)


def _holdout_section(held, measures, per_query):
    """The hold-out: its counts and means; its queries only when revealed."""
    rows = []
    if held.revealed and per_query:
        rows = [[q] + [_fmt(v.get(m)) for m in measures] for q, v in held.per_query.items()]
    rows.append(["mean"] + [_fmt(held.mean.get(m)) for m in measures])
    notes = ["%d scored, %d unscored, %d missing from the run; left out of every mean above"
             % (held.queries, held.unscored, held.missing)]
    if held.revealed:
        notes.append("revealed (--reveal-holdout): unscored %s; missing from the run %s"
                     % (", ".join(held.ids["unscored"]) or "-",
                        ", ".join(held.ids["missing"]) or "-"))
    else:
        notes.append("its query ids and per-query values are not shown (--reveal-holdout "
                     "shows them)")
    return ("held out: %s" % held.slice,
            _MeasureHeader(["query"] + [_label(m) for m in measures], "measure"), rows, notes)


def _table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
            for r in [header] + rows]


# Columns a text table of measures may take (its indent included) before it is
# printed turned, a row per measure: 9 measures at 3 cutoffs are 27 columns.
_TEXT_WIDTH = 100


class _MeasureHeader(list):
    """The header of a table whose columns after the first are measures (and
    counts): the text renderer may turn it (see _text_table); ``corner``
    heads its first column then."""

    def __init__(self, cells, corner=None):
        super().__init__(cells)
        self.corner = self[0] if corner is None else corner


def _text_table(header, rows, indent=""):
    """The lines of a table as text: a table of measures (_MeasureHeader)
    wider than _TEXT_WIDTH is turned, its columns printed as rows, when that
    is narrower (a measure a line; never with a column per query of many).

    >>> names = ["%s(unit=evidence)@10" % m for m in ("recall", "success", "mrr", "ndcg")]
    >>> header = _MeasureHeader(["query"] + names, "measure")
    >>> print("\\n".join(_text_table(header, [["mean", "0.5000", "1.0000", "0.2500", "0.3"]])))
    measure                    mean
    recall(unit=evidence)@10   0.5000
    success(unit=evidence)@10  1.0000
    mrr(unit=evidence)@10      0.2500
    ndcg(unit=evidence)@10     0.3
    """
    if header is None:      # a section of notes alone (the stages' attribution line)
        return []
    lines = [indent + line for line in _table(header, rows)]
    if isinstance(header, _MeasureHeader) and max(map(len, lines)) > _TEXT_WIDTH:
        turned = [indent + line for line in _table(
            [header.corner] + [r[0] for r in rows],
            [[header[i]] + [r[i] for r in rows] for i in range(1, len(header))])]
        if max(map(len, turned)) < max(map(len, lines)):
            return turned
    return lines


def render_text(report, gate_result=None, comparisons=(), *, per_query=False,
                baseline_name="baseline"):
    """Plain text: the measures table with the mean row, then the gate verdict
    and any comparisons, each a small table."""
    return _text_of(_sections(report, gate_result, comparisons, per_query, baseline_name))


def _text_of(sections, first=0):
    """Text blocks of (title, header, rows, notes) sections; only the first
    of the whole report (``first`` 0) is the unindented measures table."""
    lines = []
    for number, (title, header, rows, notes) in enumerate(sections, first):
        indent = "  " if number else ""
        lines += [title] + ([""] if not number else [])
        lines += _text_table(header, rows, indent)
        lines += [indent + "note: " + n for n in notes] + [""]
    return "\n".join(lines)


def render_markdown(report, gate_result=None, comparisons=(), *, per_query=False,
                    baseline_name="baseline", max_bytes=None, sweep=None):
    """GitHub Markdown for a pull-request comment or a job summary.

    Line 1 is the verdict in words (or, with no gate, the one-line summary);
    then the gate table (the delta to the gate's precision, see _full_delta),
    the means and any comparisons.  Everything else (per-query values and
    drops, slices, warnings, notes, provenance) sits in ``<details>`` blocks,
    which ``max_bytes`` truncates by whole rows (see _capped_markdown).  The
    gate table holds the rows that decide the verdict (see _gate_markdown),
    its regressed slice rows only as many as leave room under ``max_bytes``;
    the verdict, the overall rows and the means are never cut, so the output
    fits whenever ``max_bytes`` >= MARKDOWN_FLOOR and those are of ordinary
    size.  Every cell is escaped (see
    _md_text).

    >>> r = evaluate({"a|b": {"d": 1}}, {"a|b": ["x", "d"]}, k=2, metrics="mrr")
    >>> print(render_markdown(r, per_query=True), end="")
    **rag\\_eval 0.1.0: 1 query scored**
    <BLANKLINE>
    | query | mrr@2 |
    | --- | --- |
    | mean | 0.5000 |
    <BLANKLINE>
    <details><summary>per-query values (1 query)</summary>
    <BLANKLINE>
    | query | mrr@2 |
    | --- | --- |
    | a\\|b | 0.5000 |
    <BLANKLINE>
    </details>
    <BLANKLINE>
    <details><summary>answerability</summary>
    <BLANKLINE>
    | answerable | unanswerable | unstated |
    | --- | --- | --- |
    | 1 | 0 | 0 |
    <BLANKLINE>
    </details>
    """
    sections = list(_sections(report, None, (), per_query, baseline_name))
    title, header, rows, _ = sections[0]
    shown = len(report.per_query) if per_query else 0      # rows[shown:]: mean (and n)
    lines, details = [], []
    rest = _md_table(header, rows[shown:]) + [""]
    drift = list(_drift_sections(report.drift))[:1]     # its table, never folded
    if drift:
        rest += _comparison_markdown(drift[0])
    for c in comparisons:
        rest += _comparison_markdown(_comparison_section(c))
    if gate_result is None:
        lines += ["**%s**" % _md_text(title), ""]
    else:
        # Room left for the frame of the block of the regressed rows that do not fit.
        budget = (None if max_bytes is None
                  else max_bytes - 2 * _CAP_RESERVE - _size([_md_text(title), ""] + rest))
        lines, details = _gate_markdown(gate_result, baseline_name, budget)
        lines += [_md_text(title), ""]
    lines += rest
    if drift and not report.drift["passed"]:      # the run fails on it: say so first
        lines[:0] = ["**Judge drift failed**: the judge moved on %s" % _md_text(", ".join(
            name for name, f in report.drift["fields"].items() if f["drifted"])), ""]
    if shown:
        details.append(("per-query values (%s)" % _plural(shown, "query", "queries"),
                        header, rows[:shown], []))
    details += [block for block in sections[1:] if block not in drift]
    if report.warnings:
        details.append(("warnings (%d)" % len(report.warnings), None, [],
                        list(report.warnings)))
    details += _provenance_section(report)
    if sweep is not None:
        details.append(_sweep_section(sweep))
    return _capped_markdown(lines, [_md_details(*block) for block in details], max_bytes)


def _gate_markdown(gate_result, baseline_name, budget=None):
    """(lines, details) of a gate in Markdown: the verdict and the rows that
    decide it (every overall row, the regressed or missing slice rows) as
    lines, in at most ``budget`` bytes when given (the slice rows that do not
    fit go to a <details> block of their own, first); the other slice rows,
    notes, per-query drops and changed queries as sections for <details>
    blocks, which --max-bytes may cut."""
    sections = list(_gate_sections(gate_result, baseline_name, _full_delta))
    _, header, rows, notes = sections[0]
    said = [title for title, table, _, _ in sections[1:] if table is None]   # attribution
    sections = [sections[0]] + [s for s in sections[1:] if s[1] is not None]
    shown, _ = _shown_changes(gate_result)
    deciding = [r for r, c in zip(rows, shown)
                if c.slice is None or c.status in ("regressed", "missing")]
    others = [r for r, c in zip(rows, shown)
              if not (c.slice is None or c.status in ("regressed", "missing"))]
    overall = sum(1 for c in shown if c.slice is None)
    lines = [_gate_headline(gate_result), "",
             "Gate vs %s (%s):" % (_md_text(baseline_name), _md_text(_gate_how(gate_result))),
             ""]
    kept = len(deciding)
    while budget is not None and kept > overall and _size(
            lines + _md_table(header, deciding[:kept]) + [""]) > budget:
        kept = max(overall, kept - max(1, (kept - overall) // 8))
    lines += _md_table(header, deciding[:kept]) + [""]
    for line in said:
        lines += [_md_text(line), ""]
    details = []
    if kept < len(deciding):
        details.append(("more regressed or missing slice rows (%d)" % (len(deciding) - kept),
                        header, deciding[kept:], []))
    if others:
        details.append(("other slice rows: improved or not significant (%d)" % len(others),
                        header, others, []))
    details += [("gate notes (%d)" % len(notes), None, [], notes)] if notes else []
    return lines, details + sections[1:]


def _comparison_markdown(section):
    """A comparison's lines: its title, table and notes, never folded."""
    title, header, rows, notes = section
    return (["**%s**" % _md_text(title), ""] + _md_table(header, rows) + [""]
            + ["- " + _md_text(n) for n in notes] + ([""] if notes else []))


def _gate_headline(gate_result):
    """The first line of a gated Markdown report: the verdict in words.

    >>> _gate_headline(GateResult(False, (MeasureChange("mrr@5", 0.5, 0.4, -0.1, "regressed"),),
    ...                           "0.02", ()))
    '**Gate failed**: 1 regression: mrr@5'
    """
    if gate_result.passed:
        return "**Gate passed**"
    return "**Gate failed**: %s" % _md_text(_failures_text(gate_result))


def _provenance_section(report):
    """Where the numbers come from: each input's path, format and sha256."""
    rows = [[name, info.get("path", "-"), info.get("format", "-"), info.get("sha256", "-")]
            for name, info in sorted((report.inputs or {}).items())
            if isinstance(info, dict) and "path" in info]
    if rows:
        yield "provenance: inputs", ["input", "path", "format", "sha256"], rows, []


def _full_delta(delta):
    """A difference with its sign, to the gate's precision (FLOAT_SLACK): at
    least 4 decimals, up to 9 where 4 would hide what the gate compared.

    >>> _full_delta(-0.05), _full_delta(2 / 3 - 0.6667), _full_delta(0.0)
    ('-0.0500', '-0.000033333', '+0.0000')
    """
    text = "%+.9f" % delta
    return text[:-5] + text[-5:].rstrip("0")


# Characters that Markdown (GitHub's) would read as markup or that end a table
# cell: backslash-escaped, or as HTML entities; a line break is written \\n.
_MD_ESCAPES = str.maketrans({
    **{ch: "\\" + ch for ch in "\\`*_[]~|$"},
    "&": "&amp;", "<": "&lt;", ">": "&gt;", "\n": "\\\\n", "\r": "\\\\r"})

# What GitHub turns into a live mention or reference in a comment (it pings a
# user, links an issue): @user (@org/team), #12, GH-12, owner/repo#12.  No
# escape stops it, a code span does; the tokens hold no backtick, so one
# backtick fences them, whatever the text around them holds.
_MD_LIVE = re.compile(r"[0-9A-Za-z_.-]+/[0-9A-Za-z_.-]+#[0-9]+"
                      r"|(?<![0-9A-Za-z_])(?:@[0-9A-Za-z][0-9A-Za-z-]*|#[0-9]+|[Gg][Hh]-[0-9]+)")


def _without_live_tokens(text, escape, fence):
    """``text`` escaped by ``escape``, each _MD_LIVE token put in ``fence``
    (a code span, a <code> element) instead: shown as it is, never live."""
    out, last = [], 0
    for match in _MD_LIVE.finditer(text):
        out += [escape(text[last:match.start()]), fence % match.group()]
        last = match.end()
    out.append(escape(text[last:]))
    return "".join(out)


def _md_text(text):
    """Text (a table cell, a note) escaped for Markdown, mentions and issue
    references in code spans (see _MD_LIVE): every Markdown output writes its
    text through here (or _html_text).

    >>> print(_md_text("a|b `x` <script>&\\n*_"))
    a\\|b \\`x\\` &lt;script&gt;&amp;\\\\n\\*\\_
    >>> print(_md_text("'@alice', #12, GH-3, octo/repo#4, a`@b`, x@example.com, doc#7"))
    '`@alice`', `#12`, `GH-3`, `octo/repo#4`, a\\``@b`\\`, x@example.com, doc#7
    """
    return _without_live_tokens(str(text), lambda part: part.translate(_MD_ESCAPES), "`%s`")


def _html_text(text):
    """Text for an HTML element (a <summary>), where Markdown is not read;
    mentions and issue references in <code> (see _MD_LIVE).

    >>> print(_html_text("by <tag> @alice"))
    by &lt;tag&gt; <code>@alice</code>
    """
    return _without_live_tokens(str(text), _html_plain, "<code>%s</code>")


def _html_plain(text):
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", "\\n").replace("\r", "\\r"))


def _md_table(header, rows):
    def line(cells):
        return "| " + " | ".join(_md_text(c) for c in cells) + " |"
    return [line(header), line(["---"] * len(header))] + [line(r) for r in rows]


class _Details(NamedTuple):
    """A <details> block of Markdown lines: ``head`` and ``foot`` are always
    written; ``items`` (table rows, then notes) may be left out from the end."""
    head: Tuple[str, ...]
    rows: Tuple[str, ...]
    notes: Tuple[str, ...]

    def lines(self, keep, left_out_line=None):
        rows, notes = self.rows[:keep], self.notes[:max(0, keep - len(self.rows))]
        out = list(self.head) + list(rows) + ([""] if self.head[-1] != "" else [])
        out += list(notes) + ([""] if notes else [])
        if left_out_line:
            out += [left_out_line, ""]
        return out + ["</details>", ""]

    @property
    def items(self):
        return self.rows + self.notes


def _md_details(title, header, rows, notes):
    """A (title, header, rows, notes) section as a _Details block."""
    table = _md_table(header, rows) if header else []
    return _Details(("<details><summary>%s</summary>" % _html_text(title), "")
                    + tuple(table[:2]), tuple(table[2:]),
                    tuple("- " + _md_text(n) for n in notes))


def _size(lines):
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


def _left_out_line(left, total, max_bytes):
    return ("> **%d of %s left out** to keep this under --max-bytes %d: the JSON report "
            "(`--format json`, same options) holds them all" % (
                left, _plural(total, "row", "rows"), max_bytes))


def _dropped_line(sections, rows, max_bytes):
    return ("> **%s left out** (%s) to keep this under --max-bytes %d: the JSON report "
            "(`--format json`, same options) holds them all"
            % (_plural(sections, "section", "sections"), _plural(rows, "row", "rows"), max_bytes))


# Bytes --max-bytes keeps for the line saying which blocks were left out.
_CAP_RESERVE = 400
# The smallest --max-bytes the output always fits in, given measures and
# comparison tables of ordinary size (see render_markdown).
MARKDOWN_FLOOR = 2000


def _capped_markdown(lines, blocks, max_bytes):
    """``lines`` then every block, in at most ``max_bytes`` bytes (UTF-8) when
    given: the rows of the blocks that do not fit are left out, whole and from
    the end, each block saying how many it lost; a block whose frame does not
    fit either is left out whole, and a last line counts those.  ``lines`` (the
    verdict and the main tables) are always written, whatever their size."""
    full = lines + [line for block in blocks for line in block.lines(len(block.items))]
    if max_bytes is None or _size(full) <= max_bytes:
        return "\n".join(full)
    budget = max_bytes - _size(lines)
    frames = [_size(b.lines(0, _left_out_line(len(b.items), len(b.items), max_bytes)))
              for b in blocks]
    total = sum(len(b.items) for b in blocks)
    reserve = _size([_dropped_line(len(blocks), total, max_bytes), ""])
    kept = len(blocks)
    while kept and sum(frames[:kept]) + (reserve if kept < len(blocks) else 0) > budget:
        kept -= 1
    budget -= sum(frames[:kept]) + (reserve if kept < len(blocks) else 0)
    out = list(lines)
    for block in blocks[:kept]:
        keep = 0
        for item in block.items:
            if _size([item]) > budget:
                break
            budget -= _size([item])
            keep += 1
        left = len(block.items) - keep
        out += block.lines(keep, _left_out_line(left, len(block.items), max_bytes)
                           if left else None)
    if kept < len(blocks):
        dropped = blocks[kept:]
        out += [_dropped_line(len(dropped), sum(len(b.items) for b in dropped), max_bytes), ""]
    return "\n".join(out)


def _sweep_section(sweep):
    """The --sweep-min-score table as a (title, header, rows, notes) section."""
    rows = [["no cut" if t is None else repr(t), _fmt(f1), _fmt(value)]
            for t, f1, value in sweep.rows]
    return ("--sweep-min-score: abstention_f1 and %s at each threshold" % sweep.measure,
            ["min_score", "abstention_f1", sweep.measure], rows, list(sweep.notes))


def _trec_eval_name(m):
    """The name ``--format trec`` prints for a measure: trec_eval's where it has
    one for these parameters (``P_5``, ``ndcg_cut_10``, ``map``, ``recip_rank``),
    else our canonical name (``ndcg@10``: trec_eval has no exponential gain;
    ``precision(rel=2)@5``: its ``P_5`` means rel 1).

    >>> _trec_eval_name("ndcg(gain=linear)@10"), _trec_eval_name("ndcg@10")
    ('ndcg_cut_10', 'ndcg@10')
    """
    m = parse_measure(m)
    return _peer_name(m, "trec_eval") or str(m)


_TREC_LINE = "%-22s\t%s\t%6.4f\n"     # trec_eval's own printf formats (meas_print_*.c)
_TREC_COUNT = "%-22s\t%s\t%d\n"


def render_trec(report, gate_result=None, comparisons=(), *, per_query=False, **_):
    """trec_eval's output, for scripts that parse it: ``measure<TAB>query<TAB>value``
    lines, the name left-justified in 22 columns and the value to 4 places.
    With ``per_query``, every query's measures (queries sorted, as trec_eval
    sorts them), then the ``all`` lines: ``num_q`` (an integer, as trec_eval
    prints it: the queries the means are over) and each mean.  Measures keep
    the report's order; names are trec_eval's where it has one
    (see :func:`_trec_eval_name`).  The gate and comparisons are not part of it:
    the command line writes them to stderr.

    >>> r = evaluate({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": ["a"], "q2": ["x", "b"]},
    ...              k=1, metrics="precision,mrr@all")
    >>> print(render_trec(r, per_query=True).replace("\\t", "|"), end="")
    P_1                   |q1|1.0000
    recip_rank            |q1|1.0000
    P_1                   |q2|0.0000
    recip_rank            |q2|0.5000
    num_q                 |all|2
    P_1                   |all|0.5000
    recip_rank            |all|0.7500
    """
    names = [(m, _trec_eval_name(m)) for m in report.measures]
    queries = report.per_query.items() if per_query else ()
    for qid, _values in queries:
        if qid == "all" or not qid or any(ch.isspace() for ch in qid):
            raise EvalError("--format trec: query id %r cannot be written on a trec_eval line "
                            "(it holds white space or is 'all', trec_eval's name for the means)"
                            % qid)
    lines = [_TREC_LINE % (name, qid, values[m]) for qid, values in sorted(queries)
             for m, name in names if m in values]
    lines.append(_TREC_COUNT % ("num_q", "all", _query_count(report)))
    lines += [_TREC_LINE % (name, "all", report.mean[m]) for m, name in names
              if m in report.mean]
    return "".join(lines)


def _side_text(report, gate_result=None, comparisons=(), *, baseline_name="baseline"):
    """The gate verdict and comparisons as render_text() writes them, without
    the measures table: what ``--format trec`` writes to stderr ("" if none)."""
    sections = [section for section in list(_sections(
        report, gate_result, comparisons, False, baseline_name))[1:]
        if section[0] != "answerability"]   # trec_eval's layout has its own counts
    return _text_of(sections, first=1) if sections else ""


# --- notebook views ------------------------------------------------------------------
#
# GateResult and Comparison show themselves in Jupyter through these (their
# _repr_markdown_ methods, defined before the renderers, call them).

def _gate_result_markdown(result):
    """A GateResult in Markdown: the verdict and the gate table, capped as a
    pull-request comment is."""
    lines, details = _gate_markdown(result, "baseline", DEFAULT_MAX_BYTES - 2 * _CAP_RESERVE)
    return _capped_markdown(lines, [_md_details(*d) for d in details], DEFAULT_MAX_BYTES)


def _comparison_result_markdown(comparison):
    """A Comparison in Markdown: its table."""
    return "\n".join(_comparison_markdown(_comparison_section(comparison)))
