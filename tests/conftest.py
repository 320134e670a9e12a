"""Shared fixtures.

Every Stan test runs once per available backend: the session fixture
``stan_backend_name`` is parametrized over CmdStan (cmdstanpy) and the Stan of
httpstan, and sets ``PYDIAL_STAN_BACKEND`` while its tests run, so that code
under test that picks the default backend uses it.  ``PYDIAL_TEST_BACKENDS``
(comma-separated) restricts the list.

A test that uses a Stan fixture (directly or through another fixture) is marked
``stan`` here, so ``pytest -m "not stan"`` runs everything that needs no Stan backend.
"""

import os

import pytest

from pydial.stan.backend import BACKEND_ENV, BACKENDS, backend_available


def _available() -> list[str]:
    have = {b: backend_available(b) for b in BACKENDS}
    wanted = os.environ.get("PYDIAL_TEST_BACKENDS")
    names = [b for b in BACKENDS if have[b]]
    if wanted:
        names = [b for b in names if b in wanted.split(",")]
    return names


AVAILABLE_BACKENDS = _available()
STAN_FIXTURES = frozenset({"stan_backend_name", "models"})


def pytest_collection_modifyitems(config, items):
    """Mark ``stan`` every test that depends on a Stan fixture."""
    for item in items:
        if STAN_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.stan)


@pytest.fixture(scope="session", params=AVAILABLE_BACKENDS or [pytest.param(None, marks=pytest.mark.skip("no Stan backend"))])
def stan_backend_name(request):
    """The Stan backend of the test (also the default backend while it runs)."""
    old = os.environ.get(BACKEND_ENV)
    os.environ[BACKEND_ENV] = request.param
    yield request.param
    if old is None:
        os.environ.pop(BACKEND_ENV, None)
    else:
        os.environ[BACKEND_ENV] = old


@pytest.fixture(scope="session")
def models(stan_backend_name):
    """The Stan programs on this backend, compiled once per session (cached on disk)."""
    from pydial.stan import precompile

    return precompile(backend=stan_backend_name)
