"""Covariances on demand: ``DialResult.with_cov`` and ``cov_params(cov_type=)`` against refits and statsmodels.

References:

* a refit with ``cov=`` (and ``anchored_cov=``, ``cluster_correction=``): its tables are
  computed by the estimators themselves, so ``with_cov`` must reproduce them to 1e-12;
* statsmodels' ``Logit(...).fit(cov_type="cluster", cov_kwds={"groups": record,
  "use_correction": False})`` for the record meat of ``human`` and ``judges`` (the
  judges' likelihoods are separable, so one logistic regression with a block design
  per judge is the judges' fits side by side), to 1e-8;
* the factor ``G/(G-1)`` written out for the small-sample cluster correction.
"""

from __future__ import annotations

import dataclasses

import warnings

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial.data.comparisons import I_WINS, J_WINS

METHODS = ["human", "judges", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc"]
TIE_METHODS = ["human", "judges", "pooled", "dial-anc", "dial-ada", "atc"]
MEATS = ["fisher", "binomial", "cell", "record"]
TABLES = ["scores", "cov", "position_effects", "position_effects_cov", "consensus", "tie_parameters", "judge_scores_se"]


@pytest.fixture(scope="module")
def data():
    return pydial.simulate(N=5, K=3, rank=1, n_llm=4000, n_human=600, seed=4).comparisons


@pytest.fixture(scope="module")
def tied():
    return pydial.simulate(N=5, K=3, rank=1, n_llm=6000, n_human=1500, seed=1, tie_rate=0.25).comparisons


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def quiet_fit(*args, **kwargs):
    return quiet(pydial.fit, *args, **kwargs)


def assert_same_tables(a, b):
    for name in TABLES:
        ta, tb = getattr(a, name), getattr(b, name)
        assert (ta is None) == (tb is None), name
        if ta is None:
            continue
        assert list(ta.index) == list(tb.index) and list(ta.columns) == list(tb.columns), name
        np.testing.assert_allclose(ta.to_numpy(float), tb.to_numpy(float), rtol=1e-12, atol=1e-12, err_msg=name)
    assert (a.cov_type, a.anchored_cov, a.cluster_correction, a.status) == (b.cov_type, b.anchored_cov, b.cluster_correction,
                                                                       b.status)


@pytest.mark.parametrize("method", METHODS)
def test_with_cov_equals_a_refit_for_every_meat(data, method):
    res = quiet_fit(data, method)
    for cov in MEATS:
        assert_same_tables(quiet(res.with_cov, cov), quiet_fit(data, method, cov_type=cov))
        if method != "atc":
            np.testing.assert_allclose(quiet(res.cov_params, cov).to_numpy(), quiet_fit(data, method, cov_type=cov).cov.to_numpy(),
                                       rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method", TIE_METHODS)
def test_with_cov_equals_a_refit_with_ties(tied, method):
    res = quiet_fit(tied, method, ties="davidson")
    assert res.tie_parameters["se"].notna().any()
    for cov in MEATS:
        assert_same_tables(quiet(res.with_cov, cov), quiet_fit(tied, method, cov_type=cov, ties="davidson"))


@pytest.mark.parametrize("ties", [None, "davidson"])
def test_fixed_basis_on_demand_equals_a_refit(data, tied, ties):
    d = data if ties is None else tied
    res = quiet_fit(d, "dial-anc", ties=ties)
    ref = quiet_fit(d, "dial-anc", anchored_cov_type="fixed-basis", ties=ties)
    assert ref.anchored_cov == "fixed-basis"
    assert_same_tables(quiet(res.with_cov, "fixed-basis"), ref)
    np.testing.assert_allclose(quiet(res.cov_params, "fixed-basis").to_numpy(), ref.cov.to_numpy(), rtol=1e-12, atol=1e-12)
    # dropping the LLM stage's estimation error can only shrink the variances
    assert np.all(np.diag(ref.cov) <= np.diag(res.cov) + 1e-15)


@pytest.mark.parametrize("method", ["judges", "dial-anc"])
@pytest.mark.parametrize("cov", ["cell", "record"])
def test_cluster_correction(data, method, cov):
    res = quiet_fit(data, method, cov_type=cov)
    on = quiet(res.with_cov, cluster_correction=True)
    assert_same_tables(on, quiet_fit(data, method, cov_type=cov, cluster_correction=True))
    # G/(G-1), with G the clusters of the meat behind each table: the record ids, or the judge-pair
    # cells (plus the independent human comparisons of the calibrated scores)
    f = data.frame[data.frame["outcome"].isin([I_WINS, J_WINS]) & ~data.frame["self"]]
    llm = f[f["k"] < data.K]
    if cov == "record":  # the records with a judgment in the fit
        G_b = llm["rec"].nunique()
        G_s = G_b if method == "judges" else f["rec"].nunique()
    else:
        G_b = len(llm.groupby(["k", "i", "j"]))
        G_s = G_b if method == "judges" else G_b + data.n_human
    np.testing.assert_allclose(on.position_effects_cov.to_numpy(), res.position_effects_cov.to_numpy() * G_b / (G_b - 1),
                               rtol=1e-12)
    np.testing.assert_allclose(on.cov.to_numpy(), res.cov.to_numpy() * G_s / (G_s - 1), rtol=1e-12)
    np.testing.assert_allclose(quiet(on.with_cov, cluster_correction=False).cov.to_numpy(), res.cov.to_numpy(), rtol=1e-12)
    assert quiet(res.with_cov, "fisher", cluster_correction=True).cov.equals(quiet_fit(data, method, cov_type="fisher").cov)


@pytest.mark.parametrize("what", ["scores", "b", "gamma"])
def test_cov_params_forms_one_target(data, what):
    """cov_params of another meat forms only the asked target (no tables, no verdict); it equals
    the covariance behind a refit's table with that meat."""
    res = quiet_fit(data, "dial-anc")
    ref = quiet_fit(data, "dial-anc", cov_type="record")
    C = quiet(res.cov_params, "record", what=what)
    names = list(data.items) if what == "scores" else list(data.judges)
    assert list(C.index) == list(C.columns) == names
    se = {"scores": ref.scores["se"], "b": ref.position_effects["se"], "gamma": ref.consensus["se"]}[what]
    np.testing.assert_allclose(np.sqrt(np.diag(C.to_numpy())), se.to_numpy(), rtol=1e-12)


def test_bad_requests(data):
    human = quiet_fit(data, "human")
    with pytest.raises(ValueError, match="cov_type must be one of"):
        human.with_cov("sandwich")
    with pytest.raises(ValueError, match="what="):
        human.cov_params("b")
    with pytest.raises(ValueError, match="DIAL methods only"):
        human.with_cov("fixed-basis")
    agg = pydial.Comparisons.from_counts(
        pd.DataFrame({"judge": ["h", "h", "h"], "item_a": ["a", "b", "a"], "item_b": ["b", "c", "c"], "first": "a",
                      "wins_a": [5, 6, 7], "wins_b": [3, 2, 4], "ties": 0}), human_judge="h")
    with pytest.raises(ValueError, match="aggregated"):
        quiet_fit(agg, "human").with_cov("record")
    bare = dataclasses.replace(human, estimate=dataclasses.replace(human.estimate, linearization=()))
    with pytest.raises(ValueError, match="carries no linearization"):
        bare.with_cov("cell")


def test_with_cov_keeps_the_verdict_honest():
    """A degenerate meat makes the new result's status 'degenerate covariance' (with the
    warning); a valid meat gives 'ok' back, as refits would."""
    from test_verdict import two_item_frame

    data = pydial.Comparisons.from_frame(two_item_frame())
    bad = quiet_fit(data, "judges")
    assert bad.status == "degenerate covariance"
    good = quiet(bad.with_cov, "binomial")
    assert good.ok and (good.scores["se"] > 0).all()
    with pytest.warns(pydial.CovarianceWarning, match="3 independent cluster"):
        again = good.with_cov("cell")
    assert again.status == "degenerate covariance" and again.scores["se"].isna().all()


# --------------------------------------------------------------- statsmodels' cluster covariance
def decisive_rows(data, human: bool) -> pd.DataFrame:
    f = data.frame
    keep = f["outcome"].isin([I_WINS, J_WINS]) & ~f["self"] & ((f["k"] == data.K) if human else (f["k"] < data.K))
    return f[keep]


def centering(N: int) -> np.ndarray:
    """Scores with the last item as reference (0) -> centered scores."""
    P = np.eye(N) - 1.0 / N
    return P[:, : N - 1]


def test_human_record_meat_equals_statsmodels_cluster(data):
    sm = pytest.importorskip("statsmodels.api")
    f = decisive_rows(data, human=True)
    N = data.N
    X = np.zeros((len(f), N))
    X[np.arange(len(f)), f["i"].to_numpy()] += 1.0
    X[np.arange(len(f)), f["j"].to_numpy()] -= 1.0
    z = (f["outcome"].to_numpy() == I_WINS).astype(float)
    ref = sm.Logit(z, X[:, : N - 1]).fit(disp=0, method="newton", tol=1e-14, maxiter=100, cov_type="cluster",
                                         cov_kwds={"groups": f["rec"].to_numpy(), "use_correction": False})
    P = centering(N)
    res = quiet_fit(data, "human").with_cov("record")
    np.testing.assert_allclose(res.scores["score"].to_numpy(), P @ ref.params, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(res.cov.to_numpy(), P @ ref.cov_params() @ P.T, rtol=1e-8, atol=1e-12)


def test_judges_record_meat_equals_statsmodels_cluster(data):
    """One logistic regression with a block design per judge (scores with the last item as
    reference, and b) is the judges' separable fits side by side; its record-clustered
    covariance, mapped to the mean centered scores and the b's, is the ``judges`` fit's."""
    sm = pytest.importorskip("statsmodels.api")
    f = decisive_rows(data, human=False)
    N, K = data.N, data.K
    rows, k = np.arange(len(f)), f["k"].to_numpy()
    X = np.zeros((len(f), K * N))
    X[rows, k * N + f["i"].to_numpy()] += 1.0
    X[rows, k * N + f["j"].to_numpy()] -= 1.0
    X[rows, k * N + N - 1] = f["a"].to_numpy()  # the last item's column carries the display order instead
    z = (f["outcome"].to_numpy() == I_WINS).astype(float)
    ref = sm.Logit(z, X).fit(disp=0, method="newton", tol=1e-14, maxiter=100, cov_type="cluster",
                             cov_kwds={"groups": f["rec"].to_numpy(), "use_correction": False})
    V = ref.cov_params()
    P = centering(N)
    A_s = np.hstack([np.hstack([P, np.zeros((N, 1))]) / K for _ in range(K)])  # mean centered score
    A_b = np.zeros((K, K * N))
    A_b[np.arange(K), np.arange(K) * N + N - 1] = 1.0
    res = quiet_fit(data, "judges").with_cov("record")
    np.testing.assert_allclose(res.position_effects["b"].to_numpy(), A_b @ ref.params, rtol=1e-8)
    np.testing.assert_allclose(res.cov.to_numpy(), A_s @ V @ A_s.T, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(res.position_effects_cov.to_numpy(), A_b @ V @ A_b.T, rtol=1e-8, atol=1e-12)
    # each judge's own scores: the diagonal blocks
    for kk in range(K):
        Vk = V[kk * N: kk * N + N - 1, kk * N: kk * N + N - 1]
        np.testing.assert_allclose(res.judge_scores_se.iloc[kk].to_numpy(), np.sqrt(np.diag(P @ Vk @ P.T)), rtol=1e-8)


def test_with_cov_at_the_fits_own_settings_is_a_copy():
    tie = quiet_fit(pydial.simulate(N=4, K=2, rank=1, n_llm=2000, n_human=800, seed=3, tie_rate=0.2).comparisons, "human",
                    ties="davidson")
    same = tie.with_cov("fisher")  # the fit's own meat: nothing to recompute
    assert same is not tie and same.cov.equals(tie.cov) and same.tie_parameters.equals(tie.tie_parameters)
