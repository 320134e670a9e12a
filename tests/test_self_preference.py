"""Self-preference: a judge favouring its own model family's responses, as a judge-specific covariate.

The covariate of judge ``k``'s comparison of items ``i < j`` is ``1[i own_k] - 1[j own_k]``
(:meth:`pydial.Comparisons.with_self_preference`).  References are independent of the code
under test: the covariate recomputed from the raw rows, central finite differences of the loss,
the loss of the chart without fixed entries at zero effects, an explicit direction of
non-identification (``r = K - 1``: a judge's scores absorb ``beta_k o_k``), and the simulation's
true effects.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fdcheck import fd_jacobian

import pydial
from pydial.data.comparisons import SELF_PREFERENCE, Comparisons
from pydial.estimation.spec import ModelSpec
from pydial.exceptions import ArgumentError, DataError, IdentifiabilityError
from pydial.model.chart import Chart, structure_from_S
from pydial.model.identifiability import check_design
from pydial.model.likelihood import Objective

OWN = {"judge0": ["item00", "item01"], "judge2": ["item05"]}
EFFECT = {"judge0": 0.6, "judge2": -0.4}


def _frame(rng: np.random.Generator, n: int = 400) -> pd.DataFrame:
    items = ["a", "b", "c", "d", "e"]
    judges = np.array(["g1", "g2", "g3", "human"])
    ia = rng.integers(0, 5, n)
    ib = (ia + rng.integers(1, 5, n)) % 5  # never the same item
    return pd.DataFrame({"record_id": np.arange(n), "judge": judges[rng.integers(0, 4, n)],
                         "item_a": np.array(items)[ia], "item_b": np.array(items)[ib],
                         "first": np.where(rng.random(n) < 0.5, "a", "b"),
                         "winner": np.where(rng.random(n) < 0.5, "a", "b"), "length_a": rng.normal(size=n),
                         "length_b": rng.normal(size=n)})


@pytest.fixture(scope="module")
def sim():
    return pydial.simulate(N=10, K=5, rank=1, n_llm=60_000, n_human=3_000, seed=4, covariates=["length"], beta=0.3, behavior=dict(self_preference=OWN, self_effect=EFFECT))


# ------------------------------------------------------------------ the covariate
def test_covariate_values_by_hand():
    df = _frame(np.random.default_rng(0))
    own = {"g1": ["a"], "g2": ["c", "d"]}
    d = Comparisons.from_frame(df, covariates=["length"], self_preference=own)
    assert d.covariates == ("length", SELF_PREFERENCE)
    assert d.covariate_scale[SELF_PREFERENCE] == 1.0  # not standardized
    assert d.self_preference == {"g1": ("a",), "g2": ("c", "d")}
    # by hand: side a minus side b of the raw row, flipped when the canonical order swaps the items
    is_own = np.array([x in own.get(k, ()) for k, x in zip(df["judge"], df["item_a"])], float)
    is_own_b = np.array([x in own.get(k, ()) for k, x in zip(df["judge"], df["item_b"])], float)
    swap = (df["item_a"] > df["item_b"]).to_numpy()
    expected = np.where(swap, -1.0, 1.0) * (is_own - is_own_b)
    np.testing.assert_array_equal(d.frame["cov:" + SELF_PREFERENCE].to_numpy(), expected)
    np.testing.assert_array_equal(d.frame.loc[df["judge"] == "human", "cov:" + SELF_PREFERENCE], 0.0)
    # the other covariate is unchanged, and the cells carry both columns
    base = Comparisons.from_frame(df, covariates=["length"])
    np.testing.assert_array_equal(d.frame["cov:length"], base.frame["cov:length"])
    assert d.llm.z.shape[1] == 2 and d.n_llm == base.n_llm
    # the same data from the method, from counts and back from to_frame
    pd.testing.assert_frame_equal(d.llm_cells(), base.with_self_preference(own).llm_cells())
    again = Comparisons.from_frame(d.to_frame(), covariates=["length"], self_preference=d.self_preference)
    pd.testing.assert_frame_equal(again.llm_cells(), d.llm_cells(), rtol=1e-12)
    np.testing.assert_array_equal(d.covariate_support, [[True, True], [True, True], [True, False], [True, False]])


def test_self_preference_alone_and_from_counts():
    df = _frame(np.random.default_rng(1)).drop(columns=["length_a", "length_b"])
    d = Comparisons.from_frame(df, self_preference={"g3": ["e"]})
    assert d.covariates == (SELF_PREFERENCE,) and d.p == 1
    counts = (df.assign(wins_a=(df["winner"] == "a").astype(int), wins_b=(df["winner"] == "b").astype(int), ties=0)
              .groupby(["judge", "item_a", "item_b", "first"], as_index=False)[["wins_a", "wins_b", "ties"]].sum())
    c = Comparisons.from_counts(counts, self_preference={"g3": ["e"]})
    key = ["judge", "item_i", "item_j", "a", "z_self_preference"]
    pd.testing.assert_frame_equal(c.llm_cells().groupby(key)[["n", "y"]].sum(),
                                  d.llm_cells().groupby(key)[["n", "y"]].sum())


def test_unknown_judges_and_items_are_named():
    d = Comparisons.from_frame(_frame(np.random.default_rng(2)))
    with pytest.raises(DataError, match=r"\['gpt-9'\]"):
        d.with_self_preference({"gpt-9": ["a"]})
    with pytest.raises(DataError, match="people have no self-preference"):
        d.with_self_preference({"human": ["a"]})
    with pytest.raises(DataError, match=r"\['zz'\]"):
        d.with_self_preference({"g1": ["a", "zz"]})
    with pytest.raises(ArgumentError, match="already"):
        d.with_self_preference({"g1": ["a"]}).with_self_preference({"g2": ["b"]})


# ------------------------------------------------------------------ fixed entries
def test_chart_fixes_the_entries_without_an_effect(sim):
    d = sim.comparisons
    # rows judge0..judge4 then the people; columns (length, self_preference)
    support = np.array([[1, 1], [1, 0], [1, 1], [1, 0], [1, 0], [1, 0]], bool)
    np.testing.assert_array_equal(d.covariate_support, support)
    ch = Chart.for_data(d, 1, "mu")
    plain = Chart(d.N, d.K, 1, "mu")
    assert ch.dim == plain.dim + int(support.sum()) and ch.dim_full == plain.dim_full + support.size
    np.testing.assert_array_equal(np.asarray(ch.fixed), ~support.ravel())
    beta = np.where(support, np.arange(12.0).reshape(6, 2) + 1, 0.0)
    theta = ch.pack(np.c_[np.ones(d.K), np.zeros(d.K)], np.zeros((d.N, 2)), 1.0, np.zeros(d.K), beta)
    np.testing.assert_array_equal(ch.covariate_effects(theta), beta)
    np.testing.assert_array_equal(ch.to_full(theta)[ch.off_beta:], beta.ravel())
    np.testing.assert_array_equal(theta[ch.human_coordinates[1:]], beta[-1, :1])  # beta_H: length only
    shared = Chart.for_data(d, 1, None, shared=True)
    assert shared.fixed is None and shared.sizes["beta"] == 2  # the shared row has both
    no_self = pydial.simulate(N=6, K=3, n_llm=2000, n_human=300, covariates=["length"], beta=0.2, seed=1).comparisons
    assert Chart.for_data(no_self, 1, "mu").fixed is None


def test_fixed_chart_loss_equals_the_full_chart_at_zero_effects(sim):
    """Independent of T: the full chart (every entry free) evaluated with the fixed entries at 0."""
    d = sim.comparisons
    ch = Chart.for_data(d, 1, "W")
    full = Chart(d.N, d.K, 1, "W", True, d.p)
    rng = np.random.default_rng(3)
    theta = rng.normal(scale=0.3, size=ch.dim)
    theta_full = np.zeros(full.dim)
    common = full.dim - full.sizes["beta"]
    theta_full[:common] = theta[:common]
    theta_full[full.slices["beta"]] = ch.covariate_effects(theta).ravel()
    for lam in (np.inf, 2.0):
        a, b = Objective.weighted(ch, d, lam), Objective.weighted(full, d, lam)
        assert a.value(theta) == pytest.approx(b.value(theta_full), rel=1e-13)
        g_full = b.value_grad_hess(theta_full)[1]
        keep = np.r_[np.arange(common), common + ch.beta_index]
        np.testing.assert_allclose(a.value_grad_hess(theta)[1], g_full[keep], atol=1e-13)


@pytest.mark.parametrize("calibration,ties", [("mu", None), ("W", "davidson")])
def test_objective_derivatives_with_fixed_entries(calibration, ties):
    d = pydial.simulate(N=6, K=3, n_llm=3000, n_human=600, covariates=["length"], beta=0.4, seed=1,
                        tie_rate=0.1 if ties else 0.0, ties=ties, behavior=dict(self_preference={"judge1": ["item02"]}, self_effect=0.5)).comparisons
    ch = Chart.for_data(d, 1, calibration)
    assert ch.fixed is not None and ch.sizes["beta"] == 5  # length x 4 rows, the self-preference of judge1
    obj = Objective.weighted(ch, d, 2.0, ties=ties)
    x = np.random.default_rng(2).normal(scale=0.3, size=obj.dim)
    _, g, H = obj.value_grad_hess(x)
    np.testing.assert_allclose(g, fd_jacobian(lambda t: np.array([obj.value(t)]), x)[0], atol=1e-8)
    np.testing.assert_allclose(H, fd_jacobian(lambda t: obj.value_grad_hess(t)[1], x), atol=1e-7)


# ------------------------------------------------------------------ the methods
def test_judges_refuses_self_preference(sim):
    with pytest.raises(IdentifiabilityError, match="confounded with the judge's own scores"):
        pydial.fit(sim.comparisons, "judges")


@pytest.mark.parametrize("method", ["dial-anc", "dial-ada"])
def test_recovers_the_simulated_self_preference(sim, method):
    res = pydial.fit(sim.comparisons, method, rank=1)
    ce = res.covariate_effects
    rows = [(k, SELF_PREFERENCE) for k in ("judge0", "judge2")]
    assert [k for k in ce.index if k[1] == SELF_PREFERENCE] == rows  # no row for the unmapped judges or the people
    est, se = ce.loc[rows, "beta"].to_numpy(), ce.loc[rows, "se"].to_numpy()
    assert np.all(np.abs(est - np.array([0.6, -0.4])) < 4 * se)
    for k in ("judge0", "judge2"):
        assert res.covariate_test(k, covariates=[SELF_PREFERENCE])["p_value"] < 0.01  # rejects beta_k = 0 at 1%
    # the length effects (on the standardized covariate) are there for everyone
    scale = sim.comparisons.covariate_scale["length"]
    lengths = ce.xs("length", level="covariate")
    assert list(lengths.index) == [*sim.comparisons.judges, "human"]
    assert np.all(np.abs(lengths["beta"].to_numpy()[:-1] - 0.3 * scale) < 4 * lengths["se"].to_numpy()[:-1])
    with pytest.raises(KeyError, match="fixed 0"):
        res.covariate_test("judge1", covariates=[SELF_PREFERENCE])
    assert res.covariate_test("human")["df"] == 1  # the people's length effect alone


def test_human_and_pooled_with_self_preference(sim):
    d = sim.comparisons
    hum = pydial.fit(d, "human")
    assert list(hum.covariate_effects.index) == [("human", "length")]
    pooled = pydial.fit(d, "pooled")
    assert list(pooled.covariate_effects.index) == [("(pooled LLM judges)", "length"),
                                                    ("(pooled LLM judges)", SELF_PREFERENCE), ("human", "length")]
    assert np.all(np.isfinite(pooled.covariate_effects["se"]))


# ------------------------------------------------------------------ identifiability
def test_check_refuses_a_design_whose_own_items_lie_in_the_score_space():
    """``r = K - 1`` leaves every judge's scores free: ``beta_k o_k`` is absorbed by them."""
    sim = pydial.simulate(N=8, K=3, rank=1, n_llm=20_000, n_human=1_000, seed=2, behavior=dict(self_preference={"judge0": ["item00", "item03"]}, self_effect=0.5))
    d = sim.comparisons
    assert check_design(d, rank=1, method="dial-anc").ok
    rep = check_design(d, rank=2, method="dial-anc")
    assert not rep.ok and list(rep.problems["condition"]) == ["self-preference"]
    assert "judge0:self_preference" in rep.problems["detail"].iloc[0]
    with pytest.raises(IdentifiabilityError, match="self-preference"):
        pydial.fit(d, "dial-anc", rank=2)
    # the direction the check finds: S_0 + t o (centered) with beta_0 - t leaves every LLM predictor unchanged
    ch = Chart.for_data(d, 2, None)
    rng = np.random.default_rng(0)
    S = rng.normal(size=(3, 8))
    S -= S.mean(axis=1, keepdims=True)
    S[0] += 1.0 * np.arange(8) / 8 - 7 / 16  # a nonzero consensus
    o = np.isin(np.arange(8), [0, 3]).astype(float)
    t = 0.7
    S2 = S.copy()
    S2[0] += t * (o - o.mean())
    b = rng.normal(size=3)
    th1 = ch.from_structure(structure_from_S(S, 2), b=b, beta=np.array([[0.2], [0.0], [0.0]]))
    th2 = ch.from_structure(structure_from_S(S2, 2), b=b, beta=np.array([[0.2 - t], [0.0], [0.0]]))
    obj = Objective.weighted(ch, d, np.inf)
    np.testing.assert_allclose(obj.eta(th1), obj.eta(th2), atol=1e-10)
    assert obj.value(th1) == pytest.approx(obj.value(th2), rel=1e-12)


def test_judges_leave_out_a_covariate_that_is_zero_on_a_judges_comparisons():
    """Any covariate 0 on all of a group's cells is a fixed 0: in ``judges`` that judge's design drops the column."""
    df = _frame(np.random.default_rng(5), 3000)
    g1 = (df["judge"] == "g1").to_numpy()
    df.loc[g1, "length_b"] = df.loc[g1, "length_a"]  # g1's comparisons all have z = 0
    d = Comparisons.from_frame(df, covariates=["length"])
    np.testing.assert_array_equal(d.covariate_support[:, 0], [False, True, True, True])
    res = pydial.fit(d, "judges")
    assert list(res.covariate_effects.index) == [("g2", "length"), ("g3", "length")]
    # g1's scores are those of its model without the covariate
    alone = pydial.fit(Comparisons.from_frame(df[g1]), "judges")
    np.testing.assert_allclose(res.judge_scores.loc["g1"], alone.judge_scores.loc["g1"], atol=1e-8)
    np.testing.assert_allclose(res.judge_scores_se.loc["g1"], alone.judge_scores_se.loc["g1"], rtol=1e-6)


def test_simulate_reads_a_single_own_item_name_as_one_item():
    """A judge's own items given as one name (not a list) are that item, in the draws, the truth and the data."""
    sim = pydial.simulate(N=6, K=2, rank=1, n_llm=400, n_human=60, seed=2,
                          behavior=dict(self_preference={"judge0": "item03"}, self_effect=0.5))
    assert sim.truth.self_preference == {"judge0": ("item03",)}
    assert sim.config["self_preference"] == {"judge0": ["item03"]}
    assert sim.comparisons.self_preference == {"judge0": ("item03",)}
    z = sim.comparisons.llm_cells()
    own = z[(z["judge"] == "judge0") & ((z["item_i"] == "item03") | (z["item_j"] == "item03"))]
    assert len(own) > 0 and (own["z_self_preference"].abs() > 0).all()
