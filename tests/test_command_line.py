"""The command line: action.yml's, the README workflow's and examples/ci/'s command
lines run as GitHub runs them, each option and its refusals, and internal errors (exit 2,
one line).  Exit codes in a real process: test_rag_eval.py.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import unittest

import rag_eval
from tests.support import (read_doc, HERE, run_cli, TempDir, example, EXAMPLE_FILES, read_text,
                           jsonl)


class MiniYaml:
    """A reader for the YAML subset action.yml and the README's workflow use
    (PyYAML is not a dependency): nested mappings by indentation, lists of
    mappings (``- key: value``), plain or quoted scalars, ``|`` blocks, comment
    lines."""

    def __init__(self, text):
        self.lines, self.i = text.splitlines(), 0

    def parse(self):
        return self.block(0)

    def skip(self):
        while self.i < len(self.lines) and (not self.lines[self.i].strip()
                                            or self.lines[self.i].lstrip().startswith("#")):
            self.i += 1

    def indent(self):
        line = self.lines[self.i]
        return len(line) - len(line.lstrip(" "))

    def block(self, indent):
        self.skip()
        if self.i == len(self.lines) or self.indent() < indent:
            return None
        if self.lines[self.i].lstrip().startswith("- "):
            return self.sequence(self.indent())
        return self.mapping(self.indent())

    def mapping(self, indent, first=None):
        out = {}
        while True:
            if first is not None:
                text, first = first, None
            else:
                self.skip()
                if (self.i == len(self.lines) or self.indent() != indent
                        or self.lines[self.i].lstrip().startswith("- ")):
                    return out
                text = self.lines[self.i].strip()
                self.i += 1
            if text.endswith(":"):
                out[text[:-1]] = self.block(indent + 1)
                continue
            key, sep, value = text.partition(": ")
            assert sep, "not a key: value line: %r" % text
            value = re.sub(r"\s+#.*$", "", value) if not value.startswith(("'", '"')) else value
            out[key] = self.literal(indent) if value == "|" else self.scalar(value)

    def sequence(self, indent):
        out = []
        while True:
            self.skip()
            if (self.i == len(self.lines) or self.indent() != indent
                    or not self.lines[self.i].lstrip().startswith("- ")):
                return out
            text = self.lines[self.i].strip()[2:]
            self.i += 1
            out.append(self.mapping(indent + 2, first=text))

    def literal(self, indent):
        body = []
        while self.i < len(self.lines) and (not self.lines[self.i].strip()
                                            or self.indent() > indent):
            body.append(self.lines[self.i])
            self.i += 1
        while body and not body[-1].strip():
            body.pop()
        margin = min(len(line) - len(line.lstrip(" ")) for line in body if line.strip())
        return "\n".join(line[margin:] for line in body) + "\n"

    @staticmethod
    def scalar(value):
        if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
            return value[1:-1]
        return value


class GithubSteps:
    """Mixin: a workflow or action step run as GitHub runs it, in self.tmp."""

    def run_step(self, step, env=None, cwd=None):
        """(exit code, stderr, job summary) of one step run as GitHub runs it: its
        script in a file, given to its shell (``bash``: bash --noprofile --norc -eo
        pipefail; ``python3 {0}``); its outputs in self.outputs."""
        summary = os.path.join(self.tmp, "summary.md")
        output = os.path.join(self.tmp, "github_output")
        script = os.path.join(self.tmp, "step_script")
        for path in (summary, output):      # each step gets its own, as on GitHub
            if os.path.exists(path):
                os.remove(path)
        with open(script, "w") as handle:
            handle.write(step["run"])
        environ = dict(os.environ, GITHUB_STEP_SUMMARY=summary, GITHUB_OUTPUT=output,
                       GITHUB_ACTION_PATH=HERE, **(env or {}))
        shell = step.get("shell", "bash")
        command = (["bash", "--noprofile", "--norc", "-eo", "pipefail", script] if shell == "bash"
                   else [word.replace("{0}", script) for word in shell.split()])
        done = subprocess.run(command, env=environ, cwd=cwd or self.tmp, capture_output=True,
                              text=True, timeout=120)
        self.outputs = self.read_outputs(output)
        return done.returncode, done.stderr, read_text(summary) if os.path.exists(summary) else ""

    @staticmethod
    def read_outputs(path):
        """{name: value} of a $GITHUB_OUTPUT file (name=value or name<<MARK lines)."""
        lines, out = (read_text(path).split("\n") if os.path.exists(path) else []), {}
        while lines:
            line = lines.pop(0)
            if "<<" in line:
                name, mark = line.split("<<", 1)
                end = lines.index(mark)
                out[name], lines = "\n".join(lines[:end]), lines[end + 1:]
            elif line:
                name, _, value = line.partition("=")
                out[name] = value
        return out


@unittest.skipUnless(shutil.which("bash") and shutil.which("python3"), "needs bash and python3")
class ActionTest(GithubSteps, TempDir, unittest.TestCase):
    """action.yml and the README's GitHub Actions job: their command lines,
    run as GitHub runs them (the action's script by python3, the job's by bash
    -eo pipefail) on the bundled examples."""

    def test_mini_yaml_reader(self):
        self.assertEqual(MiniYaml('a: "1"\nb:\n  - c: x  # note\n    d: |\n      one\n'
                                  '        two\n\n  - e: y\nf: z\n').parse(),
                         {"a": "1", "b": [{"c": "x", "d": "one\n  two\n"}, {"e": "y"}],
                          "f": "z"})

    def action_step(self, **inputs):
        action = MiniYaml(read_text(os.path.join(HERE, "action.yml"))).parse()
        self.assertEqual(action["runs"]["using"], "composite")
        self.assertEqual(set(action["inputs"]),
                         {"qrels", "run", "baseline", "chunks", "scores", "args", "options",
                          "report", "python-version"})
        values = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
        values.update({name.replace("_", "-"): value for name, value in inputs.items()})
        steps = action["runs"]["steps"]
        # Python is set up only when python-version asks (its default is empty).
        self.assertEqual(steps[0]["uses"], "actions/setup-python@v5")
        self.assertEqual(steps[0]["if"], "inputs.python-version != ''")
        self.assertEqual(action["inputs"]["python-version"]["default"], "")
        self.assertEqual(steps[0]["with"], {"python-version": "${{ inputs.python-version }}"})
        step = next(s for s in steps if "run" in s)
        self.assertEqual(step["shell"], "python3 {0}")
        self.assertNotIn("${{", step["run"])       # inputs reach the script as variables
        self.assertEqual({name: spec["value"] for name, spec in action["outputs"].items()},
                         {name: "${{ steps.%s.outputs.%s }}" % (step["id"], name)
                          for name in ("verdict", "exit-code", "report")})

        def filled(text):
            return re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: values[m.group(1)], text)
        env = {name: filled(value) for name, value in step["env"].items()}
        self.assertNotIn("${{", "".join(env.values()))
        return step, env

    def gate_with(self, code, **inputs):
        """The action run on these inputs (the bundled example unless given):
        its exit code must be ``code``; (stderr, summary, the JSON report or None)."""
        inputs = dict(dict(qrels=example("qrels.json"), run=example("run.json"),
                           baseline=example("baseline.json")), **inputs)
        step, env = self.action_step(**inputs)
        got, err, summary = self.run_step(step, env)
        self.assertEqual(got, code, err)
        self.assertEqual(self.outputs["exit-code"], str(code))
        self.assertEqual(self.outputs["verdict"], ["passed", "failed", "error"][code])
        path = os.path.join(self.tmp, inputs.get("report", "rag_eval-report.json"))
        self.assertEqual(self.outputs["report"],
                         "" if code == 2 else inputs.get("report", "rag_eval-report.json"))
        return err, summary, json.loads(read_text(path)) if code != 2 else None

    def test_the_action_fails_the_bundled_example_and_writes_the_summary(self):
        report = os.path.join(self.tmp, "report.json")
        err, summary, doc = self.gate_with(1, report=report)
        self.assertTrue(summary.startswith("\n**Gate failed**: 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5\n"),
                        summary[:200])
        self.assertFalse(doc["gate"]["passed"])
        self.assertEqual(doc["per_query"]["q3"]["mrr@5"], 1.0)

    def test_the_action_options_input(self):
        err, summary, doc = self.gate_with(0, options="--max-drop 0.1 --seed 3")
        self.assertTrue(summary.startswith("\n**Gate passed**\n"), summary[:200])
        self.assertIn("Gate vs %s (max drop 0.1):" % example("baseline.json").replace("_", "\\_"),
                      summary)
        self.assertTrue(doc["gate"]["passed"])

    def test_options_are_split_as_a_shell_splits_them(self):
        # Issue 23: split on spaces, quotes stayed in the words: --meta "who=a b" gave
        # '"who=a' and a stray 'b"'.  Now as shlex (a shell's words, no shell run).
        err, summary, doc = self.gate_with(
            0, options="--max-drop 0.1 --meta \"who=a b\" --meta 'note=$HOME `id`'")
        self.assertEqual(doc["meta"], {"who": "a b", "note": "$HOME `id`"})

    def test_options_are_never_file_name_patterns(self):
        # Found by review: the unquoted $RAG_EVAL_OPTIONS expanded --meta who=* to file names.
        self.write("who=one", "")
        self.write("who=two", "")
        err, summary, doc = self.gate_with(0, options="--max-drop 0.1 --meta who=*")
        self.assertEqual(doc["meta"], {"who": "*"})

    def test_an_unclosed_quote_in_options_is_an_input_error(self):
        err, summary, doc = self.gate_with(2, options="--meta 'who=a")
        self.assertEqual(err, "rag-eval: error: the options input: No closing quotation (or "
                              "give one argument a line in args)\n")
        self.assertEqual(summary, "\n**rag-eval error**: the options input: No closing "
                                  "quotation (or give one argument a line in args)\n\n")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "rag_eval-report.json")))

    def rechunk(self, name):
        return os.path.join(HERE, "examples", "rechunk", name)

    def test_the_args_input_one_argument_a_line(self):
        # Issue 23: options "--metrics 'recall(unit=evidence)'" was exit 2 (the quotes
        # reached rag-eval).  The README quickstart's gate, through the action: chunker
        # A against chunker B's baseline fails on the four measures the README shows.
        base = os.path.join(self.tmp, "baseline-b.json")
        code, out, err = run_cli(self.rechunk("labels.jsonl"), self.rechunk("run-b.jsonl"),
                                 "--chunks", self.rechunk("chunks-b.jsonl"), "--metrics",
                                 "recall(unit=evidence),mrr(unit=evidence)", "--k", "3,5",
                                 "--save-baseline", base)
        self.assertEqual(code, 0, err)
        common = dict(qrels=self.rechunk("labels.jsonl"), baseline=base,
                      args="--metrics\n  recall(unit=evidence),mrr(unit=evidence)  \n\n"
                           "--k\n3,5\n")
        err, summary, doc = self.gate_with(1, run=self.rechunk("run-a.jsonl"),
                                           chunks=self.rechunk("chunks-a.jsonl"), **common)
        self.assertEqual([r["measure"] for r in doc["gate"]["regressions"]],
                         ["mrr(unit=evidence)@3", "mrr(unit=evidence)@5",
                          "recall(unit=evidence)@3", "recall(unit=evidence)@5"])
        self.assertEqual(doc["inputs"]["chunks"]["path"], self.rechunk("chunks-a.jsonl"))
        err, summary, doc = self.gate_with(0, run=self.rechunk("run-b.jsonl"),
                                           chunks=self.rechunk("chunks-b.jsonl"), **common)
        # options and args together, the quoted form as a shell reads it.
        err, summary, doc = self.gate_with(
            0, run=self.rechunk("run-b.jsonl"), chunks=self.rechunk("chunks-b.jsonl"),
            qrels=self.rechunk("labels.jsonl"), baseline=base,
            options="--metrics 'recall(unit=evidence),mrr(unit=evidence)'", args="--k\n3,5")
        self.assertEqual(sorted(doc["mean"]), ["mrr(unit=evidence)@3", "mrr(unit=evidence)@5",
                                               "recall(unit=evidence)@3",
                                               "recall(unit=evidence)@5"])

    def test_the_scores_input_one_file_a_line(self):
        # Judge scores beside the bundled example: ok 0.9, 0.5, 1.0, 0.7 (mean 0.775) and
        # good 1, 0, 1, 1 (0.75), saved as the baseline, then gated: unchanged, passed.
        ok = self.write("ok.jsonl", jsonl(*({"query_id": q, "ok": v} for q, v in
                                             zip(("q1", "q2", "q3", "q4"), (0.9, 0.5, 1.0, 0.7)))))
        good = self.write("good.jsonl", jsonl(*({"query_id": q, "good": v} for q, v in
                                                zip(("q1", "q2", "q3", "q4"), (1, 0, 1, 1)))))
        base = os.path.join(self.tmp, "base.json")
        code, out, err = run_cli(*EXAMPLE_FILES, "--scores", ok, "--scores", good,
                                 "--save-baseline", base)
        self.assertEqual(code, 0, err)
        err, summary, doc = self.gate_with(0, baseline=base, scores="%s\n%s\n" % (ok, good))
        self.assertEqual([i["path"] for i in doc["scores"]["inputs"]], [ok, good])
        self.assertAlmostEqual(doc["mean"]["score(field=ok)"], 0.775, places=15)
        self.assertEqual(doc["mean"]["score(field=good)"], 0.75)

    def test_an_input_error_is_verdict_error_and_no_report(self):
        err, summary, doc = self.gate_with(2, baseline=os.path.join(self.tmp, "none.json"))
        self.assertIn("none.json: no such baseline file", err)
        self.assertTrue(summary.startswith("\n**rag-eval error**: "), summary)

    def test_the_readme_job_as_written(self):
        readme = read_doc("08-reports-and-ci.md")
        section = readme.split("\n## Use it as a CI step (GitHub Actions)\n", 1)[1]
        workflow = MiniYaml(re.search(r"```yaml\n(.*?)```", section, re.S).group(1)).parse()
        steps = workflow["jobs"]["rag-eval"]["steps"]
        self.assertEqual([s.get("uses") for s in steps[:2]],
                         ["actions/checkout@v4", "actions/setup-python@v5"])
        gate_step = next(s for s in steps if s.get("name") == "Retrieval quality gate")
        keep = steps[-1]
        self.assertEqual((keep["uses"], keep["if"]), ("actions/upload-artifact@v4", "always()"))
        self.assertIn("-o %s " % keep["with"]["path"], gate_step["run"])
        self.assertIn("--step-summary", gate_step["run"])
        # The repository the job checks out: rag_eval.py copied in, the data under eval/.
        os.mkdir(os.path.join(self.tmp, "eval"))
        shutil.copy(os.path.join(HERE, "rag_eval.py"), self.tmp)
        shutil.copy(example("run.json"), self.tmp)         # what the retriever step writes
        for name in ("qrels.json", "baseline.json"):
            shutil.copy(example(name), os.path.join(self.tmp, "eval"))
        code, err, summary = self.run_step(gate_step)
        self.assertEqual(code, 1, err)
        self.assertTrue(summary.startswith("\n**Gate failed**: 2 regressions (undecided: unjudged ids could explain them): mrr@5, recall@5\n"))
        doc = json.loads(read_text(os.path.join(self.tmp, keep["with"]["path"])))
        self.assertFalse(doc["gate"]["passed"])


@unittest.skipUnless(shutil.which("bash") and shutil.which("git"), "needs bash and git")
class CiRecipeTest(GithubSteps, TempDir, unittest.TestCase):
    """examples/ci/ (issue 23): the pull-request gate and the baseline kept on
    main, their steps' command lines run as GitHub runs them, in a clone of a
    repository laid out as the workflows expect (rag_eval.py, eval/qrels.json,
    eval/baseline.json: the bundled example), with a stand-in for gh."""

    def workflow(self, name):
        return MiniYaml(read_text(os.path.join(HERE, "examples", "ci", name))).parse()

    def git(self, *argv, cwd=None):
        done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *argv],
                              cwd=cwd or self.repo, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def setUp(self):
        super().setUp()
        seed, origin = os.path.join(self.tmp, "seed"), os.path.join(self.tmp, "origin.git")
        os.makedirs(os.path.join(seed, "eval"))
        shutil.copy(os.path.join(HERE, "rag_eval.py"), seed)
        for name in ("qrels.json", "baseline.json"):
            shutil.copy(example(name), os.path.join(seed, "eval"))
        self.git("init", "-q", "-b", "main", cwd=seed)
        self.git("add", ".", cwd=seed)
        self.git("commit", "-q", "-m", "seed", cwd=seed)
        self.git("clone", "-q", "--bare", seed, origin, cwd=self.tmp)
        self.repo = os.path.join(self.tmp, "repo")
        self.git("clone", "-q", origin, self.repo, cwd=self.tmp)
        shutil.copy(example("run.json"), self.repo)       # what the retriever step writes
        self.bin = os.path.join(self.tmp, "bin")           # gh: records what it is asked
        os.mkdir(self.bin)
        self.write("bin/gh", '#!/bin/sh\nprintf "%s\\n" "$@" > "$GH_CALLED"\n'
                             'while [ $# -gt 0 ]; do\n'
                             '  if [ "$1" = --body-file ]; then cp "$2" "$GH_BODY"; fi; shift\n'
                             'done\n')
        os.chmod(os.path.join(self.bin, "gh"), 0o755)

    def step(self, workflow, name):
        job, = workflow["jobs"].values()
        return next(s for s in job["steps"] if s.get("name") == name)

    def run_in_repo(self, step, **env):
        return self.run_step(step, env, cwd=self.repo)

    def test_the_pull_request_gate(self):
        flow = self.workflow("retrieval-gate.yml")
        self.assertEqual(flow["on"], {"pull_request": None})
        self.assertEqual(flow["permissions"], {"contents": "read", "pull-requests": "write"})
        job, = flow["jobs"].values()
        self.assertEqual(job["steps"][0]["uses"], "actions/checkout@v4")
        # The pull request lowers its own copy of the baseline: the gate reads main's.
        self.git("checkout", "-q", "-b", "lower-the-bar")
        with open(os.path.join(self.repo, "eval", "baseline.json"), "w") as handle:
            json.dump({"recall@5": 0.1, "mrr@5": 0.1, "ndcg@5": 0.1, "success@5": 0.1}, handle)
        self.git("commit", "-q", "-am", "lower the bar")
        code, err, _ = self.run_in_repo(self.step(flow, "The baseline on main"),
                                        GITHUB_BASE_REF="main")
        self.assertEqual(code, 0, err)
        self.assertEqual(read_text(os.path.join(self.repo, "baseline-main.json")),
                         read_text(example("baseline.json")))
        gate = self.step(flow, "Retrieval quality gate")
        code, err, summary = self.run_in_repo(gate)
        self.assertEqual(code, 1, err)
        failed = ("**Gate failed**: 2 regressions (undecided: unjudged ids could explain them): "
                  "mrr@5, recall@5\n")
        comment = read_text(os.path.join(self.repo, "rag_eval.md"))
        self.assertTrue(comment.startswith(failed), comment[:200])
        self.assertIn("Gate vs baseline-main.json (max drop 0.02):", comment)
        self.assertTrue(summary.startswith("\n" + failed))
        # The comment: the file the gate wrote, posted whatever the verdict, when written.
        post = self.step(flow, "Post the report on the pull request")
        self.assertEqual(post["if"], "always() && hashFiles('rag_eval.md') != ''")
        self.assertIn("-o rag_eval.md ", gate["run"])
        self.assertEqual(post["env"], {"GH_TOKEN": "${{ github.token }}",
                                       "PR": "${{ github.event.pull_request.number }}"})
        called, body = os.path.join(self.tmp, "gh-called"), os.path.join(self.tmp, "gh-body")
        code, err, _ = self.run_in_repo(post, PR="7", GH_CALLED=called, GH_BODY=body,
                                        PATH=self.bin + os.pathsep + os.environ["PATH"])
        self.assertEqual(code, 0, err)
        self.assertEqual(read_text(called).split("\n")[:-1],
                         ["pr", "comment", "7", "--edit-last", "--create-if-none", "--body-file",
                          "rag_eval.md"])
        self.assertEqual(read_text(body), comment)

    def test_the_baseline_on_main(self):
        flow = self.workflow("retrieval-baseline.yml")
        self.assertEqual(flow["on"]["push"], {"branches": "[main]"})
        self.assertEqual(flow["on"]["workflow_dispatch"]["inputs"]["accept"]["type"], "boolean")
        self.assertEqual(flow["permissions"], {"contents": "write"})
        job, = flow["jobs"].values()
        self.assertEqual(job["if"], "github.ref == 'refs/heads/main'")
        save, commit = self.step(flow, "Save the baseline"), self.step(flow, "Commit the baseline")
        # --accept comes only from the person's Run workflow input, never from a push.
        self.assertEqual(save["env"], {"ACCEPT": "${{ inputs.accept && '--accept' || '' }}"})
        self.assertEqual(commit["env"], {"ACCEPT": "${{ inputs.accept && 'yes' || '' }}"})
        before = read_text(os.path.join(self.repo, "eval", "baseline.json"))
        head = self.git("rev-parse", "HEAD")
        # A merge that regresses (the bundled run against its baseline): kept, job fails.
        code, err, summary = self.run_in_repo(save, ACCEPT="")
        self.assertEqual(code, 1, err)
        self.assertIn("the gate failed, so eval/baseline.json was not written", err)
        self.assertEqual(read_text(os.path.join(self.repo, "eval", "baseline.json")), before)
        # A person accepts it: written, committed and pushed to main, naming them.
        code, err, _ = self.run_in_repo(save, ACCEPT="--accept")
        self.assertEqual(code, 0, err)
        saved = json.loads(read_text(os.path.join(self.repo, "eval", "baseline.json")))
        self.assertEqual(saved["mean"]["mrr@5"], 0.5)
        env = dict(GITHUB_SHA="abc123", GITHUB_ACTOR="alice", GITHUB_REF_NAME="main")
        code, err, _ = self.run_in_repo(commit, ACCEPT="yes", **env)
        self.assertEqual(code, 0, err)
        origin = os.path.join(self.tmp, "origin.git")
        self.assertEqual(self.git("log", "-1", "--format=%s", "main", cwd=origin).strip(),
                         "rag_eval baseline of abc123 (accepted by alice)")
        self.assertEqual(self.git("rev-parse", "main^", cwd=origin), head)
        # The next merge, the same numbers: the gate passes, the same bytes, no commit.
        code, err, _ = self.run_in_repo(save, ACCEPT="")
        self.assertEqual(code, 0, err)
        code, err, _ = self.run_in_repo(commit, ACCEPT="", **env)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.git("rev-list", "--count", "main", cwd=origin).strip(), "2")


# ---------------------------------------------------------------------------
# Command line: options, exit codes, one-line errors
# ---------------------------------------------------------------------------

class CommandLineOptionsTest(TempDir, unittest.TestCase):
    """Each option reaches the code it names, and bad values are refused on one
    line."""
    def test_help_ends_with_examples(self):
        code, out, err = run_cli("--help")
        self.assertEqual(code, 0)
        self.assertIn("exit codes: 0 ok, 1 the gate found a regression", out)

    def test_run_format_override(self):
        qrels = self.write("q.json", json.dumps({"q%02d" % i: {"a": 1} for i in range(30)}))
        run = self.write("run.txt", '{"q00": ["a"]}')
        code, out, err = run_cli(qrels, run, "--run-format", "trec")
        self.assertEqual(code, 2)
        self.assertIn("run.txt:1: expected 6 fields", err)
        self.write("run.txt", "q00 Q0 a 1 2.0 t\n")
        code, out, err = run_cli(qrels, run, "--run-format", "trec")
        self.assertEqual(code, 0, err)

    def test_bad_k(self):
        for k in ("0", "-1", "x", "2.5", "1,,0"):
            with self.subTest(k=k):
                self.assertBad(extra=["--k", k],
                               expect="k must be a positive integer, got '0'" if k == "0" else "k")

    def test_unknown_measure(self):
        self.assertBad(extra=["--metrics", "ndgc"], expect="did you mean 'ndcg'")

    def test_bad_rel_and_max_drop(self):
        self.assertBad(extra=["--rel", "0"], expect="rel")
        for tolerance in ("-0.1", "nan", "x", "inf%"):
            with self.subTest(max_drop=tolerance):
                self.assertBad(extra=["--max-drop", tolerance], expect="max drop")

    def test_numbers_in_options(self):
        bad = [("--max-drop", "1_0"), ("--max-drop", "5"), ("--max-drop", "1"),
               ("--max-drop", "150%"), ("--max-drop", "100%"), ("--k", "1_0"), ("--rel", "1_0"),
               ("--alpha", "0.0_5"), ("--seed", "1_0"), ("--resamples", "0")]
        for option, value in bad:
            with self.subTest(option=option, value=value):
                code, out, err = run_cli(example("qrels.json"), example("run.json"), option, value,
                                         "--baseline", example("baseline.json"))
                self.assertEqual(code, 2, out)
                self.assertEqual(len(err.strip().splitlines()), 1)

    def test_numbers_are_ascii(self):
        for argv in (("--k", "５"), ("--metrics", "recall@٣"), ("--rel", "２")):
            with self.subTest(argv=argv):
                code, out, err = run_cli(*EXAMPLE_FILES, *argv)
                self.assertEqual(code, 2)
                self.assertIn("must be a positive integer", err)
        base = self.write("b.json", '{"map@１00": 0.5}')
        code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", base)
        self.assertEqual(code, 2)
        self.assertIn("the cutoff k must be a positive integer", err)

    def test_usage_error_is_one_line(self):
        # Holds test_bad_option_is_usage_error ("--format xml": exit 2, "invalid choice").
        for argv, message in ((("--bogus",), "unrecognized arguments: --bogus"),
                              (("--k",), "argument --k: expected one argument"),
                              (("--format", "xml"), "argument --format: invalid choice")):
            with self.subTest(argv=argv):
                code, out, err = run_cli(*EXAMPLE_FILES, "--baseline", example("baseline.json"),
                                         *argv)
                self.assertEqual(code, 2)
                self.assertEqual(err.count("\n"), 1, err)
                self.assertTrue(err.startswith("rag-eval: error: " + message), err)
                self.assertTrue(err.endswith("(see --help)\n"))


class InternalErrorTest(TempDir, unittest.TestCase):
    """A bug exits 2 with one line, never 0 (a pass) or 1 (a regression)."""

    ARGS = (example("qrels.json"), example("run.json"), "--baseline", example("baseline.json"))

    def broken(self, *argv, env=None):
        saved_gate, saved_env = rag_eval.gate, os.environ.get("RAG_EVAL_DEBUG")

        def bug(*args, **kwargs):
            raise ZeroDivisionError("division by zero\nsecond line")
        rag_eval.gate = bug
        if env is None:
            os.environ.pop("RAG_EVAL_DEBUG", None)
        else:
            os.environ["RAG_EVAL_DEBUG"] = env
        try:
            return run_cli(*self.ARGS, *argv)
        finally:
            rag_eval.gate = saved_gate
            if saved_env is None:
                os.environ.pop("RAG_EVAL_DEBUG", None)
            else:
                os.environ["RAG_EVAL_DEBUG"] = saved_env

    def test_one_line_exit_2(self):
        code, out, err = self.broken()
        self.assertEqual(code, 2)
        self.assertEqual(err, "rag-eval: internal error (a bug in rag_eval, please report it): "
                              "ZeroDivisionError: division by zero; rerun with --debug or "
                              "RAG_EVAL_DEBUG=1 to see the traceback\n")

    def test_debug_shows_the_traceback(self):
        for argv, env in ((("--debug",), None), ((), "1")):
            with self.subTest(argv=argv, env=env):
                code, out, err = self.broken(*argv, env=env)
                self.assertEqual(code, 2)
                self.assertIn("Traceback (most recent call last)", err)
                self.assertTrue(err.endswith("to see the traceback\n"))

    def test_a_closed_stderr_keeps_the_exit_code(self):
        # Writing to a pipe nobody reads raises; that must not turn exit 2 (or 0)
        # into Python's exit 1, the regression code.
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as handle:
            handle.write("{")
        for argv, expected in (((bad, example("run.json")), 2),
                               ((example("qrels.json"), example("run.json")), 0),
                               (self.ARGS, 1)):
            with self.subTest(expected=expected):
                read_end, write_end = os.pipe()
                os.close(read_end)
                try:
                    done = subprocess.run([sys.executable, example("rag_eval.py"), *argv],
                                          stdout=subprocess.DEVNULL, stderr=write_end,
                                          timeout=60)
                finally:
                    os.close(write_end)
                self.assertEqual(done.returncode, expected)
