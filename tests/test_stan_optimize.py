"""Stan's optimizer and the numpy engine reach the same optimum (scores and b to 1e-6), on every backend.

The numpy optimum comes from the numpy engine itself (``pydial.fit`` Newton fits
and ``pydial.estimation.estimators``); the Stan optimum from ``stan/dial.stan`` /
``stan/judges.stan`` through :func:`pydial.stan.stan_fit_point`.  The Stan
``theta`` is in the numpy chart, so the numpy gradient must vanish there.
"""

from __future__ import annotations


import numpy as np
import pytest

from pydial.exceptions import ConvergenceWarning
from pydial.estimation.glm import fit_human_btl, fit_order_btl, fit_structured, initial_theta
from pydial.model.likelihood import Objective
from pydial.model.chart import Chart
from pydial.studies.simulate import simulate
from pydial.stan import stan_fit_point

pytestmark = pytest.mark.stan

TOL = 1e-6


@pytest.fixture(scope="module")
def data():
    return simulate(N=8, K=4, rank=2, n_llm=6000, n_human=500, target="misaligned", seed=7).comparisons


@pytest.mark.parametrize("r,cal,order,mult", [(1, "mu", True, 1.0), (2, "W", True, 0.1), (1, "mu", False, 1.0),
                                              (0, "W", True, 3.0)])
def test_joint_fit_matches_numpy_newton(models, data, r, cal, order, mult):
    lam = mult * data.n_llm / data.n_human
    ch = Chart(data.N, data.K, r, cal, order)
    f = fit_structured(data, ch, lam, initial_theta(data, ch))
    assert f.opt.converged
    sp = stan_fit_point(data, "dial-ada" if order else "dial-nopos", rank=r, calibration=cal, lambda_=lam)
    assert sp.converged and sp.chart == ch
    np.testing.assert_allclose(sp.scores, ch.scores(f.theta), atol=TOL)
    np.testing.assert_allclose(sp.S, ch.S(f.theta), atol=TOL)
    assert sp.objective == pytest.approx(Objective.weighted(ch, data, lam).value(f.theta), rel=1e-9)
    # the Stan theta lives in the numpy chart: the numpy gradient vanishes there
    _, g, _ = Objective.weighted(ch, data, lam).value_grad_hess(sp.theta, hess=False)
    assert np.max(np.abs(g)) < 1e-6
    np.testing.assert_allclose(ch.scores(sp.theta), sp.scores, atol=1e-12)


def test_staged_fit_matches_numpy_dial_anc(models, data):
    from pydial.estimation.glm import staged_fit

    for cal in ("mu", "W"):
        sf = staged_fit(data, 1, cal)
        sp = stan_fit_point(data, "dial-anc", rank=1, calibration=cal)
        assert sp.converged and len(sp.stages) == 2
        np.testing.assert_allclose(sp.scores, sf.chart.scores(sf.theta), atol=TOL)
        np.testing.assert_allclose(sp.S, sf.llm_chart.S(sf.llm_theta), atol=TOL)
        np.testing.assert_allclose(sp.b, sf.llm_chart.order_effects(sf.llm_theta), atol=TOL)


def test_llm_only_fit_matches_numpy(models, data):
    ch = Chart(data.N, data.K, 2, None, True)
    f = fit_structured(data, ch, np.inf, initial_theta(data, ch))
    sp = stan_fit_point(data, "dial-anc", rank=2)  # its first stage is the LLM-only fit
    assert sp.llm_chart == ch and sp.llm_theta is not None
    np.testing.assert_allclose(ch.S(sp.llm_theta), ch.S(f.theta), atol=TOL)
    np.testing.assert_allclose(sp.b, ch.order_effects(f.theta), atol=TOL)
    assert sp.details["llm_objective"] == pytest.approx(Objective.weighted(ch, data, np.inf).value(f.theta), rel=1e-9)


def test_human_btl_matches_numpy(models, data):
    f = fit_human_btl(data.human, data.N)
    sp = stan_fit_point(data, "human")
    assert sp.converged and sp.chart == Chart(data.N, 1, 0, None, False)
    np.testing.assert_allclose(sp.scores, f.s, atol=TOL)
    np.testing.assert_allclose(sp.theta, f.s[:-1], atol=TOL)


def test_judgewise_btl_matches_numpy(models, data):
    sp = stan_fit_point(data, "judges")
    assert sp.converged and sp.theta.shape == (data.K, data.N)
    for k in range(data.K):
        f = fit_order_btl(data.llm.select(data.llm.judge == k), data.N)
        np.testing.assert_allclose(sp.S[k], f.s, atol=TOL)
        assert sp.b[k] == pytest.approx(f.b, abs=TOL)
        np.testing.assert_allclose(sp.theta[k, :-1], f.s[:-1], atol=TOL)  # chart theta = (s[:N-1], b)
        np.testing.assert_allclose(sp.chart.S(sp.theta[k])[0], f.s, atol=TOL)


def test_pooled_matches_numpy_engine(models, data):
    from pydial.api import fit

    res = fit(data, "pooled")
    sp = stan_fit_point(data, "pooled")
    np.testing.assert_allclose(sp.scores, res.scores["score"].to_numpy(), atol=TOL)


def test_fit_engine_stan_matches_numpy_engine(models, data):
    """pydial.fit(..., engine="stan") (Stan optimizer + numpy inference) equals the numpy engine."""
    from pydial.api import fit

    rn = fit(data, "dial-anc", rank=1, calibration="mu")
    rs = fit(data, "dial-anc", rank=1, calibration="mu", engine="stan")
    assert rs.engine == "stan" and rs.converged
    np.testing.assert_allclose(rs.scores.to_numpy(), rn.scores.to_numpy(), atol=TOL)
    np.testing.assert_allclose(rs.position_effects[["b", "se"]].to_numpy(), rn.position_effects[["b", "se"]].to_numpy(),
                               atol=TOL)
    assert rs.chart == rn.chart


@pytest.mark.parametrize("method", ["human", "dial-ada", "dial-nopos", "judges", "pooled", "atc"])
def test_fit_engine_stan_matches_numpy_engine_other_methods(models, data, method):
    """Every estimator agrees across engines on scores, standard errors, the selected
    weight and the GACV path (DIAL-Ada: every weight of the path optimized by Stan)."""
    from pydial.api import fit

    rn = fit(data, method)
    rs = fit(data, method, engine="stan")
    assert rs.engine == "stan" and rs.converged
    np.testing.assert_allclose(rs.scores.to_numpy(), rn.scores.to_numpy(), atol=TOL)
    np.testing.assert_equal(rs.lambda_, rn.lambda_)  # NaN for judges
    if rn.position_effects is not None:
        np.testing.assert_allclose(rs.position_effects[["b", "se"]].to_numpy(),
                                   rn.position_effects[["b", "se"]].to_numpy(), atol=TOL)
    if rn.gacv is not None:
        np.testing.assert_allclose(rs.gacv["gacv"].to_numpy(), rn.gacv["gacv"].to_numpy(), atol=TOL)


@pytest.fixture(scope="module", params=["davidson", "rao-kupper"])
def tie_data(request):
    sim = simulate(N=6, K=3, rank=1, n_llm=9_000, n_human=3_000, tie_rate=0.2, ties=request.param, seed=13)
    return request.param, sim.comparisons


@pytest.mark.parametrize("method", ["dial-anc", "dial-ada", "human", "judges", "pooled"])
def test_tie_point_fit_matches_fit_on_both_engines(models, tie_data, method):
    """stan_fit_point(..., ties=...) reaches the optimum of pydial.fit(..., ties=...) on the numpy and the Stan engine:
    scores, judge scores, position effects and the log tie parameters (dial-ada at one weight: the people's)."""
    from pydial.api import fit
    from pydial.model.cells import family_totals
    from pydial.model.families import family_of

    ties, data = tie_data
    n_l, n_h = family_totals(data, family_of(ties))
    kw: dict = {"rank": 1, "calibration": "mu"} if method.startswith("dial") else {}
    lam = 2.0 * n_l / n_h if method == "dial-ada" else None
    sp = stan_fit_point(data, method, ties=ties, lambda_=lam, **kw)
    assert sp.converged and sp.ties == ties and sp.log_nu is not None
    if lam is not None:
        kw.update(lambda_=lam, include_endpoints=False)
    for engine in ("numpy", "stan"):
        res = fit(data, method, ties=ties, engine=engine, **kw)
        assert res.converged and (lam is None or res.lambda_ == lam)
        log_nu = res.tie_log_nu.to_numpy()
        if method == "judges":
            np.testing.assert_allclose(sp.S, res.judge_scores.to_numpy(), atol=TOL)
            np.testing.assert_allclose(sp.b, res.position_effects["b"].to_numpy(), atol=TOL)
        else:
            np.testing.assert_allclose(sp.scores, res.scores["score"].to_numpy(), atol=TOL)
        if method == "dial-ada":  # the result reports the judges' tie parameters of the LLM-only stage
            np.testing.assert_allclose(sp.log_nu[-1], log_nu[-1], atol=TOL)
        else:
            np.testing.assert_allclose(sp.log_nu, log_nu, atol=TOL)


def test_tie_point_fit_of_the_binary_family_is_the_binary_fit(models, data):
    """ties=None is the binary fit (no tie parameter); a tie family on data without a tie reaches the same scores, nu = 0."""
    sb = stan_fit_point(data, "dial-anc", rank=1)
    st = stan_fit_point(data, "dial-anc", rank=1, ties="davidson")
    assert sb.ties is None and sb.log_nu is None
    np.testing.assert_array_equal(st.log_nu, np.full(data.K + 1, -np.inf))
    np.testing.assert_allclose(st.scores, sb.scores, atol=TOL)


def test_point_fit_argument_errors(data):
    from pydial.exceptions import ArgumentError

    with pytest.raises(ArgumentError, match="ties must be one of"):
        stan_fit_point(data, "human", ties="bradley")
    with pytest.raises(ArgumentError, match="covariate_effects"):
        stan_fit_point(data, "human", covariate_effects="own")
    with pytest.raises(ArgumentError, match="unknown options"):
        stan_fit_point(data, "human", options={"tol": 1.0})


def test_nonconvergence_is_reported(models, data):
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        sp = stan_fit_point(data, "dial-ada", rank=1, calibration="mu", options={"max_iter": 2})
    assert not sp.converged


def test_fixed_coordinates_stay_fixed(models, data, stan_backend_name):
    """The scipy path holds coordinates fixed in-process (httpstan); CmdStan takes them as data instead."""
    from pydial.stan import StanBackendError
    from pydial.estimation.glm import initial_theta
    from pydial.stan.parameters import dial_unconstrained as to_stan
    from pydial.stan.schema import dial_data

    m = models["dial"]
    ch = Chart(data.N, data.K, 1, "mu", True)
    d = dial_data(data, ch, w_llm=1.0, w_human=1.0)
    th0 = initial_theta(data, ch)
    fixed = np.zeros(ch.dim, bool)
    fixed[ch.slices["B"]] = True
    u0, fixed_u = to_stan(d, th0), to_stan(d, fixed).astype(bool)  # the program's layout of theta and of the mask
    if stan_backend_name == "cmdstanpy":
        with pytest.raises(StanBackendError, match="as data"):
            m.optimize(d, u0, fixed=fixed_u, method="scipy")
        return
    res = m.optimize(d, u0, fixed=fixed_u)
    np.testing.assert_array_equal(res.u[fixed_u], u0[fixed_u])
    assert res.converged and res.log_prob > m.log_prob(d, u0)


def test_calibration_stage_with_the_llm_block_as_data(models, data):
    """dial.stan's fix_llm: only c is a parameter; its optimum is argmin_c l_H(M c) of the numpy engine."""
    from pydial.estimation.glm import staged_fit
    from pydial.stan.schema import dial_data

    sf = staged_fit(data, 1, "W")
    d = dial_data(data, sf.chart, w_llm=0.0, w_human=1.0, fix_llm=sf.theta)
    m = models["dial"]
    sizes = {n: int(np.prod(s)) for n, s in m.parameter_shapes(d).items()}
    assert sizes == {"A_free": 0, "B_free": 0, "c": 2, "b": 0, "beta_free": 0, "log_nu": 0}
    res = m.optimize(d, np.zeros(2))
    np.testing.assert_allclose(res.u, sf.theta[sf.chart.slices["c"]], atol=TOL)
    vals = m.constrain(d, res.u)
    np.testing.assert_allclose(vals["s_H"], sf.chart.scores(sf.theta), atol=TOL)
