"""Tests of pydial.fit (estimators) and pydial.inference.linearization (covariances).

References:

* statsmodels' binomial GLM on the item-difference design (human BTL, and the
  order-effect BTL with the order column added) and choix's pairwise BTL;
* the paper's DGP (App. simulation) for recovery, with the paper's reported
  behaviour (Kendall tau, excess risk ratio, RMSE of b);
* Thm. incomplete-human-coverage (identification through the LLM space);
* brute-force per-comparison influence sums for every meat, finite-difference
  refits for the two-step delta method, and the Laplacian pseudo-inverse for
  the human Fisher covariance.
"""

from __future__ import annotations

import dataclasses

import choix
import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy.special import expit
from scipy.stats import norm

import pydial
from pydial import IdentifiabilityError
from pydial.studies import metrics
from pydial.estimation.glm import staged_fit
from pydial.inference.linearization import COV_TYPES
from pydial.inference.meats import MeatSource
from pydial.inference.sandwich import Influence, staged_influence

ITEMS = [f"m{k}" for k in range(10)]


# ------------------------------------------------------------------ helpers
def make_data(llm=(), human=(), n_items=4):
    """Comparisons from cell lists: ``llm`` tuples ``(judge, i, j, a, y, n)``, ``human`` tuples ``(i, j, y, n)``."""
    rows, rid = [], 0
    for judge, i, j, a, y, n in llm:
        for t in range(n):
            rows.append((rid, judge, ITEMS[i], ITEMS[j], "a" if a > 0 else "b", "a" if t < y else "b"))
            rid += 1
    for i, j, y, n in human:
        for t in range(n):
            rows.append((rid, "human", ITEMS[i], ITEMS[j], "a", "a" if t < y else "b"))
            rid += 1
    df = pd.DataFrame(rows, columns=["record_id", "judge", "item_a", "item_b", "first", "winner"])
    return pydial.Comparisons.from_frame(df, items=ITEMS[:n_items])


def full_judge(name, n_items=4):
    return [(name, i, j, a, 1, 2) for i in range(n_items) for j in range(i + 1, n_items) for a in (1, -1)]


def glm_fit(i, j, n, y, N, a=None):
    """statsmodels binomial GLM on the difference design, last item as reference (score 0)."""
    D = np.zeros((i.size, N))
    D[np.arange(i.size), i] = 1.0
    D[np.arange(i.size), j] = -1.0
    X = D[:, :-1]
    if a is not None:
        X = np.column_stack([X, a.astype(float)])
    res = sm.GLM(np.column_stack([y, n - y]), X, family=sm.families.Binomial()).fit(tol=1e-14, maxiter=200)
    beta = np.r_[res.params[: N - 1], 0.0]
    C = np.zeros((N, N))
    C[: N - 1, : N - 1] = res.cov_params()[: N - 1, : N - 1]
    P = np.eye(N) - 1.0 / N
    return P @ beta, P @ C @ P.T, res


def contrast_var(C):
    i, j = np.triu_indices(C.shape[0], 1)
    return C[i, i] + C[j, j] - 2 * C[i, j]


def cosine(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def sim_main():
    return pydial.simulate(N=10, K=4, rank=1, n_llm=20_000, n_human=400, seed=2)


# ------------------------------------------------------- known answers: GLM
@pytest.mark.parametrize("seed", [0, 5])
def test_human_btl_equals_statsmodels_glm(seed):
    d = pydial.simulate(N=7, K=2, rank=1, n_llm=2000, n_human=350, seed=seed).comparisons
    res = pydial.fit(d, "human")
    assert res.cov_type == "fisher" and res.converged
    H = d.human
    s_ref, C_ref, glm = glm_fit(H.i, H.j, H.n, H.y, d.N)
    s = res.scores["score"].to_numpy()
    assert abs(s.sum()) < 1e-12
    np.testing.assert_allclose(s, s_ref, atol=1e-6)
    # Fisher SEs: centered-score covariance and every contrast variance
    C = res.cov.to_numpy()
    np.testing.assert_allclose(C, C_ref, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(contrast_var(C), contrast_var(C_ref), rtol=1e-6)
    np.testing.assert_allclose(res.scores["se"], np.sqrt(np.diag(C_ref)), rtol=1e-6)
    # the likelihood at the optimum is the GLM's (up to the binomial coefficients)
    from scipy.special import gammaln

    logc = np.sum(gammaln(H.n + 1) - gammaln(H.y + 1) - gammaln(H.n - H.y + 1))
    assert -res.loss_human * d.n_human + logc == pytest.approx(glm.llf, rel=1e-10)


def test_human_btl_equals_glm_with_freq_weights_on_individual_rows():
    """The same fit from the unaggregated 0/1 rows with frequency weights."""
    d = pydial.simulate(N=5, K=1, rank=0, n_llm=0, n_human=300, seed=9).comparisons
    res = pydial.fit(d, "human")
    H = d.human
    # two rows per cell: outcome 1 with weight y, outcome 0 with weight n - y
    i2, j2 = np.r_[H.i, H.i], np.r_[H.j, H.j]
    z = np.r_[np.ones(len(H)), np.zeros(len(H))]
    fw = np.r_[H.y, H.n - H.y]
    D = np.zeros((z.size, d.N))
    D[np.arange(z.size), i2] = 1.0
    D[np.arange(z.size), j2] = -1.0
    g = sm.GLM(z, D[:, :-1], family=sm.families.Binomial(), freq_weights=fw).fit(tol=1e-14)
    beta = np.r_[g.params, 0.0]
    np.testing.assert_allclose(res.scores["score"], beta - beta.mean(), atol=1e-6)
    C = np.zeros((d.N, d.N))
    C[:-1, :-1] = g.cov_params()
    np.testing.assert_allclose(contrast_var(res.cov.to_numpy()), contrast_var(C), rtol=1e-6)


def test_single_judge_order_btl_equals_glm_with_order_column():
    d = pydial.simulate(N=6, K=1, rank=0, n_llm=3000, n_human=0, seed=4).comparisons
    assert d.K == 1
    res = pydial.fit(d, "judges", cov_type="fisher")
    L = d.llm
    s_ref, C_ref, glm = glm_fit(L.i, L.j, L.n, L.y, d.N, a=L.a)
    np.testing.assert_allclose(res.judge_scores.loc["judge0"], s_ref, atol=1e-6)
    np.testing.assert_allclose(res.scores["score"], s_ref, atol=1e-6)
    b, se_b = res.position_effects.loc["judge0", ["b", "se"]]
    assert b == pytest.approx(glm.params[-1], abs=1e-6)
    assert se_b == pytest.approx(glm.bse[-1], rel=1e-6)
    np.testing.assert_allclose(res.judge_scores_se.loc["judge0"], np.sqrt(np.diag(C_ref)), rtol=1e-6)
    np.testing.assert_allclose(res.cov.to_numpy(), C_ref, rtol=1e-6, atol=1e-12)
    z = glm.params[-1] / glm.bse[-1]
    assert res.position_effects.loc["judge0", "p_value"] == pytest.approx(2 * norm.sf(abs(z)), rel=1e-5)


def test_judges_method_fits_each_judge_separately(sim_main):
    d = sim_main.comparisons
    res = pydial.fit(d, "judges", cov_type="fisher")
    S_ref = []
    for k, name in enumerate(d.judges):
        L = d.llm.select(d.llm.judge == k)
        s_ref, _, glm = glm_fit(L.i, L.j, L.n, L.y, d.N, a=L.a)
        np.testing.assert_allclose(res.judge_scores.loc[name], s_ref, atol=1e-6)
        assert res.position_effects.loc[name, "b"] == pytest.approx(glm.params[-1], abs=1e-6)
        assert res.position_effects.loc[name, "se"] == pytest.approx(glm.bse[-1], rel=1e-6)
        S_ref.append(s_ref)
    np.testing.assert_allclose(res.scores["score"], np.mean(S_ref, axis=0), atol=1e-6)
    # and the position effects are near the truth
    np.testing.assert_allclose(res.position_effects["b"], sim_main.truth.b, atol=5 * res.position_effects["se"].max())


def test_pooled_stages_equal_glms(sim_main):
    d = sim_main.comparisons
    res = pydial.fit(d, "pooled")
    L, H = d.llm, d.human
    sp_ref, _, _ = glm_fit(L.i, L.j, L.n, L.y, d.N)  # BTL ignoring judge and order
    np.testing.assert_allclose(res.stage_scores["pooled"], sp_ref, atol=1e-6)
    x = sp_ref[H.i] - sp_ref[H.j]
    g = sm.GLM(np.column_stack([H.y, H.n - H.y]), x[:, None], family=sm.families.Binomial()).fit(tol=1e-14)
    # calibration_coef is c relative to the normalized basis mu = sqrt(N) s_pool / ||s_pool||
    assert res.calibration_coef[0] == pytest.approx(g.params[0] * np.linalg.norm(sp_ref) / np.sqrt(d.N), rel=1e-6)
    np.testing.assert_allclose(res.scores["score"], g.params[0] * sp_ref, atol=1e-6)


# ------------------------------------------------------- known answers: choix
def expand_pairs(H):
    out = []
    for i, j, n, y in zip(H.i, H.j, H.n, H.y):
        out += [(int(i), int(j))] * int(y) + [(int(j), int(i))] * int(n - y)
    return out


@pytest.mark.parametrize("solver", ["ilsr", "opt"])
def test_human_btl_equals_choix(solver):
    d = pydial.simulate(N=8, K=1, rank=0, n_llm=0, n_human=500, seed=21).comparisons
    res = pydial.fit(d, "human")
    data = expand_pairs(d.human)
    assert len(data) == d.n_human
    if solver == "ilsr":
        th = choix.ilsr_pairwise(d.N, data, alpha=0.0, tol=1e-12, max_iter=1000)
    else:
        th = choix.opt_pairwise(d.N, data, alpha=0.0, tol=1e-12)
    np.testing.assert_allclose(res.scores["score"], th - th.mean(), atol=1e-5)


# ----------------------------------------------------- recovery (paper DGP)
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_recovery_with_large_llm_budget(seed):
    sim = pydial.simulate(N=10, K=4, rank=1, n_llm=200_000, n_human=200, seed=seed)
    res = pydial.fit(sim.comparisons, "dial-anc")
    assert res.converged
    b_hat = res.position_effects["b"].reindex(list(sim.truth.judges)).to_numpy()
    assert metrics.rmse(b_hat, sim.truth.b) < 0.05
    assert abs(cosine(res.structure.mu, sim.truth.mu)) > 0.99
    # the judge score matrix is recovered as well
    S = res.judge_scores.loc[list(sim.truth.judges)].to_numpy()
    assert np.abs(S - sim.truth.S).max() < 0.2
    # order effects are inside their intervals for most judges (cell-clustered sandwich)
    pe = res.position_effects
    inside = (pe["ci_low"] <= sim.truth.b) & (sim.truth.b <= pe["ci_high"])
    assert inside.sum() >= 3


@pytest.mark.slow
def test_dial_anc_beats_human_at_small_human_budget():
    """App. simulation (top row of the main figure): n_H = 200, n_LLM = 20,000.

    The paper reports tau 0.75 -> 0.98 and an 8-14x excess-risk reduction.
    """
    R = 20
    tau_d, tau_h, er_d, er_h = [], [], [], []
    for rep in range(R):
        sim = pydial.simulate(N=10, K=4, rank=1, n_llm=20_000, n_human=200, seed=1000 + rep)
        d = sim.comparisons
        rd = pydial.fit(d, "dial-anc")
        rh = pydial.fit(d, "human")
        assert rd.converged and rh.converged
        sh = sim.truth.s_h
        tau_d.append(metrics.kendall_tau(rd.scores["score"].to_numpy(), sh))
        tau_h.append(metrics.kendall_tau(rh.scores["score"].to_numpy(), sh))
        er_d.append(metrics.excess_risk(rd.scores["score"].to_numpy(), sh))
        er_h.append(metrics.excess_risk(rh.scores["score"].to_numpy(), sh))
    tau_d, er_d, er_h = np.mean(tau_d), np.mean(er_d), np.mean(er_h)
    assert tau_d >= 0.95, f"DIAL-Anc mean tau {tau_d:.3f}"
    assert tau_d > np.mean(tau_h)
    ratio = er_h / er_d
    assert ratio >= 4, f"excess risk Human {er_h:.5f} vs DIAL-Anc {er_d:.5f}: ratio {ratio:.2f}"
    # both near their first-order benchmarks (N-1)/(2 n_H) and 1/(2 n_H) (loose: 20 reps)
    assert 0.5 < er_h / metrics.first_order_risk(200, 9) < 2.0
    assert 0.4 < er_d / metrics.first_order_risk(200, 1) < 2.5


# --------------------------------------------- incomplete human coverage
def drop_human_items(sim, drop):
    f = sim.frame
    m = (f["judge"] == "human") & (f["item_a"].isin(drop) | f["item_b"].isin(drop))
    return pydial.Comparisons.from_frame(f.loc[~m], items=list(sim.truth.items))


@pytest.mark.parametrize("calibration", ["mu", "W"])
def test_incomplete_human_coverage(calibration):
    """Thm. incomplete-human-coverage: rank(D_H M) = d suffices; the human BTL does not exist."""
    sim = pydial.simulate(N=10, K=4, rank=1, n_llm=20_000, n_human=600, seed=3)
    drop = ["item02", "item07", "item09"]
    d = drop_human_items(sim, drop)
    H = d.human
    never = {d.items.index(x) for x in drop}
    assert never.isdisjoint(set(H.i) | set(H.j))
    res = pydial.fit(d, "dial-anc", calibration=calibration)
    assert res.converged
    sc = res.scores
    assert np.all(np.isfinite(sc[["score", "se", "ci_low", "ci_high"]].to_numpy()))
    assert (sc.loc[drop, "se"] > 0).all()
    # the never-compared items are still estimated consistently: within 4 SE of the truth
    s_true = sim.truth.s_h - sim.truth.s_h.mean()
    z = (sc["score"].to_numpy() - s_true) / sc["se"].to_numpy()
    assert np.abs(z).max() < 4, z
    with pytest.raises(IdentifiabilityError, match="human-mle"):
        pydial.fit(d, "human")


# ------------------------------------------------------------- bad designs
def test_judge_with_single_pair_in_one_order():
    d = make_data(full_judge("good") + [("bad", 0, 1, 1, 2, 5)], human=[(0, 1, 1, 2), (1, 2, 1, 2), (2, 3, 1, 2)])
    with pytest.raises(IdentifiabilityError, match=r"(?s)ident-LLM.*'bad'"):
        pydial.fit(d, "judges")
    # DIAL: the judge is identified neither on its own nor through the rank-1 space
    with pytest.raises(IdentifiabilityError, match=r"(?s)ident-lowrank.*'bad'"):
        pydial.fit(d, "dial-anc")
    # without the bad judge the same design fits
    assert pydial.fit(d.subset(judges=["good"]), "judges").converged


def test_unchecked_unidentified_judge_is_flagged():
    d = make_data(full_judge("good") + [("bad", 0, 1, 1, 2, 5)], human=[(0, 1, 1, 2), (1, 2, 1, 2), (2, 3, 1, 2)])
    import warnings

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = pydial.fit(d, "judges", check=False, cov_type="fisher")
    assert not res.converged
    assert any(issubclass(x.category, pydial.ConvergenceWarning) and "'bad'" in str(x.message) for x in w)


def test_separated_judge_raises():
    # every comparison of judge "sep" is won by the lower-indexed item (quasi-complete separation)
    cells = [("sep", i, j, a, 2, 2) for i in range(4) for j in range(i + 1, 4) for a in (1, -1)]
    d = make_data(full_judge("good") + cells)
    with pytest.raises(IdentifiabilityError, match=r"(?s)separation.*'sep'"):
        pydial.fit(d, "judges")


def test_human_graph_not_strongly_connected_raises():
    # m0 beats everyone: the human BTL MLE is infinite
    d = make_data(full_judge("g"), human=[(0, 1, 3, 3), (0, 2, 2, 2), (1, 2, 1, 2), (2, 3, 1, 2), (1, 3, 1, 2)])
    with pytest.raises(IdentifiabilityError, match=r"human-mle.*m0 never loses"):
        pydial.fit(d, "human")


def test_full_calibration_needs_enough_human_directions():
    """Cond. human-design: humans on a single pair identify one direction, W needs r + 1 = 2."""
    d = make_data(full_judge("g1", 5) + full_judge("g2", 5) + full_judge("g3", 5), human=[(0, 1, 3, 6)], n_items=5)
    with pytest.raises(IdentifiabilityError, match="human-design"):
        pydial.fit(d, "dial-anc", rank=1, calibration="W")


def test_rank_too_large_raises():
    d = make_data(full_judge("g1") + full_judge("g2"), human=[(0, 1, 1, 2), (1, 2, 1, 2), (2, 3, 1, 2)])
    with pytest.raises(IdentifiabilityError, match=r"sufficient-subset.*r <= K-1 = 1"):
        pydial.fit(d, "dial-anc", rank=2)


def test_invalid_arguments():
    d = make_data(full_judge("g"), human=[(0, 1, 1, 2), (1, 2, 1, 2), (2, 3, 1, 2)])
    for kw, pat in [(dict(method="atc-x"), "method"), (dict(calibration="V"), "calibration"),
                    (dict(cov_type="hc3"), "cov_type"), (dict(level=1.0), "level"), (dict(rank=-1), "rank")]:
        with pytest.raises(ValueError, match=pat):
            pydial.fit(d, **kw)


# ----------------------------------------------------------------- meats
def brute_force_cov(U, st, data, cov):
    """sum over clusters of (sum of per-comparison influence)(...)^T, comparison by comparison."""
    n, y, p, w = st.n, st.y, st.p, st.w
    if cov == "fisher":
        return sum(w[c] ** 2 * n[c] * p[c] * (1 - p[c]) * np.outer(U[c], U[c]) for c in range(n.size))
    ubar = {}
    for flag in (False, True):
        m = st.is_human == flag
        if m.any():
            ubar[flag] = ((n[m] * p[m] - y[m])[:, None] * U[m]).sum(0) / n[m].sum()
    li, hi = st.positions()
    pos_llm = {int(c): int(t) for t, c in zip(np.flatnonzero(~st.is_human), li)}
    pos_h = {int(c): int(t) for t, c in zip(np.flatnonzero(st.is_human), hi)}
    R = data.rows
    clusters: dict = {}
    for v in range(R.z.size):
        human = R.judge[v] == data.K
        t = (pos_h if human else pos_llm).get(int(R.cell[v]))
        if t is None:
            continue
        IF = w[t] * ((p[t] - R.z[v]) * U[t] - ubar[bool(human)])
        if cov == "binomial":
            key = ("row", v)
        elif cov == "record":
            key = ("rec", int(R.record[v]))
        else:  # cell: LLM comparisons by (judge, pair); human ones independent
            key = ("row", v) if human else ("cell", int(R.judge[v]), int(data.llm.i[R.cell[v]]), int(data.llm.j[R.cell[v]]))
        clusters[key] = clusters.get(key, 0.0) + IF
    G = np.array(list(clusters.values()))
    return G.T @ G


@pytest.fixture(scope="module")
def grouped_records():
    """Simulated data whose records each hold several LLM and human comparisons."""
    sim = pydial.simulate(N=6, K=3, rank=1, n_llm=6000, n_human=300, seed=17)
    f = sim.frame.copy()
    f["record_id"] = np.random.default_rng(0).integers(0, 400, len(f))
    return pydial.Comparisons.from_frame(f, items=list(sim.truth.items))


@pytest.mark.parametrize("cov", COV_TYPES)
@pytest.mark.parametrize("calibration", ["mu", "W"])
def test_meats_equal_brute_force_sums(grouped_records, cov, calibration):
    d = grouped_records
    sf = staged_fit(d, 1, calibration)
    U, _ = staged_influence(d, sf)
    st = U.source.stats
    C = U.covariance(d, cov)
    C_ref = brute_force_cov(U.dense(), st, d, cov)
    np.testing.assert_allclose(C, C_ref, rtol=1e-9, atol=1e-12 * np.abs(C_ref).max())
    # away from the optimum the block means of the scores are not zero: the centering of eq. hac-meat matters
    st2 = dataclasses.replace(st, p=np.clip(st.p + np.random.default_rng(1).normal(0, 0.05, st.p.size), 0.01, 0.99))
    C2, C2_ref = Influence(MeatSource(U.source.J, st2), U.A).covariance(d, cov), brute_force_cov(U.dense(), st2, d, cov)
    np.testing.assert_allclose(C2, C2_ref, rtol=1e-9, atol=1e-12 * np.abs(C2_ref).max())
    # and pydial.fit reports exactly that covariance
    res = pydial.fit(d, "dial-anc", calibration=calibration, cov_type=cov)
    np.testing.assert_allclose(res.cov.to_numpy(), C_ref, rtol=1e-7, atol=1e-12 * np.abs(C_ref).max())


def test_meats_differ_when_clusters_are_nontrivial(grouped_records):
    d = grouped_records
    covs = {c: pydial.fit(d, "dial-anc", cov_type=c).cov.to_numpy() for c in ("binomial", "cell", "record")}
    assert np.abs(covs["cell"] - covs["binomial"]).max() > 1e-3 * np.abs(covs["binomial"]).max()
    assert np.abs(covs["record"] - covs["binomial"]).max() > 1e-3 * np.abs(covs["binomial"]).max()


def test_record_meat_equals_binomial_with_one_comparison_per_record(sim_main):
    d = sim_main.comparisons
    assert len(d.record_ids) == d.n_llm + d.n_human
    for method in ("dial-anc", "human", "judges"):
        rb = pydial.fit(d, method, cov_type="binomial")
        rr = pydial.fit(d, method, cov_type="record")
        np.testing.assert_allclose(rr.cov.to_numpy(), rb.cov.to_numpy(), rtol=1e-9, atol=1e-15)
    rb = pydial.fit(d, "dial-anc", cov_type="binomial")
    rr = pydial.fit(d, "dial-anc", cov_type="record")
    np.testing.assert_allclose(rr.position_effects["se"], rb.position_effects["se"], rtol=1e-9)


def test_cell_meat_equals_binomial_with_one_comparison_per_cell():
    sim = pydial.simulate(N=30, K=4, rank=1, n_llm=8000, n_human=600, seed=8)
    f = sim.frame
    key = f["judge"] + ":" + np.minimum(f["item_a"], f["item_b"]) + ":" + np.maximum(f["item_a"], f["item_b"])
    keep = (f["judge"] == "human") | ~key.duplicated()
    d = pydial.Comparisons.from_frame(f.loc[keep], items=list(sim.truth.items))
    per_cell = d.llm_cells().groupby(["judge", "item_i", "item_j"])["n"].sum()
    assert per_cell.max() == 1
    for method in ("dial-anc", "judges"):
        rc = pydial.fit(d, method, cov_type="cell")
        rb = pydial.fit(d, method, cov_type="binomial")
        np.testing.assert_allclose(rc.cov.to_numpy(), rb.cov.to_numpy(), rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(rc.position_effects["se"], rb.position_effects["se"], rtol=1e-9)


def test_human_fisher_is_laplacian_pseudo_inverse(sim_main):
    d = sim_main.comparisons
    res = pydial.fit(d, "human", cov_type="fisher")
    s = res.scores["score"].to_numpy()
    H = d.human
    p = expit(s[H.i] - s[H.j])
    Lap = np.zeros((d.N, d.N))
    for i, j, n, pp in zip(H.i, H.j, H.n, p):
        e = np.zeros(d.N)
        e[i], e[j] = 1.0, -1.0
        Lap += n * pp * (1 - pp) * np.outer(e, e)
    np.testing.assert_allclose(res.cov.to_numpy(), np.linalg.pinv(Lap), rtol=1e-8, atol=1e-14)


def test_human_sandwich_close_to_fisher_under_the_model(sim_main):
    """Under a correct model the binomial sandwich estimates the same covariance as Fisher."""
    sim = pydial.simulate(N=6, K=1, rank=0, n_llm=0, n_human=20_000, seed=31)
    d = sim.comparisons
    cf = pydial.fit(d, "human", cov_type="fisher").cov.to_numpy()
    cb = pydial.fit(d, "human", cov_type="binomial").cov.to_numpy()
    np.testing.assert_allclose(contrast_var(cb), contrast_var(cf), rtol=0.1)


# ---------------------------------------- two-step delta method vs. refits
@pytest.mark.parametrize("calibration", ["mu", "W"])
def test_staged_influence_matches_refit_derivatives(sim_main, calibration):
    """d s_hat / d y_c by refitting with a perturbed count equals w_c u_c of the two-step linearization."""
    d = sim_main.comparisons
    sf = staged_fit(d, 1, calibration)
    U, _ = staged_influence(d, sf)
    st, U = U.source.stats, U.dense()

    def refit(llm_y=None, human_y=None):
        dd = dataclasses.replace(
            d,
            llm=dataclasses.replace(d.llm, y=llm_y) if llm_y is not None else d.llm,
            human=dataclasses.replace(d.human, y=human_y) if human_y is not None else d.human,
        )
        f = staged_fit(dd, 1, calibration)
        return f.chart.scores(f.theta)

    for c in (0, 57, 203):
        h = 0.5
        yp, ym = d.llm.y.copy(), d.llm.y.copy()
        yp[c] += h
        ym[c] -= h
        fd = (refit(llm_y=yp) - refit(llm_y=ym)) / (2 * h)
        np.testing.assert_allclose(st.w[c] * U[c], fd, rtol=1e-4, atol=1e-5 * np.abs(fd).max())
    for c in (0, 11):
        h = 0.05
        yp, ym = d.human.y.copy(), d.human.y.copy()
        yp[c] += h
        ym[c] -= h
        fd = (refit(human_y=yp) - refit(human_y=ym)) / (2 * h)
        t = len(d.llm) + c
        np.testing.assert_allclose(st.w[t] * U[t], fd, rtol=1e-3, atol=1e-4 * np.abs(fd).max())


# ----------------------------------------------------------------- contrast
def test_contrast_consistent_with_cov(sim_main):
    res = pydial.fit(sim_main.comparisons, "dial-anc")
    s, C = res.scores["score"], res.cov
    for a, b in [("item00", "item03"), ("item05", "item01"), ("item09", "item08")]:
        ct = res.contrast(a, b)
        v = np.zeros(len(s))
        v[s.index.get_loc(a)], v[s.index.get_loc(b)] = 1.0, -1.0
        est, se = float(v @ s), float(np.sqrt(v @ C.to_numpy() @ v))
        z = norm.ppf(0.975)
        assert ct["estimate"] == pytest.approx(est, abs=1e-14)
        assert ct["se"] == pytest.approx(se, rel=1e-12)
        assert (ct["ci_low"], ct["ci_high"]) == pytest.approx((est - z * se, est + z * se), rel=1e-12)
        assert ct["p_value"] == pytest.approx(2 * norm.sf(abs(est) / se), rel=1e-9)
        # win probability and its delta-method SE: d sigma / dx by central differences
        p = 1.0 / (1.0 + np.exp(-est))
        h = 1e-6
        dsig = (1 / (1 + np.exp(-(est + h))) - 1 / (1 + np.exp(-(est - h)))) / (2 * h)
        assert ct["win_prob"] == pytest.approx(p, rel=1e-12)
        assert ct["win_prob_se"] == pytest.approx(dsig * se, rel=1e-7)
        assert ct["win_prob_se"] == pytest.approx(p * (1 - p) * se, rel=1e-12)
        assert ct["win_prob_ci_low"] == pytest.approx(1 / (1 + np.exp(-(est - z * se))), rel=1e-12)
        # antisymmetry
        back = res.contrast(b, a)
        assert back["estimate"] == pytest.approx(-est) and back["se"] == pytest.approx(se)
        assert back["win_prob"] == pytest.approx(1 - p)
    # another level
    ct90 = res.contrast("item00", "item03", level=0.90)
    assert ct90["ci_high"] - ct90["estimate"] == pytest.approx(norm.ppf(0.95) * ct90["se"], rel=1e-12)
    # the score table's intervals agree with the covariance diagonal
    np.testing.assert_allclose(res.scores["se"], np.sqrt(np.diag(C)), rtol=1e-12)
    with pytest.raises(KeyError):
        res.contrast("item00", "nope")
    # the level of the fit applies to every table
    r90 = pydial.fit(sim_main.comparisons, "dial-anc", level=0.90)
    sc = r90.scores
    np.testing.assert_allclose(sc["ci_high"] - sc["score"], norm.ppf(0.95) * sc["se"], rtol=1e-12)
    pe = r90.position_effects
    np.testing.assert_allclose(pe["ci_high"] - pe["b"], norm.ppf(0.95) * pe["se"], rtol=1e-12)
    assert r90.contrast("item00", "item03")["level"] == 0.90


def test_win_probabilities_and_summary(sim_main):
    res = pydial.fit(sim_main.comparisons, "dial-anc")
    s = res.scores["score"].to_numpy()
    P = res.win_probabilities().to_numpy()
    np.testing.assert_allclose(P, 1 / (1 + np.exp(-(s[:, None] - s[None, :]))), rtol=1e-12)
    np.testing.assert_allclose(P + P.T, 1.0, atol=1e-12)
    text = res.summary()
    assert "converged=True" in text and "judge-pair" in text and "95%" in text
    assert np.isfinite(res.grad_norm) and res.grad_norm < 1e-6


def test_human_btl_converged_flag_at_rounding_floor():
    """Regression: a well-posed human BTL whose gradient stalls at the rounding floor (~1e-10 for the
    n_H-normalized loss) must still report convergence (seen at commit 58f449c: "no progress
    (stalled at the box boundary)" with no coordinate near the box)."""
    import warnings

    d = pydial.simulate(N=10, K=4, rank=1, n_llm=0, n_human=2000, seed=10_242).comparisons
    with warnings.catch_warnings():
        warnings.simplefilter("error", pydial.ConvergenceWarning)
        res = pydial.fit(d, "human")
    assert res.converged
    H = d.human
    s_ref, _, _ = glm_fit(H.i, H.j, H.n, H.y, d.N)
    np.testing.assert_allclose(res.scores["score"], s_ref, atol=1e-6)


def test_cancelling_consensus_is_an_identifiability_error():
    """Judges plus their exact flips: S^T 1 = 0, so mu is undefined (eq. reduced-parameter-space)."""
    sim = pydial.simulate(n_llm=4000, n_human=300, seed=1)
    f = sim.frame
    flip = f[f.judge != "human"].copy()
    flip["judge"] = flip["judge"] + "_flip"
    flip["winner"] = np.where(flip["winner"] == "a", "b", "a")
    flip["record_id"] = flip["record_id"] + 10**6
    d = pydial.Comparisons.from_frame(pd.concat([f, flip]))
    with pytest.raises(IdentifiabilityError, match="consensus"):
        pydial.fit(d, "dial-anc")
    with pytest.raises(IdentifiabilityError, match="pooled"):
        pydial.fit(d, "pooled")


def test_judges_position_test_and_record_meat(sim_main):
    d = sim_main.comparisons
    res = pydial.fit(d, "judges")
    t = res.position_test(d.judges[0], d.judges[1])
    C = res.position_effects_cov.to_numpy()
    assert t["se"] == pytest.approx(np.sqrt(C[0, 0] + C[1, 1] - 2 * C[0, 1]), rel=1e-12)
    # every record holds one judgment here, so the record meat equals the binomial meat
    rec = pydial.fit(d, "judges", cov_type="record")
    binom = pydial.fit(d, "judges", cov_type="binomial")
    np.testing.assert_allclose(rec.cov.to_numpy(), binom.cov.to_numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(rec.position_effects["se"], binom.position_effects["se"], rtol=1e-10)


def test_judges_record_meat_joins_judges_of_a_record():
    """Two judges on the same records, agreeing 80% of the time beyond their model: the
    record meat adds the cross-judge term that treating the judges as independent misses."""
    sim = pydial.simulate(N=6, K=2, rank=1, n_llm=6000, n_human=50, seed=4, behavior=dict(p_first=0.5))
    a = sim.frame[sim.frame.judge == "judge0"].copy()  # no human rows: LLM-only data
    rng = np.random.default_rng(0)
    b = a.assign(judge="copy")
    b["winner"] = np.where(rng.random(len(b)) < 0.8, a["winner"], np.where(a["winner"] == "a", "b", "a"))
    d = pydial.Comparisons.from_frame(pd.concat([a, b]))
    rec = pydial.fit(d, "judges", cov_type="record")
    binom = pydial.fit(d, "judges", cov_type="binomial")
    assert np.trace(rec.cov.to_numpy()) > 1.2 * np.trace(binom.cov.to_numpy())
    # each judge's own b only sees its own comparisons: one per record, so its se is unchanged
    np.testing.assert_allclose(rec.position_effects["se"], binom.position_effects["se"], rtol=1e-8)


def test_multiples_array_and_subset_errors(sim_main):
    d = sim_main.comparisons
    res = pydial.fit(d, "dial-ada", multiples=np.array([0.1, 1.0, 10.0]))
    assert len(res.gacv) == 5  # three finite weights and the two endpoints
    with pytest.raises(ValueError, match="multiples"):
        pydial.fit(d, "dial-ada", multiples=[0.0, 1.0])
    with pytest.raises(pydial.DataError, match="unknown record"):
        d.subset(records=["no-such-record"])
    few = d.record_ids[:3]
    with pytest.raises(pydial.DataError, match="no decisive judgment in this subset"):
        d.subset(records=few)
    small = d.subset(records=few, drop_empty_judges=True)
    assert small.K < d.K and "judges dropped" in small.summary().index[-1]
