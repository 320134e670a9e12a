"""Backend selection, compile errors, program files, caching and the sampler plumbing."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest

from pydial.model.chart import Chart
from pydial.model.families import family_of
from pydial.studies.simulate import simulate
from pydial.stan import (
    BACKENDS,
    PROGRAMS,
    SampleResult,
    SamplerWarning,
    StanBackendError,
    StanCompileError,
    compile_model,
    program_code,
    program_path,
    stan_backend,
)
from pydial.stan.backend import backend_available
from pydial.stan.parameters import dial_coordinates, dial_from_unconstrained, dial_parameters, dial_unconstrained
from pydial.stan.programs import expand_includes, program_dir
from pydial.stan.schema import (
    dial_data,
    dial_sample_data,
    judges_data,
    llm_cell_table,
)

pytestmark = pytest.mark.stan


# ------------------------------------------------------------------ backend selection
@pytest.mark.skipif(not any(backend_available(b) for b in BACKENDS), reason="no Stan backend installed")
def test_default_backend_follows_cmdstan_availability(monkeypatch):
    monkeypatch.delenv("PYDIAL_STAN_BACKEND", raising=False)
    be = stan_backend()
    assert be in BACKENDS
    assert be == ("cmdstanpy" if backend_available("cmdstanpy") else "httpstan")
    for name in BACKENDS:
        if backend_available(name):
            assert stan_backend(name) == name


def test_environment_variable_chooses_the_backend(monkeypatch, stan_backend_name):
    import pydial

    monkeypatch.setenv("PYDIAL_STAN_BACKEND", stan_backend_name)
    assert pydial.stan_backend() == stan_backend_name
    assert compile_model("judges").backend == stan_backend_name
    monkeypatch.setenv("PYDIAL_STAN_BACKEND", "rstan")
    with pytest.raises(ValueError, match="PYDIAL_STAN_BACKEND"):
        stan_backend()


def test_forcing_an_unknown_backend_is_a_value_error():
    with pytest.raises(ValueError, match="backend must be one of"):
        stan_backend("rstan")


@pytest.mark.skipif(backend_available("cmdstanpy"), reason="CmdStan is installed here, so forcing it cannot fail")
def test_forcing_unavailable_cmdstan_raises():
    with pytest.raises(StanBackendError, match="install_cmdstan"):
        stan_backend("cmdstanpy")
    with pytest.raises(StanBackendError):
        compile_model("dial", backend="cmdstanpy")


# ------------------------------------------------------------------ programs and compile errors
def test_programs_are_found_and_self_contained():
    d = program_dir()
    for name in PROGRAMS:
        assert program_path(name) == d / f"{name}.stan"
        code = program_code(name)
        assert "#include" not in _statements(code)
        assert "target +=" in code and "~ " not in _statements(code)  # target += keeps all constants
    with pytest.raises(ValueError, match="unknown Stan program"):
        program_path("nope")


def _statements(code: str) -> str:
    import re

    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    return re.sub(r"//[^\n]*", "", code)


def test_missing_include_is_named(tmp_path):
    (tmp_path / "a.stan").write_text("functions {\n#include missing.stan\n}\n")
    with pytest.raises(FileNotFoundError, match="missing.stan"):
        expand_includes((tmp_path / "a.stan").read_text(), [tmp_path])


def test_syntax_error_gives_stanc_message(stan_backend_name):
    bad = "parameters { real x } model { x ~ normal(0, 1); }"  # missing ';'
    with pytest.raises(StanCompileError) as e:
        compile_model("broken", code=bad, backend=stan_backend_name)
    msg = str(e.value)
    assert "broken" in msg and "Syntax error" in msg and "line 1" in msg


def test_semantic_error_gives_stanc_message(stan_backend_name):
    bad = "parameters { real x; } model { y ~ normal(0, 1); }"
    with pytest.raises(StanCompileError, match="Semantic error") as e:
        compile_model("broken2", code=bad, backend=stan_backend_name)
    assert "y" in str(e.value)


def test_compiled_models_are_cached(models):
    """One model per program and backend in the process (the session's models are copies when it compiled them)."""
    for name, m in models.items():
        again = compile_model(name)
        assert again is compile_model(name)
        assert again.code == m.code and again.backend == m.backend == stan_backend()


# ------------------------------------------------------------------ one process, several models
def test_reimport_by_httpstan_does_not_switch_models(models, stan_backend_name):
    """httpstan re-imports every model as module 'stan_services'; pydial keeps its own functions."""
    if stan_backend_name != "httpstan":
        pytest.skip("httpstan only")
    import httpstan.models

    data = simulate(N=6, K=2, rank=0, n_llm=500, n_human=100, seed=3).comparisons
    ch = Chart(data.N, data.K, 0, "mu", True)
    d = dial_data(data, ch, w_llm=1.0, w_human=1.0)
    theta = dial_unconstrained(d, np.linspace(-1, 1, ch.dim))
    before = models["dial"].log_prob(d, theta)
    for name in ("judges", "dial_sample", "judges"):  # what pystan's server does when it builds models
        httpstan.models.import_services_extension_module(models[name].model_name)
    assert models["dial"].log_prob(d, theta) == before
    assert "stan_services" not in sys.modules or sys.modules["stan_services"] is not models["dial"]._module


# ------------------------------------------------------------------ parameters from the compiled model
def test_parameter_shapes_and_unconstrained_order(models):
    """Names and shapes come from the compiled model; the unconstrained vector is each parameter
    flattened column-major in declaration order (checked on httpstan against Stan's own transform)."""
    data = simulate(N=6, K=3, rank=1, n_llm=800, n_human=100, seed=4).comparisons
    rng = np.random.default_rng(0)
    dj = judges_data(llm_cell_table(data), None, N=data.N, K=data.K, order=True)
    ds, _, _ = dial_sample_data(data, rank=1, calibration="W")
    dd = dial_data(data, Chart(data.N, data.K, 1, "W", True), w_llm=1.0, w_human=1.0)
    expect = {
        "judges": {"s_raw": (3, 5), "sH_raw": (0,), "b": (3,), "beta_free": (0,), "log_nu": (0,)},
        "dial_sample": {"m_raw": (5,), "Z_raw": (4, 1), "gamma_dev": (2,), "P_raw": (2, 1), "b": (3,), "beta_free": (0,),
                        "c": (2,), "log_nu": (0,)},
        "dial": {"A_free": (2, 2), "B_free": (5, 2), "c": (2,), "b": (3,), "beta_free": (0,), "log_nu": (0,)},
    }
    for name, d in (("judges", dj), ("dial_sample", ds), ("dial", dd)):
        m = models[name]
        shapes = m.parameter_shapes(d)
        assert list(shapes) == list(expect[name]) == m.parameter_names()
        assert shapes == expect[name]
        n = m.num_unconstrained(d)
        u = rng.normal(size=n)
        vals = m.constrain(d, u, include_tparams=False)
        flat = np.concatenate([np.asarray(vals[k], float).reshape(shapes[k]).ravel(order="F") for k in shapes])
        np.testing.assert_allclose(flat, u, rtol=1e-14)
        np.testing.assert_allclose(m.unconstrain(d, vals), u, rtol=1e-14)


def test_constrain_names_the_blocks_it_was_asked_for(models):
    """Every combination of transformed parameters and generated quantities is named by its own variables,
    with the values of the full write (httpstan once put generated quantities under transformed-parameter names)."""
    data = simulate(N=6, K=3, rank=1, n_llm=800, n_human=100, seed=4).comparisons
    d, _, _ = dial_sample_data(data, rank=1, calibration="W")
    m = models["dial_sample"]
    u = np.random.default_rng(1).normal(size=m.num_unconstrained(d))
    blocks = {k: list(m._stanc_info()[k]) for k in ("parameters", "transformed parameters", "generated quantities")}
    full = m.constrain(d, u, include_tparams=True, include_gqs=True)
    assert list(full) == [n for b in blocks.values() for n in b]
    for tparams in (False, True):
        for gqs in (False, True):
            got = m.constrain(d, u, include_tparams=tparams, include_gqs=gqs)
            want = blocks["parameters"] + blocks["transformed parameters"] * tparams + blocks["generated quantities"] * gqs
            assert list(got) == want, (tparams, gqs)
            for n in want:
                if n != "counts_rep":  # drawn: differs between writes
                    np.testing.assert_array_equal(np.shape(got[n]), np.shape(full[n]), err_msg=n)
                    np.testing.assert_allclose(got[n], full[n], rtol=1e-12, err_msg=n)


def test_dial_parameters_are_the_chart_blocks_by_name(models):
    """pydial.stan.parameters maps the chart's theta (and log nu) to dial.stan's named parameters and back:
    A_free and B_free are the chart's rows of A and B, and the map to Stan's unconstrained vector is the model's own."""
    data = simulate(N=6, K=3, rank=1, n_llm=800, n_human=100, seed=4).comparisons
    m = models["dial"]
    for ties, cal in ((None, "W"), ("davidson", "mu")):
        ch = Chart(data.N, data.K, 1, cal, True)
        d = dial_data(data, ch, w_llm=1.0, w_human=1.0, family=family_of(ties))
        x = np.random.default_rng(1).normal(size=m.num_unconstrained(d))
        parts = dial_parameters(d, x)
        A, B, _, _ = ch.unpack(x[: ch.dim])
        np.testing.assert_array_equal(parts["A_free"], A[:-1])
        np.testing.assert_array_equal(parts["B_free"], B[:-1])
        np.testing.assert_array_equal(parts["c"], x[ch.slices["c"]])
        np.testing.assert_array_equal(parts["b"], x[ch.slices["b"]])
        np.testing.assert_array_equal(parts["log_nu"], x[ch.dim:])
        u = dial_unconstrained(d, x)
        np.testing.assert_array_equal(u, m.unconstrain(d, parts))
        np.testing.assert_array_equal(dial_from_unconstrained(d, u), x)
        np.testing.assert_array_equal(dial_coordinates(d, m.constrain(d, u, include_tparams=False)), x)


# ------------------------------------------------------------------ sampler plumbing
def _tiny_judges(data):
    L = llm_cell_table(data)
    return judges_data(L, None, N=data.N, K=data.K, order=True)


def test_sample_shapes_and_chain_order(models):
    data = simulate(N=5, K=2, rank=0, n_llm=600, n_human=10, seed=5).comparisons
    res = models["judges"].sample(_tiny_judges(data), chains=3, draws=120, warmup=100, seed=4)
    assert res.draws["S"].shape == (3, 120, data.K, data.N)
    assert res.stats["lp__"].shape == (3, 120)
    # the adapted step size is constant within a chain and differs between chains
    st = res.stats["stepsize__"]
    assert np.all(st == st[:, :1])
    assert len(np.unique(st[:, 0])) == 3
    # scores are centered in every draw
    np.testing.assert_allclose(res.draws["S"].sum(axis=-1), 0, atol=1e-10)


def test_sampling_inside_a_running_event_loop(models):
    """As in Jupyter: pystan's asyncio.run must not collide with the caller's loop."""
    data = simulate(N=5, K=2, rank=0, n_llm=300, n_human=10, seed=6).comparisons
    d = _tiny_judges(data)

    async def main():
        return models["judges"].sample(d, chains=1, draws=30, warmup=30, seed=1)

    res = asyncio.run(main())
    assert res.draws["S"].shape == (1, 30, data.K, data.N)


def test_sampler_checks_flag_problems():
    """The diagnostics catch divergences and chains that disagree (arrays built by hand)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 500))
    x[1] += 3.0  # one chain elsewhere
    div = np.zeros((4, 500))
    div[2, 10] = 1
    res = SampleResult(draws={"theta": x, "ok": rng.normal(size=(4, 500))},
                       stats={"divergent__": div, "treedepth__": np.full((4, 500), 3.0),
                              "energy__": rng.normal(size=(4, 500))},
                       chains=4, draws_per_chain=500, warmup=500, seed=0, max_depth=10, backend="httpstan", seconds=0.0)
    with pytest.warns(SamplerWarning, match="divergent"):
        problems = res.check()
    assert any("1 divergent" in p for p in problems)
    assert any("R-hat" in p and "theta" in p for p in problems)
    assert res.diagnostics.loc["theta", "rhat"] > 1.1
    assert res.diagnostics.loc["ok", "rhat"] < 1.01
    clean = SampleResult(draws={"ok": rng.normal(size=(4, 500))}, stats={}, chains=4, draws_per_chain=500,
                         warmup=500, seed=0, max_depth=10, backend="httpstan", seconds=0.0)
    assert clean.check() == []


def test_collapsed_approximation_is_flagged():
    """Pathfinder's importance resampling can return a few points repeated (seen at N = 300, K = 30: every
    95% interval of width 0): the check names it; independent draws pass."""
    rng = np.random.default_rng(1)
    points = rng.normal(size=(3, 5))
    collapsed = points[rng.integers(3, size=600)][None]  # one chain of 600 draws, 3 distinct
    kw = dict(stats={}, chains=1, draws_per_chain=600, warmup=0, seed=0, max_depth=10, backend="cmdstanpy",
              seconds=0.0, algorithm="pathfinder")
    problems = SampleResult(draws={"s_H": collapsed}, **kw).check(warn=False)
    assert len(problems) == 1 and "3 distinct draws of 600" in problems[0] and "laplace" in problems[0]
    assert SampleResult(draws={"s_H": rng.normal(size=(1, 600, 5))}, **kw).check(warn=False) == []


# ------------------------------------------------------------------ backend modules and the optimizer driver
def test_backend_modules_share_one_interface(models, stan_backend_name):
    from pydial.stan.backend import BACKEND_MODULES
    from pydial.stan.compiled import BackendModule, CompiledModel

    assert tuple(BACKEND_MODULES) == BACKENDS
    for name, mod in BACKEND_MODULES.items():
        assert isinstance(mod, BackendModule)
        assert mod.NAME == name
        assert callable(mod.available) and callable(mod.is_compiled) and callable(mod.compile_program)
    m = models["judges"]
    assert isinstance(m, CompiledModel) and m.backend == stan_backend_name
    assert BACKEND_MODULES[stan_backend_name].is_compiled("judges", m.code)


def test_lbfgs_driver_holds_fixed_coordinates_and_bounds():
    from pydial.optim import lbfgs_minimize

    target = np.array([1.0, -2.0, 3.0, 0.5])

    def fg(x):
        return float(np.sum((x - target) ** 2)) + 10.0, 2.0 * (x - target)

    res = lbfgs_minimize(fg, np.zeros(4), fixed=[False, True, False, False],
                         bounds=[(None, None), (None, None), (None, 2.0), (None, None)], gtol=1e-10)
    assert res.converged
    np.testing.assert_allclose(res.x, [1.0, 0.0, 2.0, 0.5], atol=1e-7)
    assert res.fun == pytest.approx(10.0 + 4.0 + 1.0)
    assert res.grad_norm <= 1e-10 * res.fun  # the gradient at the active bound is projected out


def test_lbfgs_driver_resolves_the_optimum_beyond_the_rounding_of_f():
    """A quadratic on a large offset: L-BFGS-B's line search stalls where the decrease it needs falls
    below eps |f| (max |g| near sqrt(eps |f| ||A||) ~ 1e-3 here); the Newton steps judged by the
    gradient reach the closed-form optimum A^{-1} c."""
    from pydial.optim import lbfgs_minimize

    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.normal(size=(12, 12)))[0]
    A = Q @ np.diag(np.geomspace(1.0, 100.0, 12)) @ Q.T
    c = rng.normal(size=12)

    def fg(x):
        return 1e8 + 0.5 * x @ A @ x - c @ x, A @ x - c

    res = lbfgs_minimize(fg, np.zeros(12), gtol=1e-20)
    assert "ABNORMAL" in res.message or "REDUCTION OF F" in res.message  # L-BFGS-B did stall
    np.testing.assert_allclose(res.x, np.linalg.solve(A, c), atol=1e-10)
    assert res.grad_norm < 1e-9


def test_httpstan_needs_a_pybind11_that_loads_on_this_python(monkeypatch):
    """httpstan compiles every model with the pybind11 it bundles; pybind11 2.9 modules do not load on 3.13."""
    from pydial.stan import httpstan_backend as hb

    pytest.importorskip("httpstan")
    pytest.importorskip("stan")
    import httpstan

    header = Path(httpstan.__file__).parent / "include" / "pybind11" / "detail" / "common.h"
    text = header.read_text()
    major = int(text.split("#define PYBIND11_VERSION_MAJOR")[1].split()[0])
    minor = int(text.split("#define PYBIND11_VERSION_MINOR")[1].split()[0])
    assert hb.bundled_pybind11(header.parents[3]) == (major, minor)
    monkeypatch.setattr(hb, "bundled_pybind11", lambda _: (2, 9))
    monkeypatch.setattr(sys, "version_info", (3, 13, 0, "final", 0))
    assert "pybind11 2.9" in hb.unavailable_reason() and not hb.available()
    with pytest.raises(StanBackendError, match="Python 3.13"):
        stan_backend("httpstan")
    monkeypatch.setattr(sys, "version_info", (3, 12, 1, "final", 0))
    assert hb.unavailable_reason() is None
