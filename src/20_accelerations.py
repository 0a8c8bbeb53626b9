"""Accelerations: every fast path, each behind a hook with a plain twin.

Everything here exists only for speed.  Each acceleration has a plain twin
in an earlier file, which defines what it computes, and replaces it through
a one-line hook (the stdlib's ``scanstring = c_scanstring or
py_scanstring``): the earlier file calls the hook's name, and _accelerate()
at the end of this file binds it to the fast function.  RAG_EVAL_PLAIN=1 in
the environment at import time keeps every plain twin; _accelerate(False)
does the same in a running process.  A differential test pins each pair
(AccelerationTwinsTest, tests/test_accelerations.py): seeded random inputs
by the thousand, fast == plain, byte-identical reports.

  acceleration            hook                 plain twin               pinning test *
  _trec_run_queries_fast  _trec_run_queries    _trec_run_queries_plain  trec_run_readers,
    (blocks split at C speed, bytes ids,       (06)                     fast_trec_reader_agrees
    decimal score tokens)                                               _with_the_line_reader,
                                                                        decimal_tokens_compare
                                                                        _as_numbers
  _labels_for_fast        _labels_for_ranking  _labels_for (09)         rankers, reports_are
                                                                        _byte_identical
  _trec_qrels_whole       _trec_qrels          _trec_qrels_checked      trec_qrels_fast_and
                                               (06)                     _checked_readers_agree,
                                                                        trec_qrels_fast_reader
                                                                        _agrees_on_mutated_lines
  _rank_fast (in order,   _rank                _rank_plain (09)         rankers
    heapq top)
  _top_chunks_fast        _top_chunks          _top_chunks_plain (09)   top_chunks
    (ids decoded at once,
    in order: top window)
  _scored_run_forked      _scored_run          _scored_run_plain (11)   reports_are_byte_identical
    (forked workers)                                                    (and ParallelTest,
                                                                        FuzzTest)
  _HashingInput           _input_of            _Input (05)              reports_are_byte_identical
    (hash in a process)                                                 (sha256 in the reports)
  _chunk_map_bulk         _chunk_map_of        _chunk_map_plain (06)    chunk_map_readers
    (columns at C speed)
  _jsonl_labels_bulk      _jsonl_qrels_of      _jsonl_qrels (05)        jsonl_label_readers
    (label lines at once)
  every one at once       RAG_EVAL_PLAIN=1                              reports_are_byte_identical

  * AccelerationTwinsTest.test_<name>.

  Not behind a hook (speed inside a definition, no twin): the C-speed whole-
  query checks of JSON input (_check_run_query), the gain and discount tables
  of the measures, the paused garbage collector (_gc_paused).

A reader who wants to know what a number means never needs this file.

Uses: 01_head, 03, 05, 06 (readers), 09_ranking, 11_evaluation,
19_command_line (the entry point).  Used by: nothing; it binds the hooks.
"""

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
