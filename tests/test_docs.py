"""The commands README.md and the guides show as runnable work as they say.

A ```sh block is runnable: each of its commands (a line, or lines joined by a
trailing backslash; comment lines skipped) runs with /bin/sh in a fresh copy
of the checkout, one copy per page, in order (a later block may read what an
earlier one wrote), and must exit with the code its comment states (``# exit
1``), else 0.  `rag-eval` and `python3` run this interpreter on the copy's
rag_eval.py.  `python3 -m unittest` is the one command not run here: it is
this suite.  A bare ``` block right after a ```sh block is its output: each of
its lines must be a line of what the commands printed (one ending in " ..."
the start of one), so a page never shows output the tool does not print.
Other blocks (```text, ```json, ```yaml, ...) are not run.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.support import HERE

PAGES = (["README.md"] + sorted(os.path.relpath(p, HERE) for p in glob.glob(
    os.path.join(HERE, "docs", "*.md"))) + sorted(os.path.relpath(p, HERE) for p in glob.glob(
        os.path.join(HERE, "examples", "*", "README.md"))))
EXIT = re.compile(r"#\s*exit (\d+)")
NOT_RUN = re.compile(r"^python3 -m unittest\b")
COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "data", "*.egg-info", "build",
                                     "dist")


def blocks(text):
    """[(language, first line number, lines)] of the fenced blocks of a page."""
    out, lines, inside = [], text.split("\n"), None
    for number, line in enumerate(lines, 1):
        if inside is None and line.startswith("```"):
            inside = (line[3:].strip(), number + 1, [])
        elif inside is not None and line.startswith("```"):
            out.append(inside)
            inside = None
        elif inside is not None:
            inside[2].append(line)
    return out


def commands(lines):
    """The commands of a ```sh block: continuation lines joined, comment lines
    and blank lines left out."""
    out, pending = [], ""
    for line in lines:
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.strip() and not pending.lstrip().startswith("#"):
            out.append(pending.strip())
        pending = ""
    return out


def expected_exit(command):
    found = EXIT.search(command)
    return int(found.group(1)) if found else 0


class DocsTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def shim(self, name, target):
        path = os.path.join(self.bin, name)
        with open(path, "w") as handle:
            handle.write('#!/bin/sh\nexec "%s" %s"$@"\n' % (sys.executable, target))
        os.chmod(path, 0o755)

    def copy_of_the_checkout(self, page):
        folder = os.path.join(self.tmp, re.sub(r"\W", "_", page))
        shutil.copytree(HERE, folder, ignore=COPY_IGNORE)
        return folder

    def run_page(self, page):
        """(ran, failures) of one page's runnable blocks."""
        with open(os.path.join(HERE, page), encoding="utf-8") as handle:
            found = blocks(handle.read())
        runnable = [i for i, (language, _, _) in enumerate(found) if language == "sh"]
        if not runnable:
            return 0, []
        folder = self.copy_of_the_checkout(page)
        self.shim("python3", "")
        self.shim("rag-eval", '"%s" ' % os.path.join(folder, "rag_eval.py"))
        environ = dict(os.environ, PATH=self.bin + os.pathsep + os.environ.get("PATH", ""),
                       RAG_EVAL_PLAIN=os.environ.get("RAG_EVAL_PLAIN", ""))
        ran, failures = 0, []
        for i in runnable:
            _, first, lines = found[i]
            printed = []
            for command in commands(lines):
                if NOT_RUN.match(command):
                    continue
                done = subprocess.run(["/bin/sh", "-c", command], cwd=folder, env=environ,
                                      capture_output=True, text=True, timeout=300)
                ran += 1
                want = expected_exit(command)
                if done.returncode != want:
                    failures.append("%s:%d: exit %d, the page says %d: %s\n%s" % (
                        page, first, done.returncode, want, command,
                        (done.stderr or done.stdout).strip()[-600:]))
                printed += (done.stdout + done.stderr).splitlines()
            if i + 1 < len(found) and found[i + 1][0] == "":
                failures += self.missing_lines(page, found[i + 1], printed)
        return ran, failures

    @staticmethod
    def missing_lines(page, block, printed):
        _, first, shown = block
        out = []
        for number, line in enumerate(shown, first):
            line = line.rstrip()
            if not line.strip() or line.strip() == "...":
                continue
            if line.endswith(" ..."):
                ok = any(p.startswith(line[:-4]) for p in printed)
            else:
                ok = line in printed
            if not ok:
                out.append("%s:%d: shown as output, not printed: %s" % (page, number, line))
        return out

    def test_every_runnable_command_on_every_page(self):
        self.assertIn("README.md", PAGES)
        self.assertGreater(len(PAGES), 10)
        total, failures = 0, []
        for page in PAGES:
            ran, found = self.run_page(page)
            total += ran
            failures += found
        self.assertGreater(total, 20)       # the pages do show commands
        self.assertEqual(failures, [], "\n\n".join(failures))

    def test_the_runner_reads_blocks_as_documented(self):
        text = ("a\n```sh\nrag-eval x \\\n  --y   # exit 1\n# a comment\n\nrag-eval z\n```\n"
                "```\nout\n```\n```text\npip install .\n```\n")
        found = blocks(text)
        self.assertEqual([(lang, first) for lang, first, _ in found],
                         [("sh", 3), ("", 10), ("text", 13)])
        self.assertEqual(commands(found[0][2]), ["rag-eval x    --y   # exit 1", "rag-eval z"])
        self.assertEqual([expected_exit(c) for c in commands(found[0][2])], [1, 0])
        self.assertEqual(DocsTest.missing_lines("p", ("", 1, ["out", "long ...", "gone"]),
                                                ["out", "long line"]),
                         ["p:3: shown as output, not printed: gone"])


if __name__ == "__main__":
    unittest.main()
