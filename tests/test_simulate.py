"""Tests of pydial.simulate against the DGP of the paper's App. "Simulation Studies".

References are computed here from the true parameters with independent code
(explicit formulas, chi-square tests on the aggregated cells), not by calling the
simulator's own helpers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pydial.studies.simulate import TARGETS, Simulation, Truth, pair_index, simulate


def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def chi2_pvalue(y, n, p):
    """Pearson chi-square of binomial counts against known probabilities."""
    stat = np.sum((y - n * p) ** 2 / (n * p * (1 - p)))
    return stats.chi2.sf(stat, df=y.size), stat


# ----------------------------------------------------------------- structure
@pytest.mark.parametrize(
    "N,K,r,target",
    [(10, 4, 1, "consensus"), (20, 6, 2, "consensus"), (10, 4, 1, "misaligned"), (20, 6, 2, "misaligned"),
     (5, 2, 1, "consensus"), (4, 5, 2, "misaligned"), (6, 3, 0, "consensus"), (3, 1, 0, "misaligned")],
)
@pytest.mark.parametrize("seed", [0, 7])
def test_truth_satisfies_llm_structure(N, K, r, target, seed):
    t = simulate(N, K, r, n_llm=0, n_human=0, target=target, seed=seed).truth
    one_n, one_k = np.ones(N), np.ones(K)
    tol = 1e-10
    assert t.mu.shape == (N,) and t.V.shape == (N, r) and t.U.shape == (K, r) and t.gamma.shape == (K,)
    assert abs(one_n @ t.mu) < tol
    np.testing.assert_allclose(t.V.T @ one_n, 0, atol=tol)
    np.testing.assert_allclose(t.mu @ t.V, 0, atol=tol)
    assert t.mu @ t.mu == pytest.approx(N, rel=1e-12)
    np.testing.assert_allclose(t.V.T @ t.V / N, np.eye(r), atol=tol)
    assert t.gamma.sum() == pytest.approx(K, rel=1e-12)
    np.testing.assert_allclose(one_k @ t.U, 0, atol=tol)
    if r > 0:
        assert np.linalg.matrix_rank(t.U) == r
    np.testing.assert_allclose(t.S, np.outer(t.gamma, t.mu) + t.U @ t.V.T, atol=1e-12)
    np.testing.assert_allclose(t.S @ one_n, 0, atol=tol)
    np.testing.assert_allclose(t.W, np.column_stack([t.mu, t.V]), atol=0)
    np.testing.assert_allclose(t.W.T @ t.W / N, np.eye(r + 1), atol=tol)
    # Position effects: last judge fixed, others beta * xi with beta in [0.3, 1.2].
    assert t.b[-1] == 0.05
    assert np.all((np.abs(t.b[:-1]) >= 0.3) & (np.abs(t.b[:-1]) <= 1.2))
    # Human target.
    assert abs(t.s_h.sum()) < tol
    if target == "consensus":
        np.testing.assert_array_equal(t.c_h, [1.0])
        np.testing.assert_allclose(t.s_h, t.mu, atol=0)
    else:
        assert t.c_h.shape == (r + 1,) and t.c_h[0] == 1.0
        np.testing.assert_allclose(t.s_h, t.W @ t.c_h, atol=1e-12)
    np.testing.assert_allclose(t.M @ t.c_h, t.s_h, atol=1e-12)
    np.testing.assert_array_equal(t.pairs, np.column_stack(np.triu_indices(N, 1)))
    assert t.b_kij is None and t.eps_kij is None


def test_gamma_loadings_and_sign_distribution():
    """gamma_k = 1 + 0.3 z_k (rescaled); Pr(xi_k = +1) = 0.8 over many draws."""
    K, reps = 10, 400
    b = np.array([simulate(6, K, 1, n_llm=0, n_human=0, seed=s).truth.b[:-1] for s in range(reps)])
    g = np.array([simulate(6, K, 1, n_llm=0, n_human=0, seed=s).truth.gamma for s in range(50)])
    frac_pos = np.mean(b > 0)
    se = np.sqrt(0.8 * 0.2 / b.size)
    assert abs(frac_pos - 0.8) < 4 * se
    # |b| ~ U(0.3, 1.2): KS test.
    assert stats.kstest(np.abs(b).ravel(), stats.uniform(0.3, 0.9).cdf).pvalue > 1e-3
    # Spread of gamma about 1: sd close to 0.3 (rescaling changes it only slightly).
    assert 0.22 < g.std() < 0.38


def test_misaligned_c_v_distribution():
    c = np.array([simulate(10, 4, 1, n_llm=0, n_human=0, target="misaligned", c_v_sd=0.5, seed=s).truth.c_h[1]
                  for s in range(400)])
    assert stats.kstest(c, stats.norm(0, 0.5).cdf).pvalue > 1e-3


# ----------------------------------------------------------------- data format
def test_frame_format_and_loading():
    N, K = 7, 3
    sim = simulate(N, K, 1, n_llm=3000, n_human=500, seed=3)
    f = sim.frame
    assert isinstance(sim, Simulation) and isinstance(sim.truth, Truth)
    assert list(f.columns) == ["record_id", "judge", "item_a", "item_b", "first", "winner"]
    assert len(f) == 3500
    np.testing.assert_array_equal(f["record_id"].to_numpy(), np.arange(3500))
    assert set(f["first"]) <= {"a", "b"} and set(f["winner"]) <= {"a", "b"}
    items = [f"item{t:02d}" for t in range(N)]
    ia = f["item_a"].map({n: t for t, n in enumerate(items)})
    ib = f["item_b"].map({n: t for t, n in enumerate(items)})
    assert ia.notna().all() and ib.notna().all() and (ia < ib).all()
    hum = f["judge"] == "human"
    assert hum.sum() == 500 and (f.loc[hum, "first"] == "a").all()
    assert set(f.loc[~hum, "judge"]) == {f"judge{k}" for k in range(K)}
    assert f.loc[~hum].index.max() < f.loc[hum].index.min()  # LLM rows first
    c = sim.comparisons
    assert c is sim.comparisons  # cached
    assert c.items == tuple(items) and c.judges == tuple(f"judge{k}" for k in range(K))
    assert c.n_llm == 3000 and c.n_human == 500
    # Winner / order coding survive the round trip: a = +1 iff first == "a".
    llm = f.loc[~hum]
    assert int(c.llm.n[c.llm.a > 0].sum()) == int((llm["first"] == "a").sum())
    assert int(c.llm.y.sum()) == int((llm["winner"] == "a").sum())
    assert int(c.human.y.sum()) == int((f.loc[hum, "winner"] == "a").sum())


def test_uniform_pair_and_judge_sampling_and_first_fraction():
    N, K, n = 6, 3, 150_000
    sim = simulate(N, K, 1, n_llm=n, n_human=60_000, seed=11, behavior=dict(p_first=0.75))
    f = sim.frame
    llm = f[f["judge"] != "human"]
    hum = f[f["judge"] == "human"]
    P = N * (N - 1) // 2
    for part in (llm, hum):
        counts = part.groupby(["item_a", "item_b"]).size().to_numpy()
        assert counts.size == P
        assert stats.chisquare(counts).pvalue > 1e-4
    assert stats.chisquare(llm["judge"].value_counts().to_numpy()).pvalue > 1e-4
    frac = np.mean(llm["first"] == "a")
    assert abs(frac - 0.75) < 4 * np.sqrt(0.75 * 0.25 / n)


@pytest.mark.parametrize("p_first,expected", [(1.0, {"a"}), (0.0, {"b"})])
def test_p_first_extremes(p_first, expected):
    f = simulate(5, 2, 1, n_llm=500, n_human=0, seed=0, behavior=dict(p_first=p_first)).frame
    assert set(f["first"]) == expected


# ----------------------------------------------------------------- outcome model
def _llm_cell_test(sim, *, with_eps=True, with_bkij=True):
    """Chi-square of the Comparisons LLM cells against sigma(S_ki - S_kj + a b (+ eps))."""
    t, c = sim.truth, sim.comparisons
    L = c.llm
    N = t.N
    pidx = L.i * (2 * N - L.i - 1) // 2 + (L.j - L.i - 1)  # independent pair index
    # Check the pair index against an explicit enumeration of triu pairs.
    lookup = {(int(i), int(j)): p for p, (i, j) in enumerate(zip(*np.triu_indices(N, 1)))}
    assert all(lookup[(int(i), int(j))] == p for i, j, p in zip(L.i, L.j, pidx))
    b = t.b[L.judge] if (t.b_kij is None or not with_bkij) else t.b_kij[L.judge, pidx]
    eta = t.S[L.judge, L.i] - t.S[L.judge, L.j] + L.a * b
    if with_eps and t.eps_kij is not None:
        eta = eta + t.eps_kij[L.judge, pidx]
    p = sig(eta)
    return chi2_pvalue(L.y, L.n, p), (L, p)


def test_llm_cell_win_rates_match_model():
    sim = simulate(5, 2, 1, n_llm=400_000, n_human=0, seed=2024)
    (pval, stat), (L, p) = _llm_cell_test(sim)
    assert len(L) == 2 * 10 * 2  # every (judge, pair, order) cell observed
    assert pval > 1e-4, stat
    z = (L.y - L.n * p) / np.sqrt(L.n * p * (1 - p))
    assert np.max(np.abs(z)) < 5
    # The order effect is present: dropping it is rejected.
    p0 = sig(sim.truth.S[L.judge, L.i] - sim.truth.S[L.judge, L.j])
    assert chi2_pvalue(L.y, L.n, p0)[0] < 1e-10


def test_llm_eta_matches_independent_formula():
    sim = simulate(6, 3, 1, n_llm=0, n_human=0, seed=5, behavior=dict(overdispersion=0.7, sigma_pos=0.4))
    t = sim.truth
    for k in range(3):
        for p, (i, j) in enumerate(t.pairs):
            for a in (-1, 1):
                ref = t.S[k, i] - t.S[k, j] + a * t.b_kij[k, p] + t.eps_kij[k, p]
                assert t.llm_eta(k, i, j, a) == pytest.approx(ref, abs=1e-12)
    assert pair_index(t.pairs[:, 0], t.pairs[:, 1], 6).tolist() == list(range(15))
    with pytest.raises(ValueError):
        pair_index(3, 2, 6)


def test_human_win_rates_match_model():
    for target in TARGETS:
        sim = simulate(5, 2, 1, n_llm=0, n_human=200_000, target=target, c_v_sd=1.0, seed=99)
        H = sim.comparisons.human
        p = sig(sim.truth.s_h[H.i] - sim.truth.s_h[H.j])
        pval, stat = chi2_pvalue(H.y, H.n, p)
        assert len(H) == 10 and pval > 1e-4, (target, stat)


def test_misaligned_human_target_differs_from_mu():
    t = simulate(10, 4, 1, n_llm=0, n_human=0, target="misaligned", c_v_sd=0.5, seed=1).truth
    np.testing.assert_allclose(t.s_h, t.mu + t.V[:, 0] * t.c_h[1], atol=1e-12)
    assert t.c_h[1] != 0


def _dispersion(sim):
    """Pearson dispersion of LLM cells against the model WITHOUT the eps effects."""
    (_, stat), (L, _) = _llm_cell_test(sim, with_eps=False)
    return stat / len(L)


def test_overdispersion_inflates_between_cell_variance():
    kw = dict(N=10, K=4, rank=1, n_llm=200_000, n_human=0, seed=8)
    d0 = _dispersion(simulate(**kw, behavior=dict(overdispersion=0.0)))
    d1 = _dispersion(simulate(**kw, behavior=dict(overdispersion=1.0)))
    assert 0.75 < d0 < 1.3
    assert d1 > 10  # n per cell ~ 280, so a unit logit effect gives a huge excess
    # The eps effects themselves: once per judge-pair, N(0, 1).
    sim = simulate(**kw, behavior=dict(overdispersion=1.0))
    eps = sim.truth.eps_kij
    assert eps.shape == (4, 45)
    assert stats.kstest(eps.ravel(), "norm").pvalue > 1e-3
    # Conditional on eps, the cells are binomial again (shared by both orders).
    (pval, stat), _ = _llm_cell_test(sim, with_eps=True)
    assert pval > 1e-4, stat


def test_overdispersion_scales_with_level():
    base = simulate(6, 2, 1, n_llm=0, n_human=0, seed=4, behavior=dict(overdispersion=1.0)).truth.eps_kij
    half = simulate(6, 2, 1, n_llm=0, n_human=0, seed=4, behavior=dict(overdispersion=0.5)).truth.eps_kij
    np.testing.assert_allclose(half, 0.5 * base)


@pytest.mark.parametrize("sigma_pos", [0.25, 1.0])
def test_pair_varying_position_effects(sigma_pos):
    sim = simulate(10, 4, 1, n_llm=200_000, n_human=0, seed=12, behavior=dict(sigma_pos=sigma_pos))
    t = sim.truth
    assert t.b_kij.shape == (4, 45)
    np.testing.assert_allclose(t.b_kij.mean(axis=1), t.b, atol=1e-12)
    np.testing.assert_allclose(t.b_kij.std(axis=1, ddof=0), sigma_pos, rtol=1e-12)
    (pval, stat), _ = _llm_cell_test(sim)
    assert pval > 1e-4, stat
    # The constant-b working model is clearly wrong for sigma_pos = 1.
    if sigma_pos == 1.0:
        (pval0, _), _ = _llm_cell_test(sim, with_bkij=False)
        assert pval0 < 1e-10


# ----------------------------------------------------------------- randomness
def test_reproducible_with_seed_and_generator():
    kw = dict(N=8, K=3, rank=2, n_llm=5000, n_human=300, behavior=dict(overdispersion=0.5, sigma_pos=0.3), target="misaligned")
    a, b = simulate(**kw, seed=42), simulate(**kw, seed=42)
    pd.testing.assert_frame_equal(a.frame, b.frame)
    for name in ("s_h", "S", "b", "mu", "gamma", "U", "V", "W", "c_h", "b_kij", "eps_kij", "pairs"):
        np.testing.assert_array_equal(getattr(a.truth, name), getattr(b.truth, name))
    g1, g2 = np.random.default_rng(42), np.random.default_rng(42)
    pd.testing.assert_frame_equal(simulate(**kw, seed=g1).frame, simulate(**kw, seed=g2).frame)
    c = simulate(**kw, seed=43)
    assert not np.allclose(a.truth.mu, c.truth.mu)
    assert not a.frame.equals(c.frame)
    # A generator is advanced: two calls in a row differ.
    g = np.random.default_rng(0)
    assert not simulate(**kw, seed=g).frame.equals(simulate(**kw, seed=g).frame)


def test_truth_does_not_depend_on_budgets():
    """Common random numbers: the parameters and human data are fixed per seed."""
    a = simulate(10, 4, 1, n_llm=400, n_human=800, seed=5)
    b = simulate(10, 4, 1, n_llm=12_800, n_human=800, seed=5, behavior=dict(overdispersion=1.0))
    np.testing.assert_array_equal(a.truth.S, b.truth.S)
    np.testing.assert_array_equal(a.truth.b, b.truth.b)
    ha = a.frame[a.frame["judge"] == "human"].drop(columns="record_id").reset_index(drop=True)
    hb = b.frame[b.frame["judge"] == "human"].drop(columns="record_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(ha, hb)


def test_global_numpy_state_untouched():
    np.random.seed(0)
    x = np.random.random()
    np.random.seed(0)
    simulate(5, 2, 1, n_llm=100, n_human=10)
    assert np.random.random() == x


# ----------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(K=2, rank=2), r"rank \(2\).*K-1 = 1"),
        (dict(N=3, K=4, rank=2), r"rank \(2\).*N-1 = 2"),
        (dict(n_llm=-1), r"n_llm.*-1"),
        (dict(n_human=-5), r"n_human.*-5"),
        (dict(n_llm=10.5), r"n_llm.*10.5"),
        (dict(target="human"), r"target.*'human'"),
        (dict(behavior=dict(overdispersion=-0.1)), r"overdispersion.*-0.1"),
        (dict(behavior=dict(sigma_pos=float("nan"))), r"sigma_pos.*nan"),
        (dict(behavior=dict(p_first=1.5)), r"p_first.*1.5"),
        (dict(behavior=dict(overdispersio=1.0)), r"unknown key\(s\) \['overdispersio'\]; the keys are \['p_first'"),
        (dict(c_v_sd=-1), r"c_v_sd.*-1"),
        (dict(N=1, rank=0), r"N.*1"),
        (dict(K=0, rank=0), r"K.*0"),
        (dict(rank=-1), r"rank.*-1"),
        (dict(N=2, K=2, rank=0, behavior=dict(sigma_pos=0.5)), r"sigma_pos \(0.5\)"),
    ],
)
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate(**{"n_llm": 10, "n_human": 10, **kwargs})

