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
    return pydial.simulate(N=5, K=3, rank=1, n_llm=4000, n_human=600, seed=4).comparisons


@pytest.mark.parametrize("method", ["human", "judges", "pooled", "dial-anc", "dial-ada"])
def test_conf_int_at_another_level_equals_a_refit(data, method):
    res = pydial.fit(data, method)
    ref = pydial.fit(data, method, level=0.8)
    ci = res.conf_int(0.8)
    np.testing.assert_allclose(ci[["estimate", "se", "ci_low", "ci_high"]].to_numpy(),
                               ref.scores[["score", "se", "ci_low", "ci_high"]].to_numpy(), rtol=1e-12, atol=1e-12)
    if res.position_effects is not None:
        b = res.conf_int(0.8, what="b")
        np.testing.assert_allclose(b[["estimate", "se", "ci_low", "ci_high"]].to_numpy(),
                                   ref.position_effects[["b", "se", "ci_low", "ci_high"]].to_numpy(), rtol=1e-12,
                                   atol=1e-12)


def test_contrasts_equal_contrast(data):
    res = pydial.fit(data, "dial-anc")
    tab = res.conf_int(0.9, what="contrasts")
    assert len(tab) == data.N * (data.N - 1) // 2
    # reference: s_i - s_j and sqrt(C_ii + C_jj - 2 C_ij) with the normal quantile, written out here
    from scipy.stats import norm

    a, b = data.items[1], data.items[3]
    C, s = res.cov, res.scores["score"]
    est, se = s[a] - s[b], np.sqrt(C.loc[a, a] + C.loc[b, b] - 2 * C.loc[a, b])
    z = norm.ppf(0.95)
    ref = np.array([est, se, est - z * se, est + z * se])
    np.testing.assert_allclose(tab.loc[f"{a} - {b}", ["estimate", "se", "ci_low", "ci_high"]].to_numpy(float), ref,
                               rtol=1e-12)
    np.testing.assert_allclose(res.contrast(a, b, level=0.9)[["estimate", "se", "ci_low", "ci_high"]].to_numpy(float),
                               ref, rtol=1e-12)


def test_bad_requests(data):
    res = pydial.fit(data, "human")
    with pytest.raises(ValueError, match="no position effects"):
        res.cov_params(what="b")
    with pytest.raises(ValueError, match="what must be"):
        res.conf_int(what="gamma")
    with pytest.raises(ValueError, match="open interval"):
        res.conf_int(1.5)
