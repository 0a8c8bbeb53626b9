"""Test sets: slices, the hold-out, valid-until dates.

Query metadata {qid: {"slices": {field: [value, ...]}, "question": ...,
"answer": ..., "answerable": bool, "valid_until": "YYYY-MM-DD"}} (every key
optional) puts each query in the slices named field=value of its fields.
A slice's mean is over its scored queries, each measure over its own
population (_population_means); the overall mean is the same thing over
every scored query.  One slice may be held out: scored and gated on its
own, left out of the overall and of every other slice, and shown only as
counts and means (HeldOut).  valid_until dates leave out the queries
expired on the day given as as_of; no clock is ever read.

Uses: 01_head to 05_inputs.  Used by: evaluation, judge scores, the
command line.
"""

_QUERY_KEYS = {"slices": dict, "question": str, "answer": str, "answerable": bool,
               "valid_until": str}


def _checked_queries(queries):
    """Query metadata (see the banner above), each part checked: the ids as
    text, fields without '=', values non-empty text.

    >>> _checked_queries({1: {"slices": {"source": ["real"]}, "answerable": True}})
    {'1': {'slices': {'source': ['real']}, 'answerable': True}}
    """
    if not isinstance(queries, dict):
        raise EvalError("queries must be a dict {query_id: {\"slices\": {field: [value, ...]}, "
                        "...}}, got %s" % type(queries).__name__)
    out = {}
    for qid, info in queries.items():
        qid = _as_id(qid, "queries: query id")
        where = "queries: query %r" % qid
        if not isinstance(info, dict):
            raise EvalError("%s: must be an object {\"slices\": ..., ...}, got %s"
                            % (where, _short_repr(info, 40)))
        for key, value in info.items():
            if key not in _QUERY_KEYS:
                raise EvalError("%s: unknown key %r (known: %s)"
                                % (where, key, ", ".join(sorted(_QUERY_KEYS))))
            if type(value) is not _QUERY_KEYS[key]:
                raise EvalError("%s: %s must be %s, got %s"
                                % (where, key, _QUERY_KEYS[key].__name__, _short_repr(value, 40)))
        for field, values in info.get("slices", {}).items():
            if not isinstance(field, str) or not field or "=" in field:
                raise EvalError("%s: slice field %r must be non-empty text without '=' (a "
                                "slice is named field=value)" % (where, field))
            if not isinstance(values, list) or not values or not all(
                    isinstance(v, str) and v for v in values):
                raise EvalError("%s: slices.%s must be a non-empty list of non-empty strings, "
                                "got %s" % (where, field, _short_repr(values, 40)))
        if "valid_until" in info:
            _check_date(info["valid_until"], "%s: valid_until" % where)
        out[qid] = info
    return out


def _slice_names(info):
    """The slices a query's metadata puts it in, sorted.

    >>> _slice_names({"slices": {"tag": ["pricing", "eu"], "source": ["real"]}})
    ('source=real', 'tag=eu', 'tag=pricing')
    """
    return tuple(sorted({"%s=%s" % (field, value)
                         for field, values in info.get("slices", {}).items()
                         for value in values}))


class _TestSet:
    """What query metadata makes of a test set for one evaluation: the
    members with no labels (added to the qrels, unscored), the members
    expired on ``as_of`` (left out, their run rankings ignored), the
    hold-out members (scored apart, see _score), and the report's slices."""

    def __init__(self, queries, by=(), holdout=None, as_of=None, reveal=False, info=None,
                 notes=()):
        self.info, self.notes = info, tuple(notes)   # the metadata file's input info
        self.queries = _checked_queries(queries)
        self.names = {qid: _slice_names(info) for qid, info in self.queries.items()}
        fields = {_slice_field(n) for names in self.names.values() for n in names}
        self.by = _checked_by(by, fields)
        if as_of is not None:
            if not isinstance(as_of, str):
                raise EvalError("as_of must be a date YYYY-MM-DD, got %s" % _short_repr(as_of))
            _check_date(as_of, "as_of")
        self.as_of = as_of
        self.dated = sorted(q for q, info in self.queries.items() if "valid_until" in info)
        self.expired = frozenset(q for q in self.dated if self.as_of is not None
                                 and self.queries[q]["valid_until"] < self.as_of)
        self.holdout = None if holdout is None else _checked_holdout_name(holdout, fields)
        self.held_ids = frozenset(q for q, names in self.names.items()
                                  if self.holdout in names)
        if self.holdout is not None and not self.held_ids:
            raise EvalError("holdout %s: no query is in that slice (check the field and "
                            "the value)" % self.holdout)
        self.hidden = self.held_ids - self.expired
        if reveal and self.holdout is None:
            raise EvalError("reveal_holdout (--reveal-holdout) needs a hold-out (--holdout "
                            "FIELD=VALUE)")
        self.reveal = bool(reveal)

    def qrels(self, qrels):
        """The qrels of the test set: expired queries out, members with no
        labels in (as queries with no label: unscored)."""
        empty = list if any(type(labels) is list for labels in qrels.values()) else dict
        out = {qid: labels for qid, labels in qrels.items() if qid not in self.expired}
        for qid in self.queries:
            if qid not in out and qid not in self.expired:
                out[qid] = empty()
        return out

    def report(self, report, held):
        """``report`` (scored without the hold-out) with its slices, the
        hold-out (from ``held``: its values, unscored and missing ids, see
        _score) and the date warnings."""
        members = list(report.per_query) + list(report.unscored)
        membership = {q: self.names[q] for q in sorted(members) if self.names.get(q)}
        slices = _slice_stats(report, membership)
        holdout, cells = None, report.cells
        if self.holdout is not None:
            holdout = _held_out(self.holdout, held, report.measures, self.reveal,
                                self.held_ids, cells)
            if cells:
                cells = {q: c for q, c in cells.items() if q not in self.held_ids} or None
        return report._replace(slices=slices, membership=membership, by=self.by,
                               holdout=holdout, cells=cells,
                               warnings=report.warnings + self.notes + self._date_notes())

    def _date_notes(self):
        if not self.dated:
            return ()
        if self.as_of is None:
            return ("%s a valid_until date; --as-of DATE (as_of=) leaves out those "
                    "expired by then" % _plural(len(self.dated), "query carries",
                                                "queries carry"),)
        if not self.expired:
            return ()
        shown = sorted(self.expired - self.held_ids)
        held = len(self.expired & self.held_ids)
        return ("%s expired by %s (valid_until before it), left out of every mean%s%s"
                % (_plural(len(self.expired), "query", "queries"), self.as_of,
                   ": " + _preview(shown) if shown else "",
                   "%s%d held out (not named)" % ("; " if shown else ": ", held)
                   if held else ""),)


def _checked_by(by, fields):
    if by is None:
        return ()
    if not isinstance(by, (str, list, tuple)):
        raise EvalError("by must be a slice field or a list of them, got %s" % _short_repr(by, 40))
    by = (by,) if isinstance(by, str) else tuple(by)
    for field in by:
        if not isinstance(field, str) or field not in fields:
            raise EvalError("by: no query carries the slice field %r (fields: %s)"
                            % (field, ", ".join(sorted(fields)) or "none"))
    return tuple(sorted(set(by), key=by.index))


def _checked_holdout_name(holdout, fields):
    if not isinstance(holdout, str) or "=" not in holdout or not _slice_field(holdout) \
            or holdout.endswith("="):
        raise EvalError("holdout must name one slice as FIELD=VALUE (e.g. split=holdout), "
                        "got %s" % _short_repr(holdout, 40))
    if _slice_field(holdout) not in fields:
        raise EvalError("holdout %s: no query carries the slice field %r (fields: %s)"
                        % (holdout, _slice_field(holdout), ", ".join(sorted(fields)) or "none"))
    return holdout


def _test_set(queries, by, holdout, as_of, reveal_holdout, average, info=None, notes=()):
    """The _TestSet of evaluate()'s metadata options, or None when none is
    given (the plain path: no work per query) or the report averages as
    trec_eval does (it knows no metadata)."""
    asked = bool(by) or holdout is not None or as_of is not None or reveal_holdout
    if queries is None:
        if asked:
            raise EvalError("slices (--by), a hold-out (--holdout) and dates (--as-of) need "
                            "query metadata: --queries FILE, a test-set JSONL as the qrels, or "
                            "queries= in the library")
        return None
    if average != "scored":
        if asked:
            raise EvalError("slices, a hold-out and --as-of are not for trec_eval's average, "
                            "which is never gated: drop them or the average")
        return None
    return _TestSet(queries, by, holdout, as_of, reveal_holdout, info, notes)


def _metadata(described, qrels_name, queries):
    """(metadata, input info, notes): what the test-set file says of its
    queries (``described``), or ``queries`` instead when given: a dict, or a
    queries file (see load_queries) whose input info the report keeps."""
    if queries is None:
        return described, None, ()
    notes = ()
    if described is not None:
        notes = ("%s says what its queries are, and query metadata was given too "
                 "(--queries, queries=): that metadata's slices and dates are used, the "
                 "test set's are not" % qrels_name,)
    if isinstance(queries, dict):
        return queries, None, notes
    metadata, info = _read_queries(queries)
    return metadata, info, notes


def _slice_stats(report, membership):
    """{slice: {"queries", "unscored", "mean"[, "n"]}} of every slice the
    membership names: its scored queries, unscored ids and means (each
    measure over the queries that have it)."""
    members = {}
    for qid, names in membership.items():
        for name in names:
            members.setdefault(name, []).append(qid)
    stats = {}
    for name, qids in sorted(members.items()):
        rows = {q: report.per_query[q] for q in qids if q in report.per_query}
        mean, counts = _population_means(rows, report.measures, report.cells and {
            q: report.cells[q] for q in qids if q in report.cells})
        stats[name] = {"queries": len(rows), "mean": mean,
                       "unscored": [q for q in qids if q not in rows]}
        if counts is not None:
            stats[name]["n"] = counts
    return stats


def _held_out(name, held, measures, reveal, ids, cells=None):
    """The HeldOut of the hold-out's values, unscored and missing ids (see
    _set_apart); ``ids`` are all its members, expired ones too; ``cells``
    the report's cells of set-level measures (those of its ids are read)."""
    per_query, unscored, missing = held
    mean, counts = _population_means(per_query, measures, cells and {
        q: c for q, c in cells.items() if q in ids})
    return HeldOut(name, mean, counts, len(per_query), len(unscored), len(missing),
                   _members_sha256(list(per_query) + list(unscored)), reveal, per_query,
                   {"unscored": unscored, "missing": missing, "all": tuple(sorted(ids))})


def _population_means(per_query, names, cells=None):
    """(mean, n) of each measure over the queries that have a value for it
    (its population: a character measure leaves out the queries with no span
    label); a set-level measure's over the ``cells`` of those queries (see
    _take_cells).  A measure no query has a value for has no mean; n is
    returned only when the populations differ."""
    mean, counts = {}, {}
    for name in names:
        aggregate = _REGISTRY[parse_measure(name).name].aggregate
        if aggregate is not None:
            found = [c[name] for c in (cells or {}).values() if name in c]
            value = aggregate(found) if found else None
        else:
            found = [row[name] for row in per_query.values() if name in row]
            value = _mean(found) if found else None
        counts[name] = len(found)
        if value is not None:
            mean[name] = value
    same = all(n == len(per_query) for n in counts.values())
    return mean, None if same else counts
