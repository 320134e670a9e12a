"""Log-likelihoods, parameter counts, AIC / BIC and sample sizes of every fit, against independent references.

statsmodels' Bernoulli GLM on the long table of judgments (the people's BTL on the difference
design; each judge's order-effect BTL with its order column), per-judgment log probabilities
written out from Davidson's and Rao-Kupper's formulas, and hand counts of the judgments.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, log_expit

import pydial

sm = pytest.importorskip("statsmodels.api")


def _fit(data, method, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pydial.fit(data, method, **kw)


@pytest.fixture(scope="module")
def sim():
    return pydial.simulate(N=6, K=3, n_llm=3000, n_human=600, seed=3).comparisons


@pytest.fixture(scope="module")
def tied():
    return {ties: pydial.simulate(N=5, K=2, n_llm=2000, n_human=800, tie_rate=0.25, ties=ties, seed=5).comparisons
            for ties in ("davidson", "rao-kupper")}


def _rows(data, judge, decisive=True):
    """The judge's judgments, one row each: item indices, order label and outcome."""
    f = data.to_frame()
    f = f[(f["judge"] == judge) & (f["item_a"] != f["item_b"]) & (f["winner"] != "both_bad")]
    if decisive:
        f = f[f["winner"].isin(["a", "b"])]
    idx = {it: n for n, it in enumerate(data.items)}
    return (f["item_a"].map(idx).to_numpy(), f["item_b"].map(idx).to_numpy(),
            np.where(f["first"] == "a", 1.0, -1.0), f["winner"].to_numpy())


def _difference_design(i, j, N):
    """Columns of the first N - 1 items (the last is the reference): +1 for item i, -1 for item j."""
    X = np.zeros((i.size, N))
    X[np.arange(i.size), i] += 1.0
    X[np.arange(i.size), j] -= 1.0
    return X[:, : N - 1]


def _glm(y, X):
    return sm.GLM(y, X, family=sm.families.Binomial()).fit()


def test_human_btl_matches_statsmodels(sim):
    res = _fit(sim, "human")
    i, j, _, w = _rows(sim, sim.human_judge)
    g = _glm((w == "a").astype(float), _difference_design(i, j, sim.N))
    k = g.df_model + 1  # statsmodels counts the parameters as df_model + 1 (no constant here)
    assert res.llf == pytest.approx(g.llf, abs=1e-6)
    assert res.df_model == k == sim.N - 1
    assert res.nobs == g.nobs == res.n_human == sim.n_human and res.n_llm == 0
    assert res.aic == pytest.approx(g.aic, abs=1e-6)
    assert res.bic == pytest.approx(g.bic_llf, abs=1e-6)
    assert res.llf_human == pytest.approx(g.llf, abs=1e-6)
    assert np.isnan(res.objective)


def test_judges_model_matches_statsmodels(sim):
    res = _fit(sim, "judges")
    llf, k, n = 0.0, 0, 0
    for judge in sim.judges:
        i, j, a, w = _rows(sim, judge)
        g = _glm((w == "a").astype(float), np.column_stack([_difference_design(i, j, sim.N), a]))
        llf, k, n = llf + g.llf, k + int(g.df_model + 1), n + int(g.nobs)
    assert res.llf == pytest.approx(llf, abs=1e-6)
    assert res.df_model == k == sim.K * (sim.N - 1) + sim.K
    assert res.nobs == n == sim.n_llm and res.n_human == 0
    assert res.aic == pytest.approx(-2 * llf + 2 * k, abs=1e-6)
    assert res.bic == pytest.approx(-2 * llf + np.log(n) * k, abs=1e-6)
    assert np.isnan(res.llf_human)


def _tie_log_pmf(ties, eta, t, w):
    """Per-judgment log probability of the outcome ``w`` ('a', 'b', 'tie') from the model's formulas."""
    if ties == "davidson":  # P(a) : P(b) : P(tie) = e^{eta/2} : e^{-eta/2} : nu
        logits = np.column_stack([eta / 2, -eta / 2, np.full(eta.size, np.log(t))])
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    else:  # Rao-Kupper: P(a) = sigma(eta - tau), P(b) = sigma(-eta - tau), P(tie) = the rest
        pa, pb = expit(eta - t), expit(-eta - t)
        logp = np.log(np.column_stack([pa, pb, 1 - pa - pb]))
    col = np.select([w == "a", w == "b"], [0, 1], 2)
    return logp[np.arange(eta.size), col]


@pytest.mark.parametrize("ties, name", [("davidson", "nu"), ("rao-kupper", "tau")])
def test_tie_models_by_hand(tied, ties, name):
    data = tied[ties]
    hum = _fit(data, "human", ties=ties)
    s = hum.scores["score"].to_numpy()
    i, j, _, w = _rows(data, data.human_judge, decisive=False)
    by_hand = _tie_log_pmf(ties, s[i] - s[j], hum.tie_parameters.loc[data.human_judge, name], w).sum()
    assert hum.llf == pytest.approx(by_hand, abs=1e-6)
    assert hum.df_model == data.N - 1 + 1 and hum.nobs == w.size
    jud = _fit(data, "judges", ties=ties)
    total, n = 0.0, 0
    for k, judge in enumerate(data.judges):
        S, b = jud.judge_scores.loc[judge].to_numpy(), jud.position_effects.loc[judge, "b"]
        i, j, a, w = _rows(data, judge, decisive=False)
        total += _tie_log_pmf(ties, S[i] - S[j] + a * b, jud.tie_parameters.loc[judge, name], w).sum()
        n += w.size
    assert jud.llf == pytest.approx(total, abs=1e-6)
    assert jud.df_model == data.K * (data.N - 1) + data.K + data.K and jud.nobs == n
    assert jud.aic == pytest.approx(-2 * total + 2 * jud.df_model, abs=1e-6)


def _bernoulli(eta, w):
    return float(np.where(w == "a", log_expit(eta), log_expit(-eta)).sum())


def _by_hand(data, s, S, b):
    """``(l_H, l_LLM)`` of the decisive judgments at the people's scores ``s`` and the judges' ``S``, ``b``."""
    i, j, _, w = _rows(data, data.human_judge)
    l_h = _bernoulli(s[i] - s[j], w)
    l_llm = 0.0
    for k, judge in enumerate(data.judges):
        i, j, a, w = _rows(data, judge)
        l_llm += _bernoulli(S[k, i] - S[k, j] + a * b[k], w)
    return l_h, l_llm


@pytest.mark.parametrize("calibration, d", [("mu", 1), ("W", 2)])
def test_structured_model_llf_is_the_sum_of_the_stages(sim, calibration, d):
    res = _fit(sim, "dial-anc", rank=1, calibration=calibration)
    l_h, l_llm = _by_hand(sim, res.scores["score"].to_numpy(), res.judge_scores.to_numpy(),
                          res.position_effects["b"].to_numpy())
    r, K, N = 1, sim.K, sim.N
    assert res.llf == pytest.approx(l_h + l_llm, abs=1e-6)
    assert res.llf_human == pytest.approx(l_h, abs=1e-6)
    assert res.df_model == (r + 1) * (K + N - r - 2) + K + d
    assert res.nobs == sim.n_human + sim.n_llm
    assert res.bic == pytest.approx(-2 * (l_h + l_llm) + np.log(res.nobs) * res.df_model, abs=1e-6)
    assert np.isnan(res.objective)


def test_weighted_fit_reports_its_criterion_apart_from_the_likelihood(sim):
    lam = 2.0
    res = _fit(sim, "dial-ada", lambda_=[lam], include_endpoints=False)
    assert res.lambda_ == lam
    ch, th = res.chart, res.theta
    l_h, l_llm = _by_hand(sim, res.scores["score"].to_numpy(), ch.S(th), ch.order_effects(th))
    assert res.llf == pytest.approx(l_h + l_llm, abs=1e-6)
    assert res.llf_human == pytest.approx(l_h, abs=1e-6)
    # Q_lambda = l_H + lambda l_L with the normalized losses: not the log-likelihood
    assert res.objective == pytest.approx(-l_h / sim.n_human - lam * l_llm / sim.n_llm, rel=1e-9)
    assert res.df_model == 2 * (sim.K + sim.N - 3) + sim.K + 1


def test_nopos_has_no_order_effect_parameters(sim):
    res = _fit(sim, "dial-nopos", lambda_=[1.0], include_endpoints=False)
    assert res.df_model == 2 * (sim.K + sim.N - 3) + 1


def test_pooled_is_the_sum_of_its_two_stages(sim):
    res = _fit(sim, "pooled")
    s_pool = res.stage_scores["pooled"].to_numpy()
    i, j, _, w = _rows(sim, sim.human_judge)
    l_h = _bernoulli(res.scores["score"].to_numpy()[i] - res.scores["score"].to_numpy()[j], w)
    l_llm = sum(_bernoulli(s_pool[i] - s_pool[j], w) for i, j, _, w in (_rows(sim, k) for k in sim.judges))
    assert res.llf == pytest.approx(l_h + l_llm, abs=1e-6)
    assert res.df_model == sim.N - 1 + 1
    ct = res.calibration_test
    assert ct.defined and ct.df == sim.N - 2


def test_atc_has_no_likelihood_but_the_peoples(sim):
    res = _fit(sim, "atc")
    assert np.isnan(res.llf) and res.df_model is None and np.isnan(res.aic) and np.isnan(res.bic)
    i, j, _, w = _rows(sim, sim.human_judge)
    s = res.scores["score"].to_numpy()
    assert res.llf_human == pytest.approx(_bernoulli(s[i] - s[j], w), abs=1e-6)
    assert res.calibration_test.df == sim.N - 2


@pytest.fixture(scope="module")
def arena():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pydial.datasets.arena()


def _all_rows(data):
    f = data.to_frame()
    return f.groupby("judge").size()


@pytest.mark.parametrize("ties, n_h, n_l", [(None, 18907, 65328), ("davidson", 21787, 80757)])
def test_sample_sizes_are_the_judgments_used(arena, ties, n_h, n_l):
    res = _fit(arena, "dial-ada", ties=ties)
    assert (res.n_human, res.n_llm, res.nobs) == (n_h, n_l, n_h + n_l)
    used = res.n_obs_by_judge
    assert list(used.index) == list(arena.judges) + [arena.human_judge]
    assert used[arena.human_judge] == n_h and used.drop(arena.human_judge).sum() == n_l
    # used + excluded = every judgment of the judge (hand count of the rows)
    total = res.n_obs_by_judge + res.excluded.sum(axis=1)
    pd.testing.assert_series_equal(total.sort_index(), _all_rows(arena).sort_index(), check_names=False,
                                   check_dtype=False, check_index_type=False)
    assert res.excluded.loc[arena.human_judge, "both_bad"] == 5132
    assert res.excluded["ties"].sum() == (2880 + 15429 if ties is None else 0)
    text = res.summary()
    assert f"n_LLM={n_l}" in text and f"n_H={n_h}" in text and "left out" in text
    assert f"AIC={res.aic:.2f}" in text and "df_model=" in text


def test_method_sides_not_used_are_reported(sim):
    res = _fit(sim, "human")
    assert res.excluded.loc[list(sim.judges), "not_used_by_method"].sum() == sim.n_llm
    assert res.n_obs_by_judge.drop(sim.human_judge).sum() == 0
