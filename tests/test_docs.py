"""The documentation's API reference covers every public name.

Every name in ``pydial.__all__`` and ``pydial.stan.__all__`` (read live, so a newly
exported name fails here until it is documented) must appear in an ``autosummary`` list
or a ``py:module`` directive of ``docs/api/*.rst``; when the site has been built
(``sphinx-build -W -n --keep-going -b html docs docs/_build/html``), each must also
have a page there.
"""

import re
from pathlib import Path

import pytest

import pydial
import pydial.stan

DOCS = Path(__file__).resolve().parents[1] / "docs"
API = DOCS / "api"
HTML = DOCS / "_build" / "html" / "api"


def _documented() -> dict[str, str]:
    """Full name -> source file of every entry of the API reference sources."""
    out: dict[str, str] = {}
    for path in sorted(API.glob("*.rst")):
        module = None
        in_summary = False
        for line in path.read_text().splitlines():
            m = re.match(r"\.\. (?:currentmodule|py:module|module)::\s*(\S+)", line)
            if m:
                module = m.group(1)
                if "currentmodule" not in line:
                    out[module] = path.name
                in_summary = False
                continue
            if re.match(r"\.\. autosummary::", line):
                in_summary = True
                continue
            if in_summary:
                if re.match(r"\s+:\w", line) or not line.strip():
                    continue
                m = re.match(r"\s+~?([\w.]+)\s*$", line)
                if m:
                    name = m.group(1)
                    out[name if module is None else f"{module}.{name}"] = path.name
                else:
                    in_summary = False
    return out


def _public() -> list[tuple[str, str, object]]:
    names = [("pydial", n, getattr(pydial, n)) for n in pydial.__all__]
    names += [("pydial.stan", n, getattr(pydial.stan, n)) for n in pydial.stan.__all__]
    return names


def _entries(module: str, name: str, obj: object) -> set[str]:
    """The full names under which the reference may document ``module.name``."""
    names = {f"{module}.{name}"}
    own = getattr(obj, "__module__", None)
    if own and hasattr(obj, "__qualname__"):
        names.add(f"{own}.{obj.__qualname__}")
    return names


def test_api_sources_exist():
    assert (DOCS / "conf.py").is_file()
    assert (API / "index.rst").is_file()


@pytest.mark.parametrize("module, name, obj", _public(), ids=[f"{m}.{n}" for m, n, _ in _public()])
def test_public_name_in_api_reference(module, name, obj):
    documented = _documented()
    assert _entries(module, name, obj) & set(documented), (
        f"{module}.{name} is exported but not listed in docs/api/*.rst")


@pytest.mark.skipif(not (HTML / "index.html").is_file(), reason="the site is not built")
@pytest.mark.parametrize("module, name, obj", _public(), ids=[f"{m}.{n}" for m, n, _ in _public()])
def test_public_name_has_a_page(module, name, obj):
    pages = {p.stem for p in HTML.rglob("*.html")}
    html = {p.stem: p for p in HTML.glob("*.html")}
    for entry in _entries(module, name, obj):
        if entry in pages:
            return
        # a module documented on its own page (pydial.datasets -> api/datasets.html)
        if entry.rsplit(".", 1)[-1] in html and f'id="module-{entry}"' in html[entry.rsplit(".", 1)[-1]].read_text():
            return
    pytest.fail(f"{module}.{name} has no page in docs/_build/html/api")
