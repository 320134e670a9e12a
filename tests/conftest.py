"""Shared fixtures, and the selection of the Stan tests.

Every Stan test runs once per available backend: the session fixture
``stan_backend_name`` is parametrized over CmdStan (cmdstanpy) and the Stan of
httpstan, and sets ``PYDIAL_STAN_BACKEND`` while its tests run, so that code
under test that picks the default backend uses it.  ``PYDIAL_TEST_BACKENDS``
(comma-separated) restricts the list.

A test that uses a Stan fixture (directly or through another fixture) is marked
``stan`` here, so ``pytest -m "not stan"`` runs everything that needs no Stan backend.

``PYDIAL_TEST_STAN`` chooses how many Stan tests run: ``all`` (the default) or
``smoke``, for every backend, or per backend as ``httpstan:smoke`` (comma-separated;
an unnamed backend runs all).  The smoke subset, :data:`SMOKE`, runs each shipped
Stan program and each path of a backend once (compile, compile errors, the cache,
log density and gradient, the transforms, both optimizers, NUTS, the approximations,
the posterior and its comparison, the extension example); its tests are marked
``smoke`` and the other Stan tests of a smoke backend are deselected.  A Stan test
without a backend parameter runs unless every backend is a smoke one.  An entry of
:data:`SMOKE` that names no collected test of a collected file stops the run.
"""

import os
import re

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
LEVELS = ("all", "smoke")

SMOKE = (
    # backend paths: selection, compile (and its cache), stanc's messages, shapes and transforms, NUTS, event loop
    "tests/test_stan_backend.py::test_environment_variable_chooses_the_backend",
    "tests/test_stan_backend.py::test_syntax_error_gives_stanc_message",
    "tests/test_stan_backend.py::test_compiled_models_are_cached",
    "tests/test_stan_backend.py::test_parameter_shapes_and_unconstrained_order",
    "tests/test_stan_backend.py::test_constrain_names_the_blocks_it_was_asked_for",
    "tests/test_stan_backend.py::test_sample_shapes_and_chain_order",
    "tests/test_stan_backend.py::test_sampling_inside_a_running_event_loop",
    "tests/test_stan_backend.py::test_backend_modules_share_one_interface",
    "tests/test_stan_cache.py::test_two_processes_compile_one_program_into_an_empty_cache",
    # each program's log density against numpy: dial (binary, ties), judges, dial_sample, dial_calibrate
    "tests/test_stan_logprob.py::test_dial_log_prob_equals_numpy_objective",
    "tests/test_stan_logprob.py::test_dial_tie_log_prob_equals_numpy_cells",
    "tests/test_stan_logprob.py::test_judges_log_prob_equals_numpy_cells",
    "tests/test_stan_logprob.py::test_dial_sample_structure_and_log_lik",
    "tests/test_stan_logprob.py::test_dial_calibrate_log_prob_equals_numpy_cells",
    "tests/test_covariates_stan.py::test_dial_log_prob_with_fixed_effects_equals_numpy",
    # point fits through Stan's optimizers (joint, staged, judges) and a refused point's message
    "tests/test_stan_optimize.py::test_joint_fit_matches_numpy_newton",
    "tests/test_stan_optimize.py::test_staged_fit_matches_numpy_dial_anc",
    "tests/test_stan_optimize.py::test_judgewise_btl_matches_numpy",
    "tests/test_stan_optimize.py::test_fixed_coordinates_stay_fixed",
    "tests/test_stan_user_program.py::test_cmdstan_optimizer_failure_carries_stans_message",
    # the optimizer to its tolerance where L-BFGS-B's line search stalls at the rounding of f
    "tests/test_stan_backend.py::test_lbfgs_driver_resolves_the_optimum_beyond_the_rounding_of_f",
    "tests/test_stan_firth.py::test_pooled_and_staged_firth_match_numpy",
    # the posterior: NUTS on dial_sample and judges, ties, the approximations, the extension example
    "tests/test_stan_posterior.py::test_inference_data_layout",
    "tests/test_stan_posterior.py::test_human_only_posterior",
    "tests/test_stan_like.py::test_matched_pair_agrees",
    "tests/test_stan_like.py::test_like_with_ties",
    "tests/test_stan_like.py::test_httpstan_fit_cache_is_cleared",
    "tests/test_stan_approx.py::test_laplace_cut_posterior_of_dial_anc",
    "tests/test_stan_approx.py::test_httpstan_names_the_cmdstan_way",
    "tests/test_example_extension.py::test_extension_runs_on_arena_subset_and_compares_by_loo",
    "tests/test_cli.py::test_fit_engine_stan",
)
"""The Stan smoke subset: ``file::test`` (every parameter) or ``file::test[params]`` (the test's
parameters without the backend's)."""


def _levels() -> dict[str, str]:
    """The level of each backend from ``PYDIAL_TEST_STAN`` (``LEVEL`` or ``BACKEND:LEVEL``, comma-separated)."""
    out = dict.fromkeys(BACKENDS, "all")
    for part in filter(None, (p.strip() for p in os.environ.get("PYDIAL_TEST_STAN", "").split(","))):
        backend, _, level = part.rpartition(":")
        if level not in LEVELS or (backend and backend not in BACKENDS):
            raise pytest.UsageError(f"PYDIAL_TEST_STAN={os.environ['PYDIAL_TEST_STAN']!r}: {part!r} is not a level "
                                    f"{LEVELS} nor BACKEND:LEVEL with a backend in {BACKENDS}")
        for b in [backend] if backend else BACKENDS:
            out[b] = level
    return out


def _smoke_key(item) -> tuple[str, str, str | None]:
    """The item's test (``file::name``), its node id without the backend's parameter, and its backend."""
    base = item.nodeid.split("[", 1)[0]
    backend = getattr(getattr(item, "callspec", None), "params", {}).get("stan_backend_name")
    key = item.nodeid
    if backend:
        key = re.sub(rf"(?<=[\[-]){re.escape(backend)}(-|(?=\]))", "", key).replace("-]", "]").replace("[]", "")
    return base, key, backend


def pytest_collection_modifyitems(config, items):
    """Mark ``stan`` every test that depends on a Stan fixture; keep only the smoke subset of a smoke backend."""
    levels = _levels()
    found: dict[str, int] = dict.fromkeys(SMOKE, 0)
    keep, dropped = [], []
    for item in items:
        if not STAN_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("stan"):
            keep.append(item)
            continue
        item.add_marker(pytest.mark.stan)
        base, key, backend = _smoke_key(item)
        hits = [e for e in (base, key) if e in found]
        for e in hits:
            found[e] += 1
        if hits:
            item.add_marker(pytest.mark.smoke)
        smoke_only = levels[backend] == "smoke" if backend else all(levels[b] == "smoke" for b in AVAILABLE_BACKENDS)
        (dropped if smoke_only and not hits else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    _check_smoke_list(config, items + dropped, found)


def _check_smoke_list(config, items, found: dict[str, int]) -> None:
    """Stop the run when an entry of :data:`SMOKE` names no collected test of a file that was collected whole."""
    if any("::" in str(a) for a in config.args):
        return
    files = {item.nodeid.split("::", 1)[0] for item in items}
    root = config.rootpath
    stale = [e for e, n in found.items() if not n and (e.split("::")[0] in files or not (root / e.split("::")[0]).is_file())]
    if stale:
        raise pytest.UsageError("tests/conftest.py SMOKE names no collected test: " + ", ".join(stale)
                                + " (a renamed or removed test: update the smoke list)")


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
