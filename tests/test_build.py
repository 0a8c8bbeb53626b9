"""tools/build.py: rag_eval.py is the build of src/, and the build's checks
(each file compiles, no name defined twice, no use of a later file's name
that FORWARD does not allow) refuse what they promise to refuse."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "tools", "build.py")


def load_build():
    spec = importlib.util.spec_from_file_location("rag_eval_build", BUILD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = load_build()


def run_build(root, *args):
    return subprocess.run([sys.executable, os.path.join(root, "tools", "build.py"), *args],
                          capture_output=True, text=True, timeout=120)


class CommittedBuildTest(unittest.TestCase):
    def test_rag_eval_py_is_the_build_of_src(self):
        with open(os.path.join(ROOT, "rag_eval.py"), encoding="utf-8", newline="") as f:
            committed = f.read()
        self.assertEqual(build.build(), committed,
                         "rag_eval.py is stale: run python3 tools/build.py")

    def test_the_same_sources_give_the_same_bytes(self):
        self.assertEqual(build.build(), build.build())

    def test_the_generated_file_says_where_to_edit_and_names_every_source(self):
        text = build.build()
        self.assertTrue(text.startswith("#!/usr/bin/env python3\n# This file is generated"))
        for path in build.source_files():
            name = "src/" + os.path.basename(path)
            self.assertIn("\n# %s\n" % name, text)

    def test_the_module_docstring_survives_the_banners(self):
        import rag_eval
        self.assertTrue(rag_eval.__doc__.startswith("rag_eval: score the retrieval half"))


class CheckTest(unittest.TestCase):
    """`--check` in a temporary copy of the checkout: 0 on the copy as it is,
    1 naming the file after a one-character edit to any source file."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        for folder in ("src", "tools"):
            shutil.copytree(os.path.join(ROOT, folder), os.path.join(cls.tmp, folder),
                            ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(os.path.join(ROOT, "rag_eval.py"), cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_check_passes_on_the_copy(self):
        done = run_build(self.tmp, "--check")
        self.assertEqual((done.returncode, done.stderr), (0, ""))

    def edited(self, path):
        """The text of ``path`` with one letter of a comment changed."""
        with open(path, encoding="utf-8") as f:
            original = f.read()
        at = re.compile(r"# [A-Za-z]").search(original, original.index('"""', 4)).end() - 1
        return original, original[:at] + ("x" if original[at] != "x" else "y") + original[at + 1:]

    def write(self, path, text):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def test_a_one_character_edit_to_any_source_fails_the_check(self):
        with open(os.path.join(self.tmp, "rag_eval.py"), encoding="utf-8", newline="") as f:
            committed = f.read()
        for path in build.source_files(os.path.join(self.tmp, "src")):
            name = build.source_name(path)
            with self.subTest(source=name):
                original, edited = self.edited(path)
                self.write(path, edited)
                try:
                    built = build.build(os.path.join(self.tmp, "src"))
                finally:
                    self.write(path, original)
                self.assertEqual(build.stale_part(built, committed), name)

    def test_the_check_of_an_edited_copy_exits_1_naming_the_file(self):
        path = build.source_files(os.path.join(self.tmp, "src"))[-1]
        original, edited = self.edited(path)
        self.write(path, edited)
        try:
            done = run_build(self.tmp, "--check")
        finally:
            self.write(path, original)
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
        self.assertIn(build.source_name(path), done.stderr)
        self.assertIn("run python3 tools/build.py", done.stderr)

    def test_a_missing_rag_eval_py_fails_the_check(self):
        target = os.path.join(self.tmp, "rag_eval.py")
        shutil.move(target, target + ".away")
        try:
            done = run_build(self.tmp, "--check")
        finally:
            shutil.move(target + ".away", target)
        self.assertEqual(done.returncode, 1, done.stderr)


class LayeringTest(unittest.TestCase):
    """The checks on small made-up source trees."""

    def problems(self, *files, forward=None):
        return build.layering_problems(list(files), {} if forward is None else forward)

    def test_a_name_defined_in_two_files_is_refused(self):
        found = self.problems(("src/01_a.py", "def f():\n    pass\n"),
                              ("src/02_b.py", "f = 1\n"))
        self.assertEqual(found, ["src/02_b.py defines f, already defined in src/01_a.py"])

    def test_a_use_of_a_later_name_is_refused_unless_allowed(self):
        files = (("src/01_a.py", "def f():\n    return g()\n"),
                 ("src/02_b.py", "def g():\n    return 1\n"))
        self.assertEqual(len(self.problems(*files)), 1)
        self.assertIn("src/01_a.py uses g, which the later src/02_b.py defines",
                      self.problems(*files)[0])
        self.assertEqual(self.problems(*files, forward={("src/01_a.py", "g"): "02_b"}), [])

    def test_an_earlier_name_and_a_local_of_the_same_name_are_fine(self):
        files = (("src/01_a.py", "def g():\n    return 1\n"),
                 ("src/02_b.py", "def f(g):\n    return g + h()\n\ndef h():\n    return g()\n"))
        self.assertEqual(self.problems(*files), [])
        shadowed = (("src/01_a.py", "def f(g):\n    return g\n"),
                    ("src/02_b.py", "def g():\n    return 1\n"))
        self.assertEqual(self.problems(*shadowed), [])

    def test_an_allowance_no_longer_needed_is_refused(self):
        files = (("src/01_a.py", "x = 1\n"), ("src/02_b.py", "y = 2\n"))
        found = self.problems(*files, forward={("src/01_a.py", "y"): "02_b"})
        self.assertEqual(len(found), 1)
        self.assertIn("allows src/01_a.py to use y, which it no longer needs", found[0])

    def test_a_source_that_does_not_compile_or_has_no_docstring_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "01_a.py")
            for text, says in (('"""A."""\ndef f(:\n', "does not compile"),
                               ("x = 1\n", "must open with a docstring"),
                               ('"""A."""\r\nx = 1\r\n', "line breaks")):
                with self.subTest(says=says):
                    with open(path, "w", encoding="utf-8", newline="") as f:
                        f.write(text)
                    with self.assertRaises(build.SourceError) as caught:
                        build.read_source(path)
                    self.assertIn(says, str(caught.exception))

    def test_the_committed_sources_pass_every_check(self):
        files = []
        for path in build.source_files():
            _, code = build.read_source(path)
            files.append(("src/" + os.path.basename(path), code))
        self.assertEqual(build.layering_problems(files), [])


if __name__ == "__main__":
    unittest.main()
