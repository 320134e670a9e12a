"""The ``Examples`` sections of the public entry points run as written (doctest).

The Stan examples (:func:`pydial.posterior`, :func:`pydial.compare_intervals`) need a
Stan backend and compile a program on first use; they are marked ``stan`` and run once
per available backend, like the other Stan tests (``tests/conftest.py``).
"""

import doctest
import importlib
import warnings

import pytest

import pydial

FAST = [
    ("pydial.api", "fit"),
    ("pydial.data.comparisons", "Comparisons.from_frame"),
    ("pydial.model.identifiability", "check_design"),
    ("pydial.studies.planning", "plan"),
    ("pydial.studies.simulate", "simulate"),
]
STAN = [
    ("pydial.stan.bayes", "posterior"),
    ("pydial.stan.compare", "compare_intervals"),
]
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _run(module_name: str, qualname: str) -> None:
    module = importlib.import_module(module_name)
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    obj = getattr(obj, "__func__", obj)
    assert "Examples" in (obj.__doc__ or ""), f"{module_name}.{qualname} has no Examples section"
    finder = doctest.DocTestFinder(recurse=False)
    tests = finder.find(obj, f"{module_name}.{qualname}", module=module, globs=dict(vars(module)))
    assert tests and tests[0].examples, f"{module_name}.{qualname}: no >>> examples found"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pydial.DataWarning)  # the Arena file's 26 duplicated rows
        for test in tests:
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{module_name}.{qualname}: {result.failed} of {result.attempted} examples failed"


@pytest.mark.parametrize("module_name, qualname", FAST, ids=[q for _, q in FAST])
def test_examples(module_name, qualname):
    _run(module_name, qualname)


@pytest.mark.stan
@pytest.mark.parametrize("module_name, qualname", STAN, ids=[q for _, q in STAN])
def test_stan_examples(module_name, qualname, stan_backend_name):
    _run(module_name, qualname)
