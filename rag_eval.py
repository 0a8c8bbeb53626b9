#!/usr/bin/env python3
"""rag_eval: score the retrieval half of a RAG system and gate CI on regressions.

One standard-library module (Python 3.9+): a library for notebooks and a command
line for CI.  It reads relevance judgments (*qrels*) and a retriever's output (a
*run*), computes per-query measures over the first k distinct ids, averages them,
and compares the means with a baseline so that a regression fails the build.

Measures (canonical names; ``rel`` defaults to 1, ``gain`` to exponential)::

    recall@k             relevant ids in the top k / all relevant ids
    success@k            1 if any relevant id is in the top k, else 0
    mrr@k                1 / rank of the first relevant id in the top k, else 0
    ndcg@k               DCG@k / ideal DCG@k over every judged grade;
                         gain 2**g - 1, or g with ndcg(gain=linear)@k
    map@k                sum of precision@i at relevant ranks i <= k / all relevant
    precision@k          relevant ids in the top k / k
    context_precision@k  sum of precision@i at relevant ranks i <= k /
                         relevant ids in the top k (0 when none)
    judged@k             labelled ids in the top k / min(k, ids returned)

Quick start:

>>> qrels = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}}
>>> run = {"q1": ["x", "a", "b"], "q2": ["c"]}
>>> report = evaluate(qrels, run, k=3, metrics=["recall", "mrr"])
>>> report.mean
{'recall@3': 1.0, 'mrr@3': 0.75}

Every input problem raises :class:`EvalError` (a ``ValueError``) with a message
that names the file, line or query and the bad value; the command line prints it
on one line and exits 2.
"""

__all__ = sorted([
    "EXIT_ERROR", "EXIT_OK", "EXIT_REGRESSION", "Baseline", "EvalError",
    "GateResult", "Measure", "MeasureChange", "Report", "available_measures",
    "evaluate", "gate", "load_baseline", "load_qrels", "load_run", "main",
    "parse_measure", "render_json", "render_markdown", "render_text",
    "save_baseline",
])

import argparse
import difflib
import hashlib
import heapq
import io
import json
import math
import os
import re
import sys
import tempfile
from typing import Dict, List, NamedTuple, Optional, Tuple

__version__ = "0.1.0"

EXIT_OK = 0          # scored; the gate (if any) passed
EXIT_REGRESSION = 1  # the gate found a regression
EXIT_ERROR = 2       # usage or input error (argparse uses 2 as well)

DEFAULT_METRICS = ("recall", "success", "mrr", "ndcg")
DEFAULT_K = 5
DEFAULT_MAX_DROP = 0.02
DEFAULT_BASELINE = "baseline.json"
BASELINE_FORMAT = "rag_eval.baseline"
UNJUDGED = -1        # grade given to a retrieved id that the qrels do not label
FLOAT_SLACK = 1e-9   # absorbs rounding when a drop is compared with a tolerance


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

class EvalError(ValueError):
    """Bad input or usage.  The message is one line: where, what rule, what value."""


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------

class Measure(NamedTuple):
    """One measure at one cutoff, e.g. ``ndcg(gain=linear)@10``.

    ``params`` holds only the values that differ from the measure's defaults,
    as sorted ``(name, value)`` pairs, so equal measures have equal names.

    >>> m = parse_measure("ndcg(gain=linear)@10")
    >>> m.name, m.k, m.params
    ('ndcg', 10, (('gain', 'linear'),))
    >>> str(m)
    'ndcg(gain=linear)@10'
    """
    name: str
    k: int
    params: Tuple[Tuple[str, object], ...] = ()

    def __str__(self):
        inner = ",".join("%s=%s" % pair for pair in self.params)
        return "%s%s@%d" % (self.name, "(%s)" % inner if inner else "", self.k)

    def value(self, ranked, judged):
        """Score one query: ``ranked`` grades of the top ids, ``judged`` all grades."""
        spec = _REGISTRY[self.name]
        return spec.func(ranked, judged, self.k, **dict(spec.defaults, **dict(self.params)))


class Report(NamedTuple):
    """What :func:`evaluate` returns.  Plain data; render it or read it.

    ``per_query`` maps every scored query to its values (queries absent from
    the run included, with zeros); ``unscored`` lists queries with no relevant
    id, excluded from ``mean``.
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

    def to_dict(self, per_query=True):
        """The JSON-ready form documented in README.md (without ``gate``)."""
        out = {
            "tool": {"name": "rag_eval", "version": __version__},
            "inputs": self.inputs or {},
            "measures": list(self.measures),
            "queries": len(self.per_query),
            "unscored": list(self.unscored),
            "missing_from_run": list(self.missing),
            "skipped": list(self.skipped),
            "abstention": dict(self.abstention),
            "ties": {"total": sum(self.ties.values()), "per_query": dict(self.ties)},
            "mean": dict(self.mean),
            "warnings": list(self.warnings),
        }
        if per_query:
            out["per_query"] = {q: dict(v) for q, v in self.per_query.items()}
        return out


class Baseline(NamedTuple):
    """Numbers a report is gated against (see :func:`load_baseline`)."""
    mean: Dict[str, float]
    per_query: Optional[Dict[str, Dict[str, float]]] = None
    inputs: Optional[Dict[str, dict]] = None
    source: str = "<baseline>"


class MeasureChange(NamedTuple):
    """One baseline measure against the current report.

    ``status`` is one of ``regressed``, ``missing``, ``dropped within tolerance``,
    ``unchanged``, ``improved``.
    """
    measure: str
    baseline: float
    current: Optional[float]
    delta: Optional[float]
    status: str


class GateResult(NamedTuple):
    """The verdict of :func:`gate`."""
    passed: bool
    changes: Tuple[MeasureChange, ...]
    tolerance: str
    notes: Tuple[str, ...]

    @property
    def regressions(self):
        return tuple(c for c in self.changes if c.status in ("regressed", "missing"))

    @property
    def improvements(self):
        return tuple(c for c in self.changes if c.status == "improved")

    def to_dict(self):
        return {
            "passed": self.passed,
            "max_drop": self.tolerance,
            "regressions": [c._asdict() for c in self.regressions],
            "improvements": [c._asdict() for c in self.improvements],
            "changes": [c._asdict() for c in self.changes],
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------
# Measures
#
# Every measure is a pure function (ranked, judged, k, **params) -> float:
#   ranked  grades of the first K distinct retrieved ids, best first, K >= k;
#           an id the qrels do not label has grade UNJUDGED (-1), so it is
#           non-relevant and unjudged, exactly like a negative grade in trec_eval.
#   judged  every grade the qrels give this query, sorted descending.
# Ranking and grade look-up happen once per query (see _rank_query).
# ---------------------------------------------------------------------------

class _Spec(NamedTuple):
    name: str
    func: object
    defaults: Dict[str, object]
    summary: str
    aliases: Tuple[str, ...]


_REGISTRY: Dict[str, _Spec] = {}
_PARAM_CHOICES = {"gain": ("exponential", "linear")}


def measure(name, *, summary, defaults=None, aliases=()):
    """Register a per-query measure function under ``name`` (a decorator)."""
    def register(func):
        _REGISTRY[name] = _Spec(name, func, dict(defaults or {}), summary, tuple(aliases))
        return func
    return register


def available_measures():
    """Names of the registered measures, sorted.

    >>> available_measures()[:3]
    ['context_precision', 'judged', 'map']
    """
    return sorted(_REGISTRY)


def _count_relevant(judged, rel):
    return sum(1 for g in judged if g >= rel)


def _gain(grade, gain):
    if grade <= 0:
        return 0.0
    return float(grade) if gain == "linear" else 2.0 ** grade - 1.0


_DISCOUNTS = [1.0]   # _DISCOUNTS[i] = 1 / log2(i + 2), grown on demand


def _discounts(n):
    while len(_DISCOUNTS) < n:
        _DISCOUNTS.append(1.0 / math.log2(len(_DISCOUNTS) + 2))
    return _DISCOUNTS


def _dcg(grades, gain):
    discounts = _discounts(len(grades))
    return math.fsum(_gain(g, gain) * discounts[i] for i, g in enumerate(grades) if g > 0)


@measure("recall", defaults={"rel": 1}, aliases=("R", "recall_"),
         summary="relevant ids in the top k / all relevant ids in the qrels")
def recall(ranked, judged, k, rel=1):
    """Share of the query's relevant ids found in the top k (trec_eval recall_k, ir_measures R@k).

    The denominator counts every id with grade >= rel, retrieved or not; a
    query with none scores 0 here (evaluate() lists it as unscored instead).

    >>> recall([2, -1, 1, 0], (2, 1, 1, 0), 3)
    0.6666666666666666
    """
    relevant = _count_relevant(judged, rel)
    if relevant == 0:
        return 0.0
    return sum(1 for g in ranked[:k] if g >= rel) / relevant


@measure("success", defaults={"rel": 1}, aliases=("Success", "success_", "hit_rate", "hits"),
         summary="1 if any relevant id is in the top k, else 0 (not recall)")
def success(ranked, judged, k, rel=1):
    """1.0 when a relevant id is in the top k (trec_eval success_k, ir_measures Success@k, ranx hit_rate@k).

    >>> success([-1, 0, 1], (1, 0), 2), success([-1, 0, 1], (1, 0), 3)
    (0.0, 1.0)
    """
    return 1.0 if any(g >= rel for g in ranked[:k]) else 0.0


@measure("mrr", defaults={"rel": 1}, aliases=("RR", "MRR"),
         summary="1 / rank of the first relevant id in the top k, else 0")
def mrr(ranked, judged, k, rel=1):
    """Reciprocal rank of the first relevant id within the top k (ir_measures RR@k).

    trec_eval's recip_rank has no cutoff: it equals mrr@k with k the run depth.

    >>> mrr([0, -1, 2, 1], (2, 1, 0), 5), mrr([0, -1, 2], (2, 0), 2)
    (0.3333333333333333, 0.0)
    """
    for rank, g in enumerate(ranked[:k], 1):
        if g >= rel:
            return 1.0 / rank
    return 0.0


@measure("ndcg", defaults={"gain": "exponential"}, aliases=("nDCG", "ndcg_cut_"),
         summary="DCG@k / ideal DCG@k of all judged grades; gain 2^g-1 (or g)")
def ndcg(ranked, judged, k, gain="exponential"):
    """Normalised DCG: sum gain(g_i) / log2(i + 1) over ranks i <= k, over the ideal.

    The ideal orders *every* grade in the qrels, retrieved or not, so a run that
    misses the best id cannot reach 1.0.  Grades <= 0 give no gain; the
    relevance threshold does not apply (as in trec_eval).  Gain is 2**g - 1
    (Burges; ranx ndcg_burges) or, with gain=linear, g (trec_eval ndcg_cut_k,
    ir_measures nDCG@k).  A query whose grades are all <= 0 scores 0.

    >>> round(ndcg([2, 1, 0], (2, 2, 1), 3), 4)
    0.6733
    >>> round(ndcg([2, 1, 0], (2, 2, 1), 3, gain="linear"), 4)
    0.6994
    """
    ideal = _dcg(judged[:k], gain)
    if ideal == 0.0:
        return 0.0
    return _dcg(ranked[:k], gain) / ideal


@measure("map", defaults={"rel": 1}, aliases=("AP", "MAP", "map_cut_"),
         summary="sum of precision@i at relevant ranks i <= k / all relevant ids")
def average_precision(ranked, judged, k, rel=1):
    """Average precision cut at k (trec_eval map_cut_k, ir_measures AP@k).

    >>> average_precision([1, 0, 1], (1, 1, 1), 3)   # (1/1 + 2/3) / 3
    0.5555555555555555
    """
    relevant = _count_relevant(judged, rel)
    if relevant == 0:
        return 0.0
    return _precision_sum(ranked[:k], rel)[0] / relevant


def _precision_sum(top, rel):
    """(sum of precision@i over the relevant ranks i of ``top``, relevant count)."""
    hits = 0
    total = []
    for rank, g in enumerate(top, 1):
        if g >= rel:
            hits += 1
            total.append(hits / rank)
    return math.fsum(total), hits


@measure("precision", defaults={"rel": 1}, aliases=("P", "P_"),
         summary="relevant ids in the top k / k (missing slots count as misses)")
def precision(ranked, judged, k, rel=1):
    """Relevant ids in the top k divided by k, even when fewer than k were returned
    (trec_eval P_k, ir_measures P@k).  Unstable across queries: report, do not gate.

    >>> precision([1, -1], (1, 1), 5)
    0.2
    """
    return sum(1 for g in ranked[:k] if g >= rel) / k


@measure("context_precision", defaults={"rel": 1},
         summary="sum of precision@i at relevant ranks i <= k / relevant ids in the top k")
def context_precision(ranked, judged, k, rel=1):
    """The label-based context precision of Ragas and DeepEval: rank-aware
    "is the good stuff on top".  Like AP but divided by the relevant ids that
    were retrieved in the top k; 0 when there are none.

    >>> context_precision([0, 1, 1], (1, 1, 1, 1), 3)   # (1/2 + 2/3) / 2
    0.5833333333333333
    """
    total, hits = _precision_sum(ranked[:k], rel)
    return total / hits if hits else 0.0


@measure("judged", aliases=("Judged",),
         summary="labelled ids in the top k / min(k, ids returned)")
def judged(ranked, judged, k):
    """Share of the top k that carry a label, grade 0 included, negative grades not
    (ir_measures Judged@k; trec_eval's unjudged count divides by k instead).
    An empty ranking scores 0.  Low values mean the scores undercount.

    >>> judged([2, -1, 0], (2, 0), 10)
    0.6666666666666666
    """
    top = ranked[:k]
    return sum(1 for g in top if g >= 0) / len(top) if top else 0.0


# --- measure names ----------------------------------------------------------

_NAME_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z_]*?)\s*(?:\(([^()]*)\))?\s*(?:@\s*(\S+))?\s*$")
_TREC_RE = re.compile(r"^(recall|P|map_cut|ndcg_cut|success)_(\d+)$")
_TREC_NAMES = {"recall": "recall", "P": "precision", "map_cut": "map",
               "ndcg_cut": "ndcg", "success": "success"}
# ir_measures' nDCG and trec_eval's ndcg_cut use linear gain; ours defaults to exponential.
_LINEAR_ALIASES = {"nDCG", "ndcg_cut"}


def _alias_table():
    table = {}
    for spec in _REGISTRY.values():
        table[spec.name] = spec.name
        for alias in spec.aliases:
            if not alias.endswith("_"):
                table[alias] = spec.name
    return table


def _parse_param(measure_name, key, raw, text):
    spec = _REGISTRY[measure_name]
    if key not in spec.defaults:
        allowed = ", ".join(sorted(spec.defaults)) or "none"
        raise EvalError("measure %r: unknown parameter %r for %s (allowed: %s)"
                        % (text, key, measure_name, allowed))
    if key == "rel":
        return _positive_int(raw, "measure %r: rel" % text)
    if key == "gain" and raw in ("exp", "exp-log2"):
        raw = "exponential"
    if raw not in _PARAM_CHOICES[key]:
        raise EvalError("measure %r: %s must be one of %s, got %r"
                        % (text, key, ", ".join(_PARAM_CHOICES[key]), raw))
    return raw


def _positive_int(raw, what):
    if isinstance(raw, bool):
        raise EvalError("%s must be a positive integer, got %r" % (what, raw))
    if isinstance(raw, int):
        value = raw
    else:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise EvalError("%s must be a positive integer, got %r" % (what, raw)) from None
    if value < 1:
        raise EvalError("%s must be a positive integer, got %r" % (what, raw))
    return value


def _unknown_measure(name, text):
    close = difflib.get_close_matches(name, list(_alias_table()), n=1, cutoff=0.5)
    hint = "; did you mean %r?" % close[0] if close else ""
    return EvalError("unknown measure %r%s (known: %s)"
                     % (text, hint, ", ".join(available_measures())))


def parse_measure(text, *, k=None, rel=1, gain="exponential"):
    """Parse a measure name into a :class:`Measure`; the inverse of ``str(Measure)``.

    Accepts our canonical names (``recall@5``, ``ndcg(gain=linear)@10``,
    ``success(rel=2)@1``), ir_measures spellings (``nDCG@10``, ``R@100``,
    ``RR@10``, ``P(rel=2)@5``, ``AP@10``, ``Success@5``, ``Judged@10``) and
    trec_eval's (``ndcg_cut_10``, ``recall_100``, ``P_5``, ``map_cut_10``,
    ``success_10``).  ``k``, ``rel`` and ``gain`` fill in what the text leaves
    out.  ir_measures' nDCG and trec_eval's ndcg_cut mean linear gain.

    >>> str(parse_measure("nDCG@10")), str(parse_measure("P(rel=2)@5"))
    ('ndcg(gain=linear)@10', 'precision(rel=2)@5')
    >>> str(parse_measure("ndcg_cut_10")), str(parse_measure("mrr", k=3, rel=2))
    ('ndcg(gain=linear)@10', 'mrr(rel=2)@3')
    """
    if isinstance(text, Measure):
        return text
    if not isinstance(text, str):
        raise EvalError("a measure name must be a string, got %r" % (text,))
    trec = _TREC_RE.match(text.strip())
    if trec:
        name, params, cutoff = _TREC_NAMES[trec.group(1)], {}, trec.group(2)
        alias = trec.group(1) + "_"
    else:
        match = _NAME_RE.match(text)
        if not match:
            raise EvalError("cannot parse measure %r: expected name(param=value,...)@k, "
                            "e.g. ndcg(gain=linear)@10" % text)
        alias, inner, cutoff = match.groups()
        name = _alias_table().get(alias)
        if name is None:
            raise _unknown_measure(alias, text)
        params = {}
        for item in filter(None, (p.strip() for p in (inner or "").split(","))):
            key, sep, raw = item.partition("=")
            if not sep:
                raise EvalError("measure %r: parameter %r must look like name=value" % (text, item))
            params[key.strip()] = _parse_param(name, key.strip(), raw.strip(), text)
    spec = _REGISTRY[name]
    if alias.rstrip("_") in _LINEAR_ALIASES and "gain" not in params:
        params["gain"] = "linear"
    for key, value in (("rel", rel), ("gain", gain)):
        if key in spec.defaults and key not in params:
            params[key] = _parse_param(name, key, value, text)
    if cutoff is None:
        if k is None:
            raise EvalError("measure %r has no cutoff: write it as %s@K or give k" % (text, name))
        cutoff = k
    cutoff = _positive_int(cutoff, "measure %r: the cutoff k" % text)
    kept = tuple(sorted((key, v) for key, v in params.items() if v != spec.defaults[key]))
    return Measure(name, cutoff, kept)


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
    else:
        items = list(k)
    if not items:
        raise EvalError("k: give at least one cutoff")
    return tuple(sorted({_positive_int(item, "k") for item in items}))


def resolve_measures(metrics=None, k=DEFAULT_K, *, rel=1, gain="exponential"):
    """Measures from names (a list, or one comma-separated string) and cutoffs.

    A name without ``@k`` is taken at every cutoff in ``k``; the order is the
    order of the names, then of the cutoffs; duplicates are dropped.

    >>> [str(m) for m in resolve_measures("recall,ndcg@3", k="1,5")]
    ['recall@1', 'recall@5', 'ndcg@3']
    """
    if metrics is None:
        metrics = DEFAULT_METRICS
    if isinstance(metrics, str):
        metrics = _split_top_level(metrics)
    cutoffs = parse_cutoffs(k)
    rel = _positive_int(rel, "rel")
    if gain not in _PARAM_CHOICES["gain"]:
        raise EvalError("gain must be one of exponential, linear, got %r" % (gain,))
    out = []
    for item in metrics:
        if isinstance(item, Measure) or "@" in item or _TREC_RE.match(item.strip()):
            found = [parse_measure(item, rel=rel, gain=gain)]
        else:
            found = [parse_measure(item, k=c, rel=rel, gain=gain) for c in cutoffs]
        out.extend(m for m in found if m not in out)
    if not out:
        raise EvalError("no measures requested")
    return tuple(out)


# ---------------------------------------------------------------------------
# Loaders
#
# qrels -> {qid: {doc_id: grade}}; run -> {qid: [doc_id, ...] | {doc_id: score}}.
# Formats: JSON, JSONL (one query a line) and TREC (whitespace columns), each
# optionally gzip-compressed; detected from the content.
# ---------------------------------------------------------------------------

FORMATS = ("json", "jsonl", "trec")


def _source_name(source):
    if source == "-":
        return "<stdin>"
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return getattr(source, "name", "<stream>")


def _read_bytes(source):
    """(bytes, display name) from a path, ``-`` for stdin, or a file object."""
    name = _source_name(source)
    try:
        if source == "-":
            data = sys.stdin.buffer.read()
        elif isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as handle:
                data = handle.read()
        else:
            data = source.read()
    except FileNotFoundError:
        raise EvalError("%s: no such file" % name) from None
    except IsADirectoryError:
        raise EvalError("%s: is a directory, not a file" % name) from None
    except PermissionError:
        raise EvalError("%s: permission denied" % name) from None
    except OSError as exc:
        raise EvalError("%s: cannot read: %s" % (name, exc.strerror or exc)) from None
    except MemoryError:
        raise EvalError("%s: too large to read into memory" % name) from None
    if isinstance(data, str):
        data = data.encode("utf-8")
    return data, name


def _decompress(data, name):
    if data[:2] != b"\x1f\x8b":
        return data
    import gzip
    import zlib
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise EvalError("%s: corrupt gzip data: %s" % (name, exc)) from None


def _decode(data, name):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise EvalError("%s:%d: not UTF-8 text (byte %#x)" % (name, line, data[exc.start])) from None
    return text[1:] if text.startswith("\ufeff") else text


def _detect_format(text, name, kind):
    """'json', 'jsonl' or 'trec' from the first non-blank line."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped[0] in "{[":
            try:
                first = json.loads(stripped)
            except (ValueError, RecursionError):
                return "json"
            return "jsonl" if isinstance(first, dict) and "query_id" in first else "json"
        return "trec"
    raise EvalError("%s: empty %s file" % (name, kind))


def _reject_constant(token):
    raise EvalError("%s is not a number JSON allows" % token)


def _no_duplicate_keys(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise EvalError("duplicate key %r in one JSON object (json would silently "
                            "keep the last)" % key)
        result[key] = value
    return result


def _json_loads(text, name, line=None):
    where = "%s:%d" % (name, line) if line else name
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys,
                          parse_constant=_reject_constant)
    except EvalError as exc:
        raise EvalError("%s: %s" % (where, exc)) from None
    except json.JSONDecodeError as exc:
        at = "%s:%d:%d" % (name, line or exc.lineno, exc.colno)
        raise EvalError("%s: invalid JSON: %s" % (at, exc.msg)) from None
    except RecursionError:
        raise EvalError("%s: JSON nested too deeply" % where) from None
    except MemoryError:
        raise EvalError("%s: too large to parse" % where) from None


def _as_id(value, what):
    """Ids are strings; integers are accepted and turned into strings."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise EvalError("%s must be a string (or an integer), got %r" % (what, value))


def _as_grade(value, what):
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise EvalError("%s must be an integer grade, got %r" % (what, value))


def _as_score(value, what):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value):
            return float(value)
    raise EvalError("%s must be a finite number, got %r" % (what, value))


def _check_qrels_query(qid, grades, where):
    if not isinstance(grades, dict):
        raise EvalError("%s: query %r: judgments must be an object {doc_id: grade}, got %s"
                        % (where, qid, type(grades).__name__))
    return {doc: _as_grade(g, "%s: query %r: grade of %r" % (where, qid, doc))
            for doc, g in grades.items()}


def _check_run_query(qid, ranking, where):
    if isinstance(ranking, list):
        return [_as_id(doc, "%s: query %r: id at position %d" % (where, qid, i))
                for i, doc in enumerate(ranking, 1)]
    if isinstance(ranking, dict):
        return {doc: _as_score(s, "%s: query %r: score of %r" % (where, qid, doc))
                for doc, s in ranking.items()}
    raise EvalError("%s: query %r: expected a ranked list of ids or an object "
                    "{doc_id: score}, got %s" % (where, qid, type(ranking).__name__))


def _load_json(text, name, kind):
    data = _json_loads(text, name)
    if not isinstance(data, dict):
        raise EvalError("%s: the top level must be an object {query_id: ...}, got %s"
                        % (name, type(data).__name__))
    check = _check_qrels_query if kind == "qrels" else _check_run_query
    return {qid: check(qid, value, name) for qid, value in data.items()}


_JSONL_FIELDS = {"qrels": ("grades",), "run": ("docs", "scores")}


def _load_jsonl(text, name, kind):
    out = {}
    check = _check_qrels_query if kind == "qrels" else _check_run_query
    fields = _JSONL_FIELDS[kind]
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        record = _json_loads(line, name, number)
        where = "%s:%d" % (name, number)
        if not isinstance(record, dict) or "query_id" not in record:
            raise EvalError("%s: expected an object with \"query_id\"" % where)
        present = [f for f in fields if f in record]
        if len(present) != 1:
            raise EvalError("%s: expected exactly one of %s" % (where, ", ".join(map(repr, fields))))
        qid = _as_id(record["query_id"], "%s: query_id" % where)
        if qid in out:
            raise EvalError("%s: query %r appears on more than one line" % (where, qid))
        value = record[present[0]]
        if present[0] == "docs" and not isinstance(value, list):
            raise EvalError("%s: \"docs\" must be a list of ids" % where)
        if present[0] == "scores" and not isinstance(value, dict):
            raise EvalError("%s: \"scores\" must be an object {doc_id: score}" % where)
        out[qid] = check(qid, value, where)
    return out


def _load_trec(text, name, kind):
    fields = 4 if kind == "qrels" else 6
    layout = ("query_id iteration doc_id grade" if kind == "qrels"
              else "query_id Q0 doc_id rank score tag")
    out = {}
    duplicates = 0
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        where = "%s:%d" % (name, number)
        if len(parts) != fields:
            raise EvalError("%s: expected %d fields (%s), got %d"
                            % (where, fields, layout, len(parts)))
        qid, doc = parts[0], parts[2]
        if kind == "qrels":
            try:
                value = int(parts[3])
            except ValueError:
                raise EvalError("%s: grade must be an integer, got %r" % (where, parts[3])) from None
            grades = out.setdefault(qid, {})
            if doc in grades and grades[doc] != value:
                raise EvalError("%s: query %r: %r judged twice with different grades (%d, %d)"
                                % (where, qid, doc, grades[doc], value))
            grades[doc] = value
        else:
            try:
                value = float(parts[4])
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise EvalError("%s: score must be a finite number, got %r" % (where, parts[4]))
            scores = out.setdefault(qid, {})
            if doc in scores:
                duplicates += 1
                value = max(value, scores[doc])
            scores[doc] = value
    if not out:
        raise EvalError("%s: no %s lines found" % (name, kind))
    return out, duplicates


def _load(source, kind, format):
    data, name = _read_bytes(source)
    text = _decode(_decompress(data, name), name)
    fmt = format or _detect_format(text, name, kind)
    if fmt not in FORMATS:
        raise EvalError("%s: unknown format %r (choose from %s)" % (name, fmt, ", ".join(FORMATS)))
    warnings = []
    if fmt == "json":
        loaded = _load_json(text, name, kind)
    elif fmt == "jsonl":
        loaded = _load_jsonl(text, name, kind)
    else:
        loaded, duplicates = _load_trec(text, name, kind)
        if duplicates:
            warnings.append("%s: %d repeated (query, doc) lines; each id counts once, "
                            "at its best score" % (name, duplicates))
    digest = hashlib.sha256(data).hexdigest()
    return loaded, {"path": name, "sha256": digest, "format": fmt}, warnings


def load_qrels(source, *, format=None):
    """Read qrels ``{qid: {doc_id: grade}}`` from a path, ``-`` (stdin) or a file object.

    JSON, JSONL and TREC, gzip or not, detected from the content unless
    ``format`` is given.  Grades must be integers.

    >>> load_qrels(io.StringIO('q1 0 d1 2\\nq1 0 d2 0\\n'))
    {'q1': {'d1': 2, 'd2': 0}}
    """
    return _load(source, "qrels", format)[0]


def load_run(source, *, format=None):
    """Read a run from a path, ``-`` or a file object: ``{qid: [ids] | {id: score}}``.

    >>> load_run(io.StringIO('{"q1": ["d2", "d1"]}'))
    {'q1': ['d2', 'd1']}
    """
    return _load(source, "run", format)[0]


# ---------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------

class _Ranked(NamedTuple):
    grades: List[int]      # grades of the first K distinct ids
    returned: int          # distinct ids the run returned for the query
    duplicates: int        # ids repeated in a ranked list
    straddling: int        # tied score groups that cross a cutoff


def _rank_query(ranking, labels, depth, cutoffs):
    """Rank one query once and look up the grades of its first ``depth`` ids.

    A ranked list keeps its order and each id counts at its first position.
    A score map is ordered by score descending, then doc id descending
    (trec_eval's rule); tied groups that cross a cutoff are counted.

    >>> _rank_query({"a": 1.0, "b": 1.0, "c": 0.5}, {"a": 1}, 2, (1, 2))
    _Ranked(grades=[-1, 1], returned=3, duplicates=0, straddling=1)
    """
    get = labels.get
    if isinstance(ranking, dict):
        top = heapq.nlargest(depth + 1, ranking.items(), key=_score_then_id)
        scores = [s for _, s in top]
        straddling = len({scores[c - 1] for c in cutoffs
                          if c < len(scores) and scores[c - 1] == scores[c]})
        return _Ranked([get(d, UNJUDGED) for d, _ in top[:depth]], len(ranking), 0, straddling)
    seen = set()
    grades = []
    for doc in ranking:
        if doc not in seen:
            seen.add(doc)
            if len(grades) < depth:
                grades.append(get(doc, UNJUDGED))
    return _Ranked(grades, len(seen), len(ranking) - len(seen), 0)


def _score_then_id(item):
    return item[1], item[0]


def _mean(values):
    return math.fsum(values) / len(values)


def evaluate(qrels, run, k=DEFAULT_K, metrics=None, *, rel=1, gain="exponential",
             skip_extra_queries=False, run_name="run"):
    """Score ``run`` against ``qrels``; return a :class:`Report`.

    ``qrels`` is ``{qid: {doc_id: grade}}``; ``run`` is ``{qid: [ids]}`` (best
    first) or ``{qid: {doc_id: score}}``.  ``k`` is one cutoff or several
    (``[1, 5, 10]`` or ``"1,5,10"``); ``metrics`` names measures (default:
    recall, success, mrr, ndcg).  ``rel`` is the lowest relevant grade.
    Policies: a query with no grade >= rel is unscored (listed, not averaged);
    a qrels query absent from the run scores 0 and stays in the mean; a run
    query absent from the qrels is an error unless ``skip_extra_queries``.
    Inputs are never modified.

    >>> r = evaluate({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}},
    ...              {"q1": ["a", "a"], "q3": ["z"]}, k=1, metrics="recall")
    >>> r.mean, r.unscored, r.missing
    ({'recall@1': 0.5}, ('q3',), ('q2',))
    """
    measures = resolve_measures(metrics, k, rel=rel, gain=gain)
    rel = _positive_int(rel, "rel")
    qrels = _validated(qrels, "qrels", _check_qrels_query)
    run = _validated(run, run_name, _check_run_query)
    extra = sorted(set(run) - set(qrels))
    if extra and not skip_extra_queries:
        raise EvalError("%s: %d quer%s not in the qrels: %s (check the files match, or skip "
                        "them with --skip-extra-queries)"
                        % (run_name, len(extra), "y is" if len(extra) == 1 else "ies are",
                           _preview(extra)))
    return _score(qrels, run, measures, rel, extra)


def _validated(data, what, check):
    if not isinstance(data, dict):
        raise EvalError("%s must be a dict {query_id: ...}, got %s" % (what, type(data).__name__))
    return {_as_id(q, "%s: query id" % what): check(q, v, what) for q, v in data.items()}


def _preview(ids, limit=5):
    shown = ", ".join(repr(q) for q in ids[:limit])
    return shown + (", ... (%d more)" % (len(ids) - limit) if len(ids) > limit else "")


def _score(qrels, run, measures, rel, extra):
    depth = max(m.k for m in measures)
    cutoffs = sorted({m.k for m in measures})
    names = tuple(str(m) for m in measures)
    per_query, unscored, missing, abstention, ties = {}, [], [], {}, {}
    duplicate_queries = 0
    for qid in sorted(qrels):
        labels = qrels[qid]
        judged_grades = tuple(sorted(labels.values(), reverse=True))
        ranking = run.get(qid)
        ranked = _rank_query(ranking if ranking is not None else [], labels, depth, cutoffs)
        duplicate_queries += ranked.duplicates > 0
        if ranked.straddling:
            ties[qid] = ranked.straddling
        if not judged_grades or judged_grades[0] < rel:
            unscored.append(qid)
            abstention[qid] = ranked.returned
            continue
        if ranking is None:
            missing.append(qid)
        per_query[qid] = {n: m.value(ranked.grades, judged_grades) for n, m in zip(names, measures)}
    if not per_query:
        raise EvalError("no query in the qrels has a relevant id (grade >= %d): nothing to score"
                        % rel)
    warnings = []
    if missing:
        warnings.append("%d quer%s in the qrels not in the run, scored 0: %s"
                        % (len(missing), "y" if len(missing) == 1 else "ies", _preview(missing)))
    if duplicate_queries:
        warnings.append("%d quer%s repeat ids in a ranked list; each id counts once, at its "
                        "first position" % (duplicate_queries, "y" if duplicate_queries == 1 else "ies"))
    if extra:
        warnings.append("skipped %d run quer%s not in the qrels: %s"
                        % (len(extra), "y" if len(extra) == 1 else "ies", _preview(extra)))
    if ties:
        warnings.append("%d tied score group%s cross a cutoff (ties broken by doc id "
                        "descending, as trec_eval)" % (sum(ties.values()),
                                                       "" if sum(ties.values()) == 1 else "s"))
    mean = {n: _mean([values[n] for values in per_query.values()]) for n in names}
    return Report(names, mean, per_query, tuple(unscored), tuple(missing), tuple(extra),
                  abstention, ties, tuple(warnings), rel)


# ---------------------------------------------------------------------------
# Gate
# ---------------------------------------------------------------------------

def _as_baseline_value(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EvalError("%s must be a number in [0, 1], got %r" % (where, value))
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise EvalError("%s must be a number in [0, 1], got %r" % (where, value))
    return float(value)


def _canonical_values(values, where):
    if not isinstance(values, dict):
        raise EvalError("%s must be an object {measure: value}, got %s"
                        % (where, type(values).__name__))
    out = {}
    for key, value in values.items():
        try:
            name = str(parse_measure(key))
        except EvalError as exc:
            raise EvalError("%s: %s" % (where, exc)) from None
        if name in out:
            raise EvalError("%s: %r and another key both mean %s" % (where, key, name))
        out[name] = _as_baseline_value(value, "%s: %r" % (where, key))
    return out


def load_baseline(source):
    """Read a baseline: flat ``{"recall@5": 0.7, ...}`` or the richer file that
    :func:`save_baseline` writes (means, per-query values, input hashes).

    Keys are parsed as measure names and keyed canonically; every value must be
    a finite number in [0, 1] (never a silent pass on NaN or a string).

    >>> load_baseline(io.StringIO('{"nDCG@10": 0.5}')).mean
    {'ndcg(gain=linear)@10': 0.5}
    """
    data, name = _read_bytes(source)
    loaded = _json_loads(_decode(data, name), name)
    if not isinstance(loaded, dict):
        raise EvalError("%s: a baseline must be a JSON object, got %s"
                        % (name, type(loaded).__name__))
    if loaded.get("format") != BASELINE_FORMAT:
        if not loaded:
            raise EvalError("%s: the baseline holds no measures" % name)
        return Baseline(_canonical_values(loaded, name), source=name)
    mean = _canonical_values(loaded.get("mean"), "%s: mean" % name)
    if not mean:
        raise EvalError("%s: the baseline holds no measures" % name)
    per_query = loaded.get("per_query")
    if per_query is not None:
        if not isinstance(per_query, dict):
            raise EvalError("%s: per_query must be an object" % name)
        per_query = {q: _canonical_values(v, "%s: per_query %r" % (name, q))
                     for q, v in per_query.items()}
    inputs = loaded.get("inputs") if isinstance(loaded.get("inputs"), dict) else None
    return Baseline(mean, per_query, inputs, name)


def baseline_dict(report):
    """The richer baseline form of a report (what ``--save-baseline`` writes)."""
    return {
        "format": BASELINE_FORMAT,
        "format_version": 1,
        "tool": {"name": "rag_eval", "version": __version__},
        "inputs": report.inputs or {},
        "measures": list(report.measures),
        "mean": dict(report.mean),
        "per_query": {q: dict(v) for q, v in report.per_query.items()},
        "unscored": list(report.unscored),
    }


def save_baseline(report, path):
    """Write ``report`` as a baseline file atomically (temp file, then rename)."""
    _write_atomic(path, _dumps(baseline_dict(report)))


def parse_tolerance(text):
    """``(value, relative)`` from ``0.02`` (absolute) or ``"5%"`` (relative).

    >>> parse_tolerance("0.02"), parse_tolerance("5%")
    ((0.02, False), (0.05, True))
    """
    raw = str(text).strip()
    relative = raw.endswith("%")
    try:
        value = float(raw[:-1] if relative else raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise EvalError("max drop must be a non-negative number or percentage "
                        "(0.02 or 5%%), got %r" % (text,))
    return (value / 100.0 if relative else value), relative


def gate(report, baseline, *, max_drop=DEFAULT_MAX_DROP):
    """Compare ``report``'s means with ``baseline``; return a :class:`GateResult`.

    A regression is a baseline measure missing from the report, or one whose
    mean fell by more than ``max_drop`` (absolute, or relative to the baseline
    when given as ``"5%"``).  Improvements and drops within the tolerance are
    listed too.  The gate passes only when there is no regression.

    >>> r = evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, metrics="mrr")
    >>> result = gate(r, Baseline({"mrr@2": 0.6, "recall@2": 1.0}))
    >>> result.passed, [(c.measure, c.status) for c in result.regressions]
    (False, [('mrr@2', 'regressed'), ('recall@2', 'missing')])
    """
    if isinstance(baseline, dict):
        baseline = Baseline(_canonical_values(baseline, "baseline"))
    tolerance, relative = parse_tolerance(max_drop)
    changes = []
    for name in sorted(baseline.mean):
        before = baseline.mean[name]
        now = report.mean.get(name)
        if now is None or not math.isfinite(now):
            changes.append(MeasureChange(name, before, None, None, "missing"))
            continue
        delta = now - before
        allowed = tolerance * before if relative else tolerance
        if -delta > allowed + FLOAT_SLACK:
            status = "regressed"
        elif delta < -FLOAT_SLACK:
            status = "dropped within tolerance"
        elif delta > FLOAT_SLACK:
            status = "improved"
        else:
            status = "unchanged"
        changes.append(MeasureChange(name, before, now, delta, status))
    notes = _input_notes(report, baseline)
    label = "%g%%" % (tolerance * 100) if relative else "%g" % tolerance
    passed = not any(c.status in ("regressed", "missing") for c in changes)
    return GateResult(passed, tuple(changes), label, tuple(notes))


def _input_notes(report, baseline):
    notes = []
    for kind in ("qrels", "run"):
        before = ((baseline.inputs or {}).get(kind) or {}).get("sha256")
        now = ((report.inputs or {}).get(kind) or {}).get("sha256")
        if kind == "qrels" and before and now and before != now:
            notes.append("the qrels changed since the baseline (sha256 %s... -> %s...): "
                         "the numbers are not about the same test set" % (before[:12], now[:12]))
    return notes


# ---------------------------------------------------------------------------
# Renderers
# ---------------------------------------------------------------------------

def _dumps(obj):
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


def render_json(report, gate_result=None, *, per_query=False):
    """The report as JSON text: sorted keys, never NaN, same input same bytes."""
    out = report.to_dict(per_query=per_query)
    if gate_result is not None:
        out["gate"] = gate_result.to_dict()
    return _dumps(out)


def _fmt(value):
    return "-" if value is None else "%.4f" % value


def _table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
    return [line(header)] + [line(r) for r in rows]


def _summary_line(report):
    parts = ["%d quer%s scored" % (len(report.per_query), "y" if len(report.per_query) == 1 else "ies")]
    if report.unscored:
        parts.append("%d unscored (no relevant id): %s"
                     % (len(report.unscored), ", ".join(report.unscored[:10])
                        + (" ..." if len(report.unscored) > 10 else "")))
    if report.missing:
        parts.append("%d missing from the run (scored 0)" % len(report.missing))
    return "; ".join(parts)


def _gate_rows(gate_result):
    return [[c.measure, _fmt(c.baseline), _fmt(c.current),
             "-" if c.delta is None else "%+.4f" % c.delta, c.status.upper()
             if c.status in ("regressed", "missing") else c.status]
            for c in gate_result.changes]


def _gate_verdict(gate_result, baseline_name):
    n = len(gate_result.regressions)
    if gate_result.passed:
        return "gate vs %s (max drop %s): PASSED" % (baseline_name, gate_result.tolerance)
    return ("gate vs %s (max drop %s): FAILED, %d regression%s: %s"
            % (baseline_name, gate_result.tolerance, n, "" if n == 1 else "s",
               ", ".join(c.measure for c in gate_result.regressions)))


def render_text(report, gate_result=None, *, per_query=False, baseline_name="baseline"):
    """A plain-text table: measures as columns, the mean row, the gate verdict."""
    rows = []
    if per_query:
        rows += [[q] + [_fmt(v[m]) for m in report.measures] for q, v in report.per_query.items()]
    rows.append(["mean"] + [_fmt(report.mean[m]) for m in report.measures])
    lines = ["rag_eval %s: %s" % (__version__, _summary_line(report)), ""]
    lines += _table(["query"] + list(report.measures), rows)
    if gate_result is not None:
        lines += ["", _gate_verdict(gate_result, baseline_name)]
        lines += ["  " + l for l in _table(["measure", "baseline", "current", "delta", "status"],
                                           _gate_rows(gate_result))]
        lines += ["  note: " + n for n in gate_result.notes]
    return "\n".join(lines) + "\n"


def render_markdown(report, gate_result=None, *, per_query=False, baseline_name="baseline"):
    """A Markdown table, ready for a pull-request comment."""
    def md(cells):
        return "| " + " | ".join(str(c) for c in cells) + " |"
    head = ["query"] + ["`%s`" % m for m in report.measures]
    lines = ["**rag_eval %s**: %s" % (__version__, _summary_line(report)), "",
             md(head), md(["---"] + ["---:"] * len(report.measures))]
    if per_query:
        lines += [md([q] + [_fmt(v[m]) for m in report.measures]) for q, v in report.per_query.items()]
    lines.append(md(["**mean**"] + [_fmt(report.mean[m]) for m in report.measures]))
    if gate_result is not None:
        lines += ["", "**%s**" % _gate_verdict(gate_result, baseline_name), "",
                  md(["measure", "baseline", "current", "delta", "status"]),
                  md(["---", "---:", "---:", "---:", "---"])]
        lines += [md(r) for r in _gate_rows(gate_result)]
        lines += ["", *("> " + n for n in gate_result.notes)]
    return "\n".join(lines).rstrip("\n") + "\n"


_RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown}


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

EXAMPLES = """\
examples:
  rag-eval qrels.json run.json                      score the default measures at k=5
  rag-eval qrels.json run.json --baseline           gate against ./baseline.json (exit 1 on a drop)
  rag-eval qrels.trec run.trec --k 1,5,10 --metrics recall,ndcg,mrr --per-query
  rag-eval qrels.json run.json --metrics nDCG@10,R@100 --format json -o report.json
  rag-eval qrels.json run.json --save-baseline baseline.json

exit codes: 0 ok, 1 the gate found a regression, 2 usage or input error.
measures: %s
"""


def build_parser():
    """The argparse parser of the ``rag-eval`` command."""
    parser = argparse.ArgumentParser(
        prog="rag-eval",
        description="Score retrieval (recall@k, success@k, MRR, nDCG, ...) and gate on a baseline.",
        epilog=EXAMPLES % ", ".join(available_measures()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("qrels", help="relevance judgments: JSON, JSONL or TREC (.gz ok); - for stdin")
    parser.add_argument("run", help="the retriever's output: JSON, JSONL or TREC (.gz ok); - for stdin")
    parser.add_argument("--k", default=None, metavar="K[,K...]",
                        help="cutoffs, e.g. 1,5,10 (default %d)" % DEFAULT_K)
    parser.add_argument("--metrics", default=None, metavar="NAME[,NAME...]",
                        help="measures, e.g. recall,ndcg,mrr or nDCG@10 (default: %s)"
                        % ",".join(DEFAULT_METRICS))
    parser.add_argument("--rel", default="1", metavar="N",
                        help="lowest grade that counts as relevant (default 1; nDCG ignores it)")
    parser.add_argument("--gain", choices=_PARAM_CHOICES["gain"], default="exponential",
                        help="nDCG gain: 2^g-1 (exponential, default) or g (linear, trec_eval)")
    parser.add_argument("--qrels-format", choices=FORMATS, default=None, help="override detection")
    parser.add_argument("--run-format", choices=FORMATS, default=None, help="override detection")
    parser.add_argument("--skip-extra-queries", action="store_true",
                        help="skip run queries absent from the qrels (default: error)")
    parser.add_argument("--baseline", nargs="?", const=DEFAULT_BASELINE, default=None,
                        metavar="FILE", help="gate against FILE (default %s); exit 1 on a regression"
                        % DEFAULT_BASELINE)
    parser.add_argument("--max-drop", default=str(DEFAULT_MAX_DROP), metavar="X",
                        help="tolerated drop: absolute (0.02, default) or relative (5%%)")
    parser.add_argument("--save-baseline", default=None, metavar="FILE",
                        help="write the current numbers as a baseline (atomically)")
    parser.add_argument("--format", choices=sorted(_RENDERERS), default="text", help="output format")
    parser.add_argument("--per-query", action="store_true", help="include per-query values")
    parser.add_argument("-o", "--output", default=None, metavar="FILE",
                        help="write the report to FILE instead of stdout")
    parser.add_argument("--version", action="version", version="rag_eval " + __version__)
    return parser


def _write_atomic(path, text):
    """Write ``text`` to ``path`` via a temp file in the same folder and a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".rag_eval-", suffix=".tmp")
    except OSError as exc:
        raise EvalError("%s: cannot write: %s" % (path, exc.strerror or exc)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        raise EvalError("%s: cannot write: %s" % (path, exc.strerror or exc)) from None


def _run_cli(args, stdout, stderr):
    if args.qrels == "-" and args.run == "-":
        raise EvalError("qrels and run cannot both come from stdin")
    measures_given = args.metrics is not None or args.k is not None
    baseline = load_baseline(args.baseline) if args.baseline else None
    metrics = list(resolve_measures(args.metrics, args.k or DEFAULT_K, rel=args.rel, gain=args.gain))
    if baseline is not None and not measures_given:
        # With no --metrics/--k, the baseline decides what is gated as well.
        metrics += [parse_measure(n) for n in baseline.mean if parse_measure(n) not in metrics]
    parse_tolerance(args.max_drop)   # reject a bad tolerance before any work
    qrels, qrels_info, warnings = _load(args.qrels, "qrels", args.qrels_format)
    run, run_info, run_warnings = _load(args.run, "run", args.run_format)
    report = evaluate(qrels, run, metrics=metrics, rel=args.rel,
                      skip_extra_queries=args.skip_extra_queries, run_name=run_info["path"])
    report = report._replace(inputs={"qrels": qrels_info, "run": run_info},
                             warnings=tuple(warnings + run_warnings) + report.warnings)
    result = gate(report, baseline, max_drop=args.max_drop) if baseline is not None else None
    render = _RENDERERS[args.format]
    if args.format == "json":
        text = render(report, result, per_query=args.per_query)
    else:
        text = render(report, result, per_query=args.per_query,
                      baseline_name=baseline.source if baseline else "baseline")
    if args.save_baseline:
        save_baseline(report, args.save_baseline)
    if args.output:
        _write_atomic(args.output, text)
    else:
        try:
            stdout.write(text)
        except BrokenPipeError:
            pass   # a closed pager must not turn a failed gate into a pass
    for warning in report.warnings + (result.notes if result else ()):
        stderr.write("rag-eval: warning: %s\n" % warning)
    return EXIT_OK if result is None or result.passed else EXIT_REGRESSION


def main(argv=None, *, stdout=None, stderr=None):
    """Run the command line; return the exit code (0 ok, 1 regression, 2 error)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = build_parser()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr   # argparse prints --help and errors there
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    finally:
        sys.stdout, sys.stderr = saved
    try:
        return _run_cli(args, stdout, stderr)
    except EvalError as exc:
        stderr.write("rag-eval: error: %s\n" % exc)
        return EXIT_ERROR
    except KeyboardInterrupt:
        stderr.write("rag-eval: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
