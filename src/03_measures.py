"""Measures: the specification of every number.

Every measure is a pure function (ranked, grades, k, **params) -> float:
  ranked  a _Ranked: ``labelled``, the (rank, grade) of every id in the top K
          that the qrels give a grade >= 0, best first, ranks from 1
          (K >= k); and ``length``, how many ids the top K holds.  An id the
          qrels do not label, or label with a negative grade, is non-relevant
          and unjudged (as in trec_eval), so it is not listed.
  grades  every grade the qrels give this query, sorted descending.
A character measure (view="spans") takes (context, labels, k, **params)
instead: the query's top chunks and its span labels (see measure()).
Ranking and grade look-up happen once per query (see _rank, in
09_ranking); a measure reads only the few labelled ids, never the whole
ranking.  The registry (@measure) declares each measure with its
parameters, population and peer names; then the measures over ids, the
unanswerable queries, judge scores, units (documents, evidence spans,
characters) and unjudged=skip.  To add a measure: README.md, "How to add a
measure" (a declaration here, a hand-worked row in tests/data/hand_worked.json).

Uses: 01_head, 02_records.  Used by: measure names, the readers, ranking,
evaluation, the gate, reports, the command line, accelerations.
"""

class _Ranked(NamedTuple):
    """One query ranked once: what every measure reads."""
    labelled: list         # (rank, grade >= 0) of the labelled ids in the top K, best first
    length: int            # ids in the top K
    duplicates: int = 0    # repeated ids met while ranking
    straddling: int = 0    # tied score groups that cross a cutoff
    returned: int = 0      # distinct ids in the ranking (exact when asked for)


def _from_grades(grades):
    """A _Ranked from the grades of the top ids, best first (None or a negative
    grade: unlabelled).  For examples and for ranked lists.

    >>> _from_grades([2, -1, None, 0]).labelled
    [(1, 2), (4, 0)]
    """
    return _Ranked(_labelled(grades), len(grades))


def _labelled(grades):
    return [(rank, g) for rank, g in enumerate(grades, 1) if g is not None and g >= 0]


class Param(NamedTuple):
    """One measure parameter, declared once in :func:`measure`: parsing,
    rendering, ``--list-measures`` and the README all read this declaration.

    ``kind`` is int, float or str; a str parameter allows only ``choices``, a
    number nothing below ``minimum``.  ``peer_values`` maps a peer's
    ``key=value`` spelling to our value (ir_measures' ``dcg=log2`` is
    ``gain=linear``).  ``default_text`` says what a default of None stands
    for when it is worked out from the data (a threshold at the midpoint of
    the field's range); without it, a str parameter with no default is a
    required name.
    """
    kind: type
    default: object
    meaning: str
    choices: Tuple[str, ...] = ()
    minimum: object = None
    peer_values: Tuple[Tuple[str, object], ...] = ()
    maximum: object = None
    default_text: Optional[str] = None

    @property
    def required(self):
        """True when a name must give the parameter: a required name
        (``score(field=...)``), or a choice with no default.

        >>> FIELD.required, REL.required
        (True, False)
        """
        return bool(self.choices and self.default not in self.choices
                    or self.kind is str and self.default is None and self.default_text is None)

    def rule(self):
        """What a value must be, in words.

        >>> REL.rule(), GAIN.rule()
        ('a positive integer', 'one of exponential, linear')
        """
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.kind is str:
            return "a name"
        noun = "integer" if self.kind is int else "number"
        if self.minimum is None:
            return "a finite " + noun if self.kind is float else "an integer"
        if self.maximum is not None:
            return "a %s from %s to %s" % (noun, _value_text(self.minimum),
                                           _value_text(self.maximum))
        if self.minimum == 1 and self.kind is int:
            return "a positive integer"
        return "a%s %s >= %s" % ("n" if noun == "integer" else "", noun, _value_text(self.minimum))


class Spelling(NamedTuple):
    """A peer tool's name for a measure, accepted as input: ``text`` as the
    peer writes it (a trailing ``_K`` stands for a cutoff, as in trec_eval's
    ``P_5``), and the parameter values it implies, ``k`` included (trec_eval's
    ``recip_rank`` is ``mrr@all``).  An ``output_only`` spelling is written
    (``--format trec``) but not read, because as input it would clash with
    our own name (trec_eval's uncut ``map`` is ``map@all``; our bare ``map``
    means every ``--k``)."""
    tool: str                                   # trec_eval, ir_measures, ranx or other
    text: str
    implies: Tuple[Tuple[str, object], ...] = ()
    output_only: bool = False


def peer(tool, text, *, output_only=False, **implies):
    """A :class:`Spelling`: ``peer("ir_measures", "nDCG", gain="linear")``."""
    return Spelling(tool, text, tuple(sorted(implies.items())), output_only)


def _peer_name(m, tool):
    """How ``tool`` writes the :class:`Measure` ``m``, from the registry's
    spellings, or None when it has no name for it: a trec_eval name stands
    for the defaults it implies, so ``precision(rel=2)@5`` is not ``P_5``.

    >>> [_peer_name(parse_measure(t), "trec_eval") for t in
    ...  ("precision@5", "precision(rel=2)@5", "ndcg(gain=linear)@10", "ndcg@10", "map@all")]
    ['P_5', None, 'ndcg_cut_10', None, 'map']
    """
    spec = _REGISTRY[m.name]
    for spelling in spec.peers:
        implies = dict(spelling.implies)
        k = implies.pop("k", None)
        if spelling.tool != tool or dict(m.params) != implies:
            continue
        if spelling.text.endswith("_K"):
            if isinstance(m.k, int):
                return "%s%d" % (spelling.text[:-1], m.k)
        elif k is m.k:      # ALL (recip_rank) or None (no cutoff: Rprec)
            return spelling.text
    return None


# Shared parameters.
REL = Param(int, 1, "lowest grade that counts as relevant", minimum=1)
GAIN = Param(str, "exponential", "gain of grade g: 2^g - 1 (exponential, Burges) or g "
             "(linear, Jarvelin; trec_eval, ir_measures)", choices=("exponential", "linear"),
             peer_values=(("dcg=exp-log2", "exponential"), ("dcg=log2", "linear")))

DUP = Param(str, "merge", "overlapping retrieved characters: counted once (merge) or once per "
            "chunk that holds them (count, Chroma's precision and IoU)", choices=("merge", "count"))

# Options every measure of a kind takes, handled by the scorer rather than by
# the measure's function: what a label names (unit), when evidence counts as
# found (cover), and a cutoff by context size instead of count (budget).
UNITS = ("id", "doc", "evidence")
COVER = Param(float, 1.0, "share of an evidence span's characters the top chunks must hold for "
              "it to count as found (0: any character)", minimum=0, maximum=1)
BUDGET = Param(int, None, "the longest prefix of the ranking whose chunks' sizes (tokens, "
               "else characters) sum to at most N", minimum=1)


UNJUDGED_PARAM = Param(str, "nonrel", "ids without a label: non-relevant (nonrel), or removed "
                       "before the cutoff (skip: trec_eval -J, so @5 may read ids ranked far "
                       "below 5; gate on nonrel)", choices=("nonrel", "skip"))


def _unit_param(units):
    return Param(str, "id", "what a label names and a hit counts: the retrieved id, its "
                 "document (doc), or a labelled evidence span (evidence); k counts chunks",
                 choices=units)


# Which queries a measure averages over (its ``population``).
POPULATIONS = {"scored": "the scored queries: those with an id graded >= rel",
               "spans": "the scored queries with a span label graded >= rel",
               "answerable": "the answerable queries: those with an id graded >= rel",
               "unanswerable": 'the queries stated unanswerable ("answerable": false)',
               "stated": "the answerable queries and those stated unanswerable",
               "scores": "the queries the score files give a value for the field; those "
                         "without one are listed as unscored",
               "evidence": "the answerable queries with an answer verdict whose evidence the "
                           "top k hold (every relevant unit; one with evidence=success): "
                           "the run decides which",
               "no_evidence": "the answerable queries with an answer verdict whose evidence "
                              "the top k do not hold: the run decides which"}
# Populations of queries with no relevant id: only a statement puts a query
# there (see _answerability), never the lack of a label.
_UNANSWERABLE_POPULATIONS = frozenset(("unanswerable", "stated"))

_WHOLE_RANKING = sys.maxsize   # the cutoff a measure function gets for @all
_MEASURE_NAME = re.compile(r"[a-z][a-z0-9_]*$")


class _Spec(NamedTuple):
    name: str
    func: object
    params: Dict[str, Param]        # in the order of the function's parameters
    summary: str
    peers: Tuple[Spelling, ...]
    population: str
    cutoff: bool                    # takes a cutoff (@k, @all); else none at all
    options: Dict[str, Param]       # unit, cover, budget: read by the scorer, not by func
    view: str                       # what func reads: "ranked" (a _Ranked) or "spans"
    refused: Dict[str, str]         # "unit=evidence" -> why that value is refused
    aggregate: object = None        # set-level measure: the mean is aggregate(cells)
    labels: bool = True             # False: no label decides its value (diversity)
    fixed: bool = True              # False: the run itself decides the population

    @property
    def accepts(self):
        """Every parameter a name may give: the function's, then the options."""
        return dict(self.params, **self.options)

    @property
    def defaults(self):
        return {key: param.default for key, param in self.accepts.items()}


_REGISTRY: Dict[str, _Spec] = {}
_SPELLINGS: Dict[str, Tuple[str, tuple]] = {}   # name as written -> (measure, implied values)
_CUTOFF_SPELLINGS: Dict[str, Tuple[str, tuple]] = {}   # "P_" of "P_K" -> (measure, implied)


def measure(name, *, summary, params=None, peers=(), population="scored", cutoff=True,
            units=("id",), view="ranked", refused=None, unjudged=True, aggregate=None,
            labels=True, fixed=True):
    """Register a per-query measure under ``name`` (a decorator).  The
    declaration is the single source of truth about the measure:

    ``summary``     one line, shown by ``--list-measures``;
    ``params``      ``{name: Param}``, the function's parameters after
                    ``(ranked, grades[, k])``, with the same defaults;
    ``peers``       :func:`peer` spellings accepted as input;
    ``population``  which queries the mean is over (a key of POPULATIONS);
    ``cutoff``      False for a measure without one (``rprec``): its function
                    takes no ``k``; a measure with one also takes ``budget``;
    ``units``       the units it counts (see UNITS): more than ``id`` adds
                    the option ``unit`` (and ``cover`` with ``evidence``); the
                    scorer hands the function the ranking of those units;
    ``view``        "spans" for a character measure: the function gets the
                    query's top chunks (a _Context) and its span labels;
                    "scores" for a score read from a file (never called);
                    "stages" for a measure that joins the query's evidence
                    (what the function returns, from the ranking of its unit)
                    with its answer verdict (see _with_stages, 13_stages);
    ``refused``     ``{"param=value": reason}`` for values refused with a reason;
    ``unjudged``    False for a measure of labels themselves (judged): a
                    measure of a ranking takes the option ``unjudged``.
    ``aggregate``   for a set-level measure (not a mean of per-query values):
                    the function returns each query's *cell*, never shown, and
                    the measure's value over a set of queries is
                    ``aggregate(cells)`` (None: no value); it has no per-query
                    values, so it is gated on the tolerance rule only.
    ``labels``      False for a measure whose value no label decides (diversity,
                    the abstention measures): the check that a run meets a
                    label (see _label_checks) leaves it out.
    ``fixed``       False for a measure whose population the run itself decides
                    (the queries whose evidence it retrieved): the gate pairs it
                    on the queries in the population on both sides, a query
                    entering or leaving it is neither added nor removed, and no
                    such query is "no comparable queries", not a failure.

    A function may return None for a query outside its population.
    """
    params = dict(params or {})
    options = {}
    if tuple(units) != ("id",):
        options["unit"] = _unit_param(tuple(units))
    if "evidence" in units:
        options["cover"] = COVER
    if cutoff:
        options["budget"] = BUDGET
    if unjudged and view == "ranked":
        options["unjudged"] = UNJUDGED_PARAM

    def register(func):
        names = _parameter_names(func, cutoff)
        if not _MEASURE_NAME.match(name) or name in _REGISTRY:
            raise TypeError("measure %r: a new name of a-z, 0-9 and _ is needed" % name)
        if list(names) != list(params) or list(func.__defaults__ or ()) != [
                p.default for p in params.values()]:
            raise TypeError("measure %r: the function's parameters must be %s with the "
                            "declared defaults" % (name, list(params)))
        if population not in POPULATIONS:
            raise TypeError("measure %r: population must be one of %s" % (name, list(POPULATIONS)))
        spec = _Spec(name, func, params, summary, tuple(peers), population, cutoff, options,
                     view, dict(refused or {}), aggregate, labels, fixed)
        entries = [(_SPELLINGS, name, ())]
        for spelling in spec.peers:
            if spelling.output_only:
                continue
            table, text = _SPELLINGS, spelling.text
            if text.endswith("_K"):
                table, text = _CUTOFF_SPELLINGS, text[:-1]
            entries.append((table, text, spelling.implies))
        for table, text, implies in entries:
            if table.get(text, (name, implies)) != (name, implies):
                raise TypeError("measure %r: the spelling %r already means %s"
                                % (name, text, table[text][0]))
        for table, text, implies in entries:
            table[text] = (name, implies)
        _REGISTRY[name] = spec
        return func
    return register


def _parameter_names(func, cutoff=True):
    """The names of a measure function's parameters after (ranked, grades[, k])."""
    code = func.__code__
    return code.co_varnames[3 if cutoff else 2:code.co_argcount]


def available_measures():
    """Names of the registered measures, sorted.

    >>> available_measures()[:4]
    ['abstained', 'abstention_f1', 'answer_given_evidence', 'answer_without_evidence']
    """
    return sorted(_REGISTRY)


def describe_measures():
    """The registry as text, one block per measure: what ``rag-eval
    --list-measures`` prints.

    >>> print(describe_measures().split("\\n\\n")[6])
    bpref (no cutoff)
      how rarely judged non-relevant ids rank above the relevant ones; unjudged ids are skipped
      parameter rel: int, default 1, a positive integer: lowest grade that counts as relevant
      mean over: scored (the scored queries: those with an id graded >= rel)
      peer names: trec_eval bpref; ir_measures Bpref
    """
    blocks = ["rag_eval %s: %d measures. Write name@k for one cutoff, name@all for the whole "
              "ranking, name alone for every --k; parameters as name(param=value,...)@k, "
              "defaults left out. A measure with a cutoff may instead be cut at a context "
              "budget, name(budget=N) without @k: %s." % (__version__, len(_REGISTRY),
                                                           BUDGET.meaning)]
    for name in available_measures():
        spec = _REGISTRY[name]
        lines = ["%s%s" % (name, "@k" if spec.cutoff else " (no cutoff)"), "  " + spec.summary]
        shown = dict(spec.params, **{k: v for k, v in spec.options.items() if k != "budget"})
        for key, param in shown.items():
            aliases = ["%s means %s" % pair for pair in param.peer_values]
            lines.append("  parameter %s: %s, %s, %s%s: %s"
                         % (key, param.kind.__name__, "required" if param.required else
                            "default %s" % (param.default_text or _value_text(param.default)),
                            param.rule(),
                            " (%s)" % ", ".join(aliases) if aliases else "", param.meaning))
        lines.append("  mean over: %s (%s)" % (spec.population, POPULATIONS[spec.population]))
        if spec.peers:
            lines.append("  peer names: " + "; ".join(
                "%s %s%s" % (s.tool, s.text, _spelling_meaning(spec, s)) for s in spec.peers))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _spelling_meaning(spec, spelling):
    """`` (= ndcg(gain=linear)@K)`` when a peer's name implies more than ours."""
    implies = dict(spelling.implies)
    if not implies:
        return ""
    cutoff = "@K" if spelling.text.endswith("_K") else _cutoff_text(implies.pop("k", None))
    inner = ",".join("%s=%s" % (key, _value_text(v)) for key, v in sorted(implies.items()))
    return " (= %s%s%s%s)" % (spec.name, "(%s)" % inner if inner else "", cutoff,
                              "; written, not read" if spelling.output_only else "")


@functools.lru_cache(maxsize=1 << 12)   # queries share few distinct grade lists
def _count_relevant(grades, rel):
    """How many of the (sorted) grades are >= rel."""
    return sum(map(rel.__le__, grades))


def _relevant_in_top(ranked, k, rel):
    found = 0
    for rank, g in ranked.labelled:
        if rank > k:
            break
        found += g >= rel
    return found


def _gain(grade, gain):
    if grade <= 0:
        return 0.0
    try:
        return float(grade) if gain == "linear" else 2.0 ** grade - 1.0
    except OverflowError:
        raise EvalError("grade %s is too large for %s gain (a float overflows)"
                        % (_short_repr(grade, 40), gain)) from None


_DISCOUNTS = [0.0, 1.0]   # _DISCOUNTS[rank] = 1 / log2(rank + 1), grown on demand


def _discounts(rank):
    """The discount table, long enough for ``rank``.  It is replaced, never
    appended to, so a thread reading the old one is not disturbed."""
    global _DISCOUNTS
    table = _DISCOUNTS
    if len(table) <= rank:
        table = table + [1.0 / math.log2(r + 1) for r in range(len(table), 2 * rank + 1)]
        _DISCOUNTS = table
    return table


class _GainTable(dict):
    """grade -> gain for one gain kind, filled on first use."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def __missing__(self, grade):
        value = self[grade] = _gain(grade, self.kind)
        return value


_GAIN_TABLES = {kind: _GainTable(kind) for kind in GAIN.choices}


def _dcg(labelled, k, gain):
    """sum gain(g) / log2(rank + 1) over the (rank, grade) labelled with rank <= k,
    added in rank order as trec_eval does.

    >>> round(_dcg([(1, 2), (3, 1)], 10, "linear"), 4)   # 2/log2(2) + 1/log2(4)
    2.5
    """
    gains = _GAIN_TABLES[gain]
    deepest = min(k, labelled[-1][0]) if labelled else 0      # not k: k may be huge ("no cutoff")
    discounts = _DISCOUNTS if deepest < len(_DISCOUNTS) else _discounts(deepest)
    total = 0.0
    for rank, g in labelled:
        if rank > k:
            break
        total += gains[g] * discounts[rank]
    if total == math.inf:
        raise EvalError("grades %s are too large for %s gain: their DCG overflows a float"
                        % (_short_repr(sorted({g for _, g in labelled}, reverse=True)[:3], 60), gain))
    return total


@functools.lru_cache(maxsize=1 << 12)
def _ideal_dcg(grades, k, gain):
    """DCG@k of the best ranking of ``grades`` (a tuple sorted descending)."""
    return _dcg(list(enumerate(grades[:k], 1)), k, gain)


_NOT_EVIDENCE = {"unit=evidence": "one chunk can cover two evidence spans at one rank, so "
                 "evidence units have no ranking of their own; use recall, success, mrr or "
                 "complete(unit=evidence)"}


@measure("recall", params={"rel": REL}, units=UNITS,
         peers=(peer("trec_eval", "recall_K"), peer("trec_eval", "set_recall", k=ALL),
                peer("ir_measures", "R"), peer("ranx", "recall")),
         summary="relevant ids in the top k / all relevant ids in the qrels")
def recall(ranked, grades, k, rel=1):
    """Share of the query's relevant ids found in the top k (trec_eval recall_k, ir_measures R@k).

    The denominator counts every id with grade >= rel, retrieved or not; a
    query with none scores 0 here (evaluate() lists it as unscored instead).

    >>> recall(_from_grades([2, -1, 1, 0]), (2, 1, 1, 0), 3)
    0.6666666666666666
    """
    relevant = _count_relevant(tuple(grades), rel)
    if relevant == 0:
        return 0.0
    return _relevant_in_top(ranked, k, rel) / relevant


@measure("success", params={"rel": REL}, units=UNITS,
         peers=(peer("trec_eval", "success_K"), peer("ir_measures", "Success"),
                peer("ranx", "hit_rate")),
         summary="1 if any relevant id is in the top k, else 0 (not recall)")
def success(ranked, grades, k, rel=1):
    """1.0 when a relevant id is in the top k (trec_eval success_k, ir_measures Success@k, ranx hit_rate@k).

    >>> ranked = _from_grades([-1, 0, 1])
    >>> success(ranked, (1, 0), 2), success(ranked, (1, 0), 3)
    (0.0, 1.0)
    """
    return 1.0 if mrr(ranked, grades, k, rel) else 0.0


@measure("mrr", params={"rel": REL}, units=UNITS,
         peers=(peer("trec_eval", "recip_rank", k=ALL), peer("ir_measures", "RR"),
                peer("ranx", "mrr"), peer("other", "MRR")),
         summary="1 / rank of the first relevant id in the top k, else 0")
def mrr(ranked, grades, k, rel=1):
    """Reciprocal rank of the first relevant id within the top k (ir_measures RR@k).

    trec_eval's recip_rank has no cutoff: it is mrr@all.

    >>> mrr(_from_grades([0, -1, 2, 1]), (2, 1, 0), 5), mrr(_from_grades([0, -1, 2]), (2, 0), 2)
    (0.3333333333333333, 0.0)
    """
    for rank, g in ranked.labelled:
        if rank > k:
            break
        if g >= rel:
            return 1.0 / rank
    return 0.0


@measure("ndcg", params={"gain": GAIN}, units=("id", "doc"), refused=_NOT_EVIDENCE,
         peers=(peer("trec_eval", "ndcg_cut_K", gain="linear"),
                peer("trec_eval", "ndcg", k=ALL, gain="linear", output_only=True),
                peer("ir_measures", "nDCG", gain="linear"), peer("ranx", "ndcg_burges")),
         summary="DCG@k / ideal DCG@k of all judged grades; gain 2^g-1 (or g)")
def ndcg(ranked, grades, k, gain="exponential"):
    """Normalised DCG: sum gain(g_i) / log2(i + 1) over ranks i <= k, over the ideal.

    The ideal orders *every* grade in the qrels, retrieved or not, so a run that
    misses the best id cannot reach 1.0.  Grades <= 0 give no gain; the
    relevance threshold does not apply (as in trec_eval).  Gain is 2**g - 1
    (Burges; ranx ndcg_burges) or, with gain=linear, g (trec_eval ndcg_cut_k,
    ir_measures nDCG@k).  A query whose grades are all <= 0 scores 0.

    >>> round(ndcg(_from_grades([2, 1, 0]), (2, 2, 1), 3), 4)
    0.6733
    >>> round(ndcg(_from_grades([2, 1, 0]), (2, 2, 1), 3, gain="linear"), 4)
    0.6994
    """
    ideal = _ideal_dcg(tuple(grades), k, gain)
    if ideal == 0.0:
        return 0.0
    return _dcg(ranked.labelled, k, gain) / ideal


@measure("map", params={"rel": REL}, units=("id", "doc"), refused=_NOT_EVIDENCE,
         peers=(peer("trec_eval", "map_cut_K"), peer("trec_eval", "map", k=ALL, output_only=True),
                peer("ir_measures", "AP"), peer("ranx", "map"), peer("other", "MAP")),
         summary="sum of precision@i at relevant ranks i <= k / all relevant ids")
def average_precision(ranked, grades, k, rel=1):
    """Average precision cut at k (trec_eval map_cut_k, ir_measures AP@k).

    >>> average_precision(_from_grades([1, 0, 1]), (1, 1, 1), 3)   # (1/1 + 2/3) / 3
    0.5555555555555555
    """
    relevant = _count_relevant(tuple(grades), rel)
    if relevant == 0:
        return 0.0
    return _precision_sum(ranked, k, rel)[0] / relevant


def _precision_sum(ranked, k, rel):
    """(sum of precision@i over the relevant ranks i <= k, relevant count)."""
    found = 0
    total = []
    for rank, g in ranked.labelled:
        if rank > k:
            break
        if g >= rel:
            found += 1
            total.append(found / rank)
    return math.fsum(total), found


@measure("precision", params={"rel": REL}, units=("id", "doc"), refused=_NOT_EVIDENCE,
         peers=(peer("trec_eval", "P_K"), peer("trec_eval", "set_P", k=ALL),
                peer("ir_measures", "P"), peer("ranx", "precision")),
         summary="relevant ids in the top k / k (missing slots count as misses); "
                 "@all: / ids returned")
def precision(ranked, grades, k, rel=1):
    """Relevant ids in the top k divided by k, even when fewer than k were returned
    (trec_eval P_k, ir_measures P@k).  Unstable across queries: report, do not gate.
    Over the whole ranking (precision@all) it is divided by the ids returned
    (trec_eval set_P); an empty ranking scores 0.

    >>> ranked = _from_grades([1, -1])
    >>> precision(ranked, (1, 1), 5), precision(ranked, (1, 1), _WHOLE_RANKING)
    (0.2, 0.5)
    """
    if k == _WHOLE_RANKING:
        k = ranked.length
    if not k:               # an empty ranking @all, or a budget no chunk fits
        return 0.0
    return _relevant_in_top(ranked, k, rel) / k


@measure("context_precision", params={"rel": REL},
         summary="sum of precision@i at relevant ranks i <= k / relevant ids in the top k")
def context_precision(ranked, grades, k, rel=1):
    """The label-based context precision of Ragas and DeepEval: rank-aware
    "is the good stuff on top".  Like AP but divided by the relevant ids that
    were retrieved in the top k; 0 when there are none.

    >>> context_precision(_from_grades([0, 1, 1]), (1, 1, 1, 1), 3)   # (1/2 + 2/3) / 2
    0.5833333333333333
    """
    total, found = _precision_sum(ranked, k, rel)
    return total / found if found else 0.0


@measure("judged", peers=(peer("ir_measures", "Judged"),), unjudged=False,
         summary="labelled ids in the top k / min(k, ids returned)")
def judged(ranked, grades, k):
    """Share of the top k that carry a label, grade 0 included, negative grades not
    (ir_measures Judged@k; trec_eval's unjudged count divides by k instead).
    An empty ranking scores 0.  Low values mean the scores undercount.

    >>> judged(_from_grades([2, -1, 0]), (2, 0), 10)
    0.6666666666666666
    """
    top = min(k, ranked.length)
    return _relevant_in_top(ranked, k, 0) / top if top else 0.0


@measure("rprec", cutoff=False, params={"rel": REL},
         peers=(peer("trec_eval", "Rprec"), peer("ir_measures", "Rprec"),
                peer("ranx", "r-precision")),
         summary="precision at rank R, R = relevant ids in the qrels (equals recall at R)")
def r_precision(ranked, grades, rel=1):
    """R-precision: the relevant ids among the first R, divided by R, where R
    is the query's number of relevant ids in the qrels (trec_eval Rprec,
    ir_measures Rprec, ranx r-precision).  Precision and recall are equal at
    rank R.  A ranking shorter than R still divides by R.

    >>> r_precision(_from_grades([1, -1, 1, 1]), (2, 1, 1, 0))   # R = 3: 2 of the top 3
    0.6666666666666666
    """
    relevant = _count_relevant(tuple(grades), rel)
    if relevant == 0:
        return 0.0
    return _relevant_in_top(ranked, relevant, rel) / relevant


@measure("bpref", cutoff=False, unjudged=False, params={"rel": REL},
         peers=(peer("trec_eval", "bpref"), peer("ir_measures", "Bpref")),
         summary="how rarely judged non-relevant ids rank above the relevant ones; "
                 "unjudged ids are skipped")
def bpref(ranked, grades, rel=1):
    """Binary preference (Buckley and Voorhees 2004), as trec_eval's bpref:
    only judged ids count.  With R relevant ids (grade >= rel) and N judged
    non-relevant ones (0 <= grade < rel) in the qrels, each relevant id
    retrieved adds 1 - min(n, R) / min(N, R), n being the judged non-relevant
    ids ranked above it (1 when n = 0); the sum is divided by R.  Unlabelled
    ids and negative grades (pooled, not judged) are skipped, so they neither
    help nor hurt.  The whole ranking is read.

    >>> bpref(_from_grades([0, 1, None, 0, 1]), (1, 1, 1, 0, 0))   # (1 - 1/2 + 1 - 2/2) / 3
    0.16666666666666666
    """
    relevant = _count_relevant(tuple(grades), rel)
    if relevant == 0:
        return 0.0
    nonrelevant = _count_relevant(tuple(grades), 0) - relevant
    worst = min(nonrelevant, relevant)
    above, total = 0, []
    for _, g in ranked.labelled:
        if g < rel:
            above += 1
        else:
            total.append(1.0 - min(above, relevant) / worst if above else 1.0)
    return math.fsum(total) / relevant


@measure("complete", params={"rel": REL}, units=UNITS,
         summary="1 if every relevant unit is in the top k, else 0 (multi-hop questions)")
def complete(ranked, grades, k, rel=1):
    """1.0 when the top k hold every relevant unit (id, document or evidence
    span): a multi-hop question needs all of them, and recall hides the one
    that is missing.

    >>> complete(_from_grades([1, 0, 1]), (1, 1), 3), complete(_from_grades([1, 0]), (1, 1), 3)
    (1.0, 0.0)
    """
    relevant = _count_relevant(tuple(grades), rel)
    return 1.0 if relevant and _relevant_in_top(ranked, k, rel) == relevant else 0.0


@measure("diversity", units=("doc",), unjudged=False, labels=False,
         summary="distinct documents in the top k / min(k, distinct ids returned)")
def diversity(ranked, grades, k):
    """How many different documents fill the context: distinct documents
    among the first min(k, n) chunks over min(k, n), n being the distinct
    ids returned; 0 for an empty ranking.  Labels play no part.

    >>> diversity(_Units([], 4, (1, 3), 4), (), 3)   # chunks of docs A A B A: 2 docs in 3 slots
    0.6666666666666666
    """
    slots = min(k, ranked.returned)
    if not slots:
        return 0.0
    return sum(1 for p in ranked.positions if p <= slots) / slots


# --- unanswerable queries: abstention ---------------------------------------
#
# A query stated unanswerable ("answerable": false, see _answerability) is
# scored on what the system did with it: the right behaviour is to abstain
# (return nothing), not to fill the context with ids the model then answers
# from.  A query abstained when its ranking is empty once --min-score has
# cut it (a JSONL run line's "abstained": true is read as an empty ranking).

@measure("abstained", unjudged=False, cutoff=False, population="unanswerable", labels=False,
         summary="1 if the system abstained (returned nothing) on an unanswerable query")
def abstained(ranked, grades):
    """1.0 when the ranking is empty (after --min-score), else 0.0.

    >>> abstained(_from_grades([]), ()), abstained(_from_grades([None]), ())
    (1.0, 0.0)
    """
    return 0.0 if ranked.length else 1.0


@measure("answered", unjudged=False, cutoff=False, population="answerable", labels=False,
         summary="1 if the system did not abstain on an answerable query (1 - false abstention)")
def answered(ranked, grades):
    """1.0 when the ranking holds an id (after --min-score), else 0.0.

    >>> answered(_from_grades([None, 1]), (1,)), answered(_from_grades([]), (1,))
    (1.0, 0.0)
    """
    return 1.0 if ranked.length else 0.0


@measure("clean", unjudged=False, population="unanswerable", labels=False,
         summary="1 - ids returned in the top k / k on an unanswerable query (junk exposure)")
def clean(ranked, grades, k):
    """1 - (ids in the top k) / k: how little of the context an unanswerable
    query fills with ids.  At @all, k is the ranking's own length (and with a
    budget, the chunks that fit), so the value is 1 when empty, else 0.

    >>> clean(_from_grades([None, None]), (), 5)   # 1 - 2/5
    0.6
    >>> clean(_from_grades([]), (), 5), clean(_from_grades([None]), (), _WHOLE_RANKING)
    (1.0, 0.0)
    """
    slots = ranked.length if k == _WHOLE_RANKING else k
    return 1.0 - min(slots, ranked.length) / slots if slots else 1.0


def _abstention_f1(cells):
    """The mean of the F1 of the abstain class (truth: unanswerable; predicted:
    abstained) and of the answer class, from each stated query's cell
    (answerable, abstained).  A class with no true and no predicted member is
    left out of the mean; one with members but an empty precision or recall
    denominator scores 0.  None when no query is stated.

    >>> _abstention_f1([(True, False), (True, True), (False, True), (False, False)])
    0.5
    >>> _abstention_f1([(True, False), (True, False)])   # no abstain class at all
    1.0
    """
    scores = []
    for positive in (False, True):      # the abstain class, then the answer class
        true = sum(1 for answerable, _ in cells if answerable == positive)
        predicted = sum(1 for _, abstain in cells if abstain != positive)
        if not true and not predicted:
            continue
        hits = sum(1 for answerable, abstain in cells
                   if answerable == positive and abstain != positive)
        precision = hits / predicted if predicted else 0.0
        recall = hits / true if true else 0.0
        scores.append(2 * precision * recall / (precision + recall) if hits else 0.0)
    return _mean(scores) if scores else None


@measure("abstention_f1", unjudged=False, cutoff=False, population="stated", labels=False,
         aggregate=_abstention_f1,
         summary="mean F1 of the abstain and answer classes over the stated queries (a "
                 "set-level value: no per-query values, gated on the tolerance rule only)")
def abstention_f1(ranked, grades):
    """Whether a stated query abstained; the scorer pairs it with the query's
    answerability into its cell (answerable, abstained), see _take_cells.

    >>> abstention_f1(_from_grades([]), (1, 0)), abstention_f1(_from_grades([None]), ())
    (True, False)
    """
    return not ranked.length


@measure("span_recall", params={"rel": REL}, view="spans", population="spans",
         summary="labelled relevant characters inside the top k chunks / all of them")
def span_recall(context, labels, k, rel=1):
    """|R_k ∩ E| / |E|: E the characters of the span labels graded >= rel
    (their union), R_k those of the top k chunks (their union).

    >>> span_recall(_context(("a", 0, 10), ("a", 20, 30)), _labels(("a", 5, 25, 1)), 2)
    0.5
    """
    parts = _span_parts(context, labels, k, rel)
    return None if parts is None else parts.shared / parts.evidence


@measure("span_precision", params={"rel": REL, "dup": DUP}, view="spans", population="spans",
         summary="labelled relevant characters inside the top k chunks / characters of "
                 "those chunks")
def span_precision(context, labels, k, rel=1, dup="merge"):
    """|R_k ∩ E| / |R_k|, or with dup=count / S_k, the summed lengths of the
    top k chunks (overlapping chunks count their shared characters each time,
    as Chroma's precision); 0 when nothing was retrieved.

    >>> c, e = _context(("a", 0, 10), ("a", 5, 15)), _labels(("a", 0, 10, 1))
    >>> span_precision(c, e, 2), span_precision(c, e, 2, dup="count")   # 10/15, 10/20
    (0.6666666666666666, 0.5)
    """
    parts = _span_parts(context, labels, k, rel)
    if parts is None:
        return None
    retrieved = parts.summed if dup == "count" else parts.retrieved
    return parts.shared / retrieved if retrieved else 0.0


@measure("span_iou", params={"rel": REL, "dup": DUP}, view="spans", population="spans",
         summary="labelled relevant characters inside the top k chunks / characters in "
                 "either (intersection over union)")
def span_iou(context, labels, k, rel=1, dup="merge"):
    """|R_k ∩ E| / |R_k ∪ E|, or with dup=count |R_k ∩ E| / (S_k + |E| - |R_k ∩ E|)
    (Chroma's IoU).

    >>> c, e = _context(("a", 0, 10), ("a", 5, 15)), _labels(("a", 0, 10, 1))
    >>> span_iou(c, e, 2), span_iou(c, e, 2, dup="count")   # 10/15, 10/(20 + 10 - 10)
    (0.6666666666666666, 0.5)
    """
    parts = _span_parts(context, labels, k, rel)
    if parts is None:
        return None
    retrieved = parts.summed if dup == "count" else parts.retrieved
    return parts.shared / (retrieved + parts.evidence - parts.shared)


# --- scores made elsewhere: a judge's, read from a score file ----------------------
#
# score(field=faithfulness) is not computed from a run: its per-query values
# are a score file's (see load_scores and evaluate_scores), each query's mean
# of its judge runs mapped onto [0, 1] by the field's range.  It is declared
# here so that its name parses, lists and gates like every other measure.

FIELD = Param(str, None, "the score field (a JSONL key, a CSV column) of the score files "
              "(--scores); letters, digits, _ . and -")


@measure("score", params={"field": FIELD}, population="scores", cutoff=False, unjudged=False,
         view="scores",
         summary="a per-query score made elsewhere (an LLM judge's), read from --scores: the "
                 "mean of the query's runs, mapped onto [0, 1] by --score-range")
def score_field(ranked, grades, field=None):
    """Never called on a ranking: the values come from a score file."""
    raise EvalError("score(field=%s) is read from a score file (--scores, evaluate_scores()), "
                    "not computed from a run" % field)


# --- answer stages: retrieval outcome joined with the answer verdict ---------------
#
# answer_given_evidence@k and answer_without_evidence@k split the answerable
# queries that have an answer verdict (--answer FIELD of the score files) by
# whether the top k hold their evidence (complete(unit=U)@k, or success with
# evidence=success), and score each query of its half 1 when the answer
# passes.  The scorer calls the function below on the ranking of the unit,
# as it calls complete or success; the join with the verdicts
# (_with_stages, in 13_stages) keeps each query in one half and gives it its
# pass/fail value.  Which half a query is in is the run's doing: fixed=False.

EVIDENCE_RULES = ("complete", "success")
EVIDENCE = Param(str, "complete", "when a query's evidence counts as retrieved: every relevant "
                 "unit in the top k (complete), or one (success: single-evidence test sets)",
                 choices=EVIDENCE_RULES)
THRESHOLD = Param(float, None, "the answer passes when the mean of its judge runs is at "
                  "least X in the field's own units (at most X for a field declared lower "
                  "is better, --score-range F=HI:LO); a boolean passes when true",
                  default_text="the midpoint of the field's range")
_STAGE_PARAMS = {"field": FIELD, "evidence": EVIDENCE, "threshold": THRESHOLD, "rel": REL}


def _evidence_found(ranked, grades, k, evidence, rel):
    """1.0 when the top k hold the query's evidence: every relevant unit
    (complete), or one (success).

    >>> ranked = _from_grades([1, None])
    >>> _evidence_found(ranked, (1, 1), 2, "complete", 1), _evidence_found(ranked, (1, 1), 2, "success", 1)
    (0.0, 1.0)
    """
    return (complete if evidence == "complete" else success)(ranked, grades, k, rel)


@measure("answer_given_evidence", params=_STAGE_PARAMS, units=UNITS, view="stages",
         population="evidence", unjudged=False, fixed=False,
         summary="over the queries whose evidence the top k hold: share whose answer "
                 "passes (the generator's quality when retrieval did its job)")
def answer_given_evidence(ranked, grades, k, field=None, evidence="complete", threshold=None,
                          rel=1):
    """The query's evidence (see _evidence_found); the join with its answer
    verdict keeps it when found, with value 1 when the answer passes."""
    return _evidence_found(ranked, grades, k, evidence, rel)


@measure("answer_without_evidence", params=_STAGE_PARAMS, units=UNITS, view="stages",
         population="no_evidence", unjudged=False, fixed=False,
         summary="over the queries whose evidence the top k do not hold: share whose answer "
                 "still passes (model memory, or a missing label)")
def answer_without_evidence(ranked, grades, k, field=None, evidence="complete",
                            threshold=None, rel=1):
    """The query's evidence (see _evidence_found); the join with its answer
    verdict keeps it when not found, with value 1 when the answer passes."""
    return _evidence_found(ranked, grades, k, evidence, rel)


# --- units: documents, evidence spans, characters ------------------------------
#
# The run ranks chunks; a label may name a document, or a span of one:
# ``[start, end)`` in code points of the document text, two spans overlapping
# when they share a character.  For unit=doc and unit=evidence the scorer
# builds the ranking of those units (see _doc_units, _evidence_units) and the
# measures above read it as they read ids: a _Units holds ``labelled``, the
# (rank, grade) of each labelled unit at the rank (in chunks) where it was
# found.  Character measures read the top chunks themselves (a _Context).

class Label(NamedTuple):
    """A document label (``start``/``end`` None: the whole document) or a span
    label, as span-label qrels give them; ``text``, when the label carries it,
    is the labelled text itself (what trim_label_whitespace narrows a span by)."""
    doc: str
    start: Optional[int]
    end: Optional[int]
    grade: int
    doc_sha256: Optional[str] = None
    text: Optional[str] = None


class Chunk(NamedTuple):
    """Where a retrieved id comes from: its document and, when known, its span
    and size (the chunk map, or the run's own fields)."""
    doc: str
    start: Optional[int] = None
    end: Optional[int] = None
    tokens: Optional[int] = None
    doc_sha256: Optional[str] = None


class _Units(NamedTuple):
    """A query's ranking of units (documents or evidence spans): read by the
    measures like a _Ranked."""
    labelled: list      # (rank in chunks, grade) of each labelled unit found, by rank
    length: int         # chunks in the top K
    positions: tuple = ()   # unit=doc: the rank of every document's first chunk
    returned: int = 0   # distinct ids in the ranking


class _Context(NamedTuple):
    """A query's top chunks, resolved: ids and Chunks, best first; ``memo``
    keeps what _span_parts worked out, for the next character measure."""
    ids: list
    chunks: list
    memo: Optional[dict] = None


class _SpanParts(NamedTuple):
    shared: int         # |R_k ∩ E|
    evidence: int       # |E|
    retrieved: int      # |R_k|
    summed: int         # S_k


def _context(*spans):
    """A _Context of chunks given as (doc, start, end): for examples."""
    return _Context(["c%d" % i for i in range(1, len(spans) + 1)],
                    [Chunk(doc, start, end) for doc, start, end in spans])


def _labels(*spans):
    """A query's span labels {doc: [(start, end, grade)]}: for examples."""
    out = {}
    for doc, start, end, grade in spans:
        out.setdefault(doc, []).append((start, end, grade))
    return out


def _union(intervals):
    """Disjoint sorted intervals covering the same characters.

    >>> _union([(5, 9), (0, 3), (2, 4), (9, 10)])   # touching ones join: same characters
    [(0, 4), (5, 10)]
    """
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def _length(intervals):
    return sum(end - start for start, end in intervals)


def _shared(a, b):
    """Characters in both of two disjoint sorted interval lists.

    >>> _shared([(0, 10), (20, 30)], [(5, 25)])
    10
    """
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


class _NoSpan(EvalError):
    """A chunk without a span where a measure needs one; ``chunk_id`` names it
    (the scorer adds the field its result object lacks, see _unplaced_note)."""

    def __init__(self, message, chunk_id=None):
        super().__init__(message)
        self.chunk_id = chunk_id


def _span_of(chunk, chunk_id):
    if chunk.start is None:
        raise _NoSpan("chunk %r has no start/end (document %r only): character measures and "
                        "unit=evidence need offsets (start/end in a chunk map, --chunks, or in "
                        "the run)" % (chunk_id, chunk.doc), chunk_id)
    return chunk.start, chunk.end


def _span_parts(context, labels, k, rel):
    """|R_k ∩ E|, |E|, |R_k| and S_k of the top k chunks, or None when the query
    has no span label graded >= rel (it is outside the character measures'
    population)."""
    if context.memo is not None:
        key = (k, rel)
        if key not in context.memo:
            context.memo[key] = _span_parts(context._replace(memo=None), labels, k, rel)
        return context.memo[key]
    evidence = {doc: _union([(s, e) for s, e, g in spans if g >= rel and s is not None])
                for doc, spans in labels.items()}
    evidence_length = sum(map(_length, evidence.values()))
    if not evidence_length:
        return None
    retrieved, summed = {}, 0
    for chunk_id, (doc, start, end, _, _) in zip(context.ids[:k], context.chunks):
        if start is None:
            _span_of(Chunk(doc), chunk_id)      # the error
        retrieved.setdefault(doc, []).append((start, end))
        summed += end - start
    shared = length = 0
    for doc, spans in retrieved.items():
        if len(spans) > 1:
            spans = _union(spans)
        length += _length(spans)
        if doc in evidence:
            shared += _shared(spans, evidence[doc])
    return _SpanParts(shared, evidence_length, length, summed)


def _doc_units(ids, chunks, grades_of, returned):
    """unit=doc: each document at the rank of its first chunk, with its grade
    (the highest of its labels).  Documents are never re-ranked by their chunks.

    >>> _doc_units(["a1", "a2", "b1"], [Chunk("A"), Chunk("A"), Chunk("B")], {"B": 2}, 3)
    _Units(labelled=[(3, 2)], length=3, positions=(1, 3), returned=3)
    """
    seen, positions, labelled = set(), [], []
    for rank, chunk in enumerate(chunks, 1):
        if chunk.doc not in seen:
            seen.add(chunk.doc)
            positions.append(rank)
            grade = grades_of.get(chunk.doc)
            if grade is not None and grade >= 0:
                labelled.append((rank, grade))
    return _Units(labelled, len(ids), tuple(positions), returned)


def _evidence(labels, rel):
    """The evidence units of a query: per document, the span labels graded >=
    rel with overlapping ones merged (sharing a character; the higher grade),
    or the whole document when a whole-document label graded >= rel names it.
    Returns [(doc, start, end, grade)], start/end None for a whole document.

    >>> _evidence(_labels(("a", 0, 10, 1), ("a", 5, 20, 2), ("a", 20, 30, 1), ("a", 40, 50, 0)), 1)
    [('a', 0, 20, 2), ('a', 20, 30, 1)]
    """
    units = []
    for doc in sorted(labels):
        relevant = [(s, e, g) for s, e, g in labels[doc] if g >= rel]
        if any(s is None for s, _, _ in relevant):
            units.append((doc, None, None, max(g for _, _, g in relevant)))
            continue
        spans = sorted(relevant)
        merged = []
        for start, end, grade in spans:
            if merged and start < merged[-1][1]:
                last = merged[-1]
                merged[-1] = (last[0], max(last[1], end), max(last[2], grade))
            else:
                merged.append((start, end, grade))
        units.extend((doc,) + unit for unit in merged)
    return units


@functools.lru_cache(maxsize=64)
def _exact_share(cover):
    """A cover as the exact fraction its shortest decimal writes (0.1 is 1/10)."""
    import fractions   # only with unit=evidence: keeps start-up fast
    return fractions.Fraction(repr(float(cover)))


def _evidence_units(units, ids, chunks, cover, returned):
    """unit=evidence: each unit at the rank where the top chunks first hold at
    least ``cover`` of its characters (and at least one); a whole document at
    its first chunk.  ``cover`` is compared exactly, as the decimal written.

    >>> units = [("a", 0, 10, 1)]
    >>> _evidence_units(units, ["c1", "c2"], [Chunk("a", 0, 6), Chunk("a", 6, 12)], 1.0, 2)
    _Units(labelled=[(2, 1)], length=2, positions=(), returned=2)
    >>> _evidence_units(units, ["c1", "c2"], [Chunk("a", 0, 6), Chunk("a", 6, 12)], 0.5, 2)
    _Units(labelled=[(1, 1)], length=2, positions=(), returned=2)
    """
    share = _exact_share(cover)
    by_doc = {}
    for i, unit in enumerate(units):
        by_doc.setdefault(unit[0], []).append(i)
    found, held = {}, {}
    for rank, (chunk_id, chunk) in enumerate(zip(ids, chunks), 1):
        for i in by_doc.get(chunk.doc, ()):
            if i in found:
                continue
            _, start, end, grade = units[i]
            if start is None:
                found[i] = rank
                continue
            c_start, c_end = _span_of(chunk, chunk_id)
            if min(end, c_end) > max(start, c_start):
                held[i] = _union(held.get(i, []) + [(max(start, c_start), min(end, c_end))])
                have = _length(held[i])
                if have * share.denominator >= share.numerator * (end - start):
                    found[i] = rank
    labelled = sorted((rank, units[i][3]) for i, rank in found.items())
    return _Units(labelled, len(ids), (), returned)


# --- unjudged=skip ------------------------------------------------------------------

def _skips_unjudged(m):
    """True for a measure taken over the judged ids only (it reads the whole ranking)."""
    return ("unjudged", "skip") in m.params


def _check_unjudged_option(params, unit, text):
    """unjudged=skip condenses a ranking of ids: not units, not a budget."""
    if params.get("unjudged") != "skip":
        return
    if unit != "id":
        raise EvalError("measure %r: unjudged=skip applies to unit=id only (a document's "
                        "chunks are judged one by one)" % text)
    if "budget" in params:
        raise EvalError("measure %r: unjudged=skip cannot be cut at a budget (the ids "
                        "removed would still fill the context)" % text)


def _condensed(ranked):
    """A _Ranked with its unlabelled ids removed and the labelled ones ranked 1..n,
    as trec_eval -J does before any cutoff.

    >>> _condensed(_from_grades([None, 1, -1, 0, 2]))
    _Ranked(labelled=[(1, 1), (2, 0), (3, 2)], length=3, duplicates=0, straddling=0, returned=0)
    """
    labelled = [(rank, g) for rank, (_, g) in enumerate(ranked.labelled, 1)]
    return ranked._replace(labelled=labelled, length=len(labelled))


def _judged_only(func, ranked, grades, *args):
    """``func`` over the judged ids only (unjudged=skip).

    >>> mrr(_from_grades([None, None, 1]), (1,), 2)
    0.0
    >>> _judged_only(mrr, _from_grades([None, None, 1]), (1,), 2)
    1.0
    """
    return func(_condensed(ranked), grades, *args)
