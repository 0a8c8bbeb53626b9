"""Baselines: what a gate compares with, saved and read back.

load_baseline reads a baseline file (a saved baseline, or a flat file of
means) and checks every field (what a baseline must hold); baseline_dict and
save_baseline write one from a Report (atomically: nothing written
half-way); _checked_baseline checks a baseline handed to the gate (a
Baseline, a dict of means, a file name or a Report); the checks a report and its baseline
must pass to be compared (same score ranges, same --min-score).  Also the
JSON checking helpers the report reader shares.

Uses: 01_head, 02_records, 04 to 06 (names, readers), 08_provenance,
11_evaluation.  Used by: the gate, reports, the report reader, HTML, the
command line.
"""


def _as_baseline_value(value, where):
    # Compared before any conversion: NaN fails the comparison, and float() of a
    # huge integer would overflow.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        shown = repr(value) if len(repr(value)) < 40 else repr(value)[:36] + "..."
        raise EvalError("%s must be a number in [0, 1], got %s" % (where, shown))
    return float(value)


def _checked_inputs(inputs, where):
    """A baseline's ``inputs``: None, or {kind: {"path"/"sha256"/"format": str}}
    (rows merged from shards, see merge_rows: {"queries": count, "rows_sha256": str})."""
    if inputs is None:
        return None
    if not isinstance(inputs, dict) or not all(
            isinstance(kind, str) and isinstance(info, dict)
            and all(isinstance(key, str) and (isinstance(value, str) or key == "queries" and
                                              type(value) is int and value >= 0)
                    for key, value in info.items())
            for kind, info in inputs.items()):
        raise EvalError('%s: inputs must be an object {"qrels": {"path": ..., "sha256": ...}, '
                        '...} of strings, got %s' % (where, _short_repr(inputs)))
    return inputs


def _checked_per_query(per_query, where):
    if per_query is None:
        return None
    if not isinstance(per_query, dict):
        raise EvalError("%s: per_query must be an object {query_id: {measure: value}}, got %s"
                        % (where, type(per_query).__name__))
    for qid in per_query:
        if not isinstance(qid, str):
            raise EvalError("%s: per_query: query ids must be strings, got %r" % (where, qid))
    return {q: _canonical_values(v, "%s: per_query %r" % (where, q)) for q, v in per_query.items()}


def _canonical_values(values, where):
    if not isinstance(values, dict):
        raise EvalError("%s must be an object {measure: value}, got %s"
                        % (where, type(values).__name__))
    out = {}
    for key, value in values.items():
        try:
            name = _canonical_name(key)
        except EvalError as exc:
            raise EvalError("%s: %s" % (where, exc)) from None
        if name in out:
            raise EvalError("%s: %r and another key both mean %s" % (where, key, name))
        out[name] = _as_baseline_value(value, "%s: %r" % (where, key))
    return out


@functools.lru_cache(maxsize=1024)
def _canonical_name(key):
    """str(parse_measure(key)), remembered: a baseline names each of its few
    measures once per query."""
    return str(parse_measure(key))


def load_baseline(source):
    """Read a baseline: flat ``{"recall@5": 0.7, ...}`` or the richer file that
    :func:`save_baseline` writes (means, per-query values, input hashes, meta,
    label hashes).

    Keys are parsed as measure names and keyed canonically; every value must be
    a finite number in [0, 1] (never a silent pass on NaN or a string).

    >>> load_baseline(io.StringIO('{"nDCG@10": 0.5}')).mean
    {'ndcg(gain=linear)@10': 0.5}
    """
    inp = _Input(source)
    name = inp.name
    if isinstance(source, (str, os.PathLike)) and source != "-" and not os.path.exists(source):
        raise EvalError("%s: no such baseline file; write one from an accepted run with "
                        "--save-baseline %s (or save_baseline())" % (name, name))
    loaded = _json_loads(inp.text(), name)
    if not isinstance(loaded, dict):
        raise EvalError("%s: a baseline must be a JSON object, got %s"
                        % (name, type(loaded).__name__))
    if loaded.get("format") != BASELINE_FORMAT:
        if not loaded:
            raise EvalError("%s: the baseline holds no measures" % name)
        if isinstance(loaded.get("tool"), dict) and "measures" in loaded:
            raise EvalError("%s: a JSON report (--format json), not a baseline: write one with "
                            "--save-baseline (in Python: gate(load_report(...), baseline))"
                            % name)
        return Baseline(_canonical_values(loaded, name), source=name)
    version = loaded.get("format_version", 1)     # a file written by hand may leave it out
    if version not in BASELINE_VERSIONS or isinstance(version, bool):
        raise EvalError("%s: format_version %s is not one this rag_eval %s reads (%s): save the "
                        "baseline again with this version, or use the version that wrote it"
                        % (name, _short_repr(version), __version__,
                           ", ".join(map(str, BASELINE_VERSIONS))))
    mean = _canonical_values(loaded.get("mean"), "%s: mean" % name)
    if not mean:
        raise EvalError("%s: the baseline holds no measures" % name)
    per_query = _checked_per_query(loaded.get("per_query"), name)
    mean = _in_saved_order(_agreeing_means(mean, per_query, name), loaded.get("measures"))
    query_sets = _checked_query_sets(loaded.get("query_sets"), name)
    if version >= 2 and per_query is None and "all" not in (query_sets or {}):
        raise EvalError("%s: a version 2 baseline holds per-query values or a record of its "
                        "queries (query_sets), and this one holds neither: save it again "
                        "with --save-baseline" % name)
    inputs = _checked_inputs(loaded.get("inputs"), name)
    rel = _positive_int(loaded.get("rel", 1), "%s: rel" % name)
    slices = loaded.get("slices")
    if slices is not None:
        if not isinstance(slices, dict) or not all(
                isinstance(stats, dict) for stats in slices.values()):
            raise EvalError('%s: slices must be an object {"field=value": {"mean": {...}}}, '
                            "got %s" % (name, _short_repr(slices)))
        slices = {key: stats.get("mean") for key, stats in slices.items()}
    holdout = loaded.get("holdout")
    if holdout is not None:
        holdout = _loaded_holdout(holdout, "%s: holdout" % name)
    min_score = loaded.get("min_score")
    if min_score is not None:
        try:
            min_score = _checked_min_score(min_score)
        except EvalError:
            raise EvalError("%s: min_score must be a finite number, got %s"
                            % (name, _short_repr(min_score))) from None
    trim = loaded.get("trim_label_whitespace", False)
    if not isinstance(trim, bool):
        raise EvalError("%s: trim_label_whitespace must be true or false, got %s"
                        % (name, _short_repr(trim)))
    return _checked_slices(Baseline(mean, per_query, inputs, name, rel,
                                    _checked_baseline_meta(loaded.get("meta"), name),
                                    _checked_label_hashes(loaded.get("label_sha256"), name),
                                    slices, loaded.get("membership"), holdout, min_score,
                                    _checked_saved_scores(loaded.get("scores"), name),
                                    query_sets,
                                    _checked_stages(loaded.get("stages"), name), trim))


def _in_saved_order(mean, measures):
    """``mean`` in the order of the saved ``measures`` list, the order they were
    asked for (a saved file sorts its keys); what the list does not name, or
    a list that is not one of names, leaves the keys' order as it is: only
    the order of columns depends on it, never a number.

    >>> list(_in_saved_order({"mrr@5": 0.5, "recall@5": 0.7}, ["recall@5", "mrr@5"]))
    ['recall@5', 'mrr@5']
    """
    rank = {}
    for item in measures if isinstance(measures, list) else ():
        try:
            rank.setdefault(_canonical_name(item), len(rank))
        except (EvalError, TypeError):
            continue
    return dict(sorted(mean.items(), key=lambda pair: rank.get(pair[0], len(rank))))


def _checked_saved_scores(saved, name):
    """A baseline's "scores" object: its ranges read back as (lo, hi) pairs,
    and the queries each measure left unscored (``{measure: [id, ...]}``,
    when recorded) under canonical names."""
    if saved is None:
        return None
    ranges = saved.get("ranges") if isinstance(saved, dict) else None
    if not isinstance(ranges, dict):
        raise EvalError('%s: scores must be an object {"inputs": [...], "ranges": {field: '
                        '[lo, hi]}}, got %s' % (name, _short_repr(saved)))
    try:
        ranges = _checked_ranges({f: tuple(pair) for f, pair in ranges.items()})
    except (EvalError, TypeError) as exc:
        raise EvalError("%s: scores: %s" % (name, exc)) from None
    if saved.get("unscored") is None:
        return dict(saved, ranges=ranges)
    where = "%s: scores unscored" % name
    unscored = {str(parse_measure(_checked_measure_name(m, where))): list(_checked_strs(
        ids, "%s %s" % (where, m))) for m, ids in _checked_dict(saved["unscored"], where).items()}
    return dict(saved, ranges=ranges, unscored=unscored)


def _check_same_ranges(report, baseline):
    """A score measure gated against a baseline made with another range for
    its field is refused: the range decides what every value means (a
    baseline that records none made its values on [0, 1])."""
    ours = {f: tuple(pair) for f, pair in ((report.scores or {}).get("ranges") or {}).items()}
    theirs = (baseline.scores or {}).get("ranges") or {}
    for measure in sorted(set(baseline.mean) & set(report.mean)):
        field = _field_of(measure)
        if field is None:
            continue
        now, then = ours.get(field, SCORE_RANGE), theirs.get(field, SCORE_RANGE)
        if now != then:
            raise EvalError("%s was made with the range %s of %s and this report with %s: the "
                            "numbers are not comparable (give the baseline's --score-range, or "
                            "save a new baseline)" % (baseline.source, _range_text(then), field,
                                                      _range_text(now)))


def _range_text(pair):
    return "%s:%s" % (_number_text(pair[0]), _number_text(pair[1]))


def _check_same_min_score(report, baseline):
    """A baseline made with another scoring policy is refused: like rel, the
    --min-score cut and --trim-label-whitespace decide what every number
    means."""
    for text in (_min_score_text, _trim_text):
        then, now = text(baseline), text(report)
        if then != now:
            raise EvalError("%s was made with %s and this report with %s: the numbers are not "
                            "comparable" % (baseline.source, then, now))


def _min_score_text(record):
    value = record.min_score
    return "no --min-score" if value is None else "--min-score %r" % value


def _trim_text(record):
    return "%s--trim-label-whitespace" % ("" if record.trim_label_whitespace else "no ")


def _loaded_holdout(saved, where):
    """The HeldOut of a baseline's "holdout" object (see _saved_slices)."""
    if not isinstance(saved, dict):
        raise EvalError("%s must be an object, got %s" % (where, _short_repr(saved)))
    counts = [saved.get(key) for key in ("queries", "unscored", "missing_from_run")]
    if not all(type(c) is int and c >= 0 for c in counts):
        raise EvalError("%s: queries, unscored and missing_from_run must be counts, got %s"
                        % (where, _short_repr(counts)))
    return HeldOut(saved.get("slice"), saved.get("mean"), saved.get("n"), *counts,
                   saved.get("members_sha256"), "per_query" in saved, saved.get("per_query"))


def baseline_dict(report):
    """The richer baseline form of a report (what ``--save-baseline`` writes)."""
    _gated_average(report)
    _check_labelled_run(report)
    _check_kept_members(report)
    if report.scored_count is not None and "all" not in _query_sets(report):
        raise EvalError("this report was read back from a JSON report that names none of its "
                        "queries and records no query set (written by an older rag_eval): a "
                        "baseline of its means could not tell a changed test set; save the "
                        "baseline from the evaluation itself (--save-baseline)")
    return {
        "format": BASELINE_FORMAT,
        "format_version": BASELINE_VERSIONS[-1],
        "tool": {"name": "rag_eval", "version": __version__},
        "inputs": report.inputs or {},
        "meta": dict(report.meta or {}),
        **({} if report.label_sha256 is None else
           {"label_sha256": dict(sorted(report.label_sha256.items()))}),
        "measures": list(report.measures),
        "rel": report.rel,
        **({} if report.min_score is None else {"min_score": report.min_score}),
        **({"trim_label_whitespace": True} if report.trim_label_whitespace else {}),
        "mean": dict(report.mean),
        # A report read back without its per-query values gives a means-only baseline.
        **({} if report.scored_count is not None else
           {"per_query": {q: dict(v) for q, v in report.per_query.items()}}),
        "unscored": list(report.unscored),
        "query_sets": _query_sets(report),
        **({} if report.scores is None else {"scores": {
            key: json.loads(json.dumps(report.scores[key]))
            for key in ("inputs", "ranges", "unscored")}}),
        **({} if report.stages is None else {"stages": _saved_stages(report)}),
        **_saved_slices(report),
    }


def _saved_stages(report):
    """What a baseline keeps of a report's stages: the settings, the counts
    and each query's stage (what the gate's attribution pairs); a report
    read back without them keeps no per-query stages."""
    return {key: json.loads(json.dumps(value)) for key, value in report.stages.items()
            if key != "slices"}


def _saved_slices(report):
    """What a baseline keeps of a report's slices: the means of every slice
    (not only those shown), each query's slices, and the hold-out's counts,
    means and the sha256 of its ids (its values only when revealed; the
    record of which queries its means are over is in query_sets)."""
    out = {}
    if report.slices is not None or report.membership is not None:
        # A report read back keeps the slices of its --by fields only; its
        # membership (written with --per-query) gives them all again.
        slices = report.slices if report.query_sets is None else _slice_stats(
            report, report.membership)
        out["slices"] = {name: {key: stats[key] for key in ("queries", "mean", "n")
                                if key in stats}
                         for name, stats in slices.items()}
        out["membership"] = {q: list(names) for q, names in report.membership.items()}
    held = report.holdout
    if held is not None:
        out["holdout"] = {key: value for key, value in held.to_dict().items()
                          if key not in ("revealed", "ids")}
        out["holdout"]["members_sha256"] = held.members_sha256
        if held.revealed and held.per_query is not None:    # read back without --per-query
            out["holdout"]["per_query"] = {q: dict(v) for q, v in held.per_query.items()}
    return out


def _check_kept_members(report):
    """Refuse a report read back from JSON (see :func:`load_report`) whose
    slices or hold-out a baseline cannot keep whole: the JSON keeps each
    slice's means but not its queries, nor the hash of the hold-out's ids,
    and a baseline needs them (to pair a slice's queries, list those that
    moved, tell a lost judge score and a changed hold-out)."""
    lacking = []
    if report.slices is not None and report.membership is None:
        lacking.append("the queries of each slice (only their means)")
    if report.holdout is not None and not report.holdout.members_sha256:
        lacking.append("the hash of the hold-out's queries")
    if lacking:
        raise EvalError("this report was read back from JSON, which does not keep %s, and a "
                        "baseline holds %s: save the baseline from the evaluation itself "
                        "(--save-baseline, or save_baseline(evaluate(...)))%s" % (
                            " nor ".join(lacking), "both" if len(lacking) > 1 else "it",
                            "" if report.holdout is not None else ", or drop the slices to "
                            "gate the overall only (report._replace(slices=None, by=()))"))


def _write_atomic(outputs):
    """Write each (path, text) through a temp file in its folder, then rename
    them all: an error leaves none of the files half-written, and none written
    when it happens before the renames.  A path that is not a regular file
    (/dev/null, a pipe, /dev/stdout) is written in place after the renames:
    renaming onto it would replace the device with a file."""
    if not outputs:
        return
    special = [(path, text) for path, text in outputs if _is_special(path)]
    outputs = [(path, text) for path, text in outputs if not _is_special(path)]
    _staged_write(outputs)
    for path, text in special:
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise EvalError("%s: cannot write: %s" % (path, exc.strerror or exc)) from None


def _is_special(path):
    """Whether ``path`` exists and is not a regular file or a directory."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _staged_write(outputs):
    """_write_atomic's regular files: temp files, then the renames."""
    if not outputs:
        return
    import tempfile   # only when writing: keeps start-up fast
    targets = [os.path.realpath(path) for path, _ in outputs]
    if len(set(targets)) < len(targets):
        raise EvalError("%s: named for two outputs (--save-baseline and -o)" % outputs[-1][0])
    for path, _ in outputs:
        # Checked before anything is staged: a rename that fails after another
        # succeeded would leave one file written.
        if os.path.isdir(path) or path.endswith((os.sep, os.altsep or os.sep)):
            raise EvalError("%s: is a directory, not a file" % path)
    mask = os.umask(0)
    os.umask(mask)
    staged = []
    try:
        for path, text in outputs:
            try:
                fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                                           prefix=".rag_eval-", suffix=".tmp")
                staged.append((tmp, path))
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.chmod(tmp, 0o666 & ~mask)
            except OSError as exc:
                raise EvalError("%s: cannot write: %s" % (path, exc.strerror or exc)) from None
        for tmp, path in staged:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise EvalError("%s: cannot write: %s" % (path, exc.strerror or exc)) from None
    finally:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)


def save_baseline(report, path):
    """Write ``report`` as a baseline file atomically (temp file, then rename).
    A report read back from JSON with slices or a hold-out is refused (an
    EvalError: see _check_kept_members)."""
    _write_atomic([(path, _dumps(baseline_dict(report)))])


def _checked_baseline(baseline):
    """A Baseline whose every number is a finite value in [0, 1] under a canonical
    name, from what :func:`gate` and :func:`assert_no_regression` take: a
    Baseline, a dict (flat means), a file name (read by load_baseline) or a
    Report (the baseline save_baseline would write of it, named "report");
    anything else is an EvalError.

    >>> r = evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, measures="mrr")
    >>> b = _checked_baseline(r)
    >>> b.source, b.mean, b.per_query
    ('report', {'mrr@2': 0.5}, {'q': {'mrr@2': 0.5}})
    >>> _checked_baseline({"nDCG@10": 0.5}).mean
    {'ndcg(gain=linear)@10': 0.5}
    """
    if isinstance(baseline, Report):
        return load_baseline(io.StringIO(_dumps(baseline_dict(baseline))))._replace(
            source="report")
    if isinstance(baseline, (str, os.PathLike)):
        return load_baseline(baseline)          # checked as it is read
    if isinstance(baseline, dict):
        if not baseline:
            raise EvalError("baseline: the baseline holds no measures")
        return Baseline(_canonical_values(baseline, "baseline"))
    if not isinstance(baseline, Baseline):
        raise EvalError("baseline must be a Baseline, a Report, a dict of means or a file name, "
                        "got %s" % type(baseline).__name__)
    source = str(baseline.source)
    if not baseline.mean:
        raise EvalError("%s: the baseline holds no measures" % source)
    per_query = _checked_per_query(baseline.per_query, source)
    mean = _agreeing_means(_canonical_values(baseline.mean, source), per_query, source)
    return _checked_slices(baseline._replace(
        mean=mean, source=source, per_query=per_query,
        query_sets=_checked_query_sets(baseline.query_sets, source),
        stages=_checked_stages(baseline.stages, source),
        inputs=_checked_inputs(baseline.inputs, source),
        rel=_positive_int(baseline.rel, "baseline rel"),
        meta=_checked_baseline_meta(baseline.meta, source),
        label_sha256=_checked_label_hashes(baseline.label_sha256, source)))


def _checked_slices(baseline):
    """A Baseline (its means and per-query values checked) whose slices,
    membership and hold-out are checked as its means are: canonical names,
    values in [0, 1], means that agree with the per-query values."""
    source, per_query = baseline.source, baseline.per_query
    membership = _checked_membership(baseline.membership, baseline.slices, source)
    slices = None
    if baseline.slices is not None:
        if not isinstance(baseline.slices, dict):
            raise EvalError("%s: slices must be an object {slice: {measure: mean}}, got %s"
                            % (source, _short_repr(baseline.slices)))
        members = _members(membership)
        slices = {}
        for name, means in sorted(baseline.slices.items()):
            _checked_slice_name(name, "%s: slices" % source)
            where = "%s: slices %r" % (source, name)
            rows = {q: per_query[q] for q in members.get(name, ()) if q in (per_query or {})}
            slices[name] = _agreeing_means(_canonical_values(means, "%s: mean" % where),
                                           rows, where)
    return baseline._replace(slices=slices, membership=membership,
                             holdout=_checked_held_out(baseline.holdout, source))


def _checked_slice_name(name, where):
    if not isinstance(name, str) or "=" not in name or not _slice_field(name):
        raise EvalError("%s: %s is not a slice name field=value" % (where, _short_repr(name)))
    return name


def _checked_membership(membership, slices, where):
    """A baseline's {qid: (slice, ...)}: given exactly when its slices are."""
    if (membership is None) != (slices is None):
        raise EvalError("%s: slices and membership come together (a saved baseline writes "
                        "both); write it again with --save-baseline" % where)
    if membership is None:
        return None
    if not isinstance(membership, dict):
        raise EvalError("%s: membership must be an object {query_id: [slice, ...]}, got %s"
                        % (where, _short_repr(membership)))
    out = {}
    for qid, names in membership.items():
        if not isinstance(qid, str) or not isinstance(names, (list, tuple)):
            raise EvalError("%s: membership %s: must be a list of slices, got %s"
                            % (where, _short_repr(qid), _short_repr(names)))
        out[qid] = tuple(_checked_slice_name(n, "%s: membership %r" % (where, qid))
                         for n in names)
    return out


def _members(membership):
    """{slice: [qid, ...]} of {qid: (slice, ...)}.

    >>> _members({"q1": ("a=1", "b=2"), "q2": ("a=1",)})
    {'a=1': ['q1', 'q2'], 'b=2': ['q1']}
    """
    members = {}
    for qid, names in (membership or {}).items():
        for name in names:
            members.setdefault(name, []).append(qid)
    return members


def _checked_held_out(held, where):
    """A baseline's hold-out: a HeldOut with means in [0, 1] under canonical
    names, and per-query values (only revealed ones are saved) that agree."""
    if held is None:
        return None
    if not isinstance(held, HeldOut):
        raise EvalError("%s: holdout must be a HeldOut, got %s" % (where, type(held).__name__))
    where = "%s: holdout" % where
    _checked_slice_name(held.slice, where)
    sha = held.members_sha256
    if not isinstance(sha, str) or not re.fullmatch("[0-9a-f]{64}", sha):
        raise EvalError("%s: members_sha256 must be 64 hex digits, got %s"
                        % (where, _short_repr(sha)))
    per_query = _checked_per_query(held.per_query, where)
    mean = _agreeing_means(_canonical_values(held.mean, "%s: mean" % where), per_query, where)
    return held._replace(mean=mean, per_query=per_query, n=None, ids=None)


def _agreeing_means(mean, per_query, where):
    """``mean``, once each of its values is checked against the mean of the
    per-query values: the significant gate reads the per-query values, the
    tolerance rule the means, and an edited mean must not fool either."""
    for measure, stated in mean.items():
        values = [v[measure] for v in (per_query or {}).values() if measure in v]
        if values and abs(_mean(values) - stated) > FLOAT_SLACK:
            raise EvalError("%s: the mean of %s (%r) is not the mean of its per-query values "
                            "(%r): the file was edited; write it again with --save-baseline"
                            % (where, measure, stated, _mean(values)))
    return mean


def _checked_query_sets(sets, where):
    """A baseline's or a report's ``query_sets`` (see _query_sets): None, or
    {population: {"queries": count, "sha256": 64 hex digits[, "measures":
    {measure: {"queries", "sha256"}}]}} under canonical measure names."""
    if sets is None:
        return None
    what = "%s: query_sets" % where
    out = {}
    for population, record in _checked_dict(sets, what).items():
        if population != "all":
            _checked_slice_name(population, what)
        out[population] = _checked_query_set(record, "%s %r" % (what, population))
        measures = _checked_dict(record.get("measures"), "%s %r measures" % (what, population),
                                 optional=True)
        if measures is not None:
            out[population]["measures"] = {
                str(parse_measure(_checked_measure_name(m, what))): _checked_query_set(
                    r, "%s %r %r" % (what, population, m), counted=True)
                for m, r in measures.items()}
    return out


def _checked_query_set(record, what, counted=False):
    """One record: a count and a sha256; ``counted``: a measure's, which
    may hold its count alone (the hold-out's, see _population_record)."""
    record = _checked_dict(record, what)
    out = {"queries": _count(record.get("queries"), what + " queries")}
    sha = record.get("sha256")
    if counted and "sha256" not in record:
        return out
    if not isinstance(sha, str) or not re.fullmatch("[0-9a-f]{64}", sha):
        raise EvalError("%s: sha256 must be 64 hex digits, got %s" % (what, _short_repr(sha)))
    out["sha256"] = sha
    return out


def _checked_type(value, kind, noun, what):
    """``value`` when it is a ``kind``, else an EvalError naming ``what``."""
    if not isinstance(value, kind):
        raise EvalError("%s: expected %s, got %s" % (what, noun, _short_repr(value)))
    return value


def _checked_dict(value, what, optional=False):
    if value is None and optional:
        return None
    return _checked_type(value, dict, "an object", what)


def _checked_list(value, what):
    return _checked_type(value, list, "a list", what)


def _checked_strs(values, what):
    """A list of strings as a tuple (a string alone is refused, never split)."""
    return tuple(_checked_str(v, what) for v in _checked_list(values, what))


def _checked_counts(values, what):
    """{name: count}: string keys, non-negative integers."""
    return {_checked_str(key, what): _count(value, "%s %r" % (what, key))
            for key, value in _checked_dict(values, what).items()}


def _checked_measure_name(name, what):
    try:
        return str(parse_measure(_checked_str(name, what))) and name
    except EvalError as exc:
        raise EvalError("%s: %s" % (what, exc)) from None


def _checked_pairs(values, what):
    """{measure: [lo, hi] or None}, each bound a value in [0, 1]."""
    out = {}
    for m, pair in _checked_dict(values, what).items():
        if pair is not None:
            if not isinstance(pair, list) or len(pair) != 2:
                raise EvalError("%s %r: expected [lower, upper], got %s"
                                % (what, m, _short_repr(pair)))
            _canonical_values({m: pair[0]}, what)
            _canonical_values({m: pair[1]}, what)
            if pair[0] > pair[1]:
                raise EvalError("%s %r: the lower bound %r is above the upper %r"
                                % (what, m, pair[0], pair[1]))
        out[m] = None if pair is None else list(pair)
    return out


def _count(value, what):
    if type(value) is not int or value < 0:
        raise EvalError("%s: expected a count, got %s" % (what, _short_repr(value)))
    return value


def _checked_str(value, what):
    return _checked_type(value, str, "a string", what)


def _checked_values(values, what):
    """{measure: value} as written, checked as a baseline's are (names that
    parse, every value a number in [0, 1]: a report never holds NaN)."""
    _canonical_values(values, what)
    return dict(values)


# --- a stages block read back (a baseline, a JSON report) -----------------------

def _checked_stages(data, where):
    """A stages block as a baseline or a JSON report holds it, every field
    checked (settings, counts, slices, the hold-out's counts, each query's
    stage); None stays None."""
    if data is None:
        return None
    what = "%s: stages" % where
    if not isinstance(data, dict):
        raise EvalError("%s: expected an object, got %s" % (what, _short_repr(data)))
    out = {"field": _checked_field_name(data.get("field"), "%s field" % what),
           "threshold": _as_score(data.get("threshold"), "%s threshold" % what) + 0.0,
           "k": _cutoff_int(data.get("k"), "%s k" % what)}
    for key, choices in (("unit", UNITS), ("evidence", EVIDENCE_RULES)):
        if data.get(key) not in choices:
            raise EvalError("%s %s: expected one of %s, got %s"
                            % (what, key, ", ".join(choices), _short_repr(data.get(key))))
        out[key] = data[key]
    if out["unit"] == "evidence":
        out["cover"] = _param_value(_REGISTRY["answer_given_evidence"], "cover",
                                    data.get("cover"), "%s cover" % what)
    out["counts"] = _checked_stage_counts(data.get("counts"), "%s counts" % what)
    apart = data.get("apart") or {}
    if not isinstance(apart, dict) or not all(
            isinstance(key, str) and type(v) is int and v >= 0 for key, v in apart.items()):
        raise EvalError("%s apart: expected counts, got %s" % (what, _short_repr(apart)))
    out["apart"] = dict(apart)
    slices = data.get("slices") or {}
    if not isinstance(slices, dict):
        raise EvalError("%s slices: expected an object, got %s" % (what, _short_repr(slices)))
    out["slices"] = {_checked_slice_name(name, "%s slices" % what): _checked_stage_counts(
        counts, "%s slices %r" % (what, name)) for name, counts in slices.items()}
    held = data.get("holdout")
    if held is not None:
        if not isinstance(held, dict):
            raise EvalError("%s holdout: expected an object, got %s" % (what, _short_repr(held)))
        out["holdout"] = {"slice": _checked_slice_name(held.get("slice"), "%s holdout" % what),
                          "counts": _checked_stage_counts(held.get("counts"),
                                                          "%s holdout counts" % what)}
    per_query = data.get("per_query")
    if per_query is not None:
        if not isinstance(per_query, dict) or not all(
                isinstance(q, str) and stage in STAGES for q, stage in per_query.items()):
            raise EvalError("%s per_query: expected {query: stage}, a stage one of %s, got %s"
                            % (what, ", ".join(STAGES), _short_repr(per_query)))
        if _stage_counts(per_query.values()) != out["counts"]:
            raise EvalError("%s: the counts are not those of per_query: the file was edited; "
                            "write it again" % what)
        out["per_query"] = dict(per_query)
    return out


def _checked_stage_counts(counts, what):
    """{stage: count} of the four stages exactly."""
    if not isinstance(counts, dict) or set(counts) != set(STAGES) or not all(
            type(v) is int and v >= 0 for v in counts.values()):
        raise EvalError("%s: expected a count for each of %s, got %s"
                        % (what, ", ".join(STAGES), _short_repr(counts)))
    return {stage: counts[stage] for stage in STAGES}
