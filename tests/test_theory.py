"""Monte Carlo checks of the paper's theory.

* Thm. population-risk-tradeoff: the first-order expected excess human risk is
  ``(N-1)/(2 n_H)`` for the human-only BTL and ``d/(2 n_H)`` for the anchored
  estimator with a known calibration basis ``M`` (``d = 1`` for ``mu``,
  ``d = r + 1`` for ``W``).  Human comparisons are drawn here, independently of
  :mod:`pydial.simulate`, exactly as in the theorem's sampling scheme (pairs
  uniform, outcome Bernoulli given the pair) around one fixed truth.
* Sandwich coverage: DIAL-Anc cell-clustered 95% contrast intervals cover at
  about the nominal rate (paper: 0.93-0.96 in App. simulation).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

import pydial
from pydial.studies import metrics
from pydial.data.comparisons import HumanCells
from pydial.estimation.glm import fit_calibration, fit_human_btl

N_H = 2000
REPS = 1200


@pytest.fixture(scope="module")
def risk_replications():
    truth = pydial.simulate(N=10, K=4, rank=1, n_llm=0, n_human=0, seed=42).truth
    N = truth.N
    i, j = np.triu_indices(N, 1)
    p = expit(truth.s_h[i] - truth.s_h[j])
    rng = np.random.default_rng(20240601)
    out = {"human": [], "mu": [], "W": []}
    converged = True
    for _ in range(REPS):
        n = rng.multinomial(N_H, np.full(i.size, 1.0 / i.size))
        y = rng.binomial(n, p)
        m = n > 0
        hc = HumanCells(i[m], j[m], n[m].astype(float), y[m].astype(float))
        f = fit_human_btl(hc, N)
        converged &= f.opt.converged
        out["human"].append(metrics.excess_risk(f.s, truth.s_h))
        for name, M in (("mu", truth.mu[:, None]), ("W", truth.W)):
            o = fit_calibration(hc, M)
            converged &= o.converged
            out[name].append(metrics.excess_risk(M @ o.x, truth.s_h))
    return truth, {k: np.asarray(v) for k, v in out.items()}, converged


def check_first_order(er, dim, tol=0.20):
    bench = metrics.first_order_risk(N_H, dim)
    mean = er.mean()
    mcse = er.std(ddof=1) / np.sqrt(er.size)
    ratio = mean / bench
    msg = (f"mean excess risk {mean:.3e} (MC SE {mcse:.1e}) vs first-order {bench:.3e} = dim/(2 n_H), dim={dim}: "
           f"ratio {ratio:.3f} +- {mcse / bench:.3f}")
    assert abs(ratio - 1.0) < tol, msg
    return ratio


def test_fits_converged(risk_replications):
    _, _, converged = risk_replications
    assert converged


def test_human_excess_risk_first_order(risk_replications):
    truth, er, _ = risk_replications
    check_first_order(er["human"], truth.N - 1)


def test_known_mu_anchored_excess_risk_first_order(risk_replications):
    _, er, _ = risk_replications
    check_first_order(er["mu"], 1)


def test_known_W_anchored_excess_risk_first_order(risk_replications):
    truth, er, _ = risk_replications
    check_first_order(er["W"], truth.r + 1)


def test_excess_risk_scaled_distribution_is_half_chi_square(risk_replications):
    """First-order: 2 n_H * excess risk ~ chi^2_dim, so its variance is about 2 dim as well."""
    truth, er, _ = risk_replications
    for name, dim in (("human", truth.N - 1), ("mu", 1), ("W", truth.r + 1)):
        x = 2 * N_H * er[name]
        assert x.var(ddof=1) == pytest.approx(2 * dim, rel=0.3), name
    # anchoring on the true consensus beats the human-only estimator in almost every replication
    assert np.mean(er["mu"] < er["human"]) > 0.95


def test_human_risk_decreases_like_one_over_n():
    """Doubling n_H roughly halves the human-only excess risk (same truth, independent draws)."""
    truth = pydial.simulate(N=6, K=2, rank=1, n_llm=0, n_human=0, seed=7).truth
    i, j = np.triu_indices(truth.N, 1)
    p = expit(truth.s_h[i] - truth.s_h[j])
    rng = np.random.default_rng(3)
    means = []
    for nh in (500, 2000):
        er = []
        for _ in range(400):
            n = rng.multinomial(nh, np.full(i.size, 1.0 / i.size))
            y = rng.binomial(n, p)
            m = n > 0
            f = fit_human_btl(HumanCells(i[m], j[m], n[m].astype(float), y[m].astype(float)), truth.N)
            er.append(metrics.excess_risk(f.s, truth.s_h))
        means.append(np.mean(er) * nh)
    # n_H * E[excess risk] -> (N-1)/2 = 2.5 at both sizes
    np.testing.assert_allclose(means, 2.5, rtol=0.2)


# --------------------------------------------------------------- coverage
@pytest.mark.slow
def test_dial_anc_cell_clustered_contrast_coverage():
    """About 95% coverage of the pairwise contrasts of s_H (paper: 0.93-0.96)."""
    R, nh = 100, 400
    cover, er, unconverged = [], [], 0
    for rep in range(R):
        sim = pydial.simulate(N=10, K=4, rank=1, n_llm=20_000, n_human=nh, seed=5000 + rep)
        res = pydial.fit(sim.comparisons, "dial-anc", cov_type="cell", check=False)
        unconverged += not res.converged
        s = res.scores["score"].to_numpy()
        cover.append(metrics.contrast_coverage(s, res.cov.to_numpy(), sim.truth.s_h, level=0.95))
        er.append(metrics.excess_risk(s, sim.truth.s_h))
    cover = np.asarray(cover)
    mean, mcse = cover.mean(), cover.std(ddof=1) / np.sqrt(R)
    assert unconverged == 0
    assert 0.90 <= mean <= 0.98, f"coverage {mean:.3f} (MC SE {mcse:.3f}) over {R} replications"
    # staged-oracle equivalence (n_H / n_LLM small): DIAL-Anc risk near 1/(2 n_H)
    ratio = np.mean(er) / metrics.first_order_risk(nh, 1)
    se = np.std(er, ddof=1) / np.sqrt(R) / metrics.first_order_risk(nh, 1)
    assert 0.6 < ratio < 1.5, f"DIAL-Anc excess risk / (1/(2 n_H)) = {ratio:.2f} +- {se:.2f}"
