"""HTML: one self-contained page (render_html), and the output formats.

Inline CSS and SVG charts (means against the baseline, a forest plot of
paired deltas, the per-query waterfall, judged@k bars), no script and no
external reference; the notebook views of Report, GateResult and
Comparison; the table of output formats the command line picks from.

Uses: 01_head, 02_records, 08_provenance, 12_statistics, 14_baselines,
15_gate, 16_reports.  Used by: the command line, and the records' and
Comparison's notebook views.
"""

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
