"""Command line: the parser, the options' checks, main() and its exit codes.

main(argv) -> exit code (0 scored and passed, 1 a regression, 2 bad input
or usage); _command() is the console entry point (rag-eval, python3 -m
rag_eval, python3 rag_eval.py).  Also the --meta options, the --to-label,
--drift and --scores paths, and the output files written atomically.

Uses: every earlier file.  Used by: 20_accelerations (the entry point at
the end of the file).
"""

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
