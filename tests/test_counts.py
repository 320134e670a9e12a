"""Aggregated counts (Comparisons.from_counts) follow the name rules of Comparisons.from_frame."""

from __future__ import annotations

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
