"""Head: what rag_eval is, and what every file shares.

The module docstring (what rag_eval is, its measures, a quick start),
__all__, the imports, the version, the exit codes and the defaults, the one
exception type (EvalError), and the few small helpers every file uses
(_mean, _plural, _preview, _short_repr, _finite, _fmt, _dumps, and the hashes
of sets of query ids: _query_set, _members_sha256).

Uses: nothing.  Used by: every later file.
"""

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
