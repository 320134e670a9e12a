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


@pytest.mark.parametrize("span", [50_000, 70_000_000, 10**12], ids=["table", "bitmap", "hash"])
def test_group_is_numpy_unique_in_every_regime(span):
    """The distinct keys and inverse of ingest.group equal np.unique's whichever way the keys are
    ranked (a rank table of the range, a bitmap of it, or hashing)."""
    from pydial.data.ingest import group

    rng = np.random.default_rng(3)
    key = np.concatenate([rng.integers(0, span, 1_200_000), [span - 1, 0, 0]])
    uniq, inv = group(key)
    ref, ref_inv = np.unique(key, return_inverse=True)
    np.testing.assert_array_equal(uniq, ref)
    np.testing.assert_array_equal(inv, ref_inv.ravel())
