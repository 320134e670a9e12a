"""pydial.fit(..., "dial-anc" | "dial-ada" | "dial-nopos", ties=...): the structured DIAL fits with ties.

References: the binary fits (data without ties, where nu = 0 is the MLE of both
tie models), the simulation truth (recovery within 4 standard errors), a direct
scipy maximization of the calibration tie likelihood, and Davidson's (1970)
chocolate-pudding example (Example 2 of the paper).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp

from pydial.model.families import family_of
import pydial
from pydial.model.likelihood import tie_totals


@pytest.fixture(scope="module")
def plain():
    return pydial.simulate(N=7, K=3, rank=1, n_llm=4000, n_human=500, seed=8).comparisons


@pytest.mark.parametrize("method", ["dial-anc", "dial-ada", "dial-nopos"])
@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
def test_without_ties_the_tie_fit_is_the_binary_fit(plain, method, ties):
    """No ties observed: nu = 0 is the MLE (the tie log-likelihood decreases in nu when t = 0),
    at which both tie models are the binary model; the fits are then the binary fits."""
    binary = pydial.fit(plain, method, cov_type="binomial")
    tied = pydial.fit(plain, method, ties=ties, cov_type="binomial")
    assert tied.status == "ok"
    np.testing.assert_allclose(tied.scores["score"], binary.scores["score"], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(tied.scores["se"], binary.scores["se"], rtol=1e-6)
    assert tied.lambda_ == binary.lambda_
    if binary.gacv is not None:
        np.testing.assert_allclose(tied.gacv["gacv"], binary.gacv["gacv"], rtol=1e-7)
    assert tied.calibration_test.statistic == pytest.approx(binary.calibration_test.statistic, rel=1e-6, abs=1e-9)
    if binary.position_effects is not None:
        np.testing.assert_allclose(tied.position_effects["b"], binary.position_effects["b"], atol=1e-8)
        np.testing.assert_allclose(tied.position_effects["se"], binary.position_effects["se"], rtol=1e-6)
    assert (tied.tie_parameters[family_of(ties).label] == 0).all() and tied.tie_parameters["se"].isna().all()
    assert list(tied.tie_parameters.index) == list(plain.judges) + [plain.human_judge]


def zscores(est, se, truth):
    return np.abs((np.asarray(est) - truth) / np.asarray(se))


@pytest.fixture(scope="module")
def sim_ties():
    return pydial.simulate(N=8, K=4, rank=1, n_llm=16000, n_human=1500, tie_rate=0.2, ties="davidson", seed=19)


@pytest.mark.parametrize("method", ["dial-anc", "dial-ada"])
def test_recovers_nu_b_and_human_scores(sim_ties, method):
    data, truth = sim_ties.comparisons, sim_ties.truth
    res = pydial.fit(data, method, ties="davidson", cov_type="cell")
    assert res.status == "ok", res.problems
    tp = res.tie_parameters
    assert zscores(tp["nu"], tp["se"], truth.nu).max() < 4
    pe = res.position_effects
    assert zscores(pe["b"], pe["se"], truth.b).max() < 4
    sc = res.scores
    assert zscores(sc["score"], sc["se"], truth.s_h).max() < 4
    # the interval of nu is on the log scale and covers the estimate
    assert (tp["ci_low"] < tp["nu"]).all() and (tp["nu"] < tp["ci_high"]).all()


def test_rao_kupper_recovery_and_all_meats():
    sim = pydial.simulate(N=6, K=3, rank=1, n_llm=9000, n_human=1200, tie_rate=0.25, ties="rao-kupper", seed=23)
    data, truth = sim.comparisons, sim.truth
    ses = {}
    for cov in ("fisher", "binomial", "cell", "record"):
        res = pydial.fit(data, "dial-anc", ties="rao-kupper", cov_type=cov)
        assert res.status == "ok", res.problems
        assert np.all(np.isfinite(res.scores["se"]))
        ses[cov] = res.scores["se"].to_numpy()
    tp = res.tie_parameters
    assert zscores(tp["tau"], tp["se"], truth.nu).max() < 4
    assert zscores(res.scores["score"], res.scores["se"], truth.s_h).max() < 4
    # with a correct model and independent comparisons all meats estimate the same covariance
    for cov in ("binomial", "cell", "record"):
        np.testing.assert_allclose(ses[cov], ses["fisher"], rtol=0.25)


def test_anchored_calibration_matches_scipy(sim_ties):
    """Stage two of DIAL-Anc with ties: (c, log nu_H) maximize the Davidson likelihood of s = c mu."""
    data = sim_ties.comparisons
    res = pydial.fit(data, "dial-anc", ties="davidson")
    mu = res.structure.mu
    t = data.tie_cells(human=True)
    t = t[t.k == data.K]
    i, j, wi, wj, tt = (t[c].to_numpy() for c in ("i", "j", "wins_i", "wins_j", "ties"))

    def nll(z):
        x = 0.5 * z[0] * (mu[i] - mu[j])
        L = np.stack([x, -x, np.full_like(x, z[1])], 1)
        lse = logsumexp(L, axis=1)
        return -np.sum(wi * (x - lse) + wj * (-x - lse) + tt * (z[1] - lse))

    opt = minimize(nll, np.array([1.0, -1.0]), method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(res.scores["score"].to_numpy(), opt.x[0] * mu, atol=1e-6)
    assert res.tie_parameters.loc[data.human_judge, "nu"] == pytest.approx(np.exp(opt.x[1]), rel=1e-6)
    # the LRT statistic is 2 n_H times the difference of the normalized losses of the two endpoints
    ct = res.calibration_test
    assert ct.defined and ct.df == data.N - 2


def test_gacv_path_and_lrt_with_ties(sim_ties):
    data = sim_ties.comparisons
    res = pydial.fit(data, "dial-ada", ties="davidson")
    g = res.gacv
    assert np.isinf(g["lambda"].iloc[-1]) and g["lambda"].iloc[0] == 0
    assert g["admissible"].all()
    sel = g.loc[g["gacv"].idxmin(), "lambda"]
    assert res.lambda_ == sel
    n_l, n_h = tie_totals(data)
    assert n_h > data.n_human and n_l > data.n_llm  # the ties are used
    ct = res.calibration_test
    T = 2 * n_h * (g["l_H"].iloc[-1] - g["l_H"].iloc[0])
    assert ct.statistic == pytest.approx(max(T, 0.0), rel=1e-9)


# ------------------------------------------------------------------ Davidson (1970)
PUDDING = """1 2 57 19 22 16
1 3 47 16 19 12
2 3 48 19 19 10
1 4 54 18 23 13
2 4 51 23 19 9
3 4 54 19 20 15
1 5 50 13 19 18
2 5 48 16 20 12
3 5 48 16 15 17
4 5 47 17 14 16
1 6 51 18 21 12
2 6 54 22 20 12
3 6 41 13 18 10
4 6 51 14 19 18
5 6 44 11 21 12"""
"""Davidson (1970, JASA 65, 317-328), Example 2: six brands of chocolate pudding; per pair
``i j r_ij w_ij w_ji t_ij`` (comparisons, preferences for i, for j, no preference)."""

# Davidson's published estimates of the worths pi (sum 1) and of nu, as reproduced by the
# PlackettLuce vignette (which stops its iterations where they match the paper); and the
# standard errors of the centred log-worths and of log nu from the converged fit there.
PUDDING_PI = np.array([0.1388005, 0.1729985, 0.1617420, 0.1653930, 0.1586805, 0.2023855])
PUDDING_NU = 0.7468147
PUDDING_SE = np.array([0.121949, 0.121818, 0.126823, 0.122003, 0.127054, 0.126594])
PUDDING_SE_LOG_NU = 0.082499


def test_davidson_1970_pudding_example():
    recs = []
    for line in PUDDING.splitlines():
        i, j, _, wi, wj, t = map(int, line.split())
        recs.append(dict(judge="human", item_a=f"brand{i}", item_b=f"brand{j}", first="", wins_a=wi, wins_b=wj, ties=t))
    recs.append(dict(judge="llm", item_a="brand1", item_b="brand2", first="a", wins_a=1, wins_b=1, ties=0))
    data = pydial.Comparisons.from_counts(pd.DataFrame(recs))
    assert data.items == tuple(f"brand{k}" for k in range(1, 7))
    res = pydial.fit(data, "human", ties="davidson")
    s = res.scores["score"].to_numpy()
    pi = np.exp(s) / np.exp(s).sum()  # Davidson: P(i) : P(j) : P(tie) = pi_i : pi_j : nu sqrt(pi_i pi_j)
    np.testing.assert_allclose(pi, PUDDING_PI, atol=2e-4)  # the published values are 7 iterations from the MLE
    nu = res.tie_parameters.loc["human", "nu"]
    assert nu == pytest.approx(PUDDING_NU, abs=2e-4)
    np.testing.assert_allclose(res.scores["se"].to_numpy(), PUDDING_SE, rtol=2e-4)
    assert res.tie_parameters.loc["human", "se"] / nu == pytest.approx(PUDDING_SE_LOG_NU, rel=2e-4)


def test_small_replication_coverage_of_nu_and_scores():
    """Twenty replications of DIAL-Anc (Davidson): the 95% intervals of nu_H and of the human
    scores cover the truth at about the nominal rate, and the mean of nu_H is unbiased to
    Monte Carlo error."""
    cover_nu, cover_s, nu_hat = [], [], []
    for rep in range(20):
        sim = pydial.simulate(N=6, K=3, rank=1, n_llm=4000, n_human=600, tie_rate=0.2, ties="davidson", seed=100 + rep)
        res = pydial.fit(sim.comparisons, "dial-anc", ties="davidson", cov_type="cell")
        tp = res.tie_parameters.loc[sim.comparisons.human_judge]
        nu_true = sim.truth.nu[-1]
        cover_nu.append(tp["ci_low"] <= nu_true <= tp["ci_high"])
        nu_hat.append(tp["nu"])
        sc = res.scores
        cover_s.append(np.mean((sc["ci_low"] <= sim.truth.s_h) & (sim.truth.s_h <= sc["ci_high"])))
    assert np.mean(cover_nu) >= 0.8
    assert 0.85 <= np.mean(cover_s) <= 1.0
    nu_true = sim.truth.nu[-1]
    assert abs(np.mean(nu_hat) - nu_true) < 3 * np.std(nu_hat) / np.sqrt(len(nu_hat)) + 0.01


def test_rank_grid_with_ties(sim_ties):
    res = pydial.fit(sim_ties.comparisons, "dial-ada", ties="davidson", rank=[0, 1])
    assert set(res.gacv["rank"]) == {0, 1} and res.status == "ok"
    assert res.tie_parameters.shape[0] == sim_ties.comparisons.K + 1


def test_groups_without_ties_get_nu_zero_and_binary_cells(sim_ties):
    """People without ties (and one judge without ties): their nu is the boundary MLE 0, their
    cells are binary; the anchored calibration is then the binary logistic fit of s = c mu."""
    frame = sim_ties.comparisons.to_frame()
    judge0 = sim_ties.comparisons.judges[0]
    drop = (frame["winner"] == "tie") & frame["judge"].isin([sim_ties.comparisons.human_judge, judge0])
    data = pydial.Comparisons.from_frame(frame.loc[~drop])
    res = pydial.fit(data, "dial-anc", ties="davidson", cov_type="record")
    assert res.status == "ok", res.problems
    tp = res.tie_parameters
    assert tp.loc[data.human_judge, "nu"] == 0 and tp.loc[judge0, "nu"] == 0
    assert (tp.drop(index=[data.human_judge, judge0])["nu"] > 0).all()
    assert np.all(np.isfinite(res.scores["se"]))
    mu = res.structure.mu
    H = data.human
    x = mu[H.i] - mu[H.j]

    def nll(c):
        eta = c[0] * x
        return np.sum(H.n * np.logaddexp(0, eta) - H.y * eta)

    opt = minimize(nll, np.array([1.0]), method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(res.scores["score"].to_numpy(), opt.x[0] * mu, atol=1e-6)
    ada = pydial.fit(data, "dial-ada", ties="rao-kupper")
    assert ada.status == "ok" and ada.tie_parameters.loc[data.human_judge, "tau"] == 0
