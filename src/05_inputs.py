"""Input readers (1 of 2): files, formats, JSON and JSONL, query metadata.

qrels -> {qid: {doc_id: grade}}, read whole (qrels are small); a test-set
         JSONL file also gives what it says of each query (see _query_info).
run   -> a stream of (qid, ranking), one query at a time; a ranking is a ranked
         list [doc_id, ...], a score map {doc_id: score}, or, from TREC files,
         _Scored parallel lists.  Memory follows one query, not the file.
Formats: JSON, JSONL (one query a line) and TREC (whitespace columns), and
for qrels BEIR's TSV; each optionally gzip-compressed, detected from the
content.  This file: opening a source (_Input), detecting its format, the
JSON rules (no NaN, no repeated key), ids, grades and labels, JSONL lines,
to-label rows read back, query metadata (--queries), and the progress line
reading shows on a terminal.

Uses: 01_head, 03_measures, 04_measure_names.  Used by: the second readers'
file, test sets, evaluation, judge scores, baselines, the command line,
accelerations.
"""

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
