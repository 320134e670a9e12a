"""Arguments checked up front with typed errors, and result metadata that says what
was estimated (rank, calibration and lambda only where the method has them,
covariance settings in the summary, covariances as labelled tables)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import pydial
from pydial.exceptions import IdentifiabilityError


@pytest.fixture(scope="module")
def data() -> pydial.Comparisons:
    return pydial.simulate(N=6, K=3, r=1, n_llm=3000, n_human=300, rng=5).comparisons


# ------------------------------------------------------------------ cache of derived results
def test_replaced_copy_starts_with_its_own_empty_cache(data):
    pydial.fit(data, "human")
    assert any(key[0] == "check_design" for key in data._cache)
    h = data.human
    one_pair = (h.i == h.i[0]) & (h.j == h.j[0])
    copy = dataclasses.replace(data, human=dataclasses.replace(h, **{f: getattr(h, f)[one_pair] for f in "ijny"}))
    assert copy._cache == {} and copy._cache is not data._cache
    # the design check of the copy is made on the copy (one human pair: not connected) ...
    with pytest.raises(IdentifiabilityError):
        pydial.fit(copy, "human")
    assert any(key[0] == "check_design" for key in copy._cache)
    # ... and leaves the original's cached check alone
    assert pydial.fit(data, "human").ok
