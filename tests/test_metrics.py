"""Tests of pydial.studies.metrics against hand-written references (loops, closed forms, Monte Carlo)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from pydial.studies.metrics import contrast_coverage, excess_risk, first_order_risk, human_risk, kendall_tau, rmse
from pydial.studies.simulate import simulate


def risk_loop(s, s_h, w=None):
    """R_H by explicit loops over pairs, with math.log / math.exp."""
    N = len(s)
    tot, wsum = 0.0, 0.0
    t = 0
    for i in range(N):
        for j in range(i + 1, N):
            wij = 1.0 if w is None else w[t]
            t += 1
            d = s[i] - s[j]
            p = 1 / (1 + math.exp(-(s_h[i] - s_h[j])))
            tot += wij * (math.log1p(math.exp(d)) - p * d)
            wsum += wij
    return tot / wsum


def kl_loop(s, s_h):
    N = len(s)
    tot, m = 0.0, 0
    for i in range(N):
        for j in range(i + 1, N):
            p = 1 / (1 + math.exp(-(s_h[i] - s_h[j])))
            q = 1 / (1 + math.exp(-(s[i] - s[j])))
            tot += p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))
            m += 1
    return tot / m


@pytest.fixture
def scores():
    rng = np.random.default_rng(0)
    s_h = rng.normal(size=7)
    s_h -= s_h.mean()
    return s_h, s_h + rng.normal(scale=0.5, size=7)


# ----------------------------------------------------------------- risk
def test_human_risk_matches_loop(scores):
    s_h, s = scores
    assert human_risk(s, s_h) == pytest.approx(risk_loop(s, s_h), rel=1e-12)
    w = np.random.default_rng(1).random(21)
    w[[0, 5]] = 0.0
    assert human_risk(s, s_h, pair_weights=w) == pytest.approx(risk_loop(s, s_h, w), rel=1e-12)
    # Weights are normalized.
    assert human_risk(s, s_h, pair_weights=3 * w) == pytest.approx(human_risk(s, s_h, pair_weights=w), rel=1e-13)


def test_human_risk_is_minimized_at_truth(scores):
    s_h, _ = scores
    res = minimize(lambda x: human_risk(np.r_[0.0, x], s_h), np.zeros(6), method="BFGS", options={"gtol": 1e-10})
    fitted = np.r_[0.0, res.x]
    np.testing.assert_allclose(fitted - fitted.mean(), s_h - s_h.mean(), atol=1e-5)


def test_human_risk_stable_for_large_scores():
    s_h = np.array([0.0, 1.0, -1.0])
    s = np.array([800.0, 0.0, -800.0])
    r = human_risk(s, s_h)
    assert np.isfinite(r) and r > 0
    assert np.isfinite(excess_risk(s, s_h))


def test_excess_risk_zero_at_truth(scores):
    s_h, _ = scores
    assert excess_risk(s_h, s_h) == 0.0
    assert abs(excess_risk(s_h, s_h, method="difference")) < 1e-15


def test_excess_risk_nonnegative_and_equals_kl(scores):
    s_h, s = scores
    rng = np.random.default_rng(3)
    for _ in range(50):
        s = s_h + rng.normal(scale=rng.uniform(0.01, 3), size=s_h.size)
        e = excess_risk(s, s_h)
        assert e > 0
        assert e == pytest.approx(kl_loop(s, s_h), rel=1e-10)
        assert excess_risk(s, s_h, method="difference") == pytest.approx(e, rel=1e-9, abs=1e-15)


def test_excess_risk_tiny_differences_accurate(scores):
    """For s = s_h + t u, excess risk ~ (t^2 / 2) * mean p(1-p) (v^T u)^2 (Fisher form)."""
    s_h, _ = scores
    u = np.random.default_rng(4).normal(size=s_h.size)
    t = 1e-5
    i, j = np.triu_indices(s_h.size, 1)
    p = 1 / (1 + np.exp(-(s_h[i] - s_h[j])))
    ref = 0.5 * t**2 * np.mean(p * (1 - p) * (u[i] - u[j]) ** 2)
    assert excess_risk(s_h + t * u, s_h) == pytest.approx(ref, rel=1e-4)


def test_excess_risk_monte_carlo(scores):
    """Direct simulation of E[h_t(s) - h_t(s_h)] under uniform pair sampling."""
    s_h, s = scores
    rng = np.random.default_rng(5)
    n = 400_000
    N = s_h.size
    i, j = np.triu_indices(N, 1)
    pick = rng.integers(0, i.size, n)
    I, J = i[pick], j[pick]
    z = rng.random(n) < 1 / (1 + np.exp(-(s_h[I] - s_h[J])))

    def h(x):
        d = x[I] - x[J]
        return np.logaddexp(0, d) - z * d

    diff = h(s) - h(s_h)
    se = diff.std() / np.sqrt(n)
    assert abs(diff.mean() - excess_risk(s, s_h)) < 4 * se


def test_excess_risk_shift_invariant_and_batched(scores):
    s_h, s = scores
    e = excess_risk(s, s_h)
    assert excess_risk(s + 3.7, s_h) == pytest.approx(e, rel=1e-10)
    assert excess_risk(s, s_h - 2.0) == pytest.approx(e, rel=1e-10)
    batch = np.vstack([s, s_h, s + 1])
    np.testing.assert_allclose(excess_risk(batch, s_h), [e, 0.0, e], rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(human_risk(batch, s_h), [human_risk(x, s_h) for x in batch], rtol=1e-13)


def test_excess_risk_weights(scores):
    s_h, s = scores
    w = np.zeros(21)
    w[0] = 1.0  # only pair (0, 1)
    p = 1 / (1 + np.exp(-(s_h[0] - s_h[1])))
    q = 1 / (1 + np.exp(-(s[0] - s[1])))
    ref = p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))
    assert excess_risk(s, s_h, pair_weights=w) == pytest.approx(ref, rel=1e-10)
    # A shift of only the irrelevant items costs nothing.
    s2 = s_h.copy()
    s2[2:] += 1.0
    assert excess_risk(s2, s_h, pair_weights=w) == 0.0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(pair_weights=np.ones(3)), r"shape \(21,\)"),
        (dict(pair_weights=-np.ones(21)), "nonnegative"),
        (dict(method="mc"), r"method.*'mc'"),
    ],
)
def test_excess_risk_validation(scores, kwargs, match):
    s_h, s = scores
    with pytest.raises(ValueError, match=match):
        excess_risk(s, s_h, **kwargs)


def test_risk_shape_mismatch():
    with pytest.raises(ValueError, match="items"):
        human_risk(np.zeros(3), np.zeros(4))


# ----------------------------------------------------------------- tau, rmse
def test_kendall_tau_hand_examples():
    # 6 pairs, 5 concordant, 1 discordant.
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # tau-b with one tie in x: C = 5, D = 0, n0 = 6, n1 = 1, n2 = 0.
    assert kendall_tau([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(5 / math.sqrt(5 * 6))
    assert kendall_tau([3, 2, 1], [1, 2, 3]) == pytest.approx(-1.0)
    assert kendall_tau(np.arange(5) + 10, np.arange(5)) == pytest.approx(1.0)


def test_rmse():
    assert rmse([1.0, 2.0], [0.0, 0.0]) == pytest.approx(math.sqrt(2.5))
    assert rmse([0.3, -0.2, 0.05], [0.3, -0.2, 0.05]) == 0.0
    with pytest.raises(ValueError):
        rmse([1.0], [1.0, 2.0])


# ----------------------------------------------------------------- coverage
@pytest.mark.parametrize("level", [0.95, 0.8])
def test_contrast_coverage_near_nominal(level):
    rng = np.random.default_rng(6)
    N, reps = 6, 4000
    A = rng.normal(size=(N, N))
    C = np.eye(N) - 1.0 / N  # centered covariance (singular, as for centered scores)
    cov = 0.04 * C @ (A @ A.T + np.eye(N)) @ C
    L = np.linalg.cholesky(cov + 1e-14 * np.eye(N))
    s_true = rng.normal(size=N)
    cover = [contrast_coverage(s_true + L @ rng.normal(size=N), cov, s_true, level=level) for _ in range(reps)]
    assert abs(np.mean(cover) - level) < 0.015


def test_contrast_coverage_hand_cases():
    s = np.array([0.0, 1.0, 3.0])
    cov = np.diag([0.01, 0.01, 0.01])  # contrast sd = sqrt(0.02) = 0.1414
    assert contrast_coverage(s, cov, s) == 1.0
    assert contrast_coverage(s + 5.0, cov, s) == 1.0  # shift invariant
    # Half-width 1.96 * 0.1414 = 0.277: moving item 2 by 0.25 keeps contrasts (0,2), (1,2)
    # covered, by 0.30 uncovers them; contrast (0,1) stays covered.
    t = s.copy()
    t[2] += 0.25
    assert contrast_coverage(s, cov, t) == 1.0
    t[2] = s[2] + 0.30
    assert contrast_coverage(s, cov, t) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="level"):
        contrast_coverage(s, cov, s, level=1.0)
    with pytest.raises(ValueError, match="semidefinite"):
        contrast_coverage(s, -cov, s)


# ----------------------------------------------------------------- benchmark
def test_first_order_risk():
    assert first_order_risk(800, 9) == pytest.approx(9 / 1600)
    np.testing.assert_allclose(first_order_risk(np.array([100, 200]), 1), [0.005, 0.0025])
    with pytest.raises(ValueError, match="n_human"):
        first_order_risk(0, 1)
    with pytest.raises(ValueError, match="dim"):
        first_order_risk(10, -1)


def _human_mle(i, j, z, N):
    """Plain BTL MLE by Newton (item 0 fixed at 0), independent of pydial's fitters."""
    x = np.zeros(N)
    D = np.zeros((i.size, N))
    D[np.arange(i.size), i] = 1
    D[np.arange(i.size), j] = -1
    D = D[:, 1:]
    th = np.zeros(N - 1)
    for _ in range(50):
        q = 1 / (1 + np.exp(-(D @ th)))
        g = D.T @ (z - q)
        H = D.T @ (D * (q * (1 - q))[:, None])
        step = np.linalg.solve(H, g)
        th += step
        if np.max(np.abs(step)) < 1e-12:
            break
    x[1:] = th
    return x - x.mean()


def test_human_mle_excess_risk_tracks_first_order_benchmark():
    """Thm. population-risk-tradeoff: n_H E[excess risk of Human] -> (N-1)/2."""
    N, n_h, reps = 5, 2000, 200
    vals = []
    for rep in range(reps):
        sim = simulate(N, 2, 1, n_llm=0, n_human=n_h, seed=1000 + rep)
        f = sim.frame
        i = f["item_a"].str[4:].astype(int).to_numpy()
        j = f["item_b"].str[4:].astype(int).to_numpy()
        z = (f["winner"] == "a").to_numpy(float)
        vals.append(excess_risk(_human_mle(i, j, z, N), sim.truth.s_h))
    ratio = np.mean(vals) / first_order_risk(n_h, N - 1)
    assert 0.8 < ratio < 1.2, ratio
