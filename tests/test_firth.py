"""Firth / Jeffreys-prior bias reduction (pydial.model.penalty, ``fit(..., penalty="firth")``).

References: the closed form of the two-item case (the Firth estimate of a single
binomial log-odds is ``log((y + 1/2)/(n - y + 1/2))``); the adjusted-score identity
``X^T (y - n p + h (1/2 - p)) = 0`` with leverages from the hat matrix written out
here; a direct scipy maximization of ``l + 1/2 log det I`` with no pydial derivatives;
central finite differences for every gradient and Hessian.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import expit

import pydial
from fdcheck import fd_jacobian
from pydial.model.chart import centering_basis
from pydial.estimation.glm import fit_human_btl, fit_order_btl, glm
from pydial.model.glm import binary_counts
from pydial.model.chart import difference_design
from pydial.model.likelihood import Objective, tie_totals
from pydial.model.cells import binomial_nll
from pydial.model.chart import Chart
from pydial.model.penalty import FirthPenalty


def human_frame(triples: list[tuple[str, str, int, int]], llm: pd.DataFrame | None = None) -> pydial.Comparisons:
    """Long frame from ``(item_a, item_b, wins of a, losses of a)`` human tallies."""
    rows = []
    for a, b, w, l in triples:
        rows += [(a, b, "a")] * w + [(a, b, "b")] * l
    df = pd.DataFrame(rows, columns=["item_a", "item_b", "winner"])
    df["judge"] = "human"
    df["first"] = "a"
    df["record_id"] = [f"h{t}" for t in range(len(df))]
    if llm is not None:
        df = pd.concat([llm, df], ignore_index=True)
    return pydial.Comparisons.from_frame(df)


# ------------------------------------------------------------ closed form
@pytest.mark.parametrize("y,n", [(0, 5), (5, 5), (3, 10), (1, 1), (17, 20)])
def test_two_items_closed_form(y, n):
    data = human_frame([("A", "B", y, n - y)])
    res = pydial.fit(data, "human", penalty="firth")
    s = res.scores["score"]
    assert s["A"] - s["B"] == pytest.approx(np.log((y + 0.5) / (n - y + 0.5)), abs=1e-9)
    assert res.converged and res.penalty == "firth"


def test_two_items_mle_refused_without_penalty():
    data = human_frame([("A", "B", 4, 0)])
    with pytest.raises(pydial.IdentifiabilityError, match="human-mle"):
        pydial.fit(data, "human")
    with pytest.raises(ValueError, match="penalty must be one of"):
        pydial.fit(data, "human", penalty="ridge")


# ------------------------------------------------------------ separation
def _adjusted_score(X, n, y, beta):
    """Firth's adjusted score with leverages from the hat matrix W^1/2 X (X^T W X)^-1 X^T W^1/2."""
    p = expit(X @ beta)
    w = n * p * (1 - p)
    Xw = X * np.sqrt(w)[:, None]
    h = np.diag(Xw @ np.linalg.solve(Xw.T @ Xw, Xw.T))
    return X.T @ (y - n * p + h * (0.5 - p))


def test_separated_human_design_is_finite_with_zero_adjusted_score():
    # A beats everyone, everyone beats D: complete separation, no finite MLE.
    data = human_frame([("A", "B", 3, 0), ("A", "C", 2, 0), ("B", "C", 2, 1), ("B", "D", 4, 0), ("C", "D", 3, 0),
                        ("A", "D", 1, 0)])
    with pytest.raises(pydial.IdentifiabilityError):
        pydial.fit(data, "human")
    res = pydial.fit(data, "human", penalty="firth")
    s = res.scores["score"].to_numpy()
    assert np.all(np.isfinite(s)) and np.abs(s).max() < 5 and res.converged
    assert np.all(np.isfinite(res.scores["se"]))
    H = data.human
    T = centering_basis(data.N)
    X = difference_design(H.i, H.j, data.N) @ T
    beta = np.linalg.lstsq(T, s, rcond=None)[0]
    np.testing.assert_allclose(_adjusted_score(X, H.n, H.y, beta), 0.0, atol=1e-8)
    assert s[0] > s[1] > s[3] and s[0] > s[2] > s[3]


def test_disconnected_human_design_still_refused():
    data = human_frame([("A", "B", 2, 1), ("C", "D", 1, 2)])
    with pytest.raises(pydial.IdentifiabilityError, match="human-connected"):
        pydial.fit(data, "human", penalty="firth")


def test_separated_judge_is_finite_with_zero_adjusted_score():
    rng = np.random.default_rng(3)
    items = ["A", "B", "C", "D"]
    rows = []
    for t in range(60):
        a, b = rng.choice(4, 2, replace=False)
        winner = "a" if a < b else "b"  # the judge always prefers the lower index: separated
        rows.append((f"r{t}", "j1", items[a], items[b], "a" if t % 2 else "b", winner))
    df = pd.DataFrame(rows, columns=["record_id", "judge", "item_a", "item_b", "first", "winner"])
    data = pydial.Comparisons.from_frame(df)
    with pytest.raises(pydial.IdentifiabilityError, match="separation"):
        pydial.fit(data, "judges")
    res = pydial.fit(data, "judges", penalty="firth")
    assert np.all(np.isfinite(res.scores["score"])) and res.converged
    L = data.llm
    T = centering_basis(data.N)
    X = np.column_stack([difference_design(L.i, L.j, data.N) @ T, L.a.astype(float)])
    f = fit_order_btl(L, data.N, penalty="firth")
    np.testing.assert_allclose(_adjusted_score(X, L.n, L.y, f.opt.x), 0.0, atol=1e-8)


# --------------------------------------------------- independent optimum
def test_glm_firth_matches_direct_maximization():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((25, 3))
    n = rng.integers(1, 6, 25).astype(float)
    y = rng.binomial(n.astype(int), expit(X @ np.array([1.0, -2.0, 0.5]))).astype(float)

    def neg_penalized(beta):
        eta = X @ beta
        p = expit(eta)
        ll = np.sum(y * eta - n * np.logaddexp(0, eta))
        return -(ll + 0.5 * np.linalg.slogdet((X.T * (n * p * (1 - p))) @ X)[1])

    ref = minimize(neg_penalized, np.zeros(3), method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000, "maxfev": 40000}).x
    got = glm(None, binary_counts(n, y), X, penalty="firth")
    assert got.converged
    np.testing.assert_allclose(got.x, ref, atol=1e-6)


def test_firth_and_ml_converge_at_rate_one_over_n():
    # Same win proportions at m times the counts: the MLE is fixed, Firth - ML = O(1/m).
    base = [("A", "B", 3, 2), ("B", "C", 2, 1), ("A", "C", 4, 1), ("C", "D", 3, 2), ("B", "D", 1, 2), ("A", "D", 2, 1)]
    gaps = []
    for m in (4, 16, 64):
        data = human_frame([(a, b, m * w, m * l) for a, b, w, l in base])
        ml = fit_human_btl(data.human, data.N).s
        fi = fit_human_btl(data.human, data.N, penalty="firth").s
        gaps.append(np.abs(fi - ml).max())
    assert gaps[0] > gaps[1] > gaps[2] > 0
    ratios = np.array(gaps[:-1]) / np.array(gaps[1:])
    np.testing.assert_allclose(ratios, 4.0, rtol=0.15)
    # and the penalty shrinks towards 0 (Firth's estimate is closer to zero than the MLE here)
    data = human_frame(base)
    ml = fit_human_btl(data.human, data.N).s
    fi = fit_human_btl(data.human, data.N, penalty="firth").s
    assert np.linalg.norm(fi) < np.linalg.norm(ml)


# ---------------------------------------------------------- derivatives
@pytest.mark.parametrize("chart", ["eta", "glm"])
def test_penalty_derivatives_match_finite_differences(chart):
    """``FirthPenalty`` in the predictors ``eta`` and in the GLM chart ``eta = X beta``."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((12, 4))
    pen = FirthPenalty(X, rng.integers(1, 5, 12).astype(float), weight=0.3)
    terms = pen.derivatives if chart == "eta" else pen.terms
    x = rng.standard_normal(12 if chart == "eta" else 4)
    f, g, H = terms(x)
    assert f == pytest.approx(pen.value(None, x) if chart == "eta" else pen.value(x))
    np.testing.assert_allclose(g, fd_jacobian(lambda z: np.array([terms(z)[0]]), x)[0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(H, fd_jacobian(lambda z: terms(z)[1], x), rtol=1e-5, atol=1e-8)


@pytest.fixture(scope="module")
def sim():
    return pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=60, seed=11).comparisons


@pytest.mark.parametrize("cal,r", [("mu", 1), ("W", 1), ("mu", 0)])
def test_penalized_joint_objective_derivatives(sim, cal, r):
    chart = Chart(sim.N, sim.K, r, cal, True)
    obj = Objective.weighted(chart, sim, 5.0, "firth")
    plain = Objective.weighted(chart, sim, 5.0)
    theta = 0.5 * np.random.default_rng(4).standard_normal(chart.dim)
    f, g, H = obj.value_grad_hess(theta)
    assert f == pytest.approx(obj.value(theta))
    assert f != pytest.approx(plain.value(theta))
    np.testing.assert_allclose(g, fd_jacobian(lambda t: np.array([obj.value(t)]), theta)[0], rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(H, fd_jacobian(lambda t: obj.value_grad_hess(t)[1], theta), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("cal", ["mu", "W"])
def test_joint_penalty_is_the_calibration_jeffreys_prior(sim, cal):
    chart = Chart(sim.N, sim.K, 1, cal, True)
    obj = Objective.weighted(chart, sim, 5.0, "firth")
    plain = Objective.weighted(chart, sim, 5.0)
    theta = 0.5 * np.random.default_rng(5).standard_normal(chart.dim)
    # written from the definition: M = the item factors of the calibration (B e1 or B)
    phi = chart.to_full(theta)
    B = phi[chart.off_B: chart.off_b].reshape(sim.N, chart.q)
    M = B[:, :1] if cal == "mu" else B
    H = sim.human
    s = chart.scores(theta)
    p = expit(s[H.i] - s[H.j])
    X = difference_design(H.i, H.j, sim.N) @ M
    ref = np.linalg.slogdet((X.T * (H.n * p * (1 - p))) @ X)[1] - np.linalg.slogdet(M.T @ M)[1]
    assert obj.value(theta) - plain.value(theta) == pytest.approx(-0.5 * ref / sim.n_human, rel=1e-10)


def test_joint_penalty_is_gauge_invariant_and_allows_items_unseen_by_people(sim):
    from pydial.estimation.glm import fit_structured, initial_theta

    chart = Chart(sim.N, sim.K, 1, "W", True)
    obj = Objective.weighted(chart, sim, 5.0, "firth")
    theta = 0.5 * np.random.default_rng(6).standard_normal(chart.dim)
    moved = chart.canonical(theta)  # a gauge move: same (s, S, b)
    np.testing.assert_allclose(chart.scores(moved), chart.scores(theta), atol=1e-10)
    assert obj.value(moved) == pytest.approx(obj.value(theta), rel=1e-10)
    # people never compare the last item: the human-BTL Jeffreys prior would be singular,
    # the calibration-space one is not
    keep = (sim.human.i != sim.N - 1) & (sim.human.j != sim.N - 1)
    df = sim.to_frame()
    last = sim.items[-1]
    df = df.loc[~((df["judge"] == sim.human_judge) & ((df["item_a"] == last) | (df["item_b"] == last)))]
    data = pydial.Comparisons.from_frame(df, items=sim.items)
    assert len(data.human) == int(keep.sum())
    lam = 0.3 * data.n_llm / data.n_human
    f = fit_structured(data, chart, lam, initial_theta(data, chart), penalty="firth")
    assert f.opt.converged and np.all(np.isfinite(chart.scores(f.theta)))


# ------------------------------------------------------------ estimators
def test_firth_shrinks_calibration_of_dial_anc_and_pooled(sim):
    for m in ("dial-anc", "pooled"):
        ml = pydial.fit(sim, m)
        fi = pydial.fit(sim, m, penalty="firth")
        assert fi.converged
        assert 0 < abs(fi.calibration_coef[0]) < abs(ml.calibration_coef[0])
        assert np.all(np.isfinite(fi.scores["se"]))


def test_dial_ada_has_a_complete_path_under_human_separation():
    sim = pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=12, seed=2)
    data = sim.comparisons
    report = pydial.check_design(data, method="human")
    assert not report.ok  # no finite human MLE at this budget
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = pydial.fit(data, "dial-ada")
        firth = pydial.fit(data, "dial-ada", penalty="firth")
    assert not plain.gacv["admissible"].iloc[0]
    assert firth.gacv["admissible"].all(), firth.gacv
    assert np.all(np.isfinite(firth.gacv["gacv"]))
    assert firth.calibration_test is not None


def test_atc_with_firth_ordering():
    sim = pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=12, seed=2)
    res = pydial.fit(sim.comparisons, "atc", penalty="firth")
    np.testing.assert_allclose(res.scores["score"].sum(), 0.0, atol=1e-10)


def test_binomial_nll_unchanged_reference():
    # the penalty is additive: the unpenalized loss at the Firth estimate is above the ML minimum
    data = human_frame([("A", "B", 3, 2), ("B", "C", 2, 1), ("A", "C", 4, 1)])
    H = data.human
    ml = fit_human_btl(H, data.N)
    fi = fit_human_btl(H, data.N, penalty="firth")
    loss = lambda s: binomial_nll(s[H.i] - s[H.j], H.n, H.y).sum()
    assert loss(fi.s) > loss(ml.s)


def test_anchored_endpoints_list_the_human_fit_without_selecting_it():
    sim = pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=12, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        both = pydial.fit(sim.comparisons, "dial-ada", penalty="firth")
        anch = pydial.fit(sim.comparisons, "dial-ada", penalty="firth", include_endpoints="anchored")
    h = anch.gacv.loc[anch.gacv["lambda"] == 0].iloc[0]
    assert not h["admissible"] and "not competing" in h["reason"]
    assert h["l_H"] == pytest.approx(both.gacv.loc[both.gacv["lambda"] == 0, "l_H"].iloc[0])
    assert anch.lambda_ > 0
    ok = both.gacv.loc[both.gacv["lambda"] > 0]
    assert anch.lambda_ == ok.loc[ok["gacv"].idxmin(), "lambda"]
    with pytest.raises(ValueError, match="include_endpoints"):
        pydial.fit(sim.comparisons, "dial-ada", include_endpoints="human")


def test_firth_finite_weight_sandwich_uses_the_unpenalized_bread():
    """At a finite selected weight, the covariance of a Firth fit is the sandwich with the unpenalized
    Hessian at the penalized estimate (pydial.model.penalty's convention): rebuilt here by finite_influence
    with the Hessian it computes itself (unpenalized), not the penalized H^+ the weight path keeps."""
    from pydial.inference.sandwich import finite_influence

    d = pydial.simulate(N=5, K=3, rank=1, n_llm=3000, n_human=150, seed=6).comparisons
    res = pydial.fit(d, "dial-ada", penalty="firth", lambda_=[0.5], include_endpoints=False)
    assert 0 < res.lambda_ < np.inf
    C = finite_influence(d, res.chart, res.lambda_, res.theta).covariance(d, res.cov_type)
    np.testing.assert_allclose(res.cov.to_numpy(), C, rtol=1e-8, atol=1e-12)


# ------------------------------------------------------------- the tie family's joint Jeffreys prior
@pytest.fixture(scope="module")
def tsim():
    return pydial.simulate(N=6, K=3, rank=1, n_llm=3000, n_human=80, tie_rate=0.2, ties="davidson", seed=11).comparisons


@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
@pytest.mark.parametrize("cal", ["mu", "W"])
def test_tie_joint_penalty_derivatives_and_definition(tsim, ties, cal):
    """The tie objective with the people's Jeffreys prior: gradient against central differences of the
    value, Hessian against central differences of the gradient, and the penalty against its definition
    written here from the tie probabilities: -1/(2 n_H) [log det I(c, l_H; D_H M) - log det M'M], with the
    information of the calibration tie GLM formed by differencing each outcome's log-probability."""
    from pydial.model.families import family_of

    chart = Chart(tsim.N, tsim.K, 1, cal, True)
    obj = Objective.weighted(chart, tsim, 5.0, "firth", ties=ties)
    plain = Objective.weighted(chart, tsim, 5.0, ties=ties)
    assert tsim.K in obj.free  # the people's nu_H is free
    rng = np.random.default_rng(6)
    x = np.concatenate([0.5 * rng.standard_normal(chart.dim), -0.7 + 0.1 * rng.standard_normal(obj.n_tie)])
    f, g, H = obj.value_grad_hess(x)
    assert f == pytest.approx(obj.value(x), rel=1e-12)
    np.testing.assert_array_equal(obj.value_grad_hess(x, hess=False)[1], g)  # the gradient without the Hessian too
    np.testing.assert_allclose(g, fd_jacobian(lambda t: np.array([obj.value(t)]), x)[0], rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(H, fd_jacobian(lambda t: obj.value_grad_hess(t)[1], x), rtol=1e-4, atol=1e-7)
    # the definition
    theta, lH = x[: chart.dim], x[-1]
    phi = chart.to_full(theta)
    B = phi[chart.off_B: chart.off_b].reshape(tsim.N, chart.q)
    M = B[:, :1] if cal == "mu" else B
    Ht = tsim.cell_table("human", with_ties=True)
    X = difference_design(Ht.i, Ht.j, tsim.N) @ M
    c = np.linalg.lstsq(M, chart.scores(theta), rcond=None)[0]
    n = Ht.counts.sum(1)

    def logp(z):
        return np.log(family_of(ties).probabilities(X @ z[:-1], z[-1]))

    z, h = np.append(c, lH), 1e-6
    S = np.stack([(logp(z + h * e) - logp(z - h * e)) / (2 * h) for e in np.eye(z.size)])
    info = np.einsum("m,mo,amo,bmo->ab", n, np.exp(logp(z)), S, S)
    ref = np.linalg.slogdet(info)[1] - np.linalg.slogdet(M.T @ M)[1]
    n_h = tie_totals(tsim)[1]
    assert obj.value(x) - plain.value(x) == pytest.approx(-0.5 * ref / n_h, rel=1e-7)


def test_tie_firth_dial_ada_on_data_without_ties_is_the_binary_firth_fit(sim):
    """Without a tie the people's model is binary (nu_H = 0): the tie family's weighted Firth fits are the
    binary ones (the structured fits stop at Newton's tolerance on different objectives: 1e-6)."""
    a = pydial.fit(sim, "dial-ada", penalty="firth")
    b = pydial.fit(sim, "dial-ada", penalty="firth", ties="davidson")
    assert a.lambda_ == b.lambda_
    np.testing.assert_allclose(b.gacv["gacv"], a.gacv["gacv"], rtol=1e-6)
    np.testing.assert_allclose(b.scores.to_numpy(float), a.scores.to_numpy(float), rtol=1e-6, atol=1e-9)


def test_tie_firth_weighted_fit_tends_to_firth_dial_anc(tsim):
    """The penalty equals DIAL-Anc's calibration prior up to a constant when M is held fixed, so the
    penalized weighted fit tends to Firth's DIAL-Anc as lambda grows (as without ties)."""
    anc = pydial.fit(tsim, "dial-anc", ties="davidson", penalty="firth").scores["score"].to_numpy()
    far = pydial.fit(tsim, "dial-ada", ties="davidson", penalty="firth", lambda_=[1e6], include_endpoints=False)
    near = pydial.fit(tsim, "dial-ada", ties="davidson", penalty="firth", lambda_=[1e2], include_endpoints=False)
    assert far.lambda_ == 1e6 and near.lambda_ == 1e2
    d_far = np.abs(far.scores["score"].to_numpy() - anc).max()
    d_near = np.abs(near.scores["score"].to_numpy() - anc).max()
    assert d_far < 1e-3 and d_far < d_near
