"""Provenance: what the numbers are about.

What the numbers are about, so that a gate can say why they moved:
  meta          flat dotted keys to strings, given by the user (--meta,
                --meta-file, evaluate(meta=...)); in every report format
                and saved baseline.  The gate names every key that changed
                and refuses (--same KEY) when a key must not.
  label_sha256  each qrels query's label hash (see _label_sha256); a saved
                baseline keeps them, so the gate can say whose labels
                changed and compare per-query values on the others.

Uses: 01_head, 02_records, 04_measure_names.  Used by: evaluation, judge
scores, baselines, the gate, reports, HTML, the command line.
"""

# Documented keys: free keys are allowed, these are the names to use.
META_KEYS = ("dataset.version", "index.build", "chunker.name", "embedding.model",
             "reranker.model", "generator.model", "judge.model", "git.commit")
_META_KEY = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\Z")
_META_KEY_RULE = "letters, digits, '_' and '-', in parts joined by '.' (e.g. embedding.model)"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ABSENT = "(absent)"


def _meta_key(key, where):
    """``key`` when it is a valid meta key, else an EvalError naming ``where``.

    >>> _meta_key("embedding.model", "--meta")
    'embedding.model'
    >>> _meta_key("embedding..model", "--meta")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: --meta: meta key 'embedding..model' must be letters, digits, '_' and '-', in parts joined by '.' (e.g. embedding.model)
    """
    if not isinstance(key, str) or not _META_KEY.match(key):
        raise EvalError("%s: meta key %s must be %s" % (where, _short_repr(key), _META_KEY_RULE))
    return key


def _meta_value(value, key, where):
    """A meta value as its string: text as given, numbers and booleans as JSON
    writes them; never empty, never more than one line.

    >>> _meta_value(512, "chunker.size", "m"), _meta_value(True, "git.dirty", "m")
    ('512', 'true')
    """
    if isinstance(value, bool) or isinstance(value, int) or (
            isinstance(value, float) and math.isfinite(value)):
        return json.dumps(value)
    if not isinstance(value, str):
        raise EvalError("%s: meta %s must be a string, number or boolean, got %s"
                        % (where, key, "null" if value is None else _short_repr(value, 40)))
    if not value.strip():
        raise EvalError("%s: meta %s is empty (an unset variable?)" % (where, key))
    if _CONTROL.search(value):
        raise EvalError("%s: meta %s must be one line of text, got %s"
                        % (where, key, _short_repr(value, 40)))
    return value


def _flat_meta(meta, where):
    """The flat meta of an object: nested objects flattened with ``.``, values
    as strings (see _meta_value), keys sorted.

    >>> _flat_meta({"embedding": {"model": "bge-m3", "dim": 1024}, "git.commit": "3f2a"}, "m")
    {'embedding.dim': '1024', 'embedding.model': 'bge-m3', 'git.commit': '3f2a'}
    >>> _flat_meta({"a": {"b": "x"}, "a.b": "y"}, "m.json")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: m.json: meta a.b is given twice (a nested object and a dotted key)
    """
    if not isinstance(meta, dict):
        raise EvalError("%s: meta must be an object {key: value}, got %s"
                        % (where, type(meta).__name__))
    flat, pending = {}, [("", meta)]
    while pending:          # a loop, not recursion: a deeply nested file is no crash
        prefix, obj = pending.pop()
        if not obj and prefix:
            raise EvalError("%s: meta %s is an empty object (no value)" % (where, prefix[:-1]))
        for key, value in obj.items():
            if not isinstance(key, str):
                raise EvalError("%s: meta key %s must be text" % (where, _short_repr(key)))
            full = _meta_key(prefix + key, where)
            if isinstance(value, dict):
                pending.append((full + ".", value))
            elif full in flat:
                raise EvalError("%s: meta %s is given twice (a nested object and a dotted key)"
                                % (where, full))
            else:
                flat[full] = _meta_value(value, full, where)
    return dict(sorted(flat.items()))


def _checked_meta(meta):
    """The library's ``meta=``: None (no meta) or an object (see _flat_meta)."""
    return {} if meta is None else _flat_meta(meta, "meta")


def _meta_warnings(meta):
    """A warning for each key that looks like a documented key written another
    way: keys that drift between runs are never compared.

    >>> _meta_warnings({"embedding_model": "bge-m3", "judge.model": "x", "team": "search"})
    ["meta key 'embedding_model' looks like the documented 'embedding.model': write it so, or runs and baselines will not compare it"]
    """
    documented = {re.sub(r"[._-]", "", key): key for key in META_KEYS}
    warnings = []
    for key in meta:
        known = documented.get(re.sub(r"[._-]", "", key.lower()))
        if known is not None and known != key:
            warnings.append("meta key %r looks like the documented %r: write it so, or runs "
                            "and baselines will not compare it" % (key, known))
    return warnings


def _with_meta(report, meta):
    """``report`` with its meta set and warnings about the meta keys added."""
    return report._replace(meta=meta, warnings=report.warnings + tuple(_meta_warnings(meta)))


def _meta_text(value):
    return _ABSENT if value is None else value


def _meta_changes(report, baseline):
    """Every meta key whose value differs from the baseline's, sorted (None
    when the baseline records no meta at all: a flat or older file)."""
    if baseline.meta is None:
        return None
    before, now = baseline.meta, report.meta or {}
    return tuple(MetaChange(key, before.get(key), now.get(key))
                 for key in sorted(set(before) | set(now)) if before.get(key) != now.get(key))


def _meta_notes(report, changes, baseline):
    """The gate notes on meta: one per changed key, the line that explains a
    regression ("embedding.model: e5-large -> bge-m3")."""
    if changes is None:
        return (["%s records no meta (a flat file, or saved before --meta): save it again to "
                 "compare what the numbers are about" % baseline.source] if report.meta else [])
    return ["changed since the baseline: %s: %s -> %s"
            % (c.key, _meta_text(c.baseline), _meta_text(c.current)) for c in changes]


def _same_keys(same, where="same"):
    """``same=`` as a tuple of meta keys (one key may be given as a string, a
    set of them is taken in sorted order, so that notes keep one order)."""
    if same is None or isinstance(same, str):
        keys = () if same is None else (same,)
    elif isinstance(same, (list, tuple)):
        keys = tuple(same)
    elif isinstance(same, (set, frozenset)):
        keys = tuple(sorted(same, key=repr))
    else:
        raise EvalError("%s must be a meta key or a list of them, got %s"
                        % (where, _short_repr(same)))
    return tuple(dict.fromkeys(_meta_key(key, "%s %s" % (where, _short_repr(key)))
                               for key in keys))


def _check_same(meta, baseline, same):
    """Refuse to gate when a key of ``same`` differs from the baseline's (or
    is absent on one side); return a note for each key absent on both."""
    before, now = baseline.meta or {}, meta or {}
    differing = [key for key in same if before.get(key) != now.get(key)]
    if differing:
        def side(value, where):
            return "absent from %s" % where if value is None else "%s in %s" % (value, where)
        raise EvalError("not gated: --same %s: %s (numbers about different setups are not "
                        "compared)" % (", ".join(differing), "; ".join(
                            "%s: %s, %s" % (key, side(before.get(key), baseline.source),
                                            side(now.get(key), "this run"))
                            for key in differing)))
    return ["--same %s: absent from the report and the baseline alike, so nothing was compared"
            % key for key in same if key not in now]


JUDGE_KEYS = ("judge.model", "judge.prompt_sha256")   # what makes judge scores comparable


def _check_same_judge(report, baseline):
    """Judge scores (score(...) measures) are gated only against a baseline
    made by the same judge: ``judge.model`` and ``judge.prompt_sha256`` equal,
    absent on both sides counting as equal (with a note); else refused, and
    --drift tells whether the judge moved.  Returns the notes."""
    if not any(_field_of(m) for m in set(baseline.mean) & set(report.mean)):
        return []
    before, now = baseline.meta or {}, report.meta or {}
    for key in JUDGE_KEYS:
        if before.get(key) != now.get(key):
            raise EvalError("not gated: %s is not the baseline's (%s in %s, %s in this "
                            "run): scores from another judge or prompt are not comparable; "
                            "check the judge with --drift FROZEN.jsonl, then save a new "
                            "baseline" % (key, _meta_text(before.get(key)), baseline.source,
                                          _meta_text(now.get(key))))
    absent = [key for key in JUDGE_KEYS if key not in now]
    if not absent:
        return []
    return ["%s recorded neither in the baseline nor in this run: the judge scores are gated "
            "as if the judge were the same (record it: --meta %s=...)"
            % (" and ".join(absent), absent[0])]


# --- label hashes ---------------------------------------------------------------

def _label_sha256(labels):
    """The label hash of one query: the sha256 (hex) of the canonical JSON
    (RFC 8785: no white space, UTF-8, nothing escaped but what JSON requires)
    of its labels as ``[id or doc, start, end, grade]`` arrays, sorted by id
    (code points), then start and end (null first), then grade.  ``labels``
    is a qrels query: ``{id: grade}`` (start and end null) or a list of
    Label (``doc_sha256`` is not part of it).  Defined once: baselines from
    every version of rag_eval agree.

    >>> _label_sha256({"b": 0, "a": 2}) == hashlib.sha256(
    ...     b'[["a",null,null,2],["b",null,null,0]]').hexdigest()
    True
    >>> _label_sha256([Label("d", 4, 9, 1), Label("d", None, None, 0)]) == hashlib.sha256(
    ...     b'[["d",null,null,0],["d",4,9,1]]').hexdigest()
    True
    """
    if isinstance(labels, dict):
        rows = [(doc, None, None, grade) for doc, grade in labels.items()]
    else:
        rows = [(label.doc, label.start, label.end, label.grade) for label in labels]
    rows.sort(key=lambda row: (row[0], row[1] is not None, row[1] or 0,
                               row[2] is not None, row[2] or 0, row[3]))
    text = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _LabelHashes(collections.abc.Mapping):
    """{query id: label hash} of validated qrels, each hash computed when first
    read: a report carries them at no cost until a baseline is saved or gated."""

    def __init__(self, qrels):
        self._qrels, self._known = qrels, {}

    def __getitem__(self, qid):
        if qid not in self._known:
            self._known[qid] = _label_sha256(self._qrels[qid])
        return self._known[qid]

    def __contains__(self, qid):
        return qid in self._qrels

    def __iter__(self):
        return iter(self._qrels)

    def __len__(self):
        return len(self._qrels)

    def __repr__(self):
        return "<label hashes of %s>" % _plural(len(self), "query", "queries")


def _label_hashes(qrels, testset=None):
    """The _LabelHashes of the qrels of a report: of the test set, its
    hold-out left out (its ids are never written)."""
    if testset is not None and testset.hidden:
        qrels = {qid: labels for qid, labels in qrels.items() if qid not in testset.hidden}
    return _LabelHashes(qrels)


def _checked_label_hashes(hashes, where):
    """A baseline's ``label_sha256``: None, or {query id: 64 hex digits}."""
    if hashes is None:
        return None
    if not isinstance(hashes, dict) or not all(
            isinstance(qid, str) and isinstance(sha, str) and _SHA256_HEX.match(sha)
            for qid, sha in hashes.items()):
        raise EvalError("%s: label_sha256 must be an object {query_id: sha256 in lowercase "
                        "hex}, got %s" % (where, _short_repr(hashes)))
    return hashes


def _checked_baseline_meta(meta, where):
    """A baseline's ``meta``: None, or the flat {key: string} a report has."""
    if meta is None:
        return None
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise EvalError("%s: meta must be an object {key: string}, got %s"
                        % (where, _short_repr(meta)))
    return _flat_meta(meta, "%s: meta" % where)


def _relabelled(report, baseline):
    """The queries both hold whose labels changed since the baseline, sorted;
    None when either side has no label hashes (an older baseline)."""
    before, now = baseline.label_sha256, report.label_sha256
    if before is None or now is None:
        return None
    return tuple(sorted(qid for qid, sha in before.items() if qid in now and now[qid] != sha))


def _relabelled_notes(report, baseline, relabelled):
    """What the gate says of changed labels: which queries, and that the
    list of per-query drops leaves them out while every mean holds them."""
    before = ((baseline.inputs or {}).get("qrels") or {}).get("sha256")
    now = ((report.inputs or {}).get("qrels") or {}).get("sha256")
    if relabelled is None:
        if not (before and now and before != now and baseline.per_query is not None):
            return []
        if baseline.label_sha256 is not None:       # the report's are not kept (read back)
            return ["the qrels changed since the baseline, and the report (read back from "
                    "JSON) keeps no label hashes: which queries' labels changed is not known"]
        return ["%s holds no label hashes (saved before rag_eval kept them): save it again to "
                "see which queries' labels change" % baseline.source]
    if relabelled:
        return ["labels changed since the baseline for %s: %s; their values changed with their "
                "labels: every mean (and the significant test) includes them, the per-query "
                "drops leave them out"
                % (_plural(len(relabelled), "query", "queries"), _preview(relabelled, 20))]
    if before and now and before != now:
        held = report.holdout is not None
        return ["the qrels changed since the baseline (sha256 %s... -> %s...), but no "
                "query both hold changed its labels%s" % (before[:12], now[:12],
                " outside the hold-out (its labels are not recorded: they may have changed)"
                if held else "")]
    return []


def _meta_section(report):
    """The report's meta as a (title, header, rows, notes) section, if any."""
    if report.meta:
        yield ("meta: what these numbers are about", ["key", "value"],
               [[key, value] for key, value in sorted(report.meta.items())], [])
