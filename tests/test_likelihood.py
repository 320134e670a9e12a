"""Tests of pydial.model.likelihood and pydial.model.chart (the chart of eq. overparam).

References: central finite differences for gradients and Hessians, a
row-by-row Bernoulli log-likelihood written here from the paper's equations
(human-full-loss, llm-negloglik, weighted-loss), the algebraic identities of
App. "Reduced score-space representation" and the gauge orbits of eq. gauge.
"""

from __future__ import annotations

import numpy as np
import pytest

import pydial
from fdcheck import fd_jacobian
from pydial.model.likelihood import Cells, Objective
from pydial.model.cells import CellJacobian, binomial_nll
from pydial.model.cells import human_loss, llm_loss, weighted_loss
from pydial.model.chart import Chart, structure_from_S

N, K = 6, 3


@pytest.fixture(scope="module")
def data():
    return pydial.simulate(N=N, K=K, rank=1, n_llm=3000, n_human=300, seed=11).comparisons


def random_theta(chart: Chart, seed: int, scale: float = 0.6) -> np.ndarray:
    return scale * np.random.default_rng(seed).standard_normal(chart.dim)


def fd_grad(f, x, h=1e-5):
    g = np.empty_like(x)
    for t in range(x.size):
        e = np.zeros_like(x)
        e[t] = h
        g[t] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def rowwise_losses(data, s, S, b):
    """l_H and l_LLM from the individual decisive rows (paper eq. human-full-loss, llm-negloglik)."""
    f = data.frame
    dec = (~f["self"]) & f["outcome"].isin([0, 1])
    f = f.loc[dec]
    z = (f["outcome"] == 1).to_numpy()
    i, j, a, k = (f[c].to_numpy() for c in ("i", "j", "a", "k"))
    hum = k == data.K
    eta_h = s[i[hum]] - s[j[hum]]
    lh = -np.mean(np.where(z[hum], log_sigmoid(eta_h), log_sigmoid(-eta_h)))
    kl = k[~hum]
    eta_l = S[kl, i[~hum]] - S[kl, j[~hum]] + a[~hum] * b[kl]
    ll = -np.mean(np.where(z[~hum], log_sigmoid(eta_l), log_sigmoid(-eta_l)))
    return lh, ll


CASES = [(cal, r, order) for cal in ("mu", "W", None) for r in (1, 2) for order in (True, False)]


def objective_for(data, cal, r, order, lam=7.0):
    chart = Chart(N, K, r, cal, order)
    obj = Objective.weighted(chart, data, np.inf if cal is None else lam)
    return chart, obj


# ------------------------------------------------------ finite differences
@pytest.mark.parametrize("cal,r,order", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_gradient_matches_finite_differences(data, cal, r, order, seed):
    chart, obj = objective_for(data, cal, r, order)
    th = random_theta(chart, seed)
    f, g, _ = obj.value_grad_hess(th, hess=False)
    assert f == pytest.approx(obj.value(th), rel=1e-14)
    g_fd = fd_grad(obj.value, th)
    np.testing.assert_allclose(g, g_fd, rtol=1e-6, atol=1e-7 * np.abs(g_fd).max())


@pytest.mark.parametrize("cal,r,order", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_hessian_matches_finite_differences(data, cal, r, order, seed):
    chart, obj = objective_for(data, cal, r, order)
    th = random_theta(chart, seed + 10)
    _, _, H = obj.value_grad_hess(th)
    H_fd = fd_jacobian(lambda x: obj.value_grad_hess(x, hess=False)[1], th)
    np.testing.assert_allclose(H, H_fd, rtol=1e-6, atol=1e-7 * np.abs(H_fd).max())
    np.testing.assert_array_equal(H, H.T)


@pytest.mark.parametrize("cal", ["mu", "W"])
def test_hessian_fd_of_value_directly(data, cal):
    """Second differences of the value itself (no use of the analytic gradient)."""
    chart, obj = objective_for(data, cal, 1, True)
    th = random_theta(chart, 5)
    _, _, H = obj.value_grad_hess(th)
    rng = np.random.default_rng(0)
    h = 1e-4
    for _ in range(5):
        u, v = rng.standard_normal(chart.dim), rng.standard_normal(chart.dim)
        f = obj.value
        d2 = (f(th + h * u + h * v) - f(th + h * u - h * v) - f(th - h * u + h * v) + f(th - h * u - h * v)) / (4 * h * h)
        assert u @ H @ v == pytest.approx(d2, rel=1e-5, abs=1e-7)


# ------------------------------------------------ value vs. paper's losses
@pytest.mark.parametrize("cal,r,order", CASES)
def test_value_equals_paper_losses(data, cal, r, order):
    lam = 7.0
    chart, obj = objective_for(data, cal, r, order, lam)
    th = random_theta(chart, 3)
    s, S, b = chart.scores(th), chart.S(th), chart.order_effects(th)
    if not order:
        np.testing.assert_array_equal(b, 0.0)
    lh_ref, ll_ref = rowwise_losses(data, s, S, b)
    assert llm_loss(S, b, data.llm) == pytest.approx(ll_ref, rel=1e-12)
    if cal is None:
        assert obj.value(th) == pytest.approx(ll_ref, rel=1e-12)
        np.testing.assert_array_equal(s, 0.0)
        return
    assert human_loss(s, data.human) == pytest.approx(lh_ref, rel=1e-12)
    assert weighted_loss(s, S, b, data, lam) == pytest.approx(lh_ref + lam * ll_ref, rel=1e-12)
    assert obj.value(th) == pytest.approx(lh_ref + lam * ll_ref, rel=1e-12)


def test_scores_follow_calibration_basis(data):
    """s = alpha B e1 for M = mu and s = B c for M = W (chart doc, eq. overparam)."""
    for cal in ("mu", "W"):
        chart = Chart(N, K, 1, cal, True)
        th = random_theta(chart, 4)
        A, B, ct, b = chart.unpack(th)
        c = th[chart.slices["c"]]
        expected = c[0] * B[:, 0] if cal == "mu" else B @ c
        np.testing.assert_allclose(chart.scores(th), expected, atol=1e-14)
        np.testing.assert_allclose(chart.S(th), A @ B.T, atol=1e-14)


@pytest.mark.parametrize("cal,r,order", [("mu", 1, True), ("W", 2, True), (None, 1, False)])
def test_cell_scores_sum_to_gradient(data, cal, r, order):
    chart, obj = objective_for(data, cal, r, order)
    th = random_theta(chart, 6)
    _, g, _ = obj.value_grad_hess(th, hess=False)
    cs = obj.cell_scores(th)
    np.testing.assert_allclose(np.asarray(cs.sum(0)).ravel(), g, rtol=1e-10, atol=1e-13)
    # the per-cell Jacobian is d eta_c / d theta (finite differences of eta)
    J_fd = fd_jacobian(obj.eta, th)
    np.testing.assert_allclose(obj.cell_jacobian(th).toarray(), J_fd, atol=1e-7)


def test_score_jacobian_matches_finite_differences():
    for cal in ("mu", "W"):
        chart = Chart(N, K, 2, cal, True)
        th = random_theta(chart, 8)
        np.testing.assert_allclose(chart.score_jacobian(th), fd_jacobian(chart.scores, th), atol=1e-8)


# ---------------------------------------------------------------- chart maps
@pytest.mark.parametrize("r", [0, 1, 2])
@pytest.mark.parametrize("cal", ["mu", "W", None])
def test_chart_constraints_hold_for_every_theta(r, cal):
    chart = Chart(N, K, r, cal, True)
    th = random_theta(chart, r, scale=2.0)
    A, B, _, _ = chart.unpack(th)
    q = r + 1
    np.testing.assert_allclose(A.T @ np.ones(K), K * np.eye(q)[0], atol=1e-12)
    np.testing.assert_allclose(B.T @ np.ones(N), np.zeros(q), atol=1e-12)
    # pack is the left inverse of unpack
    c = th[chart.slices["c"]] if chart.d else None
    np.testing.assert_allclose(chart.pack(A, B, c, chart.order_effects(th)), th, atol=1e-14)
    # dimension count (paper eq. dim-Mr plus the r(r+1) gauge of the restriction)
    assert chart.dim == (K - 1) * q + (N - 1) * q + chart.d + K
    d_model = q * (K + N - r - 2) + chart.d + K
    assert chart.dim - chart.n_gauge == d_model


def random_structure(r, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((K, r + 1))
    B = rng.standard_normal((N, r + 1))
    B -= B.mean(0)
    return A @ B.T


@pytest.mark.parametrize("r", [0, 1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_structure_from_S_identities(r, seed):
    S = random_structure(r, seed)
    st = structure_from_S(S, r)
    one = np.ones(N)
    assert abs(one @ st.mu) < 1e-12
    assert st.mu @ st.mu == pytest.approx(N, rel=1e-12)
    np.testing.assert_allclose(st.V.T @ one, 0.0, atol=1e-10)
    np.testing.assert_allclose(st.V.T @ st.mu, 0.0, atol=1e-10)
    np.testing.assert_allclose(st.V.T @ st.V / N, np.eye(r), atol=1e-10)
    np.testing.assert_allclose(st.gamma, S @ st.mu / N, atol=1e-12)
    np.testing.assert_allclose(st.U.T @ np.ones(K), 0.0, atol=1e-10)
    np.testing.assert_allclose(np.outer(st.gamma, st.mu) + st.U @ st.V.T, S, atol=1e-10)
    # mu is the direction of the judges' mean score (the consensus)
    m = S.sum(0)
    np.testing.assert_allclose(st.mu, np.sqrt(N) * m / np.linalg.norm(m), atol=1e-12)
    np.testing.assert_allclose(st.W, np.column_stack([st.mu, st.V]))


def test_structure_of_a_rank_deficient_S_keeps_V_centered():
    """K = 3 judges, r = 2, a residual of rank 1: the second singular value is 0, and its right singular vector
    (any unit vector off the row space) must still be off 1, or the chart cannot be rebuilt (a line search's
    canonical() raised 'B must satisfy B^T 1 = 0' on such a point)."""
    rng = np.random.default_rng(0)
    n = 8
    mu, v = (x - x.mean() for x in rng.normal(size=(2, n)))
    S = np.outer([1.0, 2.0, 3.0], mu) + np.outer([1.0, -1.0, 0.0], v)
    st = structure_from_S(S, 2)
    np.testing.assert_allclose(st.V.T @ np.ones(n), 0.0, atol=1e-12)
    np.testing.assert_allclose(st.V.T @ st.V / n, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(np.outer(st.gamma, st.mu) + st.U @ st.V.T, S, atol=1e-12)
    chart = Chart(n, 3, 2, "W", True)
    th = chart.from_structure(st, np.array([0.5, 0.1, -0.2]), np.zeros(3))
    np.testing.assert_allclose(chart.S(chart.canonical(th)), S, atol=1e-10)


@pytest.mark.parametrize("cal", ["mu", "W"])
@pytest.mark.parametrize("r", [1, 2])
def test_from_structure_round_trip(cal, r):
    S = random_structure(r, 7 + r)
    st = structure_from_S(S, r)
    chart = Chart(N, K, r, cal, True)
    d = chart.d
    c = np.array([0.8, -0.4, 0.3])[:d]
    b = np.array([0.5, -0.2, 0.1])
    th = chart.from_structure(st, c, b)
    np.testing.assert_allclose(chart.S(th), S, atol=1e-10)
    np.testing.assert_allclose(chart.order_effects(th), b)
    M = st.mu[:, None] if cal == "mu" else st.W
    np.testing.assert_allclose(chart.scores(th), M @ c, atol=1e-10)
    np.testing.assert_allclose(chart.calibration_coordinates(th), c, atol=1e-10)
    st2 = chart.structure(th)
    for name in ("mu", "gamma", "U", "V"):
        np.testing.assert_allclose(getattr(st2, name), getattr(st, name), atol=1e-9)
    # canonical() keeps (s, S, b)
    th2 = random_theta(chart, 1)
    thc = chart.canonical(th2)
    np.testing.assert_allclose(chart.S(thc), chart.S(th2), atol=1e-10)
    np.testing.assert_allclose(chart.scores(thc), chart.scores(th2), atol=1e-10)


# ---------------------------------------------------------------- gauge
def gauge_matrix(r, rng):
    """A random G in GL(r+1) with G e1 = e1."""
    q = r + 1
    G = np.eye(q) + 0.4 * rng.standard_normal((q, q))
    G[:, 0] = np.eye(q)[0]
    return G


def gauge_move(chart: Chart, th: np.ndarray, G: np.ndarray) -> np.ndarray:
    A, B, ct, b = chart.unpack(th)
    Ginv = np.linalg.inv(G)
    if chart.calibration == "mu":
        c = th[chart.slices["c"]]  # s = alpha B e1 and B G e1 = B e1
    elif chart.calibration == "W":
        c = Ginv @ ct
    else:
        c = None
    return chart.pack(A @ Ginv.T, B @ G, c, b)


@pytest.mark.parametrize("cal,r", [("mu", 1), ("mu", 2), ("W", 1), ("W", 2), (None, 2)])
def test_gauge_invariance(data, cal, r):
    chart, obj = objective_for(data, cal, r, True)
    rng = np.random.default_rng(r)
    th = random_theta(chart, 21)
    G = gauge_matrix(r, rng)
    th2 = gauge_move(chart, th, G)
    assert np.abs(th2 - th).max() > 0.05  # a genuinely different point
    assert obj.value(th2) == pytest.approx(obj.value(th), rel=1e-12)
    np.testing.assert_allclose(chart.S(th2), chart.S(th), atol=1e-12)
    np.testing.assert_allclose(chart.scores(th2), chart.scores(th), atol=1e-12)
    # the gradient is orthogonal to the r(r+1) gauge tangent directions
    _, g, _ = obj.value_grad_hess(th, hess=False)
    q = r + 1
    tangents = []
    for a in range(q):
        for c_ in range(1, q):  # E_{a c} with c != 0 keeps G e1 = e1
            E = np.zeros((q, q))
            E[a, c_] = 1.0
            h = 1e-6
            tangents.append((gauge_move(chart, th, np.eye(q) + h * E) - gauge_move(chart, th, np.eye(q) - h * E)) / (2 * h))
    Tg = np.column_stack(tangents)
    assert np.linalg.matrix_rank(Tg, tol=1e-6) == chart.n_gauge
    np.testing.assert_allclose(Tg.T @ g, 0.0, atol=1e-8 * max(1.0, np.abs(g).max()))


def test_hessian_null_space_at_optimum_is_the_gauge():
    """At a fitted optimum the Hessian of the structured fit has exactly r(r+1) null directions."""
    sim = pydial.simulate(N=8, K=4, rank=2, n_llm=40_000, n_human=800, seed=3)
    d = sim.comparisons
    res = pydial.fit(d, "dial-anc", rank=2, calibration="W")
    chart, th = res.llm_chart, res.llm_theta
    obj = Objective.weighted(chart, d, np.inf)
    _, g, H = obj.value_grad_hess(th)
    assert np.abs(g).max() < 1e-8
    ev = np.linalg.eigvalsh(H)
    small = np.abs(ev) < 1e-8 * np.abs(ev).max()
    assert small.sum() == chart.n_gauge == 6
    assert ev[~small].min() > 0


# ------------------------------------------------------------ stability
def test_binomial_nll_closed_forms_at_huge_eta():
    eta = np.array([1e3, -1e3, 1e3, -1e3, 800.0])
    n = np.array([1.0, 1.0, 2.0, 3.0, 5.0])
    y = np.array([0.0, 0.0, 2.0, 3.0, 1.0])
    # n log(1+e^eta) - y eta ~ (n - y) eta for eta >> 0 and -y eta for eta << 0
    np.testing.assert_allclose(binomial_nll(eta, n, y), [1e3, 0.0, 0.0, 3e3, 3200.0], rtol=1e-15, atol=1e-300)


@pytest.mark.parametrize("cal", ["mu", "W", None])
def test_objective_finite_at_huge_eta(data, cal):
    chart, obj = objective_for(data, cal, 1, True)
    th = random_theta(chart, 2)
    th[chart.slices["B"]] *= 400.0  # |eta| of order 1e3
    if chart.order:
        th[chart.slices["b"]] = 1e3
    eta = obj.eta(th)
    assert np.abs(eta).max() > 500
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        f, g, H = obj.value_grad_hess(th)
    assert np.isfinite(f) and np.all(np.isfinite(g)) and np.all(np.isfinite(H))
    # value against the piecewise-linear limit of softplus, cell by cell
    c = obj.cells
    lin = c.w * (c.n * np.maximum(eta, 0.0) - c.y * eta)
    big = np.abs(eta) > 50
    np.testing.assert_allclose(np.sum((c.w * binomial_nll(eta, c.n, c.y))[big]), lin[big].sum(), rtol=1e-12)
    assert f >= 0.0
    # gradient by finite differences still agrees at this scale (relative step)
    e = np.zeros(chart.dim)
    t = chart.slices["b"].start if chart.order else 0
    e[t] = 1e-3
    gfd = (obj.value(th + e) - obj.value(th - e)) / 2e-3
    assert g[t] == pytest.approx(gfd, rel=1e-6, abs=1e-9)


def test_stacked_human_cells_are_loading_row_K(data):
    """The human cells enter Q_lambda's stack on loading row ``K``, no order, after the LLM cells,
    also when they were built by hand (``HumanCells`` without a judge index, e.g. redrawn cells)."""
    import dataclasses

    from pydial.data.comparisons import HumanCells

    H = data.human
    for d in (data, dataclasses.replace(data, human=HumanCells(H.i, H.j, H.n, H.y))):
        c = Cells.stack(d, 1.0, 1.0)
        assert (c.g[c.is_human] == data.K).all() and (c.a[c.is_human] == 0).all()
        assert (c.g[~c.is_human] < data.K).all() and c.is_human[-len(data.human):].all()
        np.testing.assert_array_equal(c.n[c.is_human], data.human.n)


def test_llm_only_chart_rejects_human_cells(data):
    with pytest.raises(ValueError, match="LLM-only"):
        Objective(Chart(N, K, 1, None, True), Cells.stack(data, 1.0, 1.0))


# ------------------------------------------- factored Hessian vs block pairs
def gradient_full(obj: Objective, res: np.ndarray, v: list[np.ndarray]) -> np.ndarray:
    """``sum_c res_c d eta_c / d phi`` in the full coordinates, one ``bincount`` per column of ``v``.

    The reference for the factored gradient of the fits.
    """
    idx = obj._index
    P = obj.chart.dim_full
    g_full = np.zeros(P)
    for t, col in enumerate(v):
        g_full += np.bincount(idx[:, t], weights=res * col, minlength=P)
    return g_full


def cross_full(obj: Objective, res: np.ndarray) -> np.ndarray:
    """``sum_c res_c d^2 eta_c / d phi^2``: +1 at (L_g,l ; B_i,l), -1 at (L_g,l ; B_j,l).

    The reference for the cross terms the fits add in place.
    """
    ch, c = obj.chart, obj.cells
    q, P = ch.q, ch.dim_full
    H = np.zeros((P, P))
    agg = (np.bincount(c.g * ch.N + c.i, weights=res, minlength=ch.rows * ch.N)
           - np.bincount(c.g * ch.N + c.j, weights=res, minlength=ch.rows * ch.N)).reshape(ch.rows, ch.N)
    for l in range(q):
        rl = np.arange(ch.rows) * q + l
        rb = ch.off_B + np.arange(ch.N) * q + l
        H[np.ix_(rl, rb)] += agg
        H[np.ix_(rb, rl)] += agg.T
    return H


@pytest.mark.parametrize("r,cal,order", [(0, None, True), (1, "mu", True), (2, "W", True), (1, "W", False)])
def test_factored_hessian_matches_block_pair_assembly(data, r, cal, order, monkeypatch):
    """The Hessian from per-judge item-pair totals (in chunks of judges, cells in any
    order) equals the block-pair ``bincount`` assembly, and the factored gradient the
    per-column one."""
    import dataclasses

    from scipy.special import expit

    import pydial.model.likelihood as lk

    ch = Chart(data.N, data.K, r, cal, order)
    lam = np.inf if cal is None else 3.0
    base = Objective.weighted(ch, data, lam)
    th = random_theta(ch, 11)
    eta, v = base.eta(th), base._columns(ch.to_full(th))
    c = base.cells
    p = expit(eta)
    res, curv = c.w * (c.n * p - c.y), c.w * c.n * p * (1 - p)
    H_ref = ch.pull_back(base._outer(curv, v) + cross_full(base, res))
    g_ref = ch.T_sparse.T @ gradient_full(base, res, v)
    perm = np.random.default_rng(0).permutation(c.g.size)
    shuffled = c.select(perm)
    # the tables W_g in chunks of judges, cells in any order; then the totals over the cells
    for chunk, cells, ratio in ((1 << 22, c, 1e9), (2 * data.N ** 2, shuffled, 1e9), (data.N ** 2, c, 1e9),
                                (1 << 22, shuffled, 0)):
        monkeypatch.setattr(lk, "PAIR_CHUNK_ENTRIES", chunk)
        monkeypatch.setattr(lk, "TABLE_RATIO", ratio)
        obj = Objective(ch, cells)
        assert obj._pair_chunks is not None
        _, g, H = obj.value_grad_hess(th)
        np.testing.assert_allclose(H, 0.5 * (H_ref + H_ref.T), rtol=0, atol=1e-13 * np.abs(H_ref).max())
        np.testing.assert_allclose(g, g_ref, rtol=0, atol=1e-13 * np.abs(g_ref).max())
    monkeypatch.setattr(lk, "DENSE_PAIR_RATIO", 0)  # a sparse design: the block-pair assembly itself
    obj = Objective(ch, c)
    assert obj._pair_chunks is None
    np.testing.assert_allclose(obj.value_grad_hess(th)[2], 0.5 * (H_ref + H_ref.T), rtol=0,
                               atol=1e-13 * np.abs(H_ref).max())


def stationary_fit(data, r, cal):
    """A fitted stationary point: the LLM-only fit (``cal`` None) or a finite-weight joint fit."""
    from pydial.estimation.glm import staged_fit
    from pydial.estimation.glm import fit_structured, initial_theta

    if cal is None:
        ch = Chart(data.N, data.K, r, None, True)
        return ch, fit_structured(data, ch, np.inf, initial_theta(data, ch))
    sf = staged_fit(data, r, cal)
    return sf.chart, fit_structured(data, sf.chart, 3.0, sf.theta)


@pytest.mark.parametrize("r,cal", [(1, None), (2, "W"), (1, "mu")])
def test_gauge_cholesky_step_is_the_pseudo_inverse_step(data, r, cal):
    """At a stationary point the gauge tangents span the Hessian's null space and the
    Cholesky step on their complement equals the Moore-Penrose Newton step."""
    from pydial.optim import _gauge_cholesky_step, pinv_sym

    ch, fit = stationary_fit(data, r, cal)
    assert fit.opt.converged
    th, H = fit.theta, fit.opt.hess
    Z = ch.gauge_directions(th)
    assert Z.shape == (ch.dim, ch.n_gauge) and np.linalg.matrix_rank(Z) == ch.n_gauge
    assert np.abs(H @ Z).max() < 1e-7 * np.abs(H).max()
    g = H @ np.random.default_rng(1).standard_normal(ch.dim)  # a gradient in the identified directions
    step = _gauge_cholesky_step(H, g, Z, 1e-10)
    ref = -pinv_sym(H)[0] @ g
    np.testing.assert_allclose(step, ref, rtol=0, atol=1e-6 * np.abs(ref).max())


@pytest.mark.parametrize("gauge", [0, 3])
def test_gauge_cholesky_step_factors_only_its_work_array(gauge):
    """From 64 coordinates on the shifted Hessian is factored in place by LAPACK: the step is the
    Moore-Penrose Newton step (eigen-decomposition) and the caller's Hessian is left as it was,
    also when there is no gauge and the factored matrix would be the Hessian itself."""
    from pydial.optim import _gauge_cholesky_step

    rng = np.random.default_rng(4)
    P = 100
    Z = rng.standard_normal((P, gauge))
    Q = np.linalg.qr(Z)[0] if gauge else Z
    A = rng.standard_normal((P, P))
    H = A @ A.T / P + np.eye(P)
    if gauge:
        H = H - Q @ (Q.T @ H) - (H @ Q) @ Q.T + Q @ (Q.T @ H @ Q) @ Q.T  # flat along span Z
    H = 0.5 * (H + H.T)
    g = H @ rng.standard_normal(P)
    kept, work = H.copy(), np.empty_like(H)
    ev, V = np.linalg.eigh(H)
    keep = ev > 1e-9 * ev.max()
    ref = -(V[:, keep] / ev[keep]) @ (V[:, keep].T @ g)
    for w in (None, work):
        step = _gauge_cholesky_step(H, g, Z, 1e-10, w)
        np.testing.assert_allclose(step, ref, rtol=0, atol=1e-10 * np.abs(ref).max())
        np.testing.assert_array_equal(H, kept)


@pytest.mark.parametrize("r,cal", [(1, None), (2, "W"), (1, "mu")])
def test_pinv_gauge_is_the_eigen_pseudo_inverse(data, r, cal):
    """At a stationary point the Cholesky pseudo-inverse off the gauge equals the one of
    the eigen-decomposition, with the same count of zero eigenvalues; an indefinite
    matrix or a null space beyond the gauge is left to the eigen-decomposition."""
    from pydial.optim import pinv_gauge, pinv_sym

    ch, fit = stationary_fit(data, r, cal)
    th, H = fit.theta, fit.opt.hess
    Z = ch.gauge_directions(th)
    got = pinv_gauge(H, Z)
    assert got is not None
    ref, nz = pinv_sym(H)
    assert got[1] == nz == ch.n_gauge
    np.testing.assert_allclose(got[0], ref, rtol=0, atol=1e-10 * np.abs(ref).max())
    # one more flat direction than the gauge, or a negative curvature: not certified
    ev, Q = np.linalg.eigh(H)
    top = ev.argmax()
    for bad in (0.0, -1.0):
        e2 = ev.copy()
        e2[top] = bad * ev[top]
        assert pinv_gauge((Q * e2) @ Q.T, Z) is None
    # no gauge: the inverse of a positive definite matrix
    A = H + np.eye(ch.dim)
    np.testing.assert_allclose(pinv_gauge(A, np.zeros((ch.dim, 0)))[0], np.linalg.inv(A), rtol=0,
                               atol=1e-12 * np.abs(np.linalg.inv(A)).max())


@pytest.mark.parametrize("assembly", ["tables", "cells", "block-pairs"])
@pytest.mark.parametrize("cal", ["mu", "W"])
def test_cell_jacobian_products_match_the_sparse_jacobian(data, cal, assembly, monkeypatch):
    """The factored products of the meats (Gram matrix, ``J^T r``, cluster sums over the
    judge-pair cells of both orders, row subsets) equal those of the sparse ``J``, from the
    item-pair tables, from the totals over the cells and on the block-pair assembly of a
    sparse design."""
    import scipy.sparse as sp

    import pydial.model.likelihood as lk
    from pydial.model.cells import CellJacobian

    dense = assembly != "block-pairs"
    monkeypatch.setattr(lk, "TABLE_RATIO", 1e9 if assembly == "tables" else 0)
    if not dense:
        monkeypatch.setattr(lk, "DENSE_PAIR_RATIO", 0)
    ch = Chart(data.N, data.K, 1, cal, True)
    obj = Objective.weighted(ch, data, 5.0)
    th = random_theta(ch, 3)
    Jf, Js = CellJacobian(obj, th), obj.full_jacobian(th)
    assert Jf.shape == Js.shape
    assert (obj._pair_chunks is not None) == dense
    rng = np.random.default_rng(2)
    m = Js.shape[0]
    d, r = rng.random(m), rng.standard_normal(m)
    scale = np.abs((Js.T @ sp.diags(d) @ Js).toarray()).max()
    np.testing.assert_allclose(Jf.gram(d), (Js.T @ sp.diags(d) @ Js).toarray(), rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(Jf.rmatvec(r), Js.T @ r, rtol=0, atol=1e-13 * np.abs(Js.T @ r).max())
    llm = ~obj.cells.is_human
    c = obj.cells
    _, cl = np.unique((c.g[llm] * data.N + c.i[llm]) * data.N + c.j[llm], return_inverse=True)
    assert np.bincount(cl).max() == 2  # both orders of a judge-pair cell
    Jl = Jf.rows(llm)
    assert isinstance(Jl, CellJacobian) and Jl.shape == (int(llm.sum()), ch.dim_full)
    ind = sp.csr_matrix((np.ones(cl.size), (cl, np.arange(cl.size))))
    Gs = ind @ sp.diags(r[llm]) @ Js[llm]
    ref = (Gs.T @ Gs).toarray()
    np.testing.assert_allclose(Jl.cluster_gram(cl, r[llm]), ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    np.testing.assert_allclose(Jl.rmatvec(r[llm]), Js[llm].T @ r[llm], rtol=0, atol=1e-13 * np.abs(Js.T @ r).max())
    Jh = Jf.rows(~llm)  # the few human rows: formed sparse
    assert sp.issparse(Jh)
    np.testing.assert_array_equal(Jh.toarray(), Js[~llm].toarray())
    np.testing.assert_array_equal(Jf.tocsr().toarray(), Js.toarray())


def test_slices_of_a_stack_share_its_per_cell_layout():
    """The LLM-only and human-only stacks are slices of the whole stack: their per-cell index arrays
    are views of the whole stack's (no second copy over millions of cells) and equal those formed
    from their own cells."""
    d = pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=400, seed=4).comparisons
    full = Objective(Chart(d.N, d.K, 1, "mu"), Cells.stack(d, 1.0, 1.0))
    llm = Objective(Chart(d.N, d.K, 1, None), Cells.stack(d, 1.0, 0.0))
    hum = Objective(Chart(d.N, d.K, 1, "mu"), Cells.stack(d, 0.0, 1.0))
    m = len(d.llm)
    for part, rows in ((llm, slice(0, m)), (hum, slice(m, None))):
        assert part.cells.source is not None
        own = Cells(*(np.array(getattr(part.cells, f)) for f in ("g", "i", "j", "a", "n", "y", "w", "is_human")))
        alone = Objective(part.chart, own)
        for name in ("_order_label", "_order_judge", "_item_pair_key"):
            got = getattr(part, name)
            assert np.shares_memory(got, getattr(full, name))
            np.testing.assert_array_equal(got, getattr(alone, name))
            np.testing.assert_array_equal(got, getattr(full, name)[rows])
        for got, ref in zip(part._row_item_keys, alone._row_item_keys):
            np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(part._order_key, alone._order_key)
    theta = llm.chart.canonical(np.random.default_rng(1).normal(size=llm.chart.dim) * 0.3)
    f, g, H = llm.value_grad_hess(theta)
    own = Cells(*(np.array(getattr(llm.cells, f)) for f in ("g", "i", "j", "a", "n", "y", "w", "is_human")))
    f2, g2, H2 = Objective(llm.chart, own).value_grad_hess(theta)
    assert f == pytest.approx(f2, rel=1e-14)
    np.testing.assert_allclose(g, g2, rtol=0, atol=1e-14)
    np.testing.assert_allclose(H, H2, rtol=0, atol=1e-13)


@pytest.mark.parametrize("rank", [1, 2])
def test_threaded_passes_equal_the_serial_ones(monkeypatch, rank):
    """The per-cell passes spread their blocks over threads and combine the blocks' results in block order:
    value, gradient and Hessian (the cell-total Hessian of a sparse design, with a covariate) are the same
    numbers, to the last bit, with one thread and with three; so is the cell-clustered meat's gram."""
    import pydial.model.blocks as blocks
    import pydial.model.likelihood as lik

    monkeypatch.setattr(blocks, "CELL_BLOCK", 97)
    monkeypatch.setattr(blocks, "THREADED_CELLS", 0)
    d = pydial.simulate(N=100, K=3, rank=rank, n_llm=5000, n_human=600, seed=5, covariates=["length"],
                        beta=[0.3]).comparisons
    chart = Chart.for_data(d, rank, "mu")
    rng = np.random.default_rng(4)
    th = chart.canonical(rng.normal(size=chart.dim) * 0.3)
    out = {}
    for threads in ("1", "3"):
        monkeypatch.setenv(blocks.THREADS_ENV, threads)
        obj = Objective.weighted(chart, d, 2.0, None)
        assert len(obj._blocks) > 40 and obj._pair_chunks is not None
        assert chart.rows * d.N**2 > lik.TABLE_RATIO * obj.cells.g.size  # the cell totals, not the tables
        m = obj.cells.g.size
        J = CellJacobian(obj, th)  # the cell-clustered meat's gram: offsets weighted per representative cell
        meat = J.cluster_gram(np.arange(m) // 3, np.random.default_rng(1).normal(size=m))
        out[threads] = (obj.value(th), *obj.value_grad_hess(th), meat)
    assert out["1"][0] == out["3"][0] == out["3"][1]
    for k in (2, 3, 4):
        np.testing.assert_array_equal(out["1"][k], out["3"][k])


@pytest.mark.parametrize("penalty", [None, "firth"])
def test_blocked_passes_over_many_blocks_match_finite_differences(monkeypatch, penalty):
    """The binary objective's per-cell passes run block by block: with blocks of 37 cells (hundreds of
    blocks, the cell-total Hessian of a sparse design) the value is the sum over the cells written here,
    the gradient and Hessian match finite differences, and the value/derivative cache stays right when
    trial points alternate (their predictors share one work array)."""
    import pydial.model.blocks as blocks
    import pydial.model.likelihood as lik

    monkeypatch.setattr(blocks, "CELL_BLOCK", 37)
    d = pydial.simulate(N=80, K=3, rank=1, n_llm=6000, n_human=800, seed=11).comparisons
    chart = Chart(d.N, d.K, 1, "mu")
    lam = 5.0
    obj = Objective.weighted(chart, d, lam, penalty)
    assert len(obj._blocks) > 50
    assert obj._pair_chunks is not None and chart.rows * d.N**2 > lik.TABLE_RATIO * obj.cells.g.size  # cell totals
    rng = np.random.default_rng(2)
    th = chart.canonical(rng.normal(size=chart.dim) * 0.3)
    th2 = chart.canonical(th + rng.normal(size=chart.dim) * 0.05)
    c = obj.cells
    eta = obj.eta(th)
    direct = float(np.sum(c.w * (c.n * np.logaddexp(0.0, eta) - c.y * eta)))
    pen = 0.0 if penalty is None else obj.penalty.value(chart, th, eta[c.is_human])
    f, g, H = obj.value_grad_hess(th)
    assert f == pytest.approx(direct + pen, rel=1e-12)
    np.testing.assert_allclose(g, fd_jacobian(obj.value, th).ravel(), rtol=1e-6, atol=1e-8 * np.abs(g).max())
    H_fd = fd_jacobian(lambda x: obj.value_grad_hess(x, hess=False)[1], th)
    np.testing.assert_allclose(H, H_fd, rtol=1e-6, atol=1e-7 * np.abs(H_fd).max())
    # alternating points: value(th2), value(th), derivatives at th2, then th again
    v2, v1 = obj.value(th2), obj.value(th)
    f2, g2, _ = obj.value_grad_hess(th2)
    f1, g1, H1 = obj.value_grad_hess(th)
    fresh = Objective.weighted(chart, d, lam, penalty)
    assert (v1, v2) == (f1, f2) == (fresh.value(th), fresh.value(th2))
    np.testing.assert_array_equal(g1, g)
    np.testing.assert_array_equal(H1, H)
    np.testing.assert_array_equal(g2, fresh.value_grad_hess(th2)[1])


def test_an_interrupted_evaluation_leaves_no_stale_predictors():
    """The predictors of the last point live in one work array: an evaluation that fails part-way (here its
    loss, after the predictors of the new point were written) must not leave the cache naming the old point."""
    import dataclasses

    d = pydial.simulate(N=8, K=3, rank=1, n_llm=2000, n_human=300, seed=2).comparisons
    chart = Chart(d.N, d.K, 1, "mu")
    obj = Objective.weighted(chart, d, 3.0)
    th1, th2 = random_theta(chart, 1), random_theta(chart, 2)
    f1, g1, _ = obj.value_grad_hess(th1)
    family = obj.family

    def fail(*args):
        raise KeyboardInterrupt

    obj.family = dataclasses.replace(family, loss=fail)
    with pytest.raises(KeyboardInterrupt):
        obj.value(th2)
    obj.family = family
    f, g, _ = obj.value_grad_hess(th1)
    assert f == f1
    np.testing.assert_array_equal(g, g1)
