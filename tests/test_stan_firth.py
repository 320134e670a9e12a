"""The Jeffreys-prior (Firth) option of the Stan programs agrees with the numpy engine.

* log densities: ``dial.stan`` with ``firth = 2`` equals ``-n_H`` times the penalized
  numpy objective ``Objective.weighted(chart, data, lam, "firth")`` to 1e-8 relative
  at random ``theta``; ``firth = 1`` equals the penalized human BTL loss;
  ``judges.stan`` with ``firth = 1`` adds ``sum_k 1/2 log det I_k`` computed here;
* optima: Stan's programs maximized to a tight tolerance and the numpy Newton fits reach
  the same Firth estimates to 1e-6 (human BTL under separation, each judge, the
  calibration stage, joint fits); the user path through CmdStan's L-BFGS (which stops on
  relative-change criteria) to 1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest

import pydial
from scipy.special import expit

from pydial.estimation.baselines import numpy_pooled
from pydial.estimation.glm import staged_fit
from pydial.model.chart import difference_design
from pydial.model.chart import centering_basis
from pydial.estimation.glm import fit_calibration, fit_human_btl, fit_order_btl, fit_structured, initial_theta
from pydial.model.likelihood import Objective
from pydial.model.chart import Chart
from pydial.model.penalty import FirthPenalty
from pydial.studies.simulate import simulate
from pydial.stan.parameters import dial_from_unconstrained as from_stan, dial_unconstrained as to_stan, optimize_dial
from pydial.stan import stan_fit_point
from pydial.stan.schema import (dial_data, human_cell_table, judges_data, llm_cell_table,
                                  weighted_log_coef)

pytestmark = pytest.mark.stan

TOL = 1e-6
GTOL = 1e-11


@pytest.fixture(scope="module")
def data():
    return simulate(N=6, K=3, rank=1, n_llm=3000, n_human=40, seed=3).comparisons


def test_joint_log_prob_equals_penalized_numpy_objective(models, data):
    m = models["dial"]
    rng = np.random.default_rng(1)
    for cal in ("mu", "W"):
        ch = Chart(data.N, data.K, 1, cal, True)
        lam = 0.7
        d = dial_data(data, ch, w_llm=lam * data.n_human / data.n_llm, w_human=1.0, firth=2)
        obj = Objective.weighted(ch, data, lam, "firth")
        for _ in range(2):
            theta = rng.normal(scale=0.6, size=ch.dim)
            lp, grad = m.log_prob(d, to_stan(d, theta)), from_stan(d, m.grad_log_prob(d, to_stan(d, theta)))
            assert -(lp - weighted_log_coef(d)) / data.n_human == pytest.approx(obj.value(theta), rel=1e-8)
            _, g, _ = obj.value_grad_hess(theta, hess=False)
            np.testing.assert_allclose(-np.asarray(grad) / data.n_human, g, rtol=1e-7, atol=1e-10)


def test_human_log_prob_equals_penalized_btl(models, data):
    m = models["dial"]
    ch = Chart(data.N, 1, 0, None, False)
    H = human_cell_table(data)
    cells = H.with_judge(0)
    d = dial_data(data, ch, w_llm=1.0, llm=cells, firth=1)
    theta = np.random.default_rng(2).normal(size=ch.dim)
    X = difference_design(H.i, H.j, data.N) @ centering_basis(data.N)
    eta = X @ theta
    n = (H.wins_i + H.wins_j).astype(float)
    ll = np.sum(H.wins_i * eta - n * np.logaddexp(0, eta))
    pen = -FirthPenalty(X, n).value(theta, eta)
    lp = m.log_prob(d, to_stan(d, theta)) - weighted_log_coef(d)
    assert lp == pytest.approx(ll + pen, rel=1e-10)


def test_judges_log_prob_adds_half_log_det(models, data):
    m = models["judges"]
    L = llm_cell_table(data)
    K, N = data.K, data.N
    d0 = judges_data(L, None, N=N, K=K, order=True, flat=True, log_lik=False)
    d1 = judges_data(L, None, N=N, K=K, order=True, flat=True, log_lik=False, firth=True)
    u = np.random.default_rng(3).normal(scale=0.5, size=K * (N - 1) + K)
    lp0 = m.log_prob(d0, u)
    lp1 = m.log_prob(d1, u)
    from pydial.stan.schema import helmert_basis

    Q = helmert_basis(N)
    parts = m.constrain(d0, u, include_tparams=False)
    s = np.asarray(parts["s_raw"]).reshape(K, N - 1) @ Q.T
    b = np.asarray(parts["b"]).reshape(-1)
    ref = 0.0
    for k in range(K):
        mk = L.judge == k
        X = np.column_stack([(Q[L.i[mk]] - Q[L.j[mk]]), L.a[mk]])
        eta = s[k, L.i[mk]] - s[k, L.j[mk]] + L.a[mk] * b[k]
        p = expit(eta)
        w = (L.wins_i[mk] + L.wins_j[mk]) * p * (1 - p)
        ref += 0.5 * np.linalg.slogdet((X.T * w) @ X)[1]
    assert lp1 - lp0 == pytest.approx(ref, rel=1e-9)


def _polished(m, d, u0):
    """Stan's exact log density and gradient maximized to a tight tolerance (scipy L-BFGS on
    the program with httpstan; CmdStan's L-BFGS with its gradient tolerance tightened).

    dial.stan (its data have fix_llm) starts from and returns the chart coordinates."""
    if "fix_llm" in d:
        res = optimize_dial(m, d, u0, gtol=GTOL, max_iter=20000)
    else:
        res = m.optimize(d, u0, gtol=GTOL, max_iter=20000)
    assert res.grad_norm < 1e-5  # Stan's own gradient of the penalized target vanishes
    return res.u


def test_human_firth_optimum_matches_numpy_under_separation(models):
    sim = simulate(N=6, K=3, rank=1, n_llm=3000, n_human=12, seed=2).comparisons
    f = fit_human_btl(sim.human, sim.N, penalty="firth")
    ch = Chart(sim.N, 1, 0, None, False)
    H = human_cell_table(sim)
    cells = H.with_judge(0)
    u = _polished(models["dial"], dial_data(sim, ch, w_llm=1.0, llm=cells, firth=1), np.zeros(ch.dim))
    np.testing.assert_allclose(ch.S(u)[0], f.s, atol=TOL)
    # the user-facing path: fit(engine="stan") through CmdStan's optimizer
    res = pydial.fit(sim, "human", engine="stan", penalty="firth")
    np.testing.assert_allclose(res.scores["score"], f.s, atol=1e-4)


def test_judges_firth_optimum_matches_numpy(models, data):
    from pydial.stan.schema import helmert_basis

    L = llm_cell_table(data)
    K, N = data.K, data.N
    d = judges_data(L, None, N=N, K=K, order=True, flat=True, log_lik=False, firth=True)
    u = _polished(models["judges"], d, np.zeros(K * (N - 1) + K))
    parts = models["judges"].constrain(d, u, include_tparams=False)
    S = np.asarray(parts["s_raw"]).reshape(K, N - 1) @ helmert_basis(N).T
    for k in range(K):
        f = fit_order_btl(data.llm.select(data.llm.judge == k), N, penalty="firth")
        np.testing.assert_allclose(S[k], f.s, atol=TOL)
        assert np.asarray(parts["b"]).reshape(-1)[k] == pytest.approx(f.b, abs=TOL)


def test_pooled_and_staged_firth_match_numpy(models, data):
    o1, o2 = numpy_pooled(data, penalty="firth")
    s_np = float(o2.x[0]) * (centering_basis(data.N) @ o1.x)
    from pydial.stan.schema import pooled_cell_table

    ch1 = Chart(data.N, 1, 0, None, False)
    u = _polished(models["dial"], dial_data(data, ch1, w_llm=1.0, llm=pooled_cell_table(data), firth=1), np.zeros(ch1.dim))
    np.testing.assert_allclose(ch1.S(u)[0], centering_basis(data.N) @ o1.x, atol=TOL)
    sp = stan_fit_point(data, "pooled", penalty="firth")
    np.testing.assert_allclose(sp.scores, s_np, atol=5e-4)  # first stage by CmdStan's L-BFGS
    for cal in ("mu", "W"):
        st = stan_fit_point(data, "dial-anc", rank=1, calibration=cal, penalty="firth")
        assert st.converged
        # the LLM-only stage is unpenalized; the Firth calibration given Stan's basis must match numpy's
        structure = st.llm_chart.structure(st.llm_theta)
        M = structure.mu[:, None] if cal == "mu" else structure.W
        oc = fit_calibration(data.human, M, penalty="firth")
        np.testing.assert_allclose(st.scores, M @ oc.x, atol=TOL)
        sf = staged_fit(data, 1, cal, penalty="firth")
        np.testing.assert_allclose(st.scores, sf.chart.scores(sf.theta), atol=5e-4)  # LLM stage by CmdStan


@pytest.mark.parametrize("cal", ["mu", "W"])
def test_joint_firth_optimum_matches_numpy(models, data, cal):
    lam = 0.3 * data.n_llm / data.n_human
    ch = Chart(data.N, data.K, 1, cal, True)
    th0 = initial_theta(data, ch)
    f = fit_structured(data, ch, lam, th0, penalty="firth")
    assert f.opt.converged
    d = dial_data(data, ch, w_llm=lam * data.n_human / data.n_llm, w_human=1.0, firth=2)
    u = _polished(models["dial"], d, th0)
    np.testing.assert_allclose(ch.scores(u), ch.scores(f.theta), atol=TOL)
    _, g, _ = Objective.weighted(ch, data, lam, "firth").value_grad_hess(u, hess=False)
    assert np.max(np.abs(g)) < 1e-7
    # through stan_fit_point (CmdStan's L-BFGS stops early along the flat gauge directions):
    # the penalized criterion it reaches is the numpy minimum
    sp = stan_fit_point(data, "dial-ada", rank=1, calibration=cal, lambda_=lam, init=th0, penalty="firth",
                        options={"warn": False})
    assert sp.objective == pytest.approx(Objective.weighted(ch, data, lam, "firth").value(f.theta), rel=1e-6)
