"""The Laplace approximation of ``dial_sample.stan`` from its exact Hessian (:mod:`pydial.stan.laplace`).

References: Stan itself (the program's ``log_prob`` and its autodiff gradient on either backend), central
finite differences of the gradient (the Hessian), and CmdStan's own ``laplace_sample`` (its draws' means and
standard deviations, within Monte Carlo error).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pydial
from pydial import ConvergenceError, ModelSpec
from pydial.model.families import family_of
from pydial.stan import estimand, posterior
from pydial.stan.idata import group_dataset
from pydial.stan.laplace import LogDensity, SampleProgram, frame_scale, laplace_sample, mode, with_frame_sd
from pydial.stan.schema import dial_sample_data, dial_sample_inits, dial_sample_start, mu_reference

CONFIGS = {
    "binary-W-r1": dict(ties=None, calibration="W", rank=1, order=True, covariates=False),
    "davidson-mu-r2": dict(ties="davidson", calibration="mu", rank=2, order=True, covariates=False),
    "rao-kupper-W-r1-covariates": dict(ties="rao-kupper", calibration="W", rank=1, order=True, covariates=True),
    "binary-llm-only-nopos-r0": dict(ties=None, calibration=None, rank=0, order=False, covariates=False),
    "binary-W-r2-covariates": dict(ties=None, calibration="W", rank=2, order=True, covariates=True),
}


def _case(name: str):
    """Data, the program's data and a start for configuration ``name`` (small simulated data)."""
    c = CONFIGS[name]
    sim = pydial.simulate(N=7, K=4, rank=max(c["rank"], 1), n_llm=6000, n_human=900, seed=11,
                          ties=c["ties"], tie_rate=0.2 if c["ties"] else 0.0,
                          covariates=["length"] if c["covariates"] else None, beta=0.3 if c["covariates"] else None)
    data = sim.comparisons
    start = dial_sample_start(data, rank=c["rank"], calibration=c["calibration"], order=c["order"])
    d, _, _ = dial_sample_data(data, rank=c["rank"], calibration=c["calibration"], order=c["order"],
                               family=family_of(c["ties"]), w_llm=0.3, w_human=1.0, priors=None, log_lik=True,
                               win_prob=c["calibration"] is not None, mu_ref=mu_reference(start[0].mu))
    init = dial_sample_inits(data, d, chains=1, rng=np.random.default_rng(3), start=start)[0]
    return data, d, init


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_log_density_and_gradient_are_stans(models, name):
    """Value (up to Stan's constant-free terms: differences between points) and gradient against Stan's autodiff."""
    _, d, init = _case(name)
    prog = SampleProgram.from_data(d)
    logp = LogDensity(prog)
    rng = np.random.default_rng(5)
    u = prog.join(init)
    cm = models["dial_sample"]
    for v in (u, u + 0.1 * rng.standard_normal(u.size)):
        ours, theirs = logp(v), cm.grad_log_prob(d, v)
        np.testing.assert_allclose(ours.grad, theirs, rtol=1e-9, atol=1e-9 * np.abs(theirs).max())
    v = u + 0.1 * rng.standard_normal(u.size)
    assert logp(u).value - logp(v).value == pytest.approx(cm.log_prob(d, u) - cm.log_prob(d, v), rel=1e-9, abs=1e-8)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hessian_is_the_derivative_of_the_gradient(name):
    """Every column of the exact Hessian against central differences of the exact gradient."""
    _, d, init = _case(name)
    logp = LogDensity(SampleProgram.from_data(d))
    u = SampleProgram.from_data(d).join(init)
    H = logp(u, hess=True).hess
    h = 1e-5
    fd = np.column_stack([(logp(u + h * e).grad - logp(u - h * e).grad) / (2 * h) for e in np.eye(u.size)])
    np.testing.assert_allclose(H, H.T, atol=1e-9 * np.abs(H).max())
    np.testing.assert_allclose(H, fd, atol=2e-6 * np.abs(H).max())


@pytest.mark.parametrize("name", ["binary-W-r1", "davidson-mu-r2"])
def test_newtons_mode_is_stans_mode(models, name):
    """At the mode Newton returns, Stan's own gradient vanishes."""
    _, d, init = _case(name)
    prog = SampleProgram.from_data(d)
    u_hat, pt, iterations = mode(LogDensity(prog), prog.join(init))
    g0 = np.abs(models["dial_sample"].grad_log_prob(d, prog.join(init))).max()
    assert np.abs(models["dial_sample"].grad_log_prob(d, u_hat)).max() < 1e-6 * max(g0, 1.0)
    assert iterations < 40


def test_draws_agree_with_cmdstans_laplace_sample(models, stan_backend_name):
    """On the Arena data: means within Monte Carlo error and standard deviations within 6% of CmdStan's."""
    if stan_backend_name != "cmdstanpy":
        pytest.skip("laplace_sample is CmdStan's")
    data = pydial.datasets.arena()
    d = pydial.stan.standata(data, "dial_sample", rank=1, calibration="W")
    d["calc_log_lik"] = 0
    init = dial_sample_inits(data, d, chains=1, rng=np.random.default_rng(0))[0]
    n = 4000
    theirs = models["dial_sample"].approximate(d, algorithm="laplace", draws=n, seed=1, init=init).draws
    ours, stats, _ = laplace_sample(d, init, draws=n, seed=2)
    assert set(ours) == set(theirs) and set(stats) == {"log_p__", "log_q__"}
    for k in ("s_H", "S", "b", "gamma", "c", "consensus_scale"):
        a, b = theirs[k].reshape(n, -1), ours[k].reshape(n, -1)
        assert a.shape == b.shape
        z = np.abs(a.mean(0) - b.mean(0)) / (a.std(0) * np.sqrt(2 / n))
        assert z.max() < 4.5, (k, z.max())   # the largest of about 60 standard normals
        np.testing.assert_allclose(b.std(0) / a.std(0), 1.0, atol=0.06)


def test_posterior_laplace_is_numpys_on_every_backend(models, stan_backend_name):
    """``posterior(algorithm="laplace")`` of a DIAL method: the estimand, ``draws`` honoured, means near the fit."""
    data = pydial.simulate(N=6, K=3, rank=1, n_llm=20000, n_human=3000, seed=4).comparisons
    spec = ModelSpec("dial-ada", rank=1, calibration="W", lambda_=[5.0], include_endpoints=False, cov_type="fisher")
    res = pydial.fit(data, spec=spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = posterior(data, like=res, algorithm="laplace", draws=1500, seed=3, backend=stan_backend_name)
    assert idata.attrs["algorithm"] == "laplace"
    assert estimand(idata).spec == res.spec
    s_H = group_dataset(idata, "posterior")["s_H"].to_numpy()
    assert s_H.shape == (1, 1500, data.N)
    se = res.scores["se"].to_numpy()
    assert np.all(np.abs(s_H.reshape(-1, data.N).mean(0) - res.scores["score"].to_numpy()) < 0.25 * se)
    np.testing.assert_allclose(s_H.reshape(-1, data.N).std(0) / se, 1.0, atol=0.15)


def test_a_start_where_the_density_is_not_finite_is_a_convergence_error():
    _, d, init = _case("binary-W-r1")
    prog = SampleProgram.from_data(d)
    with pytest.raises(ConvergenceError, match="not finite at the start"):
        laplace_sample(d, dict(init) | {"m_raw": np.zeros(prog.N - 1)}, draws=10, seed=1)


def test_frame_scale_gives_p_raw_one_scale():
    """At the matched frame_sd the length of P_raw has the posterior sd of the frame's directions (within 40%)."""
    data, d, init = _case("binary-W-r1")
    prog = SampleProgram.from_data(d)
    u_hat, pt, _ = mode(LogDensity(prog), prog.join(init))
    fs = frame_scale(prog, u_hat, pt.hess)
    assert 1e-3 <= fs <= 0.2
    d2 = dict(d) | {"frame_sd": fs}
    prog2 = SampleProgram.from_data(d2)
    u2, pt2, _ = mode(LogDensity(prog2), u_hat)
    k = prog2.indices(("P_raw",))
    cov = np.linalg.inv(-pt2.hess)[np.ix_(k, k)]
    p = u2[k] / np.linalg.norm(u2[k])
    radial = np.sqrt(p @ cov @ p)
    angular = np.sqrt((np.trace(cov) - p @ cov @ p) / (k.size - 1))
    assert fs < 0.2   # this case is matched, not at the bound
    assert radial == pytest.approx(angular, rel=0.4)
    assert frame_scale(prog2, u2, pt2.hess) == pytest.approx(fs, rel=0.05)   # a fixed point


def test_posterior_records_and_checks_frame_sd(models, stan_backend_name):
    """NUTS at the matched scale and at a fixed one: the same posterior of s_H; attrs record the scale; a bad one is refused."""
    data = pydial.simulate(N=6, K=3, rank=1, n_llm=20000, n_human=3000, seed=4).comparisons
    runs = {}
    for fs in (None, 0.2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs[fs] = posterior(data, rank=1, calibration="mu", chains=2, draws=600, warmup=400, seed=3,
                                 backend=stan_backend_name, options={"frame_sd": fs, "log_lik": None})
    assert runs[0.2].attrs["frame_sd"] == 0.2
    assert 1e-3 <= runs[None].attrs["frame_sd"] <= 0.2
    a, b = (group_dataset(runs[k], "posterior")["s_H"].to_numpy().reshape(-1, data.N) for k in (None, 0.2))
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < 0.2 * b.std(0))
    np.testing.assert_allclose(a.std(0) / b.std(0), 1.0, atol=0.2)
    with pytest.raises(pydial.ArgumentError, match="frame_sd"):
        posterior(data, options={"frame_sd": -1.0})


def test_a_dense_metric_is_kept_through_warmup(models, stan_backend_name):
    """CmdStan's reported metric is the dense one given (only the step size adapted); a bad one is refused."""
    if stan_backend_name != "cmdstanpy":
        pytest.skip("httpstan takes no initial metric")
    _, d, init = _case("binary-W-r1")
    prog = SampleProgram.from_data(d)
    u_hat, pt, _ = mode(LogDensity(prog), prog.join(init))
    cov = np.linalg.inv(-pt.hess)
    res = models["dial_sample"].sample(d, chains=2, draws=50, warmup=60, seed=2, inits=[init, init], inv_metric=cov)
    assert res.metric == "dense (kept)"
    for kept in res.backend_fit.inv_metric:   # per chain, as CmdStan wrote it after warmup (6 significant digits)
        np.testing.assert_allclose(kept, cov, rtol=1e-5, atol=1e-6 * np.abs(cov).max())
    assert np.ptp(res.stats["stepsize__"]) > 0   # the step size was adapted per chain
    for bad in (-cov, cov[:, :-1], cov + np.triu(np.ones_like(cov), 1)):
        with pytest.raises(pydial.ArgumentError, match="inv_metric"):
            models["dial_sample"].sample(d, chains=1, draws=5, warmup=5, inv_metric=bad)


def test_dense_and_diagonal_metrics_sample_one_posterior(models, stan_backend_name):
    """NUTS with the Laplace covariance as a dense metric and with its variances adapted: the same posterior of s_H."""
    if stan_backend_name != "cmdstanpy":
        pytest.skip("httpstan takes no initial metric")
    data = pydial.simulate(N=6, K=3, rank=1, n_llm=20000, n_human=3000, seed=4).comparisons
    runs = {}
    for metric in ("dense", "diag"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs[metric] = posterior(data, rank=1, calibration="mu", chains=2, draws=1000, warmup=300, seed=3,
                                     backend=stan_backend_name, options={"metric": metric, "log_lik": None})
    assert runs["dense"].attrs["metric"] == "dense (kept)" and runs["diag"].attrs["metric"] == "diag (adapted)"
    a, b = (group_dataset(runs[k], "posterior")["s_H"].to_numpy().reshape(-1, data.N) for k in ("dense", "diag"))
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < 0.15 * b.std(0))
    np.testing.assert_allclose(a.std(0) / b.std(0), 1.0, atol=0.12)
    with pytest.raises(pydial.ArgumentError, match="metric"):
        posterior(data, options={"metric": "unit"})


def _matched(data, calibration="mu"):
    """The program at the matched frame scale, its mode and Hessian there."""
    d = dial_sample_data(data, rank=1, calibration=calibration, w_llm=data.n_human / data.n_llm, log_lik=False)[0]
    init = dial_sample_inits(data, d, chains=1, rng=np.random.default_rng(0))[0]
    prog = SampleProgram.from_data(d)
    u, pt, _ = mode(LogDensity(prog), prog.join(init))
    prog, hess = with_frame_sd(prog, u, pt.hess, frame_scale(prog, u, pt.hess))
    return prog, u, hess


def test_dense_metric_only_where_the_posterior_is_close_to_normal():
    """metric="auto": dense on plentiful data (Pareto k near 0), diagonal on a handful of judgments (k far above 0.3)."""
    from pydial.stan.dial_posterior import DENSE_METRIC_MAX, dense_pays

    big = pydial.simulate(N=8, K=4, rank=1, n_llm=400_000, n_human=40_000, seed=2).comparisons
    small = pydial.simulate(N=5, K=3, rank=1, n_llm=60, n_human=30, seed=2).comparisons
    rng = np.random.default_rng(1)
    assert dense_pays(*_matched(big), rng)
    assert not dense_pays(*_matched(small), rng)
    prog, u, hess = _matched(big)
    big_u = np.zeros(DENSE_METRIC_MAX + 1)
    assert not dense_pays(prog, big_u, np.zeros((0, 0)), rng)   # too many parameters: decided before any draw


def test_with_frame_sd_swaps_the_expansions_hessian_exactly():
    """The Hessian at another frame_sd from the swapped expansion term equals the Hessian computed there afresh."""
    _, d, init = _case("davidson-mu-r2")
    prog = SampleProgram.from_data(d)
    u = prog.join(init)
    H = LogDensity(prog)(u, hess=True).hess
    new, H2 = with_frame_sd(prog, u, H, 0.013)
    direct = LogDensity(SampleProgram.from_data(dict(d) | {"frame_sd": 0.013}))(u, hess=True).hess
    assert new.frame_sd == 0.013
    np.testing.assert_allclose(H2, direct, rtol=1e-10, atol=1e-10 * np.abs(direct).max())


def test_a_laplace_far_from_normal_is_reported():
    """Wide priors on 40 LLM and 20 human judgments: the importance ratios' Pareto k is reported above 0.7."""
    data = pydial.simulate(N=5, K=3, rank=1, n_llm=40, n_human=20, seed=2).comparisons
    wide = {"Z_sd": 20.0, "m_sd": 20.0, "c_sd": 20.0, "gamma_sd": 20.0, "b_sd": 20.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = posterior(data, "dial-ada", algorithm="laplace", draws=2000, seed=1, priors=wide)
    assert "Pareto k" in idata.attrs["sampler_problems"] and "algorithm='nuts'" in idata.attrs["sampler_problems"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok = posterior(pydial.datasets.arena(), "dial-ada", algorithm="laplace", draws=1000, seed=1)
    assert "Pareto k" not in ok.attrs["sampler_problems"]
