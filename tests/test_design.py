"""Tests of pydial.model.identifiability: the identification checks of the DIAL paper.

Known answers for small designs (Prop. ident-LLM, Cor. cycle-criterion,
Prop. ident-lowrank, Cond. human-design, Ford 1957, separation) and property
tests against independent linear-algebra / linear-programming formulations.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

import pydial
from pydial.model.identifiability import CALIBRATIONS, METHODS, DesignReport, check_design
from pydial.exceptions import ArgumentError, ArgumentTypeError, IdentifiabilityError

ITEMS = [f"m{k}" for k in range(10)]


# ----------------------------------------------------------------------------- helpers
def make_data(llm=(), human=(), n_items=4):
    """Comparisons from cell lists.

    ``llm``: tuples ``(judge, i, j, a, y, n)`` with item indices ``i < j``, order
    ``a`` (+1: item i shown first) and ``y`` wins of item i among ``n``.
    ``human``: tuples ``(i, j, y, n)``.
    """
    rows = []
    rid = 0
    for judge, i, j, a, y, n in llm:
        for t in range(n):
            rows.append(dict(record_id=rid, judge=judge, item_a=ITEMS[i], item_b=ITEMS[j],
                             first="a" if a > 0 else "b", winner="a" if t < y else "b"))
            rid += 1
    for i, j, y, n in human:
        for t in range(n):
            rows.append(dict(record_id=rid, judge="human", item_a=ITEMS[i], item_b=ITEMS[j],
                             first="a", winner="a" if t < y else "b"))
            rid += 1
    return pydial.Comparisons.from_frame(pd.DataFrame(rows), items=ITEMS[:n_items])


def full_judge(name, n_items=4):
    """A judge that sees every pair in both orders with both outcomes in every cell."""
    return [(name, i, j, a, 1, 2) for i in range(n_items) for j in range(i + 1, n_items) for a in (1, -1)]


def connected_humans(n_items=4):
    """Human comparisons on a path with both outcomes (strongly connected win graph)."""
    return [(i, i + 1, 1, 2) for i in range(n_items - 1)]


def row(report: DesignReport, judge: str, condition: str) -> pd.Series:
    t = report.table
    hit = t[(t["judge"] == judge) & (t["condition"] == condition)]
    assert len(hit) == 1, f"expected one row for ({judge}, {condition}), got {len(hit)}"
    return hit.iloc[0]


def incidence(N, cells):
    D = np.zeros((len(cells), N))
    z = np.zeros(len(cells))
    for t, (i, j, a) in enumerate(cells):
        D[t, i], D[t, j], z[t] = 1.0, -1.0, a
    return D, z


# ------------------------------------------------------------------ ident-LLM (cycles)
@pytest.mark.parametrize("rank", [0, 1, 2])
def test_single_pair_single_order_is_never_identified(rank):
    data = make_data(full_judge("g1") + full_judge("g2") + full_judge("g3") + [("solo", 0, 1, 1, 1, 3)],
                     connected_humans())
    rep = check_design(data, rank=rank, method="dial-anc")
    assert not row(rep, "solo", "ident-LLM")["ok"]
    assert not row(rep, "solo", "ident-lowrank")["ok"]
    assert not rep.ok
    solo = rep.problems[rep.problems["judge"] == "solo"]
    assert len(solo) == 1
    assert "neither on its own" in solo["detail"].iloc[0]
    # The well-designed judges are not problems.
    assert set(rep.problems["judge"]) <= {"solo", "all judges"}


def test_canonical_first_tree_identified_only_through_shared_space():
    tree = [("tree", 0, 1, 1, 1, 2), ("tree", 1, 2, 1, 1, 2), ("tree", 2, 3, 1, 1, 2)]
    data = make_data(full_judge("g1") + full_judge("g2") + tree, connected_humans())
    rep = check_design(data, rank=1, method="dial-anc")
    llm = row(rep, "tree", "ident-LLM")
    assert not llm["ok"]
    assert "zero signed order sum" in llm["detail"]
    low = row(rep, "tree", "ident-lowrank")
    assert low["ok"]
    assert "generic" in low["detail"]
    assert rep.ok and rep.problems.empty

    judges = check_design(data, rank=1, method="judges")
    assert not judges.ok
    assert ("tree", "ident-LLM") in set(zip(judges.problems["judge"], judges.problems["condition"]))
    assert set(judges.problems["judge"]) == {"tree"}

    # The cycle criterion agrees with the rank of [D_k, z_k] (Prop. ident-LLM).
    D, z = incidence(4, [(0, 1, 1), (1, 2, 1), (2, 3, 1)])
    assert np.linalg.matrix_rank(np.column_stack([D, z])) == 3 < 4


def test_given_W_containing_the_confounded_direction_breaks_lowrank():
    """For the canonical-first path z = D x with x = (0, -1, -2, -3): if the centred x
    lies in col(W), then [D W, z] loses rank (the order effect is confounded there)."""
    tree = [("tree", 0, 1, 1, 1, 2), ("tree", 1, 2, 1, 1, 2), ("tree", 2, 3, 1, 1, 2)]
    data = make_data(full_judge("g1") + full_judge("g2") + tree, connected_humans())
    x = np.array([0.0, -1.0, -2.0, -3.0])
    x -= x.mean()
    W_bad = np.column_stack([x, [1.0, -1.0, -1.0, 1.0]])
    W_good = np.column_stack([[1.0, -1.0, -1.0, 1.0], [1.0, 1.0, -1.0, -1.0]])
    bad = check_design(data, rank=1, W=W_bad)
    good = check_design(data, rank=1, W=W_good)
    assert not row(bad, "tree", "ident-lowrank")["ok"]
    assert "given W" in row(bad, "tree", "ident-lowrank")["detail"]
    assert row(good, "tree", "ident-lowrank")["ok"]
    assert ("tree", "ident-lowrank") in set(zip(bad.problems["judge"], bad.problems["condition"]))
    assert good.ok


def test_one_order_triangle_with_nonzero_signed_sum_is_identified():
    # a01 + a12 - a02 = 1 + 1 - 1 = 1 != 0 although every pair is shown in one order only.
    tri = [("tri", 0, 1, 1, 1, 2), ("tri", 1, 2, 1, 1, 2), ("tri", 0, 2, 1, 1, 2)]
    rep = check_design(make_data(tri, n_items=3), rank=0, method="judges")
    r = row(rep, "tri", "ident-LLM")
    assert r["ok"]
    assert "signed order sum 1" in r["detail"]
    D, z = incidence(3, [(0, 1, 1), (1, 2, 1), (0, 2, 1)])
    assert np.linalg.matrix_rank(np.column_stack([D, z])) == 3


def test_even_cycle_with_zero_signed_sum_is_not_identified_and_flip_fixes_it():
    # Around 0-1-2-3-0: a01 + a12 + a23 - a03 = 1 - 1 + 1 - 1 = 0.
    zero = [("sq", 0, 1, 1, 1, 2), ("sq", 1, 2, -1, 1, 2), ("sq", 2, 3, 1, 1, 2), ("sq", 0, 3, 1, 1, 2)]
    flipped = zero[:3] + [("sq", 0, 3, -1, 1, 2)]  # sum 1 - 1 + 1 + 1 = 2
    assert not row(check_design(make_data(zero), method="judges"), "sq", "ident-LLM")["ok"]
    r = row(check_design(make_data(flipped), method="judges"), "sq", "ident-LLM")
    assert r["ok"]
    assert "signed order sum 2" in r["detail"]


def test_pair_in_both_orders_is_a_length_two_cycle():
    both = [("j", 0, 1, 1, 1, 2), ("j", 0, 1, -1, 1, 2), ("j", 1, 2, 1, 1, 2)]
    r = row(check_design(make_data(both, n_items=3), rank=0, method="judges"), "j", "ident-LLM")
    assert r["ok"]
    assert "both orders" in r["detail"] and "signed order sum 2" in r["detail"]
    one = [("j", 0, 1, 1, 1, 2), ("j", 1, 2, 1, 1, 2)]
    assert not row(check_design(make_data(one, n_items=3), rank=0, method="judges"), "j", "ident-LLM")["ok"]


def test_disconnected_judge_graph_fails_and_names_the_items():
    cells = [("d", 0, 1, 1, 1, 2), ("d", 0, 1, -1, 1, 2), ("d", 2, 3, 1, 1, 2), ("d", 2, 3, -1, 1, 2)]
    data = make_data(cells, n_items=5)
    r = row(check_design(data, rank=0, method="judges"), "d", "ident-LLM")
    assert not r["ok"]
    assert "3 components" in r["detail"]
    assert "m4" in r["detail"]  # the isolated item is named
    # Without order effect only connectivity counts, and it still fails.
    r0 = row(check_design(data, rank=0, method="dial-nopos"), "d", "ident-LLM")
    assert not r0["ok"] and "b_k fixed at 0" in r0["detail"]


@st.composite
def random_design(draw):
    N = draw(st.integers(2, 6))
    cells = [(i, j, a) for i in range(N) for j in range(i + 1, N) for a in (1, -1)]
    chosen = draw(st.lists(st.sampled_from(cells), min_size=1, max_size=len(cells), unique=True))
    return N, chosen


@settings(max_examples=150, deadline=None)
@given(random_design())
def test_cycle_criterion_equals_matrix_rank(design):
    N, cells = design
    data = make_data([("k", i, j, a, 1, 2) for i, j, a in cells], n_items=N)
    rep = check_design(data, rank=0, method="judges")
    D, z = incidence(N, cells)
    full = np.linalg.matrix_rank(np.column_stack([D, z])) == N
    assert bool(row(rep, "k", "ident-LLM")["ok"]) == full
    # Prop. ident-lowrank: identification on its own implies identification in any
    # (here generic) space W with W^T 1 = 0 and rank r + 1.
    if full:
        assert row(rep, "k", "ident-lowrank")["ok"]
    # With b fixed at 0 only rank(D_k) = N - 1 (connectivity) matters.
    nopos = check_design(data, rank=0, method="dial-nopos")
    assert bool(row(nopos, "k", "ident-LLM")["ok"]) == (np.linalg.matrix_rank(D) == N - 1)


# --------------------------------------------------------------------------- human
def test_human_mle_fails_when_one_item_only_loses():
    judges = full_judge("g1", 3) + full_judge("g2", 3)
    loses = [(0, 1, 1, 2), (0, 2, 2, 2), (1, 2, 3, 3)]  # m2 never wins
    rep = check_design(make_data(judges, loses, n_items=3), rank=0, method="human")
    r = row(rep, "human", "human-mle")
    assert not r["ok"]
    assert "m2 only loses" in r["detail"]
    assert list(rep.problems["condition"]) == ["human-mle"]
    with pytest.raises(IdentifiabilityError, match="human-mle"):
        rep.raise_if_failed()
    # One win of m2 over m0 closes the directed cycle m0 -> m2 -> m0.
    fixed = [(0, 1, 1, 2), (0, 2, 1, 2), (1, 2, 3, 3)]
    ok = check_design(make_data(judges, fixed, n_items=3), rank=0, method="human")
    assert row(ok, "human", "human-mle")["ok"] and ok.ok


def test_human_mle_names_uncompared_items_and_fails_without_humans():
    judges = full_judge("g1") + full_judge("g2")
    rep = check_design(make_data(judges, [(0, 1, 1, 2)]), method="human")
    detail = row(rep, "human", "human-mle")["detail"]
    assert "never compared by humans" in detail and "m3" in detail
    none = check_design(make_data(judges), method="human")
    assert not none.ok and "no human comparisons" in row(none, "human", "human-mle")["detail"]


def test_human_design_d1_passes_with_one_comparison_but_full_space_fails():
    judges = full_judge("g1") + full_judge("g2") + full_judge("g3")
    data = make_data(judges, [(0, 1, 1, 1)])
    mu = check_design(data, rank=1, calibration="mu", method="dial-anc")
    assert row(mu, "human", "human-design")["ok"]
    assert mu.ok
    full = check_design(data, rank=1, calibration="W", method="dial-anc")
    r = row(full, "human", "human-design")
    assert not r["ok"] and "d = 2" in r["detail"]
    assert ("human", "human-design") in set(zip(full.problems["judge"], full.problems["condition"]))
    # Two comparisons on disjoint pairs identify d = 2 directions without connectivity.
    two = make_data(judges, [(0, 1, 1, 1), (2, 3, 1, 1)])
    assert row(check_design(two, rank=1, calibration="W"), "human", "human-design")["ok"]


def test_human_design_uses_the_given_M():
    judges = full_judge("g1") + full_judge("g2") + full_judge("g3")
    data = make_data(judges, [(0, 1, 1, 1)])
    # mu equal on the only compared pair: D_H mu = 0, so c_H is not identified.
    W = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
    rep = check_design(data, rank=1, calibration="mu", W=W)
    r = row(rep, "human", "human-design")
    assert not r["ok"] and "given M" in r["detail"]
    W2 = W[:, ::-1].copy()
    assert row(check_design(data, rank=1, calibration="mu", W=W2), "human", "human-design")["ok"]


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 7), st.integers(0, 3), st.sampled_from(CALIBRATIONS), st.data())
def test_generic_human_design_matches_a_random_M(N, r, calibration, draw):
    """Generic rank(D_H M) = min(d, N - #components) agrees with a random M."""
    r = min(r, N - 2)
    pairs = [(i, j) for i in range(N) for j in range(i + 1, N)]
    human = draw.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=len(pairs), unique=True))
    data = make_data(full_judge("g", N), [(i, j, 1, 2) for i, j in human], n_items=N)
    rng = np.random.default_rng(len(human))
    W = rng.standard_normal((N, r + 1))
    W -= W.mean(axis=0)
    generic = row(check_design(data, rank=r, calibration=calibration), "human", "human-design")["ok"]
    given_W = row(check_design(data, rank=r, calibration=calibration, W=W), "human", "human-design")["ok"]
    assert generic == given_W
    d = 1 if calibration == "mu" else r + 1
    D, _ = incidence(N, [(i, j, 1) for i, j in human])
    M = W[:, :d]
    assert given_W == (np.linalg.matrix_rank(D @ M) == d)


# ------------------------------------------------------------------- judge-wide checks
def test_parameter_count_boundary():
    # N = 5, K = 2, r = 1: (r+1)(K+N-r-2)+K = 2*4 + 2 = 10 free parameters.
    base = full_judge("g1", 5)  # 20 cells
    data = make_data(base[:6] + [("g2", 0, 1, 1, 1, 2), ("g2", 0, 1, -1, 1, 2), ("g2", 1, 2, 1, 1, 2)],
                     connected_humans(5), n_items=5)
    rep = check_design(data, rank=1)
    r = row(rep, "all judges", "parameter-count")
    assert not r["ok"]
    assert "sum_k m_k = 9 < (r+1)(K+N-r-2)+K = 10" in r["detail"]
    assert "parameter-count" in set(rep.problems["condition"])
    data10 = make_data(base[:6] + [("g2", 0, 1, 1, 1, 2), ("g2", 0, 1, -1, 1, 2), ("g2", 1, 2, 1, 1, 2),
                                   ("g2", 2, 3, 1, 1, 2)], connected_humans(5), n_items=5)
    assert row(check_design(data10, rank=1), "all judges", "parameter-count")["ok"]
    # Without order effects the K parameters b_k drop out: 8 <= 9.
    assert row(check_design(data, rank=1, method="dial-nopos"), "all judges", "parameter-count")["ok"]


def test_sufficient_subset_and_rank_feasibility():
    tree = [("tree", 0, 1, 1, 1, 2), ("tree", 1, 2, 1, 1, 2), ("tree", 2, 3, 1, 1, 2)]
    data = make_data(full_judge("g1") + tree, connected_humans())
    # r = 1 needs two judges identified on their own; only g1 is.
    rep = check_design(data, rank=1)
    r = row(rep, "all judges", "sufficient-subset")
    assert not r["ok"] and "g1" in r["detail"]
    assert row(check_design(data, rank=0), "all judges", "sufficient-subset")["ok"]
    # r <= K - 1 = 1 and r + 1 <= N - 1 = 3.
    big = row(check_design(data, rank=2), "all judges", "sufficient-subset")
    assert not big["ok"] and "too large" in big["detail"] and "K-1" in big["detail"]
    three = make_data(full_judge("a") + full_judge("b") + full_judge("c") + full_judge("d"), connected_humans())
    rN = row(check_design(three, rank=3), "all judges", "sufficient-subset")
    assert not rN["ok"] and "N-1" in rN["detail"]


# -------------------------------------------------------------------------- separation
def test_separation_when_first_shown_item_always_wins():
    # Triangle in both orders; the first-shown item wins every time.
    cells = [("pos", i, j, a, 3 if a > 0 else 0, 3) for i, j in [(0, 1), (1, 2), (0, 2)] for a in (1, -1)]
    rep = check_design(make_data(cells, n_items=3), rank=0, method="judges")
    assert row(rep, "pos", "ident-LLM")["ok"]
    sep = row(rep, "pos", "separation")
    assert not sep["ok"]
    assert "+inf" in sep["detail"] and "first-shown" in sep["detail"]
    assert ("pos", "separation") in set(zip(rep.problems["judge"], rep.problems["condition"]))
    # A judge whose first-shown item always wins has b_k = +inf under any score
    # structure: the DIAL fits refuse it too, naming the judge.
    humans = [(0, 1, 1, 2), (1, 2, 1, 2), (0, 2, 1, 2)]
    dial = check_design(make_data(cells + full_judge("g", 3), humans, n_items=3), rank=0, method="dial-anc")
    assert ("pos", "separation") in set(zip(dial.problems["judge"], dial.problems["condition"]))
    assert "first-shown item won all 18" in row(dial, "pos", "separation")["detail"]
    assert "separation" not in set(check_design(make_data(cells + full_judge("g", 3), humans, n_items=3), rank=0,
                                                method="dial-nopos").problems["condition"])
    # Separation along the scores only (item 0 always wins, both orders): the DIAL fit
    # does not need each judge's own MLE to exist.
    top = [("top", i, j, a, 3 if i == 0 else 1, 3) for i, j in [(0, 1), (1, 2), (0, 2)] for a in (1, -1)]
    rep_top = check_design(make_data(top + full_judge("g", 3), humans, n_items=3), rank=0, method="dial-anc")
    assert not row(rep_top, "top", "separation")["ok"]
    assert "separation" not in set(rep_top.problems["condition"])
    # Both outcomes in every cell: finite MLE.
    mixed = [("pos", i, j, a, 1, 3) for i, j in [(0, 1), (1, 2), (0, 2)] for a in (1, -1)]
    assert row(check_design(make_data(mixed, n_items=3), rank=0, method="judges"), "pos", "separation")["ok"]


def test_one_sided_cells_without_separation():
    # The one-sided cells (0,1) in both orders force delta_0 - delta_1 = +-c; the
    # interior cells force c = 0 and delta_0 = delta_1 = delta_2, so eta = 0.
    cells = [("k", 0, 1, 1, 2, 2), ("k", 0, 1, -1, 2, 2),
             ("k", 0, 2, 1, 1, 2), ("k", 0, 2, -1, 1, 2), ("k", 1, 2, 1, 1, 2), ("k", 1, 2, -1, 1, 2)]
    rep = check_design(make_data(cells, n_items=3), rank=0, method="judges")
    assert row(rep, "k", "separation")["ok"]
    assert rep.ok


def _mle_exists_by_interior_point(N, cells, nopos=False):
    """Independent criterion: a finite MLE exists iff E^T y = E^T w for some w strictly
    inside the box (0, n) (the sufficient statistic is in the relative interior of the
    convex support).  Maximise the margin eps of such a w."""
    m = len(cells)
    E = np.zeros((m, N + (0 if nopos else 1)))
    y = np.array([c[3] for c in cells], float)
    n = np.array([c[4] for c in cells], float)
    for t, (i, j, a, _, _) in enumerate(cells):
        E[t, i], E[t, j] = 1.0, -1.0
        if not nopos:
            E[t, N] = a
    # variables (w_1..w_m, eps); maximise eps
    c = np.zeros(m + 1)
    c[-1] = -1.0
    A_eq = np.column_stack([E.T, np.zeros(E.shape[1])])
    A_ub = np.vstack([np.column_stack([-np.eye(m), np.ones(m)]), np.column_stack([np.eye(m), np.ones(m)])])
    b_ub = np.concatenate([np.zeros(m), n])
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=E.T @ y,
                  bounds=[(0, None)] * m + [(0, 1)], method="highs")
    assert res.status == 0
    return -res.fun > 1e-7


@settings(max_examples=150, deadline=None)
@given(random_design(), st.data(), st.booleans())
def test_separation_matches_interior_point_criterion(design, draw, nopos):
    N, cells = design
    full = []
    for i, j, a in cells:
        n = draw.draw(st.integers(1, 3))
        y = draw.draw(st.integers(0, n))
        full.append((i, j, a, y, n))
    data = make_data([("k", i, j, a, y, n) for i, j, a, y, n in full], n_items=N)
    rep = check_design(data, rank=0, method="dial-nopos" if nopos else "judges")
    assert bool(row(rep, "k", "separation")["ok"]) == _mle_exists_by_interior_point(N, full, nopos)


# ------------------------------------------------------------------- methods and errors
def test_method_decides_which_failures_are_problems():
    tree = [("tree", 0, 1, 1, 1, 2), ("tree", 1, 2, 1, 1, 2), ("tree", 2, 3, 1, 1, 2)]
    data = make_data(full_judge("g1") + full_judge("g2") + tree)  # no human rows
    none = check_design(data, rank=1, method=None)
    assert not row(none, "human", "human-design")["ok"]
    assert none.ok  # reported, but not required without human rows
    anc = check_design(data, rank=1, method="dial-anc")
    assert list(anc.problems["condition"]) == ["human-design"]
    assert not check_design(data, method="human").ok
    pooled = check_design(data, rank=1, calibration="W", method="pooled")
    assert row(pooled, "all judges", "pooled-connected")["ok"]
    assert "d = 1" in row(pooled, "human", "human-design")["detail"]
    assert list(pooled.problems["condition"]) == ["human-design"]
    # pooled-connected is only checked for the pooled fit
    assert "pooled-connected" not in set(anc.table["condition"])
    # The pooled LLM graph on 5 items misses m4.
    gap = check_design(make_data(full_judge("g1") + full_judge("g2"), [(0, 1, 1, 1)], n_items=5), rank=0,
                       method="pooled")
    assert set(gap.problems["condition"]) == {"pooled-connected"}
    assert "m4" in gap.problems["detail"].iloc[0]


def test_nopos_uses_connectivity_and_rank_of_DW():
    tree = [("tree", 0, 1, 1, 1, 2), ("tree", 1, 2, 1, 1, 2), ("tree", 2, 3, 1, 1, 2)]
    data = make_data(full_judge("g1") + full_judge("g2") + tree, connected_humans())
    rep = check_design(data, rank=1, method="dial-nopos")
    llm = row(rep, "tree", "ident-LLM")
    assert llm["ok"] and "b_k fixed at 0" in llm["detail"]
    low = row(rep, "tree", "ident-lowrank")
    assert low["ok"] and "rank(D_k W) = 2" in low["detail"]
    assert rep.ok


def test_raise_if_failed_names_judge_and_condition():
    data = make_data(full_judge("g1") + full_judge("g2") + full_judge("g3") + [("lonely-judge", 0, 1, 1, 1, 1)],
                     connected_humans())
    rep = check_design(data, rank=1, method="judges")
    with pytest.raises(IdentifiabilityError) as err:
        rep.raise_if_failed()
    msg = str(err.value)
    assert "'lonely-judge'" in msg and "ident-LLM" in msg and "components" in msg
    assert "'g1'" not in msg
    check_design(make_data(full_judge("g1") + full_judge("g2"), connected_humans()), rank=1).raise_if_failed()


def test_repr_shows_every_check():
    data = make_data(full_judge("g1") + [("solo", 0, 1, 1, 1, 1)], connected_humans())
    rep = check_design(data, rank=0, method="judges")
    text = repr(rep)
    assert text.splitlines()[0].endswith("2 problems")
    assert all(c in text for c in ("ident-LLM", "ident-lowrank", "separation", "human-mle"))
    page = rep._repr_html_()
    assert page.count("<tr") == len(rep.table) + 1
    assert "solo" in page and "NO" in page


def test_table_columns_and_types():
    rep = check_design(make_data(full_judge("g1") + full_judge("g2"), connected_humans()), rank=1)
    assert list(rep.table.columns) == ["judge", "condition", "ok", "detail"]
    assert rep.table["ok"].dtype == bool
    assert list(rep.problems.columns) == ["judge", "condition", "detail"]
    assert set(rep.table["judge"]) == {"g1", "g2", "all judges", "human"}


@pytest.mark.parametrize(
    "kwargs, allowed",
    [({"method": "dial"}, METHODS), ({"calibration": "V"}, CALIBRATIONS), ({"rank": -1}, None)],
)
def test_bad_arguments_list_allowed_values(kwargs, allowed):
    data = make_data(full_judge("g1"), connected_humans())
    with pytest.raises(ValueError) as err:
        check_design(data, **kwargs)
    if allowed is not None:
        for value in allowed:
            assert repr(value) in str(err.value)
    else:
        assert ">= 0" in str(err.value)


def test_W_of_wrong_shape_is_rejected():
    data = make_data(full_judge("g1"), connected_humans())
    with pytest.raises(ValueError, match=r"shape \(N, rank\+1\) = \(4, 2\)"):
        check_design(data, rank=1, W=np.zeros((4, 3)))


def test_generic_W_is_seeded():
    tree = [("tree", 0, 1, 1, 1, 2), ("tree", 1, 2, 1, 1, 2), ("tree", 2, 3, 1, 1, 2)]
    data = make_data(full_judge("g1") + full_judge("g2") + tree, connected_humans())
    a = check_design(data, rank=1, seed=3).table
    b = check_design(data, rank=1, seed=np.random.default_rng(3)).table
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(check_design(data, rank=1, seed=None).table, check_design(data, rank=1).table)
    for bad, error in ((-1, ArgumentError), (2**32, ArgumentError), (2.5, ArgumentTypeError), (True, ArgumentTypeError)):
        with pytest.raises(error, match="seed"):  # the seed check of every other function
            check_design(data, rank=1, seed=bad)


def test_dense_design_21_judges_20_items_8000_cells():
    rng = np.random.default_rng(1)
    N, K = 20, 21
    rows = []
    rid = 0
    for k in range(K):
        for i in range(N):
            for j in range(i + 1, N):
                for first in ("a", "b"):
                    rows.append((rid, f"judge{k}", f"item{i:02d}", f"item{j:02d}", first,
                                 "a" if rng.random() < 0.5 else "b"))
                    rid += 1
    for t in range(300):
        i, j = rng.choice(N, 2, replace=False)
        rows.append((rid + t, "human", f"item{i:02d}", f"item{j:02d}", "a", "a" if rng.random() < 0.5 else "b"))
    data = pydial.Comparisons.from_frame(
        pd.DataFrame(rows, columns=["record_id", "judge", "item_a", "item_b", "first", "winner"]))
    assert len(data.llm) == K * N * (N - 1)  # 7980 cells, each with one judgment
    rep = check_design(data, rank=2, method="judges")  # its time: benchmarks/bench_scale.py
    assert rep.table.loc[rep.table["condition"] == "ident-LLM", "ok"].all()
