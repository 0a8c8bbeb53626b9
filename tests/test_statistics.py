"""Statistics: agreement with scipy and statsmodels (tests/data/stats), values by
hand, McNemar, the judge drift statistics; then the paired comparison of two
runs (--compare) built on them.
"""

import json
import itertools
import math
import os
import random
import statistics
import tempfile
import unittest

import rag_eval
from tests.support import read_doc, HERE, DATA, run_cli, TempDir, example, EXAMPLE_FILES, example_report


# ---------------------------------------------------------------------------
# Statistics (tests/data/stats, written by tests/peers/gen_stats.py with scipy,
# numpy and statsmodels; the rest worked out by hand or from closed forms)
# ---------------------------------------------------------------------------

def load_stats_reference():
    with open(os.path.join(DATA, "stats", "scipy_reference.json"), encoding="utf-8") as f:
        return json.load(f)


def case_diffs(case):
    """Per-query differences a - b, as rag_eval computes them."""
    return [a - b for a, b in zip(case["a"], case["b"])]


class StatsReferenceTest(unittest.TestCase):
    """Agreement with scipy / statsmodels (tests/peers/gen_rag_eval.py)."""

    @classmethod
    def setUpClass(cls):
        cls.ref = load_stats_reference()

    def test_paired_ttest_matches_scipy_ttest_rel(self):
        for case in self.ref["cases"]:
            with self.subTest(case=case["name"]):
                t, p = rag_eval.paired_ttest(case_diffs(case))
                want = case["reference"]["ttest_rel"]
                if want["statistic"] is None:        # scipy: NaN; ours: no evidence
                    self.assertEqual((t, p), (0.0, 1.0))
                elif isinstance(want["statistic"], str):   # "inf" / "-inf"
                    self.assertEqual(t, float(want["statistic"]))
                    self.assertEqual(p, 0.0)
                    self.assertEqual(want["pvalue"], 0.0)
                else:
                    self.assertTrue(math.isclose(t, want["statistic"], rel_tol=1e-9,
                                                 abs_tol=1e-12), (t, want))
                    self.assertTrue(math.isclose(p, want["pvalue"], rel_tol=1e-9),
                                    (p, want))

    def test_randomization_exact_matches_scipy_permutation_test(self):
        checked = 0
        for case in self.ref["cases"]:
            want = case["reference"].get("permutation_exact_p")
            if want is None:
                continue
            with self.subTest(case=case["name"]):
                got = rag_eval.randomization_p(case_diffs(case))
                self.assertTrue(math.isclose(got, want, rel_tol=1e-9), (got, want))
                checked += 1
        self.assertGreaterEqual(checked, 8)

    def test_randomization_matches_exact_enumeration_beyond_20(self):
        # sign_flip_exact_p: numpy enumeration of all patterns of the nonzero
        # differences. With <= 20 nonzero we are exact too; beyond that our
        # Monte Carlo (10,000 resamples, seed 0; standard error <= 0.005) must
        # land near it, and near scipy's own Monte Carlo estimate.
        checked = 0
        for case in self.ref["cases"]:
            ref = case["reference"]
            if "sign_flip_exact_p" not in ref:
                continue
            checked += 1
            with self.subTest(case=case["name"]):
                d = case_diffs(case)
                got = rag_eval.randomization_p(d, rng=random.Random(0))
                if sum(1 for x in d if x != 0.0) <= 20:
                    self.assertTrue(math.isclose(got, ref["sign_flip_exact_p"],
                                                 rel_tol=1e-9), got)
                else:
                    self.assertLess(abs(got - ref["sign_flip_exact_p"]), 0.02)
                self.assertLess(abs(got - ref["permutation_mc_p"]), 0.04)
        self.assertGreaterEqual(checked, 3)

    def test_bootstrap_ci_near_scipy_bootstrap(self):
        # Different random generators: only a loose agreement is expected.
        checked = 0
        for case in self.ref["cases"]:
            want = case["reference"].get("bootstrap_percentile_95")
            if want is None:
                continue
            with self.subTest(case=case["name"]):
                lo, hi = rag_eval.bootstrap_ci(case_diffs(case), rng=random.Random(0))
                self.assertLess(abs(lo - want[0]), 0.02, (lo, want))
                self.assertLess(abs(hi - want[1]), 0.02, (hi, want))
                checked += 1
        self.assertGreaterEqual(checked, 3)

    def test_holm_matches_statsmodels(self):
        for item in self.ref["holm"]:
            with self.subTest(pvalues=item["pvalues"]):
                got = rag_eval.holm(item["pvalues"])
                self.assertEqual(len(got), len(item["adjusted"]))
                for g, w in zip(got, item["adjusted"]):
                    self.assertTrue(math.isclose(g, w, rel_tol=1e-12, abs_tol=1e-12),
                                    (got, item["adjusted"]))


class StatsHandWorkedTest(unittest.TestCase):
    """Closed forms, edge cases and conventions."""

    def test_betainc_closed_forms(self):
        for x in (1e-9, 0.01, 0.3, 0.5, 0.77, 0.999):
            with self.subTest(x=x):
                cases = [
                    (1.0, 1.0, x),
                    (3.0, 1.0, x ** 3),
                    (1.0, 2.5, 1.0 - (1.0 - x) ** 2.5),
                    (0.5, 0.5, 2.0 / math.pi * math.asin(math.sqrt(x))),
                    (2.0, 3.0, 1.0 - (1 - x) ** 4 - 4 * x * (1 - x) ** 3),
                ]
                for a, b, want in cases:
                    self.assertTrue(math.isclose(rag_eval._betainc(a, b, x), want,
                                                 rel_tol=1e-12, abs_tol=1e-15),
                                    (a, b, x))
                self.assertAlmostEqual(rag_eval._betainc(7.5, 0.5, x),
                                       1.0 - rag_eval._betainc(0.5, 7.5, 1.0 - x), 14)
        self.assertEqual(rag_eval._betainc(2.0, 3.0, 0.0), 0.0)
        self.assertEqual(rag_eval._betainc(2.0, 3.0, 1.0), 1.0)
        for bad in ((0.0, 1.0, 0.5), (1.0, -1.0, 0.5), (1.0, 1.0, 1.5)):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    rag_eval._betainc(*bad)

    def test_t_two_sided_p_closed_forms(self):
        for t in (1e-8, 0.3, 1.0, 2.5, 12.0, 1e4):
            for sign in (1.0, -1.0):
                with self.subTest(t=sign * t):
                    # df = 1 (Cauchy) and df = 2 have closed forms, written
                    # here without cancellation for large t.
                    self.assertTrue(math.isclose(
                        rag_eval.t_two_sided_p(sign * t, 1),
                        2.0 / math.pi * math.atan(1.0 / t), rel_tol=1e-12))
                    s = math.sqrt(2.0 + t * t)      # 1 - t / s = 2 / (s (s + t))
                    self.assertTrue(math.isclose(
                        rag_eval.t_two_sided_p(sign * t, 2),
                        2.0 / (s * (s + t)), rel_tol=1e-12))
        self.assertEqual(rag_eval.t_two_sided_p(0.0, 9), 1.0)
        self.assertEqual(rag_eval.t_two_sided_p(math.inf, 9), 0.0)
        self.assertEqual(rag_eval.t_two_sided_p(-math.inf, 9), 0.0)
        self.assertEqual(rag_eval.t_two_sided_p(1e200, 9), 0.0)
        # Large df tends to the normal distribution.
        normal = 2.0 * (1.0 - statistics.NormalDist().cdf(1.96))
        self.assertAlmostEqual(rag_eval.t_two_sided_p(1.96, 10 ** 7), normal, 7)
        with self.assertRaises(ValueError):
            rag_eval.t_two_sided_p(math.nan, 3)
        with self.assertRaises(ValueError):
            rag_eval.t_two_sided_p(1.0, 0)

    def test_paired_ttest_hand_worked(self):
        # diffs 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3), df 2.
        t, p = rag_eval.paired_ttest([1.0, 2.0, 3.0])
        self.assertAlmostEqual(t, 2.0 * math.sqrt(3.0), 12)
        self.assertAlmostEqual(p, 1.0 - t / math.sqrt(2.0 + t * t), 12)
        t2, p2 = rag_eval.paired_ttest([-1.0, -2.0, -3.0])
        self.assertEqual((t2, p2), (-t, p))

    def test_paired_ttest_conventions(self):
        self.assertEqual(rag_eval.paired_ttest([]), (0.0, 1.0))
        self.assertEqual(rag_eval.paired_ttest([0.7]), (0.0, 1.0))
        self.assertEqual(rag_eval.paired_ttest([0.0] * 5), (0.0, 1.0))
        self.assertEqual(rag_eval.paired_ttest([0.1] * 3), (math.inf, 0.0))
        self.assertEqual(rag_eval.paired_ttest([-0.25] * 4), (-math.inf, 0.0))
        for bad in ([1.0, math.nan], [math.inf, 1.0]):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    rag_eval.paired_ttest(bad)

    def test_randomization_matches_brute_force(self):
        # All 2**n sign patterns, zeros included: checks both the
        # meet-in-the-middle count and that dropping zeros keeps the share.
        def brute(d):
            observed = abs(math.fsum(d))
            if observed == 0.0:
                return 1.0
            hits = sum(
                1 for signs in itertools.product((1.0, -1.0), repeat=len(d))
                if abs(math.fsum(s * x for s, x in zip(signs, d)))
                >= observed * (1 - 1e-9))
            return hits / 2 ** len(d)

        rng = random.Random(42)
        values = [0.0, 0.0, 1.0, -1.0, 0.5, -0.25, 1 / 3, -2 / 3, 0.2, 0.1]
        for _ in range(200):
            d = [rng.choice(values) for _ in range(rng.randint(1, 11))]
            with self.subTest(d=d):
                self.assertEqual(rag_eval.randomization_p(d), brute(d))

    def test_randomization_hand_worked(self):
        self.assertEqual(rag_eval.randomization_p([]), 1.0)
        self.assertEqual(rag_eval.randomization_p([0.0, 0.0]), 1.0)
        self.assertEqual(rag_eval.randomization_p([1.0] * 5), 2 / 32)
        self.assertEqual(rag_eval.randomization_p([1.0] * 5 + [0.0] * 7), 2 / 32)
        self.assertEqual(rag_eval.randomization_p([1.0] * 20), 2 / 2 ** 20)
        self.assertEqual(rag_eval.randomization_p([1.0, -1.0]), 1.0)
        self.assertEqual(rag_eval.randomization_p([0.4]), 1.0)
        # Sums equal up to rounding still tie, whatever the order.
        for order in itertools.permutations([0.1, 0.2, 0.3]):
            with self.subTest(order=order):
                self.assertEqual(rag_eval.randomization_p(list(order)), 0.25)
        # Observed sum zero up to rounding: every pattern is as extreme.
        self.assertEqual(rag_eval.randomization_p([0.1, 0.2, 0.3, -0.6]), 1.0)

    def test_randomization_monte_carlo(self):
        d = [1.0] * 29 + [0.5]               # two sizes: not McNemar; true p = 2 / 2**30
        self.assertEqual(rag_eval.randomization_p(d, resamples=999,
                                               rng=random.Random(5)), 1 / 1000)
        d = [random.Random(i).choice([1.0, -1.0, 0.5]) for i in range(40)]
        first = rag_eval.randomization_p(d, rng=random.Random(3))
        self.assertEqual(first, rag_eval.randomization_p(d, rng=random.Random(3)))
        self.assertEqual(rag_eval.randomization_p(d), rag_eval.randomization_p(d))
        # 15 wins and 10 losses of 1: exact p = P(|S| >= 5) for 25 fair signs
        # = 2 * sum(C(25, k) for k <= 10) / 2**25 (McNemar). With one loss of
        # 0.999 instead, Monte Carlo must land near the count of all 2**25 patterns.
        exact = 2 * sum(math.comb(25, k) for k in range(11)) / 2 ** 25
        self.assertEqual(rag_eval.randomization_p([1.0] * 15 + [-1.0] * 10), exact)
        d = [1.0] * 15 + [-1.0] * 9 + [-0.999]
        counted = rag_eval._exact_sign_flip_count(d, abs(math.fsum(d)) * (1 - 1e-9)) / 2 ** 25
        estimate = rag_eval.randomization_p(d, rng=random.Random(2))
        self.assertAlmostEqual(estimate, counted, delta=0.02)
        with self.assertRaises(ValueError):
            rag_eval.randomization_p(d, resamples=0)

    def test_bootstrap_ci_conventions(self):
        self.assertEqual(rag_eval.bootstrap_ci([], rng=random.Random(0)), (0.0, 0.0))
        self.assertEqual(rag_eval.bootstrap_ci([0.1] * 7, rng=random.Random(0)),
                         (0.1, 0.1))
        d = [1.0] * 12 + [-1.0] * 4 + [0.0] * 84
        ci = rag_eval.bootstrap_ci(d, rng=random.Random(9))
        self.assertEqual(ci, rag_eval.bootstrap_ci(d, rng=random.Random(9)))
        lo, hi = ci
        self.assertLess(lo, 0.08)
        self.assertLess(0.08, hi)
        # Normal approximation: 0.08 +/- 1.96 * 0.04 / ... roughly.
        se = statistics.pstdev(d) / math.sqrt(len(d))
        self.assertAlmostEqual(lo, 0.08 - 1.96 * se, delta=0.015)
        self.assertAlmostEqual(hi, 0.08 + 1.96 * se, delta=0.015)
        lo99, hi99 = rag_eval.bootstrap_ci(d, rng=random.Random(9), confidence=0.99)
        self.assertLess(lo99, lo)
        self.assertGreater(hi99, hi)
        for bad in (0.0, 1.0, 95):
            with self.subTest(confidence=bad):
                with self.assertRaises(ValueError):
                    rag_eval.bootstrap_ci(d, rng=random.Random(0), confidence=bad)

    def test_bootstrap_ci_uses_linear_quantiles(self):
        # numpy's default percentile = statistics.quantiles(method='inclusive').
        d = [0.5, 0.0, 0.25, 1.0, -0.5, 0.0, 0.75, 0.2, 0.0, 0.1, 0.0]
        n = len(d)
        rng = random.Random(11)
        means = [math.fsum(rng.choices(d, k=n)) / n for _ in range(999)]
        cuts = statistics.quantiles(means, n=40, method="inclusive")
        lo, hi = rag_eval.bootstrap_ci(d, resamples=999, rng=random.Random(11))
        self.assertAlmostEqual(lo, cuts[0], 12)
        self.assertAlmostEqual(hi, cuts[-1], 12)
        data = sorted(random.Random(1).random() for _ in range(37))
        for q, cut in zip([i / 10 for i in range(1, 10)],
                          statistics.quantiles(data, n=10, method="inclusive")):
            self.assertAlmostEqual(rag_eval._quantile_linear(data, q), cut, 12)

    def test_holm_hand_worked(self):
        # sorted 0.001, 0.01, 0.03, 0.04, 0.2 -> x5, x4, x3, x2, x1, running max.
        self.assertEqual(rag_eval.holm([0.04, 0.001, 0.03, 0.2, 0.01]),
                         [0.09, 0.005, 0.09, 0.2, 0.04])
        self.assertEqual(rag_eval.holm([]), [])
        self.assertEqual(rag_eval.holm([0.3]), [0.3])
        self.assertEqual(rag_eval.holm([0.6, 0.7]), [1.0, 1.0])
        p = [random.Random(i).random() / 5 for i in range(12)]
        adj = rag_eval.holm(p)
        order = sorted(range(12), key=p.__getitem__)
        self.assertEqual([adj[i] for i in order], sorted(adj))   # monotone
        self.assertTrue(all(a >= x for a, x in zip(adj, p)))
        for bad in ([0.1, math.nan], [1.5], [-0.1]):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    rag_eval.holm(bad)

    def test_min_detectable_difference(self):
        z = statistics.NormalDist()
        factor = z.inv_cdf(0.975) + z.inv_cdf(0.8)          # about 2.8016
        self.assertAlmostEqual(rag_eval.min_detectable_difference(0.3, 100),
                               factor * 0.03, 12)
        self.assertAlmostEqual(rag_eval.min_detectable_difference(0.3, 400),
                               rag_eval.min_detectable_difference(0.3, 100) / 2, 12)
        self.assertGreater(rag_eval.min_detectable_difference(0.3, 100, alpha=0.01),
                           rag_eval.min_detectable_difference(0.3, 100))
        self.assertEqual(rag_eval.min_detectable_difference(0.3, 0), math.inf)
        with self.assertRaises(ValueError):
            rag_eval.min_detectable_difference(0.3, 10, power=1.0)

    def test_margin_of_error_domain_numbers(self):
        # domain.md: near 80%, +/- 8 points on 100 queries and 4 on 400.
        self.assertAlmostEqual(rag_eval.margin_of_error([1] * 80 + [0] * 20), 0.08,
                               delta=0.002)
        self.assertAlmostEqual(rag_eval.margin_of_error([1] * 320 + [0] * 80), 0.04,
                               delta=0.001)
        self.assertEqual(rag_eval.margin_of_error([]), math.inf)
        self.assertEqual(rag_eval.margin_of_error([0.5]), math.inf)
        self.assertEqual(rag_eval.margin_of_error([0.5, 0.5]), 0.0)
        self.assertGreater(rag_eval.margin_of_error([1] * 80 + [0] * 20, confidence=0.99),
                           rag_eval.margin_of_error([1] * 80 + [0] * 20))

    def test_queries_needed(self):
        self.assertEqual(rag_eval.queries_needed(0.4, 0.04), 385)
        self.assertEqual(rag_eval.queries_needed(0.4, 0.08), 97)
        self.assertEqual(rag_eval.queries_needed(0.0, 0.02), 0)
        for sd, tol in ((0.4, 0.04), (0.3, 0.01), (0.25, 0.05)):
            n = rag_eval.queries_needed(sd, tol)
            z = statistics.NormalDist().inv_cdf(0.975)
            self.assertLessEqual(z * sd / math.sqrt(n), tol)
            self.assertGreater(z * sd / math.sqrt(n - 1), tol)
        with self.assertRaises(ValueError):
            rag_eval.queries_needed(0.4, 0.0)


def load_mcnemar_reference():
    with open(os.path.join(DATA, "stats", "mcnemar.json"), encoding="utf-8") as f:
        return json.load(f)


class McNemarTest(unittest.TestCase):
    """The exact McNemar test: the sign-flip test of 0/1 outcomes, exact at any
    number of discordant pairs (tests/peers/gen_mcnemar.py, statsmodels)."""

    @classmethod
    def setUpClass(cls):
        cls.ref = load_mcnemar_reference()

    def assertSameP(self, got, want, what):
        # abs_tol: a p below 1e-300 underflows to 0 or a subnormal on either side.
        self.assertTrue(math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-300),
                        (what, got, want))

    def test_matches_statsmodels_exact_mcnemar(self):
        tables = self.ref["tables"]
        self.assertGreater(len(tables), 700)
        self.assertGreaterEqual(max(t["b"] + t["c"] for t in tables), 10 ** 6)
        for table in tables:
            with self.subTest(b=table["b"], c=table["c"]):
                self.assertSameP(rag_eval.mcnemar_p(table["b"], table["c"]), table["pvalue"],
                                 table)
                self.assertEqual(rag_eval.mcnemar_p(table["b"], table["c"]),
                                 rag_eval.mcnemar_p(table["c"], table["b"]))

    def test_sign_flip_of_01_vectors_is_mcnemar(self):
        for item in self.ref["vectors"]:
            with self.subTest(name=item["name"]):
                diffs = [a - b for a, b in zip(item["a"], item["b"])]
                (_, gained), (lost, _) = item["table"]
                self.assertEqual((gained, lost), (diffs.count(1), diffs.count(-1)))
                got = rag_eval.randomization_p(diffs, rng=random.Random(0))
                self.assertSameP(got, item["pvalue"], item["name"])
                self.assertEqual(got, rag_eval.mcnemar_p(gained, lost))
        self.assertGreater(max(len(item["a"]) for item in self.ref["vectors"]), 1000)

    def test_hand_worked(self):
        # n = b + c discordant pairs; p = 2 * sum_{i <= min(b, c)} C(n, i) / 2**n.
        self.assertEqual(rag_eval.mcnemar_p(5, 0), 2 * 1 / 32)                 # 0.0625
        self.assertEqual(rag_eval.mcnemar_p(2, 8), 2 * (1 + 10 + 45) / 1024)   # 0.109375
        self.assertEqual(rag_eval.mcnemar_p(1, 3), 2 * (1 + 4) / 16)           # 0.625
        self.assertEqual(rag_eval.mcnemar_p(2, 3), 2 * (1 + 5 + 10) / 32)      # 1.0
        self.assertEqual(rag_eval.mcnemar_p(1, 4), 2 * (1 + 5) / 32)           # 0.375
        self.assertEqual(rag_eval.mcnemar_p(30, 0), 2 / 2 ** 30)
        for b in (0, 1, 7, 1000, 250000):
            self.assertEqual(rag_eval.mcnemar_p(b, b), 1.0)
        for bad in ((-1, 2), (1.0, 2), (True, 3), (2, "3")):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    rag_eval.mcnemar_p(*bad)

    def test_equals_the_enumerated_sign_flip_count(self):
        # The sign-flip count of b values +1 and c values -1 (meet in the middle,
        # the path randomization_p takes for other differences) over 2**n.
        for b in range(0, 12):
            for c in range(0, 21 - b):
                d = [1.0] * b + [-1.0] * c
                with self.subTest(b=b, c=c):
                    if b == c:
                        want = 1.0
                    else:
                        want = rag_eval._exact_sign_flip_count(d, abs(b - c) * (1 - 1e-9)) / 2 ** (b + c)
                    self.assertEqual(rag_eval.mcnemar_p(b, c), want)

    def test_exact_at_large_n(self):
        # Beyond 2,000 pairs the sum is carried with bounds both ways; it must
        # give the correctly rounded p, as exact integers and one division do.
        rng = random.Random(7)
        cases = [(2001, 990), (2500, 1249), (4001, 1900), (6000, 2999), (3000, 0)]
        cases += [(n, rng.randint(n // 2 - 120, n // 2 - 1))
                  for n in (rng.randint(2001, 8000) for _ in range(12))]
        for n, k in cases:
            with self.subTest(n=n, k=k):
                term = math.comb(n, k)          # C(n, i - 1) = C(n, i) * i / (n - i + 1)
                total = term
                for i in range(k, 0, -1):
                    term = term * i // (n - i + 1)
                    total += term
                self.assertEqual(rag_eval.mcnemar_p(k, n - k), 2 * total / 2 ** n)
        # The bounds, where they decide, agree with exact integers below the limit too.
        for n in range(3, 300, 7):
            for k in range(0, (n + 1) // 2):
                lo, hi = rag_eval._binomial_half_tail(k, n, 200)
                if lo == hi:
                    self.assertEqual(lo, rag_eval._exact_half_tail(k, n), (n, k))

    def test_one_size_differences_use_it(self):
        # Any measure whose changed queries all moved by one step (here 1/9,
        # rounded apart) is a 0/1 outcome for the sign-flip test.
        ninth = [5 / 9 - 4 / 9] * 25 + [2 / 9 - 1 / 9] * 3 + [4 / 9 - 5 / 9] * 2 + [0.0] * 9
        self.assertEqual(rag_eval.randomization_p(ninth), rag_eval.mcnemar_p(28, 2))
        self.assertEqual(rag_eval._attainable_p(ninth, 10000), 2 / 2 ** 30)
        # Two sizes: Monte Carlo beyond 20, as before.
        mixed = [1.0] * 29 + [0.5]
        self.assertEqual(rag_eval.randomization_p(mixed, resamples=999, rng=random.Random(5)),
                         1 / 1000)
        self.assertEqual(rag_eval._attainable_p(mixed, 999), 1 / 1000)

    def test_compare_and_gate_use_it(self):
        # 40 queries; the run loses 25 and gains 3: more than 20 differ, so
        # before this the p was Monte Carlo. McNemar: 2 * sum_{i<=3} C(28, i) / 2**28
        # = 2 * (1 + 28 + 378 + 3276) / 268435456.
        qrels = {"q%02d" % i: {"a": 1} for i in range(40)}
        base_run = {q: ["a"] if i < 30 else ["x"] for i, q in enumerate(sorted(qrels))}
        run = dict(base_run, **{"q%02d" % i: ["x"] for i in range(25)},
                   **{"q%02d" % i: ["a"] for i in range(30, 33)})
        before = rag_eval.evaluate(qrels, base_run, k=1, metrics="success")
        after = rag_eval.evaluate(qrels, run, k=1, metrics="success")
        want = 2 * (1 + 28 + 378 + 3276) / 2 ** 28
        row = rag_eval.compare(after, before).measures["success@1"]
        self.assertEqual((row.wins, row.losses), (3, 25))
        self.assertEqual(row.p_randomization, want)
        self.assertEqual(row.min_p, 2 / 2 ** 28)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "b.json")
            rag_eval.save_baseline(before, path)
            result = rag_eval.gate(after, rag_eval.load_baseline(path), mode="significant")
        self.assertFalse(result.passed)
        self.assertEqual(result.changes[0].p_value, want)

    def test_help_and_readme_say_so(self):
        code, out, _ = run_cli("--help")
        self.assertEqual(code, 0)
        self.assertIn("for 0/1 outcomes the test is the exact McNemar test",
                      " ".join(out.split()))
        self.assertIn("For 0/1 outcomes the test is the exact McNemar test",
                      read_doc("07-gate-and-statistics.md"))


def load_drift_reference():
    with open(os.path.join(DATA, "stats", "drift.json"), encoding="utf-8") as f:
        return json.load(f)


class JudgeDriftStatsTest(unittest.TestCase):
    """Judge drift statistics against sklearn, numpy, scipy and statsmodels
    (tests/peers/gen_drift.py) and by hand."""

    @classmethod
    def setUpClass(cls):
        cls.ref = load_drift_reference()

    def test_kappa_matches_sklearn(self):
        self.assertGreaterEqual(len(self.ref["kappa"]), 8)
        for case in self.ref["kappa"]:
            with self.subTest(case=case["name"]):
                agreement, kappa, labels, counts = rag_eval.cohen_kappa(case["stored"],
                                                                        case["current"])
                self.assertTrue(math.isclose(kappa, case["kappa"], rel_tol=1e-12,
                                             abs_tol=1e-15), (kappa, case["kappa"]))
                self.assertTrue(math.isclose(agreement, case["agreement"], rel_tol=1e-12))
                self.assertEqual((labels, counts), (case["labels"], case["confusion"]))

    def test_kappa_hand_worked(self):
        # stored 1 1 1 0 0 1 0 1 1 1, current 1 1 0 0 0 1 1 1 1 1 (n = 10):
        # table (stored rows, current columns) [[2, 1], [1, 6]]; agreement 8/10;
        # rows 3, 7 and columns 3, 7: chance p_e = (3*3 + 7*7) / 100 = 0.58;
        # kappa = (0.8 - 0.58) / (1 - 0.58) = 0.22 / 0.42 = 11/21.
        agreement, kappa, labels, counts = rag_eval.cohen_kappa(
            [1, 1, 1, 0, 0, 1, 0, 1, 1, 1], [1, 1, 0, 0, 0, 1, 1, 1, 1, 1])
        self.assertEqual((agreement, kappa, labels, counts), (0.8, 11 / 21, [0, 1],
                                                              [[2, 1], [1, 6]]))
        # All on one side flipped: agreement 0, p_e = (5*5 + 5*5)/100 = 0.5, kappa -1.
        self.assertEqual(rag_eval.cohen_kappa([0] * 5 + [1] * 5, [1] * 5 + [0] * 5)[:2],
                         (0.0, -1.0))
        # One and the same label throughout: kappa undefined (sklearn: NaN), never NaN here.
        self.assertEqual(rag_eval.cohen_kappa([3, 3], [3, 3]), (1.0, None, [3], [[2]]))
        self.assertEqual(rag_eval.cohen_kappa([], []), (None, None, [], []))
        with self.assertRaises(ValueError):
            rag_eval.cohen_kappa([1], [1, 0])

    def test_numeric_drift_matches_numpy_scipy_statsmodels(self):
        checked_p = 0
        for case in self.ref["numeric"]:
            with self.subTest(case=case["name"]):
                ids = ["i%03d" % i for i in range(len(case["stored"]))]
                d = rag_eval.field_drift("f", dict(zip(ids, case["stored"])),
                                         dict(zip(ids, case["current"])))
                for ours, want in ((d.mean_difference, case["mean_difference"]),
                                   (d.mean_absolute_difference,
                                    case["mean_absolute_difference"])):
                    self.assertTrue(math.isclose(ours, want, rel_tol=1e-12, abs_tol=1e-15),
                                    (ours, want))
                big = case["largest_change"]
                self.assertEqual(d.largest_change,
                                 (ids[big["index"]], big["from"], big["to"]))
                if "p" in case:
                    self.assertTrue(math.isclose(d.p, case["p"], rel_tol=1e-9), (d.p, case["p"]))
                    checked_p += 1
                if "bootstrap_percentile_95" in case:     # another generator: loose
                    for ours, want in zip(d.ci95, case["bootstrap_percentile_95"]):
                        self.assertLess(abs(ours - want), 0.005, (d.ci95, case))
                self.assertEqual(d.n, len(ids))
                self.assertIsNone(d.kappa)
        self.assertGreaterEqual(checked_p, 3)

    def test_field_drift_hand_worked(self):
        # Four items, stored 0.8 0.6 1.0 0.5, current 0.7 0.6 0.9 0.8:
        # differences -0.1, 0, -0.1, +0.3; mean +0.1 / 4 = 0.025; mean absolute
        # 0.5 / 4 = 0.125; largest change f4 0.5 -> 0.8. Sign flips of the three
        # non-zero differences: every one of the 8 patterns has |sum| >= 0.1
        # (0.5, 0.3, 0.3, 0.1 and their mirrors), so p = 1.
        d = rag_eval.field_drift("faithfulness", {"f1": 0.8, "f2": 0.6, "f3": 1.0, "f4": 0.5},
                                 {"f1": 0.7, "f2": 0.6, "f3": 0.9, "f4": 0.8})
        self.assertAlmostEqual(d.mean_difference, 0.025, places=15)
        self.assertAlmostEqual(d.mean_absolute_difference, 0.125, places=15)
        self.assertEqual(d.largest_change, ("f4", 0.5, 0.8))
        self.assertEqual(d.p, 1.0)
        self.assertEqual((d.stored_mean, d.current_mean), (0.725, 0.75))
        # A boolean field, 10 items as in the kappa case: McNemar on 1 up, 1 down: p = 1;
        # mean absolute difference 2/10 = 1 - agreement.
        stored = dict(zip("abcdefghij", [1, 1, 1, 0, 0, 1, 0, 1, 1, 1]))
        current = dict(zip("abcdefghij", [1, 1, 0, 0, 0, 1, 1, 1, 1, 1]))
        b = rag_eval.field_drift("refused", stored, current, labels=bool)
        self.assertEqual((b.agreement, b.kappa, b.labels, b.confusion),
                         (0.8, 11 / 21, (False, True), ((2, 1), (1, 6))))
        self.assertEqual((b.mean_absolute_difference, b.mean_difference, b.p), (0.2, 0.0, 1.0))
        self.assertEqual(b.largest_change, ("c", 1.0, 0.0))
        self.assertEqual(b.to_dict()["largest_change"], {"item": "c", "stored": 1.0,
                                                        "current": 0.0})
        self.assertTrue(b.to_dict()["categorical"])
        # 12 items all lost: McNemar 2 / 2**12.
        lost = rag_eval.field_drift("x", dict.fromkeys("abcdefghijkl", 1.0),
                                    dict.fromkeys("abcdefghijkl", 0.0))
        self.assertEqual(lost.p, 2 / 2 ** 12)
        self.assertEqual(lost.ci95, (-1.0, -1.0))
        same = rag_eval.field_drift("x", {"a": 0.5}, {"a": 0.5})
        self.assertEqual((same.largest_change, same.p, same.mean_absolute_difference),
                         (None, 1.0, 0.0))
        for bad in (({"a": 0.5}, {"b": 0.5}), ({}, {}), ({"a": math.nan}, {"a": 0.5})):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    rag_eval.field_drift("x", *bad)


# ---------------------------------------------------------------------------
# Comparison of two runs
# ---------------------------------------------------------------------------

class CompareTest(TempDir, unittest.TestCase):
    """Paired comparison of two runs; the statistics themselves are tested above."""

    QRELS = {"q%02d" % i: {"good": 1, "ok": 1} for i in range(12)}

    def reports(self, worse):
        """The reference finds 'good' first on every query; the run loses it on
        the first ``worse`` queries (rank 3 instead of 1)."""
        reference = {q: ["good", "ok", "x"] for q in self.QRELS}
        run = {q: (["x", "ok", "good"] if i < worse else ["good", "ok", "x"])
               for i, q in enumerate(sorted(self.QRELS))}
        return (rag_eval.evaluate(self.QRELS, run, k="1,3", metrics="mrr,recall"),
                rag_eval.evaluate(self.QRELS, reference, k="1,3", metrics="mrr,recall"))

    def test_numbers_by_hand(self):
        run, reference = self.reports(worse=8)
        row = rag_eval.compare(run, reference).measures["mrr@3"]
        # 8 queries fall from 1 to 1/2 (ok at rank 2), 4 tie: delta = -4/12.
        self.assertEqual((row.n, row.wins, row.losses, row.ties), (12, 0, 8, 4))
        self.assertAlmostEqual(row.delta, -0.5 * 8 / 12, places=15)
        self.assertAlmostEqual(row.mean, 1 - 4 / 12, places=15)
        # 8 equal non-zero differences: only the all-same-sign patterns are as
        # extreme, 2 of 2**8.
        self.assertEqual(row.p_randomization, 2 / 256)
        # t = mean / (sd / sqrt 12); sd^2 = (8 (1/6)^2 + 4 (1/3)^2) / 11 = (2/3) / 11
        t = (-1 / 3) / math.sqrt((2 / 3) / 11 / 12)
        self.assertAlmostEqual(row.p_ttest, rag_eval.t_two_sided_p(t, 11), places=15)
        self.assertTrue(-0.5 <= row.ci95[0] <= row.ci95[1] < 0.0)
        self.assertEqual(row.verdict, "significantly worse")
        self.assertEqual([q for q, _ in row.most_worse], ["q00", "q01", "q02", "q03", "q04"])
        recall = rag_eval.compare(run, reference).measures["recall@3"]
        self.assertEqual(recall.verdict, "no difference (equal on every query)")
        self.assertEqual(recall.p_randomization, 1.0)

    def test_holm_over_measures(self):
        run, reference = self.reports(worse=3)
        rows = rag_eval.compare(run, reference).measures
        # 3 equal drops: raw p = 2 / 2**3 for mrr@1, mrr@3 and recall@1; recall@3 is
        # unchanged (p = 1). Holm: 4 * 0.25 = 1, then the running maximum keeps 1.
        self.assertEqual({m: rows[m].p_randomization for m in run.measures},
                         {"mrr@1": 0.25, "mrr@3": 0.25, "recall@1": 0.25, "recall@3": 1.0})
        self.assertEqual({m: rows[m].p_holm for m in run.measures},
                         {"mrr@1": 1.0, "mrr@3": 1.0, "recall@1": 1.0, "recall@3": 1.0})

    def test_verdict_reads_the_holm_p(self):
        # 6 equal losses on 4 measures: raw p = 2 / 64 = 0.031 < 0.05, but Holm
        # multiplies the smallest by 4: 0.125 > 0.05, so nothing is significant.
        run, reference = self.reports(worse=6)
        row = rag_eval.compare(run, reference).measures["mrr@1"]
        self.assertEqual(row.p_randomization, 2 / 64)
        self.assertEqual(row.p_holm, 4 * 2 / 64)
        self.assertTrue(row.verdict.startswith("no detectable difference"), row.verdict)
        # At alpha = 0.125 exactly the Holm p is significant (<=, not <).
        row = rag_eval.compare(run, reference, alpha=0.125).measures["mrr@1"]
        self.assertEqual(row.verdict, "significantly worse")

    def test_most_moved_largest_first(self):
        qrels = {"q%d" % i: {"a": 1} for i in range(4)}
        run = {"q0": ["a"], "q1": ["x", "a"], "q2": ["x", "y", "a"], "q3": ["x", "y", "z"]}
        reference = {q: ["x", "y", "z"] for q in qrels}
        rows = rag_eval.compare(rag_eval.evaluate(qrels, run, k=3, metrics="mrr"),
                                rag_eval.evaluate(qrels, reference, k=3, metrics="mrr")).measures
        self.assertEqual(rows["mrr@3"].most_better, (("q0", 1.0), ("q1", 0.5), ("q2", 1 / 3)))
        self.assertEqual(rows["mrr@3"].most_worse, ())

    def test_small_n_says_what_it_cannot_see(self):
        run, reference = self.reports(worse=1)
        row = rag_eval.compare(run, reference).measures["mrr@1"]
        self.assertEqual(row.p_randomization, 1.0)   # one flip: both signs as extreme
        self.assertEqual(row.min_p, 1.0)
        # 4 measures, Holm: 4 * 2 / 2**n <= 0.05 needs n >= log2(160) = 7.3, so 8.
        self.assertEqual(row.verdict, "no detectable difference (only 1 query differs; a test "
                                      "at alpha=0.05 needs at least 8)")

    def test_minimum_detectable_difference(self):
        # 12 queries: 6 lose their hit at rank 1 (mrr@1 -1), 4 gain one (+1), 2 tie.
        qrels = {"q%02d" % i: {"a": 1} for i in range(12)}
        run = {q: (["x", "a"] if i < 6 else ["a"]) for i, q in enumerate(sorted(qrels))}
        reference = {q: (["x", "a"] if 6 <= i < 10 else ["a"]) for i, q in enumerate(sorted(qrels))}
        row = rag_eval.compare(rag_eval.evaluate(qrels, run, k=1, metrics="mrr"),
                               rag_eval.evaluate(qrels, reference, k=1, metrics="mrr")
                               ).measures["mrr@1"]
        self.assertEqual((row.wins, row.losses, row.ties), (4, 6, 2))
        self.assertEqual(row.min_p, 2 / 2 ** 10)
        # MDD = (z_.975 + z_.8) * sd / sqrt(n) with the differences' sample sd.
        diffs = [-1.0] * 6 + [1.0] * 4 + [0.0] * 2
        z = statistics.NormalDist()
        mdd = (z.inv_cdf(0.975) + z.inv_cdf(0.8)) * statistics.stdev(diffs) / math.sqrt(12)
        self.assertAlmostEqual(row.min_detectable, mdd, places=12)
        self.assertEqual(row.verdict, "no detectable difference (n too small to see less than "
                                      "%.4f)" % mdd)

    def test_deterministic_with_seed(self):
        run, reference = self.reports(worse=5)
        self.assertEqual(rag_eval.compare(run, reference, seed=7),
                         rag_eval.compare(run, reference, seed=7))
        self.assertEqual(rag_eval.compare(run, reference),
                         rag_eval.compare(run, reference, seed=0))
        rng = random.Random(1)
        qrels = {"q%02d" % i: {"a": 1} for i in range(30)}
        docs = ["a"] + ["x%d" % i for i in range(9)]
        shuffled = {q: rng.sample(docs, 10) for q in qrels}
        a = rag_eval.evaluate(qrels, shuffled, k=10, metrics="mrr")
        b = rag_eval.evaluate(qrels, {q: ["x1", "x2", "a"] for q in qrels}, k=10, metrics="mrr")
        self.assertNotEqual(rag_eval.compare(a, b, seed=0).measures["mrr@10"].ci95,
                            rag_eval.compare(a, b, seed=1).measures["mrr@10"].ci95)

    def test_cli_json(self):
        run, reference = self.reports(worse=8)
        qrels = self.write("q.json", json.dumps(self.QRELS))
        paths = []
        for name, report_run in (("run.json", {q: (["x", "ok", "good"] if i < 8 else
                                                    ["good", "ok", "x"])
                                                for i, q in enumerate(sorted(self.QRELS))}),
                                 ("ref.json", {q: ["good", "ok", "x"] for q in self.QRELS})):
            paths.append(self.write(name, json.dumps(report_run)))
        code, out, err = run_cli(qrels, paths[0], "--compare", paths[1], "--compare", paths[1],
                                 "--metrics", "mrr", "--k", "3", "--format", "json")
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual(len(doc["comparison"]), 2)
        entry = doc["comparison"][0]["measures"]["mrr@3"]
        for key in ("n", "mean", "reference_mean", "delta", "ci95", "p_randomization",
                    "p_ttest", "p_holm", "wins", "losses", "ties", "verdict"):
            self.assertIn(key, entry)
        self.assertEqual(entry["p_holm"], min(1.0, 2 * 2 / 256))   # two comparisons
        code2, out2, _ = run_cli(qrels, paths[0], "--compare", paths[1], "--compare", paths[1],
                                 "--metrics", "mrr", "--k", "3", "--format", "json")
        self.assertEqual(out, out2)
        code, out, err = run_cli(qrels, paths[0], "--compare", paths[1], "--metrics", "mrr",
                                 "--k", "3")
        self.assertIn("significantly worse", out)

    def test_compare_options(self):
        qrels = self.write("q.json", json.dumps({"q%02d" % i: {"a": 1} for i in range(30)}))
        rng = random.Random(3)
        run = self.write("run.json", json.dumps({"q%02d" % i: rng.sample(["a", "x"], 2)
                                                 for i in range(30)}))
        reference = self.write("ref.json", json.dumps({"q%02d" % i: (["b"] if i in range(5)
                                                                  else ["a"])
                                                       for i in range(30)}))

        def ci(*extra):
            code, out, err = run_cli(qrels, run, "--compare", reference, "--k", "1",
                                     "--metrics", "success", "--format", "json", *extra)
            self.assertEqual(code, 0, err)
            return json.loads(out)["comparison"][0]["measures"]["success@1"]
        default = ci()
        self.assertEqual(default, ci("--seed", "0"))
        self.assertNotEqual(default["ci95"], ci("--seed", "1")["ci95"])
        self.assertNotEqual(default["ci95"], ci("--resamples", "50")["ci95"])
        self.assertNotEqual(default["verdict"], ci("--alpha", "0.000001")["verdict"])

    def test_alpha_seed_and_resamples_are_checked(self):
        report = example_report()
        for kwargs in ({"alpha": math.nan}, {"alpha": 0}, {"alpha": -0.0}, {"alpha": 2},
                       {"alpha": "0.05"}, {"seed": "\ud800"}, {"seed": 1.5},
                       {"resamples": 0}, {"resamples": 10 ** 400}, {"resamples": 1.5}):
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(rag_eval.EvalError):
                    rag_eval.gate(report, {"recall@5": 0.9}, mode="significant", **kwargs)
                with self.assertRaises(rag_eval.EvalError):
                    rag_eval.compare(report, report, **kwargs)
        code, out, err = run_cli(*EXAMPLE_FILES, "--compare", example("run.json"),
                                 "--resamples", "100000000000")
        self.assertEqual(code, 2)
        self.assertIn("resamples must be at most 1000000", err)


class BadArgumentTest(unittest.TestCase):
    """Issue 22: every public function raises EvalError (one line, naming the
    argument) on bad input of any type, never OverflowError, TypeError or a
    ValueError of Python's own."""

    def test_each_reported_case_is_an_eval_error(self):
        r = example_report()
        cases = {
            "evaluate min_score": (lambda: rag_eval.evaluate(
                {"q": {"a": 1}}, {"q": {"a": 1.0}}, min_score=10 ** 400), "min_score"),
            "gate same": (lambda: rag_eval.gate(r, dict(r.mean), same=5), "same"),
            "compare_all [r]": (lambda: rag_eval.compare_all(r, [r]), "references"),
            "compare_all 5": (lambda: rag_eval.compare_all(r, 5), "references"),
            "compare reference_name": (lambda: rag_eval.compare(r, r, reference_name=5),
                                       "reference_name"),
            "holm None": (lambda: rag_eval.holm(None), "p-values"),
            "holm [None]": (lambda: rag_eval.holm([None]), "p-values"),
            "margin_of_error": (lambda: rag_eval.margin_of_error(["a"]), "values"),
            "queries_needed": (lambda: rag_eval.queries_needed(0.1, 10 ** 400), "tolerance"),
            "queries_needed sd": (lambda: rag_eval.queries_needed("0.1", 0.02), "sd"),
            "randomization_p": (lambda: rag_eval.randomization_p([.1, .2], resamples=1.5),
                                "resamples"),
            "randomization_p rng": (lambda: rag_eval.randomization_p([.1, .2], rng=5), "rng"),
            "bootstrap_ci rng": (lambda: rag_eval.bootstrap_ci([.1, .2], rng=None), "rng"),
            "bootstrap_ci resamples": (lambda: rag_eval.bootstrap_ci(
                [.1, .2], rng=random.Random(0), resamples="x"), "resamples"),
            "t_two_sided_p": (lambda: rag_eval.t_two_sided_p("2", 10), "t"),
            "min_detectable_difference": (lambda: rag_eval.min_detectable_difference(
                0.3, 10 ** 400), "n"),
            "paired_ttest": (lambda: rag_eval.paired_ttest(5), "diffs"),
        }
        for name, (call, named) in cases.items():
            with self.subTest(name):
                with self.assertRaises(rag_eval.EvalError) as caught:
                    call()
                self.assertIs(type(caught.exception), rag_eval.EvalError)
                self.assertIn(named, str(caught.exception))
                self.assertEqual(len(str(caught.exception).splitlines()), 1)

    def test_good_arguments_keep_their_values(self):
        r = example_report()
        # The checks refuse types, not values: same as a set is sorted, pairs may
        # be lists, booleans in a list of values count 0 and 1.
        self.assertTrue(rag_eval.gate(r, dict(r.mean), same={"b", "a"}).passed)
        self.assertEqual(rag_eval.compare_all(r, [["main", r]])[0].reference, "main")
        self.assertEqual(rag_eval.holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
        # sd of [1, 0, 1] is 1/sqrt(3); 1.96 * (1/sqrt(3)) / sqrt(3) = 0.6533
        self.assertAlmostEqual(rag_eval.margin_of_error([True, False, True]), 0.6533, places=4)
        self.assertEqual(rag_eval.queries_needed(0.4, 0.04), 385)
        self.assertEqual(rag_eval.randomization_p([1.0] * 5, resamples=1), 0.0625)
        self.assertEqual(rag_eval.evaluate({"q": {"a": 1}}, {"q": {"a": 0.5}},
                                           min_score=10 ** 2).mean["recall@5"], 0.0)
