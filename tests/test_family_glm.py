"""The one GLM solver of every outcome family (pydial.estimation.glm.glm / FamilyGLM) and the tie fits of
``human`` and ``judges`` on the binary fits' path (a linearization, every meat).

References, all independent of pydial's own derivative and meat code:

* statsmodels' binomial GLM for the binary family (coefficients and covariance);
* central finite differences of the loss for the gradient and Hessian of each family;
* the sandwich ``H^{-1} (sum s s^T) H^{-1}`` formed here from per-comparison scores, which are
  finite differences of a tie log-likelihood written out in this file, with ``H`` the finite-difference
  Hessian of the same log-likelihood;
* the binary fits, for tie-model fits of data without a single tie.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import statsmodels.api as sm
from scipy.special import expit

import pydial
from fdcheck import fd_jacobian
from pydial.estimation.glm import glm
from pydial.model.glm import FamilyGLM, binary_counts
from pydial.model.design import centered_design
from pydial.model.families import family_of

FAMILIES = ["davidson", "rao-kupper"]
MEATS = ["fisher", "binomial", "cell", "record"]
TABLES = ("scores", "cov", "position_effects", "position_effects_cov", "judge_scores", "judge_scores_se")


def quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pydial.fit(*args, **kwargs)


@pytest.fixture(scope="module")
def tdata():
    return pydial.simulate(N=5, K=2, rank=1, n_llm=1500, n_human=400, tie_rate=0.25, ties="davidson",
                           seed=5).comparisons


# --------------------------------------------------------------- (a) binary
def test_binary_family_equals_statsmodels_glm():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 3))
    n = rng.integers(1, 8, 40).astype(float)
    y = rng.binomial(n.astype(int), expit(X @ np.array([0.7, -1.1, 0.3]))).astype(float)
    opt = glm(None, binary_counts(n, y), X)
    assert opt.converged
    ref = sm.GLM(np.column_stack([y, n - y]), X, family=sm.families.Binomial()).fit(tol=1e-14)
    np.testing.assert_allclose(opt.x, ref.params, rtol=1e-9, atol=1e-12)
    H = FamilyGLM(None, binary_counts(n, y), X).terms(opt.x)[2]
    np.testing.assert_allclose(np.linalg.inv(H), ref.cov_params(), rtol=1e-8, atol=1e-14)
    # a weight rescales the loss, not the optimum; the sparse and dense designs agree
    w = glm(None, binary_counts(n, y), sp.csr_matrix(X), weight=1.0 / n.sum())
    np.testing.assert_allclose(w.x, opt.x, rtol=1e-8, atol=1e-10)


def test_binary_family_refuses_ties():
    with pytest.raises(pydial.ArgumentError, match="without ties"):
        FamilyGLM(None, np.array([[1, 2, 1]]), np.ones((1, 1)))


# ----------------------------------------------------- (b) derivatives, every family
COUNTS = np.array([[5, 2, 1], [0, 3, 4], [7, 0, 0], [2, 2, 9], [1, 1, 0], [3, 4, 2]], float)


def _designs():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(len(COUNTS), 3))
    i, j = np.array([0, 0, 1, 2, 1, 0]), np.array([1, 2, 3, 3, 2, 3])
    a = np.array([1, -1, 1, 1, -1, -1])
    return {"dense": X, "sparse": sp.csr_matrix(X), "design": centered_design(i, j, 4, a)}


@pytest.mark.parametrize("family", FAMILIES + [None])
@pytest.mark.parametrize("kind", ["dense", "sparse", "design"])
def test_gradient_and_hessian_match_finite_differences(family, kind):
    X = _designs()[kind]
    counts = COUNTS.copy()
    if family is None:
        counts[:, 2] = 0
    model = FamilyGLM(family, counts, X, weight=0.1, ridge=0.05)
    assert model.free == (family is not None)
    x = np.linspace(-0.4, 0.5, model.dim)
    f, g, H = model.terms(x)
    assert f == pytest.approx(model.value(x), rel=1e-14)
    np.testing.assert_allclose(g, fd_jacobian(lambda t: np.array([model.value(t)]), x)[0], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(H, fd_jacobian(lambda t: model.terms(t)[1], x), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_without_ties_is_the_binary_model(family):
    """No tie in the cells: nu = 0 is the MLE and the loss, derivatives and fit are the binary model's."""
    X = _designs()["design"]
    counts = COUNTS.copy()
    counts[:, 2] = 0
    tie, binary = FamilyGLM(family, counts, X), FamilyGLM(None, counts, X)
    assert not tie.free and tie.dim == X.shape[1]
    x = np.array([0.2, -0.1, 0.3, 0.4])
    for a, b in zip(tie.terms(x), binary.terms(x)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(glm(family, counts, X).x, glm(None, counts, X).x)


@pytest.mark.parametrize("family", FAMILIES)
def test_solver_reaches_a_zero_gradient(family):
    X = _designs()["dense"][:, :2]
    model = FamilyGLM(family, COUNTS, X, weight=1.0 / COUNTS.sum())
    opt = glm(family, COUNTS, X, weight=1.0 / COUNTS.sum())
    assert opt.resolved
    assert np.abs(model.terms(opt.x)[1]).max() < 1e-10
    assert np.all(np.linalg.eigvalsh(model.terms(opt.x)[2]) > 0)


# ------------------------------------------- (c) the sandwich, computed independently
def _log_probabilities(family: str, eta, l):
    """``log (P(i wins), P(j wins), P(tie))`` written out from the models' definitions (last axis; complex-safe)."""
    nu = np.exp(l)
    if family == "davidson":
        z = np.log(np.exp(eta / 2) + np.exp(-eta / 2) + nu)
        return np.stack([eta / 2 - z, -eta / 2 - z, l - z + 0 * eta], axis=-1)
    pi, pj = 1 / (1 + np.exp(nu - eta)), 1 / (1 + np.exp(nu + eta))
    return np.log(np.stack([pi, pj, 1 - pi - pj], axis=-1))


def _independent_pieces(family, cells, N, x, order):
    """Per-comparison scores (cell, outcome) and the Hessian of the log-likelihood of one group's tie model.

    ``x = (beta, [b], log nu)`` with ``s = T beta``, ``T`` the centering basis (last score minus the sum).
    """
    T = np.vstack([np.eye(N - 1), -np.ones((1, N - 1))])

    def eta(t, c):
        s = T @ t[: N - 1]
        return s[cells.i[c]] - s[cells.j[c]] + (cells.a[c] * t[N - 1] if order else 0.0)

    def logp(t, c, o):
        return _log_probabilities(family, eta(t, c), t[-1])[o]

    counts = cells.counts

    def grad(t, c, o):  # complex step: exact to rounding (the probabilities are complex-safe)
        return np.array([logp(t + 1e-30j * e, c, o).imag / 1e-30 for e in np.eye(t.size)])

    scores = {(c, o): grad(x, c, o) for c in range(len(counts)) for o in range(3) if counts[c, o] > 0}
    H = fd_jacobian(lambda t: sum(counts[c, o] * grad(t, c, o) for (c, o) in scores), x, h=1e-5)
    return scores, 0.5 * (H + H.T), T


@pytest.mark.parametrize("family", FAMILIES)
def test_human_sandwich_equals_an_independent_sandwich(tdata, family):
    """binomial: H^{-1} (sum over comparisons of s s^T) H^{-1}; the people's comparisons are independent in the
    cell meat too (eq. cell-clustered-meat); fisher: the inverse observed information."""
    N = tdata.N
    res = quiet_fit(tdata, "human", ties=family, cov_type="binomial")
    cells = tdata.cell_table("human", with_ties=True)
    x = np.append(res.scores["score"].to_numpy()[: N - 1], np.log(res.tie_parameters[family_of(family).label].iloc[0]))
    scores, H, T = _independent_pieces(family, cells, N, x, order=False)
    meat = sum(cells.counts[c, o] * np.outer(s, s) for (c, o), s in scores.items())
    Hinv = np.linalg.inv(-H)
    V = Hinv @ meat @ Hinv
    E = np.zeros((N + 1, N))
    E[:N, : N - 1], E[N, N - 1] = T, 1.0
    C = E @ V @ E.T
    np.testing.assert_allclose(res.cov.to_numpy(), C[:N, :N], rtol=1e-7, atol=1e-12)
    nu = np.exp(x[-1])
    assert res.tie_parameters["se"].iloc[0] == pytest.approx(nu * np.sqrt(C[N, N]), rel=1e-7)
    cell = quiet_fit(tdata, "human", ties=family, cov_type="cell")
    np.testing.assert_allclose(cell.cov.to_numpy(), C[:N, :N], rtol=1e-7, atol=1e-12)
    fisher = quiet_fit(tdata, "human", ties=family, cov_type="fisher")
    np.testing.assert_allclose(fisher.cov.to_numpy(), (E @ Hinv @ E.T)[:N, :N], rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("family", FAMILIES)
def test_judges_cell_sandwich_clusters_the_cells(tdata, family):
    """cell: the comparisons of a judge on a pair, both orders, are one cluster (eq. cell-clustered-meat);
    binomial: every comparison its own; both on the mean score and the position effects."""
    N, K = tdata.N, tdata.K
    res = quiet_fit(tdata, "judges", ties=family, cov_type="cell")
    table = tdata.cell_table("llm", with_ties=True)
    S = res.judge_scores.to_numpy()
    b = res.position_effects["b"].to_numpy()
    nu = res.tie_parameters[family_of(family).label].to_numpy()
    q = N + K
    G_cell: dict[tuple[int, int, int], np.ndarray] = {}
    M_bin = np.zeros((q, q))
    for k in range(K):
        cells = table.select(table.judge == k)
        x = np.concatenate([S[k, : N - 1], [b[k]], [np.log(nu[k])]])
        scores, H, T = _independent_pieces(family, cells, N, x, order=True)
        A = np.zeros((q, N + 1))
        A[:N, : N - 1] = T / K
        A[N + k, N - 1] = 1.0
        A = A @ np.linalg.inv(-H)
        for (c, o), s in scores.items():
            u = A @ s
            key = (k, int(cells.i[c]), int(cells.j[c]))
            G_cell[key] = G_cell.get(key, np.zeros(q)) + cells.counts[c, o] * u
            M_bin += cells.counts[c, o] * np.outer(u, u)
    M_cell = sum(np.outer(g, g) for g in G_cell.values())
    np.testing.assert_allclose(res.cov.to_numpy(), M_cell[:N, :N], rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(res.position_effects_cov.to_numpy(), M_cell[N:, N:], rtol=1e-7, atol=1e-12)
    binom = quiet_fit(tdata, "judges", ties=family, cov_type="binomial")
    np.testing.assert_allclose(binom.cov.to_numpy(), M_bin[:N, :N], rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(binom.position_effects_cov.to_numpy(), M_bin[N:, N:], rtol=1e-7, atol=1e-12)


# ---------------------------------------------------- (d) with_cov equals a refit
def _same_tables(a, b, rtol=1e-10):
    for name in TABLES + ("tie_parameters",):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            np.testing.assert_allclose(x.to_numpy(float), y.to_numpy(float), rtol=rtol, atol=1e-13, err_msg=name)
    assert a.cov_type == b.cov_type and a.status == b.status


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", ["human", "judges"])
def test_with_cov_on_a_fisher_tie_fit_equals_a_refit(tdata, family, method):
    res = quiet_fit(tdata, method, ties=family, cov_type="fisher")
    assert res.linearization
    for cov in MEATS:
        other = quiet_fit(tdata, method, ties=family, cov_type=cov)
        _same_tables(res.with_cov(cov), other)
        np.testing.assert_allclose(res.cov_params(cov).to_numpy(), other.cov.to_numpy(), rtol=1e-10, atol=1e-13)
        ci = res.conf_int(cov_type=cov)
        np.testing.assert_allclose(ci["se"].to_numpy(), other.scores["se"].to_numpy(), rtol=1e-10)
    assert res.judge_scores_se is not None if method == "judges" else res.judge_scores_se is None


def test_tie_fits_take_the_binary_fits_default_meat(tdata):
    for method in ("human", "judges"):
        assert quiet_fit(tdata, method, ties="davidson").cov_type == quiet_fit(tdata, method).cov_type


# ------------------------------------------------ (e) without ties: the binary fit
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", ["human", "judges"])
def test_tie_fit_of_data_without_ties_is_the_binary_fit(family, method):
    data = pydial.simulate(N=5, K=2, rank=1, n_llm=1500, n_human=400, seed=6).comparisons
    assert data.cell_table("llm", with_ties=True).counts[:, 2].sum() == 0
    for cov in MEATS:
        a = quiet_fit(data, method, cov_type=cov)
        b = quiet_fit(data, method, cov_type=cov, ties=family)
        for name in TABLES:
            x, y = getattr(a, name), getattr(b, name)
            assert (x is None) == (y is None), name
            if x is not None:
                np.testing.assert_allclose(y.to_numpy(float), x.to_numpy(float), rtol=1e-8, atol=1e-12, err_msg=name)
        assert b.tie_parameters[family_of(family).label].eq(0).all() and b.tie_parameters["se"].isna().all()


# ----------------------------------------------------------- Firth with ties
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", ["dense", "design"])
def test_tie_firth_gradient_and_hessian_match_finite_differences(family, kind):
    X = _designs()[kind]
    model = FamilyGLM(family, COUNTS, X, weight=0.1, penalty="firth")
    x = np.linspace(-0.3, 0.4, model.dim)
    f, g, H = model.terms(x)
    assert f == pytest.approx(model.value(x), rel=1e-14)
    assert f != pytest.approx(FamilyGLM(family, COUNTS, X, weight=0.1).value(x), rel=1e-6)
    np.testing.assert_allclose(g, fd_jacobian(lambda t: np.array([model.value(t)]), x)[0], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(H, fd_jacobian(lambda t: model.terms(t)[1], x), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("family", FAMILIES)
def test_tie_firth_fit_maximizes_an_independent_jeffreys_posterior(family):
    """The log-likelihood plus 1/2 log det of the expected information, both written out here
    (the outcomes' scores by complex-step differentiation of their log-probabilities)."""
    from scipy.optimize import minimize

    X = _designs()["dense"][:, :2]
    n = COUNTS.sum(axis=1)

    def neg_posterior(t):
        logp = _log_probabilities(family, X @ t[:2], t[2])
        scores = np.stack([_log_probabilities(family, X @ (t[:2] + 1e-20j * e[:2]), t[2] + 1e-20j * e[2]).imag / 1e-20
                           for e in np.eye(3)], axis=-1)  # (cell, outcome, coordinate)
        info = np.einsum("c,co,cok,col->kl", n, np.exp(logp), scores, scores)
        return -(np.sum(COUNTS * logp) + 0.5 * np.linalg.slogdet(info)[1])

    opt = glm(family, COUNTS, X, penalty="firth")
    assert opt.resolved
    ref = minimize(neg_posterior, opt.x + 0.05, method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000, "maxfev": 40000}).x
    np.testing.assert_allclose(opt.x, ref, atol=1e-7)
    assert np.abs(opt.x - glm(family, COUNTS, X).x).max() > 1e-3  # the prior moves the estimate


def test_tie_firth_estimate_is_finite_under_separation():
    """Item 0 never loses nor ties: no MLE (its score runs to the box), a finite Firth estimate."""
    i, j = np.array([0, 0, 1, 1, 2]), np.array([1, 2, 2, 3, 3])
    counts = np.array([[4, 0, 0], [3, 0, 0], [2, 2, 1], [3, 1, 0], [1, 2, 2]], float)
    X = centered_design(i, j, 4)
    assert not glm("davidson", counts, X).resolved
    firth = glm("davidson", counts, X, penalty="firth")
    assert firth.resolved and np.abs(firth.x).max() < 10


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("method", ["human", "judges", "pooled", "atc", "dial-anc"])
def test_tie_firth_fit_of_data_without_ties_is_the_binary_firth_fit(family, method):
    """The GLM fits agree to 1e-8; the structured LLM-only fits (AtC, DIAL-Anc) of the two families stop
    at Newton's tolerance on different objectives, so those agree to 1e-6."""
    data = pydial.simulate(N=5, K=2, rank=1, n_llm=1500, n_human=400, seed=6).comparisons
    a = quiet_fit(data, method, penalty="firth", cov_type="cell")
    b = quiet_fit(data, method, penalty="firth", cov_type="cell", ties=family)
    rtol, atol = (1e-6, 1e-9) if method in ("atc", "dial-anc") else (1e-8, 1e-12)
    for name in TABLES:
        x, y = getattr(a, name), getattr(b, name)
        if x is not None:
            np.testing.assert_allclose(y.to_numpy(float), x.to_numpy(float), rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("method", ["human", "judges", "pooled", "dial-anc"])
def test_tie_firth_fit_shrinks_and_keeps_the_sandwich(tdata, method):
    ml = quiet_fit(tdata, method, ties="davidson", cov_type="binomial")
    firth = quiet_fit(tdata, method, ties="davidson", cov_type="binomial", penalty="firth")
    assert firth.ok and firth.penalty == "firth"
    s_ml, s_f = ml.scores["score"].to_numpy(), firth.scores["score"].to_numpy()
    assert 0 < np.abs(s_f).sum() < np.abs(s_ml).sum()  # toward the prior's centre
    np.testing.assert_allclose(firth.scores["se"], ml.scores["se"], rtol=0.05)
    _same_tables(firth.with_cov("cell"), quiet_fit(tdata, method, ties="davidson", cov_type="cell", penalty="firth"))


@pytest.mark.parametrize("family", FAMILIES)
def test_tie_firth_dial_anc_is_stationary_for_the_jeffreys_posterior(family):
    """DIAL-Anc with ties and penalty="firth": along the fitted direction ``u`` of the calibrated scores
    (``s = t u``, ``M`` fixed) and ``l = log nu_H``, the Jeffreys-penalized human log-likelihood
    ``l(t, l) + 1/2 log det I(t, l)`` is stationary at the estimate.  Written here from the tie
    probabilities alone: the scores of each outcome and the information by central differences."""

    tdata = pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=150, tie_rate=0.2, ties=family, seed=8).comparisons
    res = quiet_fit(tdata, "dial-anc", ties=family, penalty="firth")
    mle = quiet_fit(tdata, "dial-anc", ties=family)
    s = res.scores["score"].to_numpy()
    t0, u = np.linalg.norm(s), s / np.linalg.norm(s)
    l0 = float(np.log(res.tie_parameters[family_of(family).label].iloc[-1]))
    H = tdata.cell_table("human", with_ties=True)
    d, counts = u[H.i] - u[H.j], H.counts.astype(float)

    def logp(z):  # (m, 3) log-probabilities at z = (t, l)
        return np.log(family_of(family).probabilities(z[0] * d, z[1]))

    def penalized(z, h=1e-5):
        S = np.stack([(logp(z + h * e) - logp(z - h * e)) / (2 * h) for e in np.eye(2)])  # (2, m, 3)
        info = np.einsum("m,mo,amo,bmo->ab", counts.sum(1), np.exp(logp(z)), S, S)
        return float(np.sum(counts * logp(z))) + 0.5 * np.linalg.slogdet(info)[1]

    z0, h = np.array([t0, l0]), 1e-4
    grad = np.array([(penalized(z0 + h * e) - penalized(z0 - h * e)) / (2 * h) for e in np.eye(2)])
    assert np.abs(grad).max() < 1e-4 * counts.sum() ** 0.5
    t_mle = np.linalg.norm(mle.scores["score"].to_numpy())
    assert t0 < t_mle  # the prior pulls the scale toward 0



def test_the_cut_posteriors_calibration_starts_are_the_modes_of_each_draw():
    """The second stage of the cut posterior starts each draw's ``c_t`` at its conditional mode given ``M_t``:
    the ridge GLM's optimum, where the penalized score ``D_t'(y - n p) - c_t / sd^2`` vanishes."""
    from pydial.stan.dial_posterior import calibration_modes

    d = pydial.simulate(N=6, K=3, rank=1, n_llm=600, n_human=150, seed=4).comparisons
    Hc = d.cell_table("human")
    rng = np.random.default_rng(0)
    M = rng.normal(size=(5, d.N, 2))
    sd = 2.0
    c = calibration_modes(M, Hc, sd)
    assert c.shape == (5, 2)
    y, n = Hc.wins_i.astype(float), (Hc.wins_i + Hc.wins_j).astype(float)
    for t in range(5):
        X = M[t, Hc.i] - M[t, Hc.j]
        p = 1 / (1 + np.exp(-X @ c[t]))
        np.testing.assert_allclose(X.T @ (y - n * p) - c[t] / sd**2, 0.0, atol=1e-8)
