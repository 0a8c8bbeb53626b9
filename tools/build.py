#!/usr/bin/env python3
"""Write rag_eval.py, the one file users get, from the source files in src/.

    python3 tools/build.py           # write rag_eval.py from src/
    python3 tools/build.py --check   # exit 0: rag_eval.py is a fresh build; 1: it is not

The sources are ``src/NN_name.py``, joined in the order of their numbers (the
layering order: a file may use what earlier files define).  Each source file
opens with a docstring saying what it holds, what it uses and what uses it;
the build turns that docstring into the banner above the file's code, so the
generated file names the source of every part.  The rest of a file is copied
as it is.

Before writing anything the build checks the sources, and refuses (exit 2,
one line a problem) when
  - a source file does not compile on its own;
  - a top-level name is defined in two source files;
  - a file uses a top-level name that a later file defines, unless the pair is
    in FORWARD below (an entry no longer needed is refused too, so the list
    only shrinks).
Standard library only; the same sources always give the same bytes.
"""

import argparse
import ast
import functools
import inspect
import os
import symtable
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = os.path.join(ROOT, "src")
TARGET = os.path.join(ROOT, "rag_eval.py")

HEADER = """\
#!/usr/bin/env python3
# This file is generated: do not edit it.  tools/build.py writes it from the
# source files in src/ (one concern each, in layering order); edit those, then
# run `python3 tools/build.py`.  CI runs `python3 tools/build.py --check`.
# A banner names the source file of each part below.
"""

RULE = "# " + "=" * 75

# (file, name): a file that uses a name a later file defines.  Each entry says
# why it is here; the list only shrinks, and ends with the deliberate hooks.
FORWARD = {
    # Notebook views and Report.from_dict: methods of the records, which come
    # first, that call the renderers and the report reader at run time.
    ("src/02_records.py", "render_markdown"): "Report._repr_markdown_",
    ("src/02_records.py", "_report_html"): "Report._repr_html_",
    ("src/02_records.py", "_report_from_dict"): "Report.from_dict",
    ("src/02_records.py", "merge_rows"): "Report.from_rows",
    ("src/02_records.py", "_gate_result_markdown"): "GateResult._repr_markdown_",
    ("src/02_records.py", "_gate_html"): "GateResult._repr_html_",
    ("src/12_statistics.py", "_comparison_result_markdown"): "Comparison._repr_markdown_",
    ("src/12_statistics.py", "_comparison_html"): "Comparison._repr_html_",
}


class SourceError(Exception):
    """The sources cannot be built: one line saying where and why."""


# --- reading the sources -------------------------------------------------------

def source_files(folder=SOURCES):
    """The source files, in build order: src/NN_name.py sorted by name."""
    names = sorted(n for n in os.listdir(folder)
                   if n.endswith(".py") and n[:2].isdigit() and n[2:3] == "_")
    if not names:
        raise SourceError("%s: no source files (NN_name.py)" % folder)
    return [os.path.join(folder, n) for n in names]


def read_source(path):
    """(docstring, code) of one source file: its opening docstring and the
    code after it, without the blank lines around it."""
    with open(path, encoding="utf-8", newline="") as handle:
        return _parsed(source_name(path), handle.read())


def source_name(path):
    """How messages name a source file: src/NN_name.py."""
    return "src/" + os.path.basename(path)


@functools.lru_cache(maxsize=None)
def _parsed(name, text):
    if "\r" in text:
        raise SourceError("%s: line breaks must be \\n only" % name)
    try:
        tree = ast.parse(text, name)
        compile(tree, name, "exec")
    except SyntaxError as exc:
        raise SourceError("%s:%s: does not compile: %s" % (name, exc.lineno, exc.msg))
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        raise SourceError("%s: must open with a docstring (what it holds, uses, and "
                          "what uses it)" % name)
    code = text.split("\n")[first.end_lineno:]
    return first.value.value, "\n".join(code).strip("\n") + "\n"


# --- the checks -----------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def names_of(code, name):
    """(defined, used): the names a file binds at its top level, and the
    global names it reads, at its top level or in any function."""
    module = symtable.symtable(code, name, "exec")
    defined = {s.get_name() for s in module.get_symbols() if s.is_assigned() or s.is_imported()}
    used = set()

    def walk(table, top):
        for sym in table.get_symbols():
            if sym.is_referenced() and (top or sym.is_global()):
                used.add(sym.get_name())
        for child in table.get_children():
            walk(child, False)

    walk(module, True)
    return frozenset(defined), frozenset(used)


def layering_problems(files, forward=FORWARD):
    """One line per problem: a name defined twice, a forward use not allowed,
    an allowed forward use no longer made."""
    owner, problems, found = {}, [], set()
    defined = {}
    for f, code in files:
        defined[f] = names_of(code, f)[0]
        for n in sorted(defined[f]):
            if n in owner:
                problems.append("%s defines %s, already defined in %s" % (f, n, owner[n]))
            else:
                owner[n] = f
    order = {f: i for i, (f, _) in enumerate(files)}
    for f, code in files:
        for n in sorted(names_of(code, f)[1] - defined[f]):
            if n in owner and order[owner[n]] > order[f]:
                found.add((f, n))
                if (f, n) not in forward:
                    problems.append("%s uses %s, which the later %s defines (move one of them, "
                                    "or allow it in FORWARD in tools/build.py)" % (f, n, owner[n]))
    for f, n in sorted(set(forward) - found):
        problems.append("FORWARD in tools/build.py allows %s to use %s, which it no longer "
                        "needs: remove the entry" % (f, n))
    return problems


# --- writing the one file --------------------------------------------------------

def banner(name, docstring):
    """The comment block that stands for a source file's docstring."""
    lines = [RULE, "# " + name, "#"]
    body = [line.rstrip() for line in inspect.cleandoc(docstring).split("\n")]
    lines += [("# " + line) if line else "#" for line in body]
    return "\n".join(lines + [RULE]) + "\n"


def build(folder=SOURCES, forward=FORWARD):
    """The text of rag_eval.py built from ``folder``; SourceError when the
    sources are not fit to build."""
    files, parts = [], []
    for path in source_files(folder):
        name = source_name(path)
        docstring, code = read_source(path)
        files.append((name, code))
        parts.append(banner(name, docstring) + "\n" + code)
    problems = layering_problems(files, forward)
    if problems:
        raise SourceError("\n".join(problems))
    return HEADER + "\n".join("\n" + p for p in parts)


def stale_part(built, committed):
    """The source file whose part of ``committed`` differs from ``built``
    (the first one), or None when they are equal."""
    if built == committed:
        return None
    name = None
    for built_line, committed_line in zip(built.split("\n"), committed.split("\n")):
        if built_line.startswith("# src/"):
            name = built_line[2:]
        if built_line != committed_line:
            break
    return name or "its header"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when rag_eval.py is not a fresh build of src/")
    args = parser.parse_args(argv)
    try:
        text = build()
    except SourceError as exc:
        for line in str(exc).split("\n"):
            print("build: " + line, file=sys.stderr)
        return 2
    if args.check:
        try:
            with open(TARGET, encoding="utf-8", newline="") as handle:
                committed = handle.read()
        except OSError:
            committed = None
        part = stale_part(text, committed) if committed is not None else "(it is missing)"
        if part is None:
            return 0
        print("rag_eval.py is not the build of src/ (first difference: %s): run "
              "python3 tools/build.py" % part, file=sys.stderr)
        return 1
    with open(TARGET, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
