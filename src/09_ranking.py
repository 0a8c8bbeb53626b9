"""Ranking: one query ranked once; the tie rule is defined here.

_rank_plain orders a query's ranking (a ranked list keeps its order; scores
descending, ties by id descending as trec_eval does), keeps each id once at
its best position, and places the labelled ids of the top K; every measure
then reads those few.  Also the top chunks of a ranking with text ids, the
document of a chunk id (doc_sep), and a query's grades in measure order.
The hooks _rank, _top_chunks and _labels_for_ranking are bound to their
fast twins by 20_accelerations (which repeat the sort key, _id_order
included, for speed; twin tests pin them to these definitions).

Uses: 03_measures, 06_inputs_trec_chunks_scores.  Used by: unjudged ids,
evaluation, accelerations.
"""


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
