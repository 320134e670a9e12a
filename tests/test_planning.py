"""Label planning: :func:`pydial.plan` and :func:`pydial.next_pairs`.

References are independent of the planning code: the fits' own Fisher / sandwich
covariances, the closed form ``(N-1)/(2 n_H)`` of Thm. population-risk-tradeoff,
direct Monte Carlo from the true DGP (human draws and LLM draws from the truth,
refitted with the package's optimizers), and information matrices rebuilt from
counts.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

import pydial
from pydial.studies import metrics
from pydial.data.comparisons import HumanCells
from pydial.model.chart import centering_basis, difference_design
from pydial.estimation.glm import fit_calibration, fit_human_btl, fit_structured, initial_theta
from pydial.model.design import glm_information
from pydial.model.chart import Chart
from pydial.studies.planning import PLAN_COLUMNS, llm_frame, make_pilot, shrinkage_weight, with_human


@pytest.fixture(scope="module")
def small():
    sim = pydial.simulate(N=8, K=3, rank=1, n_llm=6000, n_human=400, seed=11)
    return sim, sim.comparisons


def test_human_plan_at_pilot_budget_is_the_fisher_fit(small):
    """At the pilot's own budget and design, the predicted human intervals are the
    fit's Fisher intervals and the risk is (N-1)/(2 n_H)."""
    _, d = small
    res = pydial.fit(d, "human")
    tab = pydial.plan(res, budgets=[d.n_human, 4 * d.n_human], methods=["human"])
    assert list(tab.columns) == list(PLAN_COLUMNS)
    w = (res.scores["ci_high"] - res.scores["ci_low"]).mean()
    assert tab["ci_width"].iloc[0] == pytest.approx(w, rel=1e-6)
    ctr = res.ranking().index[:2]
    assert tab["contrast_ci_width"].iloc[0] == pytest.approx(2 * 1.959963985 * res.contrast(*ctr)["se"], rel=1e-6)
    np.testing.assert_allclose(tab["excess_risk"], metrics.first_order_risk(tab["budget"], d.N - 1), rtol=1e-8)
    assert tab["ci_width"].iloc[1] == pytest.approx(w / 2, rel=1e-6)  # 1/sqrt(n) scaling
    assert tab.attrs["target"] == f"{ctr[0]} - {ctr[1]}"


def test_anchored_plan_at_pilot_budget_matches_the_sandwich(small):
    """Model-based human part plus the LLM-stage part reproduces the fit's two-step
    sandwich widths (cell meat) at the pilot budget."""
    _, d = small
    res = pydial.fit(d, "dial-anc")
    tab = pydial.plan(res, budgets=[d.n_human])
    w = (res.scores["ci_high"] - res.scores["ci_low"]).mean()
    anc = tab.set_index("method").loc["dial-anc"]
    assert anc["ci_width"] == pytest.approx(w, rel=0.1)
    assert anc["excess_risk"] >= 1 / (2 * d.n_human)  # d/(2 n_H) plus a nonnegative LLM-stage term
    ada = tab.set_index("method").loc["dial-ada"]
    lo, hi = sorted([anc["excess_risk"], tab.set_index("method").loc["human", "excess_risk"]])
    assert lo <= ada["excess_risk"] <= hi


def test_the_result_carries_its_data_through_replace_and_pickle(small, tmp_path):
    """``plan(result, budgets=..., target=...)`` (the data from ``result.data``)
    equals the call with the data passed explicitly, also for a result copied by
    ``dataclasses.replace`` or round-tripped through pickle / joblib."""
    import pickle

    import joblib

    _, d = small
    res = pydial.fit(d, "dial-anc")
    assert res.data is d
    kw = {"budgets": [200, 800], "target": "item00 - item01", "k": 2}
    ref = pydial.plan(res, data=d, **kw)
    pd.testing.assert_frame_equal(pydial.plan(res, **kw), ref)
    nxt = pydial.next_pairs(res, 20, "contrast", target="item00 - item01")
    pd.testing.assert_frame_equal(nxt, pydial.next_pairs(res, 20, "contrast", data=d, target="item00 - item01"))
    joblib.dump(res, tmp_path / "res.joblib")
    copies = [dataclasses.replace(res), pickle.loads(pickle.dumps(res)), joblib.load(tmp_path / "res.joblib")]
    for r in copies:
        assert r.data.items == d.items and r.data.n_human == d.n_human
        pd.testing.assert_frame_equal(pydial.plan(r, **kw), ref)
        pd.testing.assert_frame_equal(pydial.next_pairs(r, 20, "contrast", target="item00 - item01"), nxt)


def test_shrinkage_weight_minimizes_the_cp_form_of_gacv():
    """``kappa = (1 - df/T)_+`` is the grid minimizer of ``(1 - kappa)^2 T + 2 kappa df``."""
    grid = np.linspace(0, 1, 100_001)
    for df, T in [(8, 3.0), (8, 8.0), (8, 12.0), (8, 40.0), (18, 25.0)]:
        best = grid[np.argmin((1 - grid) ** 2 * T + 2 * grid * df)]
        assert shrinkage_weight(T, df) == pytest.approx(best, abs=2e-5)


@pytest.mark.parametrize("bias", [0.0, 2e-4, 3e-3])
def test_ada_risk_equals_monte_carlo_of_the_shrinkage_estimator(small, bias):
    """The DIAL-Ada first-order risk (Judge-Bock identities and quadrature) equals a
    direct Monte Carlo of ``s_A + kappa(T) (s_H - s_A)`` in whitened coordinates:
    ``X ~ N(mu, I_df)``, ``||mu||^2 = 2 n Delta``, risk ``(d + E||kappa X - mu||^2) / (2 n)``;
    and the endpoints of the weighted covariance are the anchored and human ones."""
    _, d = small
    p = dataclasses.replace(make_pilot(pydial.fit(d, "dial-anc")), delta=bias)
    n, df, dd = 500, p.df, p.B.shape[1]
    rng = np.random.default_rng(4)
    mu = np.zeros(df)
    mu[0] = np.sqrt(2 * n * p.bias)
    X = mu + rng.standard_normal((400_000, df))
    kap = shrinkage_weight((X**2).sum(1), df)
    loss = ((kap[:, None] * X - mu) ** 2).sum(1)
    mc, se = (dd + loss.mean()) / (2 * n), loss.std() / np.sqrt(loss.size) / (2 * n)
    assert p.excess_risk("dial-ada", n) == pytest.approx(mc, abs=4 * se)
    np.testing.assert_allclose(p.weighted_covariance(n, 0.0), p.covariance("dial-anc", n), atol=1e-14)
    np.testing.assert_allclose(p.weighted_covariance(n, 1.0), p.covariance("human", n), atol=1e-14)
    kq = p.ada_weights(n, nodes=4000)
    assert kq.mean() == pytest.approx(kap.mean(), abs=0.01)  # the quadrature nodes of kappa's distribution


@pytest.mark.slow
def test_predicted_excess_risk_matches_monte_carlo_on_paper_dgp():
    """Paper DGP (N, K, r) = (10, 4, 1), n_LLM = 20,000: the pilot's first-order
    predictions agree with Monte Carlo (LLM and human data redrawn from the truth,
    refitted) within 20% at n_H in {200, 800}, for Human and DIAL-Anc.  Human fits
    whose MLE does not exist (unresolved, refused by ``pydial.fit``) are left out,
    as the theorem's fallback event."""
    sim = pydial.simulate(N=10, K=4, rank=1, n_llm=20_000, n_human=200, seed=21)
    truth, d = sim.truth, sim.comparisons
    pilot = pydial.fit(d, "dial-anc")
    pred = pydial.plan(pilot, budgets=[200, 800], design="uniform").set_index(["budget", "method"])["excess_risk"]
    L = d.llm
    p_llm = expit(truth.llm_eta(L.judge, L.i, L.j, L.a))
    rng = np.random.default_rng(5)
    N = truth.N
    pi, pj = np.triu_indices(N, 1)
    p_h = expit(truth.s_h[pi] - truth.s_h[pj])
    er = {(n, m): [] for n in (200, 800) for m in ("human", "dial-anc")}
    for _ in range(12):  # LLM data sets
        dl = with_human(llm_frame(d, p_llm, rng), pd.DataFrame(columns=["record_id", "judge", "item_a", "item_b",
                                                                         "first", "winner"]), truth.items)
        ch = Chart(N, dl.K, 1, None, True)
        M = ch.structure(fit_structured(dl, ch, np.inf, initial_theta(dl, ch)).theta).mu[:, None]
        for _ in range(25):  # human data sets per LLM data set
            for n in (200, 800):
                c = rng.multinomial(n, np.full(pi.size, 1 / pi.size))
                y = rng.binomial(c, p_h)
                m = c > 0
                hc = HumanCells(pi[m], pj[m], c[m].astype(float), y[m].astype(float))
                er[(n, "dial-anc")].append(metrics.excess_risk(M @ fit_calibration(hc, M).x, truth.s_h))
                h = fit_human_btl(hc, N)
                if h.opt.resolved:
                    er[(n, "human")].append(metrics.excess_risk(h.s, truth.s_h))
    for key, vals in er.items():
        mc = np.mean(vals)
        se = np.std(vals, ddof=1) / np.sqrt(len(vals))
        assert pred[key] == pytest.approx(mc, rel=0.2), f"{key}: predicted {pred[key]:.3e}, MC {mc:.3e} +- {se:.1e}"


@pytest.mark.slow
def test_simulate_mode_agrees_with_theory_and_is_seeded(small):
    """The parametric simulation reproduces the human first-order risk and is reproducible."""
    _, d = small
    res = pydial.fit(d, "human")
    kw = {"budgets": [300], "methods": ["human"], "method": "simulate", "seed": 3, "design": "uniform"}
    pd.testing.assert_frame_equal(pydial.plan(res, n_sim=3, **kw), pydial.plan(res, n_sim=3, n_jobs=2, **kw))
    a = pydial.plan(res, n_sim=40, **kw)
    assert a["n_ok"].iloc[0] >= 38
    th = pydial.plan(res, budgets=[300], methods=["human"], design="uniform")
    assert a["excess_risk"].iloc[0] == pytest.approx(th["excess_risk"].iloc[0], rel=0.25)
    assert a["ci_width"].iloc[0] == pytest.approx(th["ci_width"].iloc[0], rel=0.1)


def test_plan_argument_errors(small):
    _, d = small
    res = pydial.fit(d, "human")
    with pytest.raises(ValueError, match="budgets"):
        pydial.plan(res, budgets=[0, 100])
    with pytest.raises(ValueError, match="method must be one of"):
        pydial.plan(res, method="bootstrap")
    with pytest.raises(pydial.DataError, match="unknown item"):
        pydial.plan(res, target="item00 - nope")
    with pytest.raises(pydial.DataError, match="does not match"):
        pydial.plan(res, data=pydial.simulate(N=8, K=3, n_llm=600, n_human=50, seed=1).comparisons)
    with pytest.raises(pydial.DataError, match="does not match"):
        pydial.next_pairs(res, 5, data=pydial.simulate(N=8, K=3, n_llm=600, n_human=50, seed=1).comparisons)
    with pytest.raises(pydial.DataError, match="data: the result carries no data"):
        pydial.plan(dataclasses.replace(res, model=dataclasses.replace(res.model, data=None)))
    with pytest.raises(ValueError, match="k must be"):
        pydial.plan(res, k=8)


def test_plot_plan_log_budget_axis(small):
    import matplotlib

    matplotlib.use("Agg")
    _, d = small
    tab = pydial.plan(pydial.fit(d, "dial-anc"), budgets=[100, 1000])
    fig = pydial.plot_plan(tab)
    assert all(ax.get_xscale() == "log" for ax in fig.axes)
    assert len(fig.axes[0].lines) == 3


# ------------------------------------------------------------------ next pairs
def _fisher_contrast_var(d, s, extra, g):
    """Contrast variance from the Fisher information rebuilt from counts (human BTL)."""
    N = d.N
    i = np.r_[d.human.i, extra[:, 0]]
    j = np.r_[d.human.j, extra[:, 1]]
    n = np.r_[d.human.n, np.ones(len(extra))]
    T = centering_basis(N)
    D = difference_design(i, j, N)
    info = glm_information(D @ T, n, expit(D @ s))
    C = T @ np.linalg.inv(info) @ T.T
    return float(g @ C @ g)


@pytest.mark.parametrize("objective", ["contrast", "ranking", "D"])
def test_next_pairs_prediction_equals_rebuilt_information(small, objective):
    """For a Fisher human fit the greedy design's predicted objective after the new
    labels equals the objective recomputed from the augmented information."""
    _, d = small
    res = pydial.fit(d, "human")
    prop = pydial.next_pairs(res, 60, objective, k=3)
    assert list(prop.columns[:4]) == ["item_a", "item_b", "n", "variance_reduction"]
    assert prop["n"].sum() == 60
    s = res.scores["score"].to_numpy()
    it = list(res.items)
    extra = np.array([(it.index(a), it.index(b)) for a, b, n in prop[["item_a", "item_b", "n"]].itertuples(index=False)
                      for _ in range(n)])
    before, after = prop.attrs["before"], prop.attrs["after"]
    assert after < before
    assert prop["variance_reduction"].sum() == pytest.approx(before - after, rel=1e-8)
    if objective == "contrast":
        a, b = res.ranking().index[:2]
        g = np.zeros(d.N)
        g[it.index(a)], g[it.index(b)] = 1, -1
        assert before == pytest.approx(float(g @ res.cov.to_numpy() @ g), rel=1e-8)
        assert after == pytest.approx(_fisher_contrast_var(d, s, extra, g), rel=1e-6)
    if objective == "D":
        T = centering_basis(d.N)
        D0 = difference_design(d.human.i, d.human.j, d.N)
        D1 = difference_design(np.r_[d.human.i, extra[:, 0]], np.r_[d.human.j, extra[:, 1]], d.N)
        n1 = np.r_[d.human.n, np.ones(len(extra))]
        ld0 = np.linalg.slogdet(glm_information(D0 @ T, d.human.n, expit(D0 @ s)))[1]
        ld1 = np.linalg.slogdet(glm_information(D1 @ T, n1, expit(D1 @ s)))[1]
        assert before - after == pytest.approx(ld1 - ld0, rel=1e-6)


def test_next_pairs_contrast_design_beats_random_labels(small):
    """Refitting with the proposed labels (outcomes from the truth) narrows the
    target interval more than as many uniformly random labels, on average."""
    sim, d = small
    res = pydial.fit(d, "human")
    a, b = res.ranking().index[:2]
    prop = pydial.next_pairs(res, 200, "contrast")
    it = np.asarray(d.items, dtype=object)
    s_h = sim.truth.s_h
    rng = np.random.default_rng(8)
    base = d.to_frame()
    se = {"proposed": [], "random": []}
    pi, pj = np.triu_indices(d.N, 1)
    for _ in range(5):
        ii = np.repeat([list(it).index(x) for x in prop["item_a"]], prop["n"])
        jj = np.repeat([list(it).index(x) for x in prop["item_b"]], prop["n"])
        r = rng.integers(0, pi.size, 200)
        for name, (i, j) in {"proposed": (ii, jj), "random": (pi[r], pj[r])}.items():
            won = rng.random(i.size) < expit(s_h[i] - s_h[j])
            new = pd.DataFrame({"record_id": [f"n{t}" for t in range(i.size)], "judge": "human", "item_a": it[i],
                                "item_b": it[j], "first": "a", "winner": np.where(won, "a", "b")})
            d2 = pydial.Comparisons.from_frame(pd.concat([base.astype({"record_id": str}), new]), items=list(it))
            se[name].append(pydial.fit(d2, "human").contrast(a, b)["se"])
    assert np.mean(se["proposed"]) < 0.8 * np.mean(se["random"])
    assert np.mean(se["proposed"]) == pytest.approx(np.sqrt(prop.attrs["after"]), rel=0.15)


def test_next_pairs_costs_and_errors(small):
    _, d = small
    res = pydial.fit(d, "human")
    a, b = res.ranking().index[:2]
    free = pydial.next_pairs(res, 5, "contrast")
    assert (free["item_a"].iloc[0], free["item_b"].iloc[0]) in {(a, b), (b, a)}
    costly = pydial.next_pairs(res, 5, "contrast", costs={(a, b): 1e6})
    assert not (((costly["item_a"] == a) & (costly["item_b"] == b)) | ((costly["item_a"] == b) & (costly["item_b"] == a))).any()
    assert costly["cost"].sum() == 5
    with pytest.raises(ValueError, match="objective"):
        pydial.next_pairs(res, 5, "A")
    with pytest.raises(ValueError, match="n must be"):
        pydial.next_pairs(res, 0)
    with pytest.raises(pydial.DataError, match="unknown pair"):
        pydial.next_pairs(res, 5, costs={("x", "y"): 2.0})
    with pytest.raises(pydial.DataError, match="positive"):
        pydial.next_pairs(res, 5, costs={(a, b): -1.0})


def test_next_pairs_anchored_D_design_uses_the_calibration_block(small):
    """For DIAL-Anc (d = 1) the D-optimal step maximizes p(1-p) (mu_i - mu_j)^2."""
    _, d = small
    res = pydial.fit(d, "dial-anc")
    prop = pydial.next_pairs(res, 1, "D")
    pil = make_pilot(res)
    s = res.scores["score"].to_numpy()
    pi, pj = np.triu_indices(d.N, 1)
    p = expit(s[pi] - s[pj])
    crit = p * (1 - p) * (pil.B[pi, 0] - pil.B[pj, 0]) ** 2
    t = int(np.argmax(crit))
    assert (prop["item_a"].iloc[0], prop["item_b"].iloc[0]) == (d.items[pi[t]], d.items[pj[t]])


# ------------------------------------------------------------------------ CLI
def test_cli_plan_writes_table_plot_and_pairs(tmp_path, capsys):
    from pydial.cli import EXIT_DATA, main

    code = main(["plan", "synthetic", "--budgets", "100,400", "--next", "10", "--objective", "D", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    tab = pd.read_csv(tmp_path / "plan.csv")
    assert list(tab.columns) == list(PLAN_COLUMNS)
    assert sorted(tab["method"].unique()) == ["dial-ada", "dial-anc", "human"]
    assert tab.loc[tab["method"] == "human", "excess_risk"].tolist() == pytest.approx([9 / 200, 9 / 800])
    assert (tmp_path / "plan.png").stat().st_size > 0
    nxt = pd.read_csv(tmp_path / "next_pairs.csv")
    assert nxt["n"].sum() == 10 and "next 10 human comparisons" in out
    code = main(["plan", "synthetic", "--target", "item00 - nope"])
    assert code == EXIT_DATA and "unknown item 'nope'" in capsys.readouterr().err
