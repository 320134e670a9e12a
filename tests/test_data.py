"""Tests of pydial.data.comparisons: validation, canonical orientation and cell aggregation.

References are hand-made tables whose cells are written out by hand, and a
brute-force Python loop over the rows (independent of the vectorised
aggregation) for randomly generated tables (hypothesis).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pydial
from pydial import ArgumentError, ArgumentTypeError, Comparisons, DataError
from pydial.data.comparisons import I_WINS, J_WINS, TIE


def frame(rows):
    return pd.DataFrame(rows, columns=["record_id", "judge", "item_a", "item_b", "first", "winner"])


def cells_dict(c: Comparisons) -> dict:
    """LLM cells as {(judge, item_i, item_j, a): (n, y)}."""
    t = c.llm_cells()
    return {(r.judge, r.item_i, r.item_j, int(r.a)): (int(r.n), int(r.y)) for r in t.itertuples()}


def human_dict(c: Comparisons) -> dict:
    t = c.human_cells()
    return {(r.item_i, r.item_j): (int(r.n), int(r.y)) for r in t.itertuples()}


def summary_value(c: Comparisons, key: str):
    return c.summary().loc[key, "value"]


# A tiny table: items x < y < z.  Every orientation of the pair (x, y) appears.
TINY = frame(
    [
        # record, judge, item_a, item_b, first, winner
        (1, "g", "x", "y", "a", "a"),  # canonical, x first, x wins        -> a=+1, i wins
        (2, "g", "y", "x", "a", "a"),  # swapped, y first, y wins          -> a=-1, j wins
        (3, "g", "y", "x", "b", "b"),  # swapped, x first, x wins          -> a=+1, i wins
        (4, "g", "y", "x", "b", "a"),  # swapped, x first, y wins          -> a=+1, j wins
        (5, "g", "x", "y", "b", "a"),  # canonical, y first, x wins        -> a=-1, i wins
        (6, "g", "z", "x", "a", "b"),  # swapped: (x, z), z first, x wins  -> a=-1, i wins
        (7, "g", "y", "x", "b", "tie"),  # tie: excluded
        (8, "g", "x", "y", "a", "both_bad"),  # both bad: excluded
        (9, "g", "x", "x", "a", "a"),  # self-comparison: excluded
        (10, "h", "y", "z", "a", "a"),  # second judge: (y, z), y first, y wins
        (11, "human", "y", "x", None, "a"),  # human, swapped, y wins -> j wins
        (12, "human", "x", "y", None, "a"),  # human, canonical, x wins -> i wins
        (13, "human", "z", "y", "b", "a"),  # human, swapped (y,z), z wins -> j wins
        (14, "human", "x", "y", None, "tie"),  # human tie
        (15, "human", "y", "y", None, "a"),  # human self-comparison
        (16, "human", "x", "z", None, "both_bad"),  # human both bad
    ]
)


# ------------------------------------------------------------ orientation
def test_canonical_orientation_and_cells_by_hand():
    c = Comparisons.from_frame(TINY)
    assert c.items == ("x", "y", "z")
    assert c.judges == ("g", "h")
    expected = {
        ("g", "x", "y", +1): (3, 2),  # rows 1, 3, 4
        ("g", "x", "y", -1): (2, 1),  # rows 2, 5
        ("g", "x", "z", -1): (1, 1),  # row 6
        ("h", "y", "z", +1): (1, 1),  # row 10
    }
    assert cells_dict(c) == expected
    assert human_dict(c) == {("x", "y"): (2, 1), ("y", "z"): (1, 0)}
    assert c.n_llm == 7 and c.n_human == 3
    # canonical coding on the frame: i < j always, a = 0 for human rows
    f = c.frame
    assert (f["i"] <= f["j"]).all()
    assert (f.loc[f["judge"] == "human", "a"] == 0).all()
    assert set(f.loc[f["judge"] != "human", "a"]) <= {-1, 1}


def test_items_argument_defines_canonical_order():
    # with items listed as z, y, x the canonical orientation is reversed
    c = Comparisons.from_frame(TINY, items=["z", "y", "x"])
    d = cells_dict(c)
    # rows 1,3,4: x first on pair (x,y) -> now canonical i = y, so a = -1; y won row 4 only
    assert d[("g", "y", "x", -1)] == (3, 1)
    assert d[("g", "y", "x", +1)] == (2, 1)  # rows 2 (y first, y wins), 5 (y first, x wins)
    assert d[("g", "z", "x", +1)] == (1, 0)  # row 6: z first, x wins
    # an item listed but never compared is kept
    c2 = Comparisons.from_frame(TINY, items=["x", "y", "z", "w"])
    assert c2.N == 4 and c2.items[-1] == "w"
    with pytest.raises(DataError, match="z"):
        Comparisons.from_frame(TINY, items=["x", "y"])


def test_winner_and_first_are_case_and_space_insensitive():
    df = TINY.copy()
    df["winner"] = df["winner"].str.upper().radd(" ")
    df.loc[df["judge"] != "human", "first"] = df.loc[df["judge"] != "human", "first"].str.upper()
    assert cells_dict(Comparisons.from_frame(df)) == cells_dict(Comparisons.from_frame(TINY))


def test_rows_table_matches_cells():
    c = Comparisons.from_frame(TINY)
    R = c.rows
    K = c.K
    llm = R.judge < K
    # each decisive row points to its cell; z sums to y and counts sum to n
    np.testing.assert_array_equal(np.bincount(R.cell[llm], minlength=len(c.llm)), c.llm.n)
    np.testing.assert_array_equal(np.bincount(R.cell[llm], weights=R.z[llm], minlength=len(c.llm)), c.llm.y)
    np.testing.assert_array_equal(np.bincount(R.cell[~llm], minlength=len(c.human)), c.human.n)
    np.testing.assert_array_equal(c.llm.judge[R.cell[llm]], R.judge[llm])
    # records of the decisive rows
    ids = np.asarray(c.record_ids, dtype=object)[R.record]
    assert sorted(ids.tolist()) == [1, 2, 3, 4, 5, 6, 10, 11, 12, 13]


# ------------------------------------------------------------- exclusions
def test_exclusions_counted_in_summary():
    c = Comparisons.from_frame(TINY)
    assert summary_value(c, "LLM ties") == 1
    assert summary_value(c, "LLM both bad") == 1
    assert summary_value(c, "human ties") == 1
    assert summary_value(c, "human both bad") == 1
    assert summary_value(c, "self-comparisons excluded") == 2
    assert summary_value(c, "decisive human labels n_H") == 3
    assert summary_value(c, "tie-excluded n_LLM") == 7
    assert summary_value(c, "LLM judgments") == 10
    assert summary_value(c, "human labels decisive (i wins / j wins)") == "1 / 2"
    assert summary_value(c, "display order +1 / -1") == "4 / 3"
    assert summary_value(c, "records") == 16
    assert summary_value(c, "judges dropped (no decisive judgment)") == "none"
    # excluded rows stay in the frame, decisive ones go to cells
    assert len(c.frame) == len(TINY)


def test_tie_cells_count_ties():
    c = Comparisons.from_frame(TINY)
    t = c.tie_cells()
    row = t[(t.k == 0) & (t.i == 0) & (t.j == 1) & (t.a == 1)].iloc[0]
    # rows 1, 3, 4 (decisive, x first) + row 7 (tie, x first)
    assert (row.wins_i, row.wins_j, row.ties) == (2, 1, 1)
    th = c.tie_cells(human=True)
    hrow = th[(th.k == c.K) & (th.i == 0) & (th.j == 1)].iloc[0]
    assert (hrow.wins_i, hrow.wins_j, hrow.ties) == (1, 1, 1)


def test_tie_cells_from_one_aggregation():
    """The LLM tie cells are the rows ``k < K`` of the full table.

    As a regrouping of the LLM rows alone gives them; the cell tables are the full table's
    LLM and human rows; callers get copies.
    """
    c = Comparisons.from_frame(TINY)
    full, llm = c.tie_cells(human=True), c.tie_cells()
    f = c.frame
    m = (~f["self"]) & f["outcome"].isin([I_WINS, J_WINS, TIE]) & (f["k"] < c.K)
    ref = (f.loc[m].assign(wins_i=lambda x: (x["outcome"] == I_WINS).astype(int),
                           wins_j=lambda x: (x["outcome"] == J_WINS).astype(int),
                           ties=lambda x: (x["outcome"] == TIE).astype(int))
           .groupby(["k", "i", "j", "a"], as_index=False)[["wins_i", "wins_j", "ties"]].sum().astype(int))
    pd.testing.assert_frame_equal(llm, ref)
    pd.testing.assert_frame_equal(llm, full[full["k"] < c.K].reset_index(drop=True))
    for which, rows in (("llm", full["k"] < c.K), ("human", full["k"] == c.K)):
        tab, t = c.cell_table(which, with_ties=True), full[rows]
        for name, col in (("judge", "k"), ("i", "i"), ("j", "j"), ("a", "a"), ("y", "wins_i"), ("tie_counts", "ties")):
            np.testing.assert_array_equal(getattr(tab, name), t[col].to_numpy())
        np.testing.assert_array_equal(tab.wins_j, t["wins_j"].to_numpy())
    pooled = c.cell_table("pooled", with_ties=True)
    assert (pooled.judge == 0).all() and np.array_equal(pooled.counts, c.cell_table("llm", with_ties=True).counts)
    full["ties"] = -1
    assert (c.tie_cells(human=True)["ties"] >= 0).all()


def test_cell_counts_formed_once():
    """``CellTable.counts`` is formed once per (frozen) table and cannot be written to."""
    tab = Comparisons.from_frame(TINY).cell_table("llm", with_ties=True)
    cnt = tab.counts
    assert tab.counts is cnt and not cnt.flags.writeable
    np.testing.assert_array_equal(cnt, np.column_stack([tab.y, tab.n - tab.y - tab.tie_counts, tab.tie_counts]))
    with pytest.raises(ValueError):
        cnt[0, 0] = 7


# ------------------------------------------------------------------ errors
def test_missing_column_named():
    with pytest.raises(DataError, match=r"missing column\(s\) 'winner'"):
        Comparisons.from_frame(TINY.drop(columns="winner"))


@pytest.mark.parametrize("col", ["record_id", "judge", "item_a", "item_b", "winner"])
def test_nan_named_with_row(col):
    df = TINY.copy()
    df.loc[4, col] = np.nan
    with pytest.raises(DataError, match=rf"missing values in column '{col}' at rows \[4\]"):
        Comparisons.from_frame(df)


def test_nan_first_only_allowed_for_humans():
    df = TINY.copy()
    df.loc[2, "first"] = None  # an LLM row
    with pytest.raises(DataError, match=r"missing values in column 'first' at rows \[2\]"):
        Comparisons.from_frame(df)


def test_unknown_first_value_named():
    df = TINY.copy()
    df.loc[5, "first"] = "left"
    with pytest.raises(DataError, match=r"\['left'\].*'first'.*rows \[5\]"):
        Comparisons.from_frame(df)


def test_unknown_winner_value_named():
    df = TINY.copy()
    df.index = [f"r{k}" for k in range(len(df))]
    df.loc["r3", "winner"] = "draw"
    df.loc["r7", "winner"] = "c"
    with pytest.raises(DataError, match=r"\['c', 'draw'\].*'winner'.*rows \[r3, r7\] \(2 in all\)"):
        Comparisons.from_frame(df)


def test_blank_judge_named():
    df = TINY.copy()
    df.loc[6, "judge"] = "   "
    with pytest.raises(DataError, match=r"empty judge name.*rows \[6\]"):
        Comparisons.from_frame(df)


def test_judge_with_only_ties():
    df = pd.concat([TINY, frame([(20, "tj", "x", "y", "a", "tie"), (21, "tj", "y", "z", "b", "both_bad"),
                                 (22, "tj", "z", "z", "a", "a")])], ignore_index=True)
    with pytest.raises(DataError, match=r"\['tj'\].*no decisive judgment"):
        Comparisons.from_frame(df)
    c = Comparisons.from_frame(df, drop_empty_judges=True)
    assert c.judges == ("g", "h")
    assert summary_value(c, "judges dropped (no decisive judgment)") == "tj"
    assert cells_dict(c) == cells_dict(Comparisons.from_frame(TINY))


@pytest.mark.parametrize("method", ["human", "dial-anc"])
def test_no_human_rows_for_human_methods(method):
    df = TINY[TINY["judge"] != "human"]
    c = Comparisons.from_frame(df)
    assert c.n_human == 0
    with pytest.raises(DataError, match="needs human comparisons.*'human'"):
        pydial.fit(c, method)


def test_only_non_decisive_human_rows_is_no_human_data():
    df = TINY[(TINY["judge"] != "human") | TINY["winner"].isin(["tie", "both_bad"])]
    c = Comparisons.from_frame(df)
    with pytest.raises(DataError, match="needs human comparisons"):
        pydial.fit(c, "dial-anc")


def test_not_a_frame_and_empty():
    with pytest.raises(DataError):
        Comparisons.from_frame(TINY.to_dict())
    with pytest.raises(DataError, match="no rows"):
        Comparisons.from_frame(TINY.iloc[:0])


# ------------------------------------------------------------ column mapping
def test_column_mapping_by_columns():
    names = {"record_id": "rid", "judge": "model", "item_a": "left", "item_b": "right", "first": "shown", "winner": "pick"}
    df = TINY.rename(columns=names)
    df["extra"] = 1
    c = Comparisons.from_frame(df, columns=names)
    assert cells_dict(c) == cells_dict(Comparisons.from_frame(TINY))
    assert human_dict(c) == human_dict(Comparisons.from_frame(TINY))
    # errors name the user's column, not the internal one
    df.loc[3, "pick"] = "???"
    with pytest.raises(DataError, match="'pick'"):
        Comparisons.from_frame(df, columns=names)
    with pytest.raises(DataError, match=r"'model' \(for judge\).*Map other names with columns="):
        Comparisons.from_frame(TINY.rename(columns={"item_a": "left"}), columns={"item_a": "left", "judge": "model"})
    with pytest.raises(ArgumentError, match=r"columns names unknown field\(s\) \['judges'\]; the fields are"):
        Comparisons.from_frame(TINY, columns={"judges": "model"})
    with pytest.raises(ArgumentTypeError, match="columns must be a mapping"):
        Comparisons.from_frame(TINY, columns=["judge"])
    with pytest.raises(ArgumentTypeError, match=r"columns\['judge'\] must be a column name"):
        Comparisons.from_frame(TINY, columns={"judge": None})
    with pytest.raises(ArgumentTypeError, match="unknown keyword argument"):
        Comparisons.from_frame(TINY, judge="model")


def test_custom_human_judge_name():
    df = TINY.replace({"judge": {"human": "crowd"}})
    c = Comparisons.from_frame(df, human_judge="crowd")
    assert c.judges == ("g", "h") and c.n_human == 3


# ----------------------------------------------------------------- CSV I/O
def test_from_csv_round_trip(tmp_path):
    p = tmp_path / "cmp.csv"
    TINY.to_csv(p, index=False)
    a = Comparisons.from_frame(TINY)
    b = Comparisons.from_csv(p)
    assert cells_dict(a) == cells_dict(b)
    assert human_dict(a) == human_dict(b)
    assert a.summary().equals(b.summary())
    # with a mapping, a separator and compression passed through to pandas
    names = {"judge": "model", "winner": "pick"}
    p2 = tmp_path / "cmp.tsv.gz"
    TINY.rename(columns=names).to_csv(p2, index=False, sep="\t")
    c = Comparisons.from_csv(p2, sep="\t", columns=names)
    assert cells_dict(c) == cells_dict(a)
    with pytest.raises(ArgumentTypeError, match=r"did you mean columns=\{'judge': ...\} for 'judge'"):
        Comparisons.from_csv(p2, sep="\t", judge="model")


def test_from_csv_unreadable(tmp_path):
    with pytest.raises(DataError, match="cannot read"):
        Comparisons.from_csv(tmp_path / "nope.csv")


def test_to_frame_round_trip():
    a = Comparisons.from_frame(TINY)
    b = Comparisons.from_frame(a.to_frame())
    assert cells_dict(a) == cells_dict(b)
    assert human_dict(a) == human_dict(b)
    assert summary_value(b, "LLM ties") == 1 and summary_value(b, "self-comparisons excluded") == 2


# ------------------------------------------------------------------ split
def multi_row_records(n_records=60, seed=0):
    """Records each holding several judges' judgments (and sometimes a human label)."""
    rng = np.random.default_rng(seed)
    items = list("abcdef")
    rows = []
    for rec in range(n_records):
        ia, ib = rng.choice(6, 2, replace=False)
        for judge in ("g1", "g2", "g3"):
            rows.append((f"rec{rec}", judge, items[ia], items[ib], rng.choice(["a", "b"]),
                         rng.choice(["a", "b", "tie"], p=[0.45, 0.45, 0.1])))
        if rec % 3 == 0:
            rows.append((f"rec{rec}", "human", items[ia], items[ib], None, rng.choice(["a", "b"])))
    return Comparisons.from_frame(frame(rows))


def test_split_keeps_records_together_and_is_reproducible():
    c = multi_row_records()
    tr, te = c.split(0.7, seed=123)
    rtr, rte = set(tr.frame["record_id"]), set(te.frame["record_id"])
    assert rtr.isdisjoint(rte)
    assert rtr | rte == set(c.frame["record_id"])
    assert len(rtr) == round(0.7 * len(c.record_ids))
    # every row of a record lands on the same side: row counts per record are preserved
    full = c.frame.groupby("record_id").size()
    parts = pd.concat([tr.frame.groupby("record_id").size(), te.frame.groupby("record_id").size()])
    pd.testing.assert_series_equal(full.sort_index(), parts.sort_index())
    assert tr.n_llm + te.n_llm == c.n_llm and tr.n_human + te.n_human == c.n_human
    assert tr.items == c.items and tr.judges == c.judges
    # reproducible by seed, different across seeds
    tr2, _ = c.split(0.7, seed=123)
    assert set(tr2.frame["record_id"]) == rtr
    tr3, _ = c.split(0.7, seed=np.random.default_rng(124))
    assert set(tr3.frame["record_id"]) != rtr
    with pytest.raises(ValueError, match="frac"):
        c.split(1.0)


# ----------------------------------------------------- hypothesis property
ITEMS = ["p", "q", "r", "s"]
JUDGES = ["j1", "j2", "human"]

row_st = st.tuples(
    st.sampled_from(JUDGES),
    st.sampled_from(ITEMS),
    st.sampled_from(ITEMS),
    st.sampled_from(["a", "b"]),
    st.sampled_from(["a", "b", "tie", "both_bad"]),
)


def brute_force_cells(rows):
    """Reference aggregation by a plain loop: {(judge, i, j, a): [n, y]} with i < j by ITEMS order."""
    llm, hum = Counter(), Counter()
    llm_y, hum_y = Counter(), Counter()
    for judge, A, B, first, win in rows:
        if A == B or win not in ("a", "b"):
            continue
        ia, ib = ITEMS.index(A), ITEMS.index(B)
        i, j = min(ia, ib), max(ia, ib)
        shown_first = A if first == "a" else B
        winner = A if win == "a" else B
        a = 1 if shown_first == ITEMS[i] else -1
        iwins = int(winner == ITEMS[i])
        if judge == "human":
            hum[(ITEMS[i], ITEMS[j])] += 1
            hum_y[(ITEMS[i], ITEMS[j])] += iwins
        else:
            llm[(judge, ITEMS[i], ITEMS[j], a)] += 1
            llm_y[(judge, ITEMS[i], ITEMS[j], a)] += iwins
    return ({k: (n, llm_y[k]) for k, n in llm.items()}, {k: (n, hum_y[k]) for k, n in hum.items()})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(row_st, min_size=1, max_size=40), seed=st.integers(0, 2**31 - 1))
def test_aggregation_invariant_to_shuffle_and_swap(rows, seed):
    rng = np.random.default_rng(seed)
    ref_llm, ref_h = brute_force_cells(rows)
    df = frame([(t, *r) for t, r in enumerate(rows)])
    try:
        c = Comparisons.from_frame(df, items=ITEMS, drop_empty_judges=True)
    except DataError:
        assert False, "a valid table must be accepted"
    assert cells_dict(c) == ref_llm
    assert human_dict(c) == ref_h
    # per judge: sum of cell n equals the number of decisive rows
    for k, name in enumerate(c.judges):
        n_dec = sum(1 for r in rows if r[0] == name and r[1] != r[2] and r[4] in ("a", "b"))
        assert c.llm.n[c.llm.judge == k].sum() == n_dec
    assert c.n_human == sum(1 for r in rows if r[0] == "human" and r[1] != r[2] and r[4] in ("a", "b"))
    # exclusions counted
    n_self = sum(1 for r in rows if r[1] == r[2] and (r[0] == "human" or r[0] in c.judges))
    assert summary_value(c, "self-comparisons excluded") == n_self
    # shuffle rows and swap item_a/item_b (with first/winner swapped accordingly)
    sw = df.sample(frac=1.0, random_state=int(rng.integers(2**31))).reset_index(drop=True)
    flip = rng.random(len(sw)) < 0.5
    swap_ab = {"a": "b", "b": "a"}
    sw.loc[flip, ["item_a", "item_b"]] = sw.loc[flip, ["item_b", "item_a"]].to_numpy()
    sw.loc[flip, "first"] = sw.loc[flip, "first"].map(swap_ab)
    sw.loc[flip, "winner"] = sw.loc[flip, "winner"].map(lambda w: swap_ab.get(w, w))
    c2 = Comparisons.from_frame(sw, items=ITEMS, drop_empty_judges=True)
    assert cells_dict(c2) == ref_llm
    assert human_dict(c2) == ref_h
    assert c2.summary().loc[["LLM ties", "human ties", "LLM both bad", "self-comparisons excluded"]].equals(
        c.summary().loc[["LLM ties", "human ties", "LLM both bad", "self-comparisons excluded"]]
    )
