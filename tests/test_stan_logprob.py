"""The Stan programs' log densities agree with the numpy engine and with independent numpy code.

* ``dial.stan``: ``-log_prob`` (flat priors, no Jacobian) equals ``n_H`` times
  ``pydial.likelihood.Objective.weighted(chart, data, lam).value(theta)`` to
  1e-8 relative at random ``theta`` (the unconstrained vector *is* the chart's
  theta), for r = 0, 1, 2, both calibration bases, order effects on and off;
  the gradients agree too.
* ``judges.stan`` and ``dial_sample.stan``: against a Davidson-Beaver /
  binomial log-likelihood written here from the formulas, without Stan.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammaln, log_expit

from pydial.likelihood import Cells, Objective
from pydial.model import Chart
from pydial.simulate import simulate
from pydial.stan.standata import (
    CellTable,
    dial_data,
    dial_sample_data,
    helmert_basis,
    judges_data,
    llm_cell_table,
    split_unconstrained,
)

pytestmark = pytest.mark.stan


@pytest.fixture(scope="module")
def data():
    return simulate(N=8, K=3, r=1, n_llm=3000, n_human=300, rng=11).comparisons


# ------------------------------------------------------------------ independent numpy likelihoods
def np_cell_loglik(counts: np.ndarray, x: np.ndarray, log_nu: np.ndarray | None) -> np.ndarray:
    """Log pmf of (wins_i, wins_j, ties) per cell, written from the model's definition.

    Davidson-Beaver: P(i) : P(j) : P(tie) = e^x : e^-x : nu with x = (s_i - s_j + a b) / 2;
    without a tie parameter the binomial model logit P(i) = 2 x.
    """
    wi, wj, t = counts[:, 0].astype(float), counts[:, 1].astype(float), counts[:, 2].astype(float)
    if log_nu is None:
        assert np.all(t == 0)
        n = wi + wj
        return gammaln(n + 1) - gammaln(wi + 1) - gammaln(wj + 1) + wi * log_expit(2 * x) + wj * log_expit(-2 * x)
    z = np.logaddexp(np.logaddexp(x, -x), log_nu)
    n = wi + wj + t
    coef = gammaln(n + 1) - gammaln(wi + 1) - gammaln(wj + 1) - gammaln(t + 1)
    return coef + wi * (x - z) + wj * (-x - z) + t * (log_nu - z)


def davidson_beaver_sim(rng, s, b, nu, i, j, a, n):
    """Draw (wins_i, wins_j, ties) counts from the Davidson-Beaver model."""
    x = 0.5 * (s[i] - s[j] + a * b)
    logits = np.column_stack([x, -x, np.full_like(x, np.log(nu))])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return np.array([rng.multinomial(m, pp) for m, pp in zip(n, p)])


# ------------------------------------------------------------------ dial.stan
CASES = [(r, cal, order) for r in (0, 1, 2) for cal in ("mu", "W") for order in (True, False)]


@pytest.mark.parametrize("r,cal,order", CASES)
def test_dial_log_prob_equals_numpy_objective(models, data, r, cal, order):
    m = models["dial"]
    rng = np.random.default_rng(100 + 10 * r + order)
    ch = Chart(data.N, data.K, r, cal, order)
    lam = 0.37
    d = dial_data(data, ch, w_llm=lam * data.n_human / data.n_llm, w_human=1.0)
    obj = Objective.weighted(ch, data, lam)
    assert m.num_unconstrained(d) == ch.dim
    for _ in range(3):
        theta = rng.normal(scale=0.7, size=ch.dim)
        expected = data.n_human * obj.value(theta)
        got = -m.log_prob(d, theta)
        assert got == pytest.approx(expected, rel=1e-8)
        _, g, _ = obj.value_grad_hess(theta, hess=False)
        np.testing.assert_allclose(-m.grad_log_prob(d, theta), data.n_human * g, rtol=1e-7,
                                   atol=1e-9 * np.abs(data.n_human * g).max())


def test_dial_llm_only_and_staged_weights(models, data):
    """w_human = 0 (and the LLM-only chart) give the structured LLM-only loss of eq. staged-calibrated-estimator."""
    m = models["dial"]
    rng = np.random.default_rng(5)
    ch = Chart(data.N, data.K, 1, None, True)
    d = dial_data(data, ch, w_llm=1.0 / data.n_llm)
    obj = Objective.weighted(ch, data, np.inf)
    theta = rng.normal(size=ch.dim)
    assert -m.log_prob(d, theta) == pytest.approx(obj.value(theta), rel=1e-10)
    # calibrated chart, human weight 0: the calibration coordinate does not enter
    chc = Chart(data.N, data.K, 1, "mu", True)
    dc = dial_data(data, chc, w_llm=1.0 / data.n_llm, w_human=0.0)
    th = rng.normal(size=chc.dim)
    oc = Objective(chc, Cells.stack(data, 1.0 / data.n_llm, 0.0))
    assert -m.log_prob(dc, th) == pytest.approx(oc.value(th), rel=1e-10)
    th2 = th.copy()
    th2[chc.slices["c"]] += 3.0
    assert m.log_prob(dc, th2) == pytest.approx(m.log_prob(dc, th), rel=1e-14)


def test_dial_cell_weights_leave_one_out(models, data):
    """A zero weight removes exactly that cell's term (leave-one-cell-out needs no new program)."""
    m = models["dial"]
    ch = Chart(data.N, data.K, 1, "W", True)
    theta = np.random.default_rng(6).normal(size=ch.dim)
    L = llm_cell_table(data)
    w = np.ones(len(L))
    full = m.log_prob(dial_data(data, ch, w_llm=w, w_human=1.0), theta)
    w[4] = 0.0
    loo = m.log_prob(dial_data(data, ch, w_llm=w, w_human=1.0), theta)
    A, B, _, b = ch.unpack(theta)
    S = A @ B.T
    eta = S[L.judge[4], L.i[4]] - S[L.judge[4], L.j[4]] + L.a[4] * b[L.judge[4]]
    n, y = L.wins_i[4] + L.wins_j[4], L.wins_i[4]
    nll = n * np.logaddexp(0, eta) - y * eta
    assert full - loo == pytest.approx(-nll, rel=1e-10)


def test_dial_priors_add_normal_densities(models, data):
    m = models["dial"]
    ch = Chart(data.N, data.K, 1, "mu", True)
    theta = np.random.default_rng(7).normal(size=ch.dim)
    flat = dial_data(data, ch, w_llm=1.0, w_human=1.0)
    pri = dial_data(data, ch, w_llm=1.0, w_human=1.0, priors={"A": 2.0, "B": 3.0, "c": 1.5, "b": 0.5})
    from scipy.stats import norm

    sl = ch.slices
    extra = sum(norm.logpdf(theta[sl[k]], scale=sd).sum() for k, sd in (("A", 2.0), ("B", 3.0), ("c", 1.5), ("b", 0.5)))
    assert m.log_prob(pri, theta) - m.log_prob(flat, theta) == pytest.approx(extra, rel=1e-10)


def test_dial_rejects_bad_rank(models, data):
    m = models["dial"]
    ch = Chart(data.N, data.K, 1, "mu", True)
    d = dial_data(data, ch, w_llm=1.0, w_human=1.0)
    d["r"] = data.K  # r > K - 1
    with pytest.raises(Exception, match="Cond. llm-structure"):
        m.log_prob(d, np.zeros(5))


# ------------------------------------------------------------------ judges.stan
@pytest.mark.parametrize("ties,order", [(False, True), (True, True), (True, False)])
def test_judges_log_prob_equals_numpy_davidson_beaver(models, ties, order):
    m = models["judges"]
    rng = np.random.default_rng(21)
    N, G = 6, 3  # two LLM judges and the people (judge 3, a = 0, no order effect)
    i, j = np.triu_indices(N, 1)
    g = np.repeat(np.arange(G), i.size)
    ii, jj = np.tile(i, G), np.tile(j, G)
    a = np.where(g < 2, rng.choice([-1, 1], size=g.size), 0)
    counts = rng.integers(0, 6, size=(g.size, 3))
    if not ties:
        counts[:, 2] = 0
    cells = CellTable(g, ii, jj, a, counts[:, 0], counts[:, 1], counts[:, 2])
    w = rng.uniform(0.5, 2.0, size=g.size)
    d = judges_data(cells, N=N, G=G, order_judges=[0, 1] if order else [], tie_judges=range(G) if ties else [],
                    w=w, flat=True)
    n_u = m.num_unconstrained(d)
    for _ in range(3):
        u = rng.normal(size=n_u)
        parts = split_unconstrained("judges", d, u)
        s = parts["s_raw"] @ helmert_basis(N).T  # G x N, centered
        np.testing.assert_allclose(s.sum(axis=1), 0.0, atol=1e-12)
        bg = np.zeros(G)
        if order:
            bg[:2] = parts["b"]
        x = 0.5 * (s[g, ii] - s[g, jj] + a * bg[g])
        ll = np_cell_loglik(counts, x, parts["log_nu"][g] if ties else None)
        assert m.log_prob(d, u) == pytest.approx(float(np.sum(w * ll)), rel=1e-10)
        # the generated log_lik is the unweighted per-cell log pmf; s matches the layout
        con = m.constrain(d, u, include_gqs=True)
        np.testing.assert_allclose(con["s"], s, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(con["log_lik"], ll, rtol=1e-10)


def test_davidson_beaver_decisive_conditional_is_binomial_model():
    """Given a decisive outcome, Davidson-Beaver gives logit P(i wins) = s_i - s_j + a b (eq. binomial-model-llm)."""
    rng = np.random.default_rng(3)
    s_i, s_j, b = rng.normal(size=3)
    for a in (-1, 1):
        for log_nu in (-5.0, 0.0, 2.0):
            x = 0.5 * (s_i - s_j + a * b)
            lp = np.array([x, -x, log_nu]) - np.logaddexp(np.logaddexp(x, -x), log_nu)
            assert np.exp(lp).sum() == pytest.approx(1.0, rel=1e-14)
            assert lp[0] - lp[1] == pytest.approx(s_i - s_j + a * b, rel=1e-12)


# ------------------------------------------------------------------ dial_sample.stan
@pytest.mark.parametrize("r,cal,ties", [(1, "mu", None), (1, "W", "davidson"), (2, "W", None), (0, "mu", "davidson")])
def test_dial_sample_structure_and_log_lik(models, r, cal, ties):
    """At random unconstrained points: Cond. llm-structure holds and log_lik equals the numpy log pmf."""
    m = models["dial_sample"]
    sim = simulate(N=7, K=3, r=1, n_llm=2000, n_human=200, rng=31)
    frame = sim.frame.copy()
    rng = np.random.default_rng(8)
    if ties:  # turn some outcomes into ties so the tie counts are non-trivial
        frame.loc[rng.random(len(frame)) < 0.15, "winner"] = "tie"
    from pydial import Comparisons

    data = Comparisons.from_frame(frame, items=list(sim.truth.items))
    d, L, H = dial_sample_data(data, rank=r, calibration=cal, ties=ties, w_llm=0.8, w_human=1.3,
                               priors={"m_sd": 0, "gamma_sd": 0, "Z_sd": 0, "b_sd": 0, "c_sd": 0, "log_nu_sd": 0})
    N, K = data.N, data.K
    n_u = m.num_unconstrained(d)
    for _ in range(3):
        u = rng.normal(size=n_u)
        v = m.constrain(d, u, include_tparams=True, include_gqs=True)
        mu, gamma, U, V, S, s_H = v["mu"], v["gamma"], v["U"], v["V"], v["S"], v["s_H"]
        U, V = U.reshape(K, r), V.reshape(N, r)
        # Cond. llm-structure
        assert abs(mu.sum()) < 1e-10 and mu @ mu == pytest.approx(N, rel=1e-12)
        np.testing.assert_allclose(V.T @ np.ones(N), 0, atol=1e-10)
        np.testing.assert_allclose(V.T @ mu, 0, atol=1e-9)
        np.testing.assert_allclose(V.T @ V / N, np.eye(r), atol=1e-10)
        np.testing.assert_allclose(U.sum(axis=0), 0, atol=1e-10)
        assert gamma.sum() > 0 and v["consensus_scale"] == pytest.approx(gamma.mean(), rel=1e-12)
        np.testing.assert_allclose(S, np.outer(gamma, mu) + U @ V.T, atol=1e-10)
        M = mu[:, None] if cal == "mu" else np.column_stack([mu, V])
        np.testing.assert_allclose(s_H, M @ v["c"], atol=1e-10)
        # log_lik: LLM cells then human cells
        b = v.get("b", np.zeros(K))
        x_l = 0.5 * (S[L.judge, L.i] - S[L.judge, L.j] + L.a * b[L.judge])
        x_h = 0.5 * (s_H[H.i] - s_H[H.j])
        ln = np.atleast_1d(v["log_nu"]) if ties else None
        ll_l = np_cell_loglik(L.counts, x_l, ln[L.judge] if ties else None)
        ll_h = np_cell_loglik(H.counts, x_h, np.full(len(H), ln[K]) if ties else None)
        np.testing.assert_allclose(v["log_lik"], np.concatenate([ll_l, ll_h]), rtol=1e-10)
        # the model block: weighted log-likelihood + the fixed parameter-expansion density of P_raw
        P_raw = split_unconstrained_P(d, u)
        pe = -0.5 * np.sum((P_raw.T @ P_raw - np.eye(r)) ** 2) / 0.2**2
        assert m.log_prob(d, u) == pytest.approx(0.8 * ll_l.sum() + 1.3 * ll_h.sum() + pe, rel=1e-10)


def split_unconstrained_P(d, u):
    """``P_raw`` from the unconstrained vector of dial_sample.stan (all its parameters are unconstrained)."""
    from pydial.stan.standata import parameter_layout

    pos = 0
    for name, shape, order in parameter_layout("dial_sample", d):
        n = int(np.prod(shape)) if shape else 1
        if name == "P_raw":
            return u[pos : pos + n].reshape(shape, order=order)
        pos += n
    raise AssertionError("no P_raw")
