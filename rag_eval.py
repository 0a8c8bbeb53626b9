#!/usr/bin/env python3
# This file is generated: do not edit it.  tools/build.py writes it from the
# source files in src/ (one concern each, in layering order); edit those, then
# run `python3 tools/build.py`.  CI runs `python3 tools/build.py --check`.
# A banner names the source file of each part below.

# ===========================================================================
# src/01_head.py
#
# Head: what rag_eval is, and what every file shares.
#
# The module docstring (what rag_eval is, its measures, a quick start),
# __all__, the imports, the version, the exit codes and the defaults, the one
# exception type (EvalError), and the few small helpers every file uses
# (_mean, _plural, _preview, _short_repr, _finite, _fmt, _dumps, and the hashes
# of sets of query ids: _query_set, _members_sha256).
#
# Uses: nothing.  Used by: every later file.
# ===========================================================================

"""rag_eval: score the retrieval half of a RAG system and gate CI on regressions.

One standard-library module (Python 3.9+): a library for notebooks and a command
line for CI.  It reads relevance judgments (*qrels*) and a retriever's output (a
*run*), computes per-query measures over the first k distinct ids, averages them,
and compares the means with a baseline so that a regression fails the build.

Measures (canonical names; ``rel`` defaults to 1, ``gain`` to exponential;
``name@all`` takes a measure over the whole ranking; ``rag-eval
--list-measures`` prints the registry)::

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
    rprec                relevant ids in the top R / R, R = all relevant (no cutoff)
    abstained            1 if an unanswerable query got an empty ranking (no cutoff)
    answered             1 if an answerable query got a non-empty ranking (no cutoff)
    clean@k              1 - ids returned in the top k / k, unanswerable queries
    abstention_f1        mean F1 of the abstain and answer classes over the stated
                         queries; set-level, no per-query values (no cutoff)
    bpref                trec_eval's bpref: judged non-relevant ids ranked above
                         each relevant one, unjudged ids skipped (no cutoff)
    complete@k           1 if every relevant unit is in the top k, else 0
    diversity@k          distinct documents in the top k / min(k, ids returned);
                         written diversity(unit=doc)@k
    span_recall@k        labelled relevant characters in the top k chunks / all
    span_precision@k     labelled relevant characters in the top k chunks /
                         their characters (dup=count: their summed lengths)
    span_iou@k           labelled relevant characters in the top k chunks /
                         characters in either
    score                a per-query score made elsewhere (a judge's), read from a
                         score file: the mean of its runs, mapped onto [0, 1];
                         written score(field=NAME) (no cutoff)
    answer_given_evidence@k    over the answerable queries with an answer verdict
                         whose evidence the top k hold: 1 if the answer passes;
                         written answer_given_evidence(field=NAME)@k
    answer_without_evidence@k  the same over those whose evidence the top k miss

Labels that survive re-chunking: a label may name a document or a character
span of one; with a chunk map (``chunks=``) or ``doc_sep=``, ``unit=doc`` and
``unit=evidence`` count documents or evidence spans (e.g. recall(unit=doc)@5;
k still counts chunks), and name(budget=N) cuts at a context size.

To add a measure: one ``@measure(...)`` declaration (see :func:`measure`), one
hand-worked row in tests/data/hand_worked.json, peer data if a peer has it
(README.md, "How to add a measure").

Quick start:

>>> qrels = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}}
>>> run = {"q1": ["x", "a", "b"], "q2": ["c"]}
>>> report = evaluate(qrels, run, k=3, measures=["recall", "mrr"])
>>> report.mean
{'recall@3': 1.0, 'mrr@3': 0.75}

Beyond the means: :func:`gate` lists the queries that fell since a saved
baseline and can fail only on significant drops; :func:`compare` tells whether
two runs differ (paired bootstrap interval, exact sign-flip and t-test p-values,
Holm adjustment, a plain-words verdict).  :func:`evaluate_files` streams large
TREC, JSON or JSONL runs and scores them on every core.  ``meta=`` records what
the numbers are about (``{"embedding.model": "bge-m3"}``); a saved baseline keeps
it and each query's label hash, so the gate names what changed since.

Every input problem raises :class:`EvalError` (a ``ValueError``) with a message
that names the file, line or query and the bad value; the command line prints it
on one line and exits 2.
"""

__all__ = [
    "Baseline", "Chunk", "Comparison", "EXIT_ERROR", "EXIT_OK", "EXIT_REGRESSION",
    "EvalError", "FieldDrift", "GateResult", "HeldOut", "Label", "Measure", "MeasureChange",
    "MeasureComparison", "MembershipChange", "MetaChange", "QueryDrop", "Report", "Scores",
    "Sweep", "assert_no_regression", "available_measures", "bootstrap_ci", "cohen_kappa",
    "compare", "compare_all", "evaluate", "evaluate_files", "evaluate_scores", "evaluate_stages", "field_drift",
    "gate", "holm", "judge_drift", "load_baseline", "load_chunks", "load_qrels",
    "load_queries", "load_report", "load_run", "load_scores", "main", "margin_of_error",
    "mcnemar_p", "merge_reports", "merge_rows",
    "min_detectable_difference", "paired_ttest", "parse_measure", "queries_needed",
    "randomization_p", "render_html", "render_json", "render_markdown", "render_text",
    "render_trec",
    "resolve_measures", "save_baseline", "score_rows", "sweep_min_score", "t_two_sided_p",
]

import argparse
import bisect
import collections
import collections.abc
import functools
import gc
import hashlib
import heapq
import io  # the doctests read files from io.StringIO
import itertools
import json
import math
import operator
import os
import random
import re
import stat
import sys
import time
from typing import Dict, NamedTuple, Optional, Tuple

__version__ = "0.1.0"

EXIT_OK = 0          # scored; the gate (if any) passed
EXIT_REGRESSION = 1  # the gate found a regression
EXIT_ERROR = 2       # usage or input error (argparse uses 2 as well); also a bug
EXIT_INTERRUPTED = 130   # Ctrl-C, as a shell reports a SIGINT

DEFAULT_METRICS = ("recall", "success", "mrr", "ndcg")
DEFAULT_K = 5
DEFAULT_MAX_DROP = 0.02
DEFAULT_BASELINE = "baseline.json"


DEFAULT_MAX_BYTES = 60000   # a pull-request comment holds 65536 characters


BASELINE_FORMAT = "rag_eval.baseline"
BASELINE_VERSIONS = (1, 2)   # read; the last is written (2: query sets)
UNJUDGED = -1        # grade given to a retrieved id that the qrels do not label
FLOAT_SLACK = 1e-9   # absorbs rounding when a drop is compared with a tolerance

# Which queries a mean is over: ours (the queries with a relevant id, those
# the run lacks scoring 0) or trec_eval's without -c (the queries the run and
# the qrels share, those with no relevant id included).  See evaluate().
AVERAGES = ("scored", "trec_eval")


# --- the one exception ----------------------------------------------------------

class EvalError(ValueError):
    """Bad input or usage.  The message is one line: where, what rule, what value."""


# --- small helpers every file uses -----------------------------------------------

def _mean(values):
    """The mean of a non-empty sequence, its sum exact (math.fsum)."""
    return math.fsum(values) / len(values)


def _plural(n, one, many):
    """``n`` and the word for it: "1 query", "2 queries"."""
    return "%d %s" % (n, one if n == 1 else many)


def _preview(ids, limit=5):
    """The first ``limit`` ids, quoted, and how many more."""
    shown = ", ".join(repr(q) for q in ids[:limit])
    return shown + (", ... (%d more)" % (len(ids) - limit) if len(ids) > limit else "")


def _short_repr(value, limit=60):
    """repr(value), cut to ``limit`` characters for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 4] + " ..."


def _finite(value, what, *, plural=False, bools=False, infinite=False):
    """``value`` as a float: a number (not text, not a bool unless ``bools``),
    finite unless ``infinite``; else an EvalError saying what ``what`` must be.

    >>> _finite(2, "sd"), _finite(-math.inf, "t", infinite=True)
    (2.0, -inf)
    >>> _finite("0.5", "tolerance")     # as 10 ** 400 (no float holds it), NaN, True
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: tolerance must be a finite number, got '0.5'
    """
    try:
        if (isinstance(value, bool) and not bools) or isinstance(value, (str, bytes)) \
                or not hasattr(value, "__float__"):
            raise TypeError(value)
        out = float(value)
        if math.isnan(out) or not (infinite or math.isfinite(out)):
            raise ValueError(value)
    except (TypeError, ValueError, OverflowError):
        raise EvalError("%s must be %s, got %s" % (
            what, "finite numbers" if plural else "a number" if infinite else
            "a finite number", _short_repr(value))) from None
    return out


def _dumps(obj):
    """The JSON text of every file we write: sorted keys, no NaN, UTF-8 as is."""
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


def _fmt(value):
    """A mean as the tables show it: four decimals, "-" for none."""
    return "-" if value is None else "%.4f" % value


def _query_set(ids):
    """Which queries a mean is over, as a baseline or a report records it
    without naming them: their count and the sha256 of their ids.

    >>> _query_set(["q2", "q1"]) == _query_set(("q1", "q2"))
    True
    """
    return {"queries": len(ids), "sha256": _members_sha256(ids)}


def _members_sha256(ids):
    """The sha256 of a set of query ids (canonical JSON of the sorted list):
    names no id, and changes when one joins or leaves.

    >>> _members_sha256(["q2", "q1"]) == _members_sha256(("q1", "q2"))
    True
    """
    text = json.dumps(sorted(ids), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# ===========================================================================
# src/02_records.py
#
# Records: the plain values the library hands out.
#
# Report (what evaluate returns), HeldOut, Baseline, and the gate's results
# (MeasureChange, QueryDrop, MetaChange, MembershipChange, GateResult), with
# their JSON forms (to_dict); the cutoff ALL.  Records hold data and say how
# they print; the numbers in them are made by the later files.
#
# Uses: 01_head.  Used by: nearly every later file.  Forward (tools/build.py,
# FORWARD): the notebook views (_repr_markdown_, _repr_html_),
# Report.from_dict and Report.from_rows call the renderers, the report
# reader and the merge of rows at run time.
# ===========================================================================

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


# ===========================================================================
# src/03_measures.py
#
# Measures: the specification of every number.
#
# Every measure is a pure function (ranked, grades, k, **params) -> float:
#   ranked  a _Ranked: ``labelled``, the (rank, grade) of every id in the top K
#           that the qrels give a grade >= 0, best first, ranks from 1
#           (K >= k); and ``length``, how many ids the top K holds.  An id the
#           qrels do not label, or label with a negative grade, is non-relevant
#           and unjudged (as in trec_eval), so it is not listed.
#   grades  every grade the qrels give this query, sorted descending.
# A character measure (view="spans") takes (context, labels, k, **params)
# instead: the query's top chunks and its span labels (see measure()).
# Ranking and grade look-up happen once per query (see _rank, in
# 09_ranking); a measure reads only the few labelled ids, never the whole
# ranking.  The registry (@measure) declares each measure with its
# parameters, population and peer names; then the measures over ids, the
# unanswerable queries, judge scores, units (documents, evidence spans,
# characters) and unjudged=skip.  To add a measure: README.md, "How to add a
# measure" (a declaration here, a hand-worked row in tests/data/hand_worked.json).
#
# Uses: 01_head, 02_records.  Used by: measure names, the readers, ranking,
# evaluation, the gate, reports, the command line, accelerations.
# ===========================================================================

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


# ===========================================================================
# src/04_measure_names.py
#
# Measure names: the Measure record, parsing and printing canonical names.
#
# A Measure is a parsed name (``ndcg(gain=linear)@10``); parse_measure and
# str() are exact inverses.  Every name is read from the registry: our names
# and the peers' spellings (see Spelling), the parameters with their types,
# choices and peer values.  _UnitCall says how the scorer calls a measure
# (the view it reads, its budget).  Also the field names of score(field=...).
#
# Uses: 01_head, 02_records, 03_measures.  Used by: every later file but
# ranking.
# ===========================================================================

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


# ===========================================================================
# src/05_inputs.py
#
# Input readers (1 of 2): files, formats, JSON and JSONL, query metadata.
#
# qrels -> {qid: {doc_id: grade}}, read whole (qrels are small); a test-set
#          JSONL file also gives what it says of each query (see _query_info).
# run   -> a stream of (qid, ranking), one query at a time; a ranking is a ranked
#          list [doc_id, ...], a score map {doc_id: score}, or, from TREC files,
#          _Scored parallel lists.  Memory follows one query, not the file.
# Formats: JSON, JSONL (one query a line) and TREC (whitespace columns), and
# for qrels BEIR's TSV; each optionally gzip-compressed, detected from the
# content.  This file: opening a source (_Input), detecting its format, the
# JSON rules (no NaN, no repeated key), ids, grades and labels, JSONL lines,
# to-label rows read back, query metadata (--queries), and the progress line
# reading shows on a terminal.
#
# Uses: 01_head, 03_measures, 04_measure_names.  Used by: the second readers'
# file, test sets, evaluation, judge scores, baselines, the command line,
# accelerations.
# ===========================================================================

FORMATS = ("json", "jsonl", "trec")     # of qrels and runs alike
QRELS_FORMATS = ("beir",) + FORMATS     # qrels may also be BEIR's TSV
_BLOCK_SIZE = 1 << 17


def _source_name(source):
    if source == "-":
        return "<stdin>"
    if isinstance(source, (str, os.PathLike)):
        name = os.fsdecode(source)
    else:
        name = str(getattr(source, "name", "<stream>"))
    # A path with undecodable bytes keeps them as surrogates, which no report can hold.
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _os_error(name, exc):
    if isinstance(exc, FileNotFoundError):
        return EvalError("%s: no such file" % name)
    if isinstance(exc, IsADirectoryError):
        return EvalError("%s: is a directory, not a file" % name)
    if isinstance(exc, PermissionError):
        return EvalError("%s: permission denied" % name)
    return EvalError("%s: cannot read: %s" % (name, exc.strerror or exc))


def _gc_paused(func):
    """Run ``func`` with the cyclic garbage collector paused: scoring makes
    millions of short-lived lists and tuples and no cycles, and collections
    triggered by them cost time for nothing (a fifth of loading TREC qrels)."""
    @functools.wraps(func)
    def paused(*args, **kwargs):
        if not gc.isenabled():
            return func(*args, **kwargs)
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            gc.enable()
    return paused


class _Input:
    """A path, ``-`` (stdin) or a file object, read in blocks.

    Blocks are gunzipped when the bytes say gzip, and a leading UTF-8 BOM is
    dropped; ``sha256`` is the hash of the bytes as stored.  Stdin, pipes and
    file objects are buffered on first read so that they can be read twice
    (format detection, then loading; see also _NotGrouped).  the accelerations'
    _HashingInput can hash a file in another process instead.
    """

    def __init__(self, source):
        if isinstance(source, bytes):
            source = os.fsdecode(source)
        if not (isinstance(source, (str, os.PathLike)) or hasattr(source, "read")):
            raise EvalError("an input must be a path, '-' or a file object, got %s"
                            % _short_repr(source))
        if isinstance(source, str):
            try:
                os.fsencode(source)
            except UnicodeEncodeError:
                raise EvalError("%r cannot be a file name (it holds a lone surrogate)"
                                % source) from None
        self.source = source
        self.name = _source_name(source)
        self.digest = hashlib.sha256()
        self._buffered = None
        self.rising = []    # a run's queries whose scores rise down the list (_mapped_ranking)
        self.fields = None  # the _Fields it is read with (see _open_input), or None
        self.fields_info = None     # what the report's inputs say of them (see _Fields.info)

    def info(self, fmt):
        info = {"path": self.name, "sha256": self.digest.hexdigest(), "format": fmt}
        if self.fields_info:
            info["fields"] = self.fields_info
        return info

    def stop_hashing(self):
        """Nothing to stop here (the accelerations' _HashingInput hashes in another process)."""

    def _raw_blocks(self):
        if _is_regular_file(self.source):
            with open(self.source, "rb") as handle:
                for block in iter(lambda: handle.read(_BLOCK_SIZE), b""):
                    if _PROGRESS is not None:
                        _PROGRESS.read_bytes(len(block))
                    yield block
            return
        if self._buffered is None:
            if self.source == "-":
                if sys.stdin is None:
                    raise EvalError("<stdin>: standard input is closed")
                data = sys.stdin.buffer.read()
            elif isinstance(self.source, (str, os.PathLike)):
                with open(self.source, "rb") as handle:   # a pipe: it reads only once
                    data = handle.read()
            else:
                data = self.source.read()
            self._buffered = data.encode("utf-8") if isinstance(data, str) else data
        for start in range(0, len(self._buffered), _BLOCK_SIZE):
            yield self._buffered[start:start + _BLOCK_SIZE]

    def blocks(self):
        """Yield the decompressed content in blocks, hashing the stored bytes."""
        self.digest = hashlib.sha256()
        try:
            raw = self._hashed(self._raw_blocks())
            first = next(raw, b"")
            content = itertools.chain([first], raw)
            if first[:2] == b"\x1f\x8b":
                content = _gunzip(content, self.name)
            yield from _without_bom(content)
        except OSError as exc:
            raise _os_error(self.name, exc) from None
        except MemoryError:
            raise EvalError("%s: too large to read into memory" % self.name) from None

    def _hashed(self, blocks):
        for block in blocks:
            self.digest.update(block)
            yield block

    def text(self):
        """The whole content as text (UTF-8)."""
        return _decode(b"".join(self.blocks()), self.name)


_input_of = _Input      # hook: the accelerations install _HashingInput


class _Held:
    """An input that is not a regular file (stdin, a pipe), read once and
    held in memory under its own name, so that it can be read again (a failed
    gate's bounds, --to-label, --sweep-min-score); see _held."""

    def __init__(self, source):
        inp = _Input(source)
        self.name = inp.name
        try:
            self.data = b"".join(inp._raw_blocks())
        except OSError as exc:
            raise _os_error(self.name, exc) from None

    def read(self):
        return self.data


def _held(source):
    """``source``, or a _Held copy of it when it cannot be read twice.

    >>> _held(__file__) == __file__
    True
    """
    if source != "-" and (_is_regular_file(source) or not os.path.exists(source)):
        return source
    return _Held(source)


def _sha256_of_file(path, name):
    """The sha256 of a file's bytes (hexadecimal)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise _os_error(name, exc) from None
    return digest.hexdigest()


def _is_regular_file(source):
    if source == "-" or not isinstance(source, (str, os.PathLike)):
        return False
    try:
        return stat.S_ISREG(os.stat(source).st_mode)
    except OSError:
        return True     # let open() report it


def _without_bom(blocks):
    """The blocks with a leading UTF-8 byte order mark removed."""
    head = b""
    for block in blocks:
        head += block
        if len(head) >= 3:
            break
    yield head[3:] if head.startswith(b"\xef\xbb\xbf") else head
    yield from blocks


def _gunzip(raw_blocks, name):
    """Decompress gzip data (several members allowed) as a stream."""
    import zlib
    inflater, fed = zlib.decompressobj(31), False
    try:
        for raw in raw_blocks:
            while raw:
                fed = True
                yield inflater.decompress(raw)
                if not inflater.eof:
                    break
                raw, inflater, fed = inflater.unused_data, zlib.decompressobj(31), False
        if fed and not inflater.eof:
            raise EvalError("%s: truncated gzip data" % name)
    except zlib.error as exc:
        raise EvalError("%s: corrupt gzip data: %s" % (name, exc)) from None


def _decode(data, name):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise EvalError("%s:%d: not UTF-8 text (byte %#x)" % (name, line, data[exc.start])) from None


def _whole_lines(blocks):
    """Re-cut blocks of bytes into blocks of whole lines (a final newline added);
    a line longer than a block is joined once, never copied block by block."""
    pending = []
    for block in itertools.chain(blocks, [b"\n"]):
        cut = block.rfind(b"\n") + 1
        if not cut:
            pending.append(block)
            continue
        head = b"".join(pending + [block[:cut]]) if pending else block[:cut]
        pending = [block[cut:]] if cut < len(block) else []
        yield head


def _lines(inp):
    """Yield (line number, line bytes) over an input, block by block."""
    number = 0
    for block in _whole_lines(inp.blocks()):
        for line in block.split(b"\n")[:-1]:
            number += 1
            yield number, line


_DETECT_BYTES = 1 << 20


def _detect_format(inp, kind):
    """'json', 'jsonl', 'trec' or 'beir', from the first non-blank line: JSONL
    when it is a JSON object naming a query (see _names_a_query), JSON when it
    starts otherwise with "{" or "[", BEIR when it is BEIR's header line, else
    TREC (a "#" comment line can only be TREC, see _is_comment).  Reads no
    further than the first MiB: of a longer first line only the top-level
    members held whole in that MiB are looked at."""
    head = b""
    for block in inp.blocks():
        head += block
        if b"\n" in head.lstrip() or len(head) >= _DETECT_BYTES:
            break
    stripped = head.lstrip()
    if not stripped:
        raise EvalError("%s: empty %s file" % (inp.name, kind))
    if stripped[:1] not in (b"{", b"["):
        return "beir" if _is_beir_header(stripped) else "trec"
    end = stripped.find(b"\n")
    query = inp.fields.query if inp.fields is not None else None
    if end < 0 and len(head) >= _DETECT_BYTES:      # a first line over a MiB
        jsonl = stripped[:1] == b"{" and _leading_query_key(stripped, query)
        return "jsonl" if jsonl else "json"
    try:
        first = json.loads(stripped[:end] if end >= 0 else stripped)
    except (ValueError, RecursionError):
        return "json"
    return "jsonl" if isinstance(first, dict) and _names_a_query(first, query) else "json"


_BEIR_HEADER = b"query-id\tcorpus-id\tscore"


def _is_beir_header(text):
    """True when ``text`` (bytes) starts with BEIR's qrels header line.

    >>> _is_beir_header(b"query-id\\tcorpus-id\\tscore\\r\\nq1\\td1\\t1")
    True
    >>> _is_beir_header(b"query-id\\tcorpus-id\\tscores\\n"), _is_beir_header(b"q1 0 d1 1")
    (False, False)
    """
    after = text[len(_BEIR_HEADER):len(_BEIR_HEADER) + 2]
    return text.startswith(_BEIR_HEADER) and (after[:1] in (b"", b"\n")
                                              or after in (b"\r", b"\r\n"))


def _names_a_query(record, query=None):
    """True when a JSON object names a query as a JSONL line does (see
    _query_key): it has "query_id" or "qid", or "id" beside labels or a ranking,
    or the first key of the query field path given (--query-field, see _Fields).

    >>> _names_a_query({"id": "q1", "relevant": ["d1"]}), _names_a_query({"id": ["d1"]})
    (True, False)
    >>> _names_a_query({"query": "How long?", "expected_ids": ["n1"]}, ("query",))
    True
    """
    if query is not None and query[0] in record:
        return True
    return "query_id" in record or "qid" in record or (
        "id" in record and any(key in record for key in _LABEL_KEYS + _RANKING_KEYS))


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _leading_query_key(head, query=None):
    """_names_a_query of the JSON object that ``head`` (bytes, perhaps cut
    short) begins, among the top-level keys ``head`` holds whole.

    >>> _leading_query_key(b'{"docs": ["query_id"], "query_id": "q1", "x": [1, 2')
    True
    >>> _leading_query_key(b'{"q1": ["query_id", "a"], "id": ["b", "c"], "q3": ["d", "e')
    False
    """
    text, decode = head.decode("utf-8", "ignore"), json.JSONDecoder().raw_decode
    i = _JSON_SPACE.match(text).end() + 1       # past the "{"
    names = {}
    try:
        while True:
            i = _JSON_SPACE.match(text, i).end()
            if text[i:i + 1] != '"':
                return False
            name, i = decode(text, i)
            i = _JSON_SPACE.match(text, i).end()
            if text[i:i + 1] != ":":
                return False
            names[name] = None
            if _names_a_query(names, query):
                return True
            i = _JSON_SPACE.match(text, i + 1).end()
            _, i = decode(text, i)              # the value: raises when cut short
            i = _JSON_SPACE.match(text, i).end()
            if text[i:i + 1] != ",":
                return False
            i += 1
    except (ValueError, RecursionError):
        return False


def _reject_constant(token):
    raise EvalError("%s is not a number JSON allows" % token)


_STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _strict_loads(text):
    """json.loads(text, parse_constant=_reject_constant), from one decoder made
    once: json.loads makes a decoder at every call given an option, which
    costs as much as parsing a short JSONL line.  Bytes and a text opening with
    a byte-order mark go through json.loads, which decodes the one and refuses
    the other."""
    if type(text) is str and not text.startswith("\ufeff"):
        return _STRICT_DECODER.decode(text)
    return json.loads(text, parse_constant=_reject_constant)


def _no_duplicate_keys(pairs):
    result = dict(pairs)
    if len(result) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise EvalError("duplicate key %r in one JSON object (json would silently "
                                "keep the last)" % key)
            seen.add(key)
    return result


def _key_bound(text):
    """An upper bound on the keys in a JSON text: each key is followed by one
    colon outside any string (colons inside strings only raise the bound)."""
    return text.count(":")


def _top_level_keys(value):
    """Keys of the top object and of the objects directly inside it."""
    if not isinstance(value, dict):
        return 0
    return len(value) + sum(len(v) for v in value.values() if type(v) is dict)


# \ud800-\udfff: high and low halves.  A valid pair parses to one character,
# so only the walk of _check_encodable decides; this only says when to walk.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_encodable(value):
    """JSON escapes can make lone surrogates (high or low), which no file or
    terminal can take."""
    strings = [value]
    while strings:
        item = strings.pop()
        if isinstance(item, dict):
            strings.extend(item)
            strings.extend(item.values())
        elif isinstance(item, list):
            strings.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise EvalError("%r holds a lone surrogate escape, not text" % item) from None


def _json_loads(text, name, line=None):
    """Parse JSON; duplicate keys, NaN and Infinity are errors.

    The C parser runs plain; only when the parsed objects hold fewer keys than
    the text may contain (a possible duplicate) is the text parsed again with a
    hook that finds it.  Equal counts prove there is none: the bound is at least
    the keys written, which are at least the keys kept.

    >>> _json_loads('{"q": {"a": 1, "b": 2}}', "x")
    {'q': {'a': 1, 'b': 2}}
    >>> _json_loads('{"q": {"a": 1, "a" : 2}}', "x")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: x: duplicate key 'a' in one JSON object (json would silently keep the last)
    """
    where = "%s:%d" % (name, line) if line else name
    try:
        value = _strict_loads(text)
        if _top_level_keys(value) != _key_bound(text):
            value = json.loads(text, object_pairs_hook=_no_duplicate_keys,
                               parse_constant=_reject_constant)
        if _SURROGATE_ESCAPE.search(text):
            _check_encodable(value)
        return value
    except EvalError as exc:
        raise EvalError("%s: %s" % (where, exc)) from None
    except json.JSONDecodeError as exc:
        if _two_values(text, exc) and (line or "\n" not in text[:exc.pos].strip()):
            raise EvalError("%s:%d: %s" % (name, line or exc.lineno, _TWO_VALUES["line"])) \
                from None
        at = "%s:%d:%d" % (name, line or exc.lineno, exc.colno)
        raise EvalError("%s: invalid JSON: %s" % (at, _json_error_text(text, exc))) from None
    except ValueError as exc:     # e.g. an integer longer than Python converts
        raise EvalError("%s: invalid JSON: %s" % (where, exc)) from None
    except RecursionError:
        raise EvalError("%s: JSON nested too deeply" % where) from None
    except MemoryError:
        raise EvalError("%s: too large to parse" % where) from None


_TWO_VALUES = {"line": "two JSON values on one line", "cell": "two JSON values in one cell"}


def _two_values(text, exc):
    """True when a JSON error is a second value after the first (JSON's
    "Extra data"), with or without a comma between them."""
    if exc.msg != "Extra data":
        return False
    rest = text[exc.pos:]
    if rest.startswith(","):
        rest = rest[1:].lstrip()
    try:
        json.JSONDecoder().raw_decode(rest)
    except (ValueError, RecursionError):
        return False
    return True


def _json_error_text(text, exc):
    """A JSON error in words: JSON's own, but for "Extra data".

    >>> try:
    ...     json.loads('{"a": 1} {"b": 2}')
    ... except json.JSONDecodeError as exc:
    ...     print(_json_error_text('{"a": 1} {"b": 2}', exc))
    a second JSON value after the first
    """
    if exc.msg != "Extra data":
        return exc.msg
    if _two_values(text, exc):
        return "a second JSON value after the first"
    return "more text after the JSON value"


_JSON_KINDS = {list: "a JSON array", str: "a JSON string", int: "a JSON number",
               float: "a JSON number", bool: "true or false", type(None): "null"}


def _not_an_object(where, value, needs):
    """The error of a JSONL line holding another JSON value than an object:
    what it holds, in words, then what a line ``needs``.

    >>> print(_not_an_object("s.jsonl:2", [1, 2], 'a score line is {"query_id": ...}'))
    s.jsonl:2: a JSON array, expected an object: a score line is {"query_id": ...}
    """
    return EvalError("%s: %s, expected an object: %s"
                     % (where, _JSON_KINDS.get(type(value), "a JSON value"), needs))


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
        try:
            score = float(value)
        except OverflowError:
            score = math.inf
        if math.isfinite(score):
            return score
    shown = repr(value) if len(repr(value)) < 40 else repr(value)[:36] + "..."
    raise EvalError("%s must be a finite number, got %s" % (what, shown))


# The checks below test a whole query at C speed (set of types, all finite) and
# only walk item by item to name the culprit or convert integer ids.

def _check_qrels_query(qid, grades, where):
    if isinstance(grades, list) and all(isinstance(item, (dict, Label)) for item in grades):
        return [_as_label(item, "%s: query %r: label %d" % (where, qid, i))
                for i, item in enumerate(grades, 1)]
    if not isinstance(grades, dict):
        hint = "; a ranked list is a run: " + _SWAPPED if isinstance(grades, list) else ""
        raise EvalError("%s: query %r: judgments must be an object {doc_id: grade}, got %s%s"
                        % (where, qid, type(grades).__name__, hint))
    if set(map(type, grades.values())) <= {int} and _all_str(grades):
        return grades
    return {_as_id(doc, "%s: query %r: doc id" % (where, qid)):
            _as_grade(g, "%s: query %r: grade of %r" % (where, qid, doc))
            for doc, g in grades.items()}


_LABEL_FORM = '{"doc": ..., "start": ..., "end": ..., "grade": ...}'


def _offset(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EvalError("%s must be a non-negative integer (a code point offset), got %s"
                        % (what, _short_repr(value, 40)))
    return value


def _span_fields(record, what):
    """(start, end) of a label or chunk record: both or neither (absent or
    null: a whole document, or a chunk whose span is unknown), start < end."""
    return _span_values(record.get("start"), record.get("end"), what)


def _span_values(start, end, what, names=("start", "end")):
    """(start, end) checked as _span_fields checks them, the messages naming
    the two fields ``names`` (a result object's field paths, see _object_span).

    >>> _span_values(3, None, "r.json: item 1", ("node.start_char_idx", "node.end_char_idx"))
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: r.json: item 1: give node.start_char_idx and node.end_char_idx together (got only node.start_char_idx)
    """
    has_start, has_end = start is not None, end is not None
    if has_start != has_end:
        raise EvalError("%s: give %s and %s together (got only %s)"
                        % (what, names[0], names[1], names[0] if has_start else names[1]))
    if not has_start:
        return None, None
    start = _offset(start, "%s: %s" % (what, names[0]))
    end = _offset(end, "%s: %s" % (what, names[1]))
    if start >= end:
        raise EvalError("%s: %s (%d) must be below %s (%d): spans are [start, end)"
                        % (what, names[0], start, names[1], end))
    return start, end


_SHA256_HEX = re.compile(r"[0-9a-f]{64}\Z")     # a sha256 as hexdigest() writes it (also 08)


def _sha_field(record, what):
    """The doc_sha256 of a label or chunk record, or None: 64 lower-case hex
    digits, as sha256sum and hashlib's hexdigest() write them (versions are
    compared as written, so one form for all).

    >>> _sha_field({"doc_sha256": "9f" * 32}, "x") == "9f" * 32
    True
    >>> _sha_field({"doc_sha256": "xyz"}, "l.jsonl:3")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: l.jsonl:3: doc_sha256 must be 64 lower-case hex digits (a sha256 as sha256sum writes it), got 'xyz'
    """
    sha = record.get("doc_sha256")
    if sha is not None and not (isinstance(sha, str) and _SHA256_HEX.match(sha)):
        raise EvalError("%s: doc_sha256 must be 64 lower-case hex digits (a sha256 as "
                        "sha256sum writes it), got %s" % (what, _short_repr(sha, 40)))
    return sha


def _as_label(item, what):
    """A Label from a label object (or a Label): a whole document without
    start/end, else a span of it."""
    if isinstance(item, Label):     # None: a field not given (start/end: the whole document)
        item = {key: value for key, value in item._asdict().items() if value is not None}
    if "doc" not in item or "grade" not in item:
        raise EvalError("%s must look like %s (start/end left out for a whole document), got "
                        "keys %r" % (what, _LABEL_FORM, list(item)[:6]))
    doc = _as_id(item["doc"], what + ": doc")
    start, end = _span_fields(item, what)
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        raise EvalError("%s: text must be a string (the labelled text), got %s"
                        % (what, _short_repr(text, 40)))
    return Label(doc, start, end, _as_grade(item["grade"], what + ": grade"),
                 _sha_field(item, what), text)


def _all_str(items):
    """True when every item is a str (joining them fails at C speed otherwise)."""
    try:
        "".join(items)
    except TypeError:
        return False
    return True


def _check_run_query(qid, ranking, where, rising=None, fields=None):
    """A query's ranking, checked (see _mapped_ranking for ``rising`` and ``fields``)."""
    if isinstance(ranking, list):
        if _all_str(ranking):
            return ranking
        if any(isinstance(item, dict) for item in ranking):
            return _mapped_ranking(qid, ranking, where, rising, fields)
        return [_as_id(doc, "%s: query %r: id at position %d" % (where, qid, i))
                for i, doc in enumerate(ranking, 1)]
    if isinstance(ranking, dict):
        scores = ranking.values()
        if (set(map(type, scores)) <= {float} and all(map(math.isfinite, scores))
                and _all_str(ranking)):
            return ranking
        checked = {}
        for doc, score in ranking.items():
            doc_id = _as_id(doc, "%s: query %r: doc id" % (where, qid))
            if doc_id in checked:
                raise EvalError("%s: query %r: doc id %r appears twice" % (where, qid, doc_id))
            checked[doc_id] = _as_score(score, "%s: query %r: score of %r" % (where, qid, doc))
        return checked
    raise EvalError("%s: query %r: expected a ranked list of ids or an object "
                    "{doc_id: score}, got %s" % (where, qid, type(ranking).__name__))


class _MappedRanking(list):
    """A ranked list of ids whose items were objects (result objects, see
    _Shape): ``chunks`` maps the ids that said where they come from to their
    Chunk; ``scores`` holds each item's score (None when the items gave none);
    ``texts`` the "text" of the items that gave one (read by --to-label only,
    for the person who grades the id); ``unplaced`` maps the ids whose object
    named a document but no span to the field that would have given it (for
    the refusal of measures that need spans).  The list order is the ranking,
    whatever the scores: retrievers such as FAISS and Chroma give distances,
    lower is better."""
    chunks: dict = {}
    scores = None
    texts: dict = {}
    unplaced: dict = {}


def _mapped_ranking(qid, ranking, where, rising=None, fields=None):
    """The _MappedRanking of a list holding objects, each read at the field
    paths of its shape (see _shape_of) that ``fields`` (a _Fields) does not
    replace.  A score must be a finite number, given on every item or on
    none; a query whose scores rise down the list is appended to ``rising``
    (a run warns of them).

    >>> r = _mapped_ranking("q1", [{"id": "a", "score": 0.2}, {"id": "b", "score": 0.3}], "x", [])
    >>> r, r.scores
    (['a', 'b'], [0.2, 0.3])
    >>> r = _mapped_ranking("q1", [{"page_content": "30 days.", "metadata": {
    ...     "source": "refunds.txt", "start_index": 12}}], "x")
    >>> r, r.chunks
    (['refunds.txt[12:20]'], {'refunds.txt[12:20]': Chunk(doc='refunds.txt', start=12, end=20, tokens=None, doc_sha256=None)})
    """
    out, chunks, scores, texts, unplaced = _MappedRanking(), {}, [], {}, {}
    fields = fields or _NO_FIELDS
    for i, item in enumerate(ranking, 1):
        what = "%s: query %r: item %d" % (where, qid, i)
        if not isinstance(item, dict):
            out.append(_as_id(item, what))
            continue
        if (fields is _NO_FIELDS and type(item.get("id")) is str and "page_content" not in item
                and "node" not in item):    # the plain shape: read as a chunk-map line, faster
            shape, chunk_id = _PLAIN_SHAPE, item["id"]
            chunk = _as_chunk(item, what) if item.get("doc") is not None else None
        else:
            shape = _shape_of(item)
            chunk_id, chunk = _result_object(item, shape, fields, what)
        out.append(chunk_id)
        if "score" in item and not (shape.null_score and item["score"] is None):
            scores.append(_as_score(item["score"], what + ": score"))
        if chunk is not None:
            if chunks.get(chunk_id, chunk) != chunk:
                raise EvalError("%s: id %r is given twice with different fields"
                                % (what, chunk_id))
            chunks[chunk_id] = chunk
            if chunk.start is None:
                unplaced[chunk_id] = _unplaced_text(shape, fields)
        if item.get("text") is not None:
            if not isinstance(item["text"], str):
                raise EvalError("%s: text must be a string (the chunk's text), got %s"
                                % (what, _short_repr(item["text"], 40)))
            texts.setdefault(chunk_id, item["text"])
    out.chunks = chunks
    if texts:
        out.texts = texts
    if unplaced:
        out.unplaced = unplaced
    if scores:
        if len(scores) < len(out):
            raise EvalError("%s: query %r: %d of %d items give a score: give one on every item "
                            "or on none" % (where, qid, len(scores), len(out)))
        out.scores = scores
        if rising is not None and any(map(operator.lt, scores, scores[1:])):
            rising.append(qid)
    return out


def _with_rising_note(report, name, rising, testset=None):
    """The report, warned first when some ranked lists' scores rise (see
    _mapped_ranking): their order was read as the ranking.  A hold-out query
    is never named."""
    if testset is not None and testset.hidden:
        rising = [qid for qid in rising if qid not in testset.hidden]
    if not rising:
        return report
    note = ("%s: %s scores that rise down the list (first %r): the list order is the ranking, "
            "not the scores (distances rise); check each list is best first"
            % (name, _plural(len(rising), "query lists", "queries list"), rising[0]))
    return report._replace(warnings=(note,) + report.warnings)


def _as_chunk(record, what):
    """A Chunk from a chunk-map record: doc, and optionally start/end, tokens
    and doc_sha256."""
    doc = _as_id(record["doc"], what + ": doc")
    start, end = _span_fields(record, what)
    return Chunk(doc, start, end, _tokens_field(record, what), _sha_field(record, what))


def _tokens_field(record, what):
    """The tokens of a chunk record (or a result object), or None."""
    tokens = record.get("tokens")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)
                               or tokens < 0):
        raise EvalError("%s: tokens must be a non-negative integer, got %s"
                        % (what, _short_repr(tokens, 40)))
    return tokens


# --- result objects: the shapes RAG frameworks write ---------------------------------
#
# An object in a ranked list says which chunk it is and, perhaps, where the
# chunk comes from; where it says so depends on what wrote it.  A _Shape holds
# the field paths of one serialized shape, detected by its keys (_shape_of);
# --id-field, --doc-field, --start-field and --end-field (a _Fields) replace
# any of them, on every object.  A path is the keys from the object as
# written, joined by "."; a missing key or a null is a field not given.
# "tokens" and "doc_sha256" are read at the top of every object.


class _Shape(NamedTuple):
    """Where one serialized shape gives an object's id, its document (the
    first of ``docs`` given), its start and its end, as field paths (tuples
    of keys); with ``end`` None the chunk ends ``len(text)`` code points
    after its start (``text``: the path of its text).  ``by_place``: an
    object without an id is known by (document, start, end) (see _place_id);
    ``null_score``: a null score is no score (what the framework writes);
    ``hint``: how the framework writes the start, said when it is missing."""
    name: str
    id: tuple
    docs: tuple
    start: tuple
    end: Optional[tuple]
    text: Optional[tuple] = None
    by_place: bool = False
    null_score: bool = False
    hint: str = ""


_PLAIN_SHAPE = _Shape("plain", ("id",), (("doc",),), ("start",), ("end",))
# LangChain's Document.model_dump(): {"id", "metadata", "page_content", "type"}.
_LANGCHAIN_SHAPE = _Shape(
    "LangChain Document", ("id",), (("metadata", "source"),), ("metadata", "start_index"),
    None, ("page_content",), by_place=True,
    hint="a LangChain text splitter writes it with add_start_index=True")
# LlamaIndex's NodeWithScore.to_dict(): {"node": {"id_", "metadata", "relationships",
# "start_char_idx", "end_char_idx", ...}, "score", "class_name"}; relationship "1" is
# the source document (NodeRelationship.SOURCE).
_LLAMAINDEX_SHAPE = _Shape(
    "LlamaIndex node", ("node", "id_"),
    (("node", "metadata", "file_name"), ("node", "metadata", "file_path"),
     ("node", "relationships", "1", "node_id")),
    ("node", "start_char_idx"), ("node", "end_char_idx"), null_score=True)


def _shape_of(item):
    """The _Shape of a result object, by its keys: LangChain's Document has
    "page_content", LlamaIndex's NodeWithScore a "node" object with "id_";
    any other object (Haystack's Document.to_dict() among them) is plain.

    >>> _shape_of({"node": {"id_": "n1"}, "score": 0.5}).name, _shape_of({"id": "a"}).name
    ('LlamaIndex node', 'plain')
    """
    if "page_content" in item:
        return _LANGCHAIN_SHAPE
    node = item.get("node")
    if isinstance(node, dict) and "id_" in node:
        return _LLAMAINDEX_SHAPE
    return _PLAIN_SHAPE


class _Fields(NamedTuple):
    """Field paths (tuples of keys) given to replace the shapes' own, each
    None when not given: ``id``, ``doc``, ``start`` and ``end`` of result
    objects (--id-field, --doc-field, --start-field, --end-field), and
    ``query``, the query of a JSONL line (--query-field; see _keyed_line)."""
    query: Optional[tuple] = None
    id: Optional[tuple] = None
    doc: Optional[tuple] = None
    start: Optional[tuple] = None
    end: Optional[tuple] = None

    def info(self, kind):
        """What the report's inputs say of the paths a file of ``kind`` ("qrels"
        or "run") is read with: {name: path text}, only those given.

        >>> _Fields(("query",), doc=("node", "metadata", "file_path")).info("run")
        {'query': 'query', 'doc': 'node.metadata.file_path'}
        """
        names = ("query",) if kind == "qrels" else self._fields
        return {name: ".".join(getattr(self, name)) for name in names
                if getattr(self, name) is not None}


_NO_FIELDS = _Fields()
_FIELD_OPTIONS = {"query": "--query-field", "id": "--id-field", "doc": "--doc-field",
                  "start": "--start-field", "end": "--end-field"}


def _checked_fields(fields):
    """The _Fields of ``fields`` (the library's ``fields=``: {name: "dotted.path"},
    names among query, id, doc, start, end), or None when it gives none.

    >>> _checked_fields({"doc": "node.metadata.file_path", "end": None})
    _Fields(query=None, id=None, doc=('node', 'metadata', 'file_path'), start=None, end=None)
    """
    if fields is None or isinstance(fields, _Fields):
        return fields if fields != _NO_FIELDS else None
    if not isinstance(fields, dict):
        raise EvalError("fields must be a dict {name: 'dotted.path'} (names: %s), got %s"
                        % (", ".join(_Fields._fields), _short_repr(fields, 40)))
    paths = {}
    for name, text in fields.items():
        if name not in _Fields._fields:
            raise EvalError("fields: unknown field %s (choose from %s)"
                            % (_short_repr(name, 40), ", ".join(_Fields._fields)))
        if text is not None:
            paths[name] = _field_path(text, "fields[%r]" % name)
    return _Fields(**paths) if paths else None


def _field_path(text, what):
    """A field path from its text: keys from the object as written, joined by
    "." (so a key holding a "." cannot be named).

    >>> _field_path("metadata.start_index", "--start-field")
    ('metadata', 'start_index')
    >>> _field_path("metadata..source", "--doc-field")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: --doc-field: 'metadata..source' is not a field path (keys joined by '.', e.g. metadata.source)
    """
    keys = tuple(text.split(".")) if isinstance(text, str) else ()
    if not keys or not all(keys):
        raise EvalError("%s: %s is not a field path (keys joined by '.', e.g. metadata.source)"
                        % (what, _short_repr(text, 40)))
    return keys


def _at(record, path):
    """The value at a field path, or None (a key missing, a null, or a step
    that is not an object).

    >>> _at({"node": {"metadata": {"file_name": "a.txt"}}}, ("node", "metadata", "file_name"))
    'a.txt'
    >>> _at({"node": {"metadata": None}}, ("node", "metadata", "file_name")) is None
    True
    """
    if len(path) == 1 and type(record) is dict:    # (most paths: one call, no loop)
        return record.get(path[0])
    for key in path:
        if not isinstance(record, dict):
            return None
        record = record.get(key)
    return record


def _result_object(item, shape, fields, what):
    """(chunk id, Chunk or None) of one result object: None when it names no
    document (its id alone counts).  An id given as null is refused (as an id
    of another type), unless the shape knows the object by its place."""
    id_path = fields.id or shape.id
    chunk_id = _at(item, id_path)
    if type(chunk_id) is not str and not (chunk_id is None and shape.by_place):
        parent = _at(item, id_path[:-1])
        if chunk_id is None and not (isinstance(parent, dict) and id_path[-1] in parent):
            if fields.id is not None:
                raise EvalError("%s: an object in a ranking needs %s (--id-field), got keys %r"
                                % (what, ".".join(id_path), list(item)[:6]))
            raise EvalError('%s: an object in a ranking needs "id" (and may give score, doc, '
                            'start, end, tokens), got keys %r' % (what, list(item)[:6]))
        chunk_id = _as_id(chunk_id, "%s: %s" % (what, ".".join(id_path)))
    doc = None
    for path in (fields.doc,) if fields.doc is not None else shape.docs:
        doc = _at(item, path)
        if doc is not None:
            if type(doc) is not str:
                doc = _as_id(doc, "%s: %s" % (what, ".".join(path)))
            break
    start, end = _object_span(item, shape, fields, what) if doc is not None else (None, None)
    if chunk_id is None:
        chunk_id = _place_id(item, shape, fields, doc, start, end, what)
    if doc is None:
        return chunk_id, None
    return chunk_id, Chunk(doc, start, end, _tokens_field(item, what), _sha_field(item, what))


def _object_span(item, shape, fields, what):
    """(start, end) of a result object, both or neither, named by their paths
    in a message; a shape without an end path ends ``len(text)`` code points
    after the start (LangChain: start_index + the length of page_content)."""
    start_path = fields.start or shape.start
    end_path = fields.end or shape.end
    start = _at(item, start_path)
    if end_path is not None:
        end = _at(item, end_path)
        if type(start) is int and type(end) is int and 0 <= start < end:
            return start, end       # (the checks below name the paths of a bad span)
        return _span_values(start, end, what, (".".join(start_path), ".".join(end_path)))
    start_name = ".".join(start_path)
    length = len(_object_text(item, shape, what))
    counted = isinstance(start, int) and not isinstance(start, bool)
    end = start + length if counted else start      # (a start that is no offset is refused)
    return _span_values(start, end, what, (start_name, "%s + the length of %s"
                                           % (start_name, ".".join(shape.text))))


def _object_text(item, shape, what):
    text = _at(item, shape.text)
    if not isinstance(text, str):
        raise EvalError("%s: %s must be text, got %s"
                        % (what, ".".join(shape.text), _short_repr(text, 40)))
    return text


def _place_id(item, shape, fields, doc, start, end, what):
    """The id of a result object without one (a LangChain Document whose id is
    null): ``doc[start:end]``, the chunk by its place, or without a span
    ``doc[sha256:...]``, the first 16 hex digits of its text's sha256.

    >>> item = {"page_content": "30 days.", "metadata": {"source": "refunds.txt"}}
    >>> _place_id(item, _LANGCHAIN_SHAPE, _NO_FIELDS, "refunds.txt", None, None, "x")
    'refunds.txt[sha256:0ad0c6405da0e59b]'
    """
    if doc is None:
        raise EvalError("%s: a %s without an id is known by its document and span, and it "
                        "gives no %s: give ids (--id-field) or documents (--doc-field)"
                        % (what, shape.name, ".".join(fields.doc or shape.docs[0])))
    if start is not None:
        return "%s[%d:%d]" % (doc, start, end)
    text = _object_text(item, shape, what)
    return "%s[sha256:%s]" % (doc, hashlib.sha256(text.encode("utf-8", "surrogatepass"))
                              .hexdigest()[:16])


def _unplaced_text(shape, fields):
    """The field an object named no span by, for a message (see _MappedRanking)."""
    if fields.start is not None:
        return ".".join(fields.start)
    return ".".join(shape.start) + (" (%s)" % shape.hint if shape.hint else "")


def _unplaced_note(exc, ranking):
    """What to add to the error of a chunk without a span (see _NoSpan) whose
    result object in the run named no span: the field it lacks.

    >>> r = _mapped_ranking("q", [{"id": "a", "doc": "A"}], "x")
    >>> _unplaced_note(_NoSpan("chunk 'a' has no start/end", "a"), r)
    '; its object in the run gives no start'
    """
    field = getattr(ranking, "unplaced", {}).get(getattr(exc, "chunk_id", None))
    return "; its object in the run gives no %s" % field if field else ""


# --- JSONL: one query a line -------------------------------------------------------
#
# A line names its query by "query_id", else "qid", else "id", but by "id"
# only on a line that gives labels or a ranking: elsewhere (a chunk, a Ragas
# row) "id" may name something else.  A qrels line gives its labels under
# "grades" or a test set's names for them; a run line gives "docs" (a ranked
# list), "scores" (a score map) or Ragas' "retrieved_context_ids" or
# LlamaIndex's "retrieved_ids" (ranked lists).  Rows that carry no id (Ragas',
# LlamaIndex's RetrieverEvaluator's) are named by --query-field (see
# _keyed_line).  Other fields of a qrels line may say what its query is (see
# _query_info); the rest are not read.


_SWAPPED = "the files look swapped: give them in the order QRELS RUN"


_ID_KEYS = ("query_id", "qid", "id")
_LABEL_KEYS = ("grades", "relevant", "relevant_ids", "must_retrieve_doc_ids",
               "reference_context_ids", "expected_ids")
_LABEL_KEYS_SET = frozenset(_LABEL_KEYS)
_RANKING_KEYS = ("docs", "scores", "retrieved_context_ids", "retrieved_ids")
_OWN_KEYS = {"qrels": _LABEL_KEYS, "run": _RANKING_KEYS}
_RAGAS_KEYS = ("user_input", "reference_context_ids", "retrieved_context_ids",
               "reference_contexts", "retrieved_contexts")
# Rows without an id, by who writes them: (their keys, the field of their question).
_KEYLESS_ROWS = (("Ragas rows", _RAGAS_KEYS, "user_input"),
                 ("LlamaIndex's RetrieverEvaluator rows",
                  ("expected_ids", "retrieved_ids", "expected_texts", "retrieved_texts",
                   "metric_dict"), "query"))
# Keys of a run line or of a label line: a qrels line without labels holding
# one of them is a mistake, not a query with no labels.
_OTHER_FORMS = frozenset(_RANKING_KEYS + ("doc", "grade", "start", "end"))
_JSONL_FORMS = {
    "qrels": '{"query_id": ..., "relevant": {doc_id: grade, ...} or [doc_id, ...]} (the query '
             'id may be "qid", or "id" beside labels; the labels may be named "grades", '
             '"relevant_ids", "must_retrieve_doc_ids", "reference_context_ids" or '
             '"expected_ids"; a line without labels is a query with none), or one label a '
             'line {"query_id": ..., "doc": ..., "grade": ...}',
    "run": '{"query_id": ..., "docs": [doc_id or {"id": doc_id, "score": ...}, ...]}, '
           '{"query_id": ..., "scores": {doc_id: score, ...}} or {"query_id": ..., '
           '"retrieved_context_ids" or "retrieved_ids": [doc_id, ...]} (the query id may be '
           '"qid" or "id")'}


def _keyless_hint(record):
    """What to tell of a row without an id that Ragas or LlamaIndex wrote
    (see _KEYLESS_ROWS); "" for another.

    >>> print(_keyless_hint({"query": "How long?", "expected_ids": ["n1"], "retrieved_ids": []}))
    ; LlamaIndex's RetrieverEvaluator rows have no stable id: key each row by its question with --query-field query, or add a "query_id" to each row, the same in every file
    """
    for who, keys, question in _KEYLESS_ROWS:
        if any(k in record for k in keys):
            return ('; %s have no stable id: key each row by its question with --query-field '
                    '%s, or add a "query_id" to each row, the same in every file'
                    % (who, question))
    return ""


def _query_key(record, keyed):
    """The key that names the query of a JSONL line, or None: "query_id", else
    "qid", else "id" when ``keyed`` (the line gives labels or a ranking).

    >>> _query_key({"id": "r7", "qid": "q1"}, True), _query_key({"id": "c1", "doc": "a"}, False)
    ('qid', None)
    """
    if "query_id" in record:
        return "query_id"
    if "qid" in record:
        return "qid"
    return "id" if keyed and "id" in record else None


def _jsonl_form_error(where, kind, record):
    """The error of a JSONL record that is no line of its kind: what each form
    of the kind needs, and what the record lacks or seems to be instead."""
    if not isinstance(record, dict):
        return _not_an_object(where, record, "a JSONL %s line needs %s"
                              % (kind, _JSONL_FORMS[kind]))
    keys = list(record)[:6]
    given = [key for key in _OWN_KEYS[kind] if key in record]
    if len(given) > 1:
        return EvalError("%s: a JSONL %s line gives both %r and %r: keep one"
                         % (where, kind, given[0], given[1]))
    key = _query_key(record, True)
    ragas = _keyless_hint(record) if key is None else ""
    if given and key is None:
        return EvalError('%s: a JSONL %s line needs a query id ("query_id", "qid" or "id"), '
                         'got keys %r%s' % (where, kind, keys, ragas))
    other = "run" if kind == "qrels" else "qrels"
    hint = ""
    if key is not None and any(k in record for k in _OWN_KEYS[other]):
        hint = "; this looks like %s: %s" % ("a run" if other == "run" else "qrels", _SWAPPED)
    return EvalError("%s: a JSONL %s line needs %s, got keys %r%s%s"
                     % (where, kind, _JSONL_FORMS[kind], keys, hint, ragas))


def _json_queries(inp, kind):
    """Yield (qid, checked value) of a JSON file {query_id: value, ...}."""
    text = inp.text()
    try:
        data = _json_loads(text, inp.name)
    except EvalError:
        _refuse_keyless_jsonl(text, inp.name, kind)
        raise
    if not isinstance(data, dict):
        raise EvalError("%s: the top level must be an object {query_id: ...}, got %s"
                        % (inp.name, type(data).__name__))
    rising = inp.rising = []
    for qid, value in data.items():
        try:
            checked = (_check_qrels_query(qid, value, inp.name) if kind == "qrels"
                       else _check_run_query(qid, value, inp.name, rising, inp.fields))
        except EvalError:
            known = _LABEL_KEYS + _RANKING_KEYS + tuple(k for _, keys, _ in _KEYLESS_ROWS
                                                        for k in keys)
            if ((qid in known or not isinstance(value, (dict, list)))
                    and any(key in data for key in known)):     # a lone JSONL line
                where = inp.name + (":1" if text.strip().count("\n") == 0 else "")
                raise _jsonl_form_error(where, kind, data) from None
            raise
        yield qid, checked


def _refuse_keyless_jsonl(text, name, kind):
    """When a file that is not JSON starts with a line that is a JSON object on
    its own, it is JSONL whose first line names no query: say what a line
    needs (rather than JSON's "Extra data")."""
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if line.strip():
            if not "".join(lines[number:]).strip():
                return          # one line: JSON's own error stands
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                return
            if isinstance(record, dict):
                raise _jsonl_form_error("%s:%d" % (name, number), kind, record)
            return


def _jsonl_records(inp):
    """Yield (where, record) per non-blank line of a JSONL file, keyed by the
    query field when one is given (see _keyed_line); of a _Rows, its records
    (rows already read: see score_rows)."""
    if isinstance(inp, _Rows):
        yield from inp.records()
        return
    query = inp.fields.query if inp.fields is not None else None
    for number, line in _lines(inp):
        if line.strip():
            where = "%s:%d" % (inp.name, number)
            record = _json_loads(_decode(line, where), inp.name, number)
            yield where, record if query is None else _keyed_line(record, query, where)


class _Rows:
    """Rows already read (dicts, as the lines of a JSONL file would be), read
    by the JSONL readers as a file's lines: ``name`` names them in errors
    ("run rows", "qrels rows"), each row by its place ("run row 3")."""

    def __init__(self, rows, name):
        self.rows, self.name, self.fields, self.rising, self.pending = rows, name, None, [], 0

    def records(self):
        for number, row in enumerate(self.rows, 1):
            yield "%s %d" % (self.name[:-1], number), row


def _keyed_line(record, query, where):
    """A JSONL line named by the value at the path ``query`` (--query-field:
    rows without an id, such as Ragas' or LlamaIndex's RetrieverEvaluator's,
    keyed by their question), as its "query_id".

    >>> _keyed_line({"query": "How long?", "expected_ids": ["n1"]}, ("query",), "e.jsonl:1")
    {'query': 'How long?', 'expected_ids': ['n1'], 'query_id': 'How long?'}
    """
    if not isinstance(record, dict):
        return record
    value = _at(record, query)
    if value is None:
        raise EvalError("%s: no %s on this line (--query-field names the query of every line), "
                        "got keys %r" % (where, ".".join(query), list(record)[:6]))
    return dict(record, query_id=_as_id(value, "%s: %s" % (where, ".".join(query))))


def _jsonl_qrels(inp, rows_label="id"):
    """(qrels, queries) of JSONL qrels: one query a line (see _test_set_line),
    one label a line {"query_id": ..., "doc": ..., "grade": ...}, or graded
    to-label rows (labelling what ``rows_label`` says, see _add_id_label).  ``queries``
    is None when no line says what its query is (see _query_info), else the
    _query_info of every query.

    >>> qrels, queries = _jsonl_qrels(_Input(io.StringIO(
    ...     '{"id": "q1", "relevant": ["d1"], "tags": ["faq"]}\\n'
    ...     '{"query_id": "q2", "answerable": false}\\n')))
    >>> qrels
    {'q1': {'d1': 1}, 'q2': {}}
    >>> queries
    {'q1': {'slices': {'tag': ['faq']}}, 'q2': {'slices': {}, 'answerable': False}}
    """
    qrels, queries, labels, described = {}, {}, {}, False
    by_id, pending = {}, []     # to-label rows: grades of chunk ids; rows not yet graded
    id_rows = False
    for where, record in _jsonl_records(inp):
        if _is_id_label_line(record):
            if _query_key(record, False) is None:
                raise EvalError('%s: a to-label row needs "query_id"' % where)
            if qrels or labels or pending and not id_rows:
                raise EvalError('%s: a to-label row after query or label lines: a file holds '
                                'one form (to-label rows, label lines or query lines; say '
                                'answerability in --queries)' % where)
            _add_id_label(by_id, pending, record, where, rows_label)
            id_rows = True
            continue
        if id_rows:
            raise EvalError('%s: expected a to-label row {"query_id": ..., "id": ..., "grade": '
                            '...} like the lines above' % where)
        if isinstance(record, dict) and "doc" in record and _LABEL_KEYS_SET.isdisjoint(record):
            key = _query_key(record, False)
            if qrels or key is None:
                raise EvalError('%s: a label line needs "query_id" (and the file one form: '
                                'label lines or query lines, not both)' % where)
            if record.get("grade", 0) is None:
                pending.append(where)
                continue
            qid = _as_id(record[key], "%s: %s" % (where, key))
            labels.setdefault(qid, []).append(_as_label(record, where))
            continue
        if labels:
            raise EvalError('%s: expected a label line {"query_id": ..., "doc": ..., "grade": '
                            '...} like the lines above' % where)
        qid, grades = _test_set_line(record, where)
        if qid in qrels:
            raise EvalError("%s: query %r appears on more than one line" % (where, qid))
        qrels[qid] = grades
        if not _DESCRIPTIVE.isdisjoint(record):     # a plain line describes nothing
            queries[qid] = _query_info(record, where)
            described = True
    inp.pending = len(pending)
    if by_id or labels:
        return by_id or labels, None
    if not qrels and not pending:
        raise EvalError("%s: no JSONL records found" % inp.name)
    if not described:
        return qrels, None
    return qrels, {qid: queries.get(qid) or {"slices": {}} for qid in qrels}


_jsonl_qrels_of = _jsonl_qrels      # hook: the accelerations install _jsonl_labels_bulk


# --- to-label rows read back ---------------------------------------------------------
#
# --to-label writes {"query_id", ["question",] "id", ["doc", "start", "end",]
# ["text",] "best_rank", "runs", "grade": null} (see _to_label_rows); with the
# grades filled in the file is qrels (the question and the text are not read).  A row labels one key of the qrels map: the chunk id when the
# measures count ids, its document (the highest grade of its rows) when they
# count documents or evidence, since one {key: grade} map read both ways would
# count the chunk as a relevant document, or the document as a relevant id
# (see _rows_label); never a span, since evidence spans are written by people.
# A row still null is skipped.

def _is_id_label_line(record):
    """True for a to-label row: an "id" and a "grade" beside the query, no labels."""
    return (isinstance(record, dict) and "id" in record and "grade" in record
            and _LABEL_KEYS_SET.isdisjoint(record) and _OTHER_FORMS.isdisjoint(
                key for key in record if key not in ("doc", "start", "end", "grade")))


def _rows_label(measures):
    """What a graded to-label row labels when these measures are scored: "id"
    (its chunk id) when every measure counts ids, "doc" (its document) when
    every one counts documents or evidence; None when both kinds are asked,
    where a row naming a document is an error (see _add_id_label).

    >>> _rows_label(resolve_measures("mrr", 5)), _rows_label(resolve_measures("mrr", 5, unit="doc"))
    ('id', 'doc')
    """
    views = {_UnitCall.of(m).view == "id" for m in measures}
    return "id" if views == {True} else "doc" if views == {False} else None


def _add_id_label(by_id, pending, record, where, rows_label="id"):
    """Put one to-label row into ``by_id`` {qid: {key: grade}}, its key the
    chunk id or, with ``rows_label`` "doc", the document it names (the
    highest grade of its rows; a row without one: its id); a row whose grade
    is still null goes to ``pending`` (its place).

    >>> rows = [{"query_id": "q", "id": "c1", "doc": "d", "grade": 2},
    ...         {"query_id": "q", "id": "c2", "doc": "d", "grade": 0},
    ...         {"query_id": "q", "id": "c3", "grade": None}]
    >>> for label in ("id", "doc"):
    ...     by_id, pending = {}, []
    ...     for n, row in enumerate(rows, 1):
    ...         _add_id_label(by_id, pending, row, "f:%d" % n, label)
    ...     print(by_id, pending)
    {'q': {'c1': 2, 'c2': 0}} ['f:3']
    {'q': {'d': 2}} ['f:3']
    """
    if record["grade"] is None:
        pending.append(where)
        return
    key = _query_key(record, False)
    qid = _as_id(record[key], "%s: %s" % (where, key))
    chunk_id = _as_id(record["id"], "%s: id" % where)
    grade = _as_grade(record["grade"], "%s: grade" % where)
    _span_fields(record, where)        # checked, not kept: a chunk's span is no evidence
    grades = by_id.setdefault(qid, {})
    doc = record.get("doc")
    if doc is not None and rows_label != "id":
        if rows_label is None:
            raise EvalError("%s: a to-label row naming a document labels the chunk id for "
                            "measures over ids and the document for unit=doc|evidence: score "
                            "the two kinds in separate runs" % where)
        doc = _as_id(doc, "%s: doc" % where)
        grades[doc] = max(grade, grades.get(doc, grade))
    elif grades.setdefault(chunk_id, grade) != grade:
        raise EvalError("%s: query %r: id %r is graded twice (%d and %d)"
                        % (where, qid, chunk_id, grades[chunk_id], grade))


def _test_set_line(record, where):
    """(qid, labels) of a JSONL qrels line that names one query (see _query_key).
    Its labels are under one of _LABEL_KEYS (see _test_set_labels); a line
    without labels is a query of the test set with none, {} (unscored: a
    question with no answer in the corpus, say)."""
    given = [key for key in _LABEL_KEYS if key in record] if isinstance(record, dict) else ()
    key = _query_key(record, bool(given)) if isinstance(record, dict) else None
    if key is None or len(given) > 1 or (not given and not _OTHER_FORMS.isdisjoint(record)):
        raise _jsonl_form_error(where, "qrels", record)
    qid = _as_id(record[key], "%s: %s" % (where, key))
    return qid, _test_set_labels(qid, given[0], record[given[0]], where) if given else {}


def _test_set_labels(qid, key, value, where):
    """The labels of one test-set line: an object {doc_id: grade}, a list of ids
    (grade 1 each, an id listed twice counting once: the only place where a
    plain list of ids is labels, not a ranking) or a list of label objects.

    >>> _test_set_labels("q1", "relevant", ["d1", 7, "d1"], "t:1")
    {'d1': 1, '7': 1}
    """
    if isinstance(value, list):
        if _all_str(value):
            return dict.fromkeys(value, 1)
        if value and all(isinstance(item, dict) for item in value):
            return _check_qrels_query(qid, value, where)
        return dict.fromkeys((_as_id(item, "%s: query %r: %s item %d" % (where, qid, key, i))
                              for i, item in enumerate(value, 1)), 1)
    if isinstance(value, dict):
        return _check_qrels_query(qid, value, where)
    raise EvalError("%s: query %r: %r must be an object {doc_id: grade} or a list of ids, got %s"
                    % (where, qid, key, _short_repr(value, 40)))


def _jsonl_run(inp):
    """Yield (qid, ranking) per line of a JSONL run: the query's id (see
    _query_key) and one of "docs" (a ranked list), "scores" (a score map) or
    Ragas' "retrieved_context_ids" (a ranked list)."""
    seen, rising = set(), []
    inp.rising = rising
    for where, record in _jsonl_records(inp):
        present = [f for f in _RANKING_KEYS if f in record] if isinstance(record, dict) else ()
        if present == [] and _abstained_line(record, where):
            present = ["docs"]
            record = dict(record, docs=[])
        key = ("query_id" if "query_id" in record else _query_key(record, True)) \
            if len(present) == 1 else None
        if key is None:
            raise _jsonl_form_error(where, "run", record)
        qid = _as_id(record[key], "%s: %s" % (where, key))
        if qid in seen:
            raise EvalError("%s: query %r appears on more than one line" % (where, qid))
        seen.add(qid)
        field = present[0]
        value = record[field]
        if field == "scores":
            if not isinstance(value, dict):
                raise EvalError("%s: \"scores\" must be an object {doc_id: score}" % where)
        elif not isinstance(value, list):
            raise EvalError("%s: %r must be a list of ids" % (where, field))
        if record.get("abstained") is not None and _abstained_line(record, where) and value:
            raise EvalError('%s: query %r: "abstained": true with a non-empty %s: an abstention '
                            "shows the model nothing; drop the ids or the flag" % (where, qid, field))
        yield qid, _check_run_query(qid, value, where, rising, inp.fields)
    if not seen:
        raise EvalError("%s: no JSONL records found" % inp.name)


def _abstained_line(record, where):
    """Whether a JSONL run line says the system abstained (``"abstained":
    true``, a router or system-level refusal): its ranking is empty."""
    flag = record.get("abstained")
    if flag is not None and type(flag) is not bool:
        raise EvalError('%s: "abstained" must be true or false, got %s'
                        % (where, _short_repr(flag, 40)))
    return bool(flag)


_QUERY_FIELDS = {"question": str, "answer": str, "answerable": bool, "valid_until": str}
_DESCRIPTIVE = frozenset(("slices", "tags") + tuple(_QUERY_FIELDS))
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")


def _query_info(record, where):
    """What a line says of its query: ``slices`` {field: [value, ...]} (sorted
    by field, values as text) from its "slices" object and its "tags" list (as
    the field "tag"), then "question", "answer" (text), "answerable" (true or
    false) and "valid_until" (a date, YYYY-MM-DD) as given.  Other fields are
    not read.

    >>> _query_info({"id": "q1", "slices": {"source": "synthetic", "hops": 2},
    ...              "tags": ["pricing"], "answerable": True, "x": 1}, "t:1")
    {'slices': {'hops': ['2'], 'source': ['synthetic'], 'tag': ['pricing']}, 'answerable': True}
    """
    slices = {}
    given = record.get("slices")
    if given is not None:
        if not isinstance(given, dict):
            raise EvalError('%s: "slices" must be an object {field: value, ...}, got %s'
                            % (where, _short_repr(given, 40)))
        for field, value in given.items():
            if not field or "=" in field:
                raise EvalError("%s: slice field %r must be non-empty text without '=' (a "
                                "slice is named field=value)" % (where, field))
            values = _slice_values(value, "%s: slices.%s" % (where, field)) \
                if value is not None else []
            if values:                  # [] or null: no value for this field
                slices[field] = values
    if record.get("tags") is not None:
        if "tag" in slices:
            raise EvalError('%s: give "tags" or slices.tag, not both (tags are the slice '
                            'field "tag")' % where)
        if not isinstance(record["tags"], list):
            raise EvalError('%s: "tags" must be a list, got %s'
                            % (where, _short_repr(record["tags"], 40)))
        tags = _slice_values(record["tags"], where + ": tags")
        if tags:                        # "tags": [] is no tag
            slices["tag"] = tags
    info = {"slices": dict(sorted(slices.items()))}
    for field, kind in _QUERY_FIELDS.items():
        value = record.get(field)
        if value is None:
            continue
        if type(value) is not kind:
            raise EvalError("%s: %r must be %s, got %s" % (
                where, field, "true or false" if kind is bool else "text", _short_repr(value, 40)))
        if field == "valid_until":
            _check_date(value, "%s: valid_until" % where)
        info[field] = value
    return info


def _slice_values(value, what):
    """The values of one slice field as text: a value or a list of them
    (strings, integers, true/false as written in JSON), each once.

    >>> _slice_values(["a", 2, True, "a"], "x"), _slice_values("b", "x")
    (['a', '2', 'true'], ['b'])
    """
    out = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, bool):
            text = "true" if item else "false"
        elif isinstance(item, (str, int)):
            text = str(item)
        else:
            raise EvalError("%s: a slice value must be text, an integer or true/false (or a "
                            "list of them), got %s" % (what, _short_repr(item, 40)))
        if not text:
            raise EvalError("%s: a slice value cannot be empty (leave the field out)" % what)
        if text not in out:
            out.append(text)
    return out


def _check_date(text, what):
    """Refuse ``text`` unless it is a date written YYYY-MM-DD."""
    import datetime
    try:
        if not _ISO_DATE.match(text):
            raise ValueError(text)
        datetime.date(int(text[:4]), int(text[5:7]), int(text[8:]))
    except ValueError:
        raise EvalError("%s must be a date YYYY-MM-DD, got %s" % (what, _short_repr(text, 40))) \
            from None


def _read_queries(source):
    """(queries, input info) of a queries file: JSONL, one query a line, named
    by "query_id" (else "qid", else "id"), what it says of its query read as
    _query_info reads it.

    >>> _read_queries(io.StringIO('{"query_id": "q1", "slices": {"risk": "high"}}\\n'))[0]
    {'q1': {'slices': {'risk': ['high']}}}
    """
    inp = _input_of(source)
    queries = {}
    for number, line in _lines(inp):
        if not line.strip():
            continue
        where = "%s:%d" % (inp.name, number)
        try:
            record = _json_loads(_decode(line, where), inp.name, number)
        except EvalError as exc:
            raise (exc if queries else EvalError(
                "%s (a queries file is JSONL: one object a line)" % exc)) from None
        needs = 'a queries line needs {"query_id": ..., "slices": {field: value, ...}, ' \
                '"tags": [...], ...}'
        if not isinstance(record, dict):
            raise _not_an_object(where, record, needs)
        if _query_key(record, True) is None:
            raise EvalError("%s: %s, got %s" % (where, needs, _short_repr(record, 60)))
        key = _query_key(record, True)
        qid = _as_id(record[key], "%s: %s" % (where, key))
        if qid in queries:
            raise EvalError("%s: query %r appears on more than one line" % (where, qid))
        queries[qid] = _query_info(record, where)
    if not queries:
        raise EvalError("%s: no queries found" % inp.name)
    return queries, inp.info("jsonl")


def load_queries(source):
    """Read what a queries file (JSONL, one query a line) says of each query:
    ``{qid: {"slices": {field: [value, ...]}, ...}}`` with "question",
    "answer", "answerable" and "valid_until" when given.  "tags" become the
    slice field "tag".

    >>> load_queries(io.StringIO('{"query_id": "q1", "tags": ["pricing"], "answerable": false}'))
    {'q1': {'slices': {'tag': ['pricing']}, 'answerable': False}}
    """
    return _read_queries(source)[0]


# --- a progress line on a terminal ------------------------------------------------

_PROGRESS = None            # the command line's _Progress while it may draw one, else None
_PROGRESS_EVERY = 1024      # queries between two looks at the clock
_progress_clock = time.monotonic    # the clock the line reads (tests drive their own)


class _Progress:
    """One line on a terminal's stderr while a run is scored: its queries
    scored, its bytes read of its size (a regular file) and the time elapsed,
    rewritten in place (carriage return), first after ``delay`` seconds and
    at most every ``interval``; end() erases it.  It is fed every
    _PROGRESS_EVERY queries (_counted) and every block a reader takes, and
    never exists in a pipe, a CI log, a library call or with --format json.

    >>> clock = iter([0.0, 0.5, 1.5, 1.6, 2.0]).__next__
    >>> out = io.StringIO()
    >>> p = _Progress(out, clock)
    >>> p.begin("run.trec", 4000000)
    >>> p.read_bytes(1000000); p.scored(1024); p.read_bytes(1000000); p.scored(2048)
    >>> p.end()
    >>> for part in out.getvalue().split("\\r")[1:]:   # drawn at 1.5 s, at 2.0 s, erased
    ...     print(repr(part))
    'rag-eval: run.trec: 1024 queries scored, 1.0 of 4.0 MB read, 1.5 s'
    'rag-eval: run.trec: 2048 queries scored, 2.0 of 4.0 MB read, 2.0 s'
    '                                                                  '
    ''
    """

    def __init__(self, stream, clock=None, delay=1.0, interval=0.25, columns=None):
        self.stream, self.clock, self.interval = stream, clock or _progress_clock, interval
        self.columns = columns  # the terminal's width (None: not cut)
        self.start = self.clock()
        self.due = self.start + delay
        self.width = 0          # of the line on screen; 0: none
        self.begin("", None)

    def begin(self, name, size, here=None):
        """A run: its name, its size in bytes (None: not known); ``here`` the
        bytes this process reads when forked workers read the rest."""
        self.name = os.path.basename(name)  # a line wider than the terminal wraps, and
        self.size, self.here, self.read, self.queries = size, here, 0, 0   # \r redraws its end

    def read_bytes(self, n):
        if self.name:           # the run's blocks, not the qrels' or a baseline's
            self.read += n
            self.tick()

    def scored(self, n):
        self.queries = n
        self.tick()

    def tick(self):
        now = self.clock()
        if now >= self.due:
            self.due = now + self.interval
            self.draw("rag-eval: %s: %s scored, %s%.1f s" % (
                self.name, _plural(self.queries, "query", "queries"), self.bytes_text(),
                now - self.start))

    def bytes_text(self):
        if self.here is not None:
            return "%.1f of %.1f MB read here (workers read the rest), " % (
                self.read / 1e6, self.here / 1e6)
        if self.size is not None:
            return "%.1f of %.1f MB read, " % (self.read / 1e6, self.size / 1e6)
        return ""

    def draw(self, text):
        if self.columns:    # a line as wide as the terminal wraps, and \r redraws only its end
            text = text[:self.columns - 1]
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def end(self):
        """Erase the line (before anything else is written to stderr)."""
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
        self.begin("", None)


def _progress_for(args, stderr):
    """The _Progress of a command-line run: only on a terminal, never for JSON."""
    stream = getattr(stderr, "stream", stderr)      # under _Tolerant
    try:
        tty = stream.isatty()
    except (AttributeError, OSError, ValueError):
        tty = False
    return (_Progress(stderr, columns=_terminal_columns(stream))
            if tty and args.format != "json" else None)


def _terminal_columns(stream):
    """The width of the terminal ``stream`` writes to ($COLUMNS first, then the
    terminal's size, else 80)."""
    import shutil
    columns = shutil.get_terminal_size().columns    # $COLUMNS, else stdout's terminal
    if "COLUMNS" not in os.environ:
        try:
            columns = os.get_terminal_size(stream.fileno()).columns or columns
        except (AttributeError, OSError, ValueError):
            pass
    return columns


# ===========================================================================
# src/06_inputs_trec_chunks_scores.py
#
# Input readers (2 of 2): TREC and BEIR files, chunk maps, score files.
#
# TREC qrels and runs (whitespace columns) and BEIR's TSV qrels; chunk maps
# (one JSON line a chunk: id, doc, start, end[, tokens, doc_sha256]); score
# files (a judge's per-query scores: JSON, JSONL or CSV); and the public
# readers load_qrels, load_run, load_chunks, load_scores.
#
# Uses: 01_head, 03_measures, 04_measure_names, 05_inputs.  Used by: ranking,
# evaluation, judge scores, baselines, reports, the command line,
# accelerations.
# ===========================================================================

def _trec_qrels_checked(inp):
    """TREC qrels lines ``query_id iteration doc_id grade``, read line by line
    (see _parse_qrels_line); blank and comment lines are skipped."""
    out = {}
    for number, line in _lines(inp):
        parts = line.split()
        if not parts or _is_comment(line):
            continue
        where = "%s:%d" % (inp.name, number)
        _check_not_comment_like(parts[0], where)
        try:
            qid, doc, grade = _parse_qrels_line(parts, where)
        except EvalError as exc:
            raise (exc if out else _first_line_error(exc, line, "qrels")) from None
        grades = out.setdefault(qid, {})
        if grades.get(doc, grade) != grade:
            raise EvalError("%s: query %r: %r judged twice with different grades (%d, %d)"
                            % (where, qid, doc, grades[doc], grade))
        grades[doc] = grade
    if not out:
        raise EvalError("%s: no qrels lines found" % inp.name)
    return out


_trec_qrels = _trec_qrels_checked   # hook: the accelerations install _trec_qrels_whole


def _parse_qrels_line(parts, where):
    """(qid, doc, grade) from the fields of one TREC qrels line, or an EvalError."""
    if len(parts) != 4:
        raise EvalError("%s: expected 4 fields (query_id iteration doc_id grade), got %d"
                        % (where, len(parts)))
    try:
        if b"_" in parts[3]:
            raise ValueError(parts[3])
        grade = int(parts[3])
    except ValueError:
        raise EvalError("%s: grade must be an integer, got %r"
                        % (where, parts[3].decode("utf-8", "replace"))) from None
    return _id_text(parts[0], where, "query id"), _id_text(parts[2], where, "doc id"), grade


def _id_text(raw, where, what):
    """An id field of a TREC line (bytes) as text.  The rule for ids in every
    reader: an id is text, so one that is not UTF-8 is refused where it is
    read, naming the line (no report, JSON file or --to-label row could
    write it); JSON, JSONL, BEIR, chunk maps and score files are decoded
    whole and refuse such bytes the same way (see _decode).

    >>> _id_text(b"caf\\xc3\\xa9", "r.trec:3", "doc id")
    'café'
    >>> _id_text(b"x\\xff", "r.trec:3", "doc id")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: r.trec:3: doc id b'x\\xff' is not UTF-8 text (byte 0xff)
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvalError("%s: %s %s is not UTF-8 text (byte %#x)"
                        % (where, what, _short_repr(raw, 60), raw[exc.start])) from None


_NOT_READ = ("accepted formats are JSON, JSONL, TREC (white-space columns) and, for qrels, "
             "BEIR's TSV (with its header line query-id<TAB>corpus-id<TAB>score)")


def _first_line_error(exc, line, kind):
    """The error of a bad first TREC line, saying what to do when the line
    looks like the other kind of file, or like CSV / TSV."""
    fields = len(line.split())
    if (kind == "qrels" and fields >= 6) or (kind == "run" and fields == 4):
        other = "a TREC run" if kind == "qrels" else "TREC qrels"
        return EvalError("%s; this looks like %s: %s" % (exc, other, _SWAPPED))
    if kind == "qrels" and line.count(b"\t") == 2 and b"," not in line:
        return EvalError("%s; this looks like BEIR's qrels TSV without its header line "
                         "query-id<TAB>corpus-id<TAB>score: add it" % exc)
    if b"," in line or b"\t" in line:
        return EvalError("%s; this looks like CSV or TSV, which is not read: %s"
                         % (exc, _NOT_READ))
    return exc


def _is_comment(line):
    """A TREC line whose column 0 is "#" is a comment (trec_eval 10 skips them)."""
    return line[:1] == b"#"


def _check_not_comment_like(qid, where):
    """A query id cannot start with "#": indented, the line would read as data in
    one tool and as a comment in another."""
    if qid[:1] == b"#":
        raise EvalError("%s: a query id cannot start with '#' (got %r): a line whose "
                        "column 0 is '#' is a comment" % (where, qid.decode("utf-8", "replace")))


def _beir_qrels(inp):
    """BEIR's qrels TSV: the header line ``query-id<TAB>corpus-id<TAB>score``,
    then a label a line ``query_id<TAB>doc_id<TAB>grade``, read as BEIR's
    loader reads it (csv, tab-separated, minimal quoting); blank lines are
    skipped.

    >>> _beir_qrels(_Input(io.StringIO("query-id\\tcorpus-id\\tscore\\n1\\t31715818\\t1\\n")))
    {'1': {'31715818': 1}}
    """
    import csv
    out, header = {}, None
    reader = csv.reader(io.StringIO(inp.text()), delimiter="\t", quoting=csv.QUOTE_MINIMAL)
    try:
        for row in reader:
            where = "%s:%d" % (inp.name, reader.line_num)
            if not row:
                continue
            if header is None:
                header = row
                if row != ["query-id", "corpus-id", "score"]:
                    raise EvalError("%s: expected BEIR's header line query-id<TAB>corpus-id<TAB>"
                                    "score, got %s" % (where, _short_repr("\t".join(row), 60)))
                continue
            if len(row) != 3:
                raise EvalError("%s: expected 3 tab-separated fields (query-id corpus-id "
                                "score), got %d" % (where, len(row)))
            qid, doc, grade = row[0], row[1], _beir_grade(row[2], where)
            if not qid or not doc:
                raise EvalError("%s: empty %s" % (where, "corpus-id" if qid else "query-id"))
            grades = out.setdefault(qid, {})
            if grades.get(doc, grade) != grade:
                raise EvalError("%s: query %r: %r judged twice with different grades (%d, %d)"
                                % (where, qid, doc, grades[doc], grade))
            grades[doc] = grade
    except csv.Error as exc:
        raise EvalError("%s:%d: not BEIR's TSV: %s" % (inp.name, reader.line_num, exc)) from None
    if not out:
        raise EvalError("%s: no qrels lines found under the BEIR header" % inp.name)
    return out


def _beir_grade(text, where):
    """The grade of a BEIR qrels line: an integer, as BEIR's int() reads it
    (``1_0`` excepted, as everywhere)."""
    try:
        if "_" in text:
            raise ValueError(text)
        return int(text)
    except ValueError:
        raise EvalError("%s: score must be an integer grade, got %s"
                        % (where, _short_repr(text, 40))) from None


# --- TREC runs -----------------------------------------------------------------
#
# A run line is ``query_id Q0 doc_id rank score tag`` (see _parse_run_line).
# The rank column is not read: the order comes from the scores (see _rank).
# _trec_run_queries_plain below is the definition; the accelerations read the same
# queries block by block (_trec_run_queries_fast).

class _Scored(NamedTuple):
    """One query of a TREC run: doc ids and their scores, in file order (text
    and floats here; the accelerations' reader keeps the bytes of both)."""
    docs: list
    scores: list


class _NotGrouped(Exception):
    """The lines of one query are not contiguous in a TREC run."""


def _parse_run_line(line, where):
    """(qid, doc, score) from one TREC run line (bytes), or an EvalError:
    the ids stay bytes, checked to be UTF-8 (see _id_text).  Fields after
    the run tag are ignored, as trec_eval documents."""
    parts = line.split()
    if parts:
        _check_not_comment_like(parts[0], where)
    if len(parts) < 6:
        raise EvalError("%s: expected 6 fields (query_id Q0 doc_id rank score tag), got %d"
                        % (where, len(parts)))
    try:
        score = math.nan if b"_" in parts[4] else float(parts[4])
    except ValueError:
        score = math.nan
    if not math.isfinite(score):
        raise EvalError("%s: score must be a finite number, got %r"
                        % (where, parts[4].decode("utf-8", "replace")))
    if not line.isascii():      # the ids must be UTF-8 (see _id_text); they stay bytes here
        _id_text(parts[0], where, "query id")
        _id_text(parts[2], where, "doc id")
    return parts[0], parts[2], score


def _trec_run_queries_plain(inp, grouped=True):
    """Yield (qid, _Scored) per query of a TREC run, reading line by line: the
    definition of a TREC run.

    Blank lines and comment lines (see _is_comment) are skipped; any other
    line must read as _parse_run_line says, and an error on the file's first
    run line says what the file looks like instead (see _first_line_error).
    A query's ids and scores are kept in file order; ranking them is _rank's
    job.  With ``grouped``, the lines of each query must be contiguous (as
    every tool writes them: memory follows one query) and _NotGrouped is
    raised when a query comes back; without, every query is gathered first,
    in order of first appearance.

    >>> list(_trec_run_queries_plain(_Input(io.BytesIO(b"q1 Q0 a 1 0.5 t\\nq1 Q0 b 2 0.7 t\\n"))))
    [('q1', _Scored(docs=['a', 'b'], scores=[0.5, 0.7]))]
    """
    queries = {}            # raw query id -> _Scored, in order of first appearance
    current, first = None, True
    for number, line in _lines(inp):
        if not line.strip() or _is_comment(line):
            continue
        try:
            qid, doc, score = _parse_run_line(line, "%s:%d" % (inp.name, number))
        except EvalError as exc:
            raise (_first_line_error(exc, line, "run") if first else exc) from None
        first = False
        if qid != current:
            if grouped and current is not None:
                yield _decode_qid(current), queries.pop(current)
                queries[current] = None         # finished: it may not come back
            if grouped and qid in queries:
                raise _NotGrouped()
            current = qid
            if qid not in queries:
                queries[qid] = _Scored([], [])
        queries[qid].docs.append(_doc_text(doc))
        queries[qid].scores.append(score)
    if current is None:
        raise EvalError("%s: no run lines found" % inp.name)
    for qid, scored in queries.items():
        if scored is not None:
            yield _decode_qid(qid), scored


_trec_run_queries = _trec_run_queries_plain     # hook: the accelerations install _trec_run_queries_fast


def _doc_text(doc):
    """A doc id of a TREC run as text: the fast reader keeps ids as bytes,
    checked to be UTF-8 where they were read (see _id_text)."""
    return doc if isinstance(doc, str) else doc.decode("utf-8")


def _decode_qid(qid):
    """A query id of a TREC run (bytes, checked where it was read: see
    _id_text) as text."""
    return qid.decode("utf-8")


def _run_queries(inp, fmt, grouped=True):
    if fmt == "trec":
        return _trec_run_queries(inp, grouped)
    return _json_queries(inp, "run") if fmt == "json" else _jsonl_run(inp)


def _open_input(source, format, kind, fields=None):
    """(input, format) of a qrels or run source, read with ``fields`` (a
    _Fields, or None) and its format detected unless ``format`` is given."""
    inp = _input_of(source)
    if fields is not None:
        inp.fields, inp.fields_info = fields, fields.info(kind)
    fmt = format or _detect_format(inp, kind)
    formats = QRELS_FORMATS if kind == "qrels" else FORMATS
    if fmt not in formats:
        if format is None:      # detected: BEIR's header, in a run
            raise EvalError("%s: starts with BEIR's qrels header line (query-id corpus-id "
                            "score); this looks like qrels: %s" % (inp.name, _SWAPPED))
        raise EvalError("%s: unknown %s format %r (choose from %s)"
                        % (inp.name, kind, fmt, ", ".join(formats)))
    return inp, fmt


def _read_qrels(source, format=None, notes=None, rows_label="id", fields=None):
    """(qrels, input info, queries) from any supported source: ``queries`` is
    what a test-set JSONL file says of each query (see _jsonl_qrels), None
    when it says nothing (and from every other format).  A note on rows left
    without a grade is added to the list ``notes`` when given; graded
    to-label rows label what ``rows_label`` says (see _rows_label); ``fields``
    may name the query field of JSONL lines (see _keyed_line)."""
    inp, fmt = _open_input(source, format, "qrels", fields)
    queries = None
    if fmt == "trec":
        qrels = _trec_qrels(inp)
    elif fmt == "beir":
        qrels = _beir_qrels(inp)
    elif fmt == "json":
        qrels = dict(_json_queries(inp, "qrels"))
    else:
        qrels, queries = _jsonl_qrels_of(inp, rows_label)
        if getattr(inp, "pending", 0) and notes is not None:
            notes.append(_pending_note(inp.name, inp.pending))
    return qrels, inp.info(fmt), queries


def _pending_note(name, count):
    """The warning on the ``count`` label rows of ``name`` still without a
    grade (to-label rows not labelled yet: skipped).

    >>> _pending_note("labels.jsonl", 2)
    'labels.jsonl: skipped 2 rows with "grade": null (not labelled yet)'
    """
    return '%s: skipped %s with "grade": null (not labelled yet)' % (
        name, _plural(count, "row", "rows"))


# --- chunk maps ------------------------------------------------------------------
#
# One chunk a line, written by the indexer: {"id": "c17", "doc": "handbook.md",
# "start": 1100, "end": 1600} (start/end optional; optional "tokens" and
# "doc_sha256").  A million lines are parsed as one JSON array (one C call);
# only a file that fails is read line by line, to name the line.

class _ChunkMap(dict):
    """id -> Chunk; ``versions`` maps a document to its doc_sha256."""
    versions: dict = {}
    _documents = None

    def documents(self):
        """The documents that have a chunk (worked out once: the map is not
        changed once read).

        >>> sorted(_ChunkMap(a1=Chunk("A"), a2=Chunk("A"), b1=Chunk("B")).documents())
        ['A', 'B']
        """
        if self._documents is None:
            self._documents = frozenset(map(operator.attrgetter("doc"), self.values()))
        return self._documents


def _chunk_records(text, name):
    """The records of a chunk-map file's text, each with its line number."""
    numbered = [(n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()]
    if not numbered:
        raise EvalError("%s: empty chunk map" % name)
    try:
        joined = "[%s]" % ",\n".join(line for _, line in numbered)   # (see _chunk_map_bulk)
        records = json.loads(joined, parse_constant=_reject_constant)
        if (len(records) != len(numbered) or not all(type(r) is dict for r in records)
                or sum(map(len, records)) != _key_bound(joined)
                or _SURROGATE_ESCAPE.search(joined)):
            raise ValueError("check line by line")
    except (ValueError, EvalError, RecursionError):
        records = [_json_loads(line, name, n) for n, line in numbered]
    return [(n, r) for (n, _), r in zip(numbered, records)]


_CHUNK_FORM = '{"id": ..., "doc": ..., "start": ..., "end": ...}'


def _chunk_map(records, name):
    """A _ChunkMap from (line number or None, record) pairs."""
    chunks, versions, with_tokens, first_without = _ChunkMap(), {}, 0, None
    for number, record in records:
        what = "%s:%d" % (name, number) if number else "%s: chunk %s" % (name, _short_repr(
            record.get("id") if isinstance(record, dict) else record, 40))
        if number and not isinstance(record, dict):
            raise _not_an_object(what, record, "a chunk-map line is " + _CHUNK_FORM)
        if not isinstance(record, dict) or "id" not in record or "doc" not in record:
            raise EvalError("%s: a chunk-map line must look like %s, got %s"
                            % (what, _CHUNK_FORM, _short_repr(record, 60)))
        chunk_id = _as_id(record["id"], what + ": id")
        chunk = _as_chunk(record, what)
        if chunks.setdefault(chunk_id, chunk) != chunk:
            raise EvalError("%s: chunk %r is mapped twice with different fields (%s and %s)"
                            % (what, chunk_id, _chunk_text(chunks[chunk_id]), _chunk_text(chunk)))
        if chunk.tokens is None:
            first_without = first_without or what
        else:
            with_tokens += 1
        if chunk.doc_sha256 is not None:
            if versions.setdefault(chunk.doc, chunk.doc_sha256) != chunk.doc_sha256:
                raise EvalError("%s: document %r has two doc_sha256 in the chunk map (%s... and "
                                "%s...)" % (what, chunk.doc, versions[chunk.doc][:12],
                                            chunk.doc_sha256[:12]))
    if with_tokens and first_without:
        raise EvalError("%s: tokens are given for some chunks and not others (none at %s): "
                        "give them for all or none" % (name, first_without))
    chunks.versions = versions
    return chunks


def _chunk_text(chunk):
    return "%s [%s, %s)" % (chunk.doc, chunk.start, chunk.end) if chunk.start is not None \
        else chunk.doc


@_gc_paused
def _read_chunks(source):
    """(_ChunkMap, input info) of a chunk-map file (JSONL, gzip or not): a
    million records and no cycle, so the collector is paused (see _gc_paused)."""
    inp = _input_of(source)
    chunks = _chunk_map_of(inp.text(), inp.name)
    return chunks, inp.info("jsonl")


def _chunk_map_plain(text, name):
    """The _ChunkMap of a chunk-map file's text, record by record."""
    return _chunk_map(_chunk_records(text, name), name)


_chunk_map_of = _chunk_map_plain    # hook: the accelerations install _chunk_map_bulk


def _chunk_texts(source, ids):
    """{id: text} of the chunk-map lines of ``ids`` that give a "text" (a
    string): what --to-label shows the person who grades a chunk.  The map
    is read again only for this; scoring never keeps the texts.

    >>> _chunk_texts(io.StringIO('{"id": "c1", "doc": "a", "text": "Refunds take 5 days."}\\n'
    ...                          '{"id": "c2", "doc": "a"}\\n'), {"c1", "c2", "c3"})
    {'c1': 'Refunds take 5 days.'}
    """
    inp = _input_of(source)
    out = {}
    for number, record in _chunk_records(inp.text(), inp.name):   # read and checked before
        if record.get("text") is None or _as_id(record["id"], "id") not in ids:
            continue
        if not isinstance(record["text"], str):
            raise EvalError("%s:%d: text must be a string (the chunk's text), got %s"
                            % (inp.name, number, _short_repr(record["text"], 40)))
        out.setdefault(_as_id(record["id"], "id"), record["text"])
    return out


def load_chunks(source):
    """Read a chunk map (JSONL, one chunk a line) into ``{id: Chunk}``.

    >>> load_chunks(io.StringIO('{"id": "c1", "doc": "a.md", "start": 0, "end": 120}\\n'))
    {'c1': Chunk(doc='a.md', start=0, end=120, tokens=None, doc_sha256=None)}
    """
    return dict(_read_chunks(source)[0])


def _library_chunks(chunks):
    """(_ChunkMap or None, input info or None) of the ``chunks=`` of evaluate():
    a chunk-map file (a path, ``-`` or a file object, read as ``--chunks``
    reads it: its info, path and sha256, goes into the report's inputs), a
    list of records, {id: record} or a _ChunkMap already read."""
    if isinstance(chunks, (str, bytes, os.PathLike)) or hasattr(chunks, "read"):
        return _read_chunks(chunks)
    if chunks is None or isinstance(chunks, _ChunkMap):
        return chunks, None
    if isinstance(chunks, dict):
        chunks = [dict(record._asdict() if isinstance(record, Chunk) else record, id=chunk_id)
                  if isinstance(record, (dict, Chunk)) else record
                  for chunk_id, record in chunks.items()]
    if not isinstance(chunks, (list, tuple)):
        raise EvalError("chunks must be a chunk-map file, a list of records %s or a dict "
                        "{id: record}, got %s" % (_CHUNK_FORM, type(chunks).__name__))
    return _chunk_map([(None, record) for record in chunks], "chunks"), None


def load_qrels(source, *, format=None, fields=None):
    """Read qrels ``{qid: {doc_id: grade}}`` from a path, ``-`` (stdin) or a file object.

    JSON, JSONL (also a test set: one query a line), TREC and BEIR's TSV,
    gzip or not, detected from the content unless ``format`` is given.
    Grades must be integers; a test set's plain list of ids grades each 1.
    ``fields={"query": "query"}`` keys JSONL lines by that field (rows without
    an id: LlamaIndex's RetrieverEvaluator rows, Ragas' with "user_input").
    To-label rows still ``"grade": null`` are left out, and a plain dict has
    no room to say so: :func:`evaluate_files` and the command line warn of them.

    >>> load_qrels(io.StringIO('q1 0 d1 2\\nq1 0 d2 0\\n'))
    {'q1': {'d1': 2, 'd2': 0}}
    >>> load_qrels(io.StringIO('{"query_id": "q1", "relevant": ["d1", "d2"], "tags": ["faq"]}'))
    {'q1': {'d1': 1, 'd2': 1}}
    """
    return _read_qrels(source, format, fields=_checked_fields(fields))[0]


def load_run(source, *, format=None, fields=None):
    """Read a whole run: ``{qid: [ids] | {id: score}}``; TREC runs give score maps,
    a repeated (query, id) line keeping its best score.  For large runs prefer
    :func:`evaluate_files`, which streams.  ``fields`` names where result
    objects give their id, document, start and end, and where JSONL lines
    name their query (``{"id": "metadata.chunk_id", "query": "query"}``; see
    :func:`evaluate`).

    >>> load_run(io.StringIO('{"q1": ["d2", "d1"]}'))
    {'q1': ['d2', 'd1']}
    >>> load_run(io.StringIO('q1 Q0 a 1 0.5 x\\nq1 Q0 a 2 0.7 x\\n'))
    {'q1': {'a': 0.7}}
    """
    inp, fmt = _open_input(source, format, "run", _checked_fields(fields))
    run = {}
    for qid, ranking in _run_queries(inp, fmt, grouped=False):
        if isinstance(ranking, _Scored):
            best = {}
            for doc, score in zip(ranking.docs, map(float, ranking.scores)):
                doc = _doc_text(doc)
                best[doc] = max(score, best.get(doc, score))
            ranking = best
        run[qid] = ranking
    return run


# --- score files: per-query scores made elsewhere (a judge) ----------------------
#
# One query a line (JSONL) or a row (CSV with a header row, as a data frame's
# to_csv(index=False) writes it): {"query_id": "q1", "faithfulness": 0.83,
# "refused": false, "answer_relevancy": [0.8, 0.9, 0.85]}.  A list holds
# repeated judge runs (in CSV: a JSON array in the cell); a query's value is
# the mean of its runs.  true and false are 1 and 0, so a boolean field is a
# rate (with repeated runs, each query's value is a fraction).  Each value v
# is mapped from its field's range [lo, hi] (default [0, 1]) onto [0, 1] as
# (v - lo) / (hi - lo): hi < lo declares "lower is better".  Which keys are
# fields: those named (``fields=``, ``--metrics``), else every key whose
# values are all numbers or booleans (or lists of them).  The id column and
# "input_sha256" (the hash of what was judged, read by --drift) are never
# fields.  A missing value (key absent, null, empty cell, empty list) is an
# error unless allowed, and then the query is listed as unscored for that
# field: never dropped silently.

SCORE_ID_COLUMN = "query_id"
DEFAULT_MAX_DRIFT = 0.02       # --max-drift: the judge moved when a mean |change| exceeds it
SCORE_RANGE = (0.0, 1.0)       # a field's range unless declared
_RESERVED_SCORE_KEYS = frozenset(("input_sha256",))


class Scores(NamedTuple):
    """A score file read by :func:`load_scores`, every value checked and
    mapped onto [0, 1].

    ``fields``        the score fields: in the order named, else first seen;
    ``runs``          ``{field: {qid: (run, ...)}}``, each query's judge runs
                      mapped onto [0, 1] (one run for a plain value), in file
                      order; a query unscored for a field is absent from it;
    ``unscored``      ``{field: (qid, ...)}``, the queries without a value for
                      the field (only with ``allow_missing``), in file order;
    ``queries``       every query id, in file order;
    ``kinds``         ``{field: "boolean" | "integer" | "number"}``, what the
                      values were before mapping (integer: whole numbers only);
    ``ranges``        ``{field: (lo, hi)}``, each field's range (default (0.0, 1.0));
    ``input_sha256``  ``{qid: text}``, for the lines that give one;
    ``info``          ``{"path", "sha256", "format", "fields"}``, as reports
                      record an input.

    >>> s = load_scores(io.StringIO('{"query_id": "q1", "f": [0.5, 1]}\\n'
    ...                             '{"query_id": "q2", "f": 0.25}\\n'))
    >>> s.runs, s.values("f")
    ({'f': {'q1': (0.5, 1.0), 'q2': (0.25,)}}, {'q1': 0.75, 'q2': 0.25})
    """
    fields: Tuple[str, ...]
    runs: Dict[str, Dict[str, Tuple[float, ...]]]
    unscored: Dict[str, Tuple[str, ...]]
    queries: Tuple[str, ...]
    kinds: Dict[str, str]
    ranges: Dict[str, Tuple[float, float]]
    input_sha256: Dict[str, str]
    info: dict

    def values(self, field):
        """``{qid: value}`` of one field: the mean of each query's runs."""
        return {qid: _run_mean(runs) for qid, runs in self.runs[field].items()}


def _run_mean(runs):
    """A query's value: the mean of its judge runs.

    >>> _run_mean((0.8, 0.9, 0.85)), _run_mean((1.0, 0.0, 1.0))
    (0.85, 0.6666666666666666)
    """
    return math.fsum(runs) / len(runs)


def _score_format(inp):
    """'jsonl' when the first non-blank character opens an object, else 'csv'."""
    head = b""
    for block in inp.blocks():
        head += block
        if head.strip() or len(head) >= _DETECT_BYTES:
            break
    first = head.lstrip()[:1]
    if not first:
        raise EvalError("%s: empty score file" % inp.name)
    if first == b"[":
        raise EvalError("%s: a JSON array; a score file is JSONL (one query a line) or CSV "
                        "with a header row" % inp.name)
    return "jsonl" if first == b"{" else "csv"


def _score_json(text, where, unit="line"):
    """Parse JSON text of a score file (a line, or a CSV cell: ``unit``).  NaN
    and Infinity are read (as the floats) so that the check of the value can
    name its query and field."""
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicate_keys)
        if _SURROGATE_ESCAPE.search(text):
            _check_encodable(value)
        return value
    except EvalError as exc:
        raise EvalError("%s: %s" % (where, exc)) from None
    except json.JSONDecodeError as exc:
        if _two_values(text, exc):
            raise EvalError("%s: %s" % (where, _TWO_VALUES[unit])) from None
        raise EvalError("%s: invalid JSON: %s" % (where, _json_error_text(text, exc))) from None
    except (ValueError, RecursionError) as exc:
        raise EvalError("%s: invalid JSON: %s" % (where, exc)) from None


_SCORE_LINE = 'a score line is {"query_id": ..., FIELD: score, ...}'


def _jsonl_score_records(inp):
    """Yield (where, record) per non-blank line of a JSONL score file."""
    for number, line in _lines(inp):
        if line.strip():
            where = "%s:%d" % (inp.name, number)
            record = _score_json(_decode(line, where), where)
            if not isinstance(record, dict):
                raise _not_an_object(where, record, _SCORE_LINE)
            yield where, record


def _csv_cell(text, where):
    """A CSV cell as a JSONL value: None (empty), a bool (true or false in any
    case: pandas writes True), a float (ASCII float() text, nan and inf
    included, refused later with their field), or else the text itself.  A
    cell opening with ``[`` stays text here: it is read as a JSON array
    (repeated runs) only in a score field (_json_cells), since pandas writes
    a text list such as retrieved_contexts as ``['ctx a', 'ctx b']``.

    >>> [_csv_cell(t, "x") for t in ("", "True", "0.5", "[1, 0.5]", "nan", "1_0", "n/a")]
    [None, True, 0.5, '[1, 0.5]', nan, '1_0', 'n/a']
    """
    text = text.strip()
    if not text:
        return None
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return _number(text, float)
    except ValueError:
        return text


def _csv_score_records(inp, text_columns=()):
    """Yield (where, record) per data row of a CSV score file with a header
    row; a column without a name (pandas' index) is not read, and the cells
    of ``text_columns`` (the id, input_sha256) stay text."""
    import csv
    reader = csv.reader(io.StringIO(inp.text(), newline=""), strict=True)
    header = None
    try:
        for row in reader:
            where = "%s:%d" % (inp.name, reader.line_num)
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header = [cell.strip() for cell in row]
                named = [h for h in header if h]
                for h in named:
                    if named.count(h) > 1:
                        raise EvalError("%s: the header names the column %r twice" % (where, h))
                continue
            if len(row) != len(header):
                raise EvalError("%s: %d cells, but the header has %d columns"
                                % (where, len(row), len(header)))
            yield where, {h: (cell.strip() or None) if h in text_columns
                          else _csv_cell(cell, where) for h, cell in zip(header, row) if h}
    except csv.Error as exc:
        raise EvalError("%s:%d: bad CSV: %s" % (inp.name, reader.line_num, exc)) from None


def _is_text_value(value):
    """True for a value that is text and not a number: a string that float()
    cannot read even without its spaces and control characters, an object,
    or a non-empty list of such values.  A key whose values are all text
    (nulls and empty lists aside) is not a score field (see _score_fields).

    >>> [_is_text_value(v) for v in ("why?", "0.8", "0.5\\x00", ["a", "b"], [0.5], None, [])]
    [True, False, False, True, False, False, False]
    """
    import unicodedata
    if isinstance(value, str):
        if len(value) > 64:         # a long text (a context, an answer): no number
            return True
        bare = "".join(ch for ch in value if not unicodedata.category(ch)[0] in "CZ")
        try:
            float(bare)
        except ValueError:
            return bare.lower() not in ("true", "false", "null", "none")
        return False
    if isinstance(value, list):
        return bool(value) and all(_is_text_value(v) for v in value)
    return isinstance(value, dict)


def _cell_value(cell):
    """What a CSV cell holds, as a JSONL value would: a cell opening with
    ``[`` is the JSON array it holds (``[]`` an empty list, nothing retrieved;
    ``[1, 0.5]`` repeated runs), and text when it is not JSON (pandas'
    ``['ctx a', 'ctx b']``); any other cell is as _csv_cell read it.

    >>> _cell_value("[]"), _cell_value("[1, 0.5]"), _cell_value("['a', 'b']"), _cell_value(0.5)
    ([], [1, 0.5], "['a', 'b']", 0.5)
    """
    if isinstance(cell, str) and cell[:1] == "[":
        try:
            return json.loads(cell)
        except (ValueError, RecursionError):
            return cell
    return cell


def _is_empty_value(value):
    """None or an empty list: a value that decides nothing about its key."""
    return value is None or value == []


def _checked_ranges(ranges):
    """``{field: (lo, hi)}`` as floats: finite, lo != hi.

    >>> _checked_ranges({"relevance": (1, 5), "harm": ("1", 0)})
    {'relevance': (1.0, 5.0), 'harm': (1.0, 0.0)}
    """
    if ranges is None:
        return {}
    if not isinstance(ranges, dict):
        raise EvalError("ranges must be a dict {field: (lo, hi)}, got %s" % _short_repr(ranges))
    out = {}
    for field, pair in ranges.items():
        _checked_field_name(field, "score range:")
        try:
            lo, hi = (_number(v, float) if isinstance(v, str) else float(v) for v in pair
                      if not isinstance(v, bool))
        except (TypeError, ValueError):
            lo = hi = math.nan
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi:
            raise EvalError("the score range of %s must be two different finite numbers "
                            "LO:HI, got %s" % (field, _short_repr(pair)))
        out[field] = (lo + 0.0, hi + 0.0)
    return out


def _score_fields(records, id_column, fields, name, csv_cells=False):
    """(fields, mixed): the score fields of a file's records, and those of
    them that hold numbers and text (see _refuse_numbers_and_text).

    ``fields`` are checked (each a key of some record), else the fields are
    every key but the id column and input_sha256 unless all its values are
    text that is not a number (see _is_text_value; nulls and empty lists
    aside; CSV cells as _cell_value reads them), in order of first sight.  So
    a field of nulls, of quoted numbers or of a failed judge is a field, and
    its values are refused by _query_runs naming the line, rather than dropped
    in silence.  A file with no score field is refused.  ``mixed`` maps such a
    field to the line of its first number (a CSV cell opening with ``[`` that
    is not JSON is no text there: a broken array of runs, refused as such)."""
    keys = {}       # key -> [first line with no text, with text, with a CSV "[" cell not JSON]
    for where, record in records:
        for key, value in record.items():
            if key != id_column and key not in _RESERVED_SCORE_KEYS:
                seen = keys.setdefault(key, [None, None, None])
                if csv_cells:
                    value = _cell_value(value)
                if not _is_empty_value(value):
                    kind = (0 if not _is_text_value(value) else
                            2 if csv_cells and isinstance(value, str) and value[:1] == "[" else 1)
                    seen[kind] = seen[kind] or where
    if fields is not None:
        for field in fields:
            if field == id_column or field in _RESERVED_SCORE_KEYS:
                raise EvalError("%s: %r is the id column or reserved, not a score field"
                                % (name, field))
            if field not in keys:
                raise EvalError("%s: no field %r (fields: %s)"
                                % (name, field, ", ".join(map(repr, keys)) or "none"))
        return tuple(fields), {}
    found = tuple(key for key, (number, text, cell) in keys.items()
                  if number or not (text or cell))
    if not found:
        raise EvalError("%s: no score field: every column but the id is text (a score field "
                        "holds numbers or true/false)" % name)
    for field in found:
        _checked_field_name(field, "%s: the field" % name)
    return found, {field: keys[field][0] for field in found if keys[field][1]}


def _refuse_numbers_and_text(where, qid, field, value, number):
    """The error of a key that holds numbers on one line (``number`` names
    the first) and text on another, at the text's: a text column with a
    numeric answer, or a score field with a bad value; which one, only the
    user knows.

    >>> _refuse_numbers_and_text("s.csv:3", "q2", "reference", "fourteen", "s.csv:2")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: s.csv:3: query 'q2', field reference: 'fourteen' is not a score (a number, true/false, or a list of them), and line 2 holds a number: a key holds numbers or text, not both (a text column? name the score fields with --metrics)
    """
    raise EvalError("%s: query %r, field %s: %s is not a score (a number, true/false, or a "
                    "list of them), and line %s holds a number: a key holds numbers or text, "
                    "not both (a text column? name the score fields with --metrics)"
                    % (where, qid, field, _short_repr(value, 40), number.rpartition(":")[2]))


def _number_text(x):
    """A number as a range is written: ``1``, ``0.5``."""
    return "%d" % x if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def _query_runs(value, field, lo, hi, where):
    """The runs of one query's value for ``field``, mapped from [lo, hi] onto
    [0, 1]; () when missing (null, an empty list or a list of nulls).  ``where`` names the
    line and query.

    >>> _query_runs([2, 5, 4], "f", 1.0, 5.0, "x"), _query_runs(True, "f", 1.0, 0.0, "x")
    ((0.25, 1.0, 0.75), (0.0,))
    >>> _query_runs(1.5, "f", 0.0, 1.0, "x.jsonl:3: query 'q2'")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: x.jsonl:3: query 'q2', field f: 1.5 is outside the range [0, 1] (declare another with --score-range f=LO:HI)
    """
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if all(item is None for item in items):     # [null]: every run failed, a missing score
        return ()
    if len({isinstance(item, bool) for item in items if isinstance(item, (int, float))}) > 1:
        raise EvalError("%s, field %s: true/false mixed with numbers; a field holds "
                        "true/false only or numbers only" % (where, field))
    runs = []
    for i, item in enumerate(items):
        at = "%s, field %s%s" % (where, field, ", run %d" % (i + 1) if value is items else "")
        if item is None and value is items:
            raise EvalError("%s: null, a failed run among scored ones: drop the failed run "
                            "from the list (a null or empty value is a missing score)" % at)
        if not isinstance(item, (int, float)):
            raise EvalError("%s: %s is not a score (a number, true/false, or a list of them)"
                            % (at, _short_repr(item, 40)))
        try:
            v = float(item)
        except OverflowError:
            v = math.inf if item > 0 else -math.inf
        if math.isnan(v):
            raise EvalError("%s: NaN is not a score" % at)
        if math.isinf(v):
            raise EvalError("%s: %s is not a finite score" % (at, "inf" if v > 0 else "-inf"))
        if not min(lo, hi) <= v <= max(lo, hi):
            raise EvalError("%s: %s is outside the range [%s, %s] (declare another with "
                            "--score-range %s=LO:HI)" % (at, _number_text(v), _number_text(lo),
                                                        _number_text(hi), field))
        runs.append((v - lo) / (hi - lo) + 0.0)
    return tuple(runs)


def _value_kind(value):
    """"boolean", "integer" or "number": what a present value is made of."""
    items = value if isinstance(value, list) else [value]
    if all(isinstance(v, bool) for v in items):
        return "boolean"
    if all(not isinstance(v, bool) and float(v).is_integer() for v in items):
        return "integer"
    return "number"


_KIND_ORDER = ("boolean", "integer", "number")   # a field is the widest kind it holds


def _score_id(record, id_column, where):
    value = record.get(id_column)
    if value is None:
        raise EvalError("%s: no %r (the query id; --id-column names another column)"
                        % (where, id_column))
    return _as_id(value, "%s: %r" % (where, id_column))


def load_scores(source, id_column=SCORE_ID_COLUMN, fields=None, ranges=None,
                allow_missing=False, *, format=None):
    """Read a score file (JSONL or CSV, gzip or not; see above) into a
    :class:`Scores`: per query and field, the judge runs mapped onto [0, 1].

    ``id_column`` names the query id (default ``query_id``); ``fields`` the
    score fields to read (default: every key but the id, input_sha256 and the
    text columns, see _score_fields);
    ``ranges`` maps a field to its range ``(lo, hi)`` (default (0, 1); hi < lo:
    lower is better); with ``allow_missing`` a missing value lists the query
    as unscored for that field instead of raising.  Every bad value raises
    EvalError naming the file, line, query and field.

    >>> s = load_scores(io.StringIO("id,relevance,refused\\nq1,4,False\\nq2,2,true\\n"),
    ...                 id_column="id", ranges={"relevance": (1, 5)})
    >>> s.fields, s.values("relevance"), s.values("refused"), s.kinds["refused"]
    (('relevance', 'refused'), {'q1': 0.75, 'q2': 0.25}, {'q1': 0.0, 'q2': 1.0}, 'boolean')
    >>> load_scores(io.StringIO('{"query_id": "q1", "f": 0.5}\\n{"query_id": "q2"}\\n'))
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: <stream>:2: query 'q2' has no f score (--allow-missing-scores lists such queries as unscored)
    """
    return _read_scores(source, id_column, fields, ranges, allow_missing, format)


def _read_scores(source, id_column=SCORE_ID_COLUMN, fields=None, ranges=None,
                 allow_missing=False, format=None, present_only=False):
    """load_scores(); with ``present_only``, the named fields and ranges that
    the file lacks are left out rather than refused (several --scores files
    share one --metrics; the command line checks that each is in one)."""
    if not isinstance(id_column, str) or not id_column:
        raise EvalError("the id column must be a non-empty string, got %s"
                        % _short_repr(id_column))
    if fields is not None:
        if isinstance(fields, str) or not isinstance(fields, (list, tuple)):
            raise EvalError("fields must be a list of field names, got %s" % _short_repr(fields))
        fields = tuple(dict.fromkeys(_checked_field_name(f, "score field") for f in fields))
    ranges = _checked_ranges(ranges)
    inp = _input_of(source)
    fmt = format or _score_format(inp)
    if fmt not in ("jsonl", "csv"):
        raise EvalError("%s: unknown score file format %r (choose from jsonl, csv)"
                        % (inp.name, fmt))
    if fmt == "jsonl":
        records = list(_jsonl_score_records(inp))
    else:
        records = list(_csv_score_records(inp, (id_column,) + tuple(_RESERVED_SCORE_KEYS)))
    if not records:
        raise EvalError("%s: no queries in the score file" % inp.name)
    if present_only and fields is not None:
        keys = set().union(*(record.keys() for _, record in records))
        fields = tuple(f for f in fields if f in keys)
    found, mixed = _score_fields(records, id_column, fields, inp.name, fmt == "csv")
    if fmt == "csv":
        _json_cells(records, found)
    for field in ranges:
        if field not in found and not present_only:
            raise EvalError("%s: a score range is given for %r, which is not a score field "
                            "of the file (fields: %s)"
                            % (inp.name, field, ", ".join(found) or "none"))
    return _scores_of_records(records, id_column, found, ranges, allow_missing, inp.info(fmt),
                              mixed)


def _json_cells(records, fields):
    """Read the cells of CSV score fields that open with ``[`` as JSON arrays
    (repeated runs), in place; text columns are left as they are."""
    for where, record in records:
        for field in fields:
            value = record.get(field)
            if isinstance(value, str) and value[:1] == "[":
                record[field] = _score_json(value, where, "cell")


def _scores_of_records(records, id_column, fields, ranges, allow_missing, info, mixed=None):
    """The Scores of a file's records (see load_scores); a ``mixed`` field
    (see _score_fields) is refused at its first text, in file order, and its
    numbers before it are not checked (the error is about the key)."""
    mixed = mixed or {}
    runs = {field: {} for field in fields}
    unscored = {field: [] for field in fields}
    kinds = dict.fromkeys(fields, "boolean")
    booleans = {}        # field: whether its first value was true/false
    first_seen, hashes = {}, {}
    for where, record in records:
        qid = _score_id(record, id_column, where)
        if qid in first_seen:
            raise EvalError("%s: query %r again (first on line %s)"
                            % (where, qid, first_seen[qid]))
        first_seen[qid] = where.rpartition(":")[2]
        sha = record.get("input_sha256")
        if sha is not None:
            if not isinstance(sha, str):
                raise EvalError("%s: query %r: input_sha256 must be text (the sha256 of what "
                                "was judged), got %s" % (where, qid, _short_repr(sha, 40)))
            hashes[qid] = sha
        for field in fields:
            lo, hi = ranges.get(field, SCORE_RANGE)
            value = record.get(field)
            if field in mixed:
                if _is_text_value(value):
                    _refuse_numbers_and_text(where, qid, field, value, mixed[field])
                continue
            got = _query_runs(value, field, lo, hi, "%s: query %r" % (where, qid))
            if got:
                is_bool = isinstance(value if not isinstance(value, list) else value[0], bool)
                if booleans.setdefault(field, is_bool) != is_bool:
                    raise EvalError("%s: query %r, field %s: true/false mixed with numbers; a "
                                    "field holds true/false only or numbers only"
                                    % (where, qid, field))
                runs[field][qid] = got
                kinds[field] = max(kinds[field], _value_kind(value), key=_KIND_ORDER.index)
            elif allow_missing:
                unscored[field].append(qid)
            else:
                raise EvalError("%s: query %r has no %s score (--allow-missing-scores lists "
                                "such queries as unscored)" % (where, qid, field))
    for field in fields:
        if not runs[field]:
            raise EvalError("%s: field %s has no score on any query (a judge that failed on "
                            "every query?)" % (info["path"], field))
    return Scores(fields, runs, {f: tuple(ids) for f, ids in unscored.items()},
                  tuple(first_seen), kinds,
                  {f: ranges.get(f, SCORE_RANGE) for f in fields}, hashes,
                  dict(info, fields=list(fields)))


# ===========================================================================
# src/07_test_sets.py
#
# Test sets: slices, the hold-out, valid-until dates.
#
# Query metadata {qid: {"slices": {field: [value, ...]}, "question": ...,
# "answer": ..., "answerable": bool, "valid_until": "YYYY-MM-DD"}} (every key
# optional) puts each query in the slices named field=value of its fields.
# A slice's mean is over its scored queries, each measure over its own
# population (_population_means); the overall mean is the same thing over
# every scored query.  One slice may be held out: scored and gated on its
# own, left out of the overall and of every other slice, and shown only as
# counts and means (HeldOut).  valid_until dates leave out the queries
# expired on the day given as as_of; no clock is ever read.
#
# Uses: 01_head to 05_inputs.  Used by: evaluation, judge scores, the
# command line.
# ===========================================================================

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


# ===========================================================================
# src/08_provenance.py
#
# Provenance: what the numbers are about.
#
# What the numbers are about, so that a gate can say why they moved:
#   meta          flat dotted keys to strings, given by the user (--meta,
#                 --meta-file, evaluate(meta=...)); in every report format
#                 and saved baseline.  The gate names every key that changed
#                 and refuses (--same KEY) when a key must not.
#   label_sha256  each qrels query's label hash (see _label_sha256); a saved
#                 baseline keeps them, so the gate can say whose labels
#                 changed and compare per-query values on the others.
#
# Uses: 01_head, 02_records, 04_measure_names.  Used by: evaluation, judge
# scores, baselines, the gate, reports, HTML, the command line.
# ===========================================================================

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


# ===========================================================================
# src/09_ranking.py
#
# Ranking: one query ranked once; the tie rule is defined here.
#
# _rank_plain orders a query's ranking (a ranked list keeps its order; scores
# descending, ties by id descending as trec_eval does), keeps each id once at
# its best position, and places the labelled ids of the top K; every measure
# then reads those few.  Also the top chunks of a ranking with text ids, the
# document of a chunk id (doc_sep), and a query's grades in measure order.
# The hooks _rank, _top_chunks and _labels_for_ranking are bound to their
# fast twins by 20_accelerations (which repeat the sort key, _id_order
# included, for speed; twin tests pin them to these definitions).
#
# Uses: 03_measures, 06_inputs_trec_chunks_scores.  Used by: unjudged ids,
# evaluation, accelerations.
# ===========================================================================

def _rank_plain(ranking, labels, depth, cutoffs, exact_returned=False):
    """Rank one query once and place the ids that ``labels`` grades: the rule
    for ties and repeats, for every input form.

    A ranked list (best first) keeps its order.  A score map or a _Scored
    orders by score descending, then doc id descending (trec_eval's rule; ids
    compare as _id_order says).  An id given more than once counts once, at its
    best position (with scores: at its best score).  The top is the first
    ``depth`` distinct ids; ``duplicates`` counts the repeats read to fill it
    (a repeat below the deepest cutoff changes no number); ``straddling``
    counts the groups of tied scores that cross one of ``cutoffs`` (their order
    is the tie rule's, not the file's); ``returned`` counts the distinct ids
    (the accelerations' twin counts them exactly only when ``exact_returned``).

    >>> _rank_plain({"a": 1.0, "b": 1.0, "c": 0.5}, {"a": 1, "c": 0}, 2, (1, 2), False)
    _Ranked(labelled=[(2, 1)], length=2, duplicates=0, straddling=1, returned=3)
    >>> _rank_plain(["x", "x", "a"], {"a": 1}, 5, (5,))
    _Ranked(labelled=[(2, 1)], length=2, duplicates=1, straddling=0, returned=2)
    """
    if ranking is None:
        return _Ranked([], 0)
    top, scores, read, distinct = _top_entries(ranking, depth)
    length = min(len(top), depth)
    straddling = 0 if isinstance(ranking, list) else _straddling(scores, cutoffs, len(scores))
    return _Ranked(_labelled(map(labels.get, top[:depth])), length, read - length, straddling,
                   len(distinct))


def _top_entries(ranking, depth):
    """(top, scores, read, distinct): the first ``depth`` distinct ids under the
    tie and repeat rules of _rank_plain, and one more when there is one (it
    shows a tie that straddles the deepest cutoff); their scores (None for a
    ranked list); the entries read to fill the top; the set of distinct ids."""
    if isinstance(ranking, list):
        entries = [(doc, None) for doc in ranking]
    else:
        pairs = ranking.items() if isinstance(ranking, dict) else zip(*ranking)
        entries = sorted(((doc, float(score)) for doc, score in pairs),
                         key=lambda entry: (entry[1], _id_order(entry[0])), reverse=True)
    top, scores, read = _first_distinct(entries, depth)
    return top, scores, read, {doc for doc, _ in entries}


def _first_distinct(entries, depth):
    """(top, scores, read) of _top_entries from (doc, score) entries in rank
    order: the first depth + 1 distinct ids (fewer when the entries end)."""
    top, scores, seen, read = [], [], set(), 0
    for doc, score in entries:
        read += len(top) < depth            # entries read until the top is full
        if doc not in seen:
            seen.add(doc)
            top.append(doc)
            scores.append(score)
            if len(top) > depth:            # one past the deepest cutoff shows a straddling tie
                break
    return top, scores, read


_rank = _rank_plain     # hook: the accelerations install _rank_fast


def _id_order(doc):
    """How two ids with equal scores compare: by their UTF-8 bytes, as
    trec_eval's strcmp.  UTF-8 keeps code point order, so that is the order
    of the ids themselves, as text or as the fast TREC reader's bytes (UTF-8:
    see _id_text), and a lone surrogate handed to evaluate() takes its code
    point's place (its UTF-8 form, as surrogatepass writes it).  The fast
    paths compare ids directly, which this makes the same rule.

    >>> ids = ["\\udc80", "\\u0800", "\\ud800", "z", "\\U0001f600", "\\uffff"]
    >>> utf8 = lambda doc: doc.encode("utf-8", "surrogatepass")
    >>> sorted(ids, key=_id_order) == sorted(ids, key=utf8)
    True
    """
    return doc


def _straddling(scores, cutoffs, end):
    """How many tied groups of scores[:end] (in score order) cross a cutoff."""
    return len({scores[c - 1] for c in cutoffs if c < end and scores[c - 1] == scores[c]})


def _text_ids(ranking):
    """A ranking with text ids (the accelerations' TREC reader hands over bytes)."""
    if type(ranking) is _Scored and ranking.docs and isinstance(ranking.docs[0], bytes):
        return _Scored([_doc_text(doc) for doc in ranking.docs], ranking.scores)
    return ranking


def _top_chunks_plain(ranking, depth):
    """(ranking, top, scores, read, distinct): the ranking with text ids (see
    _text_ids) and its _top_entries.

    >>> ranking, top, scores, read, distinct = _top_chunks_plain(
    ...     _Scored([b"a", b"b", b"a"], [b"1", b"2", b"0"]), 1)
    >>> ranking, top, scores, read, sorted(distinct)
    (_Scored(docs=['a', 'b', 'a'], scores=[b'1', b'2', b'0']), ['b', 'a'], [2.0, 1.0], 1, ['a', 'b'])
    """
    ranking = _text_ids(ranking)
    return (ranking,) + _top_entries(ranking, depth)


def _ids_of(ranking):
    """The ids of a ranking (a _Scored, a score map or a ranked list), in its order."""
    return ranking.docs if type(ranking) is _Scored else ranking


_top_chunks = _top_chunks_plain     # hook: the accelerations install _top_chunks_fast


def _doc_of(chunk_id, sep):
    """The document of a chunk id: everything before the last ``sep`` (the id
    itself when it holds none).

    >>> _doc_of("refund-policy#3", "#"), _doc_of("a#b#2", "#"), _doc_of("plain", "#")
    ('refund-policy', 'a#b', 'plain')
    """
    head, found, _ = chunk_id.rpartition(sep)
    return head if found else chunk_id


def _unlabelled(ranking, labels):
    """For a non-empty ranking whose top K holds no labelled id: True when a
    deeper id carries a label (grade >= 0), else its best id (an example for
    the message that the run meets no label at all, see _best_id).

    >>> _unlabelled(["x", "y", "a"], {"a": 0}), _unlabelled(["x"], {"a": 1, "x": -1})
    (True, 'x')
    """
    docs = ranking.docs if type(ranking) is _Scored else ranking
    if not labels.keys().isdisjoint(docs) and any(
            labels[doc] >= 0 for doc in set(docs).intersection(labels)):
        return True
    return _best_id(ranking)


def _best_id(ranking):
    """The id a non-empty ranking puts first (the tie rule's, see _rank_plain),
    as text: the example a message shows, whatever the order of the lines.

    >>> _best_id(_Scored(["x.1", "d19.2"], [1.0, 4.0])), _best_id({"a": 1.0, "b": 1.0})
    ('d19.2', 'b')
    """
    return _top_chunks(ranking, 1)[1][0]


def _labels_for(ranking, labels):
    """The labels keyed like the ranking's ids: text, as here."""
    return labels


_labels_for_ranking = _labels_for   # hook: the accelerations' TREC reader keys ids as bytes


def _sorted_grades(labels):
    """A query's grades, sorted descending (what every measure gets as ``grades``)."""
    return tuple(sorted(labels.values(), reverse=True))


# ===========================================================================
# src/10_unjudged.py
#
# Unjudged ids: where the labels run out.
#
# An id the qrels do not grade counts as non-relevant, so a retriever that
# surfaces new, unlabelled chunks can look worse than it is.  Here:
#   --to-label FILE   the unjudged ids of the top --pool-depth of the run and
#                     of every --compare run, pooled, as rows to grade
#                     (_to_label_rows); the file graded is qrels again, and
#                     --qrels FILE (repeatable) merges it (_merged_qrels);
#   bounds            how far labelling could move a value (see below).
# (unjudged=skip, a measure over the judged ids only, is a measure parameter:
# 03_measures.)
#
# Uses: 01_head, 03_measures, 04_measure_names, 09_ranking.  Used by:
# evaluation, the command line.
# ===========================================================================

def _merged_qrels(parts):
    """One qrels from [(file name, qrels)]: the labels of every file.  The
    files must agree (see _agreed_file), whatever their order; a (query, id)
    the first file (QRELS) grades as agreed keeps its rows as that file gives
    them (its repeated rows too: the labels, and their hash, of QRELS do not
    change when a file agrees with it), any other one label of the agreed
    grade (the same, and the same hash, in any order of the other files).  Beside label lists, {id: grade}
    labels are whole-document labels (as they are read by unit=doc|evidence,
    the only measures label lists serve; a graded --to-label file, say).

    >>> _merged_qrels([("a", {"q": {"x": 1}}), ("b", {"q": {"y": 0}, "p": {"z": 2}})])
    {'q': {'x': 1, 'y': 0}, 'p': {'z': 2}}
    >>> _merged_qrels([("a", {"q": {"x": -1, "y": 2}}), ("b", {"q": {"x": 0, "y": -1}})])
    {'q': {'y': 2, 'x': 0}}
    >>> _merged_qrels([("a", {"q": {"x": 1}}), ("b", {"q": {"x": 2}})])
    Traceback (most recent call last):
    rag_eval.EvalError: query 'q': id 'x' is graded 1 in a and 2 in b: label it once
    >>> _merged_qrels([("a", {"q": [Label("x", 0, 9, 2)]}), ("b", {"q": {"y": 1}})])["q"]
    [Label(doc='x', start=0, end=9, grade=2, doc_sha256=None, text=None), Label(doc='y', start=None, end=None, grade=1, doc_sha256=None, text=None)]
    """
    if any(type(labels) is list and labels for _, qrels in parts for labels in qrels.values()):
        parts = [(name, {qid: labels if type(labels) is list else
                         [Label(doc, None, None, grade) for doc, grade in labels.items()]
                         for qid, labels in qrels.items()}) for name, qrels in parts]
    given = {}      # (qid, key) -> {file name: [grade, ...]}, files in order
    versions = {}   # (qid, doc) -> {doc_sha256: file name}
    for name, qrels in parts:
        for qid, labels in qrels.items():
            for key, grade, label in _label_items(labels):
                given.setdefault((qid, key), {}).setdefault(name, []).append(grade)
                if getattr(label, "doc_sha256", None):
                    versions.setdefault((qid, label.doc), {}).setdefault(label.doc_sha256, name)
    for (qid, doc), shas in sorted(versions.items()):
        if len(shas) > 1:
            (one, a), (other, b) = sorted(shas.items())[:2]
            raise EvalError("query %r: doc %r is labelled against doc_sha256 %s... in %s and "
                            "%s... in %s: label one version" % (qid, doc, one[:12], a,
                                                                other[:12], b))
    kept = {pair: _agreed_file(pair, files) for pair, files in given.items()}
    merged, first = {}, parts[0][0]
    for index, (name, qrels) in enumerate(parts):
        for qid, labels in qrels.items():
            here = merged.setdefault(qid, [] if type(labels) is list else {})
            if type(here) is not type(labels):      # {} and [] of queries with no label
                if here and type(here) is dict:     # whole-document labels beside a list
                    here = merged[qid] = [Label(doc, None, None, g) for doc, g in here.items()]
                elif not here:
                    here = merged[qid] = type(labels)()
                else:                               # a list beside a query's empty {}
                    labels = [Label(doc, None, None, g) for doc, g in labels.items()]
            for key, grade, label in _label_items(labels):
                agreed = kept.get((qid, key))
                # (QRELS by its place: the same path given again with --qrels is no
                # second copy of its rows)
                if agreed is None or (index == 0) != (agreed[1] == first):
                    continue    # given already, or not QRELS's to give
                if agreed[1] != first:  # one label, in whatever order the files came
                    del kept[qid, key]
                    grade = agreed[0]
                    label = label and label._replace(grade=grade)
                if type(here) is dict:
                    here[key] = grade
                else:           # the document's version, whichever file gave it
                    version = versions.get((qid, label.doc))
                    here.append(label._replace(doc_sha256=min(version)) if version else label)
    return merged


def _agreed_file(pair, files):
    """(grade, file name): the grade a (query, key) graded {file name: [grade,
    ...]} keeps, and the first file giving it.  A file's grade is the highest
    of its rows (as it reads alone); the grades >= 0 must agree, and a
    negative grade (judged-unknown, which --to-label pools) gives way to them,
    else the negative grades must agree.

    >>> _agreed_file(("q", "x"), {"a": [-1], "b": [2], "c": [2]})
    (2, 'b')
    >>> _agreed_file(("q", "x"), {"a": [-1, 2], "b": [0]})
    Traceback (most recent call last):
    rag_eval.EvalError: query 'q': id 'x' is graded 2 in a and 0 in b: label it once
    """
    qid, key = pair
    graded = [(max(rows), name) for name, rows in files.items()]
    agreeing = [entry for entry in graded if entry[0] >= 0] or graded
    for grade, name in agreeing[1:]:
        if grade != agreeing[0][0]:
            raise EvalError("query %r: %s is graded %d in %s and %d in %s: label it once"
                            % (qid, _label_key_text(key), agreeing[0][0], agreeing[0][1],
                               grade, name))
    return agreeing[0]


def _label_items(labels):
    """(key, grade, label) of each label: key is the id, or (doc, start, end) of a Label."""
    if type(labels) is list:
        return [((label.doc, label.start, label.end), label.grade, label) for label in labels]
    return [(key, grade, None) for key, grade in labels.items()]


def _label_key_text(key):
    if isinstance(key, tuple):
        doc, start, end = key
        return "doc %r" % doc + ("" if start is None else " [%d, %d)" % (start, end))
    return "id %r" % key


def _pool_depth(measures, given=None):
    """How deep --to-label looks: ``given``, else the deepest any measure
    reads labels: its cutoff, or the whole ranking (@all, no cutoff, a budget).

    >>> _pool_depth(resolve_measures("recall@5,mrr@10,clean@20"))
    10
    >>> _pool_depth(resolve_measures("recall@5,map@all")) == _WHOLE_RANKING
    True
    """
    if given is not None:
        return _positive_int(given, "--pool-depth")
    labelled = [m for m in measures if _REGISTRY[m.name].population
                not in _UNANSWERABLE_POPULATIONS | {"answerable"}]
    return max([m.k if isinstance(m.k, int) and not dict(m.params).get("budget")
                else _WHOLE_RANKING for m in labelled] or [_WHOLE_RANKING])


def _unjudged_top(ranking, labels, depth, doc_of=None):
    """[(rank, id)] of the ids in the top ``depth`` that carry no label (grade
    >= 0), under the ranking rules of _rank; with ``doc_of`` (id -> Chunk), an
    id whose document carries one is judged too.

    >>> _unjudged_top({"a": 3.0, "b": 2.0, "c": 1.0}, {"b": 0, "c": -1}, 3)
    [(1, 'a'), (3, 'c')]
    """
    top = _top_entries(_text_ids(ranking), depth)[0][:depth]
    out = []
    for rank, doc in enumerate(top, 1):
        if labels.get(doc, -1) >= 0:
            continue
        if doc_of is not None and labels.get(doc_of(doc).doc, -1) >= 0:
            continue
        out.append((rank, doc))
    return out


def _to_label_rows(runs, qrels, depth, mapping=None, hidden=frozenset(), by_doc=True,
                   first=frozenset(), questions=None, texts=None):
    """The rows of --to-label: for each (query, id) unjudged in the top
    ``depth`` of any of ``runs`` [(name, {qid: ranking} or (qid, ranking)
    stream)], one dict {"query_id"[, "question"], "id"[, "doc", "start",
    "end"][, "text"], "best_rank", "runs", "grade": None}, sorted by best
    rank, then query, then id; every row of the ``first`` queries
    (unsupported_pass: their answer passed without the evidence) comes
    before any other.  Only queries of ``qrels`` are pooled, the ``hidden``
    ones (the hold-out) never.  The rows carry what a person needs
    to grade, where the inputs give it: the query's ``questions`` {qid: text}
    (a test set's), the chunk's document and span (a ``mapping``, else the
    run's own fields: a ranked list of objects) and its text (the run item's
    "text", else the chunk map's: ``texts(ids)`` gives {id: text} of the ids
    still without one, asked once).  With a document
    known, an id whose document is labelled is judged when the measures
    count documents (``by_doc``).  A run given as (name, queries, mapping[,
    texts]) maps its ids by its own (another chunker's map) and takes their
    texts from its own; a row names the document, and the text, of the first
    run that pooled it.

    >>> rows = _to_label_rows([("new", {"q": ["x", "a", "y"]}), ("old", {"q": ["y", "z"]})],
    ...                       {"q": {"a": 1}}, 2)
    >>> [(r["id"], r["best_rank"], r["runs"]) for r in rows]
    [('x', 1, ['new']), ('y', 1, ['old']), ('z', 2, ['old'])]
    >>> [(r["query_id"], r["id"]) for r in _to_label_rows(
    ...     [("run", {"p": ["x"], "q": ["b", "y"]})], {"p": {"a": 1}, "q": {"a": 1}}, 2,
    ...     first={"q"})]
    [('q', 'b'), ('q', 'y'), ('p', 'x')]
    >>> run = {"q": _check_run_query("q", [{"id": "x", "doc": "a.md", "start": 0, "end": 9,
    ...                                     "text": "Refunds."}], "r")}
    >>> _to_label_rows([("r", run)], {"q": {}}, 1, questions={"q": "How long?"})
    [{'query_id': 'q', 'question': 'How long?', 'id': 'x', 'doc': 'a.md', 'start': 0, 'end': 9, 'text': 'Refunds.', 'best_rank': 1, 'runs': ['r'], 'grade': None}]
    """
    found = {}      # (qid, id) -> [best rank, run names, Chunk or None, text or None, texts]
    for name, queries, *own in runs:
        run_mapping = own[0] if own else mapping
        run_texts = own[1] if len(own) > 1 else texts
        pairs = queries.items() if isinstance(queries, dict) else queries
        for qid, ranking in pairs:
            if qid not in qrels or qid in hidden or ranking is None:
                continue
            chunk_of = _chunk_lookup(run_mapping, ranking)
            doc_of = (lambda doc: chunk_of(doc) or Chunk(doc)) if by_doc and chunk_of else None
            own_texts = getattr(ranking, "texts", None) or {}
            for rank, doc in _unjudged_top(ranking, qrels[qid], depth, doc_of):
                entry = found.setdefault((qid, doc), [rank, [], None, None, run_texts])
                entry[0] = min(entry[0], rank)
                if name not in entry[1]:
                    entry[1].append(name)
                entry[2] = entry[2] or (chunk_of and chunk_of(doc))
                entry[3] = entry[3] or own_texts.get(doc)
    wanted = {}     # each run's texts: the ids it pooled first that have no text yet
    for (_, doc), entry in found.items():
        if entry[3] is None and entry[4] is not None:
            wanted.setdefault(id(entry[4]), (entry[4], set()))[1].add(doc)
    more = {key: look_up(ids) for key, (look_up, ids) in wanted.items()}
    rows = []
    for (qid, doc), (rank, names, chunk, text, run_texts) in sorted(
            found.items(), key=lambda item: (item[0][0] not in first, item[1][0], item[0])):
        row = {"query_id": qid}
        if (questions or {}).get(qid) is not None:
            row["question"] = questions[qid]
        row["id"] = doc
        if chunk is not None:
            row["doc"] = chunk.doc
            if chunk.start is not None:
                row["start"], row["end"] = chunk.start, chunk.end
        text = text or (more[id(run_texts)].get(doc) if id(run_texts) in more else None)
        if text is not None:
            row["text"] = text
        row.update(best_rank=rank, runs=names, grade=None)
        rows.append(row)
    return rows


def _chunk_lookup(mapping, ranking=None):
    """id -> Chunk through a chunk map or a separator (an id the map lacks:
    its own document, unknown), else id -> Chunk or None through the
    ranking's own fields (a ranked list of objects); None when there is
    neither."""
    if mapping is not None and mapping.doc_sep is not None:
        return lambda doc: Chunk(_doc_of(doc, mapping.doc_sep))
    own = getattr(ranking, "chunks", None) or {}
    if mapping is not None:
        return lambda doc: mapping.chunks.get(doc) or own.get(doc) or Chunk(doc)
    return own.get if own else None


def _to_label_text(rows):
    """The JSONL of --to-label rows, keys in the order of the issue."""
    return "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows)


# --- bounds ---------------------------------------------------------------------------
#
# How far labelling the unjudged ids of a query's top k could move a value:
# only those ids vary, every other id keeps its label.  An unjudged id becomes
# either non-relevant or "relevant": grade rel for recall, precision, success,
# mrr and map; the query's highest qrels grade for ndcg (it is also added to
# the grades the ideal DCG orders, as a label would be).
#
# Exact by extremes.  Give m of the u unjudged ranks the relevant grade.  Every
# bounded measure is a sum over the relevant ranks r_1 < r_2 < ... of terms
# that fall as a rank grows (AP: i / r_i; DCG: gain / log2(r_i + 1); recall,
# precision, success and mrr count or look at the first), over a denominator
# that depends on m alone (R + m, the ideal DCG of the grades, k).  Moving one
# relevant label to an earlier unjudged rank leaves every r_i where it was or
# moves it earlier, so among the labellings with m relevant ids the best gives
# the m earliest unjudged ranks and the worst the m latest: the bounds are the
# max and min over m = 0..u of those 2(u + 1) labellings (tests pin this
# against enumerating all 2**u).  recall, precision, success and mrr never
# fall when a label is added ((h + 1)/(R + 1) >= h/R as h <= R), so their
# bounds are m = 0 (today's value, all non-relevant) and m = u.  map and ndcg
# can fall: AP is 1 with one relevant id, at rank 1; label rank 5 relevant too
# and it is (1/1 + 2/5) / 2 = 0.7.  Their lower bound can be below today's value.
# ---------------------------------------------------------------------------------------

_BOUNDED = ("recall", "precision", "success", "mrr", "map", "ndcg")
_MONOTONE = ("recall", "precision", "success", "mrr")


def _bounded(m):
    """True for a measure with unjudged bounds: one of _BOUNDED over ids
    (no unit, no budget) with unjudged ids counted non-relevant.

    >>> [_bounded(parse_measure(t)) for t in ("map@5", "recall(unit=doc)@5", "bpref",
    ...                                       "mrr(unjudged=skip)@5")]
    [True, False, False, False]
    """
    if m.name not in _BOUNDED or _skips_unjudged(m):
        return False
    call = _UnitCall.of(m)
    return call.view == "id" and not call.budget


def _unjudged_ranks(ranked, k):
    """The ranks <= k of the top that carry no label (grade >= 0), best first.

    >>> _unjudged_ranks(_from_grades([1, None, 0, -1, None]), 4)
    [2, 4]
    """
    judged_ranks = {rank for rank, _ in ranked.labelled}
    return [r for r in range(1, min(k, ranked.length) + 1) if r not in judged_ranks]


def _labelled_as(ranked, ranks, grade):
    """``ranked`` with the unjudged ``ranks`` given ``grade``."""
    labelled = sorted(ranked.labelled + [(r, grade) for r in ranks])
    return ranked._replace(labelled=labelled)


def _relevant_grade(m, grades):
    """The grade an unjudged id takes when labelled relevant for ``m``."""
    if m.name == "ndcg":
        return grades[0] if grades else 1
    return dict(m.params).get("rel", REL.default)


def _bounds_of(m, func, args, ranked, grades):
    """(lo, hi): the least and greatest value of measure ``m`` (``func(ranked,
    grades, *args)``) over the labellings of its unjudged ids (see above).

    >>> m = parse_measure("map@5"); f, a = m._parts()
    >>> _bounds_of(m, f, a, _from_grades([1, None, None, None, None]), (1,))   # AP 1: 0.7 ... 1
    (0.7, 1.0)
    """
    k = args[0] if isinstance(args[0], int) else ranked.length
    ranks = _unjudged_ranks(ranked, k)
    u = len(ranks)
    if not u:
        value = func(ranked, grades, *args)
        return value, value
    grade = _relevant_grade(m, grades)
    counts = (0, u) if m.name in _MONOTONE else range(u + 1)
    values = []
    for n in counts:
        more = tuple(sorted(grades + (grade,) * n, reverse=True))
        for chosen in {tuple(ranks[:n]), tuple(ranks[u - n:])}:
            values.append(func(_labelled_as(ranked, chosen, grade), more, *args))
    return min(values), max(values)


def _judged_cutoffs(measures):
    """The cutoffs judged@k is shown at: those of the measures over ids."""
    return sorted({m.k for m in measures if isinstance(m.k, int)
                   and _UnitCall.of(m).view == "id"})


def _query_unjudged(scorer, ranked, grades, ranking, labels):
    """What the scorer adds per query when asked for bounds (scorer.bounds):
    {"bounds": {measure: (lo, hi)}, "judged": {k: judged@k}, "ids": [(rank, id)]
    of the unjudged ids in the top of the deepest bounded cutoff}."""
    bounds = {name: _bounds_of(m, func, args, ranked, grades)
              for m, name, func, args in scorer.bounds}
    judged_at = {k: judged(ranked, grades, k) for k in scorer.judged_at}
    ids = []
    if scorer.bounds and ranking is not None and len(ranked.labelled) < ranked.length:
        ids = _unjudged_top(ranking, labels, scorer.bounds_depth)
    return {"bounds": bounds, "judged": judged_at, "ids": ids}


def _unjudged_summary(rows, names, per_query):
    """The report's ``unjudged`` field from the per-query rows of
    _query_unjudged (scored queries only): bounds of each mean and query
    (None: a measure with no bounds), judged@k means, the unjudged ids."""
    queries = sorted(q for q in per_query if q in rows)     # not the unanswerable ones
    mean = {}
    for name in names:
        over = [q for q in queries if name in per_query[q]]
        if not over or name not in rows[over[0]]["bounds"]:
            mean[name] = None
            continue
        pairs = [rows[q]["bounds"][name] for q in over]
        mean[name] = [_mean([p[0] for p in pairs]), _mean([p[1] for p in pairs])]
    bounded = [n for n in names if mean[n] is not None]
    cutoffs = rows[queries[0]]["judged"] if queries else {}
    return {"mean": mean,
            "per_query": {q: {n: list(rows[q]["bounds"][n]) for n in bounded
                              if n in per_query[q]} for q in queries},
            "judged": {"judged@%d" % k: _mean([rows[q]["judged"][k] for q in queries])
                       for k in sorted(cutoffs)},
            # per query for the gate, which averages judged@k over a slice's queries too
            "judged_per_query": {q: {"judged@%d" % k: v for k, v in rows[q]["judged"].items()}
                                 for q in queries},
            "ids": {q: rows[q]["ids"] for q in queries if rows[q]["ids"]}}


# ===========================================================================
# src/11_evaluation.py
#
# Evaluation: qrels and a run in, a Report out.
#
# evaluate and evaluate_files: per query, rank once (09_ranking) and keep
# only the labelled ids of the top K, with their ranks; every measure then
# reads those few labelled (_QueryScorer).  Also the chunk map's view of the
# retrieved ids (_Mapping), the checks that say why a run meets no label, the
# ingestion check of span labels, answerability counts, --min-score cuts and
# the --sweep-min-score table.  The hook _scored_run is bound to forked
# workers by 20_accelerations.
#
# Uses: 01_head to 10_unjudged.  Used by: judge scores, baselines, the report
# reader, the command line, accelerations.
# ===========================================================================

def _plan(measures):
    """(depth, cutoffs): how deep to rank, and the cutoffs ties are counted at.
    A measure at @all or without a cutoff reads the whole ranking.

    >>> _plan([parse_measure("recall@5"), parse_measure("mrr@10")])
    (10, (5, 10))
    >>> _plan([parse_measure("recall@5"), parse_measure("rprec")]) == (_WHOLE_RANKING, (5,))
    True
    """
    cutoffs = tuple(sorted({m.k for m in measures if isinstance(m.k, int)}))
    whole = any(not isinstance(m.k, int) or _skips_unjudged(m) for m in measures)
    return max(cutoffs + ((_WHOLE_RANKING,) if whole else ())), cutoffs


def _columns(rows, names):
    """The values of each name across rows (dicts), as one tuple per name.

    >>> _columns([{"a": 1, "b": 2}, {"a": 3, "b": 4}], ("b", "a"))
    [(2, 4), (1, 3)]
    """
    if len(names) == 1:
        return [tuple(row[names[0]] for row in rows)]
    return list(zip(*map(operator.itemgetter(*names), rows)))


@_gc_paused
def evaluate(qrels, run, k=DEFAULT_K, measures=None, *, rel=1, gain="exponential",
             skip_extra_queries=False, average="scored", metrics=None, chunks=None,
             doc_sep=None, unit="id", meta=None, queries=None, by=(), holdout=None,
             as_of=None, reveal_holdout=False, min_score=None, unjudged_bounds=False,
             fields=None, trim_label_whitespace=False):
    """Score ``run`` against ``qrels``; return a :class:`Report`.

    ``qrels`` is ``{qid: {doc_id: grade}}``; ``run`` is ``{qid: [ids]}`` (best
    first) or ``{qid: {doc_id: score}}``.  ``k`` is one cutoff or several
    (``[1, 5, 10]`` or ``"1,5,10"``); ``measures`` names measures (default:
    recall, success, mrr, ndcg; ``metrics=``, its old name, is still read).
    ``rel`` is the lowest relevant grade.
    Policies: a query with no grade >= rel is unscored (listed, not averaged);
    a qrels query absent from the run scores 0 and stays in the mean; a run
    query absent from the qrels is an error unless ``skip_extra_queries``.
    Inputs are never modified.

    ``average="trec_eval"`` averages as trec_eval does without ``-c``: over
    the queries the run and the qrels share, those with no relevant id
    included with the values trec_eval gives them (0, except nDCG, which
    ignores rel), those the run lacks left out.  Use it to reproduce a
    trec_eval ``all`` line, never to gate: leaving a hard query out of the
    run would raise that mean.

    ``meta`` says what the numbers are about, e.g. ``{"embedding.model":
    "bge-m3"}``: keys of letters, digits, ``_`` and ``-`` in parts joined by
    ``.``; nested objects are flattened with ``.``; values (strings, numbers,
    booleans) are kept as strings.  It is carried into every report format and
    saved baseline, and the gate names the keys that changed.

    ``queries`` is query metadata, ``{qid: {"slices": {field: [value, ...]},
    "valid_until": "YYYY-MM-DD", ...}}`` (see load_queries); its queries are
    members of the test set even without labels (unscored).  The report then
    holds every slice ``field=value`` (``slices``); ``by`` names the fields
    the renderers show.  ``holdout="field=value"`` scores that slice apart: it
    is left out of the overall mean and of every other slice, and only its
    counts and means are ever written (``reveal_holdout=True`` writes the
    rest).  ``as_of="YYYY-MM-DD"`` leaves out the queries whose valid_until
    is before it; without it, dates are only counted.

    ``chunks`` is a chunk map, as ``--chunks`` takes it: a file (a path, ``-``
    or a file object, JSONL; its path, sha256 and format go into the report's
    ``inputs``, so a saved baseline records it), or its records already read
    (a list of ``{"id", "doc", "start", "end"}`` objects, or ``{id: record}``);
    ``doc_sep`` names documents by cutting ids at a separator instead, and
    ``unit`` is the default unit of the measures (``"doc"``, ``"evidence"``).

    >>> m = io.StringIO('{"id": "c1", "doc": "a.md", "start": 0, "end": 50}\\n'
    ...                 '{"id": "c2", "doc": "a.md", "start": 50, "end": 99}\\n')
    >>> e = evaluate({"q": [Label("a.md", 60, 80, 1)]}, {"q": ["c1", "c2"]}, k=1,
    ...              measures="recall(unit=evidence),recall(unit=evidence)@2", chunks=m)
    >>> e.mean, e.inputs["chunks"]["path"]
    ({'recall(unit=evidence)@1': 0.0, 'recall(unit=evidence)@2': 1.0}, '<stream>')

    ``unjudged_bounds=True`` fills the report's ``unjudged``: the interval
    each mean and each query's value could take once the unjudged ids of the
    top k are labelled (``"mean"`` and ``"per_query"``, ``[lo, hi]``; None for
    a measure with no bounds: only recall, precision, success, mrr, map and
    ndcg over ids have them), judged@k at each cutoff (``"judged"``) and the
    unjudged (rank, id) of each query (``"ids"``).  :func:`gate` reads it.

    A ranked list may hold result objects: LangChain's ``Document.model_dump()``,
    LlamaIndex's ``NodeWithScore.to_dict()`` and plain ``{"id", "score", "doc",
    "start", "end"}`` objects are read by their keys.  ``fields`` replaces where
    they give their id, document, start or end: ``{"id": "metadata.chunk_id",
    "doc": "node.metadata.file_path", "start": ..., "end": ...}``, dotted paths
    from the object as written.
    ``trim_label_whitespace=True`` narrows each span label that carries its
    ``text`` (as long as the span) past the whitespace at the ends of that
    text before anything is scored: a chunker that strips whitespace never
    holds it, and ``cover`` stays exact.  It changes numbers, so the report
    records it and the gate refuses a baseline made the other way.

    >>> b = evaluate({"q": {"a": 1}}, {"q": ["a", "x", "y"]}, k=3, measures="map,precision",
    ...              unjudged_bounds=True).unjudged
    >>> b["mean"], b["judged"], b["ids"]   # map lo: y alone relevant, (1/1 + 2/3) / 2
    ({'map@3': [0.8333333333333333, 1.0], 'precision@3': [0.3333333333333333, 1.0]}, {'judged@3': 0.3333333333333333}, {'q': [(2, 'x'), (3, 'y')]})
    >>> s = evaluate({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}},
    ...              {"q1": ["a"], "q2": ["x"], "q3": ["c"]}, k=1, measures="recall",
    ...              queries={"q1": {"slices": {"source": ["real"]}},
    ...                       "q2": {"slices": {"source": ["real"]}},
    ...                       "q3": {"slices": {"split": ["holdout"]}}},
    ...              by="source", holdout="split=holdout")
    >>> s.mean, s.slices["source=real"]["mean"], s.holdout.mean, sorted(s.per_query)
    ({'recall@1': 0.5}, {'recall@1': 0.5}, {'recall@1': 1.0}, ['q1', 'q2'])
    >>> r = evaluate({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}},
    ...              {"q1": ["a", "a"], "q3": ["z"]}, k=1, measures="recall")
    >>> r.mean, r.unscored, r.missing
    ({'recall@1': 0.5}, ('q3',), ('q2',))
    >>> t = evaluate({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}},
    ...              {"q1": ["a", "a"], "q3": ["z"]}, k=1, measures="recall", average="trec_eval")
    >>> t.per_query      # q3 (no relevant id) counts, q2 (not in the run) does not
    {'q1': {'recall@1': 1.0}, 'q3': {'recall@1': 0.0}}
    >>> evaluate({"q": {"a": 1}}, {"q": ["a"]}, meta={"embedding": {"model": "bge-m3"}}).meta
    {'embedding.model': 'bge-m3'}
    """
    measures = resolve_measures(_renamed(measures, metrics), k, rel=rel, gain=gain, unit=unit)
    _refuse_joined(measures)
    meta = _checked_meta(meta)
    average = _checked_average(average)
    testset = _test_set(queries, by, holdout, as_of, reveal_holdout, average)
    report = _evaluate(_validated(qrels, "qrels", _check_qrels_query), run, measures, rel, average,
                       skip_extra_queries, chunks, doc_sep, testset, min_score, unjudged_bounds,
                       fields, trim_label_whitespace)
    return _with_meta(report, meta)


def _evaluate(qrels, run, measures, rel, average, skip_extra_queries, chunks, doc_sep, testset,
              min_score, unjudged_bounds, fields=None, trim=False):
    """evaluate() with its measures resolved, its qrels validated and its
    _TestSet made (None: no query metadata)."""
    rising, fields = [], _checked_fields(fields)
    if fields is not None and fields.query is not None:
        raise EvalError('fields: "query" names the query of a JSONL line (evaluate_files, '
                        "load_qrels, load_run); evaluate() takes {query_id: ranking}")
    run = _validated(run, "run", functools.partial(_check_run_query, rising=rising,
                                                   fields=fields))
    if testset is not None:
        qrels = testset.qrels(qrels)
    chunks, chunks_info = _library_chunks(chunks)
    scorer = _scorer(qrels, measures, _positive_int(rel, "rel"), average, chunks, doc_sep,
                     testset, min_score, unjudged_bounds, trim)
    report = _score(scorer, _scored_queries(scorer, run.items()), skip_extra_queries, "run",
                    testset)._replace(min_score=scorer.min_score, trim_label_whitespace=trim)
    if chunks_info is not None:     # a file, as --chunks reads it: the gate tells a new map
        report = report._replace(inputs={"chunks": chunks_info})
    report = _with_rising_note(report, "run", rising, testset)
    return report._replace(label_sha256=_label_hashes(qrels, testset))


def _refuse_joined(measures):
    """A stage measure needs the judge's verdicts beside the run: refused by
    evaluate() and evaluate_files(), which score the run alone."""
    for m in measures:
        if _REGISTRY[m.name].view == "stages":
            raise EvalError("%s joins retrieval with the judge's verdicts: score it with "
                            "evaluate_stages() (on the command line: --scores and --answer)"
                            % (m,))


@_gc_paused
def evaluate_files(qrels, run, k=DEFAULT_K, measures=None, *, rel=1, gain="exponential",
                   skip_extra_queries=False, qrels_format=None, run_format=None,
                   average="scored", metrics=None, chunks=None, doc_sep=None, unit="id",
                   meta=None, queries=None, by=(), holdout=None, as_of=None,
                   reveal_holdout=False, min_score=None, unjudged_bounds=False,
                   fields=None, trim_label_whitespace=False):
    """Like :func:`evaluate`, from files (paths, ``-`` or file objects), streaming
    the run one query at a time.  The report's ``inputs`` carry each file's
    path, sha256 and format (and the ``fields`` it was read with, when given).
    ``chunks`` is a chunk-map file (see load_chunks).  ``queries`` is query
    metadata, ``unjudged_bounds`` and ``fields`` as for :func:`evaluate`;
    ``fields={"query": "query"}`` also keys the JSONL lines of both files by
    that field (rows without an id, such as LlamaIndex's RetrieverEvaluator
    rows or Ragas' with "user_input", keyed by their question).

    >>> evaluate_files(io.StringIO('{"q": {"a": 1}}'),
    ...                io.StringIO('q Q0 b 1 2.0 x\\nq Q0 a 2 1.0 x\\n'), measures="mrr").mean
    {'mrr@5': 0.5}
    """
    measures = resolve_measures(_renamed(measures, metrics), k, rel=rel, gain=gain, unit=unit)
    _refuse_joined(measures)
    average = _checked_average(average)
    meta = _checked_meta(meta)
    fields = _checked_fields(fields)
    pending = []    # the note on label rows not graded yet, first, as the command line's
    qrels, qrels_info, described = _read_qrels(qrels, qrels_format, pending,
                                               rows_label=_rows_label(measures), fields=fields)
    metadata, info, notes = _metadata(described, qrels_info["path"], queries)
    testset = _test_set(metadata, by, holdout, as_of, reveal_holdout, average, info, notes)
    chunk_map, chunks_info = _read_chunks(chunks) if chunks is not None else (None, None)
    report = _evaluate_run(qrels, qrels_info, run, measures, _positive_int(rel, "rel"),
                           skip_extra_queries, run_format, average, chunk_map, doc_sep,
                           chunks_info, testset, min_score, unjudged_bounds, fields,
                           trim_label_whitespace)
    return _with_meta(report._replace(warnings=tuple(pending) + report.warnings), meta)


def _checked_average(average):
    if average not in AVERAGES:
        raise EvalError("average must be one of %s, got %r" % (", ".join(AVERAGES), average))
    return average


def _evaluate_run(qrels, qrels_info, run, measures, rel, skip_extra_queries, run_format,
                  average="scored", chunks=None, doc_sep=None, chunks_info=None, testset=None,
                  min_score=None, bounds=False, fields=None, trim=False):
    """evaluate_files() with the qrels (and chunk map, and _TestSet) already
    read (they may come from stdin); the run is read with ``fields``."""
    if testset is not None:
        qrels = testset.qrels(qrels)
    scorer = _scorer(qrels, measures, rel, average, chunks, doc_sep, testset, min_score,
                     bounds, trim)
    inp, fmt = _open_input(run, run_format, "run", fields)
    try:
        report = _score_run(inp, fmt, scorer, skip_extra_queries, testset)
    except BaseException:
        inp.stop_hashing()
        raise
    inputs = {"qrels": qrels_info, "run": inp.info(fmt)}
    if chunks_info is not None:
        inputs["chunks"] = chunks_info
    if report.mapping is not None:  # how chunks became documents is part of the numbers
        inputs["mapping"] = {key: report.mapping[key] for key in ("source", "doc_sep")
                             if report.mapping[key] is not None}
    if testset is not None and testset.info is not None:
        inputs["queries"] = testset.info
    return report._replace(inputs=inputs, label_sha256=_label_hashes(qrels, testset),
                           min_score=scorer.min_score, trim_label_whitespace=trim)


def _score_run(inp, fmt, scorer, skip_extra_queries, testset=None):
    """The report of one run, read one query at a time; a run whose queries
    are scattered is read whole."""
    progress = _PROGRESS
    if progress is not None:
        progress.begin(inp.name, os.path.getsize(inp.source)
                       if _is_regular_file(inp.source) else None)
    try:
        report = _score(scorer, _counted(_scored_run(inp, fmt, scorer), progress),
                        skip_extra_queries, inp.name, testset)
    except _NotGrouped:
        if progress is not None:    # read again from the start
            progress.begin(inp.name, progress.size)
        report = _score(scorer, _counted(_scored_run_plain(inp, fmt, scorer, grouped=False),
                                         progress), skip_extra_queries, inp.name, testset)
        note = ("%s: the lines of a query are not contiguous; read the whole run into memory"
                % inp.name)
        report = report._replace(warnings=(note,) + report.warnings)
    finally:
        if progress is not None:
            progress.end()
    return _with_rising_note(report, inp.name, inp.rising, testset)


def _counted(scored, progress, every=None):
    """``scored`` as it is, telling ``progress`` (if any) the count every
    ``every`` queries (default _PROGRESS_EVERY): no cost when it is None."""
    if progress is None:
        return scored
    return _counting(scored, progress, every or _PROGRESS_EVERY)


def _counting(scored, progress, every):
    for count, item in enumerate(scored, 1):
        yield item
        if not count % every:
            progress.scored(count)


def _scored_run_plain(inp, fmt, scorer, grouped=True):
    """(qid, scored tuple, or None for a query not in the qrels) per query of
    a run file, in file order, one query at a time."""
    return _scored_queries(scorer, _run_queries(inp, fmt, grouped))


_scored_run = _scored_run_plain     # hook: the accelerations install _scored_run_forked


def _scored_queries(scorer, queries):
    """(qid, scorer(qid, ranking)) per (qid, ranking); None for a query the
    qrels do not have (it is not scored)."""
    qrels = scorer.qrels
    for qid, ranking in queries:
        yield qid, (scorer(qid, ranking) if qid in qrels else None)


def _validated(data, what, check):
    if not isinstance(data, dict):
        raise EvalError("%s must be a dict {query_id: ...}, got %s" % (what, type(data).__name__))
    return {_as_id(q, "%s: query id" % what): check(q, v, what) for q, v in data.items()}


def _measure_values_plain(calls):
    """The function (ranked, grades) -> {name: value} of a scorer's measure
    calls, (name, func, args) each: every measure as its definition says.

    >>> values = _measure_values_plain([("mrr@3", mrr, (3, 1)), ("recall@3", recall, (3, 1))])
    >>> values(_from_grades([0, 2, -1]), (2, 1, 0))
    {'mrr@3': 0.5, 'recall@3': 0.5}
    """
    def values(ranked, grades):
        return {name: func(ranked, grades, *args) for name, func, args in calls}
    return values


_measure_values = _measure_values_plain   # hook: the accelerations score common ones in one pass


class _QueryScorer:
    """Scores one query at a time, in this process or in a worker.  A query
    scored is a plain tuple (values, duplicates, straddling, returned,
    unlabelled): its values (None when unscored), what ranking saw (see
    _Ranked), and whether its ids carry labels: None when the top K meets a
    label of every kind the measures look labels up by (see _label_checks),
    or nothing was retrieved; else one flag a kind (see _label_flags).  Plain
    tuples are cheap to make and to pickle."""

    def __init__(self, qrels, measures, rel, average="scored", labels=None, mapping=None):
        self.qrels, self.rel, self.average = qrels, rel, average
        self.every_query = average == "trec_eval"   # score unscored queries too
        self.names = tuple(str(m) for m in measures)
        self.depth, self.cutoffs = _plan(measures)
        self.calls = [(str(m),) + m._parts() for m in measures
                      if _REGISTRY[m.name].population != "unanswerable"]
        self.measure_values = _measure_values(self.calls)
        self.unanswerable_calls, self.aggregates = _answerability_calls(measures)
        # The measures of unanswerable queries only: the scored path skips them.
        self.apart = frozenset(str(m) for m in measures
                               if _REGISTRY[m.name].population == "unanswerable")
        if (self.unanswerable_calls or self.aggregates) and self.every_query:
            raise EvalError("abstention measures are not for trec_eval's average, which "
                            "knows no unanswerable query: drop them or the average")
        self.bounds = None          # see _ask_bounds: unjudged bounds and judged@k per query
        self.labels, self.mapping = labels, mapping or _Mapping()
        self.lost = None            # see _uncoverable
        self.units = [_UnitCall.of(m) for m in measures]
        self.mapped = any(call.view != "id" or call.budget for call in self.units)
        # The measures cut at a budget: each scored query reports the context it used.
        self.budgets = tuple((name, call.budget) for name, call in zip(self.names, self.units)
                             if call.budget)
        self.counts_docs = any(call.view == "doc" for call in self.units)
        # Once a ranking met a label of a kind, the run meets that kind's labels.
        self.checks = _label_checks(measures, self.units)
        self.met = [False] * len(self.checks)
        self.forkable = not self.mapped or self.mapping.external
        if self.mapped:
            self.mapping.index()
        if labels is not None:
            by_id = [str(m) for m, call in zip(measures, self.units)
                     if call.view == "id" and m.name != "diversity"]
            if by_id:
                raise EvalError("the qrels label documents and spans, not retrieved ids: %s "
                                "cannot count ids; score units instead (--unit doc or "
                                "evidence, e.g. recall(unit=doc)@5), with --chunks or --doc-sep"
                                % ", ".join(by_id[:3]))

    def __call__(self, qid, ranking):
        if self.min_score is not None and ranking is not None:
            ranking = _cut(qid, ranking, self.min_score)
        labels = self.qrels.get(qid, _NO_LABELS)
        grades = _sorted_grades(labels)
        scored = self.is_scored(grades)
        if self.mapped:     # (ranking already cut by min_score)
            return self._by_units(qid, ranking, labels, grades, scored)
        labels = _labels_for_ranking(ranking, labels)
        ranked = _rank(ranking, labels, self.depth, self.cutoffs, not scored)
        values = None
        if scored or self.every_query:
            try:
                values = self.measure_values(ranked, grades)
            except EvalError as exc:
                raise EvalError("qrels: query %r: %s" % (qid, exc)) from None
        elif qid in self.unanswerable:
            values = self._unanswerable_values(ranked, grades)
        if ranked.labelled or not ranked.length:   # (measures over ids only: one check)
            unlabelled = None
            self.met[0] = self.met[0] or bool(ranked.labelled)
        else:
            unlabelled = self._label_flags({"id": False}, ranking, labels)
        if self.bounds is not None and (scored or self.every_query):
            return (values, ranked.duplicates, ranked.straddling, ranked.returned, unlabelled,
                    _query_unjudged(self, ranked, grades, ranking,
                                    self.qrels.get(qid, _NO_LABELS)))
        return values, ranked.duplicates, ranked.straddling, ranked.returned, unlabelled

    def _by_units(self, qid, ranking, labels, grades, scored):
        """__call__ when measures count documents, evidence or characters, or
        cut at a budget: the top chunks are resolved (see _Mapping) and each
        unit's ranking is built once per query, on first use."""
        if ranking is None:
            ids, scores, read, returned, chunks = [], [], 0, 0, []
        else:
            ranking, top, scores, read, distinct = _top_chunks(ranking, self.depth)
            ids, returned = top[:self.depth], len(distinct)
            try:
                chunks = self.mapping.resolve(ranking, ids, distinct)
            except EvalError as exc:
                raise _RunError("query %r: %s%s" % (qid, exc, self._needing())) from None
        straddling = 0 if isinstance(ranking, list) else _straddling(scores, self.cutoffs,
                                                                      len(scores))
        ranked = _Ranked(_labelled(map(labels.get, ids)), len(ids), read - len(ids), straddling,
                         returned)
        doc_units = _doc_units(ids, chunks, labels, returned) if self.counts_docs else None
        values = used = None
        if scored or self.every_query:
            views = {"id": (ranked, grades), "doc": (doc_units, grades)}
            values, cuts = {}, {}
            try:
                for name, call in zip(self.names, self.units):
                    if name in self.apart:
                        continue
                    if call.view not in views:
                        views[call.view] = self._view(qid, call.view, labels, ids, chunks,
                                                      returned)
                    unit_ranking, unit_grades = views[call.view]
                    args = call.args
                    if call.budget:
                        if call.budget not in cuts:
                            cuts[call.budget] = _budget_cut(ids, chunks, call.budget)
                        args = (cuts[call.budget][0],) + args
                    value = call.func(unit_ranking, unit_grades, *args)
                    if value is not None:
                        values[name] = value
            except _NoSpan as exc:     # the run's chunks (or the map's): the run is named
                raise _RunError("query %r: %s%s" % (qid, exc, _unplaced_note(exc, ranking))) \
                    from None
            except EvalError as exc:
                raise EvalError("query %r: %s" % (qid, exc)) from None
            if self.budgets:    # (used, ran out, in tokens) of each budget measure scored
                used = tuple(cuts[budget][1:] if name in values else None
                             for name, budget in self.budgets)
        elif qid in self.unanswerable:
            values = self._unanswerable_values(ranked, grades)
        # A measure meets a label when what it counts (ids, or their documents) carries one.
        unlabelled = None if not ids else self._label_flags({
            "id": bool(ranked.labelled),
            "doc": bool(doc_units.labelled) if doc_units is not None else
            any(labels.get(chunk.doc, -1) >= 0 for chunk in chunks)}, ranking, labels)
        bounded = self.bounds is not None and (scored or self.every_query)
        if bounded or used is not None:
            return (values, read - len(ids), straddling, returned, unlabelled,
                    _query_unjudged(self, ranked, grades, ranking, labels) if bounded else None,
                    used)
        return values, read - len(ids), straddling, returned, unlabelled

    def _needing(self):
        """Which measures need where chunks come from, when neither a chunk map
        nor a separator is given (said after the error: a measure the
        command line took from a baseline is then named)."""
        if self.mapping.external:
            return ""
        names = [name for name, call in zip(self.names, self.units)
                 if call.view != "id" or call.budget]
        return " (for %s%s)" % (", ".join(names[:3]), ", ..." if len(names) > 3 else "")

    def _view(self, qid, view, labels, ids, chunks, returned):
        """(unit ranking, unit grades) of a view other than id and doc."""
        spans = self.labels.get(qid, {}) if self.labels is not None else {
            doc: [(None, None, grade)] for doc, grade in labels.items()}
        if view == "spans":
            return _Context(ids, chunks, {}), spans
        _, rel, cover = view
        units = _evidence(spans, rel)
        return (_evidence_units(units, ids, chunks, cover, returned),
                tuple(sorted((unit[3] for unit in units), reverse=True)))

    def _label_flags(self, top, ranking, labels):
        """None when the top K meets a label of every kind checked (``top``:
        kind -> True when it does); else a flag per kind of self.checks:
        None (the top K meets one), True (a deeper id does, or an earlier
        query's ranking did) or an example (an id, or a document) showing
        that the whole ranking meets none."""
        if all(top[kind] for kind, _ in self.checks):
            for i in range(len(self.met)):
                self.met[i] = True
            return None
        flags = []
        for i, (kind, _) in enumerate(self.checks):
            if top[kind]:
                flag = None
            elif self.met[i]:
                flag = True     # the whole-ranking look is needed only until a label is met
            elif kind == "id":
                flag = _unlabelled(ranking, labels)
            else:
                flag = self._unlabelled_docs(ranking, labels)
            self.met[i] = self.met[i] or flag is None or flag is True
            flags.append(flag)
        return tuple(flags)

    def _unlabelled_docs(self, ranking, labels):
        """_unlabelled over the whole ranking, where a retrieved chunk is
        labelled through its document: True, else the document of the best
        ranked id as an example."""
        chunks = self.mapping.resolve(ranking, list(_ids_of(ranking)))
        if any(labels.get(c.doc, -1) >= 0 for c in chunks):
            return True
        return self.mapping.resolve(ranking, [_best_id(ranking)])[0].doc

    unanswerable = frozenset()      # the queries stated unanswerable (see _answerability)
    min_score = None                # ids scored below it are dropped first (see _cut)

    def _unanswerable_values(self, ranked, grades):
        """The values of a query stated unanswerable: its measures' and the
        set-level measures' cells; None when no measure is about it."""
        if not self.unanswerable_calls:
            return None
        return {name: func(ranked, grades, *args) for name, func, args in self.unanswerable_calls}

    def ask_bounds(self, measures):
        """Score the unjudged bounds of every bounded measure and judged@k at
        every cutoff over ids too (see _query_unjudged); measures over units
        have none."""
        self.bounds = [(m, str(m)) + m._parts() for m in measures if _bounded(m)]
        self.judged_at = _judged_cutoffs(measures)
        self.bounds_depth = max([m.k if isinstance(m.k, int) else _WHOLE_RANKING
                                 for m, *_ in self.bounds] or [0])

    def ask_judged(self, measures):
        """Score judged@k only, at every cutoff over ids (what every gate shows
        beside its measures, see _with_unjudged): no bounds, no ids listed."""
        cutoffs = _judged_cutoffs(measures)
        if cutoffs:         # else (measures over units only) nothing to add per query
            self.bounds, self.judged_at, self.bounds_depth = [], cutoffs, 0

    trimmed = None      # with trim_label_whitespace: see _trim_counts

    def is_scored(self, grades):
        """True when a query's grades (see _sorted_grades) hold a relevant one;
        else the query is unscored."""
        return bool(grades) and grades[0] >= self.rel


class _RunError(EvalError):
    """An error in the run's rankings, raised per query; _score names the run."""


def _budget_cut(ids, chunks, budget):
    """(n, used, ran out, in tokens): how many of the top chunks fit the
    budget, the longest prefix whose sizes (tokens, else end - start
    characters) sum to at most ``budget``; the context they fill; whether
    the ranking ran out of chunks before the budget (all of them together
    are smaller); whether sizes are tokens (None: no chunk).

    >>> _budget_cut(["a", "b", "c"], [Chunk("d", 0, 50), Chunk("d", 50, 80), Chunk("d", 0, 5)], 70)
    (1, 50, False, False)
    >>> _budget_cut(["a", "b"], [Chunk("d", tokens=20), Chunk("e", tokens=30)], 70)
    (2, 50, True, True)
    """
    used = 0
    for n, (chunk_id, chunk) in enumerate(zip(ids, chunks)):
        if chunk.tokens is not None:
            size = chunk.tokens
        elif chunk.start is not None:
            size = chunk.end - chunk.start
        else:
            raise _NoSpan("chunk %r has no size: a budget needs tokens or start/end in the "
                          "chunk map" % chunk_id, chunk_id)
        if used + size > budget:
            return n, used, False, chunk.tokens is not None
        used += size
    return len(ids), used, used < budget, chunks[0].tokens is not None if chunks else None


class _Mapping:
    """Where each retrieved id comes from (its Chunk): a chunk map, the part of
    the id before the last ``doc_sep``, or the run's own fields (objects in a
    ranked list, see _MappedRanking).  Given a map or a separator, the run's
    fields must agree with it."""

    def __init__(self, chunks=None, doc_sep=None):
        if chunks is not None and doc_sep is not None:
            raise EvalError("give a chunk map or a document separator, not both "
                            "(--chunks or --doc-sep)")
        if doc_sep is not None and (not isinstance(doc_sep, str) or not doc_sep):
            raise EvalError("doc_sep must be a non-empty string, got %s" % _short_repr(doc_sep))
        self.chunks, self.doc_sep, self.inline = chunks, doc_sep, {}
        self.sized = set()          # whether the run's chunks give tokens: all or none
        self.chunk_ids = None       # the map's ids as a frozenset, once indexed (see index)
        self.label_versions = {}    # doc -> (qid, doc_sha256) of the labels

    @property
    def external(self):
        return self.chunks is not None or self.doc_sep is not None

    def resolve(self, ranking, ids, distinct=None):
        """The Chunk of each of ``ids`` (from ``ranking``, whose ``distinct``
        ids may be given).  The run's own fields fill in what the map or the
        separator does not say (a span, tokens)."""
        own = getattr(ranking, "chunks", None) or {}
        if own:
            self._take(own)
        if self.doc_sep is not None:
            return [own.get(chunk_id) or Chunk(_doc_of(chunk_id, self.doc_sep))
                    for chunk_id in ids]
        table = self.chunks if self.chunks is not None else self.inline
        docs = _ids_of(ranking)
        known = self.chunk_ids if self.chunk_ids is not None else table.keys()
        if not known >= (set(docs) if distinct is None else distinct):
            missing = next(doc for doc in docs if doc not in table)
            if self.chunks is not None:
                raise EvalError("retrieved id %r is not in the chunk map" % missing)
            raise EvalError("retrieved id %r has no document: give a chunk map (--chunks) or "
                            "--doc-sep, or doc/start/end for it in the run (or name its "
                            "document's field: --doc-field)" % missing)
        if own and self.chunks is not None:
            return [_filled(table[chunk_id], own.get(chunk_id)) for chunk_id in ids]
        return list(map(table.__getitem__, ids))

    def index(self):
        """Keep the chunk map's ids as a frozenset too, made once before any
        worker forks (they share it): on a 1M-id map, a set checks a query's
        ids in about 60% of the dict's time (fewer cache misses a look-up)."""
        if self.chunks is not None and self.chunk_ids is None:
            self.chunk_ids = frozenset(self.chunks)

    def _take(self, own):
        """Check the run's own chunk fields: against the map or separator, or
        against what the run said before; tokens on all or none; the labels'
        document versions."""
        for chunk_id, chunk in own.items():
            self.sized.add(chunk.tokens is not None)
            if len(self.sized) > 1:
                raise EvalError("tokens are given for some chunks of the run and not others "
                                "(not for %r or another): give them for all or none"
                                % chunk_id)
            seen = self.label_versions.get(chunk.doc)
            if seen and chunk.doc_sha256 is not None and seen[1] != chunk.doc_sha256:
                raise EvalError("labels (query %r) were written against %s %s..., the chunks "
                                "come from %s...: the document changed; label it again or "
                                "chunk the labelled version"
                                % (seen[0], chunk.doc, seen[1][:12], chunk.doc_sha256[:12]))
            if not self.external:
                if self.inline.setdefault(chunk_id, chunk) != chunk:
                    raise EvalError("chunk %r is given twice with different fields (%s and %s)"
                                    % (chunk_id, _chunk_text(self.inline[chunk_id]),
                                       _chunk_text(chunk)))
                continue
            known = (Chunk(_doc_of(chunk_id, self.doc_sep)) if self.doc_sep is not None
                     else self.chunks.get(chunk_id))
            if known is not None and not _agree(known, chunk):
                raise EvalError("the run places %r at %s, the %s at %s"
                                % (chunk_id, _chunk_text(chunk), "chunk map" if self.chunks
                                   is not None else "--doc-sep", _chunk_text(known)))

    def info(self):
        """What the report says of the mapping."""
        return {"doc_sep": self.doc_sep, "offsets": "code points",
                "source": "chunk map" if self.chunks is not None else "doc_sep"
                if self.doc_sep is not None else "run" if self.inline else None}


def _agree(known, given):
    """True when two accounts of a chunk agree where both say something."""
    return known.doc == given.doc and all(
        a is None or b is None or a == b for a, b in ((known.start, given.start),
                                                      (known.end, given.end),
                                                      (known.tokens, given.tokens),
                                                      (known.doc_sha256, given.doc_sha256)))


def _filled(known, given):
    """``known`` (the map's Chunk) with what it leaves out taken from ``given``."""
    if given is None:
        return known
    return Chunk(known.doc, *(a if a is not None else b for a, b in (
        (known.start, given.start), (known.end, given.end), (known.tokens, given.tokens),
        (known.doc_sha256, given.doc_sha256))))


def _check_versions(versions, mapping):
    """Each doc_sha256 a label gives must be the chunk map's for that document."""
    known = getattr(mapping.chunks, "versions", None) or {}
    for qid, docs in sorted(versions.items()):
        for doc, sha in sorted(docs.items()):
            if doc in known and known[doc] != sha:
                raise EvalError("query %r: labels were written against %s %s..., the chunks "
                                "come from %s...: the document changed; label it again or "
                                "chunk the labelled version" % (qid, doc, sha[:12],
                                                                  known[doc][:12]))


def _scorer(qrels, measures, rel, average, chunks=None, doc_sep=None, testset=None,
            min_score=None, bounds=False, trim=False, whole=True):
    """The _QueryScorer of validated qrels (id labels or label lists), of the
    mapping given (a _ChunkMap, a separator, or neither) and of the queries
    the test set states unanswerable; ``bounds``: it scores the unjudged
    bounds too (see _QueryScorer.ask_bounds), or with "judged" judged@k only
    (see _QueryScorer.ask_judged); ``trim``: span labels that carry their
    text are narrowed past the whitespace at its ends (see _trimmed_span);
    ``whole``: False when the qrels are a shard's (see score_rows), whose
    queries alone may have no label to trim."""
    for m in measures:
        if m.name == "score":
            raise EvalError("%s is read from a score file: evaluate_scores() (--scores FILE "
                            "on the command line); evaluate() scores runs" % (m,))
    if not isinstance(trim, bool):
        raise EvalError("trim_label_whitespace must be True or False, got %s" % _short_repr(trim))
    counts = _trim_counts(qrels, whole) if trim else None
    grades, spans, versions = _split_qrels(qrels, trim)
    mapping = _Mapping(chunks, doc_sep)
    _check_versions(versions, mapping)
    for qid, docs in sorted(versions.items()):
        for doc, sha in sorted(docs.items()):
            mapping.label_versions.setdefault(doc, (qid, sha))
    scorer = _QueryScorer(grades, measures, rel, average, spans, mapping)
    scorer.min_score = _checked_min_score(min_score)
    scorer.trimmed = counts
    if bounds == "judged":
        scorer.ask_judged(measures)
    elif bounds:
        scorer.ask_bounds(measures)
    return _answerability(scorer, testset and testset.queries)


def _checked_min_score(min_score):
    if min_score is None:
        return None
    return _finite(min_score, "min_score")


def _split_qrels(qrels, trim=False):
    """(grades, spans, versions) of validated qrels.  Id labels pass as they are
    (spans None).  Label lists become the documents' grades (the highest label
    on each, so every policy on scored queries holds), the span labels by
    document {qid: {doc: [(start, end, grade)]}} (start/end None: the whole
    document; with ``trim``, a span whose label carries its text narrowed
    past the whitespace at its ends, see _trimmed_span) and the labels'
    doc_sha256 {qid: {doc: sha}}.

    >>> _split_qrels({"q": [Label("a", 0, 5, 1), Label("a", 9, 12, 2), Label("b", None, None, 0)]})
    ({'q': {'a': 2, 'b': 0}}, {'q': {'a': [(0, 5, 1), (9, 12, 2)], 'b': [(None, None, 0)]}}, {})
    """
    forms = {type(labels) is list for labels in qrels.values() if labels}   # {}: either form
    if True not in forms:
        if any(type(labels) is list for labels in qrels.values()):    # [] beside {id: grade}
            qrels = {qid: labels or {} for qid, labels in qrels.items()}
        return qrels, None, {}
    if False in forms:
        raise EvalError("qrels: some queries give {id: grade} and others lists of labels; "
                        "write one form")
    grades, spans, versions = {}, {}, {}
    first = {}      # doc -> (qid, doc_sha256) of its first versioned label
    for qid, labels in qrels.items():
        grades[qid], spans[qid] = {}, {}
        for label in labels:
            grades[qid][label.doc] = max(label.grade, grades[qid].get(label.doc, label.grade))
            start, end = label.start, label.end
            if trim and start is not None and label.text is not None:
                start, end = _trimmed_span(qid, label)
            spans[qid].setdefault(label.doc, []).append((start, end, label.grade))
            if label.doc_sha256 is not None:
                _check_one_version(first, qid, label)
                versions.setdefault(qid, {})[label.doc] = label.doc_sha256
    return grades, spans, versions


def _trimmed_span(qid, label):
    """(start, end) of a span label narrowed past the whitespace (str.strip's:
    spaces, tabs, line breaks, and the other Unicode white space) at the
    ends of its ``text``, which must be as long as the span.  A splitter
    that strips its chunks (LangChain's does) never holds that whitespace,
    and an exact cover=1 would count the span lost over one space.

    >>> _trimmed_span("q1", Label("a.md", 10, 19, 1, text=" Refund\\n "))
    (11, 17)
    """
    text = label.text
    where = "qrels: query %r: the span label %s [%d, %d)" % (qid, label.doc, label.start,
                                                             label.end)
    if len(text) != label.end - label.start:
        raise EvalError("%s carries a text of %d code points, and the span is %d: the offsets "
                        "and the text disagree (byte offsets?), so --trim-label-whitespace "
                        "cannot narrow it" % (where, len(text), label.end - label.start))
    kept = text.strip()
    if not kept:
        raise EvalError("%s: its text is white space only: no evidence is left to label"
                        % where)
    start = label.start + len(text) - len(text.lstrip())
    return start, start + len(kept)


def _trim_counts(qrels, required=True):
    """{qid: (span labels, narrowed, without text)} of label-list qrels, for
    --trim-label-whitespace (trim_label_whitespace=True): an error when no
    span label carries its text (and they are ``required``: not a shard's),
    since the option would then do nothing.

    >>> _trim_counts({"q": [Label("a", 0, 3, 1, text=" ab"), Label("a", 5, 9, 1, text="abcd"),
    ...                     Label("b", 0, 4, 1), Label("b", None, None, 1, text="x")]})
    {'q': (3, 1, 1)}
    """
    counts = {}
    for qid, labels in qrels.items():
        spans = [label for label in labels if label.start is not None] if type(
            labels) is list else ()
        if spans:
            counts[qid] = (len(spans), sum(1 for label in spans if label.text is not None
                                           and label.text != label.text.strip()),
                           sum(1 for label in spans if label.text is None))
    if required and not any(total > without for total, _, without in counts.values()):
        raise EvalError("trim_label_whitespace (--trim-label-whitespace): no span label of the "
                        "qrels carries its text, so none can be narrowed: give each span "
                        "label its \"text\" (the characters [start, end) of its document)")
    return counts


def _check_one_version(first, qid, label):
    """A document is labelled against one version (doc_sha256) in every query:
    spans of two versions do not point at the same characters, whatever the
    chunk map says.  ``first`` maps each document to (qid, sha) of its first
    versioned label.

    >>> first = {}
    >>> _check_one_version(first, "q1", Label("A", None, None, 1, "a" * 64))
    >>> _check_one_version(first, "q2", Label("A", 0, 5, 1, "b" * 64))
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: qrels: document 'A' is labelled against two versions: doc_sha256 aaaaaaaaaaaa... in query 'q1' and bbbbbbbbbbbb... in query 'q2'; label one version
    """
    seen = first.setdefault(label.doc, (qid, label.doc_sha256))
    if seen[1] != label.doc_sha256:
        raise EvalError("qrels: document %r is labelled against two versions: doc_sha256 "
                        "%s... in query %r and %s... in query %r; label one version"
                        % (label.doc, seen[1][:12], seen[0], label.doc_sha256[:12], qid))


def _cut(qid, ranking, min_score):
    """The ranking without the ids scored below ``min_score`` (--min-score,
    the production similarity cut-off), before anything else reads it.  A
    ranked list without scores cannot be cut: an error.

    >>> _cut("q", {"a": 0.9, "b": 0.2}, 0.5), _cut("q", _Scored(["a", "b"], [0.9, 0.2]), 0.95)
    ({'a': 0.9}, _Scored(docs=[], scores=[]))
    """
    if isinstance(ranking, dict):
        return {doc: score for doc, score in ranking.items() if float(score) >= min_score}
    if type(ranking) is _Scored:
        kept = [(d, s) for d, s in zip(*ranking) if float(s) >= min_score]
        return _Scored([d for d, _ in kept], [s for _, s in kept])
    scores = getattr(ranking, "scores", None)
    if scores is None:
        if not ranking:
            return ranking
        raise _RunError("query %r: --min-score (min_score=) needs scores, and this ranking is "
                        "a ranked list without them" % qid)
    out = _MappedRanking(d for d, s in zip(ranking, scores) if s >= min_score)
    out.chunks, out.scores = ranking.chunks, [s for s in scores if s >= min_score]
    out.texts = ranking.texts
    out.unplaced = ranking.unplaced
    return out


def _answerability_calls(measures):
    """(calls, aggregates): the (name, func, args) of the measures a query
    stated unanswerable is scored on (its own and the set-level ones), and
    the names of the set-level measures (see measure(aggregate=))."""
    calls = [(str(m),) + m._parts() for m in measures
             if _REGISTRY[m.name].population in _UNANSWERABLE_POPULATIONS]
    return calls, frozenset(str(m) for m in measures if _REGISTRY[m.name].aggregate)


def _answerability(scorer, queries):
    """Give ``scorer`` the queries that query metadata states unanswerable
    (``"answerable": false``) among its qrels; one that holds a relevant id
    is an error.  Answerability is never inferred from missing labels."""
    if not queries:
        return scorer
    stated = frozenset(qid for qid, info in queries.items()
                       if info.get("answerable") is False and qid in scorer.qrels)
    for qid in sorted(stated):
        if scorer.is_scored(_sorted_grades(scorer.qrels[qid])):
            raise EvalError('qrels: query %r is stated unanswerable ("answerable": false) but '
                            "has a relevant id (grade >= %d): drop the statement or the labels"
                            % (qid, scorer.rel))
    scorer.unanswerable = stated
    return scorer


# --- --sweep-min-score: abstention against retrieval, threshold by threshold ---
#
# Each row is the run scored with --min-score at one threshold: exact, never
# interpolated.  A row costs one scoring of the run, so the thresholds are
# capped (SWEEP_MAX_THRESHOLDS, see _sweep_thresholds).

SWEEP_MAX_THRESHOLDS = 100
_SWEEP_WARNING = ("a threshold chosen from this table flatters it: it is tuned on the same "
                  "queries it is scored on; confirm it on queries it was not chosen on")


class Sweep(NamedTuple):
    """The rows of --sweep-min-score: (threshold, abstention_f1, the measure's
    mean), threshold None ("no cut") first, then ascending; ``distinct`` is the
    number of distinct scores the run holds (more than the rows when capped)."""
    measure: str
    rows: tuple
    distinct: int
    notes: tuple

    def to_dict(self):
        return {"measure": self.measure, "distinct_scores": self.distinct,
                "notes": list(self.notes),
                "rows": [{"min_score": t, "abstention_f1": f1, self.measure: value}
                         for t, f1, value in self.rows]}


def sweep_min_score(qrels, run, measure, *, rel=1, gain="exponential", queries=None,
                    skip_extra_queries=False, max_thresholds=SWEEP_MAX_THRESHOLDS):
    """``abstention_f1`` and the mean of ``measure`` with ``min_score`` at "no
    cut" and at each distinct score of ``run`` (at most ``max_thresholds`` of
    them, see _sweep_thresholds); a :class:`Sweep`.  It needs queries stated
    unanswerable (``queries`` metadata, ``"answerable": false``).

    >>> s = sweep_min_score({"q1": {"a": 1}, "q9": {}}, {"q1": {"a": 0.8, "b": 0.4},
    ...                     "q9": {"c": 0.6}}, "recall@1", queries={"q9": {"answerable": False}})
    >>> [(t, round(f1, 4), value) for t, f1, value in s.rows]   # at 0.8 q9 abstains
    [(None, 0.3333, 1.0), (0.4, 0.3333, 1.0), (0.6, 0.3333, 1.0), (0.8, 1.0, 1.0)]
    """
    run = _validated(run, "run", _check_run_query)
    name = str(_one_measure(measure, rel, gain))

    def score_at(threshold):
        return evaluate(qrels, run, measures=[name, "abstention_f1"], rel=rel, gain=gain,
                        queries=queries, skip_extra_queries=skip_extra_queries,
                        min_score=threshold)
    return _sweep(score_at, name, _run_scores(run.items()), max_thresholds)


def _one_measure(name, rel=1, gain="exponential", unit="id", k=DEFAULT_K):
    """The one measure ``name`` names (a name taken at several cutoffs is refused)."""
    found = resolve_measures(name, k, rel=rel, gain=gain, unit=unit)
    if len(found) != 1:
        raise EvalError("--sweep-min-score (sweep_min_score) takes one measure, and %r is %d: "
                        "give its cutoff, e.g. %s" % (name, len(found), found[0]))
    return found[0]


def _run_scores(rankings):
    """Every score of the (query, ranking) pairs of a checked run; a non-empty
    ranking without scores is an error (--min-score could not cut it).

    >>> sorted(_run_scores([("q1", {"a": 0.5, "b": 0.25}), ("q2", [])]))
    [0.25, 0.5]
    """
    for qid, ranking in rankings:
        scores = (ranking.values() if isinstance(ranking, dict)
                  else getattr(ranking, "scores", None))
        if scores is None and ranking:
            raise EvalError("query %r: --sweep-min-score needs scores, and this ranking is a "
                            "ranked list without them" % qid)
        yield from map(float, scores or ())


def _sweep_thresholds(scores, cap):
    """The distinct scores, ascending; above ``cap`` of them, ``cap`` taken at
    evenly spaced ranks (the lowest and the highest kept): quantiles of the
    distinct scores, each still an exact row.

    >>> _sweep_thresholds([0.5, 0.1, 0.5, 0.3], 10)
    [0.1, 0.3, 0.5]
    >>> _sweep_thresholds(range(10), 4)   # ranks 0, 3, 6, 9 of 0..9
    [0, 3, 6, 9]
    """
    distinct = sorted(set(scores))
    if len(distinct) <= cap:
        return distinct
    last = len(distinct) - 1
    return [distinct[(i * last + (cap - 1) // 2) // (cap - 1)] for i in range(cap)]


def _sweep(score_at, name, scores, cap=SWEEP_MAX_THRESHOLDS):
    """The Sweep of ``score_at(threshold)`` (a Report) at "no cut" (None) and
    at the thresholds of ``scores``."""
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 2:
        raise EvalError("max_thresholds must be an integer >= 2, got %s" % _short_repr(cap))
    scores = list(scores)
    distinct = len(set(scores))
    first = score_at(None)
    if not (first.answerability or {}).get("unanswerable"):
        raise EvalError('--sweep-min-score needs queries stated unanswerable ("answerable": '
                        "false): without them abstention_f1 only counts answerable queries "
                        "that abstained, and no threshold can gain anything")
    rows = []
    for threshold, report in itertools.chain([(None, first)], (
            (t, score_at(t)) for t in _sweep_thresholds(scores, cap))):
        rows.append((threshold, report.mean.get("abstention_f1"), report.mean.get(name)))
    notes = [_SWEEP_WARNING]
    if distinct > cap:
        notes.append("the run holds %d distinct scores: the rows are %d of them at evenly "
                     "spaced ranks (quantiles), each exact" % (distinct, cap))
    return Sweep(name, tuple(rows), distinct, tuple(notes))


_NO_LABELS = {}
_STRAYS_KEPT = 1000     # retrieved ids kept to find why a run meets no label


def _score(scorer, scored, skip_extra, run_name, testset=None):
    """The report over a stream of (qid, scored tuple or None: not in the
    qrels), see _scored_queries; qrels queries absent from it score 0.  With
    a _TestSet, the hold-out's queries are set apart before any list or
    warning is made, and the report gets its slices (see _TestSet.report)."""
    qrels, names, rel = scorer.qrels, scorer.names, scorer.rel
    per_query, abstention, ties, extra, unlabelled, empty = {}, {}, {}, [], [], []
    unjudged_rows = {}  # scorer.bounds: each scored query's _query_unjudged
    budget_rows = {}    # scorer.budgets: each scored query's context used (see _by_units)
    no_relevant = {}    # average="trec_eval": the run's queries with no relevant id
    repeated = []       # queries whose ranking repeats an id
    # Per label check (see _label_checks): whether the run met a label of its kind, and
    # strays, (qid, example id or document) of the rankings that meet none.
    met = [False] * len(scorer.checks)
    strays = [[] for _ in scorer.checks]
    cells = {}          # {qid: {set-level measure: cell}}, see _take_cells

    def add(qid, result, in_run=True):
        values, duplicates, straddling, returned, no_label = result[:5]
        if len(result) > 5:
            if result[5] is not None:
                unjudged_rows[qid] = result[5]
            if len(result) > 6 and result[6] is not None:
                budget_rows[qid] = result[6]
        if values is not None and scorer.every_query and not scorer.is_scored(
                _sorted_grades(qrels[qid])):
            if in_run:
                no_relevant[qid] = values
            values = None
        if values is not None and scorer.aggregates:
            values = _take_cells(qid, values, scorer, cells)
        if values is None:
            abstention[qid] = returned
        else:
            per_query[qid] = values
            if straddling:
                ties[qid] = straddling
            if no_label is not None and qid not in scorer.unanswerable:
                unlabelled.append(qid)
        if duplicates:
            repeated.append(qid)
        if no_label is None:
            if returned > 0:
                met[:] = [True] * len(met)
        else:
            for i, flag in enumerate(no_label):
                if flag is None or flag is True:
                    met[i] = True
                elif len(strays[i]) < _STRAYS_KEPT:
                    strays[i].append((qid, flag))
        return values is not None and returned == 0 and qid not in scorer.unanswerable

    try:
        for qid, result in scored:      # a stream names each query once (the readers check)
            if result is None:
                extra.append(qid)
            elif add(qid, result):
                empty.append(qid)
    except _RunError as exc:
        raise EvalError("%s: %s" % (run_name, exc)) from None
    absent = sorted(set(qrels).difference(per_query, abstention))
    missing = [qid for qid in absent if scorer.is_scored(_sorted_grades(qrels[qid]))]
    for qid in absent:
        add(qid, scorer(qid, None), in_run=False)
    hidden, held = frozenset(), None
    if testset is not None:
        extra = [qid for qid in extra if qid not in testset.expired]   # not in the test set now
        hidden = testset.hidden
        held = _set_apart(hidden, per_query, abstention, missing)
        if hidden:
            missing, empty, unlabelled, repeated = (
                [q for q in ids if q not in hidden] for ids in (missing, empty, unlabelled,
                                                                 repeated))
            ties = {q: n for q, n in ties.items() if q not in hidden}
            strays = [[stray for stray in kept if stray[0] not in hidden] for kept in strays]
            qrels = {q: labels for q, labels in qrels.items() if q not in hidden}
    extra.sort()
    if extra and not skip_extra:
        raise EvalError("%s: %s not in the qrels: %s (check the files match, or skip them "
                        "with --skip-extra-queries)"
                        % (run_name, _plural(len(extra), "query is", "queries are"),
                           _preview(extra)))
    if not per_query and not cells:
        if held and held[0]:
            raise EvalError("every scored query is in the hold-out %s: the overall mean would "
                            "be over none" % testset.holdout)
        raise EvalError("no query in the qrels has a relevant id (grade >= %d): nothing to score"
                        % rel)
    answerability = _answerability_counts(per_query, abstention, scorer.unanswerable - hidden)
    if scorer.every_query:
        # trec_eval without -c: the queries the run and the qrels share.
        per_query.update(no_relevant)
        for qid in no_relevant:     # in the means now: not unscored
            del abstention[qid]
        for qid in missing:
            del per_query[qid]
        if not per_query:
            raise EvalError("no query of the run is in the qrels: trec_eval's average is "
                            "over none")
    warnings = []
    if missing:
        warnings.append("%s in the qrels not in the run, %s: %s"
                        % (_plural(len(missing), "query", "queries"),
                           "left out of the means (trec_eval's average)" if scorer.every_query
                           else "scored 0", _preview(missing)))
    if empty:
        warnings.append("%s retrieved nothing, scored 0: %s"
                        % (_plural(len(empty), "query", "queries"), _preview(sorted(empty))))
    if repeated:
        warnings.append("%s repeat ids; each id counts once, at its best position"
                        % _plural(len(repeated), "query", "queries"))
    if extra:
        warnings.append("skipped %s not in the qrels: %s"
                        % (_plural(len(extra), "run query", "run queries"), _preview(extra)))
    if ties:
        warnings.append("%s cross a cutoff (ties broken by doc id descending, as trec_eval)"
                        % _plural(sum(ties.values()), "tied score group", "tied score groups"))
    unlabelled_run = None
    unlabelled.sort()
    # A run that abstained everywhere is an answer when abstention is measured.
    abstaining = not any(strays) and any(_REGISTRY[parse_measure(m).name].population in (
        "answerable", "unanswerable", "stated") for m in names)
    if not all(met) and not abstaining:
        unlabelled_run = _unlabelled_run(qrels, scorer.checks, met, strays, extra)
        warnings.append("%s: %s" % (run_name, unlabelled_run))
    elif unlabelled:
        warnings.append("%s no labelled id (grade >= 0) in the %s: %s; unlabelled ids "
                        "count as non-relevant, so label them before trusting a drop"
                        % (_plural(len(unlabelled), "query has", "queries have"),
                           "ranking" if scorer.depth == _WHOLE_RANKING else
                           "top %d" % scorer.depth, _preview(unlabelled)))
    per_query = dict(sorted(per_query.items()))
    counts = None
    if scorer.mapped or scorer.apart or scorer.aggregates:
        mean, counts = _population_means(per_query, names, {
            q: c for q, c in cells.items() if q not in hidden})
        for name in names:
            if name not in mean:    # as "no query has a relevant id": nothing to average
                raise EvalError(_nothing_to_average(name))
        warnings.extend(_population_notes(per_query, names, counts))
        warnings.extend(_label_notes(scorer, hidden))
        budget = _budget_summary(scorer.budgets, budget_rows, per_query)
        warnings.extend(_budget_notes(budget))
    else:
        mean = dict(zip(names, map(_mean, _columns(per_query.values(), names))))
    report = Report(names, mean, per_query, tuple(sorted(abstention)), tuple(missing),
                    tuple(extra), dict(sorted(abstention.items())), dict(sorted(ties.items())),
                    tuple(warnings), rel, None, tuple(unlabelled), unlabelled_run,
                    scorer.average, counts,
                    _mapping_info(scorer, hidden) if scorer.mapped else None,
                    answerability=answerability, cells=cells or None)
    if scorer.bounds is not None:
        report = report._replace(unjudged=_unjudged_summary(unjudged_rows, names, per_query))
    if scorer.budgets:
        report = report._replace(budget=budget)
    return report if testset is None else testset.report(report, held)


def _budget_summary(budgets, rows, per_query):
    """The report's ``budget`` (see Report): per measure cut at a budget, the
    mean context used over the queries it scored (``per_query``: the hold-out
    is out of it), how many of them ran out of retrieved chunks before the
    budget, and whether sizes were tokens or characters.  ``rows`` holds each
    query's (used, ran out, in tokens) per budget measure (see _by_units).

    >>> _budget_summary([("recall(budget=60)", 60)], {"q1": ((50, True, True),),
    ...                 "q2": ((60, False, True),)}, {"q1": {}, "q2": {}})
    {'recall(budget=60)': {'budget': 60, 'used': 55.0, 'ran_out': 1, 'queries': 2, 'unit': 'tokens'}}
    """
    out = {}
    for i, (name, budget) in enumerate(budgets):
        use = [rows[q][i] for q in per_query if q in rows and rows[q][i] is not None]
        if not use:
            continue
        kinds = {tokens for _, _, tokens in use if tokens is not None}
        out[name] = {"budget": budget, "used": _mean([used for used, _, _ in use]),
                     "ran_out": sum(1 for _, ran_out, _ in use if ran_out),
                     "queries": len(use),
                     "unit": "tokens" if True in kinds else "characters" if kinds else None}
    return out


def _budget_notes(budget):
    """One warning per budget that some queries could not fill: a run cut at
    a budget is scored on less context than it where its retrieved chunks
    run out first, so two runs compare at equal cost only when neither does.
    Measures with the same numbers share a warning.

    >>> print(_budget_notes({"recall(budget=600,unit=evidence)": {"budget": 600, "used": 512.25,
    ...                      "ran_out": 59, "queries": 100, "unit": "tokens"}})[0])
    recall(budget=600,unit=evidence): 59 of 100 queries ran out of retrieved chunks before the budget (all their retrieved chunks together hold fewer than 600 tokens), so they are scored on less context: 512.2 tokens used on average; retrieve deeper to compare at equal cost
    """
    groups = {}
    for name, use in budget.items():
        if use["ran_out"]:
            key = tuple(use[k] for k in ("budget", "used", "ran_out", "queries", "unit"))
            groups.setdefault(key, []).append(name)
    notes = []
    for (size, used, ran_out, queries, unit), names in groups.items():
        unit = unit or "tokens or characters"
        notes.append("%s: %d of %s ran out of retrieved chunks before the budget (all their "
                     "retrieved chunks together hold fewer than %d %s), so %s scored on less "
                     "context: %.1f %s used on average; retrieve deeper to compare at equal "
                     "cost" % (", ".join(names), ran_out, _plural(queries, "query", "queries"),
                               size, unit, "it is" if ran_out == 1 else "they are", used, unit))
    return notes


def _take_cells(qid, values, scorer, cells):
    """Move a query's cells of set-level measures out of its values (a cell
    never shows) into ``cells``, paired with its answerability: (answerable,
    abstained).  A query stated unanswerable left with no value stays unscored."""
    found = {name: (qid not in scorer.unanswerable, values.pop(name))
             for name in scorer.aggregates if name in values}
    if found:
        cells[qid] = found
    return None if not values and qid in scorer.unanswerable else values


def _answerability_counts(per_query, unscored, unanswerable):
    """The answerability block: answerable queries (a relevant id), those
    stated unanswerable, and those with neither (unscored, as before).

    >>> _answerability_counts({"q1": {}, "q9": {}}, {"q4": 0}, frozenset(["q9"]))
    {'answerable': 1, 'unanswerable': 1, 'unstated': 1}
    """
    return {"answerable": len(per_query) - len(unanswerable.intersection(per_query)),
            "unanswerable": len(unanswerable),
            "unstated": len(unscored) - len(unanswerable.intersection(unscored))}


def _nothing_to_average(name):
    """Why a measure has no mean: no query is in its population."""
    population = _REGISTRY[parse_measure(name).name].population
    if population == "spans":
        return ("%s: no scored query has a span label graded >= rel: nothing to average "
                "(character measures need span labels, not whole-document ones)" % name)
    return "%s: no query is in its population, %s: nothing to average" % (
        name, POPULATIONS[population])


def _set_apart(hidden, per_query, abstention, missing):
    """Move the hold-out's queries out of ``per_query`` and ``abstention``:
    (their values, their unscored ids, their ids missing from the run)."""
    ids = sorted(hidden)
    values = {q: per_query.pop(q) for q in ids if q in per_query}
    unscored = tuple(q for q in ids if abstention.pop(q, None) is not None)
    return values, unscored, tuple(q for q in missing if q in hidden)


def _label_notes(scorer, hidden=frozenset()):
    """Warnings about the labels themselves: overlapping span labels (merged
    into one evidence unit) and labels no chunk of the map can ever reach;
    the ``hidden`` queries (the hold-out) are never named."""
    notes = []
    overlapping = sorted(qid for qid, docs in (scorer.labels or {}).items() if qid not in hidden
                         and any(_overlaps(spans, scorer.rel) for spans in docs.values()))
    if overlapping:
        notes.append("%s overlapping span labels on one document, merged into one evidence "
                     "unit (the higher grade): %s"
                     % (_plural(len(overlapping), "query has", "queries have"),
                        _preview(overlapping)))
    lost = _uncoverable(scorer, hidden)
    if lost:
        shown = ["%s %s" % (qid, _unit_text(units[0])) for qid, units in list(lost.items())[:5]]
        notes.append("%s labelled evidence that no chunk of the map %s: lost at ingestion, "
                     "not by the retriever (scored as misses; see mapping.uncoverable): %s"
                     % (_plural(len(lost), "query has", "queries have"),
                        "holds" if _needed_cover(scorer) else "touches", "; ".join(shown)))
    unchecked = _unchecked_loss(scorer)
    if unchecked:
        notes.append(unchecked)
    counts = [c for qid, c in (scorer.trimmed or {}).items() if qid not in hidden]
    without = sum(c[2] for c in counts)
    if without:
        notes.append("--trim-label-whitespace: %d of %s carry no text, so they are scored as "
                     "written (%d narrowed); give each span label its \"text\" to trim it"
                     % (without, _plural(sum(c[0] for c in counts), "span label",
                                         "span labels"), sum(c[1] for c in counts)))
    return notes


_PLACED_BY = {"run": "the chunks were placed by the run's own fields",
              "doc_sep": "the chunks' documents came from --doc-sep"}


def _unchecked_loss(scorer):
    """The note of measures over documents or evidence scored without a chunk
    map: what the index lost cannot be told from what the retriever missed
    (see _lost_at_ingestion), so no query can be listed as lost; else None.

    >>> print(_unchecked_loss(_scorer({"q": {"A": 1}}, resolve_measures("recall", 5, unit="doc"),
    ...                               1, "scored", doc_sep="#")))
    the chunks' documents came from --doc-sep, not from a chunk map: evidence lost at ingestion (a labelled document or span no chunk holds) cannot be detected, and scores as a retrieval miss; give the index's chunk map (--chunks) to check
    """
    source = scorer.mapping.info()["source"]
    if source not in _PLACED_BY or all(call.view == "id" for call in scorer.units):
        return None
    return ("%s, not from a chunk map: evidence lost at ingestion (a labelled document or "
            "span no chunk holds) cannot be detected, and scores as a retrieval miss; give "
            "the index's chunk map (--chunks) to check" % _PLACED_BY[source])


def _overlaps(spans, rel):
    spans = sorted((s, e) for s, e, g in spans if s is not None and g >= rel)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def _unit_text(unit):
    doc, start, end = unit[:3]
    return doc if start is None else "%s [%d, %d)" % (doc, start, end)


def _needed_cover(scorer):
    """The cover a labelled span must reach in the chunk map to be findable:
    the largest cover asked for (1 when no evidence measure asks)."""
    covers = [call.view[2] for call in scorer.units if isinstance(call.view, tuple)]
    return max(covers) if covers else COVER.default


def _uncoverable(scorer, hidden=frozenset()):
    """{qid: [(doc, start, end), ...]}: the relevant units (see _evidence) of
    scored queries that the chunk map cannot deliver: a document with no
    chunk, or (when a measure reads spans) a span its chunks do not cover to
    the needed cover (see _needed_cover).  Worked out once per scorer; the
    ``hidden`` queries (a hold-out) are left out."""
    if scorer.lost is None:
        scorer.lost = _lost_at_ingestion(scorer) if scorer.mapping.chunks is not None else {}
    return {qid: units for qid, units in scorer.lost.items() if qid not in hidden}


def _lost_at_ingestion(scorer):
    spans = scorer.labels if scorer.labels is not None else {
        qid: {doc: [(None, None, g)] for doc, g in grades.items()}
        for qid, grades in scorer.qrels.items()}
    chunks = scorer.mapping.chunks
    documents = chunks.documents()
    reads_spans = any(call.view == "spans" or isinstance(call.view, tuple)
                      for call in scorer.units)
    # Only a document without a chunk is lost when no measure reads spans.
    evidence = {qid: _evidence(spans[qid], scorer.rel) for qid in sorted(spans)
                if reads_spans or not spans[qid].keys() <= documents}
    held = {doc: _Cover(spans) for doc, spans in _chunk_spans(chunks, {
        doc for units in evidence.values() for doc, start, _, _ in units
        if start is not None and doc in documents}).items()} if reads_spans else {}
    share, lost = _exact_share(_needed_cover(scorer)), {}
    for qid, units in evidence.items():
        for doc, start, end, grade in units:
            if doc not in documents:
                lost.setdefault(qid, []).append((doc, start, end))
                continue
            if start is None or not reads_spans or not held[doc]:
                continue    # (a document whose chunks give no span cannot tell)
            have = held[doc].within(start, end)
            if not have or have * share.denominator < share.numerator * (end - start):
                lost.setdefault(qid, []).append((doc, start, end))
    return lost


class _Cover:
    """The characters a document's chunks hold, merged once (see _union), so
    that how many of a span's characters they hold is two bisections, not a
    pass over every chunk of the document.

    >>> c = _Cover([(0, 6), (4, 10), (20, 30)])
    >>> c.within(5, 25), c.within(10, 20), c.within(0, 40), c.within(8, 9)
    (10, 0, 20, 1)
    """

    def __init__(self, spans):
        merged = _union(spans)
        self.starts = [start for start, _ in merged]
        self.ends = [end for _, end in merged]
        self.before = list(itertools.accumulate((end - start for start, end in merged),
                                                initial=0))

    def __bool__(self):
        return bool(self.starts)

    def within(self, start, end):
        """The characters of [start, end) the chunks hold."""
        first = bisect.bisect_right(self.ends, start)     # the first merged span ending after start
        last = bisect.bisect_left(self.starts, end)       # past the last one starting before end
        if first >= last:
            return 0
        return (self.before[last] - self.before[first] - max(0, start - self.starts[first])
                - max(0, self.ends[last - 1] - end))


def _chunk_spans(chunks, docs):
    """{doc: [(start, end), ...]}: the spans of the chunks of the documents
    ``docs`` in a chunk map.

    >>> _chunk_spans({"a1": Chunk("A", 0, 6), "b1": Chunk("B"), "a2": Chunk("A", 6, 9)}, {"A"})
    {'A': [(0, 6), (6, 9)]}
    """
    held = {doc: [] for doc in docs}
    for doc, start, end, _, _ in chunks.values():
        if start is not None and doc in held:
            held[doc].append((start, end))
    return held


def _mapping_info(scorer, hidden=frozenset()):
    """What the report says of the mapping; ``uncoverable`` is null without a
    chunk map (lost evidence cannot be told, see _unchecked_loss)."""
    info = scorer.mapping.info()
    info["uncoverable"] = None if scorer.mapping.chunks is None else {
        qid: [list(unit) for unit in units]
        for qid, units in _uncoverable(scorer, hidden).items()}
    return info


def _population_notes(per_query, names, counts):
    if counts is None:
        return []
    notes = []
    for name in names:
        if counts[name] < len(per_query) and (
                _REGISTRY[parse_measure(name).name].population == "spans"):
            left = [q for q, row in per_query.items() if name not in row]
            notes.append("%s averages over %d of %s: %s no span label graded >= rel (%s)"
                         % (name, counts[name], _plural(len(per_query), "query", "queries"),
                            _plural(len(left), "query has", "queries have"), _preview(left)))
    return notes


def _label_checks(measures, units):
    """((kind, names), ...): the measures grouped by what the run must meet a
    label through for their numbers to mean anything: "id" (the retrieved
    ids themselves) or "doc" (their documents: unit=doc and evidence, and
    the character measures), in the order the measures first name a kind.
    Measures no label decides (abstention, diversity) are left out, unless
    no measure reads a label: then every measure is checked on what it reads.

    >>> ms = resolve_measures("recall,recall(unit=doc),answered", 5)
    >>> _label_checks(ms, [_UnitCall.of(m) for m in ms])
    (('id', ('recall@5',)), ('doc', ('recall(unit=doc)@5',)))
    """
    pairs = list(zip(measures, units))
    reading = [(m, call) for m, call in pairs if _REGISTRY[m.name].labels] or pairs
    groups = {}
    for m, call in reading:
        groups.setdefault("id" if call.view == "id" else "doc", []).append(str(m))
    return tuple((kind, tuple(names)) for kind, names in groups.items())


def _unlabelled_run(qrels, checks, met, strays, extra):
    """Why the run meets no label, for the checks (see _label_checks) it
    failed, as one line: with one check the reason alone, with more each
    failed check's measures and reason (the others meet labels)."""
    failed = [i for i, done in enumerate(met) if not done]
    if len(checks) == 1 or not any(strays):     # (nothing retrieved: one reason for all)
        kind = checks[failed[0]][0]
        return _no_label_reason(qrels, strays[failed[0]], extra, by_document=kind == "doc")
    return "; ".join("%s: %s" % (", ".join(checks[i][1]), _no_label_reason(
        qrels, strays[i], extra, by_document=checks[i][0] == "doc")) for i in failed)


def _no_label_reason(qrels, strays, extra, by_document=False):
    """Why not one id the run retrieved carries a label, as one sentence: the
    run retrieved nothing, or its ids and the qrels' differ in a telling way
    (looked for over the kept retrieved ids and every label).

    >>> print(_no_label_reason({"q1": {"doc1": 2, "doc7": 1}}, [("q1", "doc7#2")], []))
    not one retrieved id carries a label in the qrels (e.g. run 'doc7#2', qrels 'doc7'): the run names chunks and the qrels whole documents; score documents (--unit doc) with --doc-sep or --chunks, or label the chunk ids
    """
    if not strays:
        if extra:
            return ("no query of the run is in the qrels (run %s; qrels %s): the files do not "
                    "belong together" % (_preview(extra, 3), _preview(sorted(qrels), 3)))
        return "the run retrieved no id for any query in the qrels: every number would be 0"
    graded = {doc for labels in qrels.values() for doc, grade in labels.items() if grade >= 0}
    retrieved = {doc for _, doc in strays}
    cause, pair = _no_label_cause(qrels, strays, graded, retrieved)
    if pair is None:
        qid, doc = strays[0]
        own = sorted((-g, d) for d, g in qrels.get(qid, {}).items() if g >= 0)
        pair = (doc, own[0][1] if own else min(graded, default=""))
    if by_document:     # the strays are the documents of the retrieved chunks
        cause = _BY_DOCUMENT_CAUSES.get(cause, cause)
        return ("not one retrieved chunk's document carries a label in the qrels (e.g. run "
                "document %r, qrels %r): %s" % (pair[0], pair[1], cause))
    return ("not one retrieved id carries a label in the qrels (e.g. run %r, qrels %r): %s"
            % (pair[0], pair[1], cause))


# The causes of _no_label_cause, said of documents (measures that count them).
_BY_DOCUMENT_CAUSES = {
    "the run names chunks and the qrels whole documents; score documents (--unit doc) with "
    "--doc-sep or --chunks, or label the chunk ids":
        "the documents --doc-sep or the chunk map give still hold a chunk part: they are not "
        "cut where the qrels' ids end (check the separator, or the map's doc field)",
    "the qrels name chunks and the run whole documents":
        "the qrels name chunk ids, and these measures count documents: label documents or "
        "spans, or score chunk ids (unit=id)",
}


def _no_label_cause(qrels, strays, graded, retrieved):
    """(cause, (run id, qrels id) that shows it, or None)."""
    if not graded:
        return "the qrels hold no id with a grade >= 0", None
    for qid, doc in strays:
        if qrels.get(qid, {}).get(doc, 0) < 0:
            return ("the run's ids carry only negative grades (judged-unknown, as trec_eval "
                    "reads -1)", (doc, doc))
    numbers = {}
    for label in graded:
        numbers.setdefault(_as_number(label), label)
    for doc in sorted(retrieved):
        value = _as_number(doc)
        if value is not None and value in numbers:
            return "numbers are written differently", (doc, numbers[value])
    for doc in sorted(retrieved):
        for prefix in _id_prefixes(doc):
            if prefix in graded:
                return ("the run names chunks and the qrels whole documents; score documents "
                        "(--unit doc) with --doc-sep or --chunks, or label the chunk ids",
                        (doc, prefix))
    for label in sorted(graded):
        for prefix in _id_prefixes(label):
            if prefix in retrieved:
                return "the qrels name chunks and the run whole documents", (prefix, label)
    if any(len(doc) > 80 or any(ch.isspace() for ch in doc.strip()) for doc in retrieved):
        return "the run holds text, not ids", None
    return "the files name ids differently, or do not belong together", None


def _id_prefixes(doc):
    """The parts of an id before each separator: 'a/b#3' -> ['a', 'a/b']."""
    return [doc[:i] for i, ch in enumerate(doc) if i and not ch.isalnum()]


def _as_number(text):
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ===========================================================================
# src/12_statistics.py
#
# Statistics: paired comparisons of two runs on the same queries.
#
# Every function takes the per-query differences ``diffs = [a_q - b_q for q
# in queries]`` (or plain per-query values for the sizing helpers) and
# returns plain floats.  Nothing here ever returns NaN: degenerate inputs
# have a documented convention instead.  Only the standard library is used
# (math, random, statistics, bisect, itertools).
#
#   paired_ttest(diffs)            -> (t, p)   Student's paired t-test
#   randomization_p(diffs)         -> p        sign-flip (permutation) test
#   mcnemar_p(b, c)                -> p        exact McNemar test (sign flips of 0/1)
#   bootstrap_ci(diffs, rng=...)   -> (lo, hi) percentile CI of the mean diff
#   holm(pvalues)                  -> [p_adj]  Holm-Bonferroni step-down
#   cohen_kappa(stored, current)   -> (agreement, kappa, labels, counts)
#   min_detectable_difference(sd, n)           paired MDE, normal approximation
#   margin_of_error(values)        queries_needed(sd, tolerance)
#
# Then the paired view (_paired_view: which queries a verdict compares, the
# one rule the gate, compare and the HTML charts share), and compare and
# compare_all (two runs on the same queries: a Comparison).
# References: scipy.stats.ttest_rel, scipy.stats.permutation_test
# (permutation_type='samples'), scipy.stats.bootstrap (method='percentile'),
# statsmodels multipletests(method='holm') and mcnemar(exact=True); see
# tests/data/stats/.
#
# Uses: 01_head, 02_records, 04_measure_names.  Used by: judge scores, the
# gate, HTML, the command line.  Forward (tools/build.py, FORWARD):
# Comparison's notebook views call the renderers.
# ===========================================================================

_EXACT_MAX_N = 20        # randomization_p enumerates all 2**n sign patterns up to here
_TIE_RTOL = 1e-9         # relative tolerance for "as extreme as observed"
_ZERO_RTOL = 1e-12       # |sum| below this share of sum(|d|) is rounding noise: 0
_BITS_TABLE = bytes.maketrans(b"01", b"\x00\x01")


def _statistics():
    import statistics   # imported on first use: it is slow to import and start-up must be fast
    return statistics


def _finite_floats(values, what):
    """Return *values* (any iterable of numbers; booleans count as 0 and 1)
    as a list of floats; raise EvalError on anything else, NaN or inf.

    >>> _finite_floats([1, 0.5], "diffs")
    [1.0, 0.5]
    >>> _finite_floats(["a"], "values")
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: values must be finite numbers, got 'a'
    """
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise EvalError("%s must be a list of numbers, got %s" % (what, _short_repr(values)))
    values = list(values)
    # The usual case at C speed: plain numbers whose sum is finite (a NaN or
    # an infinity makes it not); any doubt takes the checks one by one.
    if set(map(type, values)) <= {float, int, bool}:
        try:
            if math.isfinite(math.fsum(values)):
                return list(map(float, values))
        except (OverflowError, ValueError):     # a huge int; inf - inf
            pass
    return [_finite(v, what, plural=True, bools=True) for v in values]


def _checked_rng(rng):
    """``rng`` if it is a random.Random or None (see randomization_p)."""
    if rng is not None and not isinstance(rng, random.Random):
        raise EvalError("rng must be a random.Random (or None), got %s" % _short_repr(rng))
    return rng


def _stirling_tail(x):
    """lgamma(x) - ((x - 0.5) log x - x + log(2 pi) / 2), for x >= 10.

    >>> abs(_stirling_tail(12.5) - (math.lgamma(12.5) - 12 * math.log(12.5)
    ...     + 12.5 - 0.5 * math.log(2 * math.pi))) < 1e-14
    True
    """
    r = 1.0 / (x * x)
    return (1.0 / 12 - r * (1.0 / 360 - r * (1.0 / 1260 - r * (1.0 / 1680
            - r * (1.0 / 1188 - r * (691.0 / 360360 - r / 156)))))) / x


def _log_beta(a, b):
    """log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b), for a, b > 0.

    When one argument is large, lgamma(big) - lgamma(big + small) cancels
    digits (lgamma(5e5) is about 6e6), so that difference is taken from
    Stirling's series instead, which keeps t-test p-values accurate to
    ~1e-11 even at a million degrees of freedom.

    >>> abs(_log_beta(2.0, 3.0) - math.log(1 / 12)) < 1e-15
    True
    """
    small, big = min(a, b), max(a, b)
    if big < 10.0:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    # lgamma(big) - lgamma(big + small), both Stirling expansions subtracted.
    diff = (-(big - 0.5) * math.log1p(small / big) - small * math.log(big + small)
            + small + _stirling_tail(big) - _stirling_tail(big + small))
    return math.lgamma(small) + diff


def _betainc(a, b, x):
    """Regularized incomplete beta function I_x(a, b), for a, b > 0, 0 <= x <= 1.

    Continued fraction (Numerical Recipes' betacf) evaluated with the modified
    Lentz method. It converges fast for x < (a + 1) / (a + b + 2); above that
    the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) is used.

    >>> round(_betainc(2.0, 3.0, 0.4), 12)    # 1 - 0.6**4 - 4 * 0.4 * 0.6**3
    0.5248
    >>> _betainc(0.5, 0.5, 0.0), _betainc(0.5, 0.5, 1.0)
    (0.0, 1.0)
    """
    if not (a > 0.0 and b > 0.0):
        raise EvalError("_betainc needs a > 0 and b > 0, got a=%r, b=%r" % (a, b))
    if not 0.0 <= x <= 1.0:
        raise EvalError("_betainc needs 0 <= x <= 1, got x=%r" % (x,))
    if x == 0.0 or x == 1.0:
        return x
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    # Prefactor x^a (1-x)^b / (a B(a, b)), in logs to avoid overflow.
    log_front = a * math.log(x) + b * math.log1p(-x) - _log_beta(a, b)
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 100000):
        # Even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m)).
        num = m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + num / c
        c = c if abs(c) > tiny else tiny
        f *= d * c
        # Odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
        num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + num / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        f *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    else:  # pragma: no cover - not reached for the a, b of a t-test
        raise ArithmeticError("_betainc did not converge for a=%s, b=%s, x=%s" % (a, b, x))
    return math.exp(log_front) * f / a


def t_two_sided_p(t, df):
    """Two-sided p-value of Student's t with *df* degrees of freedom.

    p = P(|T| >= |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2). An infinite t gives
    0.0; t = 0 gives 1.0.

    >>> round(t_two_sided_p(2.0, 10), 10)       # scipy: 2 * t.sf(2, 10)
    0.0733880348
    >>> t_two_sided_p(0.0, 5), t_two_sided_p(-math.inf, 5)
    (1.0, 0.0)
    """
    t = _finite(t, "t_two_sided_p: t", infinite=True)
    if not _finite(df, "t_two_sided_p: df", infinite=True) > 0:
        raise EvalError("t_two_sided_p needs df > 0, got %r" % (df,))
    if math.isinf(t):
        return 0.0
    t2 = t * t
    if math.isinf(t2):
        return 0.0
    a = 0.5 * df
    x = df / (df + t2)
    if x > (a + 1.0) / (a + 2.5):
        # Small |t|: take the symmetric branch here, with 1 - x computed as
        # t^2 / (df + t^2), which keeps its precision when t^2 << df.
        return 1.0 - _betainc(0.5, a, t2 / (df + t2))
    return min(1.0, _betainc(a, 0.5, x))


def paired_ttest(diffs):
    """Paired Student's t-test of mean(diffs) = 0; returns (t, two-sided p).

    *diffs* are the per-query differences a - b. Matches
    ``scipy.stats.ttest_rel(a, b)`` (statistic, pvalue): t = mean / (s / sqrt(n))
    with the sample standard deviation s (n - 1 denominator), df = n - 1.

    Conventions where scipy returns NaN (we never return NaN):
      * n < 2 (no variance estimate): (0.0, 1.0).
      * every difference is 0 (the systems tie on every query): (0.0, 1.0).
      * every difference equals the same nonzero d (zero variance):
        t = copysign(inf, d) and p = 0.0; scipy also gives +-inf and 0 when its
        float arithmetic makes the variance exactly 0. Renderers must print an
        infinite t as text (e.g. "inf"), since JSON has no Infinity.

    >>> t, p = paired_ttest([0.5, 1.0, 0.0, 0.5])
    >>> round(t, 10), round(p, 10)              # scipy.stats.ttest_rel
    (2.4494897428, 0.0917211133)
    >>> paired_ttest([0.3]), paired_ttest([0.0, 0.0, 0.0])
    ((0.0, 1.0), (0.0, 1.0))
    >>> paired_ttest([1.0, 1.0, 1.0])
    (inf, 0.0)
    """
    d = _finite_floats(diffs, "diffs")
    n = len(d)
    if n < 2:
        return 0.0, 1.0
    if min(d) == max(d):
        if d[0] == 0.0:
            return 0.0, 1.0
        return math.copysign(math.inf, d[0]), 0.0
    mean = math.fsum(d) / n
    var = math.fsum((x - mean) ** 2 for x in d) / (n - 1)
    if var == 0.0:  # pragma: no cover - distinct values have positive variance
        return math.copysign(math.inf, mean), 0.0
    t = mean / math.sqrt(var / n)
    return t, t_two_sided_p(t, n - 1)


def _signed_sums(values):
    """All 2**len(values) sums +-v1 +-v2 ..., in no particular order.

    >>> sorted(_signed_sums([1.0, 2.0]))
    [-3.0, -1.0, 1.0, 3.0]
    """
    sums = [0.0]
    for v in values:
        sums = [s + v for s in sums] + [s - v for s in sums]
    return sums


def _exact_sign_flip_count(d, threshold):
    """Number of the 2**len(d) sign patterns with |signed sum| >= threshold > 0.

    Meet in the middle: the signed sums of each half are enumerated (2**10
    each at n = 20), one side is sorted, and for each sum x of the other side
    bisect counts the y with x + y >= threshold or x + y <= -threshold (two
    disjoint sets, as threshold > 0).
    """
    half = len(d) // 2
    left = _signed_sums(d[:half])
    right = sorted(_signed_sums(d[half:]))
    size = len(right)
    count = 0
    for x in left:
        count += size - bisect.bisect_left(right, threshold - x)
        count += bisect.bisect_right(right, -threshold - x)
    return count


_BINOMIAL_EXACT_N = 2000   # mcnemar_p sums exact integers up to here, bounds beyond
_BINOMIAL_BITS = 200     # working precision of those bounds (doubled until the float is certain)
_FACTOR_BLOCK = 64       # factors of C(n, k) multiplied exactly before one rounding


def _one_magnitude(d):
    """True when the non-zero differences *d* all have one size up to rounding
    (1e-12 relative): 0/1 outcomes, or any measure whose changed queries all
    moved by the same step.  The sign-flip test is then McNemar's test.

    >>> _one_magnitude([1.0, -1.0, 1.0]), _one_magnitude([0.25, -0.5])
    (True, False)
    >>> _one_magnitude([5 / 9 - 4 / 9, 2 / 9 - 1 / 9])      # 1/9 twice, rounded apart
    True
    """
    big = max(map(abs, d))
    return big - min(map(abs, d)) <= _ZERO_RTOL * big


def _top_binomial_term(k, n, bits):
    """C(n, k) / 2**n as (m, e, ops): m * 2**e is at most the true value, m
    has at least *bits* bits, and each of the *ops* floor roundings lost less
    than 2**-bits of it.  The factors (n-k+i) / i are taken in blocks of 64,
    multiplied exactly, then divided once: about 8,000 blocks at n = 10**6.

    >>> m, e, ops = _top_binomial_term(2, 4, 60)       # C(4, 2) / 16 = 0.375
    >>> m * 2.0 ** e, ops
    (0.375, 2)
    """
    m, e, ops = 1 << bits, -bits - n, 0
    for start in range(1, k + 1, _FACTOR_BLOCK):
        stop = min(start + _FACTOR_BLOCK, k + 1)
        num = math.prod(range(n - k + start, n - k + stop))
        den = math.prod(range(start, stop))
        shift = max(0, bits + 1 + den.bit_length() - (m * num).bit_length())
        m, e = ((m * num) << shift) // den, e - shift
        excess = m.bit_length() - bits - 1
        if excess > 0:
            m, e = m >> excess, e + excess
        ops += 2
    return m, e, ops


def _binomial_half_tail(k, n, bits):
    """Floats (lo, hi) around 2 * sum_{i<=k} C(n, i) / 2**n, for 2k < n.

    The terms are summed downwards from the largest, C(n, i - 1) =
    C(n, i) * i / (n - i + 1), as integers in units of 2**e twice: rounded
    down (lo) and up (hi).  Once the terms left are too small to matter, they
    are bounded by a geometric series (the ratio i / (n - i + 1) only falls as
    i does: at most term_i * i / (n - 2i + 1)) and added to hi.  When lo == hi
    the true value rounds to that float.

    >>> _binomial_half_tail(1, 4, 60)          # 2 * (1 + 4) / 16
    (0.625, 0.625)
    """
    m, e, ops = _top_binomial_term(k, n, bits)
    low = m
    high = m + ((m * 2 * ops) >> bits) + 1      # (1 - 2**-bits)**-ops < 1 + 2 * ops * 2**-bits
    total_low, total_high = low, high
    unit = 1 << -e
    for i in range(k, -1, -1):
        if i == 0 or high.bit_length() + i.bit_length() + 64 < total_low.bit_length():
            rest = -(-high * i // (n - 2 * i + 1))
            lo, hi = 2 * total_low / unit, 2 * (total_high + rest) / unit
            if lo == hi or i == 0:
                return lo, hi
        low = low * i // (n - i + 1)
        high = -(-high * i // (n - i + 1))
        total_low += low
        total_high += high
    raise AssertionError("unreachable: i == 0 returns")   # pragma: no cover


def mcnemar_p(b, c):
    """Exact two-sided McNemar test of *b* and *c* discordant pairs.

    p = min(1, 2 * sum_{i <= min(b, c)} C(n, i) / 2**n), n = b + c: the
    two-sided binomial test of min(b, c) in n trials at 1/2.  Equals
    ``statsmodels.stats.contingency_tables.mcnemar([[a, b], [c, d]],
    exact=True).pvalue`` (tests/data/stats/mcnemar.json).  Exact at any n:
    up to n = 2,000 the sum is one of exact integers; beyond, it is carried in
    integers with the rounding bounded both ways, the precision doubling until
    both bounds give the same float (else exact integers again).  Either way
    the result is the true p correctly rounded.  b == c (and n = 0) gives 1.0.

    For 0/1 outcomes (b queries a passes and b fails, c the other way) this
    is the exact sign-flip test of :func:`randomization_p`, which uses it.

    >>> mcnemar_p(5, 0)                  # 2 * 1 / 32
    0.0625
    >>> mcnemar_p(2, 8)                  # 2 * (1 + 10 + 45) / 1024
    0.109375
    >>> mcnemar_p(3, 3), mcnemar_p(0, 0)
    (1.0, 1.0)
    """
    for count in (b, c):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise EvalError("mcnemar_p needs counts >= 0, got %r" % (count,))
    k, n = min(b, c), b + c
    if 2 * k >= n:
        return 1.0
    if n > _BINOMIAL_EXACT_N:
        for bits in (_BINOMIAL_BITS, 2 * _BINOMIAL_BITS, 4 * _BINOMIAL_BITS):
            lo, hi = _binomial_half_tail(k, n, bits)
            if lo == hi:
                return min(1.0, lo)
    return min(1.0, _exact_half_tail(k, n))     # also a p on a float's rounding boundary


def _exact_half_tail(k, n):
    """2 * sum_{i<=k} C(n, i) / 2**n from exact integers, one division
    (correctly rounded).  Quadratic in n: mcnemar_p's path up to n = 2,000.

    >>> _exact_half_tail(2, 10)                 # 2 * (1 + 10 + 45) / 1024
    0.109375
    """
    term = total = 1
    for i in range(1, k + 1):
        term = term * (n - i + 1) // i
        total += term
    return 2 * total / (1 << n)


def randomization_p(diffs, *, resamples=10000, rng=None):
    """Two-sided paired randomization (sign-flip) test of the mean difference.

    Under the null hypothesis each query's difference is as likely to be +d as
    -d, so the p-value is the share of the 2**n sign patterns whose
    |sum of signed diffs| is at least the observed |sum| (observed pattern
    included). "At least" has a relative tolerance of 1e-9 so that rounding
    in the sums does not drop exact ties; an observed |sum| below 1e-12 of
    sum(|d|) is taken as 0, giving p = 1.

    Zero differences are dropped first: flipping a 0 does not change any sum,
    so every pattern of the others is repeated 2**zeros times and the share is
    unchanged. When the nonzero differences all have one size (0/1 outcomes:
    success@k, abstained, a boolean judge field; up to 1e-12 relative), the
    share is the exact McNemar (binomial) test on the b positive and c
    negative differences, computed exactly at any n by :func:`mcnemar_p`.
    Otherwise, with at most 20 nonzero differences the p-value is exact (all
    patterns counted, meet-in-the-middle, milliseconds at n = 20) and equals
    ``scipy.stats.permutation_test(..., permutation_type='samples',
    n_resamples=np.inf, alternative='two-sided')``. Beyond that it is a Monte
    Carlo estimate from *resamples* random patterns drawn with *rng* (a
    random.Random; None means random.Random(0), so results repeat):
    p = (1 + hits) / (1 + resamples), the observed pattern counted once, which
    is never 0 and is a valid (slightly conservative) p-value.
    No differences at all gives 1.0.

    >>> randomization_p([1.0, 1.0, 1.0, 1.0, 1.0])     # 2 of 32 patterns
    0.0625
    >>> randomization_p([1.0, -1.0, 0.0]), randomization_p([])
    (1.0, 1.0)
    >>> randomization_p([0.5, 1.0, 0.25, 0.0, 1.0])    # 2 of 16 nonzero patterns
    0.125
    >>> randomization_p([-1.0] * 30 + [1.0] * 2)       # McNemar: 2 * (1 + 32 + 496) / 2**32
    2.4633482098579407e-07
    """
    d = [x for x in _finite_floats(diffs, "diffs") if x != 0.0]
    resamples = _positive_int(resamples, "resamples")
    _checked_rng(rng)
    n = len(d)
    if n == 0:
        return 1.0
    observed = abs(math.fsum(d))
    if observed <= _ZERO_RTOL * math.fsum(abs(x) for x in d):
        return 1.0
    if _one_magnitude(d):
        wins = sum(1 for x in d if x > 0.0)
        return mcnemar_p(wins, n - wins)
    threshold = observed * (1.0 - _TIE_RTOL)
    if n <= _EXACT_MAX_N:
        return _exact_sign_flip_count(d, threshold) / 2 ** n
    if rng is None:
        rng = random.Random(0)
    total = math.fsum(d)
    hits = 0
    fmt = "0%db" % n
    compress = itertools.compress
    for _ in range(resamples):
        # One random bit per query selects the differences whose sign flips:
        # the signed sum is total - 2 * sum(flipped). Bits -> bytes 0/1 keeps
        # the per-query work in C.
        flips = format(rng.getrandbits(n), fmt).encode().translate(_BITS_TABLE)
        if abs(total - 2.0 * math.fsum(compress(d, flips))) >= threshold:
            hits += 1
    return (1 + hits) / (1 + resamples)


def _quantile_linear(sorted_values, q):
    """Quantile q of sorted data, numpy's default ('linear') definition.

    Position h = (N - 1) q; the result interpolates linearly between the
    values at floor(h) and floor(h) + 1 (Hyndman & Fan type 7, also R's
    default and statistics.quantiles(method='inclusive')).

    >>> _quantile_linear([1.0, 2.0, 3.0, 4.0], 0.25)
    1.75
    """
    h = (len(sorted_values) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_values) - 1)
    x_lo, x_hi = sorted_values[lo], sorted_values[hi]
    return x_lo + (h - lo) * (x_hi - x_lo)


def bootstrap_ci(diffs, *, resamples=10000, rng, confidence=0.95):
    """Paired percentile bootstrap confidence interval of the mean difference.

    Draws *resamples* resamples of the queries with replacement (the pair
    a_q, b_q stays together, so resampling the differences is the paired
    bootstrap), takes each resample's mean, and returns the alpha/2 and
    1 - alpha/2 quantiles of those means, alpha = 1 - confidence, with numpy's
    default linear-interpolation quantile (as scipy.stats.bootstrap with
    method='percentile'). *rng* is a random.Random, e.g. random.Random(seed);
    the same seed gives the same interval.

    No differences gives (0.0, 0.0); all differences equal to d gives (d, d).

    >>> lo, hi = bootstrap_ci([1.0] * 20 + [0.0] * 80, rng=random.Random(1))
    >>> 0.11 < lo < 0.14 and 0.26 < hi < 0.29     # mean 0.2, se 0.04
    True
    >>> bootstrap_ci([0.25, 0.25], rng=random.Random(1)), bootstrap_ci([], rng=None)
    ((0.25, 0.25), (0.0, 0.0))
    """
    d = _finite_floats(diffs, "diffs")
    _z(confidence)
    resamples = _positive_int(resamples, "resamples")
    n = len(d)
    if n == 0:
        return 0.0, 0.0
    if min(d) == max(d):
        return d[0], d[0]
    if _checked_rng(rng) is None:
        raise EvalError("bootstrap_ci needs rng, a random.Random (e.g. random.Random(0))")
    choices, fsum = rng.choices, math.fsum
    means = sorted([fsum(choices(d, k=n)) / n for _ in range(resamples)])
    alpha = 1.0 - confidence
    return (_quantile_linear(means, alpha / 2.0),
            _quantile_linear(means, 1.0 - alpha / 2.0))


def holm(pvalues):
    """Holm-Bonferroni adjusted p-values, in the order given.

    Step-down: with the m p-values sorted ascending, the i-th smallest
    (i = 0, 1, ...) becomes (m - i) * p_(i), then a running maximum makes the
    adjusted values monotone, and each is capped at 1. Equals statsmodels'
    ``multipletests(pvalues, method='holm')[1]``. Reject at level alpha where
    the adjusted p <= alpha.

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    >>> holm([0.5, 0.6]), holm([])
    ([1.0, 1.0], [])
    """
    p = _finite_floats(pvalues, "p-values")
    for x in p:
        if not 0.0 <= x <= 1.0:
            raise EvalError("p-values must be in [0, 1], got %r" % (x,))
    m = len(p)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=p.__getitem__)):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def min_detectable_difference(sd, n, *, alpha=0.05, power=0.8):
    """Smallest true mean difference a paired test on n queries detects.

    (z_{1 - alpha/2} + z_{power}) * sd / sqrt(n), where sd is the standard
    deviation of the per-query differences (normal approximation, two-sided
    level alpha). n = 0 gives inf.

    >>> round(min_detectable_difference(0.3, 100), 4)   # 2.8016 * 0.03
    0.084
    >>> min_detectable_difference(0.3, 0)
    inf
    """
    alpha, power = _finite(alpha, "alpha"), _finite(power, "power")
    sd, n = _finite(sd, "sd"), _finite(n, "n")
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise EvalError("alpha and power must be in (0, 1), got %r, %r" % (alpha, power))
    if n < 0 or sd < 0:
        raise EvalError("sd and n must be >= 0, got sd=%r, n=%r" % (sd, n))
    if n == 0:
        return math.inf
    z = _statistics().NormalDist()
    return (z.inv_cdf(1.0 - alpha / 2.0) + z.inv_cdf(power)) * sd / math.sqrt(n)


def _z(confidence):
    """Two-sided normal quantile z_{(1 + confidence) / 2}.

    >>> round(_z(0.95), 4)
    1.96
    """
    if not 0.0 < _finite(confidence, "confidence") < 1.0:
        raise EvalError("confidence must be between 0 and 1, got %r" % (confidence,))
    return _statistics().NormalDist().inv_cdf(0.5 + confidence / 2.0)


def margin_of_error(values, *, confidence=0.95):
    """Half-width of the normal-approximation confidence interval of a mean.

    z * s / sqrt(n), with s the sample standard deviation (statistics.stdev)
    of the per-query values. Fewer than 2 values gives inf.
    A pass/fail metric at 80% is +/- 8 points on 100 queries, 4 on 400:

    >>> round(margin_of_error([1] * 80 + [0] * 20), 3)
    0.079
    >>> round(margin_of_error([1] * 320 + [0] * 80), 3)
    0.039
    >>> margin_of_error([1.0])
    inf
    """
    v = _finite_floats(values, "values")
    if len(v) < 2:
        _z(confidence)
        return math.inf
    return _z(confidence) * _statistics().stdev(v) / math.sqrt(len(v))


def queries_needed(sd, tolerance, *, confidence=0.95):
    """Queries needed for a margin of error of at most *tolerance*.

    ceil((z * sd / tolerance) ** 2), the inverse of margin_of_error; sd = 0
    gives 0 (a constant metric needs no sample to pin down); a tolerance so
    small that no count of queries is a number gives inf.

    >>> queries_needed(0.4, 0.04)       # 80% pass rate, +/- 4 points
    385
    """
    sd, tolerance = _finite(sd, "sd"), _finite(tolerance, "tolerance")
    if not tolerance > 0:
        raise EvalError("tolerance must be > 0, got %r" % (tolerance,))
    if sd < 0:
        raise EvalError("sd must be >= 0, got %r" % (sd,))
    ratio = _z(confidence) * sd / tolerance
    squared = ratio * ratio
    return math.ceil(squared) if math.isfinite(squared) else math.inf


# ---------------------------------------------------------------------------
# Comparison and statistics: two runs on the same queries
# ---------------------------------------------------------------------------

# --- the paired view: which queries a verdict compares ------------------------------
#
# One rule behind every verdict (the gate's tolerance and significant rules,
# every slice, the hold-out, judge scores, --compare, reports read back): a
# measure is compared over the queries both sides scored for it, the
# baseline's mean over them against the current mean over them.  A query
# only one side scored is counted (removed, added) and in neither mean, so
# dropping a failing query can never raise a mean.  A side that holds means
# only is compared on its means when its record of which queries they are
# over (_query_set) is the other side's; a different record is a changed
# test set, which means cannot tell apart from a real change: MISSING.  A
# file of bare means records nothing: compared on its means, with a note.

class _Side(NamedTuple):
    """One side of a comparison of one population (every scored query, a
    slice, the hold-out): its stated means, its per-query values (None:
    means only), its record of which queries each mean is over (a
    _population_record; None: not recorded), and the members of its test
    set that have no value for a measure (a judge score's nulls: {measure:
    ids}), which its values cannot show.  ``anonymous`` for the hold-out:
    its records name no subset of its queries, only its whole set (a subset
    as small as the one query a judge could not score would be guessed).
    ``scored``: the measures the report scored (None: not known; a measure
    asked for may have no mean, when the run left its population empty)."""
    mean: Dict[str, float]
    values: Optional[Dict[str, Dict[str, float]]] = None
    sets: Optional[dict] = None
    unscored: Optional[Dict[str, Tuple[str, ...]]] = None
    anonymous: bool = False
    scored: Optional[frozenset] = None     # the measures the report scores (None: not said)


class _Paired(NamedTuple):
    """One measure of one population, both sides over the same queries:
    ``baseline`` and ``current`` the two means over the ``n`` queries
    compared (``queries``, empty when compared on the means alone; n None
    when no side records how many), ``removed`` and ``added`` the queries
    only one side scored, ``missing`` why there is nothing to compare (the
    row is MISSING; ``changed`` when it is because the test set changed),
    ``means`` why it was compared on the means alone."""
    baseline: Optional[float]
    current: Optional[float]
    n: Optional[int]
    queries: Tuple[str, ...] = ()
    removed: Tuple[str, ...] = ()
    added: Tuple[str, ...] = ()
    missing: Optional[str] = None
    means: Optional[str] = None
    changed: bool = False


_BARE = "the baseline records no query set, so a changed test set cannot be seen"


def _paired_view(measure, before, now, fixed=True):
    """The _Paired of ``measure`` between the baseline's side ``before`` and
    the current side ``now`` (two _Side).  ``fixed`` False for a measure
    whose population the run itself decides (see measure(fixed=)): no
    shared query is then nothing to compare (n 0, not missing), a query
    that left or joined the population while staying in the test set is
    neither removed nor added, and a side of means alone is checked against
    the record of the whole test set, not of the measure's own queries.

    >>> then = _Side({"mrr@5": 0.5}, {"q1": {"mrr@5": 1.0}, "q2": {"mrr@5": 0.0}})
    >>> now = _Side({"mrr@5": 1.0}, {"q1": {"mrr@5": 1.0}})   # q2, the failing one, dropped
    >>> _paired_view("mrr@5", then, now)[:6]
    (1.0, 1.0, 1, ('q1',), ('q2',), ())
    >>> _paired_view("mrr@5", _Side({"mrr@5": 0.5}, sets=_query_set(["q1", "q2"])), now).missing
    'test set changed; the baseline holds means only: save it again with per-query values'
    >>> moved = _Side({"mrr@5": 1.0}, {"q1": {"mrr@5": 1.0}, "q2": {}}, scored=frozenset({"mrr@5"}))
    >>> _paired_view("mrr@5", _Side({"mrr@5": 1.0}, {"q1": {}, "q2": {"mrr@5": 1.0}}), moved,
    ...              fixed=False)[:7]     # q1 joined, q2 left: both still in the test set
    (1.0, None, 0, (), (), (), None)
    """
    then, current = _values_of(before, measure), _values_of(now, measure)
    stated = before.mean.get(measure)
    if (measure not in now.scored if now.scored is not None
            else measure not in now.mean and not current and now.values != {}):
        return _Paired(stated, None, None, missing="not in the report")
    if then is not None and current is not None:
        both = sorted(then.keys() & current.keys())
        removed = tuple(sorted(then.keys() - current.keys()))
        added = tuple(sorted(current.keys() - then.keys()))
        if not fixed:   # in the test set on both sides: moved between populations
            removed = tuple(q for q in removed if q not in now.values)
            added = tuple(q for q in added if q not in before.values)
        if not both:
            return _Paired(stated, None, 0, (), removed, added,
                           "no query that both sides scored" if fixed else None)
        return _Paired(_mean([then[q] for q in both]), _mean([current[q] for q in both]),
                       len(both), tuple(both), removed, added)
    if measure not in now.mean:
        if not fixed:       # means alone, and the run left the population empty
            return _Paired(stated, None, 0)
        return _Paired(stated, None, None, missing="no query scores it now")
    return _paired_means(measure, before, now, stated, fixed)


def _paired_means(measure, before, now, stated, fixed=True):
    """The _Paired of a measure a side holds no per-query values for: its
    two means, compared when both sides' records of their queries agree."""
    theirs, ours = _record_of(before, measure, fixed), _record_of(now, measure, fixed)
    bare = before.values is None and before.sets is None     # a file of means
    if theirs is None and not bare:
        # A baseline with per-query values but no record of the queries this
        # measure (set-level: cells, no values) is over: written before records.
        return _Paired(stated, None, None, missing="the baseline records no query set for it "
                       "(saved before rag_eval kept them): save it again")
    if theirs is None and (now.unscored or {}).get(measure):
        # The report says some of its queries lost their value; what the
        # baseline's mean was over is not known: the two cannot be compared.
        return _Paired(stated, None, None, missing="%s no value now and the baseline records "
                       "no query set: save it again with --save-baseline" % _plural(
                           len(now.unscored[measure]), "query has", "queries have"))
    if theirs is None:
        return _Paired(stated, now.mean[measure], None, means=_BARE)
    if ours is None:
        return _Paired(stated, None, None, missing="the report records no query set: write "
                       "it again with this rag_eval")
    if (theirs["queries"], theirs["sha256"]) != (ours["queries"], ours["sha256"]):
        if _REGISTRY[parse_measure(measure).name].aggregate is not None:
            why = "a set-level value, compared on its means, which are over other queries now"
        elif before.values is None:
            why = "the baseline holds means only: save it again with per-query values"
        else:
            why = "the report holds means only: write it with --per-query"
        return _Paired(stated, None, None, missing="test set changed; " + why, changed=True)
    return _Paired(stated, now.mean[measure], ours["queries"] if fixed else None,
                   means="the means of the same %s%s" % (
                       "" if fixed else "test set of ",
                       _plural(ours["queries"], "query", "queries")))


def _values_of(side, measure):
    """{query: value} of ``measure`` on one side, or None when the side has
    no per-query values for it (means only, or a set-level measure, whose
    queries hold cells, not values)."""
    if side.values is None or _REGISTRY[parse_measure(measure).name].aggregate is not None:
        return None
    return {q: v[measure] for q, v in side.values.items() if measure in v}


def _record_of(side, measure, fixed=True):
    """The _query_set of the queries ``measure`` is over on one side: from
    its values, else from its record (None: not recorded).  An anonymous
    side's (the hold-out's) is the count of those queries with the sha256
    of the whole population: it names no subset.  For a measure whose
    population the run decides (``fixed`` False), that of the whole
    population (its scored queries)."""
    values = _values_of(side, measure) if fixed else None
    if values is not None:
        record = _query_set(list(values))
        if side.anonymous:
            record["sha256"] = _query_set(list(side.values))["sha256"]
        return record
    if not fixed and side.values is not None:
        return _query_set(list(side.values))
    if side.sets is None:
        return None
    record = side.sets.get("measures", {}).get(measure) if fixed else None
    if record is None:
        return {key: side.sets[key] for key in ("queries", "sha256")}
    return record if "sha256" in record else dict(record, sha256=side.sets["sha256"])


DEFAULT_RESAMPLES = 10000
DEFAULT_SEED = 0
DEFAULT_ALPHA = 0.05
_TOP_MOVES = 5
_TIE_SLACK = 1e-12   # per-query differences this small are ties (float rounding)


class MeasureComparison(NamedTuple):
    """One measure of a paired comparison (run minus reference)."""
    measure: str
    n: int
    mean: float
    reference_mean: float
    delta: float
    ci95: Tuple[float, float]
    p_randomization: float
    p_ttest: float
    p_holm: float
    wins: int
    losses: int
    ties: int
    most_worse: Tuple[Tuple[str, float], ...]
    most_better: Tuple[Tuple[str, float], ...]
    min_detectable: float
    min_p: float
    verdict: str

    __bool__ = _no_truth_value

    def to_dict(self):
        out = self._asdict()
        out["ci95"] = list(self.ci95)
        out["most_worse"] = [list(pair) for pair in self.most_worse]
        out["most_better"] = [list(pair) for pair in self.most_better]
        return out


class Comparison(NamedTuple):
    """What :func:`compare` returns: per-measure paired statistics.  Like a
    report, it has no verdict and so no truth value (``bool()`` raises).
    Each side scores its own chunks (another chunker has its own map):
    ``mapping`` and ``budget`` are the reference's own (its labelled
    evidence lost at ingestion, ``mapping["uncoverable"]``; the context its
    budget measures used, see Report), ``notes`` set the two sides' side by
    side where they differ in what was scored (see _side_notes)."""
    reference: str
    measures: Dict[str, MeasureComparison]
    only_in_run: Tuple[str, ...]
    only_in_reference: Tuple[str, ...]
    mapping: Optional[dict] = None
    budget: Optional[dict] = None
    notes: Tuple[str, ...] = ()

    __bool__ = _no_truth_value

    def __repr__(self):
        """The reference, the pairs and each measure's delta and verdict."""
        rows = list(self.measures.values())
        return "<Comparison vs %s over %s: %s>" % (
            self.reference, _plural(rows[0].n if rows else 0, "query", "queries"), "; ".join(
                "%s %+.4f (%s)" % (r.measure, r.delta, r.verdict) for r in rows[:6])
            + ("; ..." if len(rows) > 6 else ""))

    def _repr_markdown_(self):
        """Jupyter's Markdown display: the comparison table."""
        return _comparison_result_markdown(self)

    def to_dict(self):
        out = {"reference": self.reference,
               "measures": {m: c.to_dict() for m, c in self.measures.items()},
               "only_in_run": list(self.only_in_run),
               "only_in_reference": list(self.only_in_reference)}
        if self.mapping is not None:
            out["mapping"] = json.loads(json.dumps(self.mapping))     # a deep copy
        if self.budget is not None:
            out["budget"] = {m: dict(use) for m, use in self.budget.items()}
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def _repr_html_(self):
        """A notebook's view: the comparison table in HTML."""
        return _comparison_html(self)


def _paired(values, reference, measure, queries):
    return ([values[q][measure] for q in queries], [reference[q][measure] for q in queries])


def _attainable_p(diffs, resamples):
    """The smallest randomization p these differences could give: the observed
    sign pattern and its mirror always count, so 2 / 2**n over n non-zero
    differences when exact (at most 20 of them, or all of one size: McNemar),
    and 1 / (1 + resamples) by Monte Carlo.

    >>> _attainable_p([0.5, -1.0, 0.0], 10000), _attainable_p([1.0] * 30, 10000)
    (0.5, 1.862645149230957e-09)
    """
    nonzero = [d for d in diffs if d != 0.0]
    n = len(nonzero)
    if n == 0:
        return 1.0
    if n <= _EXACT_MAX_N or _one_magnitude(nonzero):
        return math.ldexp(1.0, 1 - n)
    return 1.0 / (1 + resamples)


def _queries_for_significance(tests, alpha):
    """How many differing queries an exact test needs before ``tests``
    Holm-adjusted p-values can reach ``alpha``: the least n with tests * 2 / 2**n <= alpha
    (the exact sign-flip and McNemar tests alike: n all one way gives 2 / 2**n)."""
    return math.ceil(math.log2(2 * tests / alpha))


def _verdict(row, alpha, tests):
    if row.p_holm <= alpha:
        return "significantly %s" % ("worse" if row.delta < 0 else "better")
    if not row.wins and not row.losses:
        return "no difference (equal on every query)"
    if row.min_p * tests > alpha:
        differ = row.wins + row.losses
        return ("no detectable difference (only %s; a test at alpha=%g needs at least %d)"
                % (_plural(differ, "query differs", "queries differ"), alpha,
                   _queries_for_significance(tests, alpha)))
    return ("no detectable difference (n too small to see less than %.4f)"
            % row.min_detectable)


def _per_query_of(report):
    """A report's per-query values, or None when it holds means only (read
    back from JSON written without them)."""
    return report.per_query if report.scored_count is None else None


def _compare_measure(measure, queries, values, reference, resamples, seed):
    if not queries:
        return None
    ours, theirs = _paired(values, reference, measure, queries)
    diffs = [a - b for a, b in zip(ours, theirs)]
    n = len(diffs)
    # One generator per measure, seeded from (seed, measure): adding a measure
    # or a reference never changes another measure's numbers.
    rng = random.Random("%s|%s" % (seed, measure))
    moves = sorted(zip(diffs, queries))
    spread = _statistics().stdev(diffs) if n > 1 else 0.0
    return MeasureComparison(
        measure=measure, n=n, mean=_mean(ours), reference_mean=_mean(theirs),
        delta=_mean(diffs), ci95=bootstrap_ci(diffs, resamples=resamples, rng=rng),
        p_randomization=randomization_p(diffs, resamples=resamples, rng=rng),
        p_ttest=paired_ttest(diffs)[1], p_holm=1.0,
        wins=sum(1 for d in diffs if d > _TIE_SLACK),
        losses=sum(1 for d in diffs if d < -_TIE_SLACK),
        ties=sum(1 for d in diffs if abs(d) <= _TIE_SLACK),
        most_worse=tuple((q, d) for d, q in moves[:_TOP_MOVES] if d < -_TIE_SLACK),
        most_better=tuple((q, d) for d, q in reversed(moves[-_TOP_MOVES:]) if d > _TIE_SLACK),
        min_detectable=min_detectable_difference(spread, n),
        min_p=_attainable_p(diffs, resamples), verdict="")


def compare(report, reference, *, resamples=DEFAULT_RESAMPLES, seed=DEFAULT_SEED,
            alpha=DEFAULT_ALPHA, reference_name="reference"):
    """Paired comparison of ``report`` (run) with ``reference`` (e.g. main's run).

    Over the queries both reports scored, for every measure the two share: both
    means, the difference (run minus reference), a 95% paired percentile
    bootstrap interval, the two-sided sign-flip randomization p (exact up to 20
    non-zero differences), the paired t-test p, wins/losses/ties, the queries
    that moved most, and a verdict.  ``p_holm`` is Holm-adjusted over the
    measures of this comparison; :func:`compare_all` adjusts over several
    references.  The verdict reads ``p_holm`` at ``alpha``.

    >>> a = evaluate({"q%d" % i: {"d": 1} for i in range(8)},
    ...              {"q%d" % i: ["d"] for i in range(8)}, k=1, measures="success")
    >>> b = evaluate({"q%d" % i: {"d": 1} for i in range(8)},
    ...              {"q%d" % i: ["x", "d"] for i in range(8)}, k=1, measures="success")
    >>> c = compare(b, a).measures["success@1"]
    >>> c.delta, c.losses, c.p_randomization, c.verdict
    (-1.0, 8, 0.0078125, 'significantly worse')
    """
    if not isinstance(reference_name, str):
        raise EvalError("reference_name must be a string, got %s" % _short_repr(reference_name))
    return compare_all(report, [(reference_name, reference)], resamples=resamples,
                       seed=seed, alpha=alpha)[0]


def compare_all(report, references, *, resamples=DEFAULT_RESAMPLES, seed=DEFAULT_SEED,
                alpha=DEFAULT_ALPHA):
    """:func:`compare` against several ``(name, report)`` references, with the
    Holm adjustment over every (reference, measure) pair."""
    resamples = _checked_options(report, alpha, resamples, seed)
    comparisons = []
    for name, reference in _checked_references(references):
        _checked_options(reference, alpha, resamples, seed)
        if reference.rel != report.rel:
            raise EvalError("%s was scored with rel=%d and the run with rel=%d: not comparable"
                            % (name, reference.rel, report.rel))
        # Paired as every verdict is (see _paired_view): over the queries both
        # scored for the measure.
        views = {m: _paired_view(m, _Side(reference.mean, _per_query_of(reference)),
                                 _Side(report.mean, _per_query_of(report)))
                 for m in report.measures if m in reference.mean}
        if not any(v.queries for v in views.values()):
            raise EvalError("%s: no query or measure in common with the run" % name)
        rows = {m: _compare_measure(m, list(v.queries), report.per_query,
                                    reference.per_query, resamples, seed)
                for m, v in views.items()}
        rows = {m: row for m, row in rows.items() if row is not None}
        comparisons.append(Comparison(
            name, rows, tuple(sorted(set(report.per_query) - set(reference.per_query))),
            tuple(sorted(set(reference.per_query) - set(report.per_query))),
            reference.mapping, reference.budget, tuple(_side_notes(report, reference, rows))))
    flat = [(c, m) for c in comparisons for m in c.measures]
    adjusted = holm([c.measures[m].p_randomization for c, m in flat])
    for (comparison, m), p in zip(flat, adjusted):
        row = comparison.measures[m]._replace(p_holm=p)
        comparison.measures[m] = row._replace(verdict=_verdict(row, alpha, len(flat)))
    return comparisons


def _side_notes(report, reference, measures):
    """What the two sides of a comparison scored differently, set side by
    side: labelled evidence lost at ingestion (each side's chunk map), and
    the context each side's budget measures used (a side that ran out of
    retrieved chunks before the budget is scored on less context)."""
    notes = []
    lost = [len(((side.mapping or {}).get("uncoverable")) or ()) for side in (report, reference)]
    if any(lost):
        notes.append("lost at ingestion (labelled evidence no chunk of the side's map can "
                     "deliver, scored as misses; see mapping.uncoverable): run %s, reference %s"
                     % (_plural(lost[0], "query", "queries"), _plural(lost[1], "query",
                                                                         "queries")))
    for m in measures:
        run, ref = ((side.budget or {}).get(m) for side in (report, reference))
        if run is None or ref is None:
            continue
        unit = run["unit"] or ref["unit"] or "tokens or characters"
        short = [label for label, use in (("the run", run), ("the reference", ref))
                 if use["ran_out"]]
        notes.append("%s: context used %.1f (run) and %.1f (reference) of %d %s on average; "
                     "ran out of retrieved chunks before the budget on %d of %d (run) and %d "
                     "of %d (reference) queries%s"
                     % (m, run["used"], ref["used"], run["budget"], unit, run["ran_out"],
                        run["queries"], ref["ran_out"], ref["queries"],
                        "" if not short else ": %s %s scored on less context; retrieve deeper "
                        "to compare at equal cost" % (" and ".join(short),
                                                      "is" if len(short) == 1 else "are")))
    return notes


def _checked_references(references):
    """``references`` as a list of (name, Report) pairs, the name a string
    (it is printed and written as the reference's name)."""
    if isinstance(references, (list, tuple)):
        pairs = list(references)
        if all(isinstance(pair, (tuple, list)) and len(pair) == 2 and isinstance(pair[0], str)
               for pair in pairs):
            return pairs
    raise EvalError("references must be a list of (name, Report) pairs, the name a string, "
                    "got %s" % _short_repr(references))


def _sample_size_note(groups):
    """One short note when a gated measure's 95% margin of the mean (normal
    approximation) exceeds its tolerance: said once, for the measure that
    needs the most queries for a drop that size to show, with that number.
    ``groups`` are (slice or None, per-query values, tolerances); a slice is
    named only when every query is enough (a slice is smaller: when the
    whole is too small, so are its slices).

    >>> r = evaluate({"q%d" % i: {"d": 1} for i in range(100)},
    ...              {"q%d" % i: ["d"] if i < 80 else [] for i in range(100)}, k=1,
    ...              measures="success")
    >>> a1 = {q: r.per_query[q] for q in ("q1", "q2", "q3", "q90")}     # 1, 1, 1, 0
    >>> print(_sample_size_note([(None, r.per_query, {"success@1": 0.04}),
    ...                          ("a=1", a1, {"success@1": 0.04})]))
    too few queries to see a drop of the tolerance: success@1 is +/-0.079 on 100 queries, about 389 needed
    >>> print(_sample_size_note([(None, r.per_query, {"success@1": 0.1}),
    ...                          ("a=1", a1, {"success@1": 0.1})]))
    too few queries to see a drop of the tolerance in slice a=1: success@1 is +/-0.490 on 4 queries, about 97 needed
    """
    wide = []       # (queries needed, margin, slice, measure, queries)
    for name, rows, allowed in groups:
        for measure in sorted(allowed):
            values = [v[measure] for v in rows.values() if measure in v]
            if len(values) < 2 or allowed[measure] <= 0:
                continue
            margin = margin_of_error(values)
            if margin > allowed[measure]:
                needed = queries_needed(_statistics().stdev(values), allowed[measure])
                wide.append((needed, margin, name, measure, len(values)))
    if not wide:
        return None
    overall = [w for w in wide if w[2] is None]
    needed, margin, name, measure, n = min(overall or wide, key=lambda w: (-w[0], -w[1], w[2:]))
    others = len({w[2] for w in wide if w[2] not in (None, name)})
    return "too few queries to see a drop of the tolerance%s: %s is +/-%.3f on %s, %s%s" % (
        "" if name is None else " in slice %s" % name, measure, margin,
        _plural(n, "query", "queries"), "about %d needed" % needed if needed < 10 ** 15
        else "no practical number of queries is enough",
        " (and in %s)" % _plural(others, "more slice", "more slices")
        if name is not None and others else "")


def _change_name(name, measure):
    """What the gate calls a measure of a slice (name) or of every query (None)."""
    return measure if name is None else "%s: %s" % (name, measure)


def _checked_options(report, alpha, resamples, seed=DEFAULT_SEED):
    """The library's check of what gate() and compare() are given besides a
    baseline; returns resamples as an int."""
    if not isinstance(report, Report):
        raise EvalError("expected a Report (from evaluate), got %s" % type(report).__name__)
    _gated_average(report)
    if (isinstance(alpha, bool) or not isinstance(alpha, (int, float))
            or not 0 < alpha < 1):
        raise EvalError("alpha must be a number between 0 and 1, got %r" % (alpha,))
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise EvalError("seed must be an integer, got %s" % _short_repr(seed))
    return _checked_resamples(resamples)


MAX_RESAMPLES = 10 ** 6


def _checked_resamples(raw):
    resamples = _positive_int(raw, "resamples")
    if resamples > MAX_RESAMPLES:
        raise EvalError("resamples must be at most %d (more would run for hours), got %s"
                        % (MAX_RESAMPLES, _short_repr(raw)))
    return resamples


# ===========================================================================
# src/13_judge_scores.py
#
# Judge scores: a judge's per-query scores as a Report, and judge drift.
#
# A score file's per-query values become a Report's (evaluate_scores): each
# measure score(field=F) over the queries that have a value for F (its own
# population and n, as a character measure's), so the gate, comparisons,
# slices, the hold-out, baselines and every renderer read them as they read
# retrieval measures.  Queries with no value for a field are listed per
# measure in ``Report.scores["unscored"]`` (only with allow_missing).  With
# repeated judge runs, ``Report.scores["noise"]`` gives the judge's noise:
#   within_sd    sqrt(mean of s_q^2) over the queries with 2 or more runs,
#                s_q the sample standard deviation (ddof 1) of query q's runs;
#   noise_floor  SE = sqrt(2 * sum_q s_q^2 / r_q) / n: the standard error of a
#                difference of two means of n queries (r_q runs each) from
#                judge noise alone; the gate notes a tolerance below 2 * SE.
# With a pass threshold (--pass-threshold F=X, in F's own units), the
# queries whose runs fall on both sides of X ("borderline") are listed with
# the share of their runs on each side.  Judge drift (field_drift,
# judge_drift): one judge's stored scores against its scores now.
#
# Uses: 01_head to 12_statistics.  Used by: the command line.
# ===========================================================================

def evaluate_scores(scores, measures=None, *, queries=None, by=(), holdout=None, as_of=None,
                    reveal_holdout=False, meta=None, allow_missing=False, pass_threshold=None):
    """A :class:`Report` of judge scores: ``scores`` is one :class:`Scores`
    (see :func:`load_scores`) or a list of them (each field in one file).

    ``measures`` names the fields: ``score(field=faithfulness)`` or the field
    name alone (default: every field).  A query with no value for a field,
    in its file or in another file or ``queries`` (the test set), is an error
    unless ``allow_missing``: then it is listed as unscored for that field.
    ``pass_threshold`` maps a field to a threshold in its own units: the
    queries whose runs fall on both sides are listed (``scores["borderline"]``).
    ``queries``, ``by``, ``holdout``, ``as_of``, ``reveal_holdout`` and
    ``meta`` are as for :func:`evaluate`.

    >>> s = load_scores(io.StringIO('{"query_id": "q1", "f": [0.8, 0.9, 0.85]}\\n'
    ...                             '{"query_id": "q2", "f": 0.5}\\n'))
    >>> r = evaluate_scores(s)
    >>> r.measures, r.mean, r.per_query["q1"]
    (('score(field=f)',), {'score(field=f)': 0.675}, {'score(field=f)': 0.85})
    """
    scores = [scores] if isinstance(scores, Scores) else scores
    if not isinstance(scores, (list, tuple)) or not scores or not all(
            isinstance(s, Scores) for s in scores):
        raise EvalError("scores must be a Scores (see load_scores) or a list of them")
    meta = _checked_meta(meta)
    testset = _test_set(queries, by, holdout, as_of, reveal_holdout, "scored")
    return _with_meta(_evaluate_scores(scores, measures, testset, allow_missing,
                                       pass_threshold), meta)


def _evaluate_scores(scores, measures, testset, allow_missing, thresholds=None, queries=None,
                     skip_extra=False):
    """evaluate_scores() with the _TestSet made (None: no query metadata).
    ``queries`` are the qrels' queries when both tiers are in one report:
    each needs a score too, and they (with the query metadata) are the test
    set, so a score line of another query is an error naming it, as a run's
    is, unless ``skip_extra`` (--skip-extra-queries): then it is left out,
    with a warning.  Without qrels the score files are part of the test set."""
    files = _files_by_field(scores)
    measures = _score_measures(measures, files)
    report = _scores_report(files, measures, testset, allow_missing,
                            _checked_thresholds(thresholds, measures, files), queries,
                            skip_extra)
    inputs = {("scores" if i == 0 else "scores.%d" % (i + 1)): {
        key: value for key, value in s.info.items() if key != "fields"}     # as a run's
        for i, s in enumerate(scores)}
    if testset is not None and testset.info is not None:
        inputs["queries"] = testset.info
    return report._replace(inputs=inputs)


# --- judge drift: one judge's stored scores against its scores now ---------------
#
# A frozen sample holds items (question, context and answer, fixed by their
# input_sha256) and the scores a judge gave them; scored again, the two sets
# of scores are paired by item.  Numeric fields get the paired statistics of
# the gate (mean difference, bootstrap interval, sign-flip p: McNemar for 0/1
# values) and the mean absolute difference, which --max-drift reads; for 0/1
# values it is 1 - agreement.  Categorical fields (booleans, integers on an
# integer range) also get raw agreement and unweighted Cohen's kappa
# (reference: sklearn.metrics.cohen_kappa_score; tests/data/stats/drift.json).


def cohen_kappa(stored, current):
    """Unweighted Cohen's kappa of two labellings of the same items; returns
    (agreement, kappa, labels, counts).

    ``counts[i][j]`` is the number of items labelled ``labels[i]`` then
    (stored) and ``labels[j]`` now (current), labels sorted.  With n items,
    d of them on the diagonal and r_k, c_k the row and column totals:
    agreement = d / n, chance agreement p_e = sum r_k c_k / n**2, and kappa =
    (agreement - p_e) / (1 - p_e) = (n d - sum r_k c_k) / (n**2 - sum r_k c_k),
    taken from integers in one division.  When both labellings use one and
    the same label throughout, p_e = 1 and kappa is undefined: None (sklearn
    gives NaN).  No items gives (None, None, [], []).

    >>> a, k, labels, counts = cohen_kappa([1, 1, 1, 0, 0, 1, 0, 1, 1, 1],
    ...                                    [1, 1, 0, 0, 0, 1, 1, 1, 1, 1])
    >>> a, k == 11 / 21, labels, counts    # (10 * 8 - 58) / (100 - 58) = 22 / 42
    (0.8, True, [0, 1], [[2, 1], [1, 6]])
    >>> cohen_kappa([True, True], [True, True])[:2]
    (1.0, None)
    """
    stored, current = list(stored), list(current)
    if len(stored) != len(current):
        raise EvalError("cohen_kappa needs two labellings of the same items, got %d and %d"
                        % (len(stored), len(current)))
    n = len(stored)
    if n == 0:
        return None, None, [], []
    labels = sorted(set(stored) | set(current))
    index = {label: i for i, label in enumerate(labels)}
    counts = [[0] * len(labels) for _ in labels]
    for a, b in zip(stored, current):
        counts[index[a]][index[b]] += 1
    diagonal = sum(counts[i][i] for i in range(len(labels)))
    chance = sum(sum(counts[i]) * sum(row[i] for row in counts) for i in range(len(labels)))
    kappa = None if chance == n * n else (n * diagonal - chance) / (n * n - chance)
    return diagonal / n, kappa, labels, counts


class FieldDrift(NamedTuple):
    """One score field of a drift check (see :func:`field_drift`); differences
    are current minus stored, on the field's [0, 1] scale."""
    field: str
    n: int
    stored_mean: float
    current_mean: float
    mean_difference: float
    ci95: Tuple[float, float]
    p: float
    mean_absolute_difference: float
    largest_change: Optional[Tuple[str, float, float]]
    agreement: Optional[float] = None
    kappa: Optional[float] = None
    labels: Optional[Tuple] = None
    confusion: Optional[Tuple[Tuple[int, ...], ...]] = None

    __bool__ = _no_truth_value

    def to_dict(self):
        out = self._asdict()
        out["ci95"] = list(self.ci95)
        out["largest_change"] = (None if self.largest_change is None else dict(zip(
            ("item", "stored", "current"), self.largest_change)))
        out["categorical"] = self.labels is not None
        out["labels"] = None if self.labels is None else list(self.labels)
        out["confusion"] = None if self.confusion is None else [list(r) for r in self.confusion]
        return out


def field_drift(field, stored, current, *, labels=None, resamples=10000, seed=0):
    """Drift of one score field: ``stored`` and ``current`` map each item of
    the frozen sample to its value then and now ([0, 1], the same items).

    Over the n items: both means; the mean difference (current - stored) with
    its 95% paired percentile bootstrap interval (:func:`bootstrap_ci`) and
    two-sided sign-flip p (:func:`randomization_p`: the exact McNemar test
    for 0/1 values), as the gate computes them, from one generator seeded by
    (seed, field); the mean absolute difference; the largest change (item,
    stored, current: the largest |difference|, first item id on ties; None
    when nothing changed).  ``labels`` (a function of a value, e.g. the
    field's original integer) makes the field categorical: agreement, kappa
    and the confusion table of :func:`cohen_kappa` on the labels.

    >>> d = field_drift("f", {"a": 0.5, "b": 1.0, "c": 0.25, "e": 1.0},
    ...                 {"a": 0.75, "b": 1.0, "c": 0.0, "e": 0.75})
    >>> d.mean_difference, d.mean_absolute_difference, d.largest_change, d.p
    (-0.0625, 0.1875, ('a', 0.5, 0.75), 1.0)
    """
    items = sorted(stored)
    if sorted(current) != items:
        raise EvalError("field_drift: %s: the stored and current values must be of the same "
                        "items" % field)
    if not items:
        raise EvalError("field_drift: %s: no items" % field)
    then = _finite_floats([stored[i] for i in items], "stored %s scores" % field)
    now = _finite_floats([current[i] for i in items], "current %s scores" % field)
    diffs = [b - a for a, b in zip(then, now)]
    rng = random.Random("%s|drift|%s" % (seed, field))
    biggest = max(range(len(items)), key=lambda i: abs(diffs[i]))    # the first of the largest
    out = FieldDrift(
        field=field, n=len(items), stored_mean=_mean(then), current_mean=_mean(now),
        mean_difference=_mean(diffs), ci95=bootstrap_ci(diffs, resamples=resamples, rng=rng),
        p=randomization_p(diffs, resamples=resamples, rng=rng),
        mean_absolute_difference=math.fsum(map(abs, diffs)) / len(diffs),
        largest_change=((items[biggest], then[biggest], now[biggest])
                        if diffs[biggest] != 0.0 else None))
    if labels is None:
        return out
    agreement, kappa, names, counts = cohen_kappa([labels(v) for v in then],
                                                  [labels(v) for v in now])
    return out._replace(agreement=agreement, kappa=kappa, labels=tuple(names),
                        confusion=tuple(map(tuple, counts)))


def judge_drift(frozen, current, *, max_drift=DEFAULT_MAX_DRIFT, resamples=10000, seed=0,
                held_out=()):
    """Did the judge move?  ``frozen`` is the :class:`Scores` of a frozen
    sample (scores stored then), ``current`` a list of :class:`Scores` with
    the same items scored now; returns the ``"drift"`` block of a report.

    Every item of the frozen sample must carry ``input_sha256`` (the hash of
    the question, context and answer judged), be in the current scores of
    each field with a value, and carry the same hash there: otherwise the
    answers were not frozen and this is no drift check (EvalError naming the
    item).  Each field of the frozen sample gets :func:`field_drift` over its
    items, categorical when its values are booleans or integers on an integer
    range with one judge run each (labels on the field's own scale; repeated
    runs make fractions, compared as numbers).  ``passed`` is False when the
    mean absolute difference of a field exceeds ``max_drift``.  ``held_out``
    are the ids of a hold-out (see evaluate): those items are checked as
    inputs but left out of every statistic, never named, only counted in a
    note, as the hold-out is left out of every other mean.

    >>> then = load_scores(io.StringIO('{"query_id": "f1", "input_sha256": "ab", "ok": true}\\n'
    ...                                '{"query_id": "f2", "input_sha256": "cd", "ok": true}\\n'))
    >>> now = load_scores(io.StringIO('{"query_id": "f1", "input_sha256": "ab", "ok": true}\\n'
    ...                               '{"query_id": "f2", "input_sha256": "cd", "ok": false}\\n'))
    >>> d = judge_drift(then, [now])
    >>> d["passed"], d["fields"]["ok"]["mean_absolute_difference"], d["fields"]["ok"]["confusion"]
    (False, 0.5, [[0, 0], [1, 1]])
    >>> judge_drift(then, [load_scores(io.StringIO(
    ...     '{"query_id": "f1", "input_sha256": "ab", "ok": true}\\n'
    ...     '{"query_id": "f2", "input_sha256": "ef", "ok": true}\\n'))])
    Traceback (most recent call last):
    ...
    rag_eval.EvalError: <stream>: answer changed for f2: not a drift check (input_sha256 cd... in the frozen sample, ef... in <stream>)
    """
    name = frozen.info["path"]
    if not frozen.fields:
        raise EvalError("%s: the frozen sample holds none of the score fields checked"
                        % name)
    for qid in frozen.queries:
        if not frozen.input_sha256.get(qid):
            raise EvalError("%s: item %r has no input_sha256 as text (the sha256 of the "
                            "question, context and answer judged): a drift check needs it"
                            % (name, qid))
    fields, notes = {}, []
    held_out = frozenset(held_out)
    items = [q for q in frozen.queries if q not in held_out]
    if not items:
        raise EvalError("%s: every item of the frozen sample is in the hold-out, which no "
                        "output names: nothing to check for drift" % name)
    if len(items) < len(frozen.queries):
        notes.append("%s of the hold-out left out of the drift check (never shown)"
                     % _plural(len(frozen.queries) - len(items), "item", "items"))
    for field in frozen.fields:
        now = _drift_current(frozen, current, field)
        stored = {q: v for q, v in frozen.values(field).items() if q not in held_out}
        values = now.values(field)
        labels = _drift_labels(field, frozen, now, notes)
        fields[field] = field_drift(field, stored, {q: values[q] for q in stored},
                                    labels=labels, resamples=resamples,
                                    seed=seed).to_dict()
        fields[field]["drifted"] = (fields[field]["mean_absolute_difference"]
                                    > max_drift + FLOAT_SLACK)
        del fields[field]["field"]
    return {"passed": not any(f["drifted"] for f in fields.values()), "max_drift": max_drift,
            "frozen": {"path": name, "sha256": frozen.info.get("sha256")},
            "items": len(items), "fields": fields, "notes": notes}


def _drift_current(frozen, current, field):
    """The current Scores of ``field``, checked against the frozen sample:
    each frozen item there, with a value and the same input_sha256."""
    now = next((s for s in current if field in s.fields), None)
    if now is None:
        raise EvalError("%s: the frozen sample's field %r is in no current --scores file"
                        % (frozen.info["path"], field))
    where = now.info["path"]
    for qid in frozen.runs[field]:
        if qid not in now.queries:
            raise EvalError("%s: item %r of the frozen sample is not in the current scores "
                            "(%s)" % (frozen.info["path"], qid, where))
        if qid not in now.runs[field]:
            raise EvalError("%s: item %r has no %s score now: the drift check needs one"
                            % (where, qid, field))
        then_hash, now_hash = frozen.input_sha256[qid], now.input_sha256.get(qid)
        if not now_hash:
            raise EvalError("%s: item %r has no input_sha256 as text: the drift check cannot "
                            "tell that it judged the frozen answer" % (where, qid))
        if now_hash != then_hash:
            raise EvalError("%s: answer changed for %s: not a drift check (input_sha256 %s... "
                            "in the frozen sample, %s... in %s)" % (
                                frozen.info["path"], qid, then_hash[:12], now_hash[:12], where))
    return now


def _drift_labels(field, frozen, now, notes):
    """The label of a value of a categorical field on its own scale (a
    boolean, or an integer of its integer range), else None."""
    kinds = {frozen.kinds[field], now.kinds[field]}
    lo, hi = frozen.ranges[field]
    if not (kinds <= {"boolean"} or (kinds <= {"boolean", "integer"}
                                     and lo.is_integer() and hi.is_integer())):
        return None
    if any(len(runs) > 1 for scores in (frozen, now)
           for runs in scores.runs[field].values()):
        notes.append("%s: repeated judge runs make each item's value a fraction: compared as "
                     "numbers (no agreement or kappa; the p is no McNemar test)" % field)
        return None
    if kinds == {"boolean"}:
        return lambda v: v == 1.0
    return lambda v: int(round(lo + v * (hi - lo)))


def _with_scores(report, scored):
    """Both tiers in one report: the retrieval ``report`` and the judge scores'
    (``scored``), measures side by side, each over its own population (n);
    slices and the hold-out made again over both."""
    names = report.measures + scored.measures
    per_query = {q: dict(report.per_query.get(q, {}), **scored.per_query.get(q, {}))
                 for q in sorted(set(report.per_query) | set(scored.per_query))}
    counts = dict(report.n or dict.fromkeys(report.measures, len(report.per_query)),
                  **(scored.n or dict.fromkeys(scored.measures, len(scored.per_query))))
    same = all(n == len(per_query) for n in counts.values())
    merged = report._replace(
        measures=names, per_query=per_query, mean=dict(report.mean, **scored.mean),
        n=None if same else counts, scores=scored.scores, drift=scored.drift,
        unscored=tuple(sorted((set(report.unscored) | set(scored.unscored)) - set(per_query))),
        skipped=tuple(sorted(set(report.skipped) | set(scored.skipped))),
        inputs=dict(report.inputs or {}, **(scored.inputs or {})),
        warnings=report.warnings + tuple(w for w in scored.warnings if w not in report.warnings))
    if report.membership is None:
        return merged
    membership = dict(sorted(dict(report.membership, **scored.membership).items()))
    merged = merged._replace(membership=membership, slices=_slice_stats(merged, membership))
    ours, theirs = report.holdout, scored.holdout
    if ours is None:
        return merged
    held_rows = {q: dict((ours.per_query or {}).get(q, {}), **(theirs.per_query or {}).get(q, {}))
                 for q in sorted(set(ours.per_query or ()) | set(theirs.per_query or ()))}
    unscored = tuple(q for q in sorted(set(ours.ids["unscored"]) | set(theirs.ids["unscored"]))
                     if q not in held_rows)
    held = _held_out(ours.slice, (held_rows, unscored, ours.ids["missing"]), names,
                     ours.revealed, ours.ids["all"])
    # A set-level measure's hold-out mean is of cells the report no longer holds
    # (the test set set them apart): kept as the retrieval report made it.
    kept = {m: v for m, v in ours.mean.items() if m not in held.mean}
    if not kept:
        return merged._replace(holdout=held)
    counts = dict(held.n or dict.fromkeys(held.mean, held.queries),
                  **{m: (ours.n or {}).get(m, ours.queries) for m in kept})
    return merged._replace(holdout=held._replace(
        mean={m: kept.get(m, held.mean.get(m)) for m in names if m in kept or m in held.mean},
        n=None if all(v == held.queries for v in counts.values()) else counts))


def _files_by_field(scores):
    """{field: Scores}: each field read from one file."""
    files = {}
    for s in scores:
        for field in s.fields:
            if field in files:
                raise EvalError("the score field %r is in two files, %s and %s: give it once"
                                % (field, files[field].info["path"], s.info["path"]))
            files[field] = s
    return files


def _score_measures(measures, files):
    """The score measures asked for: names (a list, or one comma-separated
    string), each score(field=F) or F alone; default every field."""
    if measures is None:
        return tuple(parse_measure("score(field=%s)" % f) for f in files)
    if isinstance(measures, str):
        measures = _split_top_level(measures)
    out = []
    for item in measures:
        m = item if isinstance(item, Measure) else None
        if m is None and isinstance(item, str) and _FIELD_NAME.match(item.strip()):
            m = parse_measure("score(field=%s)" % item.strip())
        m = m or parse_measure(item)
        if m.name != "score":
            raise EvalError("%s is a retrieval measure: it needs QRELS and a RUN, not a score "
                            "file" % (m,))
        field = dict(m.params)["field"]
        if field not in files:
            raise EvalError("%s: no score file has the field %r (fields: %s)"
                            % (m, field, ", ".join(files) or "none"))
        if m not in out:
            out.append(m)
    if not out:
        raise EvalError("no measures requested")
    return tuple(out)


def _checked_thresholds(thresholds, measures, files):
    """{measure name: (threshold mapped onto [0, 1], as given)} of
    ``pass_threshold`` ({field: X}, X in the field's own units)."""
    out = {}
    named = {dict(m.params)["field"]: str(m) for m in measures}
    for field, value in sorted((thresholds or {}).items()):
        if field not in named:
            raise EvalError("pass threshold: %r is not a measured score field (fields: %s)"
                            % (field, ", ".join(named)))
        lo, hi = files[field].ranges[field]
        x = _as_score(value, "the pass threshold of %s" % field)
        if not min(lo, hi) <= x <= max(lo, hi):
            raise EvalError("the pass threshold of %s, %s, is outside its range [%s, %s]"
                            % (field, _number_text(x), _number_text(lo), _number_text(hi)))
        out[named[field]] = ((x - lo) / (hi - lo) + 0.0, x)
    return out


def _scores_report(files, measures, testset, allow_missing, thresholds, queries=None,
                   skip_extra=False):
    """The Report of the score measures (see evaluate_scores)."""
    names = tuple(str(m) for m in measures)
    fields = {str(m): dict(m.params)["field"] for m in measures}
    members = dict.fromkeys(queries or ())  # the test set: the score files, metadata, qrels
    used = _files_of(files, fields.values())
    extra = _extra_score_queries(used, queries, testset, skip_extra)
    skipped = {q for _, ids in extra for q in ids}
    for s in used:
        members.update(dict.fromkeys(q for q in s.queries if q not in skipped))
    if testset is not None:
        members.update(dict.fromkeys(q for q in testset.queries))
        members = {q: None for q in members if q not in testset.expired}
    per_query = {q: {} for q in sorted(members)}
    runs, unscored = {}, {}
    for name, field in fields.items():
        s = files[field]
        runs[name] = s.runs[field]
        for qid, query_runs in s.runs[field].items():
            if qid in per_query:
                per_query[qid][name] = _run_mean(query_runs)
        absent = [q for q in per_query if q not in s.runs[field]]
        _check_absent(absent, s, field, allow_missing)
        unscored[name] = absent
    hidden = testset.hidden if testset is not None else frozenset()
    nothing = {q: 0 for q, row in per_query.items() if not row}    # no score at all: unscored
    per_query = {q: row for q, row in per_query.items() if row}
    held = _set_apart(hidden, per_query, nothing, ())
    for name in names:
        if not any(name in row for row in per_query.values()):
            raise EvalError("%s: no query has a score: nothing to average" % name)
    mean, counts = _population_means(per_query, names)
    block = {"inputs": [s.info for s in used],
             "ranges": {f: list(files[f].ranges[f]) for f in fields.values()},
             "unscored": {n: [q for q in ids if q not in hidden] for n, ids in unscored.items()},
             "noise": _judge_noise({n: {q: r for q, r in runs[n].items() if q in per_query
                                        and n in per_query[q]} for n in names}, counts,
                                   len(per_query)),
             "borderline": {n: _borderline({q: r for q, r in runs[n].items()
                                            if q in per_query}, *thresholds[n])
                            for n in names if n in thresholds}}
    warnings = ["%s: skipped %s not in the qrels: %s"
                % (s.info["path"], _plural(len(ids), "score-file query", "score-file queries"),
                   _preview(ids)) for s, ids in extra if ids]
    warnings += ["%s: %s without a score, listed as unscored: %s"
                 % (n, _plural(len(ids), "query", "queries"), _preview(ids))
                 for n, ids in block["unscored"].items() if ids]
    report = Report(names, mean, per_query, tuple(sorted(nothing)), (), tuple(sorted(skipped)),
                    {}, {}, tuple(warnings), n=counts, scores=block)
    return report if testset is None else testset.report(report, held)


def _extra_score_queries(used, queries, testset, skip_extra):
    """The queries of the score files ``used`` that the test set (the qrels'
    ``queries`` and the query metadata) does not hold, when qrels are given
    (``queries`` not None): an error naming them, as for a run, unless
    ``skip_extra``; then [(Scores, sorted ids)], the ids to leave out."""
    if queries is None:
        return []
    known = set(queries) | set(testset.queries if testset is not None else ())
    by_file = [(s, sorted(q for q in s.queries if q not in known)) for s in used]
    for s, extra in by_file:
        if extra and not skip_extra:
            raise EvalError("%s: %s not in the qrels: %s (check the files match, or skip them "
                            "with --skip-extra-queries)"
                            % (s.info["path"], _plural(len(extra), "query is", "queries are"),
                               _preview(extra)))
    return by_file


def _files_of(files, fields):
    """The distinct Scores holding these fields, in order."""
    out = []
    for field in fields:
        if not any(files[field] is s for s in out):
            out.append(files[field])
    return out


def _check_absent(absent, scores, field, allow_missing):
    """Queries of the report with no value for a field: listed (allowed), or
    an error naming them."""
    if absent and not allow_missing:
        missing = [q for q in absent if q in scores.unscored[field]]
        if missing:     # load_scores was allowed to keep them, the report is not
            raise EvalError("%s: %s no %s score: %s (--allow-missing-scores lists them as "
                            "unscored)" % (scores.info["path"], _plural(
                                len(missing), "query has", "queries have"), field,
                                           _preview(missing)))
        raise EvalError("%s: %s of the test set (the other score files, the qrels, the query "
                        "metadata) %s no line here, "
                        "so no %s score: %s (--allow-missing-scores lists them as unscored)"
                        % (scores.info["path"], _plural(len(absent), "query", "queries"),
                           "has" if len(absent) == 1 else "have", field, _preview(absent)))


def _judge_noise(runs, counts, scored):
    """{measure: {"queries", "runs", "within_sd", "noise_floor"}} of the
    measures with repeated runs (see the section's comment); ``runs`` maps
    each measure to {qid: runs} of the queries its mean is over, ``counts``
    its n when populations differ (else every one of ``scored`` queries).

    >>> noise = _judge_noise({"m": {"a": (0.8, 0.9, 0.85), "b": (0.5,)}}, None, 2)["m"]
    >>> sorted((key, round(v, 6) if isinstance(v, float) else v) for key, v in noise.items())
    [('noise_floor', 0.020412), ('queries', 1), ('runs', [1, 3]), ('within_sd', 0.05)]
    """
    out = {}
    for name, by_query in runs.items():
        repeated = {q: r for q, r in by_query.items() if len(r) > 1}
        if not repeated:
            continue
        variances = {q: _statistics().variance(r) for q, r in repeated.items()}
        n = counts[name] if counts is not None else scored
        sizes = [len(r) for r in by_query.values()]
        out[name] = {
            "queries": len(repeated), "runs": [min(sizes), max(sizes)],
            "within_sd": math.sqrt(math.fsum(variances.values()) / len(variances)),
            "noise_floor": math.sqrt(2 * math.fsum(v / len(repeated[q])
                                                   for q, v in variances.items())) / n}
    return out


def _borderline(runs, threshold, given):
    """{"threshold": X as given, "queries": {qid: {"runs", "pass", "fail"}}}
    of the queries whose runs fall on both sides of the threshold (a run at
    the threshold passes).

    >>> _borderline({"q1": (0.62, 0.58, 0.61), "q2": (0.7, 0.9)}, 0.6, 0.6)
    {'threshold': 0.6, 'queries': {'q1': {'fail': 1, 'pass': 2, 'runs': 3}}}
    """
    queries = {}
    for qid, query_runs in sorted(runs.items()):
        passed = sum(1 for r in query_runs if r >= threshold)
        if 0 < passed < len(query_runs):
            queries[qid] = {"fail": len(query_runs) - passed, "pass": passed,
                            "runs": len(query_runs)}
    return {"threshold": given, "queries": queries}


# ===========================================================================
# src/13_stages.py
#
# Stages: which stage broke, retrieval or generation.
#
# Each scored, answerable query with an answer verdict (--answer FIELD: the
# mean of the query's judge runs, passing at the field's --pass-threshold X,
# a boolean when true) is in one stage, by whether the top k hold its
# evidence (complete(unit=U)@k, or success with --stages-evidence success)
# and whether its answer passes:
#
#   pass              evidence retrieved, answer passes
#   generation_miss   evidence retrieved, answer fails: the context held what was needed
#   retrieval_miss    evidence not retrieved, answer fails
#   unsupported_pass  evidence not retrieved, answer passes: model memory, or a missing label
#
# Queries stated unanswerable, answerable queries without a verdict and
# verdicts on queries without a relevant label are counted apart, never in
# these four.  _with_stages joins a report of both tiers with the verdicts:
# the stage measures (answer_given_evidence@k, answer_without_evidence@k, see
# 03_measures: the scorer gives them each query's evidence) get their values
# and populations, and the report its stages block (Report.stages).
# _attribution says, against a baseline's per-query stages, which stage the
# answers that changed moved through (the gate's attribution line).
#
# Uses: 01_head to 13_judge_scores.  Used by: baselines, the gate, reports,
# the report reader, HTML, the command line.
# ===========================================================================

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


# ===========================================================================
# src/14_baselines.py
#
# Baselines: what a gate compares with, saved and read back.
#
# load_baseline reads a baseline file (a saved baseline, or a flat file of
# means) and checks every field (what a baseline must hold); baseline_dict and
# save_baseline write one from a Report (atomically: nothing written
# half-way); _checked_baseline checks a baseline handed to the gate (a
# Baseline, a dict of means, a file name or a Report); the checks a report and its baseline
# must pass to be compared (same score ranges, same --min-score).  Also the
# JSON checking helpers the report reader shares.
#
# Uses: 01_head, 02_records, 04 to 06 (names, readers), 08_provenance,
# 11_evaluation.  Used by: the gate, reports, the report reader, HTML, the
# command line.
# ===========================================================================

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


# ===========================================================================
# src/14_rows.py
#
# Rows: score where the data lives, merge the shards exactly.
#
# A Spark (or Dask, or Ray) job holds its qrels and its run as tables, not
# files.  score_rows runs on an executor: it reads rows already grouped by
# query (a dict per query, as a line of a JSONL qrels or run file is) and
# scores each query of its run rows with the scorer a single machine would
# build, returning one record per query.  merge_rows runs on the driver: it
# replays the records of every shard through _score, the one function that
# turns per-query results into a Report on every path (the file path's
# forked workers do the same), so the merged report is the single machine's:
# the same means, counts, warnings, slices and hold-out, the same JSON but
# for ``inputs`` (rows have no path: they get counts and content hashes).
#
# What keeps a merge exact is said once, in _Plan: every option that changes
# a number is in the plan's fingerprint, which each record carries; a record
# scored under another plan is refused, as is a query in two records, and a
# record whose query was scored with other labels than the driver's (each
# record carries the hash of its query's labels).
#
# Uses: 01_head to 13_stages.  Used by: Report.from_rows (02_records, forward).
# ===========================================================================

def score_rows(qrels_rows, run_rows, measures=None, k=DEFAULT_K, *, rel=1,
               gain="exponential", unit="id", chunks=None, doc_sep=None, queries=None,
               as_of=None, min_score=None, unjudged_bounds=False,
               trim_label_whitespace=False, answer=None, stages_k=None,
               stages_evidence=None):
    """Score the queries of ``run_rows`` against ``qrels_rows``: a list of
    records, one per run query, for merge_rows to merge on the driver.

    ``run_rows`` are dicts as the lines of a JSONL run are (``{"query_id":
    ..., "scores": {id: score}}`` or ``"docs": [ids]``, or result objects);
    ``qrels_rows`` as the lines of JSONL qrels (``{"query_id": ...,
    "relevant": {id: grade}}``, or label lines), holding at least the
    labels of these queries: group both tables by query first (a query's
    labels on the executor that scores it).  The options are evaluate()'s,
    and evaluate_stages()' answer=, stages_k= and stages_evidence=: the
    judge scores stay on the driver (merge_rows joins them), a shard scores
    the evidence the stage measures read.  Give merge_rows the same options
    (it refuses records scored otherwise).
    Bad rows raise EvalError naming the row and the query.  A record is a
    plain dict of plain values: it pickles, as collect() needs (it is not
    for JSON, which turns its tuples into lists: merge_rows refuses such a
    record).  Tokens and document versions go in the chunk map, not in the
    run's items: checked across queries, a shard cannot check them alone.

    >>> rows = score_rows([{"query_id": "q1", "relevant": {"a": 1}}],
    ...                   [{"query_id": "q1", "docs": ["x", "a"]}], k=2, measures="recall,mrr")
    >>> rows[0]["query_id"], rows[0]["values"]
    ('q1', {'recall@2': 1.0, 'mrr@2': 0.5})
    """
    plan = _Plan(measures, k, rel, gain, unit, chunks, doc_sep, min_score, unjudged_bounds,
                 trim_label_whitespace, as_of, _Tiers(
                     measures, k, None, rel=rel, gain=gain, unit=unit, answer=answer,
                     stages_k=stages_k, stages_evidence=stages_evidence))
    run_rows = list(run_rows)
    if not run_rows:
        return []
    qrels, described, _ = _rows_qrels(qrels_rows, plan)
    wanted = set(qrels).union(_row_query(row) for row in run_rows)
    metadata = _metadata(described, "qrels rows", queries)[0]
    if metadata is not None:    # this shard's queries: the rest are other executors'
        metadata = {qid: info for qid, info in _validated_queries(metadata).items()
                    if qid in wanted}
    testset = _test_set(metadata, (), None, as_of, False, "scored")
    scorer, qrels = plan.scorer(qrels, testset, whole=False)
    inp = _Rows(run_rows, "run rows")
    records = []
    for number, (qid, ranking) in enumerate(_jsonl_run(inp), 1):
        _refuse_own_sizes(ranking, number, qid)
        known = qid in qrels
        result = scorer(qid, ranking) if known else None
        record = {"query_id": qid, "plan": plan.fingerprint,
                  "values": None if result is None else result[0],
                  "detail": None if result is None else result[1:],
                  "labels": _labels_check(qrels[qid]) if known else None,
                  "unanswerable": qid in scorer.unanswerable,
                  "rising": bool(inp.rising) and inp.rising[-1] == qid,
                  "run_sha256": _row_sha256(run_rows[number - 1])}
        record["seal"] = _seal(record)
        records.append(record)
    return records


def merge_rows(records, qrels_rows, measures=None, k=DEFAULT_K, *, rel=1,
               gain="exponential", unit="id", chunks=None, doc_sep=None, queries=None,
               by=(), holdout=None, as_of=None, reveal_holdout=False, min_score=None,
               unjudged_bounds=False, trim_label_whitespace=False,
               skip_extra_queries=False, meta=None, names=None, scores=None, answer=None,
               pass_threshold=None, stages_k=None, stages_evidence=None,
               allow_missing_scores=False):
    """The Report of the records of every shard (score_rows' lists, joined
    in any order) against all of ``qrels_rows``: what evaluate_files() gives
    of the whole run, but for ``inputs``.  Give it the options score_rows
    had, and the test-set ones (``by``, ``holdout``, ...) of evaluate().
    ``names`` says what warnings call the inputs, {"qrels": ..., "run":
    ...} (default "qrels rows" and "run"): the command line says their
    paths, so giving those makes the two JSON reports equal.  With the
    judge ``scores`` (a Scores or a list, as evaluate_stages() takes, and
    its answer=, pass_threshold=, stages_k=, stages_evidence=,
    allow_missing_scores=) the report holds both tiers and the stages, as
    evaluate_stages() gives them.

    The driver holds the qrels and each query's values (about queries x
    measures floats).  A query in two records, a record scored under other
    options (measures, rel, unit, min_score, chunk map, ...) or with other
    labels for its query than ``qrels_rows`` holds raise EvalError.  Queries
    of the qrels in no record are not in the run: they score 0, as on one
    machine.  Warnings that name a first query name it in query-id order.
    No record at all (an empty run) is an error, as an empty run file is.

    >>> q = [{"query_id": "q1", "relevant": ["a"]}, {"query_id": "q2", "relevant": ["b"]}]
    >>> parts = [score_rows(q[:1], [{"query_id": "q1", "docs": ["a"]}], k=1, measures="recall"),
    ...          score_rows(q[1:], [{"query_id": "q2", "docs": ["c"]}], k=1, measures="recall")]
    >>> merge_rows(parts[1] + parts[0], q, k=1, measures="recall").mean
    {'recall@1': 0.5}
    """
    if scores is not None:
        scores = _score_list(scores)
    elif (answer is not None or pass_threshold or allow_missing_scores
          or any(_tier_names(measures)[1:])):
        raise EvalError("judge score measures (score(field=...)), stage measures "
                        "(answer_given_evidence, answer_without_evidence), answer=, "
                        "pass_threshold= and allow_missing_scores= are of the judge's scores: "
                        "give merge_rows scores=")
    plan = _Plan(measures, k, rel, gain, unit, chunks, doc_sep, min_score, unjudged_bounds,
                 trim_label_whitespace, as_of, _Tiers(
                     measures, k, None if scores is None else _files_by_field(scores), rel=rel,
                     gain=gain, unit=unit, answer=answer, pass_threshold=pass_threshold,
                     stages_k=stages_k, stages_evidence=stages_evidence))
    meta = _checked_meta(meta)
    names = dict({"qrels": "qrels rows", "run": "run"}, **(names or {}))
    qrels, described, pending = _rows_qrels(qrels_rows, plan)
    metadata, info, notes = _metadata(described, names["qrels"], queries)
    testset = _test_set(metadata, by, holdout, as_of, reveal_holdout, "scored", info, notes)
    scorer, qrels = plan.scorer(qrels, testset)
    ordered = _checked_records(records, plan, qrels, scorer.unanswerable)
    if not ordered:
        raise EvalError("%s: no records: the run rows were empty" % names["run"])
    report = _score(scorer, ((r["query_id"], _result_of(r, plan)) for r in ordered),
                    skip_extra_queries, names["run"], testset)
    report = report._replace(min_score=scorer.min_score,
                             trim_label_whitespace=trim_label_whitespace)
    report = _with_rising_note(report, names["run"],
                               [r["query_id"] for r in ordered if r["rising"]], testset)
    inputs = {"qrels": {"queries": len(qrels), "rows_sha256": _rows_sha256(
                  _label_sha256(labels) for labels in qrels.values())},
              "run": {"queries": len(ordered),
                      "rows_sha256": _rows_sha256(r["run_sha256"] for r in ordered)}}
    if testset is not None and testset.info is not None:
        inputs["queries"] = testset.info
    if report.mapping is not None:  # how chunks became documents is part of the numbers
        inputs["mapping"] = {key: report.mapping[key] for key in ("source", "doc_sep")
                             if report.mapping[key] is not None}
    report = report._replace(inputs=inputs, label_sha256=_label_hashes(qrels, testset))
    if scores is not None:
        report = plan.tiers.joined(report, scores, qrels, testset, allow_missing_scores,
                                   skip_extra_queries)
    if pending:     # first, as the command line puts it
        report = report._replace(warnings=(_pending_note(names["qrels"], pending),)
                                 + report.warnings)
    return _with_meta(report, meta)


def merge_reports(parts, qrels_rows, **options):
    """merge_rows of the records of ``parts``, score_rows' list of each
    shard (as a job gathers them one list a shard), with merge_rows'
    options.

    >>> q = [{"query_id": "q1", "relevant": ["a"]}, {"query_id": "q2", "relevant": ["b"]}]
    >>> parts = [score_rows(q[:1], [{"query_id": "q1", "docs": ["a"]}], k=1, measures="recall"),
    ...          score_rows(q[1:], [{"query_id": "q2", "docs": ["b"]}], k=1, measures="recall")]
    >>> merge_reports(parts, q, k=1, measures="recall").mean
    {'recall@1': 1.0}
    """
    records = []
    for part in parts:
        if not isinstance(part, (list, tuple)):
            raise EvalError("merge_reports takes a list of score_rows' lists (one a shard), "
                            "got %s in it: give merge_rows the records themselves"
                            % _short_repr(part, 60))
        records.extend(part)
    return merge_rows(records, qrels_rows, **options)


class _Plan:
    """What a shard is scored under, and its fingerprint: every option that
    changes a number (the measures by canonical name, rel, min_score, the
    unjudged bounds, label trimming, the chunk map or separator, as_of).
    ``tiers`` (a _Tiers) are the measures: a shard scores the stage
    measures without their thresholds (shard_measures), the driver's scorer
    with them (run_measures), and ``reads`` maps the one to the other ({name:
    shard name})."""

    def __init__(self, measures, k, rel, gain, unit, chunks, doc_sep, min_score, bounds, trim,
                 as_of, tiers):
        # The driver scores with the stage plan (which needs the score files); a shard,
        # and a driver without stage measures, with shard_measures.
        self.tiers = tiers
        self.measures = tiers.run_measures if tiers.plan is not None else tiers.shard_measures
        self.reads = {str(m): str(_shard_measure(m)) for m in self.measures
                      if _is_stage_measure(m)}
        self.shard_stage = frozenset(str(m) for m in tiers.shard_measures
                                     if _is_stage_measure(m))
        self.rel = _positive_int(rel, "rel")
        self.chunks, _ = _library_chunks(chunks)
        self.doc_sep, self.min_score, self.bounds, self.trim = doc_sep, min_score, bounds, trim
        if as_of is not None:
            _check_date(as_of, "as_of")
        facts = {"measures": [str(m) for m in tiers.shard_measures],
                 "rel": self.rel, "doc_sep": doc_sep, "min_score": _checked_min_score(min_score),
                 "bounds": bounds if bounds == "judged" else bool(bounds), "trim": trim,
                 "as_of": as_of,
                 "chunks": None if self.chunks is None else _chunk_map_sha256(self.chunks)}
        self.fingerprint = hashlib.sha256(_dumps(facts).encode()).hexdigest()[:16]

    def scorer(self, qrels, testset, whole=True):
        """(the _QueryScorer, the qrels) of these qrels (the test set's), as
        evaluate() makes them; ``whole``: False for a shard's (the checks
        over every query are the driver's)."""
        if testset is not None:
            qrels = testset.qrels(qrels)
        scorer = _scorer(qrels, self.measures, self.rel, "scored", self.chunks, self.doc_sep,
                         testset, self.min_score, self.bounds, self.trim, whole)
        if not scorer.forkable:
            raise EvalError("the measures map the run's own chunks (doc/start/end in its "
                            "items), which takes every query at once: give the chunk map "
                            "(chunks=) to score rows apart")
        return scorer, qrels


def _rows_qrels(rows, plan):
    """(validated qrels, query metadata or None, how many label rows have no
    grade yet) of qrels rows, read as the lines of a JSONL qrels file."""
    rows = list(rows)
    if not rows:    # a shard of run queries none of which the qrels hold
        return {}, None, 0
    inp = _Rows(rows, "qrels rows")
    return _jsonl_qrels(inp, _rows_label(plan.measures)) + (inp.pending,)


def _row_query(row):
    """The query id of a run row (an error for a row without one is the reader's)."""
    if isinstance(row, dict):
        key = "query_id" if "query_id" in row else _query_key(row, True)
        if key is not None and isinstance(row.get(key), (str, int)):
            return str(row[key])
    return None


def _validated_queries(queries):
    if not isinstance(queries, dict):
        raise EvalError("queries must be a dict {query_id: {...}}, got %s"
                        % type(queries).__name__)
    return queries


_RECORD_KEYS = frozenset(("query_id", "plan", "values", "detail", "labels", "unanswerable",
                          "rising", "run_sha256", "seal"))


def _checked_records(records, plan, qrels, unanswerable):
    """The records of every shard, in query-id order, each checked: as
    score_rows made it (its seal), scored under ``plan``, named once, with
    the labels ``qrels`` holds and stated unanswerable when the driver's
    query metadata says so."""
    by_query = {}
    for part in records:
        if not isinstance(part, dict) or set(part) != _RECORD_KEYS:
            raise EvalError("merge_rows takes the records of score_rows, got %s"
                            % _short_repr(part, 60))
        qid = part["query_id"]
        if part["seal"] != _seal(part):
            raise EvalError("query %r: its record changed after score_rows (passed through "
                            "JSON?): give merge_rows the records as collect() returns them"
                            % (qid,))
        if part["plan"] != plan.fingerprint:
            raise EvalError("query %r was scored with other options (measures, rel, unit, "
                            "min_score, chunk map, answer, stages_k, stages_evidence, ...): "
                            "give merge_rows those of score_rows" % qid)
        if qid in by_query:
            raise EvalError("query %r is in two shards: group the rows by query before "
                            "scoring" % qid)
        known = qid in qrels
        if (part["labels"] is None) == known or (
                known and part["labels"] != _labels_check(qrels[qid])):
            raise EvalError("query %r was scored with other labels than the qrels rows hold, "
                            "or other query metadata (give each executor all the labels of "
                            "its queries, and the queries= merge_rows has)" % qid)
        if part["unanswerable"] != (qid in unanswerable):
            raise EvalError("query %r was scored with other query metadata (stated "
                            "unanswerable on one side only): give score_rows the queries= "
                            "merge_rows has" % qid)
        by_query[qid] = part
    return [by_query[qid] for qid in sorted(by_query)]


def _result_of(record, plan):
    """The scorer's tuple of a record (None: the query is not in the qrels),
    each stage measure of ``plan`` given the value of its shard name (the
    evidence it reads), the shard's stage names left out."""
    if record["detail"] is None:
        return None
    values = record["values"]
    if values is not None and plan.reads:
        shard = values
        values = {name: v for name, v in shard.items() if name not in plan.shard_stage}
        values.update((name, shard[at]) for name, at in plan.reads.items() if at in shard)
    return (values,) + record["detail"]


def _refuse_own_sizes(ranking, number, qid):
    """A shard cannot check the run's own tokens or document versions: they
    are checked across queries (all or none; against every label)."""
    own = getattr(ranking, "chunks", None)
    if own and any(c.tokens is not None or c.doc_sha256 is not None for c in own.values()):
        raise EvalError("run row %d: query %r: its items give tokens or doc_sha256, which are "
                        "checked across queries: give them in the chunk map (chunks=) to "
                        "score rows apart" % (number, qid))


def _labels_check(labels):
    """What a record says of its query's labels: every field (texts and
    document versions too, which the label hash leaves out)."""
    items = sorted(map(repr, labels)) if type(labels) is list else sorted(labels.items())
    return hashlib.sha256(repr(items).encode()).hexdigest()


def _seal(record):
    """A hash of what a record says of its query (not of the seal itself):
    a record that went through JSON (lists for tuples, string keys) breaks it."""
    return hashlib.sha256(repr([record[key] for key in sorted(_RECORD_KEYS - {"seal"})])
                          .encode()).hexdigest()[:16]


def _row_sha256(row):
    return hashlib.sha256(json.dumps(row, sort_keys=True, ensure_ascii=False,
                                     default=str).encode()).hexdigest()


def _rows_sha256(hashes):
    """One hash of a set of rows' hashes, whatever order they came in."""
    return hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()


def _chunk_map_sha256(chunks):
    return _rows_sha256(_row_sha256([cid, list(chunk)]) for cid, chunk in chunks.items())


# ===========================================================================
# src/15_gate.py
#
# Gate: a report against its baseline, the verdict and its notes.
#
# gate() builds the populations (_populations: every scored query not held
# out, each slice of the baseline, the hold-out), pairs each baseline measure
# of each with the report (_paired_view, in 12_statistics: the one rule for
# which queries a verdict compares), and judges each row by the tolerance or,
# with mode="significant", by a paired randomization test with Holm's
# adjustment; it names the queries that fell, the queries only one side
# scored, what changed in the metadata and the labels, the queries that moved
# between slices, and why a measure is missing.  The verdict is a GateResult.
#
# Uses: 01_head, 02_records, 03_measures, 04_measure_names, 08_provenance,
# 12_statistics, 14_baselines.  Used by: reports, the report reader, HTML,
# the command line.
# ===========================================================================

def parse_tolerance(text):
    """``(value, relative)`` from ``0.02`` (absolute) or ``"5%"`` (relative).

    Measures lie in [0, 1], so a drop of 1 or 100% could never be exceeded: such
    a tolerance would pass every gate and is an error.

    >>> parse_tolerance("0.02"), parse_tolerance("5%")
    ((0.02, False), (0.05, True))
    """
    raw = str(text).strip()
    relative = raw.endswith("%")
    try:
        value = _number(raw[:-1] if relative else raw, float)
    except ValueError:
        value = math.nan
    if relative:
        value /= 100.0
    if not 0.0 <= value < 1.0:
        raise EvalError("max drop must be a number in [0, 1) or a percentage in [0%%, 100%%) "
                        "(e.g. 0.02 or 5%%), got %r" % (text,))
    return value, relative


GATE_MODES = ("tolerance", "significant")


def gate(report, baseline, *, max_drop=DEFAULT_MAX_DROP, mode="tolerance",
         alpha=DEFAULT_ALPHA, resamples=DEFAULT_RESAMPLES, seed=DEFAULT_SEED, same=(),
         slice_max_drop=None, fail_on_removed=False):
    """Compare ``report`` with ``baseline``; return a :class:`GateResult`.
    ``baseline`` is a Baseline, a dict of means, a file name (read by
    load_baseline) or a Report (the baseline save_baseline would write of it).

    Every verdict is made on paired values (see _paired_view): each baseline
    measure is compared over the queries both sides scored for it, the
    baseline's mean over them against the current mean over them.  A query
    the baseline scored and the report does not ("removed"), or a new one
    ("added"), is counted and named (never a held-out one) and in neither
    mean.  A regression is a baseline measure whose paired mean fell by more
    than ``max_drop`` (absolute, or relative to the baseline when given as
    ``"5%"``), or one that is MISSING: not in the report, no query both
    sides scored, or a side holding means only whose record of its queries
    differs from the other's (a changed test set).  A file of bare means,
    which records no query set, is compared on its means, with a note.
    ``fail_on_removed`` also fails the gate on any removed query (a frozen
    test set).  Improvements and drops within the tolerance are listed too.
    The gate passes only when there is no regression.

    With per-query values on both sides, every query that fell by more than
    the tolerance is listed, largest drop first, whatever the mean did.
    ``mode="significant"`` fails only on a drop beyond the tolerance whose
    paired randomization p (Holm-adjusted over every gated pair) is at most
    ``alpha``; a row compared on means falls back to the tolerance rule.

    Provenance: a note names every meta key that changed since the baseline
    (``meta_changes``); ``same`` lists keys that must not (an EvalError when
    one differs or is absent on one side).  When both sides hold label
    hashes, ``labels_changed`` lists the queries whose labels changed: the
    means keep them (their values changed with their labels), the list of
    per-query drops leaves them out.

    Slices are gated the same way, each on its own queries: a baseline saved
    with query metadata holds every slice; each is checked (``source=real:
    recall@5``), a slice that disappeared is missing, and ``slice_max_drop``
    gives a slice its own tolerance (``{"risk=high": 0}``).  The hold-out is
    compared on its means while its queries are the baseline's (the baseline
    records their count and sha256, never an id), paired when the baseline
    was saved with its values revealed, and its queries are never named.  Queries that changed slices since the
    baseline are listed (``moved``).

    >>> r = evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, measures="mrr")
    >>> result = gate(r, Baseline({"mrr@2": 0.6, "recall@2": 1.0}))
    >>> result.passed, [(c.measure, c.status) for c in result.regressions]
    (False, [('mrr@2', 'regressed'), ('recall@2', 'missing')])

    A report holding a failed judge drift check (``drift``: the CLI's
    ``--drift``, or :func:`judge_drift` set on it) has its judge score
    regressions marked ``suspect="judge drift"``, with a note; they still
    fail the gate.

    >>> then = load_scores(io.StringIO('{"query_id": "q", "input_sha256": "ab", "ok": 0.9}'))
    >>> now = load_scores(io.StringIO('{"query_id": "q", "input_sha256": "ab", "ok": 0.5}'))
    >>> r = evaluate_scores(now)._replace(drift=judge_drift(then, [now]))
    >>> result = gate(r, {"score(field=ok)": 0.9})
    >>> result.passed, [(c.status, c.suspect) for c in result.changes]
    (False, [('regressed', 'judge drift')])
    """
    resamples = _checked_options(report, alpha, resamples, seed)
    baseline = _checked_baseline(baseline)
    same_notes = _check_same(report.meta, baseline, _same_keys(same))
    if baseline.rel != report.rel:
        raise EvalError("%s was made with rel=%d and this report with rel=%d: the scored "
                        "queries differ, so the numbers are not comparable"
                        % (baseline.source, baseline.rel, report.rel))
    _check_same_min_score(report, baseline)
    _check_same_ranges(report, baseline)
    _check_same_stages(report.stages, baseline.stages, baseline.source)
    same_notes += _check_same_judge(report, baseline)
    if mode not in GATE_MODES:
        raise EvalError("gate mode must be one of %s, got %r" % (", ".join(GATE_MODES), mode))
    if not isinstance(fail_on_removed, bool):
        raise EvalError("fail_on_removed must be True or False, got %s"
                        % _short_repr(fail_on_removed))
    _check_same_holdout(report, baseline)
    tolerance = parse_tolerance(max_drop)
    tolerances = _slice_tolerances(slice_max_drop, baseline)
    meta_changes = _meta_changes(report, baseline)
    relabelled = _relabelled(report, baseline)
    populations = _populations(report, baseline, tolerance, tolerances)
    views = _views(populations)
    pvalues, notes = {}, []
    if mode == "significant":
        pvalues, notes = _significance(views, resamples, seed, alpha, baseline.mean)
    changes = tuple(_row(view, pvalues.get(_view_key(view)), alpha, report.unjudged)
                    for view in views)
    attribution, stage_notes = _gate_attribution(report, baseline)
    changes = _with_main_stage(changes, attribution)
    held = _held_ids(report)
    added, removed = _changed_queries(report, baseline, held)
    # A report read back without --reveal-holdout does not say which ids its
    # hold-out holds: a query that moved into it would be named as removed.
    unnamed = report.holdout is not None and report.holdout.ids is None
    if unnamed:
        removed, hidden = (), len(removed)
    else:
        hidden = 0
    notes = (_meta_notes(report, meta_changes, baseline) + same_notes
             + _input_notes(report, baseline) + _relabelled_notes(report, baseline, relabelled)
             + _test_set_notes(views, added, removed, held, hidden) + notes
             + _slice_notes(report, baseline) + stage_notes
             + _judge_noise_notes(report, baseline, _allowed_of(views, populations[0])))
    notes += [n for n in [_unscored_note(report, baseline), _sample_size_note(
        [(p.name, p.now.values, _allowed_of(views, p)) for p in populations
         if p.listed and p.now.values is not None])] if n]
    # None: a side of means alone; with no query both scored, the lists still name them.
    paired = baseline.per_query is not None and report.scored_count is None
    drops = _query_drops(views, relabelled or ()) if paired else None
    frozen = _removed_count(views) if fail_on_removed else 0
    if frozen:
        notes.append("--fail-on-removed: %s the baseline scored %s no value now: the gate "
                     "fails" % (_plural(frozen, "query", "queries"),
                                "has" if frozen == 1 else "have"))
    unknowable = fail_on_removed and _unknowable_removals(views)
    if unknowable:
        notes.append("--fail-on-removed: the baseline records no query set, so a removed "
                     "query cannot be told: the gate fails (save the baseline with "
                     "--save-baseline)")
    passed = not (frozen or unknowable) and not any(c.status in ("regressed", "missing")
                                                    for c in changes)
    return _suspect_judge_drift(GateResult(
        passed, changes, _tolerance_text(tolerance), tuple(notes),
        mode if pvalues or mode == "tolerance" else "tolerance", added, removed, drops,
        meta_changes or (), relabelled, _moved(report, baseline),
        {name: _tolerance_text(t) for name, t in tolerances.items()}, frozen, attribution),
        report.drift)


def _gate_attribution(report, baseline):
    """({field: attribution} of the answer stages, or None; notes): against a
    baseline with each query's stage, which stage the answers that changed
    moved through (see _attribution), over the queries both sides staged;
    a note says why there is none when only one side can tell."""
    ours, theirs = report.stages, baseline.stages
    if ours is None and theirs is None:
        return None, []
    if ours is None:
        return None, ["the baseline holds answer stages and the report none: give --scores "
                      "with the answer field (%s) to see them" % theirs["field"]]
    if theirs is None:
        return None, ["the baseline holds no answer stages: save it again with --answer %s to "
                      "see which stage the answers that change break at" % ours["field"]]
    if "per_query" not in ours or "per_query" not in theirs:
        return None, ["answer stages: the %s keeps no per-query stages, so no attribution "
                      "(%s)" % (("report", "write it with --per-query") if "per_query" not in ours
                                else ("baseline", "save it again with --save-baseline"))]
    return {ours["field"]: _attribution(theirs["per_query"], ours["per_query"],
                                        ours["k"])}, []


def _with_main_stage(changes, attribution):
    """The changes with the regression of each attributed answer field's
    score (score(field=F), over every query) naming its main stage."""
    if not attribution:
        return changes
    return tuple(c._replace(main_stage=_main_stage(attribution[_field_of(c.measure)]))
                 if c.slice is None and c.status == "regressed"
                 and _field_of(c.measure) in attribution else c for c in changes)


_SHOWN_NAMES = 12     # measures a note names before it says how many more
NO_COMPARABLE = "no comparable queries"   # the status of a row with nothing to pair, not a failure
# Statuses of slice rows that the tables and charts leave to the JSON.
_QUIET_STATUSES = ("unchanged", "dropped within tolerance", NO_COMPARABLE)


class _Population(NamedTuple):
    """A population the gate compares: every scored query not held out (name
    None), a slice, or the hold-out (held)."""
    name: Optional[str]
    before: _Side                     # the baseline's
    now: _Side                        # the report's
    tolerance: Tuple[float, bool]     # (value, relative): see parse_tolerance
    listed: bool = True               # its queries may be named
    held: bool = False


class _View(NamedTuple):
    """One gated row before its verdict: a measure of a population, paired,
    and the drop it tolerates (a relative tolerance of its paired baseline)."""
    population: _Population
    measure: str
    paired: _Paired
    allowed: float


def _gate_views(report, baseline, tolerance, tolerances):
    """The _View of every (population, measure) the baseline gates, in the
    gate's order: the overall, every slice the baseline holds, the
    hold-out; measures sorted by name.  What the gate and the HTML charts
    compare."""
    return _views(_populations(report, baseline, tolerance, tolerances))


def _views(populations):
    out = []
    for population in populations:
        for measure in sorted(population.before.mean):
            paired = _paired_view(measure, population.before, population.now, _fixed(measure))
            value, relative = population.tolerance
            of = paired.baseline if paired.baseline is not None else population.before.mean[measure]
            out.append(_View(population, measure, paired, value * of if relative else value))
    return out


def _allowed_of(views, population):
    """{measure: tolerated drop} of one population's rows."""
    return {v.measure: v.allowed for v in views if v.population is population}


def _fixed(measure):
    """Whether the test set decides a measure's population (else the run does:
    see measure(fixed=)); what the gate tells _paired_view.

    >>> _fixed("recall@5"), _fixed("answer_given_evidence(field=correct)@5")
    (True, False)
    """
    return _REGISTRY[parse_measure(measure).name].fixed


def _populations(report, baseline, tolerance, tolerances):
    """The gate's _Population list (see _gate_views)."""
    def allowed(name, before):
        return tolerances.get(name, tolerance)

    sets = _query_sets(report)
    then_sets = baseline.query_sets or {}
    rows = _per_query_of(report)
    unscored = {m: tuple(ids) for m, ids in ((report.scores or {}).get("unscored") or {}).items()}
    scored = frozenset(report.measures)
    out = [_Population(None, _Side(baseline.mean, baseline.per_query, then_sets.get("all")),
                       _Side(report.mean, rows, sets.get("all"), unscored, scored=scored),
                       allowed(None, baseline.mean))]
    then_members, now_members = _members(baseline.membership), _members(report.membership)
    for name, before in sorted((baseline.slices or {}).items()):
        then = None if baseline.per_query is None or baseline.membership is None else {
            q: baseline.per_query[q] for q in then_members.get(name, ())
            if q in baseline.per_query}
        now = None if rows is None or report.membership is None else {
            q: rows[q] for q in now_members.get(name, ()) if q in rows}
        members = set(now_members.get(name, ()))
        out.append(_Population(
            name, _Side(before, then, then_sets.get(name)),
            _Side((report.slices or {}).get(name, {}).get("mean", {}), now, sets.get(name),
                  {m: tuple(q for q in ids if q in members or report.membership is None)
                   for m, ids in unscored.items()}, scored=scored),
            allowed(name, before)))
    if baseline.holdout is not None:
        theirs, ours = baseline.holdout, report.holdout
        record = sets.get(theirs.slice)
        out.append(_Population(
            theirs.slice, _Side(theirs.mean, theirs.per_query,
                                then_sets.get(theirs.slice) or _members_record(theirs, ours,
                                                                               record),
                                anonymous=True),
            _Side(ours.mean, ours.per_query, record, anonymous=True, scored=scored),
            allowed(theirs.slice, theirs.mean), ours.revealed, True))
    return out


def _members_record(theirs, ours, record):
    """The record of a baseline's hold-out that keeps none (written before
    records were): its members' sha256 (scored and unscored ids) and counts,
    translated to the report's ``record`` when both agree, else a record no
    report can have (the hold-out changed: compared on nothing).  None when
    the baseline keeps no members' sha256 either."""
    if not theirs.members_sha256 or not ours.members_sha256 or record is None:
        return None
    same = (theirs.members_sha256, theirs.queries, theirs.unscored) == (
        ours.members_sha256, ours.queries, ours.unscored)
    return record if same else {"queries": theirs.queries, "sha256": "changed"}


def _view_key(view):
    return view.population.name, view.measure


def _row(view, p_value, alpha, unjudged=None):
    """The MeasureChange of a _View: its verdict (see _change) on the paired
    means; with the report's ``unjudged`` bounds (never for the hold-out:
    its queries are set apart), judged@k and whether a regression is
    undecided, over the queries its current mean is over."""
    population, measure, paired, allowed = view
    if paired.missing:
        reason = paired.missing
        if population.held and paired.changed:
            reason = ("the hold-out changed since the baseline, which keeps its means only "
                      "(its per-query values only with --reveal-holdout): save it again")
        change = MeasureChange(measure, paired.baseline, None, None, "missing", reason=reason)
    elif paired.n == 0:     # a population the run decides, empty on one side or shared by none
        change = MeasureChange(measure, paired.baseline, None, None, NO_COMPARABLE)
    else:
        change = _change(measure, paired.baseline, paired.current, allowed, p_value, alpha)
    change = change._replace(slice=population.name, n=paired.n, removed=len(paired.removed),
                             added=len(paired.added))
    if unjudged is not None and not population.held and change.current is not None:
        queries = paired.queries or sorted(_values_of(population.now, measure) or ())
        change = _with_unjudged(change, queries, unjudged, allowed)
    return change


_NAMED_UNJUDGED = 5     # an undecided regression names its ids up to this many


def _changed_queries(report, baseline, held):
    """(added, removed): the queries the report scored and the baseline did
    not, and the other way round, over every scored query not held out now
    (a query held out now is never named; _slice_notes counts them)."""
    if baseline.per_query is None or report.scored_count is not None:
        return (), ()
    return (tuple(sorted(set(report.per_query) - set(baseline.per_query))),
            tuple(sorted(set(baseline.per_query) - set(report.per_query) - held)))


def _test_set_notes(views, added, removed, held, hidden=0):
    """What the gate says of the queries only one side scored: the removed
    and added queries of the test set (a few named, the JSON has them
    all), each measure whose own queries changed besides (a judge score lost
    or gained, a character measure), the hold-out's counts (never its ids),
    and the means each side compared on means alone stood for.  ``hidden``
    counts removed queries that may be held out now, so none is named."""
    notes = []
    if hidden:
        notes.append("%s the baseline scored %s not in the report's overall now (removed, or "
                     "moved into the hold-out: a report read back without --reveal-holdout "
                     "does not say which; not named), not in either mean" % (
                         _plural(hidden, "query", "queries"), "is" if hidden == 1 else "are"))
    if removed or added:
        notes.append("the test set changed since the baseline: %s; each measure is compared on "
                     "the queries both sides scored, not on %s" % ("; ".join(
                         part for part in (
                             removed and "%s the baseline scored %s not scored now (removed): %s"
                             % (_plural(len(removed), "query", "queries"),
                                "is" if len(removed) == 1 else "are", _preview(removed)),
                             added and "%s (added): %s" % (
                                 _plural(len(added), "new query", "new queries"),
                                 _preview(added))) if part),
                         "these" if len(removed) + len(added) > 1 else "this one"))
    whole = (set(removed) | held, set(added))
    for view in views:
        population, paired = view.population, view.paired
        lost = [q for q in paired.removed if q not in whole[0]]
        new = [q for q in paired.added if q not in whole[1]]
        if population.held:
            if paired.removed or paired.added:
                notes.append("%s in the hold-out %s: %d removed, %d added since the baseline (not "
                             "named), not in either mean" % (view.measure, population.name,
                                                             len(paired.removed),
                                                             len(paired.added)))
        elif population.name is None and (lost or new) and not hidden:
            notes.append("%s: %s%s, not in either mean" % (
                view.measure, "%s the baseline scored %s no value now: %s" % (
                    _plural(len(lost), "query", "queries"), "has" if len(lost) == 1 else
                    "have", _preview(lost)) if lost else "", "%s%s with a value only now: %s" % (
                    "; " if lost else "", _plural(len(new), "query", "queries"), _preview(new))
                if new else ""))
    means = {}
    for view in views:
        if view.paired.means and not view.paired.missing:
            means.setdefault(view.paired.means, []).append(_change_name(*_view_key(view)))
    for why, names in sorted(means.items()):
        notes.append("compared on the means alone (%s): %s%s" % (
            why, _shown_names(names), "; save the baseline again with --save-baseline to pair "
            "its queries" if why == _BARE else ""))
    differ = ["%s %.4f over %s (gated: %.4f over the %d both sides scored)" % (
        v.measure, v.population.now.mean[v.measure], _plural(
            len(_values_of(v.population.now, v.measure) or ()), "query", "queries"),
        v.paired.current, v.paired.n)
        for v in views if v.population.name is None and v.paired.queries
        and v.measure in v.population.now.mean
        and abs(v.population.now.mean[v.measure] - v.paired.current) > FLOAT_SLACK]
    if differ:
        notes.append("the report's means over all its queries differ from the paired ones: "
                     + "; ".join(differ))
    return notes


def _removed_count(views):
    """How many queries the baseline scored have a value no more (for some
    measure), the overall's and the hold-out's.  A query moved into the
    hold-out counts: it is in no verdict the baseline had it in."""
    overall = {q for v in views if v.population.name is None for q in v.paired.removed}
    held_out = max([len(v.paired.removed) for v in views if v.population.held] or [0])
    return len(overall) + held_out


def _unknowable_removals(views):
    """True when some row of the overall or the hold-out is compared on a file
    of bare means: which queries it was over, and so whether one was
    removed, is not known."""
    return any(v.paired.means == _BARE for v in views
               if v.population.name is None or v.population.held)


def _shown_names(names):
    """The first _SHOWN_NAMES names, and how many more."""
    return ", ".join(names[:_SHOWN_NAMES]) + (
        ", ... (%d more)" % (len(names) - _SHOWN_NAMES) if len(names) > _SHOWN_NAMES else "")


def _significance(views, resamples, seed, alpha, means):
    """(pvalues, notes) of the significant gate: the randomization p of each
    row's paired differences, Holm-adjusted over all of them as one family;
    the rows too few differences could ever make significant, and those
    compared on means, are left to the tolerance rule, with a note."""
    raw, smallest = {}, {}
    for view in views:
        paired = view.paired
        if not paired.queries:
            continue
        then = _values_of(view.population.before, view.measure)
        now = _values_of(view.population.now, view.measure)
        diffs = [now[q] - then[q] for q in paired.queries]
        key = _view_key(view)
        # Seeded by the name, so that a slice never changes another's p.
        raw[key] = randomization_p(diffs, resamples=resamples, rng=random.Random(
            "%s|%s" % (seed, _change_name(*key))))
        smallest[key] = _attainable_p(diffs, resamples)
    untestable = [key for key, p in smallest.items() if p * len(raw) > alpha]
    adjusted = dict(zip(raw, holm(list(raw.values()))))
    notes = []
    if untestable:
        notes.append("too few queries differ for a significance test at alpha=%g on %s (an "
                     "exact test needs at least %d); the tolerance rule applies there"
                     % (alpha, _shown_names([_change_name(*key) for key in untestable]),
                        _queries_for_significance(len(raw), alpha)))
    unpaired = [_change_name(*_view_key(v)) for v in views
                if not v.paired.queries and not v.paired.missing and v.paired.n != 0
                and not _REGISTRY[parse_measure(v.measure).name].aggregate]
    if unpaired:
        notes.append("no per-query values to test on %s: the tolerance rule applies there"
                     % _shown_names(unpaired))
    notes.extend(_set_level_notes(means))
    return {key: p for key, p in adjusted.items() if key not in untestable}, notes


def _query_drops(views, relabelled=()):
    """Every query of the overall and of a revealed hold-out whose value fell
    by more than the tolerance, over the queries both sides scored (not
    those whose labels changed), largest drop first."""
    drops, relabelled = [], frozenset(relabelled)   # (a sorted tuple: a set to look in)
    for view in views:
        population, measure, paired, allowed = view
        if not paired.queries or not (population.name is None or population.held
                                      and population.listed):
            continue
        then = _values_of(population.before, measure)
        now = _values_of(population.now, measure)
        for q in paired.queries:
            delta = now[q] - then[q]
            if q not in relabelled and -delta > allowed + FLOAT_SLACK:
                drops.append(QueryDrop(measure, q, then[q], now[q], delta))
    return tuple(sorted(drops, key=lambda d: (d.delta, d.measure, d.query)))


def _with_unjudged(change, queries, unjudged, allowed):
    """``change`` with judged@k of its cutoff over ``queries`` (those its
    current mean is over) and, for a regression, ``undecided`` when the best
    labelling of the unjudged ids in the top k would bring the mean back
    within the tolerance (see MeasureChange).

    >>> u = {"mean": {"recall@2": [0.0, 1.0]}, "per_query": {"q": {"recall@2": [0.0, 1.0]}},
    ...      "judged_per_query": {"q": {"judged@2": 0.5}}, "ids": {"q": [(1, "x")]}}
    >>> c = _with_unjudged(MeasureChange("recall@2", 1.0, 0.0, -1.0, "regressed"), ["q"], u, 0.0)
    >>> c.status, c.judged, sorted(c.undecided.items())
    ('regressed', 0.5, [('ids', 1), ('named', ['q:x']), ('upper', 1.0)])
    """
    measure = parse_measure(change.measure)
    call = _UnitCall.of(measure)
    # judged@k counts labelled ids: beside measures over ids only.
    k = measure.k if isinstance(measure.k, int) and call.view == "id" and not call.budget \
        else None
    # A report read back from JSON keeps the bounds (per query only with
    # --per-query), not judged@k nor the unjudged ids.
    judged = unjudged.get("judged_per_query") or {}
    if k is not None and queries and all("judged@%d" % k in judged.get(q, ()) for q in queries):
        change = change._replace(judged=_mean([judged[q]["judged@%d" % k] for q in queries]))
    bounds = unjudged.get("per_query") or {}
    if change.status != "regressed" or not queries or \
            unjudged["mean"].get(change.measure) is None or not all(
                (bounds.get(q) or {}).get(change.measure) for q in queries):
        return change
    upper = _mean([bounds[q][change.measure][1] for q in queries])
    if change.baseline - upper > allowed + FLOAT_SLACK:
        return change       # even the best labelling leaves a regression
    ids = ["%s:%s" % (q, doc) for q in queries for rank, doc in (unjudged.get("ids") or {}).get(
        q, ()) if k is None or rank <= k]
    return change._replace(undecided={
        "ids": len(ids), "upper": upper, "named": ids if len(ids) <= _NAMED_UNJUDGED else []})


def _set_level_notes(means):
    """Under the significant gate: the set-level measures (no per-query
    values, no paired test) are gated on the tolerance rule."""
    names = [m for m in sorted(means) if _REGISTRY[parse_measure(m).name].aggregate]
    if not names:
        return []
    return ["%s: a set-level value with no per-query values, so no significance test; the "
            "tolerance rule applies" % ", ".join(names)]


def _held_ids(report):
    """Every query id the metadata puts in the report's hold-out (expired
    ones too): ids the gate must never name."""
    held = report.holdout
    return frozenset(held.ids["all"]) if held is not None and held.ids else frozenset()


def _check_same_holdout(report, baseline):
    """A baseline and a report with different hold-outs have overall means
    over different queries: refused, never compared."""
    ours = report.holdout.slice if report.holdout is not None else None
    theirs = baseline.holdout.slice if baseline.holdout is not None else None
    if ours != theirs:
        raise EvalError("%s was saved with %s and this report has %s: the overall means are "
                        "over different queries; gate with the same --holdout, or save a new "
                        "baseline" % (baseline.source, "the hold-out %s" % theirs if theirs
                                      else "no hold-out", "the hold-out %s" % ours if ours
                                      else "none"))


def _slice_tolerances(slice_max_drop, baseline):
    """{slice: (value, relative)} of ``slice_max_drop`` ({slice: tolerance}),
    each naming a slice the baseline gates."""
    if not slice_max_drop:
        return {}
    if not isinstance(slice_max_drop, dict):
        raise EvalError("slice_max_drop must be a dict {\"field=value\": tolerance}, got %s"
                        % _short_repr(slice_max_drop))
    gated = set(baseline.slices or ())
    if baseline.holdout is not None:
        gated.add(baseline.holdout.slice)
    out = {}
    for name, value in sorted(slice_max_drop.items(), key=lambda item: str(item[0])):
        if name not in gated:
            raise EvalError("slice_max_drop (--slice-max-drop) names %s, a slice %s does not "
                            "gate (%s)"
                            % (_short_repr(name), baseline.source, "it gates " + ", ".join(
                                sorted(gated)) if gated else "it holds no slices"))
        try:
            out[name] = parse_tolerance(value)
        except EvalError as exc:
            raise EvalError("--slice-max-drop %s: %s" % (name, exc)) from None
    return out


def _tolerance_text(tolerance):
    value, relative = tolerance
    return "%g%%" % (value * 100) if relative else "%g" % value


def _moved(report, baseline):
    """The queries of both test sets whose slices changed (never a hold-out
    query: those are in neither report list)."""
    if baseline.membership is None or report.membership is None:
        return ()
    then = set(baseline.per_query or ()) | set(baseline.membership)
    now = set(report.per_query) | set(report.unscored)
    moved = []
    for qid in sorted(then & now):
        before = set(baseline.membership.get(qid, ()))
        after = set(report.membership.get(qid, ()))
        if before != after:
            moved.append(MembershipChange(qid, tuple(sorted(before - after)),
                                          tuple(sorted(after - before))))
    return tuple(moved)


def _slice_notes(report, baseline):
    """What the gate says of slices beyond their rows: slices it cannot
    gate, slices it does not, a hold-out whose queries changed (by counts,
    never by name), queries now held out."""
    notes = []
    if report.slices is not None and baseline.slices is None:
        notes.append("the baseline holds no slices: only the overall mean is gated; save one "
                     "with query metadata to gate every slice")
    if report.slices is None and report.membership is None and baseline.slices:
        notes.append("the baseline holds slices and the report none: they are missing (score "
                     "with the query metadata and --by, or write the report with --by)")
    new = sorted(set(report.slices or ()) - set(baseline.slices or ()))
    if new and baseline.slices is not None:
        notes.append("%s not in the baseline, not gated: %s"
                     % (_plural(len(new), "slice", "slices"), ", ".join(new[:10])
                        + (", ..." if len(new) > 10 else "")))
    ours, theirs = report.holdout, baseline.holdout
    if theirs is not None:
        counts = (theirs.queries + theirs.unscored, ours.queries + ours.unscored)
        if (theirs.members_sha256 and ours.members_sha256
                and theirs.members_sha256 != ours.members_sha256 or counts[0] != counts[1]):
            notes.append("the hold-out %s changed since the baseline (%d -> %s; which is not "
                         "shown)" % (ours.slice, counts[0], _plural(counts[1], "query",
                                                                    "queries")))
        now_held = len(set(baseline.per_query or ()) & _held_ids(report))
        if now_held:
            notes.append("%s of the baseline %s in the hold-out now (not named)"
                         % (_plural(now_held, "query", "queries"),
                            "is" if now_held == 1 else "are"))
    return notes


def _drifted_text(drift):
    """The fields a failed drift check found moved, with their mean absolute
    differences against the limit."""
    return ", ".join("%s %.4f > %g" % (name, f["mean_absolute_difference"], drift["max_drift"])
                     for name, f in drift["fields"].items() if f["drifted"])


def _suspect_judge_drift(result, drift):
    """The gate result with its judge score regressions marked ``suspect:
    judge drift`` when the report's --drift check (``report.drift``, see
    :func:`judge_drift`) failed, and a note saying why.  The verdict is left
    as it is: drift only ever fails a run more."""
    if drift is None or drift["passed"]:
        return result
    moved = _drifted_text(drift)
    changes = tuple(c._replace(suspect="judge drift")
                    if c.status in ("regressed", "missing") and _field_of(c.measure) else c
                    for c in result.changes)
    if changes == result.changes:
        return result
    return result._replace(changes=changes, notes=result.notes + (
        "suspect: judge drift: on the frozen sample %s the judge moved (mean absolute "
        "difference %s): a judge score regression may be the judge's, not the system's"
        % (drift["frozen"]["path"], moved),))


def _judge_noise_notes(report, baseline, allowed):
    """A note for each gated score measure whose tolerated drop is below
    twice its judge noise floor (see _judge_noise): a gate that would fail
    on judge noise alone now and then."""
    notes = []
    for name, noise in sorted(((report.scores or {}).get("noise") or {}).items()):
        band = 2 * noise["noise_floor"]
        if name in allowed and allowed[name] < band - FLOAT_SLACK:
            low, high = noise["runs"]
            notes.append("%s: tolerance is inside judge noise (+/-%.3f at %s runs): expect "
                         "flaky gates" % (name, band, low if low == high else "%d-%d"
                                          % (low, high)))
    return notes


def _unscored_note(report, baseline):
    """What to ask for when baseline measures are missing from the report (a
    baseline written at another k, or with other measures)."""
    absent = sorted(set(baseline.mean) - set(report.mean))
    if not absent:
        return None
    return ("the report does not score %s of the baseline (%s): add %s to --metrics, or "
            "leave out --metrics and --k to score every baseline measure"
            % (_plural(len(absent), "measure", "measures"), ", ".join(absent),
               "it" if len(absent) == 1 else "them"))


def _change(measure, before, now, allowed, p_value, alpha):
    if now is None or not math.isfinite(now):
        return MeasureChange(measure, before, None, None, "missing")
    delta = now - before
    if -delta > allowed + FLOAT_SLACK:
        status = "regressed" if p_value is None or p_value <= alpha else "dropped, not significant"
    elif delta < -FLOAT_SLACK:
        status = "dropped within tolerance"
    elif delta > FLOAT_SLACK:
        status = "improved"
    else:
        status = "unchanged"
    return MeasureChange(measure, before, now, delta, status, p_value)


def _input_notes(report, baseline):
    notes = []
    for kind in ("qrels", "chunks"):
        before = ((baseline.inputs or {}).get(kind) or {}).get("sha256")
        now = ((report.inputs or {}).get(kind) or {}).get("sha256")
        if kind == "qrels" and before and now and before != now and None in (
                baseline.label_sha256, report.label_sha256):    # else _relabelled_notes
            notes.append("the qrels changed since the baseline (sha256 %s... -> %s...): "
                         "the numbers are not about the same test set" % (before[:12], now[:12]))
        if kind == "chunks" and before and now and before != now:
            by_id = sorted(m for m in baseline.mean if _counts_ids(m))
            notes.append("the chunk map changed since the baseline (sha256 %s... -> %s...): "
                         "documents, evidence and characters compare across chunkers%s"
                         % (before[:12], now[:12], "; chunk-id measures do not (%s)"
                            % ", ".join(by_id[:5]) if by_id else ""))
    before = (baseline.inputs or {}).get("mapping")
    now = (report.inputs or {}).get("mapping")
    if before is not None and now is not None and before != now:
        notes.append("chunks were mapped to documents another way for the baseline (%s -> %s): "
                     "unit=doc, unit=evidence and span measures may not be comparable"
                     % (_mapping_text(before), _mapping_text(now)))
    before = ((baseline.inputs or {}).get("run") or {}).get("fields")
    now = ((report.inputs or {}).get("run") or {}).get("fields")
    if (baseline.inputs or {}).get("run") and (report.inputs or {}).get("run") \
            and before != now:
        notes.append("the run was read at other field paths for the baseline (%s -> %s): its "
                     "ids, documents and spans may not be the same"
                     % (_fields_text(before), _fields_text(now)))
    return notes


def _fields_text(fields):
    """The field options a report's run was read with, as written.

    >>> _fields_text({"doc": "node.metadata.file_path"}), _fields_text(None)
    ('--doc-field node.metadata.file_path', "the shapes' own")
    """
    return " ".join("--%s-field %s" % item for item in sorted((fields or {}).items())) \
        or "the shapes' own"


def _mapping_text(info):
    return ("--doc-sep %r" % info["doc_sep"] if "doc_sep" in info
            else {"chunk map": "--chunks", "run": "the run's fields"}.get(info.get("source"),
                                                                         "none"))


def _counts_ids(name):
    """True when a measure name counts retrieved ids (unit=id, no span view)."""
    try:
        call = _UnitCall.of(parse_measure(name))
    except EvalError:
        return False
    return call.view == "id"


# ===========================================================================
# src/16_reports.py
#
# Reports: text, Markdown, JSON and TREC.
#
# Pure functions of a Report (and a GateResult, comparisons): render_text,
# render_markdown (a pull-request comment: the verdict first, capped at
# --max-bytes), render_json (the documented JSON form) and render_trec
# (trec_eval's own layout); assert_no_regression for tests; the notebook
# views of GateResult and Comparison.
#
# Uses: 01_head, 02_records, 03_measures, 04_measure_names, 06 (score
# files), 08_provenance, 14_baselines, 15_gate.  Used by: the report reader,
# HTML, the command line, and the records' notebook views.
# ===========================================================================

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


# ===========================================================================
# src/17_load_report.py
#
# The report reader: a JSON report read back (load_report, Report.from_dict).
#
# Every field is checked as load_baseline checks a baseline's, so a report
# read back is gated, compared and rendered as the run it came from could
# be, within what the JSON kept (see Report.from_dict).
#
# Uses: 01_head, 02_records, 04 and 05 (names, readers), 08_provenance,
# 11_evaluation, 14_baselines, 15_gate, 16_reports.  Used by: Report.from_dict
# (02_records).
# ===========================================================================

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


# ===========================================================================
# src/18_html.py
#
# HTML: one self-contained page (render_html), and the output formats.
#
# Inline CSS and SVG charts (means against the baseline, a forest plot of
# paired deltas, the per-query waterfall, judged@k bars), no script and no
# external reference; the notebook views of Report, GateResult and
# Comparison; the table of output formats the command line picks from.
#
# Uses: 01_head, 02_records, 08_provenance, 12_statistics, 14_baselines,
# 15_gate, 16_reports.  Used by: the command line, and the records' and
# Comparison's notebook views.
# ===========================================================================

# One self-contained page: inline CSS, inline SVG charts drawn by the small
# functions below, no script and no external reference, every string through
# html.escape.  Numbers are "%.4f" in tables and repr() in the <title>
# tooltips of chart elements; coordinates "%.1f".  No clock: the same report
# gives the same bytes.  The tables are the text renderer's (_sections), so
# every verdict reads the same in every format.

_HTML_CSS = """\
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
color:#1b1f24;background:#fff;max-width:960px;margin:24px auto;padding:0 16px}
h1{font-size:1.5em;margin:0 0 .3em}h2{font-size:1.2em;margin:1.6em 0 .4em;
border-bottom:1px solid #d0d7de}h3{font-size:1em;margin:1.2em 0 .3em}
.verdict{font-size:1.15em;font-weight:600;padding:.5em .8em;border-radius:4px;
border-left:6px solid #57606a;background:#f6f8fa}
.verdict.fail{border-color:#c0392b;background:#fbeae8}.verdict.pass{border-color:#2e7d32;
background:#e9f5ea}
figure{margin:1em 0 1.4em}figcaption{color:#444;font-size:.92em;margin-top:.3em}
svg{max-width:100%;height:auto;font-size:12px}svg text{fill:#1b1f24}
svg .axis{stroke:#8c959f;stroke-width:1}svg .grid{stroke:#d8dee4;stroke-width:1}
svg .bar{fill:#4c78a8}svg .bad{fill:#c0392b;stroke:#c0392b}svg .good{fill:#2e7d32;
stroke:#2e7d32}svg .band{fill:#e07b6f;fill-opacity:.45}svg .mark{stroke:#1b1f24;
stroke-width:2.5}svg .limit{stroke:#c0392b;stroke-width:1.5;stroke-dasharray:4 3}
svg .ci{stroke:#4c78a8;stroke-width:2.5}svg .ci.bad{stroke:#c0392b}svg .dot{fill:#1b1f24}
table{border-collapse:collapse;margin:.3em 0;font-size:.92em}
th,td{border:1px solid #d0d7de;padding:.2em .55em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
ul.notes{color:#444;font-size:.92em;margin:.3em 0}.words{font-style:italic;color:#444}
svg .st-pass{fill:#2e7d32}svg .st-generation_miss{fill:#e08a1e}svg .st-retrieval_miss{
fill:#c0392b}svg .st-unsupported_pass{fill:#6f5bb5}
@media print{body{max-width:none;margin:0;font-size:11pt}figure,table{break-inside:avoid}
h2,h3{break-after:avoid}
.verdict{border-width:3px}}
"""

_SVG_WIDTH = 720
_PLOT_LEFT = 220        # the names of the rows go left of this
_PLOT_RIGHT = 640       # values are written right of this
_ROW = 24               # height of one row of a bar or forest chart
_WATERFALL_QUERIES = 2000   # above this many queries a waterfall draws bins
_WATERFALL_BINS = 400
_BOOTSTRAP_QUERIES = 500    # above this many paired queries, the normal interval
_SHOWN_NAME = 30        # characters of a row name drawn (the tooltip has all): 34 ran off the left edge


def _esc(value):
    """``value`` as text safe anywhere in HTML, attributes included.

    >>> _esc('<script>alert("a&b")</script>')
    '&lt;script&gt;alert(&quot;a&amp;b&quot;)&lt;/script&gt;'
    """
    import html   # only when writing HTML: keeps start-up fast
    return html.escape(str(value), quote=True)


def _xy(value):
    """A coordinate as written: one decimal, never "-0.0" (same bytes each run)."""
    text = "%.1f" % value
    return "0.0" if text == "-0.0" else text


def _is_number(cell):
    return bool(re.fullmatch(r"[+-]?\d+(\.\d+)?", str(cell)))


def _html_table(header, rows):
    """A <table>, numbers right-aligned.

    >>> print(_html_table(["measure", "mean"], [["a<b", "0.5000"]]))
    <table><thead><tr><th>measure</th><th>mean</th></tr></thead><tbody>
    <tr><td>a&lt;b</td><td class="num">0.5000</td></tr>
    </tbody></table>
    """
    head = "".join("<th>%s</th>" % _esc(h) for h in header)
    body = "".join("<tr>%s</tr>\n" % "".join(
        '<td class="num">%s</td>' % _esc(c) if _is_number(c) else "<td>%s</td>" % _esc(c)
        for c in row) for row in rows)
    return "<table><thead><tr>%s</tr></thead><tbody>\n%s</tbody></table>" % (head, body)


def _html_section(title, header, rows, notes):
    """One (title, header, rows, notes) block of _sections as HTML."""
    out = "<section>\n<h3>%s</h3>\n%s" % (
        _esc(title), "" if header is None else _html_table(header, rows) + "\n")
    if notes:
        out += '<ul class="notes">%s</ul>\n' % "".join("<li>%s</li>" % _esc(n) for n in notes)
    return out + "</section>\n"


def _svg(label, height, parts):
    """An accessible inline <svg> (role img, its ``label`` as <title>) of ``parts``."""
    return ('<svg role="img" width="%d" height="%d" viewBox="0 0 %d %d">\n<title>%s</title>\n'
            '%s</svg>' % (_SVG_WIDTH, height, _SVG_WIDTH, height, _esc(label), "".join(parts)))


def _figure(svg, caption):
    return "<figure>\n%s\n<figcaption>%s</figcaption>\n</figure>\n" % (svg, _esc(caption))


def _words(text):
    """A chart that cannot be drawn, said in words."""
    return '<p class="words">%s</p>\n' % _esc(text)


def _short(name):
    return name if len(name) <= _SHOWN_NAME else name[:_SHOWN_NAME - 1] + "\u2026"


def _tip(text):
    return "<title>%s</title>" % _esc(text)


def _line(x1, y1, x2, y2, cls):
    return '<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s"/>' % (
        cls, _xy(x1), _xy(y1), _xy(x2), _xy(y2))


def _rect(x1, y1, x2, y2, cls, tip=None):
    """The rectangle of corners (x1, y1) and (x2, y2), in any order, with a
    tooltip when given."""
    attrs = 'class="%s" x="%s" y="%s" width="%s" height="%s"' % (
        cls, _xy(min(x1, x2)), _xy(min(y1, y2)), _xy(abs(x2 - x1)), _xy(abs(y2 - y1)))
    return "<rect %s>%s</rect>" % (attrs, _tip(tip)) if tip else "<rect %s/>" % attrs


def _text(x, y, text, anchor="start"):
    return '<text x="%s" y="%s" text-anchor="%s">%s</text>' % (_xy(x), _xy(y), anchor,
                                                               _esc(text))


def _scale(lo, hi, left=_PLOT_LEFT, right=_PLOT_RIGHT):
    """value -> x, mapping [lo, hi] onto [left, right].

    >>> _scale(0.0, 1.0)(0.5)
    430.0
    """
    return lambda value: left + (value - lo) / (hi - lo) * (right - left)


def _nice_limit(largest):
    """The least of 1, 2, 5 times a power of ten that is >= ``largest`` (an
    axis end that reads well; 0.01 when everything is 0).

    >>> _nice_limit(0.034), _nice_limit(0.5), _nice_limit(0.0)
    (0.05, 0.5, 0.01)
    """
    if largest <= 0:
        return 0.01
    power = 10.0 ** math.floor(math.log10(largest))
    for step in (1, 2, 5, 10):
        if step * power >= largest * (1 - 1e-12):
            return float("%.12g" % (step * power))


def _axis(x_of, ticks, top, bottom):
    """Vertical grid lines at ``ticks``, each labelled below the plot."""
    parts = []
    for tick in ticks:
        x = x_of(tick)
        parts.append(_line(x, top, x, bottom, "axis" if tick == 0 else "grid"))
        parts.append(_text(x, bottom + 14, "%g" % tick, "middle"))
    return parts


class _Bar(NamedTuple):
    """One row of a bar chart on [0, 1]: a bar of ``value``; optionally a
    shaded ``band`` (lo, hi) and a ``mark`` (the baseline)."""
    name: str
    value: Optional[float]      # None: no bar, ``tip`` says why
    tip: str
    cls: str = "bar"
    band: Optional[Tuple[float, float]] = None
    mark: Optional[float] = None


def _bar_chart(label, bars):
    """Horizontal bars on [0, 1], one row each, the value written at the right."""
    top, x_of = 8, _scale(0.0, 1.0)
    bottom = top + _ROW * len(bars)
    parts = _axis(x_of, (0, 0.25, 0.5, 0.75, 1), top, bottom)
    for i, bar in enumerate(bars):
        y = top + i * _ROW
        parts.append('<g>%s%s' % (_tip(bar.tip), _text(_PLOT_LEFT - 8, y + 16, _short(bar.name),
                                                        "end")))
        if bar.value is not None:
            parts.append(_rect(x_of(0.0), y + 5, x_of(bar.value), y + _ROW - 5, bar.cls))
        if bar.band is not None:
            parts.append(_rect(x_of(bar.band[0]), y + 1, x_of(bar.band[1]), y + _ROW - 1,
                               "band"))
        if bar.mark is not None:
            parts.append(_line(x_of(bar.mark), y + 1, x_of(bar.mark), y + _ROW - 1, "mark"))
        parts.append(_text(_PLOT_RIGHT + 8, y + 16, "-" if bar.value is None
                           else "%.4f" % bar.value) + "</g>\n")
    return _svg(label, bottom + 22, parts)


class _Interval(NamedTuple):
    """One row of a forest plot: a ``delta`` with its interval [lo, hi], and
    optionally the tolerated drop (drawn at -``allowed``)."""
    name: str
    delta: float
    lo: float
    hi: float
    tip: str
    cls: str = "ci"
    allowed: Optional[float] = None


def _forest_chart(label, rows):
    """Deltas (dots) with their 95% intervals (lines) around a zero line, the
    tolerated drop of each row a dashed tick; the axis is symmetric."""
    largest = max([max(abs(r.lo), abs(r.hi), abs(r.delta), r.allowed or 0.0) for r in rows])
    limit = _nice_limit(largest)
    top, x_of = 8, _scale(-limit, limit)
    bottom = top + _ROW * len(rows)
    parts = _axis(x_of, (-limit, -limit / 2, 0, limit / 2, limit), top, bottom)
    for i, row in enumerate(rows):
        y, mid = top + i * _ROW, top + i * _ROW + _ROW / 2
        parts.append("<g>%s%s" % (_tip(row.tip), _text(_PLOT_LEFT - 8, y + 16, _short(row.name),
                                                        "end")))
        if row.allowed is not None:
            parts.append(_line(x_of(-row.allowed), y + 2, x_of(-row.allowed), y + _ROW - 2,
                               "limit"))
        parts.append(_line(x_of(row.lo), mid, x_of(row.hi), mid, row.cls))
        parts.append('<circle class="dot" cx="%s" cy="%s" r="4"/>' % (_xy(x_of(row.delta)),
                                                                     _xy(mid)))
        parts.append(_text(_PLOT_RIGHT + 8, y + 16, "%+.4f" % row.delta) + "</g>\n")
    return _svg(label, bottom + 22, parts)


def _bins(deltas, count):
    """``deltas`` (sorted) cut into ``count`` runs of consecutive values whose
    sizes differ by at most one: [(first index, values), ...].

    >>> _bins([1, 2, 3, 4, 5], 2)
    [(0, [1, 2, 3]), (3, [4, 5])]
    """
    size, extra = divmod(len(deltas), count)
    out, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append((start, deltas[start:end]))
        start = end
    return out


def _waterfall_chart(label, moves, allowed):
    """One thin bar per query, sorted from the largest drop to the largest
    gain, around a zero line, with the tolerated drop as a dashed line.
    ``moves`` are sorted (delta, query) pairs.  Above _WATERFALL_QUERIES
    queries a bar is the mean of a bin of consecutive queries; a query that
    did not move draws no bar."""
    top, height, left, right = 10, 180, _PLOT_LEFT - 160, _PLOT_RIGHT - 40
    limit = _nice_limit(max([abs(d) for d, _ in moves] + [allowed]))
    y_of = _scale(limit, -limit, top, top + height)   # up is a gain
    binned = len(moves) > _WATERFALL_QUERIES
    groups = (_bins(moves, _WATERFALL_BINS) if binned
              else [(i, [move]) for i, move in enumerate(moves)])
    width = (right - left) / len(groups)
    parts = []
    for tick in (-limit, -limit / 2, 0, limit / 2, limit):
        parts.append(_line(left, y_of(tick), right, y_of(tick), "axis" if tick == 0 else "grid"))
        parts.append(_text(left - 6, y_of(tick) + 4, "%+g" % tick if tick else "0", "end"))
    for i, (first, group) in enumerate(groups):
        delta = _mean([d for d, _ in group])
        if abs(delta) <= _TIE_SLACK:
            continue
        tip = ("%s: %r" % (group[0][1], delta) if not binned else
               "queries %d-%d of %d: mean delta %r" % (first + 1, first + len(group),
                                                       len(moves), delta))
        x = left + i * width
        parts.append(_rect(x, y_of(0.0), x + max(width, 0.4), y_of(delta),
                           "bad" if delta < 0 else "good", tip) + "\n")
    parts.append(_line(left, y_of(-allowed), right, y_of(-allowed), "limit"))
    parts.append(_text(right + 6, y_of(-allowed) + 4, "-%s allowed" % _fmt(allowed)))
    return _svg(label, top + height + 16, parts)


def _allowed_drop(gate_result, change):
    """The drop the gate tolerated for ``change`` (its slice's own tolerance, if any)."""
    text = (gate_result.slice_tolerances or {}).get(change.slice, gate_result.tolerance)
    value, relative = parse_tolerance(text)
    return value * change.baseline if relative else value


def _means_chart(report, gate_result):
    """Each measure's current mean; with a gate, the baseline (a mark) and
    the tolerated drop below it (a band).  A bar ending left of its band regressed."""
    changes = {c.measure: c for c in (gate_result.changes if gate_result is not None else ())
               if c.slice is None}
    bars = []
    for m in list(report.measures) + sorted(set(changes) - set(report.measures)):
        value, change = report.mean.get(m), changes.get(m)
        tip = "%s: mean %r" % (m, value)
        if change is None:
            bars.append(_Bar(m, value, tip + ("" if value is not None else " (no value)")))
            continue
        allowed = _allowed_drop(gate_result, change)
        tip += "; baseline %r; allowed drop %r; %s" % (change.baseline, allowed,
                                                       _status_text(change))
        bars.append(_Bar(m, value, tip, "bar bad" if change in gate_result.regressions else "bar",
                         (max(0.0, change.baseline - allowed), change.baseline),
                         change.baseline))
    caption = "Bars: the current mean of each measure over the scored queries."
    if changes:
        regressed = [c.measure for c in gate_result.regressions if c.slice is None]
        caption += (" Dark line: the baseline; shaded: the tolerated drop below it; red bar: "
                    "a regression (%s)." % (", ".join(regressed) if regressed else "none"))
    return "<h3>Means</h3>\n" + _figure(_bar_chart("current mean of each measure" + (
        " against the baseline" if changes else ""), bars), caption)


def _judged_chart(gate_result):
    """judged@k of each gated row where it is below 1, or "" when none is."""
    # As the gate table: a slice row that did not move beyond the tolerance is left out.
    bars = [_Bar(c.name, c.judged, "%s: judged@k %r" % (c.name, c.judged))
            for c in gate_result.changes
            if c.judged is not None and c.judged < 1 - FLOAT_SLACK and (
                c.slice is None or c.status not in _QUIET_STATUSES)]
    if not bars:
        return ""
    return "<h3>judged@k</h3>\n" + _figure(_bar_chart("judged@k below 1", bars),
                   "judged@k: the share of the top k ids that carry a label, over the queries "
                   "each mean is over. An unlabelled id counts as non-relevant, so where it is "
                   "low a drop may be missing labels (--to-label FILE lists them).")


def _stages_chart(stages, before=None, lower=False):
    """The answer stages as one stacked bar per side (the baseline's when it
    holds stages, the current), each stage a segment of its share of the
    staged queries, with a legend; ``lower``: the field is lower is better."""
    sides = ([("baseline", before["counts"])] if before is not None else []) + [
        ("current", stages["counts"])]
    top, x_of = 8, _scale(0.0, 1.0)
    parts = []
    for i, (side, counts) in enumerate(sides):
        y, total, start = top + i * _ROW, sum(counts.values()), 0.0
        parts.append("<g>%s%s" % (_tip("%s: %s" % (side, _plural(total, "query", "queries"))),
                                  _text(_PLOT_LEFT - 8, y + 16, side, "end")))
        for stage in STAGES:
            share = counts[stage] / total if total else 0.0
            if share:
                parts.append(_rect(x_of(start), y + 3, x_of(start + share), y + _ROW - 3,
                                   "st-" + stage, "%s: %s %d of %d (%.4f)" % (
                                       side, stage, counts[stage], total, share)))
            start += share
        parts.append(_text(_PLOT_RIGHT + 8, y + 16, "n = %d" % total) + "</g>\n")
    legend, x = top + len(sides) * _ROW + 6, _PLOT_LEFT
    for stage in STAGES:
        parts.append(_rect(x, legend, x + 10, legend + 10, "st-" + stage))
        parts.append(_text(x + 14, legend + 9, stage))
        x += 30 + 7 * len(stage)
    caption = ("Each bar: the answerable queries with a verdict, split by stage (%s; green: "
               "pass, orange: generation_miss, red: retrieval_miss, purple: unsupported_pass)."
               % _stages_setting_text(stages, lower))
    return "<h3>Answer stages</h3>\n" + _figure(_svg("answer stages, %s" % " against ".join(
        side for side, _ in reversed(sides)), legend + 18, parts), caption)


def _gate_pairs(report, baseline, gate_result):
    """(subset name, measure, moves, allowed) for every row the gate paired
    (see _gate_views) whose queries may be named: ``moves`` the (query,
    current - baseline) of the queries both sides scored, in query order,
    so that their mean is the row's delta."""
    baseline = _checked_baseline(baseline)
    tolerances = {name: parse_tolerance(text)
                  for name, text in (gate_result.slice_tolerances or {}).items()}
    pairs = []
    for view in _gate_views(report, baseline, parse_tolerance(gate_result.tolerance),
                            tolerances):
        population, measure, paired, allowed = view
        if not paired.queries or not population.listed:
            continue
        then = _values_of(population.before, measure)
        now = _values_of(population.now, measure)
        pairs.append((population.name, measure,
                      [(q, now[q] - then[q]) for q in paired.queries],
                      allowed))
    return pairs


def _paired_interval(diffs, resamples, rng):
    """(lo, hi, how) of the 95% interval of the mean of ``diffs``: the paired
    bootstrap (bootstrap_ci) up to _BOOTSTRAP_QUERIES deltas, else the normal
    approximation (mean -/+ margin_of_error).  The bootstrap draws n times
    ``resamples`` values (about 1.5 s a row per 1000 queries, minutes for
    50,000); at such n the two agree closely.

    >>> lo, hi, how = _paired_interval([0.0, 1.0] * 1500, 10000, None)
    >>> round(lo, 4), round(hi, 4), how     # 0.5 -/+ 1.96 * 0.5001 / sqrt(3000)
    (0.4821, 0.5179, 'normal approximation')
    """
    if len(diffs) > _BOOTSTRAP_QUERIES:
        mean, half = _mean(diffs), margin_of_error(diffs)
        return mean - half, mean + half, "normal approximation"
    lo, hi = bootstrap_ci(diffs, resamples=resamples, rng=rng)
    return lo, hi, "paired bootstrap"


def _gate_charts(report, gate_result, baseline, resamples, seed):
    """The forest plot of the paired deltas and a waterfall per gated measure."""
    pairs = [] if baseline is None else _gate_pairs(report, baseline, gate_result)
    if not pairs:
        return _words("No per-query baseline values, so no paired deltas to draw: the "
                      "baseline holds means only%s. --save-baseline writes one that holds "
                      "them." % ("" if baseline is not None else
                                 " or none was given to render_html (baseline=)"))
    changes = {(c.slice, c.measure): c for c in gate_result.changes}
    drawn, left_out = _forest_pairs(pairs, changes)
    rows, hows = [], set()
    for name, measure, moves, allowed in drawn:
        diffs = [d for _, d in moves]
        label = _change_name(name, measure)
        # Seeded by the name, as the gate seeds its tests: a slice never moves another.
        lo, hi, how = _paired_interval(diffs, resamples,
                                       random.Random("%s|%s" % (seed, label)))
        hows.add(how)
        change = changes.get((name, measure))
        tip = "%s: paired delta %r, 95%% CI [%r, %r] (%s), %s; allowed drop %r" % (
            label, _mean(diffs), lo, hi, how, _plural(len(diffs), "query", "queries"), allowed)
        if change is not None:
            tip += "; %s" % _status_text(change) + (
                "; p (Holm) %r" % change.p_value if change.p_value is not None else "")
        bad = change is not None and change.status in ("regressed", "missing")
        rows.append(_Interval(label, _mean(diffs), lo, hi, tip, "ci bad" if bad else "ci",
                              allowed))
    out = ["<h3>Paired deltas (current - baseline) with 95% intervals</h3>\n", _figure(
        _forest_chart("paired deltas with 95%% intervals (%s)" % " and ".join(sorted(hows)),
                      rows),
        "Each row: the mean of the per-query deltas (current - baseline) over the queries "
        "both hold (dot) and its 95%% interval (line): the paired bootstrap (%s), "
        "or over more than %d queries the normal approximation (mean -/+ 1.96 sd/sqrt(n)); "
        "dashed tick: the tolerated drop; red: the gate calls it a regression.%s"
        % (_plural(resamples, "resample", "resamples"), _BOOTSTRAP_QUERIES,
           "" if not left_out else
           " %s not drawn: unchanged or within the tolerance, or beyond the %d that moved "
           "most (the tables hold every row)." % (
               _plural(left_out, "slice row", "slice rows"), _FOREST_SLICE_ROWS)))]
    for name, measure, moves, allowed in pairs:
        if name is not None:
            continue
        fell = sum(1 for _, d in moves if d < -_TIE_SLACK)
        rose = sum(1 for _, d in moves if d > _TIE_SLACK)
        beyond = sum(1 for _, d in moves if -d > allowed + FLOAT_SLACK)
        caption = ("%s: %s, %d rose, %d unchanged (of the %s both hold); %s by more than "
                   "the tolerated %s. Sorted from the largest drop to the largest gain."
                   % (measure, _plural(fell, "query fell", "queries fell"), rose,
                      len(moves) - fell - rose, _plural(len(moves), "query", "queries"),
                      _plural(beyond, "query fell", "queries fell"), _fmt(allowed)))
        if len(moves) > _WATERFALL_QUERIES:
            size, extra = divmod(len(moves), _WATERFALL_BINS)
            caption += (" %d queries drawn as %d bars, each the mean delta of %s consecutive "
                        "queries." % (len(moves), _WATERFALL_BINS, "%d or %d" % (size, size + 1)
                                      if extra else size))
        out.append("<h3>%s: per-query deltas</h3>\n" % _esc(measure))
        out.append(_figure(_waterfall_chart("per-query deltas of %s, sorted" % measure,
                                            sorted((d, q) for q, d in moves), allowed), caption))
    return "".join(out)


_FOREST_SLICE_ROWS = 50     # slice rows a forest plot draws at most


def _forest_pairs(pairs, changes):
    """(drawn, left out): the pairs a forest plot draws, by measure then name:
    every overall row, and the slice rows that moved beyond the tolerance or
    improved, the _FOREST_SLICE_ROWS of them that moved most; how many slice
    rows are left out (their intervals are never computed)."""
    quiet = _QUIET_STATUSES
    slices = [p for p in pairs if p[0] is not None]
    moved = [p for p in slices if getattr(changes.get((p[0], p[1])), "status", None)
             not in quiet]
    moved = sorted(moved, key=lambda p: (-abs(_mean([d for _, d in p[2]])), p[1], p[0])
                   )[:_FOREST_SLICE_ROWS]
    drawn = [p for p in pairs if p[0] is None] + moved
    return (sorted(drawn, key=lambda p: (p[1], p[0] or "")), len(slices) - len(moved))


def _comparison_chart(comparison):
    """The forest plot of a --compare run: each measure's delta with its 95% interval."""
    rows = []
    for r in comparison.measures.values():
        tip = ("%s: delta %r, 95%% CI [%r, %r], %s; p (Holm) %r; %s"
               % (r.measure, r.delta, r.ci95[0], r.ci95[1], _plural(r.n, "query", "queries"),
                  r.p_holm, r.verdict))
        worse = r.verdict.startswith("significantly worse")
        rows.append(_Interval(r.measure, r.delta, r.ci95[0], r.ci95[1], tip,
                              "ci bad" if worse else "ci"))
    return _figure(_forest_chart("run minus %s with 95%% bootstrap intervals"
                                 % comparison.reference, rows),
                   "Run minus %s, paired over the queries both scored: the mean delta (dot) "
                   "and its 95%% bootstrap interval (line); red: significantly worse. %s"
                   % (comparison.reference, "; ".join("%s: %s" % (r.measure, r.verdict)
                                                      for r in comparison.measures.values())))


def _warnings_section(report):
    if report.warnings:
        yield "warnings", ["warning"], [[w] for w in report.warnings], []


def _inputs_section(report):
    """What was read: each input's path, format and sha256 (and any other fact kept)."""
    rows = [[name, key, str(info[key])] for name, info in sorted((report.inputs or {}).items())
            for key in sorted(info)]
    yield ("inputs (rag_eval %s)" % __version__, ["input", "key", "value"], rows, [])


def render_html(report, gate_result=None, comparisons=(), *, per_query=False,
                baseline_name="baseline", baseline=None, resamples=DEFAULT_RESAMPLES,
                seed=DEFAULT_SEED):
    """One self-contained HTML page: the verdict in words, the charts (inline
    SVG), then the tables of :func:`render_text`.  No script, no external
    reference, no clock: the same inputs give the same bytes.

    With ``gate_result``, ``baseline`` (what it was gated against, a
    :class:`Baseline` or dict) gives the per-query values of the paired
    deltas: a forest plot of their means with 95% bootstrap intervals
    (``resamples``, ``seed``, as :func:`gate` takes them) and a waterfall per
    gated measure.

    >>> r = evaluate({"q": {"a": 1}}, {"q": ["b", "a"]}, k=2, measures="mrr")
    >>> page = render_html(r, gate(r, {"mrr@2": 0.9}))
    >>> page.startswith("<!DOCTYPE html>"), "FAILED" in page, "<script" in page
    (True, True, False)
    """
    title, verdict = "rag_eval report", ""
    if gate_result is not None:
        verdict = '<p class="verdict %s">%s</p>\n' % (
            "pass" if gate_result.passed else "fail",
            _esc(_gate_verdict(gate_result, baseline_name)))
        title += ": gate %s" % ("passed" if gate_result.passed else "FAILED")
    drift = list(_drift_sections(report.drift))[:1]
    if drift and not report.drift["passed"]:    # the run fails on it: said first
        verdict = '<p class="verdict fail">%s</p>\n' % _esc(drift[0][0]) + verdict
        title += ": judge drift FAILED"
    charts = ["<h2>Charts</h2>\n", _means_chart(report, gate_result)]
    if report.stages is not None:
        charts.append(_stages_chart(report.stages, getattr(baseline, "stages", None),
                                    _lower_is_better(report, report.stages["field"])))
    if gate_result is not None:
        charts += [_judged_chart(gate_result), _gate_charts(report, gate_result, baseline,
                                                            resamples, seed)]
    for c in comparisons:
        charts += ["<h3>run vs %s</h3>\n" % _esc(c.reference), _comparison_chart(c)]
    sections = itertools.chain(_sections(report, gate_result, comparisons, per_query,
                                         baseline_name),
                               _warnings_section(report), _inputs_section(report))
    return "".join([
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>%s</title>\n<style>\n%s</style>\n</head>\n<body>\n" % (_esc(title), _HTML_CSS),
        "<h1>rag_eval report</h1>\n", verdict,
        "<p>%s</p>\n" % _esc(_summary_line(report))] + charts + [
        "<h2>Tables</h2>\n"] + [_html_section(*s) for s in sections] + ["</body>\n</html>\n"])


# Notebook views (the IPython display protocol's _repr_html_): a fragment, no
# <html> or <body>, its numbers in a <table>, never a per-query table.  The
# blocks are _sections' own: with a report of no queries its first block is
# empty and the rest are the gate's or the comparison's alone.

def _html_fragment(lead, sections):
    return '<div class="rag-eval">\n<p>%s</p>\n%s</div>\n' % (
        _esc(lead), "".join(_html_section(*s) for s in sections))


def _report_html(report):
    title, header, rows, notes = next(_sections(report, None, (), False, "baseline"))
    return _html_fragment(title, [("means", header, rows, notes)])


def _no_queries():
    return Report((), {}, {}, (), (), (), {}, {}, ())


def _gate_html(gate_result):
    sections = list(_sections(_no_queries(), gate_result, (), False, "baseline"))[1:]
    return _html_fragment("gate: %s" % ("PASSED" if gate_result.passed else "FAILED"), sections)


def _comparison_html(comparison):
    sections = list(_sections(_no_queries(), None, (comparison,), False, "baseline"))[1:]
    return _html_fragment("comparison with %s" % comparison.reference, sections)


_RENDERERS = {"text": render_text, "json": render_json, "markdown": render_markdown,
              "trec": render_trec, "html": render_html}

# -o FILE with no --format: the extension picks the format, if it is rendered.
_EXTENSION_FORMATS = {".html": "html", ".json": "json", ".md": "markdown",
                      ".markdown": "markdown"}


def _format_of(output):
    """The format -o FILE asks for when --format is absent.

    >>> _format_of("report.JSON"), _format_of("summary.md"), _format_of("out.txt"), _format_of(None)
    ('json', 'markdown', 'text', 'text')
    >>> _format_of("report.html")
    'html'
    """
    fmt = _EXTENSION_FORMATS.get(os.path.splitext(output or "")[1].lower())
    return fmt if fmt in _RENDERERS else "text"


# ===========================================================================
# src/19_command_line.py
#
# Command line: the parser, the options' checks, main() and its exit codes.
#
# main(argv) -> exit code (0 scored and passed, 1 a regression, 2 bad input
# or usage); _command() is the console entry point (rag-eval, python3 -m
# rag_eval, python3 rag_eval.py).  Also the --meta options, the --to-label,
# --drift and --scores paths, and the output files written atomically.
#
# Uses: every earlier file.  Used by: 20_accelerations (the entry point at
# the end of the file).
# ===========================================================================

EXAMPLES = """\
examples:
  rag-eval qrels.json run.json                      score the default measures at k=5
  rag-eval qrels.json run.json --baseline           gate against ./baseline.json (exit 1 on a drop)
  rag-eval qrels.trec run.trec --k 1,5,10 --metrics recall,ndcg,mrr --per-query
  rag-eval qrels.json run.json --metrics nDCG@10,R@100 --format json -o report.json
  rag-eval qrels.json run.json --save-baseline baseline.json
  rag-eval qrels.json run.json --baseline --gate significant   fail only on significant drops
  rag-eval qrels.json run.json --compare main_run.json         is the difference real?
  rag-eval --scores ragas.csv --id-column query_id --baseline   gate judge scores
  rag-eval qrels.json run.json --scores judge.jsonl --baseline   both tiers in one gate

exit codes: 0 ok, 1 the gate found a regression, 2 usage or input error.
measures: %s
"""


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error on one line (argparse prints its whole usage
    block first, which buries the problem in a CI log)."""

    def error(self, message):
        self.exit(EXIT_ERROR, "rag-eval: error: %s (see --help)\n" % message)


def build_parser():
    """The argparse parser of the ``rag-eval`` command."""
    parser = _Parser(
        prog="rag-eval",
        description="Score retrieval (recall@k, success@k, MRR, nDCG, ...) and gate on a baseline.",
        epilog=EXAMPLES % ", ".join(available_measures()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False)     # --qrels must never mean --qrels-format
    parser.add_argument("qrels", nargs="?", default=None,
                        help="relevance judgments: JSON, JSONL or TREC (.gz ok); - for stdin")
    parser.add_argument("run", nargs="?", default=None,
                        help="the retriever's output: JSON, JSONL or TREC (.gz ok); - for stdin")
    parser.add_argument("--k", default=None, metavar="K[,K...]",
                        help="cutoffs, e.g. 1,5,10 (default %d)" % DEFAULT_K)
    parser.add_argument("--metrics", default=None, metavar="NAME[,NAME...]",
                        help="measures, e.g. recall,ndcg,mrr or nDCG@10 (default: %s)"
                        % ",".join(DEFAULT_METRICS))
    parser.add_argument("--min-score", default=None, type=float, metavar="X",
                        help="drop the ids scored below X before anything else (the production "
                             "similarity cut-off); a query left with none abstained")
    parser.add_argument("--sweep-min-score", nargs="?", const="", default=None, metavar="MEASURE",
                        help="also print abstention_f1 and MEASURE (default: the first --metrics "
                             "measure that is not an abstention measure) with --min-score at "
                             "each distinct score of the run; put it after the files or write "
                             "--sweep-min-score=MEASURE. Never gated")
    parser.add_argument("--rel", default="1", metavar="N",
                        help="lowest grade that counts as relevant (default 1; nDCG ignores it)")
    parser.add_argument("--gain", choices=GAIN.choices, default="exponential",
                        help="nDCG gain: 2^g-1 (exponential, default) or g (linear, trec_eval)")
    parser.add_argument("--chunks", default=None, metavar="FILE",
                        help="chunk map (JSONL: id, doc, start, end[, tokens]): where each "
                        "retrieved id comes from, for unit=doc|evidence and span measures")
    parser.add_argument("--trim-label-whitespace", action="store_true",
                        help="narrow each span label that carries its text past the "
                        "whitespace at the ends of that text before scoring (splitters that "
                        "strip chunks never hold it); recorded in saved baselines")
    parser.add_argument("--doc-sep", default=None, metavar="SEP",
                        help="the document of a chunk id is what precedes its last SEP "
                        "(refund-policy#3 -> refund-policy); instead of --chunks")
    _add_field_options(parser)
    parser.add_argument("--unit", choices=UNITS, default="id",
                        help="what bare measure names count: the retrieved id (default), its "
                        "document, or labelled evidence spans; k always counts chunks; a "
                        "name that counts ids and has no unit (rprec, judged) is refused")
    _add_unjudged_options(parser)
    parser.add_argument("--qrels-format", choices=QRELS_FORMATS, default=None,
                        help="override detection")
    parser.add_argument("--run-format", choices=FORMATS, default=None, help="override detection")
    parser.add_argument("--queries", default=None, metavar="FILE",
                        help="query metadata (JSONL: query_id, slices, tags, answerable, "
                        "valid_until); instead of what a test-set JSONL as QRELS says")
    parser.add_argument("--by", action="append", default=[], metavar="FIELD",
                        help="one table per slice field (repeatable): a row per value with "
                        "its query count and means (needs query metadata)")
    parser.add_argument("--holdout", default=None, metavar="FIELD=VALUE",
                        help="score and gate this slice apart, left out of every other mean; "
                        "only its counts, means and verdict are ever written")
    parser.add_argument("--reveal-holdout", action="store_true",
                        help="write the hold-out's query ids and per-query values too")
    parser.add_argument("--as-of", default=None, metavar="YYYY-MM-DD",
                        help="leave out queries whose valid_until is before this date "
                        "(no default: the clock is never read)")
    parser.add_argument("--skip-extra-queries", action="store_true",
                        help="skip run queries (and, beside QRELS RUN, score-file queries) "
                        "absent from the qrels (default: error)")
    parser.add_argument("--allow-unlabelled-run", action="store_true",
                        help="score a run that meets no label, for some measures or all: "
                        "none of its ids (or their documents) carries one (default: error)")
    parser.add_argument("--baseline", nargs="?", const=DEFAULT_BASELINE, default=None,
                        metavar="FILE", help="gate against FILE (default %s); exit 1 on a regression"
                        % DEFAULT_BASELINE)
    parser.add_argument("--max-drop", default=str(DEFAULT_MAX_DROP), metavar="X",
                        help="tolerated drop: absolute (0.02, default) or relative (5%%)")
    parser.add_argument("--slice-max-drop", action="append", default=[],
                        metavar="FIELD=VALUE:X", help="tolerated drop of one slice "
                        "(repeatable), e.g. risk=high:0; split at the last ':'")
    parser.add_argument("--fail-on-removed", action="store_true",
                        help="with --baseline: fail when a query the baseline scored has no "
                        "value now (a frozen test set); by default such queries are named "
                        "and left out of both means")
    parser.add_argument("--save-baseline", default=None, metavar="FILE",
                        help="write the current numbers as a baseline (atomically); "
                        "not when the gate fails, unless --accept")
    parser.add_argument("--accept", action="store_true",
                        help="with --save-baseline: write it even when the gate fails "
                        "(the exit code stays 1)")
    parser.add_argument("--gate", choices=GATE_MODES, default="tolerance", dest="gate_mode",
                        help="tolerance (default): fail on any drop beyond --max-drop; "
                        "significant: only on such a drop that is also significant at "
                        "--alpha by the paired sign-flip test (for 0/1 outcomes the test "
                        "is the exact McNemar test; needs a baseline from --save-baseline)")
    parser.add_argument("--compare", action="append", default=[], metavar="OTHER_RUN",
                        help="paired comparison with a reference run (repeatable; with "
                        "--scores alone, a reference score file)")
    parser.add_argument("--compare-chunks", action="append", default=[], metavar="MAP",
                        help="the chunk map of a --compare run (another chunker): none, or "
                        "one per --compare, paired by order (default: --chunks, or the "
                        "run's own chunk fields)")
    _add_score_options(parser)
    parser.add_argument("--alpha", default=str(DEFAULT_ALPHA), metavar="A",
                        help="significance level (default %g)" % DEFAULT_ALPHA)
    parser.add_argument("--resamples", default=str(DEFAULT_RESAMPLES), metavar="N",
                        help="bootstrap and Monte Carlo resamples (default %d)" % DEFAULT_RESAMPLES)
    parser.add_argument("--seed", default=str(DEFAULT_SEED), metavar="N",
                        help="random seed; fixed by default, so output repeats")
    _add_provenance_options(parser)
    parser.add_argument("--format", choices=sorted(_RENDERERS), default=None,
                        help="output format (default: from the -o extension: %s; else text); "
                        "trec: trec_eval's lines (the gate and comparisons go to stderr)"
                        % ", ".join("%s %s" % item for item in sorted(_EXTENSION_FORMATS.items())
                                    if item[1] in _RENDERERS))
    parser.add_argument("--max-bytes", default=str(DEFAULT_MAX_BYTES), metavar="N",
                        help="cap the Markdown (stdout and --step-summary) at N bytes by "
                        "leaving out rows of its <details> blocks (default %d, under a "
                        "pull-request comment's limit)" % DEFAULT_MAX_BYTES)
    parser.add_argument("--step-summary", action="store_true",
                        help="also append the Markdown report to the file named by "
                        "$GITHUB_STEP_SUMMARY (GitHub Actions), even when the gate fails")
    parser.add_argument("--average", choices=AVERAGES, default="scored",
                        help="which queries a mean is over: scored (default: those with a "
                        "relevant id; missing from the run = 0) or trec_eval (as trec_eval "
                        "without -c: those the run and the qrels share; only with --format "
                        "trec, never gated or compared)")
    parser.add_argument("--per-query", action="store_true", help="include per-query values")
    parser.add_argument("-o", "--output", default=None, metavar="FILE",
                        help="write the report to FILE (atomically) instead of stdout")
    parser.add_argument("--timing", action="store_true",
                        help="record the seconds the run took: \"elapsed_seconds\" in the JSON "
                        "report, a line on stderr otherwise (off by default: same inputs, "
                        "same bytes)")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an internal error (also RAG_EVAL_DEBUG=1)")
    parser.add_argument("--list-measures", action=_ListMeasures,
                        help="list every measure (cutoff, parameters, peer names) and exit")
    parser.add_argument("--version", action="version", version="rag_eval " + __version__)
    return parser


def _add_field_options(parser):
    """--id-field, --doc-field, --start-field, --end-field and --query-field:
    field paths read from the objects and lines as written (see _Fields)."""
    what = {"id": "its chunk id (default: id; LlamaIndex node.id_)",
            "doc": "its document (default: doc; LangChain metadata.source; LlamaIndex "
                   "node.metadata.file_name, else file_path, else the source node's id)",
            "start": "its start offset (default: start; LangChain metadata.start_index; "
                     "LlamaIndex node.start_char_idx)",
            "end": "its end offset (default: end; LangChain start + the length of "
                   "page_content; LlamaIndex node.end_char_idx)"}
    for name, said in what.items():
        parser.add_argument("--%s-field" % name, default=None, metavar="PATH",
                            help="where a result object in a ranked list gives %s: keys from "
                                 "the object as written, joined by '.' (e.g. "
                                 "metadata.chunk_id)" % said)
    parser.add_argument("--query-field", default=None, metavar="PATH",
                        help="the field that names the query of every JSONL line of QRELS and "
                             "the runs, e.g. query (LlamaIndex's RetrieverEvaluator rows) or "
                             "user_input (Ragas rows): rows without an id, keyed by their "
                             "question")


def _cli_fields(args):
    """The _Fields of the field options, or None."""
    paths = {name: _field_path(getattr(args, "%s_field" % name), option)
             for name, option in _FIELD_OPTIONS.items()
             if getattr(args, "%s_field" % name) is not None}
    return _Fields(**paths) if paths else None


def _add_score_options(parser):
    parser.add_argument("--scores", action="append", default=[], metavar="FILE",
                        help="per-query scores made elsewhere (an LLM judge's): JSONL one query "
                        "a line or CSV with a header; in place of QRELS RUN, or beside them to "
                        "gate both in one report (repeatable: each field in one file). A list "
                        "value holds repeated judge runs (the query's value is their mean); "
                        "true/false make a rate (repeated runs: a fraction). Measures "
                        "score(field=NAME); --metrics names the fields")
    parser.add_argument("--id-column", default=SCORE_ID_COLUMN, metavar="NAME",
                        help="the query id of every score file (default %s)" % SCORE_ID_COLUMN)
    parser.add_argument("--score-range", action="append", default=[], metavar="FIELD=LO:HI",
                        help="the range of a score field (default 0:1; repeatable), e.g. "
                        "relevance=1:5; values are mapped onto [0, 1] as (v-LO)/(HI-LO), so "
                        "HI<LO declares lower is better; recorded in the baseline")
    parser.add_argument("--allow-missing-scores", action="store_true",
                        help="list a query without a score for a field as unscored for that "
                        "field (default: error)")
    parser.add_argument("--pass-threshold", action="append", default=[], metavar="FIELD=X",
                        help="show, for the queries whose judge runs fall on both sides of X "
                        "(in the field's own units), the share of runs on each side")
    parser.add_argument("--drift", default=None, metavar="FROZEN",
                        help="judge drift: a frozen sample (a score file whose items carry "
                        "input_sha256, the hash of the question, context and answer judged, and "
                        "the scores stored then) against the same items in --scores now; each "
                        "item's hash must be the same. Reports per field the paired mean "
                        "difference (95%% CI, p), the mean absolute difference, the largest "
                        "change, and for booleans and integer ranges agreement, Cohen's kappa "
                        "and the confusion table; --id-column applies")
    parser.add_argument("--max-drift", default=None, metavar="X",
                        help="with --drift: fail (exit 1) when the mean absolute difference of "
                        "a field exceeds X on its [0, 1] scale (default %g); the judge score "
                        "regressions of the gate are then marked suspect: judge drift"
                        % DEFAULT_MAX_DRIFT)
    parser.add_argument("--compare-scores", action="append", default=[], metavar="FILE",
                        help="with QRELS RUN and --scores: paired comparison with a reference "
                        "score file (repeatable); --compare then takes runs")
    parser.add_argument("--answer", default=None, metavar="FIELD",
                        help="with QRELS RUN and --scores: FIELD is the answer verdict (passing "
                        "at its --pass-threshold, default the midpoint of its range; a boolean "
                        "when true); each query is put in a stage (pass, generation_miss, "
                        "retrieval_miss, unsupported_pass) by whether the top --stages-k hold "
                        "its evidence, answer_given_evidence@k and answer_without_evidence@k "
                        "are scored, and the gate says which stage newly failing answers broke "
                        "at")
    parser.add_argument("--stages-k", default=None, metavar="K",
                        help="with --answer: the one cutoff the stages use (default the "
                        "smallest --k; without --k, a --baseline's stage cutoff)")
    parser.add_argument("--stages-evidence", choices=EVIDENCE_RULES, default=None,
                        help="with --answer: the evidence is retrieved when every relevant "
                        "unit (--unit) is in the top k (complete, default), or one (success: "
                        "single-evidence test sets)")


# Options of QRELS RUN that mean nothing for score files alone: (option, dest, default).
_RETRIEVAL_ONLY = (("--k", "k", None), ("--min-score", "min_score", None),
                   ("--sweep-min-score", "sweep_min_score", None), ("--rel", "rel", "1"),
                   ("--gain", "gain", "exponential"), ("--chunks", "chunks", None),
                   ("--compare-chunks", "compare_chunks", []),
                   ("--trim-label-whitespace", "trim_label_whitespace", False),
                   ("--doc-sep", "doc_sep", None), ("--unit", "unit", "id"),
                   ("--id-field", "id_field", None), ("--doc-field", "doc_field", None),
                   ("--start-field", "start_field", None), ("--end-field", "end_field", None),
                   ("--query-field", "query_field", None),
                   ("--qrels", "extra_qrels", []), ("--to-label", "to_label", None),
                   ("--unjudged-bounds", "unjudged_bounds", False),
                   ("--pool-depth", "pool_depth", None), ("--qrels-format", "qrels_format", None),
                   ("--run-format", "run_format", None),
                   ("--skip-extra-queries", "skip_extra_queries", False),
                   ("--allow-unlabelled-run", "allow_unlabelled_run", False),
                   ("--average", "average", "scored"))
_SCORES_ONLY = (("--id-column", "id_column", SCORE_ID_COLUMN),
                ("--score-range", "score_range", []),
                ("--allow-missing-scores", "allow_missing_scores", False),
                ("--pass-threshold", "pass_threshold", []),
                ("--compare-scores", "compare_scores", []),
                ("--drift", "drift", None), ("--max-drift", "max_drift", None),
                ("--answer", "answer", None), ("--stages-k", "stages_k", None),
                ("--stages-evidence", "stages_evidence", None))


def _cli_tiers(args):
    """What is scored: "retrieval" (QRELS RUN), "scores" (--scores alone) or
    "both"; the options of the other tier are refused."""
    given = [value for value in (args.qrels, args.run) if value is not None]
    if not args.scores:
        if len(given) < 2:
            raise EvalError("give QRELS and RUN (or --scores FILE to gate judge scores)")
        for option, dest, default in _SCORES_ONLY:
            if getattr(args, dest) != default:
                raise EvalError("%s only applies with --scores FILE" % option)
        return "retrieval"
    if len(given) == 1:
        raise EvalError("beside --scores give both QRELS and RUN (both tiers in one report), or "
                        "neither (the scores alone)")
    if given:
        return "both"
    for option, dest, default in _RETRIEVAL_ONLY:
        if getattr(args, dest) != default:
            raise EvalError("%s applies to QRELS and a RUN, not to --scores alone" % option)
    if args.compare_scores:
        raise EvalError("--compare-scores is for both tiers in one report; with --scores alone, "
                        "--compare takes the reference score file")
    if args.answer is not None:
        raise EvalError("--answer joins retrieval with the judge's verdicts: give QRELS and RUN "
                        "beside --scores")
    for option, dest in (("--stages-k", "stages_k"), ("--stages-evidence", "stages_evidence")):
        if getattr(args, dest) is not None:
            raise EvalError("%s only applies with --answer FIELD (and QRELS RUN)" % option)
    return "scores"


def _split_metrics(text, tiers, answer=None):
    """(retrieval names, score names) of --metrics (None: not given).  With
    --scores alone every name is a field (or score(field=...)); beside QRELS
    RUN, the judge scores are the names written score(field=NAME), and
    --answer FIELD adds score(field=FIELD) when they leave it out."""
    if text is None:
        return None, None
    items = _split_top_level(text)
    if tiers == "retrieval":
        return text, None
    if tiers == "scores":
        return None, items
    scored = [item for item in items if re.match(r"score\s*\(", item)]
    rest = [item for item in items if item not in scored]
    if not rest:
        raise EvalError("--metrics names no retrieval measure for QRELS RUN (name one, e.g. "
                        "recall@5, or give --scores alone)")
    if answer is not None and not any(_field_of(item) == answer for item in scored):
        scored.append("score(field=%s)" % answer)    # the answer field gates every query
    if not scored:
        raise EvalError("--metrics names no judge score for --scores: add score(field=NAME) "
                        "for each field to gate")
    return ",".join(rest), scored


def _split_stage_names(text):
    """(the other names, the stage measure names) of --metrics' retrieval
    names (None: not given; "" when it names stage measures only).

    >>> _split_stage_names("recall@5,answer_given_evidence(field=ok)@5")
    ('recall@5', ['answer_given_evidence(field=ok)@5'])
    """
    if text is None:
        return None, []
    items = _split_top_level(text)
    stages = [item for item in items if _REGISTRY[_read_name(item).measure].view == "stages"]
    if not stages:
        return text, []
    return ",".join(item for item in items if item not in stages), stages


def _named_fields(items):
    """The fields --metrics names (None: every field of the files)."""
    if items is None:
        return None
    fields = []
    for item in items:
        item = item.strip()
        m = parse_measure("score(field=%s)" % item if _FIELD_NAME.match(item) else item)
        if m.name != "score":
            raise EvalError("--metrics: %s is a retrieval measure; it needs QRELS and a RUN "
                            "beside --scores" % (m,))
        fields.append(dict(m.params)["field"])
    return fields


def _field_options(texts, option, parse):
    """{field: parse(value)} of repeated FIELD=VALUE options."""
    out = {}
    for text in texts:
        field, sep, value = text.partition("=")
        if not sep:
            raise EvalError("%s %s: expected FIELD=%s" % (option, text, parse.__doc__))
        field = _checked_field_name(field.strip(), option)
        if field in out:
            raise EvalError("%s %s: the field is given twice" % (option, field))
        out[field] = parse(value.strip(), "%s %s" % (option, text))
    return out


def _range_option(text, what):
    """LO:HI"""
    lo, sep, hi = text.partition(":")
    if not sep:
        raise EvalError("%s: expected FIELD=LO:HI, e.g. relevance=1:5" % what)
    try:
        return _checked_ranges({"f": (lo.strip(), hi.strip())})["f"]
    except EvalError:
        raise EvalError("%s: LO and HI must be two different finite numbers" % what) from None


def _threshold_option(text, what):
    """X"""
    try:
        return _number(text, float)
    except ValueError:
        raise EvalError("%s: X must be a number" % what) from None


def _cli_scores(paths, args, fields, ranges):
    """The Scores of each score file; with several, each field named (and
    each range) must be in one of them."""
    several = len(paths) > 1
    checked = several or args.answer is not None
    loaded = [_read_scores(path, args.id_column, fields, ranges, args.allow_missing_scores,
                           present_only=checked) for path in paths]
    have = [f for s in loaded for f in s.fields]
    if args.answer is not None and args.answer not in have:
        raise EvalError("--answer %s: no --scores file has the field %r (fields: %s)"
                        % (args.answer, args.answer, ", ".join(have) or "none"))
    if checked:
        for s in loaded if several else ():
            if not s.fields:
                raise EvalError("%s: holds none of the score fields asked for (%s)"
                                % (s.info["path"], ", ".join(fields or ())))
        for field in list(fields or ()) + list(ranges):
            if field not in have:
                raise EvalError("no score file has the field %r (fields: %s)"
                                % (field, ", ".join(have)))
    return loaded


def _add_unjudged_options(parser):
    parser.add_argument("--qrels", action="append", default=[], metavar="FILE",
                        dest="extra_qrels", help="more labels, merged with QRELS (repeatable; "
                        "e.g. a --to-label file graded); one (query, id) graded two ways is "
                        "an error")
    parser.add_argument("--to-label", default=None, metavar="FILE",
                        help="write the unjudged ids of the top --pool-depth of the run and "
                        "every --compare run, pooled, as JSONL rows to grade (implies "
                        "--allow-unlabelled-run)")
    parser.add_argument("--unjudged-bounds", action="store_true",
                        help="show the interval each mean (and, with --per-query, each "
                        "query's value) could take once the unjudged ids in the top k are "
                        "labelled: recall, precision, success, mrr, map and ndcg")
    parser.add_argument("--pool-depth", default=None, metavar="N",
                        help="how deep --to-label looks (default: the largest k, else the "
                        "whole ranking)")


def _read_all_qrels(args, notes, measures):
    """(qrels, input info, queries, more inputs) of QRELS and every --qrels
    FILE, merged; ``more inputs`` names the extra files' info "qrels.2", ...
    in the report's inputs.  To-label rows label what ``measures`` count."""
    rows_label = _rows_label(measures)
    qrels, info, described = _read_qrels(args.qrels, args.qrels_format, notes, rows_label,
                                         args.fields)
    if not args.extra_qrels:
        return qrels, info, described, {}
    parts, infos = [(info["path"], qrels)], {}
    for path in args.extra_qrels:
        more, more_info, more_described = _read_qrels(path, args.qrels_format, notes,
                                                      rows_label, args.fields)
        if more_described is not None:
            raise EvalError("%s: says what its queries are (slices, answerable, ...): query "
                            "metadata comes from QRELS or --queries, not from --qrels"
                            % more_info["path"])
        parts.append((more_info["path"], more))
        infos["qrels.%d" % (len(infos) + 2)] = more_info
    return _merged_qrels(parts), info, described, infos


def _to_label_output(args, qrels, metadata_set, chunk_maps, measures, stages=None):
    """(path, text) of --to-label: the runs are read again, each cut by
    --min-score as it was scored, each mapped by its chunk map (``chunk_maps``:
    RUN's, then each --compare run's); with answer stages, the rows of the
    unsupported_pass queries first (their answer passed without the
    evidence: a label may be what is missing)."""
    runs = []
    texts = [args.chunks] + (args.compare_chunks or [args.chunks] * len(args.compare))
    for path, chunks, text_map in zip([args.run] + args.compare, chunk_maps, texts):
        inp, fmt = _open_input(path, args.run_format, "run", args.fields)
        queries = _run_queries(inp, fmt, grouped=False)
        if args.min_score is not None:
            queries = ((q, r if r is None else _cut(q, r, args.min_score)) for q, r in queries)
        mapping = None
        if chunks is not None or args.doc_sep is not None:
            mapping = _Mapping(chunks, None if chunks is not None else args.doc_sep)
        runs.append((inp.name, queries, mapping,
                     text_map and functools.partial(_chunk_texts, text_map)))
    hidden = frozenset()
    if metadata_set is not None:
        qrels = metadata_set.qrels(qrels)
        hidden = frozenset() if args.reveal_holdout else metadata_set.hidden
    qrels = _split_qrels(qrels)[0]      # span labels: the grades of their documents
    first = frozenset(q for q, stage in ((stages or {}).get("per_query") or {}).items()
                      if stage == "unsupported_pass")
    questions = {} if metadata_set is None else {
        qid: info["question"] for qid, info in metadata_set.queries.items() if "question" in info}
    rows = _to_label_rows(runs, qrels, _pool_depth(measures, args.pool_depth), None, hidden,
                          by_doc=_rows_label(measures) != "id", first=first, questions=questions)
    return args.to_label, _to_label_text(rows)


class _ListMeasures(argparse.Action):
    """--list-measures: print the registry and exit 0, like --version (no QRELS or RUN)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(describe_measures())
        parser.exit(EXIT_OK)


def _parse_slice_max_drop(texts):
    """{slice: tolerance} of the --slice-max-drop options, each FIELD=VALUE:X
    split at its last ':' (a value may hold one).

    >>> _parse_slice_max_drop(["risk=high:0", "opens=09:00:5%"])
    {'risk=high': '0', 'opens=09:00': '5%'}
    """
    out = {}
    for text in texts:
        name, colon, value = text.rpartition(":")
        if not colon or "=" not in name or not _slice_field(name):
            raise EvalError("--slice-max-drop needs FIELD=VALUE:X (e.g. risk=high:0), got %r"
                            % text)
        if name in out:
            raise EvalError("--slice-max-drop gives %s twice" % name)
        try:
            parse_tolerance(value)
        except EvalError as exc:
            raise EvalError("--slice-max-drop %s: %s" % (name, exc)) from None
        out[name] = value
    return out


def _parse_alpha(text):
    try:
        value = _number(text, float)
    except ValueError:
        value = math.nan
    if not 0.0 < value < 1.0:
        raise EvalError("alpha must be a number between 0 and 1, got %r" % (text,))
    return value


def _parse_seed(text):
    try:
        return _number(text, int)
    except ValueError:
        raise EvalError("seed must be an integer, got %r" % (text,)) from None


def _check_paths(args):
    """Usage errors of the file options, before any work is done."""
    named = [("QRELS", args.qrels), ("RUN", args.run), ("--baseline", args.baseline),
             ("--save-baseline", args.save_baseline), ("-o", args.output),
             ("--chunks", args.chunks), ("--queries", args.queries),
             ("--to-label", args.to_label)]
    named += [("--compare", path) for path in args.compare]
    named += [("--compare-chunks", path) for path in args.compare_chunks]
    named += [("--qrels", path) for path in args.extra_qrels]
    named += [("--scores", path) for path in args.scores]
    named += [("--compare-scores", path) for path in args.compare_scores]
    for option, path in named:
        if path == "":
            # An unset CI variable must not turn the gate (or a save) into a no-op.
            raise EvalError("%s: the file name is empty (an unset variable?)" % option)
    sources = ([args.qrels, args.run, args.baseline, args.chunks, args.queries] + args.compare
               + args.compare_chunks + args.extra_qrels + args.scores + args.compare_scores)
    if args.to_label == "-":
        raise EvalError("--to-label writes a file beside the report: give a file name, not -")
    if args.pool_depth is not None:
        if args.to_label is None:
            raise EvalError("--pool-depth only applies with --to-label")
        _positive_int(args.pool_depth, "--pool-depth")
    if args.doc_sep == "":
        raise EvalError("--doc-sep: the separator is empty (an unset variable?)")
    if args.chunks is not None and args.doc_sep is not None:
        raise EvalError("give --chunks or --doc-sep, not both: a chunk map already names each "
                        "chunk's document")
    if args.compare_chunks and len(args.compare_chunks) != len(args.compare):
        raise EvalError("%s --compare-chunks for %s --compare: give one chunk map per --compare "
                        "run, paired by order, or none (each run then maps as RUN does)"
                        % (len(args.compare_chunks), len(args.compare)))
    if sources.count("-") > 1:
        raise EvalError("only one input can come from stdin")
    if args.save_baseline == "-":
        raise EvalError("--save-baseline needs a file name, not -")
    _check_outputs(args)
    if args.accept and args.save_baseline is None:
        raise EvalError("--accept only applies with --save-baseline (it writes the baseline "
                        "even when the gate fails)")
    if args.slice_max_drop and args.baseline is None:
        raise EvalError("--slice-max-drop only applies with --baseline (it is a tolerance of "
                        "the gate)")
    if args.fail_on_removed and args.baseline is None:
        raise EvalError("--fail-on-removed only applies with --baseline")
    if args.reveal_holdout and args.holdout is None:
        raise EvalError("--reveal-holdout only applies with --holdout FIELD=VALUE")


def _check_outputs(args):
    """An output never replaces an input or the other output; only
    --save-baseline may name the --baseline it updates."""
    def same(a, b):
        if a in (None, "-") or b in (None, "-"):
            return False
        try:
            return os.path.realpath(a) == os.path.realpath(b)
        except (OSError, ValueError):
            return False
    inputs = [("QRELS", args.qrels), ("RUN", args.run), ("--baseline", args.baseline),
              ("--chunks", args.chunks), ("--queries", args.queries),
              ("--meta-file", args.meta_file)]
    inputs += [("--compare", path) for path in args.compare]
    inputs += [("--compare-chunks", path) for path in args.compare_chunks]
    inputs += [("--qrels", path) for path in args.extra_qrels]
    inputs += [("--scores", path) for path in args.scores + args.compare_scores]
    outputs = (("-o", args.output), ("--save-baseline", args.save_baseline),
               ("--to-label", args.to_label))
    for output, path in outputs:
        for option, source in inputs:
            if same(path, source) and (output, option) != ("--save-baseline", "--baseline"):
                raise EvalError("%s %s would overwrite the %s input" % (output, path, option))
    if same(args.output, args.save_baseline):
        raise EvalError("%s: named for two outputs (--save-baseline and -o)" % args.output)
    for output, path in outputs[:2]:
        if same(path, args.to_label):
            raise EvalError("%s: named for two outputs (%s and --to-label)" % (path, output))


@_gc_paused
def _run_cli(args, stdout, stderr):
    started = time.monotonic() if args.timing else None
    max_bytes = _positive_int(args.max_bytes, "--max-bytes")
    summary_path = _step_summary_path() if args.step_summary else None
    _check_paths(args)
    tiers = _cli_tiers(args)
    args.fields = _cli_fields(args)
    if args.average == "trec_eval":
        if args.format != "trec":
            raise EvalError("--average trec_eval reproduces trec_eval's 'all' lines: use it "
                            "with --format trec")
        if args.baseline or args.save_baseline or args.compare:
            raise EvalError("--average trec_eval is never gated or compared (its mean leaves "
                            "out the queries the run lacks, so leaving a hard query out would "
                            "raise it): drop it, or drop --baseline, --save-baseline and "
                            "--compare")
    if args.sweep_min_score is not None:
        _check_sweep_options(args)
    options = {"alpha": _parse_alpha(args.alpha), "seed": _parse_seed(args.seed),
               "resamples": _checked_resamples(args.resamples)}
    parse_tolerance(args.max_drop)   # reject bad options before any work
    slice_max_drop = _parse_slice_max_drop(args.slice_max_drop)
    if args.as_of is not None:
        _check_date(args.as_of, "--as-of")
    baseline = load_baseline(args.baseline) if args.baseline else None
    meta = _cli_meta(args, baseline)
    retrieval_names, score_names = _split_metrics(args.metrics, tiers, args.answer)
    retrieval_names, stage_names = _split_stage_names(retrieval_names)
    if stage_names and tiers != "both":
        raise EvalError("%s joins retrieval with the judge's verdicts: give --scores FILE "
                        "beside QRELS RUN (and --answer FIELD for the stages)" % stage_names[0])
    adopted = []    # the baseline's stage measures, when it decides what is gated
    if baseline is not None and args.metrics is None:
        retrieval_names, score_names = _baseline_measures(baseline, args.k or None, tiers,
                                                          args.answer)
        adopted = [m for m in map(parse_measure, baseline.mean)
                   if m.name != "score" and _is_stage_measure(m)]
        if adopted and tiers != "both":
            raise EvalError("%s gates %s, which joins retrieval with the judge's verdicts: "
                            "give --scores FILE beside QRELS RUN (or name the measures to gate "
                            "with --metrics)" % (baseline.source, adopted[0]))
        retrieval_names = [m for m in retrieval_names or () if not _is_stage_measure(m)] or None
    ranges = _field_options(args.score_range, "--score-range", _range_option)
    thresholds = _field_options(args.pass_threshold, "--pass-threshold", _threshold_option)
    if tiers == "scores":
        report, references = _cli_score_report(args, score_names, ranges, thresholds, meta)
        return _cli_output(args, stdout, stderr, report, None, references, options,
                           slice_max_drop, baseline, started, max_bytes, summary_path)
    if args.answer is not None and args.average != "scored":
        raise EvalError("--answer: answer stages are not for --average trec_eval, which is "
                        "never gated")
    metrics = [] if (stage_names or adopted) and not retrieval_names else list(resolve_measures(
        retrieval_names, args.k or DEFAULT_K, rel=args.rel, gain=args.gain, unit=args.unit))

    rel = _positive_int(args.rel, "rel")
    # judged@k exists to find unlabelled ids: asking for it asks to score such a run.
    allow_unlabelled = args.allow_unlabelled_run or args.to_label is not None or any(
        parse_measure(m).name == "judged" for m in metrics)
    label_notes = []
    qrels, qrels_info, described, more_inputs = _read_all_qrels(args, label_notes, metrics)
    if args.to_label is not None:   # --to-label reads the maps' texts again
        args.chunks = args.chunks and _held(args.chunks)
        args.compare_chunks = [_held(path) for path in args.compare_chunks]
    chunks, chunks_info = _read_chunks(args.chunks) if args.chunks else (None, None)
    # Each --compare run with its own chunk map (another chunker), else RUN's.
    compare_maps = [_read_chunks(path) for path in args.compare_chunks] or [
        (chunks, chunks_info)] * len(args.compare)
    metadata, queries_info, notes = _metadata(described, qrels_info["path"], args.queries)
    testset = _test_set(metadata, args.by, args.holdout, args.as_of, args.reveal_holdout,
                        args.average, queries_info, notes)
    judged = plan = None
    if tiers == "both":
        loaded = _cli_scores(args.scores, args, _named_fields(score_names), ranges)
        plan = _cli_stage_plan(args, baseline, _files_by_field(loaded), thresholds,
                               stage_names, adopted, rel)
        judged = _with_drift(_evaluate_scores(loaded, score_names, testset,
                                              args.allow_missing_scores, thresholds, qrels,
                                              args.skip_extra_queries),
                             args, loaded, ranges, testset)
    stated = frozenset() if testset is None else frozenset(
        q for q, info in testset.queries.items() if info.get("answerable") is False)
    retrieval = metrics     # what --compare runs and the sweep score
    metrics = metrics + list(plan.measures if plan is not None else ())
    if not retrieval and args.compare:
        raise EvalError("--compare compares retrieval runs: name a retrieval measure in "
                        "--metrics beside the stage measures")

    # Runs may be read again (a failed gate's bounds, --to-label, the sweep): one
    # from stdin or a pipe is held in memory from here on.
    args.run, args.compare = _held(args.run), [_held(path) for path in args.compare]

    def score(run, measures=metrics, min_score=args.min_score, bounds=False, checked=True,
              chunk_map=(chunks, chunks_info)):
        own, own_info = chunk_map
        report = _evaluate_run(qrels, qrels_info, run, measures, rel, args.skip_extra_queries,
                               args.run_format, args.average, own,
                               None if own is not None else args.doc_sep, own_info, testset,
                               min_score, bounds, args.fields, args.trim_label_whitespace)
        if report.unlabelled_run and not allow_unlabelled and checked:
            raise EvalError("%s: %s (--allow-unlabelled-run scores it anyway)"
                            % (report.inputs["run"]["path"], report.unlabelled_run))
        return report._replace(inputs=dict(report.inputs, **more_inputs))
    def scored(bounds):
        report = score(args.run, bounds=bounds)
        if judged is not None:
            report = _with_scores(report, judged)
        if plan is not None:
            report = _with_stages(report, plan, stated=stated, qrels=qrels, testset=testset,
                                  skip_extra=args.skip_extra_queries)
        report = _with_meta(report, meta)
        if label_notes:
            report = report._replace(warnings=tuple(label_notes) + report.warnings)
        return report
    # Every gate shows judged@k (cheap); the bounds that tell an undecided regression
    # only when it fails (below).
    first = args.unjudged_bounds or (baseline is not None and "judged")
    report = scored(first)
    # A reference is named as its input is (see _source_name): "<stdin>" for "-".
    references = [(_source_name(path), score(path, retrieval, chunk_map=chunk_map))
                  for path, chunk_map in zip(args.compare, compare_maps)]
    references += [(_source_name(path), _cli_reference_scores(path, args, judged, ranges,
                                                              testset, qrels))
                   for path in args.compare_scores]
    return _cli_output(args, stdout, stderr, report, scored, references, options,
                       slice_max_drop, baseline, started, max_bytes, summary_path, qrels,
                       testset, [chunks] + [m for m, _ in compare_maps], metrics, score)


def _baseline_measures(baseline, k, tiers, answer=None):
    """(retrieval measures, score names) of --baseline without --metrics:
    exactly the baseline's, by their canonical names (units, parameters and
    cutoffs as saved), never the defaults; ``k`` (--k) re-cuts the names that
    have a cutoff at its cutoffs, and --answer FIELD (``answer``) adds
    score(field=FIELD) when the baseline does not gate it.  A measure whose
    input is not given is an error naming it, as is a tier given that the
    baseline gates nothing of.

    >>> b = Baseline({"mrr@all": 0.5, "recall(unit=doc)@5": 0.7, "score(field=ok)": 0.9})
    >>> [str(m) for m in _baseline_measures(b, "1,3", "both")[0]]
    ['mrr@all', 'recall(unit=doc)@1', 'recall(unit=doc)@3']
    """
    scores = [name for name in baseline.mean if _field_of(name)]
    if answer is not None and answer not in map(_field_of, scores):
        scores.append("score(field=%s)" % answer)   # the answer field gates every query
    retrieval = [parse_measure(name) for name in baseline.mean if not _field_of(name)]
    if k is not None:
        retrieval = _recut(retrieval, parse_cutoffs(k))
    fix = "or name the measures to gate with --metrics"
    if tiers == "scores" and retrieval:
        raise EvalError("%s gates %s, which %s QRELS and RUN beside --scores (%s)"
                        % (baseline.source, _names_text([str(m) for m in retrieval], 5),
                           "needs" if len(retrieval) == 1 else "need", fix))
    if tiers == "retrieval" and scores:
        raise EvalError("%s gates the judge %s %s: give --scores FILE beside QRELS RUN (%s)"
                        % (baseline.source, "score" if len(scores) == 1 else "scores",
                           _names_text(scores, 5), fix))
    if tiers == "both" and not (retrieval and scores):
        raise EvalError("%s gates no %s: drop %s, %s"
                        % (baseline.source, "judge score" if retrieval else "retrieval measure",
                           "--scores" if retrieval else "QRELS RUN", fix))
    return retrieval or None, scores or None


def _recut(measures, cutoffs):
    """``measures`` with each integer cutoff replaced by every one of
    ``cutoffs`` (@all, no cutoff and a budget stay as they are), in order,
    once each.

    >>> [str(m) for m in _recut([parse_measure("recall@5"), parse_measure("recall@10"),
    ...                          parse_measure("rprec")], (3,))]
    ['recall@3', 'rprec']
    """
    out = []
    for m in measures:
        for cut in ([m._replace(k=c) for c in cutoffs] if type(m.k) is int else [m]):
            if cut not in out:
                out.append(cut)
    return out


def _cli_stage_plan(args, baseline, files, thresholds, stage_names, adopted, rel):
    """The _StagePlan of both tiers (None when no stage is asked for): the
    stage measures --metrics names, those of the baseline when it decides
    what is gated (``adopted``), and the stages block of --answer or, without
    it, the baseline's settings (adopted like its measures, when the score
    files hold its field), checked against the baseline's before any
    scoring.  Without --stages-k or --k, --answer takes the baseline's k."""
    k = args.k or DEFAULT_K
    theirs = baseline.stages if baseline is not None else None
    settings = None
    if args.answer is not None:
        settings = _stage_settings(
            args.answer, files, threshold=thresholds.get(args.answer),
            k=args.stages_k if args.stages_k is not None else theirs["k"]
            if theirs is not None and args.k is None else parse_cutoffs(k)[0],
            unit=args.unit, evidence=args.stages_evidence or "complete")
    elif args.stages_k is not None or args.stages_evidence is not None:
        raise EvalError("--%s only applies with --answer FIELD" % (
            "stages-k" if args.stages_k is not None else "stages-evidence"))
    elif theirs is not None and theirs["field"] in files:
        settings = _stage_settings(theirs["field"], files, threshold=thresholds.get(
            theirs["field"], theirs["threshold"]), k=theirs["k"], unit=theirs["unit"],
            evidence=theirs["evidence"], cover=theirs.get("cover", COVER.default))
    if settings is not None and baseline is not None:
        _check_same_stages(settings, theirs, baseline.source)
    named = _stage_measures(stage_names, k, files, rel=rel, unit=args.unit,
                            thresholds=thresholds, evidence=args.stages_evidence,
                            answer=args.answer)
    named += [m for m in (_canonical_stage_measure(m, files) for m in adopted
                          if dict(m.params)["field"] in files) if m not in named]
    if settings is None and not named:
        return None
    return _stage_plan(named, settings, files, rel)


def _cli_score_report(args, names, ranges, thresholds, meta):
    """(report, --compare references) of --scores alone (with --queries for
    slices)."""
    metadata, queries_info, notes = _metadata(None, None, args.queries)
    testset = _test_set(metadata, args.by, args.holdout, args.as_of, args.reveal_holdout,
                        "scored", queries_info, notes)
    loaded = _cli_scores(args.scores, args, _named_fields(names), ranges)
    report = _with_meta(_evaluate_scores(loaded, names, testset, args.allow_missing_scores,
                                         thresholds), meta)
    report = _with_drift(report, args, loaded, ranges, testset)
    return report, [(_source_name(path), _cli_reference_scores(path, args, report, ranges,
                                                               testset))
                    for path in args.compare]


def _with_drift(report, args, loaded, ranges, testset=None):
    """The report with its --drift check (the report unchanged without); the
    hold-out of ``testset`` (a _TestSet) stays out of it."""
    if args.drift is None:
        if args.max_drift is not None:
            raise EvalError("--max-drift applies with --drift FROZEN (the frozen sample)")
        return report
    fields = [_field_of(m) for m in report.measures if _field_of(m)]
    max_drift = _max_drift_option(args.max_drift)
    options = {"resamples": _checked_resamples(args.resamples), "seed": _parse_seed(args.seed)}
    return report._replace(drift=judge_drift(
        _read_scores(args.drift, args.id_column, fields,
                     {f: r for f, r in ranges.items() if f in fields}, present_only=True),
        loaded, max_drift=max_drift, held_out=testset.hidden if testset is not None else (),
        **options))


def _max_drift_option(text):
    if text is None:
        return DEFAULT_MAX_DRIFT
    try:
        value = _number(text, float)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise EvalError("--max-drift %s: X must be a number from 0 to 1 (a mean absolute "
                        "difference on the fields' [0, 1] scale)" % text)
    return value


def _cli_reference_scores(path, args, report, ranges, testset, qrels=None):
    """The report of a reference score file (--compare, --compare-scores):
    the fields and ranges of the report's score measures; beside QRELS RUN
    (``qrels``) held to the test set as the current score files are."""
    fields = [_field_of(m) for m in report.measures if _field_of(m)]
    loaded = _read_scores(path, args.id_column, fields,
                          {f: r for f, r in ranges.items() if f in fields},
                          args.allow_missing_scores)
    return _evaluate_scores([loaded], ["score(field=%s)" % f for f in fields], testset,
                            args.allow_missing_scores, queries=qrels,
                            skip_extra=args.skip_extra_queries)


def _cli_output(args, stdout, stderr, report, scored, references, options, slice_max_drop,
                baseline, started, max_bytes, summary_path, qrels=None, testset=None,
                chunk_maps=(), metrics=(), score=None):
    """Gate, compare, render and write: the rest of _run_cli, for every tier
    (``started``: the clock at the start, with --timing; ``summary_path``:
    --step-summary's file)."""
    comparisons = compare_all(report, references, **options) if references else ()
    result = None
    if baseline is not None:
        result = gate(report, baseline, max_drop=args.max_drop, mode=args.gate_mode,
                      same=args.same, slice_max_drop=slice_max_drop,
                      fail_on_removed=args.fail_on_removed, **options)
        if result.regressions and not args.unjudged_bounds and scored is not None:
            # Only a failed gate needs the bounds, to tell an undecided regression: a
            # second pass, so a passing gate costs what it did.
            result = gate(scored(True), baseline, max_drop=args.max_drop, mode=args.gate_mode,
                          same=args.same, slice_max_drop=slice_max_drop,
                          fail_on_removed=args.fail_on_removed, **options)
        if not args.unjudged_bounds:
            report = report._replace(unjudged=None)
    drifted = report.drift is not None and not report.drift["passed"]
    baseline_name = baseline.source if baseline else "baseline"
    sweep = _cli_sweep(args, metrics, score) if args.sweep_min_score is not None else None
    shown = dict(per_query=args.per_query, baseline_name=baseline_name)

    def markdown():
        return render_markdown(report, result, comparisons, sweep=sweep, max_bytes=max_bytes,
                               **shown)
    if args.format == "markdown":
        text = markdown()
    else:
        render = _RENDERERS[args.format]
        if render is render_html:   # its charts pair the baseline's per-query values
            render = functools.partial(render_html, baseline=baseline,
                                       resamples=options["resamples"], seed=options["seed"])
        text = render(report, result, comparisons, **shown)
        if sweep is not None:
            text = _with_sweep(text, sweep, args.format)
    if started is not None:
        elapsed = round(time.monotonic() - started, 3)
        if args.format == "json":
            text = _dumps(dict(json.loads(text), elapsed_seconds=elapsed))
        else:
            stderr.write("rag-eval: timing: %.3f s\n" % elapsed)
    # trec_eval's layout stays parseable: the gate and comparisons go to stderr.
    side = (_side_text(report, result, comparisons, baseline_name=baseline_name)
            if args.format == "trec" else "")
    # A failed gate never rewrites a baseline by itself: the rerun would pass.
    # Nor does a judge that moved: its scores are not the measure they were.
    refused = (args.save_baseline and (result is not None and not result.passed or drifted)
               and not args.accept)
    outputs = []
    if args.save_baseline and not refused:
        outputs.append((args.save_baseline, _dumps(baseline_dict(report))))
    to_file = args.output not in (None, "-")
    if to_file:
        outputs.append((args.output, text))
    if args.to_label is not None:
        outputs.append(_to_label_output(args, qrels, testset, chunk_maps, metrics, report.stages))
    _write_atomic(outputs)
    if summary_path is not None:
        try:   # a log, not an artifact: the outputs are written, the exit code stands
            _append_step_summary(summary_path,
                                 text if args.format == "markdown" else markdown())
        except EvalError as exc:
            stderr.write("rag-eval: warning: %s\n" % _one_line(str(exc)))
    if not to_file:
        try:
            stdout.write(text)
        except BrokenPipeError:
            pass   # a closed pager must not turn a failed gate into a pass
    stderr.write(side)
    for _, other in references:
        for warning in other.warnings:
            stderr.write("rag-eval: warning: %s: %s\n"
                         % ((other.inputs.get("run") or other.inputs["scores"])["path"],
                            warning))
    for warning in report.warnings:
        stderr.write("rag-eval: warning: %s\n" % warning)
    if refused:
        stderr.write("rag-eval: the %s, so %s was not written (it keeps the numbers "
                     "it had); rerun with --accept to save the new numbers anyway\n"
                     % ("gate failed" if result is not None and not result.passed
                        else "judge drifted (--drift)", args.save_baseline))
    if drifted:
        return EXIT_REGRESSION
    return EXIT_OK if result is None or result.passed else EXIT_REGRESSION


def _check_sweep_options(args):
    """--sweep-min-score is a table to read, never a gate: a threshold tuned on
    the test set must not become what CI compares against."""
    if args.baseline is not None or args.save_baseline is not None:
        raise EvalError("--sweep-min-score is not gated: drop --baseline and --save-baseline "
                        "(gate a chosen threshold with --min-score X)")
    if args.format == "trec":
        raise EvalError("--sweep-min-score: trec_eval's layout has no place for the table; "
                        "use --format text, markdown or json")


def _cli_sweep(args, metrics, score):
    """The Sweep of the CLI's run: ``score(path, measures, min_score)`` per row."""
    if args.sweep_min_score:
        chosen = [_one_measure(args.sweep_min_score, args.rel, args.gain, args.unit,
                               args.k or DEFAULT_K)]
        if _REGISTRY[chosen[0].name].population in _UNANSWERABLE_POPULATIONS | {"answerable"}:
            raise EvalError("--sweep-min-score: %s is an abstention measure; name a retrieval "
                            "measure to set beside abstention_f1, e.g. --sweep-min-score="
                            "recall@5" % (chosen[0],))
        if _is_stage_measure(chosen[0]):
            raise EvalError("--sweep-min-score: %s joins the judge's verdicts, which a sweep of "
                            "the run does not; name a retrieval measure, e.g. "
                            "--sweep-min-score=recall@5" % (chosen[0],))
    else:
        chosen = [m for m in metrics if _REGISTRY[m.name].population
                  not in _UNANSWERABLE_POPULATIONS | {"answerable"} and not _is_stage_measure(m)]
        if not chosen:
            raise EvalError("--sweep-min-score: no --metrics measure is a retrieval measure; "
                            "name one: --sweep-min-score=recall@5")
    measures = [chosen[0], parse_measure("abstention_f1")]
    run = _validated(load_run(args.run, format=args.run_format, fields=args.fields),
                     _source_name(args.run), _check_run_query)
    # Thresholds from the queries the sweep scores: a hold-out's scores stay out of it.
    uncut = score(args.run, measures, None)
    swept = set(uncut.per_query) | set(uncut.unscored)
    # A threshold may keep only unlabelled ids: the run itself was checked (uncut).
    return _sweep(lambda threshold: score(args.run, measures, threshold, checked=False),
                  str(chosen[0]),
                  _run_scores((q, r) for q, r in run.items() if q in swept))


def _step_summary_path():
    """The file --step-summary appends to: $GITHUB_STEP_SUMMARY, which must be
    set and open for appending (checked before any work, so that an unusable
    summary is an error before any output is written)."""
    path = os.environ.get("GITHUB_STEP_SUMMARY", "")
    if not path:
        raise EvalError("--step-summary: $GITHUB_STEP_SUMMARY is not set (GitHub Actions sets "
                        "it in every step); drop --step-summary outside a workflow")
    _append_step_summary(path, None)
    return path


def _append_step_summary(path, text):
    """Append ``text`` to the job summary file (GitHub reads it after the step);
    ``text`` None only checks that the file opens for appending."""
    try:
        with open(path, "a", encoding="utf-8") as handle:
            if text is not None:
                # A blank line before (never merged with a paragraph already there)
                # and after (a blank line ends an HTML block).
                handle.write("\n" * (1 + (handle.tell() > 0 and not _ends_a_line(path)))
                             + text.strip("\n") + "\n\n")
    except OSError as exc:
        raise EvalError("$GITHUB_STEP_SUMMARY %s: cannot append: %s"
                        % (path, exc.strerror or exc)) from None


def _ends_a_line(path):
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def _step_summary_error(message):
    """On an error (exit 2) with --step-summary, the error as one escaped line
    of the job summary (a log, not an artifact: best effort)."""
    path = os.environ.get("GITHUB_STEP_SUMMARY", "")
    if path:
        try:
            _append_step_summary(path, "**rag-eval error**: %s" % _md_text(message))
        except EvalError:
            pass


def _step_summary_asked(argv):
    """Whether a command line that argparse refused asked for --step-summary."""
    return any(arg == "--step-summary" for arg in (sys.argv[1:] if argv is None else argv))


class _Tolerant:
    """A stream whose failed writes are dropped: a closed pipe or file must not
    turn an exit code into another (a failed write would otherwise escape as
    an exception, and Python exits 1, the regression code)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        try:
            self.stream.write(text)
        except (OSError, ValueError):
            pass

    def flush(self):
        try:
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _one_line(text):
    """An error message as one line, whatever a file name holds."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def main(argv=None, *, stdout=None, stderr=None):
    """Run the command line; return the exit code (0 ok, 1 regression, 2 error)."""
    # A closed stream is None: the report is then discarded, the exit code stands.
    stdout = stdout or sys.stdout or io.StringIO()
    stderr = _Tolerant(stderr or sys.stderr or io.StringIO())
    parser = build_parser()
    saved = sys.stdout, sys.stderr
    usage = io.StringIO()
    sys.stdout, sys.stderr = stdout, usage   # argparse prints --help and errors there
    try:
        args = parser.parse_intermixed_args(argv)   # QRELS RUN may sit between options
    except SystemExit as exc:
        stderr.write(usage.getvalue())
        if exc.code == EXIT_ERROR and _step_summary_asked(argv):
            _step_summary_error(_one_line(usage.getvalue().strip()
                                          .replace("rag-eval: error: ", "", 1)))
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    finally:
        sys.stdout, sys.stderr = saved
    stderr.write(usage.getvalue())
    if args.format is None:
        args.format = _format_of(args.output)
    global _PROGRESS
    _PROGRESS = _progress_for(args, stderr)
    try:
        return _run_cli(args, stdout, stderr)
    except EvalError as exc:
        stderr.write("rag-eval: error: %s\n" % _one_line(str(exc)))
        if args.step_summary:
            _step_summary_error(_one_line(str(exc)))
        return EXIT_ERROR
    except KeyboardInterrupt:
        stderr.write("rag-eval: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:    # a bug: never exit 0 (a pass) or 1 (a regression)
        if args.debug or os.environ.get("RAG_EVAL_DEBUG", "") not in ("", "0"):
            import traceback
            traceback.print_exc(file=stderr)
        detail = _one_line((str(exc).splitlines() or [""])[0][:200])
        message = ("internal error (a bug in rag_eval, please report it): %s%s; rerun with "
                   "--debug or RAG_EVAL_DEBUG=1 to see the traceback"
                   % (type(exc).__name__, ": " + detail if detail else ""))
        stderr.write("rag-eval: %s\n" % message)
        if args.step_summary:
            _step_summary_error(message)
        return EXIT_ERROR
    finally:
        if _PROGRESS is not None:
            _PROGRESS.end()
        _PROGRESS = None


def _command():
    """The ``rag-eval`` command: main(), then exit without tearing down the
    heap object by object (the process ends anyway; a large run leaves
    millions of objects, and a final collection of them costs time)."""
    gc.disable()    # for good: the process makes no cycles worth collecting
    try:
        code = main()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except BaseException:       # noqa: B036 - whatever escapes must not read as a pass or a regression
        code = EXIT_ERROR
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except OSError:
            pass    # a closed pager must not change the exit code
    os._exit(code)


# --- command line ------------------------------------------------------------------

def _add_provenance_options(parser):
    parser.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                        help="what the numbers are about, e.g. embedding.model=bge-m3 "
                        "(repeatable); written in every report and saved baseline; the gate "
                        "names the keys that changed")
    parser.add_argument("--meta-file", default=None, metavar="FILE",
                        help="meta from a JSON object (nested objects flattened with '.'); "
                        "--meta overrides its keys")
    parser.add_argument("--same", action="append", default=[], metavar="KEY",
                        help="with --baseline: refuse to gate (exit 2) when meta KEY differs "
                        "from the baseline's or is absent on one side (repeatable)")


def _meta_option(text):
    """(key, value) of one ``--meta KEY=VALUE``."""
    key, sep, value = text.partition("=")
    if not sep:
        raise EvalError("--meta %s: expected KEY=VALUE (e.g. --meta embedding.model=bge-m3)"
                        % _short_repr(text))
    key = _meta_key(key, "--meta %s" % _short_repr(text))
    return key, _meta_value(value, key, "--meta")


def _read_meta_file(args):
    """The flat meta of ``--meta-file``, refused like any input (an empty name,
    a second stdin, an output that would overwrite it)."""
    path = args.meta_file
    if path == "":
        raise EvalError("--meta-file: the file name is empty (an unset variable?)")
    if path == "-" and "-" in [args.qrels, args.run, args.baseline, args.chunks,
                               args.queries] + args.compare + args.compare_chunks:
        raise EvalError("only one input can come from stdin")
    for option, output in (("-o", args.output), ("--save-baseline", args.save_baseline)):
        if path != "-" and output not in (None, "-") and os.path.realpath(output) == \
                os.path.realpath(path):
            raise EvalError("%s %s would overwrite the --meta-file input" % (option, output))
    inp = _Input(path)
    return _flat_meta(_json_loads(inp.text(), inp.name), inp.name)


def _cli_meta(args, baseline):
    """The report's meta from --meta-file and --meta (a --meta key overrides
    the file's), and --same checked against the baseline: before any scoring."""
    if args.same and baseline is None:
        raise EvalError("--same only applies with --baseline (it refuses to gate against a "
                        "baseline whose meta KEY differs)")
    meta = _read_meta_file(args) if args.meta_file is not None else {}
    given = {}
    for text in args.meta:
        key, value = _meta_option(text)
        if key in given:
            raise EvalError("--meta %s is given twice (%s and %s)" % (key, given[key], value))
        given[key] = value
    meta = _flat_meta(dict(meta, **given), "--meta") if meta or given else {}
    if baseline is not None:
        _check_same(meta, baseline, _same_keys(args.same, "--same"))
    return meta


def _with_sweep(text, sweep, fmt):
    """The rendered report ``text`` with the sweep: a "sweep" block in the JSON,
    a last table in text (render_markdown takes it itself)."""
    if fmt == "json":
        return _dumps(dict(json.loads(text), sweep=sweep.to_dict()))
    if fmt == "html":   # the last table of the page
        page, end, rest = text.rpartition("</body>")
        return page + _html_section(*_sweep_section(sweep)) + end + rest
    return text + "\n" + _text_of([_sweep_section(sweep)], first=1)


# ===========================================================================
# src/20_accelerations.py
#
# Accelerations: every fast path, each behind a hook with a plain twin.
#
# Everything here exists only for speed.  Each acceleration has a plain twin
# in an earlier file, which defines what it computes, and replaces it through
# a one-line hook (the stdlib's ``scanstring = c_scanstring or
# py_scanstring``): the earlier file calls the hook's name, and _accelerate()
# at the end of this file binds it to the fast function.  RAG_EVAL_PLAIN=1 in
# the environment at import time keeps every plain twin; _accelerate(False)
# does the same in a running process.  A differential test pins each pair
# (AccelerationTwinsTest, tests/test_accelerations.py): seeded random inputs
# by the thousand, fast == plain, byte-identical reports.
#
#   acceleration            hook                 plain twin               pinning test *
#   _trec_run_queries_fast  _trec_run_queries    _trec_run_queries_plain  trec_run_readers,
#     (blocks split at C speed, bytes ids,       (06)                     fast_trec_reader_agrees
#     decimal score tokens)                                               _with_the_line_reader,
#                                                                         decimal_tokens_compare
#                                                                         _as_numbers
#   _labels_for_fast        _labels_for_ranking  _labels_for (09)         rankers, reports_are
#                                                                         _byte_identical
#   _trec_qrels_whole       _trec_qrels          _trec_qrels_checked      trec_qrels_fast_and
#                                                (06)                     _checked_readers_agree,
#                                                                         trec_qrels_fast_reader
#                                                                         _agrees_on_mutated_lines
#   _rank_fast (in order,   _rank                _rank_plain (09)         rankers
#     heapq top)
#   _top_chunks_fast        _top_chunks          _top_chunks_plain (09)   top_chunks
#     (ids decoded at once,
#     in order: top window)
#   _scored_run_forked      _scored_run          _scored_run_plain (11)   reports_are_byte_identical
#     (forked workers)                                                    (and ParallelTest,
#                                                                         FuzzTest)
#   _HashingInput           _input_of            _Input (05)              reports_are_byte_identical
#     (hash in a process)                                                 (sha256 in the reports)
#   _chunk_map_bulk         _chunk_map_of        _chunk_map_plain (06)    chunk_map_readers
#     (columns at C speed)
#   _jsonl_labels_bulk      _jsonl_qrels_of      _jsonl_qrels (05)        jsonl_label_readers
#     (label lines at once)
#   every one at once       RAG_EVAL_PLAIN=1                              reports_are_byte_identical
#
#   * AccelerationTwinsTest.test_<name>.
#
#   Not behind a hook (speed inside a definition, no twin): the C-speed whole-
#   query checks of JSON input (_check_run_query), the gain and discount tables
#   of the measures, the paused garbage collector (_gc_paused).
#
# A reader who wants to know what a number means never needs this file.
#
# Uses: 01_head, 03, 05, 06 (readers), 09_ranking, 11_evaluation,
# 19_command_line (the entry point).  Used by: nothing; it binds the hooks.
# ===========================================================================

# --- TREC runs, block by block ------------------------------------------------
#
# A 7M-line run is cut into blocks of whole lines, and each block is split on
# single spaces at C speed: 5 tokens a line, because the tag and the next
# line's query id stay glued by the newline ("tag\nqid").  That glued token is
# the grouping key, and it also proves the layout: when every key holds exactly
# one newline, every line has exactly six fields.  Scores go through
# map(float).  A block that is not plain single-space TREC (tabs, blank lines,
# a bad line, bytes that are not UTF-8) takes the per-line path, which names
# the line of any error.
# Lines of one query are expected to be contiguous, as every tool writes them;
# when they are not, _NotGrouped makes the caller gather whole queries instead.

def _trec_blocks(inp):
    """Yield (lines before it, block of whole lines, its line count) over an input."""
    number = 0
    for block in _whole_lines(inp.blocks()):
        lines = block.count(b"\n")
        if not block.isspace():
            yield number, block, lines
        number += lines


def _block_segments(block, name, number, lines, opening=None):
    """[(qid, docs, scores)] for each run of one query's ``lines`` lines in a
    block (none when it holds only comments).  ``opening``: no run line came
    before this block (default: the block starts the file)."""
    if _has_comments(block) or not _is_utf8(block):
        return _block_segments_checked(block, name, number, opening)
    first_end = block.find(b"\n")
    tag = block[block.rfind(b" ", 0, first_end) + 1:first_end]
    tokens = (tag + b"\n" + block).split(b" ")
    last = tokens[-1]      # the last line's tag and newline
    if len(tokens) == 5 * lines + 1 and last.count(b"\n") == 1 and last not in (b"\n", b"\r\n"):
        if _plain_spaces(block):
            segments = _keyed_segments(tokens[0:5 * lines:5], tokens[2::5], tokens[4::5])
            if segments is not None:
                return segments
    return _block_segments_checked(block, name, number, opening)


def _is_utf8(block):
    """True when a block is UTF-8 text: its ids then are (see _id_text); any
    other block takes the per-line path, which names the line of a bad id."""
    if block.isascii():
        return True
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_TWO_SPACES = re.compile(rb"  ")    # the regex engine finds it faster than bytes.find


def _plain_spaces(block):
    """True when fields are separated by single spaces (lines ending in \\n or
    \\r\\n), so splitting on spaces finds what str.split() finds: no empty field
    between two spaces (a space at either end of a line shows in the glued keys)."""
    if b"\t" in block or b"\x0b" in block or b"\x0c" in block or _TWO_SPACES.search(block):
        return False
    return b"\r" not in block or block.count(b"\r") == block.count(b"\r\n")


def _keyed_segments(keys, docs, raw_scores):
    """Segments from the glued "tag\\nqid" keys, or None when the block is irregular."""
    segments = []
    decimal = _decimal_tokens(raw_scores)   # one check for the block, usually enough
    for start, end in _runs_of_equal(keys):
        key = keys[start]
        # "tag\nqid": an empty tag (or only the CR of a CRLF) or qid is a missing field
        if (key.count(b"\n") != 1 or key.startswith((b"\n", b"\r\n")) or key[-1:] == b"\n"
                or keys[start:end].count(key) != end - start):
            return None
        scores = raw_scores[start:end]
        if not decimal:
            scores = _checked_scores(scores)
            if scores is None:
                return None
        segments.append((key[key.index(b"\n") + 1:], docs[start:end], scores))
    return segments


_DIGITS = b"0123456789"


def _decimal_tokens(raw):
    """True when score tokens compare as numbers byte by byte: one width, at most
    15 digits, the point in one column (or none).  With at most 15 digits,
    distinct tokens are distinct doubles, so bytes order is numeric order; such
    tokens need no float() until they reach a query's top ids.

    >>> _decimal_tokens([b"21.5", b"09.0"]), _decimal_tokens([b"9.5", b"10.0"])
    (True, False)
    >>> _decimal_tokens([b"9007199254740993"]), _decimal_tokens([b"900719925474099"])
    (False, True)
    """
    width = len(raw[0])
    point = raw[0].find(b".")
    if not 0 < width - (point >= 0) <= 15:
        return False
    # Tokens hold no space: when the spaces of the joined text fall every
    # width + 1 bytes, every token is ``width`` bytes long.
    n, joined = len(raw), b" ".join(raw)
    spaces = b" " * (n - 1)
    if len(joined) != n * (width + 1) - 1 or joined[width::width + 1] != spaces:
        return False
    if point < 0:
        return joined.translate(None, _DIGITS) == spaces
    return (joined.translate(None, _DIGITS) == b". " * (n - 1) + b"."
            and joined[point::width + 1] == b"." * n)


def _checked_scores(raw):
    """Score tokens as they are when _decimal_tokens, else floats; None when one
    is not a finite number (the per-line path then names its line)."""
    if _decimal_tokens(raw):
        return raw
    if any(b"_" in token for token in raw):
        return None
    try:
        scores = list(map(float, raw))
    except ValueError:
        return None
    return scores if math.isfinite(sum(scores)) else None


def _joined(parts):
    """_Scored of one query from its (docs, scores) segments in file order; the
    scores stay decimal tokens when every segment has one layout, else floats."""
    if len(parts) == 1:
        return _Scored(*parts[0])
    docs = list(itertools.chain.from_iterable(docs for docs, _ in parts))
    layouts = {(len(scores[0]), scores[0].find(b".")) if type(scores[0]) is bytes else None
               for _, scores in parts}
    if len(layouts) == 1 and None not in layouts:
        return _Scored(docs, list(itertools.chain.from_iterable(s for _, s in parts)))
    return _Scored(docs, [float(x) for _, scores in parts for x in scores])


def _block_segments_checked(block, name, number, opening=None):
    segments = []
    for offset, line in enumerate(block.split(b"\n")[:-1], 1):
        if not line.strip() or _is_comment(line):
            continue
        try:
            qid, doc, score = _parse_run_line(line, "%s:%d" % (name, number + offset))
        except EvalError as exc:
            first = (number == 0 if opening is None else opening) and not segments
            raise (_first_line_error(exc, line, "run") if first else exc) from None
        if segments and segments[-1][0] == qid:
            segments[-1][1].append(doc)
            segments[-1][2].append(score)
        else:
            segments.append((qid, [doc], [score]))
    return segments


def _runs_of_equal(items):
    """Yield (start, end) of the runs of equal items, assuming equal items are
    contiguous: try the previous run's length (queries are often equally
    deep), else gallop and bisect; a few comparisons a run.  Callers check the
    assumption (see _keyed_segments).

    >>> list(_runs_of_equal([b"a", b"a", b"b", b"c", b"c", b"c"]))
    [(0, 2), (2, 3), (3, 6)]
    """
    n, start, length = len(items), 0, 0
    while start < n:
        first = items[start]
        guess = start + length
        if start < guess < n and items[guess - 1] == first and items[guess] != first:
            yield start, guess
            start = guess
            continue
        low, high, step = start, start + 1, 1
        while high < n and items[high] == first:
            low, step = high, step * 2
            high = min(n, start + step)
        while high - low > 1:
            middle = (low + high) // 2
            if items[middle] == first:
                low = middle
            else:
                high = middle
        yield start, high
        start, length = high, high - start


def _trec_run_queries_fast(inp, grouped=True):
    """_trec_run_queries_plain, block by block.

    With ``grouped``, each query's lines must be contiguous (memory: one query;
    raises _NotGrouped otherwise); without, every query is gathered first.
    """
    if not grouped:
        yield from _gathered_queries(inp)
        return
    finished, current, parts = set(), None, []
    for number, block, lines in _trec_blocks(inp):
        segments = _block_segments(block, inp.name, number, lines, current is None)
        if not segments:
            continue
        if len({qid for qid, _, _ in segments}) < len(segments):
            segments = _merge_neighbours(segments)
        if segments[0][0] == current:       # the previous block's last query goes on
            parts.append(segments[0][1:])
            del segments[0]
            if not segments:
                continue
        if current is not None:
            yield _decode_qid(current), _joined(parts)
        known = len(finished)
        finished.update([qid for qid, _, _ in segments])
        if len(finished) != known + len(segments):
            raise _NotGrouped()             # a query met before, or twice in this block
        for qid, docs, scores in segments[:-1]:
            yield _decode_qid(qid), _Scored(docs, scores)
        current, parts = segments[-1][0], [segments[-1][1:]]
    if current is None:
        raise EvalError("%s: no run lines found" % inp.name)
    yield _decode_qid(current), _joined(parts)


def _merge_neighbours(segments):
    """Segments with neighbours of one query joined: the fast reader keys
    lines by the previous line's tag and the query id, so a change of run
    tag cuts a query in two."""
    merged = []
    for qid, docs, scores in segments:
        if merged and merged[-1][0] == qid:
            merged[-1][1].append((docs, scores))
        else:
            merged.append((qid, [(docs, scores)]))
    return [(qid, *_joined(parts)) for qid, parts in merged]


def _gathered_queries(inp):
    """(qid, _Scored) of a TREC run whose queries are scattered: all in memory."""
    gathered = {}
    for number, block, lines in _trec_blocks(inp):
        for qid, docs, scores in _block_segments(block, inp.name, number, lines,
                                                 not gathered):
            gathered.setdefault(qid, []).append((docs, scores))
    if not gathered:
        raise EvalError("%s: no run lines found" % inp.name)
    for qid, parts in gathered.items():
        yield _decode_qid(qid), _joined(parts)


def _bytes_labels(labels):
    """The labels keyed by UTF-8 bytes, like the ids of a TREC run."""
    return dict(zip(map(str.encode, labels), labels.values()))


def _labels_for_fast(ranking, labels):
    """_labels_for, keyed by bytes for the _Scored this reader yields."""
    if type(ranking) is _Scored and ranking.docs and type(ranking.docs[0]) is bytes:
        return _bytes_labels(labels)
    return labels


# --- TREC qrels, whole ---------------------------------------------------------

def _trec_qrels_whole(inp):
    """_trec_qrels_checked, split on spaces at C speed when the file is plain."""
    qrels = _trec_qrels_fast(b"".join(inp.blocks()))
    return qrels if qrels is not None else _trec_qrels_checked(inp)


_SMALL_GRADES = {str(g): g for g in range(-9, 10)}


def _trec_qrels_fast(data):
    """The qrels of plain single-space TREC, or None for anything else (then
    the per-line reader takes over and names any bad line).  Split on single
    spaces, a line's grade and the next line's query id stay glued by the
    newline; one newline in every glued token proves four fields a line, and
    joining the glued tokens and splitting on newlines yields both columns.
    Whatever it returns, _trec_qrels_checked returns too (a differential test
    pins it): other white space, such as a tab next to a space, goes there."""
    if not _plain_spaces(data) or _has_comments(data):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.endswith("\n"):
        text += "\n"
    lines = text.count("\n")
    tokens = ("\n" + text).split(" ")
    glued = tokens[0::3]
    if len(tokens) != 3 * lines + 1 or not all(map(operator.contains, glued,
                                                   itertools.repeat("\n"))):
        return None
    columns = "\n".join(glued).split("\n")       # "", qid, grade, qid, grade, ..., ""
    if len(columns) != 2 * lines + 2 or "" in columns[1:-1:2] or "" in tokens[2::3]:
        return None     # a line that starts with a space has an empty query id
    grades = list(map(_SMALL_GRADES.get, columns[2:-1:2]))     # most grades are 0..3
    if None in grades:
        grades = columns[2:-1:2]
        joined = "".join(grades)
        if "_" in joined or not joined.isascii():
            return None     # int() reads 1_0 as 10 and "\u0662" as 2; the per-line reader refuses
        try:
            grades = list(map(int, grades))
        except ValueError:
            return None
    out = {}
    for qid, doc, grade in zip(columns[1:-1:2], tokens[2::3], grades):
        judged = out.get(qid)
        if judged is None:
            out[qid] = judged = {}
        if judged.setdefault(doc, grade) != grade:
            return None
    return out or None


def _has_comments(data):
    """True when some line of ``data`` (bytes) is a comment.  One byte is
    looked for first: memchr finds it several times faster than a two-byte
    pattern, and most runs hold no "#" at all."""
    return b"#" in data and (data[:1] == b"#" or b"\n#" in data)


# --- Ranking without sorting -----------------------------------------------------

def _top_chunks_fast(ranking, depth):
    """_top_chunks_plain for a _Scored: the fast reader's bytes ids decoded in
    one call (no id holds a newline), and scores already in descending order
    (the usual file) sort only the window of the top, to the end of its tied
    group, when no id repeats there; only the window's scores go through
    float(), and a ranking whose ids are all distinct takes its top as it is.
    Anything else takes the plain path.

    >>> ranking, top, scores, read, distinct = _top_chunks_fast(
    ...     _Scored([b"a", b"b", b"c"], [b"2", b"2", b"1"]), 1)
    >>> ranking, top, scores, read, sorted(distinct)
    (_Scored(docs=['a', 'b', 'c'], scores=[b'2', b'2', b'1']), ['b', 'a'], [2.0, 2.0], 1, ['a', 'b', 'c'])
    """
    if type(ranking) is not _Scored or not ranking.docs:
        return _top_chunks_plain(ranking, depth)
    docs = ranking.docs
    if isinstance(docs[0], bytes):
        text = b"\n".join(docs).decode("utf-8").split("\n")    # (UTF-8: see _id_text)
        if len(text) != len(docs):
            return _top_chunks_plain(ranking, depth)
        docs = text
        ranking = _Scored(docs, ranking.scores)
    raw = ranking.scores        # decimal tokens compare as their numbers (see _decimal_tokens)
    n = len(raw)
    if not all(map(operator.ge, raw, itertools.islice(raw, 1, None))):
        return _top_chunks_plain(ranking, depth)
    end = min(depth + 1, n)     # the window: to the end of the tied group at depth + 1
    while end < n and raw[end] == raw[end - 1]:
        end += 1
    scores = list(map(float, raw[:end]))
    distinct = set(docs)
    if len(set(scores)) < end:  # a tie: the tie rule orders its group
        window = sorted(zip(docs[:end], scores),
                        key=lambda entry: (entry[1], _id_order(entry[0])), reverse=True)
    elif len(distinct) == n:    # no tie, no repeat: the window is the top, as it is
        return ranking, docs[:depth + 1], scores[:depth + 1], min(depth, n), distinct
    else:
        window = list(zip(docs[:end], scores))
    top, top_scores, read = _first_distinct(window, depth)
    if len(top) <= depth and end < n:   # a repeat: the top reaches past the window
        return _top_chunks_plain(ranking, depth)
    return ranking, top, top_scores, read, distinct


class _Top(NamedTuple):
    docs: list         # the first K distinct ids, best first
    duplicates: int    # repeated ids seen while ranking
    straddling: int    # tied score groups that cross a cutoff
    returned: int      # distinct ids in the ranking (exact when asked for)


def _rank_fast(ranking, labels, depth, cutoffs, exact_returned):
    """_rank_plain without sorting: scores already in descending order (the
    usual file) place only the labelled ids (_rank_in_order), others take a
    partial sort of the top (heapq.nlargest over (score, id) pairs: the tie
    rule again).  Ids may be bytes and scores decimal byte tokens (the fast
    TREC reader's); ``returned`` is exact only when asked for.

    >>> _rank_fast({"a": 1.0, "b": 1.0, "c": 0.5}, {"a": 1, "c": 0}, 2, (1, 2), False)
    _Ranked(labelled=[(2, 1)], length=2, duplicates=0, straddling=1, returned=3)
    """
    if ranking is None:
        return _Ranked([], 0)
    if isinstance(ranking, dict):
        ranking = _Scored(list(ranking), list(map(float, ranking.values())))
    if type(ranking) is _Scored:
        ranked = _rank_in_order(*ranking, labels, depth, cutoffs, exact_returned)
        if ranked is not None:
            return ranked
    top = _top(ranking, depth, cutoffs, exact_returned)
    return _Ranked(_labelled(map(labels.get, top.docs)), len(top.docs), top.duplicates,
                   top.straddling, top.returned)


def _rank_in_order(docs, scores, labels, depth, cutoffs, exact_returned):
    """_rank for scores already in descending order with no id repeated near
    the top (the common case), else None.  Only labelled ids are placed: a
    tie reorders its group by doc id, which moves such an id within the group.

    >>> _rank_in_order(["a", "b", "c"], [3.0, 2.0, 2.0], {"b": 1, "c": 2}, 2, (1, 2), False)
    _Ranked(labelled=[(2, 2)], length=2, duplicates=0, straddling=1, returned=3)
    """
    n = len(scores)
    # Non-increasing exactly when a stable descending sort moves nothing (scores
    # are finite, or decimal tokens of one layout: a total order); the sort's
    # run detection compares at C speed, faster than a map over the pairs.  The
    # first pairs are looked at first: a shuffled ranking fails there, unsorted.
    if (not all(map(operator.ge, scores[:8], itertools.islice(scores, 1, 9)))
            or sorted(scores, reverse=True) != scores):
        return None
    end = min(depth + 1, n)   # one past the deepest cutoff shows a tie that straddles it
    while end < n and scores[end] == scores[end - 1]:
        end += 1
    window = docs[:end]
    distinct = set(window)
    if len(distinct) < end:
        return None
    labelled = []
    for doc in distinct.intersection(labels):
        grade = labels[doc]
        if grade >= 0:
            i = window.index(doc)
            score = scores[i]
            if (i and scores[i - 1] == score) or (i + 1 < end and scores[i + 1] == score):
                rank = _rank_among_ties(window, scores, i)
            else:
                rank = i + 1
            if rank <= depth:
                labelled.append((rank, grade))
    if len(labelled) > 1:
        labelled.sort()
    return _Ranked(labelled, min(depth, n), 0, _straddling(scores, cutoffs, end),
                   len(set(docs)) if exact_returned else n)


def _rank_among_ties(window, scores, i):
    """The rank of window[i] once each group of equal scores is put in doc id
    descending order (trec_eval's tie rule; ids compare as _id_order says, by
    themselves); the window ends with a whole group.

    >>> [_rank_among_ties(["a", "b", "c", "d"], [3.0, 2.0, 2.0, 1.0], i) for i in range(4)]
    [1, 3, 2, 4]
    """
    score = scores[i]
    low, high = i, i + 1
    while low and scores[low - 1] == score:
        low -= 1
    while high < len(window) and scores[high] == score:
        high += 1
    if high - low == 1:
        return i + 1
    doc = window[i]
    return low + 1 + sum(1 for other in window[low:high] if other > doc)


def _top(ranking, depth, cutoffs, exact_returned=False):
    """The first ``depth`` distinct ids of one query, best first: the general
    case (unsorted scores, repeated ids).

    A ranked list keeps its order; each id counts at its first position.  Scores
    order by score descending, then doc id descending (trec_eval's rule); an id
    given twice keeps its best score.  Tied groups that straddle a cutoff are counted.

    >>> _top(_Scored(["a", "b", "c"], [1.0, 0.5, 1.0]), 2, (1, 2))
    _Top(docs=['c', 'a'], duplicates=0, straddling=1, returned=3)
    >>> _top(["x", "x", "y"], 5, (5,), exact_returned=True)
    _Top(docs=['x', 'y'], duplicates=1, straddling=0, returned=2)
    """
    if isinstance(ranking, list):
        return _top_of_list(ranking, depth, exact_returned)
    return _top_of_scores(ranking.docs, ranking.scores, depth, cutoffs, exact_returned)


def _top_of_list(ranking, depth, exact_returned):
    top = ranking[:depth]
    if len(set(top)) == len(top):       # no repeat (the common case)
        return _Top(top, 0, 0, len(set(ranking)) if exact_returned else len(ranking))
    seen, top = set(), []
    read = 0
    for read, doc in enumerate(ranking, 1):
        if doc not in seen:
            seen.add(doc)
            top.append(doc)
            if len(top) == depth:
                break
    # Repeats are counted among the ids read to fill the top: deeper ones change no number.
    duplicates = read - len(top)
    returned = len(set(ranking)) if exact_returned else len(ranking) - duplicates
    return _Top(top, duplicates, 0, returned)


def _top_of_scores(docs, scores, depth, cutoffs, exact_returned):
    want = depth + 1   # one past the deepest cutoff shows a tie that straddles it
    n = len(scores)
    window = heapq.nlargest(want, zip(map(float, scores), docs))
    repeats = duplicates = 0
    if len(set(map(_second, window))) < len(window):
        best = {}
        for score, doc in zip(map(float, scores), docs):
            if doc not in best or score > best[doc]:
                best[doc] = score
        repeats = n - len(best)
        # at most depth + repeats entries, in rank order, fill the top
        ranked = heapq.nlargest(depth + repeats, zip(map(float, scores), docs))
        duplicates = _repeats_read(map(_second, ranked), depth)
        window = heapq.nlargest(want, zip(best.values(), best.keys()))
    returned = len(set(docs)) if exact_returned else n - repeats
    window_scores = [score for score, _ in window]
    return _Top(list(map(_second, window[:depth])), duplicates,
                _straddling(window_scores, cutoffs, len(window_scores)), returned)


def _repeats_read(ranked_ids, depth):
    """How many repeated ids are read, in rank order, until ``depth`` distinct
    ones fill the top: a repeat below the deepest cutoff changes no number, so
    it is not counted (the rule _top_of_list follows too).

    >>> _repeats_read(["a", "b", "a"], 2), _repeats_read(["a", "a", "b"], 2)
    (0, 1)
    """
    seen, read = set(), 0
    for read, doc in enumerate(ranked_ids, 1):
        seen.add(doc)
        if len(seen) == depth:
            break
    return read - len(seen)


_first = operator.itemgetter(0)
_second = operator.itemgetter(1)


# --- The common measures of one query, in one pass ----------------------------
#
# recall, success, mrr and ndcg read the same labelled top (best first), and
# most runs ask for them at two or three cutoffs.  One pass collects, per
# relevance threshold, the ranks of the relevant ids and, per gain, the running
# DCG; each measure is then a bisection and a division.  The values are the
# definitions' exactly: the same integers divided, the same DCG terms added in
# the same order.  Any other measure takes the plain twin's function; so does
# a query that meets an error or a DCG that overflows: it names them.

_ONE_PASS = {recall: "recall", success: "success", mrr: "mrr", ndcg: "ndcg"}


class _Overflow(Exception):
    """A running DCG reached inf (the plain twin says where)."""


def _measure_values_one_pass(calls):
    """_measure_values_plain's function, made of one pass over the labelled
    top when every call is one of _ONE_PASS (else the plain twin's).

    >>> calls = [("mrr@3", mrr, (3, 1)), ("ndcg@2", ndcg, (2, "linear"))]
    >>> ranked, grades = _from_grades([0, 2, -1]), (2, 1, 0)
    >>> values = _measure_values_one_pass(calls)(ranked, grades)
    >>> values == _measure_values_plain(calls)(ranked, grades)
    True
    >>> round(values["ndcg@2"], 4)     # (2 / log2(3)) / (2 + 1 / log2(3))
    0.4796
    """
    plain = _measure_values_plain(calls)
    if not calls or any(func not in _ONE_PASS for _, func, _ in calls):
        return plain
    names = [name for name, _, _ in calls]
    plan = {kind: [(name,) + tuple(args) for name, func, args in calls if _ONE_PASS[func] == kind]
            for kind in _ONE_PASS.values()}
    thresholds = list({rel for kind in ("recall", "success", "mrr") for _, _, rel in plan[kind]})
    gains = list({gain for _, _, gain in plan["ndcg"]})

    def values(ranked, grades):
        try:
            return one_pass(ranked.labelled, tuple(grades))
        except (EvalError, _Overflow):
            return plain(ranked, grades)    # the definitions name the grade, in their order

    def one_pass(labelled, grades):
        ranks = [rank for rank, _ in labelled]
        hits = {rel: [rank for rank, grade in labelled if grade >= rel] for rel in thresholds}
        out = dict.fromkeys(names)     # the calls' order, as the plain twin's
        for name, k, rel in plan["recall"]:
            relevant = _count_relevant(grades, rel)
            out[name] = bisect.bisect_right(hits[rel], k) / relevant if relevant else 0.0
        for name, k, rel in plan["success"]:
            out[name] = 1.0 if hits[rel] and hits[rel][0] <= k else 0.0
        for name, k, rel in plan["mrr"]:
            out[name] = 1.0 / hits[rel][0] if hits[rel] and hits[rel][0] <= k else 0.0
        discounts = _discounts(ranks[-1]) if ranks else _DISCOUNTS
        for gain in gains:      # the running sum, added in rank order as _dcg adds
            table, total, running = _GAIN_TABLES[gain], 0.0, []
            for rank, grade in labelled:
                total += table[grade] * discounts[rank]
                running.append(total)
            if total == math.inf:
                raise _Overflow()
            for name, k, its_gain in plan["ndcg"]:
                if its_gain == gain:
                    ideal = _ideal_dcg(grades, k, gain)
                    found = bisect.bisect_right(ranks, k)
                    out[name] = running[found - 1] / ideal if ideal and found else 0.0
        return out
    return values


# --- Runs on several cores ---------------------------------------------------
#
# A large plain run file is cut into one byte range per core: at line starts
# for TREC and JSONL, between top-level members for JSON.  Each worker (a
# forked process) reads, ranks and scores the queries of its range and hands
# back only their values.  In TREC the first and last query of a range may
# continue next door, so they come back raw and are joined here.  This process
# takes the first range, then starts another process hashing the whole file
# while it collects and merges the workers' results.  Any surprise in a worker
# (a bad line, a query seen twice) sends the caller back to the sequential
# path, which reports it exactly.

_PARALLEL_MIN_BYTES = 16 << 20
_MEMBER_GAP = re.compile(rb'[\]}][ \t\r\n]*(,)[ \t\r\n]*"')


class _Retry(Exception):
    """A worker met something the sequential path must handle."""


class _RangeInput(_Input):
    """Bytes [start, end) of a plain file, read like any input (not hashed)."""

    def __init__(self, path, name, start, end):
        super().__init__(path)
        self.name, self.start, self.end = name, start, end

    def blocks(self):
        with open(self.source, "rb") as handle:
            handle.seek(self.start)
            left = self.end - self.start
            while left > 0:
                block = handle.read(min(_BLOCK_SIZE, left))
                if not block:
                    return
                left -= len(block)
                if _PROGRESS is not None:
                    _PROGRESS.read_bytes(len(block))
                yield block

    def text(self):
        with open(self.source, "rb") as handle:     # one read: no joining copy
            handle.seek(self.start)
            return _decode(handle.read(self.end - self.start), self.name)


def _targets(size, parts):
    """Where to cut ``size`` bytes into ``parts`` equal ranges.

    >>> _targets(1000, 2)
    [500, 1000]
    """
    return [size * i // parts for i in range(1, parts + 1)]


def _line_ranges(path, parts):
    """(start, end) byte ranges cutting a file into ``parts`` at line starts."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        cuts = [3 if handle.read(3) == b"\xef\xbb\xbf" else 0]
        for target in _targets(size, parts)[:-1]:
            handle.seek(max(target, cuts[-1]))
            handle.readline()
            cuts.append(max(handle.tell(), cuts[-1]))
    cuts.append(size)
    return list(zip(cuts, cuts[1:]))


def _member_ranges(path, parts):
    """(start, end) byte ranges of a JSON object's top-level members: from after
    the first "{" to the last "}", cut at the commas between a "]" or "}" and
    the next key (the commas themselves are in no range).  A cut inside a
    string leaves an unterminated string, which the worker's parse rejects
    (then the sequential path runs)."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        head = handle.read(4096)
        handle.seek(max(0, size - 4096))
        tail = handle.read()
        first = len(head) - len(head.lstrip())
        last = size - (len(tail) - len(tail.rstrip())) - 1
        if head[first:first + 1] != b"{" or tail.rstrip()[-1:] != b"}":
            return []
        ranges = [[first + 1, last]]
        for target in _targets(size, parts)[:-1]:
            start = max(target, ranges[-1][0])
            handle.seek(start)
            gap = _MEMBER_GAP.search(handle.read(1 << 20))
            if gap and start + gap.start(1) < last:
                ranges[-1][1] = start + gap.start(1)
                ranges.append([start + gap.start(1) + 1, last])
    return [tuple(r) for r in ranges]


def _json_members(inp):
    """(qid, ranking) from a range of top-level JSON members."""
    data = _json_loads("{%s}" % inp.text(), inp.name)
    for qid, value in data.items():
        yield qid, _check_run_query(qid, value, inp.name, inp.rising, inp.fields)


_FORKED_SCORER = None   # the _QueryScorer that forked workers inherit (no pickling)


def _score_range(fmt, path, name, start, end, fields=None):
    """Worker: [(qid, scored tuple | _Scored)] for one byte range of a run
    read with ``fields``, and the queries of the range whose scores rise (see
    _mapped_ranking)."""
    scorer = _FORKED_SCORER
    inp = _RangeInput(path, name, start, end)
    inp.fields = fields
    out = []
    try:
        if fmt != "trec":
            queries = _json_members(inp) if fmt == "json" else _jsonl_run(inp)
            return [(qid, scorer(qid, ranking)) for qid, ranking in queries], inp.rising
        for qid, scored in _trec_run_queries(inp):
            if len(out) > 1:    # the first and last stay raw: they may continue next door
                out[-1] = (out[-1][0], scorer(*out[-1]))
            out.append((qid, scored))
    except (EvalError, _NotGrouped):
        raise _Retry() from None
    return out, []


def _single_threaded():
    """True when forking is safe: no other Python thread (a notebook kernel has
    several, and a lock one of them holds would stay held in the child)."""
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def _fork_map(func, tasks, then):
    """[func(*task) for task in tasks], every task but the first in a forked
    child, the first here, followed by ``then()`` (here: starting to hash the
    file in another child) while the children finish.  A child that dies, or
    cannot be started, makes the caller retry sequentially."""
    children = []       # [pid, reader fd], the fd set to None once read
    try:
        for task in tasks[1:]:
            children.append(list(_start_child(func, task, [fd for _, fd in children])))
        results = [func(*tasks[0])]
        then()
        for child in children:
            reader, child[1] = child[1], None
            results.append(_collect(reader))
        return results
    finally:
        for pid, reader in children:
            if reader is not None:
                os.close(reader)    # a child still writing gets EPIPE and exits
        _reap([pid for pid, _ in children])


def _start_child(func, args, inherited=()):
    """(pid, reader fd): func(*args) running in a forked child, which sends
    its result or exception, pickled, through the pipe (see _collect).  The
    child closes the ``inherited`` descriptors.  _Retry when no child can start
    (out of descriptors or processes)."""
    reader = writer = None
    try:
        reader, writer = os.pipe()
        pid = os.fork()
    except OSError:
        for fd in (reader, writer):
            if fd is not None:
                os.close(fd)
        raise _Retry() from None
    if pid == 0:
        _run_child(func, args, writer, [reader, *inherited])
    os.close(writer)
    return pid, reader


def _collect(reader):
    """What a child started by _start_child sent: its result, or its exception
    raised here; _Retry when it died without a word.  Closes the descriptor."""
    import pickle
    with os.fdopen(reader, "rb") as pipe:
        try:
            ok, value = pickle.load(pipe)
        except Exception:
            raise _Retry() from None
    if not ok:
        raise value
    return value


_EXITING = set()        # forked children not yet collected
_REAP_AT_EXIT = False


def _reap(pids):
    """Collect children that have exited; the others (a large one takes a few
    milliseconds to exit) are collected on a later call, or when we exit."""
    global _REAP_AT_EXIT
    _EXITING.update(pids)
    for pid in list(_EXITING):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        except ChildProcessError:
            pass
        _EXITING.discard(pid)
    if _EXITING and not _REAP_AT_EXIT:
        import atexit
        atexit.register(_reap_all)
        _REAP_AT_EXIT = True


def _reap_all():
    for pid in sorted(_EXITING):
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    _EXITING.clear()


def _run_child(func, task, writer, inherited):
    """In a forked child: run the task, send its outcome, and exit whatever happens."""
    import pickle
    global _PROGRESS
    _PROGRESS = None        # only the parent draws the line
    try:
        for fd in inherited:
            os.close(fd)
        try:
            outcome = (True, func(*task))
        except BaseException as exc:                       # handed to the parent
            outcome = (False, exc)
        with os.fdopen(writer, "wb") as pipe:
            pickle.dump(outcome, pipe, pickle.HIGHEST_PROTOCOL)
    finally:
        os._exit(0)


def _parallel_ok(inp, fmt):
    if not (_is_regular_file(inp.source) and (os.cpu_count() or 1) > 1 and hasattr(os, "fork")
            and _single_threaded() and os.path.getsize(inp.source) >= _PARALLEL_MIN_BYTES):
        return False
    with open(inp.source, "rb") as handle:
        return handle.read(2) != b"\x1f\x8b"


def _scored_run_forked(inp, fmt, scorer, grouped=True):
    """_scored_run_plain on every core when it pays (a large plain file, fork
    safe); any surprise in a worker falls back to it."""
    # A run that maps its own chunks builds one map over all queries: not split.
    if grouped and scorer.forkable and _parallel_ok(inp, fmt):
        try:
            return _parallel_queries(inp, fmt, scorer)
        except _Retry:
            pass
    return _scored_run_plain(inp, fmt, scorer, grouped)


def _parallel_queries(inp, fmt, scorer):
    """(qid, scored tuple or None) like _scored_run_plain, scored on every core."""
    global _FORKED_SCORER
    workers = min(os.cpu_count() or 1, 8)
    ranges = (_member_ranges if fmt == "json" else _line_ranges)(inp.source, workers)
    tasks = [(fmt, inp.source, inp.name, lo, hi, inp.fields) for lo, hi in ranges if hi > lo]
    if len(tasks) < 2:
        raise _Retry()
    _FORKED_SCORER = scorer
    if _PROGRESS is not None:
        _PROGRESS.begin(inp.name, _PROGRESS.size, here=tasks[0][4] - tasks[0][3])
    try:
        parts = _fork_map(_score_range, tasks, then=inp.hash_in_background)
    finally:
        _FORKED_SCORER = None
    queries, rising = [], []
    for part, part_rising in parts:  # a query cut by a range end comes back raw from both sides
        rising.extend(part_rising)
        if (queries and part and queries[-1][0] == part[0][0]
                and type(queries[-1][1]) is _Scored and type(part[0][1]) is _Scored):
            queries[-1] = (part[0][0], _joined([queries[-1][1], part[0][1]]))
            queries.extend(itertools.islice(part, 1, None))
        else:
            queries.extend(part)
    if not queries:
        raise _Retry()
    if len(set(map(_first, queries))) < len(queries):      # a query in two places
        raise _NotGrouped() if fmt == "trec" else _Retry()
    inp.rising = rising
    return _merged(scorer, queries)


def _merged(scorer, queries):
    """What _scored_run_plain yields, from the workers' results."""
    qrels = scorer.qrels
    for qid, result in queries:
        if qid not in qrels:
            yield qid, None
        elif type(result) is tuple:     # scored by a worker
            yield qid, result
        else:                           # a query joined across a range end
            yield qid, scorer(qid, result)


class _HashingInput(_Input):
    """An _Input whose regular file can be hashed by a forked process while
    this one goes on (see _parallel_queries): info() waits for that hash."""

    _hashing = None     # (pid, pipe) of a process hashing the file
    _sha256 = None

    def info(self, fmt):
        self._wait_for_hash()
        info = super().info(fmt)
        if self._sha256:
            info["sha256"] = self._sha256
        return info

    def blocks(self):
        self._wait_for_hash()
        self._sha256 = None
        yield from super().blocks()

    def hash_in_background(self):
        """Hash a regular file in a forked process while this one goes on (it
        has the sha256 ready when info() asks); hash here if no process starts."""
        self._wait_for_hash()
        try:
            self._hashing = _start_child(_sha256_of_file, (self.source, self.name))
        except _Retry:
            all(True for _ in self.blocks())

    def stop_hashing(self):
        """Forget a hash still being computed (an error came first)."""
        if self._hashing is not None:
            pid, reader = self._hashing
            self._hashing = None
            os.close(reader)        # the hashing process's write fails; it exits anyway
            _reap([pid])

    def _wait_for_hash(self):
        if self._hashing is not None:
            pid, reader = self._hashing
            self._hashing = None
            try:
                self._sha256 = _collect(reader)
            except _Retry:                  # the hashing process died: hash here
                all(True for _ in self.blocks())
            finally:
                _reap([pid])


# --- chunk maps, column by column ---------------------------------------------------
#
# A million-line chunk map: one json.loads of the lines joined into an array,
# then each column checked at C speed (types, offsets, repeated ids); any
# doubt (a blank line, a null, a doc_sha256, a repeated id) takes the plain
# path, which names the line of an error.

def _chunk_map_bulk(text, name):
    if not text or "\r" in text:
        return _chunk_map_plain(text, name)
    # A comma before every line break but a final one (no copy stripped
    # first): a blank line leaves two commas in a row, and a line break
    # inside a string (no JSON line holds one) stays there: both fail the parse.
    lines = text.count("\n") + (not text.endswith("\n"))
    joined = "[%s]" % text.replace("\n", ",\n", lines - 1)
    try:
        records = json.loads(joined, parse_constant=_reject_constant)
        # A line holding two objects joined by a comma parses as two records.
        chunks = _bulk_checked(records, joined) if len(records) == lines else None
    except (ValueError, TypeError, KeyError, EvalError, RecursionError):
        chunks = None
    return _chunk_map_plain(text, name) if chunks is None else chunks


def _bulk_checked(records, joined):
    """The _ChunkMap of well-formed records, or None."""
    keys = sum(map(len, records))
    if (not records or set(map(type, records)) != {dict} or keys != _key_bound(joined)
            or _SURROGATE_ESCAPE.search(joined)):
        return None
    ids = list(map(operator.itemgetter("id"), records))
    docs = list(map(operator.itemgetter("doc"), records))
    # One fresh string per document, made in a row: the chunks share it, and a
    # forked worker reading chunk.doc (a reference count written) copies the
    # few pages these lie on, not a page per chunk read (64,000 -> 28,000 page
    # faults a worker, unit=doc on the 1M-chunk bench map).
    if set(map(type, ids)) != {str} or set(map(type, docs)) != {str}:
        return None     # (integer ids and documents: the plain path reads them)
    names = {doc: doc.encode().decode() for doc in dict.fromkeys(docs)}
    docs = list(map(names.__getitem__, docs))
    starts = list(map(operator.itemgetter("start"), records))   # (a KeyError: the plain path)
    ends = list(map(operator.itemgetter("end"), records))
    tokens = [r.get("tokens") for r in records]
    if (set(map(type, starts)) != {int} or set(map(type, ends)) != {int}
            or min(starts) < 0 or not all(map(operator.lt, starts, ends))):
        return None
    kinds = set(map(type, tokens))
    if kinds == {int}:
        if min(tokens) < 0:
            return None
    elif kinds != {type(None)}:
        return None
    # A doc_sha256 takes the plain path (it checks each document's versions);
    # when the keys are only id, doc, start, end (and tokens) there is none.
    if keys != len(records) * (4 + (kinds == {int})) and any("doc_sha256" in r for r in records):
        return None
    make = functools.partial(tuple.__new__, Chunk)
    chunks = _ChunkMap(zip(ids, map(make, zip(docs, starts, ends, tokens,
                                              itertools.repeat(None)))))
    if len(chunks) != len(records):
        return None             # a repeated id: the plain path compares its fields
    chunks.versions = {}
    chunks._documents = frozenset(names)
    return chunks


# --- span labels, column by column ----------------------------------------------------
#
# JSONL qrels of label lines only, {"query_id", "doc", "grade"[, "start", "end"]}:
# one json.loads of the lines joined into an array, each column checked at C
# speed.  Any other form or any doubt (other keys, a null, a blank line, a bad
# value) takes the plain reader, _jsonl_qrels, which names the line of an error.

_LABEL_LINE_KEYS = frozenset((frozenset(("query_id", "doc", "grade")),
                              frozenset(("query_id", "doc", "start", "end", "grade"))))


def _jsonl_labels_bulk(inp, rows_label="id"):
    """_jsonl_qrels of a file of label lines, read at once (to-label rows,
    which ``rows_label`` is about, and lines keyed by --query-field, go to
    the plain reader)."""
    if inp.fields is not None and inp.fields.query is not None:
        return _jsonl_qrels(inp, rows_label)
    try:
        labels = _bulk_labels(inp.text())
    except EvalError:           # not UTF-8: the plain reader names the line
        labels = None
    if labels is None:
        return _jsonl_qrels(inp, rows_label)
    inp.pending = 0
    return labels, None


def _bulk_labels(text):
    """{qid: [Label, ...]} of well-formed label lines, or None."""
    body = text.strip("\n")
    if not body or "\n\n" in body or "\r" in body:
        return None
    joined = "[" + body.replace("\n", ",\n") + "]"    # (see _chunk_map_bulk)
    try:
        records = json.loads(joined, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    if (len(records) != body.count("\n") + 1 or set(map(type, records)) != {dict}
            or sum(map(len, records)) != _key_bound(joined) or _SURROGATE_ESCAPE.search(joined)
            or not set(map(frozenset, records)) <= _LABEL_LINE_KEYS):
        return None
    qids = list(map(operator.itemgetter("query_id"), records))
    docs = list(map(operator.itemgetter("doc"), records))
    grades = list(map(operator.itemgetter("grade"), records))
    starts = [r.get("start") for r in records]
    ends = [r.get("end") for r in records]
    if set(map(type, qids)) != {str} or set(map(type, docs)) != {str} or set(
            map(type, grades)) != {int}:
        return None
    spans = [(s, e) for s, e in zip(starts, ends) if s is not None or e is not None]
    if spans:
        starts_given, ends_given = zip(*spans)
        if (set(map(type, starts_given)) != {int} or set(map(type, ends_given)) != {int}
                or min(starts_given) < 0 or not all(map(operator.lt, starts_given, ends_given))):
            return None
    make = functools.partial(tuple.__new__, Label)
    labels = {}
    nothing = itertools.repeat(None)     # doc_sha256 and text: these lines give neither
    for qid, label in zip(qids, map(make, zip(docs, starts, ends, grades, nothing, nothing))):
        labels.setdefault(qid, []).append(label)
    return labels


# --- Hooks -------------------------------------------------------------------

# hook name (in an earlier file, bound there to its plain twin) -> (acceleration, plain twin)
_HOOKS = {
    "_chunk_map_of": (_chunk_map_bulk, _chunk_map_plain),
    "_jsonl_qrels_of": (_jsonl_labels_bulk, _jsonl_qrels),
    "_trec_run_queries": (_trec_run_queries_fast, _trec_run_queries_plain),
    "_labels_for_ranking": (_labels_for_fast, _labels_for),
    "_trec_qrels": (_trec_qrels_whole, _trec_qrels_checked),
    "_rank": (_rank_fast, _rank_plain),
    "_measure_values": (_measure_values_one_pass, _measure_values_plain),
    "_top_chunks": (_top_chunks_fast, _top_chunks_plain),
    "_scored_run": (_scored_run_forked, _scored_run_plain),
    "_input_of": (_HashingInput, _Input),
}
_ACCELERATED = False


def _accelerate(on=True):
    """Bind every hook to its acceleration (``on``) or to its plain twin."""
    global _ACCELERATED
    for hook, (fast, plain) in _HOOKS.items():
        globals()[hook] = fast if on else plain
    _ACCELERATED = bool(on)


_accelerate(os.environ.get("RAG_EVAL_PLAIN", "") in ("", "0"))


if __name__ == "__main__":
    _command()
