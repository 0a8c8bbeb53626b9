"""Measure names: every registered measure's canonical name, how names and their
parameters are parsed, refused and printed, and the README's list of them.
"""

import os
import re
import sys
import unittest

import rag_eval
from tests.support import read_doc, HERE, run_cli, EXAMPLE_FILES


# ---------------------------------------------------------------------------
# Measure names
# ---------------------------------------------------------------------------

class MeasureNamesTest(unittest.TestCase):
    @staticmethod
    def every_name():
        """Canonical names of every registered measure: each cutoff state it
        allows, with its defaults and with every parameter at a non-default."""
        for name, spec in sorted(rag_eval._REGISTRY.items()):
            cutoffs = ("@1", "@10", "@all") if spec.cutoff else ("",)
            units = spec.options["unit"].choices if "unit" in spec.options else ("id",)
            base = "" if "id" in units else "unit=%s" % units[0]
            if "field" in spec.params:
                base = "field=faithfulness"     # a required name
            others = {"": base}
            for key, param in spec.params.items():
                if param.kind is str and not param.choices:
                    continue    # the required name, in base
                value = next((c for c in param.choices if c != param.default),
                             None if param.choices else 0.7 if param.default is None
                             else param.default + 2)
                others[key] = ",".join(sorted(filter(None, [
                    base, "%s=%s" % (key, rag_eval._value_text(value))])))
            def joined(*parts):
                return ",".join(sorted(filter(None, (base,) + parts)))
            for unit in units[1:] if "id" in units else ():
                others[unit] = joined("unit=%s" % unit)
            if "evidence" in units:
                others["cover"] = joined("cover=0.5", "unit=evidence")
            for cutoff in cutoffs:
                for inner in others.values():
                    yield name + ("(%s)" % inner if inner else "") + cutoff
            if spec.cutoff:
                yield "%s(%s)" % (name, ",".join(sorted(filter(None, ["budget=300", base]))))

    def test_hand_built_measures_are_checked(self):
        # Found by review: a Measure built by hand went in unchecked (tracebacks, and
        # baselines keyed by names that load_baseline refuses).
        M = rag_eval.Measure
        for bad in (M("recall", None), M("nosuch", 5), M("recall", "5"), M("recall", 0),
                    M("recall", 5, (("rel", "x"),)), M("rprec", 5), M("recall", 5, (("rel", 1),))):
            with self.subTest(measure=bad):
                with self.assertRaisesRegex(rag_eval.EvalError, "not a valid measure"):
                    rag_eval.evaluate({"q": {"a": 1}}, {"q": ["a"]}, measures=[bad])
        good = rag_eval.parse_measure("recall(rel=2)@all")
        self.assertEqual(rag_eval.resolve_measures([good]), (good,))
        self.assertEqual(rag_eval.resolve_measures(metrics="mrr", k=3),
                         (rag_eval.parse_measure("mrr@3"),))

    def test_a_cutoff_never_stands_for_all(self):
        # The measure functions receive @all as sys.maxsize: no cutoff may equal it.
        for argv in (("--k", str(sys.maxsize)), ("--metrics", "precision@%d" % sys.maxsize)):
            with self.subTest(argv=argv):
                code, out, err = run_cli(*EXAMPLE_FILES, *argv)
                self.assertEqual(code, 2)
                self.assertIn("(write @all for the whole ranking)", err)

    def test_round_trip(self):
        names = list(self.every_name())
        self.assertIn("ndcg(gain=linear)@all", names)
        self.assertIn("bpref(rel=3)", names)
        for text in names + ["map(rel=3)@100", "context_precision(rel=2)@3"]:
            with self.subTest(text=text):
                self.assertEqual(str(rag_eval.parse_measure(text)), text)
                m = rag_eval.parse_measure(text)
                self.assertEqual(rag_eval.parse_measure(str(m)), m)

    def test_all_and_no_cutoff_are_two_states(self):
        at_all, none = rag_eval.parse_measure("map@all"), rag_eval.parse_measure("rprec")
        self.assertIs(at_all.k, rag_eval.ALL)
        self.assertIsNone(none.k)
        self.assertNotEqual(rag_eval.parse_measure("mrr@all"), rag_eval.Measure("mrr", None))
        with self.assertRaisesRegex(rag_eval.EvalError, "takes no cutoff"):
            rag_eval.parse_measure("rprec@all")
        self.assertEqual(str(rag_eval.Measure("mrr", rag_eval.ALL)), "mrr@all")

    def test_bare_names_expand_but_all_and_cutoff_free_do_not(self):
        names = [str(m) for m in rag_eval.resolve_measures(
            "map,map@all,recip_rank,Rprec,bpref,bpref", k="1,5")]
        self.assertEqual(names, ["map@1", "map@5", "map@all", "mrr@all", "rprec", "bpref"])

    def test_numeric_parameters_render_their_shortest_repr(self):
        # A float parameter parses to a float and renders as repr: 0.50 and .5
        # are both 0.5; its default (1) is left out.
        for text in ("recall(cover=0.50,unit=evidence)@5", "recall(unit=evidence,cover=.5)@5"):
            self.assertEqual(str(rag_eval.parse_measure(text)),
                             "recall(cover=0.5,unit=evidence)@5")
        self.assertEqual(str(rag_eval.parse_measure("recall(cover=1,unit=evidence)@5")),
                         "recall(unit=evidence)@5")
        for bad in ("nan", "-1", "1_0", "1.5", "any"):
            with self.subTest(cover=bad):
                with self.assertRaisesRegex(rag_eval.EvalError, "a number from 0 to 1"):
                    rag_eval.parse_measure("recall(cover=%s,unit=evidence)@5" % bad)

    def test_registry_declares_everything(self):
        for name, spec in rag_eval._REGISTRY.items():
            with self.subTest(measure=name):
                self.assertRegex(name, r"^[a-z][a-z0-9_]*$")
                self.assertIn(spec.population, rag_eval.POPULATIONS)
                self.assertTrue(spec.summary)
                for key, param in spec.params.items():
                    self.assertTrue(param.meaning, key)
                    if param.kind is str and not param.choices:     # a required name
                        self.assertIsNone(param.default)
                        continue
                    if param.default_text is not None:   # worked out from the data
                        self.assertIsNone(param.default)
                        continue
                    self.assertIsInstance(param.default, param.kind)
        self.assertFalse(hasattr(rag_eval, "_TREC_NAMES") or hasattr(rag_eval, "_PARAM_CHOICES"))

    def test_a_name_may_hold_digits_after_its_first_character(self):
        @rag_eval.measure("f1_test", summary="test only", cutoff=False)
        def f1_test(ranked, judged):
            return 1.0
        try:
            self.assertEqual(rag_eval.parse_measure("f1_test"), rag_eval.Measure("f1_test", None))
        finally:
            del rag_eval._REGISTRY["f1_test"], rag_eval._SPELLINGS["f1_test"]

    def test_list_measures_prints_the_registry(self):
        code, out, err = run_cli("--list-measures")
        self.assertEqual((code, err), (0, ""))
        self.assertEqual(out, rag_eval.describe_measures())
        self.assertEqual(run_cli("--list-measures")[1], out)     # deterministic
        for name, spec in rag_eval._REGISTRY.items():
            self.assertIn("\n%s%s\n  %s\n" % (name, "@k" if spec.cutoff else " (no cutoff)",
                                                spec.summary), out)
            for spelling in spec.peers:
                self.assertIn("%s %s" % (spelling.tool, spelling.text), out)
            for key, param in spec.params.items():
                self.assertIn("%s: %s, %s" % (key, param.kind.__name__, "required" if
                                              param.required else "default %s" % (
                                                  param.default_text or param.default)), out)
        self.assertIn("recip_rank (= mrr@all)", out)

    def test_readme_and_docstring_list_every_measure(self):
        with open(os.path.join(HERE, "README.md"), encoding="utf-8") as handle:
            readme = handle.read()
        section = readme.split("\n## Measures\n", 1)[1].split("\n### ", 1)[0]
        listed = set(re.findall(r"^\| `([a-z][a-z0-9_]*)[@(`]", section, re.M))
        self.assertEqual(listed, set(rag_eval.available_measures()))
        docstring = rag_eval.__doc__.split("Measures", 1)[1].split("Quick start", 1)[0]
        listed = set(re.findall(r"^    ([a-z][a-z0-9_]*)(?:@k| )", docstring, re.M))
        self.assertEqual(listed, set(rag_eval.available_measures()))

    def test_how_to_add_a_measure_is_written_down(self):
        readme = read_doc("02-measures.md")
        self.assertIn("### How to add a measure", readme)
        for step in ("@measure(", "hand_worked.json", "gen_peers.py"):
            self.assertIn(step, readme.split("### How to add a measure", 1)[1].split("\n## ")[0])

    def test_a_clashing_spelling_is_refused(self):
        with self.assertRaisesRegex(TypeError, "already means"):
            @rag_eval.measure("clash_test", summary="test only",
                              peers=[rag_eval.peer("ranx", "hit_rate")])
            def clash_test(ranked, judged, k):
                return 0.0
        self.assertNotIn("clash_test", rag_eval._REGISTRY)
        rag_eval._SPELLINGS.pop("clash_test", None)

    def test_defaults_left_out(self):
        self.assertEqual(str(rag_eval.parse_measure("ndcg(gain=exponential)@5")), "ndcg@5")
        self.assertEqual(str(rag_eval.parse_measure("recall(rel=1)@5")), "recall@5")

    def test_peer_spellings(self):
        table = {
            "nDCG@10": "ndcg(gain=linear)@10", "R@100": "recall@100", "RR@10": "mrr@10",
            "P@5": "precision@5", "AP@10": "map@10", "Success@5": "success@5",
            "Judged@10": "judged@10", "P(rel=2)@5": "precision(rel=2)@5",
            "ndcg_cut_10": "ndcg(gain=linear)@10", "recall_100": "recall@100",
            "P_5": "precision@5", "map_cut_10": "map@10", "success_10": "success@10",
            "nDCG(dcg=exp-log2)@10": "ndcg@10", "nDCG(dcg=log2)@5": "ndcg(gain=linear)@5",
            "hit_rate@3": "success@3", "MRR@10": "mrr@10", "recip_rank": "mrr@all",
            "nDCG(dcg=cubic)@10": None, "Rprec": "rprec", "r-precision": "rprec",
            "bpref": "bpref", "Bpref(rel=2)": "bpref(rel=2)", "ndcg_burges@3": "ndcg@3",
            "recip_rank@5": None, "Rprec@5": None, "P_5@5": None, "hits@5": None,
            "map": None, "ndcg": None,
        }
        for text, canonical in table.items():
            with self.subTest(text=text):
                if canonical is None:
                    with self.assertRaises(rag_eval.EvalError):
                        rag_eval.parse_measure(text)
                else:
                    self.assertEqual(str(rag_eval.parse_measure(text)), canonical)

    def test_unknown_measure_suggests(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "did you mean 'recall'"):
            rag_eval.parse_measure("recal@5")

    def test_bad_names(self):
        for text in ("ndcg(gain=cubic)@5", "recall(foo=1)@5", "recall@0", "recall@x",
                     "recall(rel=0)@5", "ndcg(rel=2)@5", "recall", "@5", ""):
            with self.subTest(text=text):
                with self.assertRaises(rag_eval.EvalError):
                    rag_eval.parse_measure(text)

    def test_parameter_given_twice(self):
        with self.assertRaisesRegex(rag_eval.EvalError, "'rel' is given twice"):
            rag_eval.parse_measure("recall(rel=2,rel=3)@5")
        with self.assertRaisesRegex(rag_eval.EvalError, "'gain' is given twice"):
            rag_eval.parse_measure("nDCG(dcg=log2,gain=linear)@5")

    def test_rel_and_gain_defaults_fill_in(self):
        names = [str(m) for m in rag_eval.resolve_measures("recall,ndcg,judged", k=5, rel=2,
                                                            gain="linear")]
        self.assertEqual(names, ["recall(rel=2)@5", "ndcg(gain=linear)@5", "judged@5"])

    def test_commas_inside_parentheses(self):
        names = [str(m) for m in rag_eval.resolve_measures("ndcg(gain=linear),mrr", k="1,3")]
        self.assertEqual(names, ["ndcg(gain=linear)@1", "ndcg(gain=linear)@3", "mrr@1", "mrr@3"])
