"""NUTS posteriors: Bernstein-von Mises agreement, InferenceData layout, ties.

* In a correctly specified simulation with plenty of data, the posterior sd of
  ``s_H`` (``dial_sample.stan``, lambda = n_LLM / n_H, i.e. the ordinary
  posterior) matches the frequentist standard error within 15%.  The standard
  error is the Fisher one of the same joint likelihood: ``J H^+ J'`` with ``H``
  the numpy Hessian of ``n_H Q_lambda`` at the MLE in the over-parameterized
  chart, ``J = chart.score_jacobian`` and ``H^+`` the Moore-Penrose inverse
  (the ``r (r + 1)`` gauge directions have zero curvature; by Lemma
  overparam-invariance the result does not depend on the chart).  Under a
  correct model the sandwich and the Fisher covariance agree asymptotically.
* ``log_lik`` at posterior draws equals a numpy binomial log pmf at the draws'
  identified quantities.
* The Davidson-Beaver tie model recovers the judges' tie parameters and order
  effects on data simulated from it.
"""

from __future__ import annotations

import json
import types

import numpy as np
import pandas as pd
import pytest
from scipy.special import gammaln, log_expit

from pydial import Comparisons
from pydial.model.likelihood import Objective
from pydial.optim import pinv_sym
from pydial.stan.idata import group_names
from pydial.studies.simulate import simulate
from pydial.stan import SamplerWarning, compare_intervals, posterior, stan_fit_point

pytestmark = pytest.mark.stan


# ------------------------------------------------------------------ Bernstein-von Mises
@pytest.fixture(scope="module")
def bvm(models):
    sim = simulate(N=6, K=3, rank=1, n_llm=12_000, n_human=2_000, seed=2024)
    data = sim.comparisons
    lam = data.n_llm / data.n_human  # ordinary joint likelihood
    sp = stan_fit_point(data, "dial-ada", rank=1, calibration="mu", lambda_=lam)
    assert sp.converged
    ch = sp.chart
    _, _, Hq = Objective.weighted(ch, data, lam).value_grad_hess(sp.theta)
    Hp, n_zero = pinv_sym(data.n_human * Hq)
    assert n_zero == ch.n_gauge
    J = ch.score_jacobian(sp.theta)
    cov = J @ Hp @ J.T
    idata = posterior(data, rank=1, calibration="mu", chains=4, draws=1000, warmup=1000, seed=11)
    return types.SimpleNamespace(sim=sim, data=data, fit=sp, cov=cov, idata=idata, backend=models["dial"].backend)


def test_plot_ppc_runs(bvm):
    import matplotlib

    from pydial.stan.idata import plot_ppc

    matplotlib.use("Agg")
    assert plot_ppc(bvm.idata, "wins_i", num_samples=20) is not None


def test_posterior_sd_matches_fisher_se(bvm):
    sd = bvm.idata.posterior["s_H"].std(("chain", "draw")).to_numpy()
    se = np.sqrt(np.diag(bvm.cov))
    ratio = sd / se
    assert np.all(np.abs(ratio - 1.0) < 0.15), ratio
    # and the posterior is centred at the MLE (differences of order 1/n, far below one SE)
    mean = bvm.idata.posterior["s_H"].mean(("chain", "draw")).to_numpy()
    assert np.all(np.abs(mean - bvm.fit.scores) < 0.3 * se), (mean - bvm.fit.scores) / se
    assert json.loads(bvm.idata.attrs["sampler_problems"]) == []


def test_inference_data_layout(bvm):
    idata, data = bvm.idata, bvm.data
    assert {"posterior", "log_likelihood", "posterior_predictive", "observed_data", "sample_stats"} <= set(group_names(idata))
    assert idata.attrs["backend"] == bvm.backend
    post = idata.posterior
    assert post.sizes["chain"] == 4 and post.sizes["draw"] == 1000
    assert post["s_H"].dims == ("chain", "draw", "item")
    assert list(post["item"].values) == list(data.items)
    assert post["S"].dims == ("chain", "draw", "judge", "item")
    assert list(post["judge"].values) == list(data.judges)
    assert post["b"].dims == ("chain", "draw", "judge") and post["gamma"].dims == ("chain", "draw", "judge")
    assert post["V"].dims == ("chain", "draw", "item", "rank")
    assert post["win_prob"].dims == ("chain", "draw", "item", "item_j")
    ll = idata.log_likelihood["log_lik"]
    assert ll.dims == ("chain", "draw", "cell") and ll.sizes["cell"] == len(data.llm) + len(data.human)
    assert idata.observed_data["wins_i"].sizes["cell"] == ll.sizes["cell"]
    # replicated counts: same names and cells as the observed data, same decisive totals
    pp = idata.posterior_predictive
    assert set(pp.data_vars) == {"wins_i", "wins_j", "ties"} == set(idata.observed_data.data_vars)
    assert pp["wins_i"].dims == ("chain", "draw", "cell")
    tot = (pp["wins_i"] + pp["wins_j"]).to_numpy()
    obs = (idata.observed_data["wins_i"] + idata.observed_data["wins_j"]).to_numpy()
    assert np.all(tot == obs) and np.all(pp["ties"].to_numpy() == 0)
    # the replicated win rate is close to the observed one overall
    assert abs(pp["wins_i"].mean(("chain", "draw")).sum() / obs.sum()
               - idata.observed_data["wins_i"].sum() / obs.sum()) < 0.01
    assert idata.sample_stats["diverging"].dtype == bool
    assert idata.attrs["program"] == "dial_sample"
    # identified structure in every draw
    mu = post["mu"].to_numpy().reshape(-1, data.N)
    np.testing.assert_allclose(mu.sum(axis=1), 0, atol=1e-9)
    np.testing.assert_allclose((mu**2).sum(axis=1), data.N, rtol=1e-9)
    assert float(post["consensus_scale"].min()) > 0
    # truth is recovered: s_H = mu (consensus target)
    mean = post["s_H"].mean(("chain", "draw")).to_numpy()
    se = np.sqrt(np.diag(bvm.cov))
    assert np.all(np.abs(mean - bvm.sim.truth.s_h) < 4 * se)
    # win probabilities are sigma(s_i - s_j)
    s = post["s_H"].to_numpy()[0, :5]
    wp = post["win_prob"].to_numpy()[0, :5]
    np.testing.assert_allclose(wp, 1 / (1 + np.exp(-(s[:, :, None] - s[:, None, :]))), rtol=1e-10)


def test_log_lik_at_draws_equals_numpy(bvm):
    idata, data = bvm.idata, bvm.data
    post = idata.posterior
    L, H = data.llm, data.human
    for c, d in [(0, 0), (1, 500), (3, 999)]:
        S = post["S"].to_numpy()[c, d]
        b = post["b"].to_numpy()[c, d]
        s = post["s_H"].to_numpy()[c, d]
        eta_l = S[L.judge, L.i] - S[L.judge, L.j] + L.a * b[L.judge]
        eta_h = s[H.i] - s[H.j]

        def lpmf(n, y, eta):
            return gammaln(n + 1) - gammaln(y + 1) - gammaln(n - y + 1) + y * log_expit(eta) + (n - y) * log_expit(-eta)

        expected = np.concatenate([lpmf(L.n, L.y, eta_l), lpmf(H.n, H.y, eta_h)])
        np.testing.assert_allclose(idata.log_likelihood["log_lik"].to_numpy()[c, d], expected, rtol=1e-8)


def test_compare_intervals_same_level(bvm):
    """Equal-tailed posterior intervals next to Wald intervals, at the result's level."""
    from scipy.stats import norm

    data, sp = bvm.data, bvm.fit
    se = np.sqrt(np.diag(bvm.cov))
    z = norm.ppf(0.95)
    scores = pd.DataFrame({"score": sp.scores, "se": se, "ci_low": sp.scores - z * se, "ci_high": sp.scores + z * se},
                          index=pd.Index(data.items, name="item"))
    result = types.SimpleNamespace(scores=scores, position_effects=None, level=0.90, cov_type="fisher")
    tab = compare_intervals(result, bvm.idata)
    assert tab.attrs["level"] == 0.90 and (tab["level"] == 0.90).all()
    assert list(tab.index.get_level_values("name")) == list(data.items)
    x = bvm.idata.posterior["s_H"].to_numpy().reshape(-1, data.N)
    np.testing.assert_allclose(tab["cred_low"], np.quantile(x, 0.05, axis=0))
    np.testing.assert_allclose(tab["cred_high"], np.quantile(x, 0.95, axis=0))
    np.testing.assert_allclose(tab["ci_low"], scores["ci_low"])
    assert np.all(np.abs(tab["width_ratio"] - 1) < 0.15)
    # another level recomputes the Wald interval from the standard error
    tab99 = compare_intervals(result, bvm.idata, level=0.99)
    np.testing.assert_allclose(tab99["ci_high"] - tab99["estimate"], norm.ppf(0.995) * se)
    np.testing.assert_allclose(tab99["cred_high"], np.quantile(x, 0.995, axis=0))


def test_compare_intervals_with_pydial_fit(bvm):
    """A DialResult of another estimator is refused; match=True refits it to the posterior's estimand."""
    from pydial import EstimandMismatchError
    from pydial.api import fit

    res = fit(bvm.data, "dial-anc", rank=1, calibration="mu")
    with pytest.raises(EstimandMismatchError, match="method: fit 'dial-anc' vs posterior 'dial-ada'"):
        compare_intervals(res, bvm.idata)
    tab = compare_intervals(res, bvm.idata, match=True)
    assert tab.attrs["refit"] is True
    # the ordinary posterior's b is the joint one; the fit's comes from the LLM-only stage: scores only
    assert set(tab.index.get_level_values("quantity")) == {"score"}
    assert "b omitted" in tab.attrs["omitted"]
    assert tab.attrs["level"] == res.level
    lam = bvm.data.n_llm / bvm.data.n_human
    ref = fit(bvm.data, "dial-ada", rank=1, calibration="mu", lambda_=[lam], include_endpoints=False)
    np.testing.assert_allclose(tab["estimate"], ref.scores["score"], rtol=1e-8)
    # plenty of data: the posterior centres on the joint MLE
    assert np.all(np.abs(tab["shift_se"]) < 0.3)


# ------------------------------------------------------------------ ties (Davidson-Beaver)
def davidson_beaver_frame(rng, N, S, b, nu, nu_h, s_h, n_llm, n_human, p_first=0.6):
    """Long table of judgments drawn from Davidson-Beaver (judges) and Davidson (people)."""
    K = S.shape[0]
    pi, pj = np.triu_indices(N, 1)

    def draw(s_i, s_j, ab, log_nu):
        x = 0.5 * (s_i - s_j + ab)
        lg = np.column_stack([x, -x, np.full_like(x, log_nu)])
        p = np.exp(lg - lg.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        u = rng.random(x.size)[:, None]
        return (u > np.cumsum(p, 1)).sum(1)  # 0 = i wins, 1 = j wins, 2 = tie

    pr = rng.integers(0, pi.size, n_llm)
    k = rng.integers(0, K, n_llm)
    a = np.where(rng.random(n_llm) < p_first, 1, -1)
    out = draw(S[k, pi[pr]], S[k, pj[pr]], a * b[k], np.log(nu)[k])
    items = [f"item{t}" for t in range(N)]
    win = np.array(["a", "b", "tie"], dtype=object)
    llm = pd.DataFrame({"judge": [f"judge{t}" for t in k], "item_a": np.asarray(items)[pi[pr]],
                        "item_b": np.asarray(items)[pj[pr]], "first": np.where(a > 0, "a", "b"), "winner": win[out]})
    ph = rng.integers(0, pi.size, n_human)
    outh = draw(s_h[pi[ph]], s_h[pj[ph]], np.zeros(n_human), np.log(nu_h))
    hum = pd.DataFrame({"judge": "human", "item_a": np.asarray(items)[pi[ph]], "item_b": np.asarray(items)[pj[ph]],
                        "first": "a", "winner": win[outh]})
    frame = pd.concat([llm, hum], ignore_index=True)
    frame.insert(0, "record_id", np.arange(len(frame)))
    return frame, items


def test_tie_model_recovers_nu_and_b(models):
    rng = np.random.default_rng(5)
    N, K = 6, 3
    S = rng.normal(size=(K, N))
    S -= S.mean(1, keepdims=True)
    b = np.array([0.8, -0.5, 0.2])
    nu = np.array([0.3, 1.0, 2.5])
    s_h = S.mean(0)
    frame, items = davidson_beaver_frame(rng, N, S, b, nu, 0.6, s_h, n_llm=15_000, n_human=3_000)
    data = Comparisons.from_frame(frame, items=items)
    idata = posterior(data, method="judges", ties="davidson", chains=2, draws=500, warmup=500, seed=3)
    post = idata.posterior
    assert list(post["tie_judge"].values) == [*data.judges, "human"]
    nu_hat = post["nu"].mean(("chain", "draw")).to_numpy()
    nu_sd = post["nu"].std(("chain", "draw")).to_numpy()
    truth_nu = np.r_[nu, 0.6]
    assert np.all(np.abs(nu_hat - truth_nu) < 4 * nu_sd), (nu_hat, truth_nu, nu_sd)
    assert np.all(np.abs(nu_hat / truth_nu - 1) < 0.2)
    b_hat = post["b"].mean(("chain", "draw")).to_numpy()
    b_sd = post["b"].std(("chain", "draw")).to_numpy()
    assert np.all(np.abs(b_hat - b) < 4 * b_sd) and np.all(b_sd < 0.1), (b_hat, b, b_sd)
    s_hat = post["S"].mean(("chain", "draw")).to_numpy()
    np.testing.assert_allclose(s_hat, S, atol=0.25)
    np.testing.assert_allclose(post["s_H"].mean(("chain", "draw")).to_numpy(), s_h, atol=0.25)
    # log_lik is the multinomial log pmf (probabilities of the three outcomes sum to one)
    assert np.all(np.isfinite(idata.log_likelihood["log_lik"].to_numpy()))


def test_structured_tie_posterior_recovers_nu(models):
    """dial_sample.stan with ties: judge and human tie parameters on structured Davidson-Beaver data."""
    rng = np.random.default_rng(9)
    sim = simulate(N=6, K=3, rank=1, n_llm=10, n_human=10, seed=4)  # only for a structured truth
    tr = sim.truth
    nu = np.array([0.5, 1.5, 0.8])
    frame, items = davidson_beaver_frame(rng, 6, tr.S, tr.b, nu, 0.4, tr.s_h, n_llm=12_000, n_human=3_000)
    data = Comparisons.from_frame(frame, items=items)
    idata = posterior(data, rank=1, calibration="mu", ties="davidson", chains=2, draws=400, warmup=400, seed=8)
    post = idata.posterior
    nu_hat = post["nu"].mean(("chain", "draw")).to_numpy()
    np.testing.assert_allclose(nu_hat, np.r_[nu, 0.4], rtol=0.2)
    s_hat = post["s_H"].mean(("chain", "draw")).to_numpy()
    np.testing.assert_allclose(s_hat, tr.s_h, atol=0.2)


# ------------------------------------------------------------------ sampler problems are reported
def test_short_chains_warn(models):
    data = simulate(N=5, K=2, rank=0, n_llm=400, n_human=100, seed=1).comparisons
    with pytest.warns(SamplerWarning):
        idata = posterior(data, rank=0, chains=2, draws=15, warmup=15, seed=1)
    problems = json.loads(idata.attrs["sampler_problems"])
    assert any("ESS" in p or "R-hat" in p for p in problems)


def test_human_only_posterior(models):
    data = simulate(N=5, K=2, rank=0, n_llm=200, n_human=3000, seed=2).comparisons
    idata = posterior(data, method="human", chains=2, draws=300, warmup=300, seed=2)
    from pydial.estimation.glm import fit_human_btl

    s = fit_human_btl(data.human, data.N).s
    mean = idata.posterior["s_H"].mean(("chain", "draw")).to_numpy()
    sd = idata.posterior["s_H"].std(("chain", "draw")).to_numpy()
    assert np.all(np.abs(mean - s) < 0.5 * sd + 0.02)


@pytest.mark.parametrize("where, message", [("matched_mode", "no posterior mode"), ("nuts_start", "Laplace start failed")])
def test_a_failed_mode_or_laplace_start_is_reported_and_nuts_still_samples(models, monkeypatch, where, message):
    """Where the mode (or the Laplace start built from it) fails, NUTS falls back to its own start and says so."""
    import pydial.stan.dial_posterior as dp
    from pydial import ConvergenceError, ConvergenceWarning

    def fail(*args, **kwargs):
        raise ConvergenceError("no ascent (forced)")

    monkeypatch.setattr(dp, where, fail)
    data = simulate(N=5, K=2, rank=0, n_llm=400, n_human=100, seed=1).comparisons
    with pytest.warns(ConvergenceWarning, match=message):
        idata = posterior(data, rank=0, chains=2, draws=100, warmup=100, seed=1)
    assert np.isfinite(idata.posterior["s_H"].to_numpy()).all()
