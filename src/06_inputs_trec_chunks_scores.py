"""Input readers (2 of 2): TREC and BEIR files, chunk maps, score files.

TREC qrels and runs (whitespace columns) and BEIR's TSV qrels; chunk maps
(one JSON line a chunk: id, doc, start, end[, tokens, doc_sha256]); score
files (a judge's per-query scores: JSON, JSONL or CSV); and the public
readers load_qrels, load_run, load_chunks, load_scores.

Uses: 01_head, 03_measures, 04_measure_names, 05_inputs.  Used by: ranking,
evaluation, judge scores, baselines, reports, the command line,
accelerations.
"""


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
