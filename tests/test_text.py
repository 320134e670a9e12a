r"""Text that reaches users: messages free of LaTeX labels, clean source bytes, docstrings as written.

* Exception messages, warnings, tables and printed text are string literals of the package;
  none may cite the paper by a LaTeX label (``eq. cell-clustered-meat``,
  ``Prop. ident-lowrank``, ``\ref{...}``), which means nothing without the paper's source.
  Docstrings may cite the paper; other string literals may not.
* No source file holds control characters (a ``\frac`` in a non-raw docstring becomes a
  form feed and ``rac``), and a docstring with backslashes is a raw string.
* Every dotted ``pydial.`` name in the source names a module or a name that exists.
"""

from __future__ import annotations

import ast
import io
import pathlib
import re
import tokenize

import pytest

import pydial

PKG = pathlib.Path(pydial.__file__).parent
STAN = PKG.parent / "stan"  # the Stan programs, installed as pydial.stan_files
SOURCES = sorted(PKG.rglob("*.py"))

_KINDS = r"(?:[Ee]qs?|Props?|Cors?|Thms?|Lemmas?|Conds?|Apps?|Defs?|Secs?|Algs?|Rems?|Assumptions?)"
LABEL = re.compile(
    _KINDS + r"\.\s*~?\s*[A-Za-z][A-Za-z0-9]*(?:[-_:][A-Za-z0-9]+)+"  # Prop. ident-lowrank, eq. hac-meat
    r"|\b(?:eq|prop|cor|thm|lem|cond|app|def|sec|subsec|alg|fig|tab):[A-Za-z][\w:-]*"  # prop:ident-lowrank
    r"|\\(?:ref|[Cc]ref|eqref|label|cite[pt]?)\{"  # \ref{...}
    r"|DESIGN\.md"
)
"""A citation by LaTeX label (or of a file users do not have)."""

CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""Bytes no source file may hold (tab, newline and carriage return are allowed)."""


def _rel(path: pathlib.Path) -> str:
    return str(path.relative_to(PKG.parent))


def _docstring_ids(tree: ast.AST) -> set[int]:
    """Return the ids of the documentation strings: docstrings and bare string statements."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def _message_literals(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every string literal of ``path`` that is not documentation, f-string parts included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docs = _docstring_ids(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs]


def _label_hits(text: str) -> list[str]:
    return [m.group(0) for m in LABEL.finditer(text)]


@pytest.mark.parametrize("text", ["(eq. cell-clustered-meat)", "Prop. ident-lowrank", "Cond. human-design",
                                  "Cor. cycle-criterion", "App. lambda-selection", "Prop. human_identification",
                                  "Prop.~ident-LLM", "see prop:ident-LLM", r"\Cref{cond:llm-structure}", "DESIGN.md"])
def test_label_pattern_finds_labels(text):
    """The pattern finds the label forms the paper uses."""
    assert _label_hits(text)


@pytest.mark.parametrize("text", ["method='dial-anc'", "the cell-clustered sandwich meat", "ident-LLM fails",
                                  "Sec. 'Structured representation across LLM judges'", "e.g. log-odds",
                                  "cov_type='cell'", "i.e. non-negative", "the low-rank identification condition"])
def test_label_pattern_spares_plain_text(text):
    """Method names, hyphenated words and named sections are not labels."""
    assert not _label_hits(text)


def test_no_paper_labels_in_messages():
    """Messages, warnings and table text of every module (pydial/stan too) cite no LaTeX label."""
    hits = [f"{_rel(path)}:{line}: {hit!r}" for path in SOURCES
            for line, text in _message_literals(path) for hit in _label_hits(text)]
    assert not hits, "paper labels in user-facing strings:\n" + "\n".join(hits)


def _stan_strings(text: str) -> list[tuple[int, str]]:
    """Return the double-quoted strings of a Stan program outside its comments, with their lines."""
    out = []
    pattern = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:[^"\\\n]|\\.)*"', re.S)
    for m in pattern.finditer(text):
        if m.group(0).startswith('"'):
            out.append((text.count("\n", 0, m.start()) + 1, m.group(0)))
    return out


@pytest.mark.skipif(not STAN.is_dir(), reason="the Stan programs are not beside the package")
def test_no_paper_labels_in_stan_messages():
    """The Stan programs' reject and print messages cite no LaTeX label."""
    hits = [f"{path.relative_to(STAN.parent)}:{line}: {hit!r}" for path in sorted(STAN.rglob("*.stan"))
            for line, text in _stan_strings(path.read_text(encoding="utf-8")) for hit in _label_hits(text)]
    assert not hits, "paper labels in Stan messages:\n" + "\n".join(hits)


def test_no_control_characters_in_sources():
    """No .py file of the package holds a control character other than tab, newline and carriage return."""
    hits = []
    for path in SOURCES:
        data = path.read_bytes()
        for m in CONTROL.finditer(data):
            line = data.count(b"\n", 0, m.start()) + 1
            hits.append(f"{_rel(path)}:{line}: {m.group(0)!r}")
    assert not hits, "control characters in sources:\n" + "\n".join(hits)


def test_docstrings_are_text():
    r"""No docstring holds a tab or control character (an escape such as ``\t`` of ``\top`` read by Python)."""
    hits = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                bad = sorted(set(re.findall(r"[\x00-\x09\x0b-\x1f\x7f]", doc or "")))
                if bad:
                    hits.append(f"{_rel(path)}:{node.body[0].lineno}: {bad!r}")
    assert not hits, "control characters in docstrings:\n" + "\n".join(hits)


def test_docstrings_with_backslashes_are_raw():
    r"""A docstring with a backslash escape other than ``\\`` is a raw string, so LaTeX stays as written."""
    escape = re.compile(r"\\[^\\\n'\"]")
    hits = []
    for path in SOURCES:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, str(path))
        doc_lines = {node.value.lineno for node in ast.walk(tree)
                     if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                     and isinstance(node.value.value, str)}
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.STRING or tok.start[0] not in doc_lines:
                continue
            prefix = re.match(r"[A-Za-z]*", tok.string).group(0).lower()
            found = None if "r" in prefix else escape.search(tok.string.replace("\\\\", ""))
            if found:
                hits.append(f"{_rel(path)}:{tok.start[0]}: {found.group(0)!r}")
    assert not hits, "non-raw docstrings with backslash escapes (use r\"\"\"):\n" + "\n".join(hits)


def _top_names(path: pathlib.Path) -> set[str]:
    """Names a module defines or imports at top level (classes, functions, assignments, imports, ``__all__``)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                names |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _resolves(dotted: str) -> bool:
    """Whether ``pydial.a.b.c`` names a module of the package or a top-level name of one."""
    parts = dotted.split(".")
    base = PKG.parent
    for k in range(len(parts), 0, -1):
        stem = base.joinpath(*parts[:k])
        module = stem / "__init__.py" if stem.is_dir() else stem.with_suffix(".py")
        if module.is_file():
            return k == len(parts) or parts[k] in _top_names(module) or (stem / f"{parts[k]}.py").is_file()
    return False


def test_dotted_references_exist():
    """Every ``pydial.x.y`` in the sources (docstrings too) names something that exists."""
    ref = re.compile(r"(?<![\w/])pydial(?:\.[A-Za-z_]\w*)+")
    hits = []
    for path in SOURCES:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in ref.finditer(line):
                name = m.group(0)
                if name.startswith("pydial.stan_files"):  # package data: the Stan programs
                    continue
                if not _resolves(name):
                    hits.append(f"{_rel(path)}:{n}: {name}")
    assert not hits, "references to names that do not exist:\n" + "\n".join(hits)
