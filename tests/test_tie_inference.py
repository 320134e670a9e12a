"""Sandwich covariances of the DIAL tie fits (pydial.estimation.steps, pydial.inference.linearization.parameter_meat).

References: (1) on binary cells the meats of ``parameter_meat`` from three-outcome cell
statistics (two channels) equal those from binary cell statistics; (2) a brute-force sandwich written here from per-comparison
scores taken by central differences of ``log P(outcome)`` (pydial.model.families.Family.probabilities
and the chart's linear predictors only), clustered per comparison, per judge-pair
cell and per record from the raw rows of ``data.frame``; (3) the two-step
covariance at lambda = inf as the large-lambda limit of the finite-weight
sandwich; (4) for Davidson's model (whose observed information is the expected one)
the lambda = 0 Fisher covariance equals the inverse information of
``fit(..., "human", ties="davidson")``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

import pydial
from pydial.inference.linearization import CellStats, parameter_meat
from pydial.model.likelihood import Objective, tie_totals
from pydial.model.chart import Chart
from pydial.model.families import DAVIDSON, family_of
from pydial.estimation import steps
from pydial.inference import sandwich


@pytest.fixture(scope="module")
def tdata():
    return pydial.simulate(N=5, K=2, rank=1, n_llm=1500, n_human=300, tie_rate=0.25, ties="davidson",
                           seed=31).comparisons


@pytest.fixture(scope="module")
def bdata():
    return pydial.simulate(N=6, K=3, rank=1, n_llm=2000, n_human=300, seed=5).comparisons


@pytest.mark.parametrize("cov", ["fisher", "binomial", "cell", "record"])
def test_outcome_stats_meat_equals_binary_meat_on_binary_cells(bdata, cov):
    ch = Chart(bdata.N, bdata.K, 1, "mu", True)
    obj = Objective.weighted(ch, bdata, 0.8)
    theta = 0.4 * np.random.default_rng(2).standard_normal(ch.dim)
    p = obj.probabilities(theta)
    c = obj.cells
    J = obj.full_jacobian(theta)
    st = CellStats(c.n, c.w, c.is_human, c.y, p)
    ref = parameter_meat(J, st, bdata, cov).dense()
    m = p.size
    counts = np.column_stack([c.y, c.n - c.y, np.zeros(m)])
    key = (c.g.astype(np.int64) * bdata.N + c.i) * bdata.N + c.j
    ost = CellStats.outcomes(counts, np.column_stack([p, 1 - p, np.zeros(m)]), np.column_stack([1 - p, -p, np.zeros(m)]),
                             np.zeros((m, 3)), c.w, c.is_human, key)
    J2 = sp.vstack([J, sp.csr_matrix(J.shape)], format="csr")
    rec = None
    if cov == "record":
        R = bdata.rows
        pos = np.where(R.judge == bdata.K, (~c.is_human).sum() + R.cell, R.cell)
        rec = (R.record, pos, np.where(R.z == 1, 0, 1))
    got = parameter_meat(J2, ost, bdata, cov, rec).dense()
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12 * np.abs(ref).max())


def brute_force_covariance(data, ch, lam, x, ties, cov):
    """Sandwich of (s, log nu_H) from per-comparison scores by finite differences of log P(outcome)."""
    obj = Objective.weighted(ch, data, lam, ties=ties)
    H = obj.value_grad_hess(x)[2]
    Hp = np.linalg.pinv(H, rcond=1e-10, hermitian=True)
    n_l, n_h = tie_totals(data)
    t = data.tie_cells(human=True)
    cells = {tuple(r): q for q, r in enumerate(t[["k", "i", "j", "a"]].to_numpy())}
    K = data.K

    def logp(z):
        theta = z[: ch.dim]
        S, s, b = ch.S(theta), ch.scores(theta), ch.order_effects(theta)
        ln = obj.log_nu(z)
        k, i, j, a = (t[c_].to_numpy() for c_ in ("k", "i", "j", "a"))
        kk = np.minimum(k, K - 1)
        eta = np.where(k == K, s[i] - s[j], S[kk, i] - S[kk, j] + a * b[kk])
        return np.log(family_of(ties).probabilities(eta, ln[k]))

    h = 1e-6
    G = np.zeros((len(t), 3, x.size))
    for q in range(x.size):
        e = np.zeros(x.size)
        e[q] = h
        G[:, :, q] = -(logp(x + e) - logp(x - e)) / (2 * h)  # loss score per cell and outcome
    human = t["k"].to_numpy() == K
    w = np.where(human, 1.0 / n_h, lam / n_l)
    cnt = t[["wins_i", "wins_j", "ties"]].to_numpy(float)
    gbar = {f: np.einsum("co,coq->q", cnt[human == f], G[human == f]) / cnt[human == f].sum() for f in (False, True)}
    E = sandwich.target_jacobian_x(ch, obj, x)
    f = data.frame
    f = f.loc[(~f["self"]) & f["outcome"].isin([0, 1, 2])]
    IF = []
    keys = []
    for k, i, j, a, o, rec in f[["k", "i", "j", "a", "outcome", "rec"]].itertuples(index=False):
        q = cells[(k, i, j, 0 if k == K else a)]
        oc = {1: 0, 0: 1, 2: 2}[o]
        IF.append(w[q] * (G[q, oc] - gbar[bool(human[q])]))
        keys.append(("h", rec, len(keys)) if k == K and cov == "cell" else
                    ((k, i, j) if cov == "cell" else (rec if cov == "record" else len(keys))))
    IF = np.array(IF) @ (E @ Hp).T
    _, grp = np.unique(np.array([str(k_) for k_ in keys]), return_inverse=True)
    sums = np.zeros((grp.max() + 1, IF.shape[1]))
    np.add.at(sums, grp, IF)
    return sums.T @ sums


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
@pytest.mark.parametrize("cov", ["binomial", "cell", "record"])
def test_finite_weight_sandwich_equals_brute_force(tdata, ties, cov):
    sf = steps.staged_fit(tdata, 1, "mu", family=family_of(ties))
    lam = 2.0
    opt = steps.NUMPY.joint(tdata, family_of(ties), sf.chart, lam, sf.x)
    x = opt.x
    assert opt.resolved
    got = sandwich.finite_influence(tdata, sf.chart, lam, x, family_of(ties)).covariance(tdata, cov, "test")
    ref = brute_force_covariance(tdata, sf.chart, lam, x, ties, cov)
    assert got.shape == (tdata.N + 1, tdata.N + 1)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-8 * np.abs(ref).max())
    assert np.abs(ref).max() > 0


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_staged_covariance_is_the_large_lambda_limit(tdata, ties):
    sf = steps.staged_fit(tdata, 1, "mu", family=family_of(ties))
    staged = sandwich.staged_influence(tdata, sf, family_of(ties))[0].covariance(tdata, "binomial", "test")
    lam = 1e7
    opt = steps.NUMPY.joint(tdata, family_of(ties), sf.chart, lam, sf.x)
    x = opt.x
    finite = sandwich.finite_influence(tdata, sf.chart, lam, x, family_of(ties)).covariance(tdata, "binomial", "test")
    np.testing.assert_allclose(finite, staged, rtol=1e-3, atol=1e-5 * np.abs(staged).max())


def test_human_endpoint_fisher_covariance_is_the_inverse_information(tdata):
    """Davidson's model is a multinomial logit in (eta/2, -eta/2, log nu): observed = expected information."""
    ref = pydial.fit(tdata, "human", ties="davidson")
    opt, free, X = steps.family_human_fit(tdata, DAVIDSON)
    N = tdata.N
    E = np.zeros((N + 1, N))
    E[:N, : N - 1] = np.vstack([np.eye(N - 1), -np.ones(N - 1)])  # centered scores s = T beta
    E[N, -1] = 1.0
    _, n_h = tie_totals(tdata)
    U, _ = sandwich.glm_influence(tdata, DAVIDSON, X, opt.x, 1.0 / n_h, E)
    C = U.covariance(tdata, "fisher", "test")
    np.testing.assert_allclose(np.sqrt(np.diag(C))[:N], ref.scores["se"].to_numpy(), rtol=1e-6)
    nu = np.exp(opt.x[-1])
    assert nu * np.sqrt(C[N, N]) == pytest.approx(ref.tie_parameters.loc["human", "se"], rel=1e-6)
    np.testing.assert_allclose(steps.centering_basis(N) @ opt.x[: N - 1], ref.scores["score"].to_numpy(), atol=1e-7)


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_structured_fisher_meat_is_the_observed_information(tdata, ties):
    """Every tie fit's "fisher" meat is the observed information (glm_influence's convention), the
    structured ones' too: each cell's ``(eta, log nu)`` information in the cell statistics equals minus the
    central second differences of its log-likelihood written from the tie probabilities.  For Rao-Kupper
    (not a canonical family) this differs from the expected information."""
    ch = Chart(tdata.N, tdata.K, 1, "mu", True)
    obj = Objective.weighted(ch, tdata, 0.7, ties=ties)
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(0, 0.3, ch.dim), rng.normal(-0.5, 0.2, obj.n_tie)])
    st = sandwich.cell_stats(obj, x)
    eta, l = obj.eta(x[: ch.dim]), obj.log_nu(x)[obj.cells.g]
    cnt, free = obj.cells.counts, np.isfinite(l)
    eta, l, cnt = eta[free], l[free], cnt[free]

    def loglik(de, dl):
        return np.sum(cnt * np.log(family_of(ties).probabilities(eta + de, l + dl)), axis=1)

    h = 1e-4
    ee = -(loglik(h, 0) - 2 * loglik(0, 0) + loglik(-h, 0)) / h**2
    ll = -(loglik(0, h) - 2 * loglik(0, 0) + loglik(0, -h)) / h**2
    el = -(loglik(h, h) - loglik(h, -h) - loglik(-h, h) + loglik(-h, -h)) / (4 * h * h)
    F = st.fisher()[:, :, free]
    np.testing.assert_allclose(F[0, 0], ee, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(F[0, 1], el, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(F[1, 1], ll, rtol=1e-5, atol=1e-6)
    expected = dataclasses.replace(st, information=None).fisher()[:, :, free]
    if ties == "rao-kupper":
        assert np.abs(expected[0, 0] - ee).max() > 1e-3 * np.abs(ee).max()
