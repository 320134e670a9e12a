"""The Stan programs' log densities agree with the numpy engine and with the numpy cell likelihoods.

* ``dial.stan``: ``-(log_prob - constants)`` (flat priors, no Jacobian) equals
  ``n_H`` times ``pydial.model.likelihood.Objective.weighted(chart, data, lam).value(theta)``
  to 1e-8 relative at random ``theta`` (mapped to the program's named parameters by
  :mod:`pydial.stan.parameters`), for r = 0, 1, 2, both calibration bases, order effects on
  and off; the gradients agree too.  With ties, against :mod:`pydial.model.families`.
* ``judges.stan`` and ``dial_sample.stan``: against the per-cell likelihoods of
  :mod:`pydial.model.families` (binary, Davidson-Beaver, Rao-Kupper), which are tested
  against closed forms in tests/test_ties_likelihood.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from pydial.model.likelihood import Cells, Objective
from pydial.model.chart import Chart
from pydial.studies.simulate import simulate
from pydial.stan import StanRuntimeError
from pydial.stan.parameters import dial_from_unconstrained as from_stan, dial_unconstrained as to_stan
from pydial.stan.schema import (
    CellTable,
    dial_calibrate_data,
    dial_data,
    dial_sample_data,
    helmert_basis,
    judges_data,
    llm_cell_table,
    weighted_log_coef,
)
from pydial.model.families import FAMILIES, family_of, log_coef

pytestmark = pytest.mark.stan


@pytest.fixture(scope="module")
def data():
    return simulate(N=8, K=3, rank=1, n_llm=3000, n_human=300, seed=11).comparisons


def np_cell_loglik(counts: np.ndarray, eta: np.ndarray, ties: str | None, log_nu=0.0) -> np.ndarray:
    """Log pmf of (wins_i, wins_j, ties) per cell from pydial.model.families (kernel + multinomial coefficient)."""
    return log_coef(counts) + FAMILIES[ties].cell(counts, eta, log_nu).value


def with_ties(frame, frac=0.15, seed=8):
    """Comparisons from a simulated frame with a fraction of the outcomes turned into ties."""
    from pydial import Comparisons

    frame = frame.copy()
    rng = np.random.default_rng(seed)
    frame.loc[rng.random(len(frame)) < frac, "winner"] = "tie"
    return Comparisons.from_frame(frame)


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
    coef = weighted_log_coef(d)
    for _ in range(3):
        theta = rng.normal(scale=0.7, size=ch.dim)
        expected = data.n_human * obj.value(theta)
        got = -(m.log_prob(d, to_stan(d, theta)) - coef)
        assert got == pytest.approx(expected, rel=1e-8)
        _, g, _ = obj.value_grad_hess(theta, hess=False)
        np.testing.assert_allclose(-from_stan(d, m.grad_log_prob(d, to_stan(d, theta))), data.n_human * g, rtol=1e-7,
                                   atol=1e-9 * np.abs(data.n_human * g).max())


def test_dial_llm_only_and_staged_weights(models, data):
    """w_human = 0 (and the LLM-only chart) give the structured LLM-only loss of eq. staged-calibrated-estimator."""
    m = models["dial"]
    rng = np.random.default_rng(5)
    ch = Chart(data.N, data.K, 1, None, True)
    d = dial_data(data, ch, w_llm=1.0 / data.n_llm)
    obj = Objective.weighted(ch, data, np.inf)
    theta = rng.normal(size=ch.dim)
    assert -(m.log_prob(d, to_stan(d, theta)) - weighted_log_coef(d)) == pytest.approx(obj.value(theta), rel=1e-10)
    # calibrated chart, human weight 0: the calibration coordinate does not enter
    chc = Chart(data.N, data.K, 1, "mu", True)
    dc = dial_data(data, chc, w_llm=1.0 / data.n_llm, w_human=0.0)
    th = rng.normal(size=chc.dim)
    oc = Objective(chc, Cells.stack(data, 1.0 / data.n_llm, 0.0))
    assert -(m.log_prob(dc, to_stan(dc, th)) - weighted_log_coef(dc)) == pytest.approx(oc.value(th), rel=1e-10)
    th2 = th.copy()
    th2[chc.slices["c"]] += 3.0
    assert m.log_prob(dc, to_stan(dc, th2)) == pytest.approx(m.log_prob(dc, to_stan(dc, th)), rel=1e-14)


def test_dial_cell_weights_leave_one_out(models, data):
    """A zero weight removes exactly that cell's term (leave-one-cell-out needs no new program)."""
    m = models["dial"]
    ch = Chart(data.N, data.K, 1, "W", True)
    theta = np.random.default_rng(6).normal(size=ch.dim)
    L = llm_cell_table(data)
    w = np.ones(len(L))
    d = dial_data(data, ch, w_llm=w, w_human=1.0)
    full = m.log_prob(d, to_stan(d, theta))
    w[4] = 0.0
    loo = m.log_prob(dial_data(data, ch, w_llm=w, w_human=1.0), to_stan(d, theta))
    A, B, _, b = ch.unpack(theta)
    S = A @ B.T
    eta = S[L.judge[4], L.i[4]] - S[L.judge[4], L.j[4]] + L.a[4] * b[L.judge[4]]
    n, y = L.wins_i[4] + L.wins_j[4], L.wins_i[4]
    nll = n * np.logaddexp(0, eta) - y * eta
    assert full - loo == pytest.approx(-nll + log_coef(L.counts[4:5])[0], rel=1e-10)


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_dial_tie_log_prob_equals_numpy_cells(models, data, ties):
    """dial.stan with ties > 0: weighted sum of the pydial.model.families log pmfs (nu_k per judge, nu_H for people)."""
    m = models["dial"]
    tdata = with_ties(simulate(N=7, K=3, rank=1, n_llm=2000, n_human=300, seed=12).frame)
    ch = Chart(tdata.N, tdata.K, 1, "W", True)
    d = dial_data(tdata, ch, w_llm=0.7, w_human=1.2, family=family_of(ties))
    L, H = llm_cell_table(tdata, family_of(ties)), None
    from pydial.stan.schema import human_cell_table

    H = human_cell_table(tdata, family_of(ties))
    assert L.tie_counts.sum() > 0 and H.tie_counts.sum() > 0
    rng = np.random.default_rng(4)
    assert m.num_unconstrained(d) == ch.dim + tdata.K + 1
    for _ in range(2):
        u = rng.normal(scale=0.5, size=ch.dim + tdata.K + 1)
        theta, ln = u[: ch.dim], u[ch.dim:]
        S, s_H, b = ch.S(theta), ch.scores(theta), ch.order_effects(theta)
        ll = np_cell_loglik(L.counts, S[L.judge, L.i] - S[L.judge, L.j] + L.a * b[L.judge], ties, ln[L.judge])
        lh = np_cell_loglik(H.counts, s_H[H.i] - s_H[H.j], ties, ln[-1])
        assert m.log_prob(d, to_stan(d, u)) == pytest.approx(0.7 * ll.sum() + 1.2 * lh.sum(), rel=1e-10)


def test_dial_priors_add_normal_densities(models, data):
    m = models["dial"]
    ch = Chart(data.N, data.K, 1, "mu", True)
    theta = np.random.default_rng(7).normal(size=ch.dim)
    flat = dial_data(data, ch, w_llm=1.0, w_human=1.0)
    pri = dial_data(data, ch, w_llm=1.0, w_human=1.0, priors={"A_sd": 2.0, "B_sd": 3.0, "c_sd": 1.5, "b_sd": 0.5})
    from scipy.stats import norm

    sl = ch.slices
    extra = sum(norm.logpdf(theta[sl[k]], scale=sd).sum() for k, sd in (("A", 2.0), ("B", 3.0), ("c", 1.5), ("b", 0.5)))
    assert m.log_prob(pri, to_stan(pri, theta)) - m.log_prob(flat, to_stan(flat, theta)) == pytest.approx(extra, rel=1e-10)


def test_dial_rejects_bad_rank(models, data):
    m = models["dial"]
    ch = Chart(data.N, data.K, 1, "mu", True)
    d = dial_data(data, ch, w_llm=1.0, w_human=1.0)
    d["rank"] = data.K  # r > K - 1
    with pytest.raises(StanRuntimeError, match=rf"rank r = {data.K} needs r <= K - 1 = {data.K - 1}") as info:
        m.log_prob(d, np.zeros(5))
    assert "disagreement rank" in str(info.value)


# ------------------------------------------------------------------ judges.stan
@pytest.mark.parametrize("ties,order", [(None, True), ("davidson", True), ("davidson", False), ("rao-kupper", True)])
def test_judges_log_prob_equals_numpy_cells(models, ties, order):
    m = models["judges"]
    rng = np.random.default_rng(21)
    N, K = 6, 2  # two LLM judges and the people (a = 0, no order effect)
    i, j = np.triu_indices(N, 1)
    g = np.repeat(np.arange(K), i.size)
    ii, jj = np.tile(i, K), np.tile(j, K)
    a = rng.choice([-1, 1], size=g.size)
    counts = rng.integers(0, 6, size=(g.size, 3))
    hcounts = rng.integers(0, 6, size=(i.size, 3))
    if ties is None:
        counts[:, 2] = 0
        hcounts[:, 2] = 0
    L = CellTable.from_counts(g, ii, jj, a, counts[:, 0], counts[:, 1], counts[:, 2])
    z = np.zeros(i.size, np.int64)
    H = CellTable.from_counts(z + K, i, j, z, hcounts[:, 0], hcounts[:, 1], hcounts[:, 2])
    w = rng.uniform(0.5, 2.0, size=g.size)
    d = judges_data(L, H, N=N, K=K, order=order, family=family_of(ties), w_llm=w, w_human=0.6, flat=True)
    n_u = m.num_unconstrained(d)
    assert n_u == (K + 1) * (N - 1) + (K if order else 0) + (K + 1 if ties else 0)
    Q = helmert_basis(N)
    for _ in range(3):
        u = rng.normal(size=n_u)
        parts = m.constrain(d, u, include_gqs=True)
        S = np.asarray(parts["s_raw"]).reshape(K, N - 1) @ Q.T  # K x N, centered
        s_H = Q @ parts["sH_raw"]
        np.testing.assert_allclose(parts["S"], S, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(parts["s_H"], s_H, rtol=1e-10, atol=1e-12)
        b = np.asarray(parts["b"]).reshape(-1) if order else np.zeros(K)
        ln = np.asarray(parts["log_nu"]).reshape(-1) if ties else np.zeros(K + 1)
        ll = np_cell_loglik(counts, S[g, ii] - S[g, jj] + a * b[g], ties, ln[g])
        lh = np_cell_loglik(hcounts, s_H[i] - s_H[j], ties, ln[K])
        assert m.log_prob(d, u) == pytest.approx(float(np.sum(w * ll) + 0.6 * lh.sum()), rel=1e-10)
        # the generated log_lik is the unweighted per-cell log pmf, LLM cells then human
        np.testing.assert_allclose(parts["log_lik"], np.concatenate([ll, lh]), rtol=1e-10)
        rep = np.asarray(parts["counts_rep"]).reshape(-1, 3)
        tot = np.concatenate([counts, hcounts])
        np.testing.assert_array_equal(rep.sum(axis=1), tot.sum(axis=1))


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
@pytest.mark.parametrize("r,cal,ties", [(1, "mu", None), (1, "W", "davidson"), (2, "W", None), (0, "mu", "rao-kupper")])
def test_dial_sample_structure_and_log_lik(models, r, cal, ties):
    """At random unconstrained points: Cond. llm-structure holds and log_lik equals the numpy log pmf."""
    m = models["dial_sample"]
    sim = simulate(N=7, K=3, rank=1, n_llm=2000, n_human=200, seed=31)
    frame = sim.frame.copy()
    rng = np.random.default_rng(8)
    if ties:  # turn some outcomes into ties so the tie counts are non-trivial
        frame.loc[rng.random(len(frame)) < 0.15, "winner"] = "tie"
    from pydial import Comparisons

    data = Comparisons.from_frame(frame, items=list(sim.truth.items))
    d, L, H = dial_sample_data(data, rank=r, calibration=cal, family=family_of(ties), w_llm=0.8, w_human=1.3,
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
        ln = np.atleast_1d(v["log_nu"]) if ties else np.zeros(K + 1)
        ll_l = np_cell_loglik(L.counts, S[L.judge, L.i] - S[L.judge, L.j] + L.a * b[L.judge], ties, ln[L.judge])
        ll_h = np_cell_loglik(H.counts, s_H[H.i] - s_H[H.j], ties, ln[K])
        np.testing.assert_allclose(v["log_lik"], np.concatenate([ll_l, ll_h]), rtol=1e-10)
        # the model block: weighted log-likelihood + the fixed parameter-expansion density of P_raw
        P_raw = np.asarray(v["P_raw"]).reshape(K - 1, r)
        pe = -0.5 * np.sum((P_raw.T @ P_raw - np.eye(r)) ** 2) / 0.2**2
        assert m.log_prob(d, u) == pytest.approx(0.8 * ll_l.sum() + 1.3 * ll_h.sum() + pe, rel=1e-10)


@pytest.mark.parametrize("ties", [None, "davidson", "rao-kupper"])
def test_dial_sample_win_prob_is_the_family_probability(models, ties):
    """win_prob[i, j] = P(i wins) of the family at s_H[i] - s_H[j] and the people's nu (ties are no win)."""
    m = models["dial_sample"]
    data = with_ties(simulate(N=5, K=3, rank=1, n_llm=600, n_human=100, seed=13).frame, 0.2 if ties else 0.0)
    d = dial_sample_data(data, rank=1, calibration="W", family=family_of(ties), win_prob=True)[0]
    rng = np.random.default_rng(2)
    for _ in range(2):
        v = m.constrain(d, rng.normal(size=m.num_unconstrained(d)), include_gqs=True)
        s_H, N = v["s_H"], data.N
        log_nu_h = float(np.atleast_1d(v["log_nu"])[-1]) if ties else 0.0
        i, j = np.divmod(np.arange(N * N), N)
        ref = family_of(ties).probabilities(s_H[i] - s_H[j], log_nu_h)
        np.testing.assert_allclose(v["win_prob"].reshape(-1), ref[:, 0], rtol=1e-12, atol=1e-15)
        W = v["win_prob"]
        np.testing.assert_allclose(W + W.T, 1 - ref[:, 2].reshape(N, N), rtol=1e-12)


@pytest.mark.parametrize("ties,dim", [(None, 1), (None, 2), ("davidson", 2), ("rao-kupper", 1)])
def test_dial_calibrate_log_prob_equals_numpy_cells(models, ties, dim):
    """dial_calibrate.stan: sum over draws t of the human cells' log pmf at s_t = M_t c_t (nu_t per draw)."""
    m = models["dial_calibrate"]
    data = with_ties(simulate(N=6, K=3, rank=1, n_llm=300, n_human=150, seed=17).frame, 0.2 if ties else 0.0)
    H = data.cell_table("human", with_ties=ties is not None)
    rng = np.random.default_rng(5)
    T = 4
    M = rng.normal(size=(T, data.N, dim))
    d = dial_calibrate_data(H, M, family=family_of(ties), priors={"c_sd": 0, "log_nu_sd": 0})
    d["human_w"] = rng.uniform(0.5, 1.5, size=len(H))
    u = rng.normal(size=m.num_unconstrained(d))
    v = m.constrain(d, u, include_gqs=True)
    c = np.asarray(v["c"]).reshape(T, dim)
    ln = np.atleast_1d(v["log_nu"]) if ties else np.zeros(T)
    ll = np.stack([np_cell_loglik(H.counts, (M[t] @ c[t])[H.i] - (M[t] @ c[t])[H.j], ties, ln[t]) for t in range(T)])
    np.testing.assert_allclose(v["s_H"], np.einsum("tnd,td->tn", M, c), rtol=1e-12)
    np.testing.assert_allclose(v["log_lik"], ll, rtol=1e-10)
    assert m.log_prob(d, u) == pytest.approx(float((ll * d["human_w"]).sum()), rel=1e-10)
