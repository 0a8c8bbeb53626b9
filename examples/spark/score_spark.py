#!/usr/bin/env python3
"""Score a run held as Spark tables; merge on the driver; gate; write the reports.

    python3 score_spark.py DATA --metrics recall,ndcg,mrr --k 5,10 \\
        --out report.json [--summary summary.md] [--baseline baseline.json] \\
        [--unjudged-bounds] [--spans] [--master local[2]] [--partitions 8] \\
        [--scores judge.jsonl --answer correct]

DATA holds the flat tables make_data.py writes (Parquet would do as well:
change the two spark.read lines).  What runs where:
  executors  group each query's run rows and labels (groupBy, a full outer
             join on the query), then rag_eval.score_rows on each partition
             (mapPartitions): one record per query;
  driver     collects the records and the qrels, rag_eval.merge_rows (with
             the judge's scores, one line a query, read here: --scores),
             then gate, render_json and render_markdown as on one machine.
Exit code: the gate's (0 passed, 1 regressed; 2 on bad input), as the
command line's.  Needs pyspark (and Java); rag_eval.py is shipped to the
executors with addPyFile.
"""

import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))   # rag_eval.py, when run from here

import rag_eval                                               # noqa: E402


def label_rows(qid, labels, spans):
    """The qrels rows of one query from its collected labels: one test-set
    line of id grades, or a label line a span."""
    if spans:   # (a whole-document label has no start: sorted with the others by repr)
        return [{"query_id": qid, "doc": l.doc, "start": l.start, "end": l.end, "grade": l.grade}
                for l in sorted(labels, key=repr)]
    grades = {}
    for l in sorted(labels, key=repr):
        if l.id in grades:      # as the command line refuses a second grade for an id
            raise rag_eval.EvalError("labels table: query %r: id %r is graded twice"
                                     % (qid, l.id))
        grades[l.id] = l.grade
    return [{"query_id": qid, "relevant": grades}]


def judge_fields(metrics, answer):
    """The score fields the command line reads of --scores beside a run: those
    --metrics names (score(field=F)) and --answer's, by the command line's
    own reading of --metrics (its refusals included)."""
    _, scored = rag_eval._split_metrics(metrics, "both", answer)
    return rag_eval._named_fields(scored)


def score_partition(rows, options, spans, chunks):
    """rag_eval.score_rows over one partition of the joined table: a row a
    query, its run's scores (a map) and its labels (a list), either null."""
    import rag_eval     # on the executor: the file addPyFile shipped
    qrels_rows, run_rows = [], []
    for row in rows:
        if row.scores is not None:
            run_rows.append({"query_id": row.query_id, "scores": row.scores})
        if row.labels is not None:
            qrels_rows.extend(label_rows(row.query_id, row.labels, spans))
    return iter(rag_eval.score_rows(qrels_rows, run_rows, chunks=chunks, **options))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--k", default="5")
    parser.add_argument("--out", required=True, help="the JSON report")
    parser.add_argument("--summary", help="the Markdown summary (a job summary, a PR comment)")
    parser.add_argument("--baseline")
    parser.add_argument("--spans", action="store_true", help="span labels and a chunk map")
    parser.add_argument("--unjudged-bounds", action="store_true",
                        help="as the command line's: judged@k and the bounds of each mean, "
                             "which tell the gate an undecided drop (the command line "
                             "scores them itself when a gate fails: give it with --baseline)")
    parser.add_argument("--scores", help="the judge's score file, as the command line's")
    parser.add_argument("--answer", help="the score field that is each answer's verdict: "
                                         "the stages of each query, as the command line's")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--stats", action="store_true",
                        help="say on stderr how many records the driver merged, and its peak memory")
    args = parser.parse_args(argv)
    if args.answer and not args.scores:
        parser.error("--answer needs --scores")
    # The judge's verdicts: one line a query, on the driver (read first: a bad file
    # fails before Spark starts).
    judged = None
    if args.scores is not None:
        judged = rag_eval.load_scores(args.scores, fields=judge_fields(args.metrics, args.answer))

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    spark = (SparkSession.builder.master(args.master).appName("rag_eval")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(args.partitions)).getOrCreate())
    spark.sparkContext.setLogLevel("OFF")  # an executor's error is ours to say, in one line
    spark.sparkContext.addPyFile(rag_eval.__file__)
    path = lambda name: os.path.join(args.data, name)    # noqa: E731
    # FAILFAST: a value of the wrong type fails the job (Spark's default would make it
    # null, and a null tokens is no tokens: another number than the command line's).
    read = spark.read.option("mode", "FAILFAST")
    try:
        run = read.schema("query_id string, id string, score double").json(
            path("run_rows.jsonl"))
        if args.spans:
            labels = read.schema("query_id string, doc string, start long, end long, "
                                       "grade long").json(path("span_rows.jsonl"))
            label = F.struct("doc", "start", "end", "grade")
            chunks = [row.asDict() for row in read.schema(
                "id string, doc string, start long, end long, tokens long, doc_sha256 string").json(
                path("chunk_rows.jsonl")).collect()]
        else:
            labels = read.schema("query_id string, id string, grade long").json(
                path("qrels_rows.jsonl"))
            label = F.struct("id", "grade")
            chunks = None
        # Group by query in Spark itself: a query's scores as a map (a (query, id) pair
        # given twice fails the job: map keys are unique), its labels as a list.
        scores = run.groupBy("query_id").agg(
            F.map_from_entries(F.collect_list(F.struct("id", "score"))).alias("scores"))
        grouped = labels.groupBy("query_id").agg(F.collect_list(label).alias("labels"))
        # One row a query: any partitioning serves, and the join's own (shuffle
        # partitions, above) spares a shuffle.
        joined = scores.join(grouped, "query_id", "full_outer")
        options = {"measures": args.metrics, "k": args.k,
                   "unjudged_bounds": args.unjudged_bounds, "answer": args.answer}
        spans, shipped = args.spans, spark.sparkContext.broadcast(chunks)
        records = joined.rdd.mapPartitions(
            lambda rows: score_partition(rows, options, spans, shipped.value)).collect()
        qrels_rows = [row for labelled in grouped.collect()
                      for row in label_rows(labelled.query_id, labelled.labels, spans)]
    finally:
        spark.stop()

    report = rag_eval.merge_rows(records, qrels_rows, chunks=chunks, scores=judged, **options)
    if args.stats:
        import resource     # (Unix) the driver's Python process; the JVM is apart
        sys.stderr.write("score_spark: %d records merged; driver peak RSS %.0f MB\n" % (
            len(records), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    result = rag_eval.gate(report, args.baseline) if args.baseline else None
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write(rag_eval.render_json(report, result))
    if args.summary:
        with open(args.summary, "w", encoding="utf-8") as handle:
            handle.write(rag_eval.render_markdown(report, result))
    if result is not None and not result.passed:
        return rag_eval.EXIT_REGRESSION
    return rag_eval.EXIT_OK


def _executor_error(exc):
    """The one line of an error raised on an executor (Spark wraps it in a
    Java exception), or None when it is not one of ours or the input's."""
    text = str(exc)
    malformed = re.search(r"Malformed records are detected in record parsing: (.*?)\.?$",
                          text, re.M)
    if malformed:   # FAILFAST: the row, and the field and value that would not parse
        cause = re.search(r"Cannot parse field name (\S+), field value (.*?), \[\w+\] as "
                          r"target spark data type \[(\w+)\]", text)
        return "a table row does not parse%s: %s" % (
            "" if cause is None else " (field %s, value %s, not a %s)" % cause.groups(),
            malformed.group(1))
    for marker in ("rag_eval.EvalError: ", "EvalError: ", "DUPLICATED_MAP_KEY"):
        at = text.find(marker)
        if at >= 0:
            return text[at:].splitlines()[0].replace("rag_eval.EvalError: ", "")
    return None


if __name__ == "__main__":
    try:
        sys.exit(main())
    except rag_eval.EvalError as exc:
        sys.stderr.write("score_spark: error: %s\n" % exc)
        sys.exit(rag_eval.EXIT_ERROR)
    except Exception as exc:    # py4j's Py4JJavaError: bad input met on an executor
        line = _executor_error(exc)
        if line is None:
            raise
        sys.stderr.write("score_spark: error: %s\n" % line)
        sys.exit(rag_eval.EXIT_ERROR)
