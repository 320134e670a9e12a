"""``pydial.simulate(both_orders=True)``: every record judged by every judge in both display orders.

The expectations are computed here from the true parameters with explicit formulas
(the order-effect BTL model ``logit P(first shown wins) = s_first - s_second + b_k``), not
with the simulator's helpers.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial import ArgumentError, ArgumentTypeError

B = [0.0, 0.5, 1.0, 2.0]


def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


@pytest.fixture(scope="module")
def sim():
    return pydial.simulate(N=8, K=4, rank=1, n_llm=3000, n_human=400, both_orders=True, seed=4, behavior=dict(position_effects=B))


def _cells(sim):
    """LLM rows with the judge index, canonical item indices and the canonical score difference d = s_ki - s_kj."""
    t = sim.truth
    f = sim.frame[sim.frame["judge"] != "human"]
    k = f["judge"].map({name: q for q, name in enumerate(t.judges)}).to_numpy()
    i = f["item_a"].map({name: q for q, name in enumerate(t.items)}).to_numpy()
    j = f["item_b"].map({name: q for q, name in enumerate(t.items)}).to_numpy()
    return f, k, t.S[k, i] - t.S[k, j]


def test_every_record_in_both_orders_for_every_judge(sim):
    f = sim.frame
    llm, human = f[f["judge"] != "human"], f[f["judge"] == "human"]
    assert len(llm) == 2 * 4 * 3000 and len(human) == 400
    counts = llm.groupby(["record_id", "judge", "first"]).size()
    assert len(counts) == 3000 * 4 * 2 and (counts == 1).all()
    assert sorted(llm["record_id"].unique()) == list(range(3000))
    # one item pair per record, canonical (item_a < item_b)
    assert (llm.groupby("record_id")[["item_a", "item_b"]].nunique() == 1).all().all()
    assert (llm["item_a"] < llm["item_b"]).all()
    # the human labels go to the first n_human records, on the records' pairs
    pairs = llm.drop_duplicates("record_id").set_index("record_id")[["item_a", "item_b"]]
    assert list(human["record_id"]) == list(range(400))
    pd.testing.assert_frame_equal(human.set_index("record_id")[["item_a", "item_b"]], pairs.loc[range(400)])
    np.testing.assert_array_equal(sim.truth.b, B)
    assert sim.config["both_orders"] is True and sim.config["position_effects"] == B


def test_first_position_win_rate_matches_the_model(sim):
    """Per judge, the share of verdicts for the response shown first is the model's average within MC error."""
    f, k, d = _cells(sim)
    a = np.where(f["first"].to_numpy() == "a", 1.0, -1.0)
    p_first = sig(a * d + sim.truth.b[k])  # P(the item shown first wins)
    won_first = (f["winner"].to_numpy() == f["first"].to_numpy()).astype(float)
    for q in range(4):
        m = k == q
        expected, observed = p_first[m].mean(), won_first[m].mean()
        se = np.sqrt(np.sum(p_first[m] * (1 - p_first[m]))) / m.sum()
        assert abs(observed - expected) < 4 * se, (q, observed, expected, se)
    # b_k = 0: both orders of a record average sigma(d) and sigma(-d), so the expectation is exactly 1/2
    assert p_first[k == 0].mean() == pytest.approx(0.5, abs=1e-12)
    assert won_first[k == 3].mean() > 0.6  # b_k = 2: mostly the first shown (0.68-0.76 for seeds 0-8)


def test_the_two_orders_are_independent_draws(sim):
    """The swap-inconsistency rate is p+ (1 - p-) + (1 - p+) p- (independent orders), and judge_diagnostics agrees."""
    f, k, d = _cells(sim)
    first = f["first"].to_numpy() == "a"
    p_plus = sig(d[first] + sim.truth.b[k[first]])  # P(item i wins) when i is shown first
    p_minus = sig(d[~first] - sim.truth.b[k[~first]])  # ... when j is shown first
    assert np.array_equal(f["record_id"].to_numpy()[first], f["record_id"].to_numpy()[~first])
    changed = f["winner"].to_numpy()[first] != f["winner"].to_numpy()[~first]
    p_change = p_plus * (1 - p_minus) + (1 - p_plus) * p_minus
    table = pydial.judge_diagnostics(sim.comparisons, n_boot=0)
    for q, name in enumerate(sim.truth.judges):
        m = k[first] == q
        se = np.sqrt(np.sum(p_change[m] * (1 - p_change[m]))) / m.sum()
        assert abs(changed[m].mean() - p_change[m].mean()) < 4 * se
        assert table.loc[name, "swap_inconsistency"] == pytest.approx(changed[m].mean())
        assert table.loc[name, "coverage"] == 1.0


def test_human_labels_follow_the_human_model(sim):
    t = sim.truth
    h = sim.frame[sim.frame["judge"] == "human"]
    idx = {name: q for q, name in enumerate(t.items)}
    p = sig(t.s_h[h["item_a"].map(idx).to_numpy()] - t.s_h[h["item_b"].map(idx).to_numpy()])
    won = (h["winner"] == "a").to_numpy()
    assert abs(won.mean() - p.mean()) < 4 * np.sqrt(np.sum(p * (1 - p))) / p.size


def test_the_truth_does_not_depend_on_the_design():
    one = pydial.simulate(N=6, K=3, n_llm=50, n_human=10, seed=2)
    both = pydial.simulate(N=6, K=3, n_llm=50, n_human=10, seed=2, both_orders=True)
    for name in ("S", "b", "s_h", "mu", "gamma"):
        np.testing.assert_array_equal(getattr(one.truth, name), getattr(both.truth, name))
    given = pydial.simulate(N=6, K=3, n_llm=50, n_human=10, seed=2, behavior=dict(position_effects=[1, 2, 3]))
    np.testing.assert_array_equal(given.truth.S, one.truth.S)
    np.testing.assert_array_equal(given.truth.b, [1, 2, 3])


def test_covariates_are_drawn_once_per_record():
    sim = pydial.simulate(N=6, K=3, n_llm=40, n_human=20, seed=3, both_orders=True, covariates=["length"], beta=0.5)
    f = sim.frame
    assert (f.groupby("record_id")[["length_a", "length_b"]].nunique() == 1).all().all()
    assert sim.comparisons.p == 1


def test_ties_in_both_orders():
    sim = pydial.simulate(N=6, K=2, n_llm=400, n_human=50, seed=5, both_orders=True, tie_rate=0.3)
    llm = sim.frame[sim.frame["judge"] != "human"]
    assert len(llm) == 1600 and 0.2 < (llm["winner"] == "tie").mean() < 0.4


# Digests of the frames the previous simulator (one judgment per record) drew for seed 11:
# without both_orders the draws are unchanged.
UNCHANGED = [
    ({}, "a33d6fde9ecfc33c"),
    ({"tie_rate": 0.2}, "670e25a0d6870844"),
    ({"covariates": ["length"], "beta": 0.4}, "406de936d727464d"),
    ({"behavior": {"sigma_pos": 0.5, "overdispersion": 1.0}}, "dc1aa451348607e4"),
    ({"behavior": {"self_preference": {"judge0": ["item00"]}, "self_effect": 0.7}}, "aeda9aa65b338b38"),
]


@pytest.mark.parametrize("kwargs,digest", UNCHANGED)
def test_without_the_option_the_draws_are_unchanged(kwargs, digest):
    frames = [pydial.simulate(N=7, K=3, n_llm=300, n_human=40, seed=11, **kwargs, **extra).frame
              for extra in ({}, {"both_orders": False})]
    pd.testing.assert_frame_equal(*frames)
    assert hashlib.sha256(frames[0].to_csv(index=False).encode()).hexdigest()[:16] == digest


def test_one_order_stream_by_hand():
    """Without the option the LLM rows are the documented draws: pair, judge, order, then the outcomes."""
    sim = pydial.simulate(N=5, K=3, n_llm=200, n_human=0, seed=9)
    g_llm = np.random.default_rng(9).spawn(5)[3]
    pair = g_llm.integers(0, 10, size=200)
    judge = g_llm.integers(0, 3, size=200)
    a_first = g_llm.random(200) < 0.75
    pi, pj = np.triu_indices(5, 1)
    t = sim.truth
    eta = t.S[judge, pi[pair]] - t.S[judge, pj[pair]] + np.where(a_first, 1, -1) * t.b[judge]
    winner = np.where(g_llm.random(200) < sig(eta), "a", "b")
    f = sim.frame
    np.testing.assert_array_equal(f["judge"], np.asarray(t.judges)[judge])
    np.testing.assert_array_equal(f["first"], np.where(a_first, "a", "b"))
    np.testing.assert_array_equal(f["winner"], winner)
    np.testing.assert_array_equal(f["record_id"], np.arange(200))


@pytest.mark.parametrize("kwargs,error,match", [
    ({"both_orders": "yes"}, ArgumentTypeError, "both_orders"),
    ({"both_orders": True, "n_llm": 10, "n_human": 11}, ArgumentError, "n_human"),
    ({"behavior": {"position_effects": [0.1, 0.2]}}, ArgumentError, "position_effects"),
    ({"behavior": {"position_effects": [0.1, np.nan, 0.3]}}, ArgumentError, "position_effects"),
    ({"behavior": {"position_effects": ["a", "b", "c"]}}, ArgumentTypeError, "position_effects"),
])
def test_argument_errors(kwargs, error, match):
    base = {"N": 5, "K": 3, "n_llm": 20, "n_human": 5, "seed": 0}
    with pytest.raises(error, match=match):
        pydial.simulate(**{**base, **kwargs})
