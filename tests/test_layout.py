"""Package layout: module names, one-way layers, no private names across modules."""

from __future__ import annotations

import ast
import importlib
import pathlib
import types

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
    """Return ``(module, imported name)`` of every import in ``path`` (function-local ones too)."""
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


def test_fit_is_the_function_and_the_layers_are_packages():
    """``pydial.fit`` is the estimator function (no subpackage shadows it); each layer is a package."""
    assert callable(pydial.fit) and not isinstance(pydial.fit, types.ModuleType)
    assert pydial.fit is importlib.import_module("pydial.api").fit
    for layer in LAYERS[1:6] + LAYERS[7:8]:
        for pkg in layer:
            assert isinstance(importlib.import_module(pkg), types.ModuleType) and hasattr(importlib.import_module(pkg), "__path__")


def test_no_function_shadows_its_module():
    """``pydial.stan.standata`` is the data builder; its module is ``pydial.stan.schema`` (no name is both)."""
    import pydial.stan

    assert callable(pydial.stan.standata) and not isinstance(pydial.stan.standata, types.ModuleType)
    assert importlib.import_module("pydial.stan.schema").standata is pydial.stan.standata
    for name, _ in _modules():
        package, _, leaf = name.rpartition(".")
        if package and name != "pydial.api":
            attr = getattr(importlib.import_module(package), leaf, None)
            assert attr is None or isinstance(attr, types.ModuleType), f"{package}.{leaf} is not the module {name}"


def test_stan_does_not_import_estimators():
    """No module of ``pydial.stan`` imports ``pydial.estimation.estimators`` (the layers are one-way)."""
    bad = []
    for name, path in _modules():
        if not name.startswith("pydial.stan"):
            continue
        for mod, what in _imports(name, path):
            target = f"{mod}.{what}" if what else mod
            if mod == "pydial.estimation.estimators" or target == "pydial.estimation.estimators":
                bad.append(f"{name}: from {mod} import {what}")
    assert not bad, bad


def test_no_private_names_across_modules():
    """No ``from pydial... import _name`` across modules."""
    bad = []
    for name, path in _modules():
        for mod, what in _imports(name, path):
            if what.startswith("_") and not what.startswith("__") and mod.startswith("pydial"):
                bad.append(f"{name}: from {mod} import {what}")
    assert not bad, bad


def _graph() -> dict[str, set[str]]:
    """Module -> the pydial modules it imports (function-local imports too; ``from pkg import mod`` resolved)."""
    names = {name for name, _ in _modules()}
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in _modules():
        for mod, what in _imports(name, path):
            for target in (f"{mod}.{what}", mod):
                if target in names and target != name:
                    graph[name].add(target)
                    break
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


LAYERS: tuple[tuple[str, ...], ...] = (
    ("pydial.exceptions", "pydial.formatting", "pydial.resources", "pydial.optim", "pydial.cache"),
    ("pydial.data",),
    ("pydial.model",),
    ("pydial.inference",),
    ("pydial.estimation",),
    ("pydial.stan",),
    ("pydial.api",),
    ("pydial.studies",),
    ("pydial.report", "pydial.outputs", "pydial.cli"),
)
"""The layers of ``pydial``, bottom to top: a module imports only from its own layer or the ones below."""


def _layer(module: str) -> int | None:
    for k, layer in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in layer):
            return k
    return None


def test_panel_reader_and_judge_diagnostics_layers():
    """The panel reader is a data reader; the judge diagnostics sit with the studies (above the fits they plot)."""
    assert _layer("pydial.data.panel") == LAYERS.index(("pydial.data",))
    assert _layer("pydial.studies.diagnostics") == LAYERS.index(("pydial.studies",))


def test_every_module_has_a_layer():
    missing = [name for name, _ in _modules() if name not in ("pydial", "pydial.examples") and _layer(name) is None]
    assert not missing, missing


def test_layers_import_only_downwards():
    """The folders are the architecture: data < model < inference < estimation < stan < api < studies < app."""
    bad = []
    for name, targets in _graph().items():
        if name == "pydial" or _layer(name) is None:
            continue
        for t in targets:
            if t != "pydial" and (_layer(t) or 0) > (_layer(name) or 0):
                bad.append(f"{name} -> {t}")
    assert not bad, sorted(bad)


def test_cycle_finder_finds_a_planted_cycle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_pydial():
    """Layers point one way: no module of ``pydial`` reaches itself through imports, function-local ones included
    (``pydial/__init__.py`` and the subpackage ``__init__`` files re-export and are left out)."""
    graph = {k: {w for w in v if not w.endswith(("pydial", "pydial.stan"))} for k, v in _graph().items()
             if k not in ("pydial", "pydial.stan")}
    assert import_cycles(graph) == []


def test_no_import_cycle_in_the_analyses():
    """The analysis scripts are layered too: a study's command line (cli.py) sits above its report."""
    root = PKG.parent / "analyses"
    modules = {}
    for f in sorted(root.rglob("*.py")):
        parts = f.relative_to(root.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for mod, what in _imports(name, path):
            for target in (f"{mod}.{what}", mod):
                if target in modules and target != name:
                    graph[name].add(target)
                    break
    assert import_cycles(graph) == []


def test_importing_pydial_leaves_the_slow_imports_to_their_users():
    """``import pydial`` (every command-line call, every worker process) loads neither scipy.stats nor
    scipy.optimize (half a second together), nor Stan, matplotlib or arviz: the functions that need them import them."""
    import subprocess
    import sys

    slow = ["scipy.stats", "scipy.optimize", "matplotlib", "arviz", "cmdstanpy", "httpstan"]
    code = f"import sys, pydial; print([m for m in {slow!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
