"""Package layout: module names, one-way layers, no private names across modules."""

from __future__ import annotations

import ast
import importlib
import pathlib
import types

import pytest

import pydial

PKG = pathlib.Path(pydial.__file__).parent


def _modules() -> list[tuple[str, pathlib.Path]]:
    out = []
    for f in sorted(PKG.rglob("*.py")):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append((name, f))
    return out


def _imports(name: str, path: pathlib.Path) -> list[tuple[str, str]]:
    """``(module, imported name)`` of every ``from ... import`` in ``path`` (function-local ones too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out += [(mod, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, "") for a in node.names]
    return out


def test_fitting_module_and_fit_function():
    mod = importlib.import_module("pydial.fitting")
    assert isinstance(mod, types.ModuleType)
    assert callable(pydial.fit) and not isinstance(pydial.fit, types.ModuleType)
    assert pydial.fit is importlib.import_module("pydial.estimators").fit
