"""Covariances and intervals on demand: ``res.cov_params`` and ``res.conf_int(level=)``.

Reference: a refit at the other level (its tables are computed by the estimators
themselves) and ``res.contrast`` for single contrasts.
"""

from __future__ import annotations

import numpy as np
import pytest

import pydial


@pytest.fixture(scope="module")
def data():
    return pydial.simulate(N=5, K=3, r=1, n_llm=4000, n_human=600, rng=4).comparisons


@pytest.mark.parametrize("method", ["human", "judges", "pooled", "dial-anc", "dial-ada"])
def test_conf_int_at_another_level_equals_a_refit(data, method):
    res = pydial.fit(data, method)
    ref = pydial.fit(data, method, level=0.8)
    ci = res.conf_int(0.8)
    np.testing.assert_allclose(ci[["estimate", "se", "ci_low", "ci_high"]].to_numpy(),
                               ref.scores[["score", "se", "ci_low", "ci_high"]].to_numpy(), rtol=1e-12, atol=1e-12)
    assert res.cov_params().equals(res.cov)
    if res.position_effects is not None:
        b = res.conf_int(0.8, what="b")
        np.testing.assert_allclose(b[["estimate", "se", "ci_low", "ci_high"]].to_numpy(),
                                   ref.position_effects[["b", "se", "ci_low", "ci_high"]].to_numpy(), rtol=1e-12,
                                   atol=1e-12)
        assert res.cov_params("b").equals(res.position_effects_cov)


def test_contrasts_equal_contrast(data):
    res = pydial.fit(data, "dial-anc")
    tab = res.conf_int(0.9, what="contrasts")
    assert len(tab) == data.N * (data.N - 1) // 2
    one = res.contrast(data.items[1], data.items[3], level=0.9)
    row = tab.loc[f"{data.items[1]} - {data.items[3]}"]
    np.testing.assert_allclose(row[["estimate", "se", "ci_low", "ci_high"]].to_numpy(float),
                               one[["estimate", "se", "ci_low", "ci_high"]].to_numpy(float), rtol=1e-12)


def test_bad_requests(data):
    res = pydial.fit(data, "human")
    with pytest.raises(ValueError, match="no position effects"):
        res.cov_params("b")
    with pytest.raises(ValueError, match="what must be"):
        res.conf_int(what="gamma")
    with pytest.raises(ValueError, match="open interval"):
        res.conf_int(1.5)
