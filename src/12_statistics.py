"""Statistics: paired comparisons of two runs on the same queries.

Every function takes the per-query differences ``diffs = [a_q - b_q for q
in queries]`` (or plain per-query values for the sizing helpers) and
returns plain floats.  Nothing here ever returns NaN: degenerate inputs
have a documented convention instead.  Only the standard library is used
(math, random, statistics, bisect, itertools).

  paired_ttest(diffs)            -> (t, p)   Student's paired t-test
  randomization_p(diffs)         -> p        sign-flip (permutation) test
  mcnemar_p(b, c)                -> p        exact McNemar test (sign flips of 0/1)
  bootstrap_ci(diffs, rng=...)   -> (lo, hi) percentile CI of the mean diff
  holm(pvalues)                  -> [p_adj]  Holm-Bonferroni step-down
  cohen_kappa(stored, current)   -> (agreement, kappa, labels, counts)
  min_detectable_difference(sd, n)           paired MDE, normal approximation
  margin_of_error(values)        queries_needed(sd, tolerance)

Then the paired view (_paired_view: which queries a verdict compares, the
one rule the gate, compare and the HTML charts share), and compare and
compare_all (two runs on the same queries: a Comparison).
References: scipy.stats.ttest_rel, scipy.stats.permutation_test
(permutation_type='samples'), scipy.stats.bootstrap (method='percentile'),
statsmodels multipletests(method='holm') and mcnemar(exact=True); see
tests/data/stats/.

Uses: 01_head, 02_records, 04_measure_names.  Used by: judge scores, the
gate, HTML, the command line.  Forward (tools/build.py, FORWARD):
Comparison's notebook views call the renderers.
"""

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
