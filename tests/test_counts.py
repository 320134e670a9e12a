"""Aggregated counts (Comparisons.from_counts) follow the name rules of Comparisons.from_frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pydial import Comparisons
from pydial.exceptions import DataError


def test_counts_refuse_names_differing_only_by_case():
    """The count readers follow from_frame's name rules: 'GPT-4' and 'gpt-4' are refused (both named),
    unless allow_similar_names=True."""
    df = pd.DataFrame({"judge": ["j1", "j1", "human"], "item_a": ["GPT-4", "gpt-4", "a"],
                       "item_b": ["a", "a", "GPT-4"], "first": ["a", "b", ""], "wins_a": [3, 2, 1],
                       "wins_b": [1, 1, 1], "ties": [0, 0, 0]})
    with pytest.raises(DataError, match="'GPT-4', 'gpt-4'"):
        Comparisons.from_counts(df)
    assert Comparisons.from_counts(df, allow_similar_names=True).N == 3


@pytest.mark.parametrize("span, ordered", [(50_000, False), (70_000_000, False), (10**12, False), (10**12, True)],
                         ids=["table", "bitmap", "hash", "sorted"])
def test_group_is_numpy_unique_in_every_regime(span, ordered):
    """The distinct keys and inverse of ingest.group equal np.unique's whichever way the keys are
    ranked (a rank table of the range, a bitmap of it, hashing, or runs of sorted keys)."""
    from pydial.data.ingest import group

    rng = np.random.default_rng(3)
    key = np.concatenate([rng.integers(0, span, 1_200_000), [span - 1, 0, 0]])
    key = np.sort(key) if ordered else key
    uniq, inv = group(key)
    ref, ref_inv = np.unique(key, return_inverse=True)
    np.testing.assert_array_equal(uniq, ref)
    np.testing.assert_array_equal(inv, ref_inv.ravel())


@pytest.mark.parametrize("n", [2, 7, 3000])
def test_pair_index_orders_the_pairs_by_i_then_j(n):
    """ingest.pair_index numbers the pairs i <= j of n items 0, 1, ... in lexicographic order of (i, j), and
    pair_items inverts it."""
    from pydial.data.ingest import pair_index, pair_items

    i, j = np.triu_indices(n)  # row-major: lexicographic in (i, j)
    idx = pair_index(i.astype(np.int64), j.astype(np.int64), n)
    np.testing.assert_array_equal(idx, np.arange(i.size))
    back_i, back_j = pair_items(idx, n)
    np.testing.assert_array_equal(back_i, i)
    np.testing.assert_array_equal(back_j, j)


def test_count_rows_are_ordered_as_the_cells():
    """from_counts orders its rows by (judge by name with the human judge last, i, j, a), the order of the cells,
    whatever the order of the table and of the names; the cells equal those of the judgments one row each."""
    rng = np.random.default_rng(5)
    names = ["zeta", "alpha", "mid", "beta"]
    rows = [(str(rng.choice(["z-judge", "a-judge", "human", "m-judge"])), *rng.choice(names, 2, replace=False),
             str(rng.choice(["a", "b"]))) for _ in range(300)]
    df = pd.DataFrame(rows, columns=["judge", "item_a", "item_b", "first"])
    df.loc[df.judge == "human", "first"] = ""
    df["wins_a"], df["wins_b"], df["ties"] = rng.integers(0, 3, (3, len(df)))
    data = Comparisons.from_counts(df)
    f = data.frame
    k = f["judge"].map({name: n for n, name in enumerate([*data.judges, data.human_judge])}).to_numpy()
    order = np.lexsort((f["a"].to_numpy(), f["j"].to_numpy(), f["i"].to_numpy(), k))
    np.testing.assert_array_equal(order, np.arange(len(f)))
    long = df.loc[df.index.repeat(df.wins_a)].assign(winner="a")
    long = pd.concat([long, df.loc[df.index.repeat(df.wins_b)].assign(winner="b"),
                      df.loc[df.index.repeat(df.ties)].assign(winner="tie")])
    long = long.assign(record_id=np.arange(len(long)).astype(str))
    ref = Comparisons.from_frame(long[["record_id", "judge", "item_a", "item_b", "first", "winner"]])
    for a, b in ((data.llm, ref.llm), (data.human, ref.human)):
        for field in ("i", "j", "n", "y"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
