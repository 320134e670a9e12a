"""Like with like: a posterior of exactly the estimator of a frequentist fit.

``posterior(data, like=result)`` samples the posterior of the fit's own
estimator (model, rank, calibration, weight lambda, ties, and the fit's
convention for the order effects ``b``: the LLM-only stage for the DIAL
methods).  On correctly specified simulated data with plenty of judgments,
Bernstein-von Mises makes the posterior mean agree with the MLE to a small
fraction of a standard error and the posterior intervals as wide as the
model-based (Fisher) Wald intervals, for every matched pair: ``human``,
``judges`` (scores: the mean of the judges' scores), ``dial-anc`` (the cut
posterior: LLM-only structure, then the calibration given each draw of M)
and ``dial-ada`` at its GACV-selected weight.

The power posterior of ``dial-ada`` has spread ``H_w^{-1}``, the sandwich
``H_w^{-1} J_w H_w^{-1}``; they agree when the LLM weight
``w = lambda n_H / n_LLM`` is near 1 or the human block dominates the score
variance.  The dial-ada test selects lambda by GACV among multiples >= 1 of
``n_LLM / n_H``, where the difference stays well inside the tolerance.
"""

from __future__ import annotations

import json
import types
import warnings

import numpy as np
import pytest

from pydial import EstimandMismatchError, ModelSpec, fit
from pydial.studies.simulate import simulate
from pydial.stan import compare_intervals, estimand, posterior
from pydial.stan.idata import group_dataset, group_names

pytestmark = pytest.mark.stan

DRAWS = dict(chains=2, draws=400, warmup=400)


@pytest.fixture(scope="module")
def sim_data():
    return simulate(N=5, K=3, rank=1, n_llm=8000, n_human=1500, seed=7).comparisons


@pytest.fixture(scope="module")
def pairs(models, sim_data):
    out = {}
    kw = {"human": {}, "judges": {}, "dial-anc": {"rank": 1}, "dial-ada": {"rank": 1, "multiples": [1.0, 3.0, 10.0]}}
    for m, extra in kw.items():
        res = fit(sim_data, m, cov_type="fisher", **extra)
        assert res.ok, res.verdict()
        idata = posterior(sim_data, like=res, seed=5, **DRAWS)
        out[m] = types.SimpleNamespace(res=res, idata=idata, tab=compare_intervals(res, idata))
    return out


@pytest.mark.parametrize("method", ["human", "judges", "dial-anc", "dial-ada"])
def test_matched_pair_agrees(pairs, method):
    p = pairs[method]
    est = estimand(p.idata)
    assert est.spec.estimand()["method"] == method
    assert est.spec == p.res.spec.selected(p.res.lambda_, p.res.rank)  # the record is the fit's spec
    # short chains: no divergences and R-hat near 1 (the 1.01 warning threshold is for production runs)
    assert not any("divergent" in q for q in json.loads(p.idata.attrs["sampler_problems"]))
    assert max(r["rhat"] for r in json.loads(p.idata.attrs["sampler_diagnostics"])) < 1.05
    tab = p.tab
    want = {"score"} | ({"b"} if method != "human" else set())
    assert set(tab.index.get_level_values("quantity")) == want
    # the table carries the numpy engine's MLE and its Fisher standard errors beside the posterior
    s = p.res.scores
    t = tab.loc["score"]
    np.testing.assert_allclose(t["estimate"], s["score"])
    np.testing.assert_allclose(t["se"], s["se"])
    # the independent check: the posterior (Stan's NUTS) against those, below
    x = p.idata.posterior[est.scores].stack(s=("chain", "draw")).transpose("item", "s").to_numpy()
    np.testing.assert_allclose(t["post_mean"], x.mean(axis=1))
    assert np.all(np.abs(t["shift_se"]) < 0.2), t["shift_se"]
    assert np.all((t["width_ratio"] > 0.85) & (t["width_ratio"] < 1.15)), t["width_ratio"]
    if "b" in want:
        b = tab.loc["b"]
        np.testing.assert_allclose(b["estimate"], p.res.position_effects["b"])
        assert np.all(np.abs(b["shift_se"]) < 0.2), b["shift_se"]
        assert np.all((b["width_ratio"] > 0.85) & (b["width_ratio"] < 1.15)), b["width_ratio"]


def test_estimand_records(pairs, sim_data):
    anc = estimand(pairs["dial-anc"].idata)
    assert anc.weight == float("inf") and anc.b_source == "llm-only" and anc.spec.rank == 1
    assert anc.spec.calibration == "mu"
    ada = estimand(pairs["dial-ada"].idata)
    assert ada.weight == pytest.approx(pairs["dial-ada"].res.lambda_) and ada.b_source == "llm-only"
    record = json.loads(pairs["dial-ada"].idata.attrs["estimand"])
    assert set(record) == {"spec", "b_source", "scores", "data", "program"}
    assert ModelSpec.from_record(record["spec"]) == ada.spec
    # dial-ada's b is the LLM-only run's; the joint posterior's b is kept beside it
    post = pairs["dial-ada"].idata.posterior
    assert "b_joint" in post and post["b_joint"].dims == ("chain", "draw", "judge")
    assert "b from the LLM-only stage" in pairs["dial-ada"].tab.attrs["estimand"]
    # the cut posterior: s_H = c mu draw by draw, log_lik over LLM and human cells
    cut = pairs["dial-anc"].idata
    mu, c = cut.posterior["mu"].to_numpy(), cut.posterior["c"].to_numpy()
    np.testing.assert_allclose(cut.posterior["s_H"].to_numpy(), mu * c[..., :1], rtol=1e-8, atol=1e-10)
    assert cut.log_likelihood["log_lik"].sizes["cell"] == len(sim_data.llm) + len(sim_data.human)
    assert np.all(np.isfinite(cut.log_likelihood["log_lik"].to_numpy()))
    # judges: s_judges is the mean of the judges' scores in every draw
    j = pairs["judges"].idata.posterior
    np.testing.assert_allclose(j["s_judges"].to_numpy(), j["S"].mean("judge").to_numpy())


def test_mismatched_pair_raises(pairs):
    with pytest.raises(EstimandMismatchError, match="method: fit 'dial-anc' vs posterior 'dial-ada'") as e:
        compare_intervals(pairs["dial-anc"].res, pairs["dial-ada"].idata)
    assert "method" in e.value.mismatch
    with pytest.raises(EstimandMismatchError, match="method"):
        compare_intervals(pairs["judges"].res, pairs["human"].idata)


def test_match_refits_frequentist_side(pairs, sim_data):
    """match=True refits the fit to the posterior's specification (here: human -> dial-ada at its lambda)."""
    ada = pairs["dial-ada"]
    tab = compare_intervals(pairs["human"].res, ada.idata, match=True)
    assert tab.attrs["refit"] is True
    np.testing.assert_allclose(tab.loc["score"]["estimate"], ada.res.scores["score"], rtol=1e-6, atol=1e-8)


def test_plot_is_pngable(pairs, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    fig = pairs["dial-anc"].tab.plot()
    fig.savefig(tmp_path / "cmp.png", dpi=80)
    assert (tmp_path / "cmp.png").stat().st_size > 5000
    assert len(fig.axes) == 2


def test_httpstan_fit_cache_is_cleared(models, sim_data, stan_backend_name):
    """pystan stores every seeded fit in httpstan's cache; posterior() deletes the ones it made."""
    from pydial.stan.httpstan_backend import fit_files

    if stan_backend_name != "httpstan":
        pytest.skip("httpstan only")
    before = {f: f.stat().st_size for f in fit_files()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        posterior(sim_data, method="human", chains=1, draws=50, warmup=50, seed=99)
    after = {f: f.stat().st_size for f in fit_files()}
    assert set(after) <= set(before)
    assert sum(after.values()) <= sum(before.values())


def test_diagnostics_are_named_by_coordinates(pairs, sim_data):
    diag = json.loads(pairs["judges"].idata.attrs["sampler_diagnostics"])
    names = {r["variable"] for r in diag}
    assert f"s_judges[{sim_data.items[0]}]" in names
    assert f"b[{sim_data.judges[0]}]" in names
    assert f"S[{sim_data.judges[0]},{sim_data.items[1]}]" in names


def test_power_posterior_at_default_grid_lambda(models, sim_data):
    """dial-ada with the default grid: the power posterior at the selected lambda is centred on the weighted
    MLE and its spread is the inverse weighted Hessian ``H_w^{-1}`` (Bernstein-von Mises for a power
    posterior), not the sandwich ``H_w^{-1} J_w H_w^{-1}``: compare with both, using an independent numpy
    Hessian of ``n_H Q_lambda`` at the Stan optimum."""
    from pydial.model.likelihood import Objective
    from pydial.optim import pinv_sym
    from pydial.stan import stan_fit_point

    res = fit(sim_data, "dial-ada", rank=1, cov_type="fisher")
    lam = res.lambda_
    assert np.isfinite(lam) and lam > 0
    sp = stan_fit_point(sim_data, "dial-ada", rank=1, calibration="mu", lambda_=lam)
    np.testing.assert_allclose(sp.scores, res.scores["score"], atol=1e-4)
    _, _, Hq = Objective.weighted(sp.chart, sim_data, lam).value_grad_hess(sp.theta)
    Hp, _ = pinv_sym(sim_data.n_human * Hq)
    Jc = sp.chart.score_jacobian(sp.theta)
    bread_sd = np.sqrt(np.diag(Jc @ Hp @ Jc.T))
    idata = posterior(sim_data, like=res, seed=6, **DRAWS)
    tab = compare_intervals(res, idata).loc["score"]
    assert np.all(np.abs(tab["shift_se"]) < 0.2), tab["shift_se"]
    np.testing.assert_allclose(tab["post_sd"] / bread_sd, 1.0, atol=0.15)
    # the ratio of the two theoretical widths is what the table shows, up to Monte Carlo error
    np.testing.assert_allclose(tab["width_ratio"], bread_sd / tab["se"], atol=0.15)


def _layout(idata):
    out = {}
    for g in group_names(idata):
        ds = group_dataset(idata, g)
        out[g] = {v: (ds[v].dims, str(ds[v].dtype), ds[v].shape) for v in ds.data_vars}
        out[g + " coords"] = {c: [str(x) for x in ds[c].values] for c in ds.coords if c not in ("chain", "draw")}
    return out


@pytest.mark.parametrize("method", ["dial-ada", "judges"])
def test_both_backends_give_the_same_layout(sim_data, method):
    """CmdStan's InferenceData comes from arviz.from_cmdstanpy, httpstan's from arviz.from_dict: same layout."""
    import os

    from pydial.stan.backend import backend_available

    wanted = os.environ.get("PYDIAL_TEST_BACKENDS")
    both = backend_available("cmdstanpy") and backend_available("httpstan")
    if not both or (wanted and set(wanted.split(",")) != {"cmdstanpy", "httpstan"}):
        pytest.skip("needs both Stan backends")
    kw = dict(method=method, chains=2, draws=30, warmup=30, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = posterior(sim_data, backend="cmdstanpy", **kw)
        b = posterior(sim_data, backend="httpstan", **kw)
    assert a.attrs["converter"] == "arviz.from_cmdstanpy" and "converter" not in b.attrs
    la, lb = _layout(a), _layout(b)
    assert la == lb
    assert {"posterior", "log_likelihood", "posterior_predictive", "observed_data", "sample_stats"} <= set(la)


def test_sampling_is_quiet(models, sim_data, capfd):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        posterior(sim_data, method="human", chains=1, draws=30, warmup=30, seed=2)
    out, err = capfd.readouterr()
    assert "Sampling" not in out + err and "Chain" not in out + err and "cmdstanpy" not in out + err


def test_progress_bar(models, sim_data, stan_backend_name, capfd):
    """progress=True: a tqdm bar (one over all chains with httpstan) instead of the backends' lines."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        posterior(sim_data, method="human", chains=2, draws=30, warmup=30, seed=2, options={"progress": True})
    out, err = capfd.readouterr()
    assert "Sampling:" not in out + err and "Iteration" not in out + err
    if stan_backend_name == "httpstan":
        assert "sampling" in err and "120/120" in err
    else:
        assert "chain 1" in err.lower()


def test_compile_announcement(capsys):
    from pydial.stan.backend import announce_compile

    announce_compile("dial_sample", "httpstan")
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "'dial_sample'" in err and "about a minute the first time" in err


def test_interval_settings():
    import arviz as az

    from pydial.stan import interval_settings

    before = az.rcParams["stats.ci_prob"]
    with interval_settings(0.9):
        assert az.rcParams["stats.ci_prob"] == 0.9
    assert az.rcParams["stats.ci_prob"] == before
    with pytest.raises(ValueError):
        interval_settings(1.5)


def test_log_lik_per_judgment(models):
    """log_lik="judgment": one log-probability per judgment, equal to log sigma(+-eta) at the draws; the
    posterior is that of the aggregated cells; LOO runs on it."""
    from scipy.special import log_expit

    from pydial.stan.idata import loo

    data = simulate(N=4, K=2, rank=0, n_llm=300, n_human=200, seed=3).comparisons
    kw = dict(method="human", chains=2, draws=300, warmup=300, seed=4)
    per_j = posterior(data, options={"log_lik": "judgment"}, **kw)
    per_c = posterior(data, **kw)
    assert per_c.attrs["log_lik_unit"] == "cell" and per_j.attrs["log_lik_unit"] == "judgment"
    ll = per_j.log_likelihood["log_lik"]
    assert ll.dims == ("chain", "draw", "judgment") and ll.sizes["judgment"] == data.n_human
    labels = [str(x) for x in ll["judgment"].values]
    assert len(set(labels)) == len(labels)
    H = data.human
    # reference: each judgment's log-probability from the draws of s_H
    s = per_j.posterior["s_H"].to_numpy()
    outcome_i = np.array(["/i#" in lab for lab in labels])
    cells = [lab.split("/")[0] for lab in labels]
    pair = {f"{data.human_judge}:{data.items[i]}-{data.items[j]}": (i, j) for i, j in zip(H.i, H.j)}
    ii = np.array([pair[c][0] for c in cells])
    jj = np.array([pair[c][1] for c in cells])
    eta = s[..., ii] - s[..., jj]
    np.testing.assert_allclose(ll.to_numpy(), np.where(outcome_i, log_expit(eta), log_expit(-eta)), rtol=1e-8)
    assert per_j.observed_data["wins_i"].sum() == H.y.sum()
    # the same posterior either way (Monte Carlo error only)
    m_j = per_j.posterior["s_H"].mean(("chain", "draw")).to_numpy()
    m_c = per_c.posterior["s_H"].mean(("chain", "draw")).to_numpy()
    sd = per_c.posterior["s_H"].std(("chain", "draw")).to_numpy()
    assert np.all(np.abs(m_j - m_c) < 0.25 * sd)
    res = loo(per_j)
    assert np.isfinite(res["elpd_loo"]) and res["n_data_points"] == data.n_human


def test_like_with_ties(models):
    """A tie-model fit (Davidson-Beaver judges) and its posterior: same estimand, matching intervals;
    the posterior without ties is refused by name."""
    data = simulate(N=5, K=2, rank=0, n_llm=6000, n_human=500, seed=11, tie_rate=0.2, ties="davidson").comparisons
    res = fit(data, "judges", ties="davidson", cov_type="fisher")  # Bernstein-von Mises: the model-based intervals
    assert res.ok, res.verdict()
    idata = posterior(data, like=res, seed=3, **DRAWS)
    est = estimand(idata)
    assert est.spec.ties == "davidson" and est.spec.method == "judges"
    tab = compare_intervals(res, idata)
    assert np.all(np.abs(tab["shift_se"]) < 0.25), tab["shift_se"]
    assert np.all((tab["width_ratio"] > 0.8) & (tab["width_ratio"] < 1.2)), tab["width_ratio"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = posterior(data, method="judges", options={"include_human": False}, seed=3, chains=1, draws=50, warmup=50)
    with pytest.raises(EstimandMismatchError, match="ties: fit 'davidson' vs posterior None"):
        compare_intervals(res, plain)


def test_the_posterior_of_a_spec_is_that_of_its_fit(models, pairs, sim_data):
    """``posterior(data, spec=result.spec)`` estimates what the fit's spec says: the same record as ``like=``."""
    for m in ("human", "dial-anc"):
        res = pairs[m].res
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = posterior(sim_data, spec=res.spec, chains=1, draws=30, warmup=30, seed=2)
        got, want = estimand(idata), estimand(pairs[m].idata)
        assert got.spec == want.spec == res.spec, m
