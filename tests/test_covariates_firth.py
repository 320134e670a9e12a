"""Response covariates in the Firth-penalized DIAL fits and in the ``pooled`` / ``atc`` baselines.

References are independent of the code under test: central finite differences, the Jeffreys prior
and the tie models' information written out by hand, scipy.optimize on hand-written criteria,
statsmodels' GLM, and the two-step (stacked estimating equations) sandwich assembled by hand with
the cross derivative by finite differences.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so
import statsmodels.api as sm
from fdcheck import fd_jacobian
from scipy.special import expit

import pydial
from pydial.estimation.baselines import numpy_pooled
from pydial.inference.pooled import POOLED_LABEL
from pydial.estimation.glm import staged_fit
from pydial.model.chart import Chart
from pydial.model.likelihood import Objective
from pydial.model.penalty import FirthPenalty

BETA = np.array([[0.5, 0.2], [0.3, 0.0], [0.1, -0.2], [0.0, 0.0]])  # three judges, then the people


def _difference(i: np.ndarray, j: np.ndarray, N: int) -> np.ndarray:
    D = np.zeros((i.size, N))
    D[np.arange(i.size), i] += 1.0
    D[np.arange(i.size), j] -= 1.0
    return D


def _centering(N: int) -> np.ndarray:
    return np.vstack([np.eye(N - 1), -np.ones((1, N - 1))])


def _davidson_logp(eta: np.ndarray, l: float) -> np.ndarray:
    """``log P`` of (i wins, j wins, tie) under Davidson: ``e^{eta/2} : e^{-eta/2} : nu`` (m x 3)."""
    a = np.column_stack([eta / 2, -eta / 2, np.full(eta.size, l)])
    return a - np.logaddexp.reduce(a, axis=1, keepdims=True)


def _davidson_information(X: np.ndarray, n: np.ndarray, eta: np.ndarray, l: float) -> np.ndarray:
    """Return the expected information of the Davidson GLM ``eta = X beta`` in ``(beta, log nu)`` at ``eta``.

    The outcomes' scores by central differences of :func:`_davidson_logp`.
    """
    h = 1e-6
    P = np.exp(_davidson_logp(eta, l))
    a = (_davidson_logp(eta + h, l) - _davidson_logp(eta - h, l)) / (2 * h)
    b = (_davidson_logp(eta, l + h) - _davidson_logp(eta, l - h)) / (2 * h)
    i_ee, i_el, i_ll = (n * np.sum(P * u * v, axis=1) for u, v in ((a, a), (a, b), (b, b)))
    top = np.hstack([(X.T * i_ee) @ X, (X.T @ i_el)[:, None]])
    return np.vstack([top, np.append(X.T @ i_el, i_ll.sum())[None, :]])


# ====================================================================== Task 1: Firth in DIAL
@pytest.mark.parametrize("calibration,ties", [("W", None), ("mu", None), ("W", "davidson"), ("mu", "davidson")])
def test_penalty_with_covariates_is_the_jeffreys_prior_of_the_full_calibration_design(calibration, ties):
    """The people's Jeffreys prior of ``Q_lambda`` uses ``X = [D_H M, Z_H]``: value by hand, gradient and Hessian by FD."""
    d = pydial.simulate(N=6, K=3, n_llm=3000, n_human=500, covariates=["length", "lists"], beta=0.4, seed=1,
                        tie_rate=0.1 if ties else 0.0, ties=ties).comparisons
    ch = Chart.for_data(d, 1, calibration, True)
    firth = Objective.weighted(ch, d, 2.0, "firth", ties=ties)
    plain = Objective.weighted(ch, d, 2.0, ties=ties)
    x = np.random.default_rng(2).normal(scale=0.3, size=firth.dim)
    theta = x[: ch.dim]

    def pen(t: np.ndarray) -> float:
        return firth.value(t) - plain.value(t)

    # the value, by hand: -(1 / 2 n_H) [log det I(c, beta_H[, l_H]; [D_H M, Z_H]) - log det M^T M]
    M = ch.structure(theta).basis(calibration)
    H = d.cell_table("human", with_ties=ties is not None)
    X = np.hstack([_difference(H.i, H.j, d.N) @ M, H.z])
    s, beta_h = ch.scores(theta), ch.human_effects(theta)
    eta = s[H.i] - s[H.j] + H.z @ beta_h
    n = H.counts.sum(axis=1).astype(float)
    if ties is None:
        w = n * expit(eta) * (1 - expit(eta))
        info = (X.T * w) @ X
    else:  # the people's log nu_H is the last coordinate (their cells hold ties)
        assert ch.K in firth.free
        info = _davidson_information(X, n, eta, float(x[-1]))
    ref = -0.5 / n.sum() * (np.linalg.slogdet(info)[1] - np.linalg.slogdet(M.T @ M)[1])
    assert pen(x) == pytest.approx(ref, rel=1e-7 if ties is None else 1e-6)
    without_z = np.linalg.slogdet((X[:, : M.shape[1]].T * w) @ X[:, : M.shape[1]])[1] if ties is None else None
    if without_z is not None:  # the covariate columns matter
        assert abs(pen(x) + 0.5 / n.sum() * (without_z - np.linalg.slogdet(M.T @ M)[1])) > 1e-4 * abs(ref)

    g = firth.value_grad_hess(x)[1] - plain.value_grad_hess(x)[1]
    g_fd = fd_jacobian(lambda t: np.array([pen(t)]), x)[0]
    assert np.abs(g).max() > 1e-4  # a penalty that moves the fit, beta_H's coordinates included
    assert np.abs(g[ch.human_coordinates[-2:]]).max() > 1e-6
    np.testing.assert_allclose(g, g_fd, atol=1e-6 * np.abs(g).max())  # FD rounding: 1e-16 / h
    Hp = firth.value_grad_hess(x)[2] - plain.value_grad_hess(x)[2]
    H_fd = fd_jacobian(lambda t: firth.value_grad_hess(t, hess=False)[1] - plain.value_grad_hess(t, hess=False)[1], x)
    np.testing.assert_allclose(Hp, H_fd, atol=(1e-6 if ties is None else 1e-4) * np.abs(Hp).max())


def test_factored_glm_firth_hessian_matches_finite_differences():
    """``FirthPenalty.terms`` with more cells than ``q^2`` (the path without the m x m ``Q``)."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 5))
    pen = FirthPenalty(X, rng.integers(1, 4, 300).astype(float), weight=0.2)
    beta = 0.3 * rng.standard_normal(5)
    f, g, H = pen.terms(beta)
    f0, g0, H0 = pen.derivatives(X @ beta)  # the m x m route
    assert f == pytest.approx(f0, rel=1e-12)
    np.testing.assert_allclose(H, X.T @ H0 @ X, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g, fd_jacobian(lambda b: np.array([pen.terms(b)[0]]), beta)[0], rtol=1e-6)
    np.testing.assert_allclose(H, fd_jacobian(lambda b: pen.terms(b)[1], beta), rtol=1e-5, atol=1e-9)


@pytest.fixture(scope="module")
def small():
    """Few people's comparisons, so that Firth's correction is visible."""
    return pydial.simulate(N=8, K=3, n_llm=20_000, n_human=250, covariates=["length", "lists"], beta=BETA,
                           seed=7).comparisons


def test_staged_firth_calibration_is_the_penalized_glm_on_the_calibration_design(small):
    """Lambda = inf: with ``M`` held at the LLM-only fit, ``(c, beta_H)`` maximizes ``l + 1/2 log det(X' W X)``."""
    d = small
    sf = staged_fit(d, 1, "W", penalty="firth")
    M = sf.llm_chart.structure(sf.llm_theta).basis("W")
    H = d.human
    X = np.hstack([_difference(H.i, H.j, d.N) @ M, H.z])
    n, y = H.n.astype(float), H.y.astype(float)

    def negative(b: np.ndarray) -> tuple[float, np.ndarray]:
        eta = X @ b
        p = expit(eta)
        I = (X.T * (n * p * (1 - p))) @ X
        h = n * p * (1 - p) * np.einsum("ca,ab,cb->c", X, np.linalg.inv(I), X)
        value = -(y @ eta - n @ np.logaddexp(0.0, eta)) - 0.5 * np.linalg.slogdet(I)[1]
        return value, -X.T @ (y - n * p + h * (0.5 - p))  # Firth's adjusted score

    mle = sm.GLM(np.column_stack([y, n - y]), X, family=sm.families.Binomial()).fit(tol=1e-14).params
    ref = so.minimize(negative, mle, jac=True, method="BFGS", options={"gtol": 1e-11, "maxiter": 1000})
    # the reference is at the penalized optimum: its adjusted score is tiny against the information (n ~ 10^3),
    # so its distance from the optimum is far below the 1e-6 compared next (BFGS stops near 1e-7 on some BLAS)
    assert np.abs(negative(ref.x)[1]).max() < 1e-6
    np.testing.assert_allclose(sf.cal_opt.x, ref.x, atol=1e-6)
    assert np.abs(ref.x - mle).max() > 1e-3  # the penalty moves the estimate
    np.testing.assert_allclose(sf.chart.human_effects(sf.theta), ref.x[-2:], atol=1e-6)
    res = pydial.fit(d, "dial-anc", calibration="W", penalty="firth")
    np.testing.assert_allclose(res.covariate_effects.loc[d.human_judge, "beta"].to_numpy(), ref.x[-2:], atol=1e-6)


def test_dial_ada_with_firth_and_covariates(small):
    """A finite weight's fit with the people's Jeffreys prior: the penalized optimum, with covariate effects."""
    d = small
    res = pydial.fit(d, "dial-ada", penalty="firth", lambda_=[2.0], include_endpoints=False)
    plain = pydial.fit(d, "dial-ada", lambda_=[2.0], include_endpoints=False)
    assert res.status == "ok" and res.lambda_ == 2.0
    ce = res.covariate_effects
    assert list(ce.index.get_level_values("judge").unique()) == [*d.judges, d.human_judge]
    assert np.all(np.isfinite(ce["se"])) and np.all(ce["se"] > 0)
    lam = 2.0
    firth = Objective.weighted(res.chart, d, lam, "firth")
    assert np.abs(firth.value_grad_hess(res.theta)[1]).max() < 1e-7  # the penalized criterion's optimum
    assert np.abs(Objective.weighted(res.chart, d, lam).value_grad_hess(res.theta)[1]).max() > 1e-5
    moved = np.abs(ce.loc[d.human_judge, "beta"] - plain.covariate_effects.loc[d.human_judge, "beta"]).max()
    assert 1e-4 < moved < 0.5 * ce.loc[d.human_judge, "se"].max()  # an O(1/n_H) correction of beta_H
    assert res.covariate_test("judge0", against=d.human_judge)["p_value"] < 1e-3


def test_firth_tie_fit_with_covariates_runs(small):
    tie = pydial.simulate(N=7, K=3, n_llm=8000, n_human=600, covariates=["length"], beta=0.5, seed=2, tie_rate=0.15,
                          ties="davidson").comparisons
    for method in ("dial-anc", "dial-ada"):
        res = pydial.fit(tie, method, ties="davidson", penalty="firth")
        assert res.status == "ok" and res.tie_parameters is not None
        assert np.all(np.isfinite(res.covariate_effects["se"]))


# ====================================================================== Task 2: pooled and atc
@pytest.fixture(scope="module")
def data():
    return pydial.simulate(N=8, K=3, n_llm=12_000, n_human=1500, covariates=["length", "lists"], beta=BETA,
                           seed=5).comparisons


def _pooled_reference(d):
    """Both stages of the pooled baseline as statsmodels GLMs: ``[D T, Z_L]``, then ``[D_H s_pool, Z_H]``."""
    N, L, H = d.N, d.llm, d.human
    X1 = np.hstack([_difference(L.i, L.j, N) @ _centering(N), L.z])
    r1 = sm.GLM(np.column_stack([L.y, L.n - L.y]), X1, family=sm.families.Binomial()).fit(tol=1e-14)
    s_pool = _centering(N) @ r1.params[: N - 1]
    X2 = np.hstack([(_difference(H.i, H.j, N) @ s_pool)[:, None], H.z])
    r2 = sm.GLM(np.column_stack([H.y, H.n - H.y]), X2, family=sm.families.Binomial()).fit(tol=1e-14)
    return r1, r2, X1, X2


def test_pooled_stages_are_the_glms_with_covariate_columns(data):
    d, N = data, data.N
    o1, o2 = numpy_pooled(d)
    r1, r2, _, _ = _pooled_reference(d)
    np.testing.assert_allclose(o1.x, r1.params, atol=1e-6)
    np.testing.assert_allclose(o2.x, r2.params, atol=1e-6)
    res = pydial.fit(d, "pooled")
    ce = res.covariate_effects
    assert list(ce.index.get_level_values("judge").unique()) == [POOLED_LABEL, d.human_judge]
    np.testing.assert_allclose(ce["beta"].to_numpy(), np.concatenate([r1.params[N - 1:], r2.params[1:]]), atol=1e-6)
    s = r2.params[0] * _centering(N) @ r1.params[: N - 1]
    np.testing.assert_allclose(res.scores["score"].reindex(list(d.items)).to_numpy(), s, atol=1e-6)
    assert res.covariate_test(POOLED_LABEL, covariates=["length"])["p_value"] < 1e-6


def test_pooled_sandwich_is_the_two_step_formula_by_hand(data):
    """Binomial meat: ``B^{-1} M B^{-T}`` of the stacked estimating equations, ``d psi_2 / d theta_1`` by FD."""
    d, N, p = data, data.N, data.p
    r1, r2, X1, X2 = _pooled_reference(d)
    L, H = d.llm, d.human
    t1, t2 = r1.params, r2.params
    D_H, T = _difference(H.i, H.j, N), _centering(N)

    def psi2(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # the calibration's score equations (unnormalized)
        X = np.hstack([(D_H @ T @ a[: N - 1])[:, None], H.z])
        return X.T @ (H.n * expit(X @ b) - H.y)

    def blocks(X: np.ndarray, theta: np.ndarray, n: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pr = expit(X @ theta)
        s2 = y * (1 - pr) ** 2 + (n - y) * pr ** 2  # sum over the cell's comparisons of the squared score
        return (X.T * (n * pr * (1 - pr))) @ X, (X.T * s2) @ X

    H11, M11 = blocks(X1, t1, L.n, L.y)
    H22, M22 = blocks(X2, t2, H.n, H.y)
    H21 = fd_jacobian(lambda a: psi2(a, t2), t1, h=1e-6)
    n1, n2 = t1.size, t2.size
    B = np.block([[H11, np.zeros((n1, n2))], [H21, H22]])
    Mt = np.block([[M11, np.zeros((n1, n2))], [np.zeros((n2, n1)), M22]])
    Bi = np.linalg.inv(B)
    V = Bi @ Mt @ Bi.T
    E = np.zeros((N + 2 * p, n1 + n2))  # targets (s, beta_L, beta_H)
    E[:N, : N - 1] = t2[0] * T
    E[:N, n1] = T @ t1[: N - 1]
    E[N + np.arange(p), N - 1 + np.arange(p)] = 1.0
    E[N + p + np.arange(p), n1 + 1 + np.arange(p)] = 1.0
    ref = E @ V @ E.T
    assert np.abs(H21[1:, : N - 1]).max() > 1e-3  # beta_H's score moves with the pooled scores
    res = pydial.fit(d, "pooled", cov_type="binomial")
    se = res.covariate_effects["se"].to_numpy()
    np.testing.assert_allclose(se, np.sqrt(np.diag(ref)[N:]), rtol=1e-5)
    np.testing.assert_allclose(res.covariate_effects_cov.to_numpy(), ref[N:, N:], rtol=1e-4, atol=1e-10)
    np.testing.assert_allclose(res.scores["se"].reindex(list(d.items)).to_numpy(), np.sqrt(np.diag(ref)[:N]), rtol=1e-5)


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_pooled_tie_fit_with_covariates(ties):
    d = pydial.simulate(N=7, K=3, n_llm=8000, n_human=1200, covariates=["length"], beta=0.5, seed=3, tie_rate=0.15,
                        ties=ties).comparisons
    res = pydial.fit(d, "pooled", ties=ties)
    ce = res.covariate_effects
    assert res.status == "ok" and list(ce.index.get_level_values("judge")) == [POOLED_LABEL, d.human_judge]
    assert np.all(np.isfinite(ce["se"])) and np.all(ce["se"] > 0)
    assert list(res.tie_parameters.index) == [POOLED_LABEL, d.human_judge]
    assert np.all(np.isfinite(res.tie_parameters["se"]))
    if ties == "davidson":  # stage one against the Davidson likelihood written out, maximized by scipy
        C = d.cell_table("llm", with_ties=True)
        X1 = np.hstack([_difference(C.i, C.j, d.N) @ _centering(d.N), C.z])
        cnt = C.counts.astype(float)

        def nll(x: np.ndarray) -> float:
            return -float(np.sum(cnt * _davidson_logp(X1 @ x[:-1], x[-1])))

        ref = so.minimize(nll, np.zeros(X1.shape[1] + 1), method="BFGS", options={"gtol": 1e-9})
        np.testing.assert_allclose(ce.loc[POOLED_LABEL, "beta"].to_numpy(), ref.x[d.N - 1:-1], atol=1e-4)
        assert res.tie_parameters.loc[POOLED_LABEL, "nu"] == pytest.approx(np.exp(ref.x[-1]), abs=1e-4)


def test_pooled_firth_with_covariates(data):
    res = pydial.fit(data, "pooled", penalty="firth")
    plain = pydial.fit(data, "pooled")
    assert res.status == "ok"
    diff = np.abs(res.covariate_effects["beta"] - plain.covariate_effects["beta"]).to_numpy()
    assert np.all(diff < 0.1 * plain.covariate_effects["se"].to_numpy()) and diff.max() > 1e-6


def test_atc_reports_the_staged_covariate_effects_and_orders_by_the_style_controlled_people(data):
    d = data
    res = pydial.fit(d, "atc")
    anc = pydial.fit(d, "dial-anc", calibration="mu")
    human = pydial.fit(d, "human")
    ce = res.covariate_effects
    assert list(ce.index.get_level_values("judge").unique()) == [*d.judges, d.human_judge]
    np.testing.assert_allclose(ce["beta"].to_numpy(), anc.covariate_effects["beta"].to_numpy(), rtol=1e-10)
    np.testing.assert_allclose(ce["se"].to_numpy(), anc.covariate_effects["se"].to_numpy(), rtol=1e-8)
    assert np.all(np.isnan(res.scores["se"]))  # the isotonic step has no linearization
    ordering = res.stage_scores["human"].reindex(list(d.items)).to_numpy()
    np.testing.assert_allclose(ordering, human.scores["score"].reindex(list(d.items)).to_numpy(), atol=1e-8)
    assert res.covariate_test("judge0", against=d.human_judge)["p_value"] < 1e-6
    shared = pydial.fit(d, "atc", covariate_effects="shared").covariate_effects
    np.testing.assert_allclose(shared["beta"].to_numpy(), pydial.fit(
        d, "dial-anc", calibration="mu", covariate_effects="shared").covariate_effects["beta"].to_numpy(), rtol=1e-10)
    assert list(shared.index.get_level_values("judge").unique()) == ["LLM judges (shared)", d.human_judge]
    tie = pydial.simulate(N=7, K=3, n_llm=8000, n_human=1200, covariates=["length"], beta=0.5, seed=3, tie_rate=0.15,
                          ties="davidson").comparisons
    rt = pydial.fit(tie, "atc", ties="davidson")
    assert rt.status == "ok" and np.all(np.isfinite(rt.covariate_effects["se"]))
    assert np.isfinite(rt.tie_parameters.loc[tie.human_judge, "se"])
