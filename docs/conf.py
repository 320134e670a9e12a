"""Sphinx configuration of the pydial documentation.

Build (the command CI runs, after ``pip install -e ".[docs]"``)::

    sphinx-build -W -n --keep-going -b html docs docs/_build/html

Warnings are errors and every cross-reference must resolve (``-n``).  References to
pydial's own objects resolve to the page that documents them, whatever module path the
docstring spells (see ``_resolve_by_identity`` below).  Names from Python and the
third-party libraries are links only when ``PYDIAL_DOCS_INTERSPHINX=1`` (intersphinx
needs the network); otherwise they are shown as text (``nitpick_ignore_regex``).
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import os
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import pydial  # noqa: E402

project = "pydial"
author = "The pydial developers"
copyright = "2026, The pydial developers"
version = release = pydial.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",
]
if os.environ.get("PYDIAL_DOCS_INTERSPHINX") == "1":
    extensions.append("sphinx.ext.intersphinx")
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "pandas": ("https://pandas.pydata.org/docs", None),
        "scipy": ("https://docs.scipy.org/doc/scipy", None),
        "arviz": ("https://python.arviz.org/en/stable", None),
        "matplotlib": ("https://matplotlib.org/stable", None),
    }

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints", "README.md"]

# -- autodoc / autosummary / numpydoc ----------------------------------------------
# The summaries in the API tables end at the first sentence; the paper's labels ("eq. gacv", "Prop. calibration-test")
# are not sentence ends (autosummary knows "e.g." and "et al." only).
import sphinx.ext.autosummary as _autosummary  # noqa: E402

_autosummary.WELL_KNOWN_ABBREVIATIONS += ("eq.", "App.", "Alg.", "Prop.", "Thm.", "Sec.", "Fig.", "Cond.", "Cor.")
autosummary_generate = True
autosummary_generate_overwrite = True
autodoc_typehints = "none"  # the numpydoc sections carry the types
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": False}
numpydoc_show_class_members = False  # the class template lists members itself
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

# -- MyST and myst-nb ----------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = os.environ.get("PYDIAL_DOCS_EXECUTE", "cache")
nb_execution_timeout = 600
nb_execution_raise_on_error = True  # a failing cell fails the build
nb_execution_show_tb = True
nb_merge_streams = True

# -- HTML ----------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"pydial {release}"
html_static_path = ["_static"]
html_css_files = ["pydial.css"]
html_theme_options = {
    "github_url": "https://github.com/pydial-judges/pydial",
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "header_links_before_dropdown": 6,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_context = {"default_mode": "light"}
html_show_sourcelink = False

# -- cross-references -------------------------------------------------------------
nitpicky = True

# Names outside pydial.  Python's built-ins and the standard library, and the libraries
# pydial builds on, are documented elsewhere; without the network (intersphinx) they
# cannot be linked, so they are shown as text.
_EXTERNAL = (
    "numpy", "np", "pandas", "pd", "scipy", "arviz", "az", "arviz_base", "arviz_stats", "xarray", "xr",
    "matplotlib", "plt", "cmdstanpy", "stan", "httpstan", "pystan", "joblib", "dask", "distributed",
    "statsmodels", "pyarrow", "tqdm", "threadpoolctl", "h5netcdf", "choix",
    "dataclasses", "typing", "collections", "pathlib", "os", "io", "concurrent", "multiprocessing",
    "numbers", "enum", "functools", "contextlib", "warnings", "argparse", "json", "abc", "types",
)
_PY_ROLES = ("py:class", "py:exc", "py:func", "py:meth", "py:obj", "py:attr", "py:data", "py:mod")
nitpick_ignore = [(role, name) for role in _PY_ROLES for name in dir(builtins) if not name.startswith("_")]
nitpick_ignore_regex = [
    (r"py:.*", r"~?(%s)(\..+)?" % "|".join(_EXTERNAL)),
    # private helpers (leading underscore) are mentioned in docstrings but not in the reference
    (r"py:.*", r"~?([\w.]+\.)?_\w+(\.\w+)*"),
]


# -- resolving pydial's own names ------------------------------------------------------
# Docstrings name pydial's objects by the module that defines them
# (``pydial.estimation.results.DialResult``), by the public name (``pydial.DialResult``),
# or relative to their own module (``DataError``).  Each object is documented once; a
# reference is resolved by importing what it names, in the referring docstring's module,
# and linking the page of that same object.

def _lookup(path: str):
    """The object that a dotted path names (module, then attributes), or None."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except Exception:
            return None
        return obj
    return None


def _key(obj) -> int | None:
    """Identity of an object for matching references (None for values that need not be unique)."""
    if obj is None or isinstance(obj, (int, float, str, bool, bytes)):
        return None
    return id(inspect.unwrap(obj)) if callable(obj) else id(obj)


def _documented(env) -> tuple[dict[int, str], dict[str, list[str]]]:
    """id(object) -> full name of every documented Python object, and last name -> full names."""
    objects = env.domaindata["py"]["objects"]
    cache = getattr(env, "_pydial_documented", None)
    if cache is not None and cache[0] == len(objects):
        return cache[1], cache[2]
    by_id: dict[int, str] = {}
    by_tail: dict[str, list[str]] = {}
    for name, entry in sorted(objects.items(), key=lambda kv: (kv[0].count("."), kv[0])):
        if getattr(entry, "aliased", False) or not name.startswith("pydial"):
            continue
        by_tail.setdefault(name.rsplit(".", 1)[-1], []).append(name)
        key = _key(_lookup(name))
        if key is not None:
            by_id.setdefault(key, name)
    env._pydial_documented = (len(objects), by_id, by_tail)
    return by_id, by_tail


def _resolve_name(env, target: str, modname: str, clsname: str) -> str | None:
    """The documented full name that ``target``, written in ``modname.clsname``, refers to."""
    objects = env.domaindata["py"]["objects"]
    by_id, by_tail = _documented(env)
    candidates = []
    if modname and clsname:
        candidates.append(f"{modname}.{clsname}.{target}")
    if modname:
        candidates.append(f"{modname}.{target}")
    candidates.append(target)
    for path in candidates:
        if not path.startswith("pydial"):
            continue
        if path in objects:
            return path
        key = _key(_lookup(path))
        if key in by_id:
            return by_id[key]
        # an attribute without identity (a value, a dataclass field): its owner's page
        owner, _, attr = path.rpartition(".")
        owner_key = _key(_lookup(owner)) if owner else None
        if owner_key in by_id and f"{by_id[owner_key]}.{attr}" in objects:
            return f"{by_id[owner_key]}.{attr}"
    # a name relative to another module (a summary line shown on another page): accept it
    # when every documented object of that name is one and the same
    parts = target.split(".")
    names = [n for n in by_tail.get(parts[-1], []) if n.endswith("." + target)]
    objs = {_key(_lookup(n)) or n for n in names}
    if len(objs) == 1:
        return names[0]
    return None


def _resolve_by_identity(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    modname, clsname = node.get("py:module") or "", node.get("py:class") or ""
    fullname = _resolve_name(env, target, modname, clsname)
    if fullname is None:
        # an object of pydial that exists but has no entry of its own (a module constant
        # without a docstring, a type alias): shown as code, not linked.  A name that
        # does not exist at all still fails the build.
        paths = [f"{modname}.{target}" if modname else target, target]
        if any(p.startswith("pydial.") and _lookup(p) is not None for p in paths):
            return contnode
        return None
    newnode = node.deepcopy()
    newnode["reftarget"] = fullname
    newnode["refspecific"] = False
    return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, "obj", fullname, newnode, contnode)


# Objects exported in the public API have their own page; the internal module pages
# (api/internals) list the rest, so that no object is documented twice.
def _public_ids() -> set[int]:
    import pydial.stan

    ids = set()
    modules = [pydial, pydial.stan, pydial.datasets, pydial.features, pydial.io]
    for mod in modules:
        names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
        for name in names:
            obj = getattr(mod, name)
            if _key(obj) is not None and not inspect.ismodule(obj):
                ids.add(_key(obj))
    from api_objects import RESULT_CLASSES, STUDY_OBJECTS

    for path in RESULT_CLASSES:
        ids.add(id(_lookup(path)))
    for path in STUDY_OBJECTS:
        ids.add(_key(_lookup(path)))
    return ids


_PUBLIC: set[int] = set()


def _skip_public(app, what, name, obj, skip, options):
    if what == "module" and _key(obj) in _PUBLIC:
        return True
    if isinstance(obj, types.GenericAlias):  # type aliases (tuple[...]) are not documented objects
        return True
    return None


def setup(app):
    _PUBLIC.update(_public_ids())
    app.connect("missing-reference", _resolve_by_identity)
    app.connect("autodoc-skip-member", _skip_public)
