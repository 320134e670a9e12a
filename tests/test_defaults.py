"""Defaults that cannot mislead: DIAL-Ada by default, a named warning when the calibration restriction is rejected."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import chi2

import pydial
from pydial.inference.calibration_test import calibration_lrt


def _fit(data, *args, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = pydial.fit(data, *args, **kw)
    return res, [w for w in caught if issubclass(w.category, pydial.CalibrationWarning)]


@pytest.fixture(scope="module")
def arena():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pydial.datasets.arena()


@pytest.fixture(scope="module")
def aligned():
    """People aligned to the judges' consensus (``s_H = mu``, the calibration restriction holds)."""
    return pydial.simulate(N=8, K=3, n_llm=6000, n_human=1500, target="consensus", seed=11).comparisons


def test_default_method_is_dial_ada(aligned):
    res, _ = _fit(aligned)
    assert res.method == "dial-ada" and res.spec.method == "dial-ada"
    assert pydial.ModelSpec().method == "dial-ada"
    assert pydial.fit(aligned, spec=res.spec).method == "dial-ada"  # spec= with the default method left alone


def test_help_describes_every_method():
    doc = pydial.fit.__doc__
    assert "see the module docstring" not in doc
    for method in ("judges", "human", "pooled", "dial-nopos", "dial-anc", "dial-ada", "atc"):
        assert f'* ``"{method}"``:' in doc, method
    assert "GACV" in doc and "calibration restriction" in doc


def test_rejected_calibration_warns_and_is_a_problem(arena):
    res, caught = _fit(arena, "dial-anc")
    ct = res.calibration_test
    assert ct.statistic == pytest.approx(80.2, abs=0.05) and ct.df == 18
    assert ct.p_value == pytest.approx(chi2.sf(ct.statistic, 18), rel=1e-12) and ct.p_value == pytest.approx(7.86e-10, rel=1e-2)
    assert len(caught) == 1 and "rejected" in str(caught[0].message)
    assert issubclass(pydial.CalibrationWarning, pydial.DialWarning) and "CalibrationWarning" in pydial.__all__
    assert res.status == "ok" and res.ok  # a resolved fit of a model the data contradict
    assert len(res.problems) == 1 and "calibration restriction" in res.problems[0] and "dial-ada" in res.problems[0]
    assert res.verdict().startswith("ok, but:")
    text = res.summary()
    assert "warning: the calibration restriction" in text and "T=80.21  df=18  p=7.9e-10" in text
    assert "method='dial-ada'" in text
    # the problem survives another covariance (with_cov re-derives the verdict)
    assert res.with_cov("binomial").problems == res.problems


@pytest.mark.parametrize("method", ["pooled", "atc"])
def test_two_stage_baselines_are_tested_too(arena, method):
    res, caught = _fit(arena, method)
    ct = res.calibration_test
    assert ct.defined and ct.df == arena.N - 2 and ct.p_value < 0.05
    assert len(caught) == 1 and res.problems and res.status == "ok"


def test_dial_ada_moves_off_the_anchored_endpoint_on_arena(arena):
    res, caught = _fit(arena, "dial-ada")
    assert np.isfinite(res.lambda_) and not caught and not res.problems


def test_no_warning_when_people_agree_with_the_consensus(aligned):
    for method in ("dial-anc", "pooled"):
        res, caught = _fit(aligned, method)
        assert res.calibration_test.p_value > 0.05, method
        assert not caught and not res.problems and res.verdict() == "ok"


def test_level_sets_the_test_level(arena):
    """At a level whose 1 - level is below the p-value the restriction is not rejected."""
    ct = calibration_lrt(1.0, 1.0 - 10.0 / 1000, 1000, 18)  # T = 20 on 18 df
    assert ct.p_value > 0.3
    res, caught = _fit(arena, "dial-anc", level=1 - 1e-12)
    assert not caught and not res.problems


def test_summary_pvalues_are_never_zero(arena):
    res, _ = _fit(arena, "judges")
    text = res.summary()
    pe = res.position_effects
    assert pe.loc["gpt-3.5-turbo", "p_value"] == 0.0  # z = 64: the normal tail underflows
    block = text[text.index("Position effects"):]
    assert "< 1e-300" in block.splitlines()[4] and "1.2e-93" in block and "6.7e-40" in block


def test_rao_kupper_threshold_is_tau():
    data = pydial.simulate(N=5, K=2, n_llm=2000, n_human=600, tie_rate=0.2, ties="rao-kupper", seed=2).comparisons
    res, _ = _fit(data, "dial-anc", ties="rao-kupper")
    tp = res.tie_parameters
    assert list(tp.columns) == ["tau", "se", "ci_low", "ci_high"] and (tp["tau"] > 0).all()
    assert "Tie parameters tau (Rao-Kupper threshold)" in res.summary()
    other = res.with_cov("binomial")  # the estimates come from the fit, not parsed back from the table
    np.testing.assert_allclose(other.tie_parameters["tau"], tp["tau"], rtol=0, atol=0)
    dav, _ = _fit(pydial.simulate(N=5, K=2, n_llm=2000, n_human=600, tie_rate=0.2, seed=2).comparisons, "human",
                  ties="davidson")
    assert list(dav.tie_parameters.columns)[0] == "nu"
