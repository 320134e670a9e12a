"""Response covariates in the structured DIAL models (``logit p = S_ki - S_kj + a b_k + z' beta_k``).

References are independent of the code under test: central finite differences of the loss,
explicit dense sums over the cells, statsmodels' GLM on the models that are GLMs (the
full-rank LLM-only model is the per-judge model; the calibration with the basis ``M`` held
fixed is a logistic regression on ``[D_H M, Z_H]``), and the simulation's true effects.
"""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from fdcheck import fd_jacobian

import pydial
from pydial.estimation.glm import llm_only_fit, staged_fit
from pydial.exceptions import ArgumentError
from pydial.model.chart import Chart
from pydial.model.likelihood import Objective
from pydial.model.cells import CellJacobian

BETA = np.array([[0.5, 0.2], [0.3, 0.0], [0.1, -0.2], [0.0, 0.0]])  # three judges, then the people


@pytest.fixture(scope="module")
def sim():
    return pydial.simulate(N=8, K=3, n_llm=30_000, n_human=4_000, covariates=["length", "lists"], beta=BETA, seed=5)


@pytest.fixture(scope="module")
def data(sim):
    return sim.comparisons


# ------------------------------------------------------------------ the loss
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("calibration,ties", [(None, None), ("W", None), ("mu", "davidson")])
def test_objective_derivatives_match_finite_differences(shared, calibration, ties):
    d = pydial.simulate(N=6, K=3, n_llm=3000, n_human=600, covariates=["length", "lists"], beta=0.4, seed=1,
                        tie_rate=0.1 if ties else 0.0, ties=ties).comparisons
    ch = Chart.for_data(d, 1, calibration, True, shared)
    obj = Objective.weighted(ch, d, np.inf if calibration is None else 2.0, ties=ties)
    x = np.random.default_rng(2).normal(scale=0.3, size=obj.dim)
    _, g, H = obj.value_grad_hess(x)
    np.testing.assert_allclose(g, fd_jacobian(lambda t: np.array([obj.value(t)]), x)[0], atol=1e-8)
    np.testing.assert_allclose(H, fd_jacobian(lambda t: obj.value_grad_hess(t)[1], x), atol=1e-7)


@pytest.mark.parametrize("shared", [False, True])
def test_factored_sums_match_dense_sums_over_the_cells(data, shared):
    """The Hessian and the cell-clustered meat's Gram: factored totals vs the explicit Jacobian."""
    ch = Chart.for_data(data, 1, "W", True, shared)
    obj = Objective.weighted(ch, data, 3.0)
    assert obj._pair_chunks is not None  # the factored path
    theta = np.random.default_rng(0).normal(scale=0.3, size=ch.dim)
    J = obj.full_jacobian(theta).toarray()
    assert J.shape[1] == ch.dim_full and np.any(J[:, ch.off_beta:] != 0.0)  # the covariate columns are there
    r = np.random.default_rng(1).normal(size=J.shape[0])
    c = obj.cells
    _, cluster = np.unique((c.g * data.N + c.i) * data.N + c.j, return_inverse=True)  # cells of both orders and all z
    G = np.zeros((cluster.max() + 1, J.shape[1]))
    np.add.at(G, cluster, r[:, None] * J)
    np.testing.assert_allclose(CellJacobian(obj, theta).cluster_gram(cluster, r), G.T @ G, atol=1e-9)
    np.testing.assert_allclose(CellJacobian(obj, theta).gram(r ** 2), J.T @ (r[:, None] ** 2 * J), atol=1e-9)
    generic = Objective.weighted(ch, data, 3.0)
    generic.__dict__["_pair_chunks"] = None  # the per-group sums of sparse designs
    np.testing.assert_allclose(generic.value_grad_hess(theta)[2], obj.value_grad_hess(theta)[2], atol=1e-12)
    np.testing.assert_allclose(CellJacobian(generic, theta).cluster_gram(cluster, r), G.T @ G, atol=1e-9)


# ------------------------------------------------------------------ GLM references
def _judgment_design(data, shared: bool):
    """The full-rank LLM-only model as one GLM: per judge ``[D_k T, a_k]``, then ``z`` per judge or shared."""
    L = data.llm
    N, K, p = data.N, data.K, data.p
    T = np.vstack([np.eye(N - 1), -np.ones((1, N - 1))])
    D = np.zeros((len(L), N))
    D[np.arange(len(L)), L.i] += 1.0
    D[np.arange(len(L)), L.j] -= 1.0
    blocks = [np.where((L.judge == k)[:, None], D @ T, 0.0) for k in range(K)]
    order = [np.where(L.judge == k, L.a, 0.0)[:, None] for k in range(K)]
    if shared:
        z = [L.z]
    else:
        z = [np.where((L.judge == k)[:, None], L.z, 0.0) for k in range(K)]
    return np.hstack(blocks + order + z), np.column_stack([L.y, L.n - L.y])


@pytest.mark.parametrize("shared", [False, True])
def test_full_rank_llm_only_fit_is_the_judges_glm(data, shared):
    """At rank K - 1 the structured LLM-only model is the per-judge model: the same MLE as statsmodels' GLM."""
    X, Y = _judgment_design(data, shared)
    ref = sm.GLM(Y, X, family=sm.families.Binomial()).fit(tol=1e-14)
    chL, thL, _, _ = llm_only_fit(data, data.K - 1, True, shared)
    K, N = data.K, data.N
    np.testing.assert_allclose(chL.covariate_effects(thL).ravel(), ref.params[K * N:], atol=1e-6)
    np.testing.assert_allclose(chL.order_effects(thL), ref.params[K * (N - 1):K * N], atol=1e-6)
    if not shared:  # and the judges method gives the same effects
        j = pydial.fit(data, "judges")
        np.testing.assert_allclose(j.covariate_effects["beta"].to_numpy(), ref.params[K * N:], atol=1e-6)


def test_staged_calibration_is_the_glm_on_the_calibration_design(data):
    """With the basis ``M`` of the LLM-only fit held fixed, ``(c, beta_H)`` is a logistic regression on ``[D_H M, Z_H]``."""
    sf = staged_fit(data, 1, "W")
    M = sf.llm_chart.structure(sf.llm_theta).basis("W")
    H = data.human
    D = np.zeros((len(H), data.N))
    D[np.arange(len(H)), H.i] += 1.0
    D[np.arange(len(H)), H.j] -= 1.0
    ref = sm.GLM(np.column_stack([H.y, H.n - H.y]), np.hstack([D @ M, H.z]), family=sm.families.Binomial()).fit(tol=1e-14)
    np.testing.assert_allclose(sf.cal_opt.x, ref.params, atol=1e-6)
    np.testing.assert_allclose(sf.chart.human_effects(sf.theta), ref.params[-2:], atol=1e-6)
    with pytest.warns(pydial.CovarianceWarning, match="zero variance for judge0:length"):  # M fixed: no stage one
        res = pydial.fit(data, "dial-anc", calibration="W", cov_type="fisher", anchored_cov_type="fixed-basis")
    np.testing.assert_allclose(res.covariate_effects.loc["human", "beta"].to_numpy(), ref.params[-2:], atol=1e-6)
    np.testing.assert_allclose(res.covariate_effects.loc["human", "se"].to_numpy(), ref.bse[-2:], rtol=1e-4)


# ------------------------------------------------------------------ the estimators
@pytest.mark.parametrize("method", ["dial-anc", "dial-ada"])
def test_simulated_length_bias_is_recovered_by_dial(sim, data, method):
    res = pydial.fit(data, method)
    ce = res.covariate_effects
    assert list(ce.index.get_level_values("judge").unique()) == [*data.judges, data.human_judge]
    truth = BETA * data.covariate_scale.to_numpy()  # per standard deviation of the covariate
    err = (ce["beta"].to_numpy() - truth.ravel()) / ce["se"].to_numpy()
    assert np.all(np.abs(err) < 4.0), err
    assert "style-controlled at z = 0" in res.summary()
    # the judges prefer length more than people do; people's own effect is 0
    assert res.covariate_test("judge0", against=data.human_judge)["p_value"] < 1e-6
    assert res.covariate_test(data.human_judge)["p_value"] > 1e-3
    # every meat: the judgment-level ones agree with the observed information (one record per judgment);
    # the judge-pair cells (28 per judge) cluster judgments of many covariate values, a noisier meat
    fisher = res.with_cov("fisher").covariate_effects["se"].to_numpy()
    for cov in ("binomial", "record"):
        np.testing.assert_allclose(res.with_cov(cov).covariate_effects["se"].to_numpy(), fisher, rtol=0.1)
    assert np.all(np.isfinite(ce["se"])) and np.allclose(ce["se"].to_numpy(), fisher, rtol=0.5)


def test_shared_effects_and_ties(data):
    res = pydial.fit(data, "dial-ada", covariate_effects="shared")
    assert list(res.covariate_effects.index.get_level_values("judge").unique()) == ["LLM judges (shared)", "human"]
    tie = pydial.simulate(N=8, K=3, n_llm=20_000, n_human=3_000, covariates=["length"], beta=0.5, seed=2,
                          tie_rate=0.15, ties="davidson").comparisons
    rt = pydial.fit(tie, "dial-anc", ties="davidson")
    assert np.all(np.isfinite(rt.covariate_effects["se"])) and rt.tie_parameters is not None
    assert np.allclose(rt.covariate_effects.loc[tie.judges[0], "beta"], 0.5 * tie.covariate_scale.iloc[0], atol=0.15)


def test_unknown_covariate_effects_are_refused(data):
    with pytest.raises(ArgumentError, match="covariate_effects"):
        pydial.fit(data, "dial-anc", covariate_effects="per-judge")


def test_beta_intervals_cover_near_the_nominal_level():
    """95% sandwich intervals of every judge's and the people's beta over 60 simulated data sets (DIAL-Anc)."""
    beta = np.array([[0.6], [0.3], [0.0]])
    hits = []
    for seed in range(60):
        d = pydial.simulate(N=6, K=2, n_llm=4_000, n_human=800, covariates=["length"], beta=beta, seed=100 + seed
                            ).comparisons
        ce = pydial.fit(d, "dial-anc", cov_type="binomial").covariate_effects
        truth = beta.ravel() * d.covariate_scale.iloc[0]
        hits.append((ce["ci_low"].to_numpy() <= truth) & (truth <= ce["ci_high"].to_numpy()))
    cover = np.mean(hits)
    assert 0.9 <= cover <= 0.99, cover  # 180 intervals: binomial sd 0.016 around 0.95


def test_planning_refuses_covariates(data):
    res = pydial.fit(data, "dial-anc")
    for call in (lambda: pydial.plan(res, budgets=[100]), lambda: pydial.next_pairs(res, 3)):
        with pytest.raises(ArgumentError, match="does not model them yet"):
            call()


def test_bootstrap_reports_beta_intervals(data):
    res = pydial.fit(data, "dial-anc")
    bs = res.bootstrap(40, seed=3)
    ce = bs.covariate_effects
    assert list(ce.index) == list(res.covariate_effects.index)
    np.testing.assert_array_equal(ce["estimate"], res.covariate_effects["beta"])
    # record resampling reproduces the sandwich standard errors of the judgment-level meat
    np.testing.assert_allclose(ce["boot_se"], res.with_cov("record").covariate_effects["se"], rtol=0.35)


def test_gacv_human_loss_includes_the_people_covariate_term(data):
    """GACV's l_H of a finite weight: the people's binomial loss at the fitted scores and beta_H, summed by hand."""
    res = pydial.fit(data, "dial-ada", lambda_=[2.0], include_endpoints=False)
    s = res.scores["score"].reindex(list(data.items)).to_numpy()
    beta_h = res.covariate_effects.loc[data.human_judge, "beta"].to_numpy()
    H = data.human
    eta = s[H.i] - s[H.j] + H.z @ beta_h
    l_h = np.sum(H.n * np.logaddexp(0.0, eta) - H.y * eta) / H.n.sum()
    row = res.gacv.loc[res.gacv["lambda"] == 2.0].iloc[0]
    assert row["l_H"] == pytest.approx(l_h, rel=1e-10)
    assert res.loss_human == pytest.approx(l_h, rel=1e-10)
