"""Measure names: the Measure record, parsing and printing canonical names.

A Measure is a parsed name (``ndcg(gain=linear)@10``); parse_measure and
str() are exact inverses.  Every name is read from the registry: our names
and the peers' spellings (see Spelling), the parameters with their types,
choices and peer values.  _UnitCall says how the scorer calls a measure
(the view it reads, its budget).  Also the field names of score(field=...).

Uses: 01_head, 02_records, 03_measures.  Used by: every later file but
ranking.
"""


class Measure(NamedTuple):
    """One measure at one cutoff, e.g. ``ndcg(gain=linear)@10``.

    ``k`` is the cutoff: an int, :data:`ALL` for the whole ranking (``map@all``),
    or None for a measure that takes no cutoff (``rprec``).  ``params`` holds
    only the values that differ from the measure's defaults, as sorted
    ``(name, value)`` pairs, so equal measures have equal names.

    >>> m = parse_measure("ndcg(gain=linear)@10")
    >>> m.name, m.k, m.params
    ('ndcg', 10, (('gain', 'linear'),))
    >>> str(m), str(parse_measure("mrr@all")), str(parse_measure("bpref(rel=2)"))
    ('ndcg(gain=linear)@10', 'mrr@all', 'bpref(rel=2)')
    """
    name: str
    k: object          # int, ALL or None
    params: Tuple[Tuple[str, object], ...] = ()

    def __str__(self):
        inner = ",".join("%s=%s" % (key, _value_text(v)) for key, v in self.params)
        return "%s%s%s" % (self.name, "(%s)" % inner if inner else "", _cutoff_text(self.k))

    def value(self, top_grades, grades):
        """Score one query from ``top_grades``, the grades of its top ids, best
        first (UNJUDGED where unlabelled), and ``grades``, every grade the qrels
        give it.

        >>> parse_measure("recall@2").value([1, UNJUDGED, 1], [1, 1, 0])
        0.5
        """
        return self.bind()(top_grades, grades)

    def bind(self):
        """The per-query function (top_grades, grades) -> float of value(), with k
        and the parameters filled in.

        >>> parse_measure("ndcg(gain=linear)@3").bind()([2, 1, 0], [2, 2, 1]) > 0.69
        True
        """
        func, args = self._parts()
        call = _UnitCall.of(self)
        if call.view != "id" or call.budget:
            raise EvalError("%s reads chunks and their documents: score it with evaluate()"
                            % self)
        return lambda top_grades, grades: func(_from_grades(top_grades),
                                               tuple(sorted(grades, reverse=True)), *args)

    def _parts(self):
        """(func, args): the measure is ``func(ranked, grades, *args)``, args
        being the cutoff (for a measure that takes one; the whole ranking for
        ALL) and the parameters, positionally (a call builds no keyword dict)."""
        spec = _REGISTRY[self.name]
        given = dict(self.params)
        args = tuple(given.get(key, param.default) for key, param in spec.params.items())
        if spec.cutoff:
            args = (_WHOLE_RANKING if self.k is ALL else self.k,) + args
        if given.get("unjudged") == "skip":
            return functools.partial(_judged_only, spec.func), args
        return spec.func, args


class _UnitCall(NamedTuple):
    """How the scorer calls one measure: the view it reads ("id", "doc",
    ("evidence", rel, cover) or "spans"), its budget (or None) and its
    function's arguments after the view (the cutoff first, unless a budget
    gives it per query)."""
    func: object
    view: object
    budget: Optional[int]
    args: tuple

    @classmethod
    def of(cls, m):
        spec = _REGISTRY[m.name]
        given = dict(m.params)
        func, args = m._parts()
        unit = given.get("unit", "id")
        if spec.view == "spans":
            view = "spans"
        elif unit == "evidence":
            view = ("evidence", given.get("rel", REL.default), given.get("cover", COVER.default))
        else:
            view = unit
        budget = given.get("budget")
        if budget:
            args = args[1:]     # the cutoff comes from the budget, query by query
        return cls(func, view, budget, args)


_NAME_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_-]*?)\s*(?:\(([^()]*)\))?\s*(?:@\s*(\S+))?\s*$")
_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$")


class _Name(NamedTuple):
    """A measure name as written, read but not yet completed (see _complete)."""
    text: str
    measure: str
    params: Dict[str, object]        # the parameters written, parsed
    implies: Dict[str, object]       # what the spelling implies (nDCG: gain=linear)
    cutoff: object                   # as written: None, ALL or an int


def _lookup(word, text):
    """(measure, implied values) of a name as written, e.g. ``P_5`` ->
    ('precision', {'k': 5}); ``nDCG`` -> ('ndcg', {'gain': 'linear'})."""
    if word in _SPELLINGS:
        name, implies = _SPELLINGS[word]
        return name, dict(implies)
    match = _TRAILING_DIGITS.match(word)
    if match and match.group(1) in _CUTOFF_SPELLINGS:
        name, implies = _CUTOFF_SPELLINGS[match.group(1)]
        return name, dict(implies, k=_positive_int(match.group(2), "measure %r: the cutoff k"
                                                   % text))
    raise _unknown_measure(word, text)


def _read_name(text):
    """Parse the text of a measure name into a _Name."""
    if not isinstance(text, str):
        raise EvalError("a measure name must be a string, got %r" % (text,))
    match = _NAME_RE.match(text)
    if not match:
        raise EvalError("cannot parse measure %r: expected name(param=value,...)@k, "
                        "e.g. ndcg(gain=linear)@10" % text)
    word, inner, cutoff = match.groups()
    name, implies = _lookup(word, text)
    spec = _REGISTRY[name]
    params = {}
    for item in filter(None, (p.strip() for p in (inner or "").split(","))):
        key, sep, raw = item.partition("=")
        if not sep:
            raise EvalError("measure %r: parameter %r must look like name=value" % (text, item))
        key, raw = _our_param(spec, key.strip(), raw.strip())
        if key not in spec.accepts:
            raise EvalError("measure %r: unknown parameter %r for %s (allowed: %s)"
                            % (text, key, name, ", ".join(spec.accepts) or "none"))
        if key in params:
            raise EvalError("measure %r: parameter %r is given twice" % (text, key))
        params[key] = _param_value(spec, key, raw, "measure %r: %s" % (text, key))
    if cutoff is not None:
        if "k" in implies:
            raise EvalError("measure %r: %s already says its cutoff (%s%s); write %s@K for "
                            "another" % (text, word, name, _cutoff_text(implies["k"]), name))
        if not spec.cutoff:
            raise EvalError("measure %r: %s takes no cutoff; write %s" % (text, name, name))
        if "budget" in params:
            raise EvalError("measure %r: a budget is the cutoff; write %s(budget=%s) without @"
                            % (text, name, params["budget"]))
        cutoff = ALL if cutoff == "all" else _positive_int(cutoff, "measure %r: the cutoff k"
                                                           % text)
    return _Name(text, name, params, implies, cutoff)


def _our_param(spec, key, raw):
    """(key, raw value) in our terms: a peer's ``dcg=log2`` is ``gain``'s ``linear``."""
    for our_key, param in spec.accepts.items():
        for spelling, value in param.peer_values:
            if spelling == "%s=%s" % (key, raw):
                return our_key, value
    return key, raw


def _param_value(spec, key, raw, what):
    """The value of parameter ``key`` of measure ``spec`` from text (or from a
    library value), checked against its declaration."""
    param = spec.accepts[key]
    if param.kind is str and not param.choices:     # a name: score(field=NAME)
        return _checked_field_name(raw, what)
    if param.choices:
        reason = spec.refused.get("%s=%s" % (key, raw))
        if reason:
            raise EvalError("%s: %s=%s is refused: %s" % (what.rpartition(":")[0], key, raw,
                                                         reason))
        if not isinstance(raw, str) or raw not in param.choices:
            raise EvalError("%s must be %s, got %r" % (what, param.rule(), raw))
        return raw
    accepted = (str, int) if param.kind is int else (str, int, float)
    try:
        if isinstance(raw, bool) or not isinstance(raw, accepted):
            raise ValueError(raw)
        value = _number(raw, param.kind) if isinstance(raw, str) else param.kind(raw)
        if param.kind is float:
            if not math.isfinite(value):
                raise ValueError(raw)
            value += 0.0        # -0.0 is 0.0: one policy, one name
    except (ValueError, OverflowError):
        raise EvalError("%s must be %s, got %r" % (what, param.rule(), raw)) from None
    if ((param.minimum is not None and value < param.minimum)
            or (param.maximum is not None and value > param.maximum)):
        raise EvalError("%s must be %s, got %r" % (what, param.rule(), raw))
    return value


def _complete(name, k, overrides):
    """The Measure of a _Name: the parameters written, else what the spelling
    implies, else ``overrides`` (the report's rel and gain), else the defaults;
    the cutoff written, else implied, else ``k``."""
    spec = _REGISTRY[name.measure]
    params = dict(name.params)
    for key, value in name.implies.items():
        if key != "k":
            params.setdefault(key, value)
    for key, value in overrides.items():
        if key in spec.accepts and key not in params:
            params[key] = _param_value(spec, key, value, "measure %r: %s" % (name.text, key))
    if "unit" in overrides and "unit" not in spec.accepts and _ranks_labelled_ids(spec):
        # Counting ids under a name asked for in documents is another number: refused.
        raise EvalError("measure %r counts retrieved ids and has no unit, so unit=%s (--unit "
                        "%s) cannot apply to it; give the unit per measure instead, e.g. "
                        "recall(unit=%s),%s" % (name.text, overrides["unit"], overrides["unit"],
                                                overrides["unit"], name.text))
    _check_options(spec, params, name.text)
    cutoff = None
    if spec.cutoff and "budget" not in params:
        cutoff = name.implies.get("k", name.cutoff if name.cutoff is not None else k)
        if cutoff is None:
            raise EvalError("measure %r has no cutoff: write it as %s@K or %s@all, or give k"
                            % (name.text, name.measure, name.measure))
        if cutoff is not ALL:
            cutoff = _cutoff_int(cutoff, "measure %r: the cutoff k" % name.text)
    kept = tuple(sorted((key, v) for key, v in params.items() if v != spec.accepts[key].default))
    return Measure(name.measure, cutoff, kept)


def _ranks_labelled_ids(spec):
    """True for a measure whose value the labels of the retrieved ids decide
    (recall, rprec, judged, ...), not spans, abstention or diversity."""
    return spec.view == "ranked" and spec.labels and spec.population == "scored"


def _check_options(spec, params, text):
    """The options that only make sense together: a unit the measure counts
    (its default included: diversity counts documents only), cover only for
    evidence."""
    for key, param in spec.params.items():
        if param.required and key not in params:
            raise EvalError("measure %r: %s needs %s=...: e.g. %s(%s=faithfulness)"
                            % (text, spec.name, key, spec.name, key))
    unit = params.get("unit", "id")
    if "unit" in spec.options and unit not in spec.options["unit"].choices:
        raise EvalError("measure %r: %s counts %s only: write %s(unit=%s)"
                        % (text, spec.name, " or ".join(spec.options["unit"].choices),
                           spec.name, spec.options["unit"].choices[0]))
    if "cover" in params and unit != "evidence" and params["cover"] != COVER.default:
        raise EvalError("measure %r: cover applies to unit=evidence only" % text)
    _check_unjudged_option(params, unit, text)


def _expands(name):
    """True when a name is taken at every cutoff of ``k``: it takes a cutoff and
    neither its text nor its spelling gives one (nor a budget)."""
    return (_REGISTRY[name.measure].cutoff and name.cutoff is None
            and "k" not in name.implies and "budget" not in name.params)


def _number(raw, kind):
    """int or float from plain ASCII text: without the underscores (``1_0``) or
    the non-ASCII digits (``٣``, ``５``) that Python itself would read."""
    text = str(raw).strip()
    if "_" in text or not text.isascii():
        raise ValueError(text)
    return kind(text)


def _positive_int(raw, what):
    if isinstance(raw, bool):
        raise EvalError("%s must be a positive integer, got %r" % (what, raw))
    try:
        value = raw if isinstance(raw, int) else _number(raw, int)
    except ValueError:
        raise EvalError("%s must be a positive integer, got %r" % (what, raw)) from None
    if value < 1:
        raise EvalError("%s must be a positive integer, got %r" % (what, raw))
    return value


def _unknown_measure(name, text):
    import difflib   # only on this error path: keeps start-up fast
    close = difflib.get_close_matches(name, list(_SPELLINGS), n=1, cutoff=0.5)
    hint = "; did you mean %r?" % close[0] if close else ""
    return EvalError("unknown measure %r%s (known: %s)"
                     % (text, hint, ", ".join(available_measures())))


def parse_measure(text, *, k=None, rel=1, gain="exponential"):
    """Parse a measure name into a :class:`Measure`; the inverse of ``str(Measure)``.

    Accepts our canonical names (``recall@5``, ``ndcg(gain=linear)@10``,
    ``success(rel=2)@1``, ``map@all``, ``rprec``) and the peers' spellings that
    the registry declares: ir_measures' (``nDCG@10``, ``R@100``, ``RR@10``,
    ``P(rel=2)@5``, ``AP@10``, ``Success@5``, ``Judged@10``, ``Rprec``) and
    trec_eval's (``ndcg_cut_10``, ``recall_100``, ``P_5``, ``map_cut_10``,
    ``success_10``, ``recip_rank``, ``Rprec``, ``bpref``).  ``k``, ``rel`` and
    ``gain`` fill in what the text leaves out.  ir_measures' nDCG and
    trec_eval's ndcg_cut mean linear gain.

    >>> str(parse_measure("nDCG@10")), str(parse_measure("P(rel=2)@5"))
    ('ndcg(gain=linear)@10', 'precision(rel=2)@5')
    >>> str(parse_measure("ndcg_cut_10")), str(parse_measure("mrr", k=3, rel=2))
    ('ndcg(gain=linear)@10', 'mrr(rel=2)@3')
    >>> str(parse_measure("nDCG(dcg=exp-log2)@10")), str(parse_measure("recip_rank"))
    ('ndcg@10', 'mrr@all')
    >>> parse_measure("Rprec"), parse_measure("map@all")
    (Measure(name='rprec', k=None, params=()), Measure(name='map', k=ALL, params=()))
    """
    if isinstance(text, Measure):
        return text
    return _complete(_read_name(text), k, {"rel": rel, "gain": gain})


def _split_top_level(text):
    """Split 'a,b(x=1,y=2)@5' on the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_cutoffs(k):
    """Cutoffs from an int, an iterable of ints or a string like ``"1,5,10"``.

    >>> parse_cutoffs("10,1,5,5")
    (1, 5, 10)
    """
    if isinstance(k, str):
        items = [p for p in (s.strip() for s in k.split(",")) if p] or [k]
    elif isinstance(k, int):
        items = [k]
    elif isinstance(k, (list, tuple, set, frozenset, range)):
        items = list(k)
    else:
        raise EvalError("k must be a positive integer, a list of them or a string like "
                        "'1,5,10', got %r" % (k,))
    if not items:
        raise EvalError("k: give at least one cutoff")
    return tuple(sorted({_cutoff_int(item, "k") for item in items}))


def _cutoff_int(raw, what):
    """A positive integer cutoff below the number that stands for @all inside
    the measure functions (so the two can never be confused)."""
    cutoff = _positive_int(raw, what)
    if cutoff >= _WHOLE_RANKING:
        raise EvalError("%s must be below %d (write @all for the whole ranking), got %s"
                        % (what, _WHOLE_RANKING, _short_repr(raw, 40)))
    return cutoff


def _checked_measure(measure):
    """A Measure built by hand, if it is what its canonical name reads back as
    (a registered name, a valid cutoff, canonical parameters)."""
    try:
        again = parse_measure(str(measure))
    except (EvalError, TypeError, KeyError, ValueError, AttributeError):
        again = None
    if again != measure:
        raise EvalError("not a valid measure: %s (build one with parse_measure)"
                        % _short_repr(measure, 100))
    return measure


def resolve_measures(measures=None, k=DEFAULT_K, *, rel=1, gain="exponential", metrics=None,
                     unit="id"):
    """Measures from names (a list, or one comma-separated string) and cutoffs.

    A name without ``@k`` is taken at every cutoff in ``k`` (``@all`` is the
    whole ranking; a measure without a cutoff, or cut at a budget, is taken
    once); the order is the order of the names, then of the cutoffs;
    duplicates are dropped.  ``unit`` is the unit of the names that give none
    and count units (``recall``); a name that counts ids and has no unit
    (``judged``, ``rprec``, ``bpref``, ``context_precision``) is refused with
    a unit other than ``id``, since it would count ids under that unit.

    >>> [str(m) for m in resolve_measures("recall,ndcg@3,map@all,rprec", k="1,5")]
    ['recall@1', 'recall@5', 'ndcg@3', 'map@all', 'rprec']
    """
    measures = _renamed(measures, metrics)
    metrics = DEFAULT_METRICS if measures is None else measures
    if measures is None and unit != "id":   # the defaults that count this unit
        metrics = [name for name in DEFAULT_METRICS
                   if unit in _REGISTRY[name].options["unit"].choices]
    if isinstance(metrics, str):
        metrics = _split_top_level(metrics)
    elif not isinstance(metrics, (list, tuple)):
        raise EvalError("measures must be a list of names or one comma-separated string, "
                        "got %r" % (metrics,))
    for item in metrics:
        if not isinstance(item, (str, Measure)):
            raise EvalError("a measure name must be a string, got %r" % (item,))
    cutoffs = parse_cutoffs(k)
    rel = _positive_int(rel, "rel")
    if gain not in GAIN.choices:
        raise EvalError("gain must be %s, got %r" % (GAIN.rule(), gain))
    if unit not in UNITS:
        raise EvalError("unit must be one of %s, got %r" % (", ".join(UNITS), unit))
    overrides = {"rel": rel, "gain": gain}
    if unit != "id":
        overrides["unit"] = unit
    out = []
    for item in metrics:
        if isinstance(item, Measure):
            found = [_checked_measure(item)]
        else:
            name = _read_name(item)
            found = [_complete(name, c, overrides)
                     for c in (cutoffs if _expands(name) else (None,))]
        out.extend(m for m in found if m not in out)
    if not out:
        raise EvalError("no measures requested")
    return tuple(out)


# A field name is carried inside a canonical measure name, score(field=NAME):
# no parentheses, commas, "=", "@" or spaces.
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*$")


def _checked_field_name(name, what):
    """A field name a canonical measure name can carry (see _FIELD_NAME).

    >>> _checked_field_name("factual_correctness(mode=f1)", "x.csv: the column")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: x.csv: the column 'factual_correctness(mode=f1)' cannot name a score field: score(field=NAME) carries letters, digits, _ . and - only, starting with a letter or _; rename it
    """
    if not isinstance(name, str) or not _FIELD_NAME.match(name):
        raise EvalError("%s %s cannot name a score field: score(field=NAME) carries letters, "
                        "digits, _ . and - only, starting with a letter or _; rename it"
                        % (what, _short_repr(name)))
    return name


def _field_of(measure):
    """The field of a score(field=...) measure name, else None.

    >>> _field_of("score(field=faithfulness)"), _field_of("recall@5")
    ('faithfulness', None)
    """
    m = parse_measure(measure)
    return dict(m.params)["field"] if m.name == "score" else None


def _renamed(measures, metrics):
    """``measures=``, or ``metrics=``, its old name; not both."""
    if metrics is None:
        return measures
    if measures is not None:
        raise EvalError("give measures= or metrics= (its old name), not both")
    return metrics
