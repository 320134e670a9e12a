"""The InferenceData layer (pydial/stan/idata.py) on the installed arviz, 0.x or 1.x; no Stan needed.

A posterior is built from arrays with a known layout and estimand record; the tests check
what arviz itself reads back (groups, coordinates, attributes, LOO), that the record
survives a netCDF round trip, and that :func:`compare_intervals` refuses a posterior
without a record unless told otherwise, and one of another estimator always.
"""

from __future__ import annotations

import json
import types

import numpy as np
import pandas as pd
import pytest
from scipy.special import log_expit
from scipy.stats import norm

from pydial import EstimandMismatchError, ModelSpec
from pydial.stan import compare_intervals
from pydial.stan import idata as azio
from pydial.stan.bayes import estimand
from pydial.stan.dial_posterior import Estimand

ITEMS = ["a", "b", "c"]
CELLS = ["human:a-b", "human:a-c", "human:b-c"]


def _record(method: str = "human") -> str:
    return json.dumps(Estimand(ModelSpec(method), "none", "s_H").to_record())


def _posterior(attrs: dict | None = None, seed: int = 0):
    """Draws of s_H ~ N(m, 0.1^2) (centred) and the binary log-likelihood of three human cells at them."""
    rng = np.random.default_rng(seed)
    m = np.array([0.5, 0.0, -0.5])
    s = m + 0.1 * rng.standard_normal((2, 500, 3))
    s -= s.mean(axis=2, keepdims=True)
    i, j = np.array([0, 0, 1]), np.array([1, 2, 2])
    wins_i, wins_j = np.array([6, 8, 5]), np.array([4, 2, 5])
    eta = s[..., i] - s[..., j]
    log_lik = wins_i * log_expit(eta) + wins_j * log_expit(-eta)
    groups = {"posterior": {"s_H": s}, "log_likelihood": {"log_lik": log_lik},
              "observed_data": {"wins_i": wins_i, "wins_j": wins_j},
              "sample_stats": {"diverging": np.zeros((2, 500), bool), "energy": rng.standard_normal((2, 500))}}
    dims = {"s_H": ["item"], "log_lik": ["cell"], "wins_i": ["cell"], "wins_j": ["cell"]}
    return azio.build(groups, coords={"item": ITEMS, "cell": CELLS}, dims=dims,
                      attrs={"estimand": _record(), "sampler_problems": "[]", "chains": 2} if attrs is None else attrs)


def _fit(method: str = "human"):
    """A frequentist result-like object: scores with Wald intervals, and the estimand of ``method``."""
    scores = pd.DataFrame({"score": [0.5, 0.0, -0.5], "se": [0.1, 0.1, 0.1]}, index=pd.Index(ITEMS, name="item"))
    z = norm.ppf(0.975)
    scores["ci_low"], scores["ci_high"] = scores["score"] - z * 0.1, scores["score"] + z * 0.1
    return types.SimpleNamespace(method=method, spec=ModelSpec(method), scores=scores, position_effects=None,
                                 level=0.95, rank=None, lambda_=float("nan"), cov_type="fisher")


def test_layout_read_back_by_arviz():
    idata = _posterior()
    assert set(azio.group_names(idata)) == {"posterior", "log_likelihood", "observed_data", "sample_stats"}
    post = azio.group_dataset(idata, "posterior")
    assert post["s_H"].dims == ("chain", "draw", "item")
    assert [str(v) for v in post["item"].values] == ITEMS
    assert azio.group_dataset(idata, "log_likelihood")["log_lik"].dims == ("chain", "draw", "cell")
    assert idata.attrs["chains"] == 2 and json.loads(idata.attrs["sampler_problems"]) == []
    assert estimand(idata).spec == ModelSpec("human")
    # the record is on the posterior group too (kept by tools that pass only that group on)
    assert json.loads(azio.posterior_attrs(post)["estimand"])["scores"] == "s_H"
    assert ModelSpec.from_record(json.loads(idata.attrs["estimand"])["spec"]) == ModelSpec("human")


def test_loo_equals_the_importance_sampling_reference():
    """PSIS-LOO through arviz; with k-hat small it is close to plain importance-sampling LOO, computed here."""
    idata = _posterior()
    res = azio.loo(idata)
    ll = azio.group_dataset(idata, "log_likelihood")["log_lik"].to_numpy().reshape(-1, 3)
    # IS-LOO: elpd_i = -log mean_s exp(-log_lik_is)
    is_loo = -np.log(np.mean(np.exp(-ll), axis=0))
    assert res["n_data_points"] == 3 and res["max_pareto_k"] < 0.7
    np.testing.assert_allclose(res["elpd_loo"], is_loo.sum(), atol=0.05)
    table = azio.compare({"one": idata, "two": _posterior(seed=1)})
    assert set(table.index) == {"one", "two"}


def test_diagnostics_reference():
    """R-hat near 1 and ESS near the number of draws for independent normal draws; BFMI = 2 for white noise
    energies (E[(dE)^2] / Var(E) = 2 for independent draws)."""
    rng = np.random.default_rng(3)
    rhat, bulk, tail = azio.rhat_ess(rng.standard_normal((4, 2000, 2)))
    assert np.all(np.abs(rhat - 1) < 0.01) and np.all(bulk > 5000) and np.all(tail > 4000)
    e = azio.bfmi(rng.standard_normal((3, 4000)))
    np.testing.assert_allclose(e, 2.0, rtol=0.08)
    stuck = np.concatenate([rng.standard_normal((1, 2000, 1)), 3 + rng.standard_normal((1, 2000, 1))])
    assert azio.rhat_ess(stuck)[0][0] > 1.5


def test_estimand_survives_netcdf(tmp_path):
    idata = _posterior()
    path = tmp_path / "posterior.nc"
    idata.to_netcdf(str(path))
    back = azio.arviz().from_netcdf(str(path))
    assert estimand(back) == estimand(idata)
    assert set(azio.group_names(back)) == set(azio.group_names(idata))
    np.testing.assert_array_equal(azio.group_dataset(back, "posterior")["s_H"].to_numpy(),
                                  azio.group_dataset(idata, "posterior")["s_H"].to_numpy())
    tab = compare_intervals(_fit(), back)
    assert tab.attrs["estimand"].startswith("human")


def test_compare_refuses_a_posterior_without_a_record():
    plain = _posterior(attrs={})
    assert estimand(plain) is None
    with pytest.raises(EstimandMismatchError, match="no estimand record") as err:
        compare_intervals(_fit(), plain)
    assert "estimand" in err.value.mismatch
    tab = compare_intervals(_fit(), plain, allow_unrecorded=True)
    assert "not checked" in tab.attrs["estimand"]
    # the numbers: posterior sd 0.1 * sqrt(2/3) after centring three items, against a Wald se of 0.1
    np.testing.assert_allclose(tab["post_sd"], 0.1 * np.sqrt(2 / 3), rtol=0.06)


def test_compare_refuses_another_estimator():
    """A human fit against a posterior recorded as dial-anc: refused by name (on every arviz version)."""
    other = _posterior(attrs={"estimand": _record("dial-anc")})
    with pytest.raises(EstimandMismatchError, match="method: fit 'human' vs posterior 'dial-anc'") as err:
        compare_intervals(_fit(), other)
    assert err.value.mismatch == {"method": ("human", "dial-anc")}


def test_unsupported_arviz_is_named(monkeypatch):
    from pydial import DependencyError

    az = azio.arviz()
    monkeypatch.setattr(az, "__version__", "0.16.1")
    with pytest.raises(DependencyError, match="arviz 0.16.1 is installed"):
        azio.arviz()
    monkeypatch.setattr(az, "__version__", "2.0.0")
    with pytest.raises(DependencyError, match="supports arviz"):
        azio.arviz()
