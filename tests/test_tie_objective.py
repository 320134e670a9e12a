"""The structured objective with a tie family (pydial.model.likelihood.Objective, ``ties=``).

References: central finite differences of value and gradient (tests/fdcheck.py),
a direct sum of the per-cell tie log-likelihoods written here from the model
definitions (Davidson-Beaver: softmax of (eta/2, -eta/2, log nu); Rao-Kupper:
P(i) = sigma(eta - tau), P(j) = sigma(-eta - tau)), and the binary objective in
the limit nu -> 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, log_expit, logsumexp

import pydial
from fdcheck import fd_jacobian
from pydial.model.likelihood import Cells, Objective, tie_groups, tie_totals
from pydial.model.chart import Chart


@pytest.fixture(scope="module")
def tdata():
    return pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=400, tie_rate=0.2, ties="davidson",
                           seed=21).comparisons


def direct_loglik(ties, counts, eta, l):
    """Per-cell log-likelihood kernels written from the model definitions."""
    wi, wj, t = counts.T
    if ties == "davidson":
        x = eta / 2
        z = logsumexp(np.stack([x, -x, np.broadcast_to(l, x.shape)]), axis=0)
        return wi * (x - z) + wj * (-x - z) + t * (l - z)
    tau = np.exp(l)
    pi, pj = expit(eta - tau), expit(-eta - tau)
    return wi * log_expit(eta - tau) + wj * log_expit(-eta - tau) + t * np.log(1 - pi - pj)


CASES = [(ties, cal, r, order) for ties in ("davidson", "rao-kupper") for cal in ("mu", "W", None)
         for r in (0, 1) for order in (True, False)]


def random_x(obj, seed, scale=0.5):
    rng = np.random.default_rng(seed)
    x = scale * rng.standard_normal(obj.dim)
    x[obj.chart.dim:] = rng.normal(-0.5, 0.4, obj.n_tie)
    return x


@pytest.mark.parametrize("ties,cal,r,order", CASES)
def test_tie_gradient_and_hessian_match_finite_differences(tdata, ties, cal, r, order):
    ch = Chart(tdata.N, tdata.K, r, cal, order)
    obj = Objective.weighted(ch, tdata, 0.8 if cal else np.inf, ties=ties)
    assert obj.n_tie == tdata.K + (cal is not None)
    x = random_x(obj, 7 + r)
    _, g, H = obj.value_grad_hess(x)
    g_fd = fd_jacobian(lambda z: np.array([obj.value(z)]), x)[0]
    np.testing.assert_allclose(g, g_fd, rtol=1e-6, atol=1e-8 * np.abs(g).max())
    H_fd = fd_jacobian(lambda z: obj.value_grad_hess(z, hess=False)[1], x)
    np.testing.assert_allclose(H, 0.5 * (H_fd + H_fd.T), rtol=1e-5, atol=1e-7 * np.abs(H).max())
    # the (eta, l) cross block is really there
    assert np.abs(H[: ch.dim, ch.dim:]).max() > 1e-4


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_tie_value_equals_direct_sum(tdata, ties):
    ch = Chart(tdata.N, tdata.K, 1, "W", True)
    lam = 0.6
    obj = Objective.weighted(ch, tdata, lam, ties=ties)
    x = random_x(obj, 3)
    theta, l = obj.split(x)
    S, s, b = ch.S(theta), ch.scores(theta), ch.order_effects(theta)
    t = tdata.tie_cells(human=True)
    cnt = t[["wins_i", "wins_j", "ties"]].to_numpy(float)
    k, i, j, a = (t[c].to_numpy() for c in ("k", "i", "j", "a"))
    h = k == tdata.K
    eta = np.where(h, s[i] - s[j], S[np.minimum(k, tdata.K - 1), i] - S[np.minimum(k, tdata.K - 1), j]
                   + a * b[np.minimum(k, tdata.K - 1)])
    ll = direct_loglik(ties, cnt, eta, l[k])
    n_l, n_h = cnt[~h].sum(), cnt[h].sum()
    assert (n_l, n_h) == tie_totals(tdata)
    expected = -ll[h].sum() / n_h - lam * ll[~h].sum() / n_l
    assert obj.value(x) == pytest.approx(expected, rel=1e-12)


def test_groups_without_ties_use_the_binary_cells():
    """A judge (or the people) without ties: nu fixed at 0, its cells binary, no coordinate."""
    data = pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=400, seed=4).comparisons  # no ties at all
    ch = Chart(data.N, data.K, 1, "mu", True)
    assert tie_groups(data, ch).size == 0
    lam = 0.7
    obj = Objective.weighted(ch, data, lam, ties="davidson")
    assert obj.n_tie == 0 and obj.dim == ch.dim
    binary = Objective.weighted(ch, data, lam)
    theta = 0.5 * np.random.default_rng(1).standard_normal(ch.dim)
    f1, g1, H1 = obj.value_grad_hess(theta)
    f0, g0, H0 = binary.value_grad_hess(theta)
    assert f1 == pytest.approx(f0, rel=1e-13)
    np.testing.assert_allclose(g1, g0, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(H1, H0, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_free_tie_parameter_at_minus_infinity_is_the_binary_model(ties):
    """With no ties in the data, a free log nu -> -inf gives the binary objective (the nu -> 0 limit)."""
    data = pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=400, seed=4).comparisons
    ch = Chart(data.N, data.K, 1, "mu", True)
    lam = 0.7
    obj = Objective(ch, Cells.stack(data, lam / data.n_llm, 1.0 / data.n_human, with_ties=True), ties=ties, free=[0, 1, 2, 3])
    theta = 0.5 * np.random.default_rng(1).standard_normal(ch.dim)
    x = np.concatenate([theta, np.full(4, -40.0)])
    f0, g0, _ = Objective.weighted(ch, data, lam).value_grad_hess(theta)
    f1, g1, _ = obj.value_grad_hess(x)
    assert f1 == pytest.approx(f0, rel=1e-12)
    np.testing.assert_allclose(g1[: ch.dim], g0, rtol=1e-9, atol=1e-14)
    assert np.all(g1[ch.dim:] > 0)  # the loss decreases toward nu = 0: the MLE is the boundary


def test_outcome_derivatives_are_log_probability_derivatives(tdata):
    ch = Chart(tdata.N, tdata.K, 1, "mu", True)
    for ties in ("davidson", "rao-kupper"):
        obj = Objective.weighted(ch, tdata, 0.5, ties=ties)
        x = random_x(obj, 5)
        P, a, b = obj.outcome_derivatives(x)
        np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-12)
        # the expected score is zero for each cell
        np.testing.assert_allclose((P * a).sum(1), 0.0, atol=1e-12)
        np.testing.assert_allclose((P * b).sum(1), 0.0, atol=1e-12)


def test_tie_cells_rejects_ties_without_a_free_parameter(tdata):
    ch = Chart(tdata.N, tdata.K, 1, "mu", True)
    with pytest.raises(ValueError, match="no free tie parameter"):
        Objective(ch, Cells.stack(tdata, 1.0, 1.0, with_ties=True), ties="davidson", free=[0])
    with pytest.raises(ValueError, match="ties must be"):
        Objective(ch, Cells.stack(tdata, 1.0, 1.0, with_ties=True), ties="bradley")
    with pytest.raises(ValueError, match="the cells hold ties"):
        Objective(ch, Cells.stack(tdata, 1.0, 1.0, with_ties=True))  # the binary family cannot take tied judgments
